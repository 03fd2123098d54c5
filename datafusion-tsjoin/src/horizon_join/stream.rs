//! The output stream of one left partition: drain every right input into
//! its shared [`BuiltTimeline`] once, then expand left batches into (row,
//! offset) pairs as they come, matching each right table by a finger search
//! per (key group, offset) in its per-key index ([`Fingers`]); or, when the
//! join folds its aggregates, hand the left batches to a [`Folder`].

use super::columns::{OutputColumns, Source};
use super::fold::OffsetFold;
use super::folding::{FoldInputs, Folder, FolderArgs, Folding};
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
use datafusion::common::{DataFusionError, Result, internal_err};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use futures::{StreamExt, TryStreamExt, stream};
use std::sync::Arc;
use std::time::Instant;

/// What the partitions of one operator instance share, built once: the
/// right timelines in join order, and the fold's inputs when it folds.
pub(super) struct Built {
    pub timelines: Arc<Vec<BuiltTimeline>>,
    pub fold: Option<Arc<FoldInputs>>,
}

/// Per-execution state shared by the partitions of one operator instance.
pub(super) type SharedState = SharedBuild<Built>;

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
    fold: Option<&OffsetFold>,
    context: Arc<TaskContext>,
    metrics: &HorizonJoinMetrics,
) -> Result<Built> {
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
    let fold = match fold {
        Some(f) => Some(Arc::new(FoldInputs::try_new(f, columns, &built)?)),
        None => None,
    };
    metrics
        .build_mem_used
        .set(built.iter().map(|b| b.held_bytes()).sum());
    Ok(Built {
        timelines: Arc::new(built),
        fold,
    })
}

/// One finger per (key group, offset) of each right table, and their
/// memory, reserved.
fn fingers_of(
    built: &[BuiltTimeline],
    offsets: usize,
    context: &TaskContext,
) -> Result<(Vec<Fingers>, MemoryReservation)> {
    let reservation =
        MemoryConsumer::new("HorizonJoinExec[fingers]").register(context.memory_pool());
    let bytes: usize = built
        .iter()
        .map(|b| Fingers::bytes(b.timeline.groups, offsets))
        .sum();
    reservation.try_grow(bytes)?;
    let kernels = KernelSet::detect();
    let fingers = built
        .iter()
        .map(|b| Fingers::new(&b.timeline, offsets, kernels))
        .collect();
    Ok((fingers, reservation))
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
                build_all(
                    rights,
                    &columns,
                    &spec,
                    fold.as_deref(),
                    Arc::clone(&context),
                    &metrics,
                )
            })
            .await?;
        let timelines = Arc::clone(&built.timelines);
        Ok::<_, DataFusionError>(match (fold, &built.fold) {
            (Some(fold), Some(inputs)) => {
                let folding = Folding::try_new(fold, offsets.len(), &context)?;
                let mut folder = Folder::new(
                    FolderArgs {
                        timelines,
                        inputs: Arc::clone(inputs),
                        spec,
                        offsets,
                        metrics,
                        folding,
                    },
                    &context,
                );
                stream::once(async move {
                    let mut left = left;
                    while let Some(batch) = left.next().await {
                        folder.push(&batch?)?;
                    }
                    folder.finish()
                })
                .map_ok(|b| stream::iter(b.into_iter().map(Ok)))
                .try_flatten()
                .boxed()
            }
            (None, _) => {
                let (fingers, reservation) =
                    fingers_of(&timelines, offsets.len(), &context)?;
                let mut joiner = Joiner::new(
                    timelines,
                    (fingers, reservation),
                    spec,
                    offsets,
                    out_schema,
                    columns,
                    metrics,
                    &context,
                );
                left.map(move |b| joiner.join(b?))
                    .map_ok(|v| stream::iter(v.into_iter().map(Ok)))
                    .try_flatten()
                    .boxed()
            }
            (Some(_), None) => {
                return internal_err!(
                    "HorizonJoinExec: the fold's inputs were not built"
                );
            }
        })
    })
    .try_flatten()
    .inspect_ok(move |b| output.record_output(b.num_rows()));
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
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
    #[allow(clippy::too_many_arguments)]
    fn new(
        built: Arc<Vec<BuiltTimeline>>,
        (fingers, reservation): (Vec<Fingers>, MemoryReservation),
        spec: Arc<HorizonJoinSpec>,
        offsets: Arc<Vec<i64>>,
        schema: SchemaRef,
        columns: OutputColumns,
        metrics: HorizonJoinMetrics,
        context: &TaskContext,
    ) -> Self {
        let batch_size = context.session_config().batch_size();
        Self {
            built,
            fingers,
            spec,
            chunk: (batch_size / offsets.len().max(1)).max(1),
            patterns: None,
            offsets,
            schema,
            columns,
            metrics,
            _reservation: reservation,
        }
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

    fn join_chunk(&mut self, left: &RecordBatch) -> Result<RecordBatch> {
        let pairs = left.num_rows() * self.offsets.len();
        let (ts_array, lt) = self.left_times(left)?;
        let (left_rows, offset_column) = self.patterns(pairs);
        let right: Vec<Option<UInt32Array>> = self
            .match_read_rights(left, &lt)?
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
    /// row-major, when a column of the table is emitted; a table nothing
    /// reads is not matched at all.
    fn match_read_rights(
        &mut self,
        left: &RecordBatch,
        lt: &[Option<i64>],
    ) -> Result<Vec<Option<Vec<u32>>>> {
        (0..self.built.len())
            .map(|j| {
                if self.columns.reads_right(j) {
                    self.match_right(j, left, lt).map(Some)
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
    /// (row `i`, offset `o`) is at `i * offsets + o`.
    fn match_right(
        &mut self,
        j: usize,
        left: &RecordBatch,
        lt: &[Option<i64>],
    ) -> Result<Vec<u32>> {
        let n = left.num_rows();
        let k = self.offsets.len();
        let r = &self.spec.rights[j];
        let built = &self.built[j];
        let tl = &built.timeline;
        let factor = r.scale.left_factor();
        let allowed: Option<ArrayRef> = match &r.left_filter {
            Some(f) => Some(f.evaluate(left)?.into_array(n)?),
            None => None,
        };
        let keys = key_arrays(&r.left_keys, left)?;
        let groups =
            tl.matchable_groups(&keys, lt, allowed.as_ref().map(|a| a.as_boolean()))?;
        built.ensure_index()?;
        self.metrics.lookups.add(n * k);
        let mut rows = vec![NO_ROW; n * k];
        let fingers = &mut self.fingers[j];
        let offsets = &self.offsets;
        let mut times = vec![0i64; k];
        for i in 0..n {
            let (Some(t), Some(g)) = (lt[i], groups[i]) else {
                continue;
            };
            for (time, &o) in times.iter_mut().zip(offsets.iter()) {
                *time = t.saturating_add(o).saturating_mul(factor);
            }
            let out = &mut rows[i * k..(i + 1) * k];
            fingers.lookup_offsets(tl.group_slice(g), g, &times, out);
        }
        Ok(rows)
    }
}
