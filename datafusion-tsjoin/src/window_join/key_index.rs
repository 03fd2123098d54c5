//! Equality keys of a WINDOW JOIN: key → dense group id, null-safe (NULL is
//! a value that matches NULL, as in QuestDB).
//!
//! One string key (any string encoding or a dictionary of strings) and one
//! integer key hash their values directly (short strings as one `u128`);
//! dictionaries intern each distinct value once per batch and map codes.
//! Anything else (several columns, other types) goes through arrow's row
//! format.

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::{HashMap, Result};

/// Key → dense group id.
pub(crate) struct KeyIndex {
    kind: KeyKind,
    /// Key types, to make more indexes like this one.
    types: Vec<DataType>,
    /// Groups interned so far.
    groups: u32,
}

enum KeyKind {
    /// One string key. Strings of up to 12 bytes are keyed by their Arrow
    /// view (length and bytes in one `u128`), whatever their encoding: one
    /// integer hash instead of a byte-string hash, the common case for
    /// symbols and tags.
    Str {
        inline: ViewTable,
        long: HashMap<Box<[u8]>, u32>,
        null: Option<u32>,
    },
    /// One integer key (widened to i64).
    Int {
        map: HashMap<i64, u32>,
        null: Option<u32>,
    },
    /// Anything else, in arrow's row format.
    Rows {
        converter: RowConverter,
        map: HashMap<Box<[u8]>, u32>,
    },
}

/// Inline views (strings of up to 12 bytes, length and bytes in one
/// `u128`) and their ids in an open-addressing table with linear probing,
/// kept at most half full: a key met before costs one multiply-fold hash,
/// one slot load and one compare, nearly always at its first slot. Join
/// keys are few and short (symbols, tags) and every right row and every
/// left row looks one up, so this replaces a general hash map, whose
/// probe reads a control group and then a slot.
struct ViewTable {
    /// `(view, id + 1)`; 0 marks an empty slot.
    slots: Box<[(u128, u32)]>,
    /// Keys held.
    len: usize,
}

/// Slots a [`ViewTable`] starts with (a power of two).
const VIEW_TABLE_SLOTS: usize = 1024;

impl ViewTable {
    fn new() -> Self {
        Self {
            slots: vec![(0, 0); VIEW_TABLE_SLOTS].into_boxed_slice(),
            len: 0,
        }
    }

    /// `view`'s first slot: both halves multiplied in, the top bits kept
    /// (a power-of-two table).
    #[inline]
    fn home(&self, view: u128) -> usize {
        const K1: u64 = 0x9E37_79B9_7F4A_7C15;
        const K2: u64 = 0xC2B2_AE3D_27D4_EB4F;
        let h = ((view as u64).wrapping_mul(K1) ^ (view >> 64) as u64).wrapping_mul(K2);
        (h >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    /// The id of `view`, if held.
    #[inline]
    fn get(&self, view: u128) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(view);
        loop {
            let (v, id) = self.slots[i];
            if id == 0 {
                return None;
            }
            if v == view {
                return Some(id - 1);
            }
            i = (i + 1) & mask;
        }
    }

    /// The id of `view`, handing it `fresh(groups)` when new.
    #[inline]
    fn intern(&mut self, view: u128, groups: &mut u32) -> u32 {
        match self.get(view) {
            Some(id) => id,
            None => self.insert(view, fresh(groups)),
        }
    }

    /// Adds `view` (not held) with `id`; returns `id`.
    #[cold]
    #[inline(never)]
    fn insert(&mut self, view: u128, id: u32) -> u32 {
        if 2 * (self.len + 1) > self.slots.len() {
            let bigger = vec![(0, 0); 2 * self.slots.len()].into_boxed_slice();
            let old = std::mem::replace(&mut self.slots, bigger);
            for &(v, held) in old.iter().filter(|s| s.1 != 0) {
                self.place(v, held);
            }
        }
        self.place(view, id + 1);
        self.len += 1;
        id
    }

    /// Writes `(view, stored)` into the first free slot from `view`'s home.
    fn place(&mut self, view: u128, stored: u32) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(view);
        while self.slots[i].1 != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = (view, stored);
    }
}

/// One string key value as [`KeyKind::Str`] hashes it.
#[derive(Clone, Copy)]
enum StrKey<'a> {
    Null,
    /// At most 12 bytes, packed as an Arrow inline view.
    Inline(u128),
    Long(&'a [u8]),
}

