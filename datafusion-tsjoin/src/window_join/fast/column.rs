//! [`FastColumn`]: one aggregate argument laid out in the right index's
//! position order, with what its aggregates read per window.

use super::{ColumnSpec, ColumnType};
use crate::kernels::KernelSet;
use crate::kernels::block_table::{BlockMinMax, Extreme, combine};
use crate::kernels::block_sums::BlockSums;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, ArrowPrimitiveType};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{Float64Type, Int64Type};
use datafusion::common::Result;

/// Position of a row that is in no group (NULL timestamp).
pub(crate) const NO_POSITION: u32 = u32::MAX;

/// One aggregate argument in position order. NULL slots hold 0.
#[derive(Debug, Default)]
pub(crate) struct FastColumn {
    floats: Vec<f64>,
    ints: Vec<i64>,
    /// `nulls[p]` = NULLs among positions `< p` (`None` without NULLs).
    nulls: Option<Vec<u32>>,
    /// `nans[p]` = NaNs among positions `< p` (`None` without NaN).
    nans: Option<Vec<u32>>,
    /// `sums[p]` = wrapping sum of positions `< p`.
    sums: Option<Vec<i64>>,
    /// Block sums of the floats.
    float_sums: Option<BlockSums>,
    /// Block min/max over the non-NULL, non-NaN floats.
    float_table: Option<BlockMinMax<f64>>,
    /// Block min/max over the non-NULL integers.
    int_table: Option<BlockMinMax<i64>>,
}

fn prefix_counts(n: usize, hit: impl Fn(usize) -> bool) -> Option<Vec<u32>> {
    let mut out = Vec::with_capacity(n + 1);
    let mut c = 0u32;
    out.push(0);
    for p in 0..n {
        c += hit(p) as u32;
        out.push(c);
    }
    (c > 0).then_some(out)
}

/// Writes every row's value to its position: `out[position[row]]`, rows
/// numbered across `parts` in order (0 for NULL; rows without a position
/// are skipped). Returns the NULL flags by position when there are NULLs.
fn scatter<T: ArrowPrimitiveType>(
    parts: &[ArrayRef],
    position: &[u32],
    out: &mut [T::Native],
) -> Result<Option<Vec<bool>>> {
    let mut nulls: Option<Vec<bool>> = None;
    let mut row = 0;
    for part in parts {
        let v = cast(part, &T::DATA_TYPE)?;
        let v = v.as_primitive::<T>();
        let pos = &position[row..row + v.len()];
        match v.nulls().filter(|n| n.null_count() > 0) {
            None => {
                for (&p, &x) in pos.iter().zip(v.values().iter()) {
                    if p != NO_POSITION {
                        out[p as usize] = x;
                    }
                }
            }
            Some(valid) => {
                let flags = nulls.get_or_insert_with(|| vec![false; out.len()]);
                for (i, (&p, &x)) in pos.iter().zip(v.values().iter()).enumerate() {
                    if p != NO_POSITION {
                        let null = valid.is_null(i);
                        out[p as usize] = if null { T::Native::default() } else { x };
                        flags[p as usize] = null;
                    }
                }
            }
        }
        row += v.len();
    }
    Ok(nulls)
}

