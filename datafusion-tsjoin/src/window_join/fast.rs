//! The fast path of the WINDOW JOIN: per-key contiguous, typed value buffers
//! and slice kernels.
//!
//! At build time every aggregate argument becomes one buffer in the right
//! index's position order (key, then timestamp), so each window is a
//! contiguous slice `[start, end)` of it. Counts and integer sums come from
//! prefix arrays in O(1) per window; float sums, min and max run the
//! [`crate::kernels`] over the slice. Only windows that hold a NULL or a NaN
//! take a masked scalar loop, which keeps the kernels' inputs clean.
//!
//! Applies when no ON condition needs (left, right) pairs, both bounds are
//! constant and every aggregate is one of: `count(*)`, `count(x)`,
//! `sum`/`min`/`max` over signed integers (and `min`/`max` over UInt8–32),
//! `sum`/`avg`/`min`/`max` over Float32/Float64, and first/last
//! (`_not_null`) over any type. Anything else takes the general path.

use super::build::RightIndex;
use super::exec::{AggInput, WindowJoinSpec, WindowAggKind};
use super::probe::RowWindow;
use crate::kernels::KernelSet;
use crate::kernels::prefix::CompensatedPrefix;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int64Array, UInt32Array};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type, Schema};
use datafusion::common::Result;
use datafusion::physical_expr::expressions::Literal;
use std::sync::Arc;

/// How the fast path computes one aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FastAgg {
    /// `count(*)`: the window length.
    CountStar,
    /// `count(x)`: window length minus NULLs of column `.0`.
    Count(usize),
    /// `sum` over a signed integer column (wrapping, as DataFusion's sum).
    SumInt(usize),
    /// `sum` over a float column.
    SumFloat(usize),
    /// `avg` over a float column.
    Avg(usize),
    /// `min` over column `.0`.
    Min(usize),
    /// `max` over column `.0`.
    Max(usize),
    /// first/last(_not_null) of aggregate `.1`'s argument values.
    Pick(Pick, usize),
}

/// Which row a first/last aggregate takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pick {
    First,
    Last,
    FirstNotNull,
    LastNotNull,
}

/// Numeric family of a fast column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColumnType {
    /// Only the NULL mask is needed (`count(x)` of any type).
    NullsOnly,
    /// Values as `i64`.
    Int,
    /// Values as `f64`.
    Float,
}

/// One fast column to build: the first argument of aggregate `agg`.
#[derive(Debug, Clone)]
pub(crate) struct ColumnSpec {
    pub agg: usize,
    pub ty: ColumnType,
    /// Build prefix sums: wrapping for integers, compensated for floats.
    pub prefix_sums: bool,
    key: String,
}

/// The fast-path plan of a [`WindowJoinSpec`], when it has one.
#[derive(Debug, Clone)]
pub struct FastPlan {
    pub(crate) aggs: Vec<FastAgg>,
    pub(crate) columns: Vec<ColumnSpec>,
}

fn is_signed_int(t: &DataType) -> bool {
    matches!(t, DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64)
}

fn is_small_unsigned(t: &DataType) -> bool {
    matches!(t, DataType::UInt8 | DataType::UInt16 | DataType::UInt32)
}

fn is_float(t: &DataType) -> bool {
    matches!(t, DataType::Float32 | DataType::Float64)
}

