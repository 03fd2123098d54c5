//! [`Timeline`]: the right side of a temporal join, in time order, with a
//! key group per row and (built only when a lookup needs it) a per-key
//! index for binary search.

use super::time::{array_is_non_decreasing, tick_array};
use crate::priority::{PhaseGate, ROWS_PER_PAUSE};
use crate::window_join::KeyIndex;
use datafusion::arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, AsArray, BooleanArray, BooleanBufferBuilder,
    Int64Array, PrimitiveArray, RecordBatch, RecordBatchOptions, UInt32Array,
    downcast_primitive_array, new_empty_array, new_null_array,
};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::{cast, concat, concat_batches, interleave, take};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use datafusion::common::{Result, exec_err, internal_err};
use datafusion::physical_plan::PhysicalExpr;
use std::sync::{Arc, OnceLock};

/// How to turn right batches into a [`Timeline`].
pub(crate) struct TimelineBuild<'a> {
    /// Right schema (of the batches).
    pub schema: SchemaRef,
    /// Equality key expressions over the right schema (may be empty).
    pub keys: &'a [Arc<dyn PhysicalExpr>],
    /// The right time expression.
    pub ts: &'a Arc<dyn PhysicalExpr>,
    /// Common ticks per right tick.
    pub factor: i64,
    /// Where the build pauses for a query of higher priority.
    pub gate: &'a PhaseGate,
    /// The columns (indices into `schema`) the timeline's batch keeps;
    /// `None`: all. The others become all-NULL columns of type `Null`
    /// (nothing reads them), so the right rows' keys and times, and the
    /// columns a join does not emit, are never copied.
    pub keep: Option<&'a [usize]>,
}

/// The right rows of a temporal join, time-ordered.
///
/// `seq` lists the rows that have a time, ordered by time with ties in input
/// order (a stable sort, skipped when the input arrived ordered), so "the
/// last row at or before `t`" is the latest row in input order among equal
/// times.
pub(crate) struct Timeline {
    /// Right rows, all columns, in input order.
    pub batch: RecordBatch,
    /// Rows (into `batch`) that have a time, in time order; `None` when
    /// that is every row in input order (the common case: no vector of
    /// positions is built, filled or read). See [`Self::seq_row`].
    seq: Option<Vec<u32>>,
    /// Time of each `seq` entry, in common ticks.
    pub seq_ts: Vec<i64>,
    /// Key group of each `seq` entry.
    pub seq_key: Vec<u32>,
    /// Per key group, its first `seq` entry (`u32::MAX` when it has no
    /// timed row): a warm-up that did not meet a group knows it empty when
    /// this is at or after the start.
    pub first_seq: Vec<u32>,
    /// Number of key groups (1 without keys).
    pub groups: usize,
    /// True when no sort ran: the right input arrived in time order, or in
    /// time-ordered batches that only needed putting in order.
    pub arrived_sorted: bool,
    keys: Option<KeyIndex>,
    index: OnceLock<KeyedIndex>,
}

/// Per key group, its `seq` entries (rows and times) in time order.
struct KeyedIndex {
    offsets: Vec<usize>,
    ts: Vec<i64>,
    /// The rows, scattered only when first asked for: a lookup that
    /// reads values already put in index order ([`Timeline::to_keyed_order`])
    /// never needs them, and each scattered array costs the build as much
    /// as the times.
    rows: OnceLock<Vec<u32>>,
}

/// A dictionary key compares by value: arrow's row format (several keys)
/// would tell a dictionary from its plain values.
fn plain(a: ArrayRef) -> Result<ArrayRef> {
    match a.data_type() {
        DataType::Dictionary(_, v) => Ok(cast(&a, v)?),
        _ => Ok(a),
    }
}

/// Evaluates key expressions on a batch, dictionaries decoded when there is
/// more than one key (see [`plain`]).
pub(crate) fn key_arrays(
    keys: &[Arc<dyn PhysicalExpr>],
    batch: &RecordBatch,
) -> Result<Vec<ArrayRef>> {
    let n = keys.len();
    keys.iter()
        .map(|k| {
            let a = k.evaluate(batch)?.into_array(batch.num_rows())?;
            if n > 1 { plain(a) } else { Ok(a) }
        })
        .collect()
}

/// How the right batches' times stand (see [`run_order`]); NULL times
/// are skipped throughout.
enum RunOrder {
    /// Concatenated as they came, the times do not decrease.
    InOrder,
    /// Concatenated in this order of the batches, the times do not
    /// decrease (and equal times keep their input order).
    Reorder(Vec<usize>),
    /// No order of whole batches makes the times non-decreasing.
    Unordered,
}

