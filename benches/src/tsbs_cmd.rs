//! `tsjoin-bench tsbs`: the TSBS IoT data set and queries (the QuestDB
//! blog's three filter queries and TSBS's 13 IoT query types) side by side
//! in one run: tsjoin, DataFusion 55 plain (`SessionContext::sql`, the
//! blog's `LIMIT -10` as `ORDER BY ts DESC LIMIT 10`), and through Python
//! DuckDB and ClickHouse (chdb) (`benches/peers/tsbs.py`). Every engine's
//! answer is checked against tsjoin's.
//!
//! ```text
//! PATH=/work/peers-venv/bin:$PATH tsjoin-bench tsbs                  # 10M readings
//! PATH=/work/peers-venv/bin:$PATH tsjoin-bench tsbs --rows 100000000 # 100M
//! ```

use super::{machine, write_report};
use datafusion::arrow::array::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tsjoin_bench::runner::{Measurement, normalise};
use tsjoin_bench::tsbs::queries::{Check, Dialect, Query, queries};
use tsjoin_bench::tsbs::{TsbsConfig, generate, is_generated};

/// What `tsbs` runs.
#[derive(clap::Args)]
pub struct TsbsArgs {
    /// Approximate rows of `readings` (and of `diagnostics`).
    #[arg(long, default_value_t = 10_000_000)]
    rows: u64,
    /// Trucks (TSBS `--scale`).
    #[arg(long, default_value_t = 1000)]
    trucks: usize,
    #[arg(long, default_value_t = 123)]
    seed: u64,
    /// Data directory (default: benches/data/tsbs-<rows>-<trucks>).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Threads for every engine (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Runs per query and engine (alternating engines); the best counts.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Python peers to run.
    #[arg(long, value_delimiter = ',', default_value = "duckdb,chdb")]
    engines: Vec<String>,
    /// Skip the Python peers.
    #[arg(long)]
    no_peers: bool,
    /// Only these queries (names, comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Where the JSON and markdown results go.
    #[arg(long, default_value = "benches/results/tsbs")]
    out: PathBuf,
}

const TSJOIN: &str = "tsjoin";
const DATAFUSION: &str = "DataFusion 55";

async fn register(ctx: &SessionContext, dir: &Path) -> Result<()> {
    for table in ["readings", "diagnostics"] {
        let path = dir.join(table);
        let path = path.to_str().expect("utf-8 path");
        ctx.register_parquet(table, path, ParquetReadOptions::default())
            .await?;
    }
    Ok(())
}

/// Rows the Parquet scans of `plan` produced (summed over the plan).
fn scanned_rows(plan: &Arc<dyn ExecutionPlan>) -> usize {
    let own = if plan.name() == "DataSourceExec" {
        plan.metrics().and_then(|m| m.output_rows()).unwrap_or(0)
    } else {
        0
    };
    own + plan.children().into_iter().map(scanned_rows).sum::<usize>()
}

/// One timed run: the batches, the seconds and the rows the scans read.
async fn run_once(
    ctx: &SessionContext,
    tsjoin: bool,
    sql: &str,
) -> Result<(Vec<RecordBatch>, f64, usize)> {
    let start = Instant::now();
    let df = if tsjoin {
        ctx.tsjoin_sql(sql).await?
    } else {
        ctx.sql(sql).await?
    };
    let plan = df.create_physical_plan().await?;
    let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    Ok((batches, start.elapsed().as_secs_f64(), scanned_rows(&plan)))
}

