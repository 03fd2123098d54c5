//! The Star Schema Benchmark (SSB; O'Neil, O'Neil, Chen, "Star Schema
//! Benchmark, Revision 3", 2009) for `tsjoin-bench ssb`: a deterministic
//! generator of its five tables and the 13 queries ([`queries`]).
//!
//! No spec-faithful SSB generator exists for Rust (tpchgen covers TPC-H and
//! TPC-DS only), so this one restates ssb-dbgen's rules
//! (`shared/benchdata/ssb/DOMAINS.md`): dense dimension keys from 1,
//! `d_datekey` as `yyyymmdd` over 2,557 days, customer 30,000 × SF,
//! supplier 2,000 × SF, part 200,000 × ⌊1 + log2 SF⌋, 1,500,000 × SF orders
//! of U[1, 7] lines, TPC-H's sparse order keys, customer mortality (keys
//! divisible by 3 never order), dbgen's price formulas and value lists. It
//! does not reproduce dbgen's random stream (the values follow the same
//! distributions, not the same draws). Fractional scale factors (0.01 for
//! tests) scale every row count linearly, part's included, with at least
//! one row per table.
//!
//! Tables are written as Parquet, one directory per table under the data
//! directory; `lineorder` is split into files of
//! [`SsbConfig::orders_per_file`] orders (about 1 M rows), written in
//! parallel. Deterministic: the same [`SsbConfig`] writes the same bytes,
//! whatever the number of threads. [`register`] declares the tables with
//! their primary keys, which DataFusion needs to turn a dimension join into
//! a semi-join.
//!
//! ```
//! use tsjoin_bench::ssb::SsbConfig;
//! let c = SsbConfig::new(10.0, 1);
//! assert_eq!((c.customers(), c.suppliers(), c.parts()), (300_000, 20_000, 800_000));
//! assert_eq!(c.part_key_max(), 600_000); // ln, not log2: a dbgen quirk
//! ```

pub mod queries;
pub mod tables;
pub mod values;

use crate::generate::{Rng, in_parallel, prepare_dirs};
use crate::runner::{external_table_ddl, register_ddl};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::error::Result;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::SessionContext;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

/// Rows of `date`: every day 1992-01-01 … 1998-12-31.
pub const DATE_ROWS: usize = 2557;
/// The first year of `date`.
pub const FIRST_YEAR: i32 = 1992;
/// Day index (from 1992-01-01) of the last order date, 1998-08-02: TPC-H's
/// end date less 151 days, so that every commit date is in `date`.
pub const LAST_ORDER_DAY: i64 = 2405;

/// A column's SQL type (its Arrow type in parentheses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// `INT` (Int32).
    Int,
    /// `BIGINT` (Int64).
    BigInt,
    /// `VARCHAR` (Utf8).
    Varchar,
}

impl ColumnType {
    /// The SQL name.
    pub fn sql(self) -> &'static str {
        match self {
            Int => "INT",
            BigInt => "BIGINT",
            Varchar => "VARCHAR",
        }
    }

    /// The Arrow type the generator writes.
    pub fn arrow(self) -> DataType {
        match self {
            Int => DataType::Int32,
            BigInt => DataType::Int64,
            Varchar => DataType::Utf8,
        }
    }
}

use ColumnType::{BigInt, Int, Varchar};

/// The five SSB tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// The fact table.
    Lineorder,
    /// Dimension, key `c_custkey`.
    Customer,
    /// Dimension, key `s_suppkey`.
    Supplier,
    /// Dimension, key `p_partkey`.
    Part,
    /// Dimension, key `d_datekey` (`yyyymmdd`).
    Date,
}

impl Table {
    /// All five, the fact table first.
    pub const ALL: [Table; 5] = [
        Table::Lineorder,
        Table::Customer,
        Table::Supplier,
        Table::Part,
        Table::Date,
    ];

