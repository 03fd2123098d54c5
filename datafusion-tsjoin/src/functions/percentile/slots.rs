//! One group's histogram counts, stored as compactly as the group allows
//! and cheap to add to.
//!
//! A dense counts array per group is what makes naive per-group
//! HdrHistograms unusable at high cardinality (3.7 GiB at 100K groups,
//! precision 3); a hash map or a searched slot list per group makes every
//! row slow. So a group appends the keys of new values to a plain buffer
//! (`pending`: no search, no branch on a representation) and counts them
//! only when the buffer fills: sorted, run-length counted and merged into
//! the group's counts, which are a dense array over the keys they span when
//! that is small enough (at most [`DENSE_FILL`] times the keys in use, or
//! the number of values recorded), and sorted `(key, count)` pairs
//! otherwise. Once dense, a value whose key is in the array's span is
//! counted in place. A quiet group is just its few keys (4 bytes a value);
//! a busy one is a counts array. Counts are integers, so merging is exact.

use std::mem::size_of;

/// A group's buffer is counted once it holds this many keys (or as many as
/// the group has distinct keys, whichever is more, so that merging into
/// many sorted pairs stays linear overall).
const PENDING_LIMIT: usize = 1024;
/// A group's buffer holds this many keys at first.
const FIRST_PENDING: usize = 16;
/// A dense array never spans more than this many times the keys in use,
/// unless it spans fewer keys than the values it counts (or
/// [`DENSE_FREE_SPAN`]).
const DENSE_FILL: usize = 4;
/// A span this small may always be dense.
const DENSE_FREE_SPAN: usize = 256;

/// The counts of one group.
///
/// ```ignore
/// let mut s = Slots::default();
/// s.add(7);
/// s.add(7);
/// assert_eq!(s.entries(), [(7, 2)]);
/// ```
#[derive(Debug, Default, Clone)]
pub(crate) struct Slots {
    /// Keys recorded and not yet counted, one per value, in any order.
    pending: Vec<u32>,
    /// The counted keys.
    counts: Counts,
}

/// The counted part of a group.
#[derive(Debug, Default, Clone)]
enum Counts {
    /// Nothing counted.
    #[default]
    Empty,
    /// Counts of keys `base..base + counts.len()`.
    Dense { base: u32, counts: Box<[u64]> },
    /// Non-zero counts in ascending key order.
    Sorted(Vec<(u32, u64)>),
}

impl Slots {
    /// Adds one to `key`'s count.
    #[inline]
    pub fn add(&mut self, key: u32) {
        if !self.add_fast(key) {
            self.add_slow(key);
        }
    }

    /// [`Slots::add`] when it neither allocates nor counts the buffer (so
    /// the group's heap size does not change); `false` otherwise, and
    /// nothing was added.
    #[inline]
    pub fn add_fast(&mut self, key: u32) -> bool {
        if let Counts::Dense { base, counts } = &mut self.counts
            && let Some(c) = counts.get_mut(key.wrapping_sub(*base) as usize)
        {
            *c += 1;
            return true;
        }
        let len = self.pending.len();
        if len < self.pending.capacity() && len + 1 < PENDING_LIMIT {
            self.pending.push(key);
            return true;
        }
        false
    }

    /// The rest of [`Slots::add`]: the buffer grows or is counted.
    #[cold]
    #[inline(never)]
    pub fn add_slow(&mut self, key: u32) {
        if self.add_fast(key) {
            return;
        }
        if self.pending.capacity() == 0 {
            // Past a group's first few values at once: at many groups each
            // growth is a cache miss and a copy.
            self.pending.reserve_exact(FIRST_PENDING);
        }
        self.pending.push(key);
        let limit = match &self.counts {
            Counts::Sorted(v) => v.len().max(PENDING_LIMIT),
            _ => PENDING_LIMIT,
        };
        if self.pending.len() >= limit {
            self.flush();
        }
    }

