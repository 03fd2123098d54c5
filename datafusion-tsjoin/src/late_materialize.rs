//! Late materialisation chosen per Parquet scan (ClickHouse's automatic
//! PREWHERE): a filtered scan that also reads columns its WHERE does not use
//! decodes those columns only for the rows that pass.
//!
//! DataFusion 55 reads a filtered Parquet scan in one of two ways, chosen
//! for the whole session by `datafusion.execution.parquet.pushdown_filters`:
//! off (the default), the scan decodes every projected column of every row
//! and a `FilterExec` drops rows afterwards; on, the scan's *row filter*
//! decodes the predicate's columns first and the others only where the
//! predicate holds. Neither is right for every query: measured on TSBS IoT,
//! the row filter makes a selective `SELECT *` about 3x faster but a
//! filtered `count(*)` 2x slower, because there every decoded column is a
//! predicate column and the row filter only adds work.
//!
//! [`LateMaterializeRule`] makes the choice per scan: it turns the row filter
//! on (with `reorder_filters`, cheapest conjunct first) for a `FilterExec`
//! over a Parquet scan when
//! - the filter's output needs columns the predicate does not read, and
//!   those columns are at least [`MIN_DEFERRED_SHARE`] of the bytes the scan
//!   decodes (the files' statistics give each column's decoded size), and
//! - the predicate is selective: at most [`MAX_SELECTIVITY`] of the rows of
//!   the files it does not prune pass it, as DataFusion's interval analysis
//!   estimates from each file's min/max statistics. Conjuncts it cannot
//!   bound (`IS NOT NULL`, string equality, …) count as passing every row,
//!   and so do conjuncts on the files' sort columns (row-group pruning
//!   already skips what they reject). Measured on TSBS IoT, a row filter
//!   that drops few rows costs up to 1.9x (benches/README.md).
//!
//! It then folds the filter into the scan. Scans that feed hash joins'
//! filters (`tsjoin.join_filters`), scans with a limit, scans under a
//! [`NewestFirstTopKExec`] (it reads a few row groups; measured slower with
//! the row filter), scans expected to read fewer than
//! `tsjoin.small_scan_rows` rows (`crate::small_scan`: there the row
//! filter's setup costs more than it saves) and conjuncts the Parquet row
//! filter cannot evaluate (a residual `FilterExec` keeps them) are left as
//! they were.
//!
//! ```text
//! FilterExec: velocity@5 > 90                     DataSourceExec: …, projection=[…],
//!   DataSourceExec: …, projection=[…],      ⇒       predicate=velocity@5 > 90, late_materialize(row filter)
//!     predicate=velocity@5 > 90
//! ```
//!
//! In EXPLAIN the `FilterExec` is gone and the scan's `predicate=` is what
//! its row filter applies (DataFusion's display of a pushed-down filter);
//! EXPLAIN ANALYZE shows the scan's `pushdown_rows_pruned` and
//! `pushdown_rows_matched`. `SET tsjoin.late_materialize = false` turns the
//! rule off.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
//! use datafusion_tsjoin::TsJoinContextExt;
//! let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
//! // A file this small would keep DataFusion's plan (`tsjoin.small_scan_rows`).
//! ctx.tsjoin_sql("SET tsjoin.small_scan_rows = 0").await?.collect().await?;
//! let dir = std::env::temp_dir().join(format!("lm-doc-{}", std::process::id()));
//! // `b` is a permutation of 0..999: `b > 990` keeps 9 rows of 1000.
//! ctx.tsjoin_sql(&format!("COPY (SELECT v AS a, (v * 7919) % 1000 AS b, v * 3 AS c FROM \
//!     generate_series(1, 1000) AS g(v)) TO '{}/a.parquet'", dir.display())).await?.collect().await?;
//! ctx.register_parquet("t", dir.to_str().unwrap(), Default::default()).await?;
//! let plan = ctx.tsjoin_sql("EXPLAIN SELECT * FROM t WHERE b > 990").await?.collect().await?;
//! let shown = datafusion::arrow::util::pretty::pretty_format_batches(&plan)?.to_string();
//! assert!(!shown.contains("FilterExec"), "{shown}");
//! let n = ctx.tsjoin_sql("SELECT * FROM t WHERE b > 990").await?.count().await?;
//! assert_eq!(n, 9);
//! # std::fs::remove_dir_all(dir).ok(); Ok(()) }
//! ```

use crate::config::rule_enabled;
use crate::join_filter::{join_filter_ids, join_filters_in};
use crate::newest_first::NewestFirstTopKExec;
use crate::prune_files::passing_share;
use crate::small_scan::is_small;
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{
    Transformed, TransformedResult, TreeNode, TreeNodeRecursion,
};