    /// The table's name in the queries (`date` unquoted: DataFusion 55,
    /// DuckDB and ClickHouse all accept it).
    pub fn name(self) -> &'static str {
        match self {
            Table::Lineorder => "lineorder",
            Table::Customer => "customer",
            Table::Supplier => "supplier",
            Table::Part => "part",
            Table::Date => "date",
        }
    }

    /// Columns in file order, as `shared/benchdata/ssb/schema.sql`.
    pub fn columns(self) -> &'static [(&'static str, ColumnType)] {
        match self {
            Table::Lineorder => &[
                ("lo_orderkey", BigInt),
                ("lo_linenumber", Int),
                ("lo_custkey", Int),
                ("lo_partkey", Int),
                ("lo_suppkey", Int),
                ("lo_orderdate", Int),
                ("lo_orderpriority", Varchar),
                ("lo_shippriority", Varchar),
                ("lo_quantity", Int),
                ("lo_extendedprice", Int),
                ("lo_ordertotalprice", Int),
                ("lo_discount", Int),
                ("lo_revenue", Int),
                ("lo_supplycost", Int),
                ("lo_tax", Int),
                ("lo_commitdate", Int),
                ("lo_shipmode", Varchar),
            ],
            Table::Customer => &[
                ("c_custkey", Int),
                ("c_name", Varchar),
                ("c_address", Varchar),
                ("c_city", Varchar),
                ("c_nation", Varchar),
                ("c_region", Varchar),
                ("c_phone", Varchar),
                ("c_mktsegment", Varchar),
            ],
            Table::Supplier => &[
                ("s_suppkey", Int),
                ("s_name", Varchar),
                ("s_address", Varchar),
                ("s_city", Varchar),
                ("s_nation", Varchar),
                ("s_region", Varchar),
                ("s_phone", Varchar),
            ],
            Table::Part => &[
                ("p_partkey", Int),
                ("p_name", Varchar),
                ("p_mfgr", Varchar),
                ("p_category", Varchar),
                ("p_brand1", Varchar),
                ("p_color", Varchar),
                ("p_type", Varchar),
                ("p_size", Int),
                ("p_container", Varchar),
            ],
            Table::Date => &[
                ("d_datekey", Int),
                ("d_date", Varchar),
                ("d_dayofweek", Varchar),
                ("d_month", Varchar),
                ("d_year", Int),
                ("d_yearmonthnum", Int),
                ("d_yearmonth", Varchar),
                ("d_daynuminweek", Int),
                ("d_daynuminmonth", Int),
                ("d_daynuminyear", Int),
                ("d_monthnuminyear", Int),
                ("d_weeknuminyear", Int),
                ("d_sellingseason", Varchar),
                ("d_lastdayinweekfl", Varchar),
                ("d_lastdayinmonthfl", Varchar),
                ("d_holidayfl", Varchar),
                ("d_weekdayfl", Varchar),
            ],
        }
    }

    /// The primary key.
    pub fn primary_key(self) -> &'static [&'static str] {
        match self {
            Table::Lineorder => &["lo_orderkey", "lo_linenumber"],
            Table::Customer => &["c_custkey"],
            Table::Supplier => &["s_suppkey"],
            Table::Part => &["p_partkey"],
            Table::Date => &["d_datekey"],
        }
    }

    /// DataFusion's `CREATE EXTERNAL TABLE` over the Parquet directory
    /// `location`, every column `NOT NULL`, the primary key declared.
    ///
    /// ```
    /// use tsjoin_bench::ssb::Table;
    /// let ddl = Table::Date.ddl(std::path::Path::new("/data/date"));
    /// assert!(ddl.contains("d_datekey INT NOT NULL"));
    /// assert!(ddl.contains("PRIMARY KEY (d_datekey)) STORED AS PARQUET LOCATION '/data/date/'"));
    /// ```
    pub fn ddl(self, location: &Path) -> String {
        let columns = self.columns().iter().map(|(name, t)| (name, t.sql()));
        external_table_ddl(self.name(), columns, self.primary_key(), location)
    }
}

