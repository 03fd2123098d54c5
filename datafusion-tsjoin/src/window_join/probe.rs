//! The probe side of the general path: for each left row, find its window
//! in the [`RightIndex`] and list the right rows to aggregate, in
//! aggregation order (prevailing row first, then by timestamp).

use super::bounds::{BoundUnit, Prevailing, bound_to_ticks};
use super::build::{RightIndex, eval_ticks};
use super::exec::{PhysicalBound, WindowJoinSpec};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, RecordBatch, UInt32Array,
};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::common::{HashMap, Result, exec_err};
use datafusion::physical_expr::expressions::Literal;
use std::sync::Arc;

/// Where one left row's window lies among the positions of its key group.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RowWindow {
    /// First position of the key group.
    pub group_start: u32,
    /// First position inside `[start, end]` (or of the prevailing row when
    /// it was folded in; see `folded`).
    pub start: u32,
    /// One past the last position inside the window.
    pub end: u32,
    /// Window start in common ticks (used to find the prevailing row when a
    /// pair filter decides which candidates count).
    pub start_ts: i64,
    /// False when the row aggregates nothing at all (NULL timestamp, unknown
    /// key, false left filter, NULL or inverted dynamic bound).
    pub active: bool,
}

impl RowWindow {
    pub(crate) fn len(&self) -> usize {
        (self.end - self.start) as usize
    }
}

/// Right rows to aggregate for a run of left rows, as CSR lists:
/// left row `i` aggregates `rows[offsets[i]..offsets[i + 1]]` in that order.
#[derive(Debug, Default)]
pub(crate) struct WindowLists {
    pub offsets: Vec<u32>,
    pub rows: Vec<u32>,
}

