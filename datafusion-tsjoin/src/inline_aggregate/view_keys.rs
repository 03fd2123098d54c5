//! [`ViewKeys`]: string group keys → dense codes, read off Utf8View views.
//!
//! A string of at most 12 bytes lives entirely inside its 16-byte view
//! (length and bytes), so the view itself is the key: one 128-bit compare,
//! no hashing of bytes, no pointer chase. Longer strings are keyed by their
//! length and a hash of their bytes, and compared byte for byte on a match.
//! Both kinds share one open-addressing table (a long string's tag carries
//! its length, over 12, where a short view carries its own, so the two
//! never collide). Codes are dense, in order of first appearance; NULL is
//! one more code.

use datafusion::arrow::array::{Array, ArrayRef, StringViewArray, StringViewBuilder};
use datafusion::physical_plan::repartition::REPARTITION_RANDOM_STATE;
use std::hash::BuildHasher;
use std::sync::Arc;

const EMPTY: u32 = u32::MAX;
/// Tables of at most this many keys are spread ([`ViewKeys::spread`])...
const SPREAD_KEYS: usize = 64;
/// ... over at most this many slots (96 KiB).
const SPREAD_SLOTS: usize = 1 << 12;
/// Longest string whose view holds all its bytes.
const INLINE_LEN: u32 = 12;

/// String keys → codes; see the module documentation.
#[derive(Debug, Clone, Default)]
pub struct ViewKeys {
    /// `(tag low, tag high, code)`, linear probing, at most half full.
    entries: Vec<(u64, u64, u32)>,
    mask: usize,
    /// Bytes of each code's string, back to back (`offsets[c]..offsets[c + 1]`).
    bytes: Vec<u8>,
    offsets: Vec<usize>,
    null: Option<u32>,
}

impl ViewKeys {
    /// Number of codes (NULL included).
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Bytes held.
    pub fn memory_size(&self) -> usize {
        self.entries.capacity() * 24 + self.bytes.capacity() + self.offsets.capacity() * 8
    }

    /// Each row's code (`ids`, replaced); new strings get the next codes.
    pub fn intern(&mut self, a: &StringViewArray, ids: &mut Vec<u32>) {
        ids.clear();
        ids.reserve(a.len());
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        let views = a.views();
        match a.nulls().filter(|n| n.null_count() > 0) {
            None if self.intern_known(views, ids) => {}
            None => {
                ids.clear();
                for (i, &v) in views.iter().enumerate() {
                    ids.push(self.code(a, i, v));
                }
            }
            Some(n) => {
                for (i, &v) in views.iter().enumerate() {
                    ids.push(if n.is_null(i) {
                        self.null_code()
                    } else {
                        self.code(a, i, v)
                    });
                }
            }
        }
    }

    /// The steady state of a few short keys: every view of the batch is a
    /// known inline string sitting in its home slot (as [`Self::spread`]
    /// keeps them). Then the batch maps with no branch per row; returns
    /// false, with `ids` to be discarded, when some row is new, long or
    /// displaced.
    fn intern_known(&self, views: &[u128], ids: &mut Vec<u32>) -> bool {
        let Some(table) = self.known() else {
            return false;
        };
        let mut known = true;
        ids.extend(views.iter().map(|&v| {
            let (c, found) = table.code(v);
            known &= found;
            c
        }));
        known
    }

