//! The two phases of [`InlineAggregateExec`]: partial tables per input
//! partition, then a hash-partitioned merge per output partition.
//!
//! Phase 1 aggregates while that reduces the data; once a partition has
//! read `PROBE_ROWS` rows and holds more than [`SPOOL_RATIO`] groups per
//! row (keys nearly all distinct), merging its table later would intern
//! every key twice, so it stops growing the table and passes the rest of
//! its rows on, split by output partition, for phase 2 to aggregate once.
//! Those rows stream to the output partitions while phase 1 runs (one
//! unbounded queue each, accounted in the memory pool), so phase 2
//! aggregates them alongside phase 1 rather than after it; each output
//! partition then merges its share of the phase-1 tables.

use super::accumulate::{InlineAgg, State, counts_array};
use super::dictionary_scan::{DictionaryScan, Work};
use super::exhausted::{Exhausted, Released};
use super::fallback::{Fallback, Next, PROBE_ROWS, Probe};
use super::group_keys::KeyShape;
use super::metrics::InlineAggregateMetrics;
use super::spec::AggregateSpec;
use super::table::{Partial, Phase1Task, Rows, Table};
use datafusion::arrow::array::{ArrayRef, BooleanArray, RecordBatch, UInt32Array};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::compute::kernels::boolean::{and, is_not_null};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::hash_utils::create_hashes;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::stats::Precision;
use datafusion::common::{
    DataFusionError, Result, exec_datafusion_err, internal_datafusion_err,
};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, Time};
use datafusion::physical_plan::repartition::REPARTITION_RANDOM_STATE;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    ExecutionPlan, ExecutionPlanProperties, PhysicalExpr, SendableRecordBatchStream,
};
use futures::{
    StreamExt, TryStreamExt,
    stream::{self, BoxStream},
};
use parking_lot::Mutex;
use std::sync::Arc;
use tokio::sync::{OnceCell, mpsc};

/// Groups per row above which phase 1 passes rows on instead (as
/// DataFusion's `skip_partial_aggregation_probe_ratio_threshold`): keys
/// drawn from a range as wide as the rows read still repeat a third of the
/// time and keep aggregating.
pub const SPOOL_RATIO: f64 = 0.8;

/// What a refusal of the fallback plan run over the memory limit says.
const EXHAUSTED_CONTEXT: &str = "InlineAggregateExec went over the memory limit and \
    ran DataFusion's spilling aggregate instead, which failed too";

/// Largest size hint, in groups, for an output partition's table of
/// passed-on rows.
const MAX_ROWS_HINT: usize = 1 << 22;

/// Phase 1 of one execution, shared by its output partitions: the running
/// tasks, the queues of rows they pass on, and their tables once done.
pub(crate) struct Phase1 {
    /// Per output partition, the receiving end of its queue (taken by the
    /// partition's stream).
    queues: Mutex<Vec<Option<mpsc::UnboundedReceiver<Rows>>>>,
    /// Per output partition, the memory its queued rows hold.
    queued: Vec<MemoryReservation>,
    /// The tasks, until one output partition joins them.
    tasks: Mutex<Vec<Phase1Task>>,
    /// The tables once every task is done, or the first task's error (kept
    /// for every output partition: the query fails with it, whichever
    /// partition reports first).
    partials: OnceCell<std::result::Result<Released<Vec<Partial>>, Arc<DataFusionError>>>,
    started: std::time::Instant,
    /// Input rows per output partition by the input's statistics (0 when
    /// unknown): the size hint for tables of passed-on rows.
    rows_hint: usize,
    /// The decision to fall back to DataFusion's aggregate, when the
    /// operator may.
    fallback: Option<Arc<Fallback>>,
    /// DataFusion's aggregate to run when the memory pool refuses the
    /// inline tables, when the operator has it.
    exhausted: Option<Exhausted>,
    /// Cloned by everything that holds inline state (phase-1 tasks, output
    /// partitions' inline paths, merges): one count left means all is
    /// freed.
    holders: Arc<()>,
}

