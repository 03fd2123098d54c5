//! [`Composite`]: group keys of several columns, each coded on its own,
//! the code tuples mapped to group ids through direct pair tables.
//!
//! Low-cardinality multi-column keys (TPC-H Q1's flag and status, a region
//! and a device model) are the common case: each column's table stays tiny
//! and a tuple's id is one array index per extra column, where a general
//! multi-column table hashes and compares every column of every row. A
//! level whose direct table would pass [`MAX_PAIR_SLOTS`] (a truck's name
//! and driver paired with its ten-minute buckets) hashes its pairs instead
//! ([`IntKeys`] over `a << 32 | b`); many groups are left to DataFusion's
//! table (the caller switches).

use super::accumulate::count_ids;
use super::group_keys::GroupKeys;
use super::int_map::IntKeys;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;

/// Slots a pair table may have (4 MiB of ids).
pub const MAX_PAIR_SLOTS: usize = 1 << 20;

const EMPTY: u32 = u32::MAX;

/// `(a, b)` → dense id, directly indexed by `a << shift | b`. Both sides
/// are dense codes, so the table is as large as the product of their
/// cardinalities (rounded up to powers of two); past [`MAX_PAIR_SLOTS`] the
/// pairs are hashed instead (`hashed`), keeping their ids.
#[derive(Debug, Default)]
struct PairTable {
    slots: Vec<u32>,
    /// Bits of `b`.
    shift: u32,
    /// The pair of each id.
    pairs: Vec<(u32, u32)>,
    /// Once the direct table would be too large: `a << 32 | b` → id, and
    /// `slots` freed.
    hashed: Option<IntKeys>,
    /// This batch's `a << 32 | b` (hashed only).
    packed: Vec<i64>,
}

/// A pair as one hashed key.
fn pack(a: u32, b: u32) -> i64 {
    ((a as u64) << 32 | b as u64) as i64
}

impl PairTable {
    /// Makes room for `a < a_len` and `b < b_len`, turning hashed when the
    /// direct table would need more than [`MAX_PAIR_SLOTS`].
    fn prepare(&mut self, a_len: usize, b_len: usize) {
        if self.hashed.is_some() {
            return;
        }
        let shift = b_len
            .max(1)
            .next_power_of_two()
            .trailing_zeros()
            .max(self.shift);
        let a_cap = a_len
            .max(1)
            .next_power_of_two()
            .max(self.slots.len() >> self.shift);
        let size = a_cap.saturating_mul(1 << shift);
        if size > MAX_PAIR_SLOTS {
            // Re-interned in id order, each pair keeps its id.
            let mut keys = IntKeys::default();
            let packed: Vec<i64> = self.pairs.iter().map(|&(a, b)| pack(a, b)).collect();
            keys.assign_expecting(&packed, None, &mut vec![], 0);
            self.hashed = Some(keys);
            self.slots = vec![];
            return;
        }
        if size > self.slots.len() {
            self.slots = vec![EMPTY; size];
            self.shift = shift;
            for (id, &(a, b)) in self.pairs.iter().enumerate() {
                self.slots[((a as usize) << shift) | b as usize] = id as u32;
            }
        }
    }

    /// The id of each `(a[i], b[i])` into `out` (replaced); new pairs get
    /// the next ids.
    fn intern(&mut self, a: &[u32], b: &[u32], out: &mut Vec<u32>) {
        if let Some(keys) = &mut self.hashed {
            self.packed.clear();
            self.packed
                .extend(a.iter().zip(b).map(|(&x, &y)| pack(x, y)));
            keys.assign_expecting(&self.packed, None, out, 0);
            // New ids come in order of first appearance.
            for (&id, (&x, &y)) in out.iter().zip(a.iter().zip(b)) {
                if id as usize == self.pairs.len() {
                    self.pairs.push((x, y));
                }
            }
            return;
        }
        out.clear();
        out.reserve(a.len());
        for (&x, &y) in a.iter().zip(b) {
            let slot = &mut self.slots[((x as usize) << self.shift) | y as usize];
            if *slot == EMPTY {
                *slot = self.pairs.len() as u32;
                self.pairs.push((x, y));
            }
            out.push(*slot);
        }
    }
}

