//! Compensated prefix sums: the sum of any slice in O(1), within one
//! rounding of the exact sum.
//!
//! Prefix `P[p]` is the sum of `v[..p]` held as a double-double (`hi + lo`,
//! about 106 bits), so `P[e] - P[s]` loses nothing to cancellation the way a
//! plain `f64` prefix would. Only finite values enter the prefix; NaN and
//! ±infinity are counted instead, and a slice holding any gets IEEE's answer
//! (NaN, or the infinity's sign, or NaN for `+inf + -inf`).
//!
//! Bound: `|sum(s, e) − exact| ≤ eps·|exact| + 4·n·eps²·Σ|v|` (`n` values
//! in the prefix, `eps = 2⁻⁵³`), i.e. one rounding of the exact window sum
//! for any realistic `n`; a direct left-to-right sum of `m` values is only
//! within `(m − 1)·eps·Σ|window|`. Finite sums that overflow `f64` are the
//! one difference: the prefix may stay finite where a direct sum reaches
//! infinity.
//!
//! ```
//! use datafusion_tsjoin::bench::prefix::CompensatedPrefix;
//! let p = CompensatedPrefix::new(&[1e16, 1.0, -1e16, 2.0]);
//! assert_eq!(p.sum(1, 3), 1.0 - 1e16); // one rounding of the exact value
//! assert_eq!(p.sum(0, 4), 3.0);         // a plain f64 prefix gives 2.0
//! ```

/// `a + b` as an exact pair `(sum, error)` (Knuth's TwoSum).
#[inline(always)]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// Prefix sums of a slice, built once, queried per window.
#[derive(Debug, Default, Clone)]
pub struct CompensatedPrefix {
    /// `(hi, lo)` per prefix, interleaved: a window reads two cache lines.
    dd: Vec<[f64; 2]>,
    /// Prefix counts of NaN, +inf, -inf (empty when the input has none).
    nan: Vec<u32>,
    pos_inf: Vec<u32>,
    neg_inf: Vec<u32>,
}

impl CompensatedPrefix {
    /// Builds the prefix of `v`.
    pub fn new(v: &[f64]) -> Self {
        let mut out = Self {
            dd: Vec::with_capacity(v.len() + 1),
            ..Self::default()
        };
        let (mut hi, mut lo) = (0.0f64, 0.0f64);
        out.dd.push([0.0, 0.0]);
        let special = v.iter().any(|x| !x.is_finite());
        let (mut nan, mut pinf, mut ninf) = (0u32, 0u32, 0u32);
        if special {
            out.nan.push(0);
            out.pos_inf.push(0);
            out.neg_inf.push(0);
        }
        for &x in v {
            if x.is_finite() {
                let (s, e) = two_sum(hi, x);
                let e = e + lo;
                hi = s + e;
                lo = e - (hi - s);
            } else if special {
                nan += x.is_nan() as u32;
                pinf += (x == f64::INFINITY) as u32;
                ninf += (x == f64::NEG_INFINITY) as u32;
            }
            out.dd.push([hi, lo]);
            if special {
                out.nan.push(nan);
                out.pos_inf.push(pinf);
                out.neg_inf.push(ninf);
            }
        }
        out
    }

    /// Sum of `v[s..e]`.
    #[inline]
    pub fn sum(&self, s: usize, e: usize) -> f64 {
        if !self.nan.is_empty() {
            let nan = self.nan[e] - self.nan[s];
            let pinf = self.pos_inf[e] - self.pos_inf[s];
            let ninf = self.neg_inf[e] - self.neg_inf[s];
            if nan > 0 || (pinf > 0 && ninf > 0) {
                return f64::NAN;
            }
            if pinf > 0 {
                return f64::INFINITY;
            }
            if ninf > 0 {
                return f64::NEG_INFINITY;
            }
        }
        let ([eh, el], [sh, sl]) = (self.dd[e], self.dd[s]);
        let (d, err) = two_sum(eh, -sh);
        d + (err + (el - sl))
    }

    /// Bytes held.
    pub fn memory_size(&self) -> usize {
        self.dd.capacity() * 16
            + (self.nan.capacity() + self.pos_inf.capacity() + self.neg_inf.capacity())
                * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rng(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 11
    }

    /// Values `k · 2^-30` with `|k| < 2^50` are exact in f64 and their sums
    /// exact in i128, so the exact window sum is known.
    #[test]
    fn within_one_rounding_of_the_exact_sum() {
        let mut seed = 5;
        for n in [0usize, 1, 2, 10, 1000, 20_000] {
            let ks: Vec<i64> = (0..n)
                .map(|_| {
                    let mag = 1i64 << (rng(&mut seed) % 50);
                    (rng(&mut seed) as i64 % mag)
                        * if rng(&mut seed).is_multiple_of(2) {
                            1
                        } else {
                            -1
                        }
                })
                .collect();
            let v: Vec<f64> =
                ks.iter().map(|&k| k as f64 / (1u64 << 30) as f64).collect();
            let p = CompensatedPrefix::new(&v);
            for _ in 0..200 {
                let (a, b) = if n == 0 {
                    (0, 0)
                } else {
                    (
                        (rng(&mut seed) as usize) % (n + 1),
                        (rng(&mut seed) as usize) % (n + 1),
                    )
                };
                let (s, e) = (a.min(b), a.max(b));
                let exact_k: i128 = ks[s..e].iter().map(|&k| k as i128).sum();
                let exact = exact_k as f64 / (1u64 << 30) as f64; // one rounding
                let abs: f64 = v.iter().map(|x| x.abs()).sum();
                let bound = f64::EPSILON * exact.abs()
                    + 4.0 * n as f64 * f64::EPSILON * f64::EPSILON * abs;
                assert!((p.sum(s, e) - exact).abs() <= bound, "n={n} s={s} e={e}");
            }
        }
    }

    #[test]
    fn nan_and_infinities_follow_ieee() {
        let v = [
            1.0,
            f64::INFINITY,
            2.0,
            f64::NEG_INFINITY,
            3.0,
            f64::NAN,
            4.0,
        ];
        let p = CompensatedPrefix::new(&v);
        assert_eq!(p.sum(0, 1), 1.0);
        assert_eq!(p.sum(0, 3), f64::INFINITY);
        assert_eq!(p.sum(2, 4), f64::NEG_INFINITY);
        assert!(p.sum(1, 4).is_nan());
        assert!(p.sum(4, 6).is_nan());
        assert_eq!(p.sum(6, 7), 4.0);
        assert_eq!(p.sum(2, 3), 2.0);
        assert_eq!(p.sum(3, 3), 0.0);
    }
}