/// The Arrow schema the generator writes for `table` (no nulls).
pub fn schema(table: Table) -> SchemaRef {
    let fields: Vec<Field> = table
        .columns()
        .iter()
        .map(|(name, t)| Field::new(*name, t.arrow(), false))
        .collect();
    Arc::new(Schema::new(fields))
}

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SsbConfig {
    /// Scale factor (1 ≈ 6 M `lineorder` rows).
    pub sf: f64,
    /// Seed of every random stream.
    pub seed: u64,
    /// Orders per `lineorder` file (each file has about 4 × as many rows).
    pub orders_per_file: u64,
    /// Rows per Parquet row group.
    pub row_group_rows: usize,
}

impl SsbConfig {
    /// Scale factor `sf`, seed `seed`, 2^18 orders (≈ 1 M rows) per
    /// `lineorder` file, row groups of 256 Ki rows.
    pub fn new(sf: f64, seed: u64) -> Self {
        Self {
            sf,
            seed,
            orders_per_file: 1 << 18,
            row_group_rows: 256 * 1024,
        }
    }

    fn scaled(&self, base: f64) -> u64 {
        ((base * self.sf).round() as u64).max(1)
    }

    /// Rows of `customer`: 30,000 × SF.
    pub fn customers(&self) -> u32 {
        self.scaled(30_000.0) as u32
    }

    /// Rows of `supplier`: 2,000 × SF (the 2010 fix; older dbgen made
    /// 10,000 × SF).
    pub fn suppliers(&self) -> u32 {
        self.scaled(2_000.0) as u32
    }

    /// Rows of `part`: 200,000 × ⌊1 + log2 SF⌋ for SF ≥ 1 (the formula
    /// turns negative below 1, so there part scales linearly).
    pub fn parts(&self) -> u32 {
        if self.sf >= 1.0 {
            200_000 * (1.0 + self.sf.log2()).floor() as u32
        } else {
            self.scaled(200_000.0) as u32
        }
    }

    /// Largest `lo_partkey`: 200,000 × (⌊ln SF⌋ + 1) for SF ≥ 1 (natural
    /// log, so at SF 10 only parts 1..600,000 of 800,000 are ordered, as in
    /// dbgen); every part below SF 1.
    pub fn part_key_max(&self) -> u32 {
        if self.sf >= 1.0 {
            200_000 * (self.sf.ln().floor() as u32 + 1)
        } else {
            self.parts()
        }
    }

    /// Orders: 1,500,000 × SF (each U[1, 7] `lineorder` rows).
    pub fn orders(&self) -> u64 {
        self.scaled(1_500_000.0)
    }

    /// `lineorder` files.
    pub fn files(&self) -> u64 {
        self.orders().div_ceil(self.orders_per_file.max(1))
    }

    /// The orders (1-based indices) of `lineorder` file `file`.
    pub fn file_orders(&self, file: u64) -> Range<u64> {
        let per = self.orders_per_file.max(1);
        let start = file * per + 1;
        start..((file + 1) * per).min(self.orders()) + 1
    }

    /// Directory name under `benches/data`: `ssb-sf1`, `ssb-sf0.01`.
    pub fn dir_name(&self) -> String {
        format!("ssb-sf{}", self.sf)
    }

    /// The random stream of table `stream` (file `index` of `lineorder`):
    /// seeded from the seed through one SplitMix step, so that neighbouring
    /// streams share no state.
    pub fn stream(&self, stream: u64, index: u64) -> Rng {
        let mut r = Rng::new(self.seed ^ (stream << 56) ^ index);
        Rng::new(r.next_u64())
    }
}

/// One day of the `date` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Day {
    /// 1992..=1998.
    pub year: i32,
    /// 1..=12.
    pub month: i32,
    /// 1..=31.
    pub day: i32,
    /// 1..=366.
    pub day_of_year: i32,
    /// The real weekday, 0 = Sunday (C's `tm_wday`).
    pub weekday: i32,
}

