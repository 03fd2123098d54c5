//! The output stream of one left partition: drain the right input into the
//! shared [`Timeline`] once, then match left batches as they come, by the
//! streaming merge while the left times keep increasing, by the per-key
//! index otherwise.

use super::metrics::AsofJoinMetrics;
use super::spec::{AsofDirection, AsofJoinSpec};
use crate::temporal::{
    BuiltTimeline, Found, MergeCursor, SharedBuild, array_is_non_decreasing, key_arrays,
    record_join_time, tick_array,
};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, BooleanBufferBuilder, RecordBatch,
    RecordBatchOptions, UInt32Array, new_null_array,
};
use datafusion::arrow::buffer::{BooleanBuffer, NullBuffer};
use datafusion::arrow::compute::{filter_record_batch, take};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use futures::{StreamExt, TryStreamExt, stream};
use std::sync::Arc;
use std::time::Instant;

/// Per-execution state shared by the partitions of one operator instance.
pub(super) type SharedState = SharedBuild<BuiltTimeline>;

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
) -> Result<BuiltTimeline> {
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
    Ok(built)
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
        metrics,
        context,
    } = args;
    let out_schema = Arc::clone(&schema);
    let output = metrics.baseline.clone();
    let stream = stream::once(async move {
        let built = shared
            .get_or_build(|| build(right, right_columns, &spec, context, &metrics))
            .await?;
        let mut joiner = Joiner {
            cursor: MergeCursor::new(&built.timeline, spec.matching.strict),
            built,
            spec,
            schema: out_schema,
            projection,
            metrics,
        };
        Ok::<_, DataFusionError>(left.map(move |b| joiner.join(b?)))
    })
    .try_flatten()
    .inspect_ok(move |b| output.record_output(b.num_rows()));
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}

/// Matches the batches of one left partition, in order.
struct Joiner {
    built: Arc<BuiltTimeline>,
    cursor: MergeCursor,
    spec: Arc<AsofJoinSpec>,
    schema: SchemaRef,
    projection: Option<Arc<[usize]>>,
    metrics: AsofJoinMetrics,
}

impl Joiner {
    fn join(&mut self, left: RecordBatch) -> Result<RecordBatch> {
        let start = Instant::now();
        let out = self.join_batch(left);
        record_join_time(&self.metrics.join_time, &self.metrics.baseline, start);
        out
    }

    fn join_batch(&mut self, left: RecordBatch) -> Result<RecordBatch> {
        let n = left.num_rows();
        self.metrics.input_rows.add(n);
        let spec = Arc::clone(&self.spec);
        let tl = &self.built.timeline;
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
        let merge = !forward
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
                let found = match self.cursor.get(g) {
                    Found::Row(r, rt) => Some((r, rt)),
                    Found::Nothing => None,
                    Found::AskIndex => {
                        self.built.ensure_index()?;
                        tl.lookup(g, t, false, strict)
                    }
                };
                if let Some((r, rt)) = found
                    && within(t, rt)
                {
                    rows[i] = r;
                    valid.set_bit(i, true);
                }
            }
        } else {
            self.metrics.index_rows.add(n);
            self.built.ensure_index()?;
            for (i, &g) in groups.iter().enumerate() {
                let Some(g) = g else { continue };
                if !looks.value(i) {
                    continue;
                }
                let t = times[i];
                if let Some((r, rt)) = tl.lookup(g, t, forward, strict)
                    && within(t, rt)
                {
                    rows[i] = r;
                    valid.set_bit(i, true);
                }
            }
        }
        let nulls = NullBuffer::new(valid.finish());
        let none = nulls.null_count() == n;
        let indices = UInt32Array::new(rows.into(), Some(nulls));
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
        let columns = match &self.projection {
            Some(p) => p.iter().map(|&i| column(i)).collect::<Result<Vec<_>>>()?,
            None => (0..width + tl.batch.num_columns())
                .map(column)
                .collect::<Result<_>>()?,
        };
        let options = RecordBatchOptions::new().with_row_count(Some(n));
        let out = RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &options,
        )?;
        if !spec.inner || indices.null_count() == 0 {
            return Ok(out);
        }
        // An inner join keeps the rows that found a match.
        let matched = BooleanArray::new(
            indices
                .nulls()
                .map_or_else(|| BooleanBuffer::new_set(n), |v| v.inner().clone()),
            None,
        );
        Ok(filter_record_batch(&out, &matched)?)
    }
}
