//! Snapshots (insta, `tests/snapshots/`) of EXPLAIN's physical plan for
//! representative WINDOW JOIN and GROUP BY queries, and of small results.
//! Two target partitions and the scalar kernels keep the text the same on
//! every machine; file paths are redacted. After a deliberate change to
//! EXPLAIN, review and accept with `cargo insta review` (or run with
//! `INSTA_UPDATE=always`).

use crate::support::{context, explained_plan};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;

/// A two-partition session with `trades`, `prices` (in memory) and
/// `fills` (a Parquet file under `dir`); scalar kernels.
async fn session(dir: &std::path::Path) -> SessionContext {
    let ctx = context(2);
    for sql in [
        "SET tsjoin.window_join_simd = false".to_string(),
        "CREATE TABLE trades (ts TIMESTAMP, sym VARCHAR, k INT, price DOUBLE) AS VALUES
            ('2024-01-01T00:00:01', 'A', 1, 10.0), ('2024-01-01T00:00:02', 'B', 2, 20.0),
            ('2024-01-01T00:00:03', 'A', 1, 30.0), ('2024-01-01T00:00:10', 'A', 1, 40.0)"
            .into(),
        "CREATE TABLE prices (ts TIMESTAMP, sym VARCHAR, k INT, bid DOUBLE) AS VALUES
            ('2024-01-01T00:00:00', 'A', 1, 1.0), ('2024-01-01T00:00:01', 'A', 1, 2.0),
            ('2024-01-01T00:00:02', 'B', 2, 3.0), ('2024-01-01T00:00:03', 'A', 1, 4.0),
            ('2024-01-01T00:00:05', 'A', 1, 6.0)"
            .into(),
        format!(
            "COPY (SELECT * FROM trades) TO '{}/fills.parquet' STORED AS PARQUET",
            dir.display()
        ),
        format!(
            "CREATE EXTERNAL TABLE fills STORED AS PARQUET LOCATION '{}/fills.parquet'",
            dir.display()
        ),
    ] {
        ctx.tsjoin_sql(&sql).await.unwrap().collect().await.unwrap();
    }
    ctx
}

async fn pretty(ctx: &SessionContext, sql: &str) -> String {
    let batches = ctx.tsjoin_sql(sql).await.unwrap().collect().await.unwrap();
    pretty_format_batches(&batches).unwrap().to_string()
}

/// Runs `f` with file paths under `dir` redacted from snapshots.
fn redacted(dir: &std::path::Path, f: impl FnOnce()) {
    let mut settings = insta::Settings::clone_current();
    // EXPLAIN shows paths without their leading `/`.
    let dir = dir.display().to_string();
    let dir = dir.trim_start_matches('/');
    settings.add_filter(&format!("/?{}", regex_escape(dir)), "[TMP]");
    settings.bind(f);
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

const WINDOW_JOINS: [(&str, &str); 4] = [
    (
        "window_join_keyed_fast",
        "SELECT t.ts, t.price, avg(p.bid), count(*) FROM trades t WINDOW JOIN prices p \
         ON p.sym = t.sym RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING",
    ),
    (
        "window_join_pair_filter_general",
        "SELECT t.ts, sum(p.bid) FROM trades t WINDOW JOIN prices p \
         ON p.k = t.k AND p.bid * 10 > t.price \
         RANGE BETWEEN 2 seconds PRECEDING AND CURRENT ROW EXCLUDE PREVAILING",
    ),
    (
        "window_join_where_order_limit",
        "SELECT t.ts, max(p.bid) AS m FROM trades t WINDOW JOIN prices p ON (sym) \
         RANGE BETWEEN 1 minute PRECEDING AND CURRENT ROW WHERE t.price > 15 \
         ORDER BY m DESC LIMIT 2",
    ),
    (
        "window_join_parquet_left",
        "SELECT f.ts, count(*), sum(p.bid) FROM fills f WINDOW JOIN prices p \
         ON p.sym = f.sym RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW",
    ),
];

const GROUP_BYS: [(&str, &str); 3] = [
    (
        "group_by_int_key",
        "SELECT k, count(*), sum(price), avg(price) FROM trades GROUP BY k",
    ),
    (
        "group_by_composite_key",
        "SELECT k, sym, count(*), max(price) FROM trades GROUP BY k, sym",
    ),
    (
        "group_by_parquet_having_order",
        "SELECT k, sum(price) AS s FROM fills GROUP BY k HAVING count(*) > 1 ORDER BY s",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = session(dir.path()).await;
    for (name, sql) in WINDOW_JOINS.iter().chain(&GROUP_BYS) {
        let plan = explained_plan(&ctx, sql).await;
        redacted(dir.path(), || {
            insta::assert_snapshot!(format!("explain_{name}"), plan, sql)
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_result_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = session(dir.path()).await;
    for (name, sql) in [
        (
            "window_join_include_prevailing",
            "SELECT t.ts, t.sym, count(*), sum(p.bid), first(p.bid), last(p.bid) \
             FROM trades t WINDOW JOIN prices p ON p.sym = t.sym \
             RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING ORDER BY t.ts",
        ),
        (
            "window_join_exclude_prevailing_empty_windows",
            "SELECT t.ts, count(*), avg(p.bid), min(p.ts) FROM trades t WINDOW JOIN prices p \
             ON p.sym = t.sym RANGE BETWEEN 500 milliseconds PRECEDING \
             AND 500 milliseconds FOLLOWING EXCLUDE PREVAILING ORDER BY t.ts",
        ),
        (
            "group_by_over_window_join",
            "SELECT sym, count(*), sum(n) FROM (SELECT t.sym, count(*) AS n \
             FROM trades t WINDOW JOIN prices p ON (sym) \
             RANGE BETWEEN 2 seconds PRECEDING AND CURRENT ROW) GROUP BY sym ORDER BY sym",
        ),
    ] {
        let text = pretty(&ctx, sql).await;
        insta::assert_snapshot!(format!("result_{name}"), text, sql);
    }
}