    /// Counts the buffered keys.
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        self.add_keys(&mut pending);
        pending.clear();
        self.pending = pending;
    }

    /// Adds `(key, count)` pairs in ascending key order (distinct keys) to
    /// the counts, choosing their representation anew when they do not fit.
    fn absorb(&mut self, pairs: &[(u32, u64)]) {
        let (Some(first), Some(last)) = (pairs.first(), pairs.last()) else {
            return;
        };
        if let Counts::Dense { base, counts } = &mut self.counts {
            let end = *base as u64 + counts.len() as u64;
            if first.0 >= *base && (last.0 as u64) < end {
                for &(k, c) in pairs {
                    counts[(k - *base) as usize] += c;
                }
                return;
            }
        }
        let mut merged = Vec::with_capacity(pairs.len() + self.counted_len());
        let mut theirs = pairs.iter().copied().peekable();
        self.walk_counts(|k, c| {
            while let Some(&(pk, pc)) = theirs.peek() {
                if pk >= k {
                    break;
                }
                merged.push((pk, pc));
                theirs.next();
            }
            match theirs.peek() {
                Some(&(pk, pc)) if pk == k => {
                    merged.push((k, c + pc));
                    theirs.next();
                }
                _ => merged.push((k, c)),
            }
            true
        });
        merged.extend(theirs);
        self.counts = Counts::from_sorted(merged);
    }

    /// An upper bound of the counted keys in use.
    fn counted_len(&self) -> usize {
        match &self.counts {
            Counts::Empty => 0,
            Counts::Dense { counts, .. } => counts.len(),
            Counts::Sorted(v) => v.len(),
        }
    }

    /// Adds the pairs of a partial state (ascending, distinct keys).
    pub fn merge_sorted(&mut self, pairs: &[(u32, u64)]) {
        if pairs.iter().all(|p| p.1 == 1) && pairs.len() < PENDING_LIMIT {
            for &(k, _) in pairs {
                self.add(k);
            }
        } else {
            self.absorb(pairs);
        }
    }

    /// Adds the counts of `other` (another partition's slots of the same
    /// group): a copy when this group is empty.
    pub fn merge_slots(&mut self, other: &Slots) {
        if self.is_empty() {
            if matches!(other.counts, Counts::Empty) {
                // Room for another partition's share of the group too.
                let room = (2 * other.pending.len()).min(PENDING_LIMIT);
                self.pending.reserve_exact(room);
                self.pending.extend_from_slice(&other.pending);
            } else {
                self.clone_from(other);
            }
            return;
        }
        if !matches!(other.counts, Counts::Empty) && !self.add_dense(&other.counts) {
            let mut pairs = Vec::with_capacity(other.counted_len());
            other.walk_counts(|k, c| {
                pairs.push((k, c));
                true
            });
            self.absorb(&pairs);
        }
        for &k in &other.pending {
            self.add(k);
        }
    }

    /// Dense counts into dense counts where one array spans the other: the
    /// wider one adds the other in place. `false` (nothing added) otherwise.
    fn add_dense(&mut self, theirs: &Counts) -> bool {
        let (Counts::Dense { base, counts }, Counts::Dense { base: b, counts: c }) =
            (&mut self.counts, theirs)
        else {
            return false;
        };
        // Where `inner` starts in `outer`, when `outer` spans it.
        let offset = |outer: u32, outer_len: usize, inner: u32, inner_len: usize| {
            let at = inner.checked_sub(outer)? as usize;
            (at + inner_len <= outer_len).then_some(at)
        };
        let add_at = |outer: &mut [u64], at: usize, inner: &[u64]| {
            let span = &mut outer[at..at + inner.len()];
            span.iter_mut().zip(inner).for_each(|(x, y)| *x += y);
        };
        if let Some(at) = offset(*base, counts.len(), *b, c.len()) {
            add_at(counts, at, c);
        } else if let Some(at) = offset(*b, c.len(), *base, counts.len()) {
            let mine = std::mem::replace(counts, c.clone());
            add_at(counts, at, &mine);
            *base = *b;
        } else {
            return false;
        }
        true
    }

    /// Whether the group holds no value.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && matches!(self.counts, Counts::Empty)
    }

    /// Buffers `keys` (no count, whatever the buffer's length: for a
    /// group about to be answered or encoded).
    pub fn extend_buffer(&mut self, keys: &[u32]) {
        self.pending.extend_from_slice(keys);
    }

    /// Counts `keys` (reordered) at once.
    pub fn add_keys(&mut self, keys: &mut [u32]) {
        keys.sort_unstable();
        self.absorb(&runs(keys));
    }

    /// The group's keys, one per value in any order, while none is counted
    /// (a small group's whole histogram).
    pub fn only_buffered(&mut self) -> Option<&mut [u32]> {
        matches!(self.counts, Counts::Empty).then_some(self.pending.as_mut_slice())
    }

    /// These slots with the buffer counted.
    #[cfg(test)]
    pub fn counted(mut self) -> Self {
        self.flush();
        self
    }

    /// The number of values counted and buffered.
    pub fn total(&self) -> u64 {
        self.pending.len() as u64
            + match &self.counts {
                Counts::Empty => 0,
                Counts::Dense { counts, .. } => counts.iter().sum(),
                Counts::Sorted(v) => v.iter().map(|p| p.1).sum(),
            }
    }

    /// Adds `n` to `key`'s count.
    #[cfg(test)]
    pub fn add_n(&mut self, key: u32, n: u64) {
        match n {
            0 => {}
            1 => self.add(key),
            n => self.absorb(&[(key, n)]),
        }
    }

    /// Subtracts one from `key`'s count (a window frame's row leaving).
    pub fn remove(&mut self, key: u32) {
        if let Some(i) = self.pending.iter().position(|&k| k == key) {
            self.pending.swap_remove(i);
            return;
        }
        match &mut self.counts {
            Counts::Empty => {}
            Counts::Dense { base, counts } => {
                if let Some(c) = counts.get_mut(key.wrapping_sub(*base) as usize) {
                    *c = c.saturating_sub(1);
                }
            }
            Counts::Sorted(v) => {
                if let Ok(i) = v.binary_search_by_key(&key, |e| e.0) {
                    v[i].1 -= 1;
                    if v[i].1 == 0 {
                        v.remove(i);
                    }
                }
            }
        }
    }

    /// The non-zero `(key, count)` pairs in ascending key order.
    #[cfg(test)]
    pub fn entries(&self) -> Vec<(u32, u64)> {
        let mut v = vec![];
        self.clone().walk(|k, c| {
            v.push((k, c));
            true
        });
        v
    }

    /// Calls `f` with each counted non-zero `(key, count)` in ascending key
    /// order until it returns `false`; the buffer is not included.
    fn walk_counts(&self, mut f: impl FnMut(u32, u64) -> bool) {
        match &self.counts {
            Counts::Empty => {}
            Counts::Dense { base, counts } => {
                for (i, &c) in counts.iter().enumerate() {
                    if c > 0 && !f(base + i as u32, c) {
                        return;
                    }
                }
            }
            Counts::Sorted(v) => {
                for &(k, c) in v {
                    if !f(k, c) {
                        return;
                    }
                }
            }
        }
    }

    /// Calls `f` with each non-zero `(key, count)` in ascending key order
    /// until it returns `false`. Sorts the buffer in place (no allocation).
    pub fn walk(&mut self, mut f: impl FnMut(u32, u64) -> bool) {
        self.pending.sort_unstable();
        let pending = &self.pending;
        let mut i = 0;
        // The buffer's next run of equal keys, as (key, count).
        let next_run = |i: &mut usize| -> Option<(u32, u64)> {
            let k = *pending.get(*i)?;
            let start = *i;
            while *i < pending.len() && pending[*i] == k {
                *i += 1;
            }
            Some((k, (*i - start) as u64))
        };
        let mut run = next_run(&mut i);
        let mut go = true;
        self.walk_counts(|k, c| {
            let mut c = c;
            while let Some((pk, pc)) = run {
                if pk > k {
                    break;
                }
                if pk == k {
                    c += pc;
                } else if !f(pk, pc) {
                    go = false;
                    return false;
                }
                run = next_run(&mut i);
            }
            go = f(k, c);
            go
        });
        while go && let Some((pk, pc)) = run {
            go = f(pk, pc);
            run = next_run(&mut i);
        }
    }

    /// Merges `other` into `self`.
    #[cfg(test)]
    pub fn merge(&mut self, other: &Slots) {
        let mut pairs = vec![];
        other.clone().walk(|k, c| {
            pairs.push((k, c));
            true
        });
        self.merge_sorted(&pairs);
    }

    /// Heap bytes this group holds.
    pub fn heap_size(&self) -> usize {
        self.pending.capacity() * size_of::<u32>()
            + match &self.counts {
                Counts::Empty => 0,
                Counts::Dense { counts, .. } => counts.len() * size_of::<u64>(),
                Counts::Sorted(v) => v.capacity() * size_of::<(u32, u64)>(),
            }
    }

    /// Appends the state encoding: LEB128 `(key delta, count)` pairs in
    /// ascending key order.
    pub fn encode(&mut self, out: &mut Vec<u8>) {
        let mut prev = 0u32;
        self.walk(|k, c| {
            put_varint(out, (k - prev) as u64);
            put_varint(out, c);
            prev = k;
            true
        });
    }

    /// The [`Slots::encode`]d state of one value with key `key`, without
    /// building its slots.
    pub fn encode_one(key: u32, out: &mut Vec<u8>) {
        put_varint(out, key as u64);
        put_varint(out, 1);
    }

    /// Calls `f` for each `(key, count)` of an [`Slots::encode`]d state.
    pub fn decode(mut bytes: &[u8], mut f: impl FnMut(u32, u64)) -> Option<()> {
        let mut key = 0u32;
        while !bytes.is_empty() {
            let delta = get_varint(&mut bytes)?;
            let count = get_varint(&mut bytes)?;
            key = key.checked_add(u32::try_from(delta).ok()?)?;
            f(key, count);
        }
        Some(())
    }
}

