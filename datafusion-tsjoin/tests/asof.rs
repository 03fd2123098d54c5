//! ASOF / LT JOIN: a differential test against a nested-loop reference on
//! random data, EXPLAIN, `SELECT *` names, the proto round trip and the
//! memory limit.

use crate::support::{
    assert_round_trips, case_count, cells, context, explained_plan, operator_line,
    parquet_copies, query_error, query_rows,
};
use datafusion::arrow::array::{Int64Array, RecordBatch, TimestampMicrosecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::datasource::MemTable;
use datafusion::physical_plan::collect;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// One row: id, time (µs), key, all but id nullable.
type Row = (i64, Option<i64>, Option<i64>);

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("k", DataType::Int64, true),
    ]))
}

fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(TimestampMicrosecondArray::from_iter(
                rows.iter().map(|r| r.1),
            )),
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.2))),
        ],
    )
    .unwrap()
}

fn split(rng: &mut StdRng, rows: &[Row], parts: usize) -> Vec<Vec<RecordBatch>> {
    crate::support::split(rng, rows, parts, 9, batch)
}

fn random_rows(
    rng: &mut StdRng,
    n: usize,
    span: i64,
    keys: i64,
    sorted: bool,
) -> Vec<Row> {
    let mut rows: Vec<Row> = (0..n as i64)
        .map(|id| {
            let ts = (!rng.random_bool(0.05)).then(|| rng.random_range(0..span));
            // Skewed: key 0 is common.
            let k = if rng.random_bool(0.08) {
                None
            } else if rng.random_bool(0.4) {
                Some(0)
            } else {
                Some(rng.random_range(0..keys))
            };
            (id, ts, k)
        })
        .collect();
    if sorted {
        rows.sort_by_key(|r| r.1.unwrap_or(i64::MIN));
    }
    rows
}

/// The query's match: (direction forward, strict).
const MATCHES: [(bool, bool); 4] =
    [(false, false), (false, true), (true, false), (true, true)];

fn reference(
    left: &[Row],
    right: &[Row],
    keyed: bool,
    (forward, strict): (bool, bool),
    tol: Option<i64>,
    nulls_match: bool,
    pair: Option<i64>,
) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = left
        .iter()
        .map(|l| {
            let mut best: Option<(i64, usize)> = None;
            if let Some(t) = l.1 {
                for (j, r) in right.iter().enumerate() {
                    let Some(rt) = r.1 else { continue };
                    if keyed && (r.2 != l.2 || (!nulls_match && l.2.is_none())) {
                        continue;
                    }
                    // The pair condition: `(l.id + r.id) % 3 <> 0` (most
                    // candidates pass) or `% 7 = 0` (most fail).
                    let passes = |m: i64| match m {
                        3 => (l.0 + r.0) % 3 != 0,
                        m => (l.0 + r.0) % m == 0,
                    };
                    if pair.is_some_and(|m| !passes(m)) {
                        continue;
                    }
                    let ok = match (forward, strict) {
                        (false, false) => rt <= t,
                        (false, true) => rt < t,
                        (true, false) => rt >= t,
                        (true, true) => rt > t,
                    };
                    if !ok || tol.is_some_and(|tol| (rt - t).abs() > tol) {
                        continue;
                    }
                    // Backward: the latest time, then the latest row;
                    // forward: the earliest time, then the first row.
                    let better = match best {
                        None => true,
                        Some((bt, _)) if forward => rt < bt,
                        Some((bt, _)) => rt >= bt,
                    };
                    if better {
                        best = Some((rt, j));
                    }
                }
            }
            let r = best.map_or("NULL".to_string(), |(_, j)| right[j].0.to_string());
            vec![l.0.to_string(), r]
        })
        .collect();
    out.sort_by_key(|r| r[0].parse::<i64>().unwrap());
    out
}

