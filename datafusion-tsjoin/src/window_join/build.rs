//! The right-side index of a WINDOW JOIN: every right row grouped by key and
//! ordered by `(timestamp, row)` inside each key, built once per execution
//! and shared read-only by all left partitions and tasks.
//!
//! The build runs in two steps:
//! 1. every right partition is reduced by its own task as its batches arrive
//!    ([`Piece`]: timestamps, key group ids from one shared interner,
//!    per-group counts, aggregate arguments), overlapping with the scan;
//! 2. [`assemble`] places the rows with a counting sort by group, in
//!    parallel over shares of the input (`place.rs`). When every
//!    piece is time-ordered and the pieces' time ranges follow each other
//!    (files split by time, the usual layout) the result is already ordered
//!    inside each group and the fast columns are placed the same way;
//!    otherwise each group is sorted, in parallel over groups, and the fast
//!    columns are gathered by row. The fast columns are then built side by
//!    side, each over its share of the threads.
//!
//! Rows are numbered piece after piece (right partition order), each piece
//! in its input order; that number breaks timestamp ties.

use super::bounds::Prevailing;
use super::eval::{batch_referenced_size, eval_all, eval_ticks, referenced_size};
use super::fast::column::{ColumnSpec, ColumnType, FastColumn, Placed};
use super::fast::{FastAgg, FastPlan};
use super::key_index::KeyIndex;
use super::par::{for_group_ranges, par_each};
use super::place::{
    NO_GROUP, Piece, Placement, Span, gather_column, gather_flags, layout,
};
use super::search::longest_window;
use super::spec::{AggInput, WindowJoinSpec};
use crate::kernels::KernelSet;
use crate::priority::PhaseGate;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, RecordBatch, UInt32Array, new_empty_array,
};
use datafusion::arrow::compute::{concat, concat_batches, filter_record_batch, take};
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type, SchemaRef};
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::{DataFusionError, Result, internal_datafusion_err};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::physical_plan::{
    ExecutionPlan, ExecutionPlanProperties, SendableRecordBatchStream,
};
use futures::StreamExt;
use parking_lot::Mutex;
use std::sync::Arc;

/// Right rows in `(key, ts, row)` order. Positions index `ts` and `order`;
/// `order[pos]` is the row (of `batch` and `agg_values`) at that position.
/// Key group `g` owns positions `group_offsets[g]..group_offsets[g + 1]`.
pub(crate) struct RightIndex {
    /// All right rows that passed the right-only ON filter (rows with a NULL
    /// timestamp never match and are still here, but in no group). Kept
    /// only when the join evaluates (left, right) pairs; empty otherwise.
    pub batch: RecordBatch,
    /// Timestamps in common ticks, by position (ascending inside a group).
    pub ts: Vec<i64>,
    /// Row at each position; empty when nothing reads rows by position
    /// (a fast plan without first/last over groups that kept their order).
    pub order: Vec<u32>,
    /// Group boundaries over positions; `len = groups + 1`.
    pub group_offsets: Vec<u32>,
    /// `None` when the join has no equality keys (one group holds every row).
    pub keys: Option<KeyIndex>,
    /// Per aggregate, its argument arrays by row when the aggregate reads
    /// right columns only (empty for pair-evaluated ones).
    pub agg_values: Vec<Vec<ArrayRef>>,
    /// Fast-path buffers, one per [`FastPlan`] column (empty on the general
    /// path).
    pub fast: Vec<FastColumn>,
    _reservation: Arc<MemoryReservation>,
}

impl std::fmt::Debug for RightIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RightIndex")
            .field("rows", &self.ts.len())
            .field("groups", &(self.group_offsets.len() - 1))
            .finish()
    }
}

impl RightIndex {
    /// Positions of key group `g`.
    pub(crate) fn group(&self, g: u32) -> (usize, usize) {
        (
            self.group_offsets[g as usize] as usize,
            self.group_offsets[g as usize + 1] as usize,
        )
    }

