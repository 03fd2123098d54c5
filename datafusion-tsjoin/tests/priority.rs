//! Priority scheduling: gates in the plan, pausing while a higher priority
//! runs, resuming with the same answer, cancellation while paused.

use crate::support::{cells, physical_plan};
use datafusion::arrow::array::Int64Array;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::physical_plan::{collect, displayable};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use datafusion_tsjoin::priority::{PLANNED_GRACE, Priority, Scheduler};
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;

/// A tsjoin session ranked by its own scheduler (so that tests running at
/// the same time do not pause each other), with a table `t` of 8 batches.
fn session(scheduler: &Arc<Scheduler>) -> SessionContext {
    let config = SessionConfig::new()
        .with_target_partitions(2)
        .with_extension(Arc::clone(scheduler));
    let ctx = crate::support::tsjoin_context(config);
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
    let batches = (0..8)
        .map(|b| {
            let values = Int64Array::from_iter_values((0..1000).map(|i| b * 1000 + i));
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(values)]).unwrap()
        })
        .collect::<Vec<_>>();
    let table =
        MemTable::try_new(schema, vec![batches[..4].to_vec(), batches[4..].to_vec()])
            .unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    ctx
}

/// [`session`] with `tsjoin.priority` set to `priority`.
async fn session_at(scheduler: &Arc<Scheduler>, priority: &str) -> SessionContext {
    let ctx = session(scheduler);
    ctx.tsjoin_sql(&format!("SET tsjoin.priority = {priority}"))
        .await
        .unwrap();
    ctx
}

const QUERY: &str = "SELECT count(*), sum(v), max(v) FROM t";
const ANSWER: &str = "[[\"8000\", \"31996000\", \"7999\"]]";

#[tokio::test]
async fn the_plan_gates_every_input_at_the_session_priority() {
    let ctx = session(&Scheduler::new());
    let shown = |plan| displayable(Arc::as_ref(&plan)).indent(false).to_string();
    let plan = shown(physical_plan(&ctx, QUERY).await);
    assert!(plan.contains("PriorityGateExec: priority=normal"), "{plan}");
    ctx.tsjoin_sql("SET tsjoin.priority = low").await.unwrap();
    let plan = shown(physical_plan(&ctx, QUERY).await);
    assert!(plan.contains("PriorityGateExec: priority=low"), "{plan}");
    ctx.tsjoin_sql("SET tsjoin.priority = 7").await.unwrap();
    let plan = shown(physical_plan(&ctx, QUERY).await);
    assert!(plan.contains("PriorityGateExec: priority=7"), "{plan}");
    let err = ctx
        .tsjoin_sql("SET tsjoin.priority = urgent")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("expected high, normal, low or an integer"),
        "{err}"
    );
    ctx.tsjoin_sql("SET tsjoin.priority_scheduling = false")
        .await
        .unwrap();
    let plan = shown(physical_plan(&ctx, QUERY).await);
    assert!(!plan.contains("PriorityGateExec"), "{plan}");
}

