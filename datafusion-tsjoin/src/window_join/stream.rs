//! The output stream of one left partition: left batches flow through a
//! bounded pool of tasks (parallel, order-preserving) once the shared right
//! index is built.

use super::aggregate::aggregate_lists;
use super::build::{RightIndex, build_right_index};
use super::exec::{WindowJoinExec, WindowJoinSettings, WindowJoinSpec};
use super::fast::{FastPlan, probe_batch};
use super::probe::{RowWindow, contiguous_lists, filtered_lists, row_windows};
use crate::kernels::KernelSet;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::concat;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::physical_plan::metrics::{BaselineMetrics, Count, MetricBuilder, Time};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::{StreamExt, TryStreamExt, stream};
use std::sync::Arc;

/// Upper bound on list entries materialised at once per task; a left batch
/// whose windows hold more is aggregated in several runs of rows.
const MAX_ENTRIES_PER_RUN: usize = 1 << 20;

/// What a task needs besides the batch.
struct Probe {
    spec: Arc<WindowJoinSpec>,
    index: Arc<RightIndex>,
    out_schema: SchemaRef,
    pair_schema: SchemaRef,
    join_time: Time,
    fast: Option<Arc<FastPlan>>,
    kernels: KernelSet,
    settings: WindowJoinSettings,
}

pub(crate) fn window_join_stream(
    exec: &WindowJoinExec,
    partition: usize,
    context: Arc<TaskContext>,
) -> Result<SendableRecordBatchStream> {
    let left_stream = exec.left.execute(partition, Arc::clone(&context))?;
    let out_schema = Arc::clone(&exec.schema);
    let pair_schema = Arc::new(Schema::new(
        exec.left
            .schema()
            .fields()
            .iter()
            .chain(exec.right.schema().fields().iter())
            .cloned()
            .collect::<Vec<_>>(),
    ));
    let baseline = BaselineMetrics::new(&exec.metrics, partition);
    let build_time: Time =
        MetricBuilder::new(&exec.metrics).subset_time("build_time", partition);
    // The join work is this operator's own compute time.
    let join_time: Time = baseline.elapsed_compute().clone();
    let right_rows: Count =
        MetricBuilder::new(&exec.metrics).counter("right_rows", partition);

    let cell = Arc::clone(&exec.right_index);
    let right = Arc::clone(&exec.right);
    let spec = Arc::clone(&exec.spec);
    let workers = exec.settings.workers;
    let fast = exec.fast.clone();
    let kernels = exec.kernels;
    let settings = exec.settings;
    let schema = Arc::clone(&out_schema);

    let stream = stream::once(async move {
        let index = cell
            .get_or_try_init(|| async {
                let _timer = build_time.timer();
                let reservation = MemoryConsumer::new("WindowJoinExec[right index]")
                    .register(context.memory_pool());
                let index = build_right_index(
                    right,
                    Arc::clone(&context),
                    Arc::clone(&spec),
                    fast.clone(),
                    reservation,
                    kernels,
                    settings.workers,
                )
                .await?;
                right_rows.add(index.num_positions());
                Ok::<_, DataFusionError>(Arc::new(index))
            })
            .await?
            .clone();
        let probe = Arc::new(Probe {
            spec,
            index,
            out_schema,
            pair_schema,
            join_time,
            fast,
            kernels,
            settings,
        });
        let batches = left_stream
            .map(move |batch| {
                let probe = Arc::clone(&probe);
                // Spawned so batches run in parallel; dropping the stream
                // aborts the tasks.
                let task = SpawnedTask::spawn(async move { probe.run(batch?) });
                async move {
                    task.join()
                        .await
                        .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))?
                }
            })
            .buffered(workers);
        Ok::<_, DataFusionError>(batches)
    })
    .try_flatten()
    .inspect_ok(move |b| baseline.record_output(b.num_rows()));
    Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
}

impl Probe {
    /// Joins one left batch: windows, then aggregates in runs of rows that
    /// keep the materialised lists bounded.
    fn run(&self, left: RecordBatch) -> Result<RecordBatch> {
        let _timer = self.join_time.timer();
        if let Some(plan) = &self.fast {
            let arrays = probe_batch(
                plan,
                &self.spec,
                &self.index,
                self.kernels,
                &self.settings,
                &left,
            )?;
            let mut columns = left.columns().to_vec();
            columns.extend(arrays);
            return Ok(RecordBatch::try_new(Arc::clone(&self.out_schema), columns)?);
        }
        let windows = row_windows(&self.spec, &self.index, &left)?;
        let mut parts: Vec<Vec<_>> = vec![vec![]; self.spec.aggs.len()];
        let mut start = 0;
        while start < windows.len() || (start == 0 && windows.is_empty()) {
            let end = run_end(&windows, start);
            let rows = &windows[start..end];
            let slice = left.slice(start, end - start);
            let lists = if self.spec.pair_filter.is_some() {
                filtered_lists(&self.spec, &self.index, &self.pair_schema, &slice, rows)?
            } else {
                contiguous_lists(&self.index, rows)
            };
            let arrays = aggregate_lists(
                &self.spec,
                &self.index,
                &self.pair_schema,
                &slice,
                &lists,
            )?;
            for (p, a) in parts.iter_mut().zip(arrays) {
                p.push(a);
            }
            if windows.is_empty() {
                break;
            }
            start = end;
        }
        let mut columns = left.columns().to_vec();
        for p in parts {
            let refs: Vec<_> = p.iter().map(|a| a.as_ref()).collect();
            columns.push(if refs.len() == 1 {
                Arc::clone(&p[0])
            } else {
                concat(&refs)?
            });
        }
        Ok(RecordBatch::try_new(Arc::clone(&self.out_schema), columns)?)
    }
}

/// End of the run of rows starting at `start` whose windows hold at most
/// [`MAX_ENTRIES_PER_RUN`] entries (always at least one row).
fn run_end(windows: &[RowWindow], start: usize) -> usize {
    let mut total = 0;
    let mut end = start;
    while end < windows.len() {
        let w = &windows[end];
        total += if w.active { w.len() } else { 0 };
        if total > MAX_ENTRIES_PER_RUN && end > start {
            break;
        }
        end += 1;
    }
    end
}
