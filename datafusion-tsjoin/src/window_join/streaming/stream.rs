//! The output stream of one left partition on the streaming path: drain the
//! right input into the shared [`RightSide`] once, then walk the left
//! batches as they come; a batch out of time order is joined on the index
//! path instead (its index built once, from the same right rows).

use super::join::Walker;
use super::lanes::{Lane, RightSide, column_needs};
use crate::kernels::KernelSet;
use crate::priority::{PhaseGate, Turn};
use crate::temporal::{build_timeline, drain_partitions};
use crate::window_join::build::{IndexBuild, RightIndex, build_right_index};
use crate::window_join::eval::batch_referenced_size;
use crate::window_join::fast::FastPlan;
use crate::window_join::fast::column::ColumnType;
use crate::window_join::fast::probe::probe_batch;
use crate::window_join::metrics::WindowJoinMetrics;
use crate::window_join::spec::{WindowJoinSettings, WindowJoinSpec};
use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{DataFusionError, Result, exec_err};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use futures::{StreamExt, TryStreamExt, stream};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::OnceCell;

/// The right side with the memory it holds.
struct Built {
    right: Arc<RightSide>,
    /// The query's turn, for the index's build if a batch needs it.
    turn: Option<Turn>,
    _reservation: MemoryReservation,
}

/// What the partitions of one operator instance share on the streaming
/// path: the right side, built once, and the right index for batches out
/// of time order, built only if one comes. A new instance (`reset_state`,
/// `replace_children`) starts with a fresh one.
#[derive(Default)]
pub(crate) struct StreamingShared {
    built: OnceCell<Arc<Built>>,
    index: OnceCell<Arc<RightIndex>>,
}

impl std::fmt::Debug for StreamingShared {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("StreamingShared")
    }
}

/// Everything one left partition's streaming output needs.
pub(crate) struct StreamingArgs {
    pub left: SendableRecordBatchStream,
    pub right: Arc<dyn ExecutionPlan>,
    pub spec: Arc<WindowJoinSpec>,
    pub plan: Arc<FastPlan>,
    pub kernels: KernelSet,
    pub settings: WindowJoinSettings,
    /// Output schema: left columns, then one per aggregate.
    pub schema: SchemaRef,
    pub shared: Arc<StreamingShared>,
    pub metrics: WindowJoinMetrics,
    pub context: Arc<TaskContext>,
}

/// Drains every right partition (in parallel tasks, concatenated in
/// partition order: the row order that breaks timestamp ties on every
/// path) into a [`RightSide`], the right-only ON filter applied.
async fn build(
    right: Arc<dyn ExecutionPlan>,
    spec: &WindowJoinSpec,
    plan: &FastPlan,
    context: Arc<TaskContext>,
    metrics: &WindowJoinMetrics,
) -> Result<Built> {
    let _timer = metrics.build_time.timer();
    let turn = Turn::below(&right);
    let reservation = MemoryConsumer::new("WindowJoinExec[streaming right]")
        .register(context.memory_pool());
    let filter = spec.right_filter.clone();
    let apply_filter = move |b: RecordBatch| match &filter {
        None => Ok(b),
        Some(f) => {
            let mask = f.evaluate(&b)?.into_array(b.num_rows())?;
            let Some(mask) = mask.as_boolean_opt() else {
                return exec_err!(
                    "WINDOW JOIN ON condition must be boolean, got {}",
                    mask.data_type()
                );
            };
            Ok(filter_record_batch(&b, mask)?)
        }
    };
    // Slices of one table share its buffers: count what each references,
    // not the whole buffers once per slice.
    let batches = drain_partitions(
        &right,
        &context,
        &reservation,
        batch_referenced_size,
        apply_filter,
    )
    .await?;
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    metrics.build_input_rows.add(rows);
    // The concatenated copy, then the sequence vectors.
    let batch_bytes: usize = batches.iter().map(batch_referenced_size).sum();
    reservation.try_grow(batch_bytes + rows * 16)?;
    let timeline = build_timeline(
        right.schema(),
        &spec.right_keys,
        &spec.right_ts,
        spec.scale.right_factor(),
        turn.clone(),
        batches,
        None,
    )
    .await?;
    let batch = &timeline.batch;
    let mut lanes = Vec::with_capacity(plan.columns.len());
    for (c, needs) in plan.columns.iter().zip(column_needs(plan)) {
        let values = spec.aggs[c.agg].args[0]
            .evaluate(batch)?
            .into_array(batch.num_rows())?;
        // At most: the values, a count per row, min and max keys.
        let vectors = (c.ty != ColumnType::NullsOnly) as usize
            + needs.valid as usize
            + needs.min as usize
            + needs.max as usize;
        reservation.try_grow(batch.num_rows() * 8 * vectors)?;
        lanes.push(Lane::try_new(c.ty, &values, needs)?);
    }
    let picks = plan
        .aggs
        .iter()
        .zip(&spec.aggs)
        .map(|(fast, agg)| match fast {
            crate::window_join::fast::FastAgg::Pick(..) => Ok(Some(
                agg.args[0].evaluate(batch)?.into_array(batch.num_rows())?,
            )),
            _ => Ok(None),
        })
        .collect::<Result<Vec<_>>>()?;
    let held = batch.get_array_memory_size()
        + timeline.extra_bytes()
        + lanes.iter().map(Lane::bytes).sum::<usize>();
    // (The pick arrays are usually the batch's own columns: not counted
    // again.)
    reservation.try_resize(held)?;
    metrics.build_mem_used.set(held);
    Ok(Built {
        right: Arc::new(RightSide {
            timeline,
            lanes,
            picks,
        }),
        turn,
        _reservation: reservation,
    })
}

