//! [`WindowJoinExec`]: the physical WINDOW JOIN operator.

use super::bounds::{BoundUnit, Direction, Prevailing, unit_nanos};
use super::build::RightIndex;
use super::fast::FastPlan;
use super::stream::window_join_stream;
use crate::kernels::KernelSet;
use datafusion::arrow::datatypes::{FieldRef, Schema, SchemaRef, TimeUnit};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::{EquivalenceProperties, Partitioning};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, ExecutionPlanProperties,
    InputDistributionRequirements, PhysicalExpr, PlanProperties,
    SendableRecordBatchStream, apply_expression_roots,
};
use std::fmt;
use std::sync::Arc;
use tokio::sync::OnceCell;

/// One end of the window, ready to evaluate against a left batch.
#[derive(Debug, Clone)]
pub struct PhysicalBound {
    /// Integer expression over the left schema (a literal when constant).
    pub value: Arc<dyn PhysicalExpr>,
    /// Unit of the value.
    pub unit: BoundUnit,
    /// PRECEDING or FOLLOWING.
    pub direction: Direction,
}

/// Where an aggregate's arguments are evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggInput {
    /// Over right columns only: evaluated once per right row at build time.
    Right,
    /// Over left and right columns: evaluated per (left, right) pair.
    Pair,
}

/// How an aggregate is computed over a window.
#[derive(Debug, Clone)]
pub enum WindowAggKind {
    /// `count(*)`: the window length.
    CountStar,
    /// `first(x)`: value of the oldest row, NULL included.
    First,
    /// `last(x)`: value of the newest row, NULL included.
    Last,
    /// `first_not_null(x)`
    FirstNotNull,
    /// `last_not_null(x)`
    LastNotNull,
    /// `min(x)` over floats: NULLs skipped, NaN only when every value is NaN
    /// (arrow's total order). DataFusion's grouped float min/max depend on
    /// input order around NaN, so floats do not use them.
    MinFloat,
    /// `max(x)` over floats: NULLs skipped, NaN when any value is NaN.
    MaxFloat,
    /// Any other DataFusion aggregate, through its `GroupsAccumulator`
    /// (or an `Accumulator` adapter), one group per left row.
    Accumulate(Arc<AggregateFunctionExpr>),
}

/// A physical window aggregate.
#[derive(Debug, Clone)]
pub struct WindowAgg {
    /// What to compute.
    pub kind: WindowAggKind,
    /// Where `args` are evaluated.
    pub input: AggInput,
    /// Argument expressions: over the right schema for [`AggInput::Right`],
    /// over `left ++ right` for [`AggInput::Pair`].
    pub args: Vec<Arc<dyn PhysicalExpr>>,
    /// Output field.
    pub field: FieldRef,
    /// Display text, e.g. `avg(p.bid)`.
    pub display: String,
}

/// Everything [`WindowJoinExec`] evaluates, shared by its partitions.
#[derive(Debug)]
pub struct WindowJoinSpec {
    /// Equality keys over the left schema.
    pub left_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Equality keys over the right schema (same types as `left_keys`).
    pub right_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Left designated timestamp.
    pub left_ts: Arc<dyn PhysicalExpr>,
    /// Right designated timestamp.
    pub right_ts: Arc<dyn PhysicalExpr>,
    /// Arrow unit of the left timestamp.
    pub left_unit: TimeUnit,
    /// Arrow unit of the right timestamp.
    pub right_unit: TimeUnit,
    /// Window start.
    pub lo: PhysicalBound,
    /// Window end.
    pub hi: PhysicalBound,
    /// INCLUDE or EXCLUDE PREVAILING.
    pub prevailing: Prevailing,
    /// ON conjuncts over left columns only (or constants): a row for which it
    /// is not true has an empty window.
    pub left_filter: Option<Arc<dyn PhysicalExpr>>,
    /// ON conjuncts over right columns only: applied to the right side once.
    pub right_filter: Option<Arc<dyn PhysicalExpr>>,
    /// ON conjuncts over both sides, evaluated per pair over `left ++ right`.
    pub pair_filter: Option<Arc<dyn PhysicalExpr>>,
    /// Aggregates, in output order.
    pub aggs: Vec<WindowAgg>,
}

