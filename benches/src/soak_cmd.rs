//! `tsjoin-bench soak --minutes N`: one session serving mixed queries
//! (`datafusion_tsjoin::testing::MIXED_QUERIES`: WINDOW JOIN, inline GROUP
//! BY, both, LIMIT … OFFSET, ASOF / LT JOIN, HORIZON JOIN,
//! `approx_percentile`) from `--jobs` concurrent tasks for N minutes,
//! reporting throughput and memory (process RSS, the session pool's
//! reservation) every interval, and whether memory grew.

use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionConfig;
use datafusion_tsjoin::testing::reference::{random_rows, schema, split};
use datafusion_tsjoin::testing::{MIXED_QUERIES, Rng};
use datafusion_tsjoin::{TsJoinContextExt, tsjoin_context};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What `soak` runs.
#[derive(clap::Args)]
pub struct SoakArgs {
    /// How long to run.
    #[arg(long, default_value_t = 1.0)]
    minutes: f64,
    /// Concurrent query tasks.
    #[arg(long, default_value_t = 16)]
    jobs: usize,
    /// Rows of the right table (the left has a tenth).
    #[arg(long, default_value_t = 200_000)]
    rows: usize,
    /// Seconds between samples.
    #[arg(long, default_value_t = 10)]
    interval: u64,
}

/// Resident set size of this process, bytes (0 where /proc is missing).
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Runs the soak and prints one line per sample.
pub async fn run_soak(args: SoakArgs) -> Result<()> {
    let ctx = tsjoin_context(SessionConfig::new());
    let mut rng = Rng::new(42);
    let left = random_rows(&mut rng, args.rows / 10, args.rows as i64, 16);
    let mut right = random_rows(&mut rng, args.rows, args.rows as i64, 16);
    right.sort_by_key(|r| r.ts);
    for (name, rows) in [("l", &left), ("r", &right)] {
        let parts = split(&mut rng, rows, 4)
            .into_iter()
            .map(|p| {
                datafusion::arrow::compute::concat_batches(&schema(), &p)
                    .map(|b| vec![b])
                    .map_err(DataFusionError::from)
            })
            .collect::<Result<Vec<_>>>()?;
        ctx.register_table(name, Arc::new(MemTable::try_new(schema(), parts)?))?;
    }
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(args.minutes * 60.0);
    let tasks: Vec<_> = (0..args.jobs)
        .map(|t| {
            let (ctx, done) = (ctx.clone(), Arc::clone(&done));
            tokio::spawn(async move {
                let mut q = t;
                while Instant::now() < end {
                    let sql = MIXED_QUERIES[q % MIXED_QUERIES.len()];
                    ctx.tsjoin_sql(sql).await?.collect().await?;
                    done.fetch_add(1, Ordering::Relaxed);
                    q += 7;
                }
                Ok::<_, DataFusionError>(())
            })
        })
        .collect();
    println!("| s | queries | queries/s | RSS MiB | pool reserved MiB |");
    println!("|---|---|---|---|---|");
    let mut last = (0u64, start);
    let mut samples = vec![];
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_secs(args.interval.max(1))).await;
        let n = done.load(Ordering::Relaxed);
        let now = Instant::now();
        let qps = (n - last.0) as f64 / (now - last.1).as_secs_f64();
        let (rss, pool) = (rss(), ctx.runtime_env().memory_pool.reserved());
        println!(
            "| {:.0} | {n} | {qps:.1} | {:.0} | {:.1} |",
            start.elapsed().as_secs_f64(),
            rss as f64 / 1048576.0,
            pool as f64 / 1048576.0
        );
        samples.push(rss);
        last = (n, now);
    }
    for t in tasks {
        t.await
            .map_err(|e| DataFusionError::External(Box::new(e)))??;
    }
    let total = done.load(Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    // Growth: the last sample against the peak of the first half.
    let half = samples.len() / 2;
    let early = samples[..half.max(1).min(samples.len())]
        .iter()
        .max()
        .copied()
        .unwrap_or(0);
    let late = samples.last().copied().unwrap_or(0);
    println!(
        "soak: {total} queries in {secs:.0} s ({:.1}/s, {} tasks); RSS peak of the first half \
         {:.0} MiB, last {:.0} MiB; pool reserved at the end {} bytes",
        total as f64 / secs,
        args.jobs,
        early as f64 / 1048576.0,
        late as f64 / 1048576.0,
        ctx.runtime_env().memory_pool.reserved()
    );
    Ok(())
}
