//! Hand-written kernels: slice reductions for the WINDOW JOIN fast path,
//! and Parquet's RLE / bit-packing hybrid decoding ([`rle`]) for the
//! grouped aggregate's dictionary scan.
//!
//! Each slice kernel reduces one contiguous slice (one window of one key) to a
//! single value. There are two implementations with **the same lane order**:
//! [`scalar`] (portable, also used under `cfg(miri)`) and [`avx2`]
//! (`x86_64` with AVX2, detected at run time once). Both give bit-identical
//! results, which the unit tests check on random data.
//!
//! Invariants the callers uphold (the fast path guarantees them):
//! - slices passed to the float `min`/`max` kernels hold no NaN (windows with
//!   NaN or NULL take a masked scalar loop instead);
//! - NULL slots hold `0` in the value buffers, so `sum_f64` over a slice with
//!   NULLs is the sum of its non-NULL values.
//!
//! The kernels are crate-private; benchmarks reach them through the hidden
//! `datafusion_tsjoin::bench` module.
//!
//! ```
//! use datafusion_tsjoin::bench::KernelSet;
//! let k = KernelSet::detect();
//! let v: Vec<f64> = (0..100).map(|i| i as f64).collect();
//! assert_eq!(k.sum_f64(&v), 4950.0);
//! assert_eq!(k.max_f64(&v), Some(99.0));
//! assert_eq!(KernelSet::scalar().sum_f64(&v).to_bits(), k.sum_f64(&v).to_bits());
//! ```

#[cfg(all(target_arch = "x86_64", not(miri)))]
pub mod avx2;
pub mod block_sums;
pub mod block_table;
pub mod prefix;
pub mod rle;
pub mod scalar;

use std::sync::OnceLock;

/// Hints the CPU to load the cache line at `p` (a scatter's target some
/// rows ahead); no-op elsewhere than x86_64.
///
/// ```ignore
/// prefetch(counts[i..].as_ptr());
/// ```
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: a prefetch is a hint: it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            p.cast::<i8>(),
        )
    };
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = p;
}

/// Values summed per block: four AVX2 registers of four `f64` lanes.
pub const SUM_BLOCK: usize = 16;

/// Which implementation of the kernels runs.
///
/// Opaque: a value is made only by [`KernelSet::detect`] (the best set this
/// CPU has) or [`KernelSet::scalar`], so holding an AVX2 set proves the CPU
/// has AVX2 (and POPCNT, which every AVX2 CPU has and `detect` checks too).
/// That is what makes the `unsafe` calls in the methods sound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSet(Isa);

/// The instruction sets, private so no caller can name `Avx2` itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isa {
    Scalar,
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    Avx2,
}

