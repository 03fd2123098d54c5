//! [`PageScan`]: a count-only [`super::FilterAggregateExec`] reading its
//! Parquet files itself, row group by row group, the WHERE evaluated page
//! by page ([`super::pages`]).
//!
//! `SELECT count(*) FROM t WHERE a > 1 AND b < 2` needs, per row, one bit
//! per comparison. DataFusion's scan decodes `a` and `b` into arrays
//! first (a dictionary-encoded column: every row's code turned back into
//! its value), which is most of the query's time; here a dictionary
//! column costs one table lookup per row, fused into the decoding of its
//! codes, and a PLAIN column one compare kernel over the page's bytes.
//!
//! Applies at planning when every aggregate is `count(*)` or a count of a
//! compared column (a row that passes a comparison is not NULL there),
//! and the input is a Parquet `DataSourceExec` (under a priority gate or a
//! round-robin repartition, which only deal batches out) whose predicate
//! prunes only (`pushdown_filters` off), with no limit, partition
//! columns, custom access plans, decryption or INT96 coercion. At
//! execution, per file and column:
//! - a flat column stored as INT32/INT64/FLOAT/DOUBLE whose file type is
//!   the table's (values are the bytes: Int32/64, UInt32/64, Float32/64,
//!   Date32, a timestamp of the file's own unit) is read by pages; a page
//!   encoded otherwise (DELTA, BYTE_STREAM_SPLIT) sends that chunk to
//!   arrow's reader;
//! - any other column present is read by arrow's reader for that row
//!   group, cast to the table's type as DataFusion's scan would;
//! - a column missing from the file is NULL there: no row of the file
//!   passes.
//!
//! Row groups are those DataFusion's opener would read for each file's
//! range, pruned by DataFusion's own statistics pruning of the WHERE. When
//! the scan reads page indexes (`enable_page_index`, DataFusion's
//! default), a row group whose page indexes leave fewer than half its rows
//! selected is read by arrow's reader with that row selection, which
//! fetches and decodes only the pages left (a count over a time range of a
//! sorted column); reading whole chunks by pages would cost more there.
//! Partition `p` reads the scan's file groups `p, p + n, ...`; it waits
//! for its priority turn before each row group.

use super::metrics::FilterAggregateMetrics;
use super::pages::{ColumnPredicate, Scratch};
use super::row_bits::RowBits;
use super::spec::{Cmp, FusedAgg};
use crate::parquet_read::{
    Chunks, Pruning, access_plan, chunk_range, fetch_footers, row_groups_in_range,
};
use crate::priority::{PlannedAdmission, PriorityGateExec, Turn};
use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::buffer::BooleanBuffer;
use datafusion::arrow::compute::{CastOptions, cast_with_options};
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::{
    DefaultParquetFileReaderFactory, ParquetAccessPlan, RowGroupAccess,
};
use datafusion::datasource::physical_plan::{
    FileSource, ParquetFileReaderFactory, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::Operator;
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
    RowSelection,
};
use datafusion::parquet::arrow::async_reader::{
    AsyncFileReader, ParquetRecordBatchStreamBuilder,
};
use datafusion::parquet::basic::{
    LogicalType, TimeUnit as StoredUnit, Type as PhysicalType,
};
use datafusion::parquet::file::serialized_reader::SerializedPageReader;
use datafusion::parquet::schema::types::SchemaDescriptor;
use datafusion::physical_expr::expressions::{BinaryExpr, Column};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning, PhysicalExpr};
use futures::StreamExt;
use std::sync::Arc;

/// Casts of a file's values to the table's type fail as DataFusion's
/// scan fails them (an error, not NULL).
const STRICT_CAST: CastOptions<'static> = CastOptions {
    safe: false,
    format_options: datafusion::arrow::util::display::FormatOptions::new(),
};

/// Rows per batch when a chunk goes through arrow's reader.
const ARROW_BATCH_ROWS: usize = 8192;

/// A row group whose page indexes leave fewer than one row in this many
/// selected is read through arrow's reader, the ruled-out pages skipped.
const SELECTION_SHARE: usize = 2;

