//! The streaming walk: left rows in time order against the right side's
//! [`Timeline`], with per key only the right rows inside the current window
//! ([`KeyWindow`]) and the aggregates maintained as rows enter and leave.

use super::window::{MonoDeque, SumStack};
use crate::functions::Position;
use crate::temporal::{Found, MergeCursor, Timeline, key_arrays};
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
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::common::Result;
use std::collections::VecDeque;
use std::sync::Arc;

/// No [`KeyWindow`] for a group yet.
const NO_SLOT: u32 = u32::MAX;

/// One fast column's argument values by right row (of the timeline's
/// batch). NULL slots hold 0, so sums can add them unconditionally.
#[derive(Debug)]
pub(crate) struct Lane {
    ty: ColumnType,
    floats: Vec<f64>,
    ints: Vec<i64>,
    valid: Option<NullBuffer>,
}

impl Lane {
    /// The lane of column `ty` over `values` (the argument, by row).
    pub(crate) fn try_new(ty: ColumnType, values: &ArrayRef) -> Result<Self> {
        let valid = values.logical_nulls();
        let mut lane = Lane {
            ty,
            floats: vec![],
            ints: vec![],
            valid,
        };
        let is_valid = |i: usize| lane.valid.as_ref().is_none_or(|v| v.is_valid(i));
        match ty {
            ColumnType::Float => {
                let f = cast(values, &DataType::Float64)?;
                let f = f.as_primitive::<Float64Type>();
                let floats = (0..f.len())
                    .map(|i| if is_valid(i) { f.value(i) } else { 0.0 })
                    .collect();
                lane.floats = floats;
            }
            ColumnType::Int => {
                let x = cast(values, &DataType::Int64)?;
                let x = x.as_primitive::<Int64Type>();
                let ints = (0..x.len())
                    .map(|i| if is_valid(i) { x.value(i) } else { 0 })
                    .collect();
                lane.ints = ints;
            }
            ColumnType::NullsOnly => {}
        }
        Ok(lane)
    }

    #[inline]
    fn is_valid(&self, row: u32) -> bool {
        self.valid.as_ref().is_none_or(|v| v.is_valid(row as usize))
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.floats.capacity() * 8
            + self.ints.capacity() * 8
            + self.valid.as_ref().map_or(0, |v| v.buffer().len())
    }
}

/// The right side as the streaming path reads it, shared read-only by every
/// left partition: rows in time order, one [`Lane`] per fast column and the
/// argument arrays first/last pick from.
pub(crate) struct RightSide {
    pub timeline: Timeline,
    pub lanes: Vec<Lane>,
    /// Per aggregate, its argument by row when it is a first/last pick.
    pub picks: Vec<Option<ArrayRef>>,
}

/// What each fast column's window state keeps (from the aggregates over it).
#[derive(Debug, Clone, Copy, Default)]
struct Needs {
    valid: bool,
    isum: bool,
    fsum: bool,
    min: bool,
    max: bool,
}

/// One column's aggregate state over the rows of a [`KeyWindow`]'s ring.
#[derive(Debug, Clone)]
struct ColState {
    valid: u64,
    isum: i64,
    fsum: SumStack,
    fmin: MonoDeque<f64>,
    fmax: MonoDeque<f64>,
    imin: MonoDeque<i64>,
    imax: MonoDeque<i64>,
}

impl ColState {
    fn new() -> Self {
        Self {
            valid: 0,
            isum: 0,
            fsum: SumStack::default(),
            fmin: MonoDeque::new(false),
            fmax: MonoDeque::new(true),
            imin: MonoDeque::new(false),
            imax: MonoDeque::new(true),
        }
    }
}

/// The window of one key: its right rows from the window start on, in
/// time order (`(time, row)`), the last row that left (the prevailing
/// row), and each column's aggregate state. Rows are evicted lazily, when
/// the key is next asked, which is enough: the window start only rises.
#[derive(Debug, Clone)]
struct KeyWindow {
    ring: VecDeque<(i64, u32)>,
    prev: Option<u32>,
    cols: Vec<ColState>,
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
    needs: Vec<Needs>,
    /// Per aggregate, its slot in `KeyWindow::non_null`.
    non_null_slot: Vec<Option<usize>>,
    /// Next timeline position to push.
    pos: usize,
    /// Window start of the last left row joined (`None` before the start).
    time: Option<i64>,
    /// Per key group, its index in `keys` (or [`NO_SLOT`]).
    slot: Vec<u32>,
    keys: Vec<KeyWindow>,
    /// Where the walk started and, per group, the last row before that
    /// (the prevailing row of a key first met after the start).
    warm: Option<(MergeCursor, i64)>,
    /// Entries held over all rings and deques (for the memory reservation).
    entries: usize,
}

