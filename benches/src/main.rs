//! `tsjoin-bench`: generate the WINDOW JOIN reference workload and run it
//! side by side on every engine.
//!
//! ```text
//! tsjoin-bench generate --trades 1000000 --data benches/data/wj-1m
//! tsjoin-bench window-join --trades 1000000          # generates when missing
//! ```

use clap::{Parser, Subcommand};
use datafusion::error::{DataFusionError, Result};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tsjoin_bench::generate::{Workload, generate, is_generated};
use tsjoin_bench::groupby;

mod asof_cmd;
mod clickbench_cmd;
mod cluster_cmd;
mod distribution_cmd;
mod fuzz_cmd;
mod horizon_cmd;
mod percentile_cmd;
mod priority_cmd;
mod progress_cmd;
mod scaling_cmd;
mod side_by_side;
mod soak_cmd;
mod ssb_cmd;
mod tpch_cmd;
mod tsbs_cmd;
mod verify_cmd;

// The same allocator and settings as tsjoin-cli, so the figures are the CLI's.
#[path = "../../tsjoin-cli/src/allocator.rs"]
mod allocator;

use tsjoin_bench::runner::{
    DF_BUCKETED_Q1, DF_WINDOW_Q1, Measurement, QUERIES, SCAN, measure, session,
};

#[derive(Parser)]
#[command(name = "tsjoin-bench", about = "tsjoin benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write the reference workload (trades, prices = 3x) as partitioned Parquet.
    Generate {
        #[command(flatten)]
        data: DataArgs,
    },
    /// Run the WINDOW JOIN benchmark on every engine configuration.
    WindowJoin {
        #[command(flatten)]
        data: DataArgs,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Measure the WINDOW JOIN fast path at several thread counts: q1 from
    /// Parquet, q1 in memory (index build and probe apart), and the scan.
    WindowJoinScaling(scaling_cmd::ScalingArgs),
    /// Differential cases at scale: WINDOW JOIN against the naive
    /// reference, inline GROUP BY against DataFusion's aggregate.
    Verify(verify_cmd::VerifyArgs),
    /// The SQL front-end fuzzer: no panic, hang or stack overflow.
    Fuzz(fuzz_cmd::FuzzArgs),
    /// Mixed concurrent queries on one session: throughput and memory over time.
    Soak(soak_cmd::SoakArgs),
    /// Local vs in-process clusters of 1 and 2 executors (Ballista).
    Cluster(cluster_cmd::ClusterArgs),
    /// approx_percentile vs DataFusion, DuckDB, ClickHouse and Polars:
    /// time and error per group count and input type.
    Percentile(percentile_cmd::PercentileArgs),
    /// Run the grouped-aggregation benchmark: tsjoin's inline aggregate vs
    /// DataFusion's, DuckDB and Polars (generates the data when missing).
    Groupby(GroupbyArgs),
    /// Write the synthetic ClickBench `hits` table: 100 partitioned Parquet
    /// files and one single file.
    ClickbenchGenerate(clickbench_cmd::HitsArgs),
    /// Run ClickBench's 43 queries on tsjoin, DataFusion without tsjoin's
    /// operators, DuckDB and chdb; write ClickBench result JSON and a
    /// summary (generates the data when missing).
    Clickbench(clickbench_cmd::RunArgs),
    /// Measure the progress monitor: its overhead and its estimate at
    /// 25/50/75% of the wall time, over WINDOW JOIN, scan and GROUP BY queries.
    Progress(progress_cmd::ProgressArgs),
    /// Quickstep's Fig. 11: a short high-priority query arriving while long
    /// low-priority ones run, with and without priority scheduling.
    Priority(priority_cmd::PriorityArgs),
    /// HORIZON JOIN markouts (61 offsets and a LIST of 5) vs DataFusion's
    /// rewrite, DuckDB, chdb and Polars, answers checked.
    Horizon(horizon_cmd::HorizonArgs),
    /// ASOF JOIN (prevailing bid/ask per trade) vs DataFusion's rewrite,
    /// DuckDB, chdb and Polars, with a scan and a single-thread run.
    Asof(asof_cmd::AsofArgs),
    /// Temporal joins broadcast vs partitioned (WINDOW JOIN q1..q4, ASOF).
    Distribution(distribution_cmd::DistributionArgs),
    /// TSBS IoT (the QuestDB blog's filter queries and the 13 TSBS query
    /// types) vs DataFusion, DuckDB and chdb, answers checked.
    Tsbs(tsbs_cmd::TsbsArgs),
    /// The Star Schema Benchmark (13 queries; Q4.1's FROM orders with
    /// --permutations) on tsjoin (join filters on and off), DataFusion
    /// (plain and pushdown_filters), DuckDB and chdb, answers checked.
    Ssb(ssb_cmd::SsbArgs),
    /// TPC-H's 22 queries (validation parameters, tpchgen's tables) on the
    /// engines of `ssb`, answers checked against DataFusion 55's and, at SF
    /// 1, tpchgen's; --explain shows where the ORs of Q7 and Q19 went.
    Tpch(tpch_cmd::TpchArgs),
}

