//! [`Fingers`]: ASOF lookups at many offsets of one left time, by finger
//! search in the [`Timeline`]'s per-key index.
//!
//! A HORIZON JOIN asks, for every left row and each of `k` increasing
//! offsets, the latest right row of the row's key at `left time + offset`.
//! One merge cursor per offset would walk the whole right side `k` times.
//! Instead each (key group, offset) keeps a *finger*: the position its last
//! lookup reached in that group's time-ordered slice. The next lookup
//! searches outwards from there (`finger_step`: the row before the finger
//! and the next few rows in one well-predicted branch, compiled for AVX2
//! where the CPU has it; else the WINDOW JOIN's `search_near`, galloping
//! forward, or backward when a left time went back), so a lookup costs O(log d) for
//! a match `d` rows away, and on time-ordered input the fingers move only a
//! few rows per lookup. Any left order is answered correctly.
//!
//! [`Fingers::lookup_offsets`] answers all offsets of one left row (rows,
//! for the pair-emitting join). The fold looks its rows up in a
//! [`super::TimeDirectory`] instead, which shares this module's step
//! ([`count_up`], [`partition_after`]).

use super::timeline::Timeline;
use crate::kernels::KernelSet;
use crate::window_join::search_near;

/// What [`Fingers::lookup_offsets`] writes where no row qualifies.
pub(crate) const NO_ROW: u32 = u32::MAX;

/// Per (key group, offset) fingers into a [`Timeline`]'s per-key index
/// (which must be built): backward, non-strict lookups (ASOF: the latest
/// row at or before the time).
///
/// ```ignore
/// built.ensure_index()?;
/// let mut f = Fingers::new(&timeline, offsets.len(), KernelSet::detect());
/// let times: Vec<i64> = offsets.iter().map(|o| t + o).collect();
/// f.lookup_offsets(timeline.group_slice(g), g, &times, &mut out);
/// ```
pub(crate) struct Fingers {
    /// `pos[g * offsets + o]`: the partition point of group `g`'s last
    /// lookup at offset `o`, relative to the group's slice.
    pos: Vec<u32>,
    offsets: usize,
    /// Whether the lookups run compiled for AVX2.
    kernels: KernelSet,
}

impl Fingers {
    /// Fingers at the start of every group, for `offsets` offsets; the
    /// lookups run on `kernels` (AVX2 or portable).
    pub(crate) fn new(tl: &Timeline, offsets: usize, kernels: KernelSet) -> Self {
        Self {
            pos: vec![0; tl.groups * offsets],
            offsets,
            kernels,
        }
    }

    /// Bytes held for `groups` groups and `offsets` offsets.
    pub(crate) fn bytes(groups: usize, offsets: usize) -> usize {
        groups * offsets * 4
    }

    /// For each offset `o` (in order) of one left row of group `g`, the
    /// latest right row of the group with time `<= times[o]` ([`NO_ROW`]
    /// when none), looked up from that offset's finger (which moves to it).
    /// `group` is the group's slice ([`Timeline::group_slice`]); offset
    /// `o`'s row goes to `out[o]`.
    #[inline]
    pub(crate) fn lookup_offsets(
        &mut self,
        group: (&[u32], &[i64]),
        g: u32,
        times: &[i64],
        out: &mut [u32],
    ) {
        let at = g as usize * self.offsets;
        let fingers = &mut self.pos[at..at + self.offsets];
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        if self.kernels.is_avx2() {
            // SAFETY: `is_avx2` is true only for a `KernelSet` that
            // `detect` made after detecting AVX2 and POPCNT (the type
            // cannot be built otherwise), so the CPU has both.
            unsafe { lookup_avx2(group, fingers, times, out) };
            return;
        }
        lookup(group, fingers, times, out);
    }
}