    /// Number of groups.
    pub(crate) fn num_groups(&self) -> usize {
        self.group_offsets.len() - 1
    }

    /// Number of rows indexed (rows with a timestamp).
    pub(crate) fn num_positions(&self) -> usize {
        self.ts.len()
    }

    /// Bytes reserved in the memory pool for this index.
    pub(crate) fn reserved_bytes(&self) -> usize {
        self._reservation.size()
    }
}

/// Key → group id for the whole build: one global [`KeyIndex`] behind a
/// lock, fed by the pieces only with keys they have not seen before.
type SharedKeys = Arc<Mutex<KeyIndex>>;

/// Per aggregate, one empty list per argument it evaluates over right rows
/// (none for aggregates evaluated per pair), to collect arrays into.
fn right_arg_lists<T>(spec: &WindowJoinSpec) -> Vec<Vec<Vec<T>>> {
    spec.aggs
        .iter()
        .map(|a| {
            let args = if a.input == AggInput::Right {
                a.args.len()
            } else {
                0
            };
            (0..args).map(|_| vec![]).collect()
        })
        .collect()
}

/// Reduces one right partition into a [`Piece`].
async fn reduce_partition(
    mut input: SendableRecordBatchStream,
    spec: Arc<WindowJoinSpec>,
    keys: Option<SharedKeys>,
    reservation: Arc<MemoryReservation>,
) -> Result<Piece> {
    let keep_rows = spec.needs_pairs();
    let mut piece = Piece {
        values: right_arg_lists(&spec),
        ..Default::default()
    };
    // This partition's own interner, and where its ids live globally: the
    // shared lock is taken only for keys new to this partition.
    let mut local = match &keys {
        Some(k) => Some(k.lock().empty_like()?),
        None => None,
    };
    let mut to_global: Vec<u32> = vec![];
    while let Some(batch) = input.next().await {
        let mut batch = batch?;
        if let Some(filter) = &spec.right_filter {
            let mask = filter.evaluate(&batch)?.into_array(batch.num_rows())?;
            batch = filter_record_batch(&batch, mask.as_boolean())?;
        }
        let n = batch.num_rows();
        let ts = eval_ticks(&spec.right_ts, &batch, spec.scale.right_factor())?;
        let mut size = n * 12;
        let ids = match (&mut local, &keys) {
            (Some(local), Some(shared)) => {
                let key_arrays = eval_all(&spec.right_keys, &batch)?;
                let ids = local.intern(&key_arrays)?;
                if local.len() > to_global.len() {
                    to_global.extend(new_globals(
                        shared,
                        &key_arrays,
                        &ids,
                        to_global.len(),
                        local.len(),
                    )?);
                }
                Some(ids)
            }
            _ => None,
        };
        let mut span = Span {
            start: piece.rows,
            rows: n,
            sorted: true,
            range: None,
        };
        let global =
            |row: usize| ids.as_ref().map_or(0, |ids| to_global[ids[row] as usize]);
        match ts.nulls().filter(|n| n.null_count() > 0) {
            None if n > 0 => {
                // The common case, in whole-slice passes.
                let t = ts.values();
                span.sorted = t.windows(2).all(|w| w[0] <= w[1]);
                span.range = Some(if span.sorted {
                    (t[0], t[n - 1])
                } else {
                    (
                        *t.iter().min().expect("n > 0"),
                        *t.iter().max().expect("n > 0"),
                    )
                });
                piece.ts.extend_from_slice(t);
                piece.gid.extend((0..n).map(global));
            }
            None => {}
            Some(nulls) => {
                for row in 0..n {
                    if nulls.is_null(row) {
                        piece.ts.push(0);
                        piece.gid.push(NO_GROUP);
                        continue;
                    }
                    let t = ts.value(row);
                    span.range = Some(match span.range {
                        None => (t, t),
                        Some((lo, hi)) => {
                            span.sorted &= t >= hi;
                            (lo.min(t), hi.max(t))
                        }
                    });
                    piece.ts.push(t);
                    piece.gid.push(global(row));
                }
            }
        }
        piece.spans.push(span);
        piece.rows += n;
        for (agg, parts) in spec.aggs.iter().zip(&mut piece.values) {
            for (arg, part) in agg.args.iter().zip(parts.iter_mut()) {
                let v = arg.evaluate(&batch)?.into_array(n)?;
                size += referenced_size(v.as_ref());
                part.push(v);
            }
        }
        if keep_rows {
            size += batch_referenced_size(&batch);
            piece.batches.push(batch);
        }
        reservation.try_grow(size)?;
    }
    Ok(piece)
}

