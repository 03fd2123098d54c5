//! `tsjoin-bench groupby`: grouped count/sum on tsjoin's inline aggregate
//! against DataFusion's built-in hash aggregate (same process, same files)
//! and DuckDB and Polars (`benches/peers/groupby.py`), one table of ratios
//! from one run.
//!
//! Data (deterministic, Parquet, [`FILES`] files per set):
//! - `grid-N`: N rows of `k10`, `k1k`, `k100k` (uniform keys with that many
//!   groups), `kall` (every row its own group: a shuffled `0..N`), `ksparse`
//!   (every row its own group, spread over the whole i64 range) and `v`
//!   (Int64 values);
//! - `q1like-N`: a TPC-H Q1-like table: two string keys with 3 × 2 values
//!   (6 groups) and float columns.

use crate::generate::Rng;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, StringArray,
};
use datafusion::arrow::datatypes::{
    DataType, Field, Float64Type, Int64Type, Schema, SchemaRef,
};
use datafusion::error::Result;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use std::path::Path;
use std::sync::Arc;

/// Files per data set.
pub const FILES: usize = 10;

/// Key columns of the grid and their (nominal) group counts.
pub const GRID_KEYS: [(&str, &str); 5] = [
    ("k10", "10"),
    ("k1k", "1K"),
    ("k100k", "100K"),
    ("kall", "all distinct (dense)"),
    ("ksparse", "all distinct (sparse)"),
];

/// Aggregate lists of the grid.
pub const GRID_AGGS: [(&str, &str); 3] = [
    ("count", "count(*)"),
    ("sum", "sum(v)"),
    ("count+sum", "count(*), sum(v)"),
];

/// The Q1-like query.
pub const Q1_LIKE: &str = "SELECT returnflag, linestatus, sum(quantity), sum(extendedprice), count(*) \
     FROM q1like GROUP BY returnflag, linestatus";

/// The grid query for `key` and aggregate list `aggs`.
pub fn grid_sql(key: &str, aggs: &str) -> String {
    format!("SELECT {key}, {aggs} FROM grid GROUP BY {key}")
}

/// One column's values while a chunk is generated.
enum Column {
    Int(Vec<i64>),
    Float(Vec<f64>),
    Str(Vec<&'static str>),
}

impl Column {
    fn new(t: &DataType) -> Self {
        match t {
            DataType::Int64 => Column::Int(vec![]),
            DataType::Float64 => Column::Float(vec![]),
            _ => Column::Str(vec![]),
        }
    }

    fn finish(self) -> ArrayRef {
        match self {
            Column::Int(v) => Arc::new(Int64Array::from(v)),
            Column::Float(v) => Arc::new(Float64Array::from(v)),
            Column::Str(v) => Arc::new(StringArray::from(v)),
        }
    }
}

/// Writes `rows` rows made by `make(row, columns)` as [`FILES`] Parquet
/// files in `dir` (replacing it), then a marker with the row count.
fn write(
    dir: &Path,
    schema: SchemaRef,
    rows: u64,
    mut make: impl FnMut(u64, &mut [Column]),
) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    let per_file = rows.div_ceil(FILES as u64).max(1);
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(512 * 1024))
        .build();
    for f in 0..FILES as u64 {
        let path = dir.join(format!("part-{f:02}.parquet"));
        let mut w = ArrowWriter::try_new(
            std::fs::File::create(&path)?,
            Arc::clone(&schema),
            Some(props.clone()),
        )?;
        let (mut row, end) = (f * per_file, ((f + 1) * per_file).min(rows));
        while row < end {
            let chunk = (end - row).min(64 * 1024);
            let mut cols: Vec<Column> = schema
                .fields()
                .iter()
                .map(|f| Column::new(f.data_type()))
                .collect();
            for i in row..row + chunk {
                make(i, &mut cols);
            }
            let arrays: Vec<ArrayRef> = cols.into_iter().map(Column::finish).collect();
            w.write(&RecordBatch::try_new(Arc::clone(&schema), arrays)?)?;
            row += chunk;
        }
        w.close()?;
    }
    std::fs::write(dir.join("rows"), rows.to_string())?;
    Ok(())
}

/// True when `dir` holds a data set of `rows` rows.
pub fn is_generated(dir: &Path, rows: u64) -> bool {
    std::fs::read_to_string(dir.join("rows")).is_ok_and(|s| s.trim() == rows.to_string())
}

