//! The TSBS IoT data set (trucks: `readings` and `diagnostics`) and its
//! queries, for `tsjoin-bench tsbs`.
//!
//! [`generate`] follows `shared/benchdata/tsbs_iot/GENERATOR.md` (TSBS
//! `pkg/data/usecases/iot`): per-truck tags fixed for life, clamped random
//! walks per field, batches of 10 entries of which whole batches and single
//! entries are dropped, held back and re-inserted later (out of order), one
//! field nulled in 10% and one tag in 1% of the entries. Rows are written as
//! Parquet, one file per day and table (`readings/2020-01-01.parquet`, …),
//! each file sorted by `ts` as QuestDB's out-of-order commit sorts a day
//! partition: the out-of-order arrival decides only which held entries make
//! it into the data, not the file order. Deterministic: the same
//! [`TsbsConfig`] writes the same files.
//!
//! ```
//! use tsjoin_bench::tsbs::TsbsConfig;
//! let c = TsbsConfig { rows: 1_000_000, ..TsbsConfig::default() };
//! assert!(c.epochs() * c.trucks as u64 >= 1_000_000);
//! ```

pub mod queries;

use crate::generate::Rng;
use datafusion::arrow::array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::error::Result;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;

/// 2020-01-01T00:00:00Z in microseconds (the QuestDB blog's start).
pub const START_US: i64 = 1_577_836_800_000_000;
/// Microseconds per day.
pub const DAY_US: i64 = 86_400_000_000;
/// Fleets, drivers, models (with load/fuel capacity and nominal fuel
/// consumption), device versions, as TSBS's `truck.go`.
pub const FLEETS: [&str; 4] = ["East", "West", "North", "South"];
/// Drivers.
pub const DRIVERS: [&str; 6] = ["Derek", "Rodney", "Albert", "Andy", "Seth", "Trish"];
/// Models and their numeric tags (load capacity, fuel capacity, nominal
/// fuel consumption).
pub const MODELS: [(&str, f64, f64, f64); 3] = [
    ("F-150", 2000.0, 200.0, 15.0),
    ("G-2000", 5000.0, 300.0, 19.0),
    ("H-2", 1500.0, 150.0, 12.0),
];
/// Device versions.
pub const VERSIONS: [&str; 4] = ["v1.0", "v1.5", "v2.0", "v2.3"];

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct TsbsConfig {
    /// Number of trucks (TSBS `--scale`).
    pub trucks: usize,
    /// Approximate number of `readings` rows (diagnostics get as many); the
    /// number of epochs follows from it.
    pub rows: u64,
    /// Seed (TSBS `--seed`).
    pub seed: u64,
    /// Seconds between two readings of a truck (TSBS `--log-interval`).
    pub interval_s: i64,
    /// Rows per Parquet row group.
    pub row_group_rows: usize,
}

impl Default for TsbsConfig {
    fn default() -> Self {
        Self {
            trucks: 1000,
            rows: 10_000_000,
            seed: 123,
            interval_s: 60,
            row_group_rows: 128 * 1024,
        }
    }
}

impl TsbsConfig {
    /// Epochs (ticks) so that about `rows` readings survive the drops
    /// (`× 0.9 × 0.99`).
    pub fn epochs(&self) -> u64 {
        (self.rows as f64 / (self.trucks.max(1) as f64 * 0.9 * 0.99)).ceil() as u64
    }

    /// End of the data (exclusive), microseconds.
    pub fn end_us(&self) -> i64 {
        START_US + self.epochs() as i64 * self.interval_s * 1_000_000
    }

    /// Directory name under `benches/data`.
    pub fn dir_name(&self) -> String {
        format!("tsbs-{}-{}", self.rows, self.trucks)
    }
}

/// Schema of `readings` (timestamp column `ts`).
pub fn readings_schema() -> SchemaRef {
    schema(&[
        "latitude",
        "longitude",
        "elevation",
        "velocity",
        "heading",
        "grade",
        "fuel_consumption",
    ])
}

/// Schema of `diagnostics`.
pub fn diagnostics_schema() -> SchemaRef {
    schema(&["fuel_state", "current_load", "status"])
}

const TAGS: [&str; 8] = [
    "name",
    "fleet",
    "driver",
    "model",
    "device_version",
    "load_capacity",
    "fuel_capacity",
    "nominal_fuel_consumption",
];

