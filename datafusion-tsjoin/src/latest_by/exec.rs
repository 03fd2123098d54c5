//! [`LatestByExec`]: the physical operator, in a partial and a final mode.

use super::metrics::LatestByMetrics;
use super::stream::{StreamArgs, latest_by_stream};
use datafusion::arrow::datatypes::{FieldRef, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalSortExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, Distribution, ExecutionPlan,
    ExecutionPlanProperties, InputDistributionRequirements, PhysicalExpr, PlanProperties,
    ReplaceChildrenOptions, SendableRecordBatchStream, apply_expression_roots,
};
use std::fmt;
use std::sync::Arc;

/// Which half of the two-phase plan a [`LatestByExec`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatestByMode {
    /// Each input partition's best row per key, whatever the partitioning:
    /// rows of the input schema.
    Partial,
    /// The best row per key over input partitioned by the keys (or one
    /// partition without keys), with the `row_number` column (always 1)
    /// appended: the schema of the window it replaces.
    Final,
}

/// One row per key (`partition_by`): the row that ranks first by
/// `order_by`, as `row_number() OVER (PARTITION BY .. ORDER BY ..) = 1`
/// (and QuestDB's `LATEST ON`) keeps. Rows with equal ORDER BY keys are
/// tied; one of them is kept whole. NULL keys form one group, as window
/// partitions do.
///
/// The [`super::LatestByRule`] puts a final over a partial one in place of
/// the window; DataFusion's `EnforceDistribution` then repartitions between
/// them by the keys, as it does for a partial and a final aggregate. No
/// output order is promised.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion::physical_plan::displayable;
/// use datafusion_tsjoin::TsJoinContextExt;
/// let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
/// ctx.tsjoin_sql("CREATE TABLE t (k INT, ts INT, v INT) AS VALUES (1, 1, 10), (1, 2, 20), (2, 1, 30)")
///     .await?.collect().await?;
/// let df = ctx.tsjoin_sql("SELECT k, v FROM (SELECT k, v, row_number() OVER \
///     (PARTITION BY k ORDER BY ts DESC) AS rn FROM t) WHERE rn = 1 ORDER BY k").await?;
/// let plan = df.clone().create_physical_plan().await?;
/// assert!(displayable(plan.as_ref()).indent(true).to_string().contains("LatestByExec: mode=Final"));
/// let rows = df.collect().await?;
/// assert_eq!(rows[0].num_rows(), 2);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LatestByExec {
    input: Arc<dyn ExecutionPlan>,
    mode: LatestByMode,
    partition_by: Vec<Arc<dyn PhysicalExpr>>,
    order_by: Vec<PhysicalSortExpr>,
    /// The appended `row_number` field (final mode).
    row_number: Option<FieldRef>,
    schema: SchemaRef,
    cache: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl LatestByExec {
    /// Each partition's best row per key of `input`.
    pub fn partial(
        input: Arc<dyn ExecutionPlan>,
        partition_by: Vec<Arc<dyn PhysicalExpr>>,
        order_by: Vec<PhysicalSortExpr>,
    ) -> Self {
        Self::new(input, LatestByMode::Partial, partition_by, order_by, None)
    }

    /// The best row per key of `input` (partitioned by the keys), with
    /// `row_number` (a non-null `UInt64`, always 1) appended.
    pub fn final_rows(
        input: Arc<dyn ExecutionPlan>,
        partition_by: Vec<Arc<dyn PhysicalExpr>>,
        order_by: Vec<PhysicalSortExpr>,
        row_number: FieldRef,
    ) -> Self {
        Self::new(
            input,
            LatestByMode::Final,
            partition_by,
            order_by,
            Some(row_number),
        )
    }

    fn new(
        input: Arc<dyn ExecutionPlan>,
        mode: LatestByMode,
        partition_by: Vec<Arc<dyn PhysicalExpr>>,
        order_by: Vec<PhysicalSortExpr>,
        row_number: Option<FieldRef>,
    ) -> Self {
        let input_schema = input.schema();
        let schema = match &row_number {
            Some(f) => {
                let mut fields = input_schema.fields().to_vec();
                fields.push(Arc::clone(f));
                Arc::new(Schema::new_with_metadata(
                    fields,
                    input_schema.metadata().clone(),
                ))
            }
            None => input_schema,
        };
        let cache = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            input.output_partitioning().clone(),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Self {
            input,
            mode,
            partition_by,
            order_by,
            row_number,
            schema,
            cache,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// Partial or final.
    pub fn mode(&self) -> LatestByMode {
        self.mode
    }

    /// The keys: one output row per distinct key.
    pub fn partition_by(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.partition_by
    }

    /// The ranking: per key, the row first in this order is kept.
    pub fn order_by(&self) -> &[PhysicalSortExpr] {
        &self.order_by
    }

    /// The appended `row_number` field (final mode).
    pub fn row_number(&self) -> Option<&FieldRef> {
        self.row_number.as_ref()
    }

    /// The input.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }
}

/// Children replaced with their properties recomputed.
pub(super) fn recompute() -> ReplaceChildrenOptions {
    ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute)
}

/// `exprs` joined by `, ` as EXPLAIN shows expression lists.
fn list<T: fmt::Display>(exprs: &[T]) -> String {
    exprs
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl DisplayAs for LatestByExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let mode = match self.mode {
            LatestByMode::Partial => "Partial",
            LatestByMode::Final => "Final",
        };
        let keys = list(&self.partition_by);
        let order = list(&self.order_by);
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "LatestByExec: mode={mode}, partition_by=[{keys}], order_by=[{order}]"
            ),
            DisplayFormatType::TreeRender => {
                write!(f, "mode={mode}\npartition_by=[{keys}]\norder_by=[{order}]")
            }
        }
    }
}

impl ExecutionPlan for LatestByExec {
    fn name(&self) -> &str {
        "LatestByExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        let d = match self.mode {
            LatestByMode::Partial => Distribution::UnspecifiedDistribution,
            LatestByMode::Final if self.partition_by.is_empty() => {
                Distribution::SinglePartition
            }
            LatestByMode::Final => {
                Distribution::KeyPartitioned(self.partition_by.clone())
            }
        };
        InputDistributionRequirements::new(vec![d])
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        let order = self.order_by.iter().map(|o| &o.expr);
        apply_expression_roots(self.partition_by.iter().chain(order), f)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        // The properties follow the input's partitioning: always recomputed.
        let [input]: [Arc<dyn ExecutionPlan>; 1] = match children.try_into() {
            Ok(c) => c,
            Err(_) => return internal_err!("LatestByExec expects one child"),
        };
        Ok(Arc::new(Self::new(
            input,
            self.mode,
            self.partition_by.clone(),
            self.order_by.clone(),
            self.row_number.clone(),
        )))
    }

    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        // Fresh metrics for a re-run; no other state lives in the node.
        let input = Arc::clone(&self.input);
        self.replace_children(vec![input], recompute())
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(children, recompute())
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, Arc::clone(&context))?;
        let reservation = MemoryConsumer::new(format!("LatestByExec[{partition}]"))
            .register(context.memory_pool());
        Ok(latest_by_stream(StreamArgs {
            input,
            schema: Arc::clone(&self.schema),
            partition_by: self.partition_by.clone(),
            order_by: self.order_by.clone(),
            row_number: self.row_number.is_some(),
            reservation,
            metrics: LatestByMetrics::new(&self.metrics, partition),
            batch_size: context.session_config().batch_size(),
        }))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
