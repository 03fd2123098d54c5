//! Portable kernels. The loops mirror [`super::avx2`] lane for lane (four
//! registers of four lanes, then the same reduction tree), so both give
//! bit-identical results; they are the reference the AVX2 ones are tested
//! against.

use super::SUM_BLOCK;

/// `minpd` semantics: the second operand unless the first is smaller.
#[inline(always)]
fn min_op(a: f64, b: f64) -> f64 {
    if a < b { a } else { b }
}

/// `maxpd` semantics: the second operand unless the first is larger.
#[inline(always)]
fn max_op(a: f64, b: f64) -> f64 {
    if a > b { a } else { b }
}

/// Reduces the 16 lane accumulators like the AVX2 code does: registers
/// `(r0 ∘ r1) ∘ (r2 ∘ r3)` lane-wise, then lanes `(l0 ∘ l1) ∘ (l2 ∘ l3)`.
#[inline(always)]
fn reduce(acc: &[f64; SUM_BLOCK], op: impl Fn(f64, f64) -> f64) -> f64 {
    let mut lanes = [0.0; 4];
    for (j, lane) in lanes.iter_mut().enumerate() {
        *lane = op(op(acc[j], acc[4 + j]), op(acc[8 + j], acc[12 + j]));
    }
    op(op(lanes[0], lanes[1]), op(lanes[2], lanes[3]))
}

/// See [`super::KernelSet::sum_f64`].
pub fn sum_f64(v: &[f64]) -> f64 {
    let mut acc = [0.0f64; SUM_BLOCK];
    let mut blocks = v.chunks_exact(SUM_BLOCK);
    for block in &mut blocks {
        for (a, x) in acc.iter_mut().zip(block) {
            *a += x;
        }
    }
    let mut total = reduce(&acc, |a, b| a + b);
    for x in blocks.remainder() {
        total += x;
    }
    total
}

fn extreme_f64(v: &[f64], op: impl Fn(f64, f64) -> f64 + Copy) -> f64 {
    // Seeded with the first value so that empty lanes never win.
    let mut acc = [v[0]; SUM_BLOCK];
    let mut blocks = v.chunks_exact(SUM_BLOCK);
    for block in &mut blocks {
        for (a, &x) in acc.iter_mut().zip(block) {
            *a = op(*a, x);
        }
    }
    let mut total = reduce(&acc, op);
    for &x in blocks.remainder() {
        total = op(total, x);
    }
    total
}

/// Smallest value of a non-empty, NaN-free slice.
pub fn min_f64(v: &[f64]) -> f64 {
    extreme_f64(v, min_op)
}

/// Largest value of a non-empty, NaN-free slice.
pub fn max_f64(v: &[f64]) -> f64 {
    extreme_f64(v, max_op)
}

/// `(min, max)` of a non-empty, NaN-free slice in one pass, each exactly
/// as [`min_f64`] and [`max_f64`] compute it.
pub fn min_max_f64(v: &[f64]) -> (f64, f64) {
    let (mut lo, mut hi) = ([v[0]; SUM_BLOCK], [v[0]; SUM_BLOCK]);
    let mut blocks = v.chunks_exact(SUM_BLOCK);
    for block in &mut blocks {
        for ((l, h), &x) in lo.iter_mut().zip(hi.iter_mut()).zip(block) {
            *l = min_op(*l, x);
            *h = max_op(*h, x);
        }
    }
    let (mut l, mut h) = (reduce(&lo, min_op), reduce(&hi, max_op));
    for &x in blocks.remainder() {
        l = min_op(l, x);
        h = max_op(h, x);
    }
    (l, h)
}

/// `(sum, min, max)` of a non-empty, NaN-free slice in one pass, each
/// exactly as [`sum_f64`] and [`min_max_f64`] compute it.
pub fn sum_min_max_f64(v: &[f64]) -> (f64, f64, f64) {
    let mut sum = [0.0f64; SUM_BLOCK];
    let (mut lo, mut hi) = ([v[0]; SUM_BLOCK], [v[0]; SUM_BLOCK]);
    let mut blocks = v.chunks_exact(SUM_BLOCK);
    for block in &mut blocks {
        for (((s, l), h), &x) in sum
            .iter_mut()
            .zip(lo.iter_mut())
            .zip(hi.iter_mut())
            .zip(block)
        {
            *s += x;
            *l = min_op(*l, x);
            *h = max_op(*h, x);
        }
    }
    let (mut s, mut l, mut h) = (
        reduce(&sum, |a, b| a + b),
        reduce(&lo, min_op),
        reduce(&hi, max_op),
    );
    for &x in blocks.remainder() {
        s += x;
        l = min_op(l, x);
        h = max_op(h, x);
    }
    (s, l, h)
}

/// Smallest value of a non-empty slice.
pub fn min_i64(v: &[i64]) -> i64 {
    v.iter().copied().min().expect("non-empty")
}

/// Largest value of a non-empty slice.
pub fn max_i64(v: &[i64]) -> i64 {
    v.iter().copied().max().expect("non-empty")
}
