//! `tsjoin-bench window-join`: the reference queries on every engine
//! configuration, side by side on the same Parquet files, in one run.
//!
//! In-process: tsjoin (fast path parallel, fast single-thread, scalar
//! kernels, general path), DataFusion's best plain-SQL rewrites (window over
//! UNION ALL, bucketed equi-join) and a scan of the same columns. Out of
//! process, when their Python packages are installed: DuckDB, ClickHouse
//! (chdb) and Polars (`benches/peers/window_join.py`). Every engine's top-10
//! answer is checked against tsjoin's.

use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::error::Result;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use datafusion_tsjoin::window_join::WindowJoinExec;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The four reference queries in tsjoin SQL: (name, description, sql).
pub const QUERIES: [(&str, &str, &str); 4] = [
    (
        "q1",
        "top 10 by avg_bid+avg_ask, avg/min/max of bid and ask, ±1 s, EXCLUDE PREVAILING",
        "SELECT t.id, t.sym, avg(p.bid) AS avg_bid, avg(p.ask) AS avg_ask, min(p.bid) AS min_bid, \
         max(p.bid) AS max_bid, min(p.ask) AS min_ask, max(p.ask) AS max_ask \
         FROM trades t WINDOW JOIN prices p ON p.sym = t.sym \
         RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING EXCLUDE PREVAILING \
         ORDER BY avg_bid + avg_ask DESC NULLS LAST, t.id LIMIT 10",
    ),
    (
        "q2",
        "q1 with INCLUDE PREVAILING",
        "SELECT t.id, t.sym, avg(p.bid) AS avg_bid, avg(p.ask) AS avg_ask, min(p.bid) AS min_bid, \
         max(p.bid) AS max_bid, min(p.ask) AS min_ask, max(p.ask) AS max_ask \
         FROM trades t WINDOW JOIN prices p ON p.sym = t.sym \
         RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING INCLUDE PREVAILING \
         ORDER BY avg_bid + avg_ask DESC NULLS LAST, t.id LIMIT 10",
    ),
    (
        "q3",
        "one-sided: count of prices in the next 5 minutes, top 10",
        "SELECT t.id, t.sym, count(*) AS n FROM trades t WINDOW JOIN prices p ON p.sym = t.sym \
         RANGE BETWEEN CURRENT ROW AND 5 minutes FOLLOWING EXCLUDE PREVAILING \
         ORDER BY n DESC, t.id LIMIT 10",
    ),
    (
        "q4",
        "unkeyed: avg bid and count over all symbols, ±100 ms, top 10",
        "SELECT t.id, t.sym, avg(p.bid) AS avg_bid, count(*) AS n FROM trades t WINDOW JOIN prices p \
         RANGE BETWEEN 100 milliseconds PRECEDING AND 100 milliseconds FOLLOWING EXCLUDE PREVAILING \
         ORDER BY avg_bid DESC NULLS LAST, t.id LIMIT 10",
    ),
];

/// DataFusion's plain-SQL rewrite of q1 as a window function over UNION ALL.
pub const DF_WINDOW_Q1: &str = "WITH u AS ( \
      SELECT id, ts, sym, CAST(NULL AS DOUBLE) AS bid, CAST(NULL AS DOUBLE) AS ask FROM trades \
      UNION ALL SELECT CAST(NULL AS BIGINT), ts, sym, bid, ask FROM prices), \
    w AS (SELECT id, sym, avg(bid) OVER win AS avg_bid, avg(ask) OVER win AS avg_ask, \
      min(bid) OVER win AS min_bid, max(bid) OVER win AS max_bid, min(ask) OVER win AS min_ask, max(ask) OVER win AS max_ask \
      FROM u WINDOW win AS (PARTITION BY sym ORDER BY ts \
        RANGE BETWEEN INTERVAL '1 second' PRECEDING AND INTERVAL '1 second' FOLLOWING)) \
    SELECT * FROM w WHERE id IS NOT NULL ORDER BY avg_bid + avg_ask DESC NULLS LAST, id LIMIT 10";

