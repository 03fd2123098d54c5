//! [`DictionaryScan`]: phase 1 of [`super::InlineAggregateExec`] read
//! straight from Parquet when the group key is a dictionary-encoded integer
//! column, or several dictionary-encoded integer or string columns.
//!
//! Parquet writers dictionary-encode low-cardinality columns by default, so
//! a `GROUP BY` over an integer column usually finds every row already
//! given a small code. The Parquet reader would turn the codes back into
//! 8-byte values for the aggregate to hash again; here the codes become
//! group ids directly ([`super::dictionary_codes`]), and a count-only query
//! never materialises a row at all. Aggregate arguments are read by
//! arrow's Parquet reader for the same row group, batch by batch.
//!
//! Several key columns (TPC-H Q1's flag and status) are each coded from
//! their own chunk's codes and the code tuples combined by
//! [`super::composite::Composite`]'s pair tables: no string is decoded,
//! copied into a view or looked up per row. Those keys only take the scan
//! when their dictionaries promise few groups: planning estimates the
//! product of the columns' dictionary sizes from the footers (failing that,
//! the first row group's tuples must be few), and each row group interns
//! its dictionaries' entries first (past [`MAX_TUPLES`] groups, that row
//! group's keys are decoded and grouped as the stream's would be). Beside
//! coded keys, a key computed from other columns (a time bucket,
//! `date_bin(INTERVAL '10 minutes', ts)`) is evaluated on the columns read
//! with the arguments ([`ComputedKey`]). Only the rows the filters pass are
//! grouped.
//!
//! Applies when the aggregate's input is a Parquet `DataSourceExec` (or a
//! round-robin repartition of one, choices of columns and filters above it)
//! with no limit, custom reader or decryption, each key is a file column
//! of a signed integer, date or timestamp type stored as INT32/INT64, or a
//! string stored as BYTE_ARRAY (one string key has its own shape,
//! `keys=string`, only here), or, with two keys or more, a `Float64` stored
//! as DOUBLE, and every aggregate argument is a file column (or a cast of
//! one). Filters (and the scan's own predicate) are taken over: a `k IS
//! NOT NULL` over a key column drops exactly the rows of the groups whose
//! `k` is NULL, so the scan reads every row and those groups are left out
//! of the output ([`DictionaryScan::non_null_keys`]); every other conjunct
//! is evaluated on the rows read, over the columns arrow's reader decodes
//! with the arguments, and the rows' group ids and arguments are filtered
//! before they are aggregated ([`DictionaryScan::filter`]; a group of no
//! passing row is left out); its statistics prune row groups. A conjunct
//! over a key column (it would decode the key again) or a dynamic filter
//! keeps DataFusion's scan, and so, at execution, does a page index that
//! would skip more than a tenth of the rows (half with several keys). It
//! takes over only if every row group's key chunks are entirely
//! dictionary-encoded (the footer's page encoding statistics say so) and the files' own types match the
//! table's; otherwise phase 1 reads the scan as usual. Work is handed out
//! by row group to as many tasks as the scan has partitions.

use super::accumulate::{InlineAgg, count_ids};
use super::dictionary_codes::{KeyChunk, Physical};
use super::group_keys::{COMPOSITE_MAX_GROUPS, GroupKeys};
use super::spec::AggregateSpec;
use super::table::Table;
use crate::parquet_read::{
    Chunks, Pruning, access_plan, chunk_range, fetch_footers, row_groups_in_range,
};
use crate::priority::{Admission, PlannedAdmission, PriorityGateExec, Turn};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch};
use datafusion::arrow::compute::kernels::filter::prep_null_mask_filter;
use datafusion::arrow::compute::{
    CastOptions, cast, cast_with_options, filter, filter_record_batch,
};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DataFusionError, Result, internal_err, plan_err};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::{
    DefaultParquetFileReaderFactory, RowGroupAccess,
};
use datafusion::datasource::physical_plan::{
    FileSource, ParquetFileReaderFactory, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use datafusion::parquet::basic::{Encoding, PageType, Type as PhysicalType};
use datafusion::parquet::file::metadata::ColumnChunkMetaData;
use datafusion::parquet::file::serialized_reader::SerializedPageReader;
use datafusion::physical_expr::expressions::{
    CastExpr, Column, DynamicFilterPhysicalExpr, IsNotNullExpr, IsNullExpr,
};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{conjunction_opt, split_conjunction};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning, PhysicalExpr};
use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What phase 1 reads from the files, decided at planning.
#[derive(Debug, Clone)]
pub(crate) struct DictionaryScan {
    store: ObjectStoreUrl,
    /// The scan's reader factory (DataFusion's default: one that caches
    /// footers), so files are read as the scan would read them.
    factory: Option<Arc<dyn ParquetFileReaderFactory>>,
    files: Vec<PartitionedFile>,
    /// Key columns read from their codes: name and type (in the table; the
    /// files' must match).
    keys: Vec<(String, DataType)>,
    /// The GROUP BY position of each of `keys`.
    positions: Vec<usize>,
    /// Keys computed from other columns (several keys only).
    computed: Vec<ComputedKey>,
    /// Per aggregate, the column its argument reads (`None`: `count(*)`).
    args: Vec<Option<ArgColumn>>,
    /// The priority gate above the scan, which phase 1 reads around: it
    /// waits for its turn before each row group as the gate would, and
    /// holds the query's admission while it reads.
    gate: Option<Turn>,
    /// The query's admission from planning, released once phase 1 holds
    /// its own.
    planned: Option<Arc<PlannedAdmission>>,
    /// Keys (positions in the GROUP BY) whose NULL groups a filter above
    /// the scan dropped: their rows are read and grouped, and the groups
    /// left out of the output.
    non_null_keys: Vec<usize>,
    /// What rows must pass besides: the filters' other conjuncts.
    filter: Option<RowFilter>,
}

/// A key computed from columns that are no key, read with the arguments: a
/// time bucket beside coded keys (TSBS's `GROUP BY name, driver,
/// date_bin(INTERVAL '10 minutes', ts)`, QuestDB's `SAMPLE BY` per key).
/// Evaluated on each batch's passing rows and coded by the composite's own
/// table for its column.
#[derive(Debug, Clone)]
struct ComputedKey {
    /// Its position in the GROUP BY.
    position: usize,
    /// Over the table's columns by name.
    expr: Arc<dyn PhysicalExpr>,
    /// The columns it reads, with their types in the table.
    columns: Vec<(String, DataType)>,
}