/// Runs `benches/peers/tsbs.py` over the queries' DuckDB and ClickHouse
/// spellings.
fn peers(
    args: &TsbsArgs,
    dir: &Path,
    threads: usize,
    qs: &[Query],
) -> (Vec<Measurement>, Vec<String>) {
    let list: Vec<Value> = qs
        .iter()
        .map(|q| {
            json!({"name": q.name, "duckdb": q.sql(Dialect::DuckDb),
                   "clickhouse": q.sql(Dialect::ClickHouse)})
        })
        .collect();
    let file =
        std::env::temp_dir().join(format!("tsbs-queries-{}.json", std::process::id()));
    if let Err(e) = std::fs::write(&file, Value::Array(list).to_string()) {
        return (vec![], vec![format!("cannot write the query list: {e}")]);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/tsbs.py");
    let output = std::process::Command::new("python3")
        .arg(&script)
        .args(["--data", dir.to_str().unwrap_or(".")])
        .args(["--threads", &threads.to_string()])
        .args(["--runs", &args.runs.to_string()])
        .args(["--queries", file.to_str().unwrap_or("")])
        .args(["--engines", &args.engines.join(",")])
        .stderr(std::process::Stdio::inherit())
        .output();
    let _ = std::fs::remove_file(&file);
    tsjoin_bench::runner::peer_results(output)
}

/// A cell in one spelling for every engine: timestamps as
/// `YYYY-MM-DDTHH:MM:SS[.f]` without trailing zeros or a UTC offset,
/// numbers with 6 decimals.
fn canon_cell(cell: &str) -> String {
    let b = cell.as_bytes();
    if b.len() >= 19 && b[4] == b'-' && b[7] == b'-' && (b[10] == b' ' || b[10] == b'T') {
        let mut s = cell.replacen(' ', "T", 1);
        if let Some(stripped) = s.strip_suffix("+00:00") {
            s = stripped.to_string();
        }
        if s.contains('.') {
            s = s.trim_end_matches('0').trim_end_matches('.').to_string();
        }
        return s;
    }
    match cell.parse::<f64>() {
        Ok(v) => format!("{v:.6}"),
        Err(_) => cell.to_string(),
    }
}

/// The answer as sorted rows of canonical cells (only column `n` for
/// [`Check::Column`]).
fn canon(answer: &[String], check: Check) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = answer
        .iter()
        .map(|r| {
            let cells: Vec<String> = r.split('|').map(canon_cell).collect();
            match check {
                Check::Rows => cells,
                Check::Column(n) => vec![cells.get(n).cloned().unwrap_or_default()],
            }
        })
        .collect();
    rows.sort();
    rows
}

/// Whether two answers agree (numbers within 2e-6 relative).
fn same_answer(a: &[String], b: &[String], check: Check) -> bool {
    let (a, b) = (canon(a, check), canon(b, check));
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            x.len() == y.len()
                && x.iter().zip(y).all(|(p, q)| {
                    p == q
                        || match (p.parse::<f64>(), q.parse::<f64>()) {
                            (Ok(u), Ok(v)) => {
                                (u - v).abs() <= 2e-6 * u.abs().max(v.abs()).max(1.0)
                            }
                            _ => false,
                        }
                })
        })
}