/// What a count-only [`super::FilterAggregateExec`] reads itself, decided
/// at planning (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct PageScan {
    store: ObjectStoreUrl,
    /// The scan's reader factory (DataFusion's default caches footers).
    factory: Option<Arc<dyn ParquetFileReaderFactory>>,
    /// The scan's file groups.
    groups: Vec<Vec<PartitionedFile>>,
    /// Per compared column, its comparisons.
    columns: Vec<ColumnPredicate>,
    /// The WHERE's pruning of row groups (statistics) and pages (page
    /// indexes), as the scan's settings allow: a row group where the page
    /// indexes rule pages out is read through arrow's reader, selected
    /// rows only, as DataFusion's scan would read it.
    pruning: Pruning,
    gate: Option<Turn>,
    planned: Option<Arc<PlannedAdmission>>,
}

/// How one file gives a compared column.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// Flat leaf `leaf` of `width`-byte values, read by pages.
    Pages {
        leaf: usize,
        width: usize,
        nullable: bool,
    },
    /// Root column `root`, read by arrow's reader.
    Arrow { root: usize },
}

impl PageScan {
    /// The scan for `aggs` over the rows of `input` where `cmps` hold, when
    /// it qualifies (see the module docs).
    pub(crate) fn try_new(
        input: &Arc<dyn ExecutionPlan>,
        cmps: &[Cmp],
        aggs: &[FusedAgg],
    ) -> Option<Self> {
        let compared: Vec<usize> = cmps
            .iter()
            .map(|c| c.column().map(Column::index))
            .collect::<Option<_>>()?;
        let counts_only = aggs.iter().all(|a| match a {
            FusedAgg::CountStar => true,
            FusedAgg::Count(c) => compared.contains(c),
            _ => false,
        });
        if !counts_only || cmps.is_empty() {
            return None;
        }
        let mut scan = input;
        let mut gate = None;
        loop {
            if let Some(r) = scan.downcast_ref::<RepartitionExec>()
                && matches!(r.partitioning(), Partitioning::RoundRobinBatch(_))
            {
                scan = r.input();
            } else if let Some(g) = scan.downcast_ref::<PriorityGateExec>() {
                gate = Some(g);
                scan = g.input();
            } else {
                break;
            }
        }
        let (config, source) = scan
            .downcast_ref::<DataSourceExec>()?
            .downcast_to_file_source::<ParquetSource>()?;
        let options = source.table_parquet_options();
        // (INT96 timestamps read at another resolution are DataFusion's
        // own conversion: left to its scan.)
        if options.global.pushdown_filters
            || options.global.coerce_int96.is_some()
            || config.limit.is_some()
            || !config.table_partition_cols().is_empty()
            || options.crypto.file_decryption.is_some()
            || options.crypto.factory_id.is_some()
            || config
                .file_groups
                .iter()
                .flat_map(|g| g.files())
                .any(|f| !f.extensions.is_empty())
        {
            return None;
        }
        let table = config.file_schema();
        // The table column of an output column of the scan.
        let table_column = |out: usize| -> Option<usize> {
            match source.projection() {
                Some(p) => {
                    Some(p.iter().nth(out)?.expr.downcast_ref::<Column>()?.index())
                }
                None => Some(out),
            }
        };
        let mut columns: Vec<(usize, Vec<Arc<dyn PhysicalExpr>>)> = vec![];
        let mut pruning: Option<Arc<dyn PhysicalExpr>> = None;
        for (cmp, &out) in cmps.iter().zip(&compared) {
            let t = table_column(out)?;
            let name = table.field(t).name();
            let on_table = Arc::clone(&cmp.expr)
                .transform(|e| {
                    Ok(match e.downcast_ref::<Column>() {
                        Some(_) => Transformed::yes(
                            Arc::new(Column::new(name, t)) as Arc<dyn PhysicalExpr>
                        ),
                        None => Transformed::no(e),
                    })
                })
                .ok()?
                .data;
            pruning = Some(match pruning {
                None => Arc::clone(&on_table),
                Some(p) => {
                    Arc::new(BinaryExpr::new(p, Operator::And, Arc::clone(&on_table)))
                }
            });
            match columns.iter_mut().find(|(c, _)| *c == t) {
                Some((_, exprs)) => exprs.push(on_table),
                None => columns.push((t, vec![on_table])),
            }
        }
        let columns = columns
            .into_iter()
            .map(|(t, exprs)| {
                let f = table.field(t);
                ColumnPredicate::try_new(f.name(), f.data_type(), &exprs).ok()
            })
            .collect::<Option<Vec<_>>>()?;
        let pruning = pruning
            .map(|p| Pruning::new(&p, table, options))
            .unwrap_or_default();
        Some(Self {
            store: config.object_store_url.clone(),
            factory: source.parquet_file_reader_factory().cloned(),
            groups: config
                .file_groups
                .iter()
                .map(|g| g.files().to_vec())
                .collect(),
            columns,
            pruning,
            planned: gate.and_then(|g| g.planned().cloned()),
            gate: gate.map(|g| Turn::new(Arc::clone(g.scheduler()), g.priority())),
        })
    }