impl ComputedKey {
    /// The key of the rows of `batch` (read from the files) that `passing`
    /// marks (all when `None`).
    fn eval(
        &self,
        batch: &RecordBatch,
        passing: Option<&BooleanArray>,
    ) -> Result<ArrayRef> {
        // Its columns' passing rows first: the key costs more per row than
        // the copy (a filter that keeps a quarter of the rows made
        // `date_bin` over every row a seventh of the CPU).
        let rows = match passing {
            Some(mask) => {
                let schema = batch.schema();
                let columns = self
                    .columns
                    .iter()
                    .map(|(name, _)| schema.index_of(name))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                filter_record_batch(&batch.project(&columns)?, mask)?
            }
            None => batch.clone(),
        };
        on_batch(&self.expr, &rows)?
            .evaluate(&rows)?
            .into_array(rows.num_rows())
    }
}

/// `expr` over the table's columns by name, bound to `batch`'s columns.
fn on_batch(
    expr: &Arc<dyn PhysicalExpr>,
    batch: &RecordBatch,
) -> Result<Arc<dyn PhysicalExpr>> {
    let schema = batch.schema();
    match map_columns(expr, |c| Column::new_with_schema(c.name(), &schema).ok()) {
        Some(e) => Ok(e),
        None => internal_err!("dictionary scan: a column of {expr} not read"),
    }
}

/// The conjuncts of the filters above the scan (and of its own predicate)
/// other than `k IS NOT NULL` over keys: evaluated on the rows read, as
/// the filter would, before their keys and arguments are aggregated.
#[derive(Debug, Clone)]
struct RowFilter {
    /// Their conjunction, over the table's columns by name.
    expr: Arc<dyn PhysicalExpr>,
    /// The columns it reads.
    columns: Vec<FilterColumn>,
    /// Row groups its statistics rule out are not read; its page index
    /// decides whether the scan steps aside ([`pruned`]).
    pruning: Pruning,
}

/// A column a [`RowFilter`] reads.
#[derive(Debug, Clone)]
struct FilterColumn {
    name: String,
    /// Its type in the table.
    data_type: DataType,
    /// Only `IS NULL` / `IS NOT NULL` look at it: a string column is read
    /// as a dictionary (its codes copied, no string decoded; TSBS's `name
    /// IS NOT NULL` cost a fifth of avg-vs-projected read as views).
    nulls_only: bool,
}

/// Names of the columns `expr` reads for their values: all but those it
/// only tests for NULL.
fn valued_columns(expr: &Arc<dyn PhysicalExpr>) -> HashSet<String> {
    let mut valued = HashSet::new();
    // (Visiting cannot fail.)
    let _ = expr.apply(|e| {
        let null_test = e
            .downcast_ref::<IsNullExpr>()
            .map(IsNullExpr::arg)
            .or_else(|| e.downcast_ref::<IsNotNullExpr>().map(IsNotNullExpr::arg));
        if null_test.is_some_and(|a| a.downcast_ref::<Column>().is_some()) {
            return Ok(TreeNodeRecursion::Jump);
        }
        if let Some(c) = e.downcast_ref::<Column>() {
            valued.insert(c.name().to_string());
        }
        Ok(TreeNodeRecursion::Continue)
    });
    valued
}

impl RowFilter {
    /// The rows of `batch` (read from the files) that pass, `None` when all
    /// do; `bound` holds the expression bound to the batches' columns.
    fn passing(
        &self,
        bound: &mut Option<Arc<dyn PhysicalExpr>>,
        batch: &RecordBatch,
    ) -> Result<Option<BooleanArray>> {
        let expr = match bound {
            Some(e) => e,
            None => bound.insert(on_batch(&self.expr, batch)?),
        };
        let n = batch.num_rows();
        let mask = expr.evaluate(batch)?.into_array(n)?;
        let Some(mask) = mask.as_boolean_opt() else {
            return internal_err!("dictionary scan: filter is not boolean");
        };
        let mask = match mask.null_count() {
            0 => mask.clone(),
            _ => prep_null_mask_filter(mask),
        };
        Ok((mask.true_count() < n).then_some(mask))
    }
}

/// An aggregate argument: a file column, maybe cast (`sum` of a small
/// integer sums its cast to Int64).
#[derive(Debug, Clone)]
struct ArgColumn {
    name: String,
    data_type: DataType,
    cast: Option<(DataType, CastOptions<'static>)>,
}

impl ArgColumn {
    /// The argument's values from the column read.
    fn eval(&self, column: &ArrayRef) -> Result<ArrayRef> {
        Ok(match &self.cast {
            Some((t, options)) => cast_with_options(column, t, options)?,
            None => Arc::clone(column),
        })
    }
}

/// Types whose Parquet INT32/INT64 values are the Arrow values themselves.
fn key_type(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Date32
            | DataType::Timestamp(..)
    )
}

fn string_type(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8)
}

/// The position in `group_exprs` of the column a conjunct requires
/// non-NULL, when it is `k IS NOT NULL` over a key column `k`.
fn not_null_key(
    conjunct: &Arc<dyn PhysicalExpr>,
    group_exprs: &[(Arc<dyn PhysicalExpr>, String)],
    same_column: impl Fn(&Column, &Arc<dyn PhysicalExpr>) -> bool,
) -> Option<usize> {
    let column = conjunct
        .downcast_ref::<IsNotNullExpr>()?
        .arg()
        .downcast_ref::<Column>()?;
    group_exprs.iter().position(|(e, _)| same_column(column, e))
}

/// Rewrites `exprs` over a projection's output (`projection[i]`: the
/// column of `below` that output column `i` is) to read `below`.
fn carry<'a>(
    projection: &[usize],
    below: &Schema,
    exprs: impl Iterator<Item = &'a mut Arc<dyn PhysicalExpr>>,
) -> Option<()> {
    for e in exprs {
        *e = map_columns(e, |c| {
            let i = *projection.get(c.index())?;
            Some(Column::new(below.field(i).name(), i))
        })?;
    }
    Some(())
}