/// Runs the benchmark (generating the data when missing).
pub async fn run(args: TsbsArgs) -> Result<()> {
    let config = TsbsConfig {
        trucks: args.trucks,
        rows: args.rows,
        seed: args.seed,
        ..TsbsConfig::default()
    };
    let dir = args
        .data
        .clone()
        .unwrap_or_else(|| PathBuf::from("benches/data").join(config.dir_name()));
    if !is_generated(&dir, &config) {
        let start = Instant::now();
        let (r, d) = generate(&dir, &config)?;
        eprintln!(
            "generated {r} readings and {d} diagnostics rows in {:.1} s into {}",
            start.elapsed().as_secs_f64(),
            dir.display()
        );
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let session_config = SessionConfig::new().with_target_partitions(threads);
    let ours = datafusion_tsjoin::tsjoin_context(session_config.clone());
    register(&ours, &dir).await?;
    for table in ["readings", "diagnostics"] {
        ours.set_designated_timestamp(table, "ts")?;
    }
    let plain = SessionContext::new_with_config(session_config);
    register(&plain, &dir).await?;

    let qs: Vec<Query> = queries(&config)
        .into_iter()
        .filter(|q| args.only.is_empty() || args.only.iter().any(|o| o == q.name))
        .collect();
    let mut results: Vec<Measurement> = vec![];
    let mut scanned = serde_json::Map::new();
    for q in &qs {
        let mut ms = [TSJOIN, DATAFUSION].map(|engine| Measurement {
            engine: engine.into(),
            query: q.name.into(),
            times: vec![],
            answer: None,
            extra: json!({}),
        });
        let mut rows_read = [0usize; 2];
        for _ in 0..args.runs {
            for (i, (ctx, tsjoin, dialect)) in [
                (&ours, true, Dialect::Tsjoin),
                (&plain, false, Dialect::DataFusion),
            ]
            .into_iter()
            .enumerate()
            {
                let (batches, secs, read) =
                    run_once(ctx, tsjoin, &q.sql(dialect)).await?;
                ms[i].times.push(secs);
                ms[i].answer = Some(normalise(&batches));
                rows_read[i] = read;
            }
        }
        eprintln!(
            "{}: tsjoin {:.3} s, DataFusion {:.3} s",
            q.name,
            ms[0].best(),
            ms[1].best()
        );
        scanned.insert(
            q.name.into(),
            json!({TSJOIN: rows_read[0], DATAFUSION: rows_read[1]}),
        );
        results.extend(ms);
    }
    let mut notes = vec![];
    if !args.no_peers {
        let (ms, n) = peers(&args, &dir, threads, &qs);
        results.extend(ms);
        notes.extend(n);
    }
    report(&args, &config, threads, &qs, &results, &scanned, &notes)
}

fn report(
    args: &TsbsArgs,
    config: &TsbsConfig,
    threads: usize,
    qs: &[Query],
    results: &[Measurement],
    scanned: &serde_json::Map<String, Value>,
    notes: &[String],
) -> Result<()> {
    let find = |engine_prefix: &str, query: &str| {
        results
            .iter()
            .find(|m| m.engine.starts_with(engine_prefix) && m.query == query)
    };
    let mut engines: Vec<String> = vec![];
    for m in results {
        if !engines.contains(&m.engine) {
            engines.push(m.engine.clone());
        }
    }
    let mut md = format!(
        "# TSBS IoT, ~{} readings / {} trucks, {threads} threads\n\n\
         Machine: {}. Best of {} runs (hot), seconds; `x` = engine time / tsjoin time. \
         Answers checked against tsjoin's (LIMIT queries: the timestamps).\n\n| query |",
        config.rows,
        config.trucks,
        machine(),
        args.runs,
    );
    for e in &engines {
        md.push_str(&format!(" {e} |"));
    }
    md.push_str(" rows read (tsjoin / DataFusion) |\n|---|");
    for _ in &engines {
        md.push_str("---:|");
    }
    md.push_str("---|\n");
    let mut mismatches = vec![];
    let mut totals = vec![0.0; engines.len()];
    let mut agreement = serde_json::Map::new();
    for q in qs {
        let reference = find(TSJOIN, q.name).and_then(|m| m.answer.clone());
        let ours = find(TSJOIN, q.name).map(|m| m.best());
        md.push_str(&format!("| {} |", q.name));
        for (i, e) in engines.iter().enumerate() {
            let Some(m) = find(e, q.name) else {
                md.push_str(" – |");
                continue;
            };
            let agrees = match (&reference, &m.answer) {
                (Some(r), Some(a)) => same_answer(r, a, q.check),
                _ => false,
            };
            if !agrees {
                mismatches.push(format!("{e} {}", q.name));
            }
            agreement.insert(format!("{e} {}", q.name), json!(agrees));
            if !q.name.starts_with("blog") {
                totals[i] += m.best();
            }
            let ratio =
                ours.map_or(String::new(), |o| format!(" ({:.1}x)", m.best() / o));
            let flag = if agrees { "" } else { " DIFFERS" };
            md.push_str(&format!(" {:.3}{ratio}{flag} |", m.best()));
        }
        let read = &scanned[q.name];
        md.push_str(&format!(" {} / {} |\n", read[TSJOIN], read[DATAFUSION]));
    }
    md.push_str("| **13 TSBS types, total** |");
    for t in &totals {
        md.push_str(&format!(" {t:.3} |"));
    }
    md.push_str(" |\n");
    for n in notes {
        md.push_str(&format!("\nNote: {n}\n"));
    }
    let json = json!({
        "benchmark": "tsbs",
        "date": std::process::Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ").output().ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()),
        "machine": machine(),
        "rows": config.rows, "trucks": config.trucks, "seed": config.seed, "threads": threads,
        "runs": args.runs,
        "queries": qs.iter().map(|q| json!({"name": q.name, "tsjoin": q.sql(Dialect::Tsjoin),
            "datafusion": q.sql(Dialect::DataFusion), "duckdb": q.sql(Dialect::DuckDb),
            "clickhouse": q.sql(Dialect::ClickHouse)})).collect::<Vec<_>>(),
        "results": results.iter().map(|m| json!({
            "engine": m.engine, "query": m.query, "times_s": m.times, "best_s": m.best(),
            "answer_rows": m.answer.as_ref().map(Vec::len),
            "answer_head": m.answer.as_ref().map(|a| a.iter().take(12).collect::<Vec<_>>()),
        })).collect::<Vec<_>>(),
        "agrees_with_tsjoin": agreement,
        "scan_rows": scanned,
        "notes": notes,
    });
    write_report(&args.out, &format!("tsbs-{}", config.rows), &json, &md)?;
    if !mismatches.is_empty() {
        return Err(DataFusionError::Execution(format!(
            "answers differ from tsjoin's: {}",
            mismatches.join(", ")
        )));
    }
    Ok(())
}