use datafusion::datasource::physical_plan::parquet::can_expr_be_pushed_down_with_schemas;
use datafusion::datasource::physical_plan::{
    FileScanConfig, FileScanConfigBuilder, FileSource, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::intervals::utils::check_support;
use datafusion::physical_expr::utils::{collect_columns, conjunction, split_conjunction};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_optimizer::projection_pushdown::ProjectionPushdown;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, ExecutionPlan, Partitioning, PhysicalExpr,
    ReplaceChildrenOptions,
};
use std::collections::HashSet;
use std::sync::Arc;

/// The least share of a scan's decoded bytes that the columns only the
/// filter's output needs must have for the row filter to be turned on.
/// Below it, decoding the predicate columns apart from the rest costs more
/// than skipping the rest saves (see benches/README.md, TSBS section).
pub const MIN_DEFERRED_SHARE: f64 = 0.3;

/// The largest estimated share of rows passing the predicate for which the
/// row filter is turned on. Rows that pass scattered over the file (a
/// predicate on a column the file is not ordered by) leave almost every
/// page with some row to decode, so the deferred columns are decoded nearly
/// in full anyway and the row filter's separate predicate pass is pure cost:
/// TPC-H SF 1 Q15 (`l_shipdate` in one quarter, about 4% of lineitem) and
/// Q12 (one year of `l_receiptdate`) ran 1.35x slower with it, and TSBS IoT's
/// `fleet = 'South' AND name IS NOT NULL` (25%) 1.2-1.9x. It pays where
/// almost nothing passes (TSBS blog-q1: 2.8x faster); see benches/README.md.
pub const MAX_SELECTIVITY: f64 = 0.01;

/// Turns on the Parquet row filter of each filtered scan that reads columns
/// its predicate does not use, and removes the `FilterExec` it replaces
/// (see the module docs). Runs after tsjoin's other scan rules, right before
/// DataFusion's `SanityCheckPlan`; `SET tsjoin.late_materialize = false`
/// turns it off, and it does nothing when the session's
/// `datafusion.execution.parquet.pushdown_filters` already pushes every
/// filter.
///
/// ```
/// use datafusion::physical_optimizer::PhysicalOptimizerRule;
/// use datafusion_tsjoin::late_materialize::LateMaterializeRule;
/// assert_eq!(LateMaterializeRule.name(), "LateMaterializeRule");
/// ```
#[derive(Debug, Default)]
pub struct LateMaterializeRule;

impl PhysicalOptimizerRule for LateMaterializeRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !rule_enabled(config, |o| o.late_materialize)
            || config.execution.parquet.pushdown_filters
        {
            return Ok(plan);
        }
        // A scan holding a hash join's filter is `crate::join_filter`'s: its
        // `LipFilterExec` applies them in adaptive order (in the row filter
        // they would run in written order, which measured slower).
        let joins = join_filter_ids(&plan)?;
        plan.transform_down(|node| {
            if node.downcast_ref::<NewestFirstTopKExec>().is_some() {
                return Ok(Transformed::new(node, false, TreeNodeRecursion::Jump));
            }
            let Some(filter) = node.downcast_ref::<FilterExec>() else {
                return Ok(Transformed::no(node));
            };
            match late_materialize(filter, &joins, config)? {
                Some(new) => Ok(Transformed::yes(new)),
                None => Ok(Transformed::no(node)),
            }
        })
        .data()
    }

    fn name(&self) -> &str {
        "LateMaterializeRule"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// A filtered Parquet scan as the rule finds it: the round-robin
/// repartitions between filter and scan (outermost first), the scan, its
/// configuration and source, and per scan output column the table column it
/// reads.
struct Scan<'a> {
    between: Vec<&'a Arc<dyn ExecutionPlan>>,
    config: &'a FileScanConfig,
    source: &'a ParquetSource,
    columns: Vec<usize>,
}

/// `input` as a [`Scan`], when it is a Parquet scan (under round-robin
/// repartitions only) whose projection is plain columns, without a limit
/// and not yet filtering rows itself.
fn scan(input: &Arc<dyn ExecutionPlan>) -> Option<Scan<'_>> {
    let mut between = vec![];
    let mut plan = input;
    while let Some(r) = plan.downcast_ref::<RepartitionExec>()
        && matches!(r.partitioning(), Partitioning::RoundRobinBatch(_))
    {
        between.push(plan);
        plan = r.input();
    }
    let (config, source) = plan
        .downcast_ref::<DataSourceExec>()?
        .downcast_to_file_source::<ParquetSource>()?;
    // A limit under a filter counts rows before the filter: the row filter
    // would count them after.
    if config.limit.is_some() || source.table_parquet_options().global.pushdown_filters {
        return None;
    }
    let table_width = source.table_schema().table_schema().fields().len();
    let columns = match source.projection() {
        None => (0..table_width).collect(),
        Some(p) => p
            .iter()
            .map(|e| e.expr.downcast_ref::<Column>().map(Column::index))
            .collect::<Option<Vec<_>>>()?,
    };
    Some(Scan {
        between,
        config,
        source,
        columns,
    })
}

