//! The two phases of [`InlineAggregateExec`]: partial tables per input
//! partition, then a hash-partitioned merge per output partition.
//!
//! Phase 1 aggregates while that reduces the data; once a partition has
//! read [`PROBE_ROWS`] rows and holds more than [`SPOOL_RATIO`] groups per
//! row (keys nearly all distinct), merging its table later would intern
//! every key twice, so it stops growing the table and passes the rest of
//! its rows on, split by output partition, for phase 2 to aggregate once.

use super::accumulate::{InlineAgg, State, counts_array};
use super::exec::InlineAggregateExec;
use super::dictionary_scan::Work;
use super::keys::GroupKeys;
use crate::config::TsJoinOptions;
use datafusion::arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::hash_utils::create_hashes;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::physical_plan::metrics::{BaselineMetrics, MetricBuilder, Time};
use datafusion::physical_plan::repartition::REPARTITION_RANDOM_STATE;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, PhysicalExpr, SendableRecordBatchStream};
use futures::{StreamExt, TryStreamExt, stream};
use std::sync::Arc;

/// Rows phase 1 aggregates before judging whether aggregating pays (as
/// DataFusion's `skip_partial_aggregation_probe_rows_threshold`).
pub const PROBE_ROWS: usize = 100_000;
/// Groups per row above which phase 1 passes rows on instead (as
/// DataFusion's `skip_partial_aggregation_probe_ratio_threshold`): keys
/// drawn from a range as wide as the rows read still repeat a third of the
/// time and keep aggregating.
pub const SPOOL_RATIO: f64 = 0.8;

/// What both phases need of the operator.
pub(super) struct Spec {
    group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    key_types: Vec<DataType>,
    aggs: Vec<InlineAgg>,
    arg_types: Vec<Option<DataType>>,
    outputs: usize,
}

/// Rows passed on by phase 1: evaluated keys and aggregate arguments.
#[derive(Debug)]
struct Rows {
    keys: Vec<ArrayRef>,
    args: Vec<Option<ArrayRef>>,
}

impl Rows {
    fn len(&self) -> usize {
        self.keys.first().map_or(0, |k| k.len())
    }

    fn memory_size(&self) -> usize {
        self.keys.iter().chain(self.args.iter().flatten()).map(|a| a.get_array_memory_size()).sum()
    }

    fn take(&self, idx: &UInt32Array) -> Result<Rows> {
        let t = |a: &ArrayRef| -> Result<ArrayRef> { Ok(take(a.as_ref(), idx, None)?) };
        Ok(Rows {
            keys: self.keys.iter().map(t).collect::<Result<_>>()?,
            args: self.args.iter().map(|a| a.as_ref().map(t).transpose()).collect::<Result<_>>()?,
        })
    }
}

/// Groups with their keys, aggregate states and row counts.
pub(super) struct Table {
    pub(super) keys: GroupKeys,
    states: Vec<State>,
    pub(super) counts: Vec<u64>,
    /// Scratch: the group ids of the last interned rows.
    pub(super) ids: Vec<u32>,
}

impl Table {
    pub(super) fn new(spec: &Spec) -> Result<Self> {
        let states =
            spec.aggs.iter().zip(&spec.arg_types).map(|(a, t)| State::new(a, t.as_ref())).collect::<Result<_>>()?;
        Ok(Self { keys: GroupKeys::try_new(&spec.key_types)?, states, counts: vec![], ids: vec![] })
    }

    pub(super) fn len(&self) -> usize {
        self.counts.len()
    }

    pub(super) fn memory_size(&self) -> usize {
        self.keys.memory_size()
            + self.states.iter().map(State::memory_size).sum::<usize>()
            + self.counts.capacity() * 8
            + self.ids.capacity() * 4
    }

    /// Makes room for `groups` groups in all, so that no state vector
    /// grows (and copies) batch by batch.
    pub(super) fn reserve(&mut self, groups: usize) {
        self.keys.reserve_groups(groups);
        self.counts.reserve(groups.saturating_sub(self.counts.len()));
        self.states.iter_mut().for_each(|s| s.reserve(groups));
    }

