//! The output stream of one left partition: drain every right input into
//! its shared [`BuiltTimeline`] once, then expand left batches into (row,
//! offset) pairs as they come, matching each right table by one streaming
//! merge cursor per offset while the left times keep increasing, by the
//! per-key index otherwise.

use super::metrics::HorizonJoinMetrics;
use super::spec::HorizonJoinSpec;
use crate::temporal::{
    BuiltTimeline, Found, MergeCursor, SharedBuild, is_non_decreasing, key_arrays, ticks,
};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, RecordBatch, UInt32Array, new_null_array,
};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
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
    pub shared: Arc<SharedState>,
    pub metrics: HorizonJoinMetrics,
    pub context: Arc<TaskContext>,
}

async fn build_all(
    rights: Vec<Arc<dyn ExecutionPlan>>,
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
        shared,
        metrics,
        context,
    } = args;
    let out_schema = Arc::clone(&schema);
    let output = metrics.baseline.clone();
    let stream = stream::once(async move {
        let built = shared
            .get_or_build(|| build_all(rights, &spec, Arc::clone(&context), &metrics))
            .await?;
        let mut joiner =
            Joiner::try_new(built, spec, offsets, out_schema, metrics, &context)?;
        Ok::<_, DataFusionError>(
            left.map(move |b| joiner.join(b?))
                .map_ok(|v| stream::iter(v.into_iter().map(Ok)))
                .try_flatten(),
        )
    })
    .try_flatten()
    .inspect_ok(move |b| output.record_output(b.num_rows()));
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}

/// Expands and matches the batches of one left partition, in order.
struct Joiner {
    built: Arc<Vec<BuiltTimeline>>,
    /// Per right table, one cursor per offset.
    cursors: Vec<Vec<MergeCursor>>,
    spec: Arc<HorizonJoinSpec>,
    offsets: Arc<Vec<i64>>,
    schema: SchemaRef,
    metrics: HorizonJoinMetrics,
    /// Left rows per output batch: about `batch_size` pairs each.
    chunk: usize,
    _reservation: MemoryReservation,
}

