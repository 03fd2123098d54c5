//! [`LipBuildKeysExec`]: the build side of a hash join whose filter a
//! [`super::LipFilterExec`] applies, passing its rows to the join while
//! keeping their join keys for that filter.
//!
//! Quickstep builds its filters from the build side's rows. DataFusion's
//! dynamic filter gives only a predicate (bounds and a membership test in
//! the join's hash table), and turning that into bits costs one membership
//! test per value of the key's range: fine for dense dimension keys, too
//! slow for a wide one (TPC-H's `l_orderkey`, 60 M values at SF 10, or a
//! partitioned join's routing by hash). With the build's keys at hand the
//! bits cost one write per build row instead, so a key whose range the
//! memory budget allows becomes bits whatever its width.
//!
//! ```text
//! HashJoinExec: (o_orderkey = l_orderkey)
//!   LipBuildKeysExec: key=o_orderkey   ← keeps o_orderkey of every build row
//!     …orders…
//!   LipFilterExec: join_filters=[l_orderkey: exact_bits …]   ← bits from those keys
//!     DataSourceExec: lineitem
//! ```

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet,
};
use datafusion::physical_plan::statistics::ChildStats;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PhysicalExpr,
    PlanProperties, RecordBatchStream, SendableRecordBatchStream, Statistics,
    StatisticsArgs,
};
use futures::{Stream, ready};
use parking_lot::Mutex;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The join keys a [`LipBuildKeysExec`] saw, shared with the
/// [`super::LipFilterExec`] that turns them into bits.
#[derive(Debug)]
pub(crate) struct BuildKeys {
    /// Partitions of the build side: the keys are all there once each has
    /// ended.
    partitions: usize,
    state: Mutex<KeysState>,
}

/// What [`BuildKeys::take`] finds.
#[derive(Debug)]
pub(crate) enum Taken {
    /// Some build partition has not ended yet.
    Running,
    /// Taken before, or some partition could not keep its keys.
    Gone,
    /// Every build key.
    Keys(Vec<ArrayRef>),
}

#[derive(Debug, Default)]
struct KeysState {
    arrays: Vec<ArrayRef>,
    ended: usize,
    /// Some partition could not keep all its keys (the pool refused them),
    /// or they were taken: there is nothing complete to take.
    incomplete: bool,
    /// The keys' memory, held until they are taken.
    reservations: Vec<MemoryReservation>,
}

impl BuildKeys {
    /// Keys of a build side of `partitions` partitions, none seen yet.
    pub(crate) fn new(partitions: usize) -> Arc<Self> {
        Arc::new(Self {
            partitions,
            state: Mutex::default(),
        })
    }

    /// Every build key, once every partition has ended, handed over once
    /// (their memory is released with them); `None` before, after, or when
    /// some partition could not keep its keys.
    pub(crate) fn take_finished(&self) -> Option<Vec<ArrayRef>> {
        match self.take() {
            Taken::Keys(keys) => Some(keys),
            Taken::Running | Taken::Gone => None,
        }
    }

    /// Every build key once every partition has ended (handed over once:
    /// their memory is released with them), whether the build still runs,
    /// or that the keys are gone (taken, or some partition could not keep
    /// them).
    pub(crate) fn take(&self) -> Taken {
        let mut state = self.state.lock();
        if state.incomplete {
            return Taken::Gone;
        }
        if state.ended != self.partitions {
            return Taken::Running;
        }
        state.incomplete = true;
        state.reservations.clear();
        Taken::Keys(std::mem::take(&mut state.arrays))
    }

    /// One partition's keys, at its end (`None`: it could not keep them).
    fn end_partition(&self, kept: Option<(Vec<ArrayRef>, MemoryReservation)>) {
        let mut state = self.state.lock();
        match kept {
            Some((arrays, reservation)) => {
                state.arrays.extend(arrays);
                state.reservations.push(reservation);
            }
            None => state.incomplete = true,
        }
        state.ended += 1;
    }
}

