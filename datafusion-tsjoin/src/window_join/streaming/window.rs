//! Sliding-window aggregate state: what the streaming path keeps per key.
//!
//! [`Sliding`] holds every aggregate of one key's window at once, as two
//! stacks ("Two-Stacks", Tangwongsan et al., *In-Order Sliding-Window
//! Aggregation in Worst-Case Constant Time*, VLDB J. 2021): new rows fold
//! into running *back* aggregates; the oldest rows sit on a *front* stack
//! that holds, for each of them, the aggregate of it and every newer front
//! row. Evicting the oldest rows pops the front; an empty front is rebuilt
//! from the window's rows, newest to oldest. Each row is folded at most
//! twice (on push, and once into the front), so a window costs O(1)
//! amortised whatever its length, and eviction is a subtraction of the
//! front's length, not a walk over the rows leaving.
//!
//! Every aggregate is a *slot* of one of four kinds, all associative with
//! an identity, so no slot needs an inverse:
//!
//! * float sums (`+`, identity 0): no subtraction, so a NaN or an infinity
//!   that left the window leaves no trace, and the error stays that of a
//!   direct sum (see [`Sliding`]);
//! * wrapping integer sums (counts of non-NULL values, `sum` of integers);
//! * minima and maxima of ordered `i64` keys: integers as they are, floats
//!   through [`f64_key`], the total order DataFusion's `min`/`max` use with
//!   every NaN the largest value. NULL rows hold the identity (`i64::MAX`
//!   for min, `i64::MIN` for max); the window's count of non-NULL values
//!   says whether the answer is NULL.
//!
//! Branch-free folds (`min`, `max`, `+` of a few slots) replace the
//! monotonic deques of an earlier version, whose pops mispredicted on
//! every random price.

use std::collections::VecDeque;

/// `x` as an `i64` whose order is `f64::total_cmp`'s with every NaN
/// mapped to the positive quiet NaN (so any NaN is above `+inf`, and
/// `-0.0 < 0.0`). [`key_f64`] inverts it (a NaN comes back as `f64::NAN`).
///
/// ```ignore
/// assert!(f64_key(-1.0) < f64_key(-0.0) && f64_key(-0.0) < f64_key(0.0));
/// assert!(f64_key(f64::INFINITY) < f64_key(-f64::NAN));
/// assert_eq!(key_f64(f64_key(2.5)), 2.5);
/// ```
#[inline]
pub(crate) fn f64_key(x: f64) -> i64 {
    let x = if x.is_nan() { f64::NAN } else { x };
    let bits = x.to_bits() as i64;
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

/// The float whose [`f64_key`] is `k`.
#[inline]
pub(crate) fn key_f64(k: i64) -> f64 {
    f64::from_bits((k ^ (((k >> 63) as u64) >> 1) as i64) as u64)
}

/// The inputs of a walk's slots, by right row (of the timeline's batch),
/// one slice per slot, borrowed for one left batch.
#[derive(Debug, Default)]
pub(crate) struct Inputs<'a> {
    /// Float sums: values, NULL rows 0.
    pub sums: Vec<&'a [f64]>,
    /// Wrapping integer sums: values (NULL rows 0), or 1 per non-NULL row.
    pub adds: Vec<&'a [i64]>,
    /// Minima: ordered keys, NULL rows `i64::MAX`.
    pub mins: Vec<&'a [i64]>,
    /// Maxima: ordered keys, NULL rows `i64::MIN`.
    pub maxs: Vec<&'a [i64]>,
}

/// Every slot of one key's window as two stacks (see the module docs).
///
/// Each entry (a front row's suffix aggregates, or the back's running
/// ones) is one run of `u64`s laid out as [`Inputs`] lists the slots:
/// float sums (as bits), integer sums, minima, maxima. One allocation per
/// stack keeps a push to one or two cache lines.
///
/// Float sums: the front's entries and the back's running sum are each
/// recursive sums of at most `n` of the window's `n` values, and the answer
/// adds the two, so it is a recursive sum of the same values in another
/// order: `|sum - exact| <= γ(n-1) Σ|x|` with `γ(k) = k·u / (1 - k·u)`,
/// `u = 2⁻⁵³`, the bound of a direct left-to-right sum (tested in
/// `float_sums_are_within_a_direct_sums_bound`). A running sum with
/// subtraction would instead accumulate error over every row that ever
/// passed through the window, and never drop a NaN.
///
/// ```ignore
/// let (v, ones) = ([1.0, f64::NAN, 2.0], [1i64, 1, 1]);
/// let inputs = Inputs { sums: vec![&v], adds: vec![&ones], ..Default::default() };
/// let mut window: VecDeque<(i64, u32)> = VecDeque::new();
/// let mut s = Sliding::new(&inputs);
/// for row in 0..3 {
///     window.push_back((row as i64, row));
/// }
/// s.evict(&inputs, &window, 1, &mut vec![]);
/// window.pop_front();
/// s.catch_up(&inputs, &window);
/// assert!(s.sum(&inputs, 0).is_nan());
/// s.evict(&inputs, &window, 1, &mut vec![]);
/// window.pop_front();
/// s.catch_up(&inputs, &window);
/// assert_eq!((s.sum(&inputs, 0), s.add(&inputs, 0)), (2.0, 1));
/// ```
#[derive(Debug, Clone, Default)]
pub(crate) struct Sliding {
    /// Rows on the front stack: the window's oldest.
    front: usize,
    /// Rows of the window (from its oldest) on the front stack or folded
    /// into the back; the rows after them were pushed since and are folded
    /// by [`Self::catch_up`].
    folded: usize,
    /// Per front row (newest first, so the oldest is on top), the
    /// aggregates of that row and every newer front row.
    fronts: Vec<u64>,
    /// The aggregates of the rows after the front.
    back: Box<[u64]>,
}

