//! The SQL front-end fuzzer's inputs: valid tsjoin queries ([`SEEDS`],
//! over the tables of [`SETUP`]) mutated token by token, token soups,
//! huge literals, deep nesting and odd Unicode. The property checked on each
//! (by the integration test `fuzz` and `tsjoin-bench fuzz`): the query
//! returns Ok or an error, never panics, hangs or overflows the stack.
//!
//! To fuzz a new operator, add a few valid queries using it to [`SEEDS`]
//! (and its keywords to [`KEYWORDS`]): mutations of them reach its parser,
//! planner and operator.

use super::Rng;

/// Tables the seeds read: `t` (trades) and `p` (prices), a few rows each,
/// with a designated timestamp, NULLs and duplicate timestamps.
pub const SETUP: &str = "\
CREATE TABLE t (ts TIMESTAMP, sym VARCHAR, price DOUBLE, qty BIGINT, lb BIGINT) AS VALUES \
 ('2024-01-01T00:01:00', 'A', 10.0, 5, 1), ('2024-01-01T00:01:00', 'B', 20.0, NULL, 2), \
 ('2024-01-01T00:02:30', 'A', NULL, 7, NULL), (NULL, 'C', 1.5, 1, 0), \
 ('2024-01-01T00:03:00', NULL, 3.0, 2, 3);
CREATE TABLE p (ts TIMESTAMP, sym VARCHAR, v BIGINT, bid DOUBLE) AS VALUES \
 ('2024-01-01T00:00:00', 'A', 1, 9.5), ('2024-01-01T00:00:30', 'B', 2, 'NaN'), \
 ('2024-01-01T00:01:00', 'A', 3, 10.25), ('2024-01-01T00:01:00', 'A', NULL, NULL), \
 ('2024-01-01T00:02:00', 'B', 5, -1.0);
CREATE TABLE e (ts TIMESTAMP, sym VARCHAR, v BIGINT) WITH (designated_timestamp = 'ts');
CREATE TABLE one (ts TIMESTAMP, sym VARCHAR, v BIGINT) AS VALUES ('2024-01-01T00:01:00', 'A', 4);
";

/// Valid queries over [`SETUP`]'s tables: WINDOW JOIN in its forms, the
/// inline GROUP BY, QuestDB dialect, LIMIT/OFFSET (OffsetTopK).
pub const SEEDS: &[&str] = &[
    "SELECT t.ts, count(*), sum(p.v) FROM t WINDOW JOIN p ON p.sym = t.sym RANGE BETWEEN 1 minute PRECEDING AND 1 minute FOLLOWING ORDER BY t.ts",
    "SELECT t.ts, avg(p.bid), first(p.bid), last(p.bid) FROM t WINDOW JOIN p ON (sym) RANGE BETWEEN 2 minutes PRECEDING AND CURRENT ROW INCLUDE PREVAILING",
    "SELECT t.ts, min(p.v), max(p.v) FROM t WINDOW JOIN p ON p.sym = t.sym AND p.v > t.qty RANGE BETWEEN t.lb minutes PRECEDING AND CURRENT ROW EXCLUDE PREVAILING",
    "SELECT t.ts, count(*) FROM t WINDOW JOIN p RANGE BETWEEN 30 seconds FOLLOWING AND 2 minutes FOLLOWING",
    "SELECT t.ts, count(*) FROM t WINDOW JOIN e ON e.sym = t.sym RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING",
    "SELECT t.ts, sum(o.v) FROM t WINDOW JOIN one o ON o.sym = t.sym RANGE BETWEEN 1 hour PRECEDING AND 1 hour FOLLOWING",
    "SELECT x.sym, sum(x.n) FROM (SELECT t.sym, count(*) AS n FROM t WINDOW JOIN p ON p.sym = t.sym RANGE BETWEEN 60_000_000_000 PRECEDING AND 0 FOLLOWING) x GROUP BY x.sym",
    "SELECT sym, count(*), sum(v), min(bid), max(bid), avg(v) FROM p GROUP BY sym ORDER BY sym",
    "SELECT ts, sym, count(*), sum(bid) FROM p GROUP BY ts, sym",
    "SELECT ts, count(*), sum(price) FROM t GROUP BY ts",
    "SELECT * FROM (SELECT * FROM p LIMIT 2 OFFSET 1) ORDER BY ts",
    "SELECT * FROM (p LIMIT 1, 3) ORDER BY ts DESC",
    "SELECT CAST(v AS LONG), bid::DOUBLE, 1.5f FROM p WHERE v IS NOT NULL",
    "CREATE TABLE q (sym SYMBOL CAPACITY 256 CACHE INDEX, qty LONG, ts TIMESTAMP) TIMESTAMP(ts) PARTITION BY DAY WAL DEDUP UPSERT KEYS(ts, sym)",
    "ALTER TABLE one ADD COLUMN a INT, b DOUBLE",
    "EXPLAIN SELECT t.ts, count(*) FROM t WINDOW JOIN p ON p.sym = t.sym RANGE BETWEEN 1 minute PRECEDING AND 1 minute FOLLOWING",
    "SELECT t.ts, count(*) FROM t WINDOW JOIN p ON p.sym = t.sym RANGE BETWEEN 9223372036854775807 microseconds PRECEDING AND 9223372036854775807 microseconds FOLLOWING",
    "SELECT t.ts, count(*) FROM (t WHERE price > 1) t WINDOW JOIN p ON p.sym = t.sym RANGE BETWEEN 1 minute PRECEDING AND 1 minute FOLLOWING",
    "SELECT t.ts, p.bid FROM t ASOF JOIN p ON (sym) TOLERANCE 5s",
    "SELECT t.ts, p.bid FROM t LT JOIN p ON t.sym = p.sym",
    "SELECT * FROM t ASOF JOIN p MATCH_CONDITION(t.ts >= p.ts) ON t.sym = p.sym",
    "SELECT h.offset, avg(p.bid - t.price) FROM t HORIZON JOIN p ON (sym) RANGE FROM 0s TO 1m STEP 10s AS h ORDER BY h.offset",
    "SELECT h.offset, count(*) FROM t HORIZON JOIN p ON (sym) LIST (-1s, 0, 5s) AS h",
    "SELECT sym, approx_percentile(qty, 0.9, 3), approx_median(price) FROM t GROUP BY sym",
    "SELECT approx_percentile(qty, ARRAY[0.5, 0.99], 2), approx_median(abs(bid), 0) FROM p",
    "SELECT ts, approx_percentile(qty, 0.5) OVER (PARTITION BY sym ORDER BY ts) FROM t",
    "SELECT t.ts, approx_percentile(p.v, 0.75) FROM t WINDOW JOIN p ON (sym) RANGE BETWEEN 1 minute PRECEDING AND CURRENT ROW",
];

