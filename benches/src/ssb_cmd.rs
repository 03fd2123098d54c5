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

use super::PeerRunArgs;
use super::machine;
use super::side_by_side::{self, DATAFUSION, Fact, Results};
use datafusion::error::Result;
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use tsjoin_bench::runner::{Measurement, Query};
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

/// SSB's fact table.
const LINEORDER: Fact = Fact {
    name: "lineorder",
    prefix: "lo_",
};

/// Runs the benchmark (generating the data when missing).
pub async fn run(args: SsbArgs) -> Result<()> {
    let config = SsbConfig::new(args.sf, args.seed);
    let threads = args.run.threads();
    let dir = side_by_side::ensure_data(
        args.data.as_ref(),
        config.dir_name(),
        &format!("SSB SF {}", args.sf),
        |d| is_generated(d, &config),
        |d| generate(d, &config, threads),
    )?;
    let mut notes = vec![];
    let engines = side_by_side::engines(&dir, threads, register, &mut notes).await?;
    let mut qs: Vec<(String, String)> = QUERIES
        .iter()
        .filter(|(n, _)| args.run.selected(n))
        .map(|(n, s)| (n.to_string(), s.to_string()))
        .collect();
    if args.permutations {
        qs.extend(q41_permutations());
    }
    // The share of lineorder each query keeps (DataFusion, untimed).
    let plain = side_by_side::plain(&engines);
    let lineorder_rows =
        side_by_side::count(plain, "SELECT count(*) FROM lineorder").await?;
    let mut qualifying = Map::new();
    for (name, sql) in qs.iter().filter(|(n, _)| !n.contains('/')) {
        let n = side_by_side::count(plain, &count_sql(sql)).await?;
        qualifying.insert(name.clone(), json!(n));
    }
    let list: Vec<Query> = qs.iter().map(|(n, s)| Query::same(n, s)).collect();
    let res = side_by_side::run_all(
        &engines,
        &list,
        &[LINEORDER],
        &args.run,
        "ssb.py",
        &dir,
        threads,
        notes,
    )
    .await;
    let run = Run {
        args: &args,
        config,
        threads,
        lineorder_rows,
        qualifying,
        queries: qs,
        res,
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
    res: Results,
}

impl Run<'_> {
    fn report(&self) -> Result<()> {
        let res = &self.res;
        let engines = res.engines();
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
        md += &res.header("query", &engines, " qualifying |");
        let share = |q: &str| {
            self.qualifying[q].as_u64().map_or(String::new(), |n| {
                format!(
                    "{:.4}%",
                    100.0 * n as f64 / self.lineorder_rows.max(1) as f64
                )
            })
        };
        for q in &standard {
            md += &format!("| {q} | {} |{}\n", share(q), res.cells(&engines, &[q]));
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
                res.cells(&engines, &names)
            );
        }
        md += &format!(
            "| **all {}** | |{}\n",
            standard.len(),
            res.cells(&engines, &standard)
        );
        md += res.missing_note(&engines, &standard);

        // Rows out of the lineorder scan, in-process engines only.
        let names: Vec<&str> = self.queries.iter().map(|(n, _)| n.as_str()).collect();
        let (scan_md, scan) = res.scan_sections(&names, " qualifying |", |q| {
            // A permutation qualifies as many rows as Q4.1 (a unit test checks).
            let base = q.split('/').next().unwrap_or(q);
            let qualifying = self.qualifying.get(base).cloned().unwrap_or(json!("–"));
            format!(" {qualifying} |")
        });
        md += &scan_md;
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
            md += &res.header("FROM order", &engines, "");
            for p in &permutations {
                md += &format!("| {p} |{}\n", res.cells(&engines, &[p]));
            }
            md += "| **max / min** |";
            for e in &engines {
                let ts: Vec<f64> = permutations
                    .iter()
                    .filter_map(|p| res.find(e, p).map(Measurement::best))
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
        md += &res.joins_md("q4.1");
        md += &res.checks_md();
        let c = &self.config;
        let json = json!({
            "benchmark": "ssb",
            "date": side_by_side::now(),
            "machine": machine(),
            "sf": c.sf, "seed": c.seed, "threads": self.threads, "runs": self.args.run.runs,
            "rows": {"lineorder": self.lineorder_rows, "customer": c.customers(),
                     "supplier": c.suppliers(), "part": c.parts(), "date": tsjoin_bench::ssb::DATE_ROWS},
            "primary_keys": Table::ALL.iter().map(|t| (t.name().to_string(), json!(t.primary_key())))
                .collect::<Map<_, _>>(),
            "queries": self.queries.iter().map(|(n, s)| json!({"name": n, "sql": s})).collect::<Vec<_>>(),
            "qualifying_rows": self.qualifying,
            "results": res.results_json(|_| Map::new()),
            "lineorder_scan_rows": scan[&LINEORDER.key()],
            "mismatches": res.mismatches(),
            "notes": res.notes,
        });
        res.write(&self.args.out, &format!("ssb-sf{}", c.sf), &json, &md)
    }
}
