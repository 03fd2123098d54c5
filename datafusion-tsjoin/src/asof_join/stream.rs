//! The output stream of one left partition: drain the right input into the
//! shared [`Timeline`] once, then match left batches as they come, by the
//! streaming merge while the left times keep increasing, by the per-key
//! index otherwise.

use super::metrics::AsofJoinMetrics;
use super::spec::{
    AsofDirection, AsofJoinSpec, emits_unmatched_left, emits_unmatched_right,
};
use crate::temporal::{
    BuiltTimeline, MergeCursor, SharedBuild, array_is_non_decreasing, key_arrays,
    record_join_time, tick_array,
};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, BooleanBufferBuilder, RecordBatch,
    RecordBatchOptions, UInt32Array, new_null_array,
};
use datafusion::arrow::buffer::{BooleanBuffer, NullBuffer};
use datafusion::arrow::compute::{filter, filter_record_batch, take};
use datafusion::arrow::datatypes::{FieldRef, Schema, SchemaRef};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr, SendableRecordBatchStream};
use futures::{StreamExt, TryStreamExt, stream};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

/// Per-execution state shared by the partitions of one operator instance
/// (all of them when broadcast, one when partitioned).
#[derive(Debug, Default)]
pub(super) struct SharedState {
    build: SharedBuild<Built>,
    /// Partitions sharing the state that have read all their left input:
    /// for a Right or Full join the last one emits the right rows no left
    /// row matched.
    finished: AtomicUsize,
}

/// The built right side.
struct Built {
    right: BuiltTimeline,
    /// Right and Full joins: one bit per right row (of the timeline's
    /// batch), set when some left row matched it; empty otherwise.
    matched: Vec<AtomicU64>,
}

/// Everything one left partition's stream needs.
pub(super) struct StreamArgs {
    pub left: SendableRecordBatchStream,
    pub right: Arc<dyn ExecutionPlan>,
    pub spec: Arc<AsofJoinSpec>,
    pub schema: SchemaRef,
    /// Indices into the join's full output (left columns, then right) of
    /// the columns emitted; `None`: all.
    pub projection: Option<Arc<[usize]>>,
    /// The right columns the output reads: the timeline keeps only these.
    pub right_columns: Vec<usize>,
    pub shared: Arc<SharedState>,
    /// Partitions that share `shared` (see [`SharedState::finished`]).
    pub sharers: usize,
    pub metrics: AsofJoinMetrics,
    pub context: Arc<TaskContext>,
}

/// Drains every right partition (in parallel tasks) into a [`Timeline`].
async fn build(
    right: Arc<dyn ExecutionPlan>,
    right_columns: Vec<usize>,
    spec: &AsofJoinSpec,
    context: Arc<TaskContext>,
    metrics: &AsofJoinMetrics,
) -> Result<Built> {
    let _timer = metrics.build_time.timer();
    let built = BuiltTimeline::build(
        "AsofJoinExec[right]",
        right,
        &spec.right_keys,
        &spec.right_ts,
        spec.scale.right_factor(),
        Some(right_columns),
        context,
    )
    .await?;
    metrics.build_input_rows.add(built.input_rows);
    metrics.build_mem_used.set(built.held_bytes());
    metrics
        .right_sorted
        .set(usize::from(built.timeline.arrived_sorted));
    let matched = if emits_unmatched_right(spec.join_type) {
        let words = built.timeline.batch.num_rows().div_ceil(64);
        built.try_grow(words * 8)?;
        (0..words).map(|_| AtomicU64::new(0)).collect()
    } else {
        vec![]
    };
    Ok(Built {
        right: built,
        matched,
    })
}

