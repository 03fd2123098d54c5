//! `tsjoin-bench tpch`: the 22 TPC-H queries (validation parameters) side
//! by side in one run, on the same Parquet files (`tpchgen`'s tables), on
//! the engines of `tsjoin-bench ssb` ([`super::side_by_side`]): tsjoin
//! with and without join filters, DataFusion 55 plain and with
//! `pushdown_filters`, and through Python DuckDB and ClickHouse (chdb)
//! (`benches/peers/tpch.py`), each in its own dialect. Every answer is
//! checked against DataFusion 55's and, at SF 1, against `tpchgen`'s SF 1
//! answer set (TPC-H's validation rules); a mismatch is reported, not
//! fatal. `--explain` adds the plan lines that carry an OR
//! (Q7's nation pair, Q19's per-table ORs): where DataFusion's partial
//! push-down of disjunctions put them.
//!
//! ```text
//! PATH=/work/peers-venv/bin:$PATH tsjoin-bench tpch --sf 1 --explain
//! PATH=/work/peers-venv/bin:$PATH tsjoin-bench tpch --sf 10 --only q5,q7,q11,q19
//! ```

use super::PeerRunArgs;
use super::machine;
use super::side_by_side::{self, DATAFUSION, Fact, Results, TSJOIN};
use datafusion::error::Result;
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use tsjoin_bench::runner::{Measurement, Query};
use tsjoin_bench::tpch::queries::{REFERENCE_ERRATA, matches_reference, queries};
use tsjoin_bench::tpch::{
    Table, TpchConfig, explain, generate, is_generated, or_lines, register,
};

/// What `tpch` runs.
#[derive(clap::Args)]
pub struct TpchArgs {
    /// Scale factor: 1 ≈ 6 M `lineitem` rows; fractions (0.01) for a
    /// smoke test. Answers are checked against tpchgen's at SF 1 only.
    #[arg(long, default_value_t = 1.0)]
    sf: f64,
    /// Data directory (default: benches/data/tpch-sf<SF>); generated when
    /// missing.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Threads (`--threads`; the generator's too), runs, peers, queries
    /// (q1 … q22).
    #[command(flatten)]
    run: PeerRunArgs,
    /// Add these queries' plan lines that carry an OR to the report
    /// (tsjoin's and DataFusion 55's plans); `--explain` alone: q7,q19.
    #[arg(long, value_delimiter = ',', num_args = 0.., default_missing_values = ["q7", "q19"])]
    explain: Vec<String>,
    /// Where the JSON and markdown results go.
    #[arg(long, default_value = "benches/results/tpch")]
    out: PathBuf,
}

/// TPC-H's fact tables: the rows out of their scans are recorded.
const FACTS: [Fact; 2] = [
    Fact {
        name: "lineitem",
        prefix: "l_",
    },
    Fact {
        name: "orders",
        prefix: "o_",
    },
];

/// Runs the benchmark (generating the data when missing).
pub async fn run(args: TpchArgs) -> Result<()> {
    let config = TpchConfig::new(args.sf);
    let threads = args.run.threads();
    let dir = side_by_side::ensure_data(
        args.data.as_ref(),
        config.dir_name(),
        &format!("TPC-H SF {}", args.sf),
        |d| is_generated(d, &config),
        |d| generate(d, &config, threads),
    )?;
    let mut notes = vec![];
    let engines = side_by_side::engines(&dir, threads, register, &mut notes).await?;
    let qs: Vec<Query> = queries(args.sf)
        .into_iter()
        .filter(|q| args.run.selected(&q.name))
        .collect();
    let plain = side_by_side::plain(&engines);
    let mut rows = Map::new();
    for t in Table::ALL {
        let sql = format!("SELECT count(*) FROM {}", t.name());
        rows.insert(
            t.name().into(),
            json!(side_by_side::count(plain, &sql).await?),
        );
    }
    // Plans before the timed runs: EXPLAIN does not execute.
    let mut plans = vec![];
    for q in qs.iter().filter(|q| args.explain.contains(&q.name)) {
        for e in engines
            .iter()
            .filter(|e| e.name == TSJOIN || e.name == DATAFUSION)
        {
            let (logical, physical) = explain(&e.ctx, &q.datafusion, e.tsjoin).await?;
            plans.push(Explained {
                query: q.name.clone(),
                engine: e.name,
                logical: or_lines(&logical),
                physical: or_lines(&physical),
            });
        }
    }
    let res = side_by_side::run_all(
        &engines, &qs, &FACTS, &args.run, "tpch.py", &dir, threads, notes,
    )
    .await;
    Run {
        args: &args,
        threads,
        rows,
        queries: qs,
        plans,
        res,
    }
    .report()
}

/// The lines of a query's plans that carry an OR.
struct Explained {
    query: String,
    engine: &'static str,
    logical: Vec<String>,
    physical: Vec<String>,
}

/// What one run measured, for the report.
struct Run<'a> {
    args: &'a TpchArgs,
    threads: usize,
    rows: Map<String, Value>,
    queries: Vec<Query>,
    plans: Vec<Explained>,
    res: Results,
}