/// DataFusion's plain-SQL rewrite of q1 as a bucketed equi-join: each trade
/// copied into its 1-second bucket and both neighbours, hash-joined on
/// (sym, bucket), the window as a residual filter, then GROUP BY.
pub const DF_BUCKETED_Q1: &str = "WITH tb AS ( \
      SELECT t.id, t.ts, t.sym, CAST(t.ts AS BIGINT) / 1000000 + d.d AS b \
      FROM trades t CROSS JOIN (VALUES (-1), (0), (1)) AS d(d)), \
    pb AS (SELECT ts, sym, bid, ask, CAST(ts AS BIGINT) / 1000000 AS b FROM prices) \
    SELECT tb.id, tb.sym, avg(pb.bid) AS avg_bid, avg(pb.ask) AS avg_ask, min(pb.bid) AS min_bid, \
      max(pb.bid) AS max_bid, min(pb.ask) AS min_ask, max(pb.ask) AS max_ask \
    FROM tb JOIN pb ON tb.sym = pb.sym AND tb.b = pb.b \
      AND pb.ts BETWEEN tb.ts - INTERVAL '1 second' AND tb.ts + INTERVAL '1 second' \
    GROUP BY tb.id, tb.sym ORDER BY avg_bid + avg_ask DESC NULLS LAST, tb.id LIMIT 10";

/// Reads and decodes the columns the queries use, with a trivial reduction
/// (so no answer can come from Parquet statistics): the floor under q1.
pub const SCAN: [&str; 2] = [
    "SELECT max(id), count(CASE WHEN sym <> '' THEN 1 END), max(ts) FROM trades",
    "SELECT sum(bid), sum(ask), count(CASE WHEN sym <> '' THEN 1 END), max(ts) FROM prices",
];

/// One engine configuration's timings for one query.
#[derive(Debug, Clone)]
pub struct Measurement {
    pub engine: String,
    pub query: String,
    pub times: Vec<f64>,
    /// Top-10 answer, normalised (`None` for the scan).
    pub answer: Option<Vec<String>>,
    /// Extra figures (join phase, build phase) as JSON.
    pub extra: Value,
}

impl Measurement {
    /// Best of the runs, seconds.
    pub fn best(&self) -> f64 {
        self.times.iter().copied().fold(f64::INFINITY, f64::min)
    }
}

/// Answer rows as text: `id|sym|values…`, floats to 6 decimals.
pub fn normalise(batches: &[RecordBatch]) -> Vec<String> {
    let opts = FormatOptions::default();
    let mut out = vec![];
    for b in batches {
        let fmts: Vec<_> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts).unwrap())
            .collect();
        for r in 0..b.num_rows() {
            let cells: Vec<String> = b
                .columns()
                .iter()
                .zip(&fmts)
                .map(|(c, f)| {
                    if c.is_null(r) {
                        return "NULL".to_string();
                    }
                    let s = f.value(r).to_string();
                    match (c.data_type().is_floating(), s.parse::<f64>()) {
                        (true, Ok(v)) => format!("{v:.6}"),
                        _ => s,
                    }
                })
                .collect();
            out.push(cells.join("|"));
        }
    }
    out
}

/// A session over the benchmark tables: tsjoin's or plain DataFusion's.
pub async fn session(
    data: &Path,
    threads: usize,
    tsjoin: bool,
    settings: &[(&str, &str)],
) -> Result<SessionContext> {
    let config = SessionConfig::new().with_target_partitions(threads);
    let ctx = if tsjoin {
        datafusion_tsjoin::tsjoin_context(config)
    } else {
        SessionContext::new_with_config(config)
    };
    for (name, value) in settings {
        ctx.tsjoin_sql(&format!("SET {name} = {value}")).await?;
    }
    for table in ["trades", "prices"] {
        let dir = data.join(table);
        ctx.register_parquet(
            table,
            dir.to_str().expect("utf-8 path"),
            ParquetReadOptions::default(),
        )
        .await?;
    }
    Ok(ctx)
}

fn find_window_join(plan: &Arc<dyn ExecutionPlan>) -> Option<&WindowJoinExec> {
    if let Some(w) = plan.downcast_ref::<WindowJoinExec>() {
        return Some(w);
    }
    plan.children().into_iter().find_map(find_window_join)
}

