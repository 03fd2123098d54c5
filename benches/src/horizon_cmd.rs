//! `tsjoin-bench horizon`: HORIZON JOIN markouts on the WINDOW JOIN
//! workload (trades, prices = 3x), side by side in one run with DataFusion's
//! best plain-SQL rewrite and, through Python, DuckDB, ClickHouse (chdb)
//! and Polars (`benches/peers/horizon.py`); answers checked against tsjoin's.
//!
//! The query: `avg((p.bid + p.ask) / 2 - t.price)` per offset, every trade
//! matched ASOF by symbol at `ts + offset`, for 61 offsets (`RANGE FROM 0s
//! TO 60s STEP 1s`) and a LIST of 5. For scale, the same markout at one
//! offset as a plain ASOF JOIN (the figure HORIZON's 61 offsets are
//! compared with) and a scan of the columns the query reads.
//!
//! ```text
//! PATH=/work/peers-venv/bin:$PATH tsjoin-bench horizon --trades 1000000
//! ```

use super::{DataArgs, machine, write_report};
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use tsjoin_bench::generate::{generate, is_generated};
use tsjoin_bench::runner::{Measurement, measure, session};

/// What `horizon` runs.
#[derive(clap::Args)]
pub struct HorizonArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Threads for every engine (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Runs per tsjoin query; the best counts.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Runs per query of DataFusion's rewrite and the Python peers; the best
    /// counts.
    #[arg(long, default_value_t = 2)]
    peer_runs: usize,
    /// DataFusion's window-over-UNION-ALL rewrite only for shapes with at
    /// most this many offsets (it sorts trades x offsets rows).
    #[arg(long, default_value_t = 5)]
    datafusion_max_offsets: usize,
    /// Python peers to run.
    #[arg(long, value_delimiter = ',', default_value = "duckdb,chdb,polars")]
    engines: Vec<String>,
    /// Skip the Python peers.
    #[arg(long)]
    no_peers: bool,
    /// Where the JSON and markdown results go.
    #[arg(long, default_value = "benches/results/horizon")]
    out: PathBuf,
}

/// The offset shapes: name, HORIZON clause, offsets in microseconds.
fn shapes() -> Vec<(&'static str, &'static str, Vec<i64>)> {
    vec![
        (
            "range61",
            "RANGE FROM 0s TO 60s STEP 1s",
            (0..=60).map(|s| s * 1_000_000).collect(),
        ),
        (
            "list5",
            "LIST (0, 1s, 5s, 30s, 60s)",
            vec![0, 1_000_000, 5_000_000, 30_000_000, 60_000_000],
        ),
    ]
}

const MARKOUT: &str = "avg((p.bid + p.ask) / 2 - t.price)";

fn horizon_sql(clause: &str) -> String {
    format!(
        "SELECT h.offset, {MARKOUT} AS markout FROM trades t HORIZON JOIN prices p ON (sym) \
         {clause} AS h ORDER BY h.offset"
    )
}

/// The ratio of the 61-offset HORIZON JOIN to one ASOF JOIN from `runs`
/// pairs run one after the other (sorted): the machine's speed drifts
/// from minute to minute, and the table's best times are taken minutes
/// apart, shape after shape.
async fn in_turns(ctx: &SessionContext, asof: &str, runs: usize) -> Result<Vec<f64>> {
    let range61 = shapes().into_iter().find(|s| s.0 == "range61");
    let horizon = horizon_sql(range61.expect("the range61 shape").1);
    let mut ratios = vec![];
    for _ in 0..runs.max(1) {
        let h = measure(ctx, "", "range61", &[&horizon], 1).await?.best();
        let a = measure(ctx, "", "asof1", &[asof], 1).await?.best();
        ratios.push(h / a);
    }
    ratios.sort_by(f64::total_cmp);
    Ok(ratios)
}

