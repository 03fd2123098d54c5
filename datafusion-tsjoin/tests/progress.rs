//! Progress monitor: snapshots over tsjoin's operators and DataFusion's are
//! monotone, stay below 1 while the stream runs, are exactly 1 at its end,
//! and count every source row of a full scan.

use crate::support::context;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use datafusion_tsjoin::progress::{
    OperatorState, ProgressSnapshot, execute_with_progress, watch,
};
use futures::StreamExt;
use std::time::Duration;

/// Rows of each Parquet table (several files, small row groups).
const ROWS: u64 = 60_000;

/// Writes `trades` (3 files) and `quotes` (2 files) as Parquet with
/// 4096-row groups and registers them.
async fn parquet_tables(dir: &std::path::Path, partitions: usize) -> SessionContext {
    let ctx = context(partitions);
    let d = dir.to_str().unwrap();
    ctx.sql("SET datafusion.execution.parquet.max_row_group_size = 4096")
        .await
        .unwrap();
    for (name, files) in [("trades", 3u64), ("quotes", 2)] {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        let per = ROWS / files;
        for f in 0..files {
            let sql = format!(
                "COPY (SELECT to_timestamp_millis(value * 7 + {f}) AS ts, value % 17 AS k, \
                 CAST(value % 1000 AS DOUBLE) / 10 AS px \
                 FROM generate_series({}, {}) ORDER BY ts) TO '{d}/{name}/{f}.parquet'",
                f * per,
                (f + 1) * per - 1
            );
            ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        }
        let sql = format!(
            "CREATE EXTERNAL TABLE {name} STORED AS PARQUET LOCATION '{d}/{name}/' \
             OPTIONS ('designated_timestamp' 'ts')"
        );
        ctx.tsjoin_sql(&sql).await.unwrap().collect().await.unwrap();
    }
    ctx
}

/// Runs `sql` with a watcher polling every millisecond; every snapshot the
/// watcher saw and the final one, plus the result's rows.
async fn run(ctx: &SessionContext, sql: &str) -> (Vec<ProgressSnapshot>, usize) {
    let plan = ctx
        .tsjoin_sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let (mut stream, progress) = execute_with_progress(plan, ctx.task_ctx()).unwrap();
    let mut seen = vec![];
    let (watcher, reader) = (
        watch(progress.clone(), Duration::from_millis(1), |s| {
            seen.push(s.clone())
        }),
        async {
            let mut rows = 0;
            while let Some(batch) = stream.next().await {
                // Mid-stream, the fraction is below 1.
                assert!(progress.snapshot().fraction < 1.0);
                rows += batch.unwrap().num_rows();
            }
            rows
        },
    );
    let ((), rows) = futures::join!(watcher, reader);
    seen.push(progress.snapshot());
    (seen, rows)
}

/// The invariants of a query's snapshots.
fn check(sql: &str, seen: &[ProgressSnapshot], full_scan: bool) {
    let last = seen.last().unwrap();
    assert!(last.finished && last.fraction == 1.0, "{sql}: {last:?}");
    assert_eq!(last.eta, Some(Duration::ZERO), "{sql}");
    for w in seen.windows(2) {
        assert!(w[0].fraction <= w[1].fraction, "{sql}: not monotone {w:?}");
        assert!(w[0].rows_read <= w[1].rows_read, "{sql}");
        assert!(w[0].elapsed <= w[1].elapsed, "{sql}");
    }
    for s in seen.iter().filter(|s| !s.finished) {
        assert!(s.fraction < 1.0, "{sql}: 100% before the end");
    }
    assert_eq!(last.operators[0].state, OperatorState::Done, "{sql}");
    if full_scan {
        assert_eq!(last.rows_total, Some(2 * ROWS), "{sql}");
        assert_eq!(last.rows_read, 2 * ROWS, "{sql}: {}", last.operator_tree());
        assert!(
            last.bytes_read > 0 && last.bytes_total.unwrap() > 0,
            "{sql}"
        );
    }
}

/// WINDOW JOIN, inline aggregate (dictionary scan or not), DataFusion's hash
/// join, hash aggregate, sort, top-k and window functions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_are_monotone_and_end_at_one() {
    let dir = tempfile::tempdir().unwrap();
    let queries = [
        "SELECT k, count(*), sum(s) FROM (SELECT t.k, sum(q.px) AS s FROM trades t \
         WINDOW JOIN quotes q ON q.k = t.k \
         RANGE BETWEEN 50 milliseconds PRECEDING AND CURRENT ROW) GROUP BY k",
        "SELECT k, count(*), sum(px) FROM trades GROUP BY k \
         UNION ALL SELECT k, count(*), sum(px) FROM quotes GROUP BY k",
        "SELECT t.k, count(*) FROM trades t JOIN quotes q ON t.ts = q.ts GROUP BY t.k",
        "SELECT * FROM (SELECT ts, px FROM trades UNION ALL SELECT ts, px FROM quotes) \
         ORDER BY px DESC, ts",
        "SELECT k, avg(px) OVER (PARTITION BY k ORDER BY ts ROWS 5 PRECEDING) \
         FROM (SELECT * FROM trades UNION ALL SELECT * FROM quotes)",
    ];
    for partitions in [1, 3] {
        let ctx = parquet_tables(dir.path(), partitions).await;
        for sql in queries {
            let (seen, rows) = run(&ctx, sql).await;
            assert!(rows > 0, "{sql}");
            check(sql, &seen, true);
            let tree = seen.last().unwrap().operator_tree();
            assert!(tree.contains("DataSourceExec"), "{tree}");
        }
        std::fs::remove_dir_all(dir.path().join("trades")).unwrap();
        std::fs::remove_dir_all(dir.path().join("quotes")).unwrap();
    }
}

/// A LIMIT stops the scans early and memory tables have no files: still
/// exactly 1 at the end, and the operators that ran show it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_and_memory_sources() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = parquet_tables(dir.path(), 2).await;
    for sql in [
        "SELECT * FROM trades LIMIT 10",
        "SELECT count(*) FROM (VALUES (1), (2), (3)) t(x)",
        "SELECT * FROM generate_series(1, 100000) WHERE value % 7 = 0",
        "SELECT ts FROM trades WHERE ts < TIMESTAMP '1970-01-01T00:00:01' ORDER BY ts",
    ] {
        let (seen, _) = run(&ctx, sql).await;
        check(sql, &seen, false);
    }
    let (seen, _) = run(&ctx, "SELECT sum(x) FROM (VALUES (1), (2), (3)) t(x)").await;
    let last = seen.last().unwrap();
    assert_eq!((last.rows_read, last.rows_total), (3, Some(3)));
    assert_eq!(last.bytes_total, None);
}

/// Dropping the stream mid-query ends the watcher without reporting 100%.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_stream_stops_the_watcher() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = parquet_tables(dir.path(), 2).await;
    let plan = ctx
        .sql("SELECT ts, px FROM trades ORDER BY px, ts")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let (mut stream, progress) = execute_with_progress(plan, ctx.task_ctx()).unwrap();
    let mut last = None;
    let watcher = watch(progress.clone(), Duration::from_millis(1), |s| {
        last = Some(s.clone())
    });
    let reader = async move {
        let first = stream.next().await;
        assert!(first.is_some());
        drop(stream);
    };
    let ((), ()) = tokio::time::timeout(Duration::from_secs(30), async {
        futures::join!(watcher, reader)
    })
    .await
    .expect("the watcher ends when the stream is dropped");
    let last = last.unwrap();
    assert!(!last.finished && last.fraction < 1.0, "{last:?}");
    assert!(progress.is_closed() && !progress.is_finished());
}
