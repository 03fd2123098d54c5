//! `tsjoin-bench ssb`: the Star Schema Benchmark's 13 queries side by side
//! in one run, on the same Parquet files: tsjoin (default settings, and
//! with `tsjoin.join_filters = false` when the setting exists), DataFusion
//! 55 plain, DataFusion 55 with `pushdown_filters` and `reorder_filters`,
//! and through Python DuckDB and ClickHouse (chdb) (`benches/peers/ssb.py`).
//! The in-process engines alternate run by run and declare the tables'
//! primary keys ([`tsjoin_bench::ssb::register`]). Every answer is checked
//! against DataFusion 55's; a mismatch is reported, not fatal.
//! `--permutations` adds Q4.1 in 28 FROM orders, LIP's robustness test.
//!
//! ```text
//! PATH=/work/peers-venv/bin:$PATH tsjoin-bench ssb --sf 1       # 6 M lineorder rows
//! PATH=/work/peers-venv/bin:$PATH tsjoin-bench ssb --sf 10 --permutations
//! ```

use super::{PeerRunArgs, machine, write_report};
use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tsjoin_bench::runner::{self, Measurement, normalise};
use tsjoin_bench::ssb::queries::{QUERIES, count_sql, flight, q41_permutations};
use tsjoin_bench::ssb::{SsbConfig, Table, generate, is_generated, register};

/// What `ssb` runs.
#[derive(clap::Args)]
pub struct SsbArgs {
    /// Scale factor: 1 ≈ 6 M `lineorder` rows; fractions (0.01) for a
    /// smoke test.
    #[arg(long, default_value_t = 1.0)]
    sf: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Data directory (default: benches/data/ssb-sf<SF>); generated when
    /// missing.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Threads (`--threads`; the generator's too), runs, peers, queries
    /// (q1.1 … q4.3).
    #[command(flatten)]
    run: PeerRunArgs,
    /// Also run Q4.1 in 28 FROM orders (`q4.1/dcspL` …): the 24 orders
    /// of the dimensions, and lineorder at each position.
    #[arg(long)]
    permutations: bool,
    /// Where the JSON and markdown results go.
    #[arg(long, default_value = "benches/results/ssb")]
    out: PathBuf,
}

const TSJOIN: &str = "tsjoin";
const TSJOIN_NO_FILTERS: &str = "tsjoin (join filters off)";
const DATAFUSION: &str = "DataFusion 55";
const DATAFUSION_PUSHDOWN: &str = "DataFusion 55 pushdown_filters";

/// An in-process engine: its session, and whether SQL goes through
/// `tsjoin_sql`.
struct Engine {
    name: &'static str,
    ctx: SessionContext,
    tsjoin: bool,
}

/// The four in-process engines over `dir` (three when this build of
/// tsjoin has no `tsjoin.join_filters`: a note says so).
async fn engines(
    dir: &std::path::Path,
    threads: usize,
    notes: &mut Vec<String>,
) -> Result<Vec<Engine>> {
    let config = SessionConfig::new().with_target_partitions(threads);
    let mut pushdown = config.clone();
    pushdown.options_mut().execution.parquet.pushdown_filters = true;
    pushdown.options_mut().execution.parquet.reorder_filters = true;
    let mut out = vec![Engine {
        name: TSJOIN,
        ctx: datafusion_tsjoin::tsjoin_context(config.clone()),
        tsjoin: true,
    }];
    let no_filters = datafusion_tsjoin::tsjoin_context(config.clone());
    match no_filters
        .tsjoin_sql("SET tsjoin.join_filters = false")
        .await
    {
        Ok(_) => out.push(Engine {
            name: TSJOIN_NO_FILTERS,
            ctx: no_filters,
            tsjoin: true,
        }),
        Err(e) => {
            let note = format!(
                "'{TSJOIN_NO_FILTERS}' skipped: SET tsjoin.join_filters = false failed ({e})"
            );
            eprintln!("note: {note}");
            notes.push(note);
        }
    }
    out.push(Engine {
        name: DATAFUSION,
        ctx: SessionContext::new_with_config(config),
        tsjoin: false,
    });
    out.push(Engine {
        name: DATAFUSION_PUSHDOWN,
        ctx: SessionContext::new_with_config(pushdown),
        tsjoin: false,
    });
    for e in &out {
        register(&e.ctx, dir).await?;
    }
    Ok(out)
}

/// The join operators of `plan`, top down: a hash join as its type
/// (`Inner`, `RightSemi`, …), any other join by its operator name.
fn joins(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<String>) {
    if let Some(j) = plan.downcast_ref::<HashJoinExec>() {
        out.push(j.join_type().to_string());
    } else if plan.name().contains("Join") {
        out.push(plan.name().to_string());
    }
    for c in plan.children() {
        joins(c, out);
    }
}

