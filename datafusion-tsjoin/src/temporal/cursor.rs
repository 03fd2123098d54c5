//! [`MergeCursor`]: the streaming merge of a time-ordered run of left rows
//! with a [`Timeline`], keeping per key group only its latest row.

use super::timeline::Timeline;

/// No row of the group so far.
const NONE: u32 = u32::MAX;
/// The warm-up stopped before finding the group's latest row: it lies
/// before [`MergeCursor::back`].
const UNKNOWN: u32 = u32::MAX - 1;

/// Most `seq` entries a warm-up reads back per key group (plus a constant)
/// before leaving the groups it has not met for later: a key that traded
/// once at the start of the day must not make every task scan the whole
/// right side unless a left row asks for that key.
const WARM_UP_PER_GROUP: usize = 64;

/// A key group's latest right row: `row` is the row (into the timeline's
/// batch) or one of the markers [`NONE`] and [`UNKNOWN`].
#[derive(Debug, Clone, Copy)]
struct Latest {
    row: u32,
    ts: i64,
}

impl Latest {
    const NONE: Self = Self { row: NONE, ts: 0 };
    const UNKNOWN: Self = Self {
        row: UNKNOWN,
        ts: 0,
    };

    /// `seq` entry `k` of `tl`.
    #[inline]
    fn at(tl: &Timeline, k: usize) -> Self {
        Self {
            row: tl.seq_row(k),
            ts: tl.seq_ts[k],
        }
    }
}

/// Backward merge state over a [`Timeline`]: the position reached in time
/// order and, per key group, the row and time of the last `seq` entry
/// passed (so a lookup is one read of a small array). Left times must not decrease between calls to
/// [`MergeCursor::advance`]; a task that starts in the middle of the left
/// input begins with [`MergeCursor::start`], which binary-searches its
/// right position and warms the per-key state from the rows just before;
/// a group the warm-up did not reach is found, when first asked, by
/// resuming the backward scan where the warm-up stopped.
///
/// ```ignore
/// let mut c = MergeCursor::new(&timeline, strict);
/// c.start(&timeline, first_left_time);
/// c.advance(&timeline, t);
/// let latest: Option<(u32, i64)> = c.latest(&timeline, group);
/// ```
pub(crate) struct MergeCursor {
    pos: usize,
    /// Per key group, its latest row so far, with the row's time: a
    /// lookup reads this one small array, not the timeline's rows and
    /// times at a position that may be far back (a cache miss each).
    last: Vec<Latest>,
    strict: bool,
    /// Left time of the last advance (`None` before the start).
    time: Option<i64>,
    /// The `seq` entries before this one were not read back by the
    /// warm-up: the latest rows of the groups marked [`UNKNOWN`] are there.
    back: usize,
}

impl MergeCursor {
    /// A cursor that has not started; `strict` for LT JOIN (`r.ts < l.ts`).
    pub(crate) fn new(timeline: &Timeline, strict: bool) -> Self {
        Self {
            pos: 0,
            last: vec![Latest::NONE; timeline.groups],
            strict,
            time: None,
            back: 0,
        }
    }

    /// Whether a run of left rows starting at time `t` can continue this merge.
    pub(crate) fn accepts(&self, t: i64) -> bool {
        self.time.is_none_or(|prev| t >= prev)
    }

    /// True once [`Self::start`] ran.
    pub(crate) fn started(&self) -> bool {
        self.time.is_some()
    }