/// `expr` over the scan's output rewritten over its table schema.
fn to_table(
    expr: &Arc<dyn PhysicalExpr>,
    scan: &Scan,
) -> Result<Option<Arc<dyn PhysicalExpr>>> {
    let table = Arc::clone(scan.source.table_schema().table_schema());
    let mut ok = true;
    let out = Arc::clone(expr)
        .transform(|e| {
            let Some(c) = e.downcast_ref::<Column>() else {
                return Ok(Transformed::no(e));
            };
            let Some(&index) = scan.columns.get(c.index()) else {
                ok = false;
                return Ok(Transformed::no(e));
            };
            let name = table.field(index).name();
            Ok(Transformed::yes(Arc::new(Column::new(name, index)) as _))
        })
        .data()?;
    Ok(ok.then_some(out))
}

/// The plan that replaces `filter`, or `None` when its scan keeps
/// decoding every column (see the module docs for when).
fn late_materialize(
    filter: &FilterExec,
    joins: &HashSet<u64>,
    config: &ConfigOptions,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if filter.fetch().is_some() {
        return Ok(None);
    }
    let Some(scan) = scan(filter.input()) else {
        return Ok(None);
    };
    if is_small(scan.config, scan.source, config) {
        return Ok(None);
    }
    let existing = scan.source.filter();
    if existing
        .as_ref()
        .is_some_and(|p| !join_filters_in(p, joins).is_empty())
    {
        return Ok(None);
    }
    // Each conjunct goes to the row filter if the Parquet reader can
    // evaluate it there; the rest stays in a `FilterExec`.
    let file_schema = scan.source.table_schema().file_schema();
    let (mut pushed, mut residual) = (vec![], vec![]);
    for conjunct in split_conjunction(filter.predicate()) {
        match to_table(conjunct, &scan)? {
            Some(t) if can_expr_be_pushed_down_with_schemas(&t, file_schema) => {
                pushed.push(t)
            }
            _ => residual.push(Arc::clone(conjunct)),
        }
    }
    if pushed.is_empty() {
        return Ok(None);
    }
    let outputs: Vec<usize> = match filter.projection() {
        Some(p) => p.iter().map(|&i| scan.columns[i]).collect(),
        None => scan.columns.clone(),
    };
    let residual_columns = residual
        .iter()
        .flat_map(collect_columns)
        .map(|c| scan.columns[c.index()]);
    let needed: HashSet<usize> =
        outputs.iter().copied().chain(residual_columns).collect();
    let predicate_columns: HashSet<usize> = pushed
        .iter()
        .flat_map(collect_columns)
        .map(|c| c.index())
        .collect();
    if !worth_it(&scan, &predicate_columns, &needed)
        || !selective(&scan, &pushed).is_some_and(|s| s <= MAX_SELECTIVITY)
    {
        return Ok(None);
    }
    let new_scan = with_row_filter(&scan, existing, pushed);
    let input = rebuild(&scan.between, new_scan)?;
    let out = match (conjunction_opt(residual), filter.projection()) {
        (Some(rest), projection) => Arc::new(
            FilterExecBuilder::new(rest, input)
                .apply_projection(projection.as_ref().map(|p| p.to_vec()))?
                .with_default_selectivity(filter.default_selectivity())
                .build()?,
        ) as Arc<dyn ExecutionPlan>,
        (None, Some(p)) => {
            let schema = input.schema();
            let exprs = p.iter().map(|&i| {
                ProjectionExpr::new(
                    Arc::new(Column::new(schema.field(i).name(), i)),
                    schema.field(i).name().clone(),
                )
            });
            let projection = Arc::new(ProjectionExec::try_new(exprs, input)?);
            // Narrow the scan to the projected columns: the columns only
            // the predicate reads are decoded by the row filter alone.
            ProjectionPushdown::new().optimize(projection, config)?
        }
        (None, None) => input,
    };
    Ok(Some(out))
}

/// `exprs` joined by AND, `None` when empty.
fn conjunction_opt(exprs: Vec<Arc<dyn PhysicalExpr>>) -> Option<Arc<dyn PhysicalExpr>> {
    (!exprs.is_empty()).then(|| conjunction(exprs))
}

