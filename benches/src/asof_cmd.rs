//! `tsjoin-bench asof`: for every trade the prevailing quote (bid, ask) of
//! its symbol, side by side in one run: tsjoin's ASOF JOIN (all threads and
//! one thread), DataFusion's best plain rewrite (`last_value … IGNORE NULLS`
//! over UNION ALL), a scan of the same columns, and through
//! `peers/asof.py` DuckDB's and ClickHouse's (chdb) ASOF LEFT JOIN and
//! Polars' `join_asof(by="sym")`.
//!
//! Data: the `window-join` generator's trades and prices (3x trades). Every
//! engine answers `count(*), count(p.bid), sum(p.bid), sum(p.ask)`; the
//! counts must be equal and the sums equal within a relative 1e-9
//! (summation order differs between engines).
//!
//! ```text
//! tsjoin-bench asof --trades 1000000,5000000
//! ```

use crate::{machine, write_report};
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use datafusion_tsjoin::asof_join::AsofJoinExec;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tsjoin_bench::generate::{Workload, generate, is_generated};
use tsjoin_bench::runner::{Measurement, normalise, session};

/// What `asof` runs.
#[derive(clap::Args)]
pub struct AsofArgs {
    /// Trade counts (prices are 3x); one data set and table each.
    #[arg(long, value_delimiter = ',', default_value = "1000000,5000000")]
    trades: Vec<u64>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Threads for every engine (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Runs of each tsjoin setup and of the scan; the best counts.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Runs of DataFusion's rewrite and of each Python peer; the best counts.
    #[arg(long, default_value_t = 3)]
    peer_runs: usize,
    /// Skip DataFusion's plain rewrite.
    #[arg(long)]
    no_datafusion: bool,
    /// Skip the Python peers.
    #[arg(long)]
    no_peers: bool,
    /// Which Python peers run.
    #[arg(long, value_delimiter = ',', default_value = "duckdb,chdb,polars")]
    peers: Vec<String>,
    /// Where the data sets live (`wj-<trades>`, shared with `window-join`).
    #[arg(long, default_value = "benches/data")]
    data: PathBuf,
    /// Where the JSON and markdown results go.
    #[arg(long, default_value = "benches/results/asof")]
    out: PathBuf,
}

/// tsjoin's query: QuestDB's ASOF JOIN on the designated (only) timestamps.
pub const TSJOIN_ASOF: &str = "SELECT count(*) AS n, count(p.bid) AS matched, \
     sum(p.bid) AS sum_bid, sum(p.ask) AS sum_ask \
     FROM trades t ASOF JOIN prices p ON (sym)";

/// DataFusion's fastest correct plain rewrite: trades and prices in one
/// stream, per symbol in time order (a price before a trade of the same
/// time, as `p.ts <= t.ts` wants), the last non-NULL bid and ask so far.
pub const DF_ASOF: &str = "WITH u AS ( \
      SELECT ts, sym, 1 AS k, CAST(NULL AS DOUBLE) AS bid, CAST(NULL AS DOUBLE) AS ask FROM trades \
      UNION ALL SELECT ts, sym, 0 AS k, bid, ask FROM prices), \
    w AS (SELECT k, last_value(bid) IGNORE NULLS OVER win AS bid, \
      last_value(ask) IGNORE NULLS OVER win AS ask FROM u \
      WINDOW win AS (PARTITION BY sym ORDER BY ts, k \
        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)) \
    SELECT count(*) AS n, count(bid) AS matched, sum(bid) AS sum_bid, sum(ask) AS sum_ask \
    FROM w WHERE k = 1";

/// The columns the join reads, decoded, with a trivial reduction.
pub const SCAN: [&str; 2] = [
    "SELECT count(CASE WHEN sym <> '' THEN 1 END), max(ts) FROM trades",
    "SELECT sum(bid), sum(ask), count(CASE WHEN sym <> '' THEN 1 END), max(ts) FROM prices",
];

const ENGINE_FAST: &str = "tsjoin ASOF JOIN";
const ENGINE_SINGLE: &str = "tsjoin ASOF JOIN, 1 thread";
const ENGINE_SCAN: &str = "scan of the same columns (tsjoin)";

fn find_asof(plan: &Arc<dyn ExecutionPlan>) -> Option<&AsofJoinExec> {
    if let Some(a) = plan.downcast_ref::<AsofJoinExec>() {
        return Some(a);
    }
    plan.children().into_iter().find_map(find_asof)
}

/// Runs `sqls` `runs` times (through tsjoin's SQL front end, or `plain`
/// DataFusion's); for an ASOF plan also records the operator's phase times
/// (of the best run): build (wall), join (CPU summed over partitions), left
/// rows and how many took the merge.
async fn measure(
    ctx: &SessionContext,
    engine: &str,
    sqls: &[&str],
    runs: usize,
    plain: bool,
) -> Result<Measurement> {
    let (mut times, mut answer, mut extra) = (vec![], None, json!({}));
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        let start = Instant::now();
        let mut batches = vec![];
        let mut run_extra = json!({});
        for sql in sqls {
            let df = if plain {
                ctx.sql(sql).await?
            } else {
                ctx.tsjoin_sql(sql).await?
            };
            let plan = df.create_physical_plan().await?;
            batches.extend(collect(Arc::clone(&plan), ctx.task_ctx()).await?);
            if let Some(m) = find_asof(&plan).and_then(|a| a.metrics()) {
                let sum = |name: &str| m.sum_by_name(name).map(|v| v.as_usize());
                run_extra = json!({
                    "build_s": sum("build_time").map(|ns| ns as f64 / 1e9),
                    "join_s": sum("join_time").map(|ns| ns as f64 / 1e9),
                    "left_rows": sum("input_rows"),
                    "merge_rows": sum("merge_rows"),
                    "index_rows": sum("index_rows"),
                    "right_sorted": sum("right_sorted"),
                });
            }
        }
        let t = start.elapsed().as_secs_f64();
        times.push(t);
        if t < best {
            best = t;
            extra = run_extra;
        }
        answer = Some(normalise(&batches));
    }
    Ok(Measurement {
        engine: engine.into(),
        query: "asof".into(),
        times,
        answer,
        extra,
    })
}

