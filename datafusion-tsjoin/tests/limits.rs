//! Memory budgets and cancellation.

use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::{TsJoinContextExt, TsJoinSessionStateBuilderExt};
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;

fn limited_context(bytes: usize) -> SessionContext {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(bytes, 1.0)
        .build()
        .unwrap();
    let state = SessionStateBuilder::new()
        .with_config(SessionConfig::new().with_target_partitions(2))
        .with_runtime_env(Arc::new(runtime))
        .with_default_features()
        .with_tsjoin()
        .build();
    SessionContext::new_with_state(state)
}

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
    let ctx = limited_context(256 * 1024);
    big_tables(&ctx, 200_000).await;
    let err = ctx
        .tsjoin_sql(QUERY)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("Resources exhausted") && err.contains("WindowJoinExec"),
        "{err}"
    );
}

#[tokio::test]
async fn dropping_the_stream_stops_the_work() {
    let ctx = limited_context(usize::MAX / 2);
    big_tables(&ctx, 300_000).await;
    let mut stream = ctx
        .tsjoin_sql(QUERY)
        .await
        .unwrap()
        .execute_stream()
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(60), stream.next())
        .await
        .unwrap();
    assert!(first.unwrap().unwrap().num_rows() > 0);
    drop(stream); // must return promptly and abort the spawned tasks
}