/// `expr` with each column renamed and renumbered by `to` (`None`: a
/// column it cannot map, and no expression).
fn map_columns(
    expr: &Arc<dyn PhysicalExpr>,
    to: impl Fn(&Column) -> Option<Column>,
) -> Option<Arc<dyn PhysicalExpr>> {
    Arc::clone(expr)
        .transform(|e| {
            Ok(match e.downcast_ref::<Column>() {
                Some(c) => match to(c) {
                    Some(c) => Transformed::yes(Arc::new(c) as Arc<dyn PhysicalExpr>),
                    None => return plan_err!("column {c} not in the files"),
                },
                None => Transformed::no(e),
            })
        })
        .ok()
        .map(|t| t.data)
}

impl DictionaryScan {
    /// The scan for an aggregate over `input` with these keys and
    /// aggregates, when it qualifies (see the module docs).
    pub(crate) fn try_new(
        input: &Arc<dyn ExecutionPlan>,
        group_exprs: &[(Arc<dyn PhysicalExpr>, String)],
        aggs: &[InlineAgg],
    ) -> Option<Self> {
        // A round-robin repartition (few files for many partitions) only
        // deals batches out: the files below it are the input all the same.
        // Filters are taken over: `k IS NOT NULL` over keys (the groups of
        // NULL `k` are left out at the end) and other conjuncts (evaluated
        // on the rows read). A filter's projection renumbers the columns
        // above it: keys, arguments and the conjuncts met so far are
        // carried through it, so that all read the scan's columns.
        let mut input = input;
        let mut group_exprs = group_exprs.to_vec();
        let mut arg_exprs: Vec<Option<Arc<dyn PhysicalExpr>>> =
            aggs.iter().map(|a| a.arg.clone()).collect();
        let mut non_null_keys = vec![];
        // Other conjuncts of those filters, over the scan's output columns.
        let mut conjuncts: Vec<Arc<dyn PhysicalExpr>> = vec![];
        loop {
            if let Some(r) = input.downcast_ref::<RepartitionExec>()
                && matches!(r.partitioning(), Partitioning::RoundRobinBatch(_))
            {
                input = r.input();
            } else if let Some(p) = input.downcast_ref::<ProjectionExec>() {
                // Only a choice of columns (the filter's, before
                // DataFusion folds it into the filter).
                let projection = p
                    .expr()
                    .iter()
                    .map(|e| e.expr.downcast_ref::<Column>().map(Column::index))
                    .collect::<Option<Vec<_>>>()?;
                let below = p.input().schema();
                let exprs = group_exprs.iter_mut().map(|(e, _)| e);
                let exprs = exprs.chain(arg_exprs.iter_mut().flatten());
                carry(&projection, &below, exprs.chain(&mut conjuncts))?;
                input = p.input();
            } else if let Some(f) = input.downcast_ref::<FilterExec>()
                && f.fetch().is_none()
            {
                if let Some(projection) = f.projection() {
                    let below = f.input().schema();
                    let exprs = group_exprs.iter_mut().map(|(e, _)| e);
                    let exprs = exprs.chain(arg_exprs.iter_mut().flatten());
                    carry(projection, &below, exprs.chain(&mut conjuncts))?;
                }
                let same = |c: &Column, e: &Arc<dyn PhysicalExpr>| {
                    e.downcast_ref::<Column>()
                        .is_some_and(|k| k.index() == c.index())
                };
                for c in split_conjunction(f.predicate()) {
                    match not_null_key(c, &group_exprs, same) {
                        Some(k) => non_null_keys.push(k),
                        None => conjuncts.push(Arc::clone(c)),
                    }
                }
                input = f.input();
            } else {
                break;
            }
        }
        let group_exprs = group_exprs.as_slice();
        let gate = input.downcast_ref::<PriorityGateExec>();
        if let Some(g) = gate {
            input = g.input();
        }
        let planned = gate.and_then(|g| g.planned().cloned());
        let gate = gate.map(|g| Turn::new(Arc::clone(g.scheduler()), g.priority()));
        let (config, source) = input
            .downcast_ref::<DataSourceExec>()?
            .downcast_to_file_source::<ParquetSource>()?;
        let crypto = &source.table_parquet_options().crypto;
        if config.limit.is_some()
            || crypto.file_decryption.is_some()
            || crypto.factory_id.is_some()
        {
            return None;
        }
        let file_schema = config.file_schema();
        // The table column (in the files) of an output column of the scan.
        let table_column = |out: usize| -> Option<usize> {
            let table = match source.projection() {
                Some(p) => p.iter().nth(out)?.expr.downcast_ref::<Column>()?.index(),
                None => out,
            };
            (table < file_schema.fields().len()).then_some(table)
        };
        // The file column an expression over the scan's output reads.
        let file_column = |e: &Arc<dyn PhysicalExpr>| -> Option<(String, DataType)> {
            let field =
                file_schema.field(table_column(e.downcast_ref::<Column>()?.index())?);
            Some((field.name().clone(), field.data_type().clone()))
        };
        // Keys that are file columns are read from their codes; others,
        // integer or time valued over columns that are no key, are
        // computed beside them.
        let (mut keys, mut positions, mut computed) = (vec![], vec![], vec![]);
        let scan_schema = input.schema();
        for (position, (e, _)) in group_exprs.iter().enumerate() {
            if let Some(key) = file_column(e) {
                keys.push(key);
                positions.push(position);
                continue;
            }
            if !key_type(&e.data_type(&scan_schema).ok()?) {
                return None;
            }
            let expr = map_columns(e, |c| {
                let t = table_column(c.index())?;
                Some(Column::new(file_schema.field(t).name(), t))
            })?;
            let columns: Vec<(String, DataType)> = collect_columns(&expr)
                .iter()
                .map(|c| {
                    let f = file_schema.field(c.index());
                    (f.name().clone(), f.data_type().clone())
                })
                .collect();
            computed.push(ComputedKey {
                position,
                expr,
                columns,
            });
        }
        let qualifies = match (keys.as_slice(), computed.is_empty()) {
            ([], _) => false,
            ([(_, t)], true) => key_type(t) || string_type(t),
            _ => keys
                .iter()
                .all(|(_, t)| key_type(t) || string_type(t) || *t == DataType::Float64),
        };
        // A computed key reads columns (no key column: it would be decoded
        // as well as coded) with the arguments.
        let computed_ok = computed.iter().all(|k| {
            !k.columns.is_empty()
                && k.columns
                    .iter()
                    .all(|(c, _)| keys.iter().all(|(name, _)| name != c))
        });
        if !qualifies || !computed_ok {
            return None;
        }
        // The filters' other conjuncts over the table's columns, by name.
        let mut filter: Vec<Arc<dyn PhysicalExpr>> = conjuncts
            .iter()
            .map(|c| {
                map_columns(c, |c| {
                    let t = table_column(c.index())?;
                    Some(Column::new(file_schema.field(t).name(), t))
                })
            })
            .collect::<Option<_>>()?;
        // The scan's own predicate (pushed down for pruning, or for row
        // filtering with `pushdown_filters`) reads the table's columns by
        // name: `k IS NOT NULL` over keys as above, the rest evaluated
        // (again, unless the filter above holds it) on the rows read.
        if let Some(predicate) = source.filter() {
            let same = |c: &Column, e: &Arc<dyn PhysicalExpr>| {
                file_column(e).is_some_and(|(name, _)| name == c.name())
            };
            for c in split_conjunction(&predicate) {
                if let Some(k) = not_null_key(c, group_exprs, same) {
                    non_null_keys.push(k);
                    continue;
                }
                let c = map_columns(c, |c| {
                    let t = file_schema.index_of(c.name()).ok()?;
                    Some(Column::new(c.name(), t))
                })?;
                if !filter.iter().any(|f| f.as_ref() == c.as_ref()) {
                    filter.push(c);
                }
            }
        }
        non_null_keys.sort_unstable();
        non_null_keys.dedup();
        // A dynamic filter (a join's or a TopK's) changes as the query runs:
        // only the scan applies it.
        let dynamic = |e: &Arc<dyn PhysicalExpr>| {
            e.exists(|e| Ok(e.downcast_ref::<DynamicFilterPhysicalExpr>().is_some()))
                .unwrap_or(true)
        };
        if filter.iter().any(dynamic) {
            return None;
        }
        // A conjunct over a key column would decode the key a second time
        // for its values (ClickBench Q7's `AdvEngineID <> 0`: 0.105 s
        // against 0.074-0.09 s for DataFusion's scan and filter): left to
        // DataFusion's scan. (Evaluating it once per dictionary entry
        // would avoid that.)
        let reads_key = |e: &Arc<dyn PhysicalExpr>| {
            collect_columns(e)
                .iter()
                .any(|c| keys.iter().any(|(k, _)| k == c.name()))
        };
        if filter.iter().any(reads_key) {
            return None;
        }
        let filter = conjunction_opt(filter);
        let options = source.table_parquet_options();
        let filter = filter.map(|expr| {
            let valued = valued_columns(&expr);
            RowFilter {
                columns: collect_columns(&expr)
                    .iter()
                    .map(|c| {
                        let f = file_schema.field(c.index());
                        FilterColumn {
                            name: f.name().clone(),
                            data_type: f.data_type().clone(),
                            nulls_only: !valued.contains(c.name()),
                        }
                    })
                    .collect(),
                pruning: Pruning::new(&expr, file_schema, options),
                expr,
            }
        });
        let args = arg_exprs
            .iter()
            .map(|a| match a {
                None => Some(None),
                Some(e) => {
                    let (e, cast) = match e.downcast_ref::<CastExpr>() {
                        Some(c) => (
                            c.expr(),
                            Some((c.cast_type().clone(), c.cast_options().clone())),
                        ),
                        None => (e, None),
                    };
                    let (name, data_type) = file_column(e)?;
                    Some(Some(ArgColumn {
                        name,
                        data_type,
                        cast,
                    }))
                }
            })
            .collect::<Option<Vec<_>>>()?;
        let files: Vec<PartitionedFile> = config
            .file_groups
            .iter()
            .flat_map(|g| g.files().iter().cloned())
            .collect();
        if files.iter().any(|f| !f.extensions.is_empty()) {
            return None;
        }
        let factory = source.parquet_file_reader_factory().cloned();
        Some(Self {
            store: config.object_store_url.clone(),
            factory,
            files,
            keys,
            positions,
            computed,
            args,
            gate,
            planned,
            non_null_keys,
            filter,
        })
    }

