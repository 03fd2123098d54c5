//! The streaming walk: left rows in time order against the right side's
//! [`Timeline`], with per key only the right rows inside the current window
//! ([`KeyWindow`]) and the aggregates maintained as rows enter and leave.

use super::lanes::{Lane, RightSide, column_needs, non_null_picks};
use super::window::{Inputs, Sliding, key_f64};
use crate::functions::Position;
use crate::temporal::{MergeCursor, Timeline, key_arrays};
use crate::window_join::bounds::Prevailing;
use crate::window_join::eval::eval_ticks;
use crate::window_join::fast::column::ColumnType;
use crate::window_join::fast::{FastAgg, FastPlan};
use crate::window_join::spec::WindowJoinSpec;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, UInt32Array,
};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::{cast, take};
use datafusion::common::Result;
use std::collections::VecDeque;
use std::sync::Arc;

/// No [`KeyWindow`] for a group yet.
const NO_SLOT: u32 = u32::MAX;

/// Where one fast column's aggregates live in a key's [`Sliding`]: its
/// slot of each kind, if any.
#[derive(Debug, Clone, Copy, Default)]
struct Slots {
    /// Count of non-NULL values (an integer sum of `Lane::ones`); `None`
    /// for a column without NULLs, whose count is the window's length.
    count: Option<usize>,
    isum: Option<usize>,
    fsum: Option<usize>,
    min: Option<usize>,
    max: Option<usize>,
}

/// Where each slot of a [`Sliding`] reads its input: per kind, the fast
/// columns in slot order (for integer sums, with whether it is the
/// column's `ones`).
#[derive(Debug, Default)]
struct SlotSources {
    sums: Vec<usize>,
    adds: Vec<(usize, bool)>,
    mins: Vec<usize>,
    maxs: Vec<usize>,
}

impl SlotSources {
    /// Each column's slots, given what its aggregates need.
    fn plan(plan: &FastPlan, lanes: &[Lane]) -> (Self, Vec<Slots>) {
        let mut src = Self::default();
        let slots = column_needs(plan)
            .iter()
            .zip(lanes)
            .enumerate()
            .map(|(c, (needs, lane))| {
                let typed = lane.ty != ColumnType::NullsOnly;
                Slots {
                    count: add_slot(
                        needs.valid && lane.valid.is_some(),
                        &mut src.adds,
                        (c, true),
                    ),
                    isum: add_slot(
                        needs.isum && lane.ty == ColumnType::Int,
                        &mut src.adds,
                        (c, false),
                    ),
                    fsum: add_slot(
                        needs.fsum && lane.ty == ColumnType::Float,
                        &mut src.sums,
                        c,
                    ),
                    min: add_slot(needs.min && typed, &mut src.mins, c),
                    max: add_slot(needs.max && typed, &mut src.maxs, c),
                }
            })
            .collect();
        (src, slots)
    }

    /// The slots' inputs over `right`'s lanes.
    fn inputs<'a>(&self, right: &'a RightSide) -> Inputs<'a> {
        let lanes = &right.lanes;
        Inputs {
            sums: self.sums.iter().map(|&c| &lanes[c].floats[..]).collect(),
            adds: self
                .adds
                .iter()
                .map(|&(c, ones)| match ones {
                    true => &lanes[c].ones[..],
                    false => &lanes[c].ints[..],
                })
                .collect(),
            mins: self.mins.iter().map(|&c| lanes[c].keys(false)).collect(),
            maxs: self.maxs.iter().map(|&c| lanes[c].keys(true)).collect(),
        }
    }
}

/// `item` as the next slot of `list` when `on`; its index.
fn add_slot<T>(on: bool, list: &mut Vec<T>, item: T) -> Option<usize> {
    on.then(|| {
        list.push(item);
        list.len() - 1
    })
}

/// The window of one key: its right rows from the window start on, in
/// time order (`(time, row)`), the last row that left (the prevailing
/// row), and the aggregates over the rows. Rows leave as the key's rows
/// are pushed and when the key is asked; the window start only rises.
#[derive(Debug, Clone)]
struct KeyWindow {
    ring: VecDeque<(i64, u32)>,
    prev: Option<u32>,
    agg: Sliding,
    /// Per first/last_not_null aggregate: the ring's rows whose value is
    /// not NULL.
    non_null: Vec<VecDeque<(i64, u32)>>,
}

