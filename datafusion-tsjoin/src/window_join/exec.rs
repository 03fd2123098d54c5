//! [`WindowJoinExec`]: the physical WINDOW JOIN operator.

use super::bounds::timestamp_unit;
use super::fast::FastPlan;
use super::metrics::WindowJoinMetrics;
use super::spec::{TimeScale, WindowJoinSettings, WindowJoinSpec};
use super::stream::{SharedState, StreamArgs, window_join_stream};
use super::streaming::{StreamingArgs, StreamingShared, streaming_stream};
use crate::kernels::KernelSet;
use crate::temporal::{JoinDistribution, KeyedRight, TemporalDistribution};
use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::{FieldRef, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err, plan_err};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalSortExpr;
use datafusion::physical_plan::execution_plan::InvariantLevel;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan,
    ExecutionPlanProperties, InputDistributionRequirements, PhysicalExpr, PlanProperties,
    ReplaceChildrenOptions, SendableRecordBatchStream, apply_expression_roots,
};
use std::fmt;
use std::sync::Arc;

/// One state slot of a [`WindowJoinExec`] execution.
#[derive(Debug)]
struct Slot {
    /// The right index and the pool of join tasks.
    shared: Arc<SharedState>,
    /// The streaming path's right side.
    streaming: Arc<StreamingShared>,
}

/// Physical WINDOW JOIN.
///
/// The right input (all its partitions, in parallel) is drained once into
/// a shared right index. Each left partition streams its batches through tasks that
/// run in parallel (up to `workers` at once over all partitions) and emit in input order;
/// every task finds each row's window by binary search in its key's time
/// slice and aggregates it. Output: left columns then one column per
/// aggregate; partitioning and ordering are the left input's.
///
/// In [`JoinDistribution::Partitioned`] mode (see
/// [`with_distribution`](Self::with_distribution)) both inputs are
/// hash-partitioned on the keys and partition `p` builds its own index of
/// right partition `p`.
#[derive(Debug)]
pub struct WindowJoinExec {
    left: Arc<dyn ExecutionPlan>,
    right: Arc<dyn ExecutionPlan>,
    spec: Arc<WindowJoinSpec>,
    schema: SchemaRef,
    settings: WindowJoinSettings,
    /// The fast-path plan, when the settings allow it and the query fits.
    fast: Option<Arc<FastPlan>>,
    /// Kernels the fast path runs.
    kernels: KernelSet,
    /// `Some(left order known)` when the streaming path runs.
    streaming: Option<bool>,
    /// Broadcast or partitioned, the hash keys, and the execution state
    /// shared by the partitions of one execution: one slot when broadcast,
    /// one per partition (its own right partition's index) when
    /// partitioned.
    distribution: TemporalDistribution<Slot>,
    metrics: ExecutionPlanMetricsSet,
    cache: Arc<PlanProperties>,
}

