//! [`JoinFilterRule`]: places a [`LipFilterExec`] above every file scan
//! that holds a hash join's dynamic filter.

use super::exec::{
    LipFilterExec, MAX_MAX_BITS, MIN_MAX_BITS, ROWS_PER_BIT, UNKNOWN_ROWS_MAX_BITS,
};
use crate::config::{TsJoinOptions, rule_enabled};
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{
    Transformed, TransformedResult, TreeNode, TreeNodeRecursion,
};
use datafusion::datasource::physical_plan::{FileScanConfig, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};
use std::collections::HashSet;
use std::sync::Arc;

/// Puts a [`LipFilterExec`] directly above each file scan into which
/// DataFusion pushed hash-join dynamic filters, so that every join the scan
/// feeds drops its non-matching rows there, before any hash probe. Runs
/// after DataFusion's post-optimisation filter pushdown (which places those
/// filters). Off with `SET tsjoin.join_filters = false`, on a cluster
/// (`tsjoin.distributed`: a join and the scan it filters may run in other
/// processes) and for Parquet scans that evaluate their predicate row by
/// row already (`datafusion.execution.parquet.pushdown_filters`).
///
/// ```
/// use datafusion::physical_optimizer::PhysicalOptimizerRule;
/// assert_eq!(datafusion_tsjoin::join_filter::JoinFilterRule.name(), "JoinFilterRule");
/// ```
#[derive(Debug, Default)]
pub struct JoinFilterRule;

impl PhysicalOptimizerRule for JoinFilterRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !rule_enabled(config, |o| o.join_filters && !o.distributed) {
            return Ok(plan);
        }
        let joins = join_filter_ids(&plan)?;
        if joins.is_empty() {
            return Ok(plan);
        }
        let fixed_bits = config
            .extensions
            .get::<TsJoinOptions>()
            .map_or(0, |o| o.join_filter_max_bits);
        plan.transform_up(|node| {
            let Some(filters) = scan_join_filters(&node, &joins) else {
                return Ok(Transformed::no(node));
            };
            let max_bits = match fixed_bits {
                0 => max_bits(&node),
                bits => bits,
            };
            Ok(Transformed::yes(
                Arc::new(LipFilterExec::try_new(node, filters, max_bits)?) as _,
            ))
        })
        .data()
    }

    fn name(&self) -> &str {
        "JoinFilterRule"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The ids of the hash joins' dynamic filters in `plan`.
pub(crate) fn join_filter_ids(plan: &Arc<dyn ExecutionPlan>) -> Result<HashSet<u64>> {
    let mut ids = HashSet::new();
    plan.apply(|node| {
        if let Some(join) = node.downcast_ref::<HashJoinExec>() {
            ids.extend(
                join.dynamic_expressions_produced()
                    .iter()
                    .filter_map(|f| f.expression_id()),
            );
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(ids)
}

/// The join filters (dynamic filters whose id is in `joins`) in the
/// predicate of `node`, a file scan that does not apply its predicate row
/// by row; `None` when there are none.
fn scan_join_filters(
    node: &Arc<dyn ExecutionPlan>,
    joins: &HashSet<u64>,
) -> Option<Vec<Arc<dyn PhysicalExpr>>> {
    let scan = node.downcast_ref::<DataSourceExec>()?;
    let config = scan.data_source().downcast_ref::<FileScanConfig>()?;
    let source = config.file_source();
    if source
        .downcast_ref::<ParquetSource>()
        .is_some_and(|p| p.table_parquet_options().global.pushdown_filters)
    {
        return None;
    }
    let filters = join_filters_in(&source.filter()?, joins);
    (!filters.is_empty()).then_some(filters)
}

/// The dynamic filters in `predicate` whose id is in `joins` (the hash
/// joins' filters, [`join_filter_ids`]), each once.
pub(crate) fn join_filters_in(
    predicate: &Arc<dyn PhysicalExpr>,
    joins: &HashSet<u64>,
) -> Vec<Arc<dyn PhysicalExpr>> {
    let mut seen = HashSet::new();
    let mut filters = Vec::new();
    // The closure never fails.
    let _ = predicate.apply(|e| {
        if e.downcast_ref::<DynamicFilterPhysicalExpr>().is_some()
            && let Some(id) = e.expression_id()
            && joins.contains(&id)
            && seen.insert(id)
        {
            filters.push(Arc::clone(e));
            return Ok(TreeNodeRecursion::Jump);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    filters
}

/// The widest key range worth compiling into bits over `scan`: evaluating
/// the join's predicate once per key value (serially) should cost a small
/// share of evaluating it once per scanned row (in parallel).
fn max_bits(scan: &Arc<dyn ExecutionPlan>) -> u64 {
    let rows = StatisticsContext::new()
        .compute(scan.as_ref(), &StatisticsArgs::new())
        .ok()
        .and_then(|s| match s.num_rows {
            Precision::Exact(n) | Precision::Inexact(n) => Some(n as u64),
            Precision::Absent => None,
        });
    rows.map_or(UNKNOWN_ROWS_MAX_BITS, |rows| {
        (rows / ROWS_PER_BIT).clamp(MIN_MAX_BITS, MAX_MAX_BITS)
    })
}
