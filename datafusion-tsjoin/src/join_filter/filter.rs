//! The filters a [`super::LipFilterExec`] applies, compiled from a hash
//! join's finished dynamic filter, and the kernels that probe them.
//!
//! A hash join's dynamic filter is DataFusion's own predicate over the probe
//! key (`k >= min AND k <= max AND <membership>`, the membership an `IN`
//! list or a lookup in the join's hash table; a partitioned join routes
//! each key to its partition's such predicate with a `CASE` over the key's
//! hash). Once the build is done it is
//! a pure function of `k`, so for an integer key whose `[min, max]` range is
//! small enough it is evaluated once over every value of the range, and the
//! answers kept as one bit per value: Quickstep's exact bit-vector filter,
//! probed with a subtraction, a compare and a bit test per row. With the
//! join's build keys at hand, an integer key spread too widely for that
//! becomes a split-block Bloom filter ([`super::bloom`]) instead: a hash and
//! one cache line per row. Other keys are left to DataFusion's join:
//! evaluating its membership test before the join costs about what the
//! join's own probe costs (TPC-H measured slower that way), while a bit
//! test costs a fraction of it.

use super::bloom::Bloom;
use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Int64Array, PrimitiveArray, RecordBatch,
};
use datafusion::arrow::compute::{self, cast};
use datafusion::arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Field, Int8Type, Int16Type, Int32Type,
    Int64Type, Schema, UInt8Type, UInt16Type, UInt32Type,
};
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Result, ScalarValue};
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, CaseExpr, Column, Literal};
use datafusion::physical_expr::split_conjunction;
use datafusion::physical_expr::utils::{collect_columns, reassign_expr_columns};
use datafusion::physical_plan::PhysicalExpr;
use std::sync::Arc;

/// Key values a bit filter evaluates the join's predicate over per call
/// while compiling (one batch of the domain).
const DOMAIN_CHUNK: i64 = 1 << 16;

/// The key's column name while compiling (not a name SQL produces, so it
/// cannot collide with another column the predicate reads).
const DOMAIN_KEY: &str = "\u{0}join filter key";

/// A join filter's bits: Quickstep's exact filter (bit `v - min` says
/// whether key `v` passes) or a Bloom filter over the build keys.
#[derive(Debug)]
pub(crate) struct BitFilter {
    /// The probe key over the operator's input.
    key: Arc<dyn PhysicalExpr>,
    probe: Probe,
    /// Whether a NULL key passes (null-equal joins whose build side has a
    /// NULL key).
    nulls_pass: bool,
    /// Held while the filter lives: its bits are accounted to the pool.
    _reservation: Option<MemoryReservation>,
}

/// How a [`BitFilter`] tests a key.
#[derive(Debug)]
enum Probe {
    /// One bit per value of `[min, min + len)`.
    Exact { min: i64, len: u64, words: Vec<u64> },
    /// The build keys in a split-block Bloom filter (no false negatives).
    Bloom(Bloom),
}