impl Phase1 {
    /// Frees what the inline path holds for the fallback plan run when over
    /// the memory limit: stops the phase-1 tasks (their tables are dropped)
    /// and releases the finished tables (once merges in flight are done).
    ///
    /// Then waits (up to a second, yielding) until everything holding
    /// inline state has dropped it, so that DataFusion's aggregate gets the
    /// memory: aborted tasks and the other output partitions' inline paths
    /// end at their next poll. The wait is bounded because a consumer may
    /// not poll the other partitions until this one is done.
    async fn release(&self) {
        drop(std::mem::take(&mut *self.tasks.lock()));
        if let Some(Ok(partials)) = self.partials.get() {
            partials.release();
        }
        // Queues no output partition took: their rows go now.
        let untaken: Vec<_> = self.queues.lock().iter_mut().map(Option::take).collect();
        for (queue, reservation) in untaken.into_iter().zip(&self.queued) {
            if queue.is_some() {
                drop(queue);
                reservation.free();
            }
        }
        let start = std::time::Instant::now();
        while Arc::strong_count(&self.holders) > 1
            && start.elapsed() < std::time::Duration::from_secs(1)
        {
            // Sleep, not yield: yielding would spin a worker the freed tasks need.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        // Every queue's receiver is gone with its holder: so are its rows.
        if Arc::strong_count(&self.holders) == 1 {
            for reservation in &self.queued {
                reservation.free();
            }
        }
    }
}

impl std::fmt::Debug for Phase1 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Phase1")
            .field("outputs", &self.queued.len())
            .finish()
    }
}

/// Where phase 1 sends the rows it passes on.
#[derive(Clone)]
struct Senders {
    queues: Vec<mpsc::UnboundedSender<Rows>>,
    phase1: std::sync::Weak<Phase1>,
}

impl Senders {
    /// Queues rows for their output partitions, accounting their memory
    /// (an over-budget queue is an error, as any buffer here).
    fn send(&self, parts: Vec<Rows>) -> Result<()> {
        let Some(phase1) = self.phase1.upgrade() else {
            return Ok(());
        };
        for ((queue, reservation), part) in
            self.queues.iter().zip(&phase1.queued).zip(parts)
        {
            if part.len() > 0 {
                reservation.try_grow(part.memory_size())?;
                // A closed queue: its output partition's stream is gone.
                let _ = queue.send(part);
            }
        }
        Ok(())
    }
}

/// One execution of an [`InlineAggregateExec`](super::InlineAggregateExec):
/// the phase 1 its output partitions share, and which partitions have
/// joined it. A partition executed again starts a new run (a plan may be
/// executed more than once).
#[derive(Debug, Default)]
pub(super) struct Run {
    phase1: Arc<OnceCell<Arc<Phase1>>>,
    joined: Vec<bool>,
}

impl Run {
    /// The phase 1 output partition `p` of `n` joins.
    pub(super) fn join(&mut self, p: usize, n: usize) -> Arc<OnceCell<Arc<Phase1>>> {
        if self.joined.get(p).copied().unwrap_or(false) {
            *self = Run::default();
        }
        self.joined.resize(n, false);
        self.joined[p] = true;
        Arc::clone(&self.phase1)
    }
}

/// Everything one output partition's stream needs.
pub(super) struct StreamArgs {
    pub input: Arc<dyn ExecutionPlan>,
    pub spec: Arc<AggregateSpec>,
    /// Output schema: keys, then one column per aggregate.
    pub schema: SchemaRef,
    /// Phase 1 from dictionary codes, when it applies.
    pub dictionary: Option<DictionaryScan>,
    /// The replaced aggregate, run instead when the groups are many.
    pub fallback: Option<Arc<dyn ExecutionPlan>>,
    /// The replaced aggregate, run instead when over the memory limit.
    pub on_exhausted: Option<Arc<dyn ExecutionPlan>>,
    /// The run's phase 1, shared by the output partitions.
    pub phase1: Arc<OnceCell<Arc<Phase1>>>,
    /// The operator's metrics (the dictionary scan registers its own).
    pub metrics_set: ExecutionPlanMetricsSet,
    pub metrics: InlineAggregateMetrics,
    pub partition: usize,
    pub context: Arc<TaskContext>,
}