    /// The table [`Self::intern_known`] reads, when every key is a short
    /// inline string in its home slot (few keys, as [`Self::spread`] keeps
    /// them): for callers that look views up row by row themselves.
    pub(crate) fn known(&self) -> Option<Known<'_>> {
        (!self.entries.is_empty() && self.len() <= SPREAD_KEYS).then_some(Known {
            entries: &self.entries,
            mask: self.mask,
        })
    }

    /// The strings of every code, in code order.
    pub fn emit(&self) -> ArrayRef {
        let mut b = StringViewBuilder::with_capacity(self.len());
        for c in 0..self.len() {
            if Some(c as u32) == self.null {
                b.append_null();
            } else {
                let s = &self.bytes[self.offsets[c]..self.offsets[c + 1]];
                // SAFETY: the bytes were copied from a valid UTF-8 string.
                b.append_value(unsafe { std::str::from_utf8_unchecked(s) });
            }
        }
        Arc::new(b.finish())
    }

    fn null_code(&mut self) -> u32 {
        match self.null {
            Some(c) => c,
            None => {
                let c = self.len() as u32;
                self.offsets.push(self.bytes.len());
                self.null = Some(c);
                c
            }
        }
    }

    #[inline(always)]
    fn code(&mut self, a: &StringViewArray, i: usize, view: u128) -> u32 {
        let len = view as u32;
        let tag = if len <= INLINE_LEN {
            unpadded(view)
        } else {
            let h = REPARTITION_RANDOM_STATE
                .random_state()
                .hash_one(a.value(i).as_bytes());
            ((h as u128) << 64) | len as u128
        };
        let (lo, hi) = (tag as u64, (tag >> 64) as u64);
        if self.entries.is_empty() {
            self.grow();
        }
        let mut s = slot(lo, hi, self.mask);
        loop {
            let (elo, ehi, c) = self.entries[s];
            if c == EMPTY {
                break;
            }
            if elo == lo
                && ehi == hi
                && (len <= INLINE_LEN || self.string(c) == a.value(i).as_bytes())
            {
                return c;
            }
            s = (s + 1) & self.mask;
        }
        let c = self.len() as u32;
        self.bytes.extend_from_slice(a.value(i).as_bytes());
        self.offsets.push(self.bytes.len());
        self.entries[s] = (lo, hi, c);
        if 2 * (self.len() + 1) > self.entries.len() {
            self.grow();
        }
        if s != slot(lo, hi, self.mask) && self.len() <= SPREAD_KEYS {
            self.spread();
        }
        c
    }

    /// Grows a small table until every key sits in its home slot (up to
    /// [`SPREAD_SLOTS`]): on few keys in random order, a probe that may
    /// take one step or two is a branch the CPU mispredicts on every other
    /// row, which costs more than the lookup itself.
    fn spread(&mut self) {
        while self.entries.len() < SPREAD_SLOTS
            && self
                .entries
                .iter()
                .enumerate()
                .any(|(s, e)| e.2 != EMPTY && slot(e.0, e.1, self.mask) != s)
        {
            self.grow();
        }
    }

    fn string(&self, c: u32) -> &[u8] {
        &self.bytes[self.offsets[c as usize]..self.offsets[c as usize + 1]]
    }

    /// Doubles the table (16 entries at first) and re-inserts every entry.
    fn grow(&mut self) {
        let size = (self.entries.len() * 2).max(16);
        let old = std::mem::replace(&mut self.entries, vec![(0, 0, EMPTY); size]);
        self.mask = size - 1;
        for (lo, hi, c) in old.into_iter().filter(|e| e.2 != EMPTY) {
            let mut s = slot(lo, hi, self.mask);
            while self.entries[s].2 != EMPTY {
                s = (s + 1) & self.mask;
            }
            self.entries[s] = (lo, hi, c);
        }
    }
}

/// A [`ViewKeys`] table whose keys all sit in their home slots: a view's
/// code in one probe, without branches.
#[derive(Clone, Copy)]
pub(crate) struct Known<'a> {
    entries: &'a [(u64, u64, u32)],
    mask: usize,
}

impl Known<'_> {
    /// The code of view `v` and whether it is a known key (when not, the
    /// code is meaningless). Views are compared as they come: one with stray
    /// bytes in its padding (see `unpadded`) is not found here, and the slow
    /// path that the caller falls back to clears them.
    #[inline(always)]
    pub(crate) fn code(self, v: u128) -> (u32, bool) {
        let (lo, hi) = (v as u64, (v >> 64) as u64);
        let (elo, ehi, c) = self.entries[slot(lo, hi, self.mask)];
        // (An empty slot holds (0, 0): the empty string's view.)
        (
            c,
            (v as u32 <= INLINE_LEN) & (elo == lo) & (ehi == hi) & (c != EMPTY),
        )
    }
}

/// An inline view with the bytes past its string zeroed (the format asks
/// producers to zero them but does not check): equal strings, equal views.
/// Views of longer strings come back whole. (Slow path only: the shift
/// costs a third of the known-keys pass.)
fn unpadded(view: u128) -> u128 {
    let len = (view as u32).min(INLINE_LEN);
    view & (u128::MAX >> (8 * (INLINE_LEN - len)))
}