/// The state of [`super::KeyShape::Composite`] keys.
pub(crate) struct Composite {
    /// One single-column table per key column: value → column code.
    columns: Vec<GroupKeys>,
    /// Level `l`: (tuple id of columns `..=l`, code of column `l + 1`) →
    /// tuple id of columns `..=l + 1`; the last level's ids are the groups.
    levels: Vec<PairTable>,
    /// Per column, this batch's codes.
    scratch: Vec<Vec<u32>>,
    types: Vec<DataType>,
}

impl Composite {
    /// Empty keys of these (at least two) types.
    pub(crate) fn try_new(types: &[DataType]) -> Result<Self> {
        Ok(Self {
            columns: types.iter().map(GroupKeys::column).collect::<Result<_>>()?,
            levels: (1..types.len()).map(|_| PairTable::default()).collect(),
            scratch: vec![vec![]; types.len()],
            types: types.to_vec(),
        })
    }

    /// The key types.
    pub(crate) fn types(&self) -> &[DataType] {
        &self.types
    }

    /// The single-column table of key column `c`.
    pub(crate) fn column_mut(&mut self, c: usize) -> &mut GroupKeys {
        &mut self.columns[c]
    }

    /// Number of groups.
    pub(crate) fn len(&self) -> usize {
        self.levels.last().map_or(0, |l| l.pairs.len())
    }

    /// Bytes held.
    pub(crate) fn memory_size(&self) -> usize {
        self.columns
            .iter()
            .map(GroupKeys::memory_size)
            .sum::<usize>()
            + self
                .levels
                .iter()
                .map(|l| {
                    l.slots.capacity() * 4
                        + l.pairs.capacity() * 8
                        + l.packed.capacity() * 8
                        + l.hashed.as_ref().map_or(0, IntKeys::memory_size)
                })
                .sum::<usize>()
            + self.scratch.iter().map(|c| c.capacity() * 4).sum::<usize>()
    }

    /// Each row's group id and, when `counts` is given, the rows per group
    /// (as [`GroupKeys::assign`]).
    pub(crate) fn intern(
        &mut self,
        keys: &[ArrayRef],
        ids: &mut Vec<u32>,
        counts: Option<&mut Vec<u64>>,
        rows: usize,
    ) -> Result<()> {
        if self.intern_known_pair(keys, ids) {
            if let Some(counts) = counts {
                counts.resize(self.len(), 0);
                count_ids(ids, counts);
            }
            return Ok(());
        }
        self.intern_with(ids, counts, |c, column, codes| {
            column.assign(std::slice::from_ref(&keys[c]), codes, None, rows)
        })
    }

    /// [`Self::intern`] of the rows whose codes in each column come from
    /// `code(column index, column table, codes out)`: the general pass,
    /// for callers that code the columns their own way (straight from
    /// Parquet dictionary codes). Every column must give as many codes.
    pub(crate) fn intern_with(
        &mut self,
        ids: &mut Vec<u32>,
        counts: Option<&mut Vec<u64>>,
        mut code: impl FnMut(usize, &mut GroupKeys, &mut Vec<u32>) -> Result<()>,
    ) -> Result<()> {
        for (c, (column, codes)) in
            self.columns.iter_mut().zip(&mut self.scratch).enumerate()
        {
            code(c, column, codes)?;
        }
        let (mut tuple, mut next) = (std::mem::take(&mut self.scratch[0]), vec![]);
        // Each level is sized for the tuples the one before it holds now
        // (exact, where a bound from the rows would be far too loose).
        let mut a_len = self.columns[0].len();
        for (l, level) in self.levels.iter_mut().enumerate() {
            level.prepare(a_len, self.columns[l + 1].len());
            level.intern(&tuple, &self.scratch[l + 1], &mut next);
            std::mem::swap(&mut tuple, &mut next);
            a_len = level.pairs.len();
        }
        self.scratch[0] = next;
        if let Some(counts) = counts {
            counts.resize(self.len(), 0);
            count_ids(&tuple, counts);
        }
        *ids = tuple;
        Ok(())
    }

