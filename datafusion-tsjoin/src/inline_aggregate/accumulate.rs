//! The inline aggregate's accumulators: one typed state vector per
//! aggregate, indexed by group id, updated by one tight loop per batch.
//!
//! `count(*)` reads the group row counts phase 1 keeps anyway. Every other
//! aggregate keeps its values plus the number of non-NULL inputs per group
//! (which makes `count(x)`, and decides when a sum, min, max or avg is
//! NULL); while its input has had no NULL those counts *are* the group row
//! counts, so they are only materialised at the first NULL.
//!
//! Semantics follow DataFusion's: integer sums wrap (sum of Int8–64 is an
//! Int64, of UInt8–64 a UInt64), float sums and averages are f64, `min`/`max`
//! keep the input type. For floats NaN is the largest value (arrow's order):
//! `max` is NaN when any input is, `min` only when all are.

use crate::functions::{KnownAggregate, PercentileGroups, PercentileSpec};
use datafusion::arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, AsArray, Int64Array, PrimitiveArray,
};
use datafusion::arrow::buffer::{Buffer, NullBuffer, ScalarBuffer};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::ArrowNativeType;
use datafusion::arrow::datatypes::{
    DataType, FieldRef, Float64Type, Int64Type, UInt64Type,
};
use datafusion::common::{Result, internal_err};
use datafusion::logical_expr::{AggregateUDF, GroupsAccumulator};
use datafusion::physical_plan::PhysicalExpr;
use std::sync::Arc;

/// Which aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFn {
    /// `count(*)` (or `count` of a non-NULL constant).
    CountStar,
    /// `count(x)`: non-NULL inputs.
    Count,
    /// `sum(x)`
    Sum,
    /// `min(x)`
    Min,
    /// `max(x)`
    Max,
    /// `avg(x)`
    Avg,
    /// `approx_percentile(x, p[, precision])` or `approx_median(x[,
    /// precision])`, its constants in [`InlineAgg::percentile`].
    Percentile,
}

impl AggFn {
    /// Its name in encoded plans (see [`Self::from_encoded`]).
    pub fn name(self) -> &'static str {
        match self {
            AggFn::CountStar => "count_star",
            AggFn::Count => "count",
            AggFn::Sum => "sum",
            AggFn::Min => "min",
            AggFn::Max => "max",
            AggFn::Avg => "avg",
            AggFn::Percentile => "approx_percentile",
        }
    }

    /// The function [`Self::name`] names.
    pub fn from_encoded(name: &str) -> Option<Self> {
        [
            AggFn::CountStar,
            AggFn::Count,
            AggFn::Sum,
            AggFn::Min,
            AggFn::Max,
            AggFn::Avg,
            AggFn::Percentile,
        ]
        .into_iter()
        .find(|f| f.name() == name)
    }

    /// The function `udf` is, if supported (identified by type, see
    /// [`KnownAggregate`]).
    pub fn of(udf: &AggregateUDF) -> Option<Self> {
        Some(match KnownAggregate::of(udf)? {
            KnownAggregate::Count => AggFn::Count,
            KnownAggregate::Sum => AggFn::Sum,
            KnownAggregate::Min => AggFn::Min,
            KnownAggregate::Max => AggFn::Max,
            KnownAggregate::Avg => AggFn::Avg,
            KnownAggregate::Positional(_) => return None,
        })
    }
}

/// One aggregate of an inline aggregation.
#[derive(Debug, Clone)]
pub struct InlineAgg {
    /// What it computes.
    pub fun: AggFn,
    /// Its argument over the input (none for `count(*)`).
    pub arg: Option<Arc<dyn PhysicalExpr>>,
    /// Output field (name and type as DataFusion's aggregate gives them).
    pub field: FieldRef,
    /// A percentile's constants (only with [`AggFn::Percentile`]).
    pub(crate) percentile: Option<Arc<PercentileSpec>>,
}

/// Numeric domain a state is kept in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// Signed integers, as i64.
    Int,
    /// Unsigned integers, as u64.
    UInt,
    /// Floats, as f64.
    Float,
}

