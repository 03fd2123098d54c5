//! The output stream of one left partition: drain every right input into
//! its shared [`BuiltTimeline`] once, then expand left batches into (row,
//! offset) pairs as they come, matching each right table by a finger search
//! per (key group, offset) in its per-key index ([`Fingers`]).

use super::fold::OffsetFold;
use super::metrics::HorizonJoinMetrics;
use super::spec::HorizonJoinSpec;
use crate::kernels::KernelSet;
use crate::temporal::{
    BuiltTimeline, Fingers, NO_ROW, SharedBuild, key_arrays, record_join_time, ticks,
};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, RecordBatch, RecordBatchOptions, UInt32Array,
    new_null_array,
};
use datafusion::arrow::buffer::{BooleanBuffer, NullBuffer};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::{DataFusionError, Result, ScalarValue, internal_err};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::logical_expr::Accumulator;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use futures::{StreamExt, TryStreamExt, stream};
use std::sync::Arc;
use std::time::Instant;

/// Per-execution state shared by the partitions of one operator instance:
/// the right timelines, in join order.
pub(super) type SharedState = SharedBuild<Vec<BuiltTimeline>>;

/// Everything one left partition's stream needs.
pub(super) struct StreamArgs {
    pub left: SendableRecordBatchStream,
    pub rights: Vec<Arc<dyn ExecutionPlan>>,
    pub spec: Arc<HorizonJoinSpec>,
    /// Offsets in left ticks.
    pub offsets: Arc<Vec<i64>>,
    pub schema: SchemaRef,
    /// What each output column is (of the pairs, when folding).
    pub columns: OutputColumns,
    /// Aggregates folded per offset: the stream emits their rows.
    pub fold: Option<Arc<OffsetFold>>,
    pub shared: Arc<SharedState>,
    pub metrics: HorizonJoinMetrics,
    pub context: Arc<TaskContext>,
}

async fn build_all(
    rights: Vec<Arc<dyn ExecutionPlan>>,
    columns: &OutputColumns,
    spec: &HorizonJoinSpec,
    context: Arc<TaskContext>,
    metrics: &HorizonJoinMetrics,
) -> Result<Vec<BuiltTimeline>> {
    let _timer = metrics.build_time.timer();
    let mut built = vec![];
    for (j, (right, r)) in rights.into_iter().zip(&spec.rights).enumerate() {
        built.push(
            BuiltTimeline::build(
                &format!("HorizonJoinExec[right {j}]"),
                right,
                &r.right_keys,
                &r.right_ts,
                r.scale.right_factor(),
                Some(columns.right_columns(j)),
                Arc::clone(&context),
            )
            .await?,
        );
    }
    metrics
        .build_mem_used
        .set(built.iter().map(|b| b.held_bytes()).sum());
    Ok(built)
}

/// The output stream of one left partition.
pub(super) fn horizon_join_stream(args: StreamArgs) -> SendableRecordBatchStream {
    let StreamArgs {
        left,
        rights,
        spec,
        offsets,
        schema,
        columns,
        fold,
        shared,
        metrics,
        context,
    } = args;
    let out_schema = Arc::clone(&schema);
    let output = metrics.baseline.clone();
    let stream = stream::once(async move {
        let built = shared
            .get_or_build(|| {
                build_all(rights, &columns, &spec, Arc::clone(&context), &metrics)
            })
            .await?;
        let mut joiner = Joiner::try_new(
            built, spec, offsets, out_schema, columns, metrics, &context,
        )?;
        Ok::<_, DataFusionError>(match fold {
            None => left
                .map(move |b| joiner.join(b?))
                .map_ok(|v| stream::iter(v.into_iter().map(Ok)))
                .try_flatten()
                .boxed(),
            Some(fold) => stream::once(async move {
                let mut folding = Folding::try_new(fold, joiner.offsets.len(), &context)?;
                let mut left = left;
                while let Some(batch) = left.next().await {
                    joiner.fold(&batch?, &mut folding)?;
                }
                folding.finish(&joiner.offsets)
            })
            .map_ok(|b| stream::iter(b.into_iter().map(Ok)))
            .try_flatten()
            .boxed(),
        })
    })
    .try_flatten()
    .inspect_ok(move |b| output.record_output(b.num_rows()));
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}