impl WindowJoinExec {
    /// Creates the operator. `settings.workers` bounds the left batches
    /// joined at once over all partitions (0 means one; never fewer than
    /// the left partitions, see `SharedState::new`).
    pub fn try_new(
        left: Arc<dyn ExecutionPlan>,
        right: Arc<dyn ExecutionPlan>,
        spec: Arc<WindowJoinSpec>,
        settings: WindowJoinSettings,
    ) -> Result<Self> {
        // The bounds were resolved against `spec.scale`: it must be the
        // scale of the timestamps this operator reads, or windows come out
        // wrong without an error.
        let actual = TimeScale::new(
            timestamp_unit("left timestamp", &spec.left_ts.data_type(&left.schema())?)?,
            timestamp_unit(
                "right timestamp",
                &spec.right_ts.data_type(&right.schema())?,
            )?,
        );
        if actual != spec.scale {
            return plan_err!(
                "WindowJoinExec: the spec's time scale {:?} does not match its timestamps' {actual:?}",
                spec.scale
            );
        }
        let settings = WindowJoinSettings {
            workers: settings.workers.max(1),
            ..settings
        };
        let fast = if settings.fast_path {
            FastPlan::try_new(&spec, &right.schema()).map(Arc::new)
        } else {
            None
        };
        let streaming = (settings.streaming && fast.is_some())
            .then(|| Self::left_ordered(&left, &spec.left_ts));
        let mut fields: Vec<FieldRef> = left.schema().fields().iter().cloned().collect();
        fields.extend(spec.aggs.iter().map(|a| Arc::clone(&a.field)));
        let schema = Arc::new(Schema::new_with_metadata(
            fields,
            left.schema().metadata().clone(),
        ));
        let cache = Arc::new(crate::temporal::left_preserving_properties(&left, &schema));
        let distribution =
            TemporalDistribution::broadcast(Self::slot_maker(&left, settings));
        Ok(Self {
            left,
            right,
            spec,
            schema,
            settings,
            fast,
            kernels: KernelSet::choose(settings.simd),
            streaming,
            distribution,
            metrics: ExecutionPlanMetricsSet::new(),
            cache,
        })
    }

    /// The operator in `distribution` mode. Partitioned needs equality keys
    /// with a common hash type; without them the operator stays broadcast
    /// (see [`distribution`](Self::distribution)).
    ///
    /// ```ignore
    /// let exec = WindowJoinExec::try_new(left, right, spec, settings)?
    ///     .with_distribution(JoinDistribution::Partitioned)?;
    /// ```
    pub fn with_distribution(mut self, distribution: JoinDistribution) -> Result<Self> {
        let right = KeyedRight {
            left_keys: &self.spec.left_keys,
            right_keys: &self.spec.right_keys,
            input: &self.right,
        };
        let make_slot = Self::slot_maker(&self.left, self.settings);
        self.distribution =
            TemporalDistribution::new(distribution, &self.left, &[right], make_slot)?;
        self.cache = Arc::new(self.distribution.properties(&self.left, &self.schema));
        Ok(self)
    }

    /// The mode this operator runs in.
    pub fn distribution(&self) -> JoinDistribution {
        self.distribution.mode()
    }

    /// Makes fresh per-execution state slots for a join over `left`: one
    /// slot when broadcast, one per partition when partitioned (whose
    /// task pools share the workers).
    fn slot_maker(
        left: &Arc<dyn ExecutionPlan>,
        settings: WindowJoinSettings,
    ) -> impl FnMut(JoinDistribution) -> Slot + use<> {
        let partitions = left.output_partitioning().partition_count();
        move |mode| {
            let (permits, floor) = match mode {
                JoinDistribution::Broadcast => (settings.workers, partitions),
                JoinDistribution::Partitioned => {
                    (slot_settings(settings, mode, partitions).workers, 1)
                }
            };
            Slot {
                shared: Arc::new(SharedState::new(permits, floor)),
                streaming: Arc::default(),
            }
        }
    }

    /// The settings one partition's stream runs with (see
    /// [`slot_settings`]).
    fn slot_settings(&self) -> WindowJoinSettings {
        let n = self.left.output_partitioning().partition_count();
        slot_settings(self.settings, self.distribution(), n)
    }

    /// The same operator over `left` and `right` (whose properties are the
    /// current children's), with fresh execution state: no right index yet
    /// and new metrics.
    fn fresh(&self, left: Arc<dyn ExecutionPlan>, right: Arc<dyn ExecutionPlan>) -> Self {
        let distribution = self
            .distribution
            .fresh(&left, Self::slot_maker(&left, self.settings));
        Self {
            left,
            right,
            spec: Arc::clone(&self.spec),
            schema: Arc::clone(&self.schema),
            settings: self.settings,
            fast: self.fast.clone(),
            kernels: self.kernels,
            streaming: self.streaming,
            distribution,
            metrics: ExecutionPlanMetricsSet::new(),
            cache: Arc::clone(&self.cache),
        }
    }