/// Words the mutations insert.
pub const KEYWORDS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP",
    "BY",
    "ORDER",
    "LIMIT",
    "OFFSET",
    "WINDOW",
    "JOIN",
    "ASOF",
    "LT",
    "HORIZON",
    "TOLERANCE",
    "MATCH_CONDITION",
    "LIST",
    "STEP",
    "TO",
    "ON",
    "RANGE",
    "BETWEEN",
    "AND",
    "OR",
    "NOT",
    "PRECEDING",
    "FOLLOWING",
    "CURRENT",
    "ROW",
    "INCLUDE",
    "EXCLUDE",
    "PREVAILING",
    "UNBOUNDED",
    "minute",
    "second",
    "microseconds",
    "nanoseconds",
    "day",
    "TIMESTAMP",
    "SAMPLE",
    "LATEST",
    "SYMBOL",
    "CAST",
    "AS",
    "NULL",
    "count",
    "sum",
    "avg",
    "first",
    "last",
    "min",
    "max",
    "approx_percentile",
    "approx_median",
    "ARRAY[",
    "]",
    "(",
    ")",
    ",",
    ";",
    "*",
    "+",
    "-",
    "/",
    "%",
    "=",
    "<",
    ">",
    "<=",
    "::",
    ".",
    "'",
    "\"",
    "t",
    "p",
    "e",
    "one",
    "t.ts",
    "p.ts",
    "p.v",
    "t.sym",
    "p.sym",
    "CREATE",
    "TABLE",
    "ALTER",
    "DROP",
    "COPY",
    "INSERT",
    "INTO",
    "VALUES",
    "SET",
    "EXPLAIN",
    "ANALYZE",
    "WITH",
    "UNION",
    "CASE",
    "WHEN",
    "THEN",
    "END",
    "OVER",
    "PARTITION",
    "INTERVAL",
    "IS",
    "IN",
    "EXISTS",
];

/// Literals and identifiers at the edges: huge and tiny numbers, odd
/// Unicode, empty and unterminated strings.
pub const ODD: &[&str] = &[
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "1e308",
    "1e-400",
    "-0.0",
    "0x7fffffffffffffff",
    "1_000_000_000_000_000_000",
    "'NaN'",
    "'inf'",
    "''",
    "'",
    "\"",
    "\"\"",
    "'é͂̕'",
    "\"日本語\"",
    "ß",
    "\u{202e}abc",
    "\u{0}",
    "\u{feff}",
    "😀",
    "'\u{1F4A9}'",
    "[",
    "]",
    "{",
    "$1",
    "?",
    "@x",
    "--",
    "/*",
    "*/",
    "\\",
    "E'\\x00'",
    "X'ff'",
    "'2024-13-45T25:61:61'",
    "TIMESTAMP '9999-12-31T23:59:59'",
    "INTERVAL '1000000000 years'",
];

