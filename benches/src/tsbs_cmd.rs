//! `tsjoin-bench tsbs`: the TSBS IoT data set and queries (the QuestDB
//! blog's three filter queries and TSBS's 13 IoT query types) side by side
//! in one run: tsjoin, DataFusion 55 plain (`SessionContext::sql`, the
//! blog's `LIMIT -10` as `ORDER BY ts DESC LIMIT 10`), and through Python
//! DuckDB and ClickHouse (chdb) (`benches/peers/tsbs.py`). Every engine's
//! answer is checked against tsjoin's. Each engine also runs each query
//! once cold, with the data's files dropped from the page cache first
//! ([`tsjoin_bench::page_cache`]), unless `--no-cold`.
//!
//! ```text
//! PATH=/work/peers-venv/bin:$PATH tsjoin-bench tsbs                  # 10M readings
//! PATH=/work/peers-venv/bin:$PATH tsjoin-bench tsbs --rows 100000000 # 100M
//! ```

use super::{PeerRunArgs, machine, write_report};
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tsjoin_bench::page_cache;
use tsjoin_bench::runner::{self, Measurement, normalise};
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
    #[command(flatten)]
    run: PeerRunArgs,
    /// Where the JSON and markdown results go.
    #[arg(long, default_value = "benches/results/tsbs")]
    out: PathBuf,
    /// Untimed runs of each query on each engine before the timed ones: a
    /// query's first run was the slowest of its engine's (by up to 20% at
    /// 100M rows), and whichever engine ran first took that cost.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Also run tsjoin with this setting (`tsjoin.late_materialize=false`),
    /// as one more engine column; repeatable, one session per setting.
    #[arg(long)]
    also: Vec<String>,
    /// Skip the cold runs (one per query and engine, after the warm-up,
    /// with the data's files dropped from the page cache just before).
    #[arg(long)]
    no_cold: bool,
}

const TSJOIN: &str = "tsjoin";
const DATAFUSION: &str = "DataFusion 55";

pub(crate) async fn register(ctx: &SessionContext, dir: &Path) -> Result<()> {
    for table in ["readings", "diagnostics"] {
        let path = dir.join(table);
        let path = path.to_str().expect("utf-8 path");
        ctx.register_parquet(table, path, ParquetReadOptions::default())
            .await?;
    }
    Ok(())
}

/// The queries' DuckDB and ClickHouse spellings for `benches/peers/tsbs.py`.
/// A tsjoin session over a TSBS data set as `tsbs` sets it up (designated
/// timestamp `ts`), with `settings` applied by `SET`.
pub(crate) async fn session(
    dir: &Path,
    threads: usize,
    settings: &[(&str, &str)],
) -> Result<SessionContext> {
    let ctx = datafusion_tsjoin::tsjoin_context(
        SessionConfig::new().with_target_partitions(threads),
    );
    for (name, value) in settings {
        ctx.tsjoin_sql(&format!("SET {name} = {value}")).await?;
    }
    register(&ctx, dir).await?;
    for table in ["readings", "diagnostics"] {
        ctx.set_designated_timestamp(table, "ts")?;
    }
    Ok(ctx)
}

/// The TSBS queries for the data set in `dir`, whose name
/// (`tsbs-<rows>-<trucks>`) gives the configuration they were drawn for.
pub(crate) fn queries_for(dir: &Path) -> Result<Vec<Query>> {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let parts: Vec<&str> = name.split('-').collect();
    let (Some(rows), Some(trucks)) = (
        parts.get(1).and_then(|r| r.parse().ok()),
        parts.get(2).and_then(|t| t.parse().ok()),
    ) else {
        return Err(DataFusionError::Plan(format!(
            "{} is not a tsbs-<rows>-<trucks> directory",
            dir.display()
        )));
    };
    Ok(queries(&TsbsConfig {
        rows,
        trucks,
        ..TsbsConfig::default()
    }))
}

fn peer_queries(qs: &[Query]) -> Vec<Value> {
    qs.iter()
        .map(|q| {
            json!({"name": q.name, "duckdb": q.sql(Dialect::DuckDb),
                   "clickhouse": q.sql(Dialect::ClickHouse)})
        })
        .collect()
}

