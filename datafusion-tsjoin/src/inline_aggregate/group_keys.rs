//! Phase 1 of the inline aggregate: group keys → dense `u32` group ids and
//! row counts per group, by key shape.

use super::accumulate::count_ids;
use super::composite::Composite;
use super::int_map::IntKeys;
use super::view_keys::ViewKeys;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, UInt32Array, new_empty_array, new_null_array,
};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
use datafusion::common::Result;
use datafusion::logical_expr::EmitTo;
use datafusion::physical_plan::aggregates::group_values::{
    GroupValues, new_group_values,
};
use datafusion::physical_plan::aggregates::order::GroupOrdering;
use std::sync::Arc;

/// A dictionary value no row has used yet.
const UNMAPPED: u32 = u32::MAX;
/// A dictionary value being interned in this batch.
const PENDING: u32 = u32::MAX - 1;

/// The specialised path a key list takes (EXPLAIN shows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyShape {
    /// One integer, date or timestamp key: [`IntKeys`] (direct or hashed).
    Int,
    /// One dictionary-encoded key: each dictionary interned once per batch,
    /// codes mapped to groups.
    Dict,
    /// One string key read from Parquet dictionary codes: the dictionary
    /// scan interns each chunk's entries once into a [`ViewKeys`] table and
    /// maps the rows' codes to groups (no string is decoded per row). Only
    /// with the scan: where it does not take over, DataFusion's aggregate
    /// runs (one string key coded row by row lost to it on ClickBench).
    String,
    /// Several integer, string or dictionary keys (or `Float64` ones read
    /// from Parquet dictionary codes) while the groups stay
    /// few: each column coded on its own (as the single-key shapes do), the
    /// code tuples mapped to group ids by [`IntKeys`]. Past
    /// [`COMPOSITE_MAX_GROUPS`] groups it turns into [`KeyShape::General`].
    Composite,
    /// Anything else: DataFusion's `GroupValues` (row or column format).
    General,
}

/// Groups above which a [`KeyShape::Composite`] table moves its groups to
/// DataFusion's multi-column `GroupValues`: with many groups its per-column
/// tables and the tuple table no longer stay in cache, and one table wins.
pub const COMPOSITE_MAX_GROUPS: usize = 1 << 16;

impl GroupKeys {
    /// The table of one column of a [`KeyShape::Composite`] key.
    pub(super) fn column(t: &DataType) -> Result<Self> {
        Ok(match t {
            DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 => {
                GroupKeys::View {
                    keys: ViewKeys::default(),
                    data_type: t.clone(),
                }
            }
            _ => GroupKeys::try_new(std::slice::from_ref(t))?,
        })
    }
}

impl KeyShape {
    /// The shape for keys of these types.
    pub fn of(types: &[DataType]) -> Self {
        match types {
            [t] if int_like(t) => KeyShape::Int,
            [DataType::Dictionary(..)] => KeyShape::Dict,
            [_, _, ..] if types.iter().all(codable) => KeyShape::Composite,
            _ => KeyShape::General,
        }
    }

    /// The shape for keys of these types read from Parquet dictionary
    /// codes: [`KeyShape::String`] for one string key, else [`Self::of`].
    pub fn of_codes(types: &[DataType]) -> Self {
        match types {
            [t] if string(t) => KeyShape::String,
            _ => Self::of(types),
        }
    }

    /// Name as EXPLAIN shows it.
    pub fn name(self) -> &'static str {
        match self {
            KeyShape::Int => "int",
            KeyShape::Dict => "dictionary",
            KeyShape::String => "string",
            KeyShape::Composite => "composite",
            KeyShape::General => "general",
        }
    }
}

/// Types kept as `i64` by [`KeyShape::Int`] (and cast back on output):
/// their cast to `Int64` is lossless and keeps their order.
pub(crate) fn int_like(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::Date32
            | DataType::Date64
            | DataType::Timestamp(..)
    )
}