/// Runs `sql` `runs` times; for tsjoin plans also records the WINDOW JOIN's
/// build and join (probe + aggregate, summed over tasks) times of the best run.
pub async fn measure(
    ctx: &SessionContext,
    engine: &str,
    query: &str,
    sqls: &[&str],
    runs: usize,
) -> Result<Measurement> {
    let mut times = vec![];
    let mut answer = None;
    let mut extra = json!({});
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let start = Instant::now();
        let mut batches = vec![];
        let mut run_extra = json!({});
        for sql in sqls {
            let plan = ctx.tsjoin_sql(sql).await?.create_physical_plan().await?;
            batches.extend(collect(Arc::clone(&plan), ctx.task_ctx()).await?);
            if let Some(w) = find_window_join(&plan)
                && let Some(m) = w.metrics()
            {
                let secs =
                    |name: &str| m.sum_by_name(name).map(|v| v.as_usize() as f64 / 1e9);
                run_extra = json!({
                    "join_compute_s": m.elapsed_compute().map(|ns| ns as f64 / 1e9),
                    "build_s": secs("build_time"),
                    "left_rows": m.output_rows(),
                    "path": if w.is_fast() { "fast" } else { "general" },
                });
            }
        }
        let elapsed = start.elapsed();
        times.push(elapsed.as_secs_f64());
        if elapsed < best {
            best = elapsed;
            extra = run_extra;
        }
        answer = Some(normalise(&batches));
    }
    Ok(Measurement {
        engine: engine.into(),
        query: query.into(),
        times,
        answer,
        extra,
    })
}

/// Rows the `DataSourceExec`s of `plan` that `pick` chooses passed on to
/// the rest of the plan, summed over the plan (from the metrics of a plan
/// that ran): a scan's output rows, or those of the `LipFilterExec` (join
/// filters) right above it, or the rows a `FilterAggregateExec` read from
/// the scan's files itself.
pub fn scan_rows(
    plan: &Arc<dyn ExecutionPlan>,
    pick: &dyn Fn(&Arc<dyn ExecutionPlan>) -> bool,
) -> usize {
    if plan.name() == "LipFilterExec" && scan_rows(plan.children()[0], pick) > 0 {
        return plan.metrics().and_then(|m| m.output_rows()).unwrap_or(0);
    }
    // A fused count that read its scan's files itself (`read=pages`).
    let own_read = plan
        .metrics()
        .and_then(|m| m.sum_by_name("page_scan_rows"))
        .map_or(0, |v| v.as_usize());
    if plan.name() == "FilterAggregateExec" && own_read > 0 && picks(plan, pick) {
        return own_read;
    }
    let own = if plan.name() == "DataSourceExec" && pick(plan) {
        plan.metrics().and_then(|m| m.output_rows()).unwrap_or(0)
    } else {
        0
    };
    own + plan
        .children()
        .into_iter()
        .map(|c| scan_rows(c, pick))
        .sum::<usize>()
}

/// Whether `pick` chooses a `DataSourceExec` in `plan`.
fn picks(
    plan: &Arc<dyn ExecutionPlan>,
    pick: &dyn Fn(&Arc<dyn ExecutionPlan>) -> bool,
) -> bool {
    (plan.name() == "DataSourceExec" && pick(plan))
        || plan.children().into_iter().any(|c| picks(c, pick))
}

/// One timed run of `sql` (through `tsjoin_sql` when `tsjoin`): the
/// batches, the seconds (planning included) and the plan, whose metrics
/// tell what each operator did.
pub async fn run_query(
    ctx: &SessionContext,
    tsjoin: bool,
    sql: &str,
) -> Result<(Vec<RecordBatch>, f64, Arc<dyn ExecutionPlan>)> {
    let start = Instant::now();
    let df = if tsjoin {
        ctx.tsjoin_sql(sql).await?
    } else {
        ctx.sql(sql).await?
    };
    let plan = df.create_physical_plan().await?;
    let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    Ok((batches, start.elapsed().as_secs_f64(), plan))
}