/// The 2,557 days 1992-01-01 … 1998-12-31, in order.
pub fn calendar() -> Vec<Day> {
    let mut days = Vec::with_capacity(DATE_ROWS);
    for year in FIRST_YEAR..=1998 {
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        let lengths = [
            31,
            28 + i32::from(leap),
            31,
            30,
            31,
            30,
            31,
            31,
            30,
            31,
            30,
            31,
        ];
        let mut day_of_year = 0;
        for (m, &len) in lengths.iter().enumerate() {
            for day in 1..=len {
                day_of_year += 1;
                days.push(Day {
                    year,
                    month: m as i32 + 1,
                    day,
                    day_of_year,
                    // 1992-01-01 was a Wednesday.
                    weekday: (3 + days.len() as i32) % 7,
                });
            }
        }
    }
    days
}

/// `yyyymmdd`.
pub fn date_key(d: &Day) -> i32 {
    d.year * 10_000 + d.month * 100 + d.day
}

/// Whether `dir` holds a complete data set for `config`.
pub fn is_generated(dir: &Path, config: &SsbConfig) -> bool {
    dir.join(marker(config)).exists()
}

fn marker(c: &SsbConfig) -> String {
    format!(
        ".complete-sf{}-seed{}-{}-{}",
        c.sf, c.seed, c.orders_per_file, c.row_group_rows
    )
}

/// Writes one Parquet file.
fn write(
    path: &Path,
    batch: &datafusion::arrow::array::RecordBatch,
    c: &SsbConfig,
) -> Result<u64> {
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(c.row_group_rows))
        .build();
    let file = std::fs::File::create(path)?;
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props))?;
    writer.write(batch)?;
    writer.close()?;
    Ok(batch.num_rows() as u64)
}

/// Writes `dir/<table>/*.parquet` for the five tables with `threads`
/// threads (which decide only the speed); returns the rows per table.
pub fn generate(
    dir: &Path,
    config: &SsbConfig,
    threads: usize,
) -> Result<Vec<(Table, u64)>> {
    prepare_dirs(dir, &Table::ALL.map(Table::name), &marker(config))?;
    // The dimensions first (part is the largest), then the lineorder files.
    let dims = [Table::Part, Table::Customer, Table::Supplier, Table::Date];
    let tasks = dims.len() + config.files() as usize;
    let task = |i: usize| -> Result<(Table, u64)> {
        let (table, batch, file) = match dims.get(i) {
            Some(&t) => {
                let batch = match t {
                    Table::Part => tables::part(config)?,
                    Table::Customer => tables::customer(config)?,
                    Table::Supplier => tables::supplier(config)?,
                    _ => tables::date()?,
                };
                (t, batch, format!("{}.parquet", t.name()))
            }
            None => {
                let f = (i - dims.len()) as u64;
                let batch = tables::lineorder(config, f)?;
                (Table::Lineorder, batch, format!("lineorder-{f:05}.parquet"))
            }
        };
        let rows = write(&dir.join(table.name()).join(file), &batch, config)?;
        Ok((table, rows))
    };
    let mut rows: Vec<(Table, u64)> = Table::ALL.iter().map(|&t| (t, 0)).collect();
    for (table, n) in in_parallel(tasks, threads, task)? {
        if let Some(entry) = rows.iter_mut().find(|(t, _)| *t == table) {
            entry.1 += n;
        }
    }
    std::fs::write(dir.join(marker(config)), "")?;
    Ok(rows)
}

/// Registers the five tables of `dir` in `ctx` with `CREATE EXTERNAL TABLE`
/// ([`Table::ddl`]): declared primary keys make a dimension provably
/// unique on its key, which DataFusion's `EliminateJoin` needs to turn an
/// inner join whose dimension columns are not used above it into a
/// semi-join.
pub async fn register(ctx: &SessionContext, dir: &Path) -> Result<()> {
    register_ddl(ctx, dir, |dir| {
        Table::ALL.map(|t| t.ddl(&dir.join(t.name()))).to_vec()
    })
    .await
}

#[cfg(test)]
mod tests;