/// String types (coded by [`ViewKeys`]).
fn string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8)
}

/// Types a [`KeyShape::Composite`] column may have: those a single-column
/// table codes fast, and `Float64`, which the planner lets in only where
/// the columns' Parquet dictionary codes are read (a float column coded row
/// by row costs more than DataFusion's one multi-column table; see
/// `benches/README.md`, TSBS avg-load).
fn codable(t: &DataType) -> bool {
    int_like(t)
        || matches!(
            t,
            DataType::Utf8
                | DataType::Utf8View
                | DataType::LargeUtf8
                | DataType::Dictionary(..)
                | DataType::Float64
        )
}

/// Group keys of one table (a partial or a merged one).
pub(crate) enum GroupKeys {
    Int {
        keys: IntKeys,
        data_type: DataType,
    },
    Dict {
        values: Box<dyn GroupValues>,
        dict_type: DataType,
        value_type: DataType,
        /// The last dictionary seen and its values' groups (batches of one
        /// file usually share it).
        cache: Option<(ArrayRef, Vec<u32>)>,
        null: Option<u32>,
    },
    Composite(Box<Composite>),
    /// One string key ([`KeyShape::String`]), or one string column of a
    /// composite key (see [`ViewKeys`]).
    View {
        keys: ViewKeys,
        data_type: DataType,
    },
    General {
        values: Box<dyn GroupValues>,
        types: Vec<DataType>,
    },
}

pub(super) fn group_values(types: &[DataType]) -> Result<Box<dyn GroupValues>> {
    let fields: Vec<Field> = types
        .iter()
        .enumerate()
        .map(|(i, t)| Field::new(format!("k{i}"), t.clone(), true))
        .collect();
    new_group_values(Arc::new(Schema::new(fields)), &GroupOrdering::None)
}

impl GroupKeys {
    /// Empty keys of these types.
    pub(crate) fn try_new(types: &[DataType]) -> Result<Self> {
        Self::of_shape(KeyShape::of(types), types)
    }

    /// Empty keys of these types in `shape` (one [`KeyShape::of`] or
    /// [`KeyShape::of_codes`] gives for them).
    pub(crate) fn of_shape(shape: KeyShape, types: &[DataType]) -> Result<Self> {
        Ok(match shape {
            KeyShape::Int => GroupKeys::Int {
                keys: IntKeys::default(),
                data_type: types[0].clone(),
            },
            KeyShape::Dict => {
                let DataType::Dictionary(_, value_type) = &types[0] else {
                    unreachable!("dictionary shape")
                };
                GroupKeys::Dict {
                    values: group_values(&[value_type.as_ref().clone()])?,
                    dict_type: types[0].clone(),
                    value_type: value_type.as_ref().clone(),
                    cache: None,
                    null: None,
                }
            }
            KeyShape::String => GroupKeys::View {
                keys: ViewKeys::default(),
                data_type: types[0].clone(),
            },
            KeyShape::Composite => {
                GroupKeys::Composite(Box::new(Composite::try_new(types)?))
            }
            KeyShape::General => GroupKeys::General {
                values: group_values(types)?,
                types: types.to_vec(),
            },
        })
    }

    /// Number of groups.
    pub(crate) fn len(&self) -> usize {
        match self {
            GroupKeys::Int { keys, .. } => keys.len(),
            GroupKeys::Dict { values, .. } | GroupKeys::General { values, .. } => {
                values.len()
            }
            GroupKeys::Composite(c) => c.len(),
            GroupKeys::View { keys, .. } => keys.len(),
        }
    }

    /// Whether a [`KeyShape::Composite`] table has moved to the general
    /// shape (its groups were too many for its direct tables).
    pub(crate) fn overflowed(&self) -> bool {
        matches!(self, GroupKeys::General { .. })
    }