/// An active left row: `(row, key group, window start, window end)`.
type Active = (u32, u32, i64, i64);

/// Per output aggregate, its values for one left batch.
enum Out {
    Count(Vec<i64>),
    Int(Vec<i64>, Vec<bool>),
    Float(Vec<f64>, Vec<bool>),
    Rows(Vec<Option<u32>>),
}

/// The streaming state of one left partition.
///
/// Left batches whose active rows are in time order, each starting no
/// earlier than the previous one ended, continue the walk; a batch that
/// starts earlier restarts it (a binary search and a warm-up, as a new
/// time range would); a batch out of order inside is refused (`None`) and
/// joined by the caller on the index path.
pub(crate) struct Walker {
    right: Arc<RightSide>,
    spec: Arc<WindowJoinSpec>,
    plan: Arc<FastPlan>,
    /// Per fast column, its slots.
    slots: Vec<Slots>,
    sources: SlotSources,
    /// A new key's (empty) aggregates.
    empty: Sliding,
    /// Per aggregate, its slot in `KeyWindow::non_null`.
    non_null_slot: Vec<Option<usize>>,
    n_non_null: usize,
    /// Next timeline position to push.
    pos: usize,
    /// Window start of the last left row joined (`None` before the start).
    time: Option<i64>,
    /// Per key group, its index in `keys` (or [`NO_SLOT`]).
    slot: Vec<u32>,
    keys: Vec<KeyWindow>,
    /// With INCLUDE PREVAILING, the merge positioned where the walk
    /// started: per group, the last row before that (the prevailing row of
    /// a key first met after the start).
    warm: Option<MergeCursor>,
    /// Rows held over all rings (for the memory reservation).
    entries: usize,
    /// A buffer the window state reuses.
    scratch: Vec<u32>,
}

impl Walker {
    /// A walk that has not started.
    pub(crate) fn new(
        right: Arc<RightSide>,
        spec: Arc<WindowJoinSpec>,
        plan: Arc<FastPlan>,
    ) -> Self {
        let (sources, slots) = SlotSources::plan(&plan, &right.lanes);
        let empty = Sliding::new(&sources.inputs(&right));
        let (non_null_slot, n_non_null) = non_null_picks(&plan);
        let groups = right.timeline.groups;
        Self {
            right,
            spec,
            plan,
            slots,
            sources,
            empty,
            non_null_slot,
            n_non_null,
            pos: 0,
            time: None,
            slot: vec![NO_SLOT; groups],
            keys: vec![],
            warm: None,
            entries: 0,
            scratch: vec![],
        }
    }

    /// Approximate bytes the window state holds.
    pub(crate) fn state_bytes(&self) -> usize {
        let s = &self.sources;
        let slots = s.sums.len() + s.adds.len() + s.mins.len() + s.maxs.len();
        let per_entry = 16 + slots * 8 + self.n_non_null * 16;
        self.slot.len() * 4
            + self.keys.len() * (96 + slots * 16)
            + self.entries * per_entry
    }

    /// Starts (or restarts) the walk at window start `start`: the first
    /// right row at or after it is the next to push, and (with INCLUDE
    /// PREVAILING) a key met later takes its prevailing row from the rows
    /// just before, read back by a [`MergeCursor`] started there.
    fn restart(&mut self, start: i64) {
        let tl = &self.right.timeline;
        self.pos = tl.seq_ts.partition_point(|&x| x < start);
        self.slot.fill(NO_SLOT);
        self.keys.clear();
        self.entries = 0;
        self.warm = (self.spec.prevailing == Prevailing::Include).then(|| {
            let mut cursor = MergeCursor::new(tl, true);
            cursor.start(tl, start);
            cursor
        });
        self.time = Some(start);
    }

    /// The window state of group `g`, made on first use.
    #[inline]
    fn key(&mut self, g: u32) -> usize {
        let s = self.slot[g as usize];
        if s != NO_SLOT {
            return s as usize;
        }
        self.new_key(g)
    }