impl FastColumn {
    /// Builds the column from its argument's arrays (`parts`, rows in
    /// order) and each row's position (`n` positions; key group `g` owns
    /// `offsets[g]..offsets[g + 1]`), with what `spec` asks for.
    pub(crate) fn build(
        spec: &ColumnSpec,
        parts: &[ArrayRef],
        position: &[u32],
        offsets: &[u32],
        kernels: KernelSet,
    ) -> Result<Self> {
        let n = *offsets.last().expect("offsets are never empty") as usize;
        // No window is longer than the longest group.
        let longest = offsets.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap_or(0);
        let mut col = FastColumn::default();
        let flags = match spec.ty {
            ColumnType::NullsOnly => {
                let mut row = 0;
                let mut flags: Option<Vec<bool>> = None;
                for part in parts {
                    if let Some(valid) = part.logical_nulls().filter(|n| n.null_count() > 0) {
                        let flags = flags.get_or_insert_with(|| vec![false; n]);
                        for (i, &p) in position[row..row + part.len()].iter().enumerate() {
                            if p != NO_POSITION {
                                flags[p as usize] = valid.is_null(i);
                            }
                        }
                    }
                    row += part.len();
                }
                flags
            }
            ColumnType::Float => {
                col.floats = vec![0.0; n];
                scatter::<Float64Type>(parts, position, &mut col.floats)?
            }
            ColumnType::Int => {
                col.ints = vec![0; n];
                scatter::<Int64Type>(parts, position, &mut col.ints)?
            }
        };
        col.nulls = flags.and_then(|f| prefix_counts(n, |p| f[p]));
        if spec.ty == ColumnType::Float && col.floats.iter().any(|x| x.is_nan()) {
            col.nans = prefix_counts(n, |p| col.floats[p].is_nan());
        }
        if spec.prefix_sums {
            match spec.ty {
                ColumnType::Float => col.float_sums = Some(BlockSums::new(&col.floats, kernels)),
                ColumnType::Int => {
                    let mut sums = Vec::with_capacity(n + 1);
                    let mut s = 0i64;
                    sums.push(0);
                    for &x in &col.ints {
                        s = s.wrapping_add(x);
                        sums.push(s);
                    }
                    col.sums = Some(sums);
                }
                ColumnType::NullsOnly => {}
            }
        }
        if spec.min_max {
            match spec.ty {
                ColumnType::Float => {
                    let table = BlockMinMax::new(n, longest, |s, e| col.float_partial(kernels, s, e));
                    col.float_table = Some(table);
                }
                ColumnType::Int => {
                    let table = BlockMinMax::new(n, longest, |s, e| col.int_partial(kernels, s, e));
                    col.int_table = Some(table);
                }
                ColumnType::NullsOnly => {}
            }
        }
        Ok(col)
    }

    /// Bytes held.
    pub(crate) fn memory_size(&self) -> usize {
        self.floats.capacity() * 8
            + self.ints.capacity() * 8
            + self.nulls.as_ref().map_or(0, |v| v.capacity() * 4)
            + self.nans.as_ref().map_or(0, |v| v.capacity() * 4)
            + self.sums.as_ref().map_or(0, |v| v.capacity() * 8)
            + self.float_sums.as_ref().map_or(0, BlockSums::memory_size)
            + self.float_table.as_ref().map_or(0, BlockMinMax::memory_size)
            + self.int_table.as_ref().map_or(0, BlockMinMax::memory_size)
    }

    /// Non-NULL values in `[s, e)`.
    #[inline]
    pub(crate) fn valid_in(&self, s: usize, e: usize) -> usize {
        (e - s) - self.nulls_in(s, e)
    }

    /// Wrapping sum of the integers in `[s, e)` (prefix sums built).
    #[inline]
    pub(crate) fn int_sum(&self, s: usize, e: usize) -> i64 {
        let sums = self.sums.as_ref().expect("prefix sums built for integer sum");
        sums[e].wrapping_sub(sums[s])
    }

    /// Sum of the floats in `[s, e)`: the block sums for windows of at
    /// least `blocks_min` values, the sum kernel below that.
    #[inline]
    pub(crate) fn float_sum(&self, k: KernelSet, s: usize, e: usize, blocks_min: usize) -> f64 {
        match &self.float_sums {
            Some(b) if e - s >= blocks_min => b.sum(&self.floats, s, e, k),
            _ => k.sum_f64(&self.floats[s..e]),
        }
    }

    #[inline]
    fn nulls_in(&self, s: usize, e: usize) -> usize {
        self.nulls.as_ref().map_or(0, |c| (c[e] - c[s]) as usize)
    }

    #[inline]
    fn nans_in(&self, s: usize, e: usize) -> usize {
        self.nans.as_ref().map_or(0, |c| (c[e] - c[s]) as usize)
    }