impl WindowLists {
    pub(crate) fn num_groups(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The left row (group id) of every entry.
    pub(crate) fn group_ids(&self) -> Vec<usize> {
        let mut g = Vec::with_capacity(self.rows.len());
        for (i, w) in self.offsets.windows(2).enumerate() {
            g.extend(std::iter::repeat_n(i, (w[1] - w[0]) as usize));
        }
        g
    }
}

/// Signed offsets (common ticks) of a bound for each left row; `None` where
/// the bound is NULL. Negative dynamic values clamp to 0, as in QuestDB.
pub(crate) fn bound_offsets(
    bound: &PhysicalBound,
    batch: &RecordBatch,
    left_nanos: i64,
    common_nanos: i64,
) -> Result<Vec<Option<i64>>> {
    let values = bound.value.evaluate(batch)?.into_array(batch.num_rows())?;
    let values = cast(&values, &DataType::Int64)?;
    let sign = bound.direction.sign();
    values
        .as_primitive::<Int64Type>()
        .iter()
        .map(|v| {
            v.map(|v| {
                bound_to_ticks(v.max(0), bound.unit, left_nanos, common_nanos)
                    .map(|t| t * sign)
                    .ok_or_else(|| {
                        datafusion::error::DataFusionError::Execution(format!(
                            "WINDOW JOIN bound {v} {} overflows the timestamp range",
                            match bound.unit {
                                BoundUnit::Raw => "",
                                u => u.as_str(),
                            }
                        ))
                    })
            })
            .transpose()
        })
        .collect()
}

/// The offset of a constant bound in common ticks, as [`bound_offsets`]
/// gives it for every row; `None` for a NULL literal or a bound that is not
/// a literal.
pub(crate) fn constant_offset(
    bound: &PhysicalBound,
    left_nanos: i64,
    common_nanos: i64,
) -> Option<i64> {
    let literal = bound.value.downcast_ref::<Literal>()?;
    let v = match literal.value().cast_to(&DataType::Int64).ok()? {
        datafusion::common::ScalarValue::Int64(v) => v?,
        _ => return None,
    };
    Some(
        bound_to_ticks(v.max(0), bound.unit, left_nanos, common_nanos)?
            * bound.direction.sign(),
    )
}

/// Rows between the window starts [`longest_window`] measures at.
pub(crate) const WINDOW_SAMPLE: usize = 32;

/// An upper bound, at most [`WINDOW_SAMPLE`]` - 1` too high, on the most
/// rows of one group that a window of `width` ticks (both ends closed) can
/// hold. `ts` is ascending inside each group of `offsets`.
///
/// The count is measured from every `WINDOW_SAMPLE`-th row of a group (a
/// gallop from the previous end): a window starting at a row in between
/// holds at most the rows up to the next sampled row plus that row's
/// window. Sampling keeps the pass at a few searches per block instead of
/// a mispredicted branch per row. Groups are split over `threads` runs of
/// about equal rows.
pub(crate) fn longest_window(
    ts: &[i64],
    offsets: &[u32],
    width: i64,
    threads: usize,
) -> usize {
    let total = *offsets.last().expect("offsets are never empty");
    let mut cuts = vec![0usize];
    for k in 1..threads.max(1) {
        let g = offsets
            .partition_point(|&o| (o as u64) < total as u64 * k as u64 / threads as u64);
        if g > *cuts.last().expect("non-empty") && g < offsets.len() - 1 {
            cuts.push(g);
        }
    }
    cuts.push(offsets.len() - 1);
    let runs: Vec<&[u32]> = cuts.windows(2).map(|c| &offsets[c[0]..=c[1]]).collect();
    super::par::par_each(runs, |o| longest_window_serial(ts, o, width))
        .into_iter()
        .max()
        .unwrap_or(0)
}

fn longest_window_serial(ts: &[i64], offsets: &[u32], width: i64) -> usize {
    let mut longest = 0;
    for w in offsets.windows(2) {
        let g = &ts[w[0] as usize..w[1] as usize];
        let mut j = 0;
        let mut sampled = 0;
        for i in (0..g.len()).step_by(WINDOW_SAMPLE) {
            let end = g[i].saturating_add(width);
            j = gallop(g, j.max(i), |x| x <= end);
            sampled = sampled.max(j - i);
        }
        if !g.is_empty() {
            longest = longest.max((sampled + WINDOW_SAMPLE - 1).min(g.len()));
        }
    }
    longest
}

/// Computes every left row's window. Under INCLUDE PREVAILING without a pair
/// filter the prevailing row is folded in (`start` moves back by one), so
/// each window is one contiguous run of positions.
pub(crate) fn row_windows(
    spec: &WindowJoinSpec,
    index: &RightIndex,
    left: &RecordBatch,
) -> Result<Vec<RowWindow>> {
    let n = left.num_rows();
    let ts = eval_ticks(&spec.left_ts, left, spec.left_factor())?;
    let left_nanos = super::bounds::unit_nanos(spec.left_unit);
    let lo = bound_offsets(&spec.lo, left, left_nanos, spec.common_nanos())?;
    let hi = bound_offsets(&spec.hi, left, left_nanos, spec.common_nanos())?;
    let groups: Vec<Option<u32>> = match &index.keys {
        Some(keys) => keys.lookup(&super::build::eval_all(&spec.left_keys, left)?)?,
        None => vec![Some(0); n],
    };
    let mask: Option<BooleanArray> = match &spec.left_filter {
        Some(f) => Some(f.evaluate(left)?.into_array(n)?.as_boolean().clone()),
        None => None,
    };
    let fold_prevailing =
        spec.prevailing == Prevailing::Include && spec.pair_filter.is_none();
    // Per key, where the previous row's window was: left rows usually come
    // in time order, so the next window is found by galloping forward from
    // there instead of a binary search over the whole key. A flat table when
    // the keys are few enough, a map otherwise.
    let mut cursors = Cursors::new(index.num_groups(), n);

    let mut out = vec![RowWindow::default(); n];
    for (i, w) in out.iter_mut().enumerate() {
        let passes = mask.as_ref().is_none_or(|m| m.is_valid(i) && m.value(i));
        let (Some(g), Some(lo), Some(hi), true, true) =
            (groups[i], lo[i], hi[i], ts.is_valid(i), passes)
        else {
            continue;
        };
        let t = ts.value(i);
        let (start_ts, end_ts) = (t.saturating_add(lo), t.saturating_add(hi));
        if end_ts < start_ts {
            // Only dynamic bounds get here; the row aggregates nothing.
            continue;
        }
        let (g0, g1) = index.group(g);
        let slice = &index.ts[g0..g1];
        let cursor = cursors.get(g);
        let (s, e) = match *cursor {
            Some(c) if start_ts >= c.start_ts && end_ts >= c.end_ts => (
                gallop(slice, c.start as usize - g0, |x| x < start_ts),
                gallop(slice, c.end as usize - g0, |x| x <= end_ts),
            ),
            _ => (
                slice.partition_point(|&x| x < start_ts),
                slice.partition_point(|&x| x <= end_ts),
            ),
        };
        let (s, e) = (g0 + s, g0 + e);
        *cursor = Some(Cursor {
            start_ts,
            end_ts,
            start: s as u32,
            end: e as u32,
        });
        let mut start = s;
        if fold_prevailing && s > g0 && !(s < g1 && index.ts[s] == start_ts) {
            start = s - 1;
        }
        *w = RowWindow {
            group_start: g0 as u32,
            start: start as u32,
            end: e as u32,
            start_ts,
            active: true,
        };
    }
    Ok(out)
}

/// The previous window of a key: its bounds and positions.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    start_ts: i64,
    end_ts: i64,
    start: u32,
    end: u32,
}

