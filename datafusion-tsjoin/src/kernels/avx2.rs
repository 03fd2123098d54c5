//! AVX2 kernels (`x86_64`). Callers must have checked that the CPU has AVX2
//! ([`super::KernelSet::detect`] does, once). Each mirrors the lane order of
//! [`super::scalar`] so results are bit-identical.

use super::SUM_BLOCK;
use std::arch::x86_64::*;

/// Horizontal reduction in the scalar reference's order:
/// `(l0 ∘ l1) ∘ (l2 ∘ l3)`.
#[inline(always)]
fn lanes(r: __m256d, op: impl Fn(f64, f64) -> f64) -> f64 {
    let mut l = [0.0f64; 4];
    // SAFETY: `l` holds four f64; unaligned store.
    unsafe { _mm256_storeu_pd(l.as_mut_ptr(), r) };
    op(op(l[0], l[1]), op(l[2], l[3]))
}

/// See [`super::KernelSet::sum_f64`].
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn sum_f64(v: &[f64]) -> f64 {
    let mut blocks = v.chunks_exact(SUM_BLOCK);
    let (mut a0, mut a1, mut a2, mut a3) = (
        _mm256_setzero_pd(),
        _mm256_setzero_pd(),
        _mm256_setzero_pd(),
        _mm256_setzero_pd(),
    );
    for block in &mut blocks {
        let p = block.as_ptr();
        // SAFETY: `block` holds 16 f64; unaligned loads.
        unsafe {
            a0 = _mm256_add_pd(a0, _mm256_loadu_pd(p));
            a1 = _mm256_add_pd(a1, _mm256_loadu_pd(p.add(4)));
            a2 = _mm256_add_pd(a2, _mm256_loadu_pd(p.add(8)));
            a3 = _mm256_add_pd(a3, _mm256_loadu_pd(p.add(12)));
        }
    }
    let r = _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3));
    let mut total = lanes(r, |a, b| a + b);
    for x in blocks.remainder() {
        total += x;
    }
    total
}

macro_rules! extreme_f64 {
    ($name:ident, $op:ident, $scalar:expr, $doc:literal) => {
        #[doc = $doc]
        ///
        /// # Safety
        /// The CPU must support AVX2; `v` must be non-empty.
        #[target_feature(enable = "avx2")]
        pub unsafe fn $name(v: &[f64]) -> f64 {
            let op = $scalar;
            let seed = _mm256_set1_pd(v[0]);
            let (mut a0, mut a1, mut a2, mut a3) = (seed, seed, seed, seed);
            let mut blocks = v.chunks_exact(SUM_BLOCK);
            for block in &mut blocks {
                let p = block.as_ptr();
                // SAFETY: `block` holds 16 f64; unaligned loads. `$op(a, x)`
                // returns `x` unless `a` wins, like the scalar reference.
                unsafe {
                    a0 = $op(a0, _mm256_loadu_pd(p));
                    a1 = $op(a1, _mm256_loadu_pd(p.add(4)));
                    a2 = $op(a2, _mm256_loadu_pd(p.add(8)));
                    a3 = $op(a3, _mm256_loadu_pd(p.add(12)));
                }
            }
            let r = $op($op(a0, a1), $op(a2, a3));
            let mut total = lanes(r, op);
            for &x in blocks.remainder() {
                total = op(total, x);
            }
            total
        }
    };
}

extreme_f64!(
    min_f64,
    _mm256_min_pd,
    |a: f64, b: f64| if a < b { a } else { b },
    "Smallest value of a NaN-free slice."
);
extreme_f64!(
    max_f64,
    _mm256_max_pd,
    |a: f64, b: f64| if a > b { a } else { b },
    "Largest value of a NaN-free slice."
);

/// `(min, max)` of a NaN-free slice in one pass, lane for lane as
/// [`min_f64`] and [`max_f64`].
///
/// # Safety
/// The CPU must support AVX2; `v` must be non-empty.
#[target_feature(enable = "avx2")]
pub unsafe fn min_max_f64(v: &[f64]) -> (f64, f64) {
    let seed = _mm256_set1_pd(v[0]);
    let (mut l0, mut l1, mut l2, mut l3) = (seed, seed, seed, seed);
    let (mut h0, mut h1, mut h2, mut h3) = (seed, seed, seed, seed);
    let mut blocks = v.chunks_exact(SUM_BLOCK);
    for block in &mut blocks {
        let p = block.as_ptr();
        // SAFETY: `block` holds 16 f64; unaligned loads.
        unsafe {
            let (x0, x1, x2, x3) = (
                _mm256_loadu_pd(p),
                _mm256_loadu_pd(p.add(4)),
                _mm256_loadu_pd(p.add(8)),
                _mm256_loadu_pd(p.add(12)),
            );
            l0 = _mm256_min_pd(l0, x0);
            l1 = _mm256_min_pd(l1, x1);
            l2 = _mm256_min_pd(l2, x2);
            l3 = _mm256_min_pd(l3, x3);
            h0 = _mm256_max_pd(h0, x0);
            h1 = _mm256_max_pd(h1, x1);
            h2 = _mm256_max_pd(h2, x2);
            h3 = _mm256_max_pd(h3, x3);
        }
    }
    let min_op = |a: f64, b: f64| if a < b { a } else { b };
    let max_op = |a: f64, b: f64| if a > b { a } else { b };
    let mut l = lanes(
        _mm256_min_pd(_mm256_min_pd(l0, l1), _mm256_min_pd(l2, l3)),
        min_op,
    );
    let mut h = lanes(
        _mm256_max_pd(_mm256_max_pd(h0, h1), _mm256_max_pd(h2, h3)),
        max_op,
    );
    for &x in blocks.remainder() {
        l = min_op(l, x);
        h = max_op(h, x);
    }
    (l, h)
}