impl Walker {
    /// A walk that has not started.
    pub(crate) fn new(
        right: Arc<RightSide>,
        spec: Arc<WindowJoinSpec>,
        plan: Arc<FastPlan>,
    ) -> Self {
        let mut needs = vec![Needs::default(); plan.columns.len()];
        let mut non_null_slot = vec![None; plan.aggs.len()];
        let mut n_non_null = 0;
        for (i, a) in plan.aggs.iter().enumerate() {
            match *a {
                FastAgg::CountStar => {}
                FastAgg::Count(c) => needs[c].valid = true,
                FastAgg::SumInt(c) => (needs[c].valid, needs[c].isum) = (true, true),
                FastAgg::SumFloat(c) | FastAgg::Avg(c) => {
                    (needs[c].valid, needs[c].fsum) = (true, true)
                }
                FastAgg::Min(c) => needs[c].min = true,
                FastAgg::Max(c) => needs[c].max = true,
                FastAgg::Pick(Position::FirstNotNull | Position::LastNotNull, _) => {
                    non_null_slot[i] = Some(n_non_null);
                    n_non_null += 1;
                }
                FastAgg::Pick(..) => {}
            }
        }
        let groups = right.timeline.groups;
        Self {
            right,
            spec,
            plan,
            needs,
            non_null_slot,
            pos: 0,
            time: None,
            slot: vec![NO_SLOT; groups],
            keys: vec![],
            warm: None,
            entries: 0,
        }
    }

    /// Approximate bytes the window state holds.
    pub(crate) fn state_bytes(&self) -> usize {
        let per_entry = 16 + self.needs.len() * 24 + self.non_null_slot.len() * 4;
        self.slot.len() * 4
            + self.keys.len() * (64 + self.needs.len() * 200)
            + self.entries * per_entry
    }

    /// Starts (or restarts) the walk at window start `start`: the first
    /// right row at or after it is the next to push, and a key met later
    /// takes its prevailing row from the rows just before (a bounded
    /// warm-up, then the timeline's per-key index for keys not met).
    fn restart(&mut self, start: i64) {
        let tl = &self.right.timeline;
        self.pos = tl.seq_ts.partition_point(|&x| x < start);
        self.slot.fill(NO_SLOT);
        self.keys.clear();
        self.entries = 0;
        let mut cursor = MergeCursor::new(tl, true);
        cursor.start(tl, start);
        self.warm = Some((cursor, start));
        self.time = Some(start);
    }

    /// The window state of group `g`, made on first use.
    #[inline]
    fn key(&mut self, g: u32) -> usize {
        let s = self.slot[g as usize];
        if s != NO_SLOT {
            return s as usize;
        }
        let tl = &self.right.timeline;
        let prev = match &self.warm {
            Some((cursor, start)) => match cursor.get(g) {
                Found::Row(row, _) => Some(row),
                Found::Nothing => None,
                Found::AskIndex => tl.lookup(g, *start, false, true).map(|(r, _)| r),
            },
            None => None,
        };
        let n_non_null = self.non_null_slot.iter().flatten().count();
        self.keys.push(KeyWindow {
            ring: VecDeque::new(),
            prev,
            cols: vec![ColState::new(); self.needs.len()],
            non_null: vec![VecDeque::new(); n_non_null],
        });
        let s = self.keys.len() - 1;
        self.slot[g as usize] = s as u32;
        s
    }

    /// Pushes every right row with time at most `end`, evicting each
    /// pushed key's rows before `start` (the current window start, which
    /// only rises) as it goes: a key asked rarely would otherwise hold every
    /// row since it was last asked.
    #[inline]
    fn advance(&mut self, start: i64, end: i64) {
        while self.pos < self.right.timeline.seq_ts.len() {
            let (t, row, g) = {
                let tl = &self.right.timeline;
                (
                    tl.seq_ts[self.pos],
                    tl.seq_row(self.pos),
                    tl.seq_key[self.pos],
                )
            };
            if t > end {
                break;
            }
            self.pos += 1;
            let k = self.key(g);
            self.push(k, t, row);
            self.evict(k, start);
        }
    }

