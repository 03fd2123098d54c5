//! The output stream of one left partition: left batches flow through a
//! pool of tasks (parallel, order-preserving, bounded over all partitions)
//! once the shared right index is built.

use super::aggregate::aggregate_lists;
use super::build::{IndexBuild, RightIndex, build_right_index};
use super::fast::FastPlan;
use super::fast::probe::probe_batch;
use super::metrics::WindowJoinMetrics;
use super::probe::{RowWindow, contiguous_lists, filtered_lists, row_windows};
use super::spec::{WindowJoinSettings, WindowJoinSpec};
use crate::kernels::KernelSet;
use crate::priority::{PhaseGate, Turn};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::concat;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use futures::{StreamExt, TryStreamExt, stream};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{OnceCell, Semaphore};

/// Upper bound on list entries materialised at once per task; a left batch
/// whose windows hold more is aggregated in several runs of rows.
const MAX_ENTRIES_PER_RUN: usize = 1 << 20;

/// What an operator instance's partitions share while it runs: the right
/// index, built once by whichever partition gets there first, and the pool
/// of permits that bounds the left batches joined at once over all
/// partitions. A new instance (`reset_state`, `replace_children`) starts
/// with a fresh one, so a re-executed recursive query rebuilds its index.
#[derive(Debug)]
pub(super) struct SharedState {
    right_index: OnceCell<Arc<RightIndex>>,
    in_flight: Arc<Semaphore>,
}

impl SharedState {
    /// Fresh state for `partitions` left partitions whose pool lets
    /// `workers` left batches be joined at once, but never fewer than one
    /// per partition.
    ///
    /// Why the floor: a partition waits for its permit only while its
    /// stream is polled, but tokio's fair semaphore hands a released permit
    /// to the oldest waiter even when nobody polls it. A consumer that
    /// waits on one partition while another sits unpolled with a waiter
    /// queued (a sort-preserving merge does) could otherwise see the
    /// unpolled partitions hold every permit, and wait forever. Each
    /// partition queues at most one waiter, so with a permit per partition
    /// the partition being polled always gets one.
    pub(super) fn new(workers: usize, partitions: usize) -> Self {
        Self {
            right_index: OnceCell::new(),
            in_flight: Arc::new(Semaphore::new(workers.max(partitions).max(1))),
        }
    }
}

/// Everything one left partition's stream needs.
pub(super) struct StreamArgs {
    /// The partition's left input.
    pub left: SendableRecordBatchStream,
    /// The right input, drained once into the shared index.
    pub right: Arc<dyn ExecutionPlan>,
    pub spec: Arc<WindowJoinSpec>,
    pub fast: Option<Arc<FastPlan>>,
    pub kernels: KernelSet,
    pub settings: WindowJoinSettings,
    /// Output schema: left columns, then one per aggregate.
    pub schema: SchemaRef,
    pub shared: Arc<SharedState>,
    pub metrics: WindowJoinMetrics,
    pub context: Arc<TaskContext>,
}

/// Joins one left batch at a time against the built index.
struct BatchJoiner {
    spec: Arc<WindowJoinSpec>,
    index: Arc<RightIndex>,
    out_schema: SchemaRef,
    /// `left ++ right`: what pair filters and pair aggregates read.
    pair_schema: SchemaRef,
    metrics: WindowJoinMetrics,
    fast: Option<Arc<FastPlan>>,
    kernels: KernelSet,
    settings: WindowJoinSettings,
}

/// The output stream of one left partition: waits for the shared right
/// index (building it if no partition has yet), then joins left batches in
/// parallel tasks and emits them in input order.
// Spawning a task waits for a permit, so `then` yields the spawned task
// itself, which `buffered` then awaits alongside the others.
#[expect(clippy::async_yields_async)]
pub(super) fn window_join_stream(args: StreamArgs) -> SendableRecordBatchStream {
    let StreamArgs {
        left,
        right,
        spec,
        fast,
        kernels,
        settings,
        schema,
        shared,
        metrics,
        context,
    } = args;
    let pair_schema = Arc::new(Schema::new(
        left.schema()
            .fields()
            .iter()
            .chain(right.schema().fields().iter())
            .cloned()
            .collect::<Vec<_>>(),
    ));
    let out_schema = Arc::clone(&schema);
    let output_metrics = metrics.baseline.clone();
    let stream = stream::once(async move {
        let index = shared
            .right_index
            .get_or_try_init(|| async {
                let _timer = metrics.build_time.timer();
                let reservation = MemoryConsumer::new("WindowJoinExec[right index]")
                    .register(context.memory_pool());
                let how = IndexBuild {
                    spec: Arc::clone(&spec),
                    fast_plan: fast.clone(),
                    kernels,
                    threads: settings.workers,
                    gate: PhaseGate::new(Turn::below(&right)),
                };
                let index =
                    build_right_index(right, Arc::clone(&context), how, reservation)
                        .await?;
                metrics.build_input_rows.add(index.num_positions());
                metrics.build_mem_used.set(index.reserved_bytes());
                Ok::<_, DataFusionError>(Arc::new(index))
            })
            .await?
            .clone();
        let workers = settings.workers;
        let permits = Arc::clone(&shared.in_flight);
        let joiner = Arc::new(BatchJoiner {
            spec,
            index,
            out_schema,
            pair_schema,
            metrics,
            fast,
            kernels,
            settings,
        });
        let batches = left
            .then(move |batch| {
                let joiner = Arc::clone(&joiner);
                let permits = Arc::clone(&permits);
                async move {
                    // A permit of the operator's pool, shared by all left
                    // partitions, bounds the batches joined at once in
                    // total (not per partition); it is released when the
                    // task ends, so finished batches waiting to be emitted
                    // hold none.
                    let permit = permits.acquire_owned().await;
                    // Spawned so batches run in parallel; dropping the
                    // stream aborts the tasks.
                    SpawnedTask::spawn(async move {
                        let _permit = permit;
                        joiner.join(batch?)
                    })
                }
            })
            .map(|task| async move {
                task.join()
                    .await
                    .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))?
            })
            .buffered(workers);
        Ok::<_, DataFusionError>(batches)
    })
    .try_flatten()
    .inspect_ok(move |b| output_metrics.record_output(b.num_rows()));
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}

impl BatchJoiner {
    /// Joins one left batch: windows, then aggregates in runs of rows that
    /// keep the materialised lists bounded.
    fn join(&self, left: RecordBatch) -> Result<RecordBatch> {
        self.metrics.input_batches.add(1);
        self.metrics.input_rows.add(left.num_rows());
        let start = Instant::now();
        let out = self.join_batch(left);
        let elapsed = start.elapsed();
        self.metrics.join_time.add_duration(elapsed);
        self.metrics
            .baseline
            .elapsed_compute()
            .add_duration(elapsed);
        out
    }

    fn join_batch(&self, left: RecordBatch) -> Result<RecordBatch> {
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
