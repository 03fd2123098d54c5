//! `tsjoin-bench cluster`: the cost of running on a cluster.
//!
//! WINDOW JOIN q1 of the reference workload and a GROUP BY over its
//! prices, run locally and on in-process clusters of 1 and 2 executors
//! (a scheduler and executors started by this process on loopback ports,
//! as `tsjoin-cli scheduler` / `executor` would run them), each query
//! the best of `runs`. q1 runs on the cluster in both distributions of
//! the temporal joins, partitioned and broadcast (the table notes which
//! one a cluster's `auto` picks for this data); locally in the session's
//! default (broadcast). Answers are
//! cross-checked; the table gives the times and the cluster/local ratios.

use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use datafusion_tsjoin::testing::text::rows_as_text;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;
use tsjoin_bench::runner::{QUERIES, session};

/// What `cluster` runs.
#[derive(clap::Args)]
pub struct ClusterArgs {
    /// WINDOW JOIN data (trades/ and prices/).
    #[arg(long, default_value = "benches/data/wj-1000000")]
    data: PathBuf,
    /// Executor counts to try.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    executors: Vec<usize>,
    /// Tasks each executor runs at once; the local run uses
    /// `executors x tasks` threads for the same parallelism.
    #[arg(long, default_value_t = 2)]
    tasks: usize,
    /// Repetitions of each query; the best counts.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Where the markdown result goes.
    #[arg(long, default_value = "benches/results/cluster")]
    out: PathBuf,
}

const GROUP_BY: &str = "SELECT sym, count(*) AS n, avg(bid) AS bid, max(ask) AS ask \
    FROM prices GROUP BY sym ORDER BY sym";

/// Best time of `runs` runs, and the last answer as text.
async fn best(ctx: &SessionContext, sql: &str, runs: usize) -> Result<(f64, String)> {
    let mut best = f64::MAX;
    let mut answer = String::new();
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        let batches = ctx.tsjoin_sql(sql).await?.collect().await?;
        best = best.min(start.elapsed().as_secs_f64());
        // Doubles to 9 significant digits: a cluster sums partial results
        // in another order, so an `avg`'s last digits may differ.
        answer = rows_as_text(&batches, Some(9))?.join("\n");
    }
    Ok((best, answer))
}

async fn cluster_session(
    args: &ClusterArgs,
    url: &str,
    threads: usize,
) -> Result<SessionContext> {
    let ctx = tsjoin_ballista::cluster_context(
        url,
        SessionConfig::new().with_target_partitions(threads),
    )
    .await?;
    for table in ["trades", "prices"] {
        let dir = args.data.join(table);
        ctx.register_parquet(
            table,
            dir.to_str().expect("utf-8 path"),
            ParquetReadOptions::default(),
        )
        .await?;
    }
    Ok(ctx)
}

/// Runs the comparison and writes `out/cluster.md`.
pub async fn run_cluster(args: ClusterArgs) -> Result<()> {
    // (name, SQL, the cluster's `tsjoin.temporal_join_distribution`)
    let queries = [
        (
            "WINDOW JOIN q1, cluster partitioned",
            QUERIES[0].2,
            "partitioned",
        ),
        (
            "WINDOW JOIN q1, cluster broadcast",
            QUERIES[0].2,
            "broadcast",
        ),
        ("GROUP BY sym", GROUP_BY, "auto"),
    ];
    let machine = super::machine();
    let mut table = format!(
        "Local vs in-process Ballista clusters, data {}, {} ({} cores), best of {} runs. \
         Local runs with executors x tasks threads.\n\n\
         | query | executors x tasks | local | cluster | cluster / local |\n|---|---|---|---|---|\n",
        args.data.display(),
        machine["cpu"].as_str().unwrap_or("?"),
        machine["cores"],
        args.runs.max(1),
    );
    for &executors in &args.executors {
        let threads = executors * args.tasks;
        let local = session(&args.data, threads, true, &[]).await?;
        let url = tsjoin_ballista::start_local_cluster(executors, args.tasks).await?;
        let remote = cluster_session(&args, &url, threads).await?;
        for (name, sql, distribution) in queries {
            remote
                .tsjoin_sql(&format!(
                    "SET tsjoin.temporal_join_distribution = {distribution}"
                ))
                .await?
                .collect()
                .await?;
            let (l, want) = best(&local, sql, args.runs).await?;
            let (c, got) = best(&remote, sql, args.runs).await?;
            if got != want {
                return Err(DataFusionError::Execution(format!(
                    "{name}: the cluster's answer differs\nlocal:\n{want}\ncluster:\n{got}"
                )));
            }
            let row = format!(
                "| {name} | {executors} x {} | {l:.3} s | {c:.3} s | {:.2}x |",
                args.tasks,
                c / l
            );
            eprintln!("{row}");
            writeln!(table, "{row}").unwrap();
        }
    }
    // Which distribution a cluster's `auto` picks for q1 over this data.
    if let Some(&executors) = args.executors.last() {
        let url = tsjoin_ballista::start_local_cluster(executors, args.tasks).await?;
        let remote = cluster_session(&args, &url, executors * args.tasks).await?;
        let plan = remote
            .tsjoin_sql(&format!("EXPLAIN {}", QUERIES[0].2))
            .await?
            .collect()
            .await?;
        let text = rows_as_text(&plan, None)?.join("\n");
        let auto = if text.contains("distribution=partitioned") {
            "partitioned"
        } else {
            "broadcast"
        };
        writeln!(
            table,
            "\nA cluster's `auto` runs q1 over this data {auto} (the prices against the \
             hash-join broadcast thresholds)."
        )
        .unwrap();
    }
    std::fs::create_dir_all(&args.out)?;
    let name = args
        .data
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("data");
    let path = args.out.join(format!("cluster-{name}.md"));
    std::fs::write(&path, &table)?;
    println!("{table}");
    eprintln!("written to {}", path.display());
    Ok(())
}
