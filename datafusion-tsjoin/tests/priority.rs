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
use datafusion_tsjoin::priority::{Priority, Scheduler};
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;

/// A tsjoin session ranked by its own scheduler (so that tests running at
/// the same time do not pause each other), with a table `t` of 8 batches.
fn session(scheduler: &Arc<Scheduler>) -> SessionContext {
    let config = SessionConfig::new()
        .with_target_partitions(2)
        .with_extension(Arc::clone(scheduler));
    let ctx = datafusion_tsjoin::tsjoin_context(config);
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
    let ctx = session(&scheduler);
    ctx.tsjoin_sql("SET tsjoin.priority = low").await.unwrap();
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
    let ctx = session(&scheduler);
    ctx.tsjoin_sql("SET tsjoin.priority = low").await.unwrap();
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
    let ctx = session(&Scheduler::new());
    ctx.tsjoin_sql("SET tsjoin.priority = -3").await.unwrap();
    let plan = physical_plan(&ctx, "SELECT v FROM t WHERE v > 7990").await;
    let back = crate::support::physical_round_trip(&plan, &ctx);
    let shown = |p: &Arc<dyn datafusion::physical_plan::ExecutionPlan>| {
        displayable(p.as_ref()).indent(false).to_string()
    };
    assert_eq!(shown(&back), shown(&plan));
    assert!(shown(&back).contains("PriorityGateExec: priority=-3"));
}
