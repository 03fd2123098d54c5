//! [`TimeDirectory`]: ASOF lookups that start from a time bucket, so that
//! no lookup waits on another.
//!
//! The folding HORIZON JOIN looks up every left row at dozens of offsets.
//! A finger per (key group, offset) ([`super::Fingers`]) makes each lookup
//! start where the previous one of its offset ended: a chain of dependent
//! loads, counts and stores that the core cannot overlap, and a gallop
//! whenever a finger falls behind. The directory splits each group's time
//! range into power-of-two buckets sized to hold about
//! [`ROWS_PER_BUCKET`] rows and records where each bucket starts in the
//! group's slice of the per-key index. A lookup at time `t` reads its
//! bucket's start and counts the few rows of the bucket at or before `t`
//! (one AVX2 step of eight comparisons where the CPU has it): two loads
//! whose addresses depend only on `t`, so consecutive lookups run side by
//! side. Measured on the WINDOW JOIN workload's skewed keys (61 offsets,
//! one thread, a replay of the fold's lookups): 0.19-0.25 s against the
//! fingers' 0.30 s.
//!
//! Invariant: for group `g` with first time `t0` and bucket width
//! `2^shift`, entry `b` of its directory is the number of the group's rows
//! with time `< t0 + b * 2^shift`, for `b` in `0..=buckets`, and entry
//! `buckets` is the group's row count (every time is below that bucket's
//! start).

use super::finger::{count_up, partition_after};
use super::timeline::Timeline;
use crate::kernels::KernelSet;

/// Rows a bucket is sized to hold on average: enough that the directory
/// stays small (2 bytes per right row), few enough that one step of eight
/// comparisons almost always finds the answer (measured: 1 and 2 equal, 4
/// about a quarter slower on the WINDOW JOIN workload).
const ROWS_PER_BUCKET: usize = 2;

/// One key group's buckets.
#[derive(Debug, Clone, Copy, Default)]
struct Buckets {
    /// The group's first time (its first bucket's start).
    t0: i64,
    /// Each bucket spans `2^shift` ticks.
    shift: u32,
    /// The group's first entry in [`TimeDirectory::starts`].
    at: usize,
    /// Buckets (the entries are one more).
    buckets: usize,
}

impl Buckets {
    /// The buckets of a group with times `ts` (ascending) whose entries
    /// start at `at`: the narrowest power-of-two width that makes at most
    /// one bucket per [`ROWS_PER_BUCKET`] rows (at least one bucket).
    fn of(ts: &[i64], at: usize) -> Self {
        let (Some(&t0), Some(&last)) = (ts.first(), ts.last()) else {
            return Self {
                at,
                ..Self::default()
            };
        };
        // `last >= t0`, so the difference is exact as unsigned.
        let span = (last as u64).wrapping_sub(t0 as u64);
        let want = (ts.len() / ROWS_PER_BUCKET).max(1) as u64;
        let mut shift = 0;
        while shift < 63 && (span >> shift) >= want {
            shift += 1;
        }
        Self {
            t0,
            shift,
            at,
            buckets: (span >> shift) as usize + 1,
        }
    }

    /// Appends the group's entries (`buckets + 1` of them) to `out`.
    fn fill(&self, ts: &[i64], out: &mut Vec<u32>) {
        let mut p = 0;
        for b in 0..self.buckets as u64 {
            // Bucket `b` starts `b << shift` ticks after `t0` (at most the
            // span, so no overflow); times are compared as distances from
            // `t0`, exact as unsigned since every time is `>= t0`.
            while p < ts.len()
                && (ts[p] as u64).wrapping_sub(self.t0 as u64) < b << self.shift
            {
                p += 1;
            }
            out.push(p as u32);
        }
        out.push(ts.len() as u32);
    }
}

/// Per key group of a [`Timeline`]'s per-key index, where each time bucket
/// starts (see the module docs).
///
/// ```ignore
/// let dir = TimeDirectory::new(&timeline, KernelSet::detect());
/// let p = dir.partition_point(g, timeline.group_span(g).1, t); // rows <= t
/// ```
#[derive(Debug)]
pub(crate) struct TimeDirectory {
    groups: Vec<Buckets>,
    /// All groups' entries, group after group.
    starts: Vec<u32>,
    kernels: KernelSet,
}

