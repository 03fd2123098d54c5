//! `tsjoin-bench verify --cases N`: differential cases at scale, a fifth
//! each: WINDOW JOIN, ASOF JOIN and HORIZON JOIN cases against the naive
//! references, `approx_percentile` cases against its reference (bit for
//! bit), inline GROUP BY cases against DataFusion's aggregate (random
//! tables, shapes, partitions, batch sizes, and now and then a small
//! memory limit); see
//! `datafusion_tsjoin::testing::verify`. Each failure is printed as a
//! minimal SQL script; the exit status is 1 when any case failed.

use datafusion::error::{DataFusionError, Result};
use datafusion_tsjoin::testing::verify::{Kind, run};
use futures::StreamExt;
use std::time::Instant;

/// What `verify` runs.
#[derive(clap::Args)]
pub struct VerifyArgs {
    /// Cases to run (split evenly between the kinds).
    #[arg(long, default_value_t = 100_000)]
    cases: u64,
    /// First seed: case `n` uses seed `seed + n`.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Cases run at once.
    #[arg(long, default_value_t = 4)]
    jobs: usize,
    /// Only this kind: `window-join`, `group-by`, `asof`, `horizon` or
    /// `percentile`.
    #[arg(long)]
    only: Option<String>,
}

/// Runs the cases and prints a summary (and each failure's script).
pub async fn run_verify(args: VerifyArgs) -> Result<()> {
    let kinds: Vec<Kind> = match args.only.as_deref() {
        None => Kind::ALL.to_vec(),
        Some("window-join") => vec![Kind::WindowJoin],
        Some("group-by") => vec![Kind::GroupBy],
        Some("asof") => vec![Kind::Asof],
        Some("horizon") => vec![Kind::Horizon],
        Some("percentile") => vec![Kind::Percentile],
        Some(other) => {
            return Err(DataFusionError::Plan(format!("unknown kind {other}")));
        }
    };
    let start = Instant::now();
    let n = args.cases;
    let kinds2 = kinds.clone();
    let mut results = futures::stream::iter(0..n)
        .map(move |c| {
            let kind = kinds2[(c % kinds2.len() as u64) as usize];
            let seed = args.seed + c;
            // Each case on its own task: cases run in parallel.
            tokio::spawn(async move { (kind, run(kind, seed).await) })
        })
        .buffer_unordered(args.jobs.max(1));
    let (mut done, mut failed) = (0u64, vec![]);
    let mut per_kind = vec![0u64; kinds.len()];
    while let Some(joined) = results.next().await {
        let (kind, result) =
            joined.map_err(|e| DataFusionError::External(Box::new(e)))?;
        done += 1;
        if let Some(i) = kinds.iter().position(|k| *k == kind) {
            per_kind[i] += 1;
        }
        if let Err(m) = result {
            println!(
                "-- FAILED ({kind:?}, seed {}): {}\n{}",
                m.seed, m.what, m.script
            );
            failed.push(m.seed);
        }
        if done.is_multiple_of(10_000) {
            eprintln!(
                "verify: {done}/{n} cases, {} failed, {:.0} s",
                failed.len(),
                start.elapsed().as_secs_f64()
            );
        }
    }
    let counts: Vec<String> = kinds
        .iter()
        .zip(&per_kind)
        .map(|(k, c)| format!("{k:?} {c}"))
        .collect();
    println!(
        "verify: {done} cases ({}), {} mismatches, {:.1} s (seeds {}..{})",
        counts.join(", "),
        failed.len(),
        start.elapsed().as_secs_f64(),
        args.seed,
        args.seed + n
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(DataFusionError::Execution(format!(
            "{} cases failed: seeds {failed:?}",
            failed.len()
        )))
    }
}