/// Where one output column comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Left column `i`.
    Left(usize),
    /// Column `i` of right table `j`: `Right(j, i)`.
    Right(usize, usize),
    /// `offset`.
    Offset,
    /// `timestamp` (left time + offset).
    Timestamp,
}

/// The columns a [`HorizonJoinExec`](super::HorizonJoinExec) emits, in
/// order, each by where it comes from; the join's full output (left
/// columns, each right table's, `offset`, `timestamp`) narrowed by its
/// embedded projection.
#[derive(Debug, Clone)]
pub(super) struct OutputColumns {
    sources: Arc<[Source]>,
}

impl OutputColumns {
    /// The output of a join with `left` left columns and right tables of
    /// `rights` columns each, under `projection` (indices into the full
    /// output, in range).
    pub(super) fn new(
        left: usize,
        rights: impl IntoIterator<Item = usize>,
        projection: Option<&[usize]>,
    ) -> Self {
        let mut all: Vec<Source> = (0..left).map(Source::Left).collect();
        for (j, width) in rights.into_iter().enumerate() {
            all.extend((0..width).map(|i| Source::Right(j, i)));
        }
        all.extend([Source::Offset, Source::Timestamp]);
        let sources = match projection {
            Some(p) => p.iter().map(|&i| all[i]).collect(),
            None => all.into(),
        };
        Self { sources }
    }

    /// Whether a column of right table `j` is emitted.
    fn reads_right(&self, j: usize) -> bool {
        self.sources
            .iter()
            .any(|s| matches!(s, Source::Right(t, _) if *t == j))
    }

    /// The columns of right table `j` that are emitted, in order.
    fn right_columns(&self, j: usize) -> Vec<usize> {
        let mut cols: Vec<usize> = self
            .sources
            .iter()
            .filter_map(|s| match *s {
                Source::Right(t, i) if t == j => Some(i),
                _ => None,
            })
            .collect();
        cols.sort_unstable();
        cols.dedup();
        cols
    }
}

/// Take indices for `rows` (right rows, [`NO_ROW`] where none): NULL at
/// each [`NO_ROW`], with row 0 under the NULL so that every `take` kernel
/// stays in bounds (not all of them skip null indices); no null buffer
/// when every row matched (the `take` kernels' faster path).
fn indices(mut rows: Vec<u32>) -> UInt32Array {
    let valid = BooleanBuffer::collect_bool(rows.len(), |i| rows[i] != NO_ROW);
    rows.iter_mut()
        .for_each(|r| *r = if *r == NO_ROW { 0 } else { *r });
    without_empty_nulls(UInt32Array::new(rows.into(), Some(NullBuffer::new(valid))))
}

/// `rows` without its null buffer when the buffer marks no null (a slice
/// of [`indices`] can have none where the whole has some).
fn without_empty_nulls(rows: UInt32Array) -> UInt32Array {
    if rows.null_count() == 0 && rows.nulls().is_some() {
        let (_, values, _) = rows.into_parts();
        UInt32Array::new(values, None)
    } else {
        rows
    }
}

/// Per offset, one accumulator per folded aggregate (see [`OffsetFold`]).
struct Folding {
    fold: Arc<OffsetFold>,
    accumulators: Vec<Vec<Box<dyn Accumulator>>>,
    /// Whether any left row came (no row: no group, as an aggregate).
    seen: bool,
    /// The accumulators' memory (as `Accumulator::size` reports it).
    reservation: MemoryReservation,
}

impl Folding {
    fn try_new(
        fold: Arc<OffsetFold>,
        offsets: usize,
        context: &TaskContext,
    ) -> Result<Self> {
        let accumulators = (0..offsets)
            .map(|_| fold.aggr.iter().map(|a| a.create_accumulator()).collect())
            .collect::<Result<_>>()?;
        let reservation =
            MemoryConsumer::new("HorizonJoinExec[fold]").register(context.memory_pool());
        let mut this = Self {
            fold,
            accumulators,
            seen: false,
            reservation,
        };
        this.account()?;
        Ok(this)
    }