    #[cold]
    fn new_key(&mut self, g: u32) -> usize {
        let tl = &self.right.timeline;
        let prev = self
            .warm
            .as_mut()
            .and_then(|cursor| cursor.latest(tl, g))
            .map(|(row, _)| row);
        self.keys.push(KeyWindow {
            ring: VecDeque::new(),
            prev,
            agg: self.empty.clone(),
            non_null: vec![VecDeque::new(); self.n_non_null],
        });
        let s = self.keys.len() - 1;
        self.slot[g as usize] = s as u32;
        s
    }

    /// Pushes every right row of `tl` (this walk's timeline, passed in so
    /// no per-row clone of the shared right side touches its reference
    /// count) with time at most `end` (`start`: the current window start,
    /// which only rises).
    #[inline]
    fn advance(&mut self, tl: &Timeline, inputs: &Inputs, start: i64, end: i64) {
        while self.pos < tl.seq_ts.len() {
            let t = tl.seq_ts[self.pos];
            if t > end {
                break;
            }
            let (row, g) = (tl.seq_row(self.pos), tl.seq_key[self.pos]);
            self.pos += 1;
            let k = self.key(g);
            self.push(k, t, row);
            // Now and then (amortised, and at most every 64 of the key's
            // rows) the key drops its rows before the window start: a key
            // asked rarely would otherwise hold every row since it was
            // last asked.
            if self.keys[k].ring.len().is_multiple_of(64) {
                self.evict(inputs, k, start);
            }
        }
    }

    /// Appends right row `row` (time `t`) to key `k`'s window; its
    /// aggregates fold it when the key is next asked.
    #[inline]
    fn push(&mut self, k: usize, t: i64, row: u32) {
        let w = &mut self.keys[k];
        w.ring.push_back((t, row));
        self.entries += 1;
        if self.n_non_null > 0 {
            for (a, slot) in self.non_null_slot.iter().enumerate() {
                if let (Some(s), Some(values)) = (slot, &self.right.picks[a])
                    && values.is_valid(row as usize)
                {
                    w.non_null[*s].push_back((t, row));
                }
            }
        }
    }

    /// Drops key `k`'s rows before `start`; the last one is the prevailing row.
    #[inline]
    fn evict(&mut self, inputs: &Inputs, k: usize, start: i64) {
        let w = &mut self.keys[k];
        if w.ring.front().is_none_or(|&(t, _)| t >= start) {
            return;
        }
        let n = w
            .ring
            .iter()
            .position(|&(t, _)| t >= start)
            .unwrap_or(w.ring.len());
        w.prev = Some(w.ring[n - 1].1);
        w.agg.evict(inputs, &w.ring, n, &mut self.scratch);
        w.ring.drain(..n);
        self.entries -= n;
        for d in &mut w.non_null {
            while d.front().is_some_and(|&(t, _)| t < start) {
                d.pop_front();
            }
        }
    }