    /// The shared specification (expressions, bounds, aggregates).
    pub fn spec(&self) -> &Arc<WindowJoinSpec> {
        &self.spec
    }

    /// Left batches joined at once over all left partitions, as EXPLAIN
    /// shows it: the setting, but at least one per left partition.
    fn permits(&self) -> usize {
        let n = self.left.output_partitioning().partition_count();
        match self.distribution() {
            JoinDistribution::Broadcast => self.settings.workers.max(n),
            JoinDistribution::Partitioned => self.slot_settings().workers * n.max(1),
        }
    }

    /// Left batches joined at once, over all left partitions (the setting).
    pub fn workers(&self) -> usize {
        self.settings.workers
    }

    /// The settings this operator was created with.
    pub fn settings(&self) -> WindowJoinSettings {
        self.settings
    }

    /// True when this operator runs the fast path.
    pub fn is_fast(&self) -> bool {
        self.fast.is_some()
    }

    /// True when this operator runs the streaming path (time-ordered left
    /// batches walk the right side in time order; see `streaming/`).
    pub fn is_streaming(&self) -> bool {
        self.streaming.is_some()
    }

    /// Whether every left partition is known to be ordered by `ts`
    /// (ascending, NULLs either end: NULL times join nothing).
    fn left_ordered(left: &Arc<dyn ExecutionPlan>, ts: &Arc<dyn PhysicalExpr>) -> bool {
        [true, false].into_iter().any(|nulls_first| {
            let sort = PhysicalSortExpr::new(
                Arc::clone(ts),
                SortOptions {
                    descending: false,
                    nulls_first,
                },
            );
            left.equivalence_properties()
                .ordering_satisfy([sort])
                .unwrap_or(false)
        })
    }

    /// Left input.
    pub fn left(&self) -> &Arc<dyn ExecutionPlan> {
        &self.left
    }

    /// Right input.
    pub fn right(&self) -> &Arc<dyn ExecutionPlan> {
        &self.right
    }

    /// `path=…` as EXPLAIN shows it: `streaming (left order known|checked;
    /// …)`, `fast, kernels=avx2|scalar` or `general` / `general(pairs)`.
    fn path(&self) -> String {
        if let Some(known) = self.streaming {
            return format!(
                "streaming (left order {}; unordered batches: fast, kernels={})",
                if known { "known" } else { "checked" },
                self.kernels.name()
            );
        }
        match (&self.fast, self.spec.needs_pairs()) {
            (Some(_), _) => format!("fast, kernels={}", self.kernels.name()),
            (None, true) => "general(pairs)".to_string(),
            (None, false) => "general".to_string(),
        }
    }
}

impl DisplayAs for WindowJoinExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let s = &self.spec;
        let on: Vec<String> = s
            .left_keys
            .iter()
            .zip(&s.right_keys)
            .map(|(l, r)| format!("({l}, {r})"))
            .collect();
        let aggs: Vec<&str> = s.aggs.iter().map(|a| a.display.as_str()).collect();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "WindowJoinExec: on=[{}]", on.join(", "))?;
                let filters: Vec<String> =
                    [&s.left_filter, &s.right_filter, &s.pair_filter]
                        .into_iter()
                        .flatten()
                        .map(|e| e.to_string())
                        .collect();
                if !filters.is_empty() {
                    write!(f, ", join_filter=[{}]", filters.join(" AND "))?;
                }
                write!(
                    f,
                    ", ts=[{}, {}], range=[{}, {}], prevailing={}, aggs=[{}], path={}, workers={}",
                    s.left_ts,
                    s.right_ts,
                    s.lo,
                    s.hi,
                    s.prevailing.as_str(),
                    aggs.join(", "),
                    self.path(),
                    self.permits()
                )?;
                write!(f, ", distribution={}", self.distribution().as_str())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "on=[{}]", on.join(", "))?;
                writeln!(f, "range=[{}, {}]", s.lo, s.hi)?;
                writeln!(f, "prevailing={}", s.prevailing.as_str())?;
                writeln!(f, "path={}", self.path())?;
                writeln!(f, "workers={}", self.permits())?;
                write!(f, "distribution={}", self.distribution().as_str())
            }
        }
    }
}