    /// Resizes the reservation to what the accumulators hold now: a
    /// `Resources exhausted` error when the pool has no room.
    fn account(&mut self) -> Result<()> {
        let bytes = self.accumulators.iter().flatten().map(|a| a.size()).sum();
        self.reservation.try_resize(bytes)
    }

    /// The fold's rows: per offset, its states (partial) or values.
    fn finish(mut self, offsets: &[i64]) -> Result<Option<RecordBatch>> {
        if !self.seen {
            return Ok(None);
        }
        let mut columns: Vec<ArrayRef> =
            vec![Arc::new(Int64Array::from(offsets.to_vec()))];
        for a in 0..self.fold.aggr.len() {
            let mut per_offset: Vec<Vec<ScalarValue>> = vec![];
            for accs in &mut self.accumulators {
                per_offset.push(if self.fold.partial {
                    accs[a].state()?
                } else {
                    vec![accs[a].evaluate()?]
                });
            }
            let width = per_offset.first().map_or(0, Vec::len);
            for c in 0..width {
                columns.push(ScalarValue::iter_to_array(
                    per_offset.iter().map(|s| s[c].clone()),
                )?);
            }
        }
        Ok(Some(RecordBatch::try_new(
            Arc::clone(&self.fold.schema),
            columns,
        )?))
    }
}

/// Expands and matches the batches of one left partition, in order.
struct Joiner {
    built: Arc<Vec<BuiltTimeline>>,
    /// Per right table, one finger per (key group, offset).
    fingers: Vec<Fingers>,
    spec: Arc<HorizonJoinSpec>,
    offsets: Arc<Vec<i64>>,
    schema: SchemaRef,
    columns: OutputColumns,
    metrics: HorizonJoinMetrics,
    /// Left rows per output batch: about `batch_size` pairs each.
    chunk: usize,
    /// Each pair's left row and offset for a full chunk, row-major; a
    /// shorter chunk's are a prefix (built on first use).
    patterns: Option<(UInt32Array, Int64Array)>,
    _reservation: MemoryReservation,
}

impl Joiner {
    fn try_new(
        built: Arc<Vec<BuiltTimeline>>,
        spec: Arc<HorizonJoinSpec>,
        offsets: Arc<Vec<i64>>,
        schema: SchemaRef,
        columns: OutputColumns,
        metrics: HorizonJoinMetrics,
        context: &TaskContext,
    ) -> Result<Self> {
        // The fingers: offsets x groups positions per table.
        let reservation = MemoryConsumer::new("HorizonJoinExec[fingers]")
            .register(context.memory_pool());
        let k = offsets.len();
        let bytes: usize = built
            .iter()
            .map(|b| Fingers::bytes(b.timeline.groups, k))
            .sum();
        reservation.try_grow(bytes)?;
        let kernels = KernelSet::detect();
        let fingers = built
            .iter()
            .map(|b| Fingers::new(&b.timeline, k, kernels))
            .collect();
        let batch_size = context.session_config().batch_size();
        Ok(Self {
            built,
            fingers,
            spec,
            chunk: (batch_size / k.max(1)).max(1),
            patterns: None,
            offsets,
            schema,
            columns,
            metrics,
            _reservation: reservation,
        })
    }

    fn join(&mut self, left: RecordBatch) -> Result<Vec<RecordBatch>> {
        let start = Instant::now();
        let mut out = vec![];
        let mut at = 0;
        while at < left.num_rows() {
            let len = self.chunk.min(left.num_rows() - at);
            out.push(self.join_chunk(&left.slice(at, len))?);
            at += len;
        }
        record_join_time(&self.metrics.join_time, &self.metrics.baseline, start);
        Ok(out)
    }