/// What the side-by-side runners with Python peers (`tsbs`, `ssb`, `tpch`)
/// share.
#[derive(clap::Args)]
pub(crate) struct PeerRunArgs {
    /// Threads for every engine (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Runs per query and engine (alternating engines); the best counts.
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
    /// Python peers to run.
    #[arg(long, value_delimiter = ',', default_value = "duckdb,chdb")]
    engines: Vec<String>,
    /// Skip the Python peers.
    #[arg(long)]
    no_peers: bool,
    /// Only these queries (names, comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

impl PeerRunArgs {
    /// `--threads`, or all cores.
    pub(crate) fn threads(&self) -> usize {
        self.threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        })
    }

    /// Whether `--only` lets query `name` run.
    pub(crate) fn selected(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == name)
    }

    /// The peers' measurements and notes from `benches/peers/<script>`
    /// ([`tsjoin_bench::runner::run_peer_script`], with a cold run first
    /// when `cold`); none with `--no-peers`.
    pub(crate) fn peers(
        &self,
        script: &str,
        data: &Path,
        threads: usize,
        queries: Vec<Value>,
        cold: bool,
    ) -> (Vec<Measurement>, Vec<String>) {
        if self.no_peers {
            return (vec![], vec![]);
        }
        tsjoin_bench::runner::run_peer_script(
            script,
            data,
            threads,
            self.runs,
            queries,
            &self.engines,
            cold,
        )
    }
}

/// What `groupby` runs.
#[derive(clap::Args)]
struct GroupbyArgs {
    /// Rows of the int-key grid data sets.
    #[arg(long, value_delimiter = ',', default_value = "5000000,10000000")]
    grid_rows: Vec<u64>,
    /// Rows of the Q1-like data sets.
    #[arg(long, value_delimiter = ',', default_value = "1200000,5000000")]
    q1_rows: Vec<u64>,
    /// Threads for every engine (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Runs per query and engine (alternating engines); the best counts.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Skip the Python peers (DuckDB, Polars).
    #[arg(long)]
    no_peers: bool,
    /// Only cells whose label contains this text.
    #[arg(long)]
    only: Option<String>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where the data sets live.
    #[arg(long, default_value = "benches/data")]
    data: PathBuf,
    /// Where the JSON and markdown results go.
    #[arg(long, default_value = "benches/results/groupby")]
    out: PathBuf,
}