/// An entry's layout: where each kind of slot starts, and its width.
#[derive(Debug, Clone, Copy)]
struct Layout {
    adds: usize,
    mins: usize,
    maxs: usize,
    width: usize,
}

impl Layout {
    #[inline]
    fn of(inputs: &Inputs) -> Self {
        let adds = inputs.sums.len();
        let mins = adds + inputs.adds.len();
        let maxs = mins + inputs.mins.len();
        Self {
            adds,
            mins,
            maxs,
            width: maxs + inputs.maxs.len(),
        }
    }

    /// Every slot's identity.
    fn empty(self, entry: &mut [u64]) {
        entry[..self.adds].fill(0f64.to_bits());
        entry[self.adds..self.mins].fill(0);
        entry[self.mins..self.maxs].fill(i64::MAX as u64);
        entry[self.maxs..].fill(i64::MIN as u64);
    }
}

impl Sliding {
    /// An empty window with the slots of `inputs`.
    pub(crate) fn new(inputs: &Inputs) -> Self {
        let layout = Layout::of(inputs);
        let mut back = vec![0; layout.width].into_boxed_slice();
        layout.empty(&mut back);
        Self {
            back,
            ..Default::default()
        }
    }

    /// Folds the rows of `window` pushed since the last call (or
    /// eviction) into the back: the aggregates read the whole window after
    /// it. Pushing a row is only its append to the window, so a push
    /// touches no aggregate state; the fold happens when the key is asked,
    /// over rows that are then in cache together.
    #[inline]
    pub(crate) fn catch_up(&mut self, inputs: &Inputs, window: &VecDeque<(i64, u32)>) {
        for &(_, row) in window.range(self.folded..) {
            self.fold(inputs, row);
        }
        self.folded = window.len();
    }

    /// Folds row `row` into the back.
    #[inline]
    fn fold(&mut self, inputs: &Inputs, row: u32) {
        let r = row as usize;
        let l = Layout::of(inputs);
        let back = &mut self.back;
        for (acc, v) in back[..l.adds].iter_mut().zip(&inputs.sums) {
            *acc = (f64::from_bits(*acc) + v[r]).to_bits();
        }
        for (acc, v) in back[l.adds..l.mins].iter_mut().zip(&inputs.adds) {
            *acc = (*acc as i64).wrapping_add(v[r]) as u64;
        }
        for (acc, v) in back[l.mins..l.maxs].iter_mut().zip(&inputs.mins) {
            *acc = (*acc as i64).min(v[r]) as u64;
        }
        for (acc, v) in back[l.maxs..].iter_mut().zip(&inputs.maxs) {
            *acc = (*acc as i64).max(v[r]) as u64;
        }
    }

    /// Drops the `n` oldest rows of `window` (`(time, row)`, oldest first,
    /// every row pushed so far and not yet evicted; the caller removes the
    /// `n` from it afterwards). Rows only on the front: popped. More: the
    /// front is rebuilt from the rows that stay (and the back empties), so
    /// each row enters at most one rebuild. `scratch` is a buffer to reuse.
    #[inline]
    pub(crate) fn evict(
        &mut self,
        inputs: &Inputs,
        window: &VecDeque<(i64, u32)>,
        n: usize,
        scratch: &mut Vec<u32>,
    ) {
        if n <= self.front {
            self.front -= n;
            self.folded -= n;
            self.fronts.truncate(self.front * Layout::of(inputs).width);
        } else {
            self.rebuild_front(inputs, window, n, scratch);
        }
    }

