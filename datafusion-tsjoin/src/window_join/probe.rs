//! The probe side of the general path: for each left row, find its window
//! in the [`RightIndex`] and list the right rows to aggregate, in
//! aggregation order (prevailing row first, then by timestamp).

use super::bounds::Prevailing;
use super::build::RightIndex;
use super::eval::{eval_all, eval_ticks};
use super::search::gallop;
use super::spec::WindowJoinSpec;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, RecordBatch, UInt32Array,
};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{HashMap, Result, exec_err};
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

/// Computes every left row's window. Under INCLUDE PREVAILING without a pair
/// filter the prevailing row is folded in (`start` moves back by one), so
/// each window is one contiguous run of positions.
pub(crate) fn row_windows(
    spec: &WindowJoinSpec,
    index: &RightIndex,
    left: &RecordBatch,
) -> Result<Vec<RowWindow>> {
    let n = left.num_rows();
    let ts = eval_ticks(&spec.left_ts, left, spec.scale.left_factor())?;
    let lo = spec.lo.offsets(left)?;
    let hi = spec.hi.offsets(left)?;
    let groups: Vec<Option<u32>> = match &index.keys {
        Some(keys) => keys.lookup(&eval_all(&spec.left_keys, left)?)?,
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
