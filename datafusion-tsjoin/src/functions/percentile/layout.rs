//! HdrHistogram's bucket geometry and percentile walk, as QuestDB computes
//! them (QuestDB vendors the Java HdrHistogram).
//!
//! Every recorded value maps to a `u32` *key*; keys order like the values
//! they stand for, so a percentile is a walk over keys in ascending order.
//!
//! - Integers (`LONG`/`INT` input): the key is HdrHistogram's counts-array
//!   index with lowest discernible value 1.
//! - Doubles (`DOUBLE`/`FLOAT` input): the key is the top `11 + m - 1` bits
//!   of the value's IEEE-754 pattern (biased exponent and the `m - 1`
//!   significand bits below the leading one). HdrHistogram's
//!   `DoubleHistogram` scales values by a power of two (its auto-ranging),
//!   which moves every value into the upper half of an integer bucket: the
//!   bucket it lands in is exactly this key, whatever the scale. Only the
//!   reported value depends on the scale, through the lowest positive value
//!   recorded (see [`Layout::double_value`]). So keys merge exactly, in any
//!   order, across partitions.

/// The geometry of a histogram with `precision` significant decimal digits.
///
/// ```ignore
/// let l = Layout::new(1);
/// assert_eq!(l.int_value(l.int_key(100), false), 103.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Significant decimal digits, 0..=5.
    pub precision: u8,
    /// `subBucketCountMagnitude`: `ceil(log2(2 * 10^precision))`.
    pub m: u32,
}

/// `DoubleHistogram`'s covered range starts at `lowest * 2^11` (QuestDB
/// builds it with a highest-to-lowest ratio of 1000, rounded up to a power
/// of two and doubled).
pub(crate) const INITIAL_RANGE_BITS: i32 = 11;

/// `highestAllowedValueEver`: 2^1022.
pub(crate) const HIGHEST_ALLOWED_DOUBLE: f64 = 4.49423283715579e307;

impl Layout {
    /// The layout for `precision` digits (0..=5).
    pub fn new(precision: u8) -> Self {
        let largest = 2 * 10u64.pow(precision as u32);
        let m = 64 - (largest - 1).leading_zeros();
        Self { precision, m }
    }

    /// `subBucketHalfCount`.
    pub fn half(&self) -> u64 {
        1 << (self.m - 1)
    }

    /// The bucket (power-of-two magnitude) of integer `v`.
    fn bucket(&self, v: u64) -> u32 {
        let mask = (1u64 << self.m) - 1;
        64 - (v | mask).leading_zeros() - self.m
    }

    /// The counts-array index of a non-negative integer.
    pub fn int_key(&self, v: u64) -> u32 {
        let b = self.bucket(v);
        let sub = v >> b;
        ((((b + 1) as u64) << (self.m - 1)) + sub - self.half()) as u32
    }

    /// The lowest integer of the bucket `key` stands for
    /// (`valueFromIndex`).
    pub fn int_lowest(&self, key: u32) -> u64 {
        let key = key as u64;
        let half_mag = self.m - 1;
        let mut bucket = (key >> half_mag) as i64 - 1;
        let mut sub = (key & (self.half() - 1)) + self.half();
        if bucket < 0 {
            sub -= self.half();
            bucket = 0;
        }
        sub << bucket
    }

    /// The value QuestDB reports for integer key `key`: the highest value
    /// equivalent to it, or the lowest one when the percentile is 0.
    pub fn int_value(&self, key: u32, lowest: bool) -> f64 {
        let lo = self.int_lowest(key);
        if lowest {
            return lo as f64;
        }
        let width = 1u64 << self.bucket(lo);
        (lo + (width - 1)) as f64
    }

    /// The key of a positive, finite double (0 for zero).
    pub fn double_key(&self, v: f64) -> u32 {
        if v == 0.0 {
            0
        } else {
            (v.to_bits() >> (53 - self.m)) as u32
        }
    }

    /// The unbiased binary exponent of a double key's values.
    pub fn key_exponent(&self, key: u32) -> i32 {
        (key >> (self.m - 1)) as i32 - 1023
    }

    /// The value QuestDB reports for double key `key` when the lowest
    /// positive value recorded has binary exponent `e_min`.
    ///
    /// `DoubleHistogram` keeps its lowest covered value at `2^e_min` and
    /// maps doubles to integers by the ratio `2^k`, `k = e_min - (m - 1)`;
    /// it reports the integer bucket's highest (or lowest) integer times the
    /// ratio, hence answers such as `51.9375` for 51.
    pub fn double_value(&self, key: u32, e_min: i32, lowest: bool) -> f64 {
        if key == 0 {
            return 0.0;
        }
        let e = self.key_exponent(key);
        let s = ((key as u64) & (self.half() - 1)) | self.half();
        let b = (e - e_min) as u32;
        let k = e_min - (self.m as i32 - 1);
        let int = if lowest { s << b } else { ((s + 1) << b) - 1 };
        int as f64 * pow2(k)
    }

    /// Whether doubles with binary exponents `e_min..=e_max` fit one
    /// `DoubleHistogram`: its integer range cannot pass 2^63, and its
    /// conversion ratio must stay a normal double.
    pub fn double_range_fits(&self, e_min: i32, e_max: i32) -> bool {
        e_max - e_min <= 63 - self.m as i32 && e_min - (self.m as i32 - 1) >= -1022
    }

    /// `DoubleHistogram`'s covered range `[lowest, highest)` after values
    /// with exponents `e_min..=e_max` (`None`: nothing positive yet, the
    /// initial range `[2^800, 2^811)`).
    pub fn covered_range(&self, range: Option<(i32, i32)>) -> (f64, f64) {
        match range {
            None => (pow2(800), pow2(800 + INITIAL_RANGE_BITS)),
            Some((lo, hi)) => (pow2(lo), pow2((lo + INITIAL_RANGE_BITS).max(hi + 1))),
        }
    }
}