    /// Joins one left batch: one array per aggregate, typed as the spec's
    /// output fields; `None` when the batch's rows are not in time order.
    pub(crate) fn join(&mut self, left: &RecordBatch) -> Result<Option<Vec<ArrayRef>>> {
        let spec = Arc::clone(&self.spec);
        let n = left.num_rows();
        let mut out: Vec<Out> = self
            .plan
            .aggs
            .iter()
            .map(|a| match a {
                FastAgg::CountStar | FastAgg::Count(_) => Out::Count(vec![0; n]),
                FastAgg::SumInt(_) => Out::Int(vec![0; n], vec![false; n]),
                FastAgg::Min(c) | FastAgg::Max(c)
                    if self.right.lanes[*c].ty == ColumnType::Int =>
                {
                    Out::Int(vec![0; n], vec![false; n])
                }
                FastAgg::Pick(..) => Out::Rows(vec![None; n]),
                _ => Out::Float(vec![0.0; n], vec![false; n]),
            })
            .collect();
        if n > 0 {
            let Some(active) = self.active_rows(left)? else {
                return Ok(None);
            };
            self.walk(&active, &mut out);
        }
        let arrays = out
            .into_iter()
            .zip(&self.plan.aggs)
            .zip(&spec.aggs)
            .map(|((o, fast), agg)| {
                let array: ArrayRef = match (o, fast) {
                    (Out::Count(v), _) => Arc::new(Int64Array::from(v)),
                    (Out::Int(v, ok), _) => {
                        Arc::new(Int64Array::new(v.into(), Some(NullBuffer::from(ok))))
                    }
                    (Out::Float(v, ok), _) => {
                        Arc::new(Float64Array::new(v.into(), Some(NullBuffer::from(ok))))
                    }
                    (Out::Rows(rows), FastAgg::Pick(_, a)) => {
                        let values = self.right.picks[*a].as_ref().expect("pick values");
                        take(values.as_ref(), &UInt32Array::from(rows), None)?
                    }
                    (Out::Rows(_), _) => unreachable!("rows only for picks"),
                };
                Ok(if array.data_type() != agg.field.data_type() {
                    cast(&array, agg.field.data_type())?
                } else {
                    array
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(arrays))
    }

    /// The batch's active rows as `(row, group, window start, window end)`
    /// in row order, or `None` when their times decrease somewhere.
    fn active_rows(&self, left: &RecordBatch) -> Result<Option<Vec<Active>>> {
        let spec = &self.spec;
        let n = left.num_rows();
        let ts = eval_ticks(&spec.left_ts, left, spec.scale.left_factor())?;
        // Constant bounds (the fast plan's condition): one row gives every
        // row's offsets, errors and NULL included, as the other paths do.
        let one = left.slice(0, 1);
        let (Some(lo), Some(hi)) = (spec.lo.offsets(&one)?[0], spec.hi.offsets(&one)?[0])
        else {
            return Ok(Some(vec![]));
        };
        if hi < lo {
            return Ok(Some(vec![]));
        }
        let groups = self
            .right
            .timeline
            .groups_of(&key_arrays(&spec.left_keys, left)?, n)?;
        let mask = match &spec.left_filter {
            Some(f) => Some(f.evaluate(left)?.into_array(n)?.as_boolean().clone()),
            None => None,
        };
        let mut active = Vec::with_capacity(n);
        let mut last = i64::MIN;
        for (i, g) in groups.iter().enumerate() {
            let passes = mask.as_ref().is_none_or(|m| m.is_valid(i) && m.value(i));
            let (Some(g), true, true) = (*g, ts.is_valid(i), passes) else {
                continue;
            };
            let t = ts.value(i);
            if t < last {
                return Ok(None);
            }
            last = t;
            active.push((i as u32, g, t.saturating_add(lo), t.saturating_add(hi)));
        }
        Ok(Some(active))
    }

    fn walk(&mut self, active: &[Active], out: &mut [Out]) {
        let Some(&(_, _, first_start, _)) = active.first() else {
            return;
        };
        if self.time.is_none_or(|t| first_start < t) {
            self.restart(first_start);
        }
        let include = self.spec.prevailing == Prevailing::Include;
        let right = Arc::clone(&self.right);
        let plan = Arc::clone(&self.plan);
        let inputs = self.sources.inputs(&right);
        for &(row, g, start, end) in active {
            self.advance(&right.timeline, &inputs, start, end);
            let k = self.key(g);
            self.evict(&inputs, k, start);
            self.time = Some(start);
            let w = &mut self.keys[k];
            w.agg.catch_up(&inputs, &w.ring);
            let w = &self.keys[k];
            let prev = w
                .prev
                .filter(|_| include && w.ring.front().is_none_or(|&(t, _)| t != start));
            let view = View {
                right: &right,
                inputs: &inputs,
                slots: &self.slots,
                w,
                prev,
            };
            let r = row as usize;
            for (i, fast) in plan.aggs.iter().enumerate() {
                view.fill(*fast, self.non_null_slot[i], r, &mut out[i]);
            }
        }
    }
}

/// One key's window as a left row sees it: its rows and aggregates, and
/// the prevailing row `prev` when it counts (it comes first in the window).
struct View<'a> {
    right: &'a RightSide,
    inputs: &'a Inputs<'a>,
    slots: &'a [Slots],
    w: &'a KeyWindow,
    prev: Option<u32>,
}

impl View<'_> {
    /// The prevailing row when it counts and column `c` holds a value there.
    #[inline]
    fn prev_valid(&self, c: usize) -> Option<u32> {
        self.prev.filter(|&p| self.right.lanes[c].is_valid(p))
    }

    /// Column `c`'s count of non-NULL values in the window (without the
    /// prevailing row).
    #[inline]
    fn count(&self, c: usize) -> u64 {
        match self.slots[c].count {
            Some(s) => self.w.agg.add(self.inputs, s) as u64,
            None => self.w.ring.len() as u64,
        }
    }

    /// Writes left row `r`'s value of one aggregate.
    #[inline]
    fn fill(&self, fast: FastAgg, non_null: Option<usize>, r: usize, out: &mut Out) {
        let (right, w, prev) = (self.right, self.w, self.prev);
        let slot = |s: Option<usize>| s.expect("a slot for every aggregate's column");
        match (fast, out) {
            (FastAgg::CountStar, Out::Count(v)) => {
                v[r] = (w.ring.len() + prev.is_some() as usize) as i64
            }
            (FastAgg::Count(c), Out::Count(v)) => {
                v[r] = (self.count(c) + self.prev_valid(c).is_some() as u64) as i64
            }
            (FastAgg::SumInt(c), Out::Int(v, ok)) => {
                let p = self.prev_valid(c);
                if self.count(c) > 0 || p.is_some() {
                    let sum = w.agg.add(self.inputs, slot(self.slots[c].isum));
                    let extra = p.map_or(0, |p| right.lanes[c].ints[p as usize]);
                    (v[r], ok[r]) = (sum.wrapping_add(extra), true);
                }
            }
            (FastAgg::SumFloat(c) | FastAgg::Avg(c), Out::Float(v, ok)) => {
                let p = self.prev_valid(c);
                let count = self.count(c) + p.is_some() as u64;
                if count > 0 {
                    let mut sum = w.agg.sum(self.inputs, slot(self.slots[c].fsum));
                    if let Some(p) = p {
                        sum += right.lanes[c].floats[p as usize];
                    }
                    if matches!(fast, FastAgg::Avg(_)) {
                        sum /= count as f64;
                    }
                    (v[r], ok[r]) = (sum, true);
                }
            }
            (FastAgg::Min(c) | FastAgg::Max(c), out) => {
                let max = matches!(fast, FastAgg::Max(_));
                let lane = &right.lanes[c];
                let window = (self.count(c) > 0).then(|| match max {
                    true => w.agg.max(self.inputs, slot(self.slots[c].max)),
                    false => w.agg.min(self.inputs, slot(self.slots[c].min)),
                });
                let p = self.prev_valid(c).and_then(|p| lane.key(p));
                let key = match (window, p) {
                    (Some(a), Some(b)) if max => Some(a.max(b)),
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                if let Some(k) = key {
                    match out {
                        Out::Float(v, ok) => (v[r], ok[r]) = (key_f64(k), true),
                        Out::Int(v, ok) => (v[r], ok[r]) = (k, true),
                        _ => unreachable!("min/max output is typed by its lane"),
                    }
                }
            }
            (FastAgg::Pick(pos, a), Out::Rows(v)) => {
                let front = w.ring.front().map(|&(_, row)| row);
                let back = w.ring.back().map(|&(_, row)| row);
                let valid_prev = || {
                    prev.filter(|&p| {
                        right.picks[a]
                            .as_ref()
                            .is_some_and(|x| x.is_valid(p as usize))
                    })
                };
                let nn = non_null.map(|s| &w.non_null[s]);
                v[r] = match pos {
                    Position::First => prev.or(front),
                    Position::Last => back.or(prev),
                    Position::FirstNotNull => valid_prev()
                        .or_else(|| nn.and_then(|d| d.front()).map(|&(_, row)| row)),
                    Position::LastNotNull => nn
                        .and_then(|d| d.back())
                        .map(|&(_, row)| row)
                        .or_else(valid_prev),
                };
            }
            _ => unreachable!("output typed by its aggregate"),
        }
    }
}