fn schema(fields: &[&str]) -> SchemaRef {
    let mut cols: Vec<Field> = TAGS
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let t = if i < 5 {
                DataType::Utf8
            } else {
                DataType::Float64
            };
            Field::new(*n, t, true)
        })
        .collect();
    for f in fields {
        let t = if *f == "status" {
            DataType::Int64
        } else {
            DataType::Float64
        };
        cols.push(Field::new(*f, t, true));
    }
    cols.push(Field::new(
        "ts",
        DataType::Timestamp(TimeUnit::Microsecond, None),
        false,
    ));
    Arc::new(Schema::new(cols))
}

/// One truck's fixed tags.
struct Truck {
    name: String,
    fleet: usize,
    driver: usize,
    model: usize,
    version: usize,
}

/// A clamped random walk (GENERATOR.md "Field simulation").
#[derive(Clone, Copy)]
struct Walk {
    state: f64,
    step: (f64, f64),
    range: (f64, f64),
    precision: i32,
}

impl Walk {
    fn new(state: f64, step: (f64, f64), range: (f64, f64), precision: i32) -> Self {
        Self {
            state,
            step,
            range,
            precision,
        }
    }
    fn value(&self) -> f64 {
        let m = 10f64.powi(self.precision);
        (self.state * m).trunc() / m
    }
    fn advance(&mut self, rng: &mut Rng) {
        let step = self.step.0 + (self.step.1 - self.step.0) * rng.unit();
        self.state = (self.state + step).clamp(self.range.0, self.range.1);
    }
}

/// Per-truck field states: readings' seven walks, then fuel_state,
/// current_load and status.
struct TruckState {
    readings: [Walk; 7],
    fuel_state: f64,
    current_load: f64,
    status: f64,
}

impl TruckState {
    fn new(rng: &mut Rng) -> Self {
        let u = |rng: &mut Rng, hi: f64| hi * rng.unit();
        Self {
            readings: [
                Walk::new(u(rng, 90.0), (-0.005, 0.005), (-90.0, 90.0), 5),
                Walk::new(u(rng, 180.0), (-0.005, 0.005), (-180.0, 180.0), 5),
                Walk::new(u(rng, 500.0), (-10.0, 10.0), (0.0, 5000.0), 0),
                Walk::new(0.0, (-10.0, 10.0), (0.0, 100.0), 0),
                Walk::new(u(rng, 360.0), (-5.0, 5.0), (0.0, 360.0), 0),
                Walk::new(0.0, (-5.0, 5.0), (0.0, 100.0), 0),
                Walk::new(25.0, (-5.0, 5.0), (0.0, 50.0), 1),
            ],
            fuel_state: 1.0,
            current_load: 0.0,
            status: 0.0,
        }
    }

    fn readings(&self) -> [f64; 7] {
        self.readings.map(|w| w.value())
    }

    fn diagnostics(&self) -> [f64; 7] {
        [
            (self.fuel_state * 10.0).trunc() / 10.0,
            self.current_load.trunc(),
            self.status.trunc(),
            0.0,
            0.0,
            0.0,
            0.0,
        ]
    }

    fn advance(&mut self, rng: &mut Rng) {
        for w in &mut self.readings {
            w.advance(rng);
        }
        self.fuel_state = (self.fuel_state - 0.001 * rng.unit()).clamp(0.0, 1.0);
        if self.fuel_state <= 0.0 {
            self.fuel_state = 1.0;
        }
        if rng.unit() < 0.05 {
            self.current_load = 5000.0 * rng.unit();
        }
        self.status = (self.status + normal(rng)).clamp(0.0, 5.0);
    }
}