/// What `window-join` runs, and how often.
#[derive(clap::Args)]
struct RunArgs {
    /// Threads for every engine (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Runs per query of each tsjoin setup; the best counts.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Runs per query of DataFusion's rewrites and the Python peers (slow);
    /// the best counts.
    #[arg(long, default_value_t = 2)]
    peer_runs: usize,
    /// Queries to run (q1..q4).
    #[arg(long, value_delimiter = ',', default_value = "q1,q2,q3,q4")]
    queries: Vec<String>,
    /// tsjoin setups to run: fast (all threads), single (fast path, one
    /// thread), streaming / streaming1 (streaming path, all threads / one),
    /// scalar (scalar kernels), general (general path).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fast,single,streaming,streaming1,scalar,general"
    )]
    setups: Vec<String>,
    /// Skip DataFusion's plain-SQL rewrites (slow at large scales).
    #[arg(long)]
    no_datafusion: bool,
    /// Skip the Python peers (DuckDB, chdb, Polars).
    #[arg(long)]
    no_peers: bool,
    /// Which Python peers run (DuckDB's window rewrite alone takes minutes
    /// at 5M trades).
    #[arg(long, value_delimiter = ',', default_value = "duckdb,chdb,polars")]
    peers: Vec<String>,
    /// Where the JSON and markdown results go.
    #[arg(long, default_value = "benches/results/window_join")]
    out: PathBuf,
}

/// The workload and where its files live, shared by both subcommands.
#[derive(clap::Args)]
struct DataArgs {
    #[arg(long, default_value_t = 1_000_000)]
    trades: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Data directory, gets trades/ and prices/ (default: benches/data/wj-<trades>).
    #[arg(long)]
    data: Option<PathBuf>,
}

impl DataArgs {
    fn workload(&self) -> Workload {
        Workload {
            trades: self.trades,
            seed: self.seed,
        }
    }

    fn dir(&self) -> PathBuf {
        self.data
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("benches/data/wj-{}", self.trades)))
    }
}

fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("unknown");
    let avx2 = cpuinfo.contains(" avx2");
    json!({
        "cpu": model.trim(),
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "avx2": avx2,
        "kernels": datafusion_tsjoin::bench::KernelSet::detect().name(),
        "os": std::env::consts::OS,
    })
}

/// Writes `<stem>.json` and `<stem>.md` into `out` and prints the table.
fn write_report(out: &Path, stem: &str, json: &Value, md: &str) -> Result<()> {
    std::fs::create_dir_all(out)?;
    let text = serde_json::to_string_pretty(json)
        .map_err(|e| DataFusionError::External(e.into()))?;
    std::fs::write(out.join(format!("{stem}.json")), text)?;
    std::fs::write(out.join(format!("{stem}.md")), md)?;
    println!("{md}");
    Ok(())
}

/// Runs `benches/peers/window_join.py`; missing Python or packages give
/// notes, not failures.
fn peers(
    data: &Path,
    threads: usize,
    runs: usize,
    queries: &[String],
    engines: &[String],
) -> (Vec<Measurement>, Vec<String>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/window_join.py");
    let output = std::process::Command::new("python3")
        .arg(&script)
        .args(["--data", data.to_str().unwrap_or(".")])
        .args([
            "--threads",
            &threads.to_string(),
            "--runs",
            &runs.to_string(),
            "--queries",
            &queries.join(","),
        ])
        .args(["--engines", &engines.join(",")])
        .stderr(std::process::Stdio::inherit())
        .output();
    tsjoin_bench::runner::peer_results(output)
}