    /// Rows where the WHERE holds in the file groups of partition
    /// `partition` of `partitions`, the fetched chunks accounted in
    /// `reservation`.
    pub(crate) async fn count(
        &self,
        partition: usize,
        partitions: usize,
        context: Arc<TaskContext>,
        metrics: &FilterAggregateMetrics,
        reservation: MemoryReservation,
    ) -> Result<usize> {
        let factory: Arc<dyn ParquetFileReaderFactory> = match &self.factory {
            Some(f) => Arc::clone(f),
            None => Arc::new(DefaultParquetFileReaderFactory::new(
                context.runtime_env().object_store(&self.store)?,
            )),
        };
        let files: Vec<PartitionedFile> = self
            .groups
            .iter()
            .skip(partition)
            .step_by(partitions.max(1))
            .flatten()
            .cloned()
            .collect();
        // The query counts as running while it reads (the gate's own
        // stream, which would hold this, is never opened).
        let _admission = self.gate.as_ref().map(|turn| {
            let admission = turn.admit();
            if let Some(planned) = &self.planned {
                planned.release();
            }
            admission
        });
        let scratch_metrics = ExecutionPlanMetricsSet::new();
        let footers = fetch_footers(
            &files,
            &factory,
            &scratch_metrics,
            self.pruning.pages().is_some(),
        )
        .await;
        let mut matched = 0;
        let mut scratch = Scratch::default();
        for (file, meta) in files.iter().zip(footers) {
            let arrow = ArrowReaderMetadata::try_new(meta?, ArrowReaderOptions::new())?;
            let groups = row_groups_in_range(arrow.metadata(), file);
            let rows: usize = groups
                .iter()
                .map(|&rg| arrow.metadata().row_group(rg).num_rows().max(0) as usize)
                .sum();
            let Some(sources) = self.sources(&arrow) else {
                // A compared column the file lacks is NULL: no row passes.
                metrics.input_rows.add(rows);
                metrics.page_scan_rows.add(rows);
                continue;
            };
            let in_range = groups.len();
            let access = self.prune(&arrow, groups, file, &scratch_metrics);
            let groups: Vec<usize> = access.row_group_index_iter().collect();
            metrics.row_groups_pruned.add(in_range - groups.len());
            let mut reader = factory.create_reader(
                partition,
                file.clone(),
                file.metadata_size_hint,
                &scratch_metrics,
            )?;
            for rg in groups {
                if let Some(turn) = &self.gate {
                    turn.wait().await;
                }
                let meta = arrow.metadata().row_group(rg);
                let n = meta.num_rows().max(0) as usize;
                // Pages the page indexes rule out are skipped by arrow's
                // reader, fetching only the rest; when they rule out little
                // the page kernels over whole chunks cost less.
                if let RowGroupAccess::Selection(rows) = &access.inner()[rg]
                    && rows.row_count() < n / SELECTION_SHARE
                {
                    metrics.row_groups_by_selection.add(1);
                    let reader = factory.create_reader(
                        partition,
                        file.clone(),
                        file.metadata_size_hint,
                        &scratch_metrics,
                    )?;
                    matched += self
                        .selected(reader, &arrow, rg, &sources, rows.clone(), metrics)
                        .await?;
                    metrics.input_rows.add(n);
                    metrics.page_scan_rows.add(n);
                    metrics.row_groups_read.add(1);
                    continue;
                }
                let leaves = |s: &Source| -> Vec<usize> {
                    match *s {
                        Source::Pages { leaf, .. } => vec![leaf],
                        Source::Arrow { root } => {
                            root_leaves(arrow.parquet_schema(), root)
                        }
                    }
                };
                let ranges: Vec<_> = sources
                    .iter()
                    .flat_map(leaves)
                    .map(|l| chunk_range(meta.column(l)))
                    .collect();
                let bytes = reader.get_byte_ranges(ranges.clone()).await?;
                reservation.try_resize(bytes.iter().map(|b| b.len()).sum())?;
                let chunks = Chunks {
                    size: file.object_meta.size,
                    parts: ranges.iter().map(|r| r.start).zip(bytes).collect(),
                };
                let _timer = metrics.baseline.elapsed_compute().timer();
                let mut passing =
                    self.row_group(&arrow, &chunks, rg, &sources, &mut scratch, metrics)?;
                // Rows the page indexes ruled out do not count, as in
                // DataFusion's scan (its pruning also drops NaN rows that
                // compare above every number: statistics leave NaN out).
                if let RowGroupAccess::Selection(rows) = &access.inner()[rg] {
                    passing.and(&selection_bits(rows, n));
                }
                let hits = passing.count();
                metrics.input_rows.add(n);
                metrics.page_scan_rows.add(n);
                metrics.row_groups_read.add(1);
                matched += hits;
            }
            reservation.free();
        }
        metrics.matched_rows.add(matched);
        Ok(matched)
    }