/// DataFusion 55 has no ASOF join: its best plain rewrite is a window over
/// the prices and the trades shifted by every offset (UNION ALL), carrying
/// the last mid forward per symbol.
fn datafusion_sql(offsets: &[i64]) -> String {
    let values: Vec<String> = offsets.iter().map(|o| format!("({o})")).collect();
    format!(
        "WITH o(off) AS (VALUES {}), \
         u AS (SELECT sym, CAST(ts AS BIGINT) AS tt, 0 AS kind, (bid + ask) / 2 AS mid, \
                      CAST(NULL AS DOUBLE) AS price, CAST(NULL AS BIGINT) AS off FROM prices \
               UNION ALL SELECT t.sym, CAST(t.ts AS BIGINT) + o.off, 1, CAST(NULL AS DOUBLE), \
                      t.price, o.off FROM trades t CROSS JOIN o), \
         w AS (SELECT kind, off, price, last_value(mid) IGNORE NULLS OVER (PARTITION BY sym \
                      ORDER BY tt, kind ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS m \
               FROM u) \
         SELECT off, avg(m - price) AS markout FROM w WHERE kind = 1 GROUP BY off ORDER BY off",
        values.join(", ")
    )
}

/// Runs `benches/peers/horizon.py`; missing Python or packages give notes.
fn peers(
    args: &HorizonArgs,
    dir: &Path,
    threads: usize,
) -> (Vec<Measurement>, Vec<String>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/horizon.py");
    let shapes: serde_json::Map<String, Value> = shapes()
        .into_iter()
        .map(|(name, _, offsets)| (name.to_string(), json!(offsets)))
        .collect();
    let output = std::process::Command::new("python3")
        .arg(&script)
        .args(["--data", dir.to_str().unwrap_or(".")])
        .args(["--threads", &threads.to_string()])
        .args(["--runs", &args.peer_runs.to_string()])
        .args(["--shapes", &Value::Object(shapes).to_string()])
        .args(["--engines", &args.engines.join(",")])
        .stderr(std::process::Stdio::inherit())
        .output();
    tsjoin_bench::runner::peer_results(output)
}

/// Whether two answers (`offset|markout` rows) agree: same offsets, and
/// markouts within 2e-6 (answers carry 6 decimals; the engines sum in
/// different orders).
fn same_answer(a: &[String], b: &[String]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            let (Some((ox, mx)), Some((oy, my))) = (x.split_once('|'), y.split_once('|'))
            else {
                return false;
            };
            ox == oy
                && match (mx.parse::<f64>(), my.parse::<f64>()) {
                    (Ok(p), Ok(q)) => (p - q).abs() <= 2e-6,
                    _ => mx == my,
                }
        })
}

