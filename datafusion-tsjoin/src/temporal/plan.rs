//! Plan properties shared by the temporal join operators.

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{Result, plan_err, project_schema};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::projection::ProjectionMapping;
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

/// An embedded projection (indices into a join's full output) narrowed by
/// `projection`, indices into the operator's current output of `width`
/// columns (which `current`, if any, already narrowed). `operator` names
/// the operator in the error for an index out of range.
///
/// ```ignore
/// // Current output = full columns [1, 4]; keep its second: full column 4.
/// assert_eq!(&*combined_projection("AsofJoinExec", Some(&[1, 4]), vec![1], 2)?, &[4]);
/// ```
pub(crate) fn combined_projection(
    operator: &str,
    current: Option<&[usize]>,
    projection: Vec<usize>,
    width: usize,
) -> Result<Arc<[usize]>> {
    if let Some(bad) = projection.iter().find(|&&i| i >= width) {
        return plan_err!(
            "{operator}: projection index {bad} out of range (the output has {width} columns)"
        );
    }
    Ok(match current {
        Some(current) => projection.iter().map(|&i| current[i]).collect(),
        None => projection.into(),
    })
}

/// The schema and plan properties of a join whose full output is
/// `join_schema` with properties `full`, emitting only the columns
/// `projection` names: orderings, equivalences and partitioning carried
/// over to the columns kept.
///
/// ```ignore
/// let (schema, props) = projected_properties(&full, &join_schema, &[4, 2])?;
/// ```
pub(crate) fn projected_properties(
    full: &PlanProperties,
    join_schema: &SchemaRef,
    projection: &[usize],
) -> Result<(SchemaRef, PlanProperties)> {
    let mapping = ProjectionMapping::from_indices(projection, join_schema)?;
    let schema = project_schema(join_schema, Some(&projection.to_vec()))?;
    let partitioning = full
        .output_partitioning()
        .project(&mapping, full.equivalence_properties());
    let eq = full
        .equivalence_properties()
        .project(&mapping, Arc::clone(&schema));
    let props =
        PlanProperties::new(eq, partitioning, full.emission_type, full.boundedness);
    Ok((schema, props))
}

/// `projection=[name@i, ...]` as EXPLAIN shows an embedded projection
/// (indices into `join_schema`).
pub(crate) fn projection_text(join_schema: &SchemaRef, projection: &[usize]) -> String {
    let names: Vec<String> = projection
        .iter()
        .map(|&i| format!("{}@{i}", join_schema.field(i).name()))
        .collect();
    format!("projection=[{}]", names.join(", "))
}