    /// Per compared column, how `arrow`'s file gives it; `None` when the
    /// file lacks one.
    fn sources(&self, arrow: &ArrowReaderMetadata) -> Option<Vec<Source>> {
        let schema = arrow.schema();
        let descr = arrow.parquet_schema();
        self.columns
            .iter()
            .map(|c| {
                let (root, field) = schema.column_with_name(c.name())?;
                let leaf = (0..descr.num_columns()).find(|&i| {
                    let col = descr.column(i);
                    let parts = col.path().parts();
                    parts.len() == 1 && parts[0] == c.name()
                });
                let pages = leaf.and_then(|leaf| {
                    let col = descr.column(leaf);
                    let width = raw_width(
                        col.physical_type(),
                        col.logical_type_ref(),
                        c.data_type(),
                    )?;
                    (field.data_type() == c.data_type()
                        && col.max_rep_level() == 0
                        && col.max_def_level() <= 1)
                        .then_some(Source::Pages {
                            leaf,
                            width,
                            nullable: col.max_def_level() == 1,
                        })
                });
                Some(pages.unwrap_or(Source::Arrow { root }))
            })
            .collect()
    }

    /// How to read `groups` (row groups of `arrow`'s file): those its
    /// statistics rule out skipped, those its page indexes narrow down to
    /// a row selection, as DataFusion's pruning decides.
    fn prune(
        &self,
        arrow: &ArrowReaderMetadata,
        groups: Vec<usize>,
        file: &PartitionedFile,
        scratch: &ExecutionPlanMetricsSet,
    ) -> ParquetAccessPlan {
        access_plan(arrow, &groups, file, &self.pruning, scratch)
    }

    /// Rows where every comparison holds among `rows` of row group `rg`
    /// (the page indexes rule the others out): arrow's reader fetches and
    /// decodes the selected pages of all compared columns together.
    async fn selected(
        &self,
        reader: Box<dyn AsyncFileReader>,
        arrow: &ArrowReaderMetadata,
        rg: usize,
        sources: &[Source],
        rows: RowSelection,
        metrics: &FilterAggregateMetrics,
    ) -> Result<usize> {
        let descr = arrow.parquet_schema();
        let roots: Vec<usize> = sources
            .iter()
            .map(|s| match *s {
                Source::Arrow { root } => root,
                Source::Pages { leaf, .. } => descr.get_column_root_idx(leaf),
            })
            .collect();
        let mut stream =
            ParquetRecordBatchStreamBuilder::new_with_metadata(reader, arrow.clone())
                .with_projection(ProjectionMask::roots(descr, roots.iter().copied()))
                .with_row_groups(vec![rg])
                .with_row_selection(rows)
                .with_batch_size(ARROW_BATCH_ROWS)
                .build()?;
        let mut hits = 0;
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            let _timer = metrics.baseline.elapsed_compute().timer();
            let mut all: Option<BooleanBuffer> = None;
            for column in &self.columns {
                let values = batch.column_by_name(column.name()).ok_or_else(|| {
                    DataFusionError::Internal(format!("{} not read", column.name()))
                })?;
                let bits = file_values_bits(column, values)?;
                all = Some(match all {
                    Some(a) => &a & &bits,
                    None => bits,
                });
            }
            hits += all.map_or(batch.num_rows(), |a| a.count_set_bits());
        }
        Ok(hits)
    }

    /// Rows of row group `rg` where every comparison holds.
    fn row_group(
        &self,
        arrow: &ArrowReaderMetadata,
        chunks: &Chunks,
        rg: usize,
        sources: &[Source],
        scratch: &mut Scratch,
        metrics: &FilterAggregateMetrics,
    ) -> Result<RowBits> {
        let meta = arrow.metadata().row_group(rg);
        let rows = meta.num_rows().max(0) as usize;
        let mut all: Option<RowBits> = None;
        for (column, source) in self.columns.iter().zip(sources) {
            let mut bits = RowBits::with_capacity(rows);
            let by_pages = match *source {
                Source::Pages {
                    leaf,
                    width,
                    nullable,
                } => {
                    let mut pages = SerializedPageReader::new(
                        Arc::new(chunks.clone()),
                        meta.column(leaf),
                        rows,
                        None,
                    )?;
                    column.append_chunk(
                        &mut pages, width, nullable, rows, &mut bits, scratch,
                    )?
                }
                Source::Arrow { .. } => false,
            };
            if !by_pages {
                metrics.chunks_by_arrow.add(1);
                let root = match *source {
                    Source::Arrow { root } => root,
                    Source::Pages { leaf, .. } => {
                        arrow.parquet_schema().get_column_root_idx(leaf)
                    }
                };
                let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(
                    chunks.clone(),
                    arrow.clone(),
                )
                .with_projection(ProjectionMask::roots(arrow.parquet_schema(), [root]))
                .with_row_groups(vec![rg])
                .with_batch_size(ARROW_BATCH_ROWS)
                .build()?;
                for batch in reader {
                    let passing = file_values_bits(column, batch?.column(0))?;
                    bits.push_bitmap(passing.sliced().as_slice(), passing.len());
                }
            }
            if bits.len() != rows {
                return Err(DataFusionError::External(
                    format!("Parquet row group {rg}: read {} rows of {rows}", bits.len())
                        .into(),
                ));
            }
            let next = match all {
                Some(mut a) => {
                    a.and(&bits);
                    a
                }
                None => bits,
            };
            // Nothing passes: the other columns need not be read.
            if next.count() == 0 {
                return Ok(next);
            }
            all = Some(next);
        }
        let mut none = RowBits::with_capacity(rows);
        none.push_run(true, rows);
        Ok(all.unwrap_or(none))
    }
}

