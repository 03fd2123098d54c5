//! `tsjoin-cli demo`: a deterministic trades/prices data set (no downloads)
//! and the showcase WINDOW JOIN, with its result, EXPLAIN and timing.

use crate::{Format, Options, run_sql, tables};
use arrow::array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::error::Result;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::prelude::SessionContext;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const SYMBOLS: [&str; 20] = [
    "AAPL", "MSFT", "NVDA", "AMZN", "GOOG", "META", "TSLA", "AVGO", "JPM", "V", "XOM",
    "UNH", "MA", "PG", "JNJ", "HD", "COST", "ABBV", "MRK", "CVX",
];
const FILES: usize = 4;
/// One trading hour, in microseconds.
const SPAN_US: i64 = 3_600_000_000;
const START_US: i64 = 1_735_732_800_000_000; // 2025-01-01T12:00:00Z

/// SplitMix64: a tiny deterministic generator, so the data set is the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Zipf-like symbol index: symbol k has weight 1 / (k + 1).
    fn symbol(&mut self) -> usize {
        let total: f64 = (1..=SYMBOLS.len()).map(|k| 1.0 / k as f64).sum();
        let mut x = self.unit() * total;
        for k in 0..SYMBOLS.len() {
            x -= 1.0 / (k + 1) as f64;
            if x <= 0.0 {
                return k;
            }
        }
        SYMBOLS.len() - 1
    }
}

fn base_price(sym: usize) -> f64 {
    50.0 + 37.0 * sym as f64
}

/// Row timestamps: evenly spread over the hour with microsecond jitter, ascending.
fn timestamps(rng: &mut Rng, n: usize) -> Vec<i64> {
    let step = SPAN_US / n.max(1) as i64;
    let mut ts: Vec<i64> = (0..n as i64)
        .map(|i| START_US + i * step + (rng.next() % step.max(1) as u64) as i64)
        .collect();
    ts.sort_unstable();
    ts
}

fn trades_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("symbol", DataType::Utf8, false),
        Field::new("price", DataType::Float64, false),
        Field::new("qty", DataType::Int64, false),
    ]))
}

fn prices_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("sym", DataType::Utf8, false),
        Field::new("bid", DataType::Float64, true),
        Field::new("ask", DataType::Float64, true),
    ]))
}

fn write_files(dir: &Path, schema: &SchemaRef, columns: Vec<ArrayRef>) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let batch = RecordBatch::try_new(Arc::clone(schema), columns)?;
    let per = batch.num_rows().div_ceil(FILES);
    for f in 0..FILES {
        let start = (f * per).min(batch.num_rows());
        let len = per.min(batch.num_rows() - start);
        let file = std::fs::File::create(dir.join(format!("part-{f}.parquet")))?;
        let mut w = ArrowWriter::try_new(file, Arc::clone(schema), None)?;
        w.write(&batch.slice(start, len))?;
        w.close()?;
    }
    Ok(())
}

/// Writes `trades/` (n rows) and `prices/` (3n rows) under `dir`.
pub fn generate(dir: &Path, n: usize) -> Result<()> {
    let mut rng = Rng(42);
    let ts = timestamps(&mut rng, n);
    let syms: Vec<usize> = (0..n).map(|_| rng.symbol()).collect();
    let price: Vec<f64> = syms
        .iter()
        .map(|&s| {
            (base_price(s) * (1.0 + 0.01 * (rng.unit() - 0.5)) * 100.0).round() / 100.0
        })
        .collect();
    let qty: Vec<i64> = (0..n).map(|_| 1 + (rng.next() % 500) as i64).collect();
    write_files(
        &dir.join("trades"),
        &trades_schema(),
        vec![
            Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("UTC")),
            Arc::new(StringArray::from_iter_values(
                syms.iter().map(|&s| SYMBOLS[s]),
            )),
            Arc::new(Float64Array::from(price)),
            Arc::new(Int64Array::from(qty)),
        ],
    )?;
    let m = 3 * n;
    let ts = timestamps(&mut rng, m);
    let syms: Vec<usize> = (0..m).map(|_| rng.symbol()).collect();
    let mid: Vec<f64> = syms
        .iter()
        .map(|&s| base_price(s) * (1.0 + 0.01 * (rng.unit() - 0.5)))
        .collect();
    // about 1 quote in 1000 lacks a side
    let bid: Vec<Option<f64>> = mid
        .iter()
        .map(|&p| {
            (!rng.next().is_multiple_of(1000))
                .then(|| ((p - 0.01) * 100.0).round() / 100.0)
        })
        .collect();
    let ask: Vec<Option<f64>> = mid
        .iter()
        .map(|&p| {
            (!rng.next().is_multiple_of(1000))
                .then(|| ((p + 0.01) * 100.0).round() / 100.0)
        })
        .collect();
    write_files(
        &dir.join("prices"),
        &prices_schema(),
        vec![
            Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("UTC")),
            Arc::new(StringArray::from_iter_values(
                syms.iter().map(|&s| SYMBOLS[s]),
            )),
            Arc::new(Float64Array::from(bid)),
            Arc::new(Float64Array::from(ask)),
        ],
    )
}

/// The showcase query.
pub const SHOWCASE: &str = "SELECT t.ts, t.symbol, t.price, \
    avg(p.bid) AS avg_bid, max(p.ask) AS max_ask, count(*) AS quotes \
FROM trades t \
WINDOW JOIN prices p ON p.sym = t.symbol \
RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING EXCLUDE PREVAILING \
WHERE t.symbol IN ('NVDA', 'TSLA') \
ORDER BY t.ts \
LIMIT 10";

/// Generates the data (when missing), registers it and runs the showcase.
pub async fn run(
    ctx: &SessionContext,
    dir: Option<PathBuf>,
    trades: usize,
) -> Result<()> {
    let dir =
        dir.unwrap_or_else(|| std::env::temp_dir().join(format!("tsjoin-demo-{trades}")));
    if !dir
        .join("prices")
        .join(format!("part-{}.parquet", FILES - 1))
        .exists()
    {
        eprintln!(
            "generating {trades} trades and {} prices under {} ...",
            3 * trades,
            dir.display()
        );
        generate(&dir, trades)?;
    }
    tables::register(ctx, "trades", &dir.join("trades").to_string_lossy(), None).await?;
    tables::register(ctx, "prices", &dir.join("prices").to_string_lossy(), None).await?;
    println!("-- {SHOWCASE}\n");
    let timed = Options {
        format: Format::Table,
        timing: true,
        ..Default::default()
    };
    run_sql(ctx, SHOWCASE, timed, None).await?;
    println!("\n-- EXPLAIN");
    let plan = Options {
        format: Format::Table,
        timing: false,
        ..Default::default()
    };
    run_sql(ctx, &format!("EXPLAIN {SHOWCASE}"), plan, None).await?;
    println!("\n-- the same WINDOW JOIN over every trade, summarised");
    let all = "SELECT count(*) AS trades, sum(quotes) AS quotes_in_windows, round(avg(avg_bid), 4) AS mean_avg_bid FROM ( \
        SELECT t.ts, avg(p.bid) AS avg_bid, count(*) AS quotes FROM trades t \
        WINDOW JOIN prices p ON p.sym = t.symbol \
        RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING EXCLUDE PREVAILING) w";
    run_sql(ctx, all, timed, None).await
}