/// Passes its input (a hash join's build side) through unchanged and keeps
/// each batch's join key (`key`, over the input) in a shared
/// [`BuildKeys`]. Placed by [`super::JoinFilterRule`] under each join whose
/// filter a [`super::LipFilterExec`] applies.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion::datasource::memory::MemorySourceConfig;
/// use datafusion::physical_expr::expressions::col;
/// use datafusion::physical_plan::collect;
/// use datafusion::arrow::{array::Int32Array, datatypes::*, record_batch::RecordBatch};
/// use datafusion_tsjoin::join_filter::LipBuildKeysExec;
/// use std::sync::Arc;
/// let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int32, false)]));
/// let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int32Array::from(vec![1, 2]))])?;
/// let input = MemorySourceConfig::try_new_exec(&[vec![batch]], schema.clone(), None)?;
/// let keys = LipBuildKeysExec::new(input, col("k", &schema)?);
/// // Its output is its input.
/// assert_eq!(collect(Arc::new(keys), Default::default()).await?[0].num_rows(), 2);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LipBuildKeysExec {
    input: Arc<dyn ExecutionPlan>,
    key: Arc<dyn PhysicalExpr>,
    keys: Arc<BuildKeys>,
    metrics: ExecutionPlanMetricsSet,
}

impl LipBuildKeysExec {
    /// Keeps `key` (an expression over `input`) of every row of `input`.
    pub fn new(input: Arc<dyn ExecutionPlan>, key: Arc<dyn PhysicalExpr>) -> Self {
        let partitions = input.output_partitioning().partition_count();
        Self {
            input,
            key,
            keys: BuildKeys::new(partitions),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// Keeps `key` of every row of `input` in `keys` (shared with the
    /// filter that reads them).
    pub(crate) fn with_keys(
        input: Arc<dyn ExecutionPlan>,
        key: Arc<dyn PhysicalExpr>,
        keys: &Arc<BuildKeys>,
    ) -> Self {
        Self {
            input,
            key,
            keys: Arc::clone(keys),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The input.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// The join key it keeps, over the input.
    pub fn key(&self) -> &Arc<dyn PhysicalExpr> {
        &self.key
    }
}

impl DisplayAs for LipBuildKeysExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let key = super::exec::strip_indices(&self.key.to_string());
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "LipBuildKeysExec: key={key}")
            }
            DisplayFormatType::TreeRender => write!(f, "key={key}"),
        }
    }
}

