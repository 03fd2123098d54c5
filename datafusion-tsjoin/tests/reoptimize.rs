//! Plans optimized a second time, as a distributed scheduler does: Ballista
//! plans the query again on the scheduler and its adaptive planner runs
//! DataFusion's physical optimizer over the plan after every stage. A plan
//! whose answer depends on something the optimizer is free to remove (a
//! merge that no operator asks for) answers differently there.

use crate::support::{cells, context};
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, collect};
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use datafusion_tsjoin::tail::TailExec;
use std::sync::Arc;

/// `plan` after DataFusion's default physical optimizer rules (the set
/// Ballista's adaptive planner runs after each stage).
fn optimize_again(
    ctx: &SessionContext,
    plan: Arc<dyn ExecutionPlan>,
) -> Arc<dyn ExecutionPlan> {
    let state = ctx.state();
    let options = state.config_options();
    PhysicalOptimizer::new()
        .rules
        .iter()
        .fold(plan, |plan, rule| rule.optimize(plan, options).unwrap())
}

/// Every [`TailExec`] of `plan` reads one input partition.
fn tails_read_one_partition(plan: &Arc<dyn ExecutionPlan>) -> usize {
    let here = match plan.downcast_ref::<TailExec>() {
        Some(tail) => {
            assert_eq!(
                tail.input().output_partitioning().partition_count(),
                1,
                "TailExec over a partitioned input"
            );
            1
        }
        None => 0,
    };
    here + plan
        .children()
        .into_iter()
        .map(tails_read_one_partition)
        .sum::<usize>()
}

async fn sorted_rows(ctx: &SessionContext, plan: Arc<dyn ExecutionPlan>) -> Vec<String> {
    let batches = collect(plan, ctx.task_ctx()).await.unwrap();
    let mut rows: Vec<String> =
        cells(&batches).into_iter().map(|r| r.join("|")).collect();
    rows.sort();
    rows
}

/// QuestDB's negative LIMIT over inputs without a reversible order (a
/// GROUP BY, DISTINCT, a join) is a TailExec over a merge: optimized again,
/// the merge stays (the tail asks for one partition) and the answer is the
/// same. Before, a second `EnsureRequirements` dropped the
/// SortPreservingMergeExec under `LIMIT m, -n` and the tail read the sorted
/// partitions one after the other: `LIMIT 1, -2` over 5 groups answered
/// nothing on Ballista's adaptive planner.
#[tokio::test]
async fn tail_answers_survive_a_second_optimization() {
    let queries = [
        "select i % 5 k from y group by i % 5 order by k limit 1, -2",
        "select i % 7 k, count(*) c from y group by i % 7 order by k limit -3",
        "select i % 7 k, count(*) c from y group by i % 7 order by c, k limit 2, -1",
        "select distinct i % 4 k from y order by k limit -2",
        "select a.i from y a join y b on a.i = b.i + 1 order by a.i limit 3, -2",
    ];
    let mut tails = 0;
    for partitions in 1..=4 {
        let ctx = context(partitions);
        ctx.tsjoin_sql(
            "create table y as select cast(value as int) i \
             from generate_series(1, 300)",
        )
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
        for sql in queries {
            let plan = crate::support::physical_plan(&ctx, sql).await;
            tails += tails_read_one_partition(&plan);
            let want = sorted_rows(&ctx, Arc::clone(&plan)).await;
            assert!(!want.is_empty(), "{sql}");
            let again = optimize_again(&ctx, plan);
            tails_read_one_partition(&again);
            let got = sorted_rows(&ctx, again).await;
            assert_eq!(got, want, "{partitions} partitions: {sql}");
        }
    }
    assert!(tails > 0, "no query planned a TailExec");
}

/// QuestDB's `LIMIT -n` over files without a designated timestamp takes
/// the last rows in file order, then row order, also when the files are
/// read as several partitions (the tail reads an unordered input partition
/// after partition). Under `tsjoin.distributed` (cluster sessions) the tail
/// asks for one merged input partition instead, and keeps every row.
#[tokio::test]
async fn tail_of_unordered_files_keeps_file_order_locally() {
    let dir = tempfile::tempdir().unwrap();
    let writer = context(1);
    for f in 0..4 {
        let path = dir.path().join(format!("part-{f}.parquet"));
        writer
            .tsjoin_sql(&format!(
                "COPY (SELECT {f} * 100 + value AS id FROM generate_series(1, 50)) \
                 TO '{}'",
                path.display()
            ))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
    }
    for partitions in 1..=4 {
        let ctx = context(partitions);
        crate::support::register_dir(&ctx, "t", dir.path()).await;
        let rows = crate::support::query_rows(&ctx, "SELECT id FROM t LIMIT -3").await;
        assert_eq!(rows, [["348"], ["349"], ["350"]], "{partitions} partitions");
        let rows =
            crate::support::query_rows(&ctx, "SELECT id FROM t LIMIT -52, -49").await;
        assert_eq!(rows, [["249"], ["250"], ["301"]], "{partitions} partitions");

        ctx.tsjoin_sql("SET tsjoin.distributed = true")
            .await
            .unwrap();
        let plan = crate::support::physical_plan(&ctx, "SELECT id FROM t LIMIT -3").await;
        assert_eq!(tails_read_one_partition(&plan), 1);
        let mut rows =
            crate::support::query_rows(&ctx, "SELECT id FROM t LIMIT -200").await;
        rows.sort();
        assert_eq!(rows.len(), 200, "{partitions} partitions, distributed");
    }
}
