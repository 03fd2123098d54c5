//! The WINDOW JOIN reference workload: trades and prices (3x trades) over
//! 1000 symbols drawn from a Zipf distribution, with microsecond jitter, at
//! the reference density of 50M trades and 150M prices per day. A smaller
//! `trades` keeps the density by shortening the time span, so every window
//! holds as many rows as in the reference run.
//!
//! Deterministic: the same `(trades, seed)` writes the same files.

use datafusion::arrow::array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::error::{DataFusionError, Result};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Symbols in the workload.
pub const SYMBOLS: usize = 1000;
/// Trades per day at the reference density (prices are three times that).
pub const TRADES_PER_DAY: u64 = 50_000_000;
/// Zipf exponent of the symbol distribution.
pub const ZIPF_S: f64 = 1.0;
/// 2025-01-02T00:00:00Z in microseconds.
pub const START_US: i64 = 1_735_776_000_000_000;
/// Files per table.
pub const FILES: usize = 8;

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// Number of trades; prices are `3 * trades`.
    pub trades: u64,
    /// Seed of the generator.
    pub seed: u64,
}

impl Workload {
    /// Time span in microseconds that keeps the reference density.
    pub fn span_us(&self) -> i64 {
        ((self.trades as u128 * 86_400_000_000u128) / TRADES_PER_DAY as u128).max(1)
            as i64
    }
}

/// SplitMix64: tiny and deterministic everywhere.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform integer in `lo..=hi` (multiply-shift: no modulo, and a bias
    /// below 2^-32 for the ranges the generators use).
    pub fn between(&mut self, lo: i64, hi: i64) -> i64 {
        let n = (hi - lo + 1) as u64;
        lo + ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as i64
    }
}

/// Zipf sampler over `0..n` by inverse CDF.
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// Weights `1 / (k + 1)^s`.
    pub fn new(n: usize, s: f64) -> Self {
        let mut cdf = Vec::with_capacity(n);
        let mut total = 0.0;
        for k in 0..n {
            total += 1.0 / ((k + 1) as f64).powf(s);
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        Self { cdf }
    }
    /// One draw.
    pub fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// Name of symbol `k`.
pub fn symbol(k: usize) -> String {
    format!("S{k:04}")
}

/// Mid price level of symbol `k` (spread over 10..1000, fixed by `k`).
fn level(k: usize) -> f64 {
    let mut r = Rng::new(k as u64 ^ 0xA5A5);
    10.0 + 990.0 * r.unit()
}

/// Schema of `trades`.
pub fn trades_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            false,
        ),
        Field::new("sym", DataType::Utf8, false),
        Field::new("price", DataType::Float64, false),
        Field::new("qty", DataType::Int64, false),
    ]))
}

/// Schema of `prices`.
pub fn prices_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            false,
        ),
        Field::new("sym", DataType::Utf8, false),
        Field::new("bid", DataType::Float64, false),
        Field::new("ask", DataType::Float64, false),
    ]))
}

/// `n` ascending timestamps spread over `span_us` with microsecond jitter:
/// row `i` lies uniformly in its own slot `[i, i + 1) * span / n`.
fn timestamps(rng: &mut Rng, n: u64, span_us: i64) -> impl Iterator<Item = i64> + '_ {
    let step = span_us as f64 / n.max(1) as f64;
    (0..n).map(move |i| START_US + ((i as f64 + rng.unit()) * step) as i64)
}

/// Generates `rows` rows with `make(i, ts, sym)` into `FILES` Parquet files
/// `dir/part-NN.parquet`, split by time.
fn write_table(
    dir: &Path,
    schema: SchemaRef,
    rows: u64,
    span_us: i64,
    seed: u64,
    make: impl Fn(&mut Rng, u64, i64, usize, &mut Vec<ArrayBuilder>),
) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let zipf = Zipf::new(SYMBOLS, ZIPF_S);
    let mut rng = Rng::new(seed);
    let mut ts_rng = Rng::new(seed ^ 0x5EED);
    let mut ts = timestamps(&mut ts_rng, rows, span_us);
    let per_file = rows.div_ceil(FILES as u64).max(1);
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(256 * 1024))
        .build();
    let mut row = 0u64;
    for f in 0..FILES {
        let path = dir.join(format!("part-{f:02}.parquet"));
        let mut writer = ArrowWriter::try_new(
            std::fs::File::create(&path)?,
            Arc::clone(&schema),
            Some(props.clone()),
        )?;
        let end = ((f as u64 + 1) * per_file).min(rows);
        while row < end {
            let chunk_end = (row + 64 * 1024).min(end);
            let mut cols: Vec<ArrayBuilder> = schema
                .fields()
                .iter()
                .map(|_| ArrayBuilder::default())
                .collect();
            for i in row..chunk_end {
                let t = ts.next().expect("one timestamp per row");
                let sym = zipf.sample(&mut rng);
                make(&mut rng, i, t, sym, &mut cols);
            }
            let arrays: Vec<ArrayRef> = cols
                .into_iter()
                .zip(schema.fields())
                .map(|(b, f)| b.finish(f.data_type()))
                .collect();
            writer.write(&RecordBatch::try_new(Arc::clone(&schema), arrays)?)?;
            row = chunk_end;
        }
        writer.close()?;
    }
    Ok(())
}

/// Column values collected before building an array.
#[derive(Default)]
pub struct ArrayBuilder {
    ints: Vec<i64>,
    floats: Vec<f64>,
    strings: Vec<String>,
}