impl Counts {
    /// The best representation of `pairs` (ascending, distinct keys).
    fn from_sorted(pairs: Vec<(u32, u64)>) -> Self {
        let (Some(&(lo, _)), Some(&(hi, _))) = (pairs.first(), pairs.last()) else {
            return Counts::Empty;
        };
        let span = (hi - lo) as usize + 1;
        let values: u64 = pairs.iter().map(|p| p.1).sum();
        let limit = (pairs.len() * DENSE_FILL)
            .max(DENSE_FREE_SPAN)
            .max(values.min(usize::MAX as u64) as usize);
        if span <= limit {
            let mut counts = vec![0u64; span].into_boxed_slice();
            for (k, c) in pairs {
                counts[(k - lo) as usize] = c;
            }
            Counts::Dense { base: lo, counts }
        } else {
            Counts::Sorted(pairs)
        }
    }
}

/// Run-length counts of sorted keys.
fn runs(sorted: &[u32]) -> Vec<(u32, u64)> {
    let mut out: Vec<(u32, u64)> = Vec::with_capacity(sorted.len());
    for &k in sorted {
        match out.last_mut() {
            Some(last) if last.0 == k => last.1 += 1,
            _ => out.push((k, 1)),
        }
    }
    out
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};
    use std::collections::BTreeMap;

    #[test]
    fn every_representation_counts_like_a_map() {
        let mut rng = StdRng::seed_from_u64(7);
        for case in 0..400 {
            let spread: u32 = [4, 64, 600, 100_000, 6_000_000][case % 5];
            let n = rng.random_range(0..[2000, 6000][case % 2]);
            let mut s = Slots::default();
            let mut want = BTreeMap::new();
            for _ in 0..n {
                let k = rng.random_range(0..spread);
                if rng.random_bool(0.02) {
                    let c = rng.random_range(0..5);
                    s.add_n(k, c);
                    *want.entry(k).or_insert(0u64) += c;
                } else {
                    s.add(k);
                    *want.entry(k).or_insert(0u64) += 1;
                }
                if rng.random_bool(0.05) {
                    s.remove(k);
                    let c = want.get_mut(&k).unwrap();
                    *c = c.saturating_sub(1);
                }
                if rng.random_bool(0.001) {
                    // A walk in the middle (sorts the buffer in place).
                    s.walk(|_, _| true);
                }
            }
            want.retain(|_, c| *c > 0);
            let want: Vec<_> = want.into_iter().collect();
            assert_eq!(s.entries(), want, "case {case}");
            let mut bytes = vec![];
            s.encode(&mut bytes);
            let mut back = Slots::default();
            let mut pairs = vec![];
            Slots::decode(&bytes, |k, c| pairs.push((k, c))).unwrap();
            back.merge_sorted(&pairs);
            assert_eq!(back.entries(), want);
            let mut merged = s.clone();
            merged.merge(&back);
            let doubled: Vec<_> = want.iter().map(|&(k, c)| (k, 2 * c)).collect();
            assert_eq!(merged.entries(), doubled);
            // Stopping a walk early.
            let mut seen = 0;
            s.walk(|_, _| {
                seen += 1;
                seen < 3
            });
            assert_eq!(seen, want.len().min(3));
            // Never a dense array much wider than the keys in use or the
            // values counted.
            if let Counts::Dense { counts, .. } = &s.counts {
                let values: u64 = want.iter().map(|e| e.1).sum();
                let limit = (want.len() * DENSE_FILL)
                    .max(DENSE_FREE_SPAN)
                    .max(values as usize);
                assert!(counts.len() <= 2 * limit + 64, "case {case}");
            }
        }
    }

    /// Merging another partition's slots (of any representation, empty or
    /// not) adds the counts.
    #[test]
    fn merged_slots_add_up() {
        let mut rng = StdRng::seed_from_u64(11);
        for case in 0..300 {
            let mut pair = [Slots::default(), Slots::default()];
            let mut want = BTreeMap::new();
            for s in &mut pair {
                let spread: u32 = [4, 600, 100_000][rng.random_range(0..3)];
                for _ in 0..rng.random_range(0..[10, 3000][case % 2]) {
                    let k = rng.random_range(0..spread);
                    s.add(k);
                    *want.entry(k).or_insert(0u64) += 1;
                }
            }
            let [mut a, b] = pair;
            a.merge_slots(&b);
            let want: Vec<_> = want.into_iter().collect();
            assert_eq!(a.entries(), want, "case {case}");
        }
    }

    #[test]
    fn a_busy_narrow_group_turns_dense() {
        let mut s = Slots::default();
        for i in 0..10_000u32 {
            s.add(i % 3000);
        }
        assert!(matches!(s.counts, Counts::Dense { .. }));
        assert!(s.pending.len() < PENDING_LIMIT);
    }

    #[test]
    fn one_value_encodes_like_its_slots() {
        for key in [0, 1, 127, 128, 300_000, u32::MAX] {
            let mut one = Slots::default();
            one.add(key);
            let (mut a, mut b) = (vec![], vec![]);
            one.encode(&mut a);
            Slots::encode_one(key, &mut b);
            assert_eq!(a, b, "key {key}");
        }
    }

    #[test]
    fn a_quiet_group_stays_small() {
        let mut s = Slots::default();
        for k in [5, 6_000_000, 5, 17] {
            s.add(k);
        }
        assert!(matches!(s.counts, Counts::Empty));
        assert!(s.heap_size() <= FIRST_PENDING * size_of::<u32>());
        assert!(Slots::decode(&[0x80], |_, _| ()).is_none());
    }
}