impl KernelSet {
    /// The best set this CPU supports, detected once per process.
    pub fn detect() -> Self {
        static DETECTED: OnceLock<KernelSet> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("popcnt")
            {
                return KernelSet(Isa::Avx2);
            }
            KernelSet(Isa::Scalar)
        })
    }

    /// The portable kernels, the reference every other set must match.
    pub fn scalar() -> Self {
        KernelSet(Isa::Scalar)
    }

    /// [`KernelSet::detect`] when `simd` is true, else [`KernelSet::scalar`].
    pub fn choose(simd: bool) -> Self {
        if simd { Self::detect() } else { Self::scalar() }
    }

    /// True only for the AVX2 set, which only [`KernelSet::detect`] makes
    /// and only after detecting AVX2 and POPCNT: a `true` here proves the
    /// CPU has both (for code elsewhere compiled with
    /// `#[target_feature(enable = "avx2")]` or `"avx2,popcnt"`).
    pub(crate) fn is_avx2(self) -> bool {
        match self.0 {
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            Isa::Avx2 => true,
            Isa::Scalar => false,
        }
    }

    /// Name as EXPLAIN shows it.
    pub fn name(self) -> &'static str {
        match self.0 {
            Isa::Scalar => "scalar",
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            Isa::Avx2 => "avx2",
        }
    }

    /// Sum of `v` in the kernels' fixed lane order: [`SUM_BLOCK`] running
    /// sums over whole blocks, combined pairwise, then the tail in order.
    /// Differs from a left-to-right sum by at most `(n/16 + 5) * eps * sum(|v|)`
    /// (each value passes through at most that many roundings).
    pub fn sum_f64(self, v: &[f64]) -> f64 {
        match self.0 {
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            // SAFETY: an `Isa::Avx2` set is only made by `detect` after
            // detecting AVX2, and `KernelSet` cannot be built any other way.
            Isa::Avx2 => unsafe { avx2::sum_f64(v) },
            Isa::Scalar => scalar::sum_f64(v),
        }
    }

    /// Smallest value of a NaN-free slice; `None` when empty.
    pub fn min_f64(self, v: &[f64]) -> Option<f64> {
        if v.is_empty() {
            return None;
        }
        Some(match self.0 {
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            // SAFETY: as in `sum_f64`.
            Isa::Avx2 => unsafe { avx2::min_f64(v) },
            Isa::Scalar => scalar::min_f64(v),
        })
    }

    /// Largest value of a NaN-free slice; `None` when empty.
    pub fn max_f64(self, v: &[f64]) -> Option<f64> {
        if v.is_empty() {
            return None;
        }
        Some(match self.0 {
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            // SAFETY: as in `sum_f64`.
            Isa::Avx2 => unsafe { avx2::max_f64(v) },
            Isa::Scalar => scalar::max_f64(v),
        })
    }

    /// `(min, max)` of a NaN-free slice in one pass (same values as
    /// [`KernelSet::min_f64`] and [`KernelSet::max_f64`]); `None` when empty.
    pub fn min_max_f64(self, v: &[f64]) -> Option<(f64, f64)> {
        if v.is_empty() {
            return None;
        }
        Some(match self.0 {
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            // SAFETY: as in `sum_f64`.
            Isa::Avx2 => unsafe { avx2::min_max_f64(v) },
            Isa::Scalar => scalar::min_max_f64(v),
        })
    }

    /// `(sum, min, max)` of a NaN-free slice in one pass (the same values
    /// as [`KernelSet::sum_f64`] and [`KernelSet::min_max_f64`]); `None`
    /// when empty.
    pub fn sum_min_max_f64(self, v: &[f64]) -> Option<(f64, f64, f64)> {
        if v.is_empty() {
            return None;
        }
        Some(match self.0 {
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            // SAFETY: as in `sum_f64`.
            Isa::Avx2 => unsafe { avx2::sum_min_max_f64(v) },
            Isa::Scalar => scalar::sum_min_max_f64(v),
        })
    }

    /// Smallest value; `None` when empty.
    pub fn min_i64(self, v: &[i64]) -> Option<i64> {
        if v.is_empty() {
            return None;
        }
        Some(match self.0 {
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            // SAFETY: as in `sum_f64`.
            Isa::Avx2 => unsafe { avx2::min_i64(v) },
            Isa::Scalar => scalar::min_i64(v),
        })
    }

    /// Largest value; `None` when empty.
    pub fn max_i64(self, v: &[i64]) -> Option<i64> {
        if v.is_empty() {
            return None;
        }
        Some(match self.0 {
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            // SAFETY: as in `sum_f64`.
            Isa::Avx2 => unsafe { avx2::max_i64(v) },
            Isa::Scalar => scalar::max_i64(v),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small deterministic generator (no dev-dependency needed in unit tests).
    fn rng(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn floats(seed: &mut u64, n: usize) -> Vec<f64> {
        (0..n)
            .map(|_| match rng(seed) % 10 {
                0 => 0.0,
                1 => -0.0,
                2 => f64::INFINITY,
                3 => -1e300,
                _ => (rng(seed) as i64 as f64) / 1e9,
            })
            .collect()
    }

    #[test]
    fn simd_and_scalar_agree_bit_for_bit() {
        let simd = KernelSet::detect();
        let mut seed = 7;
        for n in (0..70).chain([127, 128, 129, 1000, 4097]) {
            for _ in 0..20 {
                let f = floats(&mut seed, n);
                let i: Vec<i64> = (0..n).map(|_| rng(&mut seed) as i64).collect();
                assert_eq!(
                    simd.sum_f64(&f).to_bits(),
                    KernelSet::scalar().sum_f64(&f).to_bits(),
                    "sum n={n}"
                );
                let bits = |x: Option<f64>| x.map(f64::to_bits);
                assert_eq!(
                    bits(simd.min_f64(&f)),
                    bits(KernelSet::scalar().min_f64(&f)),
                    "min n={n}"
                );
                assert_eq!(
                    bits(simd.max_f64(&f)),
                    bits(KernelSet::scalar().max_f64(&f)),
                    "max n={n}"
                );
                let pair =
                    |x: Option<(f64, f64)>| x.map(|(a, b)| (a.to_bits(), b.to_bits()));
                let separate = simd.min_f64(&f).zip(simd.max_f64(&f));
                assert_eq!(pair(simd.min_max_f64(&f)), pair(separate), "min_max n={n}");
                assert_eq!(
                    pair(KernelSet::scalar().min_max_f64(&f)),
                    pair(separate),
                    "min_max n={n}"
                );
                let triple = |x: Option<(f64, f64, f64)>| {
                    x.map(|(a, b, c)| (a.to_bits(), b.to_bits(), c.to_bits()))
                };
                let parts = separate.map(|(l, h)| (simd.sum_f64(&f), l, h));
                assert_eq!(
                    triple(simd.sum_min_max_f64(&f)),
                    triple(parts),
                    "sum_min_max n={n}"
                );
                assert_eq!(
                    triple(KernelSet::scalar().sum_min_max_f64(&f)),
                    triple(parts),
                    "sum_min_max n={n}"
                );
                assert_eq!(simd.min_i64(&i), i.iter().copied().min());
                assert_eq!(simd.max_i64(&i), i.iter().copied().max());
                assert_eq!(KernelSet::scalar().min_i64(&i), i.iter().copied().min());
                assert_eq!(KernelSet::scalar().max_i64(&i), i.iter().copied().max());
            }
        }
    }

    #[test]
    fn float_min_max_match_a_plain_fold() {
        let mut seed = 11;
        for n in 1..200 {
            let f = floats(&mut seed, n);
            for k in [KernelSet::scalar(), KernelSet::detect()] {
                // Compare as numbers: -0.0 and 0.0 are equal, which one wins
                // depends on position (as in `minpd`), but both sets agree.
                assert_eq!(
                    k.min_f64(&f).unwrap(),
                    f.iter().copied().fold(f64::INFINITY, f64::min)
                );
                assert_eq!(
                    k.max_f64(&f).unwrap(),
                    f.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                );
            }
        }
    }

    #[test]
    fn sum_is_within_the_documented_bound() {
        let mut seed = 3;
        for n in [1usize, 15, 16, 17, 100, 1000, 10_000] {
            let f: Vec<f64> = (0..n)
                .map(|_| (rng(&mut seed) as i64 as f64) / 1e12)
                .collect();
            let direct: f64 = f.iter().sum();
            let abs: f64 = f.iter().map(|x| x.abs()).sum();
            let bound = ((n / SUM_BLOCK) as f64 + 5.0) * f64::EPSILON * abs;
            for k in [KernelSet::scalar(), KernelSet::detect()] {
                assert!((k.sum_f64(&f) - direct).abs() <= 2.0 * bound, "n={n}");
            }
        }
        // Exact on integers.
        let ints: Vec<f64> = (0..1001).map(|i| i as f64).collect();
        assert_eq!(KernelSet::detect().sum_f64(&ints), 500_500.0);
        assert_eq!(KernelSet::detect().sum_f64(&[]), 0.0);
        assert_eq!(KernelSet::detect().min_f64(&[]), None);
    }
}
