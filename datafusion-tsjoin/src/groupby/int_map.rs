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
//!
//! ```
//! use datafusion_tsjoin::groupby::IntKeys;
//! let mut keys = IntKeys::default();
//! let (mut ids, mut counts) = (vec![], vec![]);
//! keys.intern(&[7, 9, 7, 1_000_000_000], None, &mut ids, &mut counts);
//! assert_eq!(ids, [0, 1, 0, 2]);
//! assert_eq!(counts, [2, 1, 1]);
//! assert_eq!(keys.values(), [7, 9, 1_000_000_000]);
//! ```

use super::accumulate::count_ids;
use datafusion::arrow::buffer::NullBuffer;

/// Slots a direct map may hold per group (a sparser range is hashed).
pub const MAX_SLOTS_PER_GROUP: usize = 4;
/// A direct map may always use this many slots (4 MiB), however few the
/// groups: small enough to stay cheap, large enough that every key range up
/// to a million values is indexed directly from the first batch on.
pub const MIN_DIRECT_SLOTS: usize = 1 << 20;

const EMPTY: u32 = u32::MAX;

/// Integer keys → group ids; see the module documentation.
#[derive(Debug, Clone, Default)]
pub struct IntKeys {
    table: Table,
    /// Key of each group, by id (the NULL group's entry is unused).
    values: Vec<i64>,
    /// Id of the NULL group, once seen.
    null: Option<u32>,
}

#[derive(Debug, Clone)]
enum Table {
    Direct { base: i64, slots: Vec<u32> },
    /// `(key, id)` side by side: one cache line per probe.
    Hashed { entries: Vec<(i64, u32)>, mask: usize },
}

impl Default for Table {
    fn default() -> Self {
        Table::Direct { base: 0, slots: vec![] }
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

    /// True when no key was interned.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Key of each group by id (the NULL group's entry is 0).
    pub fn values(&self) -> &[i64] {
        &self.values
    }

    /// Id of the NULL group, if any row had a NULL key.
    pub fn null_group(&self) -> Option<u32> {
        self.null
    }

    /// True while keys are mapped by direct indexing.
    pub fn is_direct(&self) -> bool {
        matches!(self.table, Table::Direct { .. })
    }

    /// Bytes held.
    pub fn memory_size(&self) -> usize {
        self.values.capacity() * 8
            + match &self.table {
                Table::Direct { slots, .. } => slots.capacity() * 4,
                Table::Hashed { entries, .. } => entries.capacity() * 16,
            }
    }

    /// Assigns each value its group id (`ids`, replaced) and counts rows per
    /// group (`counts`, grown to the number of groups). Rows that `nulls`
    /// marks NULL go to the NULL group.
    pub fn intern(&mut self, v: &[i64], nulls: Option<&NullBuffer>, ids: &mut Vec<u32>, counts: &mut Vec<u64>) {
        self.intern_expecting(v, nulls, ids, counts, 0)
    }

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
        ids.clear();
        ids.reserve(v.len());
        let nulls = nulls.filter(|n| n.null_count() > 0);
        self.prepare(v, nulls, rows);
        match nulls {
            None => match &mut self.table {
                // The common case gets its own loop: no table dispatch, no
                // capacity checks on `ids`.
                Table::Direct { base, slots } => {
                    let (base, values) = (*base, &mut self.values);
                    ids.extend(v.iter().map(|&x| {
                        let slot = &mut slots[(x - base) as usize];
                        if *slot == EMPTY {
                            *slot = values.len() as u32;
                            values.push(x);
                        }
                        *slot
                    }));
                }
                Table::Hashed { .. } => ids.extend(v.iter().map(|&x| self.id(x))),
            },
            Some(n) => {
                for (i, &x) in v.iter().enumerate() {
                    ids.push(if n.is_null(i) { self.null_id() } else { self.id(x) });
                }
            }
        }
        counts.resize(self.values.len(), 0);
        count_ids(ids, counts);
    }

