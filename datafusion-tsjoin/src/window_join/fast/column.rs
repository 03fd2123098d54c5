//! [`FastColumn`]: one aggregate argument laid out in the right index's
//! position order, with what its aggregates read per window.

use crate::kernels::KernelSet;
use crate::kernels::block_sums::{BLOCK as BLOCK_SUMS, BlockSums, block_sums};
use crate::kernels::block_table::{BLOCK as BLOCK_TABLE, BlockMinMax, Extreme, combine};
use crate::window_join::par::{cuts, par_fill, par_ranges};

/// Numeric family of a fast column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColumnType {
    /// Only the NULL mask is needed (`count(x)` of any type).
    NullsOnly,
    /// Values as `i64`.
    Int,
    /// Values as `f64`.
    Float,
}

/// One fast column to build: the first argument of aggregate `agg`.
#[derive(Debug, Clone)]
pub(crate) struct ColumnSpec {
    pub agg: usize,
    pub ty: ColumnType,
    /// Build prefix sums: wrapping for integers, compensated for floats.
    pub prefix_sums: bool,
    /// Build the block min/max table (the column feeds `min` or `max`).
    pub min_max: bool,
    /// The argument's text: aggregates over the same expression share
    /// one column.
    pub(super) key: String,
}

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

/// `out[p]` = positions `< p` where `hit(p)`, for `p` in `0..=n`; `None`
/// when nothing hits. Two parallel passes: counts per range, then fills.
fn prefix_counts(
    n: usize,
    threads: usize,
    hit: impl Fn(usize) -> bool + Sync,
) -> Option<Vec<u32>> {
    let cuts = cuts(n, threads, 1);
    let counts = par_ranges(&cuts, |_, r| r.filter(|&p| hit(p)).count() as u32);
    let bases = running(&counts, 0, |a, b| a + b);
    if *bases.last()? == 0 {
        return None;
    }
    let mut out = vec![0u32; n + 1];
    par_fill(&mut out[1..], &cuts, |i, r, chunk| {
        let mut c = bases[i];
        for (o, p) in chunk.iter_mut().zip(r) {
            c += hit(p) as u32;
            *o = c;
        }
    });
    Some(out)
}

/// `[start, start ⊕ x0, start ⊕ x0 ⊕ x1, …]`: the running totals before
/// each item and after the last.
fn running<T: Copy>(items: &[T], start: T, add: impl Fn(T, T) -> T) -> Vec<T> {
    let mut acc = start;
    let mut out = vec![start];
    for &x in items {
        acc = add(acc, x);
        out.push(acc);
    }
    out
}

/// Wrapping prefix sums: `out[p]` = sum of `v[..p]`, for `p` in `0..=len`.
fn wrapping_prefix_sums(v: &[i64], threads: usize) -> Vec<i64> {
    let cuts = cuts(v.len(), threads, 1);
    let totals = par_ranges(&cuts, |_, r| {
        v[r].iter().fold(0i64, |a, &x| a.wrapping_add(x))
    });
    let bases = running(&totals, 0, i64::wrapping_add);
    let mut out = vec![0i64; v.len() + 1];
    par_fill(&mut out[1..], &cuts, |i, r, chunk| {
        let mut s = bases[i];
        for (o, &x) in chunk.iter_mut().zip(&v[r]) {
            s = s.wrapping_add(x);
            *o = s;
        }
    });
    out
}

/// The first level of a [`BlockMinMax`] over `n` positions: `partial` over
/// every whole block, in parallel over runs of blocks.
fn block_level<T: Extreme>(
    n: usize,
    threads: usize,
    partial: impl Fn(usize, usize) -> [T; 2] + Sync,
) -> Vec<[T; 2]> {
    par_ranges(&cuts(n, threads, BLOCK_TABLE), |_, r| {
        (r.start / BLOCK_TABLE..r.end / BLOCK_TABLE)
            .map(|b| partial(b * BLOCK_TABLE, (b + 1) * BLOCK_TABLE))
            .collect::<Vec<_>>()
    })
    .concat()
}

/// One argument's values in position order, as [`FastColumn::build`]
/// takes them: `floats` for a float column, `ints` for an integer one
/// (empty otherwise); 0 under NULLs, flagged in `nulls`.
#[derive(Debug, Default)]
pub(crate) struct Placed {
    pub floats: Vec<f64>,
    pub ints: Vec<i64>,
    pub nulls: Option<Vec<bool>>,
}

