//! Sliding-window aggregate state: what the streaming path keeps per key.
//!
//! Every structure here is pushed at the back (the newest right row) and
//! popped at the front (rows whose time fell before the window start), each
//! row once, so a window costs O(1) amortised whatever its length:
//!
//! * [`SumStack`]: float sums as two stacks ("re-summed blocks"); no
//!   subtraction, so a NaN or an infinity that left the window leaves no
//!   trace and the error stays that of a direct sum (see its docs);
//! * [`MonoDeque`]: min or max as a monotonic deque;
//! * counts and wrapping integer sums need no structure (exact under
//!   subtraction), and first/last come off the ring of rows itself.

use std::collections::VecDeque;

/// Sum of a sliding window of floats as two stacks.
///
/// New values go on the back stack, which keeps only their running sum
/// (and the values, for the flip). The front stack holds, for each of its
/// values, the sum of that value and every newer value of the front, oldest
/// on top. Popping the oldest pops the front; an empty front is refilled by
/// moving the back over, summing newest to oldest. The window's sum is the
/// front's top plus the back's running sum.
///
/// Error bound: both parts are recursive sums of at most `n` of the
/// window's `n` values, and the result adds the two, so it is a recursive
/// sum of the same values in another order: `|sum - exact| <= γ(n-1) Σ|x|`
/// with `γ(k) = k·u / (1 - k·u)`, `u = 2⁻⁵³`, the bound of a direct
/// left-to-right sum (tested in `sum_stack_error_is_a_direct_sums`).
/// Running subtraction would instead accumulate error over every row that
/// ever passed through the window, and never drop a NaN.
///
/// ```ignore
/// let mut s = SumStack::default();
/// s.push(1.0);
/// s.push(f64::NAN);
/// s.push(2.0);
/// s.pop();
/// assert!(s.sum().is_nan());
/// s.pop();
/// assert_eq!(s.sum(), 2.0);
/// ```
#[derive(Debug, Default, Clone)]
pub(crate) struct SumStack {
    front: Vec<f64>,
    back: Vec<f64>,
    back_sum: f64,
}

impl SumStack {
    /// Adds the newest value.
    #[inline]
    pub(crate) fn push(&mut self, v: f64) {
        self.back.push(v);
        self.back_sum += v;
    }

    /// Removes the oldest value (no-op when empty).
    #[inline]
    pub(crate) fn pop(&mut self) {
        if self.front.is_empty() {
            let mut acc = 0.0;
            for &v in self.back.iter().rev() {
                acc += v;
                self.front.push(acc);
            }
            self.back.clear();
            self.back_sum = 0.0;
        }
        self.front.pop();
    }

    /// Sum of the values in the window (0 when empty).
    #[inline]
    pub(crate) fn sum(&self) -> f64 {
        match self.front.last() {
            Some(&f) => f + self.back_sum,
            None => self.back_sum,
        }
    }

    /// Values held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.front.len() + self.back.len()
    }
}

/// A value a [`MonoDeque`] orders: integers as they are, floats by arrow's
/// total order with every NaN the largest value (as `min`/`max` over floats
/// in DataFusion: `max` is NaN when any value is, `min` only when all are).
pub(crate) trait Extremum: Copy {
    /// `self` is at most `other` in that order.
    fn at_most(self, other: Self) -> bool;
}

impl Extremum for i64 {
    #[inline]
    fn at_most(self, other: Self) -> bool {
        self <= other
    }
}

impl Extremum for f64 {
    #[inline]
    fn at_most(self, other: Self) -> bool {
        let norm = |x: f64| if x.is_nan() { f64::NAN } else { x };
        norm(self).total_cmp(&norm(other)).is_le()
    }
}

/// Min or max of a sliding window: a deque of `(time, value)` whose values
/// only rise from back to front (max) or fall (min), so the front is the
/// extremum. A pushed value drops every older value it beats, which can no
/// longer be the answer; the front leaves when its time falls before the
/// window start.
///
/// ```ignore
/// let mut d = MonoDeque::new(true);
/// d.push(1, 3.0);
/// d.push(2, 1.0);
/// d.evict(2);
/// assert_eq!(d.best(), Some(1.0));
/// ```
#[derive(Debug, Clone)]
pub(crate) struct MonoDeque<T> {
    items: VecDeque<(i64, T)>,
    max: bool,
}

impl<T: Extremum> MonoDeque<T> {
    /// An empty deque for `max` (or min).
    pub(crate) fn new(max: bool) -> Self {
        Self {
            items: VecDeque::new(),
            max,
        }
    }

    /// Adds the newest value, at time `ts` (not before the previous one).
    #[inline]
    pub(crate) fn push(&mut self, ts: i64, v: T) {
        while let Some(&(_, b)) = self.items.back() {
            let dominated = if self.max { b.at_most(v) } else { v.at_most(b) };
            if !dominated {
                break;
            }
            self.items.pop_back();
        }
        self.items.push_back((ts, v));
    }

    /// Drops the values whose time is before `start`.
    #[inline]
    pub(crate) fn evict(&mut self, start: i64) {
        while self.items.front().is_some_and(|&(t, _)| t < start) {
            self.items.pop_front();
        }
    }

    /// The extremum of the window, if it holds a value.
    #[inline]
    pub(crate) fn best(&self) -> Option<T> {
        self.items.front().map(|&(_, v)| v)
    }

