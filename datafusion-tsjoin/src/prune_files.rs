//! Files a Parquet scan's WHERE rules out, dropped while planning.
//!
//! DataFusion 55 prunes whole files by their statistics only when it opens
//! them: every file of the table stays in the scan's file groups, and each
//! partition's opener builds a pruning predicate for each of its files in
//! turn (DataFusion's `FilePruner`, metric `files_ranges_pruned_statistics`).
//! On a table partitioned by day, a WHERE over one day still plans every
//! day's file, and two things follow:
//! - the per-file pruning work (a pruning predicate built per file) is a
//!   fixed cost per query: about a third of a 10 ms TSBS `stationary-trucks`
//!   query over 79 daily files;
//! - the scan's partitions are formed before pruning, so the files that
//!   survive often sit in one partition: a one-day window of TSBS
//!   `long-daily-sessions` reads both of its files on one core while the
//!   other has nothing to do (`output_rows_skew=51%`).
//!
//! [`PruneFilesRule`] prunes with the same statistics once per scan, at
//! plan time: it builds one pruning predicate from the scan's predicate and
//! evaluates it over every file's statistics together (DataFusion's
//! [`PrunableStatistics`], one container per file), then drops the files it
//! rules out from the file groups. It runs right after DataFusion's filter
//! push-down has put the WHERE into the scan and before `EnsureRequirements`
//! splits the scan's files into byte ranges per partition, so that split
//! spreads only the files that will be read.
//!
//! The answer cannot change: a file is dropped only where the opener would
//! have skipped it whole. Conjuncts over partition columns (or anything the
//! file statistics do not describe) are left out of the pruning predicate,
//! which only makes it prune less, and files without statistics are kept.
//! `SET tsjoin.prune_files = false` turns the rule off; EXPLAIN shows the
//! files that remain in the scan's `file_groups`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
//! use datafusion_tsjoin::TsJoinContextExt;
//! let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
//! let dir = std::env::temp_dir().join(format!("prune-doc-{}", std::process::id()));
//! for day in 1..=3 {
//!     ctx.tsjoin_sql(&format!("COPY (SELECT v + {day} * 100 AS ts FROM \
//!         generate_series(1, 10) AS g(v)) TO '{}/{day}.parquet'", dir.display()))
//!         .await?.collect().await?;
//! }
//! ctx.register_parquet("t", dir.to_str().unwrap(), Default::default()).await?;
//! let plan = ctx.tsjoin_sql("EXPLAIN SELECT count(*) FROM t WHERE ts > 300").await?.collect().await?;
//! let shown = datafusion::arrow::util::pretty::pretty_format_batches(&plan)?.to_string();
//! assert!(shown.contains("3.parquet") && !shown.contains("1.parquet"), "{shown}");
//! let n = ctx.tsjoin_sql("SELECT * FROM t WHERE ts > 300").await?.count().await?;
//! assert_eq!(n, 10);
//! # std::fs::remove_dir_all(dir).ok(); Ok(()) }
//! ```

use crate::config::rule_enabled;
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::pruning::PrunableStatistics;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{
    Transformed, TransformedResult, TreeNode, TreeNodeRecursion,
};
use datafusion::common::{ColumnStatistics, Result, ScalarValue, Statistics};
use datafusion::datasource::physical_plan::{
    FileGroup, FileScanConfig, FileScanConfigBuilder, FileSource, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::logical_expr::interval_arithmetic::Interval;
use datafusion::physical_expr::expressions::{Column, DynamicFilterPhysicalExpr};
use datafusion::physical_expr::utils::{collect_columns, conjunction, split_conjunction};
use datafusion::physical_expr::{AnalysisContext, ExprBoundaries, analyze};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};
use std::collections::HashSet;
use std::sync::Arc;

/// Drops the files of Parquet scans that their predicate rules out by the
/// files' statistics, at plan time (see the [module docs](self)).
///
/// ```
/// use datafusion::physical_optimizer::PhysicalOptimizerRule;
/// use datafusion_tsjoin::prune_files::PruneFilesRule;
/// assert_eq!(PruneFilesRule.name(), "PruneFilesRule");
/// ```
#[derive(Debug, Default)]
pub struct PruneFilesRule;

