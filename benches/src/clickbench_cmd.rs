//! `tsjoin-bench clickbench-generate` and `tsjoin-bench clickbench`.

use datafusion::error::{DataFusionError, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use tsjoin_bench::clickbench::generate::{generate_hits, is_generated};
use tsjoin_bench::clickbench::{QueryRuns, result_json, run_all, session, summary};

/// Where the synthetic `hits` lives, and how big it is.
#[derive(clap::Args)]
pub struct HitsArgs {
    /// Rows (10M by default; 100000000 for the full-size table).
    #[arg(long, default_value_t = 10_000_000)]
    rows: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory of the data set (default: benches/data/hits-<rows>).
    #[arg(long)]
    data: Option<PathBuf>,
}

impl HitsArgs {
    fn dir(&self) -> PathBuf {
        self.data
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("benches/data/hits-{}", self.rows)))
    }

    /// Generates the data set unless it is there already.
    pub fn ensure(&self) -> Result<PathBuf> {
        let dir = self.dir();
        if !is_generated(&dir, self.rows, self.seed) {
            eprintln!(
                "clickbench: generating {} rows into {}",
                self.rows,
                dir.display()
            );
            let start = std::time::Instant::now();
            generate_hits(&dir, self.rows, self.seed)?;
            eprintln!(
                "clickbench: generated in {:.1} s",
                start.elapsed().as_secs_f64()
            );
        }
        Ok(dir)
    }
}

/// What `clickbench` runs.
#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    hits: HitsArgs,
    /// Threads (partitions) for every engine (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Runs per query (ClickBench: 3; the first counts as cold).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Read the one-file `hits.parquet` instead of the 100 partitioned files.
    #[arg(long)]
    single: bool,
    /// Skip the Python peers (DuckDB, chdb).
    #[arg(long)]
    no_peers: bool,
    /// Only these queries (0-based), comma-separated.
    #[arg(long, value_delimiter = ',')]
    only: Option<Vec<usize>>,
    /// Where the result JSON files and summary go.
    #[arg(long, default_value = "benches/results/clickbench")]
    out: PathBuf,
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{cores} cores, {cpu}")
}

fn dir_size(p: &Path) -> u64 {
    std::fs::read_dir(p).map_or(0, |d| {
        d.flatten()
            .filter_map(|e| e.metadata().ok())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum()
    })
}

/// Runs the 43 queries on tsjoin, on DataFusion with tsjoin's operators
/// off, and on the Python peers; writes one ClickBench JSON per
/// configuration and `summary.md`.
pub async fn run(args: RunArgs) -> Result<()> {
    let dir = args.hits.ensure()?;
    let (files, data_size) = if args.single {
        (
            dir.join("hits.parquet"),
            std::fs::metadata(dir.join("hits.parquet"))?.len(),
        )
    } else {
        (dir.join("partitioned"), dir_size(&dir.join("partitioned")))
    };
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let variant = if args.single { "single" } else { "partitioned" };
    let machine = machine();
    let comment = format!(
        "synthetic hits, {} rows (tsjoin-bench clickbench-generate --rows {} --seed {}); {threads} threads; \
         run 1 is the first run in a warm process with the page cache not dropped",
        args.hits.rows, args.hits.rows, args.hits.seed
    );
    std::fs::create_dir_all(&args.out)?;
    let only = args.only.as_deref();
    let mut configs: Vec<(String, Vec<QueryRuns>)> = vec![];
    let ours = [
        ("tsjoin", "tsjoin", true),
        ("DataFusion 55", "datafusion", false),
    ];
    eprintln!("clickbench: tsjoin and DataFusion, taking turns run by run");
    let mut ctxs = vec![];
    for (_, _, tsjoin) in ours {
        ctxs.push(session(&files, threads, tsjoin).await?);
    }
    for ((name, file, _), runs) in
        ours.into_iter().zip(run_all(&ctxs, args.runs, only).await)
    {
        let system = format!("{name} (Parquet, {variant})");
        let tags = ["Rust", "column-oriented", "embedded", "stateless"];
        let json = result_json(&system, &machine, &tags, data_size, &runs, &comment);
        std::fs::write(
            args.out.join(format!("{file}.json")),
            serde_json::to_string_pretty(&json).map_err(io)?,
        )?;
        configs.push((name.to_string(), runs));
    }
    if !args.no_peers {
        for (name, file, runs) in peers(&files, threads, args.runs, only)? {
            let system = format!("{name} (Parquet, {variant})");
            let json = result_json(
                &system,
                &machine,
                &["column-oriented", "embedded"],
                data_size,
                &runs,
                &comment,
            );
            std::fs::write(
                args.out.join(format!("{file}.json")),
                serde_json::to_string_pretty(&json).map_err(io)?,
            )?;
            configs.push((name, runs));
        }
    }
    let header = format!(
        "ClickBench, synthetic hits: {} rows, {variant} Parquet ({:.2} GB), {machine}, {threads} threads, \
         {} runs per query; hot = best of runs 2 and 3 (seconds); ratio = other / tsjoin with ClickBench's 10 ms \
         added to both sides (above 1: tsjoin is faster). Queries where tsjoin loses come first.",
        args.hits.rows,
        data_size as f64 / 1e9,
        args.runs
    );
    let md = summary(&configs, &header);
    std::fs::write(args.out.join("summary.md"), &md)?;
    println!("{md}");
    Ok(())
}

fn io(e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(e.to_string())
}

/// DuckDB and chdb through `benches/peers/clickbench.py`, when python3 and
/// the packages are there; each gives `(name, file stem, runs)`.
fn peers(
    files: &Path,
    threads: usize,
    runs: usize,
    only: Option<&[usize]>,
) -> Result<Vec<(String, String, Vec<QueryRuns>)>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/clickbench.py");
    let mut cmd = std::process::Command::new("python3");
    cmd.arg(&script)
        .arg("--files")
        .arg(files)
        .arg("--threads")
        .arg(threads.to_string())
        .arg("--runs")
        .arg(runs.to_string());
    if let Some(o) = only {
        cmd.arg("--only").arg(
            o.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(","),
        );
    }
    let output = match cmd.stderr(std::process::Stdio::inherit()).output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("clickbench: python3 not available: {e}");
            return Ok(vec![]);
        }
    };
    let mut out: Vec<(String, String, Vec<QueryRuns>)> = vec![];
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(note) = v["note"].as_str() {
            eprintln!("clickbench: {note}");
            continue;
        }
        let engine = v["engine"].as_str().unwrap_or("?").to_string();
        let q = v["query"].as_u64().unwrap_or(0) as usize;
        let times: Vec<Option<f64>> = v["times"]
            .as_array()
            .map_or(vec![], |t| t.iter().map(Value::as_f64).collect());
        let entry = match out.iter_mut().find(|e| e.0 == engine) {
            Some(e) => e,
            None => {
                let stem = engine
                    .split_whitespace()
                    .next()
                    .unwrap_or("peer")
                    .to_lowercase();
                let empty = QueryRuns {
                    times: vec![None; runs],
                    rows: None,
                    error: Some("not run".into()),
                };
                out.push((
                    engine.clone(),
                    stem,
                    vec![empty; tsjoin_bench::clickbench::queries().len()],
                ));
                out.last_mut().expect("pushed")
            }
        };
        if let Some(slot) = entry.2.get_mut(q) {
            *slot = QueryRuns {
                times,
                rows: v["rows"].as_u64().map(|r| r as usize),
                error: v["error"].as_str().map(String::from),
            };
        }
    }
    Ok(out)
}