    /// Aggregates rows in (`expected`: rows to come in all, 0 if unknown).
    fn update(&mut self, rows: &Rows, expected: usize) -> Result<()> {
        self.keys.intern(&rows.keys, &mut self.ids, &mut self.counts, expected)?;
        self.update_states(&rows.args)
    }

    /// Folds each aggregate's argument into its state, for rows whose group
    /// ids are in `self.ids` (and already counted).
    pub(super) fn update_states(&mut self, args: &[Option<ArrayRef>]) -> Result<()> {
        for (state, arg) in self.states.iter_mut().zip(args) {
            state.update(&self.ids, arg.as_ref(), &self.counts)?;
        }
        Ok(())
    }

    /// Merges groups `from` of a finished table (`keys` emitted).
    fn merge(&mut self, other: &Partial, from: &[u32], expected: usize) -> Result<()> {
        let keys = if from.len() == other.counts.len() {
            other.keys.clone()
        } else {
            let idx = UInt32Array::from(from.to_vec());
            other.keys.iter().map(|k| Ok(take(k.as_ref(), &idx, None)?)).collect::<Result<Vec<_>>>()?
        };
        let mut scratch = vec![];
        self.keys.intern(&keys, &mut self.ids, &mut scratch, expected)?;
        self.counts.resize(self.keys.len(), 0);
        for (&f, &t) in from.iter().zip(&self.ids) {
            self.counts[t as usize] += other.counts[f as usize];
        }
        for (state, theirs) in self.states.iter_mut().zip(&other.states) {
            state.merge(theirs, from, &self.ids, &other.counts, &self.counts);
        }
        Ok(())
    }
}

/// One input partition's result: its table (keys emitted, and each group's
/// output partition) and the rows it passed on, by output partition.
#[derive(Debug)]
pub(crate) struct Partial {
    keys: Vec<ArrayRef>,
    states: Vec<State>,
    counts: Vec<u64>,
    /// Output partition of each group (empty with one output partition).
    partition: Vec<u32>,
    spooled: Vec<Vec<Rows>>,
    _reservation: MemoryReservation,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("groups", &self.len()).finish()
    }
}

pub(crate) fn inline_aggregate_stream(
    exec: &InlineAggregateExec,
    partition: usize,
    context: Arc<TaskContext>,
) -> Result<SendableRecordBatchStream> {
    let input_schema = exec.input.schema();
    let spec = Arc::new(Spec {
        group_exprs: exec.group_exprs.iter().map(|(e, _)| Arc::clone(e)).collect(),
        key_types: exec.group_exprs.iter().map(|(e, _)| e.data_type(&input_schema)).collect::<Result<_>>()?,
        aggs: exec.aggs.clone(),
        arg_types: exec
            .aggs
            .iter()
            .map(|a| a.arg.as_ref().map(|e| e.data_type(&input_schema)).transpose())
            .collect::<Result<_>>()?,
        outputs: exec.properties().output_partitioning().partition_count(),
    });
    let baseline = BaselineMetrics::new(&exec.metrics, partition);
    let phase1_time: Time = MetricBuilder::new(&exec.metrics).subset_time("phase1_time", partition);
    let merge_time: Time = MetricBuilder::new(&exec.metrics).subset_time("merge_time", partition);
    let (cell, input, schema) = (Arc::clone(&exec.partials), Arc::clone(&exec.input), Arc::clone(&exec.schema));
    let use_codes = context
        .session_config()
        .options()
        .extensions
        .get::<TsJoinOptions>()
        .is_none_or(|o| o.inline_aggregate_dictionary_scan);
    let dictionary = exec.dictionary.clone().filter(|_| use_codes);
    let metrics = exec.metrics.clone();
    let code_rows = MetricBuilder::new(&exec.metrics).counter("dictionary_scan_rows", partition);
    let out_schema = Arc::clone(&schema);
    let batch_size = context.session_config().batch_size();
    let stream = stream::once(async move {
        let partials = cell
            .get_or_try_init(|| async {
                let _timer = phase1_time.timer();
                let work = match &dictionary {
                    Some(scan) => scan.prepare(&context, &metrics).await?.map(Arc::new),
                    None => None,
                };
                // One task per input partition (spawned so partitions
                // aggregate in parallel; dropping the stream aborts them):
                // row groups from the files' codes when the dictionary scan
                // took over, else the input partition's batches.
                let mut tasks = vec![];
                for p in 0..input.output_partitioning().partition_count() {
                    let reservation =
                        MemoryConsumer::new(format!("InlineAggregateExec[{p}]")).register(context.memory_pool());
                    let spec = Arc::clone(&spec);
                    tasks.push(match &work {
                        Some(work) => SpawnedTask::spawn(scan_partition(Arc::clone(work), spec, batch_size, reservation)),
                        None => {
                            let stream = input.execute(p, Arc::clone(&context))?;
                            SpawnedTask::spawn(async move { Ok((0, aggregate_partition(stream, spec, reservation).await?)) })
                        }
                    });
                }
                let mut partials = Vec::with_capacity(tasks.len());
                for task in tasks {
                    let (rows, partial) = task.join().await.map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))??;
                    code_rows.add(rows);
                    partials.push(partial);
                }
                Ok::<_, DataFusionError>(Arc::new(partials))
            })
            .await?
            .clone();
        let reservation =
            MemoryConsumer::new(format!("InlineAggregateExec[merge {partition}]")).register(context.memory_pool());
        let task = SpawnedTask::spawn_blocking(move || {
            let _timer = merge_time.timer();
            merge(&partials, &spec, partition, &schema, batch_size, &reservation)
        });
        let batches = task.join().await.map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))??;
        Ok::<_, DataFusionError>(stream::iter(batches.into_iter().map(Ok)))
    })
    .try_flatten()
    .inspect_ok(move |b| baseline.record_output(b.num_rows()));
    Ok(Box::pin(RecordBatchStreamAdapter::new(out_schema, stream)))
}