    /// Keys (positions in the GROUP BY) whose NULL groups are not part of
    /// the answer: a `k IS NOT NULL` filter between the aggregate and the
    /// scan dropped their rows, and the scan, which reads every row, leaves
    /// the groups out instead.
    pub(crate) fn non_null_keys(&self) -> &[usize] {
        &self.non_null_keys
    }

    /// The filter's conjuncts the scan evaluates on the rows it reads
    /// (other than `k IS NOT NULL` over keys), over the table's columns.
    pub(crate) fn filter(&self) -> Option<&Arc<dyn PhysicalExpr>> {
        self.filter.as_ref().map(|f| &f.expr)
    }

    /// Reads every file's footer and returns the work, or `None` when some
    /// row group does not qualify (phase 1 then reads the scan). Reads are
    /// counted in `metrics`.
    pub(crate) async fn prepare(
        &self,
        context: &TaskContext,
        metrics: &ExecutionPlanMetricsSet,
    ) -> Result<Option<Work>> {
        let factory = match &self.factory {
            Some(f) => Arc::clone(f),
            None => Arc::new(DefaultParquetFileReaderFactory::new(
                context.runtime_env().object_store(&self.store)?,
            )),
        };
        let mut files = Vec::with_capacity(self.files.len());
        let mut items = vec![];
        let (mut rows, mut entries) = (0u64, 0u64);
        // Per key column, the largest dictionary of a row group (estimated).
        let mut largest = vec![0u64; self.keys.len()];
        let page_index = self
            .filter
            .as_ref()
            .is_some_and(|f| f.pruning.pages().is_some());
        let footers = fetch_footers(&self.files, &factory, metrics, page_index).await;
        // Rows of the row groups read, and of those the rows the page index
        // keeps (over all files: the scan reads their rows in any case).
        let (mut page_rows, mut page_selected) = (0usize, 0usize);
        for (file, meta) in self.files.iter().zip(footers) {
            // An unreadable footer: let the scan report it as it would.
            let Ok(meta) = meta else { return Ok(None) };
            let Ok(arrow) = ArrowReaderMetadata::try_new(meta, ArrowReaderOptions::new())
            else {
                return Ok(None);
            };
            let arrow = match &self.filter {
                Some(f) => match with_views(arrow, &f.columns) {
                    Some(a) => a,
                    None => return Ok(None),
                },
                None => arrow,
            };
            let Some(mut info) = self.file_info(file, arrow) else {
                return Ok(None);
            };
            if let Some(filter) = &self.filter {
                let skip = pruned(&info, filter);
                info.row_groups = skip.groups;
                (page_rows, page_selected) =
                    (page_rows + skip.rows, page_selected + skip.selected);
            }
            let f = files.len();
            for rg in info.row_groups.iter().copied() {
                let meta = info.arrow.metadata().row_group(rg);
                for (k, key) in info.keys.iter().enumerate() {
                    let chunk = meta.column(key.leaf);
                    if !all_dictionary(chunk) {
                        return Ok(None);
                    }
                    // (Strings: 4 length bytes and a few of text each.)
                    let n = dictionary_bytes(chunk)
                        / if key.kind == Physical::Int32 { 4 } else { 8 };
                    entries += n;
                    largest[k] = largest[k].max(n);
                }
                rows += meta.num_rows().max(0) as u64;
                items.push((f, rg));
            }
            files.push(info);
        }
        // A computed key needs the probe of its first row group, read twice:
        // over a few row groups that costs more than the codes save (TSBS
        // long-driving-sessions, two row groups: 15 ms against 13).
        if !self.computed.is_empty() && items.len() < MIN_COMPUTED_ROW_GROUPS {
            return Ok(None);
        }
        let (skip, of) = match self.keys.len() + self.computed.len() {
            1 => MAX_PAGE_SKIP,
            _ => MAX_PAGE_SKIP_SEVERAL,
        };
        if (page_rows - page_selected) * of > page_rows * skip {
            return Ok(None);
        }
        // With arguments to read (or a filter), rows still need their group ids, and a
        // dictionary of many entries costs more to intern chunk by chunk
        // than the decoded values cost to look up (benches/README.md).
        // Count-only reading wins at any size.
        let per_row = self.args.iter().any(Option::is_some)
            || self.filter.is_some()
            || !self.computed.is_empty();
        if per_row && entries * MIN_ROWS_PER_ENTRY > rows {
            return Ok(None);
        }
        // Several keys: only when the groups promise to stay few (else the
        // stream's probe decides, and may hand the rows to DataFusion). The
        // product of the dictionaries promises it; failing that (columns
        // that go together, as a truck's name, driver and model do, have a
        // product far above their tuples), each dictionary must be small
        // and the first row group's tuples few ([`Work::few_tuples`]).
        let product = largest
            .iter()
            .try_fold(1u64, |p, &n| p.checked_mul(n.max(1)));
        // (Computed keys: no dictionary bounds them.)
        let probe = !self.computed.is_empty()
            || (largest.len() > 1 && product.is_none_or(|p| p > MAX_TUPLES as u64));
        if probe && largest.iter().any(|&n| n > MAX_TUPLES as u64) {
            return Ok(None);
        }
        let args = self.args.clone();
        let keys = self.keys.clone();
        Ok(Some(Work {
            filter: self.filter.clone(),
            factory,
            metrics: metrics.clone(),
            files,
            args,
            keys,
            positions: self.positions.clone(),
            computed: self.computed.clone(),
            items,
            next: AtomicUsize::new(0),
            _admission: self.gate.as_ref().map(|turn| {
                let admission = turn.admit();
                if let Some(planned) = &self.planned {
                    planned.release();
                }
                admission
            }),
            gate: self.gate.clone(),
            probe,
        }))
    }