impl Run<'_> {
    /// Whether `m`'s answer matches tpchgen's SF 1 answer (None: not SF 1,
    /// or no answer to compare).
    fn against_reference(&self, m: &Measurement) -> Option<bool> {
        if self.args.sf != 1.0 {
            return None;
        }
        matches_reference(&m.query, m.answer.as_ref()?)
    }

    /// The section on tpchgen's SF 1 answers: per query and engine,
    /// matches / differs / no reference.
    fn reference_md(&self, engines: &[String], names: &[&str]) -> String {
        let mut md = "\n## Answers against tpchgen's SF 1 answer set\n\n".to_string();
        if self.args.sf != 1.0 {
            return md
                + &format!(
                    "No reference: tpchgen's answers (`tpchgen::q_and_a`) are for SF 1 \
                     only; this run is SF {}.\n",
                    self.args.sf
                );
        }
        md += "TPC-H's validation rules (2.1.3.5): text trimmed, whole numbers exact, \
               numbers given to the cent within 1% or $100, whichever is less.\n\n";
        md += &self.res.header("query", engines, "");
        for q in names {
            md += &format!("| {q} |");
            for e in engines {
                md += match self.res.find(e, q).map(|m| self.against_reference(m)) {
                    None => " – |",
                    Some(Some(true)) => " matches |",
                    Some(Some(false)) => " **differs** |",
                    Some(None) => " no reference |",
                };
            }
            md += "\n";
        }
        for (q, column, why) in REFERENCE_ERRATA {
            if names.contains(&q) {
                md += &format!("\n{q}: column {} not compared: {why}.\n", column + 1);
            }
        }
        md
    }

    /// The section on `--explain`: each query's plan lines with an OR.
    fn explain_md(&self) -> String {
        if self.plans.is_empty() {
            return String::new();
        }
        let mut md = "\n## Partial push-down of disjunctions (plan lines with an OR)\n\n\
                      DataFusion's `PushDownFilter` (`extract_or_clauses_for_join`, since 14.0) \
                      relaxes an OR over several tables to one OR per table, `(A AND B) OR (C AND \
                      D)` → `A OR C` below the join on A's and C's table; the whole OR stays at \
                      the join. Q7: the nation pair reaches both nation scans; Q19: the \
                      part and lineitem ORs reach their scans. Indentation is the plan's.\n"
            .to_string();
        for p in &self.plans {
            if p.engine == DATAFUSION {
                md += &format!(
                    "\n### {}: {} optimized logical plan\n\n```text\n{}\n```\n",
                    p.query,
                    p.engine,
                    p.logical.join("\n")
                );
            }
            md += &format!(
                "\n### {}: {} physical plan\n\n```text\n{}\n```\n",
                p.query,
                p.engine,
                p.physical.join("\n")
            );
        }
        md
    }

    fn report(&self) -> Result<()> {
        let res = &self.res;
        let engines = res.engines();
        let names: Vec<&str> = self.queries.iter().map(|q| q.name.as_str()).collect();
        let mut md = format!(
            "# TPC-H SF {}, {} threads\n\n\
             Machine: {}. Best of {} runs (hot), seconds; `(x)` = the engine's time / \
             tsjoin's (above 1: tsjoin is faster). The 22 queries with the specification's \
             validation parameters, the same in every engine's dialect. Answers are checked \
             against {DATAFUSION}'s (**DIFFERS** marks a difference) and, at SF 1, against \
             tpchgen's SF 1 answer set (below). The in-process engines declare the primary \
             keys; DuckDB and chdb read views over the same Parquet files. lineitem: {} rows.\n\n",
            self.args.sf,
            self.threads,
            machine(),
            self.args.run.runs,
            self.rows["lineitem"],
        );
        md += &res.header("query", &engines, "");
        for q in &names {
            md += &format!("| {q} |{}\n", res.cells(&engines, &[q]));
        }
        md += &format!(
            "| **all {}** |{}\n",
            names.len(),
            res.cells(&engines, &names)
        );
        md += res.missing_note(&engines, &names);
        md += &self.reference_md(&engines, &names);
        let (scan_md, scan) = res.scan_sections(&names, "", |_| String::new());
        md += &scan_md;
        md += &self.explain_md();
        md += &res.checks_md();
        let reference_differs: Vec<String> = res
            .results
            .iter()
            .filter(|m| self.against_reference(m) == Some(false))
            .map(|m| format!("{} {}", m.engine, m.query))
            .collect();
        if !reference_differs.is_empty() {
            md += &format!(
                "\n**Answers that differ from tpchgen's SF 1 answers: {}**\n",
                reference_differs.join(", ")
            );
        }
        let mut json = json!({
            "benchmark": "tpch",
            "date": side_by_side::now(),
            "machine": machine(),
            "sf": self.args.sf, "threads": self.threads, "runs": self.args.run.runs,
            "rows": self.rows,
            "primary_keys": Table::ALL.iter().map(|t| (t.name().to_string(), json!(t.primary_key())))
                .collect::<Map<_, _>>(),
            "queries": self.queries.iter().map(|q| json!({"name": q.name,
                "datafusion": q.datafusion, "duckdb": q.duckdb, "clickhouse": q.clickhouse}))
                .collect::<Vec<_>>(),
            "results": res.results_json(|m| {
                let mut o = Map::new();
                o.insert("matches_tpchgen_sf1".into(), json!(self.against_reference(m)));
                o
            }),
            "explain": self.plans.iter().map(|p| json!({"query": p.query, "engine": p.engine,
                "logical_or_lines": p.logical, "physical_or_lines": p.physical}))
                .collect::<Vec<_>>(),
            "mismatches": res.mismatches(),
            "differs_from_tpchgen_sf1": reference_differs,
            "notes": res.notes,
        });
        json.as_object_mut().expect("an object").extend(scan);
        res.write(
            &self.args.out,
            &format!("tpch-sf{}", self.args.sf),
            &json,
            &md,
        )?;
        if !reference_differs.is_empty() {
            eprintln!(
                "MISMATCH: {} answers differ from tpchgen's SF 1 answers: {}",
                reference_differs.len(),
                reference_differs.join(", ")
            );
        }
        Ok(())
    }
}
