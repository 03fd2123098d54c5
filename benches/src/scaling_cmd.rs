//! `tsjoin-bench window-join-scaling`: the WINDOW JOIN fast path at 1, 2, 4,
//! … threads, one process, the same files.
//!
//! Three figures per thread count, so the join phase can be told apart from
//! Parquet decoding:
//! - q1 end to end from Parquet;
//! - q1 over the same rows already in memory (a `MemTable` of as many
//!   partitions as threads): the WINDOW JOIN alone, split into the wall time
//!   of the right-index build (the operator's `build_time`) and the rest
//!   (probe + aggregate + top 10);
//! - the scan of the same columns (the floor under q1).
//!
//! Every thread count's top-10 answer is checked against the one-thread run.

use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tsjoin_bench::generate::{Workload, generate, is_generated};
use tsjoin_bench::runner::{Measurement, QUERIES, SCAN, measure, session};

/// What `window-join-scaling` runs.
#[derive(clap::Args)]
pub struct ScalingArgs {
    #[command(flatten)]
    data: super::DataArgs,
    /// Thread counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    threads: Vec<usize>,
    /// Runs per figure; the best counts.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Where the JSON and markdown results go.
    #[arg(long, default_value = "benches/results/window_join")]
    out: PathBuf,
}

/// One thread count's figures (best of the runs, seconds).
struct Row {
    threads: usize,
    parquet: Measurement,
    memory: Measurement,
    scan: Measurement,
}

impl Row {
    fn build(&self) -> f64 {
        self.memory.extra["build_s"].as_f64().unwrap_or(f64::NAN)
    }

    fn probe(&self) -> f64 {
        self.memory.best() - self.build()
    }
}

/// Registers `trades` and `prices` again as in-memory tables of `threads`
/// partitions, read once from the Parquet tables of `ctx`.
async fn in_memory(
    ctx: &datafusion::prelude::SessionContext,
    threads: usize,
) -> Result<()> {
    for table in ["trades", "prices"] {
        let df = ctx.table(table).await?;
        let schema = Arc::new(df.schema().as_arrow().clone());
        let batches: Vec<_> = df.collect().await?;
        // Round-robin the batches over the partitions, so each holds a
        // contiguous share of the row count as a scan would.
        let mut parts = vec![vec![]; threads];
        for (i, b) in batches.into_iter().enumerate() {
            parts[i % threads].push(b);
        }
        ctx.deregister_table(table)?;
        ctx.register_table(table, Arc::new(MemTable::try_new(schema, parts)?))?;
    }
    Ok(())
}

/// Runs the scaling benchmark and writes `scaling-<trades>.{md,json}`.
pub async fn run(args: ScalingArgs) -> Result<()> {
    let (w, data): (Workload, PathBuf) = (args.data.workload(), args.data.dir());
    if !is_generated(&data, w) {
        eprintln!(
            "generating {} trades / {} prices into {} ...",
            w.trades,
            3 * w.trades,
            data.display()
        );
        generate(&data, w)?;
    }
    let q1 = QUERIES[0].2;
    let runs = args.runs.max(1);
    // The first query of a process pays the allocator's first faults; one
    // untimed run at the most threads keeps that out of every row.
    let most = args.threads.iter().copied().max().unwrap_or(1);
    measure(
        &session(&data, most, true, &[]).await?,
        "warm-up",
        "q1",
        &[q1],
        1,
    )
    .await?;
    let mut rows = vec![];
    for &threads in &args.threads {
        eprintln!("scaling: {threads} threads");
        let ctx = session(&data, threads, true, &[]).await?;
        let parquet = measure(&ctx, "parquet", "q1", &[q1], runs).await?;
        let scan = measure(&ctx, "scan", "scan", &SCAN, runs).await?;
        in_memory(&ctx, threads).await?;
        let memory = measure(&ctx, "memory", "q1", &[q1], runs).await?;
        rows.push(Row {
            threads,
            parquet,
            memory,
            scan,
        });
    }
    report(w, &rows, runs, &args.out, &data)
}

fn report(w: Workload, rows: &[Row], runs: usize, out: &Path, data: &Path) -> Result<()> {
    let Some(base) = rows.first() else {
        return Ok(());
    };
    let machine = super::machine();
    let mut md = format!(
        "WINDOW JOIN q1 scaling: {} trades, {} prices, fast path, best of {runs} runs, {} ({} cores). \
         Speed-up is against the first row ({} thread(s)).\n\n\
         | threads | q1 from Parquet | speed-up | q1 in memory | speed-up | index build | speed-up | probe + aggregate | speed-up | scan | speed-up | answer agrees |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
        w.trades,
        3 * w.trades,
        machine["cpu"].as_str().unwrap_or("?"),
        machine["cores"],
        base.threads,
    );
    let mut mismatches = vec![];
    for r in rows {
        let agrees = r.parquet.answer == base.parquet.answer
            && r.memory.answer == base.parquet.answer;
        if !agrees {
            mismatches.push(r.threads);
        }
        let cell = |t: f64, b: f64| format!(" {t:.3} s | {:.2}x |", b / t);
        md += &format!(
            "| {} |{}{}{}{}{} {} |\n",
            r.threads,
            cell(r.parquet.best(), base.parquet.best()),
            cell(r.memory.best(), base.memory.best()),
            cell(r.build(), base.build()),
            cell(r.probe(), base.probe()),
            cell(r.scan.best(), base.scan.best()),
            if agrees { "yes" } else { "**NO**" },
        );
    }
    md += &format!(
        "\nData: `{}`. In memory: the same rows in a MemTable of one partition per thread; index build is the operator's `build_time` (wall), probe + aggregate is the rest of the in-memory query.\n",
        data.display()
    );
    let json = json!({
        "benchmark": "window_join_scaling",
        "machine": machine,
        "trades": w.trades, "prices": 3 * w.trades, "seed": w.seed, "runs": runs,
        "results": rows.iter().map(|r| json!({
            "threads": r.threads,
            "q1_parquet_s": r.parquet.times, "q1_memory_s": r.memory.times, "scan_s": r.scan.times,
            "build_s": r.build(), "probe_s": r.probe(), "extra": r.memory.extra,
        })).collect::<Vec<_>>(),
    });
    super::write_report(out, &format!("scaling-{}", w.trades), &json, &md)?;
    if !mismatches.is_empty() {
        return Err(DataFusionError::Execution(format!(
            "answers differ from the first row's at {mismatches:?} threads"
        )));
    }
    Ok(())
}
