//! One group's histogram counts, stored as compactly as the group allows.
//!
//! A dense counts array per group is what makes naive per-group
//! HdrHistograms unusable at high cardinality (3.7 GiB at 100K groups,
//! precision 3). A group starts with a few unsorted `(key, count)` slots;
//! once it outgrows them it becomes a dense array over the keys it spans
//! when at least a quarter of that span is in use, and a hash map of the
//! keys in use otherwise. Counts are integers, so merging groups is exact.

use datafusion::common::HashMap;
use std::mem::size_of;

/// Slots a group keeps unsorted before it turns dense or hashed.
const SPARSE_SLOTS: usize = 16;
/// A dense span never has to be more than this many times the keys in use
/// (or [`DENSE_FREE_SPAN`] keys, whichever is more).
const DENSE_FILL: usize = 4;
/// A span this small may always be dense.
const DENSE_FREE_SPAN: usize = 256;

/// The counts of one group.
#[derive(Debug, Default, Clone)]
pub(crate) enum Slots {
    /// Nothing recorded.
    #[default]
    Empty,
    /// At most [`SPARSE_SLOTS`] distinct keys, unsorted.
    Sparse(Vec<(u32, u64)>),
    /// Counts of keys `base..base + counts.len()`; `used` of them non-zero.
    Dense {
        base: u32,
        used: u32,
        counts: Vec<u64>,
    },
    /// Many distinct keys spread too thinly for a dense array.
    Map(Box<HashMap<u32, u64>>),
}

impl Slots {
    /// Adds one to `key`'s count.
    #[inline]
    pub fn add(&mut self, key: u32) {
        if !self.add_fast(key) {
            self.add_n(key, 1);
        }
    }

    /// The common case of [`Slots::add`], without allocating: `false` when
    /// the slow path must run.
    #[inline]
    pub fn add_fast(&mut self, key: u32) -> bool {
        match self {
            Slots::Dense { base, used, counts } => {
                let i = key.wrapping_sub(*base) as usize;
                if let Some(c) = counts.get_mut(i) {
                    *used += (*c == 0) as u32;
                    *c += 1;
                    return true;
                }
                false
            }
            Slots::Sparse(v) => {
                for s in v.iter_mut() {
                    if s.0 == key {
                        s.1 += 1;
                        return true;
                    }
                }
                false
            }
            _ => false,
        }
    }

    /// Adds `n` to `key`'s count (any representation, may allocate).
    pub fn add_n(&mut self, key: u32, n: u64) {
        if n == 0 {
            return;
        }
        match self {
            Slots::Empty => *self = Slots::Sparse(vec![(key, n)]),
            Slots::Sparse(v) => {
                if let Some(s) = v.iter_mut().find(|s| s.0 == key) {
                    s.1 += n;
                } else if v.len() < SPARSE_SLOTS {
                    v.push((key, n));
                } else {
                    let mut entries = std::mem::take(v);
                    entries.push((key, n));
                    *self = Self::from_entries(entries);
                }
            }
            Slots::Dense { base, used, counts } => {
                let i = key.wrapping_sub(*base) as usize;
                if let Some(c) = counts.get_mut(i) {
                    *used += (*c == 0) as u32;
                    *c += n;
                    return;
                }
                let lo = (*base).min(key);
                let hi = (*base as usize + counts.len() - 1).max(key as usize);
                let span = hi - lo as usize + 1;
                if span <= dense_limit(*used as usize + 1) {
                    let mut grown = vec![0u64; span];
                    let at = (*base - lo) as usize;
                    grown[at..at + counts.len()].copy_from_slice(counts);
                    grown[(key - lo) as usize] = n;
                    *base = lo;
                    *used += 1;
                    *counts = grown;
                } else {
                    let mut entries = self.entries();
                    entries.push((key, n));
                    *self = Self::from_entries(entries);
                }
            }
            Slots::Map(map) => {
                *map.entry(key).or_insert(0) += n;
                // Turn dense once the keys in use fill enough of their span.
                let len = map.len();
                if len.is_power_of_two() && len >= 64 {
                    let (lo, hi) = map
                        .keys()
                        .fold((u32::MAX, 0), |(l, h), &k| (l.min(k), h.max(k)));
                    if ((hi - lo) as usize) < dense_limit(len) {
                        let entries = self.entries();
                        *self = Self::from_entries(entries);
                    }
                }
            }
        }
    }

    /// Subtracts one from `key`'s count (a window frame's row leaving).
    pub fn remove(&mut self, key: u32) {
        match self {
            Slots::Empty => {}
            Slots::Sparse(v) => {
                if let Some(i) = v.iter().position(|s| s.0 == key) {
                    v[i].1 -= 1;
                    if v[i].1 == 0 {
                        v.swap_remove(i);
                    }
                }
            }
            Slots::Dense { base, used, counts } => {
                if let Some(c) = counts.get_mut(key.wrapping_sub(*base) as usize)
                    && *c > 0
                {
                    *c -= 1;
                    *used -= (*c == 0) as u32;
                }
            }
            Slots::Map(map) => {
                if let Some(c) = map.get_mut(&key) {
                    *c -= 1;
                    if *c == 0 {
                        map.remove(&key);
                    }
                }
            }
        }
    }

