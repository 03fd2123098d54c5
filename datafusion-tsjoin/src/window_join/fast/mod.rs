//! The fast path of the WINDOW JOIN: per-key contiguous, typed value buffers
//! and slice kernels.
//!
//! At build time every aggregate argument becomes one buffer in the right
//! index's position order (key, then timestamp), so each window is a
//! contiguous slice `[start, end)` of it. Counts and integer sums come from
//! prefix arrays in O(1) per window; float sums from compensated prefix
//! sums for long windows and the sum kernel for short ones; min and max from
//! a block table for long windows ([`crate::kernels::block_table`]) and the
//! [`crate::kernels`] over the slice for short ones. The two thresholds are
//! session settings, chosen by measurement. Only slices that hold a NULL or
//! a NaN take a masked scalar loop, which keeps the kernels' inputs clean.
//!
//! Applies when no ON condition needs (left, right) pairs, both bounds are
//! constant and every aggregate is one of: `count(*)`, `count(x)`,
//! `sum`/`min`/`max` over signed integers (and `min`/`max` over UInt8–32),
//! `sum`/`avg`/`min`/`max` over Float32/Float64, and first/last
//! (`_not_null`) over any type. Anything else takes the general path.

mod column;
mod probe;

pub(crate) use column::{FastColumn, Placed};
pub(crate) use probe::probe_batch;

use super::exec::{AggInput, WindowAggKind, WindowJoinSpec};
use datafusion::arrow::datatypes::{DataType, Schema};
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

/// What an aggregate needs of its column besides the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Build {
    Values,
    PrefixSums,
    MinMax,
}

/// One fast column to build: the first argument of aggregate `agg`.
#[derive(Debug, Clone)]
pub(crate) struct ColumnSpec {
    pub agg: usize,
    pub ty: ColumnType,
    /// Build prefix sums: wrapping for integers, compensated for floats.
    pub prefix_sums: bool,
    /// Build the block min/max table (the column feeds `min` or `max`).
    pub min_max: bool,
    key: String,
}

/// The fast-path plan of a [`WindowJoinSpec`], when it has one.
#[derive(Debug, Clone)]
pub struct FastPlan {
    pub(crate) aggs: Vec<FastAgg>,
    pub(crate) columns: Vec<ColumnSpec>,
}

fn is_signed_int(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64
    )
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
        let constant =
            |e: &Arc<dyn datafusion::physical_plan::PhysicalExpr>| e.is::<Literal>();
        if !constant(&spec.lo.value) || !constant(&spec.hi.value) {
            return None;
        }
        let mut plan = FastPlan {
            aggs: vec![],
            columns: vec![],
        };
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
                (WindowAggKind::MinFloat, Some(_)) => {
                    FastAgg::Min(plan.column(i, agg, ColumnType::Float, Build::MinMax))
                }
                (WindowAggKind::MaxFloat, Some(_)) => {
                    FastAgg::Max(plan.column(i, agg, ColumnType::Float, Build::MinMax))
                }
                (WindowAggKind::Accumulate(expr), Some(t))
                    if agg.args.len() == 1 && !expr.is_distinct() =>
                {
                    match expr.fun().name().to_ascii_lowercase().as_str() {
                        "count" => FastAgg::Count(plan.column(
                            i,
                            agg,
                            ColumnType::NullsOnly,
                            Build::Values,
                        )),
                        "sum" if is_signed_int(t) && out_type == &DataType::Int64 => {
                            FastAgg::SumInt(plan.column(
                                i,
                                agg,
                                ColumnType::Int,
                                Build::PrefixSums,
                            ))
                        }
                        "sum" if is_float(t) && out_type == &DataType::Float64 => {
                            FastAgg::SumFloat(plan.column(
                                i,
                                agg,
                                ColumnType::Float,
                                Build::PrefixSums,
                            ))
                        }
                        "avg" | "mean"
                            if is_float(t) && out_type == &DataType::Float64 =>
                        {
                            FastAgg::Avg(plan.column(
                                i,
                                agg,
                                ColumnType::Float,
                                Build::PrefixSums,
                            ))
                        }
                        "min" | "max"
                            if (is_signed_int(t) || is_small_unsigned(t))
                                && out_type == t =>
                        {
                            let c = plan.column(i, agg, ColumnType::Int, Build::MinMax);
                            if expr.fun().name().eq_ignore_ascii_case("min") {
                                FastAgg::Min(c)
                            } else {
                                FastAgg::Max(c)
                            }
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
    fn column(
        &mut self,
        i: usize,
        agg: &super::exec::WindowAgg,
        ty: ColumnType,
        build: Build,
    ) -> usize {
        let (prefix_sums, min_max) = (build == Build::PrefixSums, build == Build::MinMax);
        let key = agg.args[0].to_string();
        let shared = |c: &ColumnSpec| {
            c.key == key
                && (c.ty == ty
                    || ty == ColumnType::NullsOnly
                    || c.ty == ColumnType::NullsOnly)
        };
        if let Some(k) = self.columns.iter().position(shared) {
            let c = &mut self.columns[k];
            if c.ty == ColumnType::NullsOnly && ty != ColumnType::NullsOnly {
                // A NULL mask wanted first, values now: build the values too.
                c.ty = ty;
                c.agg = i;
            }
            c.prefix_sums |= prefix_sums;
            c.min_max |= min_max;
            return k;
        }
        self.columns.push(ColumnSpec {
            agg: i,
            ty,
            prefix_sums,
            min_max,
            key,
        });
        self.columns.len() - 1
    }
}