/// A cell in one spelling for every engine: timestamps as
/// `YYYY-MM-DDTHH:MM:SS[.f]` without trailing zeros or a UTC offset,
/// numbers with 6 decimals.
pub fn canon_cell(cell: &str) -> String {
    let b = cell.as_bytes();
    if b.len() >= 19 && b[4] == b'-' && b[7] == b'-' && (b[10] == b' ' || b[10] == b'T') {
        let mut s = cell.replacen(' ', "T", 1);
        if let Some(stripped) = s.strip_suffix("+00:00") {
            s = stripped.to_string();
        }
        if s.contains('.') {
            s = s.trim_end_matches('0').trim_end_matches('.').to_string();
        }
        return s;
    }
    match cell.parse::<f64>() {
        Ok(v) => format!("{v:.6}"),
        Err(_) => cell.to_string(),
    }
}

/// A [`normalise`]d answer as rows of [`canon_cell`]s.
pub fn canon_rows(answer: &[String]) -> Vec<Vec<String>> {
    answer
        .iter()
        .map(|r| r.split('|').map(canon_cell).collect())
        .collect()
}

/// Whether two answers agree as multisets of rows (so row order and ties
/// in an ORDER BY do not matter); numbers within 2e-6 relative.
pub fn same_rows(mut a: Vec<Vec<String>>, mut b: Vec<Vec<String>>) -> bool {
    a.sort();
    b.sort();
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            x.len() == y.len()
                && x.iter().zip(y).all(|(p, q)| {
                    p == q
                        || match (p.parse::<f64>(), q.parse::<f64>()) {
                            (Ok(u), Ok(v)) => {
                                (u - v).abs() <= 2e-6 * u.abs().max(v.abs()).max(1.0)
                            }
                            _ => false,
                        }
                })
        })
}

/// DataFusion's `CREATE EXTERNAL TABLE name (col TYPE NOT NULL, …,
/// PRIMARY KEY (…)) STORED AS PARQUET LOCATION '<location>/'` for the
/// Parquet directory `location`: `columns` are `(name, SQL type)`.
///
/// ```
/// use tsjoin_bench::runner::external_table_ddl;
/// let ddl = external_table_ddl("t", [("k", "INT"), ("v", "VARCHAR")], &["k"], "/d/t/".as_ref());
/// assert_eq!(ddl, "CREATE EXTERNAL TABLE t (k INT NOT NULL, v VARCHAR NOT NULL, \
///                  PRIMARY KEY (k)) STORED AS PARQUET LOCATION '/d/t/'");
/// ```
pub fn external_table_ddl<N: std::fmt::Display, T: std::fmt::Display>(
    name: &str,
    columns: impl IntoIterator<Item = (N, T)>,
    primary_key: &[&str],
    location: &Path,
) -> String {
    let cols: Vec<String> = columns
        .into_iter()
        .map(|(name, t)| format!("{name} {t} NOT NULL"))
        .collect();
    let location = location.to_string_lossy().replace('\'', "''");
    format!(
        "CREATE EXTERNAL TABLE {name} ({}, PRIMARY KEY ({})) STORED AS PARQUET \
         LOCATION '{}/'",
        cols.join(", "),
        primary_key.join(", "),
        location.trim_end_matches('/'),
    )
}

/// Runs the DDL `ddl` makes for the absolute form of `dir` in `ctx`: how
/// the join benchmarks register their tables (`CREATE EXTERNAL TABLE …
/// PRIMARY KEY …` over `dir/<table>/`).
pub async fn register_ddl(
    ctx: &SessionContext,
    dir: &Path,
    ddl: impl Fn(&Path) -> Vec<String>,
) -> Result<()> {
    let dir = std::path::absolute(dir)?;
    for sql in ddl(&dir) {
        ctx.sql(&sql).await?;
    }
    Ok(())
}

/// One query in each engine's dialect, with the same parameters in all:
/// what the side-by-side runners run in process (`datafusion`) and hand to
/// the peer scripts ([`Query::peer_json`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// `q1.1`, `q7`, …
    pub name: String,
    /// DataFusion's (and tsjoin's) text.
    pub datafusion: String,
    /// DuckDB's.
    pub duckdb: String,
    /// ClickHouse's (chdb).
    pub clickhouse: String,
}

