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

pub(super) mod column;
pub(super) mod probe;

use super::spec::{AggInput, WindowAggKind, WindowJoinSpec};
use crate::functions::{KnownAggregate, Position};
use column::{ColumnSpec, ColumnType};
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
    Pick(Position, usize),
}

/// What an aggregate needs of its column besides the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Build {
    Values,
    PrefixSums,
    MinMax,
}

/// The fast-path plan of a [`WindowJoinSpec`], when it has one.
#[derive(Debug, Clone)]
pub(crate) struct FastPlan {
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
    pub(crate) fn try_new(spec: &WindowJoinSpec, right: &Schema) -> Option<Self> {
        if spec.needs_pairs() {
            return None;
        }
        let constant =
            |e: &Arc<dyn datafusion::physical_plan::PhysicalExpr>| e.is::<Literal>();
        if !constant(spec.lo.value()) || !constant(spec.hi.value()) {
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
                (WindowAggKind::First, _) => FastAgg::Pick(Position::First, i),
                (WindowAggKind::Last, _) => FastAgg::Pick(Position::Last, i),
                (WindowAggKind::FirstNotNull, _) => {
                    FastAgg::Pick(Position::FirstNotNull, i)
                }
                (WindowAggKind::LastNotNull, _) => {
                    FastAgg::Pick(Position::LastNotNull, i)
                }
                (WindowAggKind::MinFloat, Some(_)) => {
                    FastAgg::Min(plan.column(i, agg, ColumnType::Float, Build::MinMax))
                }
                (WindowAggKind::MaxFloat, Some(_)) => {
                    FastAgg::Max(plan.column(i, agg, ColumnType::Float, Build::MinMax))
                }
                (WindowAggKind::Accumulate(expr), Some(t))
                    if agg.args.len() == 1 && !expr.is_distinct() =>
                {
                    match KnownAggregate::of(expr.fun())? {
                        KnownAggregate::Count => FastAgg::Count(plan.column(
                            i,
                            agg,
                            ColumnType::NullsOnly,
                            Build::Values,
                        )),
                        KnownAggregate::Sum
                            if is_signed_int(t) && out_type == &DataType::Int64 =>
                        {
                            FastAgg::SumInt(plan.column(
                                i,
                                agg,
                                ColumnType::Int,
                                Build::PrefixSums,
                            ))
                        }
                        KnownAggregate::Sum
                            if is_float(t) && out_type == &DataType::Float64 =>
                        {
                            FastAgg::SumFloat(plan.column(
                                i,
                                agg,
                                ColumnType::Float,
                                Build::PrefixSums,
                            ))
                        }
                        KnownAggregate::Avg
                            if is_float(t) && out_type == &DataType::Float64 =>
                        {
                            FastAgg::Avg(plan.column(
                                i,
                                agg,
                                ColumnType::Float,
                                Build::PrefixSums,
                            ))
                        }
                        fun @ (KnownAggregate::Min | KnownAggregate::Max)
                            if (is_signed_int(t) || is_small_unsigned(t))
                                && out_type == t =>
                        {
                            let c = plan.column(i, agg, ColumnType::Int, Build::MinMax);
                            if fun == KnownAggregate::Min {
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
        agg: &super::spec::WindowAgg,
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