impl TimeDirectory {
    /// The directory of `tl`'s per-key index (built if needed: callers
    /// reserve it first); lookups run on `kernels`.
    pub(crate) fn new(tl: &Timeline, kernels: KernelSet) -> Self {
        let mut groups = Vec::with_capacity(tl.groups);
        let mut starts = vec![];
        for g in 0..tl.groups {
            let ts = tl.group_span(g as u32).1;
            let b = Buckets::of(ts, starts.len());
            b.fill(ts, &mut starts);
            groups.push(b);
        }
        Self {
            groups,
            starts,
            kernels,
        }
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.groups.capacity() * size_of::<Buckets>() + self.starts.capacity() * 4
    }

    /// The lookups of a run of left rows of group `g` (their times `lt`,
    /// in left ticks) at a block of offsets: for each row and offset, the
    /// *position in the per-key index* of the latest right row with time
    /// `<= (t + offset) * factor`, or `none`. Offset `i`'s positions go to
    /// `out[i * stride..]`, row after row. `group` is the group's start in
    /// the index and its times ([`Timeline::group_span`]).
    #[inline]
    pub(crate) fn lookup_run(
        &self,
        g: u32,
        group: (usize, &[i64]),
        how: &RunShape,
        lt: &[i64],
        out: &mut [u32],
    ) {
        let b = self.groups[g as usize];
        let starts = &self.starts[b.at..b.at + b.buckets + 1];
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        if self.kernels.is_avx2() {
            // SAFETY: `is_avx2` is true only for a `KernelSet` that
            // `detect` made after detecting AVX2 and POPCNT (the type
            // cannot be built otherwise), so the CPU has both.
            unsafe { run_avx2(&b, starts, group, how, lt, out) };
            return;
        }
        run(&b, starts, group, how, lt, out);
    }

    /// The number of group `g`'s rows (times `ts`, its slice of the
    /// per-key index) with time `<= t`.
    #[cfg(test)]
    fn partition_point(&self, g: u32, ts: &[i64], t: i64) -> usize {
        let b = self.groups[g as usize];
        let starts = &self.starts[b.at..b.at + b.buckets + 1];
        let (p, end) = bucket(&b, starts, t);
        partition_after(ts, p, || starts[end] as usize, t, count_up)
    }
}

/// How a run is looked up: at which offsets, scaled by `factor` (common
/// ticks per left tick), writing `none` where nothing matches, each
/// offset's positions `stride` apart.
pub(crate) struct RunShape<'a> {
    pub offsets: &'a [i64],
    pub factor: i64,
    /// No `(t + offset) * factor` overflows (the caller checked the
    /// times' range) and the caller passes the left times and the offsets
    /// already multiplied by `factor` (wrapping: the sums are then exact):
    /// a lookup's time is one addition, without saturating.
    pub plain: bool,
    pub none: u32,
    pub stride: usize,
}

impl RunShape<'_> {
    /// Offset `o`'s lookup time for left time `t`, in common ticks.
    #[inline(always)]
    fn time(&self, t: i64, o: i64) -> i64 {
        if self.plain {
            t.wrapping_add(o)
        } else {
            t.saturating_add(o).saturating_mul(self.factor)
        }
    }
}

/// Where the rows at or before `t` may end in a group: the first row of
/// `t`'s bucket (every row before it is earlier than `t`), and the entry
/// of `starts` that holds the end of the bucket (every row from it on is
/// later; read only by the rare lookup whose bucket holds more rows than
/// a few steps count, so that the others spend no load on it).
#[inline(always)]
fn bucket(b: &Buckets, starts: &[u32], t: i64) -> (usize, usize) {
    if t < b.t0 {
        // Entry 0 is 0: no row is earlier than the first.
        return (0, 0);
    }
    // `t >= t0`: the difference is exact as unsigned.
    let k =
        ((t as u64).wrapping_sub(b.t0 as u64) >> b.shift).min(b.buckets as u64) as usize;
    (starts[k] as usize, (k + 1).min(b.buckets))
}

/// [`TimeDirectory::lookup_run`], portable: offset after offset, the run's
/// rows in order (each offset's positions written in sequence, its
/// lookups reading the group's times front to back).
#[inline(always)]
fn run(
    b: &Buckets,
    starts: &[u32],
    (base, ts): (usize, &[i64]),
    how: &RunShape,
    lt: &[i64],
    out: &mut [u32],
) {
    for (k, &o) in how.offsets.iter().enumerate() {
        let out = &mut out[k * how.stride..][..lt.len()];
        for (slot, &t) in out.iter_mut().zip(lt) {
            let t = how.time(t, o);
            let (p, end) = bucket(b, starts, t);
            let p = partition_after(ts, p, || starts[end] as usize, t, count_up);
            *slot = if p > 0 {
                (base + p - 1) as u32
            } else {
                how.none
            };
        }
    }
}