    fn is_null(&self, p: usize) -> bool {
        self.nulls.as_ref().is_some_and(|c| c[p + 1] != c[p])
    }

    /// `[min, max]` of the non-NULL, non-NaN floats in `[s, e)`: the fused
    /// kernel on clean slices, a masked loop where NULLs or NaNs sit.
    #[inline]
    fn float_partial(&self, k: KernelSet, s: usize, e: usize) -> [f64; 2] {
        if self.nulls_in(s, e) == 0 && self.nans_in(s, e) == 0 {
            return k.min_max_f64(&self.floats[s..e]).map_or(f64::IDENTITY, |(a, b)| [a, b]);
        }
        (s..e)
            .filter(|&p| !self.is_null(p) && !self.floats[p].is_nan())
            .fold(f64::IDENTITY, |acc, p| combine(acc, [self.floats[p]; 2]))
    }

    /// `[min, max]` of the non-NULL integers in `[s, e)`.
    #[inline]
    fn int_partial(&self, k: KernelSet, s: usize, e: usize) -> [i64; 2] {
        let v = &self.ints[s..e];
        if self.nulls_in(s, e) == 0 {
            return match (k.min_i64(v), k.max_i64(v)) {
                (Some(a), Some(b)) => [a, b],
                _ => i64::IDENTITY,
            };
        }
        (s..e).filter(|&p| !self.is_null(p)).fold(i64::IDENTITY, |acc, p| combine(acc, [self.ints[p]; 2]))
    }

    /// `[min, max]` of the floats in `[s, e)` by the general path's rules:
    /// NULLs skipped, NaN the largest value (so `max` is NaN when any value
    /// is, `min` only when all are), `None` without a non-NULL value.
    /// Windows of at least `table_min` values read the block table.
    #[inline]
    pub(crate) fn float_min_max(&self, k: KernelSet, s: usize, e: usize, table_min: usize) -> Option<[f64; 2]> {
        let valid = self.valid_in(s, e);
        if valid == 0 {
            return None;
        }
        let nans = self.nans_in(s, e);
        let [lo, hi] = match &self.float_table {
            Some(t) if e - s >= table_min => t.query(s, e, |a, b| self.float_partial(k, a, b)),
            _ => self.float_partial(k, s, e),
        };
        Some([if nans == valid { f64::NAN } else { lo }, if nans > 0 { f64::NAN } else { hi }])
    }

    /// Non-NULL count, sum and `[min, max]` of the floats in `[s, e)`, as
    /// [`Self::float_sum`] and [`Self::float_min_max`] give them; `None`
    /// without a non-NULL value. Clean windows too short for the block
    /// structures take one pass of the fused kernel.
    #[inline]
    pub(crate) fn float_sum_min_max(
        &self,
        k: KernelSet,
        s: usize,
        e: usize,
        blocks_min: usize,
        table_min: usize,
    ) -> Option<(usize, f64, [f64; 2])> {
        let len = e - s;
        if len > 0 && len < blocks_min && len < table_min && self.nulls_in(s, e) == 0 && self.nans_in(s, e) == 0 {
            let (sum, lo, hi) = k.sum_min_max_f64(&self.floats[s..e])?;
            return Some((len, sum, [lo, hi]));
        }
        let extremes = self.float_min_max(k, s, e, table_min)?;
        Some((self.valid_in(s, e), self.float_sum(k, s, e, blocks_min), extremes))
    }

    /// `[min, max]` of the non-NULL integers in `[s, e)`.
    #[inline]
    pub(crate) fn int_min_max(&self, k: KernelSet, s: usize, e: usize, table_min: usize) -> Option<[i64; 2]> {
        if self.valid_in(s, e) == 0 {
            return None;
        }
        Some(match &self.int_table {
            Some(t) if e - s >= table_min => t.query(s, e, |a, b| self.int_partial(k, a, b)),
            _ => self.int_partial(k, s, e),
        })
    }
}