#[tokio::test]
async fn a_lower_priority_pauses_while_a_higher_one_runs_and_resumes_unchanged() {
    let scheduler = Scheduler::new();
    let ctx = session_at(&scheduler, "low").await;
    let plan = physical_plan(&ctx, QUERY).await;
    let alone = cells(&collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap());
    assert_eq!(format!("{alone:?}"), ANSWER);

    let high = scheduler.admit(Priority::HIGH);
    let run = tokio::spawn(collect(Arc::clone(&plan), ctx.task_ctx()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !run.is_finished(),
        "the low query ran while a high one was running"
    );
    // Its inputs are open (admitted at low) but have not read a batch.
    let running = scheduler.running();
    assert_eq!(running[0], (Priority::HIGH, 1));
    assert!(
        running.iter().any(|(p, n)| *p == Priority::LOW && *n > 0),
        "{running:?}"
    );
    drop(high);
    let resumed = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the low query did not resume")
        .unwrap()
        .unwrap();
    assert_eq!(cells(&resumed), alone);
    assert!(scheduler.running().is_empty(), "{:?}", scheduler.running());
}

#[tokio::test]
async fn equal_and_higher_priorities_do_not_wait() {
    let scheduler = Scheduler::new();
    let ctx = session(&scheduler);
    let _normal = scheduler.admit(Priority::NORMAL);
    let _low = scheduler.admit(Priority::LOW);
    for priority in ["normal", "high"] {
        ctx.tsjoin_sql(&format!("SET tsjoin.priority = {priority}"))
            .await
            .unwrap();
        let plan = physical_plan(&ctx, QUERY).await;
        let out =
            tokio::time::timeout(Duration::from_secs(10), collect(plan, ctx.task_ctx()))
                .await
                .unwrap_or_else(|_| panic!("a {priority} query waited"))
                .unwrap();
        assert_eq!(format!("{:?}", cells(&out)), ANSWER);
    }
}

#[tokio::test]
async fn a_paused_query_can_be_cancelled() {
    let scheduler = Scheduler::new();
    let ctx = session_at(&scheduler, "low").await;
    let high = scheduler.admit(Priority::HIGH);
    let mut stream = ctx
        .tsjoin_sql(QUERY)
        .await
        .unwrap()
        .execute_stream()
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_millis(200), stream.next()).await;
    assert!(first.is_err(), "the low query produced output while paused");
    drop(stream);
    // Dropping the paused stream released its inputs' admissions.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(scheduler.running(), vec![(Priority::HIGH, 1)]);
    drop(high);
    assert!(scheduler.running().is_empty());
}

#[tokio::test]
async fn concurrent_queries_of_every_priority_answer_as_alone() {
    let scheduler = Scheduler::new();
    let mut runs: Vec<
        tokio::task::JoinHandle<datafusion::error::Result<Vec<Vec<String>>>>,
    > = Vec::new();
    for (i, priority) in ["low", "normal", "high", "low", "high", "-3"]
        .iter()
        .enumerate()
    {
        let ctx = session(&scheduler);
        ctx.tsjoin_sql(&format!("SET tsjoin.priority = {priority}"))
            .await
            .unwrap();
        let sql = format!("SELECT count(*), sum(v + {i}) FROM t");
        runs.push(tokio::spawn(async move {
            let batches: Vec<RecordBatch> = ctx.tsjoin_sql(&sql).await?.collect().await?;
            datafusion::error::Result::Ok(cells(&batches))
        }));
    }
    for (i, run) in runs.into_iter().enumerate() {
        let got = tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .expect("a query never finished")
            .unwrap()
            .unwrap();
        let sum = 31_996_000 + 8000 * i as i64;
        assert_eq!(got, vec![vec!["8000".to_string(), sum.to_string()]]);
    }
    assert!(scheduler.running().is_empty());
}

#[tokio::test]
async fn the_gate_round_trips_through_proto() {
    let ctx = session_at(&Scheduler::new(), "-3").await;
    let plan = physical_plan(&ctx, "SELECT v FROM t WHERE v > 7990").await;
    let back = crate::support::physical_round_trip(&plan, &ctx);
    let shown = |p: &Arc<dyn datafusion::physical_plan::ExecutionPlan>| {
        displayable(p.as_ref()).indent(false).to_string()
    };
    assert_eq!(shown(&back), shown(&plan));
    assert!(shown(&back).contains("PriorityGateExec: priority=-3"));
}

/// A right side that, once read to its end, admits a query of high
/// priority into `scheduler` (kept in `slot`): the high query arrives just
/// as the join's build begins, after every gate has passed its batches.
#[derive(Debug)]
struct AdmitsHighAtEnd {
    schema: datafusion::arrow::datatypes::SchemaRef,
    batches: Vec<RecordBatch>,
    scheduler: Arc<Scheduler>,
    slot: Arc<parking_lot::Mutex<Option<datafusion_tsjoin::priority::Admission>>>,
    /// Whether the end admits the high query (not on the run alone).
    armed: Arc<std::sync::atomic::AtomicBool>,
}

impl datafusion::physical_plan::streaming::PartitionStream for AdmitsHighAtEnd {
    fn schema(&self) -> &datafusion::arrow::datatypes::SchemaRef {
        &self.schema
    }