/// Whether the batches (their times in `ticks`) are in time order as they
/// came or, when every batch is time-ordered within and the batches,
/// ordered by their first time, form one time-ordered sequence without
/// changing the order of equal times (a partitioned scan of time-ordered
/// files whose partitions hold time ranges out of order), that order of
/// the batches. Saves a sort of the whole right side, and a second pass
/// over the times to learn whether they arrived sorted.
fn run_order(ticks: &[Int64Array]) -> RunOrder {
    // (first time, last time, input position) of each batch with a time.
    let mut runs = Vec::with_capacity(ticks.len());
    let mut untimed = vec![];
    for (i, ts) in ticks.iter().enumerate() {
        if !array_is_non_decreasing(ts) {
            return RunOrder::Unordered;
        }
        let mut timed = ts.iter().flatten();
        match timed.next() {
            Some(first) => {
                let last = timed.last().unwrap_or(first);
                runs.push((first, last, i));
            }
            None => untimed.push(i),
        }
    }
    let in_order = |r: &[(i64, i64, usize)]| {
        r.windows(2)
            .all(|w| w[0].1 < w[1].0 || (w[0].1 == w[1].0 && w[0].2 < w[1].2))
    };
    if in_order(&runs) {
        return RunOrder::InOrder;
    }
    runs.sort_unstable_by_key(|&(first, _, i)| (first, i));
    if !in_order(&runs) {
        return RunOrder::Unordered;
    }
    // Batches without a time have no place in time order: last.
    RunOrder::Reorder(runs.iter().map(|r| r.2).chain(untimed).collect())
}

/// Rows each thread gets at least before [`intern_rows`] uses another.
const ROWS_PER_INTERN_THREAD: usize = 1 << 20;

