//! One group's histogram counts, stored as compactly as the group allows
//! and cheap to add to.
//!
//! A dense counts array per group is what makes naive per-group
//! HdrHistograms unusable at high cardinality (3.7 GiB at 100K groups,
//! precision 3); a hash map or a searched slot list per group makes every
//! row slow. So a group appends the keys of new values to a plain buffer
//! (`pending`: no search, no branch on a representation) and counts them
//! only when the buffer fills. The counts are a dense array over the keys
//! they span when that is small enough (at most [`DENSE_FILL`] times the
//! keys in use, or twice the number of values recorded), and sorted
//! `(key, count)` pairs otherwise. A buffer that keeps the group within
//! that limit is counted into the dense array in one pass (the array
//! widened when needed); otherwise it is sorted, run-length counted and
//! merged into the pairs. Once dense, a value whose key is in the array's
//! span is counted in place.
//!
//! Dense counts are `u32` (half the bytes a key, so twice the span for the
//! same memory: a busy group over a wide span of keys, precision 3 say,
//! turns dense at its first count instead of merging sorted pairs again
//! and again); a count that would pass `u32::MAX` moves the group to
//! sorted pairs, whose counts are `u64`. A quiet group is just its few keys
//! (4 bytes a value); a busy one is a counts array. Counts are integers, so
//! merging is exact.

use crate::kernels::prefetch;
use std::mem::size_of;