async fn window_join(w: Workload, data: PathBuf, run: RunArgs) -> Result<()> {
    let threads = run
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let (runs, peer_runs) = (run.runs.max(1), run.peer_runs.max(1));
    if !is_generated(&data, w) {
        eprintln!(
            "generating {} trades / {} prices into {} ...",
            w.trades,
            3 * w.trades,
            data.display()
        );
        generate(&data, w)?;
    }
    let selected: Vec<_> = QUERIES
        .iter()
        .filter(|(name, ..)| run.queries.iter().any(|q| q == name))
        .collect();
    let mut results: Vec<Measurement> = vec![];
    let fast = format!("tsjoin fast path, {threads} threads");
    // (key, label, threads, settings) of each tsjoin configuration.
    type Config<'a> = (&'a str, String, usize, Vec<(&'a str, &'a str)>);
    // The index-path setups pin the streaming path off (its default);
    // "streaming" and "streaming1" switch it on.
    const INDEX: (&str, &str) = ("tsjoin.window_join_streaming", "false");
    const STREAM: (&str, &str) = ("tsjoin.window_join_streaming", "true");
    let configs: Vec<Config> = vec![
        ("fast", fast.clone(), threads, vec![INDEX]),
        (
            "single",
            "tsjoin fast path, 1 thread".into(),
            1,
            vec![INDEX],
        ),
        (
            "streaming",
            format!("tsjoin streaming path, {threads} threads"),
            threads,
            vec![STREAM],
        ),
        (
            "streaming1",
            "tsjoin streaming path, 1 thread".into(),
            1,
            vec![STREAM],
        ),
        (
            "scalar",
            format!("tsjoin scalar kernels, {threads} threads"),
            threads,
            vec![("tsjoin.window_join_simd", "false"), INDEX],
        ),
        (
            "general",
            format!("tsjoin general path, {threads} threads"),
            threads,
            vec![("tsjoin.window_join_fast_path", "false")],
        ),
    ];
    for (_, name, t, settings) in configs
        .iter()
        .filter(|c| run.setups.iter().any(|s| s == c.0))
    {
        let ctx = session(&data, *t, true, settings).await?;
        for (q, _, sql) in &selected {
            eprintln!("{name}: {q}");
            results.push(measure(&ctx, name, q, &[sql], runs).await?);
        }
    }
    let ctx = session(&data, threads, true, &[]).await?;
    results.push(
        measure(
            &ctx,
            "scan of the same columns (tsjoin)",
            "scan",
            &SCAN,
            runs,
        )
        .await?,
    );
    if !run.no_datafusion && run.queries.iter().any(|q| q == "q1") {
        let ctx = session(&data, threads, false, &[]).await?;
        eprintln!("DataFusion rewrites: q1");
        results.push(
            measure(
                &ctx,
                "DataFusion window over UNION ALL",
                "q1",
                &[DF_WINDOW_Q1],
                peer_runs,
            )
            .await?,
        );
        results.push(
            measure(
                &ctx,
                "DataFusion bucketed equi-join",
                "q1",
                &[DF_BUCKETED_Q1],
                peer_runs,
            )
            .await?,
        );
    }
    let mut notes = vec![];
    if !run.no_peers {
        let (ms, n) = peers(&data, threads, peer_runs, &run.queries, &run.peers);
        results.extend(ms);
        notes.extend(n);
    }
    report(
        w,
        threads,
        (runs, peer_runs),
        &fast,
        &results,
        &notes,
        &run.out,
    )
}