impl ExecutionPlan for LipBuildKeysExec {
    fn name(&self) -> &str {
        "LipBuildKeysExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        // Its input, unchanged.
        self.input.properties()
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        vec![ChildStats::At(partition)]
    }

    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        Ok(Arc::clone(&input_stats[0]))
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        f(&self.key)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return internal_err!("LipBuildKeysExec expects one child");
        }
        // Same partitions: the filter stays linked to these keys.
        let input = children.swap_remove(0);
        if input.output_partitioning().partition_count() != self.keys.partitions {
            return Ok(Arc::new(Self::new(input, Arc::clone(&self.key))));
        }
        Ok(Arc::new(Self {
            input,
            key: Arc::clone(&self.key),
            keys: Arc::clone(&self.keys),
            metrics: self.metrics.clone(),
        }))
    }

    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        // A re-executed plan's filter is not linked to new keys (its
        // `LipFilterExec` is reset too): keep them nowhere it reads.
        Ok(Arc::new(Self::new(
            Arc::clone(&self.input),
            Arc::clone(&self.key),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, Arc::clone(&context))?;
        let reservation = MemoryConsumer::new(format!("LipBuildKeysExec[{partition}]"))
            .register(context.memory_pool());
        Ok(Box::pin(BuildKeysStream {
            input,
            key: Arc::clone(&self.key),
            keys: Arc::clone(&self.keys),
            kept: Some((Vec::new(), reservation)),
            ended: false,
            baseline: BaselineMetrics::new(&self.metrics, partition),
        }))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// One partition of a [`LipBuildKeysExec`].
struct BuildKeysStream {
    input: SendableRecordBatchStream,
    key: Arc<dyn PhysicalExpr>,
    keys: Arc<BuildKeys>,
    /// The keys so far and their memory; `None` once given up (the pool
    /// refused them) or handed over at the end.
    kept: Option<(Vec<ArrayRef>, MemoryReservation)>,
    ended: bool,
    baseline: BaselineMetrics,
}

impl BuildKeysStream {
    /// Keeps `batch`'s keys, accounted to the pool: the join concatenates
    /// its build batches, so even a key column's buffers are memory of their
    /// own here. When the pool refuses them the keys are dropped and the
    /// filter falls back to the join's predicate; the rows still pass.
    fn keep(&mut self, batch: &RecordBatch) -> Result<()> {
        let Some((arrays, reservation)) = &mut self.kept else {
            return Ok(());
        };
        let keys = self.key.evaluate(batch)?.into_array(batch.num_rows())?;
        if reservation.try_grow(keys.get_array_memory_size()).is_err() {
            self.kept = None;
            return Ok(());
        }
        arrays.push(keys);
        Ok(())
    }
}

impl Stream for BuildKeysStream {
    type Item = Result<RecordBatch>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        let next = ready!(self.input.as_mut().poll_next(cx));
        let out = match next {
            Some(Ok(batch)) => {
                let elapsed = self.baseline.elapsed_compute().clone();
                let timer = elapsed.timer();
                let kept = self.keep(&batch);
                timer.done();
                Some(kept.map(|()| batch))
            }
            None => {
                if !std::mem::replace(&mut self.ended, true) {
                    let kept = self.kept.take();
                    self.keys.end_partition(kept);
                }
                None
            }
            other => other,
        };
        self.baseline.record_poll(Poll::Ready(out))
    }
}

impl RecordBatchStream for BuildKeysStream {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int32Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::physical_expr::expressions::col;

    #[tokio::test]
    async fn keeps_every_partitions_keys_once_all_end() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int32, true)]));
        let batch = |v: Vec<Option<i32>>| {
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![Arc::new(Int32Array::from(v)) as ArrayRef],
            )
            .unwrap()
        };
        let input = MemorySourceConfig::try_new_exec(
            &[
                vec![batch(vec![Some(3), None]), batch(vec![Some(7)])],
                vec![batch(vec![Some(1)])],
            ],
            Arc::clone(&schema),
            None,
        )
        .unwrap();
        let exec = Arc::new(LipBuildKeysExec::new(input, col("k", &schema).unwrap()));
        let keys = Arc::clone(&exec.keys);
        assert!(keys.take_finished().is_none());
        let ctx = Arc::new(TaskContext::default());
        let mut first = exec.execute(0, Arc::clone(&ctx)).unwrap();
        while let Some(b) = futures::StreamExt::next(&mut first).await {
            b.unwrap();
        }
        // One of two partitions ended: not finished.
        assert!(keys.take_finished().is_none());
        datafusion::physical_plan::common::collect(exec.execute(1, ctx).unwrap())
            .await
            .unwrap();
        let arrays = keys.take_finished().expect("both partitions ended");
        let seen: Vec<Option<i32>> = arrays
            .iter()
            .flat_map(|a| {
                a.as_any()
                    .downcast_ref::<Int32Array>()
                    .unwrap()
                    .iter()
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(seen, vec![Some(3), None, Some(7), Some(1)]);
        // Handed over once, their memory with them.
        assert!(keys.take_finished().is_none());
        assert_eq!(ctx_pool_reserved(&keys), 0);
    }

    fn ctx_pool_reserved(keys: &BuildKeys) -> usize {
        keys.state
            .lock()
            .reservations
            .iter()
            .map(|r| r.size())
            .sum()
    }

    /// Keys the pool refuses are dropped, not an error: the rows pass, and
    /// there is nothing to take.
    #[tokio::test]
    async fn keys_over_the_memory_limit_are_given_up() {
        use datafusion::execution::memory_pool::GreedyMemoryPool;
        use datafusion::execution::runtime_env::RuntimeEnvBuilder;
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int32, true)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int32Array::from_iter_values(0..100_000)) as ArrayRef],
        )
        .unwrap();
        let input =
            MemorySourceConfig::try_new_exec(&[vec![batch]], Arc::clone(&schema), None)
                .unwrap();
        let exec = Arc::new(LipBuildKeysExec::new(input, col("k", &schema).unwrap()));
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(GreedyMemoryPool::new(64 << 10)))
            .build_arc()
            .unwrap();
        let ctx = Arc::new(TaskContext::default().with_runtime(runtime));
        let out =
            datafusion::physical_plan::common::collect(exec.execute(0, ctx).unwrap())
                .await
                .unwrap();
        assert_eq!(out.iter().map(|b| b.num_rows()).sum::<usize>(), 100_000);
        assert!(exec.keys.take_finished().is_none());
    }
}
