//! [`PriorityGateExec`]: the physical operator placed above a query's
//! inputs.

use super::Priority;
use super::scheduler::{Admission, Scheduler};
use super::stream::{GateMetrics, GateStream};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::metrics::{
    ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::statistics::ChildStats;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PhysicalExpr, PlanProperties,
    SendableRecordBatchStream, Statistics, StatisticsArgs,
};
use std::fmt;
use std::sync::Arc;

/// Passes its input through unchanged, pausing at batch boundaries while
/// its [`Scheduler`] runs a query of higher priority. tsjoin's query
/// planner puts one above every input of a query (see
/// [`gate_inputs`](super::gate_inputs)), so a paused query stops reading
/// and every operator above it runs out of work: it pauses as a whole,
/// keeps its state, and holds no thread.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion::datasource::memory::MemorySourceConfig;
/// use datafusion::physical_plan::collect;
/// use datafusion::arrow::{array::Int32Array, datatypes::*, record_batch::RecordBatch};
/// use datafusion_tsjoin::priority::{Priority, PriorityGateExec, Scheduler};
/// use std::sync::Arc;
/// let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int32, false)]));
/// let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int32Array::from(vec![1, 2]))])?;
/// let input = MemorySourceConfig::try_new_exec(&[vec![batch]], schema, None)?;
/// let gate = PriorityGateExec::new(input, Priority::LOW, Scheduler::new());
/// let out = collect(Arc::new(gate), Default::default()).await?;
/// assert_eq!(out[0].num_rows(), 2); // nothing of higher priority ran
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct PriorityGateExec {
    input: Arc<dyn ExecutionPlan>,
    priority: Priority,
    scheduler: Arc<Scheduler>,
    /// The query's admission from planning until a gate's stream opens
    /// (shared by the query's gates; see [`PlannedAdmission`]).
    planned: Option<Arc<PlannedAdmission>>,
    metrics: ExecutionPlanMetricsSet,
}

/// A query's place in its scheduler from the moment its plan is made until
/// the first of its gates opens a stream (which then holds its own), the
/// plan is dropped unexecuted, or [`PLANNED_GRACE`](super::PLANNED_GRACE)
/// has passed (a plan kept without running must not pause lower
/// priorities for good).
///
/// Why: a gate's stream is often opened inside a task that an operator
/// above it spawns (a repartition, a merge of partitions), and while lower
/// priorities keep the runtime's workers busy that task may wait tens of
/// milliseconds to start — during which nothing tells the lower queries
/// to pause. Taken when the plan is made, on the caller's thread, the
/// admission is in place before any of that.
#[derive(Debug, Default)]
pub struct PlannedAdmission(parking_lot::Mutex<Option<Admission>>);

impl PlannedAdmission {
    /// Holds `admission` until [`Self::release`] or drop.
    pub fn hold(&self, admission: Admission) {
        *self.0.lock() = Some(admission);
    }

    /// Gives the admission up (a stream of the query now holds its own).
    pub fn release(&self) {
        self.0.lock().take();
    }
}

impl PriorityGateExec {
    /// A gate at `priority` over `input`, ranked by `scheduler`.
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        priority: Priority,
        scheduler: Arc<Scheduler>,
    ) -> Self {
        Self {
            input,
            priority,
            scheduler,
            planned: None,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The gate of a query admitted when it was planned: opening this
    /// gate's stream releases `planned`.
    pub fn with_planned(mut self, planned: Arc<PlannedAdmission>) -> Self {
        self.planned = Some(planned);
        self
    }

    /// The priority of the query.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The scheduler that ranks it.
    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.scheduler
    }

    /// The input.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// The query's admission taken when it was planned, if any: an
    /// operator that reads around the gate releases it once it holds its
    /// own.
    pub fn planned(&self) -> Option<&Arc<PlannedAdmission>> {
        self.planned.as_ref()
    }
}

impl DisplayAs for PriorityGateExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "PriorityGateExec: priority={}", self.priority)
            }
            DisplayFormatType::TreeRender => write!(f, "priority={}", self.priority),
        }
    }
}

impl ExecutionPlan for PriorityGateExec {
    fn name(&self) -> &str {
        "PriorityGateExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        // A pass-through: partitioning, ordering and boundedness are the
        // input's.
        self.input.properties()
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        vec![ChildStats::At(partition)]
    }

    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        // A pass-through: the input's statistics. Hiding them made every
        // gated input look unknown to the optimizers that size joins:
        // Ballista then demoted a broadcast join of a small VALUES list to a
        // partitioned one after planning, which changed the partitioning
        // under a single-partition sort and lost rows.
        Ok(Arc::clone(&input_stats[0]))
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
            return internal_err!("PriorityGateExec expects one child");
        }
        let mut gate = Self::new(
            children.swap_remove(0),
            self.priority,
            Arc::clone(&self.scheduler),
        );
        gate.planned = self.planned.clone();
        Ok(Arc::new(gate))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let metrics = GateMetrics {
            pauses: MetricBuilder::new(&self.metrics).counter("pauses", partition),
            paused_time: MetricBuilder::new(&self.metrics)
                .subset_time("paused_time", partition),
        };
        let stream =
            GateStream::new(input, Arc::clone(&self.scheduler), self.priority, metrics);
        // The stream now holds the query's place.
        if let Some(planned) = &self.planned {
            planned.release();
        }
        Ok(Box::pin(stream))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// Decodes a [`PriorityGateExec`] encoded by tsjoin's physical codec
/// (the priority as 4 little-endian bytes); the decoding session's
/// [`Scheduler`] ranks it (the process-wide one unless it has its own).
pub(crate) fn decode_gate(
    buf: &[u8],
    inputs: &[Arc<dyn ExecutionPlan>],
    ctx: &TaskContext,
) -> Result<Arc<dyn ExecutionPlan>> {
    let (Ok(bytes), [input]) = (<[u8; 4]>::try_from(buf), inputs) else {
        return internal_err!("PriorityGateExec: bad encoding or inputs");
    };
    let scheduler = ctx
        .session_config()
        .get_extension::<Scheduler>()
        .unwrap_or_else(Scheduler::global);
    Ok(Arc::new(PriorityGateExec::new(
        Arc::clone(input),
        Priority::new(i32::from_le_bytes(bytes)),
        scheduler,
    )))
}
