//! What a [`WindowJoinExec`](super::WindowJoinExec) evaluates and how it
//! runs, shared by the planner, the codec and execution: the specification
//! ([`WindowJoinSpec`]) with its bounds resolved once, at plan time, against
//! the timestamps' units ([`TimeScale`], [`PhysicalBound`]), the aggregates
//! ([`WindowAgg`]) and the settings ([`WindowJoinSettings`]).

use super::bounds::{
    BoundUnit, Direction, Prevailing, bound_to_ticks, fmt_bound, unit_nanos,
};
use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, FieldRef, Int64Type, TimeUnit};
use datafusion::common::{Result, ScalarValue, exec_datafusion_err};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::Literal;
use datafusion::physical_plan::PhysicalExpr;
use std::fmt;
use std::sync::Arc;

/// The timestamp units of both sides and the unit they are compared in:
/// the finer of the two, so no comparison loses precision. Fixed when the
/// plan is made.
///
/// ```
/// use datafusion::arrow::datatypes::TimeUnit;
/// use datafusion_tsjoin::window_join::TimeScale;
/// let s = TimeScale::new(TimeUnit::Millisecond, TimeUnit::Microsecond);
/// assert_eq!(s.common_nanos(), 1_000);
/// assert_eq!((s.left_factor(), s.right_factor()), (1_000, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeScale {
    left_unit: TimeUnit,
    right_unit: TimeUnit,
}

impl TimeScale {
    /// The scale of a join whose left and right timestamps have these units.
    pub fn new(left_unit: TimeUnit, right_unit: TimeUnit) -> Self {
        Self {
            left_unit,
            right_unit,
        }
    }

    /// Arrow unit of the left timestamp.
    pub fn left_unit(&self) -> TimeUnit {
        self.left_unit
    }

    /// Arrow unit of the right timestamp.
    pub fn right_unit(&self) -> TimeUnit {
        self.right_unit
    }

    /// Nanoseconds per common tick.
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
}

/// One end of the window, resolved against the join's [`TimeScale`] when
/// the plan is made: execution only evaluates `value` and scales it.
///
/// ```
/// use datafusion::arrow::datatypes::TimeUnit;
/// use datafusion::physical_expr::expressions::lit;
/// use datafusion_tsjoin::window_join::{BoundUnit, Direction, PhysicalBound, TimeScale};
/// let scale = TimeScale::new(TimeUnit::Microsecond, TimeUnit::Microsecond);
/// let b = PhysicalBound::new(lit(2i64), BoundUnit::Second, Direction::Preceding, &scale);
/// assert_eq!(b.constant_offset(), Some(-2_000_000));
/// ```
#[derive(Debug, Clone)]
pub struct PhysicalBound {
    value: Arc<dyn PhysicalExpr>,
    unit: BoundUnit,
    direction: Direction,
    /// Nanoseconds per unit of `value` (the left unit's for a raw bound).
    unit_nanos: i64,
    /// Nanoseconds per common tick.
    common_nanos: i64,
    /// The signed offset in common ticks when `value` is a non-NULL literal.
    constant: Option<i64>,
}

impl fmt::Display for PhysicalBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_bound(f, &self.value, self.unit, self.direction)
    }
}

impl PhysicalBound {
    /// A bound of `value` (an integer expression over the left schema, a
    /// literal when constant) `unit`s `direction` of the left timestamp.
    pub fn new(
        value: Arc<dyn PhysicalExpr>,
        unit: BoundUnit,
        direction: Direction,
        scale: &TimeScale,
    ) -> Self {
        let mut bound = Self {
            unit_nanos: unit.nanos().unwrap_or(unit_nanos(scale.left_unit)),
            common_nanos: scale.common_nanos(),
            constant: None,
            value,
            unit,
            direction,
        };
        bound.constant = bound
            .value
            .downcast_ref::<Literal>()
            .and_then(|l| match l.value().cast_to(&DataType::Int64).ok()? {
                ScalarValue::Int64(v) => v,
                _ => None,
            })
            .and_then(|v| bound.ticks(v));
        bound
    }