    /// What reading `file` takes, when its keys and arguments are the
    /// table's types and its keys flat INT32/INT64 (or string BYTE_ARRAY)
    /// columns.
    fn file_info(
        &self,
        file: &PartitionedFile,
        arrow: ArrowReaderMetadata,
    ) -> Option<FileInfo> {
        let schema = arrow.schema();
        let descr = arrow.parquet_schema();
        let mut keys = vec![];
        let mut key_roots = vec![];
        for (name, t) in &self.keys {
            let (root, field) = schema.column_with_name(name)?;
            // Strings read as any string type group alike.
            if field.data_type() != t
                && !(string_type(t) && string_type(field.data_type()))
            {
                return None;
            }
            let leaf = (0..descr.num_columns()).find(|&i| {
                let c = descr.column(i);
                c.path().parts().len() == 1 && c.path().parts()[0] == *name
            })?;
            let c = descr.column(leaf);
            let kind = match c.physical_type() {
                PhysicalType::INT32 if key_type(t) => Physical::Int32,
                PhysicalType::INT64 if key_type(t) => Physical::Int64,
                PhysicalType::BYTE_ARRAY if string_type(t) => Physical::Utf8,
                PhysicalType::DOUBLE if *t == DataType::Float64 => Physical::Double,
                _ => return None,
            };
            if c.max_rep_level() != 0 || c.max_def_level() > 1 {
                return None;
            }
            keys.push(KeyLeaf {
                leaf,
                kind,
                nullable: c.max_def_level() == 1,
            });
            key_roots.push(root);
        }
        let mut roots = vec![];
        for ArgColumn {
            name, data_type: t, ..
        } in self.args.iter().flatten()
        {
            let (i, field) = schema.column_with_name(name)?;
            if field.data_type() != t {
                return None;
            }
            roots.push(i);
        }
        // A computed key's columns too, as the table types them.
        for (name, t) in self.computed.iter().flat_map(|k| &k.columns) {
            let (i, field) = schema.column_with_name(name)?;
            if field.data_type() != t {
                return None;
            }
            roots.push(i);
        }
        // The filter's columns are read with the arguments (strings as
        // views, as the table types them: see `with_views`).
        for c in self.filter.iter().flat_map(|f| &f.columns) {
            let (i, field) = schema.column_with_name(&c.name)?;
            let dictionary = matches!(field.data_type(), DataType::Dictionary(..));
            if field.data_type() != &c.data_type && !(c.nulls_only && dictionary) {
                return None;
            }
            roots.push(i);
        }
        roots.sort_unstable();
        roots.dedup();
        // Keys decoded with the arguments: row groups whose dictionaries
        // hold too many tuples (several keys only).
        key_roots.extend(roots.iter().copied());
        let decoded = ProjectionMask::roots(descr, key_roots);
        let args = (!roots.is_empty()).then(|| ProjectionMask::roots(descr, roots));
        let row_groups = row_groups_in_range(arrow.metadata(), file);
        Some(FileInfo {
            file: file.clone(),
            keys,
            args,
            decoded,
            row_groups,
            arrow,
        })
    }
}