    /// Folds one left batch's pairs into the per-offset accumulators,
    /// offset by offset: the left columns as they are, the right ones
    /// gathered for that offset.
    fn fold(&mut self, left: &RecordBatch, folding: &mut Folding) -> Result<()> {
        let start = Instant::now();
        let n = left.num_rows();
        if n == 0 {
            return Ok(());
        }
        folding.seen = true;
        let (ts_array, lt) = self.left_times(left)?;
        // Offset-major: offset `ki`'s right rows are `rows[ki * n..][..n]`,
        // taken as zero-copy slices of one buffer.
        let right_rows: Vec<Option<UInt32Array>> = self
            .match_read_rights(left, &lt, true)?
            .into_iter()
            .map(|rows| rows.map(indices))
            .collect();
        for (ki, &o) in self.offsets.iter().enumerate() {
            let right: Vec<Option<UInt32Array>> = right_rows
                .iter()
                .map(|rows| {
                    rows.as_ref()
                        .map(|rows| without_empty_nulls(rows.slice(ki * n, n)))
                })
                .collect();
            let columns = self.columns(
                n,
                |i| Ok(Arc::clone(left.column(i))),
                &right,
                || Arc::new(Int64Array::from_value(o, n)),
                || lt.iter().map(|t| t.map(|t| t.saturating_add(o))).collect(),
                ts_array.data_type(),
            )?;
            let options = RecordBatchOptions::new().with_row_count(Some(n));
            let batch = RecordBatch::try_new_with_options(
                Arc::clone(&folding.fold.pairs),
                columns,
                &options,
            )?;
            for (a, acc) in folding.fold.aggr.iter().zip(&mut folding.accumulators[ki]) {
                let args = a
                    .expressions()
                    .iter()
                    .map(|e| e.evaluate(&batch)?.into_array(n))
                    .collect::<Result<Vec<_>>>()?;
                acc.update_batch(&args)?;
            }
        }
        folding.account()?;
        record_join_time(&self.metrics.join_time, &self.metrics.baseline, start);
        Ok(())
    }