impl BitFilter {
    /// Compiles `predicate` (a finished dynamic filter over the single key
    /// `key`, both over `input`) into bits when `key` is an integer the
    /// predicate bounds to a range of at most `max_bits` values. `None`:
    /// not of that shape, or too wide.
    pub(crate) fn try_new(
        predicate: &Arc<dyn PhysicalExpr>,
        key: &Arc<dyn PhysicalExpr>,
        input: &Schema,
        max_bits: u64,
    ) -> Result<Option<Self>> {
        let (Ok(predicate), Ok(key)) = (
            reassign_expr_columns(Arc::clone(predicate), input),
            reassign_expr_columns(Arc::clone(key), input),
        ) else {
            return Ok(None);
        };
        let key_type = key.data_type(input)?;
        if !bit_key_type(&key_type) {
            return Ok(None);
        }
        // The predicate as a function of the key alone: the key replaced by
        // column 0 of a one-column schema. Anything else left means it reads
        // more than the key.
        let domain_schema = Arc::new(Schema::new(vec![Field::new(
            DOMAIN_KEY,
            key_type.clone(),
            true,
        )]));
        let of_key = Arc::clone(&predicate)
            .transform_down(|e| {
                Ok(if e.as_ref() == key.as_ref() {
                    Transformed::yes(
                        Arc::new(Column::new(DOMAIN_KEY, 0)) as Arc<dyn PhysicalExpr>
                    )
                } else {
                    Transformed::no(e)
                })
            })
            .data()?;
        if collect_columns(&of_key)
            .iter()
            .any(|c| c.name() != DOMAIN_KEY)
        {
            return Ok(None);
        }
        let Some((min, max)) = key_bounds(&of_key)? else {
            return Ok(None);
        };
        if max < min {
            return Ok(None);
        }
        let Some(len) = range_len(min, max, max_bits) else {
            return Ok(None);
        };
        let mut words = vec![0u64; len.div_ceil(64) as usize];
        let mut start = min;
        while start <= max {
            let end = start.saturating_add(DOMAIN_CHUNK - 1).min(max);
            let values: ArrayRef = Arc::new(Int64Array::from_iter_values(start..=end));
            let values = cast(&values, &key_type)?;
            let batch = RecordBatch::try_new(Arc::clone(&domain_schema), vec![values])?;
            let pass = of_key.evaluate(&batch)?.into_array(batch.num_rows())?;
            let pass = pass
                .as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or_else(|| {
                    datafusion::common::internal_datafusion_err!(
                        "join filter predicate is not boolean"
                    )
                })?;
            for i in 0..pass.len() {
                if pass.is_valid(i) && pass.value(i) {
                    let bit = (start - min) as u64 + i as u64;
                    words[(bit >> 6) as usize] |= 1 << (bit & 63);
                }
            }
            if end == max {
                break;
            }
            start = end + 1;
        }
        let null = RecordBatch::try_new(
            Arc::clone(&domain_schema),
            vec![datafusion::arrow::array::new_null_array(&key_type, 1)],
        )?;
        let null = of_key.evaluate(&null)?.into_array(1)?;
        let nulls_pass = null
            .as_any()
            .downcast_ref::<BooleanArray>()
            .is_some_and(|b| b.is_valid(0) && b.value(0));
        Ok(Some(Self::from_parts(key, min, len, words, nulls_pass)))
    }

    /// Bits from the join's own build keys (`keys`, as a
    /// [`super::build_keys::LipBuildKeysExec`] kept them): bit `v - min`
    /// is set for each non-null build key `v`, over the keys' own range,
    /// when `key` (the probe key over `input`) is an integer and that range
    /// is at most `max_bits` wide; over a wider range, a Bloom filter of
    /// the keys when they fit `max_bits` at [`super::bloom::BITS_PER_KEY`]
    /// bits each. A NULL probe key passes when `nulls_pass` (a null-equal
    /// join) and some build key is NULL. `None`: not of that shape, or too
    /// many keys.
    ///
    /// Costs one write (a Bloom filter: a hash and eight) per build row,
    /// where [`Self::try_new`] evaluates the join's predicate once per value
    /// of the range.
    pub(crate) fn from_build_keys(
        key: &Arc<dyn PhysicalExpr>,
        input: &Schema,
        keys: &[ArrayRef],
        nulls_pass: bool,
        max_bits: u64,
    ) -> Result<Option<Self>> {
        let Ok(key) = reassign_expr_columns(Arc::clone(key), input) else {
            return Ok(None);
        };
        if !bit_key_type(&key.data_type(input)?)
            || keys.iter().any(|k| !bit_key_type(k.data_type()))
        {
            return Ok(None);
        }
        let keys = keys
            .iter()
            .map(|k| cast(k, &DataType::Int64))
            .collect::<Result<Vec<_>, _>>()?;
        let keys: Vec<&Int64Array> = keys
            .iter()
            .filter_map(|k| k.as_any().downcast_ref::<Int64Array>())
            .collect();
        let bounds = keys
            .iter()
            .filter_map(|k| compute::min(*k).zip(compute::max(*k)))
            .reduce(|(l, h), (lo, hi)| (l.min(lo), h.max(hi)));
        let nulls_pass = nulls_pass && keys.iter().any(|k| k.null_count() > 0);
        // No non-null build key: an empty range, only NULLs can pass.
        let (min, max) = bounds.unwrap_or((0, -1));
        let Some(len) = range_len(min, max, max_bits) else {
            // Too wide for a bit per value: a Bloom filter of the keys, in
            // the same memory budget.
            let count = keys.iter().map(|k| (k.len() - k.null_count()) as u64).sum();
            let Some(mut bloom) = Bloom::sized_for(count, max_bits) else {
                return Ok(None);
            };
            for k in keys {
                k.iter().flatten().for_each(|v| bloom.insert(v));
            }
            return Ok(Some(Self::with_probe(key, Probe::Bloom(bloom), nulls_pass)));
        };
        let mut words = vec![0u64; len.div_ceil(64) as usize];
        for k in keys {
            for v in k.iter().flatten() {
                let bit = v.wrapping_sub(min) as u64;
                words[(bit >> 6) as usize] |= 1 << (bit & 63);
            }
        }
        Ok(Some(Self::from_parts(key, min, len, words, nulls_pass)))
    }

