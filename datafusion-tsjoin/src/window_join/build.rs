//! The right-side index of a WINDOW JOIN: every right row grouped by key and
//! ordered by `(timestamp, input order)` inside each key, built once per
//! execution and shared read-only by all left partitions and tasks.

use super::exec::{AggInput, WindowJoinSpec};
use super::fast::{FastColumn, FastPlan};
pub(crate) use super::keys::KeyIndex;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, new_empty_array};
use datafusion::arrow::compute::{cast, concat, concat_batches, filter_record_batch, kernels::numeric::mul};
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::physical_plan::{PhysicalExpr, SendableRecordBatchStream};
use futures::StreamExt;
use std::sync::Arc;

/// Right rows in `(key, ts, input order)` order. Positions index `ts` and
/// `order`; `order[pos]` is the row of `batch` at that position. Key group `g`
/// owns positions `group_offsets[g]..group_offsets[g + 1]`.
pub(crate) struct RightIndex {
    /// All right rows that passed the right-only ON filter (rows with a NULL
    /// timestamp never match and are still here, but in no group). Kept
    /// only when the join evaluates (left, right) pairs; empty otherwise.
    pub batch: RecordBatch,
    /// Timestamps in common ticks, by position (ascending inside a group).
    pub ts: Vec<i64>,
    /// Row of `batch` at each position.
    pub order: Vec<u32>,
    /// Group boundaries over positions; `len = groups + 1`.
    pub group_offsets: Vec<u32>,
    /// `None` when the join has no equality keys (one group holds every row).
    pub keys: Option<KeyIndex>,
    /// Per aggregate, its argument arrays evaluated over `batch` when the
    /// aggregate reads right columns only (empty for pair-evaluated ones).
    pub agg_values: Vec<Vec<ArrayRef>>,
    /// Fast-path buffers, one per [`FastPlan`] column (empty on the general
    /// path).
    pub fast: Vec<FastColumn>,
    _reservation: MemoryReservation,
}

impl std::fmt::Debug for RightIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RightIndex").field("rows", &self.order.len()).field("groups", &(self.group_offsets.len() - 1)).finish()
    }
}

impl RightIndex {
    /// Positions of key group `g`.
    pub(crate) fn group(&self, g: u32) -> (usize, usize) {
        (self.group_offsets[g as usize] as usize, self.group_offsets[g as usize + 1] as usize)
    }

    /// Number of rows indexed (rows with a timestamp).
    pub(crate) fn num_positions(&self) -> usize {
        self.order.len()
    }
}

/// Evaluates a designated-timestamp expression and returns its values as
/// ticks of the common unit (`factor` common ticks per input tick).
pub(crate) fn eval_ticks(expr: &Arc<dyn PhysicalExpr>, batch: &RecordBatch, factor: i64) -> Result<Int64Array> {
    let array = expr.evaluate(batch)?.into_array(batch.num_rows())?;
    let raw = cast(&array, &DataType::Int64)?;
    let raw = raw.as_primitive::<Int64Type>();
    if factor == 1 {
        return Ok(raw.clone());
    }
    let scaled = mul(raw, &Int64Array::new_scalar(factor)).map_err(|e| {
        DataFusionError::Execution(format!(
            "timestamp out of range when converting to a finer unit for the WINDOW JOIN: {e}"
        ))
    })?;
    Ok(scaled.as_primitive::<Int64Type>().clone())
}

/// Evaluates expressions over a batch into arrays.
pub(crate) fn eval_all(exprs: &[Arc<dyn PhysicalExpr>], batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    exprs.iter().map(|e| e.evaluate(batch)?.into_array(batch.num_rows())).collect()
}

