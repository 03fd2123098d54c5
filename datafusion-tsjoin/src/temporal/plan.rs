//! Plan properties shared by the temporal join operators.

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{EquivalenceProperties, Partitioning};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::{
    ExecutionPlan, ExecutionPlanProperties, PhysicalExpr, PlanProperties,
};
use std::sync::Arc;

/// The properties of a join that emits rows per left row, in the left's
/// order and partitions: the left's orderings over the output `schema`
/// (left columns first), its partition count (a hash partitioning no
/// longer describes the output), incremental and bounded.
pub(crate) fn left_preserving_properties(
    left: &Arc<dyn ExecutionPlan>,
    schema: &SchemaRef,
) -> PlanProperties {
    let orderings: Vec<_> = left
        .equivalence_properties()
        .oeq_class()
        .iter()
        .cloned()
        .collect();
    let eq = EquivalenceProperties::new_with_orderings(Arc::clone(schema), orderings);
    let partitioning = match left.output_partitioning() {
        Partitioning::Hash(_, n) => Partitioning::UnknownPartitioning(*n),
        p => p.clone(),
    };
    PlanProperties::new(
        eq,
        partitioning,
        EmissionType::Incremental,
        Boundedness::Bounded,
    )
}

/// Whether `plan`'s known ordering starts with the column `ts` ascending.
pub(crate) fn ordered_by(
    plan: &Arc<dyn ExecutionPlan>,
    ts: &Arc<dyn PhysicalExpr>,
) -> bool {
    let Some(col) = ts.downcast_ref::<Column>() else {
        return false;
    };
    plan.output_ordering().is_some_and(|o| {
        let first = o.first();
        !first.options.descending
            && first
                .expr
                .downcast_ref::<Column>()
                .is_some_and(|c| c.index() == col.index())
    })
}