/// [`Cursor`] per key group.
enum Cursors {
    Flat(Vec<Option<Cursor>>),
    Map(HashMap<u32, Option<Cursor>>),
}

impl Cursors {
    /// Flat when there are at most four groups per left row (or 64K).
    fn new(groups: usize, rows: usize) -> Self {
        if groups <= (4 * rows).max(1 << 16) {
            Cursors::Flat(vec![None; groups])
        } else {
            Cursors::Map(HashMap::new())
        }
    }

    #[inline]
    fn get(&mut self, g: u32) -> &mut Option<Cursor> {
        match self {
            Cursors::Flat(v) => &mut v[g as usize],
            Cursors::Map(m) => m.entry(g).or_default(),
        }
    }
}

/// `slice.partition_point(pred)` for a `pred` known to hold on
/// `slice[..from]`: exponential steps forward from `from`, then a binary
/// search inside the last step. Costs `O(log d)` for a move of `d`.
pub(crate) fn gallop(slice: &[i64], from: usize, pred: impl Fn(i64) -> bool) -> usize {
    // Neighbouring windows mostly move by a few positions: count the hits
    // among the next NEAR values without a branch per value (they are a
    // prefix, `pred` being monotone over the ascending slice) and gallop
    // only past them, instead of paying a mispredicted branch per step.
    const NEAR: usize = 8;
    if let Some(near) = slice.get(from..from + NEAR) {
        let hits: usize = near.iter().map(|&x| usize::from(pred(x))).sum();
        if hits < NEAR {
            return from + hits;
        }
        return gallop_far(slice, from + NEAR, pred);
    }
    gallop_far(slice, from, pred)
}

/// [`gallop`]'s exponential search: steps of 1, 2, 4, … then a binary
/// search inside the last step.
fn gallop_far(slice: &[i64], from: usize, pred: impl Fn(i64) -> bool) -> usize {
    let mut lo = from;
    let mut step = 1;
    while lo + step <= slice.len() && pred(slice[lo + step - 1]) {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step).min(slice.len());
    lo + slice[lo..hi].partition_point(|&x| pred(x))
}

/// `slice.partition_point(pred)` searched outwards from `guess`
/// (exponential steps, then a binary search inside the last step): costs
/// `O(log d)` for an answer `d` away from the guess.
pub(crate) fn search_near(
    slice: &[i64],
    guess: usize,
    pred: impl Fn(i64) -> bool,
) -> usize {
    let guess = guess.min(slice.len());
    if guess < slice.len() && pred(slice[guess]) {
        return gallop(slice, guess + 1, pred);
    }
    // The answer is at most `hi`.
    let (mut hi, mut step) = (guess, 1);
    loop {
        if hi < step {
            return slice[..hi].partition_point(|&x| pred(x));
        }
        if pred(slice[hi - step]) {
            let lo = hi - step + 1;
            return lo + slice[lo..hi].partition_point(|&x| pred(x));
        }
        hi -= step;
        step *= 2;
    }
}