async fn run_case(seed: u64) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let big = seed % 50 == 7;
    let (nl, nr) = if big {
        (300, 4000)
    } else {
        (rng.random_range(0..40), rng.random_range(0..40))
    };
    let span = if big {
        100_000
    } else {
        rng.random_range(1..60)
    };
    let keys = rng.random_range(1..6);
    let sorted = rng.random_bool(0.7);
    let left = random_rows(&mut rng, nl, span, keys, sorted);
    let sorted = rng.random_bool(0.7);
    let mut right = random_rows(&mut rng, nr, span, keys, sorted);
    if big {
        // A key seen only at the very start: partitions that start later
        // must find it beyond their warm-up.
        for r in right.iter_mut().take(5) {
            r.2 = Some(99);
        }
        for r in right.iter_mut().skip(5).filter(|r| r.2 == Some(99)) {
            r.2 = Some(1);
        }
    }
    if sorted && rng.random_bool(0.3) {
        // Time-ordered runs out of order (a partitioned scan whose
        // partitions hold time ranges out of order): put in order, not sorted.
        let at = rng.random_range(0..=right.len());
        right.rotate_left(at);
    }
    let ctx = context(rng.random_range(1..4));
    let lp = rng.random_range(1..5);
    let rp = rng.random_range(1..4);
    let lt = MemTable::try_new(schema(), split(&mut rng, &left, lp)).unwrap();
    let rt = MemTable::try_new(schema(), split(&mut rng, &right, rp)).unwrap();
    ctx.register_table("l", Arc::new(lt)).unwrap();
    ctx.register_table("r", Arc::new(rt)).unwrap();
    let mut cases = 0;
    // The second pass (every other seed) in partitioned mode, the right
    // side in one partition (see `partitioned::one_partition`).
    for pass in 0..1 + (seed % 2) {
        if pass == 1 {
            crate::partitioned::one_partition(&ctx, "r", split(&mut rng, &right, 1));
            crate::partitioned::force_partitioned(&ctx).await;
        }
        for m in MATCHES {
            let keyed = rng.random_bool(0.7);
            let tol = rng
                .random_bool(0.4)
                .then(|| rng.random_range(1..=span.max(2)));
            let tol_sql = tol.map_or(String::new(), |t| format!(" TOLERANCE {t}U"));
            // DuckDB's spelling: the inequality in ON, an inner join unless
            // LEFT, RIGHT or FULL, and SQL's `=` keys (a NULL key matches
            // nothing) unless written IS NOT DISTINCT FROM.
            let duck = tol.is_none() && rng.random_bool(0.35);
            let outer = ["", "LEFT ", "RIGHT ", "FULL OUTER "][rng.random_range(0..4)];
            let sql_eq = rng.random_bool(0.6);
            // A condition reading both sides picks among the candidates.
            let pair = rng.random_bool(0.3);
            let (modulus, pair_cond) = if rng.random_bool(0.5) {
                (3, "(l.id + r.id) % 3 <> 0")
            } else {
                (7, "(l.id + r.id) % 7 = 0")
            };
            let pair_sql = if pair {
                format!(" AND {pair_cond}")
            } else {
                String::new()
            };
            let sql = match m {
                (forward, strict) if duck => {
                    let op = match (forward, strict) {
                        (false, false) => ">=",
                        (false, true) => ">",
                        (true, false) => "<=",
                        (true, true) => "<",
                    };
                    let key = match (keyed, sql_eq) {
                        (false, _) => "",
                        (true, true) => "l.k = r.k AND ",
                        (true, false) => "l.k IS NOT DISTINCT FROM r.k AND ",
                    };
                    format!(
                        "SELECT l.id, r.id FROM l ASOF {outer}JOIN r ON {key}l.ts {op} r.ts{pair_sql} ORDER BY l.id, r.id"
                    )
                }
                (false, strict) if rng.random_bool(0.5) || tol.is_some() => format!(
                    "SELECT l.id, r.id FROM l {} JOIN r {}{tol_sql} ORDER BY l.id",
                    if strict { "LT" } else { "ASOF" },
                    match (keyed, pair) {
                        (true, false) => "ON (k)".to_string(),
                        (false, false) => String::new(),
                        (true, true) => format!("ON l.k = r.k AND {pair_cond}"),
                        (false, true) => format!("ON {pair_cond}"),
                    }
                ),
                (forward, strict) => {
                    let op = match (forward, strict) {
                        (false, false) => ">=",
                        (false, true) => ">",
                        (true, false) => "<=",
                        (true, true) => "<",
                    };
                    format!(
                        "SELECT l.id, r.id FROM l ASOF JOIN r MATCH_CONDITION(l.ts {op} r.ts){} ORDER BY l.id",
                        if keyed { " ON l.k = r.k" } else { "" }
                    )
                }
            };
            // MATCH_CONDITION takes no TOLERANCE: the reference must not either.
            let tol = if sql.contains("TOLERANCE") { tol } else { None };
            let got = query_rows(&ctx, &sql).await;
            let pair =
                (pair && (duck || sql.contains("(l.id + r.id)"))).then_some(modulus);
            let mut want =
                reference(&left, &right, keyed, m, tol, !(duck && sql_eq), pair);
            if duck && matches!(outer, "RIGHT " | "FULL OUTER ") {
                // Then every right row no left row matched, after them.
                let matched: std::collections::HashSet<&String> =
                    want.iter().map(|r| &r[1]).collect();
                let unmatched: Vec<Vec<String>> = right
                    .iter()
                    .map(|r| r.0.to_string())
                    .filter(|id| !matched.contains(id))
                    .map(|id| vec!["NULL".to_string(), id])
                    .collect();
                want.extend(unmatched);
            }
            if duck && matches!(outer, "" | "RIGHT ") {
                want.retain(|r| r[0] == "NULL" || r[1] != "NULL");
            }
            // ORDER BY l.id, r.id: NULLs last (ids compare as numbers).
            let num = |c: &String| c.parse::<i64>().map_or((1, 0), |v| (0, v));
            want.sort_by_key(|r| (num(&r[0]), num(&r[1])));
            assert_eq!(got, want, "seed {seed} pass {pass}: {sql}");
            if pass == 1 && keyed {
                crate::partitioned::assert_mode(&ctx, &sql, "partitioned").await;
            }
            cases += 1;
        }
    }
    cases
}