/// Output partition `partition`'s stream: starts phase 1 if no partition
/// has yet, then merges and emits this partition's share of the groups (or
/// runs the fallback plan's partition when phase 1 decided so).
pub(super) fn inline_aggregate_stream(args: StreamArgs) -> SendableRecordBatchStream {
    let StreamArgs {
        input,
        spec,
        schema,
        dictionary,
        fallback: template,
        on_exhausted,
        phase1: cell,
        metrics_set: metrics,
        metrics: partition_metrics,
        partition,
        context,
    } = args;
    let InlineAggregateMetrics {
        aggregation_time: phase1_time,
        emitting_time: merge_time,
        dictionary_scan_rows: code_rows,
        fallback: fell_back,
        baseline,
    } = partition_metrics;
    let out_schema = Arc::clone(&schema);
    let batch_size = context.session_config().batch_size();
    // Groups a filter the dictionary scan took over would have dropped.
    let non_null_keys = dictionary
        .as_ref()
        .map(|d| d.non_null_keys().to_vec())
        .unwrap_or_default();
    let (restart_cell, restart_context, restart_metric) =
        (Arc::clone(&cell), Arc::clone(&context), fell_back.clone());
    let inline = async move {
        let phase1 = cell
            .get_or_try_init(|| {
                start(
                    &input,
                    dictionary.as_ref(),
                    template,
                    on_exhausted,
                    &spec,
                    &context,
                    &metrics,
                )
            })
            .await?
            .clone();
        // Held while this partition holds inline state (see `release`).
        let holding = Arc::clone(&phase1.holders);
        if let Some(fallback) = &phase1.fallback
            && fallback.decision().await
        {
            fell_back.add(1);
            let tasks = || std::mem::take(&mut *phase1.tasks.lock());
            let out: BoxStream<'static, Result<RecordBatch>> = fallback
                .plan(tasks)
                .await?
                .execute(partition, context)?
                .boxed();
            return Ok(out);
        }
        let queue = phase1.queues.lock()[partition].take().ok_or_else(|| {
            exec_datafusion_err!(
                "InlineAggregateExec: partition {partition} executed twice"
            )
        })?;
        let reservation =
            MemoryConsumer::new(format!("InlineAggregateExec[merge {partition}]"))
                .register(context.memory_pool());
        let table =
            aggregate_queue(queue, &phase1, &spec, partition, &merge_time, &reservation)
                .await?;
        let partials = phase1
            .partials
            .get_or_init(|| async {
                let tasks = std::mem::take(&mut *phase1.tasks.lock());
                if tasks.is_empty() {
                    // Taken by an output partition whose stream was dropped
                    // while it joined them.
                    return Err(Arc::new(exec_datafusion_err!("InlineAggregateExec: phase 1 was cancelled")));
                }
                let joined = async {
                    let mut partials = Vec::with_capacity(tasks.len());
                    for task in tasks {
                        let (rows, partial) =
                            task.join().await.map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))??;
                        code_rows.add(rows);
                        partials.push(partial.ok_or_else(|| {
                            internal_datafusion_err!("InlineAggregateExec: a phase-1 task handed over on an inline run")
                        })?);
                    }
                    phase1_time.add_duration(phase1.started.elapsed());
                    Ok::<_, DataFusionError>(Released::new(partials))
                };
                joined.await.map_err(Arc::new)
            })
            .await
            .as_ref()
            .map_err(|e| DataFusionError::Shared(Arc::clone(e)))?
            .get()?;
        let task = SpawnedTask::spawn_blocking(move || {
            let _holding = holding;
            let _timer = merge_time.timer();
            merge(
                &partials,
                table,
                &spec,
                partition,
                &schema,
                batch_size,
                &reservation,
            )
        });
        let batches = task
            .join()
            .await
            .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))??;
        let batches = drop_null_groups(batches, &non_null_keys)?;
        Ok::<_, DataFusionError>(stream::iter(batches.into_iter().map(Ok)).boxed())
    };
    let stream = stream::once(async move {
        let error = match inline.await {
            Ok(out) => return Ok(out),
            Err(e) => e,
        };
        // Over the memory limit (here or in another output partition): run
        // DataFusion's spilling aggregate instead, if the operator has it.
        let Some(phase1) = restart_cell.get() else {
            return Err(error);
        };
        let Some(exhausted) = phase1.exhausted.as_ref().filter(|x| x.applies(&error))
        else {
            return Err(error);
        };
        phase1.release().await;
        restart_metric.add(1);
        let plan = exhausted.plan().await?;
        let out = plan.execute(partition, restart_context)?;
        // Its own refusal names both operators and the limit.
        Ok(out.map_err(|e| e.context(EXHAUSTED_CONTEXT)).boxed())
    })
    .try_flatten()
    .inspect_ok(move |b| baseline.record_output(b.num_rows()));
    Box::pin(RecordBatchStreamAdapter::new(out_schema, stream))
}