impl Domain {
    /// The domain of a numeric input type.
    pub fn of(t: &DataType) -> Option<Self> {
        Some(match t {
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
                Domain::Int
            }
            DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
                Domain::UInt
            }
            DataType::Float16 | DataType::Float32 | DataType::Float64 => Domain::Float,
            _ => return None,
        })
    }
}

/// Whether `fun` over an input of type `input` (`None`: no argument) can
/// produce `output` exactly as DataFusion does.
pub fn supported(fun: AggFn, input: Option<&DataType>, output: &DataType) -> bool {
    match (fun, input) {
        (AggFn::CountStar, _) | (AggFn::Count, Some(_)) => output == &DataType::Int64,
        (AggFn::Sum, Some(t)) => match Domain::of(t) {
            Some(Domain::Int) => output == &DataType::Int64,
            Some(Domain::UInt) => output == &DataType::UInt64,
            Some(Domain::Float) => output == &DataType::Float64,
            None => false,
        },
        (AggFn::Avg, Some(t)) => Domain::of(t).is_some() && output == &DataType::Float64,
        (AggFn::Min | AggFn::Max, Some(t)) => Domain::of(t).is_some() && output == t,
        // The function coerced its argument to one of these.
        (AggFn::Percentile, Some(t)) => {
            matches!(t, DataType::Int64 | DataType::UInt64 | DataType::Float64)
        }
        _ => false,
    }
}

/// A binary fold over one domain.
pub(crate) trait Fold:
    ArrowNativeType + Copy + Default + Send + Sync + 'static
{
    type Arrow: ArrowPrimitiveType<Native = Self>;
    fn sum(a: Self, b: Self) -> Self;
    fn min(a: Self, b: Self) -> Self;
    fn max(a: Self, b: Self) -> Self;
    /// Start value of a `min` (so that any input replaces it).
    const MIN_START: Self;
    /// Start value of a `max`.
    const MAX_START: Self;
    fn to_f64(self) -> f64;
}