/// Thousands of random cases (TSJOIN_ASOF_CASES data sets, four queries
/// each): NULL keys and times, duplicate times, empty sides, skewed keys,
/// tolerances, 1..4 partitions, batches of 1..9 rows, sorted and unsorted
/// inputs, all four directions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asof_join_matches_reference() {
    let n = case_count("TSJOIN_ASOF_CASES", 400);
    let mut cases = 0;
    for seed in 0..n {
        cases += run_case(seed).await;
    }
    assert!(cases >= 4 * n as usize);
}

async fn tables(ctx: &SessionContext) {
    ctx.tsjoin_sql(
        "CREATE TABLE t (ts TIMESTAMP, sym VARCHAR, price DOUBLE) AS VALUES
          ('2024-01-01T00:01:00', 'A', 10.0), ('2024-01-01T00:02:00', 'B', 20.0);
         CREATE TABLE p (ts TIMESTAMP, sym VARCHAR, bid DOUBLE) AS VALUES
          ('2024-01-01T00:00:00', 'A', 1.0), ('2024-01-01T00:01:30', 'B', 3.0)",
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn explain_shows_keys_direction_tolerance_and_path() {
    let ctx = context(2);
    tables(&ctx).await;
    let text = explained_plan(
        &ctx,
        "SELECT t.ts, p.bid FROM t LT JOIN p ON (sym) TOLERANCE 5m",
    )
    .await;
    for part in [
        "AsofJoinExec: on=[(sym@1, sym@1)]",
        "match=right < left",
        "tolerance=5m",
        "path=merge (left order",
    ] {
        assert!(text.contains(part), "missing {part} in\n{text}");
    }
    let text = explained_plan(
        &ctx,
        "SELECT t.ts, p.bid FROM t ASOF JOIN p MATCH_CONDITION(t.ts <= p.ts) ON t.sym = p.sym",
    )
    .await;
    assert!(text.contains("match=right >= left"), "{text}");
    assert!(text.contains("path=index"), "{text}");
    // DuckDB's spelling is an inner join unless LEFT, RIGHT or FULL.
    let duck = "SELECT t.ts, p.bid FROM t ASOF JOIN p ON t.sym = p.sym AND t.ts >= p.ts";
    let text = explained_plan(&ctx, duck).await;
    assert!(text.contains("join_type=Inner"), "{text}");
    let text = explained_plan(&ctx, &duck.replace("ASOF JOIN", "ASOF LEFT JOIN")).await;
    assert!(!text.contains("join_type="), "{text}");
    let text = explained_plan(&ctx, &duck.replace("ASOF JOIN", "ASOF RIGHT JOIN")).await;
    assert!(text.contains("join_type=Right"), "{text}");
}

/// The join emits only the columns the query reads (an embedded
/// projection): none at all for a bare `count(*)`, whose rows still count.
#[tokio::test]
async fn emits_only_the_columns_read() {
    let ctx = context(2);
    tables(&ctx).await;
    let sql = "SELECT p.bid, t.price FROM t ASOF JOIN p ON (sym) ORDER BY t.price";
    let text = explained_plan(&ctx, sql).await;
    assert!(text.contains("projection=[bid@5, price@2]"), "{text}");
    assert_eq!(query_rows(&ctx, sql).await, [["1", "10"], ["3", "20"]]);
    let sql = "SELECT count(*) FROM t ASOF JOIN p ON (sym)";
    let text = explained_plan(&ctx, sql).await;
    assert!(text.contains("projection=[]"), "{text}");
    assert_eq!(query_rows(&ctx, sql).await, [["2"]]);
}

#[tokio::test]
async fn select_star_renames_duplicated_right_columns() {
    let ctx = context(1);
    tables(&ctx).await;
    let names_of = |df: &datafusion::dataframe::DataFrame| -> Vec<String> {
        let fields = df.schema().fields().iter();
        fields.map(|f| f.name().clone()).collect()
    };
    let df = ctx
        .tsjoin_sql("SELECT * FROM t ASOF JOIN p ON (sym) ASOF JOIN p p2 ON (sym)")
        .await
        .unwrap();
    assert_eq!(
        names_of(&df),
        [
            "ts", "sym", "price", "ts1", "sym1", "bid", "ts2", "sym2", "bid1"
        ]
    );
    let rows = cells(&df.collect().await.unwrap());
    assert_eq!(rows[1][5], "3");
    // Sub-queries, with or without an alias and with `*` inside (QuestDB's
    // testAsOfJoinTolerance): their columns come from their plans.
    for (sql, want) in [
        (
            "SELECT * FROM t ASOF JOIN (SELECT * FROM p WHERE bid > 0) ON (sym)",
            &["ts", "sym", "price", "ts1", "sym1", "bid"][..],
        ),
        (
            "SELECT * FROM t ASOF JOIN (SELECT * FROM p WHERE bid > 0) q ON (sym)",
            &["ts", "sym", "price", "ts1", "sym1", "bid"][..],
        ),
        (
            "SELECT * FROM t ASOF JOIN (SELECT sym, ts, bid * 2 AS b FROM p) ON (sym)",
            &["ts", "sym", "price", "sym1", "ts1", "b"][..],
        ),
        (
            "SELECT * FROM t ASOF JOIN (SELECT * FROM p ASOF JOIN p q ON (sym)) ON (sym)",
            &[
                "ts", "sym", "price", "ts1", "sym1", "bid", "ts11", "sym11", "bid1",
            ][..],
        ),
    ] {
        let df = ctx.tsjoin_sql(sql).await.unwrap();
        assert_eq!(names_of(&df), want, "{sql}");
        let rows = cells(&df.collect().await.unwrap());
        assert_eq!(rows.len(), 2, "{sql}");
    }
}

#[tokio::test]
async fn plans_round_trip_through_proto() {
    let ctx = context(2);
    tables(&ctx).await;
    let dir = tempfile::tempdir().unwrap();
    parquet_copies(&ctx, &["t", "p"], dir.path()).await;
    let sql = "SELECT t.price, p.bid FROM tq t ASOF JOIN pq p ON t.sym = p.sym AND t.price > 5 \
               TOLERANCE 2m ORDER BY t.price";
    let want = query_rows(&ctx, sql).await;
    assert_eq!(want, [["10", "1"], ["20", "3"]]);
    let back = assert_round_trips(&ctx, sql, "AsofJoinExec").await;
    let line = operator_line(&back, "AsofJoinExec");
    assert!(line.contains("tolerance=2m"), "{line}");
    assert!(line.contains("projection=[price@2, bid@5]"), "{line}");
    let got = cells(&collect(back, ctx.task_ctx()).await.unwrap());
    assert_eq!(got, want);
    // DuckDB's inner ASOF JOIN: the row its left-only condition rejects is
    // dropped, on both sides of the round trip; its FULL JOIN adds the
    // right row nothing matched; a condition on both sides picks among
    // the candidates.
    for (sql, shown, want) in [
        (
            "SELECT t.price, p.bid FROM tq t ASOF JOIN pq p ON t.ts >= p.ts AND t.price > 15",
            "join_type=Inner",
            vec![["20", "3"]],
        ),
        (
            "SELECT t.price, p.bid FROM tq t ASOF FULL JOIN pq p ON t.ts >= p.ts AND t.price > 15 \
             ORDER BY t.price, p.bid",
            "join_type=Full",
            vec![["10", "NULL"], ["20", "3"], ["NULL", "1"]],
        ),
        (
            "SELECT t.price, p.bid FROM tq t ASOF JOIN pq p ON (t.price + p.bid) > 21.5 \
             ORDER BY t.price",
            "pair_filter=",
            vec![["10", "NULL"], ["20", "3"]],
        ),
    ] {
        assert_eq!(query_rows(&ctx, sql).await, want, "{sql}");
        let back = assert_round_trips(&ctx, sql, "AsofJoinExec").await;
        let line = operator_line(&back, "AsofJoinExec");
        assert!(line.contains(shown), "{line}");
        // A pair filter always tries candidates in the per-key index.
        if shown == "pair_filter=" {
            assert!(line.contains("path=index (candidates"), "{line}");
        }
        let got = cells(&collect(back, ctx.task_ctx()).await.unwrap());
        assert_eq!(got, want, "{sql}");
    }
}

#[tokio::test]
async fn over_the_memory_limit_is_a_clear_error() {
    let ctx = crate::support::limited_context_with(64 * 1024, SessionConfig::new());
    ctx.tsjoin_sql(
        "CREATE TABLE big AS SELECT to_timestamp_micros(value) AS ts, value % 7 AS k, \
         value AS v FROM generate_series(1, 200000)",
    )
    .await
    .unwrap();
    let err =
        query_error(&ctx, "SELECT count(b.v) FROM big a ASOF JOIN big b ON (k)").await;
    assert!(err.contains("Resources exhausted"), "{err}");
}