/// The answer as rows of canonical cells (only column `n` for
/// [`Check::Column`]).
fn canon(answer: &[String], check: Check) -> Vec<Vec<String>> {
    let rows = runner::canon_rows(answer);
    match check {
        Check::Rows => rows,
        Check::Column(n) => rows
            .into_iter()
            .map(|cells| vec![cells.get(n).cloned().unwrap_or_default()])
            .collect(),
    }
}

/// Whether two answers agree (numbers within 2e-6 relative).
fn same_answer(a: &[String], b: &[String], check: Check) -> bool {
    runner::same_rows(canon(a, check), canon(b, check))
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
    let threads = args.run.threads();
    let session_config = SessionConfig::new().with_target_partitions(threads);
    let ours = datafusion_tsjoin::tsjoin_context(session_config.clone());
    register(&ours, &dir).await?;
    for table in ["readings", "diagnostics"] {
        ours.set_designated_timestamp(table, "ts")?;
    }
    let plain = SessionContext::new_with_config(session_config.clone());
    register(&plain, &dir).await?;
    let mut variants = vec![];
    for setting in &args.also {
        let (key, value) = setting.split_once('=').ok_or_else(|| {
            DataFusionError::Plan(format!("--also {setting}: expected KEY=VALUE"))
        })?;
        let ctx = datafusion_tsjoin::tsjoin_context(session_config.clone());
        register(&ctx, &dir).await?;
        for table in ["readings", "diagnostics"] {
            ctx.set_designated_timestamp(table, "ts")?;
        }
        ctx.tsjoin_sql(&format!("SET {key} = {value}"))
            .await?
            .collect()
            .await?;
        variants.push((format!("{TSJOIN} ({key}={value})"), ctx));
    }

    let qs: Vec<Query> = queries(&config)
        .into_iter()
        .filter(|q| args.run.selected(q.name))
        .collect();
    let mut results: Vec<Measurement> = vec![];
    let mut scanned = serde_json::Map::new();
    for (n, q) in qs.iter().enumerate() {
        let mut engines = vec![
            (TSJOIN.to_string(), &ours, true, Dialect::Tsjoin),
            (DATAFUSION.to_string(), &plain, false, Dialect::DataFusion),
        ];
        for (name, ctx) in &variants {
            engines.push((name.clone(), ctx, true, Dialect::Tsjoin));
        }
        let mut ms: Vec<Measurement> = engines
            .iter()
            .map(|(engine, ..)| Measurement {
                engine: engine.clone(),
                query: q.name.into(),
                times: vec![],
                answer: None,
                extra: json!({}),
            })
            .collect();
        let mut rows_read = vec![0usize; engines.len()];
        for (_, ctx, tsjoin, dialect) in &engines {
            for _ in 0..args.warmup {
                runner::run_query(ctx, *tsjoin, &q.sql(*dialect)).await?;
            }
        }
        // Cold runs after the warm-up, so that the dropped page cache is
        // their only difference from the hot runs (a query's first run in
        // the process is slower whatever the cache holds), in an order
        // that moves on query by query.
        let cold_runs = if args.no_cold { 0 } else { engines.len() };
        for k in 0..cold_runs {
            let i = (n + k) % engines.len();
            let (_, ctx, tsjoin, dialect) = &engines[i];
            page_cache::evict(&dir).map_err(|e| {
                DataFusionError::Execution(format!(
                    "cold run: cannot drop {} from the page cache: {e}",
                    dir.display()
                ))
            })?;
            let (_, secs, _) = runner::run_query(ctx, *tsjoin, &q.sql(*dialect)).await?;
            ms[i].extra = json!({"cold_s": secs});
        }
        for run in 0..args.run.runs {
            // Each run starts with the next engine, so that none always
            // runs right after the previous query.
            for k in 0..engines.len() {
                let i = (run + k) % engines.len();
                let (_, ctx, tsjoin, dialect) = &engines[i];
                let (batches, secs, plan) =
                    runner::run_query(ctx, *tsjoin, &q.sql(*dialect)).await?;
                ms[i].times.push(secs);
                ms[i].answer = Some(normalise(&batches));
                rows_read[i] = runner::scan_rows(&plan, &|_| true);
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
    let (ms, notes) =
        args.run
            .peers("tsbs.py", &dir, threads, peer_queries(&qs), !args.no_cold);
    results.extend(ms);
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
         Machine: {}. Best of {} runs (hot, after {} untimed run(s) per engine; each run \
         starts with the next engine), seconds; `x` = engine time / tsjoin time. \
         Answers checked against tsjoin's (LIMIT queries: the timestamps).\n\n| query |",
        config.rows,
        config.trucks,
        machine(),
        args.run.runs,
        args.warmup,
    );
    header(&mut md, &engines, &["rows read (tsjoin / DataFusion)"]);
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
    md.push_str(&cold_table(qs, &engines, results));
    for n in notes {
        md.push_str(&format!("\nNote: {n}\n"));
    }
    let json = json!({
        "benchmark": "tsbs",
        "date": std::process::Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ").output().ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()),
        "machine": machine(),
        "rows": config.rows, "trucks": config.trucks, "seed": config.seed, "threads": threads,
        "runs": args.run.runs,
        "warmup_runs": args.warmup,
        "queries": qs.iter().map(|q| json!({"name": q.name, "tsjoin": q.sql(Dialect::Tsjoin),
            "datafusion": q.sql(Dialect::DataFusion), "duckdb": q.sql(Dialect::DuckDb),
            "clickhouse": q.sql(Dialect::ClickHouse)})).collect::<Vec<_>>(),
        "results": results.iter().map(|m| json!({
            "engine": m.engine, "query": m.query, "times_s": m.times, "best_s": m.best(),
            "cold_s": m.extra.get("cold_s"),
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

/// The cold runs as a markdown table (empty without any): each engine's
/// first run of each query with the files dropped from the page cache,
/// `x` against tsjoin's cold run.
fn cold_table(qs: &[Query], engines: &[String], results: &[Measurement]) -> String {
    let cold = |engine: &str, query: &str| {
        results
            .iter()
            .find(|m| m.engine == engine && m.query == query)
            .and_then(|m| m.extra.get("cold_s").and_then(Value::as_f64))
    };
    let engines: Vec<&String> = engines
        .iter()
        .filter(|e| qs.iter().any(|q| cold(e, q.name).is_some()))
        .collect();
    if engines.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "\nCold: one run per query and engine after the warm-up, with the data's files \
         dropped from the page cache just before (`posix_fadvise(DONTNEED)`; each engine keeps \
         what it holds in its own memory, such as Parquet footers), seconds.\n\n| query |",
    );
    header(&mut md, &engines, &[]);
    let mut totals = vec![0.0; engines.len()];
    for q in qs {
        let ours = cold(TSJOIN, q.name);
        md.push_str(&format!("| {} |", q.name));
        for (i, e) in engines.iter().enumerate() {
            match cold(e, q.name) {
                Some(secs) => {
                    if !q.name.starts_with("blog") {
                        totals[i] += secs;
                    }
                    let ratio =
                        ours.map_or(String::new(), |o| format!(" ({:.1}x)", secs / o));
                    md.push_str(&format!(" {secs:.3}{ratio} |"));
                }
                None => md.push_str(" – |"),
            }
        }
        md.push('\n');
    }
    md.push_str("| **13 TSBS types, total** |");
    for t in &totals {
        md.push_str(&format!(" {t:.3} |"));
    }
    md.push('\n');
    md
}

/// The rest of a results table's header after `| query |`: a right-aligned
/// column per engine, then the left-aligned `extra` columns.
fn header<E: std::fmt::Display>(md: &mut String, engines: &[E], extra: &[&str]) {
    for e in engines {
        md.push_str(&format!(" {e} |"));
    }
    for x in extra {
        md.push_str(&format!(" {x} |"));
    }
    md.push_str("\n|---|");
    for _ in engines {
        md.push_str("---:|");
    }
    for _ in extra {
        md.push_str("---|");
    }
    md.push('\n');
}
