//! `tsjoin-bench fuzz --minutes N`: the SQL front-end fuzzer's long run.
//! Inputs from `datafusion_tsjoin::testing::fuzz` (mutated valid WINDOW
//! JOIN, GROUP BY and QuestDB-dialect queries, token soups, huge literals,
//! deep nesting, odd Unicode), each run in a fresh session on its own
//! thread with a tokio worker's 2 MiB stack and a time limit. A panic or a
//! hang is printed with its SQL; a stack overflow aborts the process, so
//! the input being run is kept in `--current` first.

use datafusion::error::{DataFusionError, Result};
use datafusion_tsjoin::testing::Rng;
use datafusion_tsjoin::testing::fuzz::{Outcome, check, input_up_to};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What `fuzz` runs.
#[derive(clap::Args)]
pub struct FuzzArgs {
    /// How long to run.
    #[arg(long, default_value_t = 1.0)]
    minutes: f64,
    /// Seed of the input generator.
    #[arg(long, default_value_t = 28)]
    seed: u64,
    /// Stack of each case's thread, bytes (tokio's worker default: 2 MiB).
    #[arg(long, default_value_t = 2 << 20)]
    stack: usize,
    /// Seconds a case may run before it counts as a hang.
    #[arg(long, default_value_t = 20)]
    timeout: u64,
    /// Where the input being run is written (survives a stack overflow).
    #[arg(long, default_value = "target/fuzz-current.sql")]
    current: PathBuf,
}

/// Runs inputs until the time is up; prints the counts and every finding.
pub fn run_fuzz(args: FuzzArgs) -> Result<()> {
    // Panics are expected findings: report them here, not on stderr.
    std::panic::set_hook(Box::new(|_| {}));
    let mut rng = Rng::new(args.seed);
    let end = Instant::now() + Duration::from_secs_f64(args.minutes * 60.0);
    let (mut cases, mut ok, mut errors, mut internal) = (0u64, 0u64, 0u64, 0u64);
    let mut findings = vec![];
    let start = Instant::now();
    while Instant::now() < end {
        let sql = input_up_to(&mut rng, 10_000);
        let _ = std::fs::write(&args.current, &sql);
        let partitions = 1 + (cases % 3) as usize;
        let outcome = check(
            &sql,
            partitions,
            args.stack,
            Duration::from_secs(args.timeout),
        );
        cases += 1;
        match outcome {
            Outcome::Ok => ok += 1,
            Outcome::Error(_) => errors += 1,
            Outcome::Internal(e) => {
                internal += 1;
                println!("-- internal error (case {cases}): {e}\n{};\n", short(&sql));
            }
            bad => {
                println!("-- FINDING (case {cases}): {bad:?}\n{};\n", short(&sql));
                findings.push(sql);
            }
        }
        if cases.is_multiple_of(1000) {
            eprintln!(
                "fuzz: {cases} cases, {:.0} s",
                start.elapsed().as_secs_f64()
            );
        }
    }
    let _ = std::fs::remove_file(&args.current);
    println!(
        "fuzz: {cases} cases in {:.0} s (seed {}): {ok} ok, {errors} errors, \
         {internal} internal errors, {} panics/hangs",
        start.elapsed().as_secs_f64(),
        args.seed,
        findings.len()
    );
    if findings.is_empty() {
        Ok(())
    } else {
        Err(DataFusionError::Execution(format!(
            "{} findings",
            findings.len()
        )))
    }
}

/// The first 2,000 characters of an input (lists of 10,000 terms are
/// long; the whole input is rebuilt from the seed).
fn short(sql: &str) -> String {
    let head: String = sql.chars().take(2000).collect();
    if head.len() < sql.len() {
        format!("{head} …")
    } else {
        head
    }
}