    /// The bound's expression over the left schema.
    pub fn value(&self) -> &Arc<dyn PhysicalExpr> {
        &self.value
    }

    /// The unit `value` is written in.
    pub fn unit(&self) -> BoundUnit {
        self.unit
    }

    /// PRECEDING or FOLLOWING.
    pub fn direction(&self) -> Direction {
        self.direction
    }

    /// The signed offset in common ticks of a constant bound, as
    /// `offsets` gives it for every row; `None` for a bound that is
    /// not a literal or is NULL.
    pub fn constant_offset(&self) -> Option<i64> {
        self.constant
    }

    /// Signed offset in common ticks of `v` units: negative values clamp to
    /// 0 (as in QuestDB), sub-tick remainders truncate toward zero; `None`
    /// on overflow.
    fn ticks(&self, v: i64) -> Option<i64> {
        bound_to_ticks(v.max(0), self.unit_nanos, self.common_nanos)
            .map(|t| t * self.direction.sign())
    }

    /// Signed offsets (common ticks) of this bound for each row of a left
    /// batch; `None` where the bound is NULL.
    pub(crate) fn offsets(&self, batch: &RecordBatch) -> Result<Vec<Option<i64>>> {
        if let Some(c) = self.constant {
            return Ok(vec![Some(c); batch.num_rows()]);
        }
        let values = self.value.evaluate(batch)?.into_array(batch.num_rows())?;
        let values = cast(&values, &DataType::Int64)?;
        values
            .as_primitive::<Int64Type>()
            .iter()
            .map(|v| {
                v.map(|v| {
                    self.ticks(v).ok_or_else(|| {
                        exec_datafusion_err!(
                            "WINDOW JOIN bound {v} {} overflows the timestamp range",
                            match self.unit {
                                BoundUnit::Raw => "",
                                u => u.as_str(),
                            }
                        )
                    })
                })
                .transpose()
            })
            .collect()
    }
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

/// Everything [`WindowJoinExec`](super::WindowJoinExec) evaluates, shared
/// by its partitions. Made by the planner (or the codec), with the bounds
/// already resolved against the [`TimeScale`].
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
    /// Units of both timestamps and the unit they are compared in.
    pub scale: TimeScale,
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
    /// True when some part of the join is evaluated per (left, right) pair.
    pub fn needs_pairs(&self) -> bool {
        self.pair_filter.is_some() || self.aggs.iter().any(|a| a.input == AggInput::Pair)
    }

    pub(crate) fn all_exprs(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
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
pub(crate) const DEFAULT_SUM_PREFIX_MIN: usize = 96;

/// Default of [`WindowJoinSettings::min_max_table_min`], chosen by
/// measurement (see `benches/README.md`).
pub(crate) const DEFAULT_MIN_MAX_TABLE_MIN: usize = 96;

/// Execution choices of a [`WindowJoinExec`](super::WindowJoinExec), from the session settings
/// (`tsjoin.window_join_workers`, `…_fast_path`, `…_simd`, `…_streaming`).
///
/// ```
/// use datafusion_tsjoin::window_join::WindowJoinSettings;
/// let s = WindowJoinSettings { workers: 1, ..Default::default() };
/// assert!(s.fast_path && s.simd);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowJoinSettings {
    /// Left batches joined at once, in total over all left partitions, and
    /// threads building the right index (at least 1).
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
    /// Walk time-ordered left input against the right side in time order
    /// where the fast path applies (`tsjoin.window_join_streaming`).
    pub streaming: bool,
}

impl Default for WindowJoinSettings {
    fn default() -> Self {
        Self {
            workers: 1,
            fast_path: true,
            simd: true,
            sum_prefix_min: DEFAULT_SUM_PREFIX_MIN,
            min_max_table_min: DEFAULT_MIN_MAX_TABLE_MIN,
            streaming: false,
        }
    }
}