impl WindowJoinSpec {
    /// Nanoseconds per tick of the unit both sides are compared in: the
    /// finer of the two timestamp units, so no comparison loses precision.
    pub fn common_nanos(&self) -> i64 {
        unit_nanos(self.left_unit).min(unit_nanos(self.right_unit))
    }

    /// Common ticks per left tick.
    pub fn left_factor(&self) -> i64 {
        unit_nanos(self.left_unit) / self.common_nanos()
    }

    /// Common ticks per right tick.
    pub fn right_factor(&self) -> i64 {
        unit_nanos(self.right_unit) / self.common_nanos()
    }

    /// True when some part of the join is evaluated per (left, right) pair.
    pub fn needs_pairs(&self) -> bool {
        self.pair_filter.is_some() || self.aggs.iter().any(|a| a.input == AggInput::Pair)
    }

    fn all_exprs(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        let mut v: Vec<&Arc<dyn PhysicalExpr>> = vec![];
        v.extend(self.left_keys.iter());
        v.extend(self.right_keys.iter());
        v.extend([
            &self.left_ts,
            &self.right_ts,
            &self.lo.value,
            &self.hi.value,
        ]);
        v.extend(self.left_filter.iter());
        v.extend(self.right_filter.iter());
        v.extend(self.pair_filter.iter());
        for agg in &self.aggs {
            v.extend(agg.args.iter());
        }
        v
    }
}

/// Default of [`WindowJoinSettings::sum_prefix_min`], chosen by measurement
/// (see `benches/README.md`).
pub const DEFAULT_SUM_PREFIX_MIN: usize = 96;

/// Default of [`WindowJoinSettings::min_max_table_min`], chosen by
/// measurement (see `benches/README.md`).
pub const DEFAULT_MIN_MAX_TABLE_MIN: usize = 96;

/// Execution choices of a [`WindowJoinExec`], from the session settings
/// (`tsjoin.window_join_workers`, `…_fast_path`, `…_simd`).
///
/// ```
/// use datafusion_tsjoin::window_join::WindowJoinSettings;
/// let s = WindowJoinSettings { workers: 1, ..Default::default() };
/// assert!(s.fast_path && s.simd);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowJoinSettings {
    /// Left batches joined in parallel per left partition, and threads
    /// building the right index (at least 1).
    pub workers: usize,
    /// Use the fast path where the query allows it.
    pub fast_path: bool,
    /// Let the fast path use SIMD kernels when the CPU has them.
    pub simd: bool,
    /// Float sums over windows of at least this many rows read the block
    /// prefix sums (two short scans and O(1)); shorter ones run the sum
    /// kernel over the window.
    pub sum_prefix_min: usize,
    /// min/max over windows of at least this many rows read the block
    /// table (O(1)); shorter ones run the min/max kernels.
    pub min_max_table_min: usize,
}

impl Default for WindowJoinSettings {
    fn default() -> Self {
        Self {
            workers: 1,
            fast_path: true,
            simd: true,
            sum_prefix_min: DEFAULT_SUM_PREFIX_MIN,
            min_max_table_min: DEFAULT_MIN_MAX_TABLE_MIN,
        }
    }
}

/// Physical WINDOW JOIN.
///
/// The right input (all its partitions, in parallel) is drained once into
/// a shared [`RightIndex`]. Each left partition streams its batches through tasks that
/// run in parallel (up to `workers` per partition) and emit in input order;
/// every task finds each row's window by binary search in its key's time
/// slice and aggregates it. Output: left columns then one column per
/// aggregate; partitioning and ordering are the left input's.
#[derive(Debug)]
pub struct WindowJoinExec {
    pub(crate) left: Arc<dyn ExecutionPlan>,
    pub(crate) right: Arc<dyn ExecutionPlan>,
    pub(crate) spec: Arc<WindowJoinSpec>,
    pub(crate) schema: SchemaRef,
    pub(crate) settings: WindowJoinSettings,
    /// The fast-path plan, when the settings allow it and the query fits.
    pub(crate) fast: Option<Arc<FastPlan>>,
    /// Kernels the fast path runs.
    pub(crate) kernels: KernelSet,
    pub(crate) right_index: Arc<OnceCell<Arc<RightIndex>>>,
    pub(crate) metrics: ExecutionPlanMetricsSet,
    cache: Arc<PlanProperties>,
}

