//! A client's `SET tsjoin.*` reaches the scheduler: the cluster plans with
//! it. (Until tsjoin listed its settings with their prefix, Ballista sent
//! them under keys the scheduler could not set, and the cluster planned
//! with its own defaults.) And a keyed join over multi-file tables runs
//! partitioned on the cluster, with the adaptive planner, to the local
//! answer (its first plan, before the shuffles, was once refused as not
//! co-partitioned).

use datafusion::common::Result;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use datafusion_tsjoin::testing::text::rows_as_text;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tsjoin_settings_travel_to_the_scheduler() -> Result<()> {
    let url = tsjoin_ballista::start_local_cluster(2, 1).await?;
    let config = || SessionConfig::new().with_target_partitions(2);
    let ctx = tsjoin_ballista::cluster_context(&url, config()).await?;
    let local = datafusion_tsjoin::tsjoin_context(config());
    let dir = tempfile::tempdir()?;
    for (name, value) in [("t", "qty"), ("q", "bid")] {
        // Two files per table: scans of two partitions.
        let table = dir.path().join(name);
        std::fs::create_dir(&table)?;
        for (file, offset) in [("a", 0), ("b", 1)] {
            let path = table.join(format!("{file}.parquet"));
            local
                .tsjoin_sql(&format!(
                    "COPY (SELECT CAST((v * 2 + {offset}) * 1000000 AS TIMESTAMP) AS ts, \
                     CAST(v % 3 AS VARCHAR) AS sym, v AS {value} \
                     FROM generate_series(1, 20) AS g(v)) TO '{}' STORED AS PARQUET",
                    path.display()
                ))
                .await?
                .collect()
                .await?;
        }
        for c in [&ctx, &local] {
            c.register_parquet(
                name,
                table.to_str().unwrap(),
                ParquetReadOptions::default(),
            )
            .await?;
            c.set_designated_timestamp(name, "ts")?;
        }
    }
    let query = "SELECT t.ts, t.qty, q.bid FROM t ASOF JOIN q ON (sym)";
    let rows = |c: SessionContext| async move {
        let batches = c.tsjoin_sql(query).await?.collect().await?;
        let mut rows = rows_as_text(&batches, None)?;
        rows.sort();
        Ok::<_, datafusion::error::DataFusionError>(rows)
    };
    let want = rows(local.clone()).await?;
    assert_eq!(want.len(), 40);
    assert_eq!(rows(ctx.clone()).await?, want, "partitioned on the cluster");
    let sql = "EXPLAIN SELECT t.ts, t.qty, q.bid FROM t ASOF JOIN q ON (sym)";
    let plan = |ctx: SessionContext| async move {
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
    assert_eq!(rows(ctx.clone()).await?, want, "broadcast on the cluster");
    Ok(())
}
