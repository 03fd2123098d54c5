//! A client's `SET tsjoin.*` reaches the scheduler: the cluster plans with
//! it. (Until tsjoin listed its settings with their prefix, Ballista sent
//! them under keys the scheduler could not set, and the cluster planned
//! with its own defaults.) A keyed join over multi-file tables answers as
//! locally on the cluster, broadcast (`auto` under the broadcast
//! thresholds) and partitioned (its first plan, before the shuffles, was
//! once refused as not co-partitioned by the adaptive planner); over the
//! thresholds `auto` partitions.

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
    // `sql`'s rows as text, sorted.
    let rows_of = |c: SessionContext, sql: &'static str| async move {
        let batches = c.tsjoin_sql(sql).await?.collect().await?;
        let mut rows = rows_as_text(&batches, None)?;
        rows.sort();
        Ok::<_, datafusion::error::DataFusionError>(rows)
    };
    let query = "SELECT t.ts, t.qty, q.bid FROM t ASOF JOIN q ON (sym)";
    let rows = |c: SessionContext| rows_of(c, query);
    let want = rows(local.clone()).await?;
    assert_eq!(want.len(), 40);
    let plan = |c: SessionContext| async move {
        let explained = rows_of(
            c,
            "EXPLAIN SELECT t.ts, t.qty, q.bid FROM t ASOF JOIN q ON (sym)",
        );
        Ok::<_, datafusion::error::DataFusionError>(explained.await?.join("\n"))
    };
    let set = |ctx: SessionContext, setting: &'static str| async move {
        ctx.tsjoin_sql(&format!("SET {setting}"))
            .await?
            .collect()
            .await?;
        Ok::<_, datafusion::error::DataFusionError>(())
    };
    // A right side under Ballista's broadcast thresholds: `auto` broadcasts.
    let plan_text = plan(ctx.clone()).await?;
    assert!(plan_text.contains("distribution=broadcast"), "{plan_text}");
    assert!(
        !plan_text.contains("distribution=partitioned"),
        "{plan_text}"
    );
    assert_eq!(rows(ctx.clone()).await?, want, "broadcast on the cluster");
    // The client's SET reaches the scheduler: partitioned, and over
    // two-partition scans it answers as locally.
    set(
        ctx.clone(),
        "tsjoin.temporal_join_distribution = partitioned",
    )
    .await?;
    let plan_text = plan(ctx.clone()).await?;
    assert!(
        plan_text.contains("distribution=partitioned"),
        "{plan_text}"
    );
    assert_eq!(rows(ctx.clone()).await?, want, "partitioned on the cluster");
    // Over the thresholds (here 0), `auto` partitions on a cluster.
    set(ctx.clone(), "tsjoin.temporal_join_distribution = auto").await?;
    set(
        ctx.clone(),
        "datafusion.optimizer.hash_join_single_partition_threshold = 0",
    )
    .await?;
    set(
        ctx.clone(),
        "datafusion.optimizer.hash_join_single_partition_threshold_rows = 0",
    )
    .await?;
    let plan_text = plan(ctx.clone()).await?;
    assert!(
        plan_text.contains("distribution=partitioned"),
        "{plan_text}"
    );
    Ok(())
}