    /// Bits `words` over `[min, min + len)`, not yet accounted.
    fn from_parts(
        key: Arc<dyn PhysicalExpr>,
        min: i64,
        len: u64,
        words: Vec<u64>,
        nulls_pass: bool,
    ) -> Self {
        Self::with_probe(key, Probe::Exact { min, len, words }, nulls_pass)
    }

    /// A filter testing `key` by `probe`, not yet accounted.
    fn with_probe(key: Arc<dyn PhysicalExpr>, probe: Probe, nulls_pass: bool) -> Self {
        Self {
            key,
            probe,
            nulls_pass,
            _reservation: None,
        }
    }

    /// Accounts the bits to `reservation` (already grown by [`Self::size`]).
    pub(crate) fn with_reservation(mut self, reservation: MemoryReservation) -> Self {
        self._reservation = Some(reservation);
        self
    }

    /// Bytes of bits.
    pub(crate) fn size(&self) -> usize {
        match &self.probe {
            Probe::Exact { words, .. } => words.len() * 8,
            Probe::Bloom(bloom) => bloom.size(),
        }
    }

    /// The kind EXPLAIN ANALYZE shows.
    pub(crate) fn kind(&self) -> &'static str {
        match &self.probe {
            Probe::Exact { .. } => "exact_bits",
            Probe::Bloom(_) => "bloom",
        }
    }

    /// Keeps, of the rows `sel` lists (ascending), those whose key's bit is
    /// set.
    pub(crate) fn retain(&self, batch: &RecordBatch, sel: &mut Vec<u32>) -> Result<()> {
        let keys = self.key.evaluate(batch)?.into_array(batch.num_rows())?;
        let nulls_pass = self.nulls_pass;
        // One loop per key type and probe kind: no dispatch per row.
        macro_rules! probe {
            ($($t:ty),*) => {
                $(if let Some(a) = keys.as_any().downcast_ref::<PrimitiveArray<$t>>() {
                    match &self.probe {
                        Probe::Exact { min, len, words } => {
                            let bits = Bits { min: *min, len: *len, words };
                            retain(a, sel, nulls_pass, |v| bits.test(v));
                        }
                        Probe::Bloom(bloom) => {
                            retain(a, sel, nulls_pass, |v| bloom.contains(v));
                        }
                    }
                    return Ok(());
                })*
            };
        }
        probe!(
            Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type,
            Date32Type
        );
        datafusion::common::internal_err!(
            "join filter key of type {} has no bit probe",
            keys.data_type()
        )
    }
}

/// Values in `[min, max]` (0 when `max < min`) when at most `max_bits`.
/// Counted in `i128`: the whole `i64` range has 2^64 values, which a `u64`
/// would wrap to 0.
fn range_len(min: i64, max: i64, max_bits: u64) -> Option<u64> {
    let len = (max as i128 - min as i128 + 1).max(0);
    (len <= max_bits as i128).then_some(len as u64)
}

/// Whether keys of `t` can be probed in bits (their values fit an `i64`).
pub(crate) fn bit_key_type(t: &DataType) -> bool {
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
    )
}