    /// Bytes held.
    pub(crate) fn memory_size(&self) -> usize {
        match self {
            GroupKeys::Int { keys, .. } => keys.memory_size(),
            GroupKeys::Dict { values, cache, .. } => {
                values.size() + cache.as_ref().map_or(0, |(_, m)| m.capacity() * 4)
            }
            GroupKeys::Composite(c) => c.memory_size(),
            GroupKeys::View { keys, .. } => keys.memory_size(),
            GroupKeys::General { values, .. } => values.size(),
        }
    }

    /// Makes room for about `groups` groups in all (integer keys; the other
    /// shapes grow as they go).
    pub(crate) fn reserve_groups(&mut self, groups: usize) {
        if let GroupKeys::Int { keys, .. } = self {
            keys.reserve_groups(groups);
        }
    }

    /// Each row's group id (`ids`, replaced; new keys get the next ids) and
    /// rows per group (`counts`, grown to the number of groups). About
    /// `rows` rows are expected in all (0: unknown), which lets integer
    /// keys over a wide range stay directly indexed.
    pub(crate) fn intern(
        &mut self,
        keys: &[ArrayRef],
        ids: &mut Vec<u32>,
        counts: &mut Vec<u64>,
        rows: usize,
    ) -> Result<()> {
        self.assign(keys, ids, Some(counts), rows)
    }

    /// [`Self::intern`], counting rows per group only when `counts` is given.
    pub(crate) fn assign(
        &mut self,
        keys: &[ArrayRef],
        ids: &mut Vec<u32>,
        mut counts: Option<&mut Vec<u64>>,
        rows: usize,
    ) -> Result<()> {
        match self {
            GroupKeys::Int { keys: map, .. } => {
                let v = cast(&keys[0], &DataType::Int64)?;
                let v = v.as_primitive::<Int64Type>();
                map.assign_expecting(v.values(), v.nulls(), ids, rows);
            }
            GroupKeys::Dict {
                values,
                value_type,
                cache,
                null,
                ..
            } => {
                let dict = keys[0].as_any_dictionary();
                let fresh = cache
                    .as_ref()
                    .is_none_or(|(d, _)| !Arc::ptr_eq(d, dict.values()));
                if fresh {
                    *cache = Some((
                        Arc::clone(dict.values()),
                        vec![UNMAPPED; dict.values().len()],
                    ));
                }
                let mapping = &mut cache.as_mut().expect("cached").1;
                let codes = dict.normalized_keys();
                let key_nulls = keys[0].logical_nulls();
                let valid = |i: usize| key_nulls.as_ref().is_none_or(|n| n.is_valid(i));
                // Only the values some row refers to become groups: a
                // dictionary (shared by partitions, or a taken slice of an
                // emitted one) may hold many that no row of this batch uses.
                let mut missing = vec![];
                for (i, &c) in codes.iter().enumerate() {
                    if mapping[c] == UNMAPPED && valid(i) {
                        mapping[c] = PENDING;
                        missing.push(c as u32);
                    }
                }
                if !missing.is_empty() {
                    let wanted = take(
                        dict.values().as_ref(),
                        &UInt32Array::from(missing.clone()),
                        None,
                    )?;
                    let mut g = vec![];
                    values.intern(&[wanted], &mut g)?;
                    for (&c, g) in missing.iter().zip(g) {
                        mapping[c as usize] = g as u32;
                    }
                }
                ids.clear();
                match key_nulls {
                    Some(nulls) if nulls.null_count() > 0 => {
                        let null_id = match *null {
                            Some(g) => g,
                            None => {
                                let mut g = vec![];
                                values
                                    .intern(&[new_null_array(value_type, 1)], &mut g)?;
                                *null = Some(g[0] as u32);
                                g[0] as u32
                            }
                        };
                        ids.extend(codes.iter().enumerate().map(|(i, &c)| {
                            if nulls.is_valid(i) {
                                mapping[c]
                            } else {
                                null_id
                            }
                        }));
                    }
                    _ => ids.extend(codes.iter().map(|&c| mapping[c])),
                }
            }
            GroupKeys::Composite(c) => {
                c.intern(keys, ids, counts.as_deref_mut(), rows)?;
                if c.len() <= COMPOSITE_MAX_GROUPS {
                    return Ok(());
                }
                // Too many groups: DataFusion's table from here on. Distinct
                // keys interned in order get ids 0, 1, ...: the groups keep
                // their ids and their aggregate states.
                let types = c.types().to_vec();
                let emitted = c.emit()?;
                let mut values = group_values(&types)?;
                let mut g = vec![];
                values.intern(&emitted, &mut g)?;
                debug_assert!(g.iter().enumerate().all(|(i, &g)| i == g));
                *self = GroupKeys::General { values, types };
                return Ok(());
            }
            GroupKeys::View { keys: map, .. } => {
                let v = cast(&keys[0], &DataType::Utf8View)?;
                map.intern(v.as_string_view(), ids);
            }
            GroupKeys::General { values, .. } => {
                let mut g = vec![];
                values.intern(keys, &mut g)?;
                ids.clear();
                ids.extend(g.into_iter().map(|g| g as u32));
            }
        }
        if let Some(counts) = counts {
            counts.resize(self.len(), 0);
            count_ids(ids, counts);
        }
        Ok(())
    }