    /// The best representation of `entries` (distinct keys, any order).
    fn from_entries(entries: Vec<(u32, u64)>) -> Self {
        if entries.is_empty() {
            return Slots::Empty;
        }
        if entries.len() <= SPARSE_SLOTS {
            return Slots::Sparse(entries);
        }
        let (lo, hi) = entries
            .iter()
            .fold((u32::MAX, 0), |(l, h), &(k, _)| (l.min(k), h.max(k)));
        let span = (hi - lo) as usize + 1;
        if span <= dense_limit(entries.len()) {
            let mut counts = vec![0u64; span];
            for &(k, c) in &entries {
                counts[(k - lo) as usize] += c;
            }
            Slots::Dense {
                base: lo,
                used: entries.len() as u32,
                counts,
            }
        } else {
            let mut map = HashMap::with_capacity(entries.len());
            map.extend(entries);
            Slots::Map(Box::new(map))
        }
    }

    /// The non-zero `(key, count)` pairs in ascending key order.
    pub fn entries(&self) -> Vec<(u32, u64)> {
        let mut v = match self {
            Slots::Empty => return vec![],
            Slots::Sparse(v) => v.clone(),
            Slots::Dense { base, counts, .. } => {
                return counts
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0)
                    .map(|(i, &c)| (base + i as u32, c))
                    .collect();
            }
            Slots::Map(map) => map.iter().map(|(&k, &c)| (k, c)).collect(),
        };
        v.sort_unstable_by_key(|e| e.0);
        v
    }

    /// Calls `f` with each non-zero `(key, count)` in ascending key order
    /// until it returns `false`.
    pub fn walk(&self, mut f: impl FnMut(u32, u64) -> bool) {
        match self {
            Slots::Empty => {}
            Slots::Dense { base, counts, .. } => {
                for (i, &c) in counts.iter().enumerate() {
                    if c > 0 && !f(base + i as u32, c) {
                        return;
                    }
                }
            }
            _ => {
                for (k, c) in self.entries() {
                    if !f(k, c) {
                        return;
                    }
                }
            }
        }
    }

    /// Merges `other` into `self`.
    #[cfg(test)]
    pub fn merge(&mut self, other: &Slots) {
        if let Slots::Empty = self {
            *self = other.clone();
            return;
        }
        other.walk(|k, c| {
            self.add_n(k, c);
            true
        });
    }

    /// Heap bytes this group holds.
    pub fn heap_size(&self) -> usize {
        match self {
            Slots::Empty => 0,
            Slots::Sparse(v) => v.capacity() * size_of::<(u32, u64)>(),
            Slots::Dense { counts, .. } => counts.capacity() * size_of::<u64>(),
            Slots::Map(map) => {
                size_of::<HashMap<u32, u64>>()
                    + map.capacity() * (size_of::<(u32, u64)>() + 1)
            }
        }
    }

    /// Appends the state encoding: LEB128 `(key delta, count)` pairs in
    /// ascending key order.
    pub fn encode(&self, out: &mut Vec<u8>) {
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

fn dense_limit(used: usize) -> usize {
    (used * DENSE_FILL).max(DENSE_FREE_SPAN)
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
        for case in 0..300 {
            let spread: u32 = [4, 64, 600, 100_000, 6_000_000][case % 5];
            let n = rng.random_range(0..2000);
            let mut s = Slots::default();
            let mut want = BTreeMap::new();
            for _ in 0..n {
                let k = rng.random_range(0..spread);
                s.add(k);
                *want.entry(k).or_insert(0u64) += 1;
                if rng.random_bool(0.05) {
                    s.remove(k);
                    let c = want.get_mut(&k).unwrap();
                    *c -= 1;
                    if *c == 0 {
                        want.remove(&k);
                    }
                }
            }
            let want: Vec<_> = want.into_iter().collect();
            assert_eq!(s.entries(), want, "case {case}");
            let mut bytes = vec![];
            s.encode(&mut bytes);
            let mut back = Slots::default();
            Slots::decode(&bytes, |k, c| back.add_n(k, c)).unwrap();
            assert_eq!(back.entries(), want);
            let mut merged = s.clone();
            merged.merge(&back);
            let doubled: Vec<_> = want.iter().map(|&(k, c)| (k, 2 * c)).collect();
            assert_eq!(merged.entries(), doubled);
            // Never a dense array much wider than the keys in use.
            if let Slots::Dense { counts, .. } = &s {
                assert!(counts.len() <= dense_limit(want.len() + 1));
            }
        }
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
        assert!(matches!(s, Slots::Sparse(_)));
        assert!(s.heap_size() <= SPARSE_SLOTS * 16);
        assert!(Slots::decode(&[0x80], |_, _| ()).is_none());
    }
}
