//! `tsjoin-bench progress`: what the progress monitor costs and how well
//! it estimates.
//!
//! Per query (the four WINDOW JOIN queries, three GROUP BYs on the grid
//! data and the scans; with `--tsbs-data` the 16 TSBS queries, with
//! `--clickbench-data` the 43 ClickBench queries), one process, the same
//! files:
//! - overhead: the best of `runs` plain executions (DataFusion's
//!   `execute_stream`) against the best of `runs` with a
//!   [`ProgressHandle`](datafusion_tsjoin::progress::ProgressHandle) and a
//!   watcher taking a snapshot every 100 ms (the CLI's rate), interleaved;
//! - accuracy: in a run sampled every 10 ms, the fraction reported at 25, 50
//!   and 75% of the wall time against those true fractions of the time.

use super::tsbs_cmd;
use datafusion::error::Result;
use datafusion::physical_plan::execute_stream;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use datafusion_tsjoin::progress::{execute_with_progress, watch};
use futures::TryStreamExt;
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tsjoin_bench::clickbench;
use tsjoin_bench::groupby;
use tsjoin_bench::runner::{QUERIES, SCAN, session};
use tsjoin_bench::tsbs::queries::Dialect;

/// What `progress` runs.
#[derive(clap::Args)]
pub struct ProgressArgs {
    /// WINDOW JOIN data (trades/ and prices/).
    #[arg(long, default_value = "benches/data/wj-1000000")]
    wj_data: PathBuf,
    /// Grid GROUP BY data (from `groupby`).
    #[arg(long, default_value = "benches/data/grid-5000000")]
    grid_data: PathBuf,
    /// Threads (target partitions).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Runs per figure; the best counts.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// A TSBS IoT data set (from `tsbs`) whose 16 queries are added.
    #[arg(long)]
    tsbs_data: Option<PathBuf>,
    /// A ClickBench data set (from `clickbench-generate`: its
    /// `partitioned/` files) whose 43 queries are added.
    #[arg(long)]
    clickbench_data: Option<PathBuf>,
    /// Queries faster than this (seconds, plain) are timed but left out of
    /// the estimate's error: sampled every 10 ms they give a handful of
    /// snapshots, and the CLI shows no bar under a second anyway.
    #[arg(long, default_value_t = 0.2)]
    min_seconds: f64,
    /// Where the JSON and markdown results go.
    #[arg(long, default_value = "benches/results/progress")]
    out: PathBuf,
}

/// Snapshots timed per query for the cost of one.
const SNAPSHOTS: u32 = 1000;

/// One query's figures.
struct Row {
    name: String,
    plain: f64,
    monitored: f64,
    /// Reported fraction at 25/50/75% of the wall time.
    at: [f64; 3],
    /// Seconds of one snapshot.
    snapshot: f64,
}

async fn plain(ctx: &SessionContext, sql: &str) -> Result<f64> {
    let plan = ctx.tsjoin_sql(sql).await?.create_physical_plan().await?;
    let start = Instant::now();
    let _batches: Vec<_> = execute_stream(plan, ctx.task_ctx())?.try_collect().await?;
    Ok(start.elapsed().as_secs_f64())
}

/// A monitored run: its wall time, the (elapsed, fraction) samples and the
/// mean time of one snapshot of the finished plan.
async fn monitored(
    ctx: &SessionContext,
    sql: &str,
    every: Duration,
) -> Result<(f64, Vec<(f64, f64)>, f64)> {
    let plan = ctx.tsjoin_sql(sql).await?.create_physical_plan().await?;
    let start = Instant::now();
    let (stream, handle) = execute_with_progress(plan, ctx.task_ctx())?;
    let mut samples = vec![];
    let (batches, ()) = futures::join!(
        stream.try_collect::<Vec<_>>(),
        watch(handle.clone(), every, |s| samples
            .push((s.elapsed.as_secs_f64(), s.fraction)))
    );
    batches?;
    let wall = start.elapsed().as_secs_f64();
    let timer = Instant::now();
    for _ in 0..SNAPSHOTS {
        std::hint::black_box(handle.snapshot());
    }
    Ok((
        wall,
        samples,
        timer.elapsed().as_secs_f64() / SNAPSHOTS as f64,
    ))
}

/// The fraction last reported at or before `t`.
fn reported_at(samples: &[(f64, f64)], t: f64) -> f64 {
    samples
        .iter()
        .take_while(|(e, _)| *e <= t)
        .last()
        .map_or(0.0, |(_, f)| *f)
}

