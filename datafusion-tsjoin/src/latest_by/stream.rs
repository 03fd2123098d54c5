//! The work of [`super::LatestByExec`] on one partition: fold every input
//! batch into a [`LatestRows`], then emit its rows (with `row_number` = 1
//! appended in the final mode).

use super::metrics::LatestByMetrics;
use super::table::LatestRows;
use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::Result;
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::physical_expr::PhysicalSortExpr;
use datafusion::physical_plan::metrics::RecordOutput;
use datafusion::physical_plan::spill::get_record_batch_memory_size;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{PhysicalExpr, SendableRecordBatchStream};
use futures::{StreamExt, TryStreamExt, stream};
use std::sync::Arc;

/// What one partition's stream needs.
pub(super) struct StreamArgs {
    pub(super) input: SendableRecordBatchStream,
    /// Output schema: the input's, plus `row_number` when `row_number`.
    pub(super) schema: SchemaRef,
    pub(super) partition_by: Vec<Arc<dyn PhysicalExpr>>,
    pub(super) order_by: Vec<PhysicalSortExpr>,
    pub(super) row_number: bool,
    pub(super) reservation: MemoryReservation,
    pub(super) metrics: LatestByMetrics,
    pub(super) batch_size: usize,
}

/// The partition's rows, one per key, emitted after the input ends. The
/// memory of the kept rows is reserved as they grow: past the pool's limit
/// the stream fails with DataFusion's `Resources exhausted` error.
pub(super) fn latest_by_stream(args: StreamArgs) -> SendableRecordBatchStream {
    let schema = Arc::clone(&args.schema);
    let fut = run(args);
    Box::pin(RecordBatchStreamAdapter::new(
        schema,
        stream::once(fut).try_flatten(),
    ))
}

async fn run(
    args: StreamArgs,
) -> Result<impl futures::Stream<Item = Result<RecordBatch>> + Send> {
    let StreamArgs {
        mut input,
        schema,
        partition_by,
        order_by,
        row_number,
        reservation,
        metrics,
        batch_size,
    } = args;
    let mut table = LatestRows::try_new(input.schema(), partition_by, order_by)?;
    while let Some(batch) = input.next().await {
        let batch = batch?;
        let _timer = metrics.baseline.elapsed_compute().timer();
        metrics.input_rows.add(batch.num_rows());
        table.push(&batch)?;
        reservation.try_resize(table.memory_size())?;
    }
    let timer = metrics.baseline.elapsed_compute().timer();
    metrics.groups.add(table.groups());
    metrics.compactions.add(table.compactions());
    let rows = table.finish()?;
    let rows = if row_number {
        let mut columns = rows.columns().to_vec();
        columns.push(Arc::new(UInt64Array::from_value(1, rows.num_rows())) as ArrayRef);
        RecordBatch::try_new(schema, columns)?
    } else {
        rows
    };
    let n = rows.num_rows();
    let size = batch_size.max(1);
    let batches: Vec<RecordBatch> = (0..n)
        .step_by(size)
        .map(|at| rows.slice(at, size.min(n - at)))
        .collect();
    timer.done();
    // The emitted rows stay accounted until the last batch is taken; each
    // batch counts in the output metrics (rows, batches, bytes) as it goes.
    reservation.try_resize(get_record_batch_memory_size(&rows))?;
    let baseline = metrics.baseline;
    Ok(stream::iter(batches).map(move |b| {
        let _held = &reservation;
        Ok(b.record_output(&baseline))
    }))
}