/// Where `t` would sit in the ascending `slice` if its timestamps were
/// evenly spread: the starting guess for [`search_near`]. Time series are
/// close to that, so the search then takes a few steps instead of a binary
/// search's `log n` cache misses.
pub(crate) fn interpolate(slice: &[i64], t: i64) -> usize {
    let (Some(&first), Some(&last)) = (slice.first(), slice.last()) else {
        return 0;
    };
    if t <= first {
        return 0;
    }
    if t > last {
        return slice.len();
    }
    let frac = (t as f64 - first as f64) / (last as f64 - first as f64);
    ((frac * (slice.len() - 1) as f64) as usize).min(slice.len() - 1)
}

/// Lists for rows `windows` when no pair filter applies: each window is a
/// contiguous run of positions.
pub(crate) fn contiguous_lists(index: &RightIndex, windows: &[RowWindow]) -> WindowLists {
    let total: usize = windows.iter().filter(|w| w.active).map(|w| w.len()).sum();
    let mut lists = WindowLists {
        offsets: Vec::with_capacity(windows.len() + 1),
        rows: Vec::with_capacity(total),
    };
    lists.offsets.push(0);
    for w in windows {
        if w.active {
            lists
                .rows
                .extend_from_slice(&index.order[w.start as usize..w.end as usize]);
        }
        lists.offsets.push(lists.rows.len() as u32);
    }
    lists
}

/// A batch of (left row, right row) pairs over `left ++ right`.
pub(crate) fn pair_batch(
    schema: &SchemaRef,
    left: &RecordBatch,
    left_rows: &UInt32Array,
    right: &RecordBatch,
    right_rows: &UInt32Array,
) -> Result<RecordBatch> {
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for c in left.columns() {
        cols.push(take(c.as_ref(), left_rows, None)?);
    }
    for c in right.columns() {
        cols.push(take(c.as_ref(), right_rows, None)?);
    }
    Ok(RecordBatch::try_new(Arc::clone(schema), cols)?)
}

/// Evaluates a boolean filter; NULL counts as false.
fn eval_mask(
    filter: &Arc<dyn datafusion::physical_plan::PhysicalExpr>,
    batch: &RecordBatch,
) -> Result<BooleanArray> {
    let m = filter.evaluate(batch)?.into_array(batch.num_rows())?;
    let Some(m) = m.as_boolean_opt() else {
        return exec_err!(
            "WINDOW JOIN ON condition must be boolean, got {}",
            m.data_type()
        );
    };
    Ok(m.iter().map(|v| Some(v == Some(true))).collect())
}

/// Lists for rows `windows` (left rows `left`) under a pair filter: a right
/// row joins only where the filter holds for the pair, and under INCLUDE
/// PREVAILING the prevailing row is the last *qualifying* row at or before
/// the window start.
pub(crate) fn filtered_lists(
    spec: &WindowJoinSpec,
    index: &RightIndex,
    pair_schema: &SchemaRef,
    left: &RecordBatch,
    windows: &[RowWindow],
) -> Result<WindowLists> {
    let filter = spec.pair_filter.as_ref().expect("pair filter");
    // 1. Candidates inside the windows.
    let mut lrows = vec![];
    let mut positions = vec![];
    for (i, w) in windows.iter().enumerate() {
        if w.active {
            for p in w.start..w.end {
                lrows.push(i as u32);
                positions.push(p);
            }
        }
    }
    let rrows: Vec<u32> = positions.iter().map(|&p| index.order[p as usize]).collect();
    let batch = pair_batch(
        pair_schema,
        left,
        &UInt32Array::from(lrows.clone()),
        &index.batch,
        &UInt32Array::from(rrows.clone()),
    )?;
    let keep = eval_mask(filter, &batch)?;

    // 2. Prevailing rows, searched backwards in blocks where needed.
    let mut prevailing: Vec<Option<u32>> = vec![None; windows.len()];
    if spec.prevailing == Prevailing::Include {
        let mut at_start = vec![false; windows.len()];
        for (k, (&i, &p)) in lrows.iter().zip(&positions).enumerate() {
            if keep.value(k) && index.ts[p as usize] == windows[i as usize].start_ts {
                at_start[i as usize] = true;
            }
        }
        for (i, w) in windows.iter().enumerate() {
            if w.active && !at_start[i] {
                prevailing[i] = find_prevailing(filter, index, pair_schema, left, i, w)?;
            }
        }
    }

    // 3. Assemble in aggregation order.
    let mut lists = WindowLists {
        offsets: vec![0],
        rows: Vec::with_capacity(rrows.len()),
    };
    let mut k = 0;
    for (i, p) in prevailing.iter().enumerate() {
        if let Some(p) = p {
            lists.rows.push(*p);
        }
        while k < lrows.len() && lrows[k] as usize == i {
            if keep.value(k) {
                lists.rows.push(rrows[k]);
            }
            k += 1;
        }
        lists.offsets.push(lists.rows.len() as u32);
    }
    Ok(lists)
}