/// Each row's key group in `index` (empty on entry), ids in order of
/// first appearance: the rows are those of `chunks` in order (each chunk
/// one batch's key arrays, `n` rows in all), interned on `threads` threads
/// (at least one). The chunks are cut into contiguous shares of about equal
/// rows. The calling thread interns the first share straight into `index`;
/// each other share is interned on a thread of its own into an index of its
/// own, noting the row where each of its groups first appears. Those rows'
/// keys are then interned into `index` share by share, in order, which
/// hands out the ids a single pass over all rows would (a share's new keys
/// in the order they first appear), and each share's ids are mapped to
/// them. Pauses at `gate` every [`ROWS_PER_PAUSE`] rows.
fn intern_rows(
    index: &mut KeyIndex,
    chunks: &[Vec<ArrayRef>],
    n: usize,
    threads: usize,
    gate: &PhaseGate,
) -> Result<Vec<u32>> {
    let rows = |c: &Vec<ArrayRef>| c.first().map_or(0, |a| a.len());
    // Shares: (first chunk, chunks, rows), whole chunks of about n / threads rows.
    let target = n.div_ceil(threads.max(1)).max(1);
    let mut shares: Vec<(usize, usize, usize)> = vec![];
    let (mut first, mut taken) = (0, 0);
    for (c, chunk) in chunks.iter().enumerate() {
        taken += rows(chunk);
        if taken >= target || c + 1 == chunks.len() {
            shares.push((first, c + 1 - first, taken));
            (first, taken) = (c + 1, 0);
        }
    }
    let mut ids = vec![0u32; n];
    let mut outs: Vec<&mut [u32]> = vec![];
    let mut rest = ids.as_mut_slice();
    for &(_, _, len) in &shares {
        let (out, tail) = rest.split_at_mut(len);
        outs.push(out);
        rest = tail;
    }
    let mut outs = outs.into_iter();
    let own_out = outs.next();
    let locals = (1..shares.len())
        .map(|_| index.empty_like())
        .collect::<Result<Vec<_>>>()?;
    let firsts: Vec<Result<Vec<(usize, usize)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .iter()
            .skip(1)
            .zip(outs)
            .zip(locals)
            .map(|((&(c, len, _), out), mut local)| {
                let chunks = &chunks[c..c + len];
                scope.spawn(move || intern_share(&mut local, chunks, out, gate))
            })
            .collect();
        let own = match (shares.first(), own_out) {
            (Some(&(c, len, _)), Some(out)) => {
                intern_share(index, &chunks[c..c + len], out, gate).map(|_| vec![])
            }
            _ => Ok(vec![]),
        };
        std::iter::once(own)
            .chain(
                handles
                    .into_iter()
                    .map(|h| joined(h.join(), "interning right-side keys")),
            )
            .collect()
    });
    let mut firsts = firsts.into_iter();
    firsts.next().transpose()?;
    let mut start = shares.first().map_or(0, |s| s.2);
    for (&(c, len, share_rows), firsts) in shares.iter().skip(1).zip(firsts) {
        let firsts = firsts?;
        let share = &chunks[c..c + len];
        let keys = (0..share[0].len())
            .map(|k| {
                let arrays: Vec<&dyn Array> =
                    share.iter().map(|a| a[k].as_ref()).collect();
                interleave(&arrays, &firsts)
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let global = index.intern(&keys)?;
        for id in &mut ids[start..start + share_rows] {
            *id = global[*id as usize];
        }
        start += share_rows;
    }
    Ok(ids)
}

/// Interns the rows of `chunks` (in order) into `index`, their ids into
/// `out`; returns where the ids new to `index` first appear (chunk, row),
/// in id order.
fn intern_share(
    index: &mut KeyIndex,
    chunks: &[Vec<ArrayRef>],
    out: &mut [u32],
    gate: &PhaseGate,
) -> Result<Vec<(usize, usize)>> {
    let known = index.len();
    let mut firsts: Vec<(usize, usize)> = vec![];
    let mut at = 0;
    for (c, arrays) in chunks.iter().enumerate() {
        let rows = arrays.first().map_or(0, |a| a.len());
        for from in (0..rows).step_by(ROWS_PER_PAUSE) {
            gate.check()?;
            let len = ROWS_PER_PAUSE.min(rows - from);
            let chunk: Vec<ArrayRef> =
                arrays.iter().map(|a| a.slice(from, len)).collect();
            let before = index.len();
            let g = index.intern(&chunk)?;
            if index.len() > before {
                // Ids are dense in order of first appearance.
                for (r, &id) in g.iter().enumerate() {
                    if id as usize == known + firsts.len() {
                        firsts.push((c, from + r));
                    }
                }
            }
            out[at..at + len].copy_from_slice(&g);
            at += len;
        }
    }
    Ok(firsts)
}

/// The rows of `batches` in order, one batch: the columns `keep` names
/// (all when `None`) concatenated, every other column all-NULL of type
/// `Null` (no buffer).
fn kept_batch(
    schema: &SchemaRef,
    batches: &[&RecordBatch],
    keep: Option<&[usize]>,
    n: usize,
) -> Result<RecordBatch> {
    let Some(keep) = keep else {
        return Ok(concat_batches(schema, batches.iter().copied())?);
    };
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (i, field) in schema.fields().iter().enumerate() {
        if keep.contains(&i) {
            let parts: Vec<&dyn Array> =
                batches.iter().map(|b| b.column(i).as_ref()).collect();
            columns.push(if parts.is_empty() {
                new_empty_array(field.data_type())
            } else {
                concat(&parts)?
            });
            fields.push(Arc::clone(field));
        } else {
            columns.push(new_null_array(&DataType::Null, n));
            fields.push(Arc::new(Field::new(field.name(), DataType::Null, true)));
        }
    }
    let schema = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    let options = RecordBatchOptions::new().with_row_count(Some(n));
    Ok(RecordBatch::try_new_with_options(
        schema, columns, &options,
    )?)
}

/// A build thread's result, its panic an internal error saying what the
/// thread was `doing`.
///
/// ```ignore
/// let copied = std::thread::scope(|s| joined(s.spawn(copy).join(), "copying"))?;
/// ```
pub(crate) fn joined<T>(r: std::thread::Result<Result<T>>, doing: &str) -> Result<T> {
    r.unwrap_or_else(|_| internal_err!("{doing}: a thread panicked"))
}

/// Right rows from which [`Timeline::try_new`] copies the times and kept
/// columns on a thread of its own (a thread costs more than small copies).
const ROWS_TO_COPY_ASIDE: usize = 1 << 17;

/// The times of every batch, one array.
fn concat_times(ticks: Vec<Int64Array>) -> Result<Int64Array> {
    Ok(match ticks.as_slice() {
        [] => Int64Array::from(Vec::<i64>::new()),
        [one] => one.clone(),
        many => {
            let parts: Vec<&dyn Array> = many.iter().map(|t| t as &dyn Array).collect();
            concat(&parts)?.as_primitive::<Int64Type>().clone()
        }
    })
}

/// The key index of `ordered`'s rows (`None` without keys), each row's
/// group and the number of groups (at least 1).
fn key_groups(
    how: &TimelineBuild,
    ordered: &[&RecordBatch],
    n: usize,
) -> Result<(Option<KeyIndex>, Vec<u32>, usize)> {
    if how.keys.is_empty() {
        return Ok((None, vec![0u32; n], 1));
    }
    let chunks = ordered
        .iter()
        .map(|b| key_arrays(how.keys, b))
        .collect::<Result<Vec<_>>>()?;
    let types: Vec<DataType> = match chunks.first() {
        Some(c) => c.iter().map(|a| a.data_type().clone()).collect(),
        None => how
            .keys
            .iter()
            .map(|k| k.data_type(&how.schema))
            .collect::<Result<_>>()?,
    };
    let mut index = KeyIndex::try_new(&types)?;
    let threads = std::thread::available_parallelism()
        .map_or(1, |p| p.get())
        .min(n / ROWS_PER_INTERN_THREAD)
        .max(1);
    let g = intern_rows(&mut index, &chunks, n, threads, how.gate)?;
    let groups = index.len().max(1);
    Ok((Some(index), g, groups))
}

/// Per group (`groups` of them), its first position in `keys`
/// (`u32::MAX` when it has none).
fn first_positions(keys: &[u32], groups: usize) -> Vec<u32> {
    let mut first = vec![u32::MAX; groups];
    for (k, &g) in keys.iter().enumerate().rev() {
        first[g as usize] = k as u32;
    }
    first
}

/// [`first_positions`] where group ids were handed out in order of first
/// appearance in `keys` (0 first, then 1, ...): one forward scan that
/// stops once every group has been met, no random writes.
fn first_positions_of_dense(keys: &[u32], groups: usize) -> Vec<u32> {
    let mut first = vec![u32::MAX; groups];
    let mut next = 0;
    for (k, &g) in keys.iter().enumerate() {
        if next == groups {
            break;
        }
        if g as usize == next {
            first[next] = k as u32;
            next += 1;
        }
    }
    first
}

impl Timeline {
    /// Builds the timeline from the right input's batches.
    /// CPU work of a whole right side: run it on a blocking thread, where
    /// it pauses at `how.gate` between steps and chunks of rows.
    pub(crate) fn try_new(how: TimelineBuild, batches: &[RecordBatch]) -> Result<Self> {
        how.gate.check()?;
        let mut ticks = batches
            .iter()
            .map(|b| {
                tick_array(&how.ts.evaluate(b)?.into_array(b.num_rows())?, how.factor)
            })
            .collect::<Result<Vec<_>>>()?;
        let order = run_order(&ticks);
        let arrived_sorted = !matches!(order, RunOrder::Unordered);
        let ordered: Vec<&RecordBatch> = match order {
            RunOrder::Reorder(order) => {
                ticks = order.iter().map(|&i| ticks[i].clone()).collect();
                order.iter().map(|&i| &batches[i]).collect()
            }
            RunOrder::InOrder | RunOrder::Unordered => batches.iter().collect(),
        };
        let n: usize = ordered.iter().map(|b| b.num_rows()).sum();
        // Positions are u32, and the two highest values are markers
        // (cursor.rs's UNKNOWN and NONE).
        if n >= (u32::MAX - 1) as usize {
            return exec_err!(
                "ASOF JOIN: the right side has {n} rows; at most {} are supported",
                u32::MAX - 2
            );
        }
        how.gate.check()?;
        let schema = &how.schema;
        let keep = how.keep;
        let ordered = &ordered;
        let copy = move || -> Result<(Int64Array, RecordBatch)> {
            Ok((concat_times(ticks)?, kept_batch(schema, ordered, keep, n)?))
        };
        let ((ts, batch), (keys, groups_of_row, groups)) = if n >= ROWS_TO_COPY_ASIDE {
            // The copies (times, kept columns) are memory-bound, the
            // interning compute-bound: on a thread of their own they fill
            // the time the interning leaves a core idle (its merge of the
            // shares runs on one thread).
            std::thread::scope(|scope| -> Result<_> {
                let copied = scope.spawn(copy);
                let interned = key_groups(&how, ordered, n);
                let copied = joined(copied.join(), "copying the right side");
                Ok((copied?, interned?))
            })?
        } else {
            (copy()?, key_groups(&how, ordered, n)?)
        };
        how.gate.check()?;
        debug_assert_eq!(arrived_sorted, array_is_non_decreasing(&ts));
        let identity = arrived_sorted && ts.null_count() == 0;
        let (seq, seq_ts): (Option<Vec<u32>>, Vec<i64>) = if identity {
            // The common case: every row, in input order; the times
            // are taken over when nothing else holds them (a
            // concatenation), not copied.
            let (_, values, _) = ts.into_parts();
            let times = values
                .into_inner()
                .into_vec::<i64>()
                .unwrap_or_else(|shared| shared.typed_data::<i64>().to_vec());
            (None, times)
        } else if arrived_sorted {
            let (seq, times) = ts
                .iter()
                .enumerate()
                .filter_map(|(i, t)| t.map(|t| (i as u32, t)))
                .unzip();
            (Some(seq), times)
        } else {
            // Sorting (time, row) pairs directly rather than rows by an
            // indirect key: no random read of the time per comparison.
            // Rows are unique, so equal times keep input order.
            let mut pairs: Vec<(i64, u32)> = ts
                .iter()
                .enumerate()
                .filter_map(|(i, t)| t.map(|t| (t, i as u32)))
                .collect();
            pairs.sort_unstable();
            let (seq, times) = pairs.into_iter().map(|(t, i)| (i, t)).unzip();
            (Some(seq), times)
        };
        how.gate.check()?;
        let seq_key: Vec<u32> = match &seq {
            // Every row, in input order.
            None => groups_of_row,
            Some(seq) => seq.iter().map(|&i| groups_of_row[i as usize]).collect(),
        };
        let first_seq = if identity {
            // Ids were handed out in order of first appearance in `seq`.
            let first = first_positions_of_dense(&seq_key, groups);
            debug_assert_eq!(first, first_positions(&seq_key, groups));
            first
        } else {
            first_positions(&seq_key, groups)
        };
        Ok(Self {
            batch,
            seq,
            seq_ts,
            seq_key,
            first_seq,
            groups,
            arrived_sorted,
            keys,
            index: OnceLock::new(),
        })
    }

    /// The row (into `batch`) of `seq` entry `k`.
    #[inline]
    pub(crate) fn seq_row(&self, k: usize) -> u32 {
        match &self.seq {
            None => k as u32,
            Some(seq) => seq[k],
        }
    }

    /// The rows of the `seq` entries; `None`: entry `k` is row `k`.
    pub(crate) fn seq_rows(&self) -> Option<&[u32]> {
        self.seq.as_deref()
    }

    /// Bytes held beyond the batch (for the memory reservation).
    pub(crate) fn extra_bytes(&self) -> usize {
        self.seq.as_ref().map_or(0, |s| s.capacity() * 4)
            + self.seq_ts.capacity() * 8
            + self.seq_key.capacity() * 4
            + self.first_seq.capacity() * 4
    }

    /// Bytes the per-key index would hold once built (its rows included,
    /// though they are scattered only on first use).
    pub(crate) fn index_bytes(&self) -> usize {
        self.seq_ts.len() * 12 + (self.groups + 1) * 8
    }

    /// Builds the per-key index now (callers reserve its memory first).
    pub(crate) fn build_index(&self) {
        self.index();
    }

    /// True once the per-key index exists.
    pub(crate) fn has_index(&self) -> bool {
        self.index.get().is_some()
    }

    /// The key group of each left row; `None` when the right side has no
    /// such key. `keys` are the left key arrays (see [`key_arrays`]).
    pub(crate) fn groups_of(
        &self,
        keys: &[ArrayRef],
        rows: usize,
    ) -> Result<Vec<Option<u32>>> {
        match &self.keys {
            None => Ok(vec![Some(0); rows]),
            Some(index) => index.lookup(keys),
        }
    }

    /// Like [`Self::groups_of`], `None` also where the left row can match
    /// nothing whatever its key: its time is NULL (`times`), or `allowed`
    /// (a left-only ON filter) is not true for it.
    pub(crate) fn matchable_groups(
        &self,
        keys: &[ArrayRef],
        times: &[Option<i64>],
        allowed: Option<&BooleanArray>,
    ) -> Result<Vec<Option<u32>>> {
        let mut groups = self.groups_of(keys, times.len())?;
        for (i, (g, t)) in groups.iter_mut().zip(times).enumerate() {
            let allowed = allowed.is_none_or(|a| a.is_valid(i) && a.value(i));
            if t.is_none() || !allowed {
                *g = None;
            }
        }
        Ok(groups)
    }

    fn index(&self) -> &KeyedIndex {
        self.index.get_or_init(|| {
            // Counting sort of `seq` by group: stable, so each group's
            // slice stays in time order.
            let mut offsets = vec![0usize; self.groups + 1];
            for &g in &self.seq_key {
                offsets[g as usize + 1] += 1;
            }
            for i in 0..self.groups {
                offsets[i + 1] += offsets[i];
            }
            let mut ts = vec![0i64; self.seq_ts.len()];
            self.scatter_by_group(&offsets, |k, at| ts[at] = self.seq_ts[k]);
            KeyedIndex {
                offsets,
                ts,
                rows: OnceLock::new(),
            }
        })
    }

    /// The per-key index's rows (see [`Self::keyed_rows`]).
    fn index_rows(&self) -> &[u32] {
        let ix = self.index();
        ix.rows.get_or_init(|| {
            let mut rows = vec![0u32; self.seq_ts.len()];
            self.scatter_by_group(&ix.offsets, |k, at| rows[at] = self.seq_row(k));
            rows
        })
    }

    /// Calls `put(k, at)` for every `seq` entry `k`, in time order, with
    /// its position `at` in the per-key index whose groups start at
    /// `offsets`: the counting sort's scatter, which both the index and
    /// [`Self::to_keyed_order`] use.
    #[inline]
    fn scatter_by_group(&self, offsets: &[usize], mut put: impl FnMut(usize, usize)) {
        let mut fill = offsets.to_vec();
        for (k, &g) in self.seq_key.iter().enumerate() {
            let at = &mut fill[g as usize];
            put(k, *at);
            *at += 1;
        }
    }

    /// Group `g`'s rows and times in time order (its slice of the per-key
    /// index, which this builds if needed: callers reserve it first).
    #[inline]
    pub(crate) fn group_slice(&self, g: u32) -> (&[u32], &[i64]) {
        let ix = self.index();
        let (a, b) = (ix.offsets[g as usize], ix.offsets[g as usize + 1]);
        (&self.index_rows()[a..b], &ix.ts[a..b])
    }

    /// Group `g`'s start in the per-key index and its times in time order
    /// (see [`Self::group_slice`]): a position `base + p` names the group's
    /// `p`-th row, an index into [`Self::keyed_rows`].
    #[inline]
    pub(crate) fn group_span(&self, g: u32) -> (usize, &[i64]) {
        let ix = self.index();
        let (a, b) = (ix.offsets[g as usize], ix.offsets[g as usize + 1]);
        (a, &ix.ts[a..b])
    }

    /// The rows (into `batch`) of the per-key index, group after group,
    /// each group's in time order (builds the index if needed: callers
    /// reserve it first).
    pub(crate) fn keyed_rows(&self) -> &[u32] {
        self.index_rows()
    }

    /// The number of positions of the per-key index (rows with a time).
    pub(crate) fn keyed_len(&self) -> usize {
        self.seq_ts.len()
    }

    /// `values` (one per row of `batch`) in the per-key index's order
    /// ([`Self::keyed_rows`]), so that lookups walking a group in time
    /// order read them front to back, then `tail` (of the same type; the
    /// fold's row of NULLs). A primitive array is scattered in one pass
    /// over the rows in time order (each group's slots filled in turn:
    /// reads in order, writes to one place per group) rather than gathered
    /// from all over the batch, into an array with room for the tail;
    /// other types are taken, then concatenated.
    pub(crate) fn to_keyed_order(
        &self,
        values: &dyn Array,
        tail: &dyn Array,
    ) -> Result<ArrayRef> {
        let taken = || -> Result<ArrayRef> {
            let rows = UInt32Array::from(self.keyed_rows().to_vec());
            Ok(concat(&[take(values, &rows, None)?.as_ref(), tail])?)
        };
        if values.data_type() != tail.data_type() {
            // Concatenation reports the mismatch.
            return taken();
        }
        downcast_primitive_array!(
            values => Ok(Arc::new(self.scatter_keyed(values, tail.as_primitive())?)),
            _ => taken()
        )
    }

    fn scatter_keyed<T: ArrowPrimitiveType>(
        &self,
        values: &PrimitiveArray<T>,
        tail: &PrimitiveArray<T>,
    ) -> Result<PrimitiveArray<T>> {
        let n = self.seq_key.len();
        let len = n + tail.len();
        let mut out = vec![T::Native::default(); len];
        out[n..].copy_from_slice(tail.values());
        // Validity bits are scattered only where some value is NULL.
        let value_nulls = values.nulls().filter(|v| v.null_count() > 0);
        let mut valid = (value_nulls.is_some() || tail.null_count() > 0)
            .then(|| BooleanBufferBuilder::new(len));
        if let Some(v) = &mut valid {
            v.append_n(n, value_nulls.is_none());
            (0..tail.len()).for_each(|i| v.append(tail.is_valid(i)));
        }
        let from = values.values();
        let offsets = &self.index().offsets;
        match (&mut valid, value_nulls) {
            (Some(v), Some(nulls)) => self.scatter_by_group(offsets, |k, at| {
                let row = self.seq_row(k) as usize;
                out[at] = from[row];
                v.set_bit(at, nulls.is_valid(row));
            }),
            _ => self.scatter_by_group(offsets, |k, at| {
                out[at] = from[self.seq_row(k) as usize];
            }),
        }
        let nulls = valid.map(|mut v| NullBuffer::new(v.finish()));
        Ok(PrimitiveArray::<T>::try_new(out.into(), nulls)?
            .with_data_type(values.data_type().clone()))
    }

    /// The row of group `g` that a lookup at time `t` finds, by binary
    /// search in the per-key index: backward, the last row with time `<= t`
    /// (`< t` when `strict`); forward, the first with time `>= t` (`> t`).
    /// Returns the row and its time.
    pub(crate) fn lookup(
        &self,
        g: u32,
        t: i64,
        forward: bool,
        strict: bool,
    ) -> Option<(u32, i64)> {
        let p = self.lookup_position(g, t, forward, strict)?;
        let (rows, ts) = self.group_slice(g);
        Some((rows[p], ts[p]))
    }

    /// [`Self::lookup`]'s answer as a position in group `g`'s slice
    /// ([`Self::group_slice`]), from which the next candidates further
    /// back (forward: on) are the neighbouring positions.
    pub(crate) fn lookup_position(
        &self,
        g: u32,
        t: i64,
        forward: bool,
        strict: bool,
    ) -> Option<usize> {
        let ts = self.group_slice(g).1;
        if forward {
            let i = ts.partition_point(|&x| if strict { x <= t } else { x < t });
            (i < ts.len()).then_some(i)
        } else {
            let i = ts.partition_point(|&x| if strict { x < t } else { x <= t });
            i.checked_sub(1)
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::temporal::MergeCursor;
    use datafusion::arrow::array::{Int64Array, TimestampMicrosecondArray};
    use datafusion::arrow::datatypes::{Field, Schema, TimeUnit};
    use datafusion::physical_expr::expressions::Column;

    pub(crate) fn batch(schema: &SchemaRef, ts: &[i64], k: &[i64]) -> RecordBatch {
        RecordBatch::try_new(
            Arc::clone(schema),
            vec![
                Arc::new(TimestampMicrosecondArray::from(ts.to_vec())),
                Arc::new(Int64Array::from(k.to_vec())),
            ],
        )
        .unwrap()
    }

    /// The schema of [`batch`]: a microsecond time `ts` and a key `k`.
    pub(crate) fn ts_key_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, None),
                false,
            ),
            Field::new("k", DataType::Int64, false),
        ]))
    }

    pub(crate) fn timeline(batches: &[RecordBatch]) -> Timeline {
        timeline_keeping(batches, None)
    }

    fn timeline_keeping(batches: &[RecordBatch], keep: Option<&[usize]>) -> Timeline {
        let schema = batches[0].schema();
        let ts: Arc<dyn PhysicalExpr> = Arc::new(Column::new("ts", 0));
        let keys: Vec<Arc<dyn PhysicalExpr>> = vec![Arc::new(Column::new("k", 1))];
        Timeline::try_new(
            TimelineBuild {
                schema,
                keys: &keys,
                ts: &ts,
                factor: 1,
                gate: &PhaseGate::default(),
                keep,
            },
            batches,
        )
        .unwrap()
    }

    /// Values put in the per-key index's order, scattered (primitive, with
    /// NULLs) or taken (strings), equal a gather at the index's rows, for
    /// input that arrived in time order and input that needed sorting.
    #[test]
    fn values_in_keyed_order_equal_a_gather_at_the_index_rows() {
        use datafusion::arrow::array::{Float64Array, StringArray};
        let schema = ts_key_schema();
        for batches in [
            vec![batch(&schema, &[1, 2, 2, 4, 7], &[3, 1, 3, 2, 1])],
            vec![
                batch(&schema, &[9, 3, 5], &[1, 2, 1]),
                batch(&schema, &[1, 5, 8], &[2, 2, 3]),
            ],
        ] {
            let tl = timeline(&batches);
            let n = tl.batch.num_rows();
            let floats: ArrayRef = Arc::new(Float64Array::from_iter(
                (0..n).map(|i| (i % 3 != 1).then_some(i as f64)),
            ));
            let strings: ArrayRef = Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("s{i}")),
            ));
            let rows = UInt32Array::from(tl.keyed_rows().to_vec());
            // A tail of another type is an error, not a panic.
            let ints = new_null_array(&DataType::Int64, 1);
            assert!(tl.to_keyed_order(floats.as_ref(), ints.as_ref()).is_err());
            for values in [floats, strings] {
                for tail in [new_null_array(values.data_type(), 1), values.slice(0, 2)] {
                    let taken = take(values.as_ref(), &rows, None).unwrap();
                    let want = concat(&[taken.as_ref(), tail.as_ref()]).unwrap();
                    assert_eq!(
                        tl.to_keyed_order(values.as_ref(), tail.as_ref())
                            .unwrap()
                            .as_ref(),
                        want.as_ref()
                    );
                }
            }
        }
    }

    /// A timeline that keeps only some columns copies those (in time
    /// order, as the whole batch would hold them) and leaves the others
    /// all-NULL; its order, times and key groups are the full one's.
    #[test]
    fn kept_columns_are_copied_and_the_rest_left_null() {
        let schema = ts_key_schema();
        let batches = [
            batch(&schema, &[5, 6], &[2, 1]),
            batch(&schema, &[1, 2, 3], &[1, 1, 3]),
        ];
        let full = timeline(&batches);
        let kept = timeline_keeping(&batches, Some(&[1]));
        assert_eq!(kept.batch.num_rows(), 5);
        assert_eq!(kept.batch.column(0).data_type(), &DataType::Null);
        assert_eq!(kept.batch.column(1), full.batch.column(1));
        assert_eq!(
            (kept.seq_rows(), &kept.seq_ts, &kept.seq_key),
            (full.seq_rows(), &full.seq_ts, &full.seq_key)
        );
        let none = timeline_keeping(&batches, Some(&[]));
        assert!(
            none.batch
                .columns()
                .iter()
                .all(|c| c.logical_null_count() == 5)
        );
        assert_eq!(none.groups, full.groups);
    }

    /// Interning on several threads gives every row the id one thread
    /// gives it (order of first appearance), for string keys with NULLs,
    /// integer keys and two keys, over shares of every size.
    #[test]
    fn parallel_interning_equals_serial() {
        use datafusion::arrow::array::StringArray;
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let mut rng = StdRng::seed_from_u64(3);
        for case in 0..60 {
            let n = rng.random_range(0..400);
            let distinct = rng.random_range(1..30);
            let strs: ArrayRef = Arc::new(StringArray::from(
                (0..n)
                    .map(|_| {
                        let v = rng.random_range(0..=distinct);
                        // Long strings too: not every key fits a view.
                        (v != 0).then(|| format!("{}{v}", "s".repeat(v % 15)))
                    })
                    .collect::<Vec<_>>(),
            ));
            let ints: ArrayRef = Arc::new(Int64Array::from(
                (0..n)
                    .map(|_| rng.random_range(0..distinct) as i64)
                    .collect::<Vec<_>>(),
            ));
            let arrays = match case % 3 {
                0 => vec![strs],
                1 => vec![ints],
                _ => vec![strs, ints],
            };
            let types: Vec<DataType> =
                arrays.iter().map(|a| a.data_type().clone()).collect();
            let gate = PhaseGate::default();
            // The rows cut into batches of random sizes (empty ones too).
            let mut chunks = vec![];
            let mut at = 0;
            while at < n || chunks.is_empty() {
                let len = rng.random_range(0..=(n - at).min(90));
                chunks.push(arrays.iter().map(|a| a.slice(at, len)).collect::<Vec<_>>());
                at += len;
            }
            let mut one = KeyIndex::try_new(&types).unwrap();
            let want = intern_rows(&mut one, &chunks, n, 1, &gate).unwrap();
            for threads in 2..6 {
                let mut many = KeyIndex::try_new(&types).unwrap();
                let got = intern_rows(&mut many, &chunks, n, threads, &gate).unwrap();
                assert_eq!(got, want, "case {case}, {threads} threads");
                assert_eq!(many.len(), one.len());
                let found: Vec<Option<u32>> = want.iter().map(|&g| Some(g)).collect();
                assert_eq!(many.lookup(&arrays).unwrap(), found);
            }
        }
    }

    /// The forward scan for ids handed out in order of first appearance
    /// finds what the general reverse scan finds.
    #[test]
    fn first_positions_of_dense_ids_match_the_general_scan() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let mut rng = StdRng::seed_from_u64(5);
        for _ in 0..200 {
            let n = rng.random_range(0..300);
            let mut groups = 0u32;
            let keys: Vec<u32> = (0..n)
                .map(|_| {
                    let g = rng.random_range(0..=groups);
                    if g == groups {
                        groups += 1;
                    }
                    g
                })
                .collect();
            // Spare groups with no row stay `u32::MAX` in both.
            let groups = groups as usize + rng.random_range(0..2);
            assert_eq!(
                first_positions_of_dense(&keys, groups),
                first_positions(&keys, groups)
            );
        }
    }

    #[test]
    fn ordered_runs_are_put_in_order_not_sorted() {
        let schema = ts_key_schema();
        // Two time-ordered runs, the later first.
        let tl = timeline(&[
            batch(&schema, &[5, 6], &[1, 2]),
            batch(&schema, &[1, 2, 3], &[1, 1, 3]),
        ]);
        assert!(tl.arrived_sorted);
        assert_eq!(tl.seq_ts, vec![1, 2, 3, 5, 6]);
        // Whole batches put in order: the kept batch holds the rows in that
        // order, so entry k is row k and no positions are stored.
        assert_eq!(tl.seq_rows(), None);
        assert_eq!(
            tl.batch.column(1).as_primitive::<Int64Type>().values(),
            &[1, 1, 3, 1, 2]
        );
        // Arrived in order: the same.
        let tl = timeline(&[
            batch(&schema, &[1, 2, 3], &[1, 1, 3]),
            batch(&schema, &[5, 6], &[1, 2]),
        ]);
        assert_eq!(tl.seq_rows(), None);
        assert_eq!(tl.seq_row(4), 4);
        // A tie across runs whose order would change: sorted instead, the
        // earlier input first among equal times.
        let tl = timeline(&[
            batch(&schema, &[3, 6], &[1, 2]),
            batch(&schema, &[1, 3], &[1, 1]),
        ]);
        assert!(!tl.arrived_sorted);
        assert_eq!(tl.seq_ts, vec![1, 3, 3, 6]);
        assert_eq!(tl.seq_rows(), Some(&[2, 0, 3, 1][..]));
        // Key groups (1 → 0, 2 → 1) follow `seq`, not the input rows.
        assert_eq!(tl.seq_key, vec![0, 0, 0, 1]);
    }

    #[test]
    fn warm_up_knows_groups_that_start_later_are_empty() {
        let schema = ts_key_schema();
        // Group of key 7 starts after time 2000; key 5 has one early row
        // beyond any warm-up budget.
        let n = 200_000i64;
        let ts: Vec<i64> = (0..n).collect();
        let k: Vec<i64> = (0..n)
            .map(|i| match i {
                0 => 5,
                i if i > 2000 && i % 2 == 0 => 7,
                _ => 1,
            })
            .collect();
        let tl = timeline(&[batch(&schema, &ts, &k)]);
        let group = |key: i64| tl.seq_key[k.iter().position(|&x| x == key).unwrap()];
        // Within the budget (3 groups: 64 * 3 + 1024 entries) of the start.
        let mut c = MergeCursor::new(&tl, false);
        c.start(&tl, 1000);
        assert_eq!(c.latest(&tl, group(7)), None);
        assert_eq!(c.latest(&tl, group(5)), Some((0, 0)));
        // Beyond it: key 7, not started, is known empty; key 5 is found by
        // reading further back when asked.
        let mut c = MergeCursor::new(&tl, false);
        c.start(&tl, 1500);
        assert_eq!(c.latest(&tl, group(7)), None);
        assert_eq!(c.latest(&tl, group(5)), Some((0, 0)));
        let mut c = MergeCursor::new(&tl, false);
        c.start(&tl, n - 1);
        assert_eq!(c.latest(&tl, group(5)), Some((0, 0)));
        assert_eq!(c.latest(&tl, group(7)), Some((n as u32 - 2, n - 2)));
        // Asked again after advancing: still the early row, or a later one.
        c.advance(&tl, n - 1);
        assert_eq!(c.latest(&tl, group(5)), Some((0, 0)));
        assert_eq!(c.latest(&tl, group(1)), Some((n as u32 - 1, n - 1)));
    }

    /// Skewed keys (a few rare ones far back), random starts and strictness:
    /// every group's latest row from the cursor, whether the warm-up met it
    /// or a later read-back found it, is the per-key index's answer.
    #[test]
    fn cursor_reads_back_what_the_index_finds() {
        let schema = ts_key_schema();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for case in 0..20 {
            let n = 5_000 + next(20_000) as usize;
            // Times with duplicates; keys 0..40, nearly all 0 and 1, so the
            // others are often further back than the warm-up reads.
            let mut ts: Vec<i64> = (0..n).map(|_| next(n as u64 / 2) as i64).collect();
            ts.sort_unstable();
            let k: Vec<i64> = (0..n)
                .map(|_| match next(1000) {
                    0..=497 => 0,
                    498..=995 => 1,
                    _ => next(40) as i64,
                })
                .collect();
            let tl = timeline(&[batch(&schema, &ts, &k)]);
            for strict in [false, true] {
                let start = next(n as u64 / 2) as i64;
                let mut c = MergeCursor::new(&tl, strict);
                c.start(&tl, start);
                let mut t = start;
                for _ in 0..200 {
                    if next(4) == 0 {
                        t += next(50) as i64;
                        c.advance(&tl, t);
                    }
                    let g = next(tl.groups as u64) as u32;
                    let want = tl.lookup(g, t, false, strict);
                    assert_eq!(
                        c.latest(&tl, g),
                        want,
                        "case {case}, group {g}, time {t}"
                    );
                }
            }
        }
    }
}