/// Runs `peers/asof.py`; a missing Python or package gives notes.
fn peers(
    data: &Path,
    threads: usize,
    runs: usize,
    engines: &[String],
) -> (Vec<Measurement>, Vec<String>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/asof.py");
    let output = std::process::Command::new("python3")
        .arg(&script)
        .args(["--data", data.to_str().unwrap_or(".")])
        .args(["--threads", &threads.to_string()])
        .args(["--runs", &runs.to_string()])
        .args(["--engines", &engines.join(",")])
        .stderr(std::process::Stdio::inherit())
        .output();
    let (mut ms, notes) = tsjoin_bench::runner::peer_results(output);
    for m in &mut ms {
        m.query = "asof".into();
    }
    (ms, notes)
}

/// Same counts, sums within a relative 1e-9.
fn same_answer(a: &[String], b: &[String]) -> bool {
    let fields = |r: &[String]| -> Option<Vec<f64>> {
        r.first()?
            .split('|')
            .map(|s| s.trim().parse::<f64>().ok())
            .collect()
    };
    match (fields(a), fields(b)) {
        (Some(x), Some(y)) if x.len() == y.len() => x
            .iter()
            .zip(&y)
            .all(|(p, q)| p == q || (p - q).abs() <= 1e-9 * p.abs().max(q.abs())),
        _ => false,
    }
}

/// Runs the benchmark at every `--trades` size.
pub async fn run(args: AsofArgs) -> Result<()> {
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut failed = 0;
    for &trades in &args.trades {
        let w = Workload {
            trades,
            seed: args.seed,
        };
        let dir = args.data.join(format!("wj-{trades}"));
        if !is_generated(&dir, w) {
            eprintln!("generating {trades} trades into {} ...", dir.display());
            generate(&dir, w)?;
        }
        failed += run_one(&args, w, &dir, threads).await?;
    }
    if failed > 0 {
        return Err(DataFusionError::Execution(format!(
            "{failed} answers differ from tsjoin's"
        )));
    }
    Ok(())
}

async fn run_one(
    args: &AsofArgs,
    w: Workload,
    dir: &Path,
    threads: usize,
) -> Result<usize> {
    let (runs, peer_runs) = (args.runs.max(1), args.peer_runs.max(1));
    let fast = format!("{ENGINE_FAST}, {threads} threads");
    let mut results = vec![];
    let ctx = session(dir, threads, true, &[]).await?;
    eprintln!("{fast}");
    results.push(measure(&ctx, &fast, &[TSJOIN_ASOF], runs, false).await?);
    eprintln!("{ENGINE_SCAN}");
    results.push(measure(&ctx, ENGINE_SCAN, &SCAN, runs, false).await?);
    let single = session(dir, 1, true, &[]).await?;
    eprintln!("{ENGINE_SINGLE}");
    results.push(measure(&single, ENGINE_SINGLE, &[TSJOIN_ASOF], runs, false).await?);
    let mut notes = vec![];
    if !args.no_datafusion {
        let plain = session(dir, threads, false, &[]).await?;
        eprintln!("DataFusion rewrite");
        let name = "DataFusion last_value IGNORE NULLS over UNION ALL";
        // A failure of the rewrite is a note, as a peer's is.
        match measure(&plain, name, &[DF_ASOF], peer_runs, true).await {
            Ok(m) => results.push(m),
            Err(e) => notes.push(format!("{name} failed: {e}")),
        }
    }
    if !args.no_peers {
        let (ms, n) = peers(dir, threads, peer_runs, &args.peers);
        results.extend(ms);
        notes.extend(n);
    }
    report(args, w, threads, (runs, peer_runs), &fast, &results, &notes)
}