impl Fold for i64 {
    type Arrow = Int64Type;
    fn sum(a: i64, b: i64) -> i64 {
        a.wrapping_add(b)
    }
    fn min(a: i64, b: i64) -> i64 {
        a.min(b)
    }
    fn max(a: i64, b: i64) -> i64 {
        a.max(b)
    }
    const MIN_START: i64 = i64::MAX;
    const MAX_START: i64 = i64::MIN;
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Fold for u64 {
    type Arrow = UInt64Type;
    fn sum(a: u64, b: u64) -> u64 {
        a.wrapping_add(b)
    }
    fn min(a: u64, b: u64) -> u64 {
        a.min(b)
    }
    fn max(a: u64, b: u64) -> u64 {
        a.max(b)
    }
    const MIN_START: u64 = u64::MAX;
    const MAX_START: u64 = 0;
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Fold for f64 {
    type Arrow = Float64Type;
    fn sum(a: f64, b: f64) -> f64 {
        a + b
    }
    /// NaN is the largest value: it loses unless everything is NaN (the
    /// start value is NaN, so an all-NaN group stays NaN).
    fn min(a: f64, b: f64) -> f64 {
        if b.is_nan() || b >= a { a } else { b }
    }
    /// NaN is the largest value: it wins.
    fn max(a: f64, b: f64) -> f64 {
        if a.is_nan() || b <= a { a } else { b }
    }
    const MIN_START: f64 = f64::NAN;
    const MAX_START: f64 = f64::NEG_INFINITY;
    fn to_f64(self) -> f64 {
        self
    }
}

/// `sum`, `min` or `max` of one domain: values and non-NULL counts by group.
#[derive(Debug, Clone)]
pub(crate) struct Folded<T> {
    op: AggFn,
    values: Vec<T>,
    /// Non-NULL inputs per group; `None` while equal to the group counts.
    valid: Option<Vec<u64>>,
}

impl<T: Fold> Folded<T> {
    fn new(op: AggFn) -> Self {
        Self {
            op,
            values: vec![],
            valid: None,
        }
    }

    fn start(&self) -> T {
        match self.op {
            AggFn::Min => T::MIN_START,
            AggFn::Max => T::MAX_START,
            _ => T::default(),
        }
    }

    fn grow(&mut self, groups: usize) {
        let start = self.start();
        self.values.resize(groups, start);
        if let Some(v) = &mut self.valid {
            v.resize(groups, 0);
        }
    }

    /// Folds one batch in; `counts` already include the batch's rows.
    fn update(&mut self, ids: &[u32], values: &PrimitiveArray<T::Arrow>, counts: &[u64]) {
        self.grow(counts.len());
        let nulls = values.nulls().filter(|n| n.null_count() > 0);
        let (vals, x) = (&mut self.values, values.values().as_ref());
        // One loop per op, each with its fold inlined.
        match self.op {
            AggFn::Min => fold_rows(vals, ids, x, nulls, None, T::min),
            AggFn::Max => fold_rows(vals, ids, x, nulls, None, T::max),
            _ => fold_rows(vals, ids, x, nulls, Some(T::default()), T::sum),
        }
        count_valid(&mut self.valid, ids, nulls, counts);
    }
}

/// `vals[ids[i]] = f(vals[ids[i]], x[i])` for every non-NULL row `i`.
/// `zero` is `f`'s identity (`None`: `f` is idempotent, as min and max).
#[inline(always)]
fn fold_rows<T: Copy>(
    vals: &mut [T],
    ids: &[u32],
    x: &[T],
    nulls: Option<&NullBuffer>,
    zero: Option<T>,
    f: impl Fn(T, T) -> T,
) {
    match nulls {
        None if use_lanes(vals.len(), ids.len()) => fold_lanes(vals, ids, x, zero, f),
        None => {
            for (&g, &v) in ids.iter().zip(x) {
                let slot = &mut vals[g as usize];
                *slot = f(*slot, v);
            }
        }
        Some(n) => {
            for (i, (&g, &v)) in ids.iter().zip(x).enumerate() {
                if n.is_valid(i) {
                    let slot = &mut vals[g as usize];
                    *slot = f(*slot, v);
                }
            }
        }
    }
}

/// Whether [`fold_lanes`] pays: few groups (rows hit the same slot again
/// before its last update has left the store buffer), many rows.
#[inline(always)]
pub(crate) fn use_lanes(groups: usize, rows: usize) -> bool {
    groups <= LANE_GROUPS && rows >= 4 * groups
}

/// Groups up to which folds and counts go through four lanes.
const LANE_GROUPS: usize = 256;

/// [`fold_rows`] without NULLs over four independent copies of the state,
/// row `i` into copy `i % 4`, merged at the end: with few groups, one copy
/// makes each update wait for the previous update of the same slot.
fn fold_lanes<T: Copy>(
    vals: &mut [T],
    ids: &[u32],
    x: &[T],
    zero: Option<T>,
    f: impl Fn(T, T) -> T,
) {
    let n = vals.len();
    let mut lanes: Vec<T> = Vec::with_capacity(3 * n);
    for _ in 0..3 {
        match zero {
            Some(z) => lanes.extend(std::iter::repeat_n(z, n)),
            None => lanes.extend_from_slice(vals),
        }
    }
    let (l1, rest) = lanes.split_at_mut(n);
    let (l2, l3) = rest.split_at_mut(n);
    let mut id4 = ids.chunks_exact(4);
    let mut x4 = x.chunks_exact(4);
    for (g, v) in (&mut id4).zip(&mut x4) {
        vals[g[0] as usize] = f(vals[g[0] as usize], v[0]);
        l1[g[1] as usize] = f(l1[g[1] as usize], v[1]);
        l2[g[2] as usize] = f(l2[g[2] as usize], v[2]);
        l3[g[3] as usize] = f(l3[g[3] as usize], v[3]);
    }
    for (&g, &v) in id4.remainder().iter().zip(x4.remainder()) {
        vals[g as usize] = f(vals[g as usize], v);
    }
    for g in 0..n {
        vals[g] = f(f(vals[g], l1[g]), f(l2[g], l3[g]));
    }
}

/// `counts[ids[i]] += 1` for every row, through four lanes when the groups
/// are few (see [`fold_lanes`]).
pub(crate) fn count_ids(ids: &[u32], counts: &mut [u64]) {
    if !use_lanes(counts.len(), ids.len()) {
        for &g in ids {
            counts[g as usize] += 1;
        }
        return;
    }
    let n = counts.len();
    let mut lanes = vec![0u32; 4 * n];
    let (l0, rest) = lanes.split_at_mut(n);
    let (l1, rest) = rest.split_at_mut(n);
    let (l2, l3) = rest.split_at_mut(n);
    let mut id4 = ids.chunks_exact(4);
    for g in &mut id4 {
        l0[g[0] as usize] += 1;
        l1[g[1] as usize] += 1;
        l2[g[2] as usize] += 1;
        l3[g[3] as usize] += 1;
    }
    for &g in id4.remainder() {
        l0[g as usize] += 1;
    }
    for g in 0..n {
        counts[g] += (l0[g] + l1[g] + l2[g] + l3[g]) as u64;
    }
}

/// Keeps non-NULL counts per group, `None` while they equal the group row
/// counts: materialised (as the counts, which include this batch, less its
/// NULLs) at the first batch with a NULL, then counted row by row.
fn count_valid(
    valid: &mut Option<Vec<u64>>,
    ids: &[u32],
    nulls: Option<&NullBuffer>,
    counts: &[u64],
) {
    match (valid.as_mut(), nulls) {
        (None, None) => {}
        (None, Some(n)) => {
            let mut v = counts.to_vec();
            for (i, &g) in ids.iter().enumerate() {
                if n.is_null(i) {
                    v[g as usize] -= 1;
                }
            }
            *valid = Some(v);
        }
        (Some(v), n) => {
            v.resize(counts.len(), 0);
            for (i, &g) in ids.iter().enumerate() {
                v[g as usize] += n.is_none_or(|n| n.is_valid(i)) as u64;
            }
        }
    }
}

/// Counts as an `Int64Array`, without a copy (a count fits an `i64`).
pub(crate) fn counts_array(counts: Vec<u64>) -> ArrayRef {
    let len = counts.len();
    Arc::new(Int64Array::new(
        ScalarBuffer::new(Buffer::from_vec(counts), 0, len),
        None,
    ))
}

/// The state of one aggregate over every group of a partial or final
/// table.
#[derive(Debug, Clone)]
pub(crate) enum State {
    CountStar,
    /// `count(x)`: non-NULL inputs (`None` while equal to the group counts).
    Count(Option<Vec<u64>>),
    Int(Folded<i64>),
    UInt(Folded<u64>),
    Float(Folded<f64>),
    /// Every group's histogram, in the function's own accumulator.
    Percentile(Box<PercentileGroups>),
}

impl State {
    /// An empty state for `agg` over input type `input`.
    pub(crate) fn new(agg: &InlineAgg, input: Option<&DataType>) -> Result<Self> {
        let op = match agg.fun {
            AggFn::CountStar => return Ok(State::CountStar),
            AggFn::Count => return Ok(State::Count(None)),
            AggFn::Percentile => {
                let Some(spec) = &agg.percentile else {
                    return internal_err!(
                        "inline aggregate: percentile without constants"
                    );
                };
                return Ok(State::Percentile(Box::new(PercentileGroups::new(
                    Arc::clone(spec),
                ))));
            }
            AggFn::Avg => AggFn::Sum,
            f => f,
        };
        let domain = match (agg.fun, input.and_then(Domain::of)) {
            (AggFn::Avg, Some(_)) => Domain::Float,
            (_, Some(d)) => d,
            (_, None) => {
                return internal_err!(
                    "inline aggregate: unsupported input {input:?} for {:?}",
                    agg.fun
                );
            }
        };
        Ok(match domain {
            Domain::Int => State::Int(Folded::new(op)),
            Domain::UInt => State::UInt(Folded::new(op)),
            Domain::Float => State::Float(Folded::new(op)),
        })
    }

    /// Folds one batch in: `ids` are the rows' groups, `arg` the argument
    /// evaluated over the batch, `counts` the group row counts including
    /// this batch.
    pub(crate) fn update(
        &mut self,
        ids: &[u32],
        arg: Option<&ArrayRef>,
        counts: &[u64],
    ) -> Result<()> {
        match self {
            State::CountStar => {}
            State::Count(valid) => {
                let nulls = arg.expect("count has an argument").logical_nulls();
                count_valid(
                    valid,
                    ids,
                    nulls.as_ref().filter(|n| n.null_count() > 0),
                    counts,
                );
            }
            State::Int(f) => f.update(
                ids,
                cast(arg.expect("argument"), &DataType::Int64)?.as_primitive(),
                counts,
            ),
            State::UInt(f) => f.update(
                ids,
                cast(arg.expect("argument"), &DataType::UInt64)?.as_primitive(),
                counts,
            ),
            State::Float(f) => f.update(
                ids,
                cast(arg.expect("argument"), &DataType::Float64)?.as_primitive(),
                counts,
            ),
            State::Percentile(h) => {
                h.update(arg.expect("argument"), ids, None, counts.len())?
            }
        }
        Ok(())
    }

    /// Folds groups `from` of `other` (whose group counts are
    /// `other_counts`) into groups `to` of this state, whose group counts
    /// (`counts`) already include them.
    pub(crate) fn merge(
        &mut self,
        other: &State,
        from: &[u32],
        to: &[u32],
        other_counts: &[u64],
        counts: &[u64],
    ) -> Result<()> {
        fn valid_into(
            mine: &mut Option<Vec<u64>>,
            theirs: &Option<Vec<u64>>,
            from: &[u32],
            to: &[u32],
            other_counts: &[u64],
            counts: &[u64],
        ) {
            if mine.is_none() && theirs.is_none() {
                return;
            }
            // Materialise ours as "counts before this merge", then add theirs.
            let v = mine.get_or_insert_with(|| {
                let mut before = counts.to_vec();
                for (&f, &t) in from.iter().zip(to) {
                    before[t as usize] -= other_counts[f as usize];
                }
                before
            });
            v.resize(counts.len(), 0);
            for (&f, &t) in from.iter().zip(to) {
                v[t as usize] += theirs
                    .as_ref()
                    .map_or(other_counts[f as usize], |o| o[f as usize]);
            }
        }
        fn fold<T: Fold>(
            mine: &mut Folded<T>,
            theirs: &Folded<T>,
            from: &[u32],
            to: &[u32],
            other_counts: &[u64],
            counts: &[u64],
        ) {
            mine.grow(counts.len());
            let gathered: Vec<T> =
                from.iter().map(|&a| theirs.values[a as usize]).collect();
            match mine.op {
                AggFn::Min => {
                    fold_rows(&mut mine.values, to, &gathered, None, None, T::min)
                }
                AggFn::Max => {
                    fold_rows(&mut mine.values, to, &gathered, None, None, T::max)
                }
                _ => fold_rows(
                    &mut mine.values,
                    to,
                    &gathered,
                    None,
                    Some(T::default()),
                    T::sum,
                ),
            }
            valid_into(
                &mut mine.valid,
                &theirs.valid,
                from,
                to,
                other_counts,
                counts,
            );
        }
        match (self, other) {
            (State::CountStar, State::CountStar) => {}
            (State::Count(mine), State::Count(theirs)) => {
                valid_into(mine, theirs, from, to, other_counts, counts)
            }
            (State::Int(a), State::Int(b)) => fold(a, b, from, to, other_counts, counts),
            (State::UInt(a), State::UInt(b)) => {
                fold(a, b, from, to, other_counts, counts)
            }
            (State::Float(a), State::Float(b)) => {
                fold(a, b, from, to, other_counts, counts)
            }
            (State::Percentile(a), State::Percentile(b)) => {
                return a.merge_groups(b, from, to, counts.len());
            }
            _ => unreachable!("states of one aggregate have one kind"),
        }
        Ok(())
    }

    /// The aggregate's values for groups `0..counts.len()`, typed as `agg`'s
    /// output field.
    pub(crate) fn evaluate(self, agg: &InlineAgg, counts: &[u64]) -> Result<ArrayRef> {
        fn folded<T: Fold>(
            f: Folded<T>,
            agg: &InlineAgg,
            counts: &[u64],
        ) -> Result<ArrayRef> {
            // Every group has a row, so without a NULL input every group
            // has a value.
            let nulls = f.valid.as_ref().map(|v| {
                NullBuffer::from(
                    v[..counts.len()].iter().map(|&n| n > 0).collect::<Vec<_>>(),
                )
            });
            let mut values = f.values;
            values.truncate(counts.len());
            let array: ArrayRef = if agg.fun == AggFn::Avg {
                let valid = f.valid.as_deref().unwrap_or(counts);
                let avg: Vec<f64> = values
                    .iter()
                    .zip(valid)
                    .map(|(&s, &n)| s.to_f64() / n.max(1) as f64)
                    .collect();
                Arc::new(PrimitiveArray::<Float64Type>::new(avg.into(), nulls))
            } else {
                Arc::new(PrimitiveArray::<T::Arrow>::new(values.into(), nulls))
            };
            Ok(cast(&array, agg.field.data_type())?)
        }
        match self {
            State::CountStar => Ok(counts_array(counts.to_vec())),
            State::Count(valid) => {
                Ok(counts_array(valid.unwrap_or_else(|| counts.to_vec())))
            }
            State::Int(f) => folded(f, agg, counts),
            State::UInt(f) => folded(f, agg, counts),
            State::Float(f) => folded(f, agg, counts),
            State::Percentile(mut h) => h.evaluate_groups(counts.len()),
        }
    }

    /// Makes room for `groups` groups in all.
    pub(crate) fn reserve(&mut self, groups: usize) {
        fn reserve<T>(f: &mut Folded<T>, groups: usize) {
            f.values.reserve(groups.saturating_sub(f.values.len()));
            if let Some(v) = &mut f.valid {
                v.reserve(groups.saturating_sub(v.len()));
            }
        }
        match self {
            State::CountStar | State::Count(None) => {}
            State::Count(Some(v)) => v.reserve(groups.saturating_sub(v.len())),
            State::Int(f) => reserve(f, groups),
            State::UInt(f) => reserve(f, groups),
            State::Float(f) => reserve(f, groups),
            State::Percentile(h) => h.reserve(groups),
        }
    }

    /// Bytes held.
    pub(crate) fn memory_size(&self) -> usize {
        fn size<T>(f: &Folded<T>) -> usize {
            f.values.capacity() * std::mem::size_of::<T>()
                + f.valid.as_ref().map_or(0, |v| v.capacity() * 8)
        }
        match self {
            State::CountStar => 0,
            State::Count(v) => v.as_ref().map_or(0, |v| v.capacity() * 8),
            State::Int(f) => size(f),
            State::UInt(f) => size(f),
            State::Float(f) => size(f),
            State::Percentile(h) => h.size(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The four-lane loops give what one lane gives, on every group count
    /// around the switch and on odd row counts.
    #[test]
    fn lanes_agree_with_one_lane() {
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        for groups in [1usize, 3, 10, 255, 256, 257, 1000] {
            for rows in [0usize, 5, 1023, 4 * groups + 3, 10_001] {
                let ids: Vec<u32> =
                    (0..rows).map(|_| (next() % groups as u64) as u32).collect();
                let x: Vec<i64> = (0..rows).map(|_| next() as i64 - (1 << 30)).collect();
                let mut counts = vec![1u64; groups];
                count_ids(&ids, &mut counts);
                let mut want = vec![1u64; groups];
                ids.iter().for_each(|&g| want[g as usize] += 1);
                assert_eq!(counts, want, "{groups} groups, {rows} rows");
                for (zero, f) in [
                    (Some(0i64), i64::wrapping_add as fn(i64, i64) -> i64),
                    (None, std::cmp::min::<i64>),
                    (None, std::cmp::max::<i64>),
                ] {
                    let mut got = vec![5i64; groups];
                    fold_rows(&mut got, &ids, &x, None, zero, f);
                    let mut want = vec![5i64; groups];
                    ids.iter()
                        .zip(&x)
                        .for_each(|(&g, &v)| want[g as usize] = f(want[g as usize], v));
                    assert_eq!(got, want, "{groups} groups, {rows} rows");
                }
            }
        }
    }
}