/// `batches` without the rows whose key columns `keys` (the first columns,
/// in GROUP BY order) hold a NULL: the groups of rows a `k IS NOT NULL`
/// filter would have dropped before the aggregate (see
/// [`DictionaryScan::non_null_keys`]).
fn drop_null_groups(
    batches: Vec<RecordBatch>,
    keys: &[usize],
) -> Result<Vec<RecordBatch>> {
    if keys.is_empty() {
        return Ok(batches);
    }
    batches
        .into_iter()
        .map(|b| {
            if keys.iter().all(|&k| b.column(k).null_count() == 0) {
                return Ok(b);
            }
            let mut keep = is_not_null(b.column(keys[0]))?;
            for &k in &keys[1..] {
                keep = and(&keep, &is_not_null(b.column(k))?)?;
            }
            Ok(filter_record_batch(&b, &keep)?)
        })
        .collect()
}

/// Starts phase 1: one task per input partition (spawned so partitions
/// aggregate in parallel; dropping every output stream aborts them), from
/// the files' codes when the dictionary scan takes over, else from the
/// input partition's batches (probing first when the operator may fall
/// back to `template`), with one queue per output partition.
async fn start(
    input: &Arc<dyn ExecutionPlan>,
    dictionary: Option<&DictionaryScan>,
    template: Option<Arc<dyn ExecutionPlan>>,
    on_exhausted: Option<Arc<dyn ExecutionPlan>>,
    spec: &Arc<AggregateSpec>,
    context: &Arc<TaskContext>,
    metrics: &ExecutionPlanMetricsSet,
) -> Result<Arc<Phase1>> {
    let started = std::time::Instant::now();
    let batch_size = context.session_config().batch_size();
    let work = match dictionary {
        Some(scan) => match scan.prepare(context, metrics).await? {
            Some(work) if work.few_tuples(spec, batch_size).await? => {
                Some(Arc::new(work))
            }
            _ => None,
        },
        None => None,
    };
    // Exact counts only (a table reserved from an estimate could be far too
    // big before the pool sees it), and at most MAX_ROWS_HINT: growth past it
    // is by doubling. Statistics are only a hint: failing to get them is not
    // an error.
    let rows = StatisticsContext::new()
        .compute(input.as_ref(), &StatisticsArgs::new())
        .map(|s| s.num_rows);
    let rows = rows.unwrap_or(Precision::Absent);
    let rows_hint = match rows {
        Precision::Exact(n) => (n / spec.outputs.max(1)).min(MAX_ROWS_HINT),
        _ => 0,
    };
    let partitions = input.output_partitioning().partition_count();
    let (fallback, probes) = match template.filter(|_| work.is_none()) {
        Some(t) => {
            let task_rows = task_rows(input, rows.get_value().copied(), partitions);
            let (f, probes) = Fallback::new(t, Arc::clone(input.properties()), task_rows);
            (Some(f), probes)
        }
        None => (None, vec![]),
    };
    // One probe per task when the run may fall back, else none. One
    // string key runs inline only from codes: without them every task
    // hands its input over at once.
    let mut probes = probes.into_iter();
    let forced = spec.shape == KeyShape::String;
    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..spec.outputs).map(|_| mpsc::unbounded_channel()).unzip();
    let queued = (0..spec.outputs)
        .map(|p| {
            MemoryConsumer::new(format!("InlineAggregateExec[queue {p}]"))
                .register(context.memory_pool())
        })
        .collect();
    let phase1 = Arc::new(Phase1 {
        queues: Mutex::new(receivers.into_iter().map(Some).collect()),
        queued,
        tasks: Mutex::new(vec![]),
        partials: OnceCell::new(),
        started,
        rows_hint,
        fallback,
        exhausted: on_exhausted.map(|t| Exhausted::new(t, Arc::clone(input))),
        holders: Arc::new(()),
    });
    let senders = Senders {
        queues: senders,
        phase1: Arc::downgrade(&phase1),
    };
    let mut tasks = vec![];
    for p in 0..partitions {
        let probe = match probes.next() {
            Some(probe) if forced && work.is_none() => {
                probe.fall_back_now(input.execute(p, Arc::clone(context))?);
                tasks.push(SpawnedTask::spawn(async { Ok((0, None)) }));
                continue;
            }
            probe => probe,
        };
        let reservation = MemoryConsumer::new(format!("InlineAggregateExec[{p}]"))
            .register(context.memory_pool());
        let spec = Arc::clone(spec);
        tasks.push(match &work {
            Some(work) => {
                let holding = Arc::clone(&phase1.holders);
                let task = scan_partition(
                    Arc::clone(work),
                    spec,
                    context.session_config().batch_size(),
                    reservation,
                );
                SpawnedTask::spawn(async move {
                    let _holding = holding;
                    task.await.map(|(rows, partial)| (rows, Some(partial)))
                })
            }
            None => {
                let stream = input.execute(p, Arc::clone(context))?;
                let senders = senders.clone();
                let holding = Arc::clone(&phase1.holders);
                SpawnedTask::spawn(async move {
                    let _holding = holding;
                    Ok((
                        0,
                        aggregate_partition(stream, spec, senders, reservation, probe)
                            .await?,
                    ))
                })
            }
        });
    }
    // The queues close once every task has finished (and dropped its
    // senders).
    drop(senders);
    *phase1.tasks.lock() = tasks;
    Ok(phase1)
}