fn report(
    args: &AsofArgs,
    w: Workload,
    threads: usize,
    (runs, peer_runs): (usize, usize),
    fast: &str,
    results: &[Measurement],
    notes: &[String],
) -> Result<usize> {
    let cell = |e: &str| results.iter().find(|m| m.engine == e);
    let reference = cell(fast).and_then(|m| m.answer.clone());
    let agrees = |m: &Measurement| -> Option<bool> {
        if m.engine == ENGINE_SCAN {
            return None;
        }
        Some(same_answer(m.answer.as_ref()?, reference.as_ref()?))
    };
    let fast_s = cell(fast).map(Measurement::best).unwrap_or(f64::NAN);
    let mut md = format!(
        "ASOF JOIN benchmark: {} trades, {} prices ({} symbols, Zipf s={}), for every trade the prevailing bid/ask of its symbol, {threads} threads, best of {runs} runs (DataFusion and other engines: best of {peer_runs}).\n\n\
         | engine | seconds | vs tsjoin | answer agrees |\n|---|---|---|---|\n",
        w.trades,
        3 * w.trades,
        tsjoin_bench::generate::SYMBOLS,
        tsjoin_bench::generate::ZIPF_S,
    );
    for m in results {
        let agree = match agrees(m) {
            None => "–",
            Some(true) => "yes",
            Some(false) => "**NO**",
        };
        md += &format!(
            "| {} | {:.3} | {:.2}x | {agree} |\n",
            m.engine,
            m.best(),
            m.best() / fast_s
        );
    }
    md += "\n";
    if let Some(a) = &reference {
        md += &format!("- answer (n|matched|sum_bid|sum_ask): `{}`\n", a.join(" "));
    }
    let peer = results
        .iter()
        .filter(|m| {
            !m.engine.starts_with("tsjoin")
                && m.engine != ENGINE_SCAN
                && !m.engine.starts_with("DataFusion")
                && !m.times.is_empty()
        })
        .min_by(|a, b| a.best().total_cmp(&b.best()));
    if let Some(p) = peer {
        md += &format!(
            "- tsjoin is **{:.1}x** faster than the fastest other engine ({}, {:.3} s).\n",
            p.best() / fast_s,
            p.engine,
            p.best()
        );
    }
    if let Some(d) = results.iter().find(|m| m.engine.starts_with("DataFusion")) {
        md += &format!(
            "- **{:.1}x** faster than DataFusion's plain rewrite.\n",
            d.best() / fast_s
        );
    }
    if let Some(s) = cell(ENGINE_SCAN) {
        md += &format!(
            "- end to end is **{:.2}x** the time of scanning the same columns ({:.3} s).\n",
            fast_s / s.best(),
            s.best()
        );
    }
    for m in results.iter().filter(|m| m.engine.starts_with("tsjoin")) {
        if let (Some(b), Some(j)) =
            (m.extra["build_s"].as_f64(), m.extra["join_s"].as_f64())
        {
            md += &format!(
                "- {}: right side build {b:.3} s (wall), join phase {j:.3} s (CPU over partitions) = {:.1}M left rows/s per thread; end to end {:.1}M left rows/s; merge rows {}, index rows {}.\n",
                m.engine,
                w.trades as f64 / j / 1e6,
                w.trades as f64 / m.best() / 1e6,
                m.extra["merge_rows"],
                m.extra["index_rows"],
            );
        }
    }
    for n in notes {
        md += &format!("- note: {n}\n");
    }
    let mismatches: Vec<&Measurement> = results
        .iter()
        .filter(|m| agrees(m) == Some(false))
        .collect();
    for m in &mismatches {
        md += &format!(
            "- MISMATCH {}: got {:?}, tsjoin {:?}\n",
            m.engine, m.answer, reference
        );
    }
    let json = json!({
        "benchmark": "asof",
        "date": std::process::Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ").output().ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()),
        "machine": machine(),
        "trades": w.trades, "prices": 3 * w.trades, "seed": w.seed, "threads": threads,
        "runs": runs, "peer_runs": peer_runs,
        "results": results.iter().map(|m| json!({
            "engine": m.engine, "times_s": m.times, "best_s": m.best(),
            "agrees_with_tsjoin": agrees(m), "answer": m.answer, "extra": m.extra,
        })).collect::<Vec<_>>(),
        "notes": notes,
    });
    write_report(&args.out, &format!("trades-{}", w.trades), &json, &md)?;
    Ok(mismatches.len())
}
