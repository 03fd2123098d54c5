//! [`LatestByRule`]: finds `row_number() … = 1` filters over a window and
//! puts a final over a partial [`LatestByExec`] in the window's place.

use super::exec::{LatestByExec, recompute};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Result, ScalarValue};
use datafusion::functions_window::row_number::RowNumber;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
use datafusion::physical_expr::split_conjunction;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::windows::{
    BoundedWindowAggExec, StandardWindowExpr, WindowAggExec, WindowExpr, WindowUDFExpr,
};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, PhysicalExpr};
use std::sync::Arc;

/// Replaces
///
/// ```text
/// FilterExec: rn = 1 [AND …]                     FilterExec: rn = 1 [AND …]
///   [ProjectionExec]                               [ProjectionExec]
///     BoundedWindowAggExec: row_number()     ⇒       LatestByExec: mode=Final
///       PARTITION BY k ORDER BY o                      LatestByExec: mode=Partial
///       <input>                                          <input>
/// ```
///
/// where `rn` is the window's only expression, `row_number()` (identified
/// by its type), and the filter keeps only its first row per partition
/// (`rn = 1`, `rn <= 1` or `rn < 2`, either side, as one conjunct of the
/// predicate). The filter stays: the final operator's `row_number` is 1 on
/// every row, and other conjuncts still apply. It runs before DataFusion's
/// `EnforceDistribution`, which then repartitions between the two
/// operators by the keys, as for a partial and a final aggregate, and
/// sorts nothing. `SET tsjoin.latest_by = false` turns it off.
///
/// ```
/// use datafusion::physical_optimizer::PhysicalOptimizerRule;
/// assert_eq!(datafusion_tsjoin::latest_by::LatestByRule.name(), "LatestByRule");
/// ```
#[derive(Debug, Default)]
pub struct LatestByRule;

impl PhysicalOptimizerRule for LatestByRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !crate::config::rule_enabled(config, |o| o.latest_by) {
            return Ok(plan);
        }
        plan.transform_up(|node| match rewrite(&node)? {
            Some(new) => Ok(Transformed::yes(new)),
            None => Ok(Transformed::no(node)),
        })
        .data()
    }

    fn name(&self) -> &str {
        "LatestByRule"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `node` with its window replaced, when it is a first-row filter over a
/// `row_number` window (see [`LatestByRule`]).
fn rewrite(node: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(filter) = node.downcast_ref::<FilterExec>() else {
        return Ok(None);
    };
    let (projection, window) = match filter.input().downcast_ref::<ProjectionExec>() {
        Some(p) => (Some(filter.input()), p.input()),
        None => (None, filter.input()),
    };
    let Some((exprs, input)) = window_parts(window) else {
        return Ok(None);
    };
    let [expr] = exprs else {
        return Ok(None);
    };
    let rn = input.schema().fields().len();
    // (A window over no columns: the kept rows would be batches without
    // columns, which arrow's take and interleave cannot build.)
    if rn == 0
        || !is_row_number(expr)
        || window.schema().fields().len() != rn + 1
        || input.boundedness().is_unbounded()
    {
        return Ok(None);
    }
    // The filter's column that is the window's `row_number`.
    let rn_in_filter = |c: &Column| match projection {
        Some(p) => p
            .downcast_ref::<ProjectionExec>()
            .and_then(|p| p.expr().get(c.index()))
            .and_then(|e| e.expr.downcast_ref::<Column>())
            .is_some_and(|c| c.index() == rn),
        None => c.index() == rn,
    };
    let first_only = split_conjunction(filter.predicate())
        .into_iter()
        .any(|c| keeps_first_row_only(c, &rn_in_filter));
    if !first_only {
        return Ok(None);
    }
    let partition_by = expr.partition_by().to_vec();
    let order_by = expr.order_by().to_vec();
    let partial = Arc::new(LatestByExec::partial(
        Arc::clone(input),
        partition_by.clone(),
        order_by.clone(),
    ));
    let Some(field) = window.schema().fields().get(rn).cloned() else {
        return Ok(None);
    };
    let mut replaced: Arc<dyn ExecutionPlan> = Arc::new(LatestByExec::final_rows(
        partial,
        partition_by,
        order_by,
        field,
    ));
    if let Some(p) = projection {
        replaced = Arc::clone(p).replace_children(vec![replaced], recompute())?;
    }
    Ok(Some(
        Arc::clone(node).replace_children(vec![replaced], recompute())?,
    ))
}

/// A window operator's expressions and its input.
type WindowParts<'a> = (&'a [Arc<dyn WindowExpr>], &'a Arc<dyn ExecutionPlan>);

/// A window operator's expressions and input.
fn window_parts(plan: &Arc<dyn ExecutionPlan>) -> Option<WindowParts<'_>> {
    if let Some(w) = plan.downcast_ref::<BoundedWindowAggExec>() {
        return Some((w.window_expr(), w.input()));
    }
    let w = plan.downcast_ref::<WindowAggExec>()?;
    Some((w.window_expr(), w.input()))
}

/// Whether `expr` is `row_number()` (whatever its frame, which
/// `row_number` ignores).
fn is_row_number(expr: &Arc<dyn WindowExpr>) -> bool {
    expr.as_any()
        .downcast_ref::<StandardWindowExpr>()
        .and_then(|e| {
            e.get_standard_func_expr()
                .as_any()
                .downcast_ref::<WindowUDFExpr>()
        })
        .is_some_and(|e| e.fun().inner().is::<RowNumber>())
}

/// Whether the conjunct `c` holds only for `row_number` 1: `rn = 1`,
/// `rn <= 1` or `rn < 2`, the column on either side.
fn keeps_first_row_only(
    c: &Arc<dyn PhysicalExpr>,
    is_rn: &impl Fn(&Column) -> bool,
) -> bool {
    let Some(b) = c.downcast_ref::<BinaryExpr>() else {
        return false;
    };
    let (op, value) = match (
        b.left().downcast_ref::<Column>(),
        b.right().downcast_ref::<Literal>(),
        b.left().downcast_ref::<Literal>(),
        b.right().downcast_ref::<Column>(),
    ) {
        (Some(col), Some(lit), _, _) if is_rn(col) => (*b.op(), lit.value()),
        (_, _, Some(lit), Some(col)) if is_rn(col) => match b.op().swap() {
            Some(op) => (op, lit.value()),
            None => return false,
        },
        _ => return false,
    };
    let Ok(ScalarValue::Int64(Some(v))) = value.cast_to(&DataType::Int64) else {
        return false;
    };
    matches!(
        (op, v),
        (Operator::Eq, 1) | (Operator::LtEq, 1) | (Operator::Lt, 2)
    )
}
