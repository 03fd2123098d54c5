//! The fast path's probe: every left row's window and aggregates.
//!
//! Rows are taken key by key (a counting sort of the batch by key group),
//! so each key's positions are read in one forward sweep: neighbouring
//! windows of a key share cache lines, the window search gallops from the
//! previous window, and the results are written back in row order.

use super::column::ColumnType;
use super::{FastAgg, FastPlan};
use crate::functions::Position;
use crate::kernels::KernelSet;
use crate::window_join::bounds::Prevailing;
use crate::window_join::build::RightIndex;
use crate::window_join::eval::{eval_all, eval_ticks};
use crate::window_join::search::{gallop, interpolate, search_near};
use crate::window_join::spec::{WindowJoinSettings, WindowJoinSpec};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, UInt32Array,
};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::{cast, take};
use datafusion::common::Result;
use std::sync::Arc;

/// The windows of a batch's active rows (rows that aggregate something:
/// timestamp, known key, left filter true), in key order.
#[derive(Debug, Default)]
struct Windows {
    /// Left row.
    row: Vec<u32>,
    /// Key group.
    group: Vec<u32>,
    /// First position of the window (the prevailing row when folded in).
    start: Vec<u32>,
    /// One past the last position.
    end: Vec<u32>,
}

impl Windows {
    fn iter(&self) -> impl Iterator<Item = (usize, usize, usize, usize)> + '_ {
        (0..self.row.len()).map(|i| {
            (
                self.row[i] as usize,
                self.group[i] as usize,
                self.start[i] as usize,
                self.end[i] as usize,
            )
        })
    }
}