/// `(sum, min, max)` of a NaN-free slice in one pass, lane for lane as
/// [`sum_f64`] and [`min_max_f64`] (so each part is bit-identical to them).
///
/// # Safety
/// The CPU must support AVX2; `v` must be non-empty.
#[target_feature(enable = "avx2")]
pub unsafe fn sum_min_max_f64(v: &[f64]) -> (f64, f64, f64) {
    let seed = _mm256_set1_pd(v[0]);
    let zero = _mm256_setzero_pd();
    let (mut s0, mut s1, mut s2, mut s3) = (zero, zero, zero, zero);
    let (mut l0, mut l1, mut l2, mut l3) = (seed, seed, seed, seed);
    let (mut h0, mut h1, mut h2, mut h3) = (seed, seed, seed, seed);
    let mut blocks = v.chunks_exact(SUM_BLOCK);
    for block in &mut blocks {
        let p = block.as_ptr();
        // SAFETY: `block` holds 16 f64; unaligned loads.
        unsafe {
            let (x0, x1, x2, x3) = (
                _mm256_loadu_pd(p),
                _mm256_loadu_pd(p.add(4)),
                _mm256_loadu_pd(p.add(8)),
                _mm256_loadu_pd(p.add(12)),
            );
            s0 = _mm256_add_pd(s0, x0);
            s1 = _mm256_add_pd(s1, x1);
            s2 = _mm256_add_pd(s2, x2);
            s3 = _mm256_add_pd(s3, x3);
            l0 = _mm256_min_pd(l0, x0);
            l1 = _mm256_min_pd(l1, x1);
            l2 = _mm256_min_pd(l2, x2);
            l3 = _mm256_min_pd(l3, x3);
            h0 = _mm256_max_pd(h0, x0);
            h1 = _mm256_max_pd(h1, x1);
            h2 = _mm256_max_pd(h2, x2);
            h3 = _mm256_max_pd(h3, x3);
        }
    }
    let min_op = |a: f64, b: f64| if a < b { a } else { b };
    let max_op = |a: f64, b: f64| if a > b { a } else { b };
    let mut s = lanes(
        _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)),
        |a, b| a + b,
    );
    let mut l = lanes(
        _mm256_min_pd(_mm256_min_pd(l0, l1), _mm256_min_pd(l2, l3)),
        min_op,
    );
    let mut h = lanes(
        _mm256_max_pd(_mm256_max_pd(h0, h1), _mm256_max_pd(h2, h3)),
        max_op,
    );
    for &x in blocks.remainder() {
        s += x;
        l = min_op(l, x);
        h = max_op(h, x);
    }
    (s, l, h)
}

macro_rules! extreme_i64 {
    ($name:ident, $take_second:expr, $fold:ident, $doc:literal) => {
        #[doc = $doc]
        ///
        /// # Safety
        /// The CPU must support AVX2; `v` must be non-empty.
        #[target_feature(enable = "avx2")]
        pub unsafe fn $name(v: &[i64]) -> i64 {
            // `blendv` picks `b` where the mask is set.
            let pick = |a: __m256i, b: __m256i| -> __m256i {
                let mask = $take_second(a, b);
                _mm256_blendv_epi8(a, b, mask)
            };
            let seed = _mm256_set1_epi64x(v[0]);
            let (mut a0, mut a1) = (seed, seed);
            let mut blocks = v.chunks_exact(8);
            for block in &mut blocks {
                let p = block.as_ptr() as *const __m256i;
                // SAFETY: `block` holds 8 i64; unaligned loads.
                unsafe {
                    a0 = pick(a0, _mm256_loadu_si256(p));
                    a1 = pick(a1, _mm256_loadu_si256(p.add(1)));
                }
            }
            let r = pick(a0, a1);
            let mut l = [0i64; 4];
            // SAFETY: `l` holds four i64; unaligned store.
            unsafe { _mm256_storeu_si256(l.as_mut_ptr() as *mut __m256i, r) };
            l.into_iter()
                .chain(blocks.remainder().iter().copied())
                .$fold()
                .expect("non-empty")
        }
    };
}

extreme_i64!(
    min_i64,
    |a, b| _mm256_cmpgt_epi64(a, b),
    min,
    "Smallest value of a non-empty slice."
);
extreme_i64!(
    max_i64,
    |a, b| _mm256_cmpgt_epi64(b, a),
    max,
    "Largest value of a non-empty slice."
);
