//! `ARRAY[...]` of constants as a list literal, for
//! `approx_percentile(x, ARRAY[0.5, 0.9, 0.99])`.
//!
//! DataFusion plans SQL array literals only through an [`ExprPlanner`]; its
//! own (`make_array`) comes with the `nested_expressions` feature, which
//! tsjoin does not build. [`ConstantArrayPlanner`] plans an array whose
//! elements are all constants to one `ScalarValue::List` literal (the
//! elements cast to their common type), which is what a constant argument
//! such as a percentile list needs. It runs after any other planner, so a
//! DataFusion built with `nested_expressions` keeps its own array planning.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DFSchema, Result, ScalarValue, plan_err};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult};
use datafusion::logical_expr::type_coercion::binary::type_union_resolution;
use datafusion::logical_expr::{Expr, lit};

/// Plans `ARRAY[c1, c2, ...]` of constants to a list literal.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion_tsjoin::{TsJoinContextExt, tsjoin_context};
/// let ctx = tsjoin_context(Default::default());
/// let batches = ctx.tsjoin_sql("SELECT approx_percentile(v, ARRAY[0.5, 1.0]) AS ps \
///     FROM (VALUES (1), (2), (3), (100)) t(v)").await?.collect().await?;
/// datafusion::assert_batches_eq!([
///     "+--------------+",
///     "| ps           |",
///     "+--------------+",
///     "| [2.0, 103.0] |",
///     "+--------------+",
/// ], &batches);
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct ConstantArrayPlanner;

impl ExprPlanner for ConstantArrayPlanner {
    fn plan_array_literal(
        &self,
        exprs: Vec<Expr>,
        _schema: &DFSchema,
    ) -> Result<PlannerResult<Vec<Expr>>> {
        let mut values = Vec::with_capacity(exprs.len());
        for e in &exprs {
            match constant(e) {
                Some(v) => values.push(v),
                None => {
                    return plan_err!(
                        "ARRAY[...] elements must be constants (tsjoin plans arrays of \
                         constants only), got {e}"
                    );
                }
            }
        }
        let types: Vec<_> = values.iter().map(ScalarValue::data_type).collect();
        let common = if types.is_empty() {
            Some(DataType::Null)
        } else {
            type_union_resolution(&types)
        };
        let Some(common) = common else {
            return plan_err!("ARRAY[...] elements have no common type: {types:?}");
        };
        let values = values
            .iter()
            .map(|v| v.cast_to(&common))
            .collect::<Result<Vec<_>>>()?;
        let list = ScalarValue::new_list_nullable(&values, &common);
        Ok(PlannerResult::Planned(lit(ScalarValue::List(list))))
    }
}

/// The value of a constant element: a literal, possibly negated or cast.
fn constant(e: &Expr) -> Option<ScalarValue> {
    match e {
        Expr::Literal(v, _) => Some(v.clone()),
        Expr::Negative(inner) => constant(inner)?.arithmetic_negate().ok(),
        Expr::Cast(c) => constant(&c.expr)?.cast_to(c.field.data_type()).ok(),
        _ => None,
    }
}