impl Query {
    /// A query every engine spells alike.
    pub fn same(name: &str, sql: &str) -> Self {
        Self {
            name: name.into(),
            datafusion: sql.into(),
            duckdb: sql.into(),
            clickhouse: sql.into(),
        }
    }

    /// `{name, duckdb, clickhouse}`: an element of the list
    /// [`run_peer_script`] hands over.
    pub fn peer_json(&self) -> Value {
        json!({"name": self.name, "duckdb": self.duckdb, "clickhouse": self.clickhouse})
    }
}

/// Runs the peer script `benches/peers/<script>` over `queries` (a JSON
/// list of `{name, duckdb, clickhouse}`, each engine's spelling, handed
/// over in a temporary file) with the runner's data directory, threads,
/// runs and engines; missing Python or packages give notes, not failures.
/// With `cold`, each engine runs each query once untimed, then once with
/// the data's files dropped from the page cache just before (its time in
/// `extra["cold_s"]`), then the timed runs.
pub fn run_peer_script(
    script: &str,
    data: &Path,
    threads: usize,
    runs: usize,
    queries: Vec<Value>,
    engines: &[String],
    cold: bool,
) -> (Vec<Measurement>, Vec<String>) {
    let file = std::env::temp_dir().join(format!(
        "{}-queries-{}.json",
        script.trim_end_matches(".py"),
        std::process::id()
    ));
    if let Err(e) = std::fs::write(&file, Value::Array(queries).to_string()) {
        return (vec![], vec![format!("cannot write the query list: {e}")]);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("peers")
        .join(script);
    // Absolute: chdb resolves a relative `file()` path against its own
    // user-files directory, not the working directory.
    let data = std::path::absolute(data).unwrap_or_else(|_| data.to_path_buf());
    let output = std::process::Command::new("python3")
        .arg(&script)
        .args(["--data", data.to_str().unwrap_or(".")])
        .args(["--threads", &threads.to_string()])
        .args(["--runs", &runs.to_string()])
        .args(["--queries", file.to_str().unwrap_or("")])
        .args(["--engines", &engines.join(",")])
        .args(cold.then_some("--cold"))
        .stderr(std::process::Stdio::inherit())
        .output();
    let _ = std::fs::remove_file(&file);
    peer_results(output)
}

/// The measurements and notes a peer script printed (one JSON object per
/// line: `{engine, query, times, answer[, cold]}` or `{note}`), or a note that
/// python3 could not be run.
pub fn peer_results(
    output: std::io::Result<std::process::Output>,
) -> (Vec<Measurement>, Vec<String>) {
    let output = match output {
        Ok(o) => o,
        Err(e) => return (vec![], vec![format!("python3 not available: {e}")]),
    };
    let (mut ms, mut notes) = (vec![], vec![]);
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(note) = v["note"].as_str() {
            notes.push(note.to_string());
            continue;
        }
        ms.push(Measurement {
            engine: v["engine"].as_str().unwrap_or("?").to_string(),
            query: v["query"].as_str().unwrap_or("?").to_string(),
            times: v["times"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default(),
            answer: v["answer"].as_array().map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            }),
            extra: match v["cold"].as_f64() {
                Some(cold) => json!({"cold_s": cold}),
                None => json!({}),
            },
        });
    }
    (ms, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(answer: &[&str]) -> Vec<Vec<String>> {
        canon_rows(&answer.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn answers_compare_as_multisets_of_canonical_cells() {
        // An integer sum and DuckDB's HUGEINT-as-decimal spell one number.
        assert!(same_rows(
            rows(&["1993|FRANCE|42", "1992|PERU|7"]),
            rows(&["1992|PERU|7.000000", "1993|FRANCE|42.000000"])
        ));
        assert!(same_rows(
            rows(&["2020-01-01 00:00:00|1.0000001"]),
            rows(&["2020-01-01T00:00:00+00:00|1.0"])
        ));
        assert!(!same_rows(
            rows(&["1993|FRANCE|42"]),
            rows(&["1993|FRANCE|43"])
        ));
        assert!(!same_rows(rows(&["a|1"]), rows(&["a|1", "a|1"])));
        assert!(!same_rows(rows(&["a|1"]), rows(&["b|1"])));
    }
}