fn report(
    w: Workload,
    threads: usize,
    (runs, peer_runs): (usize, usize),
    fast: &str,
    results: &[Measurement],
    notes: &[String],
    out: &Path,
) -> Result<()> {
    let reference: BTreeMap<&str, &Measurement> = results
        .iter()
        .filter(|m| m.engine == fast)
        .map(|m| (m.query.as_str(), m))
        .collect();
    let agrees = |m: &Measurement| -> Option<bool> {
        let a = m.answer.as_ref()?;
        Some(reference.get(m.query.as_str())?.answer.as_ref()? == a)
    };
    let mut engines: Vec<&str> = vec![];
    for m in results {
        if !engines.contains(&m.engine.as_str()) {
            engines.push(&m.engine);
        }
    }
    let queries = ["q1", "q2", "q3", "q4", "scan"];
    let cell = |engine: &str, q: &str| {
        results.iter().find(|m| m.engine == engine && m.query == q)
    };
    let mut md = format!(
        "WINDOW JOIN benchmark: {} trades, {} prices ({} symbols, Zipf s={}, reference density), {threads} threads, best of {runs} runs (DataFusion rewrites and other engines: best of {peer_runs}).\n\n\
         | engine | q1 | q2 | q3 | q4 | scan | q1 vs tsjoin fast | answers agree |\n|---|---|---|---|---|---|---|---|\n",
        w.trades,
        3 * w.trades,
        tsjoin_bench::generate::SYMBOLS,
        tsjoin_bench::generate::ZIPF_S,
    );
    let fast_q1 = cell(fast, "q1").map(Measurement::best);
    for e in &engines {
        let mut row = format!("| {e} |");
        for q in queries {
            row += &match cell(e, q) {
                Some(m) => format!(" {:.3} s |", m.best()),
                None => " – |".into(),
            };
        }
        row += &match (cell(e, "q1"), fast_q1) {
            (Some(m), Some(f)) => format!(" {:.1}x |", m.best() / f),
            _ => " – |".into(),
        };
        let checks: Vec<bool> = results
            .iter()
            .filter(|m| m.engine == *e)
            .filter_map(agrees)
            .collect();
        row += if checks.is_empty() {
            " – |"
        } else if checks.iter().all(|&c| c) {
            " yes |"
        } else {
            " **NO** |"
        };
        md += &row;
        md += "\n";
    }
    // Headline figures.
    md += "\n";
    let peers_q1 = results
        .iter()
        .filter(|m| {
            m.query == "q1" && !m.engine.starts_with("tsjoin") && !m.times.is_empty()
        })
        .min_by(|a, b| a.best().total_cmp(&b.best()));
    if let (Some(p), Some(f)) = (peers_q1, fast_q1) {
        md += &format!(
            "- q1: tsjoin fast is **{:.1}x** faster than the fastest other engine ({}, {:.3} s).\n",
            p.best() / f,
            p.engine,
            p.best()
        );
    }
    let df_q1 = results
        .iter()
        .filter(|m| m.query == "q1" && m.engine.starts_with("DataFusion"))
        .min_by(|a, b| a.best().total_cmp(&b.best()));
    if let (Some(p), Some(f)) = (df_q1, fast_q1) {
        md += &format!(
            "- q1: **{:.1}x** faster than DataFusion's best rewrite ({}).\n",
            p.best() / f,
            p.engine
        );
    }
    if let (Some(s), Some(f)) =
        (cell("scan of the same columns (tsjoin)", "scan"), fast_q1)
    {
        md += &format!(
            "- q1 end to end is **{:.2}x** the time of scanning the same columns ({:.3} s).\n",
            f / s.best(),
            s.best()
        );
    }
    if let Some(m) = cell("tsjoin fast path, 1 thread", "q1")
        && let Some(join) = m.extra["join_compute_s"].as_f64()
    {
        md += &format!(
            "- single-thread join phase (probe + aggregate) on q1: {:.3} s for {} left rows = **{:.1}M left rows/s** (build of the right index: {:.3} s).\n",
            join,
            w.trades,
            w.trades as f64 / join / 1e6,
            m.extra["build_s"].as_f64().unwrap_or(f64::NAN)
        );
    }
    for m in results
        .iter()
        .filter(|m| m.query == "q1" && m.engine.starts_with("tsjoin"))
    {
        if let (Some(b), Some(j)) = (
            m.extra["build_s"].as_f64(),
            m.extra["join_compute_s"].as_f64(),
        ) {
            md += &format!(
                "- {}: q1 right-index build {b:.3} s (wall), join phase {j:.3} s (CPU, summed over threads).\n",
                m.engine
            );
        }
    }
    for n in notes {
        md += &format!("- note: {n}\n");
    }
    let mismatches: Vec<String> = results
        .iter()
        .filter(|m| agrees(m) == Some(false))
        .map(|m| {
            format!(
                "{} {}: got {:?}, tsjoin {:?}",
                m.engine,
                m.query,
                m.answer,
                reference[m.query.as_str()].answer
            )
        })
        .collect();
    for m in &mismatches {
        md += &format!("- MISMATCH {m}\n");
    }

    let json = json!({
        "benchmark": "window_join",
        "date": std::process::Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ").output().ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()),
        "machine": machine(),
        "trades": w.trades, "prices": 3 * w.trades, "seed": w.seed, "threads": threads, "runs": runs, "peer_runs": peer_runs,
        "results": results.iter().map(|m| json!({
            "engine": m.engine, "query": m.query, "times_s": m.times, "best_s": m.best(),
            "agrees_with_tsjoin": agrees(m), "answer": m.answer, "extra": m.extra,
        })).collect::<Vec<_>>(),
        "notes": notes,
    });
    write_report(out, &format!("trades-{}", w.trades), &json, &md)?;
    if !mismatches.is_empty() {
        return Err(DataFusionError::Execution(format!(
            "{} answers differ from tsjoin's",
            mismatches.len()
        )));
    }
    Ok(())
}