/// [`Fingers::lookup_offsets`] for one group's fingers, one per time.
#[inline(always)]
fn lookup(
    (rows, ts): (&[u32], &[i64]),
    fingers: &mut [u32],
    times: &[i64],
    out: &mut [u32],
) {
    for ((finger, slot), &t) in fingers.iter_mut().zip(out.iter_mut()).zip(times) {
        let p = finger_step(ts, *finger as usize, t);
        *finger = p as u32;
        *slot = if p > 0 { rows[p - 1] } else { NO_ROW };
    }
}

/// [`lookup`] compiled for AVX2: [`finger_step`]'s comparisons of the
/// next [`NEAR`] times become two vector compares (measured: 61M lookups
/// 0.75 s portable, 0.47 s AVX2, one thread).
///
/// # Safety
/// The CPU must support AVX2 and POPCNT.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn lookup_avx2(
    group: (&[u32], &[i64]),
    fingers: &mut [u32],
    times: &[i64],
    out: &mut [u32],
) {
    lookup(group, fingers, times, out)
}

/// Rows [`finger_step`] looks at past the finger in one step without a
/// branch each (two AVX2 compares).
const NEAR: usize = 8;

/// Steps of [`NEAR`] rows [`finger_step`] takes before it gallops: with
/// right rows a few times denser than left ones, one lookup in ten moves
/// the finger past the first [`NEAR`] rows, and one in a thousand past
/// four times that.
const NEAR_STEPS: usize = 4;

/// `ts.partition_point(|x| x <= t)` (ascending `ts`) searched from
/// `finger`. On time-ordered left input the answer is almost always the
/// finger or a few rows past it: the row before the finger and the next
/// [`NEAR`] rows decide that with one well-predicted branch (the
/// comparisons are counted as a mask, not branched on, since the hits are
/// a prefix), repeated up to [`NEAR_STEPS`] times; anything else (a jump
/// further forward, a step back) takes [`search_near`]. Always inlined, so
/// that the AVX2 builds' copies compile for AVX2.
#[inline(always)]
fn finger_step(ts: &[i64], finger: usize, t: i64) -> usize {
    let f = finger.min(ts.len());
    if f > 0 && ts[f - 1] > t {
        return search_near(ts, f, |x| x <= t);
    }
    partition_after(ts, f, || ts.len(), t, count_up)
}

/// `ts.partition_point(|x| x <= t)` (ascending `ts`) for an answer known
/// to lie in `p..=end()`: up to [`NEAR_STEPS`] steps of `step` (one of
/// [`NEAR`] rows each, see [`count_up`]), then a gallop from where they
/// stopped, within `..end()` (called only then). Always inlined, so that
/// a step compiled for AVX2 stays in its caller's loop.
#[inline(always)]
pub(super) fn partition_after(
    ts: &[i64],
    p: usize,
    end: impl FnOnce() -> usize,
    t: i64,
    step: impl Fn(&[i64], usize, i64) -> Result<usize, usize>,
) -> usize {
    let mut f = p;
    for _ in 0..NEAR_STEPS {
        match step(ts, f, t) {
            Ok(done) => return done,
            Err(next) => f = next,
        }
    }
    search_near(&ts[..end().max(f)], f, |x| x <= t)
}

/// One step of the count of rows `<= t` from `f` (every row before `f` is
/// `<= t`): `Ok(answer)` when the next [`NEAR`] rows (or the rest of `ts`)
/// hold it, `Err(f + NEAR)` when all of them are `<= t`. The comparisons
/// are counted as a mask, not branched on, since the hits are a prefix.
#[inline(always)]
pub(super) fn count_up(ts: &[i64], f: usize, t: i64) -> Result<usize, usize> {
    let Some(near) = ts.get(f..f + NEAR) else {
        // The last rows: every hit counts, up to the end.
        return Ok(f + ts[f..].iter().map(|&x| usize::from(x <= t)).sum::<usize>());
    };
    let mask = near
        .iter()
        .enumerate()
        .fold(0u32, |m, (i, &x)| m | (u32::from(x <= t) << i));
    let hits = mask.count_ones() as usize;
    if hits < NEAR {
        Ok(f + hits)
    } else {
        Err(f + NEAR)
    }
}