    /// The front from every row of `window` from `skip` on: their suffix
    /// aggregates, newest to oldest, slot by slot; the back empties and
    /// every row is folded.
    #[cold]
    fn rebuild_front(
        &mut self,
        inputs: &Inputs,
        window: &VecDeque<(i64, u32)>,
        skip: usize,
        rows: &mut Vec<u32>,
    ) {
        let l = Layout::of(inputs);
        rows.clear();
        rows.extend(window.range(skip..).rev().map(|&(_, row)| row));
        let m = rows.len();
        self.fronts.clear();
        self.fronts.resize(m * l.width, 0);
        let w = l.width;
        // One slot at a time: a tight loop with one accumulator each.
        for (s, v) in inputs.sums.iter().enumerate() {
            let mut acc = 0.0;
            for (j, &r) in rows.iter().enumerate() {
                acc += v[r as usize];
                self.fronts[j * w + s] = acc.to_bits();
            }
        }
        for (s, v) in inputs.adds.iter().enumerate() {
            let mut acc = 0i64;
            for (j, &r) in rows.iter().enumerate() {
                acc = acc.wrapping_add(v[r as usize]);
                self.fronts[j * w + l.adds + s] = acc as u64;
            }
        }
        for (s, v) in inputs.mins.iter().enumerate() {
            let mut acc = i64::MAX;
            for (j, &r) in rows.iter().enumerate() {
                acc = acc.min(v[r as usize]);
                self.fronts[j * w + l.mins + s] = acc as u64;
            }
        }
        for (s, v) in inputs.maxs.iter().enumerate() {
            let mut acc = i64::MIN;
            for (j, &r) in rows.iter().enumerate() {
                acc = acc.max(v[r as usize]);
                self.fronts[j * w + l.maxs + s] = acc as u64;
            }
        }
        l.empty(&mut self.back);
        self.front = m;
        self.folded = m;
    }

    /// The front's top entry (the oldest row's), if any.
    #[inline]
    fn top(&self, l: Layout) -> Option<&[u64]> {
        let f = self.front;
        (f > 0).then(|| &self.fronts[(f - 1) * l.width..f * l.width])
    }

    /// The window's float sum of slot `s` (0 when empty).
    #[inline]
    pub(crate) fn sum(&self, inputs: &Inputs, s: usize) -> f64 {
        let back = f64::from_bits(self.back[s]);
        match self.top(Layout::of(inputs)) {
            None => back,
            Some(top) => f64::from_bits(top[s]) + back,
        }
    }

    /// The window's wrapping integer sum of slot `s`.
    #[inline]
    pub(crate) fn add(&self, inputs: &Inputs, s: usize) -> i64 {
        let l = Layout::of(inputs);
        let back = self.back[l.adds + s] as i64;
        self.top(l)
            .map_or(back, |top| (top[l.adds + s] as i64).wrapping_add(back))
    }

    /// The window's least key of slot `s` (`i64::MAX` when none).
    #[inline]
    pub(crate) fn min(&self, inputs: &Inputs, s: usize) -> i64 {
        let l = Layout::of(inputs);
        let back = self.back[l.mins + s] as i64;
        self.top(l)
            .map_or(back, |top| (top[l.mins + s] as i64).min(back))
    }