    fn join_chunk(&mut self, left: &RecordBatch) -> Result<RecordBatch> {
        let pairs = left.num_rows() * self.offsets.len();
        let (ts_array, lt) = self.left_times(left)?;
        let (left_rows, offset_column) = self.patterns(pairs);
        let right: Vec<Option<UInt32Array>> = self
            .match_read_rights(left, &lt, false)?
            .into_iter()
            .map(|rows| rows.map(indices))
            .collect();
        let offsets = &self.offsets;
        let columns = self.columns(
            pairs,
            |i| Ok(take(left.column(i).as_ref(), &left_rows, None)?),
            &right,
            || Arc::new(offset_column.clone()),
            || {
                lt.iter()
                    .flat_map(|t| {
                        offsets.iter().map(move |o| t.map(|t| t.saturating_add(*o)))
                    })
                    .collect()
            },
            ts_array.data_type(),
        )?;
        let options = RecordBatchOptions::new().with_row_count(Some(pairs));
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &options,
        )?)
    }

    /// A left batch's time array and its ticks (the left unit); counts
    /// its rows as joined.
    fn left_times(&self, left: &RecordBatch) -> Result<(ArrayRef, Vec<Option<i64>>)> {
        let n = left.num_rows();
        self.metrics.input_rows.add(n);
        let ts_array = self.spec.left_ts.evaluate(left)?.into_array(n)?;
        let lt = ticks(&ts_array, 1)?;
        Ok((ts_array, lt))
    }

    /// Per right table, each pair's matching row ([`NO_ROW`] where none),
    /// row-major or `offset_major`, when a column of the table is emitted;
    /// a table nothing reads is not matched at all.
    fn match_read_rights(
        &mut self,
        left: &RecordBatch,
        lt: &[Option<i64>],
        offset_major: bool,
    ) -> Result<Vec<Option<Vec<u32>>>> {
        (0..self.built.len())
            .map(|j| {
                if self.columns.reads_right(j) {
                    self.match_right(j, left, lt, offset_major).map(Some)
                } else {
                    Ok(None)
                }
            })
            .collect()
    }

    /// The emitted columns of `len` pairs: left column `i` from `left`,
    /// right table `j`'s gathered at `right[j]`, `offset` from `offset`,
    /// `timestamp` as `times` (left ticks) cast to `ts_type`.
    fn columns(
        &self,
        len: usize,
        left: impl Fn(usize) -> Result<ArrayRef>,
        right: &[Option<UInt32Array>],
        offset: impl Fn() -> ArrayRef,
        times: impl Fn() -> Int64Array,
        ts_type: &DataType,
    ) -> Result<Vec<ArrayRef>> {
        self.columns
            .sources
            .iter()
            .map(|source| match *source {
                Source::Left(i) => left(i),
                Source::Right(j, i) => {
                    let (tl, Some(rows)) = (&self.built[j].timeline, &right[j]) else {
                        return internal_err!("HorizonJoinExec: right {j} not matched");
                    };
                    let c = tl.batch.column(i);
                    Ok(if tl.batch.num_rows() == 0 || rows.null_count() == len {
                        new_null_array(c.data_type(), len)
                    } else {
                        take(c.as_ref(), rows, None)?
                    })
                }
                Source::Offset => Ok(offset()),
                Source::Timestamp => Ok(cast(&times(), ts_type)?),
            })
            .collect()
    }

    /// The first `pairs` entries of the left-row and offset patterns (see
    /// `patterns`): zero-copy slices of the full chunk's.
    fn patterns(&mut self, pairs: usize) -> (UInt32Array, Int64Array) {
        let (k, chunk) = (self.offsets.len(), self.chunk);
        let offsets = &self.offsets;
        let (rows, offset) = self.patterns.get_or_insert_with(|| {
            (
                UInt32Array::from_iter_values(
                    (0..chunk as u32).flat_map(|i| std::iter::repeat_n(i, k)),
                ),
                Int64Array::from_iter_values(
                    (0..chunk).flat_map(|_| offsets.iter().copied()),
                ),
            )
        });
        (rows.slice(0, pairs), offset.slice(0, pairs))
    }

    /// The matching row of right table `j` for every (left row, offset)
    /// pair ([`NO_ROW`] where none): a finger search per (key group,
    /// offset) in the table's per-key index (any left order; on
    /// time-ordered input each finger moves a few rows per lookup). Pair
    /// (row `i`, offset `o`) is at `i * offsets + o` (row-major) or, when
    /// `offset_major`, at `o * rows + i`.
    fn match_right(
        &mut self,
        j: usize,
        left: &RecordBatch,
        lt: &[Option<i64>],
        offset_major: bool,
    ) -> Result<Vec<u32>> {
        let n = left.num_rows();
        let k = self.offsets.len();
        let r = &self.spec.rights[j];
        let built = &self.built[j];
        let tl = &built.timeline;
        let factor = r.scale.left_factor();
        let groups = tl.groups_of(&key_arrays(&r.left_keys, left)?, n)?;
        let allowed: Option<ArrayRef> = match &r.left_filter {
            Some(f) => Some(f.evaluate(left)?.into_array(n)?),
            None => None,
        };
        let allowed = allowed.as_ref().map(|a| a.as_boolean());
        built.ensure_index()?;
        self.metrics.lookups.add(n * k);
        let mut rows = vec![NO_ROW; n * k];
        let fingers = &mut self.fingers[j];
        let offsets = &self.offsets;
        // Row `i`'s first slot and the distance between its offsets' slots.
        let (first, stride) = if offset_major { (1, n) } else { (k, 1) };
        let mut times = vec![0i64; k];
        for i in 0..n {
            if let Some(a) = allowed
                && !(a.is_valid(i) && a.value(i))
            {
                continue;
            }
            let (Some(t), Some(g)) = (lt[i], groups[i]) else {
                continue;
            };
            for (time, &o) in times.iter_mut().zip(offsets.iter()) {
                *time = t.saturating_add(o).saturating_mul(factor);
            }
            let out = &mut rows[i * first..];
            fingers.lookup_offsets(tl.group_slice(g), g, &times, out, stride);
        }
        Ok(rows)
    }
}
