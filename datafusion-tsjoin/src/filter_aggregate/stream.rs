//! The per-partition fold of [`super::FilterAggregateExec`].

use super::metrics::FilterAggregateMetrics;
use super::spec::{Acc, Cmp, FusedAgg};
use datafusion::arrow::array::{Array, ArrayRef, RecordBatch};
use datafusion::arrow::buffer::BooleanBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::Result;
use datafusion::physical_plan::SendableRecordBatchStream;
use futures::StreamExt;

/// Folds every batch of `input` into the aggregates' states and returns
/// them as one row of `schema`. Dropping the future stops reading.
pub(crate) async fn fold(
    mut input: SendableRecordBatchStream,
    cmps: Vec<Cmp>,
    aggs: Vec<FusedAgg>,
    schema: SchemaRef,
    metrics: FilterAggregateMetrics,
) -> Result<RecordBatch> {
    let in_schema = input.schema();
    let mut accs: Vec<_> = aggs
        .iter()
        .map(|a| a.init(a.column().map(|c| in_schema.field(c).data_type())))
        .collect();
    while let Some(batch) = input.next().await {
        let batch = batch?;
        let _timer = metrics.baseline.elapsed_compute().timer();
        let n = batch.num_rows();
        metrics.input_rows.add(n);
        // One bitmap: each comparison's TRUE rows, ANDed.
        let mut mask = BooleanBuffer::new_set(n);
        for c in &cmps {
            mask = &mask & &c.mask(&batch)?;
        }
        let matched = mask.count_set_bits();
        metrics.matched_rows.add(matched);
        if matched == 0 {
            continue;
        }
        for (a, acc) in aggs.iter().zip(accs.iter_mut()) {
            match a.column() {
                None => a.fold(acc, &mask, None),
                Some(c) => {
                    let column = batch.column(c);
                    let valid = match column.nulls() {
                        Some(nulls) => &mask & nulls.inner(),
                        None => mask.clone(),
                    };
                    a.fold(acc, &valid, Some(column));
                }
            }
        }
    }
    state_row(&accs, schema, &metrics)
}

/// The aggregates' states `accs` as one row of `schema` (the partial
/// aggregate's state types), recorded as the partition's output.
pub(crate) fn state_row(
    accs: &[Acc],
    schema: SchemaRef,
    metrics: &FilterAggregateMetrics,
) -> Result<RecordBatch> {
    let columns = accs
        .iter()
        .zip(schema.fields())
        .map(|(acc, field)| {
            let array = acc.scalar().to_array()?;
            Ok(if array.data_type() == field.data_type() {
                array
            } else {
                cast(&array, field.data_type())?
            })
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    let out = RecordBatch::try_new(schema, columns)?;
    metrics.baseline.record_output(out.num_rows());
    metrics.baseline.done();
    Ok(out)
}
