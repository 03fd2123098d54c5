//! [`TailExec`]: the physical operator.

use super::TailRange;
use super::stream::TailStream;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::physical_expr::{
    Distribution, EquivalenceProperties, OrderingRequirements, Partitioning,
};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet,
};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties,
    InputDistributionRequirements, PhysicalExpr, PlanProperties,
    SendableRecordBatchStream,
};
use std::fmt;
use std::sync::Arc;

/// Emits the rows of its input that a [`TailRange`] selects, in input
/// order, as one partition. An ordered input is required as one partition
/// (the optimizer merges it in order); an unordered one is read partition
/// after partition, partition 0 first. Buffers at most
/// `keep_last` rows (or `drop_last` rows when `keep_last` is `None`),
/// charged to the memory pool.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion::datasource::memory::MemorySourceConfig;
/// use datafusion::physical_plan::collect;
/// use datafusion::arrow::{array::Int32Array, datatypes::*, record_batch::RecordBatch};
/// use datafusion_tsjoin::tail::{TailExec, TailRange};
/// use std::sync::Arc;
/// let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int32, false)]));
/// let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int32Array::from(vec![1, 2, 3, 4]))])?;
/// let input = MemorySourceConfig::try_new_exec(&[vec![batch]], schema, None)?;
/// let range = TailRange { skip_first: 0, keep_last: Some(3), drop_last: 1 };
/// let out = collect(Arc::new(TailExec::new(input, range)), Default::default()).await?;
/// assert_eq!(out.iter().map(|b| b.num_rows()).sum::<usize>(), 2); // rows 2 and 3
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TailExec {
    input: Arc<dyn ExecutionPlan>,
    range: TailRange,
    /// Ask for an unordered input as one partition too (a distributed
    /// scheduler's plan: see [`TailExec::with_whole_input`]).
    whole_input: bool,
    cache: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl TailExec {
    /// A tail of `input`.
    pub fn new(input: Arc<dyn ExecutionPlan>, range: TailRange) -> Self {
        let eq = if input.output_partitioning().partition_count() <= 1 {
            input.equivalence_properties().clone()
        } else {
            EquivalenceProperties::new(input.schema())
        };
        let cache = Arc::new(PlanProperties::new(
            eq,
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Self {
            input,
            range,
            whole_input: false,
            cache,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// Also ask for an unordered input as one partition (the optimizer
    /// merges it, interleaving the partitions as they deliver). A
    /// distributed scheduler needs this: it gives a task only the input
    /// partitions it owns, so a tail reading several partitions itself
    /// would see one of them. Locally (off) the tail reads an unordered
    /// input partition after partition, which keeps file order.
    /// Planning sets it from `tsjoin.distributed`.
    ///
    /// ```ignore
    /// let tail = TailExec::new(input, range).with_whole_input(true);
    /// ```
    pub fn with_whole_input(mut self, whole_input: bool) -> Self {
        self.whole_input = whole_input;
        self
    }

    /// The rows kept.
    pub fn range(&self) -> TailRange {
        self.range
    }

    /// The input.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }
}

impl DisplayAs for TailExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "TailExec: {}", self.range)
            }
            DisplayFormatType::TreeRender => write!(f, "{}", self.range),
        }
    }
}

impl ExecutionPlan for TailExec {
    fn name(&self) -> &str {
        "TailExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        // False, so that DataFusion does not push a parent's sort below the
        // tail (which would change which rows are last).
        vec![false]
    }

    fn required_input_ordering(&self) -> Vec<Option<OrderingRequirements>> {
        // Keeps a sort planned under the tail (`LIMIT m, -n` over ORDER BY).
        vec![self.input.output_ordering().cloned().map(Into::into)]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        // Repartitioning would change which rows are last.
        vec![false]
    }

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        // An ordered input must arrive as one partition: the optimizer then
        // keeps (or adds) the merge that makes it one, also when it runs
        // again (Ballista's scheduler and adaptive planner re-optimise).
        // Without it, a re-run of `EnsureRequirements` dropped the
        // SortPreservingMergeExec under `LIMIT m, -n` (its order is met per
        // partition) and the tail read the sorted partitions one after the
        // other: wrong rows. An unordered input keeps its partitions, which
        // the tail reads in partition order, so "input order" over files
        // without a designated timestamp stays file order, then row order
        // (a merge would interleave them as they arrive).
        let required = if self.whole_input || self.input.output_ordering().is_some() {
            Distribution::SinglePartition
        } else {
            Distribution::UnspecifiedDistribution
        };
        InputDistributionRequirements::new(vec![required])
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return internal_err!("TailExec expects one child");
        }
        Ok(Arc::new(
            Self::new(children.swap_remove(0), self.range)
                .with_whole_input(self.whole_input),
        ))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("TailExec has one partition, asked for {partition}");
        }
        let reservation = MemoryConsumer::new("TailExec").register(context.memory_pool());
        Ok(Box::pin(TailStream::new(
            Arc::clone(&self.input),
            context,
            self.range,
            reservation,
            BaselineMetrics::new(&self.metrics, partition),
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
