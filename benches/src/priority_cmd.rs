//! `tsjoin-bench priority`: Quickstep's Fig. 11 replayed on our data.
//!
//! `lows` long queries start together; after `delay` a short query arrives.
//! Two workloads: WINDOW JOIN q1 over the reference workload with a GROUP BY
//! over the prices as the short query (default), or with `--tsbs-data`
//! TSBS IoT's `avg-load` (a two-level GROUP BY over the diagnostics) with
//! the QuestDB blog's filtered `count(*)` (`blog-q3`) as the short query. Three runs, each the best of `runs`:
//! - alone: the short query with nothing else running;
//! - without priorities: every query at `normal`;
//! - with priorities: the long ones at `low`, the short one at `high`.
//!
//! Reported: the short query's latency in each (and its ratio to alone),
//! and the makespan of all queries together, with and without priorities
//! (the throughput cost of pausing).

use super::tsbs_cmd;
use datafusion::error::DataFusionError;
use datafusion::error::Result;
use datafusion::physical_plan::execute_stream;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use futures::TryStreamExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tsjoin_bench::runner::{QUERIES, session};
use tsjoin_bench::tsbs::queries::Dialect;

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
    /// Repetitions of each scenario (best and median reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// A TSBS IoT data set (`tsbs-<rows>-<trucks>`, from `tsbs`): run the
    /// TSBS workload on it instead of the WINDOW JOIN one.
    #[arg(long)]
    tsbs_data: Option<PathBuf>,
    /// Where the markdown result goes.
    #[arg(long, default_value = "benches/results/priority")]
    out: PathBuf,
}

/// The WINDOW JOIN workload's short query: per symbol statistics of the
/// prices.
const SHORT: &str = "SELECT sym, count(*), avg(bid), max(ask) FROM prices GROUP BY sym";

/// The queries of one workload and where their data lives.
struct Workload {
    /// The long (low-priority) query and its name.
    long: (String, String),
    /// The short (high-priority) query and its name.
    short: (String, String),
}

impl Workload {
    fn new(args: &PriorityArgs) -> Result<Self> {
        let Some(dir) = &args.tsbs_data else {
            if !args.data.join("prices").exists() {
                return Err(DataFusionError::Plan(format!(
                    "no data at {} (run `tsjoin-bench generate --trades 1000000 --data {}`)",
                    args.data.display(),
                    args.data.display()
                )));
            }
            return Ok(Self {
                long: ("WINDOW JOIN q1".into(), QUERIES[0].2.into()),
                short: ("GROUP BY sym over the prices".into(), SHORT.into()),
            });
        };
        let qs = tsbs_cmd::queries_for(dir)?;
        let find = |name: &str| {
            qs.iter()
                .find(|q| q.name == name)
                .map(|q| (format!("TSBS {name}"), q.sql(Dialect::Tsjoin)))
                .ok_or_else(|| DataFusionError::Plan(format!("no TSBS query {name}")))
        };
        Ok(Self {
            long: find("avg-load")?,
            short: find("blog-q3")?,
        })
    }
}

/// Runs `sql`: (time to the physical plan, time to the last batch).
async fn run_query(ctx: SessionContext, sql: String) -> Result<(Duration, Duration)> {
    let start = Instant::now();
    let plan = ctx.tsjoin_sql(&sql).await?.create_physical_plan().await?;
    let planned = start.elapsed();
    let _: Vec<_> = execute_stream(plan, ctx.task_ctx())?.try_collect().await?;
    Ok((planned, start.elapsed()))
}

async fn ctx_at(args: &PriorityArgs, priority: &str) -> Result<SessionContext> {
    let settings = [("tsjoin.priority", priority)];
    match &args.tsbs_data {
        Some(dir) => tsbs_cmd::session(dir, args.threads, &settings).await,
        None => session(&args.data, args.threads, true, &settings).await,
    }
}

/// One scenario: (short query's latency, makespan of all).
async fn scenario(
    args: &PriorityArgs,
    work: &Workload,
    low: &str,
    high: &str,
) -> Result<(f64, f64)> {
    let (short, makespan, planned) = scenario_times(args, work, low, high).await?;
    eprintln!(
        "  {low}/{high}: short query {short:.3} s (planned in {planned:.3} s), makespan {makespan:.3} s"
    );
    Ok((short, makespan))
}