/// The output stream of one left partition.
pub(super) fn asof_join_stream(args: StreamArgs) -> SendableRecordBatchStream {
    let StreamArgs {
        left,
        right,
        spec,
        schema,
        projection,
        right_columns,
        shared,
        sharers,
        metrics,
        context,
    } = args;
    let out_schema = Arc::clone(&schema);
    let output = metrics.baseline.clone();
    let batch_size = context.session_config().batch_size().max(1);
    let stream = stream::once(async move {
        let built = shared
            .build
            .get_or_build(|| build(right, right_columns, &spec, context, &metrics))
            .await?;
        let joiner = Joiner {
            cursor: MergeCursor::new(&built.right.timeline, spec.matching.strict),
            left_schema: left.schema(),
            built,
            spec,
            schema: out_schema,
            projection,
            metrics,
            shared,
            sharers,
            batch_size,
        };
        // The left batches as they come, then (Right and Full) the right
        // rows nothing matched.
        let joined = stream::try_unfold(Some((left, joiner)), |state| async move {
            let Some((mut left, mut joiner)) = state else {
                return Ok::<_, DataFusionError>(None);
            };
            Ok(match left.next().await {
                Some(b) => {
                    let out = joiner.join(b?)?;
                    Some((stream::iter(vec![Ok(out)]), Some((left, joiner))))
                }
                None => {
                    let rest = joiner.unmatched_right()?;
                    Some((
                        stream::iter(rest.into_iter().map(Ok).collect::<Vec<_>>()),
                        None,
                    ))
                }
            })
        })
        .try_flatten();
        Ok::<_, DataFusionError>(joined)
    })
    .try_flatten()
    .inspect_ok(move |b| output.record_output(b.num_rows()));
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}

/// Candidates a round of [`Joiner::pair_matches`] tries per row at most.
const MAX_ROUND_WIDTH: usize = 256;

/// A left row's current candidate under a pair filter: position `p` in
/// key group `g`'s time-ordered slice of the per-key index.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    row: usize,
    g: u32,
    p: usize,
}

/// Matches the batches of one left partition, in order.
struct Joiner {
    built: Arc<Built>,
    cursor: MergeCursor,
    spec: Arc<AsofJoinSpec>,
    left_schema: SchemaRef,
    schema: SchemaRef,
    projection: Option<Arc<[usize]>>,
    metrics: AsofJoinMetrics,
    shared: Arc<SharedState>,
    sharers: usize,
    batch_size: usize,
}

impl Joiner {
    fn join(&mut self, left: RecordBatch) -> Result<RecordBatch> {
        let start = Instant::now();
        let out = self.join_batch(left);
        record_join_time(&self.metrics.join_time, &self.metrics.baseline, start);
        out
    }

    /// A Right or Full join's right rows no left row matched, with NULL
    /// left columns, in right input order and batches of `batch_size`:
    /// from the last partition sharing the right side to finish (nothing
    /// from the others, nor for other join types).
    fn unmatched_right(&mut self) -> Result<Vec<RecordBatch>> {
        if !emits_unmatched_right(self.spec.join_type) {
            return Ok(vec![]);
        }
        // AcqRel: the last to finish sees every other partition's bits.
        if self.shared.finished.fetch_add(1, Ordering::AcqRel) + 1 != self.sharers {
            return Ok(vec![]);
        }
        let start = Instant::now();
        let tl = &self.built.right.timeline;
        let unmatched: Vec<u32> = (0..tl.batch.num_rows() as u32)
            .filter(|&r| {
                let word = self.built.matched[r as usize / 64].load(Ordering::Relaxed);
                word & (1 << (r % 64)) == 0
            })
            .collect();
        let mut out = vec![];
        let width = self.left_schema.fields().len();
        for rows in unmatched.chunks(self.batch_size) {
            let n = rows.len();
            let indices = UInt32Array::from(rows.to_vec());
            let column = |i: usize| -> Result<ArrayRef> {
                if i < width {
                    return Ok(new_null_array(self.left_schema.field(i).data_type(), n));
                }
                Ok(take(tl.batch.column(i - width).as_ref(), &indices, None)?)
            };
            out.push(self.output(n, column)?);
        }
        record_join_time(&self.metrics.join_time, &self.metrics.baseline, start);
        Ok(out)
    }

