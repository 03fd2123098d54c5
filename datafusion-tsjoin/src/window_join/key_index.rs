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
        inline: HashMap<u128, u32>,
        /// Views seen lately, in front of `inline` (see [`Recent`]).
        recent: Recent,
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

/// A direct-mapped cache of inline views and their ids in front of the
/// hash map: one multiply, one load and one compare for a key met before,
/// where the map hashes the view and probes a group. Keys of a join are
/// few (symbols, tags), so nearly every row finds its slot holding its own
/// key; a row whose slot holds another key asks the map and takes the slot
/// over. Every entry is a key of the map with its id, so a hit is always
/// the map's answer.
struct Recent {
    /// `(view, id + 1)`; 0 marks an empty slot.
    slots: Box<[(u128, u32)]>,
}

/// Slots of [`Recent`] (a power of two): twice the keys of a typical join
/// side (a thousand symbols) in a few tens of KB.
const RECENT_SLOTS: usize = 2048;

impl Recent {
    fn new() -> Self {
        Self {
            slots: vec![(0, 0); RECENT_SLOTS].into_boxed_slice(),
        }
    }

    #[inline]
    fn slot(view: u128) -> usize {
        let folded = (view as u64) ^ ((view >> 64) as u64);
        (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            >> (64 - RECENT_SLOTS.trailing_zeros())) as usize
    }

    /// The id cached for `view`, if its slot holds it.
    #[inline]
    fn get(&self, view: u128) -> Option<u32> {
        let (v, id) = self.slots[Self::slot(view)];
        (id != 0 && v == view).then(|| id - 1)
    }

    #[inline]
    fn put(&mut self, view: u128, id: u32) {
        self.slots[Self::slot(view)] = (view, id + 1);
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
                inline: HashMap::new(),
                recent: Recent::new(),
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
            KeyKind::Str {
                inline,
                recent,
                long,
                null,
            } => {
                Ok(str_groups(&keys[0], &mut |v| match v {
                    StrKey::Null => *null.get_or_insert_with(|| fresh(groups)),
                    StrKey::Inline(view) => recent.get(view).unwrap_or_else(|| {
                        let id = *inline.entry(view).or_insert_with(|| fresh(groups));
                        recent.put(view, id);
                        id
                    }),
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
            KeyKind::Str {
                inline,
                recent,
                long,
                null,
            } => Ok(str_groups(&keys[0], &mut |v| match v {
                StrKey::Null => *null,
                StrKey::Inline(view) => {
                    recent.get(view).or_else(|| inline.get(&view).copied())
                }
                StrKey::Long(b) => long.get(b).copied(),
            })),
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

    /// With far more keys than [`Recent`] has slots (so slots are taken
    /// over again and again), interning hands out ids in order of first
    /// appearance and lookups find them, as the hash map alone would.
    #[test]
    fn recent_views_agree_with_the_map_under_collisions() {
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
    }
}
