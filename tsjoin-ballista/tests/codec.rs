//! The cluster codecs route tsjoin's and Ballista's nodes, and refuse what
//! neither encodes with an error naming it.

use datafusion::common::Result;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;
use datafusion_proto::bytes::{
    physical_plan_from_bytes_with_extension_codec,
    physical_plan_to_bytes_with_extension_codec,
};
use datafusion_tsjoin::{TsJoinContextExt, tsjoin_context};
use std::sync::Arc;
use tsjoin_ballista::codec::ClusterPhysicalCodec;

fn names(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<String>) {
    out.push(plan.name().to_string());
    for c in plan.children() {
        names(c, out);
    }
}

#[tokio::test]
async fn tsjoin_operators_round_trip_through_the_cluster_codec() -> Result<()> {
    let ctx = tsjoin_context(SessionConfig::new().with_target_partitions(2));
    ctx.tsjoin_sql(
        "CREATE TABLE t (ts TIMESTAMP, k VARCHAR, v DOUBLE) AS VALUES
         ('2024-01-01T00:00:00', 'a', 1.0), ('2024-01-01T00:00:01', 'b', 2.0)",
    )
    .await?;
    let codec = ClusterPhysicalCodec::default();
    for sql in [
        "SELECT t.k, sum(r.v) FROM t WINDOW JOIN t r ON (k) \
         RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW",
        "SELECT t.k, r.v FROM t ASOF JOIN t r ON (k)",
        "SELECT k, count(*), sum(v) FROM t GROUP BY k",
        "SELECT k, approx_percentile(v, 0.5) FROM t GROUP BY k",
    ] {
        let plan = ctx.tsjoin_sql(sql).await?.create_physical_plan().await?;
        let bytes =
            physical_plan_to_bytes_with_extension_codec(Arc::clone(&plan), &codec)?;
        let back = physical_plan_from_bytes_with_extension_codec(
            &bytes,
            &ctx.task_ctx(),
            &codec,
        )?;
        let (mut a, mut b) = (vec![], vec![]);
        names(&plan, &mut a);
        names(&back, &mut b);
        assert_eq!(a, b, "{sql}");
    }
    Ok(())
}
