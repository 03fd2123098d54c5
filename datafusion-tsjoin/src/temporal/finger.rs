//! [`Fingers`]: ASOF lookups at many offsets of one left time, by finger
//! search in the [`Timeline`]'s per-key index.
//!
//! A HORIZON JOIN asks, for every left row and each of `k` increasing
//! offsets, the latest right row of the row's key at `left time + offset`.
//! One merge cursor per offset would walk the whole right side `k` times.
//! Instead each (key group, offset) keeps a *finger*: the position its last
//! lookup reached in that group's time-ordered slice. The next lookup
//! searches outwards from there (the WINDOW JOIN's `search_near`: a
//! branch-light look at the next few rows, then galloping forward, or
//! backward when a left time went back), so a lookup costs O(log d) for
//! a match `d` rows away, and on time-ordered input the fingers move only a
//! few rows per lookup. Any left order is answered correctly.

use super::timeline::Timeline;
use crate::window_join::search_near;

/// What [`Fingers::lookup_offsets`] writes where no row qualifies.
pub(crate) const NO_ROW: u32 = u32::MAX;

/// Per (key group, offset) fingers into a [`Timeline`]'s per-key index
/// (which must be built): backward, non-strict lookups (ASOF: the latest
/// row at or before the time).
///
/// ```ignore
/// built.ensure_index()?;
/// let mut f = Fingers::new(&timeline, offsets.len());
/// f.lookup_offsets(timeline.group_slice(g), g, offsets.iter().map(|o| t + o), &mut out);
/// ```
pub(crate) struct Fingers {
    /// `pos[g * offsets + o]`: the partition point of group `g`'s last
    /// lookup at offset `o`, relative to the group's slice.
    pos: Vec<u32>,
    offsets: usize,
}

impl Fingers {
    /// Fingers at the start of every group, for `offsets` offsets.
    pub(crate) fn new(tl: &Timeline, offsets: usize) -> Self {
        Self {
            pos: vec![0; tl.groups * offsets],
            offsets,
        }
    }

    /// Bytes held for `groups` groups and `offsets` offsets.
    pub(crate) fn bytes(groups: usize, offsets: usize) -> usize {
        groups * offsets * 4
    }

    /// For each offset `o` (in order) of one left row of group `g`, the
    /// latest right row of the group with time `<= times[o]` ([`NO_ROW`]
    /// when none), looked up from that offset's finger (which moves to it).
    /// `group` is the group's slice ([`Timeline::group_slice`]); `out` has
    /// one slot per offset.
    #[inline]
    pub(crate) fn lookup_offsets(
        &mut self,
        (rows, ts): (&[u32], &[i64]),
        g: u32,
        times: impl Iterator<Item = i64>,
        out: &mut [u32],
    ) {
        let at = g as usize * self.offsets;
        let fingers = &mut self.pos[at..at + self.offsets];
        for ((finger, slot), t) in fingers.iter_mut().zip(out).zip(times) {
            let p = search_near(ts, *finger as usize, |x| x <= t);
            *finger = p as u32;
            *slot = if p > 0 { rows[p - 1] } else { NO_ROW };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// The finger search ([`search_near`] from the finger) finds the
    /// partition point from every start, strict and not.
    #[test]
    fn finger_search_equals_the_partition_point_from_every_start() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..300 {
            let n = rng.random_range(0..40);
            let mut ts: Vec<i64> = (0..n).map(|_| rng.random_range(-5..30)).collect();
            ts.sort_unstable();
            for t in -7..33 {
                for strict in [false, true] {
                    let want =
                        ts.partition_point(|&x| if strict { x < t } else { x <= t });
                    for from in 0..=n + 2 {
                        let before = |x: i64| if strict { x < t } else { x <= t };
                        assert_eq!(
                            search_near(&ts, from, before),
                            want,
                            "ts={ts:?} t={t} strict={strict} from={from}"
                        );
                    }
                }
            }
        }
    }
}