impl Joiner {
    fn try_new(
        built: Arc<Vec<BuiltTimeline>>,
        spec: Arc<HorizonJoinSpec>,
        offsets: Arc<Vec<i64>>,
        schema: SchemaRef,
        metrics: HorizonJoinMetrics,
        context: &TaskContext,
    ) -> Result<Self> {
        // The cursors' per-key state: offsets x groups positions per table.
        let reservation = MemoryConsumer::new("HorizonJoinExec[cursors]")
            .register(context.memory_pool());
        let k = offsets.len();
        let bytes: usize = built.iter().map(|b| b.timeline.groups * 4 * k).sum();
        reservation.try_grow(bytes)?;
        let cursors = built
            .iter()
            .map(|b| {
                (0..k)
                    .map(|_| MergeCursor::new(&b.timeline, false))
                    .collect()
            })
            .collect();
        let batch_size = context.session_config().batch_size();
        Ok(Self {
            built,
            cursors,
            spec,
            chunk: (batch_size / k.max(1)).max(1),
            offsets,
            schema,
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
        let elapsed = start.elapsed();
        self.metrics.join_time.add_duration(elapsed);
        self.metrics
            .baseline
            .elapsed_compute()
            .add_duration(elapsed);
        Ok(out)
    }

    fn join_chunk(&mut self, left: &RecordBatch) -> Result<RecordBatch> {
        let n = left.num_rows();
        let k = self.offsets.len();
        self.metrics.input_rows.add(n);
        let spec = Arc::clone(&self.spec);
        let ts_array = spec.left_ts.evaluate(left)?.into_array(n)?;
        // Left ticks (the left unit).
        let lt = ticks(&ts_array, 1)?;
        let sorted = is_non_decreasing(&lt);
        let first = lt.iter().flatten().next().copied();
        let left_rows = UInt32Array::from_iter_values(
            (0..n as u32).flat_map(|i| std::iter::repeat_n(i, k)),
        );
        let mut columns: Vec<ArrayRef> = left
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &left_rows, None))
            .collect::<Result<_, _>>()?;
        for j in 0..self.built.len() {
            let rows = self.match_right(j, left, &lt, sorted, first)?;
            let tl = &self.built[j].timeline;
            let indices = UInt32Array::from(rows);
            for c in tl.batch.columns() {
                columns.push(
                    if tl.batch.num_rows() == 0 || indices.null_count() == n * k {
                        new_null_array(c.data_type(), n * k)
                    } else {
                        take(c.as_ref(), &indices, None)?
                    },
                );
            }
        }
        let offsets = &self.offsets;
        columns.push(Arc::new(Int64Array::from_iter_values(
            (0..n).flat_map(|_| offsets.iter().copied()),
        )));
        let at: Int64Array = lt
            .iter()
            .flat_map(|t| offsets.iter().map(move |o| t.map(|t| t.saturating_add(*o))))
            .collect();
        columns.push(cast(&at, ts_array.data_type())?);
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), columns)?)
    }

    /// The matching row of right table `j` for every (left row, offset)
    /// pair, row-major.
    fn match_right(
        &mut self,
        j: usize,
        left: &RecordBatch,
        lt: &[Option<i64>],
        sorted: bool,
        first: Option<i64>,
    ) -> Result<Vec<Option<u32>>> {
        let n = left.num_rows();
        let k = self.offsets.len();
        let r = &self.spec.rights[j];
        let built = &self.built[j];
        let tl = &built.timeline;
        let factor = r.scale.left_factor();
        let common = |t: i64, o: i64| t.saturating_add(o).saturating_mul(factor);
        let groups = tl.groups_of(&key_arrays(&r.left_keys, left)?, n)?;
        let allowed: Option<ArrayRef> = match &r.left_filter {
            Some(f) => Some(f.evaluate(left)?.into_array(n)?),
            None => None,
        };
        let allowed = allowed.as_ref().map(|a| a.as_boolean());
        let wanted = |i: usize| -> Option<u32> {
            if let Some(a) = allowed
                && !(a.is_valid(i) && a.value(i))
            {
                return None;
            }
            groups[i]
        };
        let mut rows: Vec<Option<u32>> = vec![None; n * k];
        let cursors = &mut self.cursors[j];
        let merge = sorted
            && first.is_none_or(|t| {
                cursors
                    .iter()
                    .zip(self.offsets.iter())
                    .all(|(c, &o)| c.accepts(common(t, o)))
            });
        if merge {
            self.metrics.merge_lookups.add(n * k);
            // Offset by offset: each cursor runs over the chunk once.
            for (ki, (cursor, &o)) in
                cursors.iter_mut().zip(self.offsets.iter()).enumerate()
            {
                if let Some(t) = first
                    && !cursor.started()
                {
                    cursor.start(tl, common(t, o));
                }
                for (i, t) in lt.iter().enumerate() {
                    let Some(t) = *t else { continue };
                    let t = common(t, o);
                    cursor.advance(tl, t);
                    let Some(g) = wanted(i) else { continue };
                    rows[i * k + ki] = match cursor.get(tl, g) {
                        Found::Row(row, _) => Some(row),
                        Found::Nothing => None,
                        Found::AskIndex => {
                            built.ensure_index()?;
                            tl.lookup(g, t, false, false).map(|(row, _)| row)
                        }
                    };
                }
            }
        } else {
            self.metrics.index_lookups.add(n * k);
            built.ensure_index()?;
            for (i, t) in lt.iter().enumerate() {
                let (Some(t), Some(g)) = (*t, wanted(i)) else {
                    continue;
                };
                for (ki, &o) in self.offsets.iter().enumerate() {
                    rows[i * k + ki] =
                        tl.lookup(g, common(t, o), false, false).map(|(row, _)| row);
                }
            }
        }
        Ok(rows)
    }
}