    /// The steady state of two short string keys with few values (TPC-H
    /// Q1's flag and status): every row's pair already has a group. Then
    /// each row is two branch-free view lookups and one pair-table read, in
    /// one pass with no per-column codes in between. False, with `ids` to
    /// be discarded, when the batch needs the general pass (a new value or
    /// pair, a NULL, a long string, another key shape).
    fn intern_known_pair(&self, keys: &[ArrayRef], ids: &mut Vec<u32>) -> bool {
        let (
            [a, b],
            [
                GroupKeys::View { keys: ka, .. },
                GroupKeys::View { keys: kb, .. },
            ],
            [level],
        ) = (keys, self.columns.as_slice(), self.levels.as_slice())
        else {
            return false;
        };
        let (Some(ta), Some(tb)) = (ka.known(), kb.known()) else {
            return false;
        };
        let (Some(a), Some(b)) = (a.as_string_view_opt(), b.as_string_view_opt()) else {
            return false;
        };
        if a.null_count() > 0 || b.null_count() > 0 || level.slots.is_empty() {
            return false;
        }
        // The table covers every code its columns hold (it is prepared for
        // them on each batch) and its size is a power of two: the mask keeps
        // known pairs where they are and the arbitrary codes of unknown
        // views in bounds.
        let (slots, shift, mask) =
            (level.slots.as_slice(), level.shift, level.slots.len() - 1);
        // A plain loop over locals: as an iterator adaptor's closure, the
        // table, shift, mask and flag were read and written through the
        // closure's captures on every row (slower; see benches/README.md).
        let mut known = true;
        ids.clear();
        ids.resize(a.len(), 0);
        for ((id, &va), &vb) in ids.iter_mut().zip(a.views()).zip(b.views()) {
            let ((ca, fa), (cb, fb)) = (ta.code(va), tb.code(vb));
            let g = slots[((ca as usize) << shift | cb as usize) & mask];
            known &= fa & fb & (g != EMPTY);
            *id = g;
        }
        known
    }