impl FastColumn {
    /// Builds the column from its argument's values in position order
    /// (`offsets[g]..offsets[g + 1]` are key group `g`'s positions) with
    /// what `spec` asks for, on up to `threads` threads. `longest` bounds
    /// the positions one window spans, when known; no window is longer
    /// than the longest group either way. (It only sizes the block table:
    /// longer queries are still answered, with a few more lookups.)
    pub(crate) fn build(
        spec: &ColumnSpec,
        placed: Placed,
        offsets: &[u32],
        longest: Option<usize>,
        kernels: KernelSet,
        threads: usize,
    ) -> Self {
        let n = *offsets.last().expect("offsets are never empty") as usize;
        let largest_group = offsets
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0);
        let longest = longest.map_or(largest_group, |l| l.min(largest_group));
        let mut col = FastColumn {
            floats: placed.floats,
            ints: placed.ints,
            ..Default::default()
        };
        if let Some(flags) = placed.nulls {
            debug_assert_eq!(flags.len(), n);
            col.nulls = prefix_counts(n, threads, |p| flags[p]);
        }
        if spec.ty == ColumnType::Float {
            col.nans = prefix_counts(n, threads, |p| col.floats[p].is_nan());
        }
        if spec.prefix_sums {
            match spec.ty {
                ColumnType::Float => {
                    let v = &col.floats;
                    let parts = par_ranges(&cuts(n, threads, BLOCK_SUMS), |_, r| {
                        block_sums(&v[r], kernels)
                    });
                    col.float_sums = Some(BlockSums::from_block_sums(&parts.concat()));
                }
                ColumnType::Int => {
                    col.sums = Some(wrapping_prefix_sums(&col.ints, threads))
                }
                ColumnType::NullsOnly => {}
            }
        }
        if spec.min_max {
            match spec.ty {
                ColumnType::Float => {
                    let blocks =
                        block_level(n, threads, |s, e| col.float_partial(kernels, s, e));
                    col.float_table = Some(BlockMinMax::from_blocks(blocks, longest));
                }
                ColumnType::Int => {
                    let blocks =
                        block_level(n, threads, |s, e| col.int_partial(kernels, s, e));
                    col.int_table = Some(BlockMinMax::from_blocks(blocks, longest));
                }
                ColumnType::NullsOnly => {}
            }
        }
        col
    }

    /// Bytes held.
    pub(crate) fn memory_size(&self) -> usize {
        self.floats.capacity() * 8
            + self.ints.capacity() * 8
            + self.nulls.as_ref().map_or(0, |v| v.capacity() * 4)
            + self.nans.as_ref().map_or(0, |v| v.capacity() * 4)
            + self.sums.as_ref().map_or(0, |v| v.capacity() * 8)
            + self.float_sums.as_ref().map_or(0, BlockSums::memory_size)
            + self
                .float_table
                .as_ref()
                .map_or(0, BlockMinMax::memory_size)
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
        let sums = self
            .sums
            .as_ref()
            .expect("prefix sums built for integer sum");
        sums[e].wrapping_sub(sums[s])
    }

    /// Sum of the floats in `[s, e)`: the block sums for windows of at
    /// least `blocks_min` values, the sum kernel below that.
    #[inline]
    pub(crate) fn float_sum(
        &self,
        k: KernelSet,
        s: usize,
        e: usize,
        blocks_min: usize,
    ) -> f64 {
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
            return k
                .min_max_f64(&self.floats[s..e])
                .map_or(f64::IDENTITY, |(a, b)| [a, b]);
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
        (s..e)
            .filter(|&p| !self.is_null(p))
            .fold(i64::IDENTITY, |acc, p| combine(acc, [self.ints[p]; 2]))
    }

    /// `[min, max]` of the floats in `[s, e)` by the general path's rules:
    /// NULLs skipped, NaN the largest value (so `max` is NaN when any value
    /// is, `min` only when all are), `None` without a non-NULL value.
    /// Windows of at least `table_min` values read the block table.
    #[inline]
    pub(crate) fn float_min_max(
        &self,
        k: KernelSet,
        s: usize,
        e: usize,
        table_min: usize,
    ) -> Option<[f64; 2]> {
        let valid = self.valid_in(s, e);
        if valid == 0 {
            return None;
        }
        let nans = self.nans_in(s, e);
        let [lo, hi] = match &self.float_table {
            Some(t) if e - s >= table_min => {
                t.query(s, e, |a, b| self.float_partial(k, a, b))
            }
            _ => self.float_partial(k, s, e),
        };
        Some([
            if nans == valid { f64::NAN } else { lo },
            if nans > 0 { f64::NAN } else { hi },
        ])
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
        if len > 0
            && len < blocks_min
            && len < table_min
            && self.nulls_in(s, e) == 0
            && self.nans_in(s, e) == 0
        {
            let (sum, lo, hi) = k.sum_min_max_f64(&self.floats[s..e])?;
            return Some((len, sum, [lo, hi]));
        }
        let extremes = self.float_min_max(k, s, e, table_min)?;
        Some((
            self.valid_in(s, e),
            self.float_sum(k, s, e, blocks_min),
            extremes,
        ))
    }

    /// `[min, max]` of the non-NULL integers in `[s, e)`.
    #[inline]
    pub(crate) fn int_min_max(
        &self,
        k: KernelSet,
        s: usize,
        e: usize,
        table_min: usize,
    ) -> Option<[i64; 2]> {
        if self.valid_in(s, e) == 0 {
            return None;
        }
        Some(match &self.int_table {
            Some(t) if e - s >= table_min => {
                t.query(s, e, |a, b| self.int_partial(k, a, b))
            }
            _ => self.int_partial(k, s, e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Random values with NULLs and NaNs in random groups.
    fn placed(rng: &mut StdRng, n: usize, ty: ColumnType) -> (Placed, Vec<u32>) {
        let nulls: Vec<bool> = (0..n).map(|_| rng.random_range(0..100) == 0).collect();
        let mut p = Placed {
            nulls: Some(nulls.clone()),
            ..Default::default()
        };
        match ty {
            ColumnType::Float => {
                p.floats = (0..n)
                    .map(|i| match rng.random_range(0..200) {
                        _ if nulls[i] => 0.0,
                        0 => f64::NAN,
                        _ => rng.random_range(-1e6..1e6),
                    })
                    .collect()
            }
            ColumnType::Int => {
                p.ints = (0..n)
                    .map(|i| if nulls[i] { 0 } else { rng.random() })
                    .collect()
            }
            ColumnType::NullsOnly => {}
        }
        let mut offsets = vec![0u32];
        while (*offsets.last().unwrap() as usize) < n {
            let g = rng.random_range(1..=n / 3 + 1) as u32;
            offsets.push((offsets.last().unwrap() + g).min(n as u32));
        }
        (p, offsets)
    }

    /// The parallel build (several threads, inputs large enough to split)
    /// gives exactly the serial build's column, and the serial build's
    /// prefix counts are the definition.
    #[test]
    fn parallel_build_equals_serial_build() {
        let mut rng = StdRng::seed_from_u64(7);
        for (i, ty) in [
            ColumnType::Float,
            ColumnType::Int,
            ColumnType::NullsOnly,
            ColumnType::Float,
        ]
        .into_iter()
        .enumerate()
        {
            let n = 150_000 + i * 1000;
            let (p, offsets) = placed(&mut rng, n, ty);
            let spec = ColumnSpec {
                agg: 0,
                ty,
                prefix_sums: true,
                min_max: ty != ColumnType::NullsOnly,
                key: String::new(),
            };
            let k = KernelSet::detect();
            let copy = |p: &Placed| Placed {
                floats: p.floats.clone(),
                ints: p.ints.clone(),
                nulls: p.nulls.clone(),
            };
            let serial = FastColumn::build(&spec, copy(&p), &offsets, None, k, 1);
            for threads in [2, 5, 16] {
                let parallel =
                    FastColumn::build(&spec, copy(&p), &offsets, None, k, threads);
                assert_eq!(
                    format!("{parallel:?}"),
                    format!("{serial:?}"),
                    "{ty:?}, {threads} threads"
                );
            }
            let flags = p.nulls.as_ref().unwrap();
            for q in (0..n).step_by(101) {
                assert_eq!(serial.is_null(q), flags[q]);
                assert_eq!(
                    serial.nulls_in(0, q),
                    flags[..q].iter().filter(|&&f| f).count()
                );
                if ty == ColumnType::Int {
                    assert_eq!(
                        serial.int_sum(0, q),
                        p.ints[..q].iter().fold(0i64, |a, &x| a.wrapping_add(x))
                    );
                }
            }
        }
    }
}