/// Global ids of local groups `from..to`, interning the keys they stand for
/// (taken from the first row of each) in the shared index.
fn new_globals(
    shared: &SharedKeys,
    keys: &[ArrayRef],
    ids: &[u32],
    from: usize,
    to: usize,
) -> Result<Vec<u32>> {
    let mut first = vec![u32::MAX; to - from];
    for (row, &id) in ids.iter().enumerate() {
        let id = id as usize;
        if id >= from && first[id - from] == u32::MAX {
            first[id - from] = row as u32;
        }
    }
    let rows = UInt32Array::from(first);
    let taken = keys
        .iter()
        .map(|k| Ok(take(k.as_ref(), &rows, None)?))
        .collect::<Result<Vec<_>>>()?;
    shared.lock().intern(&taken)
}

/// What the index is built for: the join's spec, its fast-path plan (whose
/// columns the index holds), the kernels those columns' block structures
/// use, the threads the build may use, and where they pause for a query
/// of higher priority.
pub(crate) struct IndexBuild {
    pub spec: Arc<WindowJoinSpec>,
    pub fast_plan: Option<Arc<FastPlan>>,
    pub kernels: KernelSet,
    pub threads: usize,
    pub gate: PhaseGate,
}

/// Drains every partition of `right` (in parallel, one task each) and builds
/// its [`RightIndex`] with up to `how.threads` threads, accounting every buffer
/// in `reservation` (an over-budget build fails with `ResourcesExhausted`).
pub(crate) async fn build_right_index(
    right: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
    how: IndexBuild,
    reservation: MemoryReservation,
) -> Result<RightIndex> {
    let spec = Arc::clone(&how.spec);
    let schema = right.schema();
    let keys = if spec.right_keys.is_empty() {
        None
    } else {
        let types = spec
            .right_keys
            .iter()
            .map(|k| k.data_type(&schema))
            .collect::<Result<Vec<_>>>()?;
        Some(Arc::new(Mutex::new(KeyIndex::try_new(&types)?)))
    };
    let reservation = Arc::new(reservation);
    let partitions = right.output_partitioning().partition_count();
    let mut tasks = Vec::with_capacity(partitions);
    for p in 0..partitions {
        let input = right.execute(p, Arc::clone(&context))?;
        let (spec, keys, reservation) =
            (Arc::clone(&spec), keys.clone(), Arc::clone(&reservation));
        // Spawned so partitions reduce in parallel; dropping the build
        // (the query was cancelled) aborts them.
        tasks.push(SpawnedTask::spawn(reduce_partition(
            input,
            spec,
            keys,
            reservation,
        )));
    }
    let mut pieces = Vec::with_capacity(partitions);
    for task in tasks {
        pieces.push(
            task.join()
                .await
                .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))??,
        );
    }
    // Every task has ended, so the key index is no longer shared.
    let keys = keys
        .map(|k| {
            Arc::try_unwrap(k).map(Mutex::into_inner).map_err(|_| {
                internal_datafusion_err!("WINDOW JOIN key index still shared")
            })
        })
        .transpose()?;
    // A blocking task runs to its end even when its future is dropped:
    // the guard tells it to stop at its next pause point instead.
    let _cancel = how.gate.cancel_on_drop();
    let task = SpawnedTask::spawn_blocking(move || {
        assemble(pieces, schema, &how, keys, reservation)
    });
    task.join()
        .await
        .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))?
}