/// The right row of the last qualifying position before `w.start` in the
/// row's key group, scanning backwards in growing blocks.
fn find_prevailing(
    filter: &Arc<dyn datafusion::physical_plan::PhysicalExpr>,
    index: &RightIndex,
    pair_schema: &SchemaRef,
    left: &RecordBatch,
    row: usize,
    w: &RowWindow,
) -> Result<Option<u32>> {
    let mut hi = w.start as usize;
    let lo_limit = w.group_start as usize;
    let mut block = 16usize;
    while hi > lo_limit {
        let lo = hi.saturating_sub(block).max(lo_limit);
        let rrows: Vec<u32> = (lo..hi).map(|p| index.order[p]).collect();
        let lrows = UInt32Array::from(vec![row as u32; rrows.len()]);
        let batch = pair_batch(
            pair_schema,
            left,
            &lrows,
            &index.batch,
            &UInt32Array::from(rrows.clone()),
        )?;
        let keep = eval_mask(filter, &batch)?;
        if let Some(k) = (0..rrows.len()).rev().find(|&k| keep.value(k)) {
            return Ok(Some(rrows[k]));
        }
        hi = lo;
        block = (block * 4).min(1 << 16);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sampled bound is never below a brute-force count over every
    /// row's window and less than one sample step above it, for any split
    /// into threads; groups hold duplicate times.
    #[test]
    fn longest_window_matches_brute_force() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let mut rng = StdRng::seed_from_u64(5);
        for case in 0..60 {
            let groups = rng.random_range(1..8);
            let (mut ts, mut offsets) = (vec![], vec![0u32]);
            for _ in 0..groups {
                let len = rng.random_range(0..300);
                let mut g: Vec<i64> =
                    (0..len).map(|_| rng.random_range(0..1000)).collect();
                g.sort_unstable();
                ts.extend(g);
                offsets.push(ts.len() as u32);
            }
            let width = [0, 1, 17, 250, 5000][case % 5];
            let brute = offsets
                .windows(2)
                .flat_map(|w| {
                    let g = &ts[w[0] as usize..w[1] as usize];
                    g.iter().map(move |&t| {
                        g.iter().filter(|&&x| x >= t && x <= t + width).count()
                    })
                })
                .max()
                .unwrap_or(0);
            for threads in [1, 2, 3, 8] {
                let bound = longest_window(&ts, &offsets, width, threads);
                assert!(
                    bound >= brute && bound < brute + WINDOW_SAMPLE,
                    "case {case}, {threads} threads: {bound} vs {brute}"
                );
            }
        }
    }

    #[test]
    fn searches_agree_with_partition_point() {
        let mut seed = 1u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        for n in [0usize, 1, 2, 5, 100, 1000] {
            let mut v: Vec<i64> = (0..n).map(|_| (next() % 500) as i64).collect();
            v.sort_unstable();
            for _ in 0..200 {
                let t = (next() % 520) as i64 - 10;
                let want_lt = v.partition_point(|&x| x < t);
                let want_le = v.partition_point(|&x| x <= t);
                let guess = (next() as usize) % (n + 2);
                assert_eq!(
                    search_near(&v, guess, |x| x < t),
                    want_lt,
                    "n={n} t={t} guess={guess}"
                );
                assert_eq!(
                    search_near(&v, interpolate(&v, t), |x| x <= t),
                    want_le,
                    "n={n} t={t}"
                );
                assert_eq!(gallop(&v, want_lt.min(want_le), |x| x <= t), want_le);
                // From anywhere before the answer: short moves (counted) and
                // long ones (galloped past the first few).
                let from = (next() as usize) % (want_lt + 1);
                assert_eq!(
                    gallop(&v, from, |x| x < t),
                    want_lt,
                    "n={n} t={t} from={from}"
                );
            }
        }
    }
}