    fn execute(
        &self,
        _ctx: Arc<datafusion::execution::TaskContext>,
    ) -> datafusion::physical_plan::SendableRecordBatchStream {
        let (scheduler, slot) = (Arc::clone(&self.scheduler), Arc::clone(&self.slot));
        let armed = Arc::clone(&self.armed);
        let end = futures::stream::poll_fn(move |_| {
            if armed.load(std::sync::atomic::Ordering::Acquire) {
                *slot.lock() = Some(scheduler.admit(Priority::HIGH));
            }
            std::task::Poll::Ready(None)
        });
        let batches = futures::stream::iter(self.batches.clone().into_iter().map(Ok));
        Box::pin(
            datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(
                Arc::clone(&self.schema),
                batches.chain(end),
            ),
        )
    }
}

/// The sum of metric `name` over the operator called `operator`.
fn metric(
    plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    operator: &str,
    name: &str,
) -> usize {
    if plan.name() == operator {
        return plan
            .metrics()
            .and_then(|m| m.sum_by_name(name))
            .map_or(0, |v| v.as_usize());
    }
    plan.children()
        .into_iter()
        .map(|c| metric(c, operator, name))
        .sum()
}

/// The build of a join's right side runs after its inputs have passed
/// their gates; it must pause too when a higher priority arrives then, and
/// finish with the same answer once it leaves.
#[tokio::test]
async fn a_joins_build_pauses_for_a_higher_priority_that_arrives_after_its_input() {
    use datafusion::arrow::array::TimestampNanosecondArray;
    use datafusion::arrow::datatypes::TimeUnit;
    use datafusion::catalog::streaming::StreamingTable;
    let ts = || Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false);
    let schema = Arc::new(Schema::new(vec![
        ts(),
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
    ]));
    let rows = 20_000i64;
    let batch = |from: i64| {
        RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(TimestampNanosecondArray::from_iter_values(
                    (from..from + rows).map(|i| i * 1_000_000),
                )),
                Arc::new(Int64Array::from_iter_values(
                    (from..from + rows).map(|i| i % 7),
                )),
                Arc::new(Int64Array::from_iter_values(from..from + rows)),
            ],
        )
        .unwrap()
    };
    let window_join = "SELECT count(*) AS n, sum(w) AS s FROM (SELECT t.k, sum(p.v) AS w \
        FROM trades t WINDOW JOIN prices p ON p.k = t.k \
        RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW) x";
    // The streaming path counts its right rows before it builds its
    // timeline, the others once their build is done.
    for (operator, sql, streaming) in [
        ("WindowJoinExec", window_join, false),
        ("WindowJoinExec", window_join, true),
        (
            "AsofJoinExec",
            "SELECT count(*) AS n, sum(p.v) AS s FROM trades t ASOF JOIN prices p ON (k)",
            false,
        ),
    ] {
        let scheduler = Scheduler::new();
        let ctx = crate::support::tsjoin_context(
            SessionConfig::new()
                .with_target_partitions(2)
                .with_extension(Arc::clone(&scheduler)),
        );
        let trades =
            MemTable::try_new(Arc::clone(&schema), vec![vec![batch(500)]]).unwrap();
        ctx.register_table("trades", Arc::new(trades)).unwrap();
        ctx.tsjoin_sql(&format!("SET tsjoin.window_join_streaming = {streaming}"))
            .await
            .unwrap();
        let slot = Arc::new(parking_lot::Mutex::new(None));
        let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let prices = AdmitsHighAtEnd {
            schema: Arc::clone(&schema),
            batches: vec![batch(0), batch(rows)],
            scheduler: Arc::clone(&scheduler),
            slot: Arc::clone(&slot),
            armed: Arc::clone(&armed),
        };
        let prices =
            StreamingTable::try_new(Arc::clone(&schema), vec![Arc::new(prices)]).unwrap();
        ctx.register_table("prices", Arc::new(prices)).unwrap();
        let alone = crate::support::query_rows(&ctx, sql).await;
        armed.store(true, std::sync::atomic::Ordering::Release);
        ctx.tsjoin_sql("SET tsjoin.priority = low").await.unwrap();
        let plan = physical_plan(&ctx, sql).await;
        let run = tokio::spawn(collect(Arc::clone(&plan), ctx.task_ctx()));
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(
            slot.lock().is_some(),
            "{operator}: the right side was not read"
        );
        assert!(!run.is_finished(), "{operator}: ran while a high query ran");
        if streaming {
            let shown = displayable(plan.as_ref()).indent(false).to_string();
            assert!(shown.contains("path=streaming"), "{shown}");
        } else {
            assert_eq!(
                metric(&plan, operator, "build_input_rows"),
                0,
                "{operator}: the build ran while a high query ran"
            );
        }
        slot.lock().take();
        let resumed = tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .unwrap_or_else(|_| panic!("{operator}: the build did not resume"))
            .unwrap()
            .unwrap();
        assert_eq!(cells(&resumed), alone, "{operator}");
        assert!(
            metric(&plan, operator, "build_input_rows") > 0,
            "{operator}"
        );
    }
}