/// `arrow` reading the filter's string `columns` as cheaply as the filter
/// allows: as dictionaries (their codes) where it only tests them for NULL,
/// else as views where the table types them `Utf8View` and the file says
/// `Utf8` or `LargeUtf8` (as DataFusion's scan reads them: no copy of the
/// strings); `None` when the reader refuses.
fn with_views(
    arrow: ArrowReaderMetadata,
    columns: &[FilterColumn],
) -> Option<ArrowReaderMetadata> {
    let schema = arrow.schema();
    let read_as = |f: &Field| -> Option<DataType> {
        let c = columns.iter().find(|c| c.name == *f.name())?;
        match f.data_type() {
            t @ (DataType::Utf8 | DataType::LargeUtf8) if c.nulls_only => Some(
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(t.clone())),
            ),
            DataType::Utf8 | DataType::LargeUtf8 if c.data_type == DataType::Utf8View => {
                Some(DataType::Utf8View)
            }
            _ => None,
        }
    };
    if !schema.fields().iter().any(|f| read_as(f).is_some()) {
        return Some(arrow);
    }
    let fields: Vec<FieldRef> = schema
        .fields()
        .iter()
        .map(|f| match read_as(f) {
            Some(t) => Arc::new(f.as_ref().clone().with_data_type(t)),
            None => Arc::clone(f),
        })
        .collect();
    let views = Schema::new_with_metadata(fields, schema.metadata().clone());
    let options = ArrowReaderOptions::new().with_schema(Arc::new(views));
    ArrowReaderMetadata::try_new(Arc::clone(arrow.metadata()), options).ok()
}

/// The row groups of `info` the filter's statistics do not rule out, with
/// their rows and the rows of those the page index keeps. The scan reads
/// whole row groups (its codes page by page) and the filter drops the rows
/// the page index would have skipped; where it would skip many
/// ([`MAX_PAGE_SKIP`]), DataFusion's scan, reading only the pages left,
/// wins (TSBS stationary-trucks: ten minutes of a day file), and the scan
/// steps aside.
fn pruned(info: &FileInfo, filter: &RowFilter) -> PageSkip {
    let scratch = ExecutionPlanMetricsSet::new();
    let plan = access_plan(
        &info.arrow,
        &info.row_groups,
        &info.file,
        &filter.pruning,
        &scratch,
    );
    let groups = plan.row_group_indexes();
    let row_groups = info.arrow.metadata().row_groups();
    let rows: usize = groups
        .iter()
        .map(|&rg| row_groups[rg].num_rows().max(0) as usize)
        .sum();
    let selected: usize = plan
        .inner()
        .iter()
        .zip(row_groups)
        .map(|(access, meta)| match access {
            RowGroupAccess::Skip => 0,
            RowGroupAccess::Scan => meta.num_rows().max(0) as usize,
            RowGroupAccess::Selection(s) => s.row_count(),
        })
        .sum();
    PageSkip {
        groups,
        rows,
        selected,
    }
}

/// Row groups a scan with a computed key must read at least.
const MIN_COMPUTED_ROW_GROUPS: usize = 4;

/// What the page index leaves of a file's row groups ([`pruned`]).
struct PageSkip {
    /// The row groups its statistics keep.
    groups: Vec<usize>,
    /// Their rows.
    rows: usize,
    /// Their rows the page index keeps.
    selected: usize,
}

/// The share of the rows the page index may skip before the scan steps
/// aside, with one key: one in ten ([`pruned`]).
const MAX_PAGE_SKIP: (usize, usize) = (1, 10);

/// The same with several keys: one in two. Their codes spare DataFusion's
/// scan decoding (strings, mostly) many times the cost of the rows read in
/// vain (TSBS long-daily-sessions: a day from 19:14 to 19:14 skips more
/// than a tenth of one file's rows, 8% of both).
const MAX_PAGE_SKIP_SEVERAL: (usize, usize) = (1, 2);

/// Keeps the `ids` of the rows `mask` marks, in order.
fn retain(ids: &mut Vec<u32>, mask: &BooleanArray) {
    let mut rows = mask.values().iter();
    ids.retain(|_| rows.next() == Some(true));
}

/// Most groups a multi-column key reads from codes (and most tuples the
/// product of its dictionaries' estimated sizes may promise at planning):
/// the composite table's own limit.
const MAX_TUPLES: usize = COMPOSITE_MAX_GROUPS;

/// Rows per dictionary entry (over all row groups) below which a query with
/// arguments reads decoded keys instead.
const MIN_ROWS_PER_ENTRY: u64 = 64;

/// Bytes of a chunk's dictionary page (header included; compressed when
/// the chunk is): from its offset to the first data page.
fn dictionary_bytes(chunk: &ColumnChunkMetaData) -> u64 {
    chunk
        .dictionary_page_offset()
        .map_or(0, |d| (chunk.data_page_offset() - d).max(0) as u64)
}

/// Whether every data page of a chunk holds dictionary codes.
fn all_dictionary(chunk: &ColumnChunkMetaData) -> bool {
    if chunk.dictionary_page_offset().is_none()
        && !chunk.encodings().any(|e| e == Encoding::PLAIN_DICTIONARY)
    {
        return false;
    }
    let dict =
        |e: Encoding| matches!(e, Encoding::PLAIN_DICTIONARY | Encoding::RLE_DICTIONARY);
    if let Some(mask) = chunk.page_encoding_stats_mask() {
        return mask.encodings().all(dict);
    }
    chunk.page_encoding_stats().is_some_and(|stats| {
        stats
            .iter()
            .filter(|s| {
                matches!(s.page_type, PageType::DATA_PAGE | PageType::DATA_PAGE_V2)
            })
            .all(|s| dict(s.encoding))
    })
}

/// One key column of a file.
struct KeyLeaf {
    leaf: usize,
    kind: Physical,
    nullable: bool,
}

/// One file as phase 1 reads it.
struct FileInfo {
    file: PartitionedFile,
    keys: Vec<KeyLeaf>,
    /// The argument and filter columns (`None`: count(*) only, no filter).
    args: Option<ProjectionMask>,
    /// The key, argument and filter columns.
    decoded: ProjectionMask,
    row_groups: Vec<usize>,
    arrow: ArrowReaderMetadata,
}