async fn measure(
    ctx: &SessionContext,
    name: &str,
    sql: &str,
    runs: usize,
) -> Result<Row> {
    // Warm the page cache and the footers' cache.
    plain(ctx, sql).await?;
    let (mut best_plain, mut best_monitored) = (f64::MAX, f64::MAX);
    for _ in 0..runs {
        best_plain = best_plain.min(plain(ctx, sql).await?);
        let (t, _, _) = monitored(ctx, sql, Duration::from_millis(100)).await?;
        best_monitored = best_monitored.min(t);
    }
    let (wall, samples, snapshot) =
        monitored(ctx, sql, Duration::from_millis(10)).await?;
    let at = [0.25, 0.5, 0.75].map(|q| reported_at(&samples, q * wall));
    let row = Row {
        name: name.to_string(),
        plain: best_plain,
        monitored: best_monitored,
        at,
        snapshot,
    };
    eprintln!(
        "{name}: plain {:.3} s, monitored {:.3} s ({:+.2}%), snapshot {:.1} µs, \
         at 25/50/75%: {:.0}/{:.0}/{:.0}%",
        row.plain,
        row.monitored,
        (row.monitored / row.plain - 1.0) * 100.0,
        row.snapshot * 1e6,
        at[0] * 100.0,
        at[1] * 100.0,
        at[2] * 100.0
    );
    Ok(row)
}

/// Runs the progress benchmark and writes `progress.{md,json}`.
pub async fn run(args: ProgressArgs) -> Result<()> {
    let mut rows = vec![];
    let ctx = session(&args.wj_data, args.threads, true, &[]).await?;
    for (name, _, sql) in QUERIES {
        rows.push(measure(&ctx, &format!("window join {name}"), sql, args.runs).await?);
    }
    for (i, sql) in SCAN.iter().enumerate() {
        rows.push(measure(&ctx, &format!("scan {i}"), sql, args.runs).await?);
    }
    let grid = groupby::session(&args.grid_data, "grid", args.threads, true, &[]).await?;
    for key in ["k1k", "k100k", "kall"] {
        let sql = groupby::grid_sql(key, "count(*), sum(v)");
        rows.push(measure(&grid, &format!("group by {key}"), &sql, args.runs).await?);
    }
    let grid_df =
        groupby::session(&args.grid_data, "grid", args.threads, false, &[]).await?;
    let sql = groupby::grid_sql("k100k", "count(*), sum(v)");
    rows.push(measure(&grid_df, "group by k100k (DataFusion's)", &sql, args.runs).await?);
    if let Some(dir) = &args.tsbs_data {
        let ctx = tsbs_cmd::session(dir, args.threads, &[]).await?;
        for q in tsbs_cmd::queries_for(dir)? {
            let sql = q.sql(Dialect::Tsjoin);
            rows.push(measure(&ctx, &format!("tsbs {}", q.name), &sql, args.runs).await?);
        }
    }
    if let Some(dir) = &args.clickbench_data {
        let ctx =
            clickbench::session(&dir.join("partitioned"), args.threads, true).await?;
        for (i, sql) in clickbench::queries().into_iter().enumerate() {
            let name = format!("clickbench Q{i}");
            rows.push(measure(&ctx, &name, sql, args.runs).await?);
        }
    }

    let mut md = String::from(
        "| query | plain s | monitored s | difference | one snapshot µs | \
         snapshot cost at 10/s | reported at 25% | at 50% | at 75% |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let mut errors = vec![];
    for r in &rows {
        md.push_str(&format!(
            "| {} | {:.3} | {:.3} | {:+.1}% | {:.1} | {:.3}% | {:.0}% | {:.0}% | {:.0}% |\n",
            r.name,
            r.plain,
            r.monitored,
            (r.monitored / r.plain - 1.0) * 100.0,
            r.snapshot * 1e6,
            // Ten snapshots a second, as a share of the query's wall time.
            r.snapshot * 10.0 * 100.0,
            r.at[0] * 100.0,
            r.at[1] * 100.0,
            r.at[2] * 100.0
        ));
        if r.plain >= args.min_seconds {
            for (i, q) in [0.25, 0.5, 0.75].iter().enumerate() {
                errors.push((r.at[i] - q).abs());
            }
        }
    }
    let total_plain: f64 = rows.iter().map(|r| r.plain).sum();
    let total_monitored: f64 = rows.iter().map(|r| r.monitored).sum();
    let mean_error = errors.iter().sum::<f64>() / errors.len().max(1) as f64;
    md.push_str(&format!(
        "\nAll queries: plain {total_plain:.3} s, monitored {total_monitored:.3} s \
         ({:+.2}%); mean absolute error of the estimate {:.1} points over the {} \
         queries of at least {} s.\n",
        (total_monitored / total_plain - 1.0) * 100.0,
        mean_error * 100.0,
        errors.len() / 3,
        args.min_seconds
    ));
    println!("{md}");
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("progress.md"), &md)?;
    let json = json!({
        "threads": args.threads,
        "runs": args.runs,
        "rows": rows.iter().map(|r| json!({
            "query": r.name, "plain_s": r.plain, "monitored_s": r.monitored,
            "reported_at": r.at, "snapshot_s": r.snapshot,
        })).collect::<Vec<_>>(),
    });
    std::fs::write(
        args.out.join("progress.json"),
        serde_json::to_string_pretty(&json).expect("json"),
    )?;
    Ok(())
}