/// `2^k` for `-1074 <= k <= 1023`, exactly.
pub(crate) fn pow2(k: i32) -> f64 {
    if k >= -1022 {
        f64::from_bits(((k + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (k + 1074))
    }
}

/// Java's `Math.nextAfter(x, -inf)` for finite `x`.
fn next_down(x: f64) -> f64 {
    if x == 0.0 {
        -f64::from_bits(1)
    } else if x > 0.0 {
        f64::from_bits(x.to_bits() - 1)
    } else {
        f64::from_bits(x.to_bits() + 1)
    }
}

/// The running count HdrHistogram's `getValueAtPercentile(pct)` stops at,
/// for `n` recorded values. `pct` is the percentile times 100 as QuestDB
/// computes it (`p * 100` in binary64); one ulp is taken off before
/// rounding up, which is why p = 0.07 over 1..100 reports 7, not 8.
pub(crate) fn count_at_percentile(pct: f64, n: u64) -> u64 {
    let requested = next_down(pct).clamp(0.0, 100.0);
    let fp = (requested * n as f64) / 100.0;
    (fp.ceil() as u64).max(1)
}

/// A double as Java's `Double.toString` prints it (QuestDB's messages
/// embed values that way): `1.0`, `2048.0`, `6.668014432879854E240`.
pub(crate) fn java_double(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    if (1e-3..1e7).contains(&a) {
        let s = format!("{v}");
        if s.contains('.') { s } else { format!("{s}.0") }
    } else {
        let s = format!("{v:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        if mantissa.contains('.') {
            format!("{mantissa}E{exp}")
        } else {
            format!("{mantissa}.0E{exp}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magnitudes_match_hdr_histogram() {
        let m: Vec<u32> = (0..=5).map(|p| Layout::new(p).m).collect();
        assert_eq!(m, [1, 5, 8, 11, 15, 18]);
    }

    #[test]
    fn integer_keys_round_trip_and_order() {
        for p in 0..=5 {
            let l = Layout::new(p);
            let mut last = None;
            for v in (0..5000u64).chain([1 << 40, (1 << 40) + 12345, u64::MAX >> 1]) {
                let k = l.int_key(v);
                let lo = l.int_lowest(k);
                let hi = l.int_value(k, false) as u64;
                assert!(lo <= v, "p{p} v{v}");
                if v < (1 << 53) {
                    assert!(v <= hi, "p{p} v{v}");
                }
                assert_eq!(l.int_key(lo), k);
                if let Some(prev) = last {
                    assert!(k >= prev);
                }
                last = Some(k);
            }
            // Values below 2^m are exact.
            for v in 0..(1u64 << l.m) {
                assert_eq!(l.int_value(l.int_key(v), false), v as f64);
            }
        }
    }

    #[test]
    fn integer_examples_from_questdb() {
        let l = Layout::new(1);
        assert_eq!(l.int_value(l.int_key(100), false), 103.0);
        assert_eq!(l.int_value(l.int_key(51), false), 51.0);
        let want = [511.0, 501.0, 500.0, 500.0, 500.0];
        for (p, w) in (1..=5).zip(want) {
            let l = Layout::new(p);
            assert_eq!(l.int_value(l.int_key(500), false), w, "precision {p}");
        }
    }

    #[test]
    fn double_examples_from_questdb() {
        // 1.0..100.0: the lowest value is 1.0 (exponent 0).
        let l = Layout::new(1);
        assert_eq!(l.double_value(l.double_key(51.0), 0, false), 51.9375);
        assert_eq!(l.double_value(l.double_key(100.0), 0, false), 103.9375);
        assert_eq!(l.double_value(l.double_key(1.0), 0, true), 1.0);
        let want = [
            511.9375,
            501.9921875,
            500.2490234375,
            500.01556396484375,
            500.00194549560547,
        ];
        for (p, w) in (1..=5).zip(want) {
            let l = Layout::new(p);
            assert_eq!(l.double_value(l.double_key(500.0), 0, false), w, "p{p}");
        }
    }

    #[test]
    fn double_keys_order_like_values() {
        for p in 0..=5 {
            let l = Layout::new(p);
            let vals = [0.0, 1e-300, 0.001, 0.5, 1.0, 1.5, 2.0, 3.7, 1e10, 1e300];
            for w in vals.windows(2) {
                assert!(l.double_key(w[0]) <= l.double_key(w[1]));
            }
        }
    }

    #[test]
    fn percentile_target_takes_one_ulp_off() {
        // QuestDB: p = 0.07 over 1..100 gives 7 (a plain ceil would give 8).
        assert_eq!(count_at_percentile(0.07 * 100.0, 100), 7);
        assert_eq!(count_at_percentile(0.0, 100), 1);
        assert_eq!(count_at_percentile(50.0, 100), 50);
        assert_eq!(count_at_percentile(100.0, 100), 100);
        assert_eq!(count_at_percentile(99.0, 1), 1);
    }

    #[test]
    fn java_formatting() {
        assert_eq!(java_double(1.0), "1.0");
        assert_eq!(java_double(-1.0), "-1.0");
        assert_eq!(java_double(2048.0), "2048.0");
        assert_eq!(java_double(pow2(800)), "6.668014432879854E240");
        assert_eq!(java_double(HIGHEST_ALLOWED_DOUBLE), "4.49423283715579E307");
        assert_eq!(HIGHEST_ALLOWED_DOUBLE, pow2(1022));
        assert_eq!(java_double(1e-5), "1.0E-5");
    }
}