impl ArrayBuilder {
    fn finish(self, t: &DataType) -> ArrayRef {
        match t {
            DataType::Int64 => Arc::new(Int64Array::from(self.ints)),
            DataType::Timestamp(..) => {
                Arc::new(TimestampMicrosecondArray::from(self.ints))
            }
            DataType::Float64 => Arc::new(Float64Array::from(self.floats)),
            _ => Arc::new(StringArray::from(self.strings)),
        }
    }
}

/// Writes `dir/trades/` and `dir/prices/` for `w`, replacing what is there.
pub fn generate(dir: &Path, w: Workload) -> Result<()> {
    let span = w.span_us();
    for sub in ["trades", "prices"] {
        let d = dir.join(sub);
        if d.exists() {
            std::fs::remove_dir_all(&d)?;
        }
    }
    write_table(
        &dir.join("trades"),
        trades_schema(),
        w.trades,
        span,
        w.seed,
        |rng, i, t, k, c| {
            c[0].ints.push(i as i64);
            c[1].ints.push(t);
            c[2].strings.push(symbol(k));
            c[3].floats
                .push(level(k) * (1.0 + 0.002 * (rng.unit() - 0.5)));
            c[4].ints.push(1 + (rng.next_u64() % 1000) as i64);
        },
    )?;
    write_table(
        &dir.join("prices"),
        prices_schema(),
        3 * w.trades,
        span,
        w.seed.wrapping_add(1),
        |rng, _, t, k, c| {
            let mid = level(k) * (1.0 + 0.002 * (rng.unit() - 0.5));
            let half_spread = mid * 0.0005 * (0.5 + rng.unit());
            c[0].ints.push(t);
            c[1].strings.push(symbol(k));
            c[2].floats.push(mid - half_spread);
            c[3].floats.push(mid + half_spread);
        },
    )?;
    std::fs::write(
        dir.join("workload.json"),
        serde_json::json!({ "trades": w.trades, "prices": 3 * w.trades, "seed": w.seed, "span_us": span, "symbols": SYMBOLS, "zipf_s": ZIPF_S })
            .to_string(),
    )
    .map_err(DataFusionError::from)
}

/// True when `dir` already holds the data of `w`.
pub fn is_generated(dir: &Path, w: Workload) -> bool {
    std::fs::read_to_string(dir.join("workload.json"))
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .is_some_and(|v| v["trades"] == w.trades && v["seed"] == w.seed)
}

/// Before a generator writes: empties (or creates) the directories
/// `dir/<table>` of `tables` and removes the completion marker `marker`,
/// so that a run that stops half-way leaves no complete-looking data set.
pub fn prepare_dirs(dir: &Path, tables: &[&str], marker: &str) -> Result<()> {
    for t in tables {
        let _ = std::fs::remove_dir_all(dir.join(t));
        std::fs::create_dir_all(dir.join(t))?;
    }
    let _ = std::fs::remove_file(dir.join(marker));
    Ok(())
}

/// Runs `task(0)` … `task(tasks - 1)` on `threads` threads, each thread
/// taking the next task when its last is done (so list long tasks first);
/// the results in task order, whatever the threads, or the first failed
/// task's error. The generators write one file a task.
///
/// ```
/// use tsjoin_bench::generate::in_parallel;
/// let squares = in_parallel(5, 3, |i| Ok(i * i)).unwrap();
/// assert_eq!(squares, [0, 1, 4, 9, 16]);
/// ```
pub fn in_parallel<T: Send>(
    tasks: usize,
    threads: usize,
    task: impl Fn(usize) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, Result<T>)>> = Mutex::new(Vec::with_capacity(tasks));
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, tasks.max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= tasks {
                        break;
                    }
                    let r = task(i);
                    done.lock().expect("no panic holds the lock").push((i, r));
                }
            });
        }
    });
    let mut done = done
        .into_inner()
        .map_err(|e| DataFusionError::External(e.to_string().into()))?;
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let z = Zipf::new(SYMBOLS, ZIPF_S);
        let mut rng = Rng::new(1);
        let mut counts = vec![0u32; SYMBOLS];
        for _ in 0..100_000 {
            counts[z.sample(&mut rng)] += 1;
        }
        // Symbol 0 takes 1/H(1000) ≈ 13.4% of draws, symbol 9 a tenth of that.
        assert!((12_000..15_000).contains(&counts[0]), "{}", counts[0]);
        assert!(counts[0] > 5 * counts[9]);
    }

    #[test]
    fn density_is_kept() {
        let w = Workload {
            trades: 1_000_000,
            seed: 0,
        };
        assert_eq!(w.span_us(), 1_728_000_000); // 28.8 minutes
        assert_eq!(
            Workload {
                trades: 50_000_000,
                seed: 0
            }
            .span_us(),
            86_400_000_000
        );
    }

    #[test]
    fn generation_is_deterministic() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let w = Workload {
            trades: 2000,
            seed: 42,
        };
        generate(a.path(), w).unwrap();
        generate(b.path(), w).unwrap();
        assert!(is_generated(a.path(), w));
        assert!(!is_generated(
            a.path(),
            Workload {
                trades: 2000,
                seed: 43
            }
        ));
        for sub in ["trades", "prices"] {
            for f in 0..FILES {
                let name = format!("{sub}/part-{f:02}.parquet");
                assert_eq!(
                    std::fs::read(a.path().join(&name)).unwrap(),
                    std::fs::read(b.path().join(&name)).unwrap()
                );
            }
        }
    }

    #[test]
    fn timestamps_ascend_inside_the_span() {
        let mut rng = Rng::new(9);
        let ts: Vec<i64> = timestamps(&mut rng, 10_000, 1_000_000).collect();
        assert!(ts.windows(2).all(|w| w[0] <= w[1]));
        assert!(ts[0] >= START_US && *ts.last().unwrap() < START_US + 1_000_000);
    }
}
