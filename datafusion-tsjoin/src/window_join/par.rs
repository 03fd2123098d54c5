//! Small helpers that split the right-index build over scoped threads.
//!
//! The build runs once per query on a blocking thread while the probe
//! waits for it, so its passes over every right row (placing rows,
//! gathering argument values, block tables) would otherwise be the serial
//! part that bounds the whole join's scaling. Work is split into at most
//! `threads` ranges; below [`MIN_PARALLEL`] items it stays on the calling
//! thread, where spawning would cost more than it saves.

use std::ops::Range;

/// Fewest items worth a second thread.
pub(crate) const MIN_PARALLEL: usize = 1 << 15;

/// Boundaries of up to `threads` ranges that split `0..n` evenly, every
/// inner boundary a multiple of `align`: `[0, …, n]` (one range when `n`
/// is small).
pub(crate) fn cuts(n: usize, threads: usize, align: usize) -> Vec<usize> {
    let k = if n < MIN_PARALLEL {
        1
    } else {
        threads.clamp(1, n / (MIN_PARALLEL / 2))
    };
    let mut out = vec![0];
    for i in 1..k {
        let c = (n * i / k) / align * align;
        if c > *out.last().expect("non-empty") {
            out.push(c);
        }
    }
    if n > 0 {
        out.push(n);
    }
    out
}

/// `f(i, range)` for each range between consecutive `cuts`, in parallel;
/// results in range order.
pub(crate) fn par_ranges<R: Send>(
    cuts: &[usize],
    f: impl Fn(usize, Range<usize>) -> R + Sync,
) -> Vec<R> {
    par_each(cuts.windows(2).enumerate().collect(), |(i, w)| {
        f(i, w[0]..w[1])
    })
}

/// `f(item)` for each work item, one thread each (on the calling thread
/// when there is one item); results in order.
pub(crate) fn par_each<W: Send, R: Send>(
    work: Vec<W>,
    f: impl Fn(W) -> R + Sync,
) -> Vec<R> {
    if work.len() <= 1 {
        return work.into_iter().map(f).collect();
    }
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = work
            .into_iter()
            .map(|w| scope.spawn(move || f(w)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("build thread panicked"))
            .collect()
    })
}

/// Splits `out` into the chunks between `cuts` (over its indexes).
pub(crate) fn split_at_cuts<'a, T>(out: &'a mut [T], cuts: &[usize]) -> Vec<&'a mut [T]> {
    let mut rest = out;
    cuts.windows(2)
        .map(|w| {
            let (chunk, tail) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
            rest = tail;
            chunk
        })
        .collect()
}

/// Splits `out` (`cuts` over its indexes) and runs `f(i, range, chunk)` on
/// each range's chunk in parallel.
pub(crate) fn par_fill<T: Send>(
    out: &mut [T],
    cuts: &[usize],
    f: impl Fn(usize, Range<usize>, &mut [T]) + Sync,
) {
    debug_assert_eq!(cuts.last().copied().unwrap_or(0), out.len());
    let work: Vec<_> = split_at_cuts(out, cuts)
        .into_iter()
        .zip(cuts.windows(2))
        .enumerate()
        .collect();
    par_each(work, |(i, (chunk, w))| f(i, w[0]..w[1], chunk));
}

/// `f` over `items` on up to `threads` scoped threads, results in order.
pub(crate) fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    if threads <= 1 || items.len() <= 1 {
        return items.iter().map(f).collect();
    }
    let per = items.len().div_ceil(threads).max(1);
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(per)
            .map(|chunk| scope.spawn(move || chunk.iter().map(f).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("build thread panicked"))
            .collect()
    })
}

/// Runs `f` on `threads` runs of whole groups in parallel, each with its
/// slices of `a` and `b` and its offsets rebased to 0.
pub(crate) fn for_group_ranges<A: Send, B: Send>(
    a: &mut [A],
    b: &mut [B],
    offsets: &[u32],
    threads: usize,
    f: impl Fn(&mut [A], &mut [B], &[u32]) + Sync,
) {
    let total = a.len();
    let mut cuts = vec![0usize];
    for k in 1..threads {
        let target = (total * k / threads) as u32;
        let g = offsets
            .partition_point(|&o| o < target)
            .min(offsets.len() - 1);
        if g > *cuts.last().expect("non-empty") {
            cuts.push(g);
        }
    }
    if *cuts.last().expect("non-empty") < offsets.len() - 1 {
        cuts.push(offsets.len() - 1);
    }
    let f = &f;
    std::thread::scope(|scope| {
        let (mut a, mut b) = (a, b);
        for w in cuts.windows(2) {
            let (g0, g1) = (w[0], w[1]);
            let len = (offsets[g1] - offsets[g0]) as usize;
            let (x, rest_a) = std::mem::take(&mut a).split_at_mut(len);
            let (y, rest_b) = std::mem::take(&mut b).split_at_mut(len);
            (a, b) = (rest_a, rest_b);
            let base = offsets[g0];
            let local: Vec<u32> = offsets[g0..=g1].iter().map(|&x| x - base).collect();
            scope.spawn(move || f(x, y, &local));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_cover_the_range_aligned() {
        assert_eq!(cuts(0, 8, 1), vec![0]);
        assert_eq!(cuts(100, 8, 1), vec![0, 100]);
        for (n, threads, align) in [
            (1 << 20, 16, 64),
            (1 << 20, 3, 32),
            (MIN_PARALLEL * 3 + 5, 16, 1),
        ] {
            let c = cuts(n, threads, align);
            assert_eq!((c[0], *c.last().unwrap()), (0, n));
            assert!(c.len() - 1 <= threads && c.len() > 2);
            assert!(c.windows(2).all(|w| w[0] < w[1]));
            assert!(c[1..c.len() - 1].iter().all(|&x| x % align == 0));
        }
    }

    #[test]
    fn fill_and_ranges_see_the_same_chunks() {
        let n = MIN_PARALLEL * 4 + 7;
        let c = cuts(n, 4, 8);
        let mut out = vec![0usize; n];
        par_fill(&mut out, &c, |i, r, chunk| {
            assert_eq!(chunk.len(), r.len());
            for (x, p) in chunk.iter_mut().zip(r) {
                *x = p * 10 + i;
            }
        });
        let sums = par_ranges(&c, |i, r| {
            r.map(|p| out[p] / 10 + (out[p] % 10 == i) as usize)
                .sum::<usize>()
        });
        assert_eq!(sums.iter().sum::<usize>(), (0..n).sum::<usize>() + n);
    }
}
