//! Memory budgets and cancellation.

use crate::support::physical_plan;
use datafusion::arrow::array::{
    Float64Array, Int64Array, RecordBatch, TimestampMillisecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::streaming::StreamingTable;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use futures::StreamExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

async fn big_tables(ctx: &SessionContext, rows: i64) {
    for (name, mult) in [("t", 3), ("p", 1)] {
        ctx.tsjoin_sql(&format!(
            "CREATE TABLE {name} AS SELECT to_timestamp_millis(value * {mult}) AS ts, value % 97 AS k, \
             CAST(value AS DOUBLE) AS v FROM generate_series(1, {rows})"
        ))
        .await
        .unwrap();
    }
}

const QUERY: &str = "SELECT t.ts, count(*), avg(p.v) FROM t WINDOW JOIN p ON p.k = t.k \
    RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING";

#[tokio::test]
async fn over_budget_is_a_clear_error() {
    let ctx = crate::support::limited_context(256 * 1024, 2);
    big_tables(&ctx, 200_000).await;
    let err = crate::support::query_error(&ctx, QUERY).await;
    assert!(
        err.contains("Resources exhausted") && err.contains("WindowJoinExec"),
        "{err}"
    );
}

/// Counts of one endless source's streams: started, dropped, and batches
/// made.
#[derive(Debug, Default)]
struct Counts {
    started: AtomicUsize,
    dropped: AtomicUsize,
    batches: AtomicUsize,
}

/// Counts a stream's drop.
struct OnDrop(Arc<Counts>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// A table partition that never ends: batches of 100 rows (`ts` one
/// millisecond apart, key `k`, value `v`), a millisecond apart.
#[derive(Debug)]
struct Endless {
    schema: SchemaRef,
    counts: Arc<Counts>,
}

impl Endless {
    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                false,
            ),
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Float64, false),
        ]))
    }
}

impl PartitionStream for Endless {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        self.counts.started.fetch_add(1, Ordering::SeqCst);
        let schema = Arc::clone(&self.schema);
        let state = (OnDrop(Arc::clone(&self.counts)), 0i64);
        let batches = futures::stream::unfold(state, move |(guard, at)| {
            let schema = Arc::clone(&schema);
            async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let rows = at..at + 100;
                let batch = RecordBatch::try_new(
                    schema,
                    vec![
                        Arc::new(TimestampMillisecondArray::from_iter_values(
                            rows.clone(),
                        )),
                        Arc::new(Int64Array::from_iter_values(
                            rows.clone().map(|r| r % 7),
                        )),
                        Arc::new(Float64Array::from_iter_values(rows.map(|r| r as f64))),
                    ],
                );
                guard.0.batches.fetch_add(1, Ordering::SeqCst);
                Some((batch.map_err(Into::into), (guard, at + 100)))
            }
        });
        Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            batches,
        ))
    }
}

/// Registers `name` as an endless table of `partitions` partitions.
fn register_endless(ctx: &SessionContext, name: &str, partitions: usize) -> Arc<Counts> {
    let counts = Arc::new(Counts::default());
    let streams = (0..partitions)
        .map(|_| {
            Arc::new(Endless {
                schema: Endless::schema(),
                counts: Arc::clone(&counts),
            }) as Arc<dyn PartitionStream>
        })
        .collect();
    let table = StreamingTable::try_new(Endless::schema(), streams).unwrap();
    ctx.register_table(name, Arc::new(table)).unwrap();
    counts
}