/// Whether a scan reads `lineorder` (its columns start with `lo_`).
fn is_lineorder(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.schema()
        .fields()
        .iter()
        .any(|f| f.name().starts_with("lo_"))
}

async fn count(ctx: &SessionContext, sql: &str) -> Result<usize> {
    let batches = ctx.sql(sql).await?.collect().await?;
    Ok(normalise(&batches)
        .first()
        .and_then(|c| c.parse().ok())
        .unwrap_or(0))
}

/// Runs every engine `runs` times on `sql`, alternating; an engine that
/// fails is noted and left out of this query.
async fn measure(
    engines: &[Engine],
    name: &str,
    sql: &str,
    runs: usize,
    notes: &mut Vec<String>,
) -> Vec<Measurement> {
    let mut ms: Vec<Measurement> = engines
        .iter()
        .map(|e| Measurement {
            engine: e.name.into(),
            query: name.into(),
            times: vec![],
            answer: None,
            extra: json!({}),
        })
        .collect();
    let mut failed = vec![false; engines.len()];
    for _ in 0..runs.max(1) {
        for (i, e) in engines.iter().enumerate() {
            if failed[i] {
                continue;
            }
            match runner::run_query(&e.ctx, e.tsjoin, sql).await {
                Ok((batches, secs, plan)) => {
                    let mut js = vec![];
                    joins(&plan, &mut js);
                    ms[i].times.push(secs);
                    ms[i].answer = Some(normalise(&batches));
                    ms[i].extra = json!({
                        "lineorder_scan_rows": runner::scan_rows(&plan, &is_lineorder),
                        "joins": js,
                    });
                }
                Err(err) => {
                    failed[i] = true;
                    notes.push(format!("{} {name} failed: {err}", e.name));
                }
            }
        }
    }
    let best: Vec<String> = ms
        .iter()
        .filter(|m| !m.times.is_empty())
        .map(|m| format!("{} {:.3} s", m.engine, m.best()))
        .collect();
    eprintln!("{name}: {}", best.join(", "));
    ms.retain(|m| !m.times.is_empty());
    ms
}

/// Runs the benchmark (generating the data when missing).
pub async fn run(args: SsbArgs) -> Result<()> {
    let config = SsbConfig::new(args.sf, args.seed);
    let dir = args
        .data
        .clone()
        .unwrap_or_else(|| PathBuf::from("benches/data").join(config.dir_name()));
    let threads = args.run.threads();
    if !is_generated(&dir, &config) {
        let start = Instant::now();
        let rows = generate(&dir, &config, threads)?;
        eprintln!(
            "generated SSB SF {} ({rows:?}) in {:.1} s into {}",
            args.sf,
            start.elapsed().as_secs_f64(),
            dir.display()
        );
    }
    let mut notes = vec![];
    let engines = engines(&dir, threads, &mut notes).await?;
    let mut qs: Vec<(String, String)> = QUERIES
        .iter()
        .filter(|(n, _)| args.run.selected(n))
        .map(|(n, s)| (n.to_string(), s.to_string()))
        .collect();
    if args.permutations {
        qs.extend(q41_permutations());
    }
    // The share of lineorder each query keeps (DataFusion, untimed).
    let plain = &engines
        .iter()
        .find(|e| e.name == DATAFUSION)
        .expect("plain")
        .ctx;
    let lineorder_rows = count(plain, "SELECT count(*) FROM lineorder").await?;
    let mut qualifying = Map::new();
    for (name, sql) in qs.iter().filter(|(n, _)| !n.contains('/')) {
        qualifying.insert(name.clone(), json!(count(plain, &count_sql(sql)).await?));
    }
    let mut results = vec![];
    for (name, sql) in &qs {
        results.extend(measure(&engines, name, sql, args.run.runs, &mut notes).await);
    }
    let list: Vec<Value> = qs
        .iter()
        .map(|(n, s)| json!({"name": n, "duckdb": s, "clickhouse": s}))
        .collect();
    let (ms, n) = args.run.peers("ssb.py", &dir, threads, list);
    results.extend(ms.into_iter().filter(|m| !m.times.is_empty()));
    notes.extend(n);
    let run = Run {
        args: &args,
        config,
        threads,
        lineorder_rows,
        qualifying,
        queries: qs,
        results,
        notes,
    };
    run.report()
}

/// What one run measured, for the report.
struct Run<'a> {
    args: &'a SsbArgs,
    config: SsbConfig,
    threads: usize,
    lineorder_rows: usize,
    qualifying: Map<String, Value>,
    queries: Vec<(String, String)>,
    results: Vec<Measurement>,
    notes: Vec<String>,
}