    /// Combines the window's extremum with one more value `v`.
    #[inline]
    pub(crate) fn with(&self, v: Option<T>) -> Option<T> {
        match (self.best(), v) {
            (Some(a), Some(b)) => Some(if self.max == a.at_most(b) { b } else { a }),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tiny deterministic generator (xorshift) so the tests need no crate.
    struct Gen(u64);
    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A random window walk: push up to 3, pop up to 3, compare with the
    /// direct computation over the values inside.
    #[test]
    fn deques_and_sums_match_direct_computation() {
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        for case in 0..200 {
            let mut window: VecDeque<(i64, f64)> = VecDeque::new();
            let (mut sum, mut min, mut max) = (
                SumStack::default(),
                MonoDeque::new(false),
                MonoDeque::new(true),
            );
            let mut t = 0i64;
            for _ in 0..300 {
                for _ in 0..g.below(4) {
                    t += g.below(3) as i64;
                    let v = match g.below(20) {
                        0 => f64::NAN,
                        1 => f64::INFINITY,
                        _ => g.below(64) as f64 / 4.0 - 8.0,
                    };
                    window.push_back((t, v));
                    sum.push(v);
                    min.push(t, v);
                    max.push(t, v);
                }
                let start = t - g.below(6) as i64;
                while window.front().is_some_and(|&(ts, _)| ts < start) {
                    window.pop_front();
                    sum.pop();
                }
                min.evict(start);
                max.evict(start);
                let vals: Vec<f64> = window.iter().map(|&(_, v)| v).collect();
                let direct: f64 = vals.iter().sum();
                let got = sum.sum();
                assert!(
                    (got.is_nan() && direct.is_nan()) || got == direct,
                    "case {case}: {got} vs {direct} over {vals:?}"
                );
                assert_eq!(sum.len(), vals.len());
                let non_nan: Vec<f64> =
                    vals.iter().copied().filter(|v| !v.is_nan()).collect();
                let want_max = if non_nan.len() < vals.len() {
                    Some(f64::NAN)
                } else {
                    non_nan.iter().copied().reduce(f64::max)
                };
                let want_min = if vals.is_empty() {
                    None
                } else if non_nan.is_empty() {
                    Some(f64::NAN)
                } else {
                    non_nan.iter().copied().reduce(f64::min)
                };
                let same = |a: Option<f64>, b: Option<f64>| match (a, b) {
                    (Some(a), Some(b)) => (a.is_nan() && b.is_nan()) || a == b,
                    (a, b) => a.is_none() && b.is_none(),
                };
                assert!(same(max.best(), want_max), "case {case} max {vals:?}");
                assert!(same(min.best(), want_min), "case {case} min {vals:?}");
            }
        }
    }

    /// The stated bound: the two-stack sum of a window is within
    /// `γ(n-1) Σ|x|` of the exact sum, as a direct sum is. Values are
    /// `m · 2^e` with small `m` and `e` in `[-30, 30]`, so the exact sum is
    /// an integer count of `2^-30` (i128) and the comparison is exact.
    #[test]
    fn sum_stack_error_is_a_direct_sums() {
        let mut g = Gen(42);
        let u = f64::EPSILON / 2.0;
        let mut worst = 0.0f64;
        for _ in 0..50 {
            let mut window: VecDeque<(f64, i128)> = VecDeque::new();
            let mut s = SumStack::default();
            for _ in 0..2000 {
                let m = g.below(2001) as i64 - 1000;
                let e = g.below(61) as i32 - 30;
                let v = m as f64 * 2f64.powi(e);
                let scaled = (m as i128) << (e + 30);
                window.push_back((v, scaled));
                s.push(v);
                if window.len() > 1 + g.below(500) as usize {
                    window.pop_front();
                    s.pop();
                    if g.below(3) == 0 {
                        window.pop_front();
                        s.pop();
                    }
                }
                let n = window.len() as f64;
                let exact: i128 = window.iter().map(|&(_, x)| x).sum();
                let exact = exact as f64 / 2f64.powi(30);
                let abs: f64 = window.iter().map(|&(v, _)| v.abs()).sum();
                let gamma = (n - 1.0).max(0.0) * u / (1.0 - n * u);
                let err = (s.sum() - exact).abs();
                // `exact` is rounded once more on the way to f64.
                assert!(
                    err <= gamma * abs * 1.000_001 + exact.abs() * u,
                    "error {err} above the bound {}",
                    gamma * abs
                );
                if abs > 0.0 {
                    worst = worst.max(err / abs);
                }
            }
        }
        assert!(worst < 1e-12);
    }

    #[test]
    fn with_combines_one_more_value() {
        let mut d = MonoDeque::new(true);
        assert_eq!(d.with(Some(2i64)), Some(2));
        d.push(0, 5i64);
        assert_eq!(d.with(Some(2)), Some(5));
        assert_eq!(d.with(Some(7)), Some(7));
        assert_eq!(d.with(None), Some(5));
        let mut m = MonoDeque::new(false);
        m.push(0, 1.0f64);
        assert!(m.with(Some(f64::NAN)) == Some(1.0));
        let mut x = MonoDeque::new(true);
        x.push(0, 1.0f64);
        assert!(x.with(Some(f64::NAN)).is_some_and(f64::is_nan));
    }
}
