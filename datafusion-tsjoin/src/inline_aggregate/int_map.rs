//! [`IntKeys`]: 64-bit integer group keys → dense group ids.
//!
//! Two representations, chosen by the data:
//! - **direct**: a slot per value of a small range `[base, base + len)`
//!   (found by a first look at the batch's min and max), holding the value's
//!   group id: no hashing at all;
//! - **hashed**: an open-addressing table over the raw values (multiplicative
//!   hashing, linear probing), for wide or sparse ranges.
//!
//! The map starts direct and turns hashed, once, when a batch would make the
//! range too sparse ([`MAX_SLOTS_PER_GROUP`] slots per group and at least
//! [`MIN_DIRECT_SLOTS`]). Group ids are dense, in order of first appearance,
//! so accumulators stay compact either way. NULL is one more group.

use crate::kernels::prefetch;
use datafusion::arrow::buffer::NullBuffer;

/// Slots a direct map may hold per group (a sparser range is hashed).
pub const MAX_SLOTS_PER_GROUP: usize = 4;
/// A direct map may always use this many slots (4 MiB), however few the
/// groups: small enough to stay cheap, large enough that every key range up
/// to a million values is indexed directly from the first batch on.
pub const MIN_DIRECT_SLOTS: usize = 1 << 20;

/// Hashed tables at least this large (1 MiB) prefetch their probes.
const PREFETCH_MIN_ENTRIES: usize = 1 << 16;
/// Direct tables at least this large (4 MiB) prefetch their slots.
const PREFETCH_MIN_SLOTS: usize = 1 << 20;
/// How many rows ahead a probe is prefetched: enough to cover a memory
/// round trip at a few nanoseconds per row.
const PREFETCH_AHEAD: usize = 16;

/// An empty entry of the hashed table.
const EMPTY: u32 = u32::MAX;

/// Integer keys → group ids; see the module documentation.
#[derive(Debug, Clone, Default)]
pub struct IntKeys {
    table: Table,
    /// Key of each group, by id (the NULL group's entry is unused).
    values: Vec<i64>,
    /// Id of the NULL group, once seen.
    null: Option<u32>,
    /// Times the direct table was reallocated.
    #[cfg(test)]
    widened: usize,
}

#[derive(Debug, Clone)]
enum Table {
    /// Slot `x - base` holds the group id of `x` plus one; 0 is empty, so a
    /// new table is zeroed memory (fresh pages from the OS need no fill).
    /// `held`: the least and greatest value interned (the table may reach
    /// beyond them).
    Direct {
        base: i64,
        slots: Vec<u32>,
        held: (i64, i64),
    },
    /// `(key, id)` side by side: one cache line per probe.
    Hashed {
        entries: Vec<(i64, u32)>,
        mask: usize,
    },
}

impl Default for Table {
    fn default() -> Self {
        Table::Direct {
            base: 0,
            slots: vec![],
            held: (0, 0),
        }
    }
}

