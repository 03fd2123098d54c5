//! [`BuiltTimeline`]: a right input drained into a [`Timeline`] under a
//! memory reservation, shared by every partition of one operator
//! execution. HORIZON JOIN builds one per right table, ASOF JOIN one; the
//! streaming WINDOW JOIN drains its right input with [`drain_partitions`].

use super::timeline::{Timeline, TimelineBuild};
use crate::priority::{PhaseGate, Turn};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, PhysicalExpr};
use futures::{StreamExt, TryStreamExt};
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

/// A right side, built once per execution, with the memory it holds.
///
/// ```ignore
/// let built = BuiltTimeline::build("HorizonJoinExec[right 0]", right, &keys, &ts, 1, None, ctx).await?;
/// built.ensure_index()?; // before a binary-search lookup
/// ```
pub(crate) struct BuiltTimeline {
    /// The time-ordered right rows.
    pub timeline: Timeline,
    /// Rows the right input produced (the build's input rows).
    pub input_rows: usize,
    reservation: Mutex<MemoryReservation>,
}

/// Builds the timeline of `batches` (`factor`: common ticks per right
/// tick) on a blocking thread: concatenating, interning and sorting a whole
/// right side is CPU work of its own, not for a tokio worker that other
/// queries' batches need. It pauses for higher priorities at `turn`, and
/// dropping the future stops it at its next pause point.
pub(crate) async fn build_timeline(
    schema: SchemaRef,
    keys: &[Arc<dyn PhysicalExpr>],
    ts: &Arc<dyn PhysicalExpr>,
    factor: i64,
    turn: Option<Turn>,
    batches: Vec<RecordBatch>,
    keep: Option<Vec<usize>>,
) -> Result<Timeline> {
    let gate = PhaseGate::new(turn);
    let (keys, ts) = (keys.to_vec(), Arc::clone(ts));
    let _cancel = gate.cancel_on_drop();
    SpawnedTask::spawn_blocking(move || {
        let how = TimelineBuild {
            schema,
            keys: &keys,
            ts: &ts,
            factor,
            gate: &gate,
            keep: keep.as_deref(),
        };
        Timeline::try_new(how, &batches)
    })
    .join()
    .await
    .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))?
}

impl BuiltTimeline {
    /// Drains every partition of `right` (in parallel tasks) into a
    /// timeline; `factor` is common ticks per right tick. Dropping the
    /// future stops the tasks (`SpawnedTask` aborts on drop).
    pub(crate) async fn build(
        name: &str,
        right: Arc<dyn ExecutionPlan>,
        keys: &[Arc<dyn PhysicalExpr>],
        ts: &Arc<dyn PhysicalExpr>,
        factor: i64,
        keep: Option<Vec<usize>>,
        context: Arc<TaskContext>,
    ) -> Result<Self> {
        let reservation = MemoryConsumer::new(name).register(context.memory_pool());
        let turn = Turn::below(&right);
        let batches = drain_partitions(
            &right,
            &context,
            &reservation,
            RecordBatch::get_array_memory_size,
            Ok,
        )
        .await?;
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        // The concatenated copy, then the sequence vectors.
        let bytes: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
        reservation.try_grow(bytes + rows * 16)?;
        let timeline =
            build_timeline(right.schema(), keys, ts, factor, turn, batches, keep).await?;
        reservation
            .resize(timeline.batch.get_array_memory_size() + timeline.extra_bytes());
        Ok(Self {
            timeline,
            input_rows: rows,
            reservation: Mutex::new(reservation),
        })
    }

    /// Bytes reserved now.
    pub(crate) fn held_bytes(&self) -> usize {
        self.reservation.lock().unwrap().size()
    }

    /// Reserves `bytes` more for data derived from the timeline and held
    /// as long as it is (a `Resources exhausted` error when the pool has
    /// no room).
    pub(crate) fn try_grow(&self, bytes: usize) -> Result<()> {
        self.reservation.lock().unwrap().try_grow(bytes)
    }

    /// Reserves the per-key index's memory and builds it, once for all
    /// partitions (under the lock, so a partition that waited finds it).
    pub(crate) fn ensure_index(&self) -> Result<()> {
        let tl = &self.timeline;
        if !tl.has_index() {
            let r = self.reservation.lock().unwrap();
            if !tl.has_index() {
                r.try_grow(tl.index_bytes())?;
                tl.build_index();
            }
        }
        Ok(())
    }
}

/// Drains every partition of `right` in parallel tasks, each batch passed
/// through `map` first, and returns the batches concatenated in partition
/// order (the row order that breaks time ties). Every batch is reserved in
/// `reservation` as `size` measures it before the next partition is read.
/// Dropping the future stops the tasks (`SpawnedTask` aborts on drop).
///
/// ```ignore
/// let batches = drain_partitions(&right, &ctx, &reservation, RecordBatch::get_array_memory_size, Ok).await?;
/// ```
pub(crate) async fn drain_partitions<F>(
    right: &Arc<dyn ExecutionPlan>,
    context: &Arc<TaskContext>,
    reservation: &MemoryReservation,
    size: fn(&RecordBatch) -> usize,
    map: F,
) -> Result<Vec<RecordBatch>>
where
    F: Fn(RecordBatch) -> Result<RecordBatch> + Clone + Send + Sync + 'static,
{
    let partitions = right.output_partitioning().partition_count();
    let tasks: Vec<SpawnedTask<Result<Vec<RecordBatch>>>> = (0..partitions)
        .map(|p| {
            let stream = right.execute(p, Arc::clone(context));
            let map = map.clone();
            SpawnedTask::spawn(async move {
                stream?
                    .map(|b| b.and_then(&map))
                    .try_collect::<Vec<_>>()
                    .await
            })
        })
        .collect();
    let mut batches = vec![];
    for t in tasks {
        let part = t
            .join()
            .await
            .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))??;
        for b in &part {
            reservation.try_grow(size(b))?;
        }
        batches.extend(part);
    }
    Ok(batches)
}

/// What the partitions of one temporal join execution share: the right
/// side `T`, built once by whichever partition asks first (the others wait
/// for it). A new operator instance (`reset_state`, new children) starts
/// with an empty one.
///
/// ```ignore
/// let built = shared.get_or_build(|| BuiltTimeline::build(name, right, &keys, &ts, 1, None, ctx)).await?;
/// ```
pub(crate) struct SharedBuild<T> {
    built: OnceCell<Arc<T>>,
}

impl<T> Default for SharedBuild<T> {
    fn default() -> Self {
        Self {
            built: OnceCell::new(),
        }
    }
}

impl<T> std::fmt::Debug for SharedBuild<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("SharedState")
    }
}

impl<T> SharedBuild<T> {
    /// The built right side, running `build` if no partition has yet.
    pub(crate) async fn get_or_build<F, Fut>(&self, build: F) -> Result<Arc<T>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let built = self
            .built
            .get_or_try_init(|| async {
                Ok::<_, DataFusionError>(Arc::new(build().await?))
            })
            .await?;
        Ok(Arc::clone(built))
    }
}
