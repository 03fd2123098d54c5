//! `tsjoin-bench percentile`: `approx_percentile` (QuestDB's HdrHistogram)
//! side by side with DataFusion's `approx_percentile_cont` and, through
//! Python, DuckDB, ClickHouse (chdb) and Polars; time and the largest
//! relative error against the exact nearest-rank percentile, per cell.
//!
//! Data: `--rows` rows (5M; `--rows 50000000` for the large run), keys
//! uniform over `G` groups, log-normal latencies (median 1000, sigma 1) as
//! BIGINT microseconds (`li`) and as DOUBLE milliseconds (`lf`).

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch,
};
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema};
use datafusion::dataframe::DataFrameWriteOptions;
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::{TsJoinContextExt, tsjoin_context};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// What `percentile` runs.
#[derive(clap::Args)]
pub struct PercentileArgs {
    /// Rows of the table.
    #[arg(long, default_value_t = 5_000_000)]
    rows: usize,
    /// Group counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,1000,100000,1000000")]
    groups: Vec<usize>,
    /// Threads (target partitions) for every engine.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Runs per cell; the best counts.
    #[arg(long, default_value_t = 2)]
    runs: usize,
    /// DataFusion's `approx_percentile_cont` only up to this many groups
    /// (it has no GroupsAccumulator: 14.5 s at 100K groups on 2 cores).
    #[arg(long, default_value_t = 1000)]
    datafusion_max_groups: usize,
    /// Skip the Python peers.
    #[arg(long)]
    no_peers: bool,
    /// Skip the peer cells whose name contains any of these (e.g.
    /// `--skip-peers quantileDD,quantileTDigest,approx_quantile` for the
    /// slow ones at 50M rows).
    #[arg(long, value_delimiter = ',')]
    skip_peers: Vec<String>,
    /// Also time the peers' three-percentile forms (DuckDB lists, ClickHouse
    /// `quantilesTiming`, Polars' three expressions).
    #[arg(long)]
    peer_arrays: bool,
    /// Single-thread values/s of tsjoin at 1 group (a table of its own).
    #[arg(long)]
    single_thread: bool,
    /// Thread counts for a scaling table of tsjoin alone (p99, precision
    /// 3, both inputs) on the same rows; answers must be identical at
    /// every count. Replaces the peer comparison when given.
    #[arg(long, value_delimiter = ',')]
    scaling: Vec<usize>,
    /// Where the Parquet copies for the peers go.
    #[arg(long, default_value = "benches/data/percentile")]
    dir: PathBuf,
}

/// SplitMix64, so that every engine reads the same numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    /// A standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        (-2.0 * self.unit().ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }
}

fn table(rows: usize, groups: usize, parts: usize) -> Vec<Vec<RecordBatch>> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("li", DataType::Int64, false),
        Field::new("lf", DataType::Float64, false),
    ]));
    let mut rng = Rng(23);
    let mut out = vec![vec![]; parts];
    let batch = 65_536;
    for (i, start) in (0..rows).step_by(batch).enumerate() {
        let n = batch.min(rows - start);
        let mut k = Vec::with_capacity(n);
        let mut li = Vec::with_capacity(n);
        let mut lf = Vec::with_capacity(n);
        for _ in 0..n {
            k.push((rng.next() % groups as u64) as i64);
            let v = (1000f64.ln() + rng.normal()).exp();
            li.push(v.round() as i64);
            lf.push(v / 1000.0);
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(k)),
            Arc::new(Int64Array::from(li)),
            Arc::new(Float64Array::from(lf)),
        ];
        out[i % parts].push(RecordBatch::try_new(schema.clone(), cols).unwrap());
    }
    out
}

/// The exact nearest-rank p-th percentile of every group.
fn exact(parts: &[Vec<RecordBatch>], column: usize, p: f64) -> HashMap<i64, f64> {
    let mut by: HashMap<i64, Vec<f64>> = HashMap::new();
    for b in parts.iter().flatten() {
        let k = b.column(0).as_primitive::<Int64Type>();
        let v = b.column(column);
        for i in 0..b.num_rows() {
            let x = match v.data_type() {
                DataType::Int64 => v.as_primitive::<Int64Type>().value(i) as f64,
                _ => v.as_primitive::<Float64Type>().value(i),
            };
            by.entry(k.value(i)).or_default().push(x);
        }
    }
    by.into_iter()
        .map(|(k, mut v)| {
            v.sort_by(f64::total_cmp);
            let r = ((p * 100.0 * v.len() as f64) / 100.0).ceil().max(1.0) as usize;
            (k, v[r.min(v.len()) - 1])
        })
        .collect()
}

