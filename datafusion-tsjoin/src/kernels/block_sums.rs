//! Window sums in O(1) plus two short scans: compensated prefix sums over
//! fixed blocks.
//!
//! A window `[s, e)` is its whole blocks of [`BLOCK`] values, summed from a
//! [`CompensatedPrefix`] over the block sums (within one rounding of their
//! exact total), plus at most two partial blocks at its ends, summed by the
//! sum kernel. So the result is within `(2 * BLOCK + 2) * eps * Σ|window|`
//! of the exact sum — no worse than a direct sum of the window once the
//! window holds `2 * BLOCK` values — and costs two lookups and at most
//! `2 * (BLOCK - 1)` scanned values whatever the window's length. Building
//! it is one pass of the sum kernel, and it holds 16 bytes per block (a
//! prefix per value would cost a slow double-double pass and 16 bytes per
//! value). NaN and infinities follow IEEE as in a direct sum.
//!
//! ```
//! use datafusion_tsjoin::bench::KernelSet;
//! use datafusion_tsjoin::bench::block_sums::BlockSums;
//! let v: Vec<f64> = (0..1000).map(|i| i as f64).collect();
//! let k = KernelSet::detect();
//! let sums = BlockSums::new(&v, k);
//! assert_eq!(sums.sum(&v, 10, 990, k), (10..990).sum::<i64>() as f64);
//! ```

use super::KernelSet;
use super::prefix::CompensatedPrefix;

/// Values per block.
pub const BLOCK: usize = 64;

/// The sum of each whole block of `v` (a shorter tail is left out), as
/// [`BlockSums`] holds them.
///
/// ```
/// use datafusion_tsjoin::bench::KernelSet;
/// use datafusion_tsjoin::bench::block_sums::{BLOCK, block_sums};
/// let v = vec![1.0; 2 * BLOCK + 3];
/// assert_eq!(block_sums(&v, KernelSet::detect()), vec![BLOCK as f64; 2]);
/// ```
pub fn block_sums(v: &[f64], k: KernelSet) -> Vec<f64> {
    v.chunks_exact(BLOCK).map(|b| k.sum_f64(b)).collect()
}

/// Compensated prefix sums over the block sums of a slice.
#[derive(Debug, Clone, Default)]
pub struct BlockSums {
    blocks: CompensatedPrefix,
}

impl BlockSums {
    /// Builds the block sums of `v` with the kernels `k`.
    pub fn new(v: &[f64], k: KernelSet) -> Self {
        Self::from_block_sums(&block_sums(v, k))
    }

    /// Builds them from [`block_sums`] of the slice (which a caller may
    /// compute in parallel, over block-aligned pieces of the slice).
    pub fn from_block_sums(sums: &[f64]) -> Self {
        Self {
            blocks: CompensatedPrefix::new(sums),
        }
    }

    /// Sum of `v[s..e]`, where `v` is the slice the sums were built from.
    #[inline]
    pub fn sum(&self, v: &[f64], s: usize, e: usize, k: KernelSet) -> f64 {
        let (b0, b1) = (s.div_ceil(BLOCK), e / BLOCK);
        if b0 >= b1 {
            return k.sum_f64(&v[s..e]);
        }
        let head = k.sum_f64(&v[s..b0 * BLOCK]);
        let tail = k.sum_f64(&v[b1 * BLOCK..e]);
        self.blocks.sum(b0, b1) + (head + tail)
    }

    /// Bytes held.
    pub fn memory_size(&self) -> usize {
        self.blocks.memory_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values `k · 2^-20` with `|k| < 2^40` sum exactly in i128, so the
    /// stated bound can be checked against the exact sum.
    #[test]
    fn within_the_stated_bound_of_the_exact_sum() {
        let mut seed = 9u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 11
        };
        for n in [0usize, 1, 63, 64, 65, 200, 5000] {
            let ks: Vec<i64> = (0..n)
                .map(|_| (next() % (1 << 41)) as i64 - (1 << 40))
                .collect();
            let v: Vec<f64> =
                ks.iter().map(|&k| k as f64 / (1u64 << 20) as f64).collect();
            for k in [KernelSet::scalar(), KernelSet::detect()] {
                let sums = BlockSums::new(&v, k);
                for _ in 0..300 {
                    let (a, b) =
                        ((next() as usize) % (n + 1), (next() as usize) % (n + 1));
                    let (s, e) = (a.min(b), a.max(b));
                    let exact = ks[s..e].iter().map(|&k| k as i128).sum::<i128>() as f64
                        / (1u64 << 20) as f64;
                    let abs: f64 = v[s..e].iter().map(|x| x.abs()).sum();
                    let bound = (2 * BLOCK + 2) as f64 * f64::EPSILON * abs;
                    let got = sums.sum(&v, s, e, k);
                    assert!(
                        (got - exact).abs() <= bound,
                        "n={n} s={s} e={e} got={got} exact={exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn scalar_and_simd_agree_bit_for_bit() {
        let v: Vec<f64> = (0..3000)
            .map(|i| ((i * 7919) % 1013) as f64 / 7.0 - 50.0)
            .collect();
        let (s, d) = (
            BlockSums::new(&v, KernelSet::scalar()),
            BlockSums::new(&v, KernelSet::detect()),
        );
        for (a, b) in [(0, 3000), (5, 2999), (64, 128), (100, 100), (1, 70)] {
            assert_eq!(
                s.sum(&v, a, b, KernelSet::scalar()).to_bits(),
                d.sum(&v, a, b, KernelSet::detect()).to_bits()
            );
        }
    }

    #[test]
    fn nan_and_infinities_follow_ieee() {
        let mut v = vec![1.0; 512];
        v[100] = f64::INFINITY;
        let sums = BlockSums::new(&v, KernelSet::detect());
        assert_eq!(sums.sum(&v, 0, 512, KernelSet::detect()), f64::INFINITY);
        assert_eq!(sums.sum(&v, 101, 512, KernelSet::detect()), 411.0);
        v[300] = f64::NEG_INFINITY;
        let sums = BlockSums::new(&v, KernelSet::detect());
        assert!(sums.sum(&v, 0, 512, KernelSet::detect()).is_nan());
        v[300] = f64::NAN;
        let sums = BlockSums::new(&v, KernelSet::detect());
        assert!(sums.sum(&v, 200, 400, KernelSet::detect()).is_nan());
        assert_eq!(sums.sum(&v, 301, 512, KernelSet::detect()), 211.0);
    }
}
