//! [`FactProbeRule`]: keeps the fact table on the probe side of a star
//! join's hash joins, so that every dimension's join filter reaches the
//! fact scan.

use crate::config::rule_enabled;
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::datasource::source::DataSourceExec;
use datafusion::logical_expr::JoinType;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use std::sync::Arc;

/// How many times more rows the largest table under a join's build side
/// must have than the largest under its probe side for the join to count
/// as building over the fact table.
const FACT_RATIO: usize = 4;

/// DataFusion's `JoinSelection` builds each hash join over its smaller
/// input by estimated rows. In a star join the fact side, filtered by the
/// joins below, can be estimated smaller than a dimension, and then the
/// fact rows become the build side: that dimension's join filter goes to
/// the dimension's scan instead of the fact's, so no fact row is dropped by
/// it before the probes (SSB Q4.2's `part`). This rule swaps such a join
/// back (inner joins, and semi joins that keep the fact rows), when the dimension side is estimated small
/// enough to build on (DataFusion's single-partition threshold in rows,
/// `datafusion.optimizer.hash_join_single_partition_threshold_rows`). It
/// runs right after `JoinSelection`, with `tsjoin.join_filters`.
///
/// ```
/// use datafusion::physical_optimizer::PhysicalOptimizerRule;
/// assert_eq!(datafusion_tsjoin::join_filter::FactProbeRule.name(), "FactProbeRule");
/// ```
#[derive(Debug, Default)]
pub struct FactProbeRule;

impl PhysicalOptimizerRule for FactProbeRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !rule_enabled(config, |o| o.join_filters && !o.distributed) {
            return Ok(plan);
        }
        let max_build_rows = config.optimizer.hash_join_single_partition_threshold_rows;
        plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            if !matches!(join.join_type(), JoinType::Inner | JoinType::LeftSemi)
                || !join.dynamic_expressions_produced().is_empty()
                || largest_table(join.left())
                    < FACT_RATIO * largest_table(join.right()).max(1)
                || !estimated_at_most(join.right(), max_build_rows)
            {
                return Ok(Transformed::no(node));
            }
            Ok(Transformed::yes(join.swap_inputs(*join.partition_mode())?))
        })
        .data()
    }

    fn name(&self) -> &str {
        "FactProbeRule"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Rows of the largest file scan under `plan` (by statistics; 0 unknown).
fn largest_table(plan: &Arc<dyn ExecutionPlan>) -> usize {
    let own = if plan.downcast_ref::<DataSourceExec>().is_some() {
        rows(plan).unwrap_or(0)
    } else {
        0
    };
    plan.children()
        .into_iter()
        .map(largest_table)
        .fold(own, usize::max)
}

/// Whether `plan`'s estimated output is known and at most `limit` rows.
fn estimated_at_most(plan: &Arc<dyn ExecutionPlan>, limit: usize) -> bool {
    rows(plan).is_some_and(|n| n <= limit)
}

fn rows(plan: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    let stats = StatisticsContext::new()
        .compute(plan.as_ref(), &StatisticsArgs::new())
        .ok()?;
    match stats.num_rows {
        Precision::Exact(n) | Precision::Inexact(n) => Some(n),
        Precision::Absent => None,
    }
}