/// Writes the grid data set of `rows` rows into `dir`.
pub fn generate_grid(dir: &Path, rows: u64, seed: u64) -> Result<()> {
    let schema = Arc::new(Schema::new(
        ["k10", "k1k", "k100k", "kall", "ksparse", "v"]
            .map(|n| Field::new(n, DataType::Int64, false))
            .to_vec(),
    ));
    let mut rng = Rng::new(seed);
    // A prime not dividing `rows` walks 0..rows in a shuffled order.
    let step = [1_000_003u64, 1_000_033, 1_000_037]
        .into_iter()
        .find(|p| !rows.is_multiple_of(*p))
        .expect("a coprime step");
    write(dir, schema, rows, move |i, cols| {
        let mut r = || rng.next_u64();
        let values: [i64; 6] = [
            (r() % 10) as i64,
            (r() % 1000) as i64,
            (r() % 100_000) as i64,
            ((i as u128 * step as u128) % rows as u128) as i64,
            // odd multiplier: a bijection of u64, so distinct and spread out
            i.wrapping_mul(0x9E37_79B9_7F4A_7C15) as i64,
            (r() % 2_000_001) as i64 - 1_000_000,
        ];
        for (c, x) in cols.iter_mut().zip(values) {
            if let Column::Int(v) = c {
                v.push(x);
            }
        }
    })
}

/// Writes the Q1-like data set of `rows` rows into `dir`.
pub fn generate_q1like(dir: &Path, rows: u64, seed: u64) -> Result<()> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("returnflag", DataType::Utf8, false),
        Field::new("linestatus", DataType::Utf8, false),
        Field::new("quantity", DataType::Float64, false),
        Field::new("extendedprice", DataType::Float64, false),
    ]));
    let mut rng = Rng::new(seed);
    write(dir, schema, rows, move |_, cols| {
        let flag = ["A", "N", "R"][(rng.next_u64() % 3) as usize];
        let status = ["F", "O"][(rng.next_u64() % 2) as usize];
        let qty = (1 + rng.next_u64() % 50) as f64;
        let price = (rng.next_u64() % 10_000_000) as f64 / 100.0;
        if let [
            Column::Str(f),
            Column::Str(s),
            Column::Float(q),
            Column::Float(p),
        ] = cols
        {
            f.push(flag);
            s.push(status);
            q.push(qty);
            p.push(price);
        }
    })
}

/// A session over one data set registered as `name`: tsjoin with the
/// inline aggregate on (and `settings`, `name = value` pairs) or off.
pub async fn session(
    dir: &Path,
    name: &str,
    threads: usize,
    inline: bool,
    settings: &[&str],
) -> Result<SessionContext> {
    let ctx = datafusion_tsjoin::tsjoin_context(
        SessionConfig::new().with_target_partitions(threads),
    );
    ctx.tsjoin_sql(&format!("SET tsjoin.inline_aggregate = {inline}"))
        .await?;
    for setting in settings.iter().filter(|_| inline) {
        ctx.tsjoin_sql(&format!("SET {setting}")).await?;
    }
    ctx.register_parquet(
        name,
        dir.to_str().expect("utf-8 path"),
        ParquetReadOptions::default(),
    )
    .await?;
    Ok(ctx)
}

/// An engine-independent digest of a grouped result: rows, then the sum of
/// each aggregate column (integers exactly, floats to 6 significant digits).
pub fn checksum(batches: &[RecordBatch], keys: usize) -> String {
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let width = batches.first().map_or(0, |b| b.num_columns());
    let mut parts = vec![rows.to_string()];
    for c in keys..width {
        let (mut ints, mut floats, mut is_float) = (0i128, 0f64, false);
        for b in batches {
            let a = b.column(c);
            match a.data_type() {
                DataType::Float64 => {
                    is_float = true;
                    floats += a
                        .as_primitive::<Float64Type>()
                        .iter()
                        .flatten()
                        .sum::<f64>();
                }
                _ => {
                    let a = datafusion::arrow::compute::cast(a, &DataType::Int64)
                        .expect("integer aggregate");
                    ints += a
                        .as_primitive::<Int64Type>()
                        .iter()
                        .flatten()
                        .map(|x| x as i128)
                        .sum::<i128>();
                }
            }
        }
        parts.push(if is_float {
            format!("{floats:.6e}")
        } else {
            ints.to_string()
        });
    }
    parts.join("|")
}

/// The setting that makes phase 1 read decoded keys instead of Parquet
/// dictionary codes (the cells with it show what the dictionary scan buys).
pub const NO_CODES: &str = "tsjoin.inline_aggregate_dictionary_scan = false";

/// One benchmark cell: a query over one data set.
#[derive(Debug, Clone)]
pub struct Cell {
    /// Data set name (`grid` or `q1like`), also the table name.
    pub table: &'static str,
    /// Rows in the data set.
    pub rows: u64,
    /// Group keys of the query.
    pub keys: Vec<&'static str>,
    /// Aggregates as the peers script reads them: `count`, `sum:<col>`.
    pub aggs: Vec<String>,
    /// Row label in the report.
    pub label: String,
    /// The SQL.
    pub sql: String,
    /// Settings of the tsjoin session beyond the defaults.
    pub settings: Vec<&'static str>,
}

