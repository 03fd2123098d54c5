//! [`PushDownWindowJoinFilter`]: moves WHERE predicates over left columns
//! below a WINDOW JOIN, so they filter left rows before the join (and reach
//! the left scan), as QuestDB's "master filter" does.

use super::logical::WindowJoinNode;
use datafusion::common::Result;
use datafusion::common::tree_node::Transformed;
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{
    Expr, Extension, Filter, LogicalPlan, LogicalPlanBuilder, Projection,
};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};
use std::sync::Arc;

/// Logical rule: `Filter(p) ← WindowJoin(l, r)` becomes
/// `WindowJoin(Filter(p_left, l), r)` for the conjuncts of `p` that read only
/// left columns. Other conjuncts stay above. Left rows are independent of
/// each other in a WINDOW JOIN, so this never changes a result.
#[derive(Debug, Default)]
pub struct PushDownWindowJoinFilter;

impl OptimizerRule for PushDownWindowJoinFilter {
    fn name(&self) -> &str {
        "push_down_window_join_filter"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Filter(filter) = &plan else {
            return Ok(Transformed::no(plan));
        };
        // The join may sit under a projection that only selects columns
        // (column pruning puts one there); push through it too.
        let (projection, join_plan) = match filter.input.as_ref() {
            LogicalPlan::Projection(p)
                if p.expr.iter().all(|e| matches!(e, Expr::Column(_))) =>
            {
                (Some(p), p.input.as_ref())
            }
            other => (None, other),
        };
        let LogicalPlan::Extension(ext) = join_plan else {
            return Ok(Transformed::no(plan));
        };
        let Some(node) = ext.node.as_any().downcast_ref::<WindowJoinNode>() else {
            return Ok(Transformed::no(plan));
        };
        if filter.predicate.contains_outer() || has_subquery(&filter.predicate) {
            return Ok(Transformed::no(plan));
        }
        let left_schema = node.left.schema();
        let (push, keep): (Vec<_>, Vec<_>) = split_conjunction(&filter.predicate)
            .into_iter()
            .cloned()
            .partition(|c| {
                let cols = c.column_refs();
                !cols.is_empty()
                    && cols.iter().all(|col| left_schema.has_column(col))
                    && !c.is_volatile()
            });
        let Some(pushed) = conjunction(push) else {
            return Ok(Transformed::no(plan));
        };
        let new_left =
            LogicalPlan::Filter(Filter::try_new(pushed, Arc::clone(&node.left))?);
        let mut new_node = LogicalPlan::Extension(Extension {
            node: Arc::new(node.with_left(new_left)?),
        });
        if let Some(p) = projection {
            new_node = LogicalPlan::Projection(Projection::try_new(
                p.expr.clone(),
                Arc::new(new_node),
            )?);
        }
        let out = match conjunction(keep) {
            Some(rest) => LogicalPlanBuilder::from(new_node).filter(rest)?.build()?,
            None => new_node,
        };
        Ok(Transformed::yes(out))
    }
}

fn has_subquery(e: &datafusion::logical_expr::Expr) -> bool {
    use datafusion::common::tree_node::TreeNode;
    use datafusion::logical_expr::Expr;
    e.exists(|e| {
        Ok(matches!(
            e,
            Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_)
        ))
    })
    .unwrap_or(true)
}
