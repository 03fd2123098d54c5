//! Searches over ascending timestamps: a key group's timestamps, where a
//! window's ends are found. Shared by the general and the fast probe and by
//! the build (which bounds the longest window).

use super::par::par_each;

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
    par_each(runs, |o| longest_window_serial(ts, o, width))
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