/// One scenario: the short query's latency, the makespan of all, and the
/// short query's planning time.
async fn scenario_times(
    args: &PriorityArgs,
    work: &Workload,
    low: &str,
    high: &str,
) -> Result<(f64, f64, f64)> {
    let start = Instant::now();
    let mut lows = vec![];
    for _ in 0..args.lows {
        let ctx = ctx_at(args, low).await?;
        lows.push(tokio::spawn(run_query(ctx, work.long.1.clone())));
    }
    tokio::time::sleep(Duration::from_millis(args.delay_ms)).await;
    let ctx = ctx_at(args, high).await?;
    let (planned, short) = run_query(ctx, work.short.1.clone()).await?;
    for l in lows {
        l.await.map_err(|e| DataFusionError::External(e.into()))??;
    }
    Ok((
        short.as_secs_f64(),
        start.elapsed().as_secs_f64(),
        planned.as_secs_f64(),
    ))
}

pub async fn run(args: PriorityArgs) -> Result<()> {
    let work = Workload::new(&args)?;
    // Warm the page cache and the footers first: the first run of a
    // process is slower for every query, whichever scenario it is in.
    let ctx = ctx_at(&args, "normal").await?;
    run_query(ctx.clone(), work.short.1.clone()).await?;
    run_query(ctx, work.long.1.clone()).await?;
    let (mut alone, mut long_alone) = (vec![], vec![]);
    let (mut without, mut with) = (vec![], vec![]);
    for r in 0..args.runs {
        let ctx = ctx_at(&args, "normal").await?;
        let (planned, short) = run_query(ctx.clone(), work.short.1.clone()).await?;
        eprintln!(
            "  alone: short query {:.3} s (planned in {:.3} s)",
            short.as_secs_f64(),
            planned.as_secs_f64()
        );
        alone.push(short.as_secs_f64());
        long_alone.push(run_query(ctx, work.long.1.clone()).await?.1.as_secs_f64());
        let w = scenario(&args, &work, "normal", "normal").await?;
        let p = scenario(&args, &work, "low", "high").await?;
        eprintln!(
            "run {r}: without {:.3} s / {:.3} s; with {:.3} s / {:.3} s",
            w.0, w.1, p.0, p.1
        );
        without.push(w);
        with.push(p);
    }
    let short = |v: &[(f64, f64)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
    let span = |v: &[(f64, f64)]| v.iter().map(|x| x.1).collect::<Vec<_>>();
    let (a_best, a_med) = (best(&alone), median(&alone));
    let row = |name: &str, v: &[(f64, f64)]| {
        let (s, m) = (short(v), span(v));
        format!(
            "| {name} | {:.3} s ({:.2}x) | {:.3} s ({:.2}x) | {:.3} s | {:.3} s |\n",
            best(&s),
            best(&s) / a_best,
            median(&s),
            median(&s) / a_med,
            best(&m),
            median(&m),
        )
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let table = format!(
        "Priority scheduling ({cores} cores, {} threads per query, {} long queries = {} \
         over {}, short query = {}, arriving after {} ms; {} runs after a warm-up; ratios to the short \
         query alone, best to best and median to median)\n\n\
         | | short query, best | short query, median | makespan, best | makespan, median |\n\
         |---|---|---|---|---|\n\
         | short query alone | {a_best:.3} s | {a_med:.3} s | – | – |\n\
         | long query alone | {:.3} s | {:.3} s | – | – |\n{}{}\
         \nMakespan with priorities against without (medians): {:+.1}%.\n",
        args.threads,
        args.lows,
        work.long.0,
        args.tsbs_data.as_ref().unwrap_or(&args.data).display(),
        work.short.0,
        args.delay_ms,
        args.runs,
        best(&long_alone),
        median(&long_alone),
        row("without priorities", &without),
        row("with priorities (long low, short high)", &with),
        (median(&span(&with)) / median(&span(&without)) - 1.0) * 100.0,
    );
    println!("{table}");
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("priority.md"), table)?;
    Ok(())
}

fn best(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::MAX, f64::min)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}