/// Row groups handed out to phase 1's tasks, one at a time.
pub(crate) struct Work {
    factory: Arc<dyn ParquetFileReaderFactory>,
    /// What rows must pass besides.
    filter: Option<RowFilter>,
    metrics: ExecutionPlanMetricsSet,
    files: Vec<FileInfo>,
    /// Per aggregate, the column its argument reads.
    args: Vec<Option<ArgColumn>>,
    /// The key columns' names and table types.
    keys: Vec<(String, DataType)>,
    /// The GROUP BY position of each of `keys`.
    positions: Vec<usize>,
    /// Keys computed from other columns.
    computed: Vec<ComputedKey>,
    /// (file, row group) in file order.
    items: Vec<(usize, usize)>,
    next: AtomicUsize,
    gate: Option<Turn>,
    /// The query counts as running while phase 1 reads (the gate's own
    /// stream, which would hold this, is never opened).
    _admission: Option<Admission>,
    /// The dictionaries do not bound the key tuples: [`Self::few_tuples`]
    /// must say they are few before the scan takes over.
    probe: bool,
}

impl std::fmt::Debug for Work {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Work")
            .field("row_groups", &self.items.len())
            .finish()
    }
}

impl Work {
    /// Whether the scan may take over: always when the dictionaries bound
    /// the key tuples, else when the first row group's tuples are at most
    /// a quarter of [`MAX_TUPLES`] (with a computed key: times the row
    /// groups, at most [`MAX_TUPLES`]), read into a scratch table and
    /// thrown away: one row group read twice. Later row groups that bring
    /// more are decoded instead ([`Self::row_group`]).
    pub(super) async fn few_tuples(
        &self,
        spec: &AggregateSpec,
        batch_size: usize,
    ) -> Result<bool> {
        let Some(&(f, rg)) = self.items.first().filter(|_| self.probe) else {
            return Ok(true);
        };
        let mut table = Table::new(spec)?;
        self.row_group(&self.files[f], rg, &mut table, batch_size)
            .await?;
        if table.keys.overflowed() {
            return Ok(false);
        }
        // A computed key (a time bucket) brings new tuples with every row
        // group: the first one's, times the row groups, must stay within the
        // bound (TSBS's ten-minute buckets of a day, not of the whole table,
        // whose millions of groups DataFusion's table holds better).
        let tuples = match self.computed.is_empty() {
            true => table.keys.len() * 4,
            false => table.keys.len().saturating_mul(self.items.len()),
        };
        Ok(tuples <= MAX_TUPLES)
    }