/// Runs the benchmark (generating the data when missing).
pub async fn run(args: HorizonArgs) -> Result<()> {
    let w = args.data.workload();
    let dir = args.data.dir();
    if !is_generated(&dir, w) {
        generate(&dir, w)?;
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut results: Vec<Measurement> = vec![];
    let ctx = session(&dir, threads, true, &[]).await?;
    for table in ["trades", "prices"] {
        ctx.set_designated_timestamp(table, "ts")?;
    }
    let plain = session(&dir, threads, false, &[]).await?;
    for (name, clause, offsets) in shapes() {
        let sql = horizon_sql(clause);
        results
            .push(measure(&ctx, "tsjoin HORIZON JOIN", name, &[&sql], args.runs).await?);
        if offsets.len() <= args.datafusion_max_offsets {
            let sql = datafusion_sql(&offsets);
            results.push(
                measure(
                    &plain,
                    "DataFusion 55 window over UNION ALL",
                    name,
                    &[&sql],
                    args.peer_runs,
                )
                .await?,
            );
        }
    }
    let asof = format!(
        "SELECT 0 AS offset, {MARKOUT} AS markout FROM trades t ASOF JOIN prices p ON (sym)"
    );
    results.push(
        measure(
            &ctx,
            "tsjoin ASOF JOIN (one offset)",
            "asof1",
            &[&asof],
            args.runs,
        )
        .await?,
    );
    let turns = in_turns(&ctx, &asof, args.runs).await?;
    let scan = "SELECT count(*), sum(t.price), count(DISTINCT t.sym) FROM trades t";
    results
        .push(measure(&ctx, "tsjoin scan of trades", "scan", &[scan], args.runs).await?);
    let scan = "SELECT sum(p.bid + p.ask), count(DISTINCT p.sym) FROM prices p";
    results
        .push(measure(&ctx, "tsjoin scan of prices", "scan", &[scan], args.runs).await?);
    let mut notes = vec![];
    if !args.no_peers {
        let (ms, n) = peers(&args, &dir, threads);
        results.extend(ms);
        notes.extend(n);
    }

    // Answers: every engine's against tsjoin's HORIZON JOIN of that shape.
    let reference = |shape: &str| {
        results
            .iter()
            .find(|m| m.engine == "tsjoin HORIZON JOIN" && m.query == shape)
            .and_then(|m| m.answer.clone())
    };
    let agrees = |m: &Measurement| match (reference(&m.query), &m.answer) {
        (Some(r), Some(a)) => Some(same_answer(&r, a)),
        _ => None,
    };
    let ours = |shape: &str| {
        results
            .iter()
            .find(|m| m.engine == "tsjoin HORIZON JOIN" && m.query == shape)
            .map(|m| m.best())
    };
    let asof1 = results
        .iter()
        .find(|m| m.query == "asof1")
        .map(|m| m.best());
    let mut md = format!(
        "# HORIZON JOIN markouts, {} trades / {} prices, {threads} threads\n\n\
         Machine: {}. Best of {} (tsjoin) / {} (others) runs; ratio = engine time / \
         tsjoin HORIZON JOIN time of the same shape.\n\n\
         | shape | engine | best s | ratio | answer |\n|---|---|---:|---:|---|\n",
        w.trades,
        3 * w.trades,
        machine(),
        args.runs,
        args.peer_runs
    );
    let mut mismatches = vec![];
    for m in &results {
        let ratio =
            ours(&m.query).map_or(String::new(), |o| format!("{:.2}", m.best() / o));
        let check = match agrees(m) {
            Some(true) => "agrees",
            Some(false) => {
                mismatches.push(format!("{} {}", m.engine, m.query));
                "DIFFERS"
            }
            None => "",
        };
        md.push_str(&format!(
            "| {} | {} | {:.3} | {ratio} | {check} |\n",
            m.query,
            m.engine,
            m.best()
        ));
    }
    if let (Some(h), Some(a)) = (ours("range61"), asof1) {
        md.push_str(&format!(
            "\nHORIZON JOIN with 61 offsets / one ASOF JOIN: {:.2}x\n",
            h / a
        ));
    }
    md.push_str(&format!(
        "\nThe same, the two queries run in turns ({} pairs, each pair's ratio): \
         median {:.2}x, best {:.2}x, worst {:.2}x\n",
        turns.len(),
        turns[turns.len() / 2],
        turns[0],
        turns[turns.len() - 1]
    ));
    for n in &notes {
        md.push_str(&format!("\nNote: {n}\n"));
    }
    let json = json!({
        "benchmark": "horizon",
        "date": std::process::Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ").output().ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()),
        "machine": machine(),
        "trades": w.trades, "prices": 3 * w.trades, "seed": w.seed, "threads": threads,
        "runs": args.runs, "peer_runs": args.peer_runs,
        "results": results.iter().map(|m| json!({
            "engine": m.engine, "shape": m.query, "times_s": m.times, "best_s": m.best(),
            "agrees_with_tsjoin": agrees(m), "answer": m.answer,
        })).collect::<Vec<_>>(),
        "notes": notes,
        "range61_over_asof1_in_turns": turns,
    });
    write_report(&args.out, &format!("trades-{}", w.trades), &json, &md)?;
    if !mismatches.is_empty() {
        return Err(DataFusionError::Execution(format!(
            "answers differ from tsjoin's: {}",
            mismatches.join(", ")
        )));
    }
    Ok(())
}