/// Longest string kept inline in an Arrow view.
const MAX_INLINE: usize = 12;

impl<'a> StrKey<'a> {
    fn of(bytes: &'a [u8]) -> Self {
        if bytes.len() <= MAX_INLINE {
            let mut view = [0u8; 16];
            view[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
            view[4..4 + bytes.len()].copy_from_slice(bytes);
            StrKey::Inline(u128::from_le_bytes(view))
        } else {
            StrKey::Long(bytes)
        }
    }
}

fn is_string(t: &DataType) -> bool {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => matches!(
            v.as_ref(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ),
        _ => false,
    }
}

fn is_int(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
    )
}

fn str_key(v: Option<&str>) -> StrKey<'_> {
    v.map_or(StrKey::Null, |s| StrKey::of(s.as_bytes()))
}

/// `f(key)` for every row of a string array (any encoding); a dictionary
/// calls `f` once per dictionary value (and once for NULL) and maps codes.
fn str_groups<T: Copy, F: FnMut(StrKey) -> T>(array: &ArrayRef, f: &mut F) -> Vec<T> {
    match array.data_type() {
        DataType::Utf8 => array
            .as_string::<i32>()
            .iter()
            .map(|v| f(str_key(v)))
            .collect(),
        DataType::LargeUtf8 => array
            .as_string::<i64>()
            .iter()
            .map(|v| f(str_key(v)))
            .collect(),
        DataType::Utf8View => {
            // Inline views are used as they are, with the padding masked
            // (the format does not require producers to zero it).
            let a = array.as_string_view();
            let key = |i: usize, view: u128| {
                let len = view as u32 as usize;
                if len <= MAX_INLINE {
                    StrKey::Inline(view & (u128::MAX >> (8 * (MAX_INLINE - len))))
                } else {
                    StrKey::Long(a.value(i).as_bytes())
                }
            };
            let views = a.views().iter().enumerate();
            match a.nulls().filter(|n| n.null_count() > 0) {
                None => views.map(|(i, &view)| f(key(i, view))).collect(),
                Some(n) => views
                    .map(|(i, &view)| {
                        f(if n.is_null(i) {
                            StrKey::Null
                        } else {
                            key(i, view)
                        })
                    })
                    .collect(),
            }
        }
        DataType::Dictionary(..) => {
            let dict = array.as_any_dictionary();
            let values = str_groups(dict.values(), f);
            let null = f(StrKey::Null);
            let keys = dict.normalized_keys();
            (0..array.len())
                .map(|i| {
                    if array.is_null(i) {
                        null
                    } else {
                        values[keys[i]]
                    }
                })
                .collect()
        }
        other => unreachable!("not a string type: {other}"),
    }
}

/// The next group id, counting it.
fn fresh(groups: &mut u32) -> u32 {
    *groups += 1;
    *groups - 1
}

impl KeyIndex {
    /// An empty index for keys of these types.
    pub(crate) fn try_new(types: &[DataType]) -> Result<Self> {
        let kind = match types {
            [t] if is_string(t) => KeyKind::Str {
                inline: ViewTable::new(),
                long: HashMap::new(),
                null: None,
            },
            [t] if is_int(t) => KeyKind::Int {
                map: HashMap::new(),
                null: None,
            },
            _ => KeyKind::Rows {
                converter: RowConverter::new(
                    types.iter().map(|t| SortField::new(t.clone())).collect(),
                )?,
                map: HashMap::new(),
            },
        };
        Ok(Self {
            kind,
            types: types.to_vec(),
            groups: 0,
        })
    }

    /// An empty index for the same key types.
    pub(crate) fn empty_like(&self) -> Result<Self> {
        Self::try_new(&self.types)
    }

    /// Number of distinct keys interned.
    pub(crate) fn len(&self) -> usize {
        self.groups as usize
    }

