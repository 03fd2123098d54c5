//! TPC-H for `tsjoin-bench tpch`: the eight tables as Parquet, written from
//! `tpchgen-arrow` (a dbgen-compatible generator, so the same rows as the
//! reference `dbgen` at every scale factor), and the 22 queries with the
//! specification's validation parameters ([`queries`]).
//!
//! One directory per table under the data directory; the tables larger than
//! [`ROWS_PER_FILE`] at the scale factor (and always `lineitem` and
//! `orders`) are split into several files, each one of `tpchgen`'s parts
//! (part `i` of `n` is a fixed slice of the key range, so the split does not
//! change the rows). The files are written in parallel and are
//! deterministic: the same scale factor writes the same bytes, whatever the
//! number of threads. [`register`] declares the tables with their primary
//! keys, which DataFusion needs to turn a join whose other side is unique
//! into a semi-join.
//!
//! Columns as `tpchgen-arrow` writes them: keys `BIGINT` (Int64;
//! `l_linenumber`, `o_shippriority`, `p_size`, `ps_availqty` `INT`),
//! money and quantities `DECIMAL(15, 2)`, dates `DATE` (Date32), strings
//! `VARCHAR` (Utf8View), none nullable.
//!
//! ```
//! use tsjoin_bench::tpch::{Table, TpchConfig};
//! let c = TpchConfig::new(1.0);
//! assert_eq!(c.files(Table::LineItem), 6); // about 1 M rows a file
//! assert_eq!(c.files(Table::Nation), 1);
//! assert_eq!(TpchConfig::new(0.01).files(Table::Orders), 2); // split even when small
//! assert_eq!(Table::PartSupp.primary_key(), ["ps_partkey", "ps_suppkey"]);
//! ```

pub mod queries;

use crate::generate::{in_parallel, prepare_dirs};
use crate::runner::{external_table_ddl, register_ddl};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::error::Result;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::physical_plan::displayable;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use std::path::Path;
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator,
    PartSuppGenerator, RegionGenerator, SupplierGenerator,
};
use tpchgen_arrow::{
    CustomerArrow, LineItemArrow, NationArrow, OrderArrow, PartArrow, PartSuppArrow,
    RegionArrow, SupplierArrow,
};

/// Rows a file holds at most (about): a table with more at the scale factor
/// is split into `⌈rows / ROWS_PER_FILE⌉` files.
pub const ROWS_PER_FILE: f64 = 1_000_000.0;

/// The eight TPC-H tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// 5 rows.
    Region,
    /// 25 rows.
    Nation,
    /// 10,000 × SF.
    Supplier,
    /// 150,000 × SF.
    Customer,
    /// 200,000 × SF.
    Part,
    /// 800,000 × SF.
    PartSupp,
    /// 1,500,000 × SF.
    Orders,
    /// About 6,000,000 × SF (1 to 7 lines an order).
    LineItem,
}

impl Table {
    /// All eight, the largest last.
    pub const ALL: [Table; 8] = [
        Table::Region,
        Table::Nation,
        Table::Supplier,
        Table::Customer,
        Table::Part,
        Table::PartSupp,
        Table::Orders,
        Table::LineItem,
    ];

