//! The plain `Accumulator`: one histogram, for window functions (`OVER`),
//! WINDOW JOIN aggregates and anything else that wants one group at a time.
//! It retracts rows too, so sliding window frames work.

use super::histogram::{
    ExpRange, NO_RANGE, Spec, decode_state, double_key, evaluate, negative_int_error,
};
use super::slots::Slots;
use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int64Type, UInt64Type};
use datafusion::common::{Result, ScalarValue, internal_err};
use datafusion::logical_expr::Accumulator;
use std::mem::size_of;
use std::sync::Arc;

/// `approx_percentile` over one group.
#[derive(Debug)]
pub(crate) struct PercentileAccumulator {
    spec: Arc<Spec>,
    slots: Slots,
    range: ExpRange,
}

impl PercentileAccumulator {
    pub fn new(spec: Arc<Spec>) -> Self {
        Self {
            spec,
            slots: Slots::default(),
            range: NO_RANGE,
        }
    }

    /// Calls `f` with the key of every non-NULL, finite value of `values`.
    fn keys(
        &mut self,
        values: &ArrayRef,
        mut f: impl FnMut(&mut Slots, u32),
    ) -> Result<()> {
        let layout = self.spec.layout;
        match values.data_type() {
            DataType::Int64 => {
                for v in values.as_primitive::<Int64Type>().iter().flatten() {
                    if v < 0 {
                        return Err(negative_int_error());
                    }
                    f(&mut self.slots, layout.int_key(v as u64));
                }
            }
            DataType::UInt64 => {
                for v in values.as_primitive::<UInt64Type>().iter().flatten() {
                    f(&mut self.slots, layout.int_key(v));
                }
            }
            DataType::Float64 => {
                for v in values.as_primitive::<Float64Type>().iter().flatten() {
                    if v.is_finite() {
                        let k = double_key(&layout, v, &mut self.range)?;
                        f(&mut self.slots, k);
                    }
                }
            }
            t => return internal_err!("approx_percentile got input type {t}"),
        }
        Ok(())
    }
}

impl Accumulator for PercentileAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.keys(&values[0], |s, k| s.add(k))
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.keys(&values[0], |s, k| s.remove(k))
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let mut out = Vec::with_capacity(self.spec.ps.len());
        evaluate(&self.spec, &mut self.slots, &mut out);
        if !self.spec.list {
            return Ok(ScalarValue::Float64(out[0]));
        }
        let field = Arc::new(Field::new_list_field(DataType::Float64, true));
        if out.iter().any(Option::is_none) {
            return ScalarValue::try_from(DataType::List(field));
        }
        let values: Vec<ScalarValue> =
            out.into_iter().map(ScalarValue::Float64).collect();
        Ok(ScalarValue::List(ScalarValue::new_list_nullable(
            &values,
            &DataType::Float64,
        )))
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let mut buf = vec![];
        self.slots.encode(&mut buf);
        Ok(vec![ScalarValue::Binary(Some(buf))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let states = states[0].as_binary::<i32>();
        let mut pairs = vec![];
        for state in states.iter().flatten() {
            decode_state(&self.spec, state, &mut self.range, &mut pairs)?;
            self.slots.merge_sorted(&pairs);
        }
        Ok(())
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.slots.heap_size()
    }
}