    /// The keys of every group, in id order, typed as the input keys.
    /// Leaves the keys empty.
    pub(crate) fn emit(&mut self) -> Result<Vec<ArrayRef>> {
        match self {
            GroupKeys::Int { keys, data_type } => {
                let nulls = keys.null_group().map(|g| {
                    (0..keys.len())
                        .map(|i| i != g as usize)
                        .collect::<Vec<_>>()
                        .into()
                });
                let raw: ArrayRef = Arc::new(Int64Array::new(
                    std::mem::take(keys).into_values().into(),
                    nulls,
                ));
                Ok(vec![cast_int(&raw, data_type)?])
            }
            GroupKeys::Dict {
                values,
                dict_type,
                cache,
                null,
                ..
            } => {
                *cache = None;
                *null = None;
                // (`GroupValues` cannot emit when it never saw a row.)
                if values.is_empty() {
                    return Ok(vec![new_empty_array(dict_type)]);
                }
                let v = values.emit(EmitTo::All)?;
                Ok(vec![cast(&v[0], dict_type)?])
            }
            GroupKeys::Composite(c) => c.emit(),
            GroupKeys::View { keys, data_type } => {
                let v = keys.emit();
                *keys = ViewKeys::default();
                Ok(vec![cast(&v, data_type)?])
            }
            GroupKeys::General { values, types } => {
                if values.is_empty() {
                    return Ok(types.iter().map(new_empty_array).collect());
                }
                values.emit(EmitTo::All)
            }
        }
    }
}