impl FastPlan {
    /// The plan for `spec` over a right input of schema `right`, or `None`
    /// when some part of the join needs the general path.
    pub fn try_new(spec: &WindowJoinSpec, right: &Schema) -> Option<Self> {
        if spec.needs_pairs() {
            return None;
        }
        let constant = |e: &Arc<dyn datafusion::physical_plan::PhysicalExpr>| e.is::<Literal>();
        if !constant(&spec.lo.value) || !constant(&spec.hi.value) {
            return None;
        }
        let mut plan = FastPlan { aggs: vec![], columns: vec![] };
        for (i, agg) in spec.aggs.iter().enumerate() {
            if agg.input != AggInput::Right {
                return None;
            }
            let arg_type = match agg.args.first() {
                Some(a) => Some(a.data_type(right).ok()?),
                None => None,
            };
            let out_type = agg.field.data_type();
            let fast = match (&agg.kind, arg_type.as_ref()) {
                (WindowAggKind::CountStar, _) => FastAgg::CountStar,
                (WindowAggKind::First, _) => FastAgg::Pick(Pick::First, i),
                (WindowAggKind::Last, _) => FastAgg::Pick(Pick::Last, i),
                (WindowAggKind::FirstNotNull, _) => FastAgg::Pick(Pick::FirstNotNull, i),
                (WindowAggKind::LastNotNull, _) => FastAgg::Pick(Pick::LastNotNull, i),
                (WindowAggKind::MinFloat, Some(_)) => FastAgg::Min(plan.column(i, agg, ColumnType::Float, false)),
                (WindowAggKind::MaxFloat, Some(_)) => FastAgg::Max(plan.column(i, agg, ColumnType::Float, false)),
                (WindowAggKind::Accumulate(expr), Some(t)) if agg.args.len() == 1 && !expr.is_distinct() => {
                    match expr.fun().name().to_ascii_lowercase().as_str() {
                        "count" => FastAgg::Count(plan.column(i, agg, ColumnType::NullsOnly, false)),
                        "sum" if is_signed_int(t) && out_type == &DataType::Int64 => {
                            FastAgg::SumInt(plan.column(i, agg, ColumnType::Int, true))
                        }
                        "sum" if is_float(t) && out_type == &DataType::Float64 => {
                            FastAgg::SumFloat(plan.column(i, agg, ColumnType::Float, true))
                        }
                        "avg" | "mean" if is_float(t) && out_type == &DataType::Float64 => {
                            FastAgg::Avg(plan.column(i, agg, ColumnType::Float, true))
                        }
                        "min" | "max" if (is_signed_int(t) || is_small_unsigned(t)) && out_type == t => {
                            let c = plan.column(i, agg, ColumnType::Int, false);
                            if expr.fun().name().eq_ignore_ascii_case("min") { FastAgg::Min(c) } else { FastAgg::Max(c) }
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            };
            plan.aggs.push(fast);
        }
        Some(plan)
    }

    /// Index of the column for aggregate `i`'s argument, shared between
    /// aggregates over the same expression (`avg(bid), min(bid)`).
    fn column(&mut self, i: usize, agg: &super::exec::WindowAgg, ty: ColumnType, prefix_sums: bool) -> usize {
        let key = agg.args[0].to_string();
        let shared = |c: &ColumnSpec| {
            c.key == key && (c.ty == ty || ty == ColumnType::NullsOnly || c.ty == ColumnType::NullsOnly)
        };
        if let Some(k) = self.columns.iter().position(shared) {
            let c = &mut self.columns[k];
            if c.ty == ColumnType::NullsOnly && ty != ColumnType::NullsOnly {
                // A NULL mask wanted first, values now: build the values too.
                c.ty = ty;
                c.agg = i;
            }
            c.prefix_sums |= prefix_sums;
            return k;
        }
        self.columns.push(ColumnSpec { agg: i, ty, prefix_sums, key });
        self.columns.len() - 1
    }
}

/// One aggregate argument in position order. NULL slots hold 0.
#[derive(Debug, Default)]
pub(crate) struct FastColumn {
    floats: Vec<f64>,
    ints: Vec<i64>,
    /// `nulls[p]` = NULLs among positions `< p` (`None` without NULLs).
    nulls: Option<Vec<u32>>,
    /// `nans[p]` = NaNs among positions `< p` (`None` without NaN).
    nans: Option<Vec<u32>>,
    /// `sums[p]` = wrapping sum of positions `< p`.
    sums: Option<Vec<i64>>,
    /// Compensated prefix sums of the floats.
    float_sums: Option<CompensatedPrefix>,
}

fn prefix_counts(n: usize, hit: impl Fn(usize) -> bool) -> Option<Vec<u32>> {
    let mut out = Vec::with_capacity(n + 1);
    let mut c = 0u32;
    out.push(0);
    for p in 0..n {
        c += hit(p) as u32;
        out.push(c);
    }
    (c > 0).then_some(out)
}

impl FastColumn {
    /// Gathers `values` (over the right batch) into position order `order`.
    pub(crate) fn build(spec: &ColumnSpec, values: &ArrayRef, order: &[u32]) -> Result<Self> {
        let n = order.len();
        let nulls = if values.null_count() == 0 {
            None
        } else {
            prefix_counts(n, |p| values.is_null(order[p] as usize))
        };
        let mut col = FastColumn { nulls, ..Default::default() };
        match spec.ty {
            ColumnType::NullsOnly => {}
            ColumnType::Float => {
                let v = cast(values, &DataType::Float64)?;
                let v = v.as_primitive::<Float64Type>();
                let raw = v.values();
                col.floats = if v.null_count() == 0 {
                    order.iter().map(|&r| raw[r as usize]).collect()
                } else {
                    order.iter().map(|&r| if v.is_valid(r as usize) { raw[r as usize] } else { 0.0 }).collect()
                };
                if col.floats.iter().any(|x| x.is_nan()) {
                    col.nans = prefix_counts(n, |p| col.floats[p].is_nan());
                }
                if spec.prefix_sums {
                    col.float_sums = Some(CompensatedPrefix::new(&col.floats));
                }
            }
            ColumnType::Int => {
                let v = cast(values, &DataType::Int64)?;
                let v = v.as_primitive::<Int64Type>();
                let raw = v.values();
                col.ints = order.iter().map(|&r| if v.is_valid(r as usize) { raw[r as usize] } else { 0 }).collect();
                if spec.prefix_sums {
                    let mut sums = Vec::with_capacity(n + 1);
                    let mut s = 0i64;
                    sums.push(0);
                    for &x in &col.ints {
                        s = s.wrapping_add(x);
                        sums.push(s);
                    }
                    col.sums = Some(sums);
                }
            }
        }
        Ok(col)
    }

    /// Bytes held.
    pub(crate) fn memory_size(&self) -> usize {
        self.floats.capacity() * 8
            + self.ints.capacity() * 8
            + self.nulls.as_ref().map_or(0, |v| v.capacity() * 4)
            + self.nans.as_ref().map_or(0, |v| v.capacity() * 4)
            + self.sums.as_ref().map_or(0, |v| v.capacity() * 8)
            + self.float_sums.as_ref().map_or(0, CompensatedPrefix::memory_size)
    }

    /// Sum of the floats in `[s, e)`: the compensated prefix for windows of
    /// at least `prefix_min` values (O(1)), the sum kernel below that.
    fn float_sum(&self, k: KernelSet, s: usize, e: usize, prefix_min: usize) -> f64 {
        match &self.float_sums {
            Some(p) if e - s >= prefix_min => p.sum(s, e),
            _ => k.sum_f64(&self.floats[s..e]),
        }
    }

    fn nulls_in(&self, s: usize, e: usize) -> usize {
        self.nulls.as_ref().map_or(0, |c| (c[e] - c[s]) as usize)
    }

    fn nans_in(&self, s: usize, e: usize) -> usize {
        self.nans.as_ref().map_or(0, |c| (c[e] - c[s]) as usize)
    }

    fn is_null(&self, p: usize) -> bool {
        self.nulls.as_ref().is_some_and(|c| c[p + 1] != c[p])
    }

    /// `min`/`max` of the non-NULL floats in `[s, e)` with NaN as the
    /// largest value (so `max` is NaN when any value is, `min` only when all
    /// are), the general path's rule.
    fn float_extreme(&self, k: KernelSet, s: usize, e: usize, max: bool) -> Option<f64> {
        let valid = (e - s) - self.nulls_in(s, e);
        if valid == 0 {
            return None;
        }
        let nans = self.nans_in(s, e);
        if (max && nans > 0) || (!max && nans == valid) {
            return Some(f64::NAN);
        }
        let v = &self.floats[s..e];
        if nans == 0 && valid == e - s {
            return if max { k.max_f64(v) } else { k.min_f64(v) };
        }
        // Rare: a window with NULLs or NaNs. Skip both (NaN cannot win here).
        let mut best: Option<f64> = None;
        for (p, &x) in (s..e).zip(v) {
            if x.is_nan() || self.is_null(p) {
                continue;
            }
            best = Some(match best {
                Some(b) if (max && b >= x) || (!max && b <= x) => b,
                _ => x,
            });
        }
        best
    }

    /// `(min, max)` as [`Self::float_extreme`] gives them, in one pass of
    /// the fused kernel for clean windows.
    fn float_min_max(&self, k: KernelSet, s: usize, e: usize) -> (Option<f64>, Option<f64>) {
        if self.nulls_in(s, e) == 0 && self.nans_in(s, e) == 0 {
            return k.min_max_f64(&self.floats[s..e]).unzip();
        }
        (self.float_extreme(k, s, e, false), self.float_extreme(k, s, e, true))
    }

    fn int_extreme(&self, k: KernelSet, s: usize, e: usize, max: bool) -> Option<i64> {
        let v = &self.ints[s..e];
        if self.nulls_in(s, e) == 0 {
            return if max { k.max_i64(v) } else { k.min_i64(v) };
        }
        let valid = (s..e).zip(v).filter(|(p, _)| !self.is_null(*p)).map(|(_, &x)| x);
        if max { valid.max() } else { valid.min() }
    }
}

/// Computes every aggregate for the left rows whose windows are `windows`.
/// Returns one array per aggregate, typed as `spec`'s output fields.
pub(crate) fn aggregate_windows(
    plan: &FastPlan,
    spec: &WindowJoinSpec,
    index: &RightIndex,
    kernels: KernelSet,
    prefix_min: usize,
    windows: &[RowWindow],
) -> Result<Vec<ArrayRef>> {
    let cols = &index.fast;
    // (start, end) per row; inactive rows aggregate nothing.
    let ranges: Vec<(usize, usize)> = windows
        .iter()
        .map(|w| if w.active { (w.start as usize, w.end as usize) } else { (0, 0) })
        .collect();
    let valid = |c: &FastColumn, s: usize, e: usize| (e - s) - c.nulls_in(s, e);
    // Float columns wanted for both min and max: one fused pass per window.
    let mut both: Vec<Option<Vec<(Option<f64>, Option<f64>)>>> = vec![None; cols.len()];
    for (c, slot) in both.iter_mut().enumerate() {
        let wanted = |f: FastAgg| plan.aggs.contains(&f);
        if plan.columns[c].ty == ColumnType::Float && wanted(FastAgg::Min(c)) && wanted(FastAgg::Max(c)) {
            *slot = Some(ranges.iter().map(|&(s, e)| cols[c].float_min_max(kernels, s, e)).collect());
        }
    }
    plan.aggs
        .iter()
        .zip(&spec.aggs)
        .map(|(fast, agg)| {
            let out: ArrayRef = match *fast {
                FastAgg::CountStar => {
                    Arc::new(Int64Array::from_iter_values(ranges.iter().map(|&(s, e)| (e - s) as i64)))
                }
                FastAgg::Count(c) => Arc::new(Int64Array::from_iter_values(
                    ranges.iter().map(|&(s, e)| valid(&cols[c], s, e) as i64),
                )),
                FastAgg::SumInt(c) => {
                    let col = &cols[c];
                    let sums = col.sums.as_ref().expect("prefix sums built for integer sum");
                    Arc::new(Int64Array::from_iter(ranges.iter().map(|&(s, e)| {
                        (valid(col, s, e) > 0).then(|| sums[e].wrapping_sub(sums[s]))
                    })))
                }
                FastAgg::SumFloat(c) | FastAgg::Avg(c) => {
                    let col = &cols[c];
                    let avg = matches!(fast, FastAgg::Avg(_));
                    Arc::new(Float64Array::from_iter(ranges.iter().map(|&(s, e)| {
                        let n = valid(col, s, e);
                        (n > 0).then(|| {
                            let sum = col.float_sum(kernels, s, e, prefix_min);
                            if avg { sum / n as f64 } else { sum }
                        })
                    })))
                }
                FastAgg::Min(c) | FastAgg::Max(c) => {
                    let col = &cols[c];
                    let max = matches!(fast, FastAgg::Max(_));
                    if let Some(pairs) = &both[c] {
                        Arc::new(Float64Array::from_iter(pairs.iter().map(|&(lo, hi)| if max { hi } else { lo })))
                    } else if index_column_is_float(plan, c) {
                        Arc::new(Float64Array::from_iter(
                            ranges.iter().map(|&(s, e)| col.float_extreme(kernels, s, e, max)),
                        ))
                    } else {
                        Arc::new(Int64Array::from_iter(
                            ranges.iter().map(|&(s, e)| col.int_extreme(kernels, s, e, max)),
                        ))
                    }
                }
                FastAgg::Pick(pick, i) => {
                    let values = &index.agg_values[i][0];
                    let order = &index.order;
                    let choose = |s: usize, e: usize| -> Option<u32> {
                        let mut rows = order[s..e].iter().copied();
                        match pick {
                            Pick::First => rows.next(),
                            Pick::Last => rows.next_back(),
                            Pick::FirstNotNull => rows.find(|&r| values.is_valid(r as usize)),
                            Pick::LastNotNull => rows.rfind(|&r| values.is_valid(r as usize)),
                        }
                    };
                    let idx: UInt32Array = ranges.iter().map(|&(s, e)| choose(s, e)).collect();
                    take(values.as_ref(), &idx, None)?
                }
            };
            if out.data_type() != agg.field.data_type() {
                Ok(cast(&out, agg.field.data_type())?)
            } else {
                Ok(out)
            }
        })
        .collect()
}

fn index_column_is_float(plan: &FastPlan, c: usize) -> bool {
    plan.columns[c].ty == ColumnType::Float
}
