//! Aggregation over window lists (general path): `count(*)` and
//! first/last are read off the lists directly; every other aggregate runs
//! through DataFusion's `GroupsAccumulator` with one group per left row.

use super::build::RightIndex;
use super::eval::eval_all;
use super::probe::{WindowLists, pair_batch};
use super::spec::{AggInput, WindowAgg, WindowAggKind, WindowJoinSpec};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, RecordBatch,
    UInt32Array,
};
use datafusion::arrow::compute::kernels::zip::zip;
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::Result;
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_expr::GroupsAccumulatorAdapter;
use std::sync::Arc;

/// Picks one row of a window (positions `range` of the values), if any.
type Choose = dyn Fn(std::ops::Range<usize>, &dyn Array) -> Option<usize>;

/// Computes every aggregate of `spec` for the left rows of `left`, whose
/// windows are `lists`. Returns one array per aggregate, `left.num_rows()` long.
pub(crate) fn aggregate_lists(
    spec: &WindowJoinSpec,
    index: &RightIndex,
    pair_schema: &SchemaRef,
    left: &RecordBatch,
    lists: &WindowLists,
) -> Result<Vec<ArrayRef>> {
    let needs_pairs = spec.aggs.iter().any(|a| a.input == AggInput::Pair);
    let group_ids = lists.group_ids();
    // One index array over the listed right rows, shared by every aggregate.
    let right_rows = UInt32Array::from(lists.rows.clone());
    let pairs = if needs_pairs {
        let lrows = UInt32Array::from_iter_values(group_ids.iter().map(|&g| g as u32));
        Some(pair_batch(
            pair_schema,
            left,
            &lrows,
            &index.batch,
            &right_rows,
        )?)
    } else {
        None
    };

    spec.aggs
        .iter()
        .enumerate()
        .map(|(i, agg)| {
            // Argument values, one per list entry.
            let entry_values = || -> Result<Vec<ArrayRef>> {
                match (agg.input, &pairs) {
                    (AggInput::Pair, Some(p)) => eval_all(&agg.args, p),
                    _ => index.agg_values[i]
                        .iter()
                        .map(|a| Ok(take(a.as_ref(), &right_rows, None)?))
                        .collect(),
                }
            };
            let out = aggregate_one(agg, lists, &group_ids, entry_values)?;
            if out.data_type() != agg.field.data_type() {
                Ok(cast(&out, agg.field.data_type())?)
            } else {
                Ok(out)
            }
        })
        .collect()
}

fn aggregate_one(
    agg: &WindowAgg,
    lists: &WindowLists,
    group_ids: &[usize],
    entry_values: impl Fn() -> Result<Vec<ArrayRef>>,
) -> Result<ArrayRef> {
    let n = lists.num_groups();
    let pick = |choose: &Choose| -> Result<ArrayRef> {
        let values = entry_values()?;
        let values = &values[0];
        let idx: UInt32Array = lists
            .offsets
            .windows(2)
            .map(|w| {
                choose(w[0] as usize..w[1] as usize, values.as_ref()).map(|k| k as u32)
            })
            .collect();
        Ok(take(values.as_ref(), &idx, None)?)
    };
    match &agg.kind {
        WindowAggKind::CountStar => Ok(Arc::new(Int64Array::from_iter_values(
            lists.offsets.windows(2).map(|w| (w[1] - w[0]) as i64),
        ))),
        WindowAggKind::First => pick(&|r, _| (!r.is_empty()).then_some(r.start)),
        WindowAggKind::Last => pick(&|r, _| (!r.is_empty()).then(|| r.end - 1)),
        WindowAggKind::FirstNotNull => pick(&|mut r, v| r.find(|&k| v.is_valid(k))),
        WindowAggKind::LastNotNull => pick(&|mut r, v| r.rfind(|&k| v.is_valid(k))),
        WindowAggKind::MinFloat | WindowAggKind::MaxFloat => {
            let values = cast(&entry_values()?[0], &DataType::Float64)?;
            let values = values.as_primitive::<Float64Type>();
            let max = matches!(agg.kind, WindowAggKind::MaxFloat);
            let out: Float64Array = lists
                .offsets
                .windows(2)
                .map(|w| float_extreme(values, w[0] as usize..w[1] as usize, max))
                .collect();
            Ok(Arc::new(out))
        }
        WindowAggKind::Accumulate(expr) => {
            let mut acc: Box<dyn GroupsAccumulator> =
                if expr.groups_accumulator_supported() {
                    expr.create_groups_accumulator()?
                } else {
                    let expr = Arc::clone(expr);
                    Box::new(GroupsAccumulatorAdapter::new(move || {
                        expr.create_accumulator()
                    }))
                };
            let values = entry_values()?;
            acc.update_batch(&values, group_ids, None, n)?;
            let out = acc.evaluate(EmitTo::All)?;
            // Groups accumulators may assume every group saw a row (true in a
            // hash aggregate, not here): empty windows get the aggregate's
            // value over no rows (NULL, 0 for count) explicitly.
            let empty: BooleanArray = lists
                .offsets
                .windows(2)
                .map(|w| Some(w[0] == w[1]))
                .collect();
            if empty.true_count() == 0 {
                return Ok(out);
            }
            let default = expr.fun().default_value(out.data_type())?;
            Ok(zip(&empty, &default.to_scalar()?, &out)?)
        }
    }
}

/// min/max of the non-NULL values in `range` under arrow's total order with
/// NaN normalised to the largest value: `max` is NaN when any value is NaN,
/// `min` only when all are. `None` when there is no non-NULL value.
pub(crate) fn float_extreme(
    values: &datafusion::arrow::array::PrimitiveArray<Float64Type>,
    range: std::ops::Range<usize>,
    max: bool,
) -> Option<f64> {
    let mut best: Option<f64> = None;
    for k in range {
        if values.is_null(k) {
            continue;
        }
        let v = values.value(k);
        let v = if v.is_nan() { f64::NAN } else { v };
        best = Some(match best {
            None => v,
            Some(b) => {
                let greater = v.total_cmp(&b).is_gt() || (v.is_nan() && !b.is_nan());
                let less = (b.is_nan() && !v.is_nan())
                    || (!v.is_nan() && v.total_cmp(&b).is_lt());
                if (max && greater) || (!max && less) {
                    v
                } else {
                    b
                }
            }
        });
    }
    best
}