/// One cell's figures: per engine, times and checksum.
struct CellResult {
    cell: groupby::Cell,
    inline_used: bool,
    engines: Vec<(String, Vec<f64>, String)>,
}

async fn groupby_bench(args: GroupbyArgs) -> Result<()> {
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let cells: Vec<groupby::Cell> = groupby::cells(&args.grid_rows, &args.q1_rows)
        .into_iter()
        .filter(|c| {
            args.only
                .as_ref()
                .is_none_or(|o| c.label.contains(o.as_str()))
        })
        .collect();
    for c in &cells {
        groupby::ensure_data(&args.data, c, args.seed)?;
    }
    let mut results = vec![];
    for cell in &cells {
        eprintln!("groupby: {}", cell.label);
        let dir = groupby::data_dir(&args.data, cell);
        let inline =
            groupby::session(&dir, cell.table, threads, true, &cell.settings).await?;
        let builtin = groupby::session(&dir, cell.table, threads, false, &[]).await?;
        let inline_used = groupby::runs_inline(&inline, cell).await?;
        let (mut ti, mut td, mut di, mut dd) =
            (vec![], vec![], String::new(), String::new());
        // Alternating, so that noise spreads over both.
        for _ in 0..args.runs.max(1) {
            let (t, d) = groupby::measure(&inline, cell, 1).await?;
            ti.extend(t);
            di = d;
            let (t, d) = groupby::measure(&builtin, cell, 1).await?;
            td.extend(t);
            dd = d;
        }
        results.push(CellResult {
            cell: cell.clone(),
            inline_used,
            engines: vec![
                ("tsjoin inline".to_string(), ti, di),
                (
                    format!("DataFusion {}", datafusion::DATAFUSION_VERSION),
                    td,
                    dd,
                ),
            ],
        });
    }
    let mut notes = vec![];
    if !args.no_peers {
        let spec: Vec<Value> = cells
            .iter()
            .map(|c| {
                json!({"dir": groupby::data_dir(&args.data, c).canonicalize().unwrap_or_default(), "table": c.table,
                       "keys": c.keys, "aggs": c.aggs, "sql": c.sql})
            })
            .collect();
        let spec_path = std::env::temp_dir()
            .join(format!("tsjoin-groupby-{}.json", std::process::id()));
        std::fs::write(&spec_path, Value::Array(spec).to_string())?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/groupby.py");
        let output = std::process::Command::new("python3")
            .arg(&script)
            .args([
                "--cells",
                spec_path.to_str().unwrap_or("."),
                "--threads",
                &threads.to_string(),
            ])
            .args(["--runs", &args.runs.to_string()])
            .stderr(std::process::Stdio::inherit())
            .output();
        match output {
            Err(e) => notes.push(format!("python3 not available: {e}")),
            Ok(o) => {
                for line in String::from_utf8_lossy(&o.stdout).lines() {
                    let Ok(v) = serde_json::from_str::<Value>(line) else {
                        continue;
                    };
                    if let Some(n) = v["note"].as_str() {
                        notes.push(n.to_string());
                    } else if let Some(i) = v["cell"].as_u64()
                        && let Some(r) = results.get_mut(i as usize)
                    {
                        let times = v["times"]
                            .as_array()
                            .map(|a| a.iter().filter_map(Value::as_f64).collect())
                            .unwrap_or_default();
                        r.engines.push((
                            v["engine"].as_str().unwrap_or("?").to_string(),
                            times,
                            v["checksum"].as_str().unwrap_or("").to_string(),
                        ));
                    }
                }
            }
        }
        let _ = std::fs::remove_file(&spec_path);
    }
    groupby_report(&results, threads, args.runs, &notes, &args.out)
}