/// The largest relative error of `got` (key, answer) against `want`.
fn max_error(got: &[RecordBatch], want: &HashMap<i64, f64>) -> f64 {
    let mut worst = 0f64;
    for b in got {
        let k = b.column(0).as_primitive::<Int64Type>();
        let v = b.column(1);
        for i in 0..b.num_rows() {
            let a = match v.data_type() {
                DataType::List(_) => {
                    let l = v.as_list::<i32>().value(i);
                    l.as_primitive::<Float64Type>().value(2)
                }
                DataType::Float32 => v
                    .as_primitive::<datafusion::arrow::datatypes::Float32Type>()
                    .value(i) as f64,
                _ => v.as_primitive::<Float64Type>().value(i),
            };
            if let Some(&e) = want.get(&k.value(i))
                && e > 0.0
            {
                worst = worst.max((a - e).abs() / e);
            }
        }
    }
    worst
}

async fn time_df<F, Fut>(runs: usize, make: F) -> Result<(f64, Vec<RecordBatch>)>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<datafusion::dataframe::DataFrame>>,
{
    let mut best = f64::INFINITY;
    let mut last = vec![];
    for _ in 0..runs {
        let t = Instant::now();
        last = make().await?.collect().await?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok((best, last))
}

const PEERS: &str = r#"
import json, sys, time
import duckdb, chdb, polars as pl
path, col, runs, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
skip = [s for s in sys.argv[5].split(",") if s]
arrays = sys.argv[6] == "1"
def wanted(name):
    return not any(s in name for s in skip)
con = duckdb.connect(); con.execute(f"SET threads={threads}")
con.execute("SET enable_progress_bar = false")  # it prints to stdout past 2 s
con.execute(f"CREATE TABLE t AS SELECT * FROM '{path}'")
con.execute(f"CREATE TABLE ex AS SELECT k, list_sort(list({col}))[CAST(ceil(99.0*count(*)/100.0) AS BIGINT)] AS e FROM t GROUP BY k")
def err(res):
    con.register("res", res)
    v = con.execute("SELECT max(abs(CAST(r.a AS DOUBLE) - e) / e) FROM res r JOIN ex USING (k) WHERE e > 0").fetchall()[0][0]
    con.unregister("res"); return v
def fetch(q):
    rel = con.sql(q)  # DuckDB 2.0 renamed arrow() to to_arrow_table()
    return rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()
def best(f):
    b, out = 1e9, None
    for _ in range(runs):
        s = time.perf_counter(); out = f(); b = min(b, time.perf_counter() - s)
    return b, out
out = {}
duck = [("DuckDB approx_quantile", f"approx_quantile({col}, 0.99)"),
        ("DuckDB quantile_disc (exact)", f"quantile_disc({col}, 0.99)")]
if arrays:
    duck += [("DuckDB approx_quantile [p50, p90, p99]", f"approx_quantile({col}, [0.5, 0.9, 0.99])[3]"),
             ("DuckDB quantile_disc [p50, p90, p99] (exact)", f"quantile_disc({col}, [0.5, 0.9, 0.99])[3]")]
for name, fn in duck:
    if not wanted(name): continue
    q = f"SELECT k, {fn} AS a FROM t GROUP BY k"
    s, r = best(lambda: fetch(q))
    out[name] = (s, err(r))
settings = f"SETTINGS max_threads={threads}"
ch = [("ClickHouse quantileTiming", "quantileTiming(0.99)"), ("ClickHouse quantileTDigest", "quantileTDigest(0.99)"), ("ClickHouse quantileDD", "quantileDD(0.01, 0.99)")]
if arrays:
    ch += [("ClickHouse quantilesTiming [p50, p90, p99]", "quantilesTiming(0.5, 0.9, 0.99)")]
for name, fn in ch:
    if not wanted(name): continue
    a = f"{fn}({col})" + ("[3]" if "quantiles" in fn else "")
    q = f"SELECT k, {a} AS a FROM file('{path}', Parquet) GROUP BY k {settings}"
    chdb.query(q, "Null")
    s, r = best(lambda: chdb.query(q, "ArrowTable"))
    out[name] = (s, err(r))
if wanted("Polars"):
    df = pl.read_parquet(path)
    s, r = best(lambda: df.group_by("k").agg(pl.col(col).quantile(0.99, interpolation="nearest").alias("a")))
    out["Polars quantile nearest (exact)"] = (s, err(r.to_arrow()))
    if arrays:
        s, r = best(lambda: df.group_by("k").agg([pl.col(col).quantile(q, interpolation="nearest").alias(n) for q, n in [(0.5, "b"), (0.9, "c"), (0.99, "a")]]).select("k", "a"))
        out["Polars [p50, p90, p99] nearest (exact)"] = (s, err(r.to_arrow()))
print(json.dumps(out))
"#;

/// Runs the benchmark and prints a markdown table per group count.
pub async fn run(args: PercentileArgs) -> Result<()> {
    std::fs::create_dir_all(&args.dir)?;
    println!(
        "rows {}, threads {}, best of {}; error = max over groups of |answer - exact| / exact (exact: nearest-rank p99)\n",
        args.rows, args.threads, args.runs
    );
    println!("load average at start: {}\n", load_average());
    if !args.scaling.is_empty() {
        return scaling(&args).await;
    }
    if args.single_thread && args.groups.contains(&1) {
        single_thread(&args).await?;
    }
    for &g in &args.groups {
        let parts = table(args.rows, g, args.threads);
        let ctx: SessionContext =
            tsjoin_context(SessionConfig::new().with_target_partitions(args.threads));
        let schema = parts[0][0].schema();
        ctx.register_table("lat", Arc::new(MemTable::try_new(schema, parts.clone())?))?;
        println!(
            "### {g} groups\n\n| engine | input | ms | max rel error |\n|---|---|---|---|"
        );
        for (ci, column) in [(1usize, "li"), (2, "lf")] {
            let input = if ci == 1 { "BIGINT" } else { "DOUBLE" };
            let want = exact(&parts, ci, 0.99);
            let mut cells: Vec<(String, f64, f64)> = vec![];
            for precision in [2, 3] {
                let sql = format!(
                    "SELECT k, approx_percentile({column}, 0.99, {precision}) FROM lat GROUP BY k"
                );
                let (s, r) = time_df(args.runs, || ctx.tsjoin_sql(&sql)).await?;
                cells.push((
                    format!("tsjoin approx_percentile p99, precision {precision}"),
                    s,
                    max_error(&r, &want),
                ));
            }
            let sql = format!(
                "SELECT k, approx_percentile({column}, ARRAY[0.5, 0.9, 0.99], 3) FROM lat GROUP BY k"
            );
            let (s, r) = time_df(args.runs, || ctx.tsjoin_sql(&sql)).await?;
            cells.push((
                "tsjoin approx_percentile [p50, p90, p99], precision 3".into(),
                s,
                max_error(&r, &want),
            ));
            // What DataFusion's GROUP BY costs with the cheapest aggregate.
            let sql = format!("SELECT k, max({column}) FROM lat GROUP BY k");
            let (s, _) = time_df(args.runs, || ctx.sql(&sql)).await?;
            cells.push(("DataFusion max (GROUP BY floor)".into(), s, f64::NAN));
            if g <= args.datafusion_max_groups {
                let sql = format!(
                    "SELECT k, approx_percentile_cont({column}, 0.99) FROM lat GROUP BY k"
                );
                let (s, r) = time_df(args.runs, || ctx.sql(&sql)).await?;
                cells.push((
                    "DataFusion approx_percentile_cont".into(),
                    s,
                    max_error(&r, &want),
                ));
            }
            if !args.no_peers {
                let path = args.dir.join(format!("lat-{}-{g}.parquet", args.rows));
                if !path.exists() {
                    ctx.table("lat")
                        .await?
                        .write_parquet(
                            path.to_str().unwrap(),
                            DataFrameWriteOptions::new().with_single_file_output(true),
                            None,
                        )
                        .await?;
                }
                let out = std::process::Command::new("python3")
                    .args(["-c", PEERS, path.to_str().unwrap(), column])
                    .args([args.runs.to_string(), args.threads.to_string()])
                    .args([
                        args.skip_peers.join(","),
                        (args.peer_arrays as u8).to_string(),
                    ])
                    .output()
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
                // The answer is the last line (a peer may print before it).
                let stdout = String::from_utf8_lossy(&out.stdout);
                let last = stdout.lines().rfind(|l| !l.trim().is_empty());
                match serde_json::from_str::<HashMap<String, (f64, Option<f64>)>>(
                    last.unwrap_or_default(),
                ) {
                    Ok(peers) => {
                        let mut peers: Vec<_> = peers.into_iter().collect();
                        peers.sort_by(|a, b| a.0.cmp(&b.0));
                        for (name, (s, e)) in peers {
                            cells.push((name, s, e.unwrap_or(f64::NAN)));
                        }
                    }
                    // The exit status tells a peer killed (out of memory at 50M
                    // rows, say) from one that failed with a message; the
                    // start of its output, one that printed something else.
                    Err(e) => {
                        eprintln!(
                            "peers failed ({}, {e}): {}; output: {}",
                            out.status,
                            String::from_utf8_lossy(&out.stderr),
                            stdout.chars().take(400).collect::<String>()
                        )
                    }
                }
            }
            for (name, s, e) in cells {
                let e = if e.is_nan() {
                    "-".into()
                } else {
                    format!("{e:.1e}")
                };
                println!("| {name} | {input} | {:.0} | {e} |", s * 1000.0);
            }
        }
        println!();
    }
    println!("load average at end: {}", load_average());
    Ok(())
}

/// `/proc/loadavg`'s first three fields (the machine is shared).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// tsjoin's values per second on one thread, one group.
async fn single_thread(args: &PercentileArgs) -> Result<()> {
    let parts = table(args.rows, 1, 1);
    let ctx: SessionContext =
        tsjoin_context(SessionConfig::new().with_target_partitions(1));
    let schema = parts[0][0].schema();
    ctx.register_table("lat", Arc::new(MemTable::try_new(schema, parts)?))?;
    println!(
        "### 1 group, 1 thread\n\n| engine | input | ms | M values/s |\n|---|---|---|---|"
    );
    for (column, input) in [("li", "BIGINT"), ("lf", "DOUBLE")] {
        for (what, p) in [
            ("p99", "0.99"),
            ("[p50, p90, p99]", "ARRAY[0.5, 0.9, 0.99]"),
        ] {
            for precision in [2, 3] {
                let sql = format!(
                    "SELECT approx_percentile({column}, {p}, {precision}) FROM lat"
                );
                let (s, _) = time_df(args.runs, || ctx.tsjoin_sql(&sql)).await?;
                println!(
                    "| tsjoin approx_percentile {what}, precision {precision} | {input} | {:.0} | {:.0} |",
                    s * 1000.0,
                    args.rows as f64 / s / 1e6
                );
            }
        }
        let sql = format!("SELECT max({column}) FROM lat");
        let (s, _) = time_df(args.runs, || ctx.sql(&sql)).await?;
        println!(
            "| DataFusion max (floor) | {input} | {:.0} | {:.0} |",
            s * 1000.0,
            args.rows as f64 / s / 1e6
        );
    }
    println!();
    Ok(())
}

/// `--scaling`: tsjoin's p99 (precision 3) per group count and input at
/// each thread count, the rows dealt round-robin by batch into as many
/// partitions as threads; the speed-up is against the first count, and the
/// answer (sorted by key) must be bit-identical at every count.
async fn scaling(args: &PercentileArgs) -> Result<()> {
    let counts = &args.scaling;
    let header: String = counts.iter().map(|t| format!(" {t} thr |")).collect();
    let rule: String = counts.iter().map(|_| "---|").collect();
    println!(
        "### tsjoin approx_percentile(x, 0.99, 3) scaling: ms (speed-up)\n\n\
         | groups | input |{header} same answer |\n|---|---|{rule}---|"
    );
    for &g in &args.groups {
        let batches: Vec<RecordBatch> = table(args.rows, g, 1).concat();
        for column in ["li", "lf"] {
            let input = if column == "li" { "BIGINT" } else { "DOUBLE" };
            let sql = format!(
                "SELECT k, approx_percentile({column}, 0.99, 3) AS a FROM lat GROUP BY k ORDER BY k"
            );
            let (mut cells, mut first, mut same) = (String::new(), None, true);
            for &t in counts {
                let mut parts = vec![vec![]; t.max(1)];
                for (i, b) in batches.iter().enumerate() {
                    parts[i % t.max(1)].push(b.clone());
                }
                let ctx: SessionContext =
                    tsjoin_context(SessionConfig::new().with_target_partitions(t.max(1)));
                let schema = batches[0].schema();
                ctx.register_table("lat", Arc::new(MemTable::try_new(schema, parts)?))?;
                let (s, r) = time_df(args.runs, || ctx.tsjoin_sql(&sql)).await?;
                let schema = r.first().map(|b| b.schema()).ok_or_else(|| {
                    DataFusionError::Execution("no answer batches".into())
                })?;
                let answer = datafusion::arrow::compute::concat_batches(&schema, &r)?;
                let base = first.get_or_insert_with(|| (s, answer.clone()));
                same &= answer == base.1;
                write!(cells, " {:.0} ({:.1}x) |", s * 1e3, base.0 / s).unwrap();
            }
            println!(
                "| {g} | {input} |{cells} {} |",
                if same { "yes" } else { "**no**" }
            );
        }
    }
    Ok(())
}