/// `[min, max]` of the keys a predicate over column 0 (`key`) can pass, as
/// DataFusion's join filters bound them: the conjuncts `key >= min` and
/// `key <= max` of a collect-left join's filter, or, for a partitioned
/// join (`CASE hash_repartition(key) % n WHEN 0 THEN f0 … ELSE false END`),
/// the widest bounds of its branches (a key outside all of them passes no
/// branch). `None`: some branch is unbounded (an `ELSE true` for partitions
/// that never reported), or no bound is found.
fn key_bounds(predicate: &Arc<dyn PhysicalExpr>) -> Result<Option<(i64, i64)>> {
    if let Some(case) = predicate.downcast_ref::<CaseExpr>() {
        let branches = case
            .when_then_expr()
            .iter()
            .map(|(_, then)| then)
            .chain(case.else_expr());
        let mut bounds: Option<(i64, i64)> = None;
        for branch in branches {
            if passes_nothing(branch) {
                continue;
            }
            let Some((lo, hi)) = key_bounds(branch)? else {
                return Ok(None);
            };
            bounds = Some(bounds.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))));
        }
        return Ok(bounds);
    }
    let (mut min, mut max) = (None, None);
    for conjunct in split_conjunction(predicate) {
        let Some(b) = conjunct.downcast_ref::<BinaryExpr>() else {
            continue;
        };
        let (Some(_), Some(lit)) = (
            b.left().downcast_ref::<Column>(),
            b.right().downcast_ref::<Literal>(),
        ) else {
            continue;
        };
        let ScalarValue::Int64(Some(v)) = lit.value().cast_to(&DataType::Int64)? else {
            continue;
        };
        match b.op() {
            Operator::GtEq => min = Some(min.map_or(v, |m: i64| m.max(v))),
            Operator::LtEq => max = Some(max.map_or(v, |m: i64| m.min(v))),
            _ => {}
        }
    }
    Ok(min.zip(max))
}

/// Whether `e` is a literal `false` or NULL (a branch no key passes).
fn passes_nothing(e: &Arc<dyn PhysicalExpr>) -> bool {
    e.downcast_ref::<Literal>().is_some_and(|l| {
        matches!(l.value(), ScalarValue::Boolean(Some(false))) || l.value().is_null()
    })
}

/// The probe side of a [`BitFilter`], borrowed for one batch.
struct Bits<'a> {
    min: i64,
    len: u64,
    words: &'a [u64],
}

/// Integer key types a bit filter probes (all widen to `i64` exactly).
trait BitKey: Copy {
    fn to_i64(self) -> i64;
}

macro_rules! bit_key {
    ($($t:ty),*) => {$(impl BitKey for $t {
        #[inline(always)]
        fn to_i64(self) -> i64 {
            self as i64
        }
    })*};
}
bit_key!(i8, i16, i32, i64, u8, u16, u32);

/// Keeps the rows of `sel` whose key passes `test` (a NULL key passes
/// when `nulls_pass`). Branch-free: every row is written, and the write
/// position advances only for a kept one.
///
/// Invariant: `sel` is ascending and within `keys`.
fn retain<T, F>(keys: &PrimitiveArray<T>, sel: &mut Vec<u32>, nulls_pass: bool, test: F)
where
    T: ArrowPrimitiveType,
    T::Native: BitKey,
    F: Fn(i64) -> bool,
{
    let values = keys.values();
    let mut w = 0;
    match keys.nulls().filter(|n| n.null_count() > 0) {
        None => {
            for r in 0..sel.len() {
                let row = sel[r];
                sel[w] = row;
                w += usize::from(test(values[row as usize].to_i64()));
            }
        }
        Some(nulls) => {
            for r in 0..sel.len() {
                let row = sel[r];
                sel[w] = row;
                let keep = if nulls.is_valid(row as usize) {
                    test(values[row as usize].to_i64())
                } else {
                    nulls_pass
                };
                w += usize::from(keep);
            }
        }
    }
    sel.truncate(w);
}

