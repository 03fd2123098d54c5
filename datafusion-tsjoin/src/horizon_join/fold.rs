//! [`OffsetFold`] and [`HorizonFoldRule`]: a HORIZON JOIN grouped by
//! `h.offset` alone aggregates inside the operator, one set of DataFusion
//! accumulators per offset, instead of emitting every (left row, offset)
//! pair into a hash aggregate.
//!
//! ```text
//! AggregateExec(Partial, gby=[offset])        HorizonJoinExec(fold=[avg(...)] by offset)
//!   [RepartitionExec: round robin]      ⇒       (emits the partial aggregate's rows:
//!   [ProjectionExec: columns only]
//!     HorizonJoinExec                             one per offset and partition)
//! ```
//!
//! Every pair of one offset belongs to the same group, so the operator
//! hands each offset's pairs to that offset's accumulators with
//! `update_batch` (see [`super::folding`]: one-sided parts of the
//! arguments computed once per row, the left rows folded in key order): no
//! group ids, no pair batches through a repartition. The accumulators are DataFusion's own (any aggregate
//! without DISTINCT, ORDER BY or FILTER), so the answers are the
//! aggregate's; the final aggregate above merges the partitions' states as
//! before. `SET tsjoin.horizon_fold = false` keeps the pairs.

use super::exec::HorizonJoinExec;
use crate::config::rule_enabled;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::Partitioning;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use std::sync::Arc;

/// The aggregates a [`HorizonJoinExec`] folds per offset, and what it
/// emits: the replaced aggregate's rows (the offset, then each aggregate's
/// partial state when `partial`, its value otherwise).
///
/// ```ignore
/// let fold = OffsetFold { aggr: agg.aggr_expr().to_vec(), partial: true,
///                         pairs: pair_schema, key: 2, schema: agg.schema() };
/// ```
#[derive(Debug, Clone)]
pub struct OffsetFold {
    /// The aggregates, over `pairs`.
    pub aggr: Vec<Arc<AggregateFunctionExpr>>,
    /// States (a partial aggregate's output) rather than values.
    pub partial: bool,
    /// The schema of the pairs the aggregates read (the join's projected
    /// output, named as the aggregate's input).
    pub pairs: SchemaRef,
    /// Where `offset`, the group key, is among the pairs' columns.
    pub key: usize,
    /// The output: the offset column, then the states or values.
    pub schema: SchemaRef,
}

/// Replaces a partial (or single) aggregate grouped by `h.offset` alone
/// over a HORIZON JOIN with the join folding per offset (see the module
/// docs). Placed before tsjoin's inline GROUP BY rule; not on a cluster
/// (`tsjoin.distributed`), where the pairs' plan stays as it is.
///
/// ```
/// use datafusion_tsjoin::horizon_join::HorizonFoldRule;
/// use datafusion::physical_optimizer::PhysicalOptimizerRule;
/// assert_eq!(HorizonFoldRule.name(), "HorizonFoldRule");
/// ```
#[derive(Debug, Default)]
pub struct HorizonFoldRule;

impl PhysicalOptimizerRule for HorizonFoldRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !rule_enabled(config, |o| o.horizon_fold && !o.distributed) {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            Ok(match fold(&node)? {
                Some(new) => Transformed::yes(new),
                None => Transformed::no(node),
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "HorizonFoldRule"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The folding join for `node`, when it is an aggregate the fold can take.
fn fold(node: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(agg) = node.downcast_ref::<AggregateExec>() else {
        return Ok(None);
    };
    let partial = match agg.mode() {
        AggregateMode::Partial => true,
        AggregateMode::Single => false,
        _ => return Ok(None),
    };
    let gby = agg.group_expr();
    if gby.expr().len() != 1
        || gby.has_grouping_set()
        || agg.limit_options().is_some()
        || agg.filter_expr().iter().any(Option::is_some)
        || agg
            .aggr_expr()
            .iter()
            .any(|a| a.is_distinct() || !a.order_bys().is_empty())
    {
        return Ok(None);
    }
    let Some(key) = gby.expr()[0].0.downcast_ref::<Column>() else {
        return Ok(None);
    };
    // The aggregate's input: the join, or a projection of its columns,
    // maybe under a round-robin repartition that spread the pairs over the
    // aggregate's tasks (folded, there are no pairs left to spread).
    let input = agg.input();
    let below = match input.downcast_ref::<RepartitionExec>() {
        Some(r) if matches!(r.partitioning(), Partitioning::RoundRobinBatch(_)) => {
            r.input()
        }
        _ => input,
    };
    let (join, columns) = match below.downcast_ref::<ProjectionExec>() {
        Some(p) => {
            let columns: Option<Vec<usize>> = p
                .expr()
                .iter()
                .map(|e| e.expr.downcast_ref::<Column>().map(Column::index))
                .collect();
            let Some(columns) = columns else {
                return Ok(None);
            };
            (p.input(), Some(columns))
        }
        None => (below, None),
    };
    let Some(join) = join.downcast_ref::<HorizonJoinExec>() else {
        return Ok(None);
    };
    if join.fold().is_some() {
        return Ok(None);
    }
    let join = join.with_projection(columns)?;
    if join.offset_column() != Some(key.index()) {
        return Ok(None);
    }
    let fold = OffsetFold {
        aggr: agg.aggr_expr().to_vec(),
        partial,
        pairs: input.schema(),
        key: key.index(),
        schema: agg.schema(),
    };
    Ok(Some(Arc::new(join.with_fold(Some(Arc::new(fold)))?)))
}