/// Waits up to `limit` for `done`.
async fn eventually(limit: Duration, done: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Runs `sql` over an endless table until it has read some batches (and,
/// when `streams`, returned its first 20), drops the query's stream,
/// and checks that every stream of the endless table is dropped (the work
/// stopped) within a second, and that it makes no more batches; returns
/// how long the streams took to go.
async fn dropping_stops(
    ctx: &SessionContext,
    counts: &Counts,
    sql: &str,
    streams: bool,
) -> Duration {
    let mut stream = ctx
        .tsjoin_sql(sql)
        .await
        .unwrap()
        .execute_stream()
        .await
        .unwrap();
    if streams {
        // A streaming operator reads on as its output is read.
        for _ in 0..20 {
            let next = tokio::time::timeout(Duration::from_secs(60), stream.next())
                .await
                .unwrap_or_else(|_| panic!("no batch: {sql}"));
            assert!(next.unwrap().unwrap().num_rows() > 0, "{sql}");
        }
    } else {
        // The input never ends: no batch comes, but the work runs.
        let none = tokio::time::timeout(Duration::from_millis(300), stream.next()).await;
        assert!(none.is_err(), "{sql}: a batch from an endless input");
    }
    let read = eventually(Duration::from_secs(60), || {
        counts.batches.load(Ordering::SeqCst) > 10
    });
    assert!(read.await, "{sql}: the input was not read");
    assert!(counts.started.load(Ordering::SeqCst) > 0);
    // Still working (streams may have been dropped before: an inline
    // aggregate over the memory limit starts its input again).
    let before = counts.batches.load(Ordering::SeqCst);
    let working = eventually(Duration::from_secs(10), || {
        counts.batches.load(Ordering::SeqCst) > before + 2
    });
    assert!(working.await, "{sql}: not reading before the drop");
    drop(stream);
    let dropped_at = Instant::now();
    let stopped = eventually(Duration::from_secs(5), || {
        counts.dropped.load(Ordering::SeqCst) == counts.started.load(Ordering::SeqCst)
    });
    assert!(
        stopped.await,
        "{sql}: {} of {} input streams dropped 5 s after the query's stream",
        counts.dropped.load(Ordering::SeqCst),
        counts.started.load(Ordering::SeqCst)
    );
    let latency = dropped_at.elapsed();
    let made = counts.batches.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        counts.batches.load(Ordering::SeqCst),
        made,
        "{sql}: still reading"
    );
    // Observed, not hoped: every input stream was gone within a second.
    eprintln!("cancellation latency {latency:?}: {sql}");
    assert!(
        latency < Duration::from_secs(1),
        "{sql}: stopped after {latency:?}"
    );
    latency
}

/// Dropping a query's stream stops the work: an endless left input of a
/// WINDOW JOIN after its first output batch, an endless right input while
/// the right index is being built.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_stops_the_window_join() {
    let ctx = crate::support::limited_context(usize::MAX / 2, 2);
    big_tables(&ctx, 10_000).await;
    let counts = register_endless(&ctx, "endless", 2);
    let sql = "SELECT e.ts, count(*), avg(p.v) FROM endless e WINDOW JOIN p ON p.k = e.k \
        RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING";
    dropping_stops(&ctx, &counts, sql, true).await;
    let counts = register_endless(&ctx, "endless_right", 2);
    let sql = "SELECT t.ts, count(*), avg(e.v) FROM t WINDOW JOIN endless_right e ON e.k = t.k \
        RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING";
    dropping_stops(&ctx, &counts, sql, false).await;
}

/// Dropping a query's stream stops the inline aggregate's phase 1 over an
/// endless input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_stops_the_inline_aggregate() {
    let ctx = crate::support::limited_context(usize::MAX / 2, 2);
    let counts = register_endless(&ctx, "endless", 2);
    let sql = "SELECT k, count(*), sum(v) FROM endless GROUP BY k";
    let plan = physical_plan(&ctx, sql).await;
    let text = datafusion::physical_plan::displayable(plan.as_ref())
        .indent(true)
        .to_string();
    assert!(text.contains("InlineAggregateExec"), "{text}");
    dropping_stops(&ctx, &counts, sql, false).await;
}

/// Dropping a query's stream stops every kind of query within a second:
/// the inline aggregate's composite keys (probing, then handed over to
/// DataFusion's aggregate), the inline aggregate handed over to DataFusion's
/// under a memory limit, a WINDOW JOIN under a GROUP BY, and a LIMIT …
/// OFFSET under an ORDER BY (tsjoin's OffsetTopK fix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_stops_every_kind_of_query() {
    let queries = [
        (
            "SELECT k, v, count(*) FROM endless GROUP BY k, v",
            false,
            usize::MAX / 2,
        ),
        (
            "SELECT ts, count(*), sum(v) FROM endless GROUP BY ts",
            false,
            1 << 20,
        ),
        (
            "SELECT x.k, sum(x.n) FROM (SELECT e.k, count(*) AS n FROM endless e WINDOW JOIN p \
             ON p.k = e.k RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW) x GROUP BY x.k",
            false,
            usize::MAX / 2,
        ),
        (
            "SELECT * FROM (SELECT * FROM endless LIMIT 1000000000 OFFSET 5) ORDER BY v DESC LIMIT 3",
            false,
            usize::MAX / 2,
        ),
    ];
    for (sql, streams, limit) in queries {
        let ctx = crate::support::limited_context(limit, 2);
        big_tables(&ctx, 1_000).await;
        let counts = register_endless(&ctx, "endless", 2);
        dropping_stops(&ctx, &counts, sql, streams).await;
    }
}

/// Dropping a query's stream stops ASOF JOIN, HORIZON JOIN and
/// `approx_percentile` within a second: an endless right side while it is
/// indexed, an endless left side under an aggregate, an endless input of a
/// percentile GROUP BY.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_stops_asof_horizon_and_percentile() {
    let queries = [
        "SELECT t.ts, e.v FROM t ASOF JOIN endless e ON (k)",
        "SELECT x.k, count(x.v) FROM (SELECT e.k, p.v FROM endless e ASOF JOIN p ON (k)) x \
         GROUP BY x.k",
        "SELECT h.offset, count(e.v) FROM t HORIZON JOIN endless e ON (k) LIST (0, 1s) AS h",
        "SELECT h.offset, count(p.v) FROM endless e HORIZON JOIN p ON (k) \
         RANGE FROM -1s TO 1s STEP 500T AS h",
        "SELECT k, approx_percentile(v, 0.99, 3), approx_median(v) FROM endless GROUP BY k",
    ];
    for sql in queries {
        let ctx = crate::support::limited_context(usize::MAX / 2, 2);
        big_tables(&ctx, 1_000).await;
        let counts = register_endless(&ctx, "endless", 2);
        dropping_stops(&ctx, &counts, sql, false).await;
    }
}