    /// The keys of every group, in id order; leaves the keys empty.
    pub(crate) fn emit(&mut self) -> Result<Vec<ArrayRef>> {
        // Walk the levels back from the groups to each column's code.
        let k = self.columns.len();
        let mut codes: Vec<Vec<u32>> = vec![vec![]; k];
        let mut tuple: Vec<u32> = (0..self.len() as u32).collect();
        for l in (0..k - 1).rev() {
            let pairs = &self.levels[l].pairs;
            codes[l + 1] = tuple.iter().map(|&t| pairs[t as usize].1).collect();
            tuple = tuple.iter().map(|&t| pairs[t as usize].0).collect();
        }
        codes[0] = tuple;
        let mut out = Vec::with_capacity(k);
        for (column, codes) in self.columns.iter_mut().zip(codes) {
            let values = column.emit()?.pop().expect("one column");
            out.push(take(values.as_ref(), &UInt32Array::from(codes), None)?);
        }
        *self = Composite::try_new(&self.types)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::StringViewArray;
    use std::collections::HashMap;
    use std::sync::Arc;

    /// Two string-view keys batch by batch: the steady state (every pair
    /// known) takes the fused pass, and batches with a new value, a new pair
    /// of known values, a NULL, a long string or a view with stray padding
    /// bytes fall back. Ids and counts against a map of first appearances.
    #[test]
    fn two_view_keys_keep_their_ids_across_batches() {
        let flags = ["A", "N", "R", "", "a value longer than twelve"];
        let status = ["F", "O", "x"];
        let mut keys =
            Composite::try_new(&[DataType::Utf8View, DataType::Utf8View]).unwrap();
        let (mut ids, mut counts) = (vec![], vec![]);
        let mut want: HashMap<(Option<&str>, Option<&str>), u32> = HashMap::new();
        let mut want_counts: Vec<u64> = vec![];
        let mut seed = 11u64;
        let mut next = |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for batch in 0..40 {
            // Batches 0-9 use 3 flags and 2 statuses (known after the first);
            // later ones bring the empty string, a long string, a third
            // status and NULLs, now and then.
            let (nf, ns) = if batch < 10 { (3, 2) } else { (5, 3) };
            let rows: Vec<(Option<&str>, Option<&str>)> = (0..300)
                .map(|_| {
                    let f =
                        (batch < 10 || next(50) != 0).then(|| flags[next(nf) as usize]);
                    (f, Some(status[next(ns) as usize]))
                })
                .collect();
            let a: ArrayRef = Arc::new(StringViewArray::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            ));
            let b: ArrayRef = Arc::new(StringViewArray::from(
                rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            ));
            keys.intern(&[a, b], &mut ids, Some(&mut counts), 0)
                .unwrap();
            for (row, &id) in rows.iter().zip(&ids) {
                let next_id = want.len() as u32;
                assert_eq!(
                    *want.entry(*row).or_insert(next_id),
                    id,
                    "batch {batch}, {row:?}"
                );
                want_counts.resize(want.len(), 0);
                want_counts[id as usize] += 1;
            }
            assert_eq!(counts, want_counts, "batch {batch}");
        }
        // "A" again, with garbage in its view's padding: same group.
        let padded = (1u128 | (b'A' as u128) << 32) | (0xABu128 << 48);
        // SAFETY: an inline view of the valid string "A"; no buffers needed.
        let odd: ArrayRef = Arc::new(unsafe {
            StringViewArray::new_unchecked(vec![padded].into(), vec![], None)
        });
        let f: ArrayRef = Arc::new(StringViewArray::from(vec!["F"]));
        keys.intern(&[odd, f], &mut ids, None, 0).unwrap();
        assert_eq!(ids, [want[&(Some("A"), Some("F"))]]);
    }

    /// Tuples whose direct table would pass [`MAX_PAIR_SLOTS`]: the level
    /// turns hashed mid-way and every tuple keeps its id; `emit` gives the
    /// keys back in id order.
    #[test]
    fn wide_tuples_hash_their_pairs_and_keep_their_ids() {
        use datafusion::arrow::array::Int64Array;
        let mut keys = Composite::try_new(&[DataType::Int64, DataType::Int64]).unwrap();
        let mut want: HashMap<(i64, i64), u32> = HashMap::new();
        let (mut ids, mut seed) = (vec![], 5u64);
        for batch in 0..20i64 {
            // Each batch widens both columns: 3000 values each at the end.
            let rows: Vec<(i64, i64)> = (0..500)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(7);
                    let m = (batch + 1) * 150;
                    (((seed >> 20) as i64) % m, ((seed >> 40) as i64) % m)
                })
                .collect();
            let a: ArrayRef =
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0)));
            let b: ArrayRef =
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1)));
            keys.intern(&[a, b], &mut ids, None, 0).unwrap();
            for (row, &id) in rows.iter().zip(&ids) {
                let next = want.len() as u32;
                assert_eq!(*want.entry(*row).or_insert(next), id, "batch {batch}");
            }
        }
        assert!(keys.levels[0].hashed.is_some());
        let emitted = keys.emit().unwrap();
        let (a, b) = (
            emitted[0].as_primitive::<datafusion::arrow::datatypes::Int64Type>(),
            emitted[1].as_primitive::<datafusion::arrow::datatypes::Int64Type>(),
        );
        for (pair, &id) in &want {
            assert_eq!((a.value(id as usize), b.value(id as usize)), *pair);
        }
    }
}