    /// The table's name in the queries (and its directory).
    pub fn name(self) -> &'static str {
        match self {
            Table::Region => "region",
            Table::Nation => "nation",
            Table::Supplier => "supplier",
            Table::Customer => "customer",
            Table::Part => "part",
            Table::PartSupp => "partsupp",
            Table::Orders => "orders",
            Table::LineItem => "lineitem",
        }
    }

    /// The primary key (TPC-H §1.4.2).
    pub fn primary_key(self) -> &'static [&'static str] {
        match self {
            Table::Region => &["r_regionkey"],
            Table::Nation => &["n_nationkey"],
            Table::Supplier => &["s_suppkey"],
            Table::Customer => &["c_custkey"],
            Table::Part => &["p_partkey"],
            Table::PartSupp => &["ps_partkey", "ps_suppkey"],
            Table::Orders => &["o_orderkey"],
            Table::LineItem => &["l_orderkey", "l_linenumber"],
        }
    }

    /// Rows at SF 1 (lineitem's is dbgen's count; it is not a multiple).
    pub fn rows_sf1(self) -> u64 {
        match self {
            Table::Region => 5,
            Table::Nation => 25,
            Table::Supplier => 10_000,
            Table::Customer => 150_000,
            Table::Part => 200_000,
            Table::PartSupp => 800_000,
            Table::Orders => 1_500_000,
            Table::LineItem => 6_001_215,
        }
    }

    /// Whether the row count grows with the scale factor (region and
    /// nation do not).
    pub fn scales(self) -> bool {
        !matches!(self, Table::Region | Table::Nation)
    }

    /// The Arrow schema `tpchgen-arrow` writes (and [`register`] declares).
    pub fn schema(self) -> SchemaRef {
        match self {
            Table::Region => RegionArrow::schema_ref(),
            Table::Nation => NationArrow::schema_ref(),
            Table::Supplier => SupplierArrow::schema_ref(),
            Table::Customer => CustomerArrow::schema_ref(),
            Table::Part => PartArrow::schema_ref(),
            Table::PartSupp => PartSuppArrow::schema_ref(),
            Table::Orders => OrderArrow::schema_ref(),
            Table::LineItem => LineItemArrow::schema_ref(),
        }
    }

    /// Part `part` (1-based) of `parts` of the table at scale factor `sf`,
    /// as batches.
    fn batches(
        self,
        sf: f64,
        part: i32,
        parts: i32,
    ) -> Box<dyn Iterator<Item = std::result::Result<RecordBatch, ArrowError>> + Send>
    {
        // Batches of 64 Ki rows: fewer, larger pages than the default 8,000.
        const BATCH: usize = 64 * 1024;
        match self {
            Table::Region => Box::new(
                RegionArrow::new(RegionGenerator::new(sf, part, parts))
                    .with_batch_size(BATCH),
            ),
            Table::Nation => Box::new(
                NationArrow::new(NationGenerator::new(sf, part, parts))
                    .with_batch_size(BATCH),
            ),
            Table::Supplier => Box::new(
                SupplierArrow::new(SupplierGenerator::new(sf, part, parts))
                    .with_batch_size(BATCH),
            ),
            Table::Customer => Box::new(
                CustomerArrow::new(CustomerGenerator::new(sf, part, parts))
                    .with_batch_size(BATCH),
            ),
            Table::Part => Box::new(
                PartArrow::new(PartGenerator::new(sf, part, parts))
                    .with_batch_size(BATCH),
            ),
            Table::PartSupp => Box::new(
                PartSuppArrow::new(PartSuppGenerator::new(sf, part, parts))
                    .with_batch_size(BATCH),
            ),
            Table::Orders => Box::new(
                OrderArrow::new(OrderGenerator::new(sf, part, parts))
                    .with_batch_size(BATCH),
            ),
            Table::LineItem => Box::new(
                LineItemArrow::new(LineItemGenerator::new(sf, part, parts))
                    .with_batch_size(BATCH),
            ),
        }
    }

    /// DataFusion's `CREATE EXTERNAL TABLE` over the Parquet directory
    /// `location`: the columns of [`Table::schema`] in SQL types, every one
    /// `NOT NULL`, and the primary key.
    ///
    /// ```
    /// use tsjoin_bench::tpch::Table;
    /// let ddl = Table::LineItem.ddl(std::path::Path::new("/data/lineitem"));
    /// assert!(ddl.starts_with("CREATE EXTERNAL TABLE lineitem (l_orderkey BIGINT NOT NULL"));
    /// assert!(ddl.contains("l_linenumber INT NOT NULL, l_quantity DECIMAL(15, 2) NOT NULL"));
    /// assert!(ddl.contains("l_shipdate DATE NOT NULL"));
    /// assert!(ddl.ends_with("PRIMARY KEY (l_orderkey, l_linenumber)) STORED AS PARQUET \
    ///                        LOCATION '/data/lineitem/'"));
    /// ```
    pub fn ddl(self, location: &Path) -> String {
        let schema = self.schema();
        let columns = schema
            .fields()
            .iter()
            .map(|f| (f.name(), sql_type(f.data_type())));
        external_table_ddl(self.name(), columns, self.primary_key(), location)
    }
}

/// The SQL type DataFusion 55 maps back to `t` (`VARCHAR` is Utf8View
/// there, `datafusion.sql_parser.map_string_types_to_utf8view`).
fn sql_type(t: &DataType) -> String {
    match t {
        DataType::Int32 => "INT".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::Decimal128(p, s) => format!("DECIMAL({p}, {s})"),
        DataType::Date32 => "DATE".into(),
        DataType::Utf8 | DataType::Utf8View => "VARCHAR".into(),
        other => unreachable!("tpchgen-arrow writes no {other} column"),
    }
}

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TpchConfig {
    /// Scale factor (1 ≈ 6 M `lineitem` rows, 1 GB of dbgen text).
    pub sf: f64,
    /// Rows per Parquet row group.
    pub row_group_rows: usize,
}

impl TpchConfig {
    /// Scale factor `sf`, row groups of 256 Ki rows.
    pub fn new(sf: f64) -> Self {
        Self {
            sf,
            row_group_rows: 256 * 1024,
        }
    }

    /// Files (`tpchgen` parts) of `table`: about [`ROWS_PER_FILE`] rows
    /// each; at least 2 for `orders` and `lineitem`, so that the readers'
    /// multi-file path runs at every scale factor.
    pub fn files(&self, table: Table) -> i32 {
        if !table.scales() {
            return 1;
        }
        let n = (table.rows_sf1() as f64 * self.sf / ROWS_PER_FILE).ceil() as i32;
        let least = if matches!(table, Table::Orders | Table::LineItem) {
            2
        } else {
            1
        };
        n.max(least)
    }

    /// Directory name under `benches/data`: `tpch-sf1`, `tpch-sf0.01`.
    pub fn dir_name(&self) -> String {
        format!("tpch-sf{}", self.sf)
    }
}

/// Whether `dir` holds a complete data set for `config`.
pub fn is_generated(dir: &Path, config: &TpchConfig) -> bool {
    dir.join(marker(config)).exists()
}