/// Table slot of a tag: both halves folded, then a multiplicative hash.
#[inline(always)]
fn slot(lo: u64, hi: u64, mask: usize) -> usize {
    // Every bit of the view must reach the slot's bits: short keys differ
    // in a few bytes anywhere in the view ("truck_17", "truck_993"). A
    // multiply alone moves input bits only upwards, so the slot (low
    // bits) missed the high ones: 1,000 truck names fell into 4 slots and
    // probed hundreds of entries each. murmur3's 64-bit finaliser mixes
    // both ways.
    let mut k = lo ^ hi.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    k ^= k >> 33;
    k = k.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    k ^= k >> 33;
    k = k.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    k ^= k >> 33;
    k as usize & mask
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::AsArray;

    /// Keys that differ in a few bytes of their view spread over the
    /// table's slots as random ones would (1,000 keys in 2,048 slots fill
    /// about 790 on average); the old slot function put these in 4.
    #[test]
    fn similar_short_keys_spread_over_the_slots() {
        for names in [
            (0..1000).map(|i| format!("truck_{i}")).collect::<Vec<_>>(),
            (0..1000).map(|i| format!("{i}")).collect(),
            (0..1000).map(|i| format!("d{i}")).collect(),
        ] {
            let a = StringViewArray::from_iter_values(&names);
            let slots: std::collections::HashSet<usize> = a
                .views()
                .iter()
                .map(|&v| slot(v as u64, (v >> 64) as u64, 2047))
                .collect();
            assert!(slots.len() > 700, "{} slots for {}", slots.len(), names[1]);
        }
    }

    #[test]
    fn interns_inline_and_long_strings_and_null() {
        use datafusion::arrow::array::StringViewArray;
        let mut keys = ViewKeys::default();
        let mut ids = vec![];
        let a = StringViewArray::from(vec![
            Some("A"),
            None,
            Some("a string over twelve bytes"),
            Some("A"),
        ]);
        keys.intern(&a, &mut ids);
        assert_eq!(ids, [0, 1, 2, 0]);
        assert_eq!(keys.len(), 3);
    }

    /// The branch-free pass for known keys: the empty string (whose view
    /// equals an empty slot's), a new key in a later batch, a long key.
    #[test]
    fn known_keys_pass_falls_back_on_new_keys() {
        let mut keys = ViewKeys::default();
        let mut ids = vec![];
        let batches: [&[&str]; 4] = [
            &["", "a"],
            &["a", "", "a"],
            &["b", "", "a"],
            &["a", "a long string, over 12", "b", ""],
        ];
        let want: [&[u32]; 4] = [&[0, 1], &[1, 0, 1], &[2, 0, 1], &[1, 3, 2, 0]];
        for (batch, want) in batches.iter().zip(want) {
            keys.intern(&StringViewArray::from(batch.to_vec()), &mut ids);
            assert_eq!(ids, want, "{batch:?}");
        }
        assert_eq!(keys.len(), 4);
        // "a" again, with garbage in its view's padding.
        let padded = (1u128 | (b'a' as u128) << 32) | (0xABu128 << 48);
        // SAFETY: an inline view of the valid string "a"; no buffers needed.
        let odd =
            unsafe { StringViewArray::new_unchecked(vec![padded].into(), vec![], None) };
        keys.intern(&odd, &mut ids);
        assert_eq!(ids, [1]);
    }

    #[test]
    fn short_long_and_null_strings_keep_their_codes_across_batches() {
        let words: Vec<String> = (0..300)
            .map(|i| {
                if i % 3 == 0 {
                    format!("long string number {i:05}")
                } else {
                    format!("s{i}")
                }
            })
            .collect();
        let mut keys = ViewKeys::default();
        let mut ids = vec![];
        let mut first: std::collections::HashMap<Option<String>, u32> =
            Default::default();
        for batch in 0..5u64 {
            let rows: Vec<Option<String>> = (0..1000u64)
                .map(|r| {
                    ((r * 7 + batch) % 13 != 0)
                        .then(|| words[((r * 31 + batch * 17) % 300) as usize].clone())
                })
                .collect();
            let a = StringViewArray::from(
                rows.iter().map(|s| s.as_deref()).collect::<Vec<_>>(),
            );
            keys.intern(&a, &mut ids);
            for (row, &id) in rows.iter().zip(&ids) {
                assert_eq!(*first.entry(row.clone()).or_insert(id), id, "{row:?}");
            }
        }
        assert_eq!(keys.len(), first.len());
        let emitted = keys.emit();
        let emitted = emitted.as_string_view();
        for (s, &c) in &first {
            assert_eq!(
                s.as_deref(),
                emitted
                    .is_valid(c as usize)
                    .then(|| emitted.value(c as usize))
            );
        }
    }
}