/// Joins one left batch on the fast path: one array per aggregate, typed as
/// `spec`'s output fields.
pub(crate) fn probe_batch(
    plan: &FastPlan,
    spec: &WindowJoinSpec,
    index: &RightIndex,
    kernels: KernelSet,
    settings: &WindowJoinSettings,
    left: &RecordBatch,
) -> Result<Vec<ArrayRef>> {
    let n = left.num_rows();
    let windows = windows(spec, index, left)?;
    let cols = &index.fast;
    let table_min = settings.min_max_table_min;
    let mut out: Vec<Option<ArrayRef>> = vec![None; plan.aggs.len()];
    // Float columns read by a sum (or avg) and by min or max: one pass over
    // each window gives all of them.
    for (c, col) in cols.iter().enumerate() {
        let find = |f: FastAgg| plan.aggs.iter().position(|&a| a == f);
        let (sum, avg) = (find(FastAgg::SumFloat(c)), find(FastAgg::Avg(c)));
        let (min, max) = (find(FastAgg::Min(c)), find(FastAgg::Max(c)));
        if plan.columns[c].ty != ColumnType::Float
            || (sum.is_none() && avg.is_none())
            || (min.is_none() && max.is_none())
        {
            continue;
        }
        let (mut counts, mut sums, mut lo, mut hi) =
            (vec![0u32; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        for (row, _, s, e) in windows.iter() {
            if let Some((count, total, [a, b])) =
                col.float_sum_min_max(kernels, s, e, settings.sum_prefix_min, table_min)
            {
                (counts[row], sums[row], lo[row], hi[row]) = (count as u32, total, a, b);
            }
        }
        let valid = NullBuffer::from(counts.iter().map(|&c| c > 0).collect::<Vec<_>>());
        let array = |v: Vec<f64>| {
            Arc::new(Float64Array::new(v.into(), Some(valid.clone()))) as ArrayRef
        };
        if let Some(i) = avg {
            out[i] = Some(array(
                sums.iter()
                    .zip(&counts)
                    .map(|(&s, &c)| s / c.max(1) as f64)
                    .collect(),
            ));
        }
        if let Some(i) = sum {
            out[i] = Some(array(sums));
        }
        if let Some(i) = min {
            out[i] = Some(array(lo));
        }
        if let Some(i) = max {
            out[i] = Some(array(hi));
        }
    }
    // Columns read by min and max: one pass gives both.
    for (c, col) in cols.iter().enumerate() {
        let find = |f: FastAgg| {
            plan.aggs
                .iter()
                .position(|&a| a == f)
                .filter(|&i| out[i].is_none())
        };
        let (min, max) = (find(FastAgg::Min(c)), find(FastAgg::Max(c)));
        if min.is_none() && max.is_none() {
            continue;
        }
        let [lo, hi] = match plan.columns[c].ty {
            ColumnType::Float => extremes(n, &windows, |s, e| {
                col.float_min_max(kernels, s, e, table_min)
            })
            .map(|(v, valid)| {
                Arc::new(Float64Array::new(v.into(), Some(valid))) as ArrayRef
            }),
            _ => extremes(n, &windows, |s, e| {
                col.int_min_max(kernels, s, e, table_min)
            })
            .map(|(v, valid)| {
                Arc::new(Int64Array::new(v.into(), Some(valid))) as ArrayRef
            }),
        };
        if let Some(i) = min {
            out[i] = Some(lo);
        }
        if let Some(i) = max {
            out[i] = Some(hi);
        }
    }
    for (i, fast) in plan.aggs.iter().enumerate() {
        if out[i].is_some() {
            continue;
        }
        out[i] = Some(match *fast {
            FastAgg::CountStar => counts(n, &windows, |_, s, e| e - s),
            FastAgg::Count(c) => counts(n, &windows, |_, s, e| cols[c].valid_in(s, e)),
            FastAgg::SumInt(c) => {
                let col = &cols[c];
                let (v, valid) = fill(n, &windows, |_, s, e| {
                    (col.valid_in(s, e) > 0).then(|| col.int_sum(s, e))
                });
                Arc::new(Int64Array::new(v.into(), Some(valid)))
            }
            FastAgg::SumFloat(c) | FastAgg::Avg(c) => {
                let col = &cols[c];
                let avg = matches!(fast, FastAgg::Avg(_));
                let (v, valid) = fill(n, &windows, |_, s, e| {
                    let count = col.valid_in(s, e);
                    (count > 0).then(|| {
                        let sum = col.float_sum(kernels, s, e, settings.sum_prefix_min);
                        if avg { sum / count as f64 } else { sum }
                    })
                });
                Arc::new(Float64Array::new(v.into(), Some(valid)))
            }
            FastAgg::Min(_) | FastAgg::Max(_) => unreachable!("computed above"),
            FastAgg::Pick(pick, a) => {
                picks(n, &windows, index, pick, &index.agg_values[a][0])?
            }
        });
    }
    out.into_iter()
        .zip(&spec.aggs)
        .map(|(array, agg)| {
            let array = array.expect("every aggregate computed");
            Ok(if array.data_type() != agg.field.data_type() {
                cast(&array, agg.field.data_type())?
            } else {
                array
            })
        })
        .collect()
}

/// Per row, `f(group, start, end)` where active, NULL elsewhere.
fn fill<T: Copy + Default>(
    n: usize,
    w: &Windows,
    f: impl Fn(usize, usize, usize) -> Option<T>,
) -> (Vec<T>, NullBuffer) {
    let mut values = vec![T::default(); n];
    let mut valid = vec![false; n];
    for (row, g, s, e) in w.iter() {
        if let Some(v) = f(g, s, e) {
            values[row] = v;
            valid[row] = true;
        }
    }
    (values, NullBuffer::from(valid))
}

/// `count`-like aggregates: `f(group, start, end)` where active, 0 elsewhere.
fn counts(n: usize, w: &Windows, f: impl Fn(usize, usize, usize) -> usize) -> ArrayRef {
    let mut values = vec![0i64; n];
    for (row, g, s, e) in w.iter() {
        values[row] = f(g, s, e) as i64;
    }
    Arc::new(Int64Array::from(values))
}

/// `(min, max)` per row from `f(start, end)`.
fn extremes<T: Copy + Default>(
    n: usize,
    w: &Windows,
    f: impl Fn(usize, usize) -> Option<[T; 2]>,
) -> [(Vec<T>, NullBuffer); 2] {
    let (mut lo, mut hi) = (vec![T::default(); n], vec![T::default(); n]);
    let mut valid = vec![false; n];
    for (row, _, s, e) in w.iter() {
        if let Some([a, b]) = f(s, e) {
            lo[row] = a;
            hi[row] = b;
            valid[row] = true;
        }
    }
    let valid = NullBuffer::from(valid);
    [(lo, valid.clone()), (hi, valid)]
}

/// first/last(_not_null): the chosen right row per window, taken from its
/// argument's values.
fn picks(
    n: usize,
    w: &Windows,
    index: &RightIndex,
    pick: Position,
    values: &ArrayRef,
) -> Result<ArrayRef> {
    let mut rows: Vec<Option<u32>> = vec![None; n];
    for (row, _, s, e) in w.iter() {
        let mut it = index.order[s..e].iter().copied();
        rows[row] = match pick {
            Position::First => it.next(),
            Position::Last => it.next_back(),
            Position::FirstNotNull => it.find(|&r| values.is_valid(r as usize)),
            Position::LastNotNull => it.rfind(|&r| values.is_valid(r as usize)),
        };
    }
    Ok(take(values.as_ref(), &UInt32Array::from(rows), None)?)
}

/// Every active row's window, in key order. The bounds are constant (the
/// fast path's condition).
fn windows(
    spec: &WindowJoinSpec,
    index: &RightIndex,
    left: &RecordBatch,
) -> Result<Windows> {
    let n = left.num_rows();
    if n == 0 {
        return Ok(Windows::default());
    }
    let ts = eval_ticks(&spec.left_ts, left, spec.scale.left_factor())?;
    // Constant bounds: one row gives every row's offsets (and an overflow
    // error, or NULL for a NULL literal, as the general path would).
    let one = left.slice(0, 1);
    let lo = spec.lo.offsets(&one)?[0];
    let hi = spec.hi.offsets(&one)?[0];
    let (Some(lo), Some(hi)) = (lo, hi) else {
        return Ok(Windows::default());
    };
    let groups: Vec<Option<u32>> = match &index.keys {
        Some(keys) => keys.lookup(&eval_all(&spec.left_keys, left)?)?,
        None => vec![Some(0); n],
    };
    let mask = match &spec.left_filter {
        Some(f) => Some(f.evaluate(left)?.into_array(n)?.as_boolean().clone()),
        None => None,
    };
    // Active rows as (group, row), then in key order (stable: a key's rows
    // keep their input order, usually time order).
    let mut active: Vec<(u32, u32)> = (0..n)
        .filter(|&i| {
            ts.is_valid(i) && mask.as_ref().is_none_or(|m| m.is_valid(i) && m.value(i))
        })
        .filter_map(|i| Some((groups[i]?, i as u32)))
        .collect();
    sort_by_group(&mut active, index.num_groups());
    let guesses = first_guesses(index, &ts, &active, lo);

    let fold_prevailing = spec.prevailing == Prevailing::Include;
    let mut w = Windows {
        row: Vec::with_capacity(active.len()),
        group: Vec::with_capacity(active.len()),
        start: Vec::with_capacity(active.len()),
        end: Vec::with_capacity(active.len()),
    };
    // The previous window of the current key: (start_ts, end_ts, s, e).
    let mut prev: Option<(u32, i64, i64, usize, usize)> = None;
    let mut runs = guesses.iter();
    for &(g, row) in &active {
        let t = ts.value(row as usize);
        let (start_ts, end_ts) = (t.saturating_add(lo), t.saturating_add(hi));
        let (g0, g1) = index.group(g);
        let slice = &index.ts[g0..g1];
        // From the previous window of the key when this one lies after it,
        // else from where the timestamp should sit; the end from the start.
        let (s, e) = match prev {
            Some((pg, ps, pe, s, e)) if pg == g && start_ts >= ps && end_ts >= pe => {
                let s = gallop(slice, s, |x| x < start_ts);
                (s, gallop(slice, e.max(s), |x| x <= end_ts))
            }
            _ => {
                // A key's first window starts from its prefetched guess; a
                // window before the previous one (left rows out of time
                // order) from a fresh one.
                let guess = match prev {
                    Some((pg, ..)) if pg == g => interpolate(slice, start_ts),
                    _ => *runs.next().expect("one guess per key run"),
                };
                let s = search_near(slice, guess, |x| x < start_ts);
                (s, gallop(slice, s, |x| x <= end_ts))
            }
        };
        prev = Some((g, start_ts, end_ts, s, e));
        let mut start = g0 + s;
        if fold_prevailing && s > 0 && !(s < slice.len() && slice[s] == start_ts) {
            start -= 1;
        }
        w.row.push(row);
        w.group.push(g);
        w.start.push(start as u32);
        w.end.push((g0 + e) as u32);
    }
    Ok(w)
}

/// The interpolated start of the first window of every key run of
/// `active` (sorted by group), each prefetched. The first search of a key
/// in a batch touches that key's timestamps far from anything cached; with
/// every guess known up front the misses overlap instead of stalling the
/// window loop one key at a time.
fn first_guesses(
    index: &RightIndex,
    ts: &Int64Array,
    active: &[(u32, u32)],
    lo: i64,
) -> Vec<usize> {
    let mut guesses = vec![];
    let mut i = 0;
    while i < active.len() {
        let (g, row) = active[i];
        let (g0, g1) = index.group(g);
        let slice = &index.ts[g0..g1];
        let guess = interpolate(slice, ts.value(row as usize).saturating_add(lo));
        if let Some(x) = slice.get(guess) {
            prefetch(x);
        }
        guesses.push(guess);
        i += active[i..].iter().take_while(|&&(h, _)| h == g).count();
    }
    guesses
}

/// Asks for the cache line of `x` without waiting for it.
#[inline(always)]
fn prefetch<T>(x: &T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: a prefetch is only a hint; it never faults or changes memory.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast::<i8>());
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = x;
}

/// Stable sort of `(group, row)` pairs by group: a counting sort when the
/// groups are few against the rows, a comparison sort otherwise.
fn sort_by_group(pairs: &mut Vec<(u32, u32)>, groups: usize) {
    if groups > (4 * pairs.len()).max(1 << 16) {
        pairs.sort_unstable();
        return;
    }
    let mut offsets = vec![0u32; groups + 1];
    for &(g, _) in pairs.iter() {
        offsets[g as usize + 1] += 1;
    }
    for g in 0..groups {
        offsets[g + 1] += offsets[g];
    }
    let mut sorted = vec![(0u32, 0u32); pairs.len()];
    for &(g, r) in pairs.iter() {
        sorted[offsets[g as usize] as usize] = (g, r);
        offsets[g as usize] += 1;
    }
    *pairs = sorted;
}