    /// Group id of each value, `None` where the key was never interned.
    pub fn lookup(&self, x: i64) -> Option<u32> {
        match &self.table {
            Table::Direct { base, slots } => {
                let off = x.wrapping_sub(*base) as u64 as usize;
                slots.get(off).copied().filter(|&s| s != EMPTY)
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
    /// keeps the hashed table at most half full.
    fn prepare(&mut self, v: &[i64], nulls: Option<&NullBuffer>, rows: usize) {
        let (lo, hi) = match nulls {
            None if v.is_empty() => return,
            // One pass for both (it vectorises).
            None => v.iter().fold((i64::MAX, i64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x))),
            Some(n) => {
                let mut valid = v.iter().enumerate().filter(|(i, _)| n.is_valid(*i)).map(|(_, &x)| x);
                let Some(first) = valid.next() else { return };
                valid.fold((first, first), |(lo, hi), x| (lo.min(x), hi.max(x)))
            }
        };
        let groups_bound = (self.values.len() + v.len()).max(rows);
        if let Table::Direct { base, slots } = &mut self.table {
            let (new_lo, new_hi) = if slots.is_empty() { (lo, hi) } else { ((*base).min(lo), (*base + slots.len() as i64 - 1).max(hi)) };
            let span = (new_hi as i128 - new_lo as i128 + 1) as u128;
            let limit = (MAX_SLOTS_PER_GROUP * groups_bound).max(MIN_DIRECT_SLOTS) as u128;
            if span <= limit {
                if slots.is_empty() || new_lo < *base || span as usize > slots.len() {
                    let mut grown = vec![EMPTY; span as usize];
                    let shift = (*base - new_lo) as usize;
                    if !slots.is_empty() {
                        grown[shift..shift + slots.len()].copy_from_slice(slots);
                    }
                    *slots = grown;
                    *base = new_lo;
                }
                return;
            }
            // Too sparse: hash from now on.
            let old = std::mem::take(slots);
            let base = *base;
            self.table = Table::Hashed { entries: vec![], mask: 0 };
            self.reserve(groups_bound);
            for (off, &g) in old.iter().enumerate() {
                if g != EMPTY {
                    self.insert_hashed(base + off as i64, g);
                }
            }
            return;
        }
        self.reserve(groups_bound);
    }

    /// Grows the hashed table to hold `n` keys at most half full.
    fn reserve(&mut self, n: usize) {
        let Table::Hashed { entries, mask } = &mut self.table else { return };
        let wanted = (2 * n).next_power_of_two().max(1024);
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
        let Table::Hashed { entries, mask } = &mut self.table else { unreachable!("hashed table") };
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
            Table::Direct { base, slots } => &mut slots[(x - *base) as usize],
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

    fn check(values: &[i64], nulls: Option<NullBuffer>) {
        let mut keys = IntKeys::default();
        let (mut ids, mut counts) = (vec![], vec![]);
        let mut seen: Vec<Option<i64>> = vec![];
        // In batches of 1000, so the map widens and switches between them.
        for (b, chunk) in values.chunks(1000).enumerate() {
            let n = nulls.as_ref().map(|n| n.slice(b * 1000, chunk.len()));
            keys.intern(chunk, n.as_ref(), &mut ids, &mut counts);
            for (i, (&x, &g)) in chunk.iter().zip(&ids).enumerate() {
                let key = if n.as_ref().is_some_and(|n| n.is_null(i)) { None } else { Some(x) };
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

    #[test]
    fn dense_sparse_and_switching_ranges() {
        let mut seed = 3u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            seed >> 16
        };
        check(&(0..5000).map(|i| (i % 37) as i64).collect::<Vec<_>>(), None);
        check(&(0..5000).map(|i| -(i as i64) * 3).collect::<Vec<_>>(), None);
        // Starts dense, then a wide value forces hashing.
        let mut v: Vec<i64> = (0..3000).map(|i| (i % 100) as i64).collect();
        v.extend((0..3000).map(|_| next() as i64));
        v.extend([i64::MIN, i64::MAX, 0, i64::MIN]);
        check(&v, None);
        let nulls = NullBuffer::from((0..v.len()).map(|i| i % 7 != 3).collect::<Vec<_>>());
        check(&v, Some(nulls));
    }
}
