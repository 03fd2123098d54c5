//! Expression evaluation shared by the build and both probes.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch};
use datafusion::arrow::compute::{cast, kernels::numeric::mul};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::{Result, exec_datafusion_err};
use datafusion::physical_plan::PhysicalExpr;
use std::sync::Arc;

/// Evaluates a designated-timestamp expression and returns its values as
/// ticks of the common unit (`factor` common ticks per input tick).
pub(crate) fn eval_ticks(
    expr: &Arc<dyn PhysicalExpr>,
    batch: &RecordBatch,
    factor: i64,
) -> Result<Int64Array> {
    let array = expr.evaluate(batch)?.into_array(batch.num_rows())?;
    let raw = cast(&array, &DataType::Int64)?;
    let raw = raw.as_primitive::<Int64Type>();
    if factor == 1 {
        return Ok(raw.clone());
    }
    let scaled = mul(raw, &Int64Array::new_scalar(factor)).map_err(|e| {
        exec_datafusion_err!(
            "timestamp out of range when converting to a finer unit for the WINDOW JOIN: {e}"
        )
    })?;
    Ok(scaled.as_primitive::<Int64Type>().clone())
}

/// Evaluates expressions over a batch into arrays.
pub(crate) fn eval_all(
    exprs: &[Arc<dyn PhysicalExpr>],
    batch: &RecordBatch,
) -> Result<Vec<ArrayRef>> {
    exprs
        .iter()
        .map(|e| e.evaluate(batch)?.into_array(batch.num_rows()))
        .collect()
}

/// Bytes of the buffers `array` actually references: a slice counts only
/// its own rows, so batches cut from one array are not charged the whole
/// array each (as `get_array_memory_size` would).
pub(crate) fn referenced_size(array: &dyn Array) -> usize {
    // A view array's slice size counts only its views, not the string data
    // they point into: charge those whole rather than not at all.
    let views = |t: &DataType| matches!(t, DataType::Utf8View | DataType::BinaryView);
    let data = array.to_data();
    if views(array.data_type()) || data.child_data().iter().any(|c| views(c.data_type()))
    {
        return array.get_array_memory_size();
    }
    data.get_slice_memory_size()
        .unwrap_or_else(|_| array.get_array_memory_size())
}

/// [`referenced_size`] of every column of `batch`.
pub(crate) fn batch_referenced_size(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| referenced_size(c.as_ref()))
        .sum()
}