/// Phase 2's first part for output partition `p`: aggregates the rows
/// phase 1 passes on as they arrive, until every phase-1 task is done.
async fn aggregate_queue(
    mut queue: mpsc::UnboundedReceiver<Rows>,
    phase1: &Phase1,
    spec: &AggregateSpec,
    p: usize,
    merge_time: &Time,
    reservation: &MemoryReservation,
) -> Result<Table> {
    let mut table = Table::new(spec)?;
    while let Some(rows) = queue.recv().await {
        let _timer = merge_time.timer();
        if table.len() == 0 {
            // Rows are passed on only where keys are nearly all distinct.
            table.reserve(phase1.rows_hint);
        }
        table.update(&rows, phase1.rows_hint)?;
        phase1.queued[p].shrink(rows.memory_size());
        reservation.try_resize(table.memory_size())?;
    }
    Ok(table)
}

fn eval(expr: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Result<ArrayRef> {
    expr.evaluate(batch)?.into_array(batch.num_rows())
}

/// Phase 1 over one input partition; `None` when the run fell back and
/// the input went to DataFusion's plan (see [`super::fallback`]).
async fn aggregate_partition(
    mut input: SendableRecordBatchStream,
    spec: Arc<AggregateSpec>,
    senders: Senders,
    reservation: MemoryReservation,
    mut probe: Option<Probe>,
) -> Result<Option<Partial>> {
    let mut table = Table::new(&spec)?;
    let (mut seen, mut spooling) = (0usize, false);
    while let Some(batch) = input.next().await {
        let step = batch.and_then(|batch| {
            if let Some(probe) = probe.as_mut() {
                probe.keep(&batch);
            }
            let rows = Rows {
                keys: spec
                    .group_exprs
                    .iter()
                    .map(|e| eval(e, &batch))
                    .collect::<Result<_>>()?,
                args: spec
                    .aggs
                    .iter()
                    .map(|a| a.arg.as_ref().map(|e| eval(e, &batch)).transpose())
                    .collect::<Result<_>>()?,
            };
            if spooling {
                senders.send(split(rows, spec.outputs)?)?;
            } else {
                seen += rows.len();
                table.update(&rows, 0)?;
                spooling =
                    seen >= PROBE_ROWS && table.len() as f64 > SPOOL_RATIO * seen as f64;
                reservation.try_resize(
                    table.memory_size() + probe.as_ref().map_or(0, Probe::kept_bytes),
                )?;
            }
            Ok(())
        });
        match (step, probe.take()) {
            (Err(e), None) => return Err(e),
            // Whether the error is this task's or the fallback plan's is
            // for the decision to say.
            (Err(e), Some(probe)) => return probe.stop(Some(e)).await.map(|_| None),
            (Ok(()), None) => {}
            (Ok(()), Some(p)) => match p.judge(&table.keys) {
                Next::Probe(p) => probe = Some(p),
                Next::Inline => {}
                Next::FallBack(p) => {
                    p.hand_over(Some(input), None);
                    return Ok(None);
                }
            },
        }
    }
    if let Some(probe) = probe
        && probe.stop(None).await?
    {
        return Ok(None);
    }
    finish(table, &spec, reservation).map(Some)
}

/// Phase 1 from dictionary codes: row groups from `work` until none is
/// left. Returns the rows read and the partial table.
async fn scan_partition(
    work: Arc<Work>,
    spec: Arc<AggregateSpec>,
    batch_size: usize,
    reservation: MemoryReservation,
) -> Result<(usize, Partial)> {
    let mut table = Table::new(&spec)?;
    let rows = work.run(&mut table, batch_size, &reservation).await?;
    Ok((rows, finish(table, &spec, reservation)?))
}

/// A finished phase-1 table as a [`Partial`].
fn finish(
    mut table: Table,
    spec: &AggregateSpec,
    reservation: MemoryReservation,
) -> Result<Partial> {
    let keys = table.keys.emit()?;
    let partition = if spec.outputs > 1 {
        output_partitions(&keys, table.len(), spec.outputs)?
    } else {
        vec![]
    };
    Ok(Partial {
        keys,
        states: table.states,
        counts: table.counts,
        partition,
        _reservation: reservation,
    })
}

/// Output partition of each row of `keys`, as DataFusion's hash
/// repartitioning on the group columns chooses it.
fn output_partitions(keys: &[ArrayRef], rows: usize, outputs: usize) -> Result<Vec<u32>> {
    let mut hashes = vec![0u64; rows];
    create_hashes(keys, REPARTITION_RANDOM_STATE.random_state(), &mut hashes)?;
    Ok(hashes
        .into_iter()
        .map(|h| (h % outputs as u64) as u32)
        .collect())
}

/// Splits rows by output partition.
fn split(rows: Rows, outputs: usize) -> Result<Vec<Rows>> {
    if outputs == 1 {
        return Ok(vec![rows]);
    }
    let mut idx: Vec<Vec<u32>> = vec![vec![]; outputs];
    for (i, p) in output_partitions(&rows.keys, rows.len(), outputs)?
        .into_iter()
        .enumerate()
    {
        idx[p as usize].push(i as u32);
    }
    idx.into_iter()
        .map(|i| rows.take(&UInt32Array::from(i)))
        .collect()
}

/// Phase 2's second part for output partition `p`: merges the partial
/// tables' groups that belong to it into `table` (which holds the rows
/// phase 1 passed on to it), and emits the result in batches of
/// `batch_size` rows.
fn merge(
    partials: &[Partial],
    mut table: Table,
    spec: &AggregateSpec,
    p: usize,
    schema: &SchemaRef,
    batch_size: usize,
    reservation: &MemoryReservation,
) -> Result<Vec<RecordBatch>> {
    // One input partition that kept aggregating, one output: its table is
    // the answer.
    if let [only] = partials
        && spec.outputs == 1
        && table.len() == 0
    {
        return emit(
            schema,
            &spec.aggs,
            only.keys.clone(),
            only.states.clone(),
            only.counts.clone(),
            batch_size,
        );
    }
    let mine = |pt: &Partial| -> Vec<u32> {
        let all = 0..pt.counts.len() as u32;
        if spec.outputs == 1 {
            all.collect()
        } else {
            all.filter(|&g| pt.partition[g as usize] as usize == p)
                .collect()
        }
    };
    let from: Vec<Vec<u32>> = partials.iter().map(mine).collect();
    // One partial gives this partition all its groups: they are distinct,
    // so none needs interning again.
    let mut giving = from.iter().enumerate().filter(|(_, f)| !f.is_empty());
    let keys = if let (Some((i, only)), None) = (giving.next(), giving.next())
        && table.len() == 0
    {
        let keys = table.adopt(&partials[i], only)?;
        reservation.try_resize(table.memory_size())?;
        keys
    } else {
        // `expected` bounds the groups: each merged group is new at most once.
        let expected = from.iter().map(Vec::len).sum::<usize>() + table.len();
        table.reserve(expected);
        for (partial, from) in partials.iter().zip(&from) {
            if !from.is_empty() {
                table.merge(partial, from, expected)?;
                reservation.try_resize(table.memory_size())?;
            }
        }
        table.keys.emit()?
    };
    emit(
        schema,
        &spec.aggs,
        keys,
        table.states,
        table.counts,
        batch_size,
    )
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
    // A group of no row is no group: the dictionary scan's filter dropped
    // every row of a key tuple the codes had met.
    let kept = counts
        .contains(&0)
        .then(|| BooleanArray::from_iter(counts.iter().map(|&c| Some(c > 0))));
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
    columns.extend(
        evaluated
            .into_iter()
            .map(|c| c.unwrap_or_else(|| Arc::clone(&counts))),
    );
    let batch = RecordBatch::try_new(Arc::clone(schema), columns)?;
    let batch = match kept {
        Some(kept) => filter_record_batch(&batch, &kept)?,
        None => batch,
    };
    let batch_size = batch_size.max(1);
    Ok((0..batch.num_rows())
        .step_by(batch_size)
        .map(|s| batch.slice(s, batch_size.min(batch.num_rows() - s)))
        .collect())
}

/// The rows each of the `partitions` partitions of `input` is expected to
/// hold (an estimate is enough for the fallback's tests): the partition's
/// own statistics, else its share of the input's `total`. (Parquet byte
/// ranges split from one file carry none, and the row groups that survive
/// pruning can all sit in one of them.)
fn task_rows(
    input: &Arc<dyn ExecutionPlan>,
    total: Option<usize>,
    partitions: usize,
) -> Vec<Option<usize>> {
    let share = total.map(|n| n / partitions.max(1));
    (0..partitions)
        .map(|p| {
            StatisticsContext::new()
                .compute(
                    input.as_ref(),
                    &StatisticsArgs::new().with_partition(Some(p)),
                )
                .ok()
                .and_then(|s| s.num_rows.get_value().copied())
                .or(share)
        })
        .collect()
}