/// Standard normal draw (Box-Muller).
fn normal(rng: &mut Rng) -> f64 {
    let u1 = rng.unit().max(f64::MIN_POSITIVE);
    let u2 = rng.unit();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// One emitted point.
#[derive(Clone, Copy)]
struct Entry {
    truck: u32,
    ts: i64,
    vals: [f64; 7],
    /// Index of the nulled field, or `u8::MAX`.
    null_field: u8,
    /// Index of the nulled tag, or `u8::MAX`.
    null_tag: u8,
}

/// TSBS's batch simulator for one measurement: drops, holds back and
/// re-inserts entries (GENERATOR.md "Deliberate dirt").
struct Dirt {
    rng: Rng,
    fields: u8,
    batch: Vec<Entry>,
    held_entries: VecDeque<Entry>,
    held_batches: VecDeque<Vec<Entry>>,
}

impl Dirt {
    fn new(seed: u64, fields: u8) -> Self {
        Self {
            rng: Rng::new(seed),
            fields,
            batch: Vec::with_capacity(10),
            held_entries: VecDeque::new(),
            held_batches: VecDeque::new(),
        }
    }

    fn push(&mut self, mut e: Entry, out: &mut Vec<Entry>) {
        if self.rng.unit() < 0.10 {
            e.null_field = ((self.rng.next_u64() % 7) as u8) % self.fields;
        }
        if self.rng.unit() < 0.01 {
            e.null_tag = (self.rng.next_u64() % 8) as u8;
        }
        self.batch.push(e);
        if self.batch.len() == 10 {
            let batch = std::mem::take(&mut self.batch);
            self.flush(batch, out);
        }
    }

    fn flush(&mut self, batch: Vec<Entry>, out: &mut Vec<Entry>) {
        let r = &mut self.rng;
        if r.unit() < 0.01 {
            return;
        }
        if r.unit() < 0.05 {
            self.held_batches.push_back(batch);
            return;
        }
        for e in batch {
            if r.unit() < 0.10 {
                continue;
            }
            if r.unit() < 0.30 {
                self.held_entries.push_back(e);
                continue;
            }
            out.push(e);
            if !self.held_entries.is_empty() && r.unit() < 0.5 {
                out.extend(self.held_entries.pop_front());
            }
        }
        if !self.held_batches.is_empty() && r.unit() < 0.5 {
            out.extend(self.held_batches.pop_front().into_iter().flatten());
        }
    }
}

/// Whether `dir` holds a complete data set for `config`.
pub fn is_generated(dir: &Path, config: &TsbsConfig) -> bool {
    dir.join(marker(config)).exists()
}

fn marker(config: &TsbsConfig) -> String {
    format!(
        ".complete-{}-{}-{}-{}-{}",
        config.trucks, config.rows, config.seed, config.interval_s, config.row_group_rows
    )
}

/// Writes `dir/readings/*.parquet` and `dir/diagnostics/*.parquet`; returns
/// the rows written per table.
pub fn generate(dir: &Path, config: &TsbsConfig) -> Result<(u64, u64)> {
    for t in ["readings", "diagnostics"] {
        let _ = std::fs::remove_dir_all(dir.join(t));
        std::fs::create_dir_all(dir.join(t))?;
    }
    let mut rng = Rng::new(config.seed);
    let trucks: Vec<Truck> = (0..config.trucks)
        .map(|i| Truck {
            name: format!("truck_{i}"),
            fleet: (rng.next_u64() % 4) as usize,
            driver: (rng.next_u64() % 6) as usize,
            model: (rng.next_u64() % 3) as usize,
            version: (rng.next_u64() % 4) as usize,
        })
        .collect();
    let mut states: Vec<TruckState> = (0..config.trucks)
        .map(|_| TruckState::new(&mut rng))
        .collect();
    let mut dirt = [
        Dirt::new(config.seed ^ 0xD1, 7),
        Dirt::new(config.seed ^ 0xD2, 3),
    ];
    let schemas = [readings_schema(), diagnostics_schema()];
    let names = ["readings", "diagnostics"];
    let mut days: [BTreeMap<i64, Vec<Entry>>; 2] = [BTreeMap::new(), BTreeMap::new()];
    let mut written = [0u64; 2];
    let mut out = vec![];
    let step_us = config.interval_s * 1_000_000;
    for k in 0..config.epochs() {
        let ts = START_US + k as i64 * step_us;
        for m in 0..2 {
            for (i, s) in states.iter().enumerate() {
                let vals = if m == 0 {
                    s.readings()
                } else {
                    s.diagnostics()
                };
                let e = Entry {
                    truck: i as u32,
                    ts,
                    vals,
                    null_field: u8::MAX,
                    null_tag: u8::MAX,
                };
                dirt[m].push(e, &mut out);
            }
            for e in out.drain(..) {
                days[m]
                    .entry((e.ts - START_US).div_euclid(DAY_US))
                    .or_default()
                    .push(e);
            }
            // Held entries come back within a few batches: a day two days
            // old is complete (a later straggler for it is dropped).
            let today = (ts - START_US).div_euclid(DAY_US);
            while let Some((&day, _)) = days[m].first_key_value() {
                if day + 2 > today {
                    break;
                }
                let rows = days[m].remove(&day).unwrap_or_default();
                written[m] +=
                    write_day(dir, names[m], &schemas[m], day, rows, &trucks, config)?;
            }
        }
        for s in &mut states {
            s.advance(&mut rng);
        }
    }
    for m in 0..2 {
        while let Some((day, rows)) = days[m].pop_first() {
            written[m] +=
                write_day(dir, names[m], &schemas[m], day, rows, &trucks, config)?;
        }
    }
    std::fs::write(dir.join(marker(config)), "")?;
    Ok((written[0], written[1]))
}

/// `YYYY-MM-DD` of day `day` after 2020-01-01 (civil-from-days).
pub fn day_name(day: i64) -> String {
    let z = (START_US / DAY_US) + day + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn write_day(
    dir: &Path,
    table: &str,
    schema: &SchemaRef,
    day: i64,
    mut rows: Vec<Entry>,
    trucks: &[Truck],
    config: &TsbsConfig,
) -> Result<u64> {
    rows.sort_by_key(|e| e.ts);
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(config.row_group_rows))
        .build();
    let path = dir.join(table).join(format!("{}.parquet", day_name(day)));
    let mut writer = ArrowWriter::try_new(
        std::fs::File::create(&path)?,
        Arc::clone(schema),
        Some(props),
    )?;
    let fields = schema.fields().len() - 9;
    for chunk in rows.chunks(64 * 1024) {
        let tag = |t: u8, e: &Entry| e.null_tag != t;
        let text = |t: u8, f: &dyn Fn(&Truck) -> &str| -> ArrayRef {
            Arc::new(StringArray::from_iter(
                chunk
                    .iter()
                    .map(|e| tag(t, e).then(|| f(&trucks[e.truck as usize]))),
            ))
        };
        let num = |t: u8, f: &dyn Fn(&Truck) -> f64| -> ArrayRef {
            Arc::new(Float64Array::from_iter(
                chunk
                    .iter()
                    .map(|e| tag(t, e).then(|| f(&trucks[e.truck as usize]))),
            ))
        };
        let mut cols: Vec<ArrayRef> = vec![
            text(0, &|t| t.name.as_str()),
            text(1, &|t| FLEETS[t.fleet]),
            text(2, &|t| DRIVERS[t.driver]),
            text(3, &|t| MODELS[t.model].0),
            text(4, &|t| VERSIONS[t.version]),
            num(5, &|t| MODELS[t.model].1),
            num(6, &|t| MODELS[t.model].2),
            num(7, &|t| MODELS[t.model].3),
        ];
        for f in 0..fields {
            let values = chunk
                .iter()
                .map(|e| (e.null_field as usize != f).then_some(e.vals[f]));
            if schema.field(8 + f).data_type() == &DataType::Int64 {
                cols.push(Arc::new(Int64Array::from_iter(
                    values.map(|v| v.map(|v| v as i64)),
                )));
            } else {
                cols.push(Arc::new(Float64Array::from_iter(values)));
            }
        }
        cols.push(Arc::new(TimestampMicrosecondArray::from_iter_values(
            chunk.iter().map(|e| e.ts),
        )));
        writer.write(&RecordBatch::try_new(Arc::clone(schema), cols)?)?;
    }
    writer.close()?;
    Ok(rows.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_names() {
        assert_eq!(day_name(0), "2020-01-01");
        assert_eq!(day_name(59), "2020-02-29");
        assert_eq!(day_name(366), "2021-01-01");
    }

    #[test]
    fn dirt_rates_follow_tsbs() {
        let mut d = Dirt::new(7, 7);
        let mut out = vec![];
        let n = 200_000;
        for i in 0..n {
            let e = Entry {
                truck: 0,
                ts: i,
                vals: [0.0; 7],
                null_field: u8::MAX,
                null_tag: u8::MAX,
            };
            d.push(e, &mut out);
        }
        // ≈ 0.9 × 0.99 survive (held entries come back).
        let kept = out.len() as f64 / n as f64;
        assert!((0.87..0.9).contains(&kept), "{kept}");
        let nulled = out.iter().filter(|e| e.null_field != u8::MAX).count();
        assert!((0.09..0.11).contains(&(nulled as f64 / out.len() as f64)));
        // Some entries arrive out of order.
        assert!(out.windows(2).any(|w| w[1].ts < w[0].ts));
    }

    #[test]
    fn generates_sorted_day_files() {
        let dir = tempfile::tempdir().unwrap();
        let c = TsbsConfig {
            trucks: 20,
            rows: 40_000,
            row_group_rows: 1000,
            ..TsbsConfig::default()
        };
        let (r, d) = generate(dir.path(), &c).unwrap();
        assert!(r > 35_000 && d > 35_000, "{r} {d}");
        let files = std::fs::read_dir(dir.path().join("readings"))
            .unwrap()
            .count();
        assert_eq!(files, 2); // 2245 epochs of a minute
        assert!(is_generated(dir.path(), &c));
    }
}