/// One left partition's joiner: the walk, and the index path for batches
/// out of time order.
struct Joiner {
    walker: Walker,
    built: Arc<Built>,
    args: Arc<Setup>,
    reservation: MemoryReservation,
}

/// The parts of [`StreamingArgs`] a [`Joiner`] keeps.
struct Setup {
    spec: Arc<WindowJoinSpec>,
    plan: Arc<FastPlan>,
    kernels: KernelSet,
    settings: WindowJoinSettings,
    schema: SchemaRef,
    shared: Arc<StreamingShared>,
    metrics: WindowJoinMetrics,
    context: Arc<TaskContext>,
}

impl Joiner {
    async fn join(&mut self, left: RecordBatch) -> Result<RecordBatch> {
        let a = Arc::clone(&self.args);
        a.metrics.input_batches.add(1);
        a.metrics.input_rows.add(left.num_rows());
        let start = Instant::now();
        let arrays = match self.walker.join(&left)? {
            Some(arrays) => {
                self.reservation.try_resize(self.walker.state_bytes())?;
                arrays
            }
            None => {
                let index = self.index().await?;
                probe_batch(&a.plan, &a.spec, &index, a.kernels, &a.settings, &left)?
            }
        };
        let elapsed = start.elapsed();
        a.metrics.join_time.add_duration(elapsed);
        a.metrics.baseline.elapsed_compute().add_duration(elapsed);
        let mut columns = left.columns().to_vec();
        columns.extend(arrays);
        Ok(RecordBatch::try_new(Arc::clone(&a.schema), columns)?)
    }

    /// The right index over the same right rows, built on first use.
    async fn index(&self) -> Result<Arc<RightIndex>> {
        let a = &self.args;
        let batch = self.built.right.timeline.batch.clone();
        Ok(a.shared
            .index
            .get_or_try_init(|| async {
                let _timer = a.metrics.build_time.timer();
                let source = MemorySourceConfig::try_new_exec(
                    &[vec![batch.clone()]],
                    batch.schema(),
                    None,
                )?;
                let reservation = MemoryConsumer::new("WindowJoinExec[right index]")
                    .register(a.context.memory_pool());
                let how = IndexBuild {
                    spec: Arc::clone(&a.spec),
                    fast_plan: Some(Arc::clone(&a.plan)),
                    kernels: a.kernels,
                    threads: a.settings.workers,
                    gate: PhaseGate::new(self.built.turn.clone()),
                };
                let index =
                    build_right_index(source, Arc::clone(&a.context), how, reservation)
                        .await?;
                Ok::<_, DataFusionError>(Arc::new(index))
            })
            .await?
            .clone())
    }
}

/// The output stream of one left partition on the streaming path.
pub(crate) fn streaming_stream(args: StreamingArgs) -> SendableRecordBatchStream {
    let StreamingArgs {
        left,
        right,
        spec,
        plan,
        kernels,
        settings,
        schema,
        shared,
        metrics,
        context,
    } = args;
    let output = metrics.baseline.clone();
    let out_schema = Arc::clone(&schema);
    let stream = stream::once(async move {
        let built = shared
            .built
            .get_or_try_init(|| async {
                Ok::<_, DataFusionError>(Arc::new(
                    build(right, &spec, &plan, Arc::clone(&context), &metrics).await?,
                ))
            })
            .await?
            .clone();
        let reservation = MemoryConsumer::new("WindowJoinExec[streaming windows]")
            .register(context.memory_pool());
        let joiner = Joiner {
            walker: Walker::new(
                Arc::clone(&built.right),
                Arc::clone(&spec),
                Arc::clone(&plan),
            ),
            built,
            args: Arc::new(Setup {
                spec,
                plan,
                kernels,
                settings,
                schema,
                shared,
                metrics,
                context,
            }),
            reservation,
        };
        Ok::<_, DataFusionError>(stream::try_unfold(
            (left, joiner),
            |(mut left, mut joiner)| async move {
                match left.next().await {
                    None => Ok(None),
                    Some(batch) => {
                        let out = joiner.join(batch?).await?;
                        Ok(Some((out, (left, joiner))))
                    }
                }
            },
        ))
    })
    .try_flatten()
    .inspect_ok(move |b| output.record_output(b.num_rows()));
    Box::pin(RecordBatchStreamAdapter::new(out_schema, stream))
}