impl Bits<'_> {
    #[inline(always)]
    fn test(&self, v: i64) -> bool {
        // Below `min` wraps to a huge offset, so one compare covers both ends.
        let off = v.wrapping_sub(self.min) as u64;
        off < self.len && (self.words[(off >> 6) as usize] >> (off & 63)) & 1 == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_lengths_do_not_wrap() {
        assert_eq!(range_len(3, 2, 10), Some(0));
        assert_eq!(range_len(-5, 4, 10), Some(10));
        assert_eq!(range_len(-5, 5, 10), None);
        assert_eq!(range_len(i64::MIN, i64::MAX, u64::MAX), None);
    }

    #[test]
    fn build_keys_spanning_every_i64_become_a_bloom_filter() {
        let s = Schema::new(vec![Field::new("k", DataType::Int64, true)]);
        let key = datafusion::physical_expr::expressions::col("k", &s).unwrap();
        let keys: Vec<ArrayRef> =
            vec![Arc::new(Int64Array::from(vec![i64::MIN, i64::MAX]))];
        let bloom = BitFilter::from_build_keys(&key, &s, &keys, false, u64::MAX)
            .unwrap()
            .unwrap();
        assert_eq!((bloom.kind(), bloom.size()), ("bloom", 32));
        let probe = RecordBatch::try_new(
            Arc::new(s.clone()),
            vec![Arc::new(Int64Array::from(vec![
                Some(i64::MAX),
                None,
                Some(0),
                Some(i64::MIN),
            ]))],
        )
        .unwrap();
        let mut sel: Vec<u32> = (0..4).collect();
        bloom.retain(&probe, &mut sel).unwrap();
        assert_eq!(sel, vec![0, 3]);
        // Not even one 256-bit block in the budget: left to the join.
        let none = BitFilter::from_build_keys(&key, &s, &keys, false, 255).unwrap();
        assert!(none.is_none());
        // Within the budget: exactly the build keys pass; NULL only when asked.
        let keys: Vec<ArrayRef> =
            vec![Arc::new(Int64Array::from(vec![Some(-3), None, Some(7)]))];
        for nulls in [false, true] {
            let bits = BitFilter::from_build_keys(&key, &s, &keys, nulls, 64)
                .unwrap()
                .unwrap();
            let probe = RecordBatch::try_new(
                Arc::new(s.clone()),
                vec![Arc::new(Int64Array::from(vec![
                    Some(-3),
                    Some(0),
                    None,
                    Some(7),
                    Some(8),
                    Some(-4),
                ]))],
            )
            .unwrap();
            let mut sel: Vec<u32> = (0..6).collect();
            bits.retain(&probe, &mut sel).unwrap();
            let want: Vec<u32> = if nulls { vec![0, 2, 3] } else { vec![0, 3] };
            assert_eq!(sel, want);
        }
    }
    use datafusion::physical_expr::expressions::{InListExpr, IsNullExpr, col, lit};

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("k", DataType::Int32, true),
            Field::new("x", DataType::Utf8, true),
        ])
    }

    /// `k >= lo AND k <= hi AND k IN (list)`, DataFusion's filter shape.
    fn join_filter(lo: i32, hi: i32, list: &[i32]) -> Arc<dyn PhysicalExpr> {
        let s = schema();
        let k = col("k", &s).unwrap();
        let bounds = Arc::new(BinaryExpr::new(
            Arc::new(BinaryExpr::new(Arc::clone(&k), Operator::GtEq, lit(lo))),
            Operator::And,
            Arc::new(BinaryExpr::new(Arc::clone(&k), Operator::LtEq, lit(hi))),
        ));
        let list = list.iter().map(|&v| lit(v)).collect();
        let member = Arc::new(InListExpr::try_new(k, list, false, &s).unwrap());
        Arc::new(BinaryExpr::new(bounds, Operator::And, member))
    }

    fn batch(keys: Vec<Option<i32>>) -> RecordBatch {
        let n = keys.len();
        RecordBatch::try_new(
            Arc::new(schema()),
            vec![
                Arc::new(PrimitiveArray::<Int32Type>::from(keys)),
                Arc::new(datafusion::arrow::array::StringArray::from(vec!["a"; n])),
            ],
        )
        .unwrap()
    }

    /// The rows of `sel` the predicate itself keeps (the reference).
    fn by_predicate(
        pred: &Arc<dyn PhysicalExpr>,
        b: &RecordBatch,
        sel: &[u32],
    ) -> Vec<u32> {
        let mask = pred.evaluate(b).unwrap().into_array(b.num_rows()).unwrap();
        let mask = mask.as_any().downcast_ref::<BooleanArray>().unwrap();
        sel.iter()
            .copied()
            .filter(|&i| mask.is_valid(i as usize) && mask.value(i as usize))
            .collect()
    }

    fn by_bits(f: &BitFilter, b: &RecordBatch, sel: &[u32]) -> Vec<u32> {
        let mut sel = sel.to_vec();
        f.retain(b, &mut sel).unwrap();
        sel
    }

    /// A partitioned join's filter: `CASE k % 2 WHEN 0 THEN f0 WHEN 1 THEN
    /// f1 ELSE <otherwise> END`.
    fn partitioned_filter(otherwise: bool) -> Arc<dyn PhysicalExpr> {
        let s = schema();
        let k = col("k", &s).unwrap();
        let route = Arc::new(BinaryExpr::new(k, Operator::Modulo, lit(2i32)));
        Arc::new(
            CaseExpr::try_new(
                Some(route),
                vec![
                    (lit(0i32), join_filter(4, 40, &[4, 10, 40])),
                    (lit(1i32), join_filter(-3, 21, &[-3, 5, 21])),
                ],
                Some(lit(otherwise)),
            )
            .unwrap(),
        )
    }

    #[test]
    fn partitioned_filters_compile_over_the_widest_bounds() {
        let s = schema();
        let k = col("k", &s).unwrap();
        let pred = partitioned_filter(false);
        let bits = BitFilter::try_new(&pred, &k, &s, 1 << 20).unwrap().unwrap();
        assert!(matches!(
            bits.probe,
            Probe::Exact {
                min: -3,
                len: 44,
                ..
            }
        ));
        let b = batch((-10..60).map(Some).chain([None]).collect());
        let all: Vec<u32> = (0..b.num_rows() as u32).collect();
        assert_eq!(by_bits(&bits, &b, &all), by_predicate(&pred, &b, &all));
        // 4, 10, 40, 5, 21 (-3 % 2 is -1: no branch takes it).
        assert_eq!(by_bits(&bits, &b, &all).len(), 5);
        // Partitions that never reported pass every key: nothing to compile.
        let open = partitioned_filter(true);
        assert!(
            BitFilter::try_new(&open, &k, &s, 1 << 20)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn bits_keep_what_the_predicate_keeps() {
        let s = schema();
        let pred = join_filter(3, 40, &[3, 5, 7, 40]);
        let k = col("k", &s).unwrap();
        let bits = BitFilter::try_new(&pred, &k, &s, 1 << 20).unwrap().unwrap();
        assert!(matches!(bits.probe, Probe::Exact { len: 38, .. }));
        assert_eq!(bits.kind(), "exact_bits");
        let keys: Vec<Option<i32>> = (-5..60)
            .map(|v| (v % 11 != 0).then_some(v))
            .chain([Some(i32::MIN), Some(i32::MAX)])
            .collect();
        let b = batch(keys);
        let all: Vec<u32> = (0..b.num_rows() as u32).collect();
        assert_eq!(by_bits(&bits, &b, &all), by_predicate(&pred, &b, &all));
        assert_eq!(by_bits(&bits, &b, &all).len(), 4);
        // From a sparse selection too.
        let some = [1, 8, 10, 12, 45, 66];
        assert_eq!(by_bits(&bits, &b, &some), by_predicate(&pred, &b, &some));
    }

    #[test]
    fn too_wide_or_unbounded_keys_are_not_bits() {
        let s = schema();
        let k = col("k", &s).unwrap();
        let pred = join_filter(0, 1_000_000, &[0, 1_000_000]);
        assert!(BitFilter::try_new(&pred, &k, &s, 1000).unwrap().is_none());
        assert!(
            BitFilter::try_new(&pred, &k, &s, 1 << 21)
                .unwrap()
                .is_some()
        );
        // Membership alone (no bounds): left to the join.
        let member: Arc<dyn PhysicalExpr> = Arc::new(
            InListExpr::try_new(Arc::clone(&k), vec![lit(1)], false, &s).unwrap(),
        );
        assert!(
            BitFilter::try_new(&member, &k, &s, 1 << 20)
                .unwrap()
                .is_none()
        );
        // A string key: left to the join.
        let x = col("x", &s).unwrap();
        let on_x: Arc<dyn PhysicalExpr> = Arc::new(
            InListExpr::try_new(Arc::clone(&x), vec![lit("a")], false, &s).unwrap(),
        );
        assert!(
            BitFilter::try_new(&on_x, &x, &s, 1 << 20)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn null_keys_are_dropped_unless_the_predicate_keeps_them() {
        let s = schema();
        let k = col("k", &s).unwrap();
        let pred = join_filter(1, 3, &[1, 2, 3]);
        let b = batch(vec![None, Some(2), Some(9)]);
        let bits = BitFilter::try_new(&pred, &k, &s, 64).unwrap().unwrap();
        assert_eq!(by_bits(&bits, &b, &[0, 1, 2]), vec![1]);
        // `k IS NULL OR …` (null-equal joins) has no top-level bounds: left
        // to the join.
        let with_nulls: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(
            Arc::new(IsNullExpr::new(Arc::clone(&k))),
            Operator::Or,
            Arc::clone(&pred),
        ));
        assert!(
            BitFilter::try_new(&with_nulls, &k, &s, 64)
                .unwrap()
                .is_none()
        );
    }
}