/// Whether deferring the columns in `needed` but not in `predicate` pays:
/// there are some, and they hold at least [`MIN_DEFERRED_SHARE`] of the
/// bytes of all the columns the scan decodes.
fn worth_it(scan: &Scan, predicate: &HashSet<usize>, needed: &HashSet<usize>) -> bool {
    let deferred: Vec<usize> = needed
        .iter()
        .copied()
        .filter(|c| !predicate.contains(c))
        .collect();
    if deferred.is_empty() {
        return false;
    }
    let size = |columns: &mut dyn Iterator<Item = usize>| -> f64 {
        columns.map(|c| column_bytes(scan, c)).sum()
    };
    let deferred_bytes = size(&mut deferred.iter().copied());
    let predicate_bytes = size(&mut predicate.iter().copied());
    deferred_bytes >= MIN_DEFERRED_SHARE * (deferred_bytes + predicate_bytes)
}

/// The estimated share of rows of the files `pushed` (over the table
/// schema) does not prune that pass it: per file, DataFusion's interval
/// analysis over the file's column statistics, weighted by the file's rows;
/// files it rules out (share 0) are left out, as the scan prunes them.
/// Conjuncts the analysis cannot bound and conjuncts on the files' sort
/// columns count as passing every row. `None` when no file has statistics.
fn selective(scan: &Scan, pushed: &[Arc<dyn PhysicalExpr>]) -> Option<f64> {
    let table = Arc::clone(scan.source.table_schema().table_schema());
    let sorted: HashSet<usize> = scan
        .config
        .output_ordering
        .iter()
        .filter_map(|o| o.first().expr.downcast_ref::<Column>().map(Column::index))
        .collect();
    let bounded: Vec<Arc<dyn PhysicalExpr>> = pushed
        .iter()
        .filter(|e| check_support(e, &table))
        .filter(|e| {
            !collect_columns(e)
                .iter()
                .all(|c| sorted.contains(&c.index()))
        })
        .cloned()
        .collect();
    if bounded.is_empty() {
        return Some(1.0);
    }
    let predicate = conjunction(bounded);
    let (mut passing, mut rows) = (0.0, 0.0);
    for file in scan.config.file_groups.iter().flat_map(|g| g.files()) {
        let stats = file.statistics.as_deref()?;
        let n = match stats.num_rows {
            Precision::Exact(n) | Precision::Inexact(n) => n as f64,
            Precision::Absent => return None,
        };
        if stats.column_statistics.len() != table.fields().len() {
            return None;
        }
        let share = passing_share(&predicate, &table, &stats.column_statistics);
        if share > 0.0 {
            passing += share * n;
            rows += n;
        }
    }
    Some(if rows > 0.0 { passing / rows } else { 0.0 })
}

/// The decoded bytes of table column `column` over the scan's files, from
/// their statistics; where a file has none, 8 bytes a row (a primitive's
/// width where the type has one).
fn column_bytes(scan: &Scan, column: usize) -> f64 {
    let table = scan.source.table_schema().table_schema();
    let width = table
        .fields()
        .get(column)
        .and_then(|f| f.data_type().primitive_width())
        .unwrap_or(8) as f64;
    scan.config
        .file_groups
        .iter()
        .flat_map(|g| g.files())
        .map(|file| {
            let stats = file.statistics.as_deref();
            let known = stats
                .and_then(|s| s.column_statistics.get(column))
                .and_then(|c| match c.byte_size {
                    Precision::Exact(n) | Precision::Inexact(n) => Some(n as f64),
                    Precision::Absent => None,
                });
            let rows = match stats.map(|s| s.num_rows) {
                Some(Precision::Exact(n) | Precision::Inexact(n)) => n as f64,
                _ => 1.0,
            };
            known.unwrap_or(width * rows)
        })
        .sum()
}

/// The scan with `pushed` added to its predicate (each conjunct once) and
/// its row filter on.
fn with_row_filter(
    scan: &Scan,
    existing: Option<Arc<dyn PhysicalExpr>>,
    pushed: Vec<Arc<dyn PhysicalExpr>>,
) -> Arc<dyn ExecutionPlan> {
    let mut conjuncts: Vec<Arc<dyn PhysicalExpr>> = existing
        .as_ref()
        .map(|p| split_conjunction(p).into_iter().cloned().collect())
        .unwrap_or_default();
    for p in pushed {
        if !conjuncts.iter().any(|c| c.as_ref() == p.as_ref()) {
            conjuncts.push(p);
        }
    }
    let source = scan
        .source
        .with_predicate(conjunction(conjuncts))
        .with_pushdown_filters(true)
        .with_reorder_filters(true);
    let config = FileScanConfigBuilder::from(scan.config.clone())
        .with_source(Arc::new(source))
        .build();
    DataSourceExec::from_data_source(config)
}

/// `leaf` under copies of the plans in `between` (outermost first).
fn rebuild(
    between: &[&Arc<dyn ExecutionPlan>],
    leaf: Arc<dyn ExecutionPlan>,
) -> Result<Arc<dyn ExecutionPlan>> {
    between.iter().rev().try_fold(leaf, |child, parent| {
        Arc::clone(parent).replace_children(
            vec![child],
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )
    })
}