    /// Under a pair filter, each left row's match among its candidates:
    /// starting from the nearest (`candidates`), in rounds. Each round
    /// takes, for every undecided row, its next `width` candidates (1 in
    /// the first round, four times more each round after, at most
    /// [`MAX_ROUND_WIDTH`]: most rows take the nearest, the rest should
    /// not cost a round per candidate) within its group and within
    /// `within(row, time)` (the tolerance), evaluates the filter over one
    /// joined batch of them (only the columns it reads gathered), and
    /// keeps each row's nearest passing one. Returns (left row, right row)
    /// for the rows that found one.
    fn pair_matches(
        &self,
        left: &RecordBatch,
        filter: &Arc<dyn PhysicalExpr>,
        mut pending: Vec<Candidate>,
        forward: bool,
        within: impl Fn(usize, i64) -> bool,
    ) -> Result<Vec<(usize, u32)>> {
        let tl = &self.built.right.timeline;
        // Nullable: the columns the filter does not read are all NULL.
        let fields: Vec<FieldRef> = left
            .schema()
            .fields()
            .iter()
            .chain(tl.batch.schema().fields().iter())
            .map(|f| Arc::new(f.as_ref().clone().with_nullable(true)))
            .collect();
        let read: HashSet<usize> = collect_columns(filter)
            .into_iter()
            .map(|c| c.index())
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let mut found = vec![];
        let mut width = 1;
        while !pending.is_empty() {
            // Each row's next candidates, nearest first: (pending index,
            // position in its group).
            let mut tried: Vec<(usize, usize)> = vec![];
            for (k, c) in pending.iter().enumerate() {
                let ts = tl.group_slice(c.g).1;
                for step in 0..width {
                    let p = if forward {
                        c.p + step
                    } else {
                        c.p.wrapping_sub(step)
                    };
                    if p >= ts.len() || !within(c.row, ts[p]) {
                        break;
                    }
                    tried.push((k, p));
                }
            }
            let n = tried.len();
            let li = UInt32Array::from_iter_values(
                tried.iter().map(|&(k, _)| pending[k].row as u32),
            );
            let ri = UInt32Array::from_iter_values(
                tried
                    .iter()
                    .map(|&(k, p)| tl.group_slice(pending[k].g).0[p]),
            );
            let mut columns = vec![];
            let sides = left.columns().iter().map(|c| (c, &li));
            let sides = sides.chain(tl.batch.columns().iter().map(|c| (c, &ri)));
            for (i, (c, at)) in sides.enumerate() {
                columns.push(if read.contains(&i) {
                    take(c.as_ref(), at, None)?
                } else {
                    new_null_array(c.data_type(), n)
                });
            }
            let options = RecordBatchOptions::new().with_row_count(Some(n));
            let batch = RecordBatch::try_new_with_options(
                Arc::clone(&schema),
                columns,
                &options,
            )?;
            let pass = filter.evaluate(&batch)?.into_array(n)?;
            let pass = pass.as_boolean();
            let mut done = vec![false; pending.len()];
            let mut last = vec![None; pending.len()];
            for (t, &(k, p)) in tried.iter().enumerate() {
                last[k] = Some(p);
                if !done[k] && pass.is_valid(t) && pass.value(t) {
                    done[k] = true;
                    found.push((pending[k].row, ri.value(t)));
                }
            }
            // A row with no passing candidate goes on after its last one
            // (none tried: out of its group or past the tolerance).
            let mut next = Vec::with_capacity(pending.len());
            for (k, c) in pending.into_iter().enumerate() {
                if let (false, Some(p)) = (done[k], last[k])
                    && p == if forward {
                        c.p + width - 1
                    } else {
                        c.p.wrapping_sub(width - 1)
                    }
                {
                    let p = if forward { p + 1 } else { p.wrapping_sub(1) };
                    if p < tl.group_slice(c.g).1.len() {
                        next.push(Candidate { p, ..c });
                    }
                }
            }
            pending = next;
            width = (width * 4).min(MAX_ROUND_WIDTH);
        }
        Ok(found)
    }