/// Places the pieces' rows in `(group, ts, row)` order and builds the
/// fast-path columns.
fn assemble(
    pieces: Vec<Piece>,
    schema: SchemaRef,
    how: &IndexBuild,
    keys: Option<KeyIndex>,
    reservation: Arc<MemoryReservation>,
) -> Result<RightIndex> {
    let (spec, fast_plan, kernels, gate) = (
        how.spec.as_ref(),
        how.fast_plan.as_deref(),
        how.kernels,
        &how.gate,
    );
    gate.check()?;
    let threads = how.threads.max(1);
    let n_groups = keys.as_ref().map_or(1, KeyIndex::len);
    let (units, presorted) = layout(&pieces);
    let rows: usize = pieces.iter().map(|p| p.rows).sum();
    // The aggregate arguments leave the pieces: [piece][agg][arg][span].
    let mut pieces = pieces;
    let mut piece_values: Vec<Vec<Vec<Vec<ArrayRef>>>> = pieces
        .iter_mut()
        .map(|p| std::mem::take(&mut p.values))
        .collect();
    let mut batches: Vec<RecordBatch> = pieces
        .iter_mut()
        .flat_map(|p| std::mem::take(&mut p.batches))
        .collect();
    let placement = Placement::new(&pieces, &units, n_groups, threads, gate);
    let positions = placement.positions();
    // Row numbers and timestamps by position, then each fast column in
    // turn (8 bytes and a NULL flag per position; 8 more per row while a
    // re-sorted index gathers by row).
    let column_bytes = fast_plan.map_or(0, |p| {
        p.columns.len() * (positions * 9 + if presorted { 0 } else { rows * 9 })
    });
    reservation.try_grow(positions * 12 + placement.offsets.len() * 4 + column_bytes)?;
    // Rows by position are read by first/last, the general path and the
    // re-sort; a fast plan without them needs only the timestamps.
    let by_position = !presorted
        || fast_plan
            .is_none_or(|p| p.aggs.iter().any(|a| matches!(a, FastAgg::Pick(..))));
    gate.check()?;
    let (mut order, mut ts, slots) = placement.rows(by_position);
    let group_offsets = placement.offsets.clone();
    gate.check()?;
    if !presorted {
        sort_groups(&mut order, &mut ts, &group_offsets, threads);
        gate.check()?;
    }
    // Each fast column placed as the rows were, while groups keep the
    // placement's order, else gathered by row once groups are sorted; then
    // its block structures. Columns are built side by side, sharing the
    // threads.
    let columns = fast_plan.map_or(&[][..], |p| p.columns.as_slice());
    let per_column = (threads / columns.len().max(1)).max(1);
    // Block tables need levels only up to the longest window, which
    // constant bounds cap at the most rows a group holds within the
    // window's width (plus the prevailing row): a few levels instead of
    // one per doubling up to the largest group.
    let longest = columns
        .iter()
        .any(|c| c.min_max)
        .then(|| window_rows_bound(spec, &ts, &group_offsets, threads))
        .flatten();
    let build = |c: &ColumnSpec| -> Result<FastColumn> {
        gate.check()?;
        let parts: Vec<&[ArrayRef]> = piece_values
            .iter()
            .map(|v| v[c.agg][0].as_slice())
            .collect();
        let mut placed = Placed::default();
        if presorted {
            match c.ty {
                ColumnType::Float => {
                    (placed.floats, placed.nulls) =
                        placement.column::<Float64Type>(&parts, &slots)?
                }
                ColumnType::Int => {
                    (placed.ints, placed.nulls) =
                        placement.column::<Int64Type>(&parts, &slots)?
                }
                ColumnType::NullsOnly => {
                    placed.nulls = placement.flags(&parts, &slots)?
                }
            }
        } else {
            let parts: Vec<ArrayRef> =
                parts.into_iter().flat_map(|p| p.iter().cloned()).collect();
            match c.ty {
                ColumnType::Float => {
                    (placed.floats, placed.nulls) =
                        gather_column::<Float64Type>(&parts, &order, per_column)?
                }
                ColumnType::Int => {
                    (placed.ints, placed.nulls) =
                        gather_column::<Int64Type>(&parts, &order, per_column)?
                }
                ColumnType::NullsOnly => {
                    placed.nulls = gather_flags(&parts, &order, per_column)
                }
            }
        }
        gate.check()?;
        Ok(FastColumn::build(
            c,
            placed,
            &group_offsets,
            longest,
            kernels,
            per_column,
        ))
    };
    let fast = par_each(columns.iter().collect(), build)
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
    drop(slots);
    drop(placement);
    drop(pieces);
    gate.check()?;

    // Aggregate arguments by row, where something reads them by row (the
    // general path, first/last); the rows themselves for pairs.
    let by_row =
        |i: usize| fast_plan.is_none_or(|p| matches!(p.aggs[i], FastAgg::Pick(..)));
    let mut values: Vec<Vec<Vec<ArrayRef>>> = right_arg_lists(spec);
    for piece in piece_values.iter_mut() {
        for (all, parts) in values.iter_mut().zip(std::mem::take(piece)) {
            for (all, part) in all.iter_mut().zip(parts) {
                all.extend(part);
            }
        }
    }
    let batch = concat_batches(&schema, &batches)?;
    batches.clear();
    let agg_values = spec
        .aggs
        .iter()
        .zip(values)
        .enumerate()
        .map(|(i, (agg, parts))| {
            if !by_row(i) {
                return Ok(vec![]);
            }
            agg.args
                .iter()
                .zip(parts)
                .map(|(arg, p)| concat_parts(p, &arg.data_type(&schema)?))
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?;
    let values_size: usize = agg_values
        .iter()
        .flatten()
        .map(|a| referenced_size(a.as_ref()))
        .sum();
    let fast_size: usize = fast.iter().map(FastColumn::memory_size).sum();
    reservation.try_resize(
        values_size
            + fast_size
            + positions * 12
            + group_offsets.len() * 4
            + batch_referenced_size(&batch),
    )?;
    Ok(RightIndex {
        batch,
        ts,
        order,
        group_offsets,
        keys,
        agg_values,
        fast,
        _reservation: reservation,
    })
}

/// The most positions one window can span, when both bounds are constant.
fn window_rows_bound(
    spec: &WindowJoinSpec,
    ts: &[i64],
    offsets: &[u32],
    threads: usize,
) -> Option<usize> {
    let lo = spec.lo.constant_offset()?;
    let hi = spec.hi.constant_offset()?;
    let prevailing = usize::from(spec.prevailing == Prevailing::Include);
    Some(longest_window(ts, offsets, hi.saturating_sub(lo).max(0), threads) + prevailing)
}

/// Concatenates the per-batch parts of one array (empty input: an empty array).
fn concat_parts(parts: Vec<ArrayRef>, data_type: &DataType) -> Result<ArrayRef> {
    Ok(match parts.len() {
        0 => new_empty_array(data_type),
        1 => parts.into_iter().next().expect("one part"),
        _ => concat(&parts.iter().map(|a| a.as_ref()).collect::<Vec<_>>())?,
    })
}

/// Orders each key group's positions by `(timestamp, row)`. Rows arrive in
/// row order inside a group, so a group whose timestamps are already
/// non-decreasing costs one pass; the rest sort `(ts, row)` pairs. Large
/// inputs are split at group boundaries over `threads` threads.
fn sort_groups(order: &mut [u32], ts: &mut [i64], offsets: &[u32], threads: usize) {
    if threads == 1 || order.len() < 1 << 16 {
        return sort_group_range(order, ts, offsets);
    }
    for_group_ranges(order, ts, offsets, threads, sort_group_range);
}

fn sort_group_range(order: &mut [u32], ts: &mut [i64], offsets: &[u32]) {
    let mut pairs: Vec<(i64, u32)> = vec![];
    for w in offsets.windows(2) {
        let (s, e) = (w[0] as usize, w[1] as usize);
        let (o, t) = (&mut order[s..e], &mut ts[s..e]);
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