impl WindowJoinExec {
    /// Creates the operator. `settings.workers` bounds the tasks in flight
    /// per left partition (0 means one).
    pub fn try_new(
        left: Arc<dyn ExecutionPlan>,
        right: Arc<dyn ExecutionPlan>,
        spec: Arc<WindowJoinSpec>,
        settings: WindowJoinSettings,
    ) -> Result<Self> {
        let settings = WindowJoinSettings {
            workers: settings.workers.max(1),
            ..settings
        };
        let fast = if settings.fast_path {
            FastPlan::try_new(&spec, &right.schema()).map(Arc::new)
        } else {
            None
        };
        let mut fields: Vec<FieldRef> = left.schema().fields().iter().cloned().collect();
        fields.extend(spec.aggs.iter().map(|a| Arc::clone(&a.field)));
        let schema = Arc::new(Schema::new_with_metadata(
            fields,
            left.schema().metadata().clone(),
        ));
        let cache = Arc::new(Self::compute_properties(&left, &schema));
        Ok(Self {
            left,
            right,
            spec,
            schema,
            settings,
            fast,
            kernels: KernelSet::choose(settings.simd),
            right_index: Arc::new(OnceCell::new()),
            metrics: ExecutionPlanMetricsSet::new(),
            cache,
        })
    }

    /// The shared specification (expressions, bounds, aggregates).
    pub fn spec(&self) -> &Arc<WindowJoinSpec> {
        &self.spec
    }

    /// Tasks in flight per left partition.
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

    /// Left input.
    pub fn left(&self) -> &Arc<dyn ExecutionPlan> {
        &self.left
    }

    /// Right input.
    pub fn right(&self) -> &Arc<dyn ExecutionPlan> {
        &self.right
    }

    fn compute_properties(
        left: &Arc<dyn ExecutionPlan>,
        schema: &SchemaRef,
    ) -> PlanProperties {
        // Left columns keep their indices, so the left orderings still hold.
        let left_eq = left.equivalence_properties();
        let orderings: Vec<_> = left_eq.oeq_class().iter().cloned().collect();
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

    /// `path=…` as EXPLAIN shows it: `fast, kernels=avx2|scalar` or
    /// `general` / `general(pairs)`.
    fn path(&self) -> String {
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
        let bound = |b: &PhysicalBound| match b.unit {
            BoundUnit::Raw => format!("{} {}", b.value, b.direction.as_str()),
            u => format!("{} {} {}", b.value, u.as_str(), b.direction.as_str()),
        };
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
                    bound(&s.lo),
                    bound(&s.hi),
                    s.prevailing.as_str(),
                    aggs.join(", "),
                    self.path(),
                    self.settings.workers
                )
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "on=[{}]", on.join(", "))?;
                writeln!(f, "range=[{}, {}]", bound(&s.lo), bound(&s.hi))?;
                writeln!(f, "prevailing={}", s.prevailing.as_str())?;
                writeln!(f, "path={}", self.path())?;
                write!(f, "workers={}", self.settings.workers)
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

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        // Left stays partitioned; every right partition is drained once
        // into the shared index (a broadcast built in parallel).
        InputDistributionRequirements::new(vec![
            Distribution::UnspecifiedDistribution,
            Distribution::UnspecifiedDistribution,
        ])
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true, false]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        // Repartitioning the left would scramble its order; parallelism comes
        // from the per-partition task pool instead.
        vec![false, false]
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

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [left, right]: [Arc<dyn ExecutionPlan>; 2] = match children.try_into() {
            Ok(c) => c,
            Err(_) => return internal_err!("WindowJoinExec expects two children"),
        };
        Ok(Arc::new(Self::try_new(
            left,
            right,
            Arc::clone(&self.spec),
            self.settings,
        )?))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let n = self.left.output_partitioning().partition_count();
        if partition >= n {
            return internal_err!(
                "WindowJoinExec: partition {partition} out of range ({n} partitions)"
            );
        }
        window_join_stream(self, partition, context)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