    /// An output batch of `n` rows whose column `i` of the join's full
    /// output (left columns, then right) is `column(i)`, for the columns
    /// the embedded projection keeps.
    fn output(
        &self,
        n: usize,
        column: impl Fn(usize) -> Result<ArrayRef>,
    ) -> Result<RecordBatch> {
        let width = self.left_schema.fields().len();
        let columns = match &self.projection {
            Some(p) => p.iter().map(|&i| column(i)).collect::<Result<Vec<_>>>()?,
            None => (0..width + self.built.right.timeline.batch.num_columns())
                .map(column)
                .collect::<Result<_>>()?,
        };
        let options = RecordBatchOptions::new().with_row_count(Some(n));
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &options,
        )?)
    }

    fn join_batch(&mut self, left: RecordBatch) -> Result<RecordBatch> {
        let n = left.num_rows();
        self.metrics.input_rows.add(n);
        let spec = Arc::clone(&self.spec);
        let tl = &self.built.right.timeline;
        let lt_array = spec.left_ts.evaluate(&left)?.into_array(n)?;
        let lt = tick_array(&lt_array, spec.scale.left_factor())?;
        let groups = tl.groups_of(&key_arrays(&spec.left_keys, &left)?, n)?;
        let allowed: Option<ArrayRef> = match &spec.left_filter {
            Some(f) => Some(f.evaluate(&left)?.into_array(n)?),
            None => None,
        };
        // A row looks only where the time is known and the left filter is
        // true (NULL counts as false).
        let mut looks = match allowed.as_ref().map(|a| a.as_boolean()) {
            Some(a) => match a.nulls() {
                Some(nulls) => a.values() & nulls.inner(),
                None => a.values().clone(),
            },
            None => BooleanBuffer::new_set(n),
        };
        if let Some(nulls) = lt.nulls() {
            looks = &looks & nulls.inner();
        }
        let tol = spec.tolerance.map(|t| t.ticks(spec.scale.common_nanos()));
        let strict = spec.matching.strict;
        let forward = spec.matching.direction == AsofDirection::Forward;
        let within = |t: i64, rt: i64| match tol {
            None => true,
            Some(tol) => {
                let d = if forward {
                    rt as i128 - t as i128
                } else {
                    t as i128 - rt as i128
                };
                d <= tol as i128
            }
        };
        let times = lt.values();
        let first = lt.iter().flatten().next();
        // A pair filter tries candidates one after another: the index path.
        let merge = !forward
            && spec.pair_filter.is_none()
            && array_is_non_decreasing(&lt)
            && first.is_none_or(|t| self.cursor.accepts(t));
        // The output's right-row positions, written in place (0 where no
        // match, with the validity bit unset).
        let mut rows = vec![0u32; n];
        let mut valid = BooleanBufferBuilder::new(n);
        valid.append_n(n, false);
        if merge {
            self.metrics.merge_rows.add(n);
            if let Some(t) = first
                && !self.cursor.started()
            {
                self.cursor.start(tl, t);
            }
            let has_null_times = lt.null_count() > 0;
            for (i, &t) in times.iter().enumerate() {
                if has_null_times && lt.is_null(i) {
                    continue;
                }
                self.cursor.advance(tl, t);
                let Some(g) = groups[i] else { continue };
                if !looks.value(i) {
                    continue;
                }
                if let Some((r, rt)) = self.cursor.latest(tl, g)
                    && within(t, rt)
                {
                    rows[i] = r;
                    valid.set_bit(i, true);
                }
            }
        } else {
            self.metrics.index_rows.add(n);
            self.built.right.ensure_index()?;
            let mut candidates = vec![];
            for (i, &g) in groups.iter().enumerate() {
                let Some(g) = g else { continue };
                if !looks.value(i) {
                    continue;
                }
                let t = times[i];
                if spec.pair_filter.is_some() {
                    // The nearest candidate's position in the group.
                    if let Some(p) = tl.lookup_position(g, t, forward, strict) {
                        candidates.push(Candidate { row: i, g, p });
                    }
                } else if let Some((r, rt)) = tl.lookup(g, t, forward, strict)
                    && within(t, rt)
                {
                    rows[i] = r;
                    valid.set_bit(i, true);
                }
            }
            if let Some(filter) = &spec.pair_filter {
                let found =
                    self.pair_matches(&left, filter, candidates, forward, |i, rt| {
                        within(times[i], rt)
                    })?;
                for (i, r) in found {
                    rows[i] = r;
                    valid.set_bit(i, true);
                }
            }
        }
        let nulls = NullBuffer::new(valid.finish());
        if !self.built.matched.is_empty() {
            for i in nulls.valid_indices() {
                let r = rows[i] as usize;
                self.built.matched[r / 64].fetch_or(1 << (r % 64), Ordering::Relaxed);
            }
        }
        let mut indices = UInt32Array::new(rows.into(), Some(nulls));
        let (mut left, mut n) = (left, n);
        let unmatched = indices.nulls().filter(|m| m.null_count() > 0).cloned();
        if let Some(matched) = unmatched.filter(|_| !emits_unmatched_left(spec.join_type))
        {
            // Inner and Right joins keep the left rows that found a match:
            // dropped before anything is gathered for them.
            let matched = BooleanArray::new(matched.into_inner(), None);
            left = filter_record_batch(&left, &matched)?;
            indices = filter(&indices, &matched)?.as_primitive().clone();
            n = indices.len();
        }
        let none = indices.null_count() == n;
        let width = left.num_columns();
        let column = |i: usize| -> Result<ArrayRef> {
            if i < width {
                return Ok(Arc::clone(left.column(i)));
            }
            let c = tl.batch.column(i - width);
            Ok(if tl.batch.num_rows() == 0 || none {
                new_null_array(c.data_type(), n)
            } else {
                take(c.as_ref(), &indices, None)?
            })
        };
        self.output(n, column)
    }
}