/// Casts an Int64 array back to an int-like key type (dates through their
/// own width, which arrow's cast needs).
fn cast_int(a: &ArrayRef, t: &DataType) -> Result<ArrayRef> {
    Ok(match t {
        DataType::Date32 => cast(&cast(a, &DataType::Int32)?, t)?,
        _ => cast(a, t)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{
        Date32Array, DictionaryArray, Int32Array, StringArray, TimestampMillisecondArray,
    };
    use datafusion::arrow::datatypes::Int32Type;

    fn round_trip(keys: ArrayRef) {
        round_trip_all(&[keys], 1);
    }

    /// Interns `keys` in `batches` slices; every row's key must come back as
    /// its group's key, each group once.
    fn round_trip_all(keys: &[ArrayRef], batches: usize) -> GroupKeys {
        let types: Vec<DataType> = keys.iter().map(|k| k.data_type().clone()).collect();
        let mut g = GroupKeys::try_new(&types).unwrap();
        let (mut ids, mut all_ids, mut counts) = (vec![], vec![], vec![]);
        let n = keys[0].len();
        let step = n.div_ceil(batches.max(1)).max(1);
        for start in (0..n).step_by(step) {
            let slice: Vec<ArrayRef> = keys
                .iter()
                .map(|k| k.slice(start, step.min(n - start)))
                .collect();
            g.intern(&slice, &mut ids, &mut counts, n).unwrap();
            all_ids.extend_from_slice(&ids);
        }
        let shape = match &g {
            GroupKeys::General { .. } => "general",
            _ => "other",
        };
        let groups = g.len();
        let emitted = g.emit().unwrap();
        assert_eq!(emitted[0].len(), groups, "{shape}");
        for (k, e) in keys.iter().zip(&emitted) {
            assert_eq!(e.data_type(), k.data_type());
            for (i, &id) in all_ids.iter().enumerate() {
                assert_eq!(
                    k.slice(i, 1).to_data(),
                    e.slice(id as usize, 1).to_data(),
                    "row {i} ({shape})"
                );
            }
        }
        assert_eq!(counts.iter().sum::<u64>(), n as u64);
        assert_eq!(counts.len(), groups);
        g
    }

    #[test]
    fn composite_keys_round_trip_and_turn_general_when_many() {
        let strings: ArrayRef = Arc::new(StringArray::from(
            (0..5000)
                .map(|i| {
                    (i % 7 != 3)
                        .then(|| ["A", "N", "R", "a string longer than twelve"][i % 4])
                })
                .collect::<Vec<_>>(),
        ));
        let ints: ArrayRef = Arc::new(Int32Array::from(
            (0..5000)
                .map(|i| (i % 11 != 0).then_some(i % 5))
                .collect::<Vec<_>>(),
        ));
        let dict: DictionaryArray<Int32Type> =
            (0..5000).map(|i| Some(["x", "y"][i % 2])).collect();
        let g = round_trip_all(
            &[Arc::clone(&strings), Arc::clone(&ints), Arc::new(dict)],
            7,
        );
        assert!(matches!(g, GroupKeys::Composite(_)));
        // More distinct pairs than COMPOSITE_MAX_GROUPS: the table moves to
        // the general shape mid-way and the ids stay right.
        let n = COMPOSITE_MAX_GROUPS * 2;
        let a: ArrayRef = Arc::new(Int64Array::from_iter_values(
            (0..n as i64).map(|i| i * 31 % 1000),
        ));
        let b: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("k{}", i % 3001)),
        ));
        let g = round_trip_all(&[a, b], 9);
        assert!(matches!(g, GroupKeys::General { .. }));
        // Narrow enough for the pair table, too many groups: switches after
        // some batches hold groups already.
        let a: ArrayRef =
            Arc::new(Int64Array::from_iter_values((0..n as i64).map(|i| i % 512)));
        let b: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("{}", i / 512 % 2048)),
        ));
        let g = round_trip_all(&[a, b], 16);
        assert!(matches!(g, GroupKeys::General { .. }));
    }

    #[test]
    fn every_shape_round_trips_its_keys() {
        round_trip(Arc::new(Int32Array::from(vec![
            Some(3),
            None,
            Some(-1),
            Some(3),
            None,
        ])));
        round_trip(Arc::new(Date32Array::from(vec![
            Some(19000),
            Some(1),
            None,
            Some(19000),
        ])));
        round_trip(Arc::new(
            TimestampMillisecondArray::from(vec![Some(5), Some(5), None])
                .with_timezone("UTC"),
        ));
        let dict: DictionaryArray<Int32Type> =
            vec![Some("a"), None, Some("b"), Some("a")]
                .into_iter()
                .collect();
        round_trip(Arc::new(dict));
        round_trip(Arc::new(StringArray::from(vec![
            Some("x"),
            None,
            Some("y"),
            Some("x"),
        ])));
    }
}