/// A query counts as running from when its plan is made, so lower
/// priorities pause before its first task is even scheduled; its first
/// stream takes the place over, and a plan dropped unexecuted gives it up.
#[tokio::test]
async fn a_query_is_admitted_when_planned_until_its_streams_take_over() {
    let scheduler = Scheduler::new();
    let ctx = session_at(&scheduler, "high").await;
    let plan = physical_plan(&ctx, QUERY).await;
    assert_eq!(scheduler.running(), vec![(Priority::HIGH, 1)]);
    drop(plan);
    assert!(scheduler.running().is_empty(), "{:?}", scheduler.running());

    let plan = physical_plan(&ctx, QUERY).await;
    let out = collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
    assert_eq!(format!("{:?}", cells(&out)), ANSWER);
    // Executed to its end: nothing is held, although the plan still lives.
    assert!(scheduler.running().is_empty(), "{:?}", scheduler.running());
}

/// A plan kept without running (a cluster scheduler's, a client's that
/// never executes) gives its place up after the grace: a lower priority
/// then runs, it does not wait for good.
#[tokio::test]
async fn a_plan_kept_unexecuted_pauses_lower_priorities_only_briefly() {
    let scheduler = Scheduler::new();
    let high = session_at(&scheduler, "high").await;
    let kept = physical_plan(&high, QUERY).await;
    assert_eq!(scheduler.running(), vec![(Priority::HIGH, 1)]);
    let low = session_at(&scheduler, "low").await;
    let plan = physical_plan(&low, QUERY).await;
    let out = tokio::time::timeout(
        PLANNED_GRACE * 10,
        collect(Arc::clone(&plan), low.task_ctx()),
    )
    .await
    .expect("the low query waited past the grace")
    .unwrap();
    assert_eq!(format!("{:?}", cells(&out)), ANSWER);
    assert!(scheduler.running().is_empty(), "{:?}", scheduler.running());
    drop(kept);
}

/// The inline aggregate's dictionary scan reads the files itself, around
/// the gate: the query must still count as running while it reads, and
/// give its place up when it ends.
#[tokio::test]
async fn a_dictionary_scan_holds_the_querys_place_while_it_reads() {
    let scheduler = Scheduler::new();
    let ctx = session_at(&scheduler, "high").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.parquet");
    let copy = format!(
        "COPY (SELECT v % 10 AS k, v FROM t) TO '{}' STORED AS PARQUET",
        path.display()
    );
    crate::support::query_batches(&ctx, &copy).await;
    crate::support::register_dir(&ctx, "d", dir.path()).await;
    let sql = "SELECT k, count(*), sum(v) FROM d GROUP BY k ORDER BY k";
    let plan = physical_plan(&ctx, sql).await;
    let out = collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
    assert_eq!(out.iter().map(|b| b.num_rows()).sum::<usize>(), 10);
    assert!(
        crate::support::code_rows(&plan) > 0,
        "the dictionary scan did not run"
    );
    assert!(scheduler.running().is_empty(), "{:?}", scheduler.running());
}