    /// The window's greatest key of slot `s` (`i64::MIN` when none).
    #[inline]
    pub(crate) fn max(&self, inputs: &Inputs, s: usize) -> i64 {
        let l = Layout::of(inputs);
        let back = self.back[l.maxs + s] as i64;
        self.top(l)
            .map_or(back, |top| (top[l.maxs + s] as i64).max(back))
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

    #[test]
    fn float_keys_follow_total_order_with_nan_largest() {
        let xs = [
            f64::NEG_INFINITY,
            -1e300,
            -1.0,
            -f64::MIN_POSITIVE,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            f64::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(f64_key(w[0]) < f64_key(w[1]), "{w:?}");
        }
        assert_eq!(f64_key(-f64::NAN), f64_key(f64::NAN));
        assert!(f64_key(f64::INFINITY) < f64_key(f64::NAN));
        for x in xs {
            assert_eq!(key_f64(f64_key(x)).to_bits(), x.to_bits());
        }
        assert!(key_f64(f64_key(-f64::NAN)).is_nan());
    }

    /// A random window walk over values with NULLs, NaN, infinities and
    /// signed zeros: push up to 3, evict up to the whole window, compare
    /// every slot with the direct computation over the rows inside.
    #[test]
    fn slots_match_direct_computation() {
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        for case in 0..200 {
            let rows = 1000;
            let mut vals = vec![0.0; rows];
            let mut valid = vec![true; rows];
            for (v, ok) in vals.iter_mut().zip(valid.iter_mut()) {
                *v = match g.below(24) {
                    0 => f64::NAN,
                    1 => f64::INFINITY,
                    2 => -0.0,
                    3 => 0.0,
                    _ => g.below(64) as f64 / 4.0 - 8.0,
                };
                *ok = g.below(6) != 0;
            }
            let sums: Vec<f64> = vals
                .iter()
                .zip(&valid)
                .map(|(&v, &ok)| if ok { v } else { 0.0 })
                .collect();
            let ones: Vec<i64> = valid.iter().map(|&ok| ok as i64).collect();
            let keys = |identity: i64| -> Vec<i64> {
                vals.iter()
                    .zip(&valid)
                    .map(|(&v, &ok)| if ok { f64_key(v) } else { identity })
                    .collect()
            };
            let (mins, maxs) = (keys(i64::MAX), keys(i64::MIN));
            let inputs = Inputs {
                sums: vec![&sums],
                adds: vec![&ones],
                mins: vec![&mins],
                maxs: vec![&maxs],
            };
            let mut s = Sliding::new(&inputs);
            let mut window: VecDeque<(i64, u32)> = VecDeque::new();
            let mut next = 0u32;
            while (next as usize) < rows {
                for _ in 0..g.below(4) {
                    if (next as usize) < rows {
                        window.push_back((next as i64, next));
                        next += 1;
                    }
                    if g.below(3) == 0 {
                        s.catch_up(&inputs, &window);
                    }
                }
                let n = (g.below(4) as usize).min(window.len());
                s.evict(&inputs, &window, n, &mut vec![]);
                window.drain(..n);
                s.catch_up(&inputs, &window);
                let inside: Vec<usize> =
                    window.iter().map(|&(_, r)| r as usize).collect();
                let direct: f64 = inside.iter().map(|&r| sums[r]).sum();
                let got = s.sum(&inputs, 0);
                assert!(
                    (got.is_nan() && direct.is_nan()) || got == direct,
                    "case {case}: {got} vs {direct}"
                );
                let count = inside.iter().filter(|&&r| valid[r]).count() as i64;
                assert_eq!(s.add(&inputs, 0), count);
                let present: Vec<f64> = inside
                    .iter()
                    .filter(|&&r| valid[r])
                    .map(|&r| vals[r])
                    .collect();
                let by_order = |a: &f64, b: &f64| f64_key(*a).cmp(&f64_key(*b));
                let want_min = present.iter().copied().min_by(by_order);
                let want_max = present.iter().copied().max_by(by_order);
                let as_value = |k: i64| (count > 0).then(|| key_f64(k));
                let same = |a: Option<f64>, b: Option<f64>| match (a, b) {
                    (Some(a), Some(b)) => {
                        (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
                    }
                    (a, b) => a.is_none() && b.is_none(),
                };
                assert!(
                    same(as_value(s.min(&inputs, 0)), want_min),
                    "case {case} min"
                );
                assert!(
                    same(as_value(s.max(&inputs, 0)), want_max),
                    "case {case} max"
                );
            }
        }
    }

    /// The stated bound: the two-stack sum of a window is within
    /// `γ(n-1) Σ|x|` of the exact sum, as a direct sum is. Values are
    /// `m · 2^e` with small `m` and `e` in `[-30, 30]`, so the exact sum is
    /// an integer count of `2^-30` (i128) and the comparison is exact.
    #[test]
    fn float_sums_are_within_a_direct_sums_bound() {
        let mut g = Gen(42);
        let u = f64::EPSILON / 2.0;
        let mut worst = 0.0f64;
        for _ in 0..50 {
            let rows = 2000;
            let (mut vals, mut scaled) = (vec![0.0; rows], vec![0i128; rows]);
            for (v, x) in vals.iter_mut().zip(scaled.iter_mut()) {
                let m = g.below(2001) as i64 - 1000;
                let e = g.below(61) as i32 - 30;
                *v = m as f64 * 2f64.powi(e);
                *x = (m as i128) << (e + 30);
            }
            let inputs = Inputs {
                sums: vec![&vals],
                ..Default::default()
            };
            let mut s = Sliding::new(&inputs);
            let mut window: VecDeque<(i64, u32)> = VecDeque::new();
            for row in 0..rows as u32 {
                window.push_back((row as i64, row));
                if window.len() > 1 + g.below(500) as usize {
                    let n = 1 + (g.below(3) == 0) as usize;
                    s.evict(&inputs, &window, n, &mut vec![]);
                    window.drain(..n);
                }
                s.catch_up(&inputs, &window);
                let n = window.len() as f64;
                let exact: i128 = window.iter().map(|&(_, r)| scaled[r as usize]).sum();
                let exact = exact as f64 / 2f64.powi(30);
                let abs: f64 = window.iter().map(|&(_, r)| vals[r as usize].abs()).sum();
                let gamma = (n - 1.0).max(0.0) * u / (1.0 - n * u);
                let err = (s.sum(&inputs, 0) - exact).abs();
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
}
