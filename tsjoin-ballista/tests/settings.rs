//! A client's `SET tsjoin.*` reaches the scheduler: the cluster plans with
//! it. (Until tsjoin listed its settings with their prefix, Ballista sent
//! them under keys the scheduler could not set, and the cluster planned
//! with its own defaults.)

use datafusion::common::Result;
use datafusion::prelude::{ParquetReadOptions, SessionConfig};
use datafusion_tsjoin::TsJoinContextExt;
use datafusion_tsjoin::testing::text::rows_as_text;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tsjoin_settings_travel_to_the_scheduler() -> Result<()> {
    let url = tsjoin_ballista::start_local_cluster(1, 2).await?;
    let ctx = tsjoin_ballista::cluster_context(&url, SessionConfig::new()).await?;
    let dir = tempfile::tempdir()?;
    for (name, value) in [("t", "qty"), ("q", "bid")] {
        let path = dir.path().join(format!("{name}.parquet"));
        datafusion_tsjoin::tsjoin_context(SessionConfig::new())
            .tsjoin_sql(&format!(
                "COPY (SELECT CAST(v * 1000000 AS TIMESTAMP) AS ts, \
                 CAST(v % 3 AS VARCHAR) AS sym, v AS {value} \
                 FROM generate_series(1, 20) AS g(v)) TO '{}' STORED AS PARQUET",
                path.display()
            ))
            .await?
            .collect()
            .await?;
        ctx.register_parquet(name, path.to_str().unwrap(), ParquetReadOptions::default())
            .await?;
        ctx.set_designated_timestamp(name, "ts")?;
    }
    let sql = "EXPLAIN SELECT t.qty, q.bid FROM t ASOF JOIN q ON (sym)";
    let plan = |ctx: datafusion::prelude::SessionContext| async move {
        let batches = ctx.tsjoin_sql(sql).await?.collect().await?;
        Ok::<_, datafusion::error::DataFusionError>(
            rows_as_text(&batches, None)?.join("\n"),
        )
    };
    // Cluster sessions default to partitioned keyed joins ...
    let default = plan(ctx.clone()).await?;
    assert!(default.contains("distribution=partitioned"), "{default}");
    // ... and the client's SET reaches the scheduler.
    ctx.tsjoin_sql("SET tsjoin.temporal_join_distribution = broadcast")
        .await?
        .collect()
        .await?;
    let set = plan(ctx.clone()).await?;
    assert!(set.contains("distribution=broadcast"), "{set}");
    assert!(!set.contains("distribution=partitioned"), "{set}");
    Ok(())
}