impl ExecutionPlan for WindowJoinExec {
    fn name(&self) -> &str {
        "WindowJoinExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn check_invariants(&self, check: InvariantLevel) -> Result<()> {
        self.distribution.check_invariants(self, check)
    }

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        // Broadcast: left stays partitioned; every right partition is
        // drained once into the shared index (built in parallel).
        // Partitioned: both sides hash-partitioned on the keys, alike.
        self.distribution.input_requirements(2)
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true, false]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        // Broadcast: repartitioning the left would scramble its order;
        // parallelism comes from the per-partition task pool instead.
        // Partitioned: asking for the hash repartitions even over
        // single-partition inputs is what spreads the keys.
        self.distribution.benefits_from_input_partitioning(2)
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.left, &self.right]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        apply_expression_roots(self.spec.all_exprs(), f)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [left, right]: [Arc<dyn ExecutionPlan>; 2] = match children.try_into() {
            Ok(c) => c,
            Err(_) => return internal_err!("WindowJoinExec expects two children"),
        };
        match options.children_properties {
            ChildrenPropertiesMode::Keep => Ok(Arc::new(self.fresh(left, right))),
            ChildrenPropertiesMode::Recompute => Ok(Arc::new(
                Self::try_new(left, right, Arc::clone(&self.spec), self.settings)?
                    .with_distribution(self.distribution())?,
            )),
        }
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )
    }

    /// A new instance whose right index is built again on the next
    /// execution: a recursive query re-executes its plan after the right
    /// input's data changed.
    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        let (left, right) = (Arc::clone(&self.left), Arc::clone(&self.right));
        Ok(Arc::new(self.fresh(left, right)))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        // Broadcast: every partition shares slot 0 and the whole right
        // side; partitioned: partition p has its slot and right partition p.
        let (slot, mut rights) = self.distribution.for_partition(
            "WindowJoinExec",
            &self.left,
            partition,
            std::slice::from_ref(&self.right),
        )?;
        let right = rights.remove(0);
        let settings = self.slot_settings();
        if let (Some(plan), Some(_)) = (&self.fast, self.streaming) {
            return Ok(streaming_stream(StreamingArgs {
                left: self.left.execute(partition, Arc::clone(&context))?,
                right,
                spec: Arc::clone(&self.spec),
                plan: Arc::clone(plan),
                kernels: self.kernels,
                settings,
                schema: Arc::clone(&self.schema),
                shared: Arc::clone(&slot.streaming),
                metrics: WindowJoinMetrics::new(&self.metrics, partition),
                context,
            }));
        }
        Ok(window_join_stream(StreamArgs {
            left: self.left.execute(partition, Arc::clone(&context))?,
            right,
            spec: Arc::clone(&self.spec),
            fast: self.fast.clone(),
            kernels: self.kernels,
            settings,
            schema: Arc::clone(&self.schema),
            shared: Arc::clone(&slot.shared),
            metrics: WindowJoinMetrics::new(&self.metrics, partition),
            context,
        }))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// The settings one partition's stream of a join over `partitions` left
/// partitions runs with in `mode`: partitioned, the workers are shared out
/// over the partitions (each builds and joins its own keys).
fn slot_settings(
    settings: WindowJoinSettings,
    mode: JoinDistribution,
    partitions: usize,
) -> WindowJoinSettings {
    match mode {
        JoinDistribution::Broadcast => settings,
        JoinDistribution::Partitioned => WindowJoinSettings {
            workers: settings.workers.div_ceil(partitions.max(1)).max(1),
            ..settings
        },
    }
}