/// The cells: the int-key grid at each of `grid_rows`, and the Q1-like
/// query at each of `q1_rows`.
pub fn cells(grid_rows: &[u64], q1_rows: &[u64]) -> Vec<Cell> {
    let mut out = vec![];
    for &rows in grid_rows {
        for (key, groups) in GRID_KEYS {
            for (name, aggs) in GRID_AGGS {
                let agg_list = match name {
                    "count" => vec!["count".to_string()],
                    "sum" => vec!["sum:v".to_string()],
                    _ => vec!["count".to_string(), "sum:v".to_string()],
                };
                out.push(Cell {
                    table: "grid",
                    rows,
                    keys: vec![key],
                    aggs: agg_list,
                    label: format!(
                        "{} rows, int64 key, {groups} groups, {name}",
                        human(rows)
                    ),
                    sql: grid_sql(key, aggs),
                    settings: vec![],
                });
            }
        }
    }
    // The dictionary scan's own effect, on the first grid size: the same
    // low- and mid-cardinality cells with phase 1 reading decoded keys.
    for &rows in grid_rows.iter().take(1) {
        for (key, groups) in GRID_KEYS.iter().take(3) {
            for (name, aggs) in GRID_AGGS.iter().take(2) {
                out.push(Cell {
                    table: "grid",
                    rows,
                    keys: vec![key],
                    aggs: vec![if *name == "count" {
                        "count".to_string()
                    } else {
                        "sum:v".to_string()
                    }],
                    label: format!(
                        "{} rows, int64 key, {groups} groups, {name}; {NO_CODES}",
                        human(rows)
                    ),
                    sql: grid_sql(key, aggs),
                    settings: vec![NO_CODES],
                });
            }
        }
    }
    for &rows in q1_rows {
        out.push(Cell {
            table: "q1like",
            rows,
            keys: vec!["returnflag", "linestatus"],
            aggs: vec![
                "sum:quantity".into(),
                "sum:extendedprice".into(),
                "count".into(),
            ],
            label: format!(
                "{} rows, Q1-like: 2 string keys, 6 groups, 2 float sums + count",
                human(rows)
            ),
            sql: Q1_LIKE.to_string(),
            // Default settings: multi-column keys run inline while the
            // probe finds few groups.
            settings: vec![],
        });
    }
    out
}

/// `5M`, `1.2M`, `10M`.
pub fn human(rows: u64) -> String {
    if rows.is_multiple_of(1_000_000) {
        format!("{}M", rows / 1_000_000)
    } else {
        format!("{:.1}M", rows as f64 / 1e6)
    }
}

/// Where a cell's data set lives under `root`.
pub fn data_dir(root: &Path, cell: &Cell) -> std::path::PathBuf {
    root.join(format!("{}-{}", cell.table, cell.rows))
}

/// Generates the data set of `cell` under `root` when missing.
pub fn ensure_data(root: &Path, cell: &Cell, seed: u64) -> Result<()> {
    let dir = data_dir(root, cell);
    if is_generated(&dir, cell.rows) {
        return Ok(());
    }
    eprintln!("generating {} ({} rows) ...", dir.display(), cell.rows);
    match cell.table {
        "grid" => generate_grid(&dir, cell.rows, seed),
        _ => generate_q1like(&dir, cell.rows, seed),
    }
}

/// Runs `cell` `runs` times on `ctx`: the times, and the checksum of the
/// last answer.
pub async fn measure(
    ctx: &SessionContext,
    cell: &Cell,
    runs: usize,
) -> Result<(Vec<f64>, String)> {
    let mut times = vec![];
    let mut digest = String::new();
    for _ in 0..runs.max(1) {
        let start = std::time::Instant::now();
        let batches = ctx.tsjoin_sql(&cell.sql).await?.collect().await?;
        times.push(start.elapsed().as_secs_f64());
        digest = checksum(&batches, cell.keys.len());
    }
    Ok((times, digest))
}

/// Whether the plan of `cell` on `ctx` runs tsjoin's inline aggregate.
pub async fn runs_inline(ctx: &SessionContext, cell: &Cell) -> Result<bool> {
    let plan = ctx
        .tsjoin_sql(&cell.sql)
        .await?
        .create_physical_plan()
        .await?;
    Ok(datafusion::physical_plan::displayable(plan.as_ref())
        .indent(true)
        .to_string()
        .contains("InlineAggregateExec"))
}