fn groupby_report(
    results: &[CellResult],
    threads: usize,
    runs: usize,
    notes: &[String],
    out: &Path,
) -> Result<()> {
    let best = |t: &[f64]| t.iter().copied().fold(f64::INFINITY, f64::min);
    let mut engines: Vec<String> = vec![];
    for r in results {
        for (e, ..) in &r.engines {
            if !engines.contains(e) {
                engines.push(e.clone());
            }
        }
    }
    let mut md = format!(
        "Grouped aggregation: Parquet in, {threads} threads, best of {runs} (seconds). Ratios: engine time / tsjoin inline time (above 1: tsjoin is faster).\n\n| query | {} | vs DataFusion | vs fastest other | answers agree |\n|---|{}---|---|---|\n",
        engines.join(" | "),
        "---|".repeat(engines.len())
    );
    let mut mismatches = vec![];
    for r in results {
        let inline = best(&r.engines[0].1);
        let mut row = format!(
            "| {}{} |",
            r.cell.label,
            if r.inline_used {
                ""
            } else {
                " (inline not used)"
            }
        );
        for e in &engines {
            row += &match r.engines.iter().find(|(n, ..)| n == e) {
                Some((_, t, _)) => format!(" {:.3} |", best(t)),
                None => " – |".into(),
            };
        }
        let others: Vec<f64> = r.engines[2..].iter().map(|(_, t, _)| best(t)).collect();
        row += &format!(" {:.2}x |", best(&r.engines[1].1) / inline);
        row += &match others.iter().copied().reduce(f64::min) {
            Some(o) => format!(" {:.2}x |", o / inline),
            None => " – |".into(),
        };
        let agree = r.engines.iter().all(|(_, _, d)| *d == r.engines[0].2);
        if !agree {
            mismatches.push(format!(
                "{}: {:?}",
                r.cell.label,
                r.engines.iter().map(|(e, _, d)| (e, d)).collect::<Vec<_>>()
            ));
        }
        row += if agree { " yes |\n" } else { " **NO** |\n" };
        md += &row;
    }
    md += "\n";
    for n in notes {
        md += &format!("- note: {n}\n");
    }
    for m in &mismatches {
        md += &format!("- MISMATCH {m}\n");
    }
    let json = json!({
        "benchmark": "groupby",
        "machine": machine(),
        "threads": threads,
        "runs": runs,
        "results": results.iter().map(|r| json!({
            "query": r.cell.label, "sql": r.cell.sql, "rows": r.cell.rows, "inline_used": r.inline_used,
            "engines": r.engines.iter().map(|(e, t, d)| json!({"engine": e, "times_s": t, "best_s": best(t), "checksum": d})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "notes": notes,
    });
    write_report(out, "groupby", &json, &md)?;
    if !mismatches.is_empty() {
        return Err(DataFusionError::Execution(format!(
            "{} answers differ",
            mismatches.len()
        )));
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    allocator::tune_allocator();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Generate { data } => generate(&data.dir(), data.workload()),
        Command::WindowJoin { data, run } => {
            window_join(data.workload(), data.dir(), run).await
        }
        Command::WindowJoinScaling(args) => scaling_cmd::run(args).await,
        Command::Verify(args) => verify_cmd::run_verify(args).await,
        Command::Fuzz(args) => fuzz_cmd::run_fuzz(args),
        Command::Soak(args) => soak_cmd::run_soak(args).await,
        Command::Cluster(args) => cluster_cmd::run_cluster(args).await,
        Command::Percentile(args) => percentile_cmd::run(args).await,
        Command::Groupby(args) => groupby_bench(args).await,
        Command::ClickbenchGenerate(args) => args.ensure().map(|_| ()),
        Command::Clickbench(args) => clickbench_cmd::run(args).await,
        Command::Progress(args) => progress_cmd::run(args).await,
        Command::Priority(args) => priority_cmd::run(args).await,
        Command::Horizon(args) => horizon_cmd::run(args).await,
        Command::Tsbs(args) => tsbs_cmd::run(args).await,
        Command::Ssb(args) => ssb_cmd::run(args).await,
        Command::Tpch(args) => tpch_cmd::run(args).await,
        Command::Asof(args) => asof_cmd::run(args).await,
        Command::Distribution(args) => distribution_cmd::run(args).await,
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