/// One fuzz input from `rng`: mostly mutated seeds, then token soups,
/// deep nesting and long lists.
///
/// ```
/// use datafusion_tsjoin::testing::{Rng, fuzz};
/// let mut rng = Rng::new(1);
/// let inputs: Vec<String> = (0..100).map(|_| fuzz::input(&mut rng)).collect();
/// assert!(inputs.iter().any(|s| s.contains("WINDOW JOIN")));
/// ```
pub fn input(rng: &mut Rng) -> String {
    input_up_to(rng, 1000)
}

/// One fuzz input as [`input`], with nesting and lists up to `largest`
/// (10,000 in `tsjoin-bench fuzz`; DataFusion plans such expressions in
/// seconds in release builds, in minutes in debug ones).
pub fn input_up_to(rng: &mut Rng, largest: usize) -> String {
    match rng.below(20) {
        0..=11 => {
            let seed = rng_seed(rng);
            mutate(rng, seed)
        }
        12 | 13 => soup(rng),
        14 | 15 => nested(rng, largest),
        16 => long_list(rng, largest),
        17 => unicode(rng),
        // Valid seeds as they are: the mutations' baseline must hold.
        _ => rng_seed(rng).to_string(),
    }
}

fn rng_seed(rng: &mut Rng) -> &'static str {
    rng.pick::<&str>(SEEDS)
}

