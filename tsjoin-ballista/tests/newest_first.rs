//! `ORDER BY ts DESC LIMIT n` with a WHERE and QuestDB's `LIMIT -n` (the
//! newest-first scan) over a table of several Parquet files (1 to 3 scan
//! partitions): cluster answers equal local ones, alone, under UNION ALL
//! and in a join, with Ballista's adaptive planner on and off, and the
//! cluster plans use the newest-first scan too. Its scan once kept its
//! file groups on a cluster, where the task saw the first group alone and
//! lost the rows of the others.

use ballista_core::extension::SessionConfigExt;
use datafusion::arrow::array::RecordBatch;
use datafusion::common::Result;
use datafusion::physical_plan::{ExecutionPlan, displayable};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_tsjoin::testing::text::rows_as_text;
use datafusion_tsjoin::{TsJoinContextExt, tsjoin_context};
use std::sync::Arc;

fn sorted_rows(batches: &[RecordBatch]) -> Result<Vec<String>> {
    let mut rows = rows_as_text(batches, None)?;
    rows.sort();
    Ok(rows)
}

fn plan_text(plan: &Arc<dyn ExecutionPlan>) -> String {
    displayable(plan.as_ref()).indent(true).to_string()
}

/// Three Parquet files of 200 rows each (row groups of 50), time ranges
/// overlapping, written in `dir`; registered as `t` on both sessions.
async fn tables(
    local: &SessionContext,
    remote: &SessionContext,
    dir: &str,
) -> Result<()> {
    for f in 0..3 {
        local
            .tsjoin_sql(&format!(
                "COPY (SELECT CAST((v * 3 + {f}) * 1000000 AS TIMESTAMP) AS ts, \
                 (v * 7 + {f}) % 100 AS x FROM generate_series(1, 200) AS g(v)) \
                 TO '{dir}/part-{f}.parquet' \
                 OPTIONS (format.max_row_group_size 50)"
            ))
            .await?
            .collect()
            .await?;
    }
    for ctx in [local, remote] {
        ctx.register_parquet("t", dir, ParquetReadOptions::default())
            .await?;
        ctx.set_designated_timestamp("t", "ts")?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn newest_first_scans_answer_as_locally() -> Result<()> {
    let url = tsjoin_ballista::start_local_cluster(2, 2).await?;
    for partitions in 1..=3 {
        for adaptive in [true, false] {
            compare(&url, partitions, adaptive).await?;
        }
    }
    Ok(())
}

async fn compare(url: &str, partitions: usize, adaptive: bool) -> Result<()> {
    let config = || SessionConfig::new().with_target_partitions(partitions);
    let local = tsjoin_context(config());
    let remote = tsjoin_ballista::cluster_context(
        url,
        config().with_ballista_adaptive_query_planner(adaptive),
    )
    .await?;
    let dir = tempfile::tempdir()?;
    tables(&local, &remote, dir.path().to_str().unwrap()).await?;
    let queries = [
        "SELECT ts, x FROM t WHERE x > 50 ORDER BY ts DESC LIMIT 7",
        "SELECT ts, x FROM t WHERE x > 50 LIMIT -7",
        "SELECT ts, x FROM t WHERE x < 10 LIMIT -2, -1",
        "(SELECT ts, x FROM t WHERE x > 50 ORDER BY ts DESC LIMIT 4) \
         UNION ALL (SELECT ts, x FROM t WHERE x < 20 ORDER BY ts DESC LIMIT 3)",
        "SELECT a.ts, a.x, b.x FROM (SELECT * FROM t WHERE x > 50 LIMIT -5) a \
         JOIN (SELECT * FROM t WHERE x > 20 LIMIT -40) b ON a.ts = b.ts",
    ];
    let (mut newest_first, mut on_cluster) = (0, 0);
    for sql in queries {
        let plan = local.tsjoin_sql(sql).await?.create_physical_plan().await?;
        if plan_text(&plan).contains("NewestFirstTopKExec") {
            newest_first += 1;
        }
        let explained = remote
            .tsjoin_sql(&format!("EXPLAIN {sql}"))
            .await?
            .collect()
            .await?;
        if rows_as_text(&explained, None)?
            .iter()
            .any(|r| r.contains("NewestFirstTopKExec"))
        {
            on_cluster += 1;
        }
        let want = sorted_rows(&local.tsjoin_sql(sql).await?.collect().await?)?;
        assert!(!want.is_empty(), "{sql}");
        let got = sorted_rows(&remote.tsjoin_sql(sql).await?.collect().await?)?;
        assert_eq!(
            got, want,
            "cluster answer differs ({partitions} partitions, adaptive={adaptive}): {sql}"
        );
    }
    assert_eq!(
        newest_first,
        queries.len(),
        "a query ran without the newest-first scan"
    );
    assert_eq!(
        on_cluster,
        queries.len(),
        "a cluster plan has no newest-first scan ({partitions} partitions, adaptive={adaptive})"
    );
    Ok(())
}