/// [`run`] for AVX2, the bucket's rows counted eight at a time with two
/// vector compares and one POPCNT. The loop is [`run`]'s, written out
/// again: passing the AVX2 step into [`run`] as a closure measured 20%
/// slower end to end (the step was not inlined into the loop).
///
/// # Safety
/// The CPU must support AVX2 and POPCNT.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn run_avx2(
    b: &Buckets,
    starts: &[u32],
    (base, ts): (usize, &[i64]),
    how: &RunShape,
    lt: &[i64],
    out: &mut [u32],
) {
    for (k, &o) in how.offsets.iter().enumerate() {
        let out = &mut out[k * how.stride..][..lt.len()];
        for (slot, &t) in out.iter_mut().zip(lt) {
            let t = how.time(t, o);
            let (p, end) = bucket(b, starts, t);
            let end = || starts[end] as usize;
            // SAFETY: this function's caller guarantees AVX2 and POPCNT.
            let p = partition_after(ts, p, end, t, |ts, p, t| unsafe {
                super::finger::count_up_avx2(ts, p, t)
            });
            *slot = if p > 0 {
                (base + p - 1) as u32
            } else {
                how.none
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::temporal::timeline::tests::{batch, timeline, ts_key_schema};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Every lookup time, before, inside and after each group (extreme
    /// times included, clustered and spread groups, duplicates, groups of
    /// one row), gives the partition point; a run gives the positions of
    /// [`run`]'s contract, on both kernel sets.
    #[test]
    fn lookups_equal_the_partition_point() {
        let mut rng = StdRng::seed_from_u64(21);
        for case in 0..300 {
            let keys = rng.random_range(1..5);
            let n = rng.random_range(1..80);
            let spread: i64 = [3, 100, 1 << 40, i64::MAX / 2][case % 4];
            let rows: Vec<(i64, i64)> = (0..n)
                .map(|_| {
                    let t = if rng.random_bool(0.05) {
                        [i64::MIN, i64::MAX, 0][rng.random_range(0..3)]
                    } else {
                        rng.random_range(-spread..spread)
                    };
                    (t, rng.random_range(0..keys))
                })
                .collect();
            let ts: Vec<i64> = rows.iter().map(|r| r.0).collect();
            let keys: Vec<i64> = rows.iter().map(|r| r.1).collect();
            let tl = timeline(&[batch(&ts_key_schema(), &ts, &keys)]);
            tl.build_index();
            for kernels in [KernelSet::scalar(), KernelSet::detect()] {
                let dir = TimeDirectory::new(&tl, kernels);
                for g in 0..tl.groups as u32 {
                    let (base, ts) = tl.group_span(g);
                    let mut probes: Vec<i64> =
                        vec![i64::MIN, i64::MAX, i64::MIN + 1, i64::MAX - 1, 0];
                    for &x in ts {
                        probes.extend([x, x.saturating_sub(1), x.saturating_add(1)]);
                    }
                    for _ in 0..20 {
                        probes.push(rng.random_range(-spread..spread));
                    }
                    for &t in &probes {
                        let want = ts.partition_point(|&x| x <= t);
                        assert_eq!(dir.partition_point(g, ts, t), want, "{ts:?} t={t}");
                    }
                    let offsets = [0, 1, 7, spread / 3];
                    let lt: Vec<i64> = probes.iter().map(|&t| t / 2).collect();
                    // Plain arithmetic only where nothing overflows (the
                    // caller's promise).
                    let plain = rng.random_bool(0.5)
                        && lt.iter().all(|&t| {
                            offsets.iter().all(|&o| {
                                t.checked_add(o).and_then(|t| t.checked_mul(2)).is_some()
                            })
                        });
                    // Plain lookups take their inputs scaled.
                    let scale = |v: &[i64]| -> Vec<i64> {
                        v.iter()
                            .map(|&x| if plain { x.wrapping_mul(2) } else { x })
                            .collect()
                    };
                    let scaled = scale(&offsets);
                    let how = RunShape {
                        offsets: &scaled,
                        factor: 2,
                        plain,
                        none: 9999,
                        stride: lt.len(),
                    };
                    let mut out = vec![0; lt.len() * offsets.len()];
                    dir.lookup_run(g, (base, ts), &how, &scale(&lt), &mut out);
                    for (k, &o) in offsets.iter().enumerate() {
                        for (i, &t) in lt.iter().enumerate() {
                            let t = t.saturating_add(o).saturating_mul(2);
                            let p = ts.partition_point(|&x| x <= t);
                            let want = if p > 0 { (base + p - 1) as u32 } else { 9999 };
                            assert_eq!(out[k * lt.len() + i], want);
                        }
                    }
                }
            }
        }
    }
}