/// Splits SQL into rough tokens (words, numbers, quoted strings, symbols).
fn tokens(sql: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for c in sql.chars() {
        if let Some(q) = quote {
            cur.push(c);
            if c == q {
                out.push(std::mem::take(&mut cur));
                quote = None;
            }
            continue;
        }
        if c == '\'' || c == '"' {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            cur.push(c);
            quote = Some(c);
        } else if c.is_alphanumeric() || c == '_' || c == '.' {
            cur.push(c);
        } else {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// 1–4 token-level mutations of `seed`: delete, duplicate, swap, replace
/// with a keyword or an odd literal, change a number.
fn mutate(rng: &mut Rng, seed: &str) -> String {
    let mut toks = tokens(seed);
    for _ in 0..rng.range(1, 5) {
        if toks.is_empty() {
            break;
        }
        let i = rng.below(toks.len() as u64) as usize;
        match rng.below(7) {
            0 => {
                toks.remove(i);
            }
            1 => {
                let t = toks[i].clone();
                toks.insert(i, t);
            }
            2 => {
                let j = rng.below(toks.len() as u64) as usize;
                toks.swap(i, j);
            }
            3 => toks[i] = (*rng.pick(KEYWORDS)).to_string(),
            4 => toks.insert(i, (*rng.pick(ODD)).to_string()),
            5 => {
                if let Some(j) = toks.iter().position(|t| t.parse::<i64>().is_ok()) {
                    toks[j] = (*rng.pick(ODD)).to_string();
                } else {
                    toks[i] = (*rng.pick(ODD)).to_string();
                }
            }
            _ => {
                // Splice in a piece of another seed.
                let other = tokens(rng.pick::<&str>(SEEDS));
                let a = rng.below(other.len() as u64) as usize;
                let b = (a + rng.range(1, 8) as usize).min(other.len());
                for (k, t) in other[a..b].iter().enumerate() {
                    toks.insert(i + k, t.clone());
                }
            }
        }
    }
    toks.join(" ")
}

/// Random keywords, odd literals and punctuation.
fn soup(rng: &mut Rng) -> String {
    let n = rng.range(1, 40);
    (0..n)
        .map(|_| {
            if rng.chance(0.8) {
                (*rng.pick(KEYWORDS)).to_string()
            } else {
                (*rng.pick(ODD)).to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Deep nesting: parentheses, sub-queries, unary minus, CASE, function
/// calls, up to a few thousand levels.
fn nested(rng: &mut Rng, largest: usize) -> String {
    let depth = (*rng.pick(&[10usize, 60, 200, 1000, 5000])).min(largest);
    let (open, close) = match rng.below(5) {
        0 => ("(".to_string(), ")".to_string()),
        1 => ("(SELECT ".to_string(), ")".to_string()),
        2 => ("-".to_string(), String::new()),
        3 => ("abs(".to_string(), ")".to_string()),
        _ => ("CASE WHEN true THEN ".to_string(), " END".to_string()),
    };
    let inner = format!("{}1{}", open.repeat(depth), close.repeat(depth));
    match rng.below(3) {
        0 => format!("SELECT {inner}"),
        1 => format!(
            "SELECT t.ts, count(*) FROM t WINDOW JOIN p ON p.sym = t.sym \
             RANGE BETWEEN {inner} minutes PRECEDING AND CURRENT ROW"
        ),
        _ => format!("SELECT sym, sum({inner}) FROM p GROUP BY sym"),
    }
}

/// Long flat lists: `1 + 1 + …`, `a AND b AND …`, many columns, many
/// `IN` items, many statements.
fn long_list(rng: &mut Rng, largest: usize) -> String {
    let n = (*rng.pick(&[100usize, 1000, 10_000])).min(largest);
    match rng.below(5) {
        0 => format!("SELECT {}", vec!["1"; n].join(" + ")),
        1 => format!(
            "SELECT count(*) FROM p WHERE {}",
            vec!["v > 0"; n].join(" AND ")
        ),
        2 => format!("SELECT {} FROM p", vec!["v"; n].join(", ")),
        3 => format!(
            "SELECT count(*) FROM p WHERE v IN ({})",
            (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
        ),
        _ => vec!["SELECT 1"; n.min(1000)].join("; "),
    }
}

/// A seed with Unicode in identifiers and strings.
fn unicode(rng: &mut Rng) -> String {
    let seed = rng_seed(rng);
    let odd = *rng.pick(&["é", "日本", "\u{202e}", "\u{0}", "😀", "\u{feff}", "ǅ", "İ"]);
    let mut out = String::new();
    for c in seed.chars() {
        out.push(c);
        if c == ' ' && rng.chance(0.1) {
            out.push_str(odd);
        }
    }
    out
}

/// What one fuzz input did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It ran.
    Ok,
    /// A user-facing error (its message).
    Error(String),
    /// An error DataFusion calls internal (a bug, but no crash).
    Internal(String),
    /// It panicked (the message).
    Panic(String),
    /// It did not finish within the time limit.
    Hang,
}

impl Outcome {
    /// Whether the property holds: Ok or an error, no panic, no hang.
    pub fn holds(&self) -> bool {
        matches!(self, Outcome::Ok | Outcome::Error(_) | Outcome::Internal(_))
    }
}

/// Runs `sql` after [`SETUP`] in a fresh tsjoin session with `partitions`
/// target partitions, on its own thread with a `stack`-byte stack (a stack
/// overflow aborts the process: run in a child process to survive one) and
/// a current-thread runtime, waiting at most `limit`. A thread that hangs
/// is left behind.
///
/// ```
/// use datafusion_tsjoin::testing::fuzz::{Outcome, check};
/// use std::time::Duration;
/// let limit = Duration::from_secs(60);
/// assert_eq!(check("SELECT count(*) FROM p", 2, 8 << 20, limit), Outcome::Ok);
/// assert!(matches!(check("SELEC 1", 2, 8 << 20, limit), Outcome::Error(_)));
/// ```
pub fn check(
    sql: &str,
    partitions: usize,
    stack: usize,
    limit: std::time::Duration,
) -> Outcome {
    use crate::TsJoinContextExt;
    use datafusion::common::DataFusionError;
    use futures::FutureExt;
    let sql = sql.to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("tsjoin-fuzz".into())
        .stack_size(stack)
        .spawn(move || {
            let run = async move {
                let config = datafusion::prelude::SessionConfig::new()
                    .with_target_partitions(partitions);
                let ctx = crate::tsjoin_context(config);
                ctx.tsjoin_sql(SETUP).await?.collect().await?;
                ctx.tsjoin_sql(&sql).await?.collect().await?;
                Ok::<_, DataFusionError>(())
            };
            let outcome = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => {
                    match rt.block_on(std::panic::AssertUnwindSafe(run).catch_unwind()) {
                        Ok(Ok(())) => Outcome::Ok,
                        Ok(Err(e)) => {
                            let text = e.to_string();
                            if matches!(e.find_root(), DataFusionError::Internal(_)) {
                                Outcome::Internal(text)
                            } else {
                                Outcome::Error(text)
                            }
                        }
                        Err(panic) => {
                            Outcome::Panic(crate::files::panic_text(panic.as_ref()))
                        }
                    }
                }
                Err(e) => Outcome::Error(format!("runtime: {e}")),
            };
            let _ = tx.send(outcome);
        });
    if let Err(e) = spawned {
        return Outcome::Error(format!("thread: {e}"));
    }
    match rx.recv_timeout(limit) {
        Ok(outcome) => outcome,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Outcome::Hang,
        // The thread ended without a word: it panicked outside the catch.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            Outcome::Panic("thread ended without a result".into())
        }
    }
}