    /// Interns one batch of right-side keys: each row's group id (dense, in
    /// order of first appearance).
    pub(crate) fn intern(&mut self, keys: &[ArrayRef]) -> Result<Vec<u32>> {
        let groups = &mut self.groups;
        match &mut self.kind {
            KeyKind::Str { inline, long, null } => {
                Ok(str_groups(&keys[0], &mut |v| match v {
                    StrKey::Null => *null.get_or_insert_with(|| fresh(groups)),
                    StrKey::Inline(view) => inline.intern(view, groups),
                    // Borrowed lookup first: no allocation for known keys.
                    StrKey::Long(b) => match long.get(b) {
                        Some(&g) => g,
                        None => *long.entry(b.into()).or_insert_with(|| fresh(groups)),
                    },
                }))
            }
            KeyKind::Int { map, null } => {
                let ints = cast(&keys[0], &DataType::Int64)?;
                Ok(ints
                    .as_primitive::<Int64Type>()
                    .iter()
                    .map(|v| match v {
                        None => *null.get_or_insert_with(|| fresh(groups)),
                        Some(v) => *map.entry(v).or_insert_with(|| fresh(groups)),
                    })
                    .collect())
            }
            KeyKind::Rows { converter, map } => {
                let rows = converter.convert_columns(keys)?;
                Ok(rows
                    .iter()
                    .map(|row| match map.get(row.as_ref()) {
                        Some(&g) => g,
                        None => *map
                            .entry(row.as_ref().into())
                            .or_insert_with(|| fresh(groups)),
                    })
                    .collect())
            }
        }
    }

    /// Group id of each row's key, `None` when the right side has no such key.
    pub(crate) fn lookup(&self, keys: &[ArrayRef]) -> Result<Vec<Option<u32>>> {
        match &self.kind {
            KeyKind::Str { inline, long, null } => {
                Ok(str_groups(&keys[0], &mut |v| match v {
                    StrKey::Null => *null,
                    StrKey::Inline(view) => inline.get(view),
                    StrKey::Long(b) => long.get(b).copied(),
                }))
            }
            KeyKind::Int { map, null } => {
                let ints = cast(&keys[0], &DataType::Int64)?;
                Ok(ints
                    .as_primitive::<Int64Type>()
                    .iter()
                    .map(|v| v.map_or(*null, |v| map.get(&v).copied()))
                    .collect())
            }
            KeyKind::Rows { converter, map } => {
                let rows = converter.convert_columns(keys)?;
                Ok((0..rows.num_rows())
                    .map(|i| map.get(rows.row(i).as_ref()).copied())
                    .collect())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::StringViewArray;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::sync::Arc;

    /// With far more keys than [`ViewTable`] starts with (so it grows
    /// several times, keys moving slots), interning hands out ids in order
    /// of first appearance and lookups find them, as a plain map would.
    #[test]
    fn view_table_agrees_with_a_map_as_it_grows() {
        let mut rng = StdRng::seed_from_u64(17);
        let keys: Vec<String> = (0..10_000).map(|i| format!("k{i}")).collect();
        let mut index = KeyIndex::try_new(&[DataType::Utf8View]).unwrap();
        let mut first: std::collections::HashMap<String, u32> = Default::default();
        for _ in 0..20 {
            let rows: Vec<Option<&str>> = (0..5_000)
                .map(|_| {
                    let k = rng.random_range(0..=keys.len());
                    keys.get(k).map(String::as_str)
                })
                .collect();
            let array: ArrayRef = Arc::new(StringViewArray::from(rows.clone()));
            let ids = index.intern(std::slice::from_ref(&array)).unwrap();
            for (row, id) in rows.iter().zip(&ids) {
                let key = row.map_or("<null>".to_string(), str::to_string);
                let next = first.len() as u32;
                assert_eq!(*first.entry(key).or_insert(next), *id);
            }
            let found = index.lookup(std::slice::from_ref(&array)).unwrap();
            assert_eq!(found, ids.iter().map(|&g| Some(g)).collect::<Vec<_>>());
        }
        let unknown: ArrayRef = Arc::new(StringViewArray::from(vec!["zz", "k99999"]));
        assert_eq!(index.lookup(&[unknown]).unwrap(), [None, None]);
        // The empty string's view is all zeros: a key like any other.
        let empty: ArrayRef = Arc::new(StringViewArray::from(vec!["", "k1", ""]));
        let next = first.len() as u32;
        let ids = index.intern(std::slice::from_ref(&empty)).unwrap();
        assert_eq!((ids[0], ids[2]), (next, next));
        assert_eq!(index.lookup(&[empty]).unwrap()[0], Some(next));
    }
}