    #[inline]
    fn push(&mut self, k: usize, t: i64, row: u32) {
        let right = &*self.right;
        let w = &mut self.keys[k];
        w.ring.push_back((t, row));
        self.entries += 1;
        for ((c, lane), needs) in w.cols.iter_mut().zip(&right.lanes).zip(&self.needs) {
            let valid = lane.is_valid(row);
            if needs.valid {
                c.valid += valid as u64;
            }
            match lane.ty {
                ColumnType::Float => {
                    let v = lane.floats[row as usize];
                    if needs.fsum {
                        c.fsum.push(v);
                    }
                    if valid && needs.min {
                        c.fmin.push(t, v);
                    }
                    if valid && needs.max {
                        c.fmax.push(t, v);
                    }
                }
                ColumnType::Int => {
                    let v = lane.ints[row as usize];
                    if needs.isum {
                        c.isum = c.isum.wrapping_add(v);
                    }
                    if valid && needs.min {
                        c.imin.push(t, v);
                    }
                    if valid && needs.max {
                        c.imax.push(t, v);
                    }
                }
                ColumnType::NullsOnly => {}
            }
        }
        for (a, slot) in self.non_null_slot.iter().enumerate() {
            if let (Some(s), Some(values)) = (slot, &right.picks[a])
                && values.is_valid(row as usize)
            {
                w.non_null[*s].push_back((t, row));
            }
        }
    }

    /// Drops key `k`'s rows before `start`; the last one is the prevailing row.
    #[inline]
    fn evict(&mut self, k: usize, start: i64) {
        let right = &*self.right;
        let w = &mut self.keys[k];
        while let Some(&(t, row)) = w.ring.front() {
            if t >= start {
                break;
            }
            w.ring.pop_front();
            self.entries -= 1;
            w.prev = Some(row);
            for ((c, lane), needs) in w.cols.iter_mut().zip(&right.lanes).zip(&self.needs)
            {
                if needs.valid {
                    c.valid -= lane.is_valid(row) as u64;
                }
                if needs.fsum {
                    c.fsum.pop();
                }
                if needs.isum {
                    c.isum = c.isum.wrapping_sub(lane.ints[row as usize]);
                }
            }
        }
        for (c, needs) in w.cols.iter_mut().zip(&self.needs) {
            if needs.min {
                c.fmin.evict(start);
                c.imin.evict(start);
            }
            if needs.max {
                c.fmax.evict(start);
                c.imax.evict(start);
            }
        }
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
        for &(row, g, start, end) in active {
            self.advance(start, end);
            let k = self.key(g);
            self.evict(k, start);
            self.time = Some(start);
            let w = &self.keys[k];
            let prev = w
                .prev
                .filter(|_| include && w.ring.front().is_none_or(|&(t, _)| t != start));
            let r = row as usize;
            for (i, fast) in self.plan.aggs.iter().enumerate() {
                fill(
                    &right,
                    w,
                    prev,
                    *fast,
                    self.non_null_slot[i],
                    r,
                    &mut out[i],
                );
            }
        }
    }
}

/// Writes left row `r`'s value of one aggregate over window `w` and, when
/// it counts, the prevailing row `prev` (which comes first in the window).
#[inline]
fn fill(
    right: &RightSide,
    w: &KeyWindow,
    prev: Option<u32>,
    fast: FastAgg,
    non_null: Option<usize>,
    r: usize,
    out: &mut Out,
) {
    let prev_valid = |c: usize| prev.filter(|&p| right.lanes[c].is_valid(p));
    match (fast, out) {
        (FastAgg::CountStar, Out::Count(v)) => {
            v[r] = (w.ring.len() + prev.is_some() as usize) as i64
        }
        (FastAgg::Count(c), Out::Count(v)) => {
            v[r] = (w.cols[c].valid + prev_valid(c).is_some() as u64) as i64
        }
        (FastAgg::SumInt(c), Out::Int(v, ok)) => {
            let p = prev_valid(c);
            if w.cols[c].valid > 0 || p.is_some() {
                let extra = p.map_or(0, |p| right.lanes[c].ints[p as usize]);
                (v[r], ok[r]) = (w.cols[c].isum.wrapping_add(extra), true);
            }
        }
        (FastAgg::SumFloat(c) | FastAgg::Avg(c), Out::Float(v, ok)) => {
            let p = prev_valid(c);
            let count = w.cols[c].valid + p.is_some() as u64;
            if count > 0 {
                let mut sum = w.cols[c].fsum.sum();
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
            let p = prev_valid(c);
            let lane = &right.lanes[c];
            match out {
                Out::Float(v, ok) => {
                    let d = if max {
                        &w.cols[c].fmax
                    } else {
                        &w.cols[c].fmin
                    };
                    if let Some(x) = d.with(p.map(|p| lane.floats[p as usize])) {
                        (v[r], ok[r]) = (x, true);
                    }
                }
                Out::Int(v, ok) => {
                    let d = if max {
                        &w.cols[c].imax
                    } else {
                        &w.cols[c].imin
                    };
                    if let Some(x) = d.with(p.map(|p| lane.ints[p as usize])) {
                        (v[r], ok[r]) = (x, true);
                    }
                }
                _ => unreachable!("min/max output is typed by its lane"),
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