    /// Aggregates row groups into `table` until none is left, its memory
    /// accounted in `reservation`. Returns the rows read.
    pub(super) async fn run(
        &self,
        table: &mut Table,
        batch_size: usize,
        reservation: &MemoryReservation,
    ) -> Result<usize> {
        let mut rows = 0;
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(&(f, rg)) = self.items.get(i) else {
                return Ok(rows);
            };
            if let Some(turn) = &self.gate {
                turn.wait().await;
            }
            rows += self
                .row_group(&self.files[f], rg, table, batch_size)
                .await?;
            reservation.try_resize(table.memory_size())?;
        }
    }

    async fn row_group(
        &self,
        file: &FileInfo,
        rg: usize,
        table: &mut Table,
        batch_size: usize,
    ) -> Result<usize> {
        let meta = file.arrow.metadata().row_group(rg);
        let is_key = |c: usize| file.keys.iter().any(|k| k.leaf == c);
        let mut ranges: Vec<Range<u64>> = file
            .keys
            .iter()
            .map(|k| chunk_range(meta.column(k.leaf)))
            .collect();
        if let Some(mask) = &file.args {
            ranges.extend(
                (0..meta.num_columns())
                    .filter(|&c| mask.leaf_included(c) && !is_key(c))
                    .map(|c| chunk_range(meta.column(c))),
            );
        }
        let mut reader = self.factory.create_reader(
            0,
            file.file.clone(),
            file.file.metadata_size_hint,
            &self.metrics,
        )?;
        let bytes = reader.get_byte_ranges(ranges.clone()).await?;
        let chunks = Chunks {
            size: file.file.object_meta.size,
            parts: ranges.iter().map(|r| r.start).zip(bytes).collect(),
        };
        let rows = meta.num_rows() as usize;
        let mut keys = file
            .keys
            .iter()
            .map(|k| {
                let pages = SerializedPageReader::new(
                    Arc::new(chunks.clone()),
                    meta.column(k.leaf),
                    rows,
                    None,
                )?;
                Ok(KeyChunk::new(Box::new(pages), k.kind, k.nullable))
            })
            .collect::<Result<Vec<_>>>()?;
        let batches = |mask: &ProjectionMask| {
            ParquetRecordBatchReaderBuilder::new_with_metadata(
                chunks.clone(),
                file.arrow.clone(),
            )
            .with_projection(mask.clone())
            .with_row_groups(vec![rg])
            .with_batch_size(batch_size)
            .build()
        };
        let read = if keys.len() + self.computed.len() > 1 {
            match self.tuple_bound(&mut keys, table, rows)? {
                true => self.composite_codes(
                    keys,
                    file.args.as_ref().map(batches).transpose()?,
                    rows,
                    batch_size,
                    table,
                )?,
                false => self.decoded(batches(&file.decoded)?, table)?,
            }
        } else {
            let keys = &mut keys[0];
            if rows > 0 && file.args.is_some() {
                // Room for the chunk's entries up front: states grown group by
                // group copy themselves over and over (count-only tables grow
                // by the histogram's batches, no need).
                let more = keys.dictionary_len(&mut table.keys, &mut table.counts)?;
                table.reserve(table.len() + more);
            }
            let Some(mask) = &file.args else {
                keys.count(rows, &mut table.keys, &mut table.counts)?;
                return Ok(rows);
            };
            let (mut read, mut bound) = (0, None);
            for batch in batches(mask)? {
                let batch = batch?;
                let n = batch.num_rows();
                let passing = self.passing(&mut bound, &batch)?;
                let Table {
                    keys: groups,
                    counts,
                    ids,
                    ..
                } = table;
                match &passing {
                    None => keys.ids(n, groups, counts, ids)?,
                    Some(mask) => {
                        keys.codes(n, groups, counts, ids)?;
                        retain(ids, mask);
                        counts.resize(groups.len(), 0);
                        count_ids(ids, counts);
                    }
                }
                table.update_states(&self.arg_columns(&batch, passing.as_ref())?)?;
                read += n;
            }
            read
        };
        if read != rows {
            return Err(DataFusionError::External(
                format!(
                    "Parquet row group {rg} of {}: read {read} rows of {rows}",
                    file.file.object_meta.location
                )
                .into(),
            ));
        }
        Ok(rows)
    }

    /// The rows of `batch` that pass the filter (`None`: all of them).
    fn passing(
        &self,
        bound: &mut Option<Arc<dyn PhysicalExpr>>,
        batch: &RecordBatch,
    ) -> Result<Option<BooleanArray>> {
        match &self.filter {
            Some(f) => f.passing(bound, batch),
            None => Ok(None),
        }
    }

    /// The aggregates' arguments from `batch`, of the rows `passing`
    /// marks (all when `None`).
    fn arg_columns(
        &self,
        batch: &RecordBatch,
        passing: Option<&BooleanArray>,
    ) -> Result<Vec<Option<ArrayRef>>> {
        self.args
            .iter()
            .map(|a| match a {
                None => Ok(None),
                Some(a) => match batch.column_by_name(&a.name) {
                    Some(c) => {
                        let c = match passing {
                            Some(mask) => &filter(c, mask)?,
                            None => c,
                        };
                        a.eval(c).map(Some)
                    }
                    None => internal_err!(
                        "dictionary scan: argument column {} not read",
                        a.name
                    ),
                },
            })
            .collect()
    }

    /// Whether a row group of several keys may take their codes: every
    /// dictionary entry interned in its column, the groups so far are
    /// within [`MAX_TUPLES`] (the pair tables make room for any tuples).
    fn tuple_bound(
        &self,
        keys: &mut [KeyChunk],
        table: &mut Table,
        rows: usize,
    ) -> Result<bool> {
        let GroupKeys::Composite(composite) = &mut table.keys else {
            return Ok(false);
        };
        if rows == 0 {
            return Ok(true);
        }
        let mut scratch = vec![];
        for (chunk, &c) in keys.iter_mut().zip(&self.positions) {
            chunk.intern_dictionary(composite.column_mut(c), &mut scratch)?;
        }
        Ok(composite.len() <= MAX_TUPLES)
    }

    /// Several keys from their chunks' codes, `rows` rows in batches of
    /// the argument reader (or of `batch_size` for count only). Returns the
    /// rows read.
    fn composite_codes(
        &self,
        mut keys: Vec<KeyChunk>,
        args: Option<ParquetRecordBatchReader>,
        rows: usize,
        batch_size: usize,
        table: &mut Table,
    ) -> Result<usize> {
        let mut bound = None;
        let mut args = args.map(|r| {
            r.map(|b| {
                b.map_err(DataFusionError::from).and_then(|b| {
                    let passing = self.passing(&mut bound, &b)?;
                    let computed = self
                        .computed
                        .iter()
                        .map(|k| k.eval(&b, passing.as_ref()))
                        .collect::<Result<Vec<_>>>()?;
                    Ok((
                        b.num_rows(),
                        self.arg_columns(&b, passing.as_ref())?,
                        passing,
                        computed,
                    ))
                })
            })
        });
        let mut read = 0;
        let mut scratch = vec![];
        // Per GROUP BY position: its coded key (`Ok`) or computed key.
        let sources: Vec<std::result::Result<usize, usize>> = (0..keys.len()
            + self.computed.len())
            .map(|c| match self.positions.iter().position(|&p| p == c) {
                Some(k) => Ok(k),
                None => Err(self
                    .computed
                    .iter()
                    .position(|k| k.position == c)
                    .unwrap_or(usize::MAX)),
            })
            .collect();
        loop {
            let (n, columns, passing, computed) = match args.as_mut() {
                Some(batches) => match batches.next() {
                    Some(b) => b?,
                    None => break,
                },
                None if read < rows => (
                    (rows - read).min(batch_size.max(1)),
                    vec![None; self.args.len()],
                    None,
                    vec![],
                ),
                None => break,
            };
            let GroupKeys::Composite(composite) = &mut table.keys else {
                return internal_err!("dictionary scan: composite keys expected");
            };
            // Only the passing rows are grouped: a bucket key makes many
            // tuples of rows the filter drops.
            composite.intern_with(
                &mut table.ids,
                Some(&mut table.counts),
                |c, column, out| match sources[c] {
                    Ok(k) => {
                        keys[k].codes(n, column, &mut scratch, out)?;
                        if let Some(mask) = &passing {
                            retain(out, mask);
                        }
                        Ok(())
                    }
                    Err(j) => match computed.get(j) {
                        Some(key) => {
                            column.assign(std::slice::from_ref(key), out, None, 0)
                        }
                        None => internal_err!("dictionary scan: key {c} not computed"),
                    },
                },
            )?;
            table.update_states(&columns)?;
            read += n;
        }
        Ok(read)
    }

    /// A row group's keys decoded and grouped as the stream's would be.
    fn decoded(
        &self,
        batches: ParquetRecordBatchReader,
        table: &mut Table,
    ) -> Result<usize> {
        let (mut read, mut bound) = (0, None);
        for batch in batches {
            let batch = batch?;
            read += batch.num_rows();
            let batch = match self.passing(&mut bound, &batch)? {
                Some(mask) => filter_record_batch(&batch, &mask)?,
                None => batch,
            };
            // As the table types them (the files' strings may be Utf8), in
            // the GROUP BY's order.
            let mut keys = self
                .keys
                .iter()
                .zip(&self.positions)
                .map(|((k, t), &p)| match batch.column_by_name(k) {
                    Some(a) => Ok((p, cast(a, t)?)),
                    None => internal_err!("dictionary scan: key column {k} not read"),
                })
                .collect::<Result<Vec<_>>>()?;
            for k in &self.computed {
                keys.push((k.position, k.eval(&batch, None)?));
            }
            keys.sort_by_key(|(p, _)| *p);
            let keys: Vec<ArrayRef> = keys.into_iter().map(|(_, a)| a).collect();
            table
                .keys
                .intern(&keys, &mut table.ids, &mut table.counts, 0)?;
            table.update_states(&self.arg_columns(&batch, None)?)?;
        }
        Ok(read)
    }
}
