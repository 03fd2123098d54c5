//! `tsjoin-bench priority`: Quickstep's Fig. 11 replayed on our data.
//!
//! `lows` long queries (WINDOW JOIN q1 over the reference workload) start
//! together; after `delay` a short query (a GROUP BY over the prices)
//! arrives. Three runs, each the best of `runs`:
//! - alone: the short query with nothing else running;
//! - without priorities: every query at `normal`;
//! - with priorities: the long ones at `low`, the short one at `high`.
//!
//! Reported: the short query's latency in each (and its ratio to alone),
//! and the makespan of all queries together, with and without priorities
//! (the throughput cost of pausing).

use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use futures::TryStreamExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tsjoin_bench::runner::{QUERIES, session};

/// What `priority` runs.
#[derive(clap::Args)]
pub struct PriorityArgs {
    /// WINDOW JOIN data (trades/ and prices/).
    #[arg(long, default_value = "benches/data/wj-1000000")]
    data: PathBuf,
    /// Threads (target partitions) of every session; the runtime has as
    /// many workers as the machine has cores.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Long low-priority queries started together.
    #[arg(long, default_value_t = 4)]
    lows: usize,
    /// Milliseconds after the long ones start that the short one arrives.
    #[arg(long, default_value_t = 500)]
    delay_ms: u64,
    /// Repetitions of each scenario; the best counts.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Where the markdown result goes.
    #[arg(long, default_value = "benches/results/priority")]
    out: PathBuf,
}

/// The short query: per symbol statistics of the prices.
const SHORT: &str = "SELECT sym, count(*), avg(bid), max(ask) FROM prices GROUP BY sym";

async fn run_query(ctx: SessionContext, sql: String) -> Result<Duration> {
    let start = Instant::now();
    let _: Vec<_> = ctx
        .tsjoin_sql(&sql)
        .await?
        .execute_stream()
        .await?
        .try_collect()
        .await?;
    Ok(start.elapsed())
}

async fn ctx_at(args: &PriorityArgs, priority: &str) -> Result<SessionContext> {
    session(
        &args.data,
        args.threads,
        true,
        &[("tsjoin.priority", priority)],
    )
    .await
}

/// One scenario: (short query's latency, makespan of all).
async fn scenario(args: &PriorityArgs, low: &str, high: &str) -> Result<(f64, f64)> {
    let start = Instant::now();
    let mut lows = vec![];
    for _ in 0..args.lows {
        let ctx = ctx_at(args, low).await?;
        lows.push(tokio::spawn(run_query(ctx, QUERIES[0].2.to_string())));
    }
    tokio::time::sleep(Duration::from_millis(args.delay_ms)).await;
    let ctx = ctx_at(args, high).await?;
    let short = run_query(ctx, SHORT.to_string()).await?;
    for l in lows {
        l.await
            .map_err(|e| datafusion::error::DataFusionError::External(e.into()))??;
    }
    Ok((short.as_secs_f64(), start.elapsed().as_secs_f64()))
}

pub async fn run(args: PriorityArgs) -> Result<()> {
    if !args.data.join("prices").exists() {
        return Err(datafusion::error::DataFusionError::Plan(format!(
            "no data at {} (run `tsjoin-bench generate --trades 1000000 --data {}`)",
            args.data.display(),
            args.data.display()
        )));
    }
    let mut alone = f64::MAX;
    let mut long_alone = f64::MAX;
    let (mut without, mut with) = ((f64::MAX, f64::MAX), (f64::MAX, f64::MAX));
    for r in 0..args.runs {
        let ctx = ctx_at(&args, "normal").await?;
        alone = alone.min(run_query(ctx.clone(), SHORT.into()).await?.as_secs_f64());
        long_alone =
            long_alone.min(run_query(ctx, QUERIES[0].2.into()).await?.as_secs_f64());
        let w = scenario(&args, "normal", "normal").await?;
        let p = scenario(&args, "low", "high").await?;
        without = (without.0.min(w.0), without.1.min(w.1));
        with = (with.0.min(p.0), with.1.min(p.1));
        eprintln!(
            "run {r}: alone {alone:.3} s; without {:.3} s / {:.3} s; with {:.3} s / {:.3} s",
            w.0, w.1, p.0, p.1
        );
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let table = format!(
        "Priority scheduling ({} cores, {} threads per query, {} long queries = WINDOW JOIN q1 over {}, \
         short query arrives after {} ms; best of {})\n\n\
         | | short query latency | vs alone | makespan of all |\n|---|---|---|---|\n\
         | short query alone | {alone:.3} s | 1.00x | – |\n\
         | long query alone | {long_alone:.3} s | – | – |\n\
         | without priorities | {:.3} s | {:.2}x | {:.3} s |\n\
         | with priorities (long low, short high) | {:.3} s | {:.2}x | {:.3} s ({:+.1}%) |\n",
        cores,
        args.threads,
        args.lows,
        args.data.display(),
        args.delay_ms,
        args.runs,
        without.0,
        without.0 / alone,
        without.1,
        with.0,
        with.0 / alone,
        with.1,
        (with.1 / without.1 - 1.0) * 100.0,
    );
    println!("{table}");
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("priority.md"), table)?;
    Ok(())
}