/// Multiplicative (Fibonacci) hash: the high bits are well mixed.
#[inline(always)]
pub fn hash_i64(v: i64) -> u64 {
    (v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl IntKeys {
    /// Number of groups (NULL included).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    #[cfg(test)]
    /// Key of each group by id (the NULL group's entry is 0).
    pub fn values(&self) -> &[i64] {
        &self.values
    }

    /// The key of each group by id, leaving nothing behind.
    pub fn into_values(self) -> Vec<i64> {
        self.values
    }

    /// Id of the NULL group, if any row had a NULL key.
    pub fn null_group(&self) -> Option<u32> {
        self.null
    }

    #[cfg(test)]
    /// True while keys are mapped by direct indexing.
    pub fn is_direct(&self) -> bool {
        matches!(self.table, Table::Direct { .. })
    }

    /// Makes room for `groups` groups in all, so that the key vector does
    /// not grow (and copy) batch by batch.
    pub fn reserve_groups(&mut self, groups: usize) {
        self.values
            .reserve(groups.saturating_sub(self.values.len()));
    }

    /// Bytes held.
    pub fn memory_size(&self) -> usize {
        self.values.capacity() * 8
            + match &self.table {
                Table::Direct { slots, .. } => slots.capacity() * 4,
                Table::Hashed { entries, .. } => entries.capacity() * 16,
            }
    }

    #[cfg(test)]
    /// Assigns each value its group id (`ids`, replaced) and counts rows per
    /// group (`counts`, grown to the number of groups). Rows that `nulls`
    /// marks NULL go to the NULL group.
    pub fn intern(
        &mut self,
        v: &[i64],
        nulls: Option<&NullBuffer>,
        ids: &mut Vec<u32>,
        counts: &mut Vec<u64>,
    ) {
        self.intern_expecting(v, nulls, ids, counts, 0)
    }

    #[cfg(test)]
    /// [`Self::intern`] knowing that about `rows` rows will be interned in
    /// all (this batch and the ones to come): a wide key range then stays
    /// directly indexed when those rows can fill it.
    pub fn intern_expecting(
        &mut self,
        v: &[i64],
        nulls: Option<&NullBuffer>,
        ids: &mut Vec<u32>,
        counts: &mut Vec<u64>,
        rows: usize,
    ) {
        self.assign_expecting(v, nulls, ids, rows);
        counts.resize(self.values.len(), 0);
        super::accumulate::count_ids(ids, counts);
    }

    /// [`Self::intern_expecting`] without the row counts: group ids only.
    pub fn assign_expecting(
        &mut self,
        v: &[i64],
        nulls: Option<&NullBuffer>,
        ids: &mut Vec<u32>,
        rows: usize,
    ) {
        ids.clear();
        ids.reserve(v.len());
        let nulls = nulls.filter(|n| n.null_count() > 0);
        if nulls.is_none() && self.intern_known(v, ids) {
            return;
        }
        ids.clear();
        self.prepare(v, nulls, rows);
        match nulls {
            None => match &mut self.table {
                // The common case gets its own loop: no table dispatch, no
                // capacity checks on `ids`.
                // Big tables get loops of their own (one loop testing a
                // size flag per row measured 25% slower on 5M distinct keys).
                Table::Direct { base, slots, .. }
                    if slots.len() >= PREFETCH_MIN_SLOTS =>
                {
                    // As for the hashed table below.
                    let (base, values) = (*base, &mut self.values);
                    for (i, &x) in v.iter().enumerate() {
                        if let Some(&next) = v.get(i + PREFETCH_AHEAD) {
                            prefetch(
                                slots
                                    .as_ptr()
                                    .wrapping_add(next.wrapping_sub(base) as usize),
                            );
                        }
                        let slot = &mut slots[(x - base) as usize];
                        if *slot == 0 {
                            values.push(x);
                            *slot = values.len() as u32;
                        }
                        ids.push(*slot - 1);
                    }
                }
                Table::Direct { base, slots, .. } => {
                    let (base, values) = (*base, &mut self.values);
                    ids.extend(v.iter().map(|&x| {
                        let slot = &mut slots[(x - base) as usize];
                        if *slot == 0 {
                            values.push(x);
                            *slot = values.len() as u32;
                        }
                        *slot - 1
                    }));
                }
                Table::Hashed { entries, mask }
                    if entries.len() >= PREFETCH_MIN_ENTRIES =>
                {
                    // Past the caches nearly every probe misses: ask for the
                    // slot of the row `PREFETCH_AHEAD` rows on while this one
                    // is probed, so the misses overlap. (The table does not
                    // move within a batch: `prepare` made room.)
                    let (at, mask) = (entries.as_ptr(), *mask);
                    for (i, &x) in v.iter().enumerate() {
                        if let Some(&next) = v.get(i + PREFETCH_AHEAD) {
                            prefetch(
                                at.wrapping_add((hash_i64(next) >> 32) as usize & mask),
                            );
                        }
                        ids.push(self.id(x));
                    }
                }
                Table::Hashed { .. } => ids.extend(v.iter().map(|&x| self.id(x))),
            },
            Some(n) => {
                for (i, &x) in v.iter().enumerate() {
                    ids.push(if n.is_null(i) {
                        self.null_id()
                    } else {
                        self.id(x)
                    });
                }
            }
        }
    }

    /// The steady state of a small key set: every value of the batch already
    /// has a slot in a direct table. Then one branch-free gather maps the
    /// batch (no range scan, no new-key branch per row); returns false, with
    /// `ids` to be discarded, when some value is new or out of range.
    fn intern_known(&self, v: &[i64], ids: &mut Vec<u32>) -> bool {
        let Table::Direct { base, slots, .. } = &self.table else {
            return false;
        };
        if slots.len() >= PREFETCH_MIN_SLOTS || slots.is_empty() {
            return false;
        }
        let (base, mut known) = (*base, true);
        ids.extend(v.iter().map(|&x| {
            // A value out of the range counts as new.
            let s = slots
                .get(x.wrapping_sub(base) as u64 as usize)
                .copied()
                .unwrap_or(0);
            known &= s != 0;
            s.wrapping_sub(1)
        }));
        known
    }

    #[cfg(test)]
    /// Group id of each value, `None` where the key was never interned.
    pub fn lookup(&self, x: i64) -> Option<u32> {
        match &self.table {
            Table::Direct { base, slots, .. } => {
                let off = x.wrapping_sub(*base) as u64 as usize;
                slots.get(off).copied().filter(|&s| s != 0).map(|s| s - 1)
            }
            Table::Hashed { entries, mask } => {
                let mut i = (hash_i64(x) >> 32) as usize & mask;
                loop {
                    let (k, g) = entries[i];
                    if g == EMPTY {
                        return None;
                    }
                    if k == x {
                        return Some(g);
                    }
                    i = (i + 1) & mask;
                }
            }
        }
    }

    fn null_id(&mut self) -> u32 {
        match self.null {
            Some(g) => g,
            None => {
                let g = self.values.len() as u32;
                self.values.push(0);
                self.null = Some(g);
                g
            }
        }
    }

    /// Makes room for this batch's values: widens the direct range, or
    /// turns the map hashed when the range would get too sparse for the
    /// groups it can hold (at most this batch's rows more, or `rows`), and
    /// keeps the hashed table at most three quarters full.
    fn prepare(&mut self, v: &[i64], nulls: Option<&NullBuffer>, rows: usize) {
        let (lo, hi) = match nulls {
            None if v.is_empty() => return,
            // One pass for both (it vectorises).
            None => v
                .iter()
                .fold((i64::MAX, i64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x))),
            Some(n) => {
                let mut valid = v
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| n.is_valid(*i))
                    .map(|(_, &x)| x);
                let Some(first) = valid.next() else { return };
                valid.fold((first, first), |(lo, hi), x| (lo.min(x), hi.max(x)))
            }
        };
        let groups_bound = (self.values.len() + v.len()).max(rows);
        if let Table::Direct { base, slots, held } = &mut self.table {
            // The values' extremes decide direct or hashed; the table's own
            // range may be wider (room left for growth).
            let (new_lo, new_hi) = if slots.is_empty() {
                (lo, hi)
            } else {
                (held.0.min(lo), held.1.max(hi))
            };
            let span = (new_hi as i128 - new_lo as i128 + 1) as u128;
            let limit =
                (MAX_SLOTS_PER_GROUP * groups_bound).max(MIN_DIRECT_SLOTS) as u128;
            if span <= limit {
                *held = (new_lo, new_hi);
                let end = *base as i128 + slots.len() as i128;
                if slots.is_empty()
                    || (new_lo as i128) < *base as i128
                    || new_hi as i128 >= end
                {
                    // Widening copies the table: leave room (half the old
                    // table on each side that grew) so a range whose
                    // extremes arrive one by one is not copied for each of
                    // them. The room may take the table to twice the limit:
                    // a span close to the limit (a hash partition's share of
                    // a dense range) is otherwise copied whole for every new
                    // extreme.
                    let (grew_lo, grew_hi) =
                        ((new_lo as i128) < *base as i128, new_hi as i128 >= end);
                    let (mut lo, mut hi) = (new_lo as i128, new_hi as i128);
                    if !slots.is_empty() {
                        let room = 2 * limit as i128 - span as i128;
                        let share = if grew_lo && grew_hi { room / 2 } else { room };
                        let pad = (slots.len() as i128 / 2).min(share).max(0);
                        // The side that did not grow keeps the old table's end.
                        lo = if grew_lo {
                            (lo - pad).max(i64::MIN as i128)
                        } else {
                            lo.min(*base as i128)
                        };
                        hi = if grew_hi {
                            (hi + pad).min(i64::MAX as i128)
                        } else {
                            hi.max(end - 1)
                        };
                    }
                    let mut grown = vec![0u32; (hi - lo + 1) as usize];
                    if !slots.is_empty() {
                        let shift = (*base as i128 - lo) as usize;
                        grown[shift..shift + slots.len()].copy_from_slice(slots);
                    }
                    *slots = grown;
                    *base = lo as i64;
                    #[cfg(test)]
                    {
                        self.widened += 1;
                    }
                }
                return;
            }
            // Too sparse: hash from now on.
            let old = std::mem::take(slots);
            let base = *base;
            self.table = Table::Hashed {
                entries: vec![],
                mask: 0,
            };
            self.reserve(groups_bound);
            for (off, &g) in old.iter().enumerate() {
                if g != 0 {
                    self.insert_hashed(base + off as i64, g - 1);
                }
            }
            return;
        }
        self.reserve(groups_bound);
    }

    /// Grows the hashed table to hold `n` keys at most three quarters full
    /// (linear probing stays short there, and a table half the size of a
    /// half-full one is faulted in and cached at half the cost).
    fn reserve(&mut self, n: usize) {
        let Table::Hashed { entries, mask } = &mut self.table else {
            return;
        };
        let wanted = (n + n / 3 + 1).next_power_of_two().max(1024);
        if entries.len() >= wanted {
            return;
        }
        let old = std::mem::replace(entries, vec![(0, EMPTY); wanted]);
        *mask = wanted - 1;
        for (k, g) in old {
            if g != EMPTY {
                self.insert_hashed(k, g);
            }
        }
    }

    fn insert_hashed(&mut self, x: i64, g: u32) {
        let Table::Hashed { entries, mask } = &mut self.table else {
            unreachable!("hashed table")
        };
        let mut i = (hash_i64(x) >> 32) as usize & *mask;
        while entries[i].1 != EMPTY {
            i = (i + 1) & *mask;
        }
        entries[i] = (x, g);
    }

    /// The id of a value, assigning the next one to a new value. The table
    /// has room (see [`Self::prepare`]).
    #[inline(always)]
    fn id(&mut self, x: i64) -> u32 {
        let next = self.values.len() as u32;
        let slot = match &mut self.table {
            Table::Direct { base, slots, .. } => {
                let slot = &mut slots[(x - *base) as usize];
                if *slot == 0 {
                    self.values.push(x);
                    *slot = next + 1;
                }
                return *slot - 1;
            }
            Table::Hashed { entries, mask } => {
                let mut i = (hash_i64(x) >> 32) as usize & *mask;
                loop {
                    if entries[i].1 == EMPTY {
                        entries[i].0 = x;
                        break &mut entries[i].1;
                    }
                    if entries[i].0 == x {
                        break &mut entries[i].1;
                    }
                    i = (i + 1) & *mask;
                }
            }
        };
        if *slot == EMPTY {
            *slot = next;
            self.values.push(x);
        }
        *slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interns_in_first_seen_order() {
        let mut keys = IntKeys::default();
        let (mut ids, mut counts) = (vec![], vec![]);
        keys.intern(&[7, 9, 7, 1_000_000_000], None, &mut ids, &mut counts);
        assert_eq!(ids, [0, 1, 0, 2]);
        assert_eq!(counts, [2, 1, 1]);
        assert_eq!(keys.values(), [7, 9, 1_000_000_000]);
    }

    fn check(values: &[i64], nulls: Option<NullBuffer>) {
        let mut keys = IntKeys::default();
        let (mut ids, mut counts) = (vec![], vec![]);
        let mut seen: Vec<Option<i64>> = vec![];
        // In batches of 1000, so the map widens and switches between them.
        for (b, chunk) in values.chunks(1000).enumerate() {
            let n = nulls.as_ref().map(|n| n.slice(b * 1000, chunk.len()));
            keys.intern(chunk, n.as_ref(), &mut ids, &mut counts);
            for (i, (&x, &g)) in chunk.iter().zip(&ids).enumerate() {
                let key = if n.as_ref().is_some_and(|n| n.is_null(i)) {
                    None
                } else {
                    Some(x)
                };
                let want = seen.iter().position(|k| *k == key).unwrap_or_else(|| {
                    seen.push(key);
                    seen.len() - 1
                });
                assert_eq!(g as usize, want, "value {key:?}");
            }
        }
        assert_eq!(keys.len(), seen.len());
        assert_eq!(counts.iter().sum::<u64>(), values.len() as u64);
        for (g, k) in seen.iter().enumerate() {
            match k {
                Some(x) => {
                    assert_eq!(keys.values()[g], *x);
                    assert_eq!(keys.lookup(*x), Some(g as u32));
                }
                None => assert_eq!(keys.null_group(), Some(g as u32)),
            }
        }
    }

    /// Tables big enough to prefetch: a direct table over more than
    /// [`PREFETCH_MIN_SLOTS`] slots and a hashed one over more than
    /// [`PREFETCH_MIN_ENTRIES`] entries, checked against a hash map.
    #[test]
    fn large_tables_agree_with_a_hash_map() {
        let n = 1_500_000i64;
        let dense: Vec<i64> = (0..n)
            .map(|i| (i * 7919) % n - 3)
            .chain((0..1000).map(|i| i * 11))
            .collect();
        let sparse: Vec<i64> = (0..200_000i64)
            .map(|i| (i % 150_000).wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64))
            .collect();
        for (values, direct) in [(dense, true), (sparse, false)] {
            let mut keys = IntKeys::default();
            let (mut ids, mut counts) = (vec![], vec![]);
            let mut want: std::collections::HashMap<i64, u32> = Default::default();
            for chunk in values.chunks(8192) {
                keys.intern_expecting(chunk, None, &mut ids, &mut counts, values.len());
                for (&x, &g) in chunk.iter().zip(&ids) {
                    let next = want.len() as u32;
                    assert_eq!(*want.entry(x).or_insert(next), g, "value {x}");
                }
            }
            assert_eq!(keys.is_direct(), direct);
            assert_eq!(keys.len(), want.len());
            assert_eq!(counts.iter().sum::<u64>(), values.len() as u64);
            assert!(
                want.iter().all(|(&x, &g)| keys.lookup(x) == Some(g)
                    && keys.values()[g as usize] == x)
            );
        }
    }

    /// A hash partition's share of a dense range: groups a quarter of the
    /// range, so the span sits at the direct limit, and new extremes arrive
    /// batch after batch. The table stays direct and is reallocated a few
    /// times, not once per new extreme.
    #[test]
    fn a_share_of_a_dense_range_widens_a_few_times() {
        let range = 1_600_000i64;
        let share: Vec<i64> = (0..range)
            .map(|i| (i * 7919) % range)
            .filter(|&k| hash_i64(k).is_multiple_of(4))
            .collect();
        let mut keys = IntKeys::default();
        let (mut ids, mut counts) = (vec![], vec![]);
        let mut want: std::collections::HashMap<i64, u32> = Default::default();
        for chunk in share.chunks(2048) {
            keys.intern_expecting(chunk, None, &mut ids, &mut counts, range as usize / 4);
            for (&x, &g) in chunk.iter().zip(&ids) {
                let next = want.len() as u32;
                assert_eq!(*want.entry(x).or_insert(next), g, "value {x}");
            }
        }
        assert!(keys.is_direct());
        assert_eq!(keys.len(), share.len());
        assert!(keys.widened <= 3, "widened {} times", keys.widened);
    }

    #[test]
    fn dense_sparse_and_switching_ranges() {
        let mut seed = 3u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 16
        };
        check(
            &(0..5000).map(|i| (i % 37) as i64).collect::<Vec<_>>(),
            None,
        );
        check(
            &(0..5000).map(|i| -(i as i64) * 3).collect::<Vec<_>>(),
            None,
        );
        // A direct range that widens on both sides batch after batch.
        check(
            &(0..5000)
                .map(|i| if i % 2 == 0 { i as i64 } else { -(i as i64) })
                .collect::<Vec<_>>(),
            None,
        );
        // Starts dense, then a wide value forces hashing.
        let mut v: Vec<i64> = (0..3000).map(|i| (i % 100) as i64).collect();
        v.extend((0..3000).map(|_| next() as i64));
        v.extend([i64::MIN, i64::MAX, 0, i64::MIN]);
        check(&v, None);
        let nulls =
            NullBuffer::from((0..v.len()).map(|i| i % 7 != 3).collect::<Vec<_>>());
        check(&v, Some(nulls));
    }
}
