//! `tsjoin-bench distribution`: the temporal joins' two distribution modes
//! (`tsjoin.temporal_join_distribution = broadcast | partitioned`) side by
//! side in one run, rounds interleaved: WINDOW JOIN q1..q4 of the
//! reference workload and the `asof` command's ASOF JOIN. Answers of the
//! two modes must be equal. What `auto` chooses rests on these figures
//! (see `DistributionSetting::choose`).
//!
//! ```text
//! tsjoin-bench distribution --trades 1000000 --threads 2
//! ```

use crate::{machine, write_report};
use datafusion::error::{DataFusionError, Result};
use serde_json::json;
use std::path::PathBuf;
use tsjoin_bench::generate::{Workload, generate, is_generated};
use tsjoin_bench::runner::{Measurement, QUERIES, measure, session};

/// What `distribution` runs.
#[derive(clap::Args)]
pub struct DistributionArgs {
    /// Trades (prices are 3x).
    #[arg(long, default_value_t = 1_000_000)]
    trades: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Threads (target partitions) of both modes.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Rounds; each runs every mode once, the best counts.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Where the data sets live (`wj-<trades>`, shared with `window-join`).
    #[arg(long, default_value = "benches/data")]
    data: PathBuf,
    /// Where the JSON and markdown results go.
    #[arg(long, default_value = "benches/results/distribution")]
    out: PathBuf,
}

const MODES: [&str; 2] = ["broadcast", "partitioned"];

/// The queries: WINDOW JOIN q1..q4 and the ASOF JOIN of `tsjoin-bench asof`.
fn queries() -> Vec<(&'static str, &'static str)> {
    let mut q: Vec<_> = QUERIES.iter().map(|(name, _, sql)| (*name, *sql)).collect();
    q.push(("asof", crate::asof_cmd::TSJOIN_ASOF));
    q
}

pub async fn run(args: DistributionArgs) -> Result<()> {
    let w = Workload {
        trades: args.trades,
        seed: args.seed,
    };
    let dir = args.data.join(format!("wj-{}", args.trades));
    if !is_generated(&dir, w) {
        eprintln!(
            "generating {} trades into {} ...",
            args.trades,
            dir.display()
        );
        generate(&dir, w)?;
    }
    let mut sessions = vec![];
    for mode in MODES {
        let set = [("tsjoin.temporal_join_distribution", mode)];
        sessions.push(session(&dir, args.threads, true, &set).await?);
    }
    let mut rows = vec![];
    let mut md = format!(
        "# Temporal join distribution: broadcast vs partitioned\n\n\
         {} trades, {} prices, {} threads, best of {} interleaved rounds.\n\n\
         | query | broadcast (s) | partitioned (s) | partitioned / broadcast |\n\
         |---|---|---|---|\n",
        args.trades,
        3 * args.trades,
        args.threads,
        args.runs
    );
    for (name, sql) in queries() {
        let mut by_mode: Vec<Option<Measurement>> = vec![None, None];
        for _ in 0..args.runs {
            for (i, ctx) in sessions.iter().enumerate() {
                let m = measure(ctx, MODES[i], name, &[sql], 1).await?;
                match &mut by_mode[i] {
                    Some(all) => all.times.extend(m.times),
                    slot => *slot = Some(m),
                }
            }
        }
        let mut by_mode = by_mode.into_iter().flatten();
        let (Some(b), Some(p)) = (by_mode.next(), by_mode.next()) else {
            return Err(DataFusionError::Execution("no runs (--runs 0)".into()));
        };
        if b.answer != p.answer {
            return Err(DataFusionError::Execution(format!(
                "{name}: partitioned answer differs from broadcast"
            )));
        }
        let ratio = p.best() / b.best();
        md.push_str(&format!(
            "| {name} | {:.3} | {:.3} | {ratio:.2} |\n",
            b.best(),
            p.best()
        ));
        rows.push(json!({
            "query": name,
            "broadcast_s": b.times,
            "partitioned_s": p.times,
            "ratio_best": ratio,
        }));
    }
    let report = json!({
        "machine": machine(),
        "trades": args.trades,
        "threads": args.threads,
        "runs": args.runs,
        "results": rows,
    });
    write_report(
        &args.out,
        &format!("distribution-{}-t{}", args.trades, args.threads),
        &report,
        &md,
    )
}