/// Drains the right input and builds its [`RightIndex`], accounting every
/// buffer in `reservation` (an over-budget build fails with
/// `ResourcesExhausted`).
pub(crate) async fn build_right_index(
    mut input: SendableRecordBatchStream,
    schema: SchemaRef,
    spec: Arc<WindowJoinSpec>,
    fast_plan: Option<&FastPlan>,
    reservation: MemoryReservation,
) -> Result<RightIndex> {
    // Each batch is reduced as it arrives (timestamps, key groups, aggregate
    // arguments), overlapping with the scan; only the general path's pair
    // evaluation needs the rows themselves.
    let keep_rows = spec.needs_pairs();
    let mut kept = vec![];
    let mut ts_parts: Vec<ArrayRef> = vec![];
    let mut groups: Vec<u32> = vec![];
    let mut keys = if spec.right_keys.is_empty() {
        None
    } else {
        let types = spec.right_keys.iter().map(|k| k.data_type(&schema)).collect::<Result<Vec<_>>>()?;
        Some(KeyIndex::try_new(&types)?)
    };
    let mut value_parts: Vec<Vec<Vec<ArrayRef>>> =
        spec.aggs.iter().map(|a| vec![vec![]; if a.input == AggInput::Right { a.args.len() } else { 0 }]).collect();
    while let Some(batch) = input.next().await {
        let mut batch = batch?;
        if let Some(filter) = &spec.right_filter {
            let mask = filter.evaluate(&batch)?.into_array(batch.num_rows())?;
            batch = filter_record_batch(&batch, mask.as_boolean())?;
        }
        let ts = eval_ticks(&spec.right_ts, &batch, spec.right_factor())?;
        let mut size = ts.get_array_memory_size() + batch.num_rows() * 4;
        ts_parts.push(Arc::new(ts));
        match &mut keys {
            Some(k) => groups.extend(k.intern(&eval_all(&spec.right_keys, &batch)?)?),
            None => groups.extend(std::iter::repeat_n(0, batch.num_rows())),
        }
        for (agg, parts) in spec.aggs.iter().zip(&mut value_parts) {
            for (arg, part) in agg.args.iter().zip(parts.iter_mut()) {
                let v = arg.evaluate(&batch)?.into_array(batch.num_rows())?;
                size += v.get_array_memory_size();
                part.push(v);
            }
        }
        if keep_rows {
            size += batch.get_array_memory_size();
            kept.push(batch);
        }
        reservation.try_grow(size)?;
    }
    let batch = concat_batches(&schema, &kept)?;
    drop(kept);
    let ts = concat_parts(ts_parts, &DataType::Int64)?;
    let ts = ts.as_primitive::<Int64Type>();
    let n_groups = keys.as_ref().map_or(1, KeyIndex::len);
    let agg_values = spec
        .aggs
        .iter()
        .zip(value_parts)
        .map(|(agg, parts)| {
            agg.args
                .iter()
                .zip(parts)
                .map(|(arg, p)| concat_parts(p, &arg.data_type(&schema)?))
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?;
    // The parts are gone: account what is held now.
    let values_size: usize = agg_values.iter().flatten().map(|a| a.get_array_memory_size()).sum();
    reservation.try_resize(
        values_size + ts.get_array_memory_size() + groups.len() * 4 + batch.get_array_memory_size(),
    )?;

    // Counting sort by group (stable, so input order survives), then a stable
    // sort by timestamp inside each group that is not already sorted.
    let mut group_offsets = vec![0u32; n_groups + 1];
    for (row, &g) in groups.iter().enumerate() {
        if ts.is_valid(row) {
            group_offsets[g as usize + 1] += 1;
        }
    }
    for g in 0..n_groups {
        group_offsets[g + 1] += group_offsets[g];
    }
    let positions = group_offsets[n_groups] as usize;
    reservation.try_grow(positions * 12 + group_offsets.len() * 4)?;
    let mut cursor = group_offsets.clone();
    let mut order = vec![0u32; positions];
    for (row, &g) in groups.iter().enumerate() {
        if ts.is_valid(row) {
            order[cursor[g as usize] as usize] = row as u32;
            cursor[g as usize] += 1;
        }
    }
    let mut ts_sorted = vec![0i64; positions];
    sort_groups(&mut order, &mut ts_sorted, &group_offsets, ts.values());

    // Fast-path columns are independent: one thread each.
    let columns = fast_plan.map(|p| p.columns.as_slice()).unwrap_or_default();
    let fast: Vec<FastColumn> = std::thread::scope(|scope| {
        let handles: Vec<_> = columns
            .iter()
            .map(|column| {
                let (values, order) = (&agg_values[column.agg][0], &order);
                scope.spawn(move || FastColumn::build(column, values, order))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("fast column build panicked")).collect::<Result<Vec<_>>>()
    })?;
    reservation.try_grow(fast.iter().map(FastColumn::memory_size).sum())?;

    Ok(RightIndex {
        batch,
        ts: ts_sorted,
        order,
        group_offsets,
        keys,
        agg_values,
        fast,
        _reservation: reservation,
    })
}

/// Concatenates the per-batch parts of one array (empty input: an empty array).
fn concat_parts(parts: Vec<ArrayRef>, data_type: &DataType) -> Result<ArrayRef> {
    Ok(match parts.len() {
        0 => new_empty_array(data_type),
        1 => parts.into_iter().next().expect("one part"),
        _ => concat(&parts.iter().map(|a| a.as_ref()).collect::<Vec<_>>())?,
    })
}

/// Orders each key group's positions by `(timestamp, row)` and writes the
/// sorted timestamps. Groups already in order (the common case for
/// time-ordered input) cost one pass; the rest sort `(ts, row)` pairs, which
/// equals a stable sort by timestamp. Large inputs are split at group
/// boundaries over the machine's cores.
fn sort_groups(order: &mut [u32], ts_sorted: &mut [i64], offsets: &[u32], raw: &[i64]) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(16);
    if threads == 1 || order.len() < 1 << 16 {
        return sort_group_range(order, ts_sorted, offsets, raw);
    }
    // Cut points: the first group boundary at or after each 1/threads of the positions.
    let total = order.len();
    let mut cuts = vec![0usize];
    for k in 1..threads {
        let target = (total * k / threads) as u32;
        let g = offsets.partition_point(|&o| o < target).min(offsets.len() - 1);
        if g > *cuts.last().unwrap() {
            cuts.push(g);
        }
    }
    cuts.push(offsets.len() - 1);
    std::thread::scope(|scope| {
        let (mut order, mut ts_sorted) = (order, ts_sorted);
        for w in cuts.windows(2) {
            let (g0, g1) = (w[0], w[1]);
            let len = (offsets[g1] - offsets[g0]) as usize;
            let (o, rest_o) = std::mem::take(&mut order).split_at_mut(len);
            let (t, rest_t) = std::mem::take(&mut ts_sorted).split_at_mut(len);
            order = rest_o;
            ts_sorted = rest_t;
            let base = offsets[g0];
            let local: Vec<u32> = offsets[g0..=g1].iter().map(|&x| x - base).collect();
            scope.spawn(move || sort_group_range(o, t, &local, raw));
        }
    });
}

fn sort_group_range(order: &mut [u32], ts_sorted: &mut [i64], offsets: &[u32], raw: &[i64]) {
    let mut pairs: Vec<(i64, u32)> = vec![];
    for w in offsets.windows(2) {
        let (s, e) = (w[0] as usize, w[1] as usize);
        let (o, t) = (&mut order[s..e], &mut ts_sorted[s..e]);
        for (ts, &r) in t.iter_mut().zip(o.iter()) {
            *ts = raw[r as usize];
        }
        if t.windows(2).all(|w| w[0] <= w[1]) {
            continue;
        }
        pairs.clear();
        pairs.extend(t.iter().copied().zip(o.iter().copied()));
        pairs.sort_unstable();
        for ((ts, r), (pt, pr)) in t.iter_mut().zip(o.iter_mut()).zip(&pairs) {
            *ts = *pt;
            *r = *pr;
        }
    }
}