fn eval(expr: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Result<ArrayRef> {
    expr.evaluate(batch)?.into_array(batch.num_rows())
}

/// Phase 1 over one input partition.
async fn aggregate_partition(
    mut input: SendableRecordBatchStream,
    spec: Arc<Spec>,
    reservation: MemoryReservation,
) -> Result<Partial> {
    let mut table = Table::new(&spec)?;
    let mut spooled: Vec<Vec<Rows>> = (0..spec.outputs).map(|_| vec![]).collect();
    let (mut seen, mut spooled_size, mut spooling) = (0usize, 0usize, false);
    while let Some(batch) = input.next().await {
        let batch = batch?;
        let rows = Rows {
            keys: spec.group_exprs.iter().map(|e| eval(e, &batch)).collect::<Result<_>>()?,
            args: spec.aggs.iter().map(|a| a.arg.as_ref().map(|e| eval(e, &batch)).transpose()).collect::<Result<_>>()?,
        };
        if spooling {
            for (out, part) in spooled.iter_mut().zip(split(rows, spec.outputs)?) {
                spooled_size += part.memory_size();
                out.push(part);
            }
        } else {
            seen += rows.len();
            table.update(&rows, 0)?;
            spooling = seen >= PROBE_ROWS && table.len() as f64 > SPOOL_RATIO * seen as f64;
        }
        reservation.try_resize(table.memory_size() + spooled_size)?;
    }
    finish(table, &spec, spooled, reservation)
}

/// Phase 1 from dictionary codes: row groups from `work` until none is
/// left. Returns the rows read and the partial table.
async fn scan_partition(
    work: Arc<Work>,
    spec: Arc<Spec>,
    batch_size: usize,
    reservation: MemoryReservation,
) -> Result<(usize, Partial)> {
    let mut table = Table::new(&spec)?;
    let rows = work.run(&mut table, batch_size, &reservation).await?;
    let none = (0..spec.outputs).map(|_| vec![]).collect();
    Ok((rows, finish(table, &spec, none, reservation)?))
}

/// A finished phase-1 table and the rows it passed on (by output
/// partition) as a [`Partial`].
fn finish(mut table: Table, spec: &Spec, spooled: Vec<Vec<Rows>>, reservation: MemoryReservation) -> Result<Partial> {
    let keys = table.keys.emit()?;
    let partition = if spec.outputs > 1 { output_partitions(&keys, table.len(), spec.outputs)? } else { vec![] };
    Ok(Partial { keys, states: table.states, counts: table.counts, partition, spooled, _reservation: reservation })
}

/// Output partition of each row of `keys`, as DataFusion's hash
/// repartitioning on the group columns chooses it.
fn output_partitions(keys: &[ArrayRef], rows: usize, outputs: usize) -> Result<Vec<u32>> {
    let mut hashes = vec![0u64; rows];
    create_hashes(keys, REPARTITION_RANDOM_STATE.random_state(), &mut hashes)?;
    Ok(hashes.into_iter().map(|h| (h % outputs as u64) as u32).collect())
}

/// Splits rows by output partition.
fn split(rows: Rows, outputs: usize) -> Result<Vec<Rows>> {
    if outputs == 1 {
        return Ok(vec![rows]);
    }
    let mut idx: Vec<Vec<u32>> = vec![vec![]; outputs];
    for (i, p) in output_partitions(&rows.keys, rows.len(), outputs)?.into_iter().enumerate() {
        idx[p as usize].push(i as u32);
    }
    idx.into_iter().map(|i| rows.take(&UInt32Array::from(i))).collect()
}

/// Phase 2 for output partition `p`: merges the partial tables' groups that
/// belong to it, aggregates the rows passed on to it, and emits the result
/// in batches of `batch_size` rows.
fn merge(
    partials: &[Partial],
    spec: &Spec,
    p: usize,
    schema: &SchemaRef,
    batch_size: usize,
    reservation: &MemoryReservation,
) -> Result<Vec<RecordBatch>> {
    let spooled = || partials.iter().flat_map(|pt| &pt.spooled[p]);
    // One input partition that kept aggregating, one output: its table is
    // the answer.
    if let [only] = partials
        && spec.outputs == 1
        && only.spooled[0].is_empty()
    {
        return emit(schema, &spec.aggs, only.keys.clone(), only.states.clone(), only.counts.clone(), batch_size);
    }
    let mine = |pt: &Partial| -> Vec<u32> {
        let all = 0..pt.counts.len() as u32;
        if spec.outputs == 1 { all.collect() } else { all.filter(|&g| pt.partition[g as usize] as usize == p).collect() }
    };
    let from: Vec<Vec<u32>> = partials.iter().map(mine).collect();
    let expected = from.iter().map(Vec::len).sum::<usize>() + spooled().map(Rows::len).sum::<usize>();
    let mut table = Table::new(spec)?;
    // `expected` bounds the groups; phase 1 passed rows on only where they
    // were nearly all distinct, so it is close.
    table.reserve(expected);
    for (partial, from) in partials.iter().zip(&from) {
        if !from.is_empty() {
            table.merge(partial, from, expected)?;
            reservation.try_resize(table.memory_size())?;
        }
    }
    for rows in spooled() {
        table.update(rows, expected)?;
        reservation.try_resize(table.memory_size())?;
    }
    let keys = table.keys.emit()?;
    emit(schema, &spec.aggs, keys, table.states, table.counts, batch_size)
}

/// The output rows of a table: keys then one column per aggregate.
fn emit(
    schema: &SchemaRef,
    aggs: &[InlineAgg],
    keys: Vec<ArrayRef>,
    states: Vec<State>,
    counts: Vec<u64>,
    batch_size: usize,
) -> Result<Vec<RecordBatch>> {
    if counts.is_empty() {
        return Ok(vec![]);
    }
    // `count(*)` columns (`None` here) are the group counts themselves,
    // taken over once the other aggregates no longer need them.
    let evaluated = aggs
        .iter()
        .zip(states)
        .map(|(agg, state)| match state {
            State::CountStar => Ok(None),
            state => state.evaluate(agg, &counts).map(Some),
        })
        .collect::<Result<Vec<_>>>()?;
    let counts = counts_array(counts);
    let mut columns = keys;
    columns.extend(evaluated.into_iter().map(|c| c.unwrap_or_else(|| Arc::clone(&counts))));
    let batch = RecordBatch::try_new(Arc::clone(schema), columns)?;
    let batch_size = batch_size.max(1);
    Ok((0..batch.num_rows()).step_by(batch_size).map(|s| batch.slice(s, batch_size.min(batch.num_rows() - s))).collect())
}