/// A group's buffer is counted once it holds this many keys (or as many as
/// the group has distinct keys, whichever is more, so that merging into
/// many sorted pairs stays linear overall). 2,048 values of a busy group
/// are enough to make it dense at once where they span a few octaves of
/// keys at precision 3 (about 10,000 keys for doubles); 1,024 were not,
/// and the group went through sorted pairs first.
const PENDING_LIMIT: usize = 2048;
/// A group's buffer holds this many keys at first.
const FIRST_PENDING: usize = 16;
/// A dense array never spans more than this many times the keys in use,
/// unless it spans fewer keys than twice the values it counts (or
/// [`DENSE_FREE_SPAN`]): at most 32 bytes a key in use, 8 a value, as
/// sorted pairs of 16 bytes would take half full.
const DENSE_FILL: usize = 8;
/// A span this small may always be dense (2 KiB).
const DENSE_FREE_SPAN: usize = 512;

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
    /// Counts of keys `base..base + counts.len()`, each at most
    /// `u32::MAX`.
    Dense { base: u32, counts: Box<[u32]> },
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
            && *c < u32::MAX
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

    /// Asks the CPU to fetch `key`'s count into the cache when the group
    /// counts it in place (a hint: no effect on the counts).
    #[inline(always)]
    pub fn prefetch(&self, key: u32) {
        if let Counts::Dense { base, counts } = &self.counts
            && let Some(c) = counts.get(key.wrapping_sub(*base) as usize)
        {
            prefetch(c);
        }
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
            let fits = |&(k, c): &(u32, u64)| counts[(k - *base) as usize] as u64 + c;
            if first.0 >= *base
                && (last.0 as u64) < end
                && pairs.iter().all(|p| fits(p) <= u32::MAX as u64)
            {
                for &(k, c) in pairs {
                    // No overflow: checked above.
                    counts[(k - *base) as usize] += c as u32;
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

    /// Dense counts into dense counts: this group's array is widened to
    /// span both (where a dense array may) and theirs added in place.
    /// `false` (nothing added) otherwise, or where a count would pass
    /// `u32::MAX`.
    fn add_dense(&mut self, theirs: &Counts) -> bool {
        let Counts::Dense { base: b, counts: c } = theirs else {
            return false;
        };
        let hi = *b + (c.len() - 1) as u32;
        let Some(widened) = self.widen(*b, hi, dense_sum(c)) else {
            return false;
        };
        let Counts::Dense { base, counts } = &mut self.counts else {
            return false;
        };
        let at = (*b - *base) as usize;
        let span = &mut counts[at..at + c.len()];
        let fits = span
            .iter()
            .zip(c.iter())
            .fold(true, |ok, (x, y)| ok & x.checked_add(*y).is_some());
        if fits {
            span.iter_mut().zip(c.iter()).for_each(|(x, y)| *x += y);
        }
        if widened {
            self.settle();
        }
        fits
    }

    /// Counts `keys` without sorting them, in dense counts, when the
    /// counts are empty or dense and spanning the keys keeps them within a
    /// dense array's limit; `false` (nothing counted) otherwise. A busy
    /// group's buffer is counted in one pass instead of a sort.
    fn count_dense(&mut self, keys: &[u32]) -> bool {
        let Some((lo, hi)) = min_max(keys) else {
            return true;
        };
        let Some(widened) = self.widen(lo, hi, keys.len() as u64) else {
            return false;
        };
        let Counts::Dense { base, counts } = &mut self.counts else {
            return false;
        };
        // Keys whose count is full (`u32::MAX`), counted as pairs below.
        let mut full = vec![];
        for &k in keys {
            let c = &mut counts[(k - *base) as usize];
            if *c == u32::MAX {
                full.push(k);
            } else {
                *c += 1;
            }
        }
        if widened {
            self.settle();
        }
        if !full.is_empty() {
            full.sort_unstable();
            self.absorb(&runs(&full));
        }
        true
    }

    /// Makes the counts dense over `lo..=hi` and the keys they span
    /// already, when they are empty or dense and that span is within the
    /// most a dense array may span with `more` values to come (each a new
    /// key at best): `Some(true)` when the array was widened,
    /// `Some(false)` when it spans them already, `None` (unchanged)
    /// otherwise.
    fn widen(&mut self, lo: u32, hi: u32, more: u64) -> Option<bool> {
        let (base, old): (u32, &[u32]) = match &self.counts {
            Counts::Empty => (lo, &[]),
            Counts::Dense { base, counts } => (*base, counts),
            Counts::Sorted(_) => return None,
        };
        let end = base as u64 + old.len() as u64;
        let new_lo = lo.min(base);
        let new_end = (hi as u64 + 1).max(end);
        if !old.is_empty() && new_lo == base && new_end == end {
            return Some(false);
        }
        let span = (new_end - new_lo as u64) as usize;
        let most_keys = old
            .len()
            .saturating_add(more.min(usize::MAX as u64) as usize);
        if span > dense_limit(most_keys, dense_sum(old).saturating_add(more)) {
            return None;
        }
        let mut counts = zeroed(span);
        let at = (base - new_lo) as usize;
        counts[at..at + old.len()].copy_from_slice(old);
        self.counts = Counts::Dense {
            base: new_lo,
            counts,
        };
        Some(true)
    }

    /// Dense counts as sorted pairs when they span more than a dense array
    /// may for the keys in use and the values counted.
    fn settle(&mut self) {
        let Counts::Dense { base, counts } = &self.counts else {
            return;
        };
        let values = dense_sum(counts);
        if counts.len() <= dense_limit(0, values) {
            // Within the limit whatever the keys in use.
            return;
        }
        let used = counts.iter().filter(|&&c| c > 0).count();
        if counts.len() > dense_limit(used, values) {
            self.counts = Counts::Sorted(dense_pairs(*base, counts));
        }
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
        if !self.count_dense(keys) {
            keys.sort_unstable();
            self.absorb(&runs(keys));
        }
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
                Counts::Dense { counts, .. } => dense_sum(counts),
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
                    if c > 0 && !f(base + i as u32, c as u64) {
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

    /// Calls `hit(j, key)` for each target count `targets[j]` (ascending,
    /// each in `1..=`[`Slots::total`]) with the key at which the running
    /// count, in ascending key order, first reaches it. Dense counts are
    /// summed a chunk at a time and walked key by key only where a target
    /// is reached (a percentile near the top otherwise walks the whole
    /// span, a few thousand keys a group at precision 3).
    pub fn find_ranks(&mut self, targets: &[u64], mut hit: impl FnMut(usize, u32)) {
        if !self.pending.is_empty() && matches!(self.counts, Counts::Dense { .. }) {
            self.flush();
        }
        if let Counts::Dense { base, counts } = &self.counts {
            return dense_ranks(counts, targets, |j, i| hit(j, base + i as u32));
        }
        let mut next = 0;
        let mut running = 0u64;
        self.walk(|k, c| {
            running += c;
            while next < targets.len() && running >= targets[next] {
                hit(next, k);
                next += 1;
            }
            next < targets.len()
        });
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
                Counts::Dense { counts, .. } => counts.len() * size_of::<u32>(),
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
        if span <= dense_limit(pairs.len(), values)
            && pairs.iter().all(|p| p.1 <= u32::MAX as u64)
        {
            let mut counts = zeroed(span);
            for (k, c) in pairs {
                // At most `u32::MAX`: checked above.
                counts[(k - lo) as usize] = c as u32;
            }
            Counts::Dense { base: lo, counts }
        } else {
            Counts::Sorted(pairs)
        }
    }
}

/// The most keys a dense array may span for `used` keys in use and
/// `values` values counted.
fn dense_limit(used: usize, values: u64) -> usize {
    used.saturating_mul(DENSE_FILL)
        .max(DENSE_FREE_SPAN)
        .max(values.saturating_mul(2).min(usize::MAX as u64) as usize)
}

/// The least and the greatest key, in one pass.
fn min_max(keys: &[u32]) -> Option<(u32, u32)> {
    let first = *keys.first()?;
    Some(
        keys.iter()
            .fold((first, first), |(lo, hi), &k| (lo.min(k), hi.max(k))),
    )
}

/// The sum of dense counts (as `u64`: a loop the compiler vectorizes).
fn dense_sum(counts: &[u32]) -> u64 {
    counts.iter().map(|&c| c as u64).sum()
}

/// [`Slots::find_ranks`] over dense counts: `hit(j, i)` with the index
/// `i` into `counts` where the running count reaches `targets[j]`.
fn dense_ranks(counts: &[u32], targets: &[u64], mut hit: impl FnMut(usize, usize)) {
    const CHUNK: usize = 64;
    let mut running = 0u64;
    let mut next = 0;
    for (c, chunk) in counts.chunks(CHUNK).enumerate() {
        let Some(&target) = targets.get(next) else {
            return;
        };
        let sum = dense_sum(chunk);
        if running + sum < target {
            running += sum;
            continue;
        }
        for (i, &n) in chunk.iter().enumerate() {
            running += n as u64;
            // A target in `1..=total` is first reached at a non-zero count.
            while next < targets.len() && running >= targets[next] {
                hit(next, c * CHUNK + i);
                next += 1;
            }
        }
    }
}

/// `span` zero counts, written rather than allocated zeroed: a zeroed
/// allocation of fresh memory maps the shared zero page, so the first
/// count read and then written there takes a copy-on-write fault whose TLB
/// flush interrupts every other thread (a fifth of the time at 1,000
/// groups, precision 3).
fn zeroed(span: usize) -> Box<[u32]> {
    let mut counts: Vec<u32> = Vec::with_capacity(span);
    // Hidden from the optimizer, which would fold the allocation and the
    // zeros below back into a zeroed allocation.
    std::hint::black_box(counts.as_mut_ptr());
    counts.resize(span, 0);
    counts.into_boxed_slice()
}

/// The non-zero `(key, count)` pairs of dense counts of keys from `base`.
fn dense_pairs(base: u32, counts: &[u32]) -> Vec<(u32, u64)> {
    (0..counts.len())
        .filter(|&i| counts[i] > 0)
        .map(|i| (base + i as u32, counts[i] as u64))
        .collect()
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
                let limit = dense_limit(want.len(), values);
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

    /// `find_ranks` (chunked over dense counts) finds the keys a plain
    /// walk of the running count finds, in every representation.
    #[test]
    fn ranks_found_like_a_walk() {
        let mut rng = StdRng::seed_from_u64(5);
        for case in 0..300 {
            let spread: u32 = [50, 3000, 7000, 1_000_000][case % 4];
            let mut s = Slots::default();
            for _ in 0..rng.random_range(1..6000) {
                s.add(rng.random_range(0..spread));
            }
            let total = s.total();
            let mut targets: Vec<u64> = (0..rng.random_range(1..5))
                .map(|_| rng.random_range(1..=total))
                .collect();
            targets.push(total);
            targets.sort_unstable();
            let mut want = vec![];
            let mut running = 0;
            for (k, c) in s.entries() {
                running += c;
                while want.len() < targets.len() && running >= targets[want.len()] {
                    want.push(k);
                }
            }
            let mut got = vec![None; targets.len()];
            s.find_ranks(&targets, |j, k| got[j] = Some(k));
            let got: Vec<u32> = got.into_iter().map(Option::unwrap).collect();
            assert_eq!(got, want, "case {case}");
        }
    }

    /// Dense counts are `u32`: a count past `u32::MAX` (added, absorbed or
    /// merged from another dense group) is kept exactly.
    #[test]
    fn counts_past_u32_stay_exact() {
        let big = u32::MAX as u64 - 1;
        let mut s = Slots::default();
        for k in 0..100 {
            s.add(k);
        }
        s.add_n(10, big);
        assert!(matches!(s.counts, Counts::Dense { .. }));
        for _ in 0..3 {
            s.add(10);
        }
        s.add_n(11, big + 5);
        let mut other = Slots::default();
        for k in 0..100 {
            other.add(k);
        }
        other.add_n(12, big);
        // Dense into dense that would overflow.
        let mut twice = other.clone().counted();
        assert!(matches!(twice.counts, Counts::Dense { .. }));
        twice.merge_slots(&other.clone().counted());
        assert_eq!(twice.entries()[12], (12, 2 * big + 2));
        let mut wide = other.clone().counted();
        wide.merge_slots(&s.clone().counted());
        wide.merge_slots(&other.clone().counted());
        let entries = wide.entries();
        assert_eq!(entries[10], (10, big + 1 + 3 + 2));
        assert_eq!(entries[11], (11, big + 5 + 3));
        assert_eq!(entries[12], (12, 2 * big + 3));
        assert_eq!(wide.total(), 300 + big + 3 + big + 5 + 2 * big);
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