impl Run<'_> {
    fn find(&self, engine: &str, query: &str) -> Option<&Measurement> {
        self.results
            .iter()
            .find(|m| m.engine == engine && m.query == query)
    }

    /// Engines in the order they first appear.
    fn engines(&self) -> Vec<String> {
        let mut out: Vec<String> = vec![];
        for m in &self.results {
            if !out.contains(&m.engine) {
                out.push(m.engine.clone());
            }
        }
        out
    }

    /// Whether `m`'s answer agrees with DataFusion 55's (None: nothing to
    /// compare).
    fn agrees(&self, m: &Measurement) -> Option<bool> {
        let reference = self.find(DATAFUSION, &m.query)?.answer.as_ref()?;
        let answer = m.answer.as_ref()?;
        Some(runner::same_rows(
            runner::canon_rows(answer),
            runner::canon_rows(reference),
        ))
    }

    /// `seconds (ratio to tsjoin)` of each engine for `names`, summed, as
    /// markdown cells; a sum that misses a query is marked `*`.
    fn cells(&self, engines: &[String], names: &[&str]) -> String {
        let sum = |e: &str| -> (f64, bool) {
            let found: Vec<f64> = names
                .iter()
                .filter_map(|q| self.find(e, q).map(Measurement::best))
                .collect();
            (found.iter().sum(), found.len() == names.len())
        };
        let (ours, ours_complete) = sum(TSJOIN);
        let mut row = String::new();
        for e in engines {
            let (t, complete) = sum(e);
            if t == 0.0 && !complete {
                row += " – |";
                continue;
            }
            let ratio = if e != TSJOIN && complete && ours_complete && ours > 0.0 {
                format!(" ({:.2}x)", t / ours)
            } else {
                String::new()
            };
            let flags: String = names
                .iter()
                .filter_map(|q| self.find(e, q))
                .filter(|m| self.agrees(m) == Some(false))
                .map(|_| " **DIFFERS**")
                .take(1)
                .collect();
            let star = if complete { "" } else { "*" };
            row += &format!(" {t:.3}{star}{ratio}{flags} |");
        }
        row
    }

    fn header(&self, first: &str, engines: &[String], extra: &str) -> String {
        let mut md = format!("| {first} |{extra}");
        for e in engines {
            md += &format!(" {e} |");
        }
        md += "\n|---|";
        md += &"---:|".repeat(engines.len() + usize::from(!extra.is_empty()));
        md + "\n"
    }

    fn report(&self) -> Result<()> {
        let engines = self.engines();
        let standard: Vec<&str> = self
            .queries
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| !n.contains('/'))
            .collect();
        let mut md = format!(
            "# SSB SF {}, {} threads\n\n\
             Machine: {}. Best of {} runs (hot), seconds; `(x)` = the engine's time / \
             tsjoin's (above 1: tsjoin is faster). Answers are checked against {DATAFUSION}'s. \
             The in-process engines declare the primary keys; DuckDB and chdb read views over \
             the same Parquet files. `qualifying` = lineorder rows that pass all of the \
             query's predicates and joins, of {}.\n\n",
            self.args.sf,
            self.threads,
            machine(),
            self.args.run.runs,
            self.lineorder_rows,
        );
        md += &self.header("query", &engines, " qualifying |");
        let share = |q: &str| {
            self.qualifying[q].as_u64().map_or(String::new(), |n| {
                format!(
                    "{:.4}%",
                    100.0 * n as f64 / self.lineorder_rows.max(1) as f64
                )
            })
        };
        for q in &standard {
            md += &format!("| {q} | {} |{}\n", share(q), self.cells(&engines, &[q]));
        }
        let mut flights: Vec<&str> = standard.iter().map(|q| flight(q)).collect();
        flights.dedup();
        for f in &flights {
            let names: Vec<&str> = standard
                .iter()
                .copied()
                .filter(|q| flight(q) == *f)
                .collect();
            md += &format!(
                "| **flight {}** | |{}\n",
                &f[1..],
                self.cells(&engines, &names)
            );
        }
        md += &format!(
            "| **all {}** | |{}\n",
            standard.len(),
            self.cells(&engines, &standard)
        );
        if engines
            .iter()
            .any(|e| standard.iter().any(|q| self.find(e, q).is_none()))
        {
            md += "\n`*`: a query is missing from the sum (it failed; see the notes).\n";
        }

        // Rows out of the lineorder scan, in-process engines only.
        let local: Vec<String> = engines
            .iter()
            .filter(|e| e.starts_with("tsjoin") || e.starts_with("DataFusion"))
            .cloned()
            .collect();
        md += "\n## Lineorder rows into the joins (out of the scan, or of the LipFilterExec above it)\n\n";
        md += &self.header("query", &local, " qualifying |");
        let mut scan = Map::new();
        for (q, _) in &self.queries {
            // A permutation qualifies as many rows as Q4.1 (a unit test checks).
            let base = q.split('/').next().unwrap_or(q);
            let qualifying = self.qualifying.get(base).cloned().unwrap_or(json!("–"));
            let mut row = format!("| {q} | {qualifying} |");
            let mut per = Map::new();
            for e in &local {
                let n = self
                    .find(e, q)
                    .map(|m| m.extra["lineorder_scan_rows"].clone());
                row += &format!(" {} |", n.clone().unwrap_or(json!("–")));
                per.insert(e.clone(), n.unwrap_or(Value::Null));
            }
            md += &row;
            md += "\n";
            scan.insert(q.clone(), Value::Object(per));
        }

        let permutations: Vec<&str> = self
            .queries
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| n.contains('/'))
            .collect();
        if !permutations.is_empty() {
            md += "\n## Q4.1 in other FROM orders\n\n\
                   `L` lineorder, `d` date, `c` customer, `s` supplier, `p` part, in FROM \
                   order; `dcspL` is the benchmark's. DataFusion does not reorder joins: the \
                   dimensions meet lineorder in their FROM order (the first 24 rows), \
                   lineorder's position only picks the sides of the first join (the last 4).\n\n";
            md += &self.header("FROM order", &engines, "");
            for p in &permutations {
                md += &format!("| {p} |{}\n", self.cells(&engines, &[p]));
            }
            md += "| **max / min** |";
            for e in &engines {
                let ts: Vec<f64> = permutations
                    .iter()
                    .filter_map(|p| self.find(e, p).map(Measurement::best))
                    .collect();
                let (lo, hi) = ts.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), t| {
                    (lo.min(*t), hi.max(*t))
                });
                md += &if ts.is_empty() {
                    " – |".to_string()
                } else {
                    format!(" {:.2} ({lo:.3}–{hi:.3}) |", hi / lo)
                };
            }
            md += "\n";
        }

        md += "\n## Joins in the Q4.1 plans (top down)\n\n";
        for e in &local {
            if let Some(m) = self.find(e, "q4.1") {
                let js: Vec<&str> = m.extra["joins"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                md += &format!("- {e}: {}\n", js.join(", "));
            }
        }

        let mismatches: Vec<String> = self
            .results
            .iter()
            .filter(|m| self.agrees(m) == Some(false))
            .map(|m| format!("{} {}", m.engine, m.query))
            .collect();
        let unchecked: Vec<String> = self
            .results
            .iter()
            .filter(|m| self.agrees(m).is_none())
            .map(|m| format!("{} {}", m.engine, m.query))
            .collect();
        if !mismatches.is_empty() {
            md += &format!(
                "\n**MISMATCH: answers differ from {DATAFUSION}'s: {}**\n",
                mismatches.join(", ")
            );
        }
        if !unchecked.is_empty() {
            md += &format!(
                "\nNot checked (no {DATAFUSION} answer): {}\n",
                unchecked.join(", ")
            );
        }
        for n in &self.notes {
            md += &format!("\nNote: {n}\n");
        }
        let c = &self.config;
        let json = json!({
            "benchmark": "ssb",
            "date": std::process::Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ").output().ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()),
            "machine": machine(),
            "sf": c.sf, "seed": c.seed, "threads": self.threads, "runs": self.args.run.runs,
            "rows": {"lineorder": self.lineorder_rows, "customer": c.customers(),
                     "supplier": c.suppliers(), "part": c.parts(), "date": tsjoin_bench::ssb::DATE_ROWS},
            "primary_keys": Table::ALL.iter().map(|t| (t.name().to_string(), json!(t.primary_key())))
                .collect::<Map<_, _>>(),
            "queries": self.queries.iter().map(|(n, s)| json!({"name": n, "sql": s})).collect::<Vec<_>>(),
            "qualifying_rows": self.qualifying,
            "results": self.results.iter().map(|m| json!({
                "engine": m.engine, "query": m.query, "times_s": m.times, "best_s": m.best(),
                "agrees_with_datafusion": self.agrees(m),
                "answer_rows": m.answer.as_ref().map(Vec::len),
                "answer_head": m.answer.as_ref().map(|a| a.iter().take(12).collect::<Vec<_>>()),
                "lineorder_scan_rows": m.extra.get("lineorder_scan_rows"),
                "joins": m.extra.get("joins"),
            })).collect::<Vec<_>>(),
            "lineorder_scan_rows": scan,
            "mismatches": mismatches,
            "notes": self.notes,
        });
        write_report(&self.args.out, &format!("ssb-sf{}", c.sf), &json, &md)?;
        if !mismatches.is_empty() {
            eprintln!(
                "MISMATCH: {} answers differ from {DATAFUSION}'s: {}",
                mismatches.len(),
                mismatches.join(", ")
            );
        }
        Ok(())
    }
}