impl PhysicalOptimizerRule for PruneFilesRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !rule_enabled(config, |o| o.prune_files) {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            let Some((scan, source)) = node
                .downcast_ref::<DataSourceExec>()
                .and_then(|d| d.downcast_to_file_source::<ParquetSource>())
            else {
                return Ok(Transformed::no(node));
            };
            Ok(match pruned(scan, source) {
                Some(config) => {
                    Transformed::yes(DataSourceExec::from_data_source(config))
                }
                None => Transformed::no(node),
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        "PruneFilesRule"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `scan` without the files its predicate rules out, or `None` when it
/// keeps them all (or cannot tell).
fn pruned(scan: &FileScanConfig, source: &ParquetSource) -> Option<FileScanConfig> {
    let file_schema = Arc::clone(source.table_schema().file_schema());
    let predicate = file_predicate(&source.filter()?, &file_schema)?;
    let pruning = PruningPredicateBuilder::new()
        .with_file_schema(Arc::clone(&file_schema))
        .try_build(predicate)
        .ok()?;
    if pruning.always_true() {
        return None;
    }
    let files: Vec<_> = scan.file_groups.iter().flat_map(|g| g.iter()).collect();
    if files.iter().all(|f| f.statistics.is_none()) {
        return None;
    }
    let unknown = Arc::new(Statistics::new_unknown(&file_schema));
    let stats = files
        .iter()
        .map(|f| f.statistics.clone().unwrap_or_else(|| Arc::clone(&unknown)))
        .collect();
    let keep = pruning
        .prune(&PrunableStatistics::new(stats, file_schema))
        .ok()?;
    if keep.iter().all(|&k| k) {
        return None;
    }
    let table = source.table_schema().table_schema();
    let mut keep = keep.into_iter();
    // The number of groups is the scan's partitioning, which the plan above
    // may rely on: a group can end up empty, never removed.
    let groups = scan
        .file_groups
        .iter()
        .map(|group| {
            let kept: Vec<_> = group
                .iter()
                .filter(|_| keep.next().unwrap_or(true))
                .cloned()
                .collect();
            with_group_statistics(FileGroup::new(kept), table)
        })
        .collect::<Vec<_>>();
    // Exact totals only when every group has its files' statistics; else
    // the table's, no longer exact. Empty groups hold no rows and are left
    // out: merged in, their unknown minima and maxima would erase the
    // others' (and an unknown row count, the estimates above the scan).
    let group_stats: Option<Vec<_>> = groups
        .iter()
        .filter(|g| !g.is_empty())
        .map(|g| g.file_statistics(None))
        .collect();
    let totals = match group_stats {
        Some(stats) if stats.is_empty() => no_rows(table),
        Some(stats) => Statistics::try_merge_iter(stats, table).ok()?,
        None => scan.statistics().to_inexact(),
    };
    Some(
        FileScanConfigBuilder::from(scan.clone())
            .with_file_groups(groups)
            .with_statistics(totals)
            .build(),
    )
}

/// `group` with the merged statistics of its files, as DataFusion's listing
/// table gives each group (files without statistics leave it without); an
/// empty group gets those of no rows.
pub(crate) fn with_group_statistics(group: FileGroup, table: &Schema) -> FileGroup {
    if group.is_empty() {
        return group.with_statistics(Arc::new(no_rows(table)));
    }
    let stats: Option<Vec<_>> = group.iter().map(|f| f.statistics.clone()).collect();
    match stats.and_then(|s| {
        Statistics::try_merge_iter(s.iter().map(|s| s.as_ref()), table).ok()
    }) {
        Some(merged) => group.with_statistics(Arc::new(merged)),
        None => group,
    }
}

/// The statistics of no rows of `table`: zero rows, bytes and nulls, no
/// bounds. (DataFusion's `Statistics::new_unknown` would say "unknown", and
/// an unknown group makes the whole scan's row count unknown.)
fn no_rows(table: &Schema) -> Statistics {
    let mut stats = Statistics::new_unknown(table);
    stats.num_rows = Precision::Exact(0);
    stats.total_byte_size = Precision::Exact(0);
    for column in &mut stats.column_statistics {
        column.null_count = Precision::Exact(0);
    }
    stats
}

/// The conjuncts of `predicate` that the files' statistics describe: every
/// column one of the file schema's (not a partition column), no dynamic
/// filter (its value is not known while planning). `None` when none is.
pub(crate) fn file_predicate(
    predicate: &Arc<dyn PhysicalExpr>,
    file_schema: &Schema,
) -> Option<Arc<dyn PhysicalExpr>> {
    let kept: Vec<_> = split_conjunction(predicate)
        .into_iter()
        .filter(|c| describes(c, file_schema))
        .cloned()
        .collect();
    (!kept.is_empty()).then(|| conjunction(kept))
}

/// The conjuncts of `source`'s predicate that the files' statistics
/// describe (see [`file_predicate`]) and that `keep` accepts, joined;
/// `None` when there are none.
///
/// ```ignore
/// let on_time = scan_conjuncts(source, |c| collect_columns(c).iter().all(|c| c.index() == ts));
/// ```
pub(crate) fn scan_conjuncts(
    source: &ParquetSource,
    keep: impl Fn(&Arc<dyn PhysicalExpr>) -> bool,
) -> Option<Arc<dyn PhysicalExpr>> {
    let predicate = source.filter()?;
    let file_schema = source.table_schema().file_schema();
    let kept: Vec<_> = split_conjunction(&predicate)
        .into_iter()
        .filter(|c| describes(c, file_schema) && keep(c))
        .cloned()
        .collect();
    (!kept.is_empty()).then(|| conjunction(kept))
}

/// Whether every node of `expr` can be judged from file statistics: its
/// columns are the file schema's, at the same position, and it holds no
/// dynamic filter.
fn describes(expr: &Arc<dyn PhysicalExpr>, file_schema: &Schema) -> bool {
    let mut ok = true;
    expr.apply(|e| {
        if e.downcast_ref::<DynamicFilterPhysicalExpr>().is_some() {
            ok = false;
        } else if let Some(c) = e.downcast_ref::<Column>() {
            ok &= file_schema
                .fields()
                .get(c.index())
                .is_some_and(|f| f.name() == c.name());
        }
        Ok(if ok {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    })
    .ok();
    ok
}

/// The share of a file's rows that pass `predicate`, from its column
/// statistics: 0 when the interval analysis finds no row can pass, else the
/// product over the predicate's columns of the width of the range it keeps
/// over the width of the file's range (values taken as uniform). DataFusion's
/// own `selectivity` is not used: it counts representable values, which for
/// floats crowd near zero (`a > 1.0` over `[-25, 25]` came out below 1%).
/// 1 where the analysis fails, a range is unbounded or the statistics are
/// not one per column of `table`.
pub(crate) fn passing_share(
    predicate: &Arc<dyn PhysicalExpr>,
    table: &SchemaRef,
    statistics: &[ColumnStatistics],
) -> f64 {
    // The analysis indexes the statistics by the table's columns.
    if statistics.len() != table.fields().len() {
        return 1.0;
    }
    let Ok(before) = AnalysisContext::try_from_statistics(table, statistics) else {
        return 1.0;
    };
    let ranges = before.boundaries.clone();
    let Ok(after) = analyze(predicate, before, table) else {
        return 1.0;
    };
    if after.selectivity == Some(0.0) {
        return 0.0;
    }
    let columns: HashSet<usize> = collect_columns(predicate)
        .iter()
        .map(Column::index)
        .collect();
    ranges
        .iter()
        .zip(&after.boundaries)
        .filter(|(b, _)| columns.contains(&b.column.index()))
        .map(|(b, a)| {
            let width =
                |bound: &ExprBoundaries| bound.interval.as_ref().and_then(range_width);
            match (width(b), width(a)) {
                (Some(whole), Some(kept)) if whole > 0.0 => {
                    (kept / whole).clamp(0.0, 1.0)
                }
                _ => 1.0,
            }
        })
        .product()
}

/// `interval`'s width as a number (integers and times count their end
/// points: `[2, 2]` is one value wide); `None` when unbounded or not
/// numeric.
fn range_width(interval: &Interval) -> Option<f64> {
    let number = |v: &ScalarValue| -> Option<f64> {
        if v.is_null() {
            return None;
        }
        let as_float = v.cast_to(&DataType::Float64).ok();
        let as_int = || v.cast_to(&DataType::Int64).ok();
        match as_float.or_else(as_int)? {
            ScalarValue::Float64(Some(x)) => Some(x),
            ScalarValue::Int64(Some(x)) => Some(x as f64),
            _ => None,
        }
    };
    let (lo, hi) = (number(interval.lower())?, number(interval.upper())?);
    let data_type = interval.data_type();
    let discrete = data_type.is_integer() || data_type.is_temporal();
    Some(hi - lo + if discrete { 1.0 } else { 0.0 })
}