/// [`count_up`] with intrinsics: the next [`NEAR`] times compared with two
/// vector compares, their masks counted with one POPCNT (what LLVM makes
/// of the portable count is three times the instructions). Same answers.
///
/// # Safety
/// The CPU must support AVX2 and POPCNT.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "avx2,popcnt")]
#[inline]
pub(super) unsafe fn count_up_avx2(ts: &[i64], f: usize, t: i64) -> Result<usize, usize> {
    use std::arch::x86_64::{
        _mm256_castsi256_pd, _mm256_cmpgt_epi64, _mm256_loadu_si256, _mm256_movemask_pd,
        _mm256_set1_epi64x,
    };
    const { assert!(NEAR == 8) };
    let Some(near) = ts.get(f..f + NEAR) else {
        return Ok(f + ts[f..].iter().map(|&x| usize::from(x <= t)).sum::<usize>());
    };
    let tv = _mm256_set1_epi64x(t);
    // SAFETY: `near` holds `NEAR` (8) values; the unaligned loads read its
    // first four and its last four.
    let (lo, hi) = unsafe {
        (
            _mm256_loadu_si256(near.as_ptr().cast()),
            _mm256_loadu_si256(near[4..].as_ptr().cast()),
        )
    };
    let above = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(lo, tv)))
        | (_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(hi, tv))) << 4);
    let hits = (!above & 0xff).count_ones() as usize;
    if hits < NEAR {
        Ok(f + hits)
    } else {
        Err(f + NEAR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// [`finger_step`] finds the partition point from every finger, near
    /// and far, ahead and behind.
    #[test]
    fn finger_step_equals_the_partition_point_from_every_finger() {
        let mut rng = StdRng::seed_from_u64(11);
        for _ in 0..300 {
            let n = rng.random_range(0..40);
            let mut ts: Vec<i64> = (0..n).map(|_| rng.random_range(-5..30)).collect();
            ts.sort_unstable();
            for t in -7..33 {
                let want = ts.partition_point(|&x| x <= t);
                for finger in 0..=n + 2 {
                    assert_eq!(
                        finger_step(&ts, finger, t),
                        want,
                        "ts={ts:?} t={t} finger={finger}"
                    );
                }
            }
        }
    }

    /// The AVX2 build of the lookups moves the fingers and finds the rows
    /// exactly as the portable one, on random groups, times and fingers.
    #[test]
    fn avx2_lookups_equal_portable_ones() {
        let mut rng = StdRng::seed_from_u64(5);
        for _ in 0..200 {
            let n = rng.random_range(0..60);
            let mut ts: Vec<i64> = (0..n).map(|_| rng.random_range(0..100)).collect();
            ts.sort_unstable();
            let rows: Vec<u32> = (0..n as u32).map(|r| r * 3 + 1).collect();
            let k = rng.random_range(1..8);
            let start = rng.random_range(-10..110);
            let mut times: Vec<i64> = (0..k as i64)
                .map(|o| start + o * rng.random_range(0..9))
                .collect();
            times.sort_unstable();
            let fingers: Vec<u32> =
                (0..k).map(|_| rng.random_range(0..=n as u32 + 2)).collect();
            let (mut f1, mut out1) = (fingers.clone(), vec![0; k]);
            lookup((&rows, &ts), &mut f1, &times, &mut out1);
            for (o, &t) in out1.iter().zip(&times) {
                let p = ts.partition_point(|&x| x <= t);
                assert_eq!(*o, if p > 0 { rows[p - 1] } else { NO_ROW });
            }
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            if KernelSet::detect().is_avx2() {
                let (mut f2, mut out2) = (fingers.clone(), vec![0; k]);
                // SAFETY: `is_avx2` proves the CPU has AVX2 and POPCNT.
                unsafe { lookup_avx2((&rows, &ts), &mut f2, &times, &mut out2) };
                assert_eq!((f1, out1), (f2, out2));
            }
        }
    }

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
