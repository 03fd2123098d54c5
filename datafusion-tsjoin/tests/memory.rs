//! Operators under small memory limits: the answer is right (spilling or
//! handing over to DataFusion's spilling operators) or the error is a clear
//! `Resources exhausted` naming the operator; the process stays alive.

use crate::support::{cells, explained_plan, physical_plan};
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::{TsJoinContextExt, TsJoinSessionStateBuilderExt};
use std::sync::Arc;

/// A tsjoin session with `partitions` target partitions and a memory limit
/// of `bytes`.
pub fn limited(bytes: usize, partitions: usize) -> SessionContext {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(bytes, 1.0)
        .build()
        .unwrap();
    let state = SessionStateBuilder::new()
        .with_config(SessionConfig::new().with_target_partitions(partitions))
        .with_runtime_env(Arc::new(runtime))
        .with_default_features()
        .with_tsjoin()
        .build();
    SessionContext::new_with_state(state)
}

async fn sorted_rows(
    ctx: &SessionContext,
    sql: &str,
) -> datafusion::common::Result<Vec<Vec<String>>> {
    let batches = ctx.tsjoin_sql(sql).await?.collect().await?;
    let mut rows = cells(&batches);
    rows.sort();
    Ok(rows)
}

/// The reported case, scaled down: one group per row (timestamps all
/// distinct) under a limit the inline tables cannot fit in. DataFusion's
/// aggregate answers by spilling; the inline aggregate hands over to it and
/// gives the same answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_aggregate_with_many_groups_hands_over_under_a_small_limit() {
    for partitions in [1, 2, 4] {
        let ctx = limited(16 << 20, partitions);
        ctx.tsjoin_sql(
            "CREATE TABLE prices AS SELECT to_timestamp_micros(value) AS ts, \
             CAST(value % 1000 AS DOUBLE) AS bid FROM generate_series(1, 400000)",
        )
        .await
        .unwrap();
        let sql = "SELECT ts, count(*), sum(bid) FROM prices GROUP BY ts";
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate = false")
            .await
            .unwrap();
        let want = sorted_rows(&ctx, sql).await.unwrap();
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate = true")
            .await
            .unwrap();
        assert!(
            explained_plan(&ctx, sql)
                .await
                .contains("InlineAggregateExec")
        );
        let plan = physical_plan(&ctx, sql).await;
        let mut got = cells(&collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap());
        got.sort();
        assert_eq!(got.len(), 400_000);
        assert!(got == want, "partitions {partitions}");
        // It did hand over: the inline tables did not fit.
        assert!(
            metric(&plan, "InlineAggregateExec", "fallback") > 0,
            "{partitions}"
        );
    }
}

/// The sum of metric `name` over the nodes called `node` of an executed
/// plan.
pub fn metric(plan: &Arc<dyn ExecutionPlan>, node: &str, name: &str) -> usize {
    let mine = if plan.name() == node {
        plan.metrics()
            .and_then(|m| m.sum_by_name(name))
            .map_or(0, |v| v.as_usize())
    } else {
        0
    };
    mine + plan
        .children()
        .into_iter()
        .map(|c| metric(c, node, name))
        .sum::<usize>()
}