fn marker(c: &TpchConfig) -> String {
    format!(
        ".complete-tpchgen4-sf{}-{}-{}",
        c.sf, ROWS_PER_FILE, c.row_group_rows
    )
}

/// Writes part `part` of `parts` of `table` to `path`; returns its rows.
fn write(
    path: &Path,
    table: Table,
    part: i32,
    parts: i32,
    c: &TpchConfig,
) -> Result<u64> {
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(c.row_group_rows))
        .build();
    let file = std::fs::File::create(path)?;
    let mut writer = ArrowWriter::try_new(file, table.schema(), Some(props))?;
    let mut rows = 0;
    for batch in table.batches(c.sf, part, parts) {
        let batch = batch?;
        rows += batch.num_rows() as u64;
        writer.write(&batch)?;
    }
    writer.close()?;
    Ok(rows)
}

/// Writes `dir/<table>/<table>-<part>.parquet` for the eight tables with
/// `threads` threads (which decide only the speed); returns the rows per
/// table.
pub fn generate(
    dir: &Path,
    config: &TpchConfig,
    threads: usize,
) -> Result<Vec<(Table, u64)>> {
    prepare_dirs(dir, &Table::ALL.map(Table::name), &marker(config))?;
    // Largest tables first (ALL lists them last), so that no long task
    // starts when the others are done.
    let tasks: Vec<(Table, i32, i32)> = Table::ALL
        .iter()
        .rev()
        .flat_map(|&t| {
            let n = config.files(t);
            (1..=n).map(move |p| (t, p, n))
        })
        .collect();
    let written = in_parallel(tasks.len(), threads, |i| {
        let (table, part, parts) = tasks[i];
        let file = dir
            .join(table.name())
            .join(format!("{}-{part:03}.parquet", table.name()));
        write(&file, table, part, parts, config).map(|n| (table, n))
    })?;
    let rows = Table::ALL
        .iter()
        .map(|&t| {
            let n = written.iter().filter(|(w, _)| *w == t).map(|(_, n)| n);
            (t, n.sum())
        })
        .collect();
    std::fs::write(dir.join(marker(config)), "")?;
    Ok(rows)
}

/// Registers the eight tables of `dir` in `ctx` with `CREATE EXTERNAL
/// TABLE` ([`Table::ddl`]), primary keys declared: a provably unique side
/// lets DataFusion's `EliminateJoin` turn an inner join whose columns are
/// not used above it into a semi-join.
pub async fn register(ctx: &SessionContext, dir: &Path) -> Result<()> {
    register_ddl(ctx, dir, |dir| {
        Table::ALL.map(|t| t.ddl(&dir.join(t.name()))).to_vec()
    })
    .await
}

#[cfg(test)]
mod tests;

/// The optimized logical plan and the physical plan of `sql` in `ctx`
/// (through `tsjoin_sql` when `tsjoin`), as EXPLAIN indents them.
pub async fn explain(
    ctx: &SessionContext,
    sql: &str,
    tsjoin: bool,
) -> Result<(String, String)> {
    let df = if tsjoin {
        ctx.tsjoin_sql(sql).await?
    } else {
        ctx.sql(sql).await?
    };
    let logical = df
        .clone()
        .into_optimized_plan()?
        .display_indent()
        .to_string();
    let plan = df.create_physical_plan().await?;
    let physical = displayable(plan.as_ref()).indent(true).to_string();
    Ok((logical, physical))
}

/// The lines of an indented plan that carry a disjunction (` OR `): where
/// DataFusion put each OR, or a relaxation of it (`extract_or_clauses_for_join`
/// in `PushDownFilter`, since DataFusion 14). A scan's file list and
/// pruning predicate are cut out (they are long and say nothing more); the
/// indentation, which says how deep the line is, stays.
///
/// ```
/// use tsjoin_bench::tpch::or_lines;
/// let plan = "HashJoinExec: mode=Partitioned\n  DataSourceExec: file_groups={1 group: [[a.parquet]]}, \
///             projection=[n_name], file_type=parquet, predicate=n_name@1 = FRANCE OR n_name@1 = GERMANY, \
///             pruning_predicate=n_name_null_count@2 != row_count@3";
/// assert_eq!(or_lines(plan), ["  DataSourceExec: projection=[n_name], file_type=parquet, \
///                              predicate=n_name@1 = FRANCE OR n_name@1 = GERMANY"]);
/// ```
pub fn or_lines(plan: &str) -> Vec<String> {
    plan.lines()
        .map(|line| {
            let mut line = line.trim_end().to_string();
            // `file_groups={…}, ` holds braces of its own: cut to the
            // matching one.
            if let Some(start) = line.find("file_groups={") {
                let mut depth = 0;
                let mut end = line.len();
                for (i, c) in line[start..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = start + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let rest = line[end..].trim_start_matches(", ").to_string();
                line.replace_range(start.., &rest);
            }
            if let Some(p) = line.find(", pruning_predicate=") {
                line.truncate(p);
            }
            line
        })
        .filter(|line| line.contains(" OR "))
        .collect()
}
