//! Range min/max in O(1) per query: a sparse table over fixed blocks.
//!
//! Neighbouring WINDOW JOIN windows of one key overlap almost entirely, so
//! scanning each window again repeats most of the work. This table is built
//! once per right column: `levels[k][b]` holds `(min, max)` over the `2^k`
//! blocks of [`BLOCK`] positions starting at block `b`. A window is then its
//! whole blocks (two overlapping table entries) plus at most two partial
//! blocks at its ends, which the caller reduces (with the slice kernels, or
//! a masked loop where NULLs or NaNs sit). Cost per window: two lookups and
//! at most `2 * (BLOCK - 1)` scanned values, whatever the window's length.
//!
//! Invariant: the `partial` reducer given at build and query time must skip
//! the same positions (NULL, NaN), so that whole-block entries and partial
//! scans mean the same thing; the empty reduction is [`Extreme::IDENTITY`].
//!
//! ```
//! use datafusion_tsjoin::bench::block_table::{BlockMinMax, BLOCK};
//! let v: Vec<i64> = (0..1000).map(|i| (i * 7919) % 1000).collect();
//! let scan = |s: usize, e: usize| {
//!     [*v[s..e].iter().min().unwrap_or(&i64::MAX), *v[s..e].iter().max().unwrap_or(&i64::MIN)]
//! };
//! let table = BlockMinMax::new(v.len(), v.len(), scan);
//! assert_eq!(table.query(3, 900, scan), scan(3, 900));
//! assert_eq!(table.query(5, 5 + BLOCK / 2, scan), scan(5, 5 + BLOCK / 2));
//! ```

/// Positions per block.
pub const BLOCK: usize = 32;

/// A value type the table can hold.
pub trait Extreme: Copy + PartialOrd + Send + Sync {
    /// `[min, max]` of nothing: the largest and the smallest value.
    const IDENTITY: [Self; 2];
}

impl Extreme for f64 {
    const IDENTITY: [f64; 2] = [f64::INFINITY, f64::NEG_INFINITY];
}

impl Extreme for i64 {
    const IDENTITY: [i64; 2] = [i64::MAX, i64::MIN];
}

/// `[min, max]` of two `[min, max]` pairs (NaN-free inputs).
#[inline(always)]
pub fn combine<T: Extreme>(a: [T; 2], b: [T; 2]) -> [T; 2] {
    [
        if b[0] < a[0] { b[0] } else { a[0] },
        if b[1] > a[1] { b[1] } else { a[1] },
    ]
}

/// Sparse table of `[min, max]` over blocks of [`BLOCK`] positions.
#[derive(Debug, Clone, Default)]
pub struct BlockMinMax<T> {
    /// `levels[k][b]`: `[min, max]` over blocks `b .. b + 2^k`.
    levels: Vec<Vec<[T; 2]>>,
}

impl<T: Extreme> BlockMinMax<T> {
    /// Builds the table over `n` positions. `partial(s, e)` reduces
    /// positions `s..e`; `longest` is the longest range that will be
    /// queried (levels beyond it are not built).
    pub fn new(
        n: usize,
        longest: usize,
        partial: impl Fn(usize, usize) -> [T; 2],
    ) -> Self {
        Self::from_blocks(
            (0..n / BLOCK)
                .map(|b| partial(b * BLOCK, (b + 1) * BLOCK))
                .collect(),
            longest,
        )
    }

    /// Builds the table from its first level: `blocks[b]` is `partial` over
    /// block `b` (positions `b * BLOCK..(b + 1) * BLOCK`), every whole block
    /// of the positions. Lets a caller reduce the blocks in parallel.
    pub fn from_blocks(blocks: Vec<[T; 2]>, longest: usize) -> Self {
        let n_blocks = blocks.len();
        let mut levels = vec![blocks];
        let wanted = longest / BLOCK + 1;
        while 1usize << levels.len() <= wanted.min(n_blocks) {
            let half = 1usize << (levels.len() - 1);
            let prev = levels.last().expect("level 0");
            let next: Vec<[T; 2]> = (0..prev.len() - half)
                .map(|b| combine(prev[b], prev[b + half]))
                .collect();
            levels.push(next);
        }
        Self { levels }
    }

    /// `[min, max]` over positions `s..e`, with `partial` for the positions
    /// outside whole blocks (see the module's invariant).
    #[inline]
    pub fn query(
        &self,
        s: usize,
        e: usize,
        partial: impl Fn(usize, usize) -> [T; 2],
    ) -> [T; 2] {
        let (b0, b1) = (s.div_ceil(BLOCK), e / BLOCK);
        if b0 >= b1 {
            return partial(s, e);
        }
        let mut acc = self.blocks(b0, b1);
        if s < b0 * BLOCK {
            acc = combine(acc, partial(s, b0 * BLOCK));
        }
        if b1 * BLOCK < e {
            acc = combine(acc, partial(b1 * BLOCK, e));
        }
        acc
    }

    /// `[min, max]` over whole blocks `b0..b1` (`b0 < b1`): two overlapping
    /// entries of one level; spans beyond the top level take a few more.
    #[inline]
    fn blocks(&self, mut b0: usize, b1: usize) -> [T; 2] {
        let top = self.levels.len() - 1;
        let mut acc = T::IDENTITY;
        while b1 - b0 > 2 << top {
            acc = combine(acc, self.levels[top][b0]);
            b0 += 1 << top;
        }
        let k = ((b1 - b0).ilog2() as usize).min(top);
        combine(
            acc,
            combine(self.levels[k][b0], self.levels[k][b1 - (1 << k)]),
        )
    }

    /// Bytes held.
    pub fn memory_size(&self) -> usize {
        self.levels
            .iter()
            .map(|l| l.capacity() * std::mem::size_of::<[T; 2]>())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_scan_for_every_range_shape() {
        let mut seed = 17u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 20
        };
        for n in [0usize, 1, 31, 32, 33, 64, 100, 1000, 5000] {
            let v: Vec<f64> = (0..n).map(|_| (next() % 2001) as f64 - 1000.0).collect();
            let scan = |s: usize, e: usize| {
                v[s..e]
                    .iter()
                    .fold(f64::IDENTITY, |acc, &x| combine(acc, [x, x]))
            };
            // Capped tables (short `longest`) must still answer long ranges.
            for longest in [n, 40, 0] {
                let table = BlockMinMax::new(n, longest, scan);
                for _ in 0..300 {
                    let (a, b) =
                        ((next() as usize) % (n + 1), (next() as usize) % (n + 1));
                    let (s, e) = (a.min(b), a.max(b));
                    assert_eq!(
                        table.query(s, e, scan),
                        scan(s, e),
                        "n={n} longest={longest} s={s} e={e}"
                    );
                }
            }
        }
    }

    #[test]
    fn empty_ranges_and_skipped_positions_give_the_identity() {
        let v = [f64::NAN; 100];
        let skip_nan = |s: usize, e: usize| {
            v[s..e]
                .iter()
                .filter(|x| !x.is_nan())
                .fold(f64::IDENTITY, |acc, &x| combine(acc, [x, x]))
        };
        let table = BlockMinMax::new(v.len(), v.len(), skip_nan);
        assert_eq!(table.query(0, 100, skip_nan), f64::IDENTITY);
        assert_eq!(table.query(7, 7, skip_nan), f64::IDENTITY);
    }
}