    /// Positions the cursor for a first left time `t`: binary search, then a
    /// bounded warm-up backwards that fills each group's latest row.
    pub(crate) fn start(&mut self, tl: &Timeline, t: i64) {
        let strict = self.strict;
        self.pos = tl
            .seq_ts
            .partition_point(|&x| if strict { x < t } else { x <= t });
        self.time = Some(t);
        self.last.fill(Latest::NONE);
        self.back = 0;
        if self.pos == 0 {
            return;
        }
        let budget = WARM_UP_PER_GROUP * tl.groups + 1024;
        // Only groups with a row before the start can be met: the scan
        // stops once it has met them all.
        let pos = self.pos;
        let mut missing = tl.first_seq.iter().filter(|&&f| (f as usize) < pos).count();
        let mut k = self.pos;
        let stop = self.pos.saturating_sub(budget);
        while k > stop && missing > 0 {
            k -= 1;
            let g = tl.seq_key[k] as usize;
            if self.last[g].row == NONE {
                self.last[g] = Latest::at(tl, k);
                missing -= 1;
            }
        }
        if missing > 0 && k > 0 {
            // Groups not met: empty before the start when their first row
            // is not before it, else their latest row is before `k`.
            self.back = k;
            for (l, &first) in self.last.iter_mut().zip(&tl.first_seq) {
                if l.row == NONE && (first as usize) < pos {
                    *l = Latest::UNKNOWN;
                }
            }
        }
    }

    /// Moves the merge to left time `t` (not before the previous one).
    #[inline]
    pub(crate) fn advance(&mut self, tl: &Timeline, t: i64) {
        debug_assert!(self.accepts(t));
        // The strictness is resolved once per call, and the position kept
        // in a local: this loop runs once per right row.
        self.pos = if self.strict {
            pass(tl, &mut self.last, self.pos, |rt| rt < t)
        } else {
            pass(tl, &mut self.last, self.pos, |rt| rt <= t)
        };
        self.time = Some(t);
    }

    /// The latest right row of group `g` at the current time, with its
    /// time; `None` when there is none.
    #[inline]
    pub(crate) fn latest(&mut self, tl: &Timeline, g: u32) -> Option<(u32, i64)> {
        match self.last[g as usize] {
            Latest { row: NONE, .. } => None,
            Latest { row: UNKNOWN, .. } => self.read_back(tl, g),
            Latest { row, ts } => Some((row, ts)),
        }
    }

    /// Resumes the warm-up's backward scan until it meets group `g`
    /// (marked [`UNKNOWN`]: it has a row before [`Self::back`]), recording
    /// every unknown group it passes. All of a task's calls together read
    /// each `seq` entry before the start at most once, a sequential read
    /// of the key column: far less than building the per-key index, which
    /// a task that starts late would otherwise need for one rare key.
    #[cold]
    fn read_back(&mut self, tl: &Timeline, g: u32) -> Option<(u32, i64)> {
        while self.back > 0 {
            self.back -= 1;
            let k = self.back;
            let h = tl.seq_key[k];
            if self.last[h as usize].row == UNKNOWN {
                self.last[h as usize] = Latest::at(tl, k);
                if h == g {
                    break;
                }
            }
        }
        let Latest { row, ts } = self.last[g as usize];
        debug_assert!(row != UNKNOWN, "an unknown group has a row before `back`");
        (row < UNKNOWN).then_some((row, ts))
    }
}

/// Records each `seq` entry of `tl` from `pos` on whose time `passes` as
/// its group's latest row; returns the first position that does not pass.
#[inline]
fn pass(
    tl: &Timeline,
    last: &mut [Latest],
    pos: usize,
    passes: impl Fn(i64) -> bool,
) -> usize {
    match tl.seq_rows() {
        None => pass_rows(tl, last, pos, passes, |k| k as u32),
        Some(rows) => {
            let rows = &rows[..tl.seq_ts.len()];
            pass_rows(tl, last, pos, passes, |k| rows[k])
        }
    }
}

/// [`pass`] with `row(k)` the row of entry `k` (one loop per way of
/// finding it, so the common identity reads no vector of rows).
#[inline]
fn pass_rows(
    tl: &Timeline,
    last: &mut [Latest],
    mut pos: usize,
    passes: impl Fn(i64) -> bool,
    row: impl Fn(usize) -> u32,
) -> usize {
    let (ts, keys) = (&tl.seq_ts[..], &tl.seq_key[..]);
    // Equal lengths (one entry per timed row) let the bounds checks go.
    let n = ts.len().min(keys.len());
    while pos < n && passes(ts[pos]) {
        last[keys[pos] as usize] = Latest {
            row: row(pos),
            ts: ts[pos],
        };
        pos += 1;
    }
    pos
}