/// Where `column`'s comparisons hold over `values` read from a file, cast
/// to the table's type first when the file's differs.
fn file_values_bits(
    column: &ColumnPredicate,
    values: &ArrayRef,
) -> Result<BooleanBuffer> {
    if values.data_type() == column.data_type() {
        return column.eval(values);
    }
    column.eval(&cast_with_options(
        values,
        column.data_type(),
        &STRICT_CAST,
    )?)
}

/// One bit per row of a row group of `n` rows: whether `rows` selects it.
fn selection_bits(rows: &RowSelection, n: usize) -> RowBits {
    let mut bits = RowBits::with_capacity(n);
    for s in rows.iter() {
        bits.push_run(!s.skip, s.row_count.min(n - bits.len()));
    }
    bits.push_run(false, n - bits.len());
    bits
}

/// The leaves under root column `root`.
fn root_leaves(descr: &SchemaDescriptor, root: usize) -> Vec<usize> {
    (0..descr.num_columns())
        .filter(|&i| descr.get_column_root_idx(i) == root)
        .collect()
}

/// Bytes per value when a column stored as `physical` (logical type
/// `logical`) holds the values of Arrow type `t` as they are; `None` when
/// the reader would convert them.
fn raw_width(
    physical: PhysicalType,
    logical: Option<&LogicalType>,
    t: &DataType,
) -> Option<usize> {
    let width = match physical {
        PhysicalType::INT32 | PhysicalType::FLOAT => 4,
        PhysicalType::INT64 | PhysicalType::DOUBLE => 8,
        _ => return None,
    };
    let same = match (physical, t) {
        (PhysicalType::FLOAT, DataType::Float32)
        | (PhysicalType::DOUBLE, DataType::Float64) => true,
        (PhysicalType::INT32, DataType::Int32 | DataType::UInt32 | DataType::Date32) => {
            true
        }
        (PhysicalType::INT64, DataType::Int64 | DataType::UInt64) => true,
        // A timestamp only in the unit the file stores (an Arrow schema
        // hint may ask for seconds, which Parquet stores as milliseconds).
        (PhysicalType::INT64, DataType::Timestamp(unit, _)) => match logical {
            Some(LogicalType::Timestamp(t)) => matches!(
                (&t.unit, unit),
                (StoredUnit::MILLIS, TimeUnit::Millisecond)
                    | (StoredUnit::MICROS, TimeUnit::Microsecond)
                    | (StoredUnit::NANOS, TimeUnit::Nanosecond)
            ),
            _ => false,
        },
        _ => false,
    };
    same.then_some(width)
}
