//! The right side as the streaming path reads it: the [`Timeline`] and, per
//! fast column, a [`Lane`] of its values by right row in the forms the
//! window state folds (sums, counts, ordered keys for min/max).

use super::window::f64_key;
use crate::functions::Position;
use crate::temporal::Timeline;
use crate::window_join::fast::column::ColumnType;
use crate::window_join::fast::{FastAgg, FastPlan};
use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::common::Result;

/// The right side, shared read-only by every left partition: rows in time
/// order, one [`Lane`] per fast column and the argument arrays first/last
/// pick from.
pub(crate) struct RightSide {
    pub timeline: Timeline,
    pub lanes: Vec<Lane>,
    /// Per aggregate, its argument by row when it is a first/last pick.
    pub picks: Vec<Option<ArrayRef>>,
}

/// What the window state keeps of one fast column (from the aggregates
/// over it).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Needs {
    /// Its count of non-NULL values (count, sum, avg, min, max).
    pub valid: bool,
    pub isum: bool,
    pub fsum: bool,
    pub min: bool,
    pub max: bool,
}

/// Per fast column of `plan`, what its aggregates need.
pub(crate) fn column_needs(plan: &FastPlan) -> Vec<Needs> {
    let mut needs = vec![Needs::default(); plan.columns.len()];
    for a in &plan.aggs {
        match *a {
            FastAgg::CountStar | FastAgg::Pick(..) => {}
            FastAgg::Count(c) => needs[c].valid = true,
            FastAgg::SumInt(c) => (needs[c].valid, needs[c].isum) = (true, true),
            FastAgg::SumFloat(c) | FastAgg::Avg(c) => {
                (needs[c].valid, needs[c].fsum) = (true, true)
            }
            FastAgg::Min(c) => (needs[c].valid, needs[c].min) = (true, true),
            FastAgg::Max(c) => (needs[c].valid, needs[c].max) = (true, true),
        }
    }
    needs
}

/// Per aggregate of `plan`, its index among the first/last_not_null picks
/// (which keep the window's non-NULL rows), and how many there are.
pub(crate) fn non_null_picks(plan: &FastPlan) -> (Vec<Option<usize>>, usize) {
    let mut n = 0;
    let slots = plan
        .aggs
        .iter()
        .map(|a| match a {
            FastAgg::Pick(Position::FirstNotNull | Position::LastNotNull, _) => {
                n += 1;
                Some(n - 1)
            }
            _ => None,
        })
        .collect();
    (slots, n)
}

/// One fast column's argument values by right row (of the timeline's
/// batch). NULL rows hold 0 in `floats`/`ints`, so sums add them
/// unconditionally, and the identity in the min/max keys.
#[derive(Debug)]
pub(crate) struct Lane {
    pub ty: ColumnType,
    pub floats: Vec<f64>,
    pub ints: Vec<i64>,
    pub valid: Option<NullBuffer>,
    /// 1 per non-NULL row; only for a column with NULLs whose count is
    /// needed (without NULLs the count is the window's length).
    pub ones: Vec<i64>,
    /// Ordered keys ([`f64_key`], or the integers) for min (`[0]`, NULL
    /// rows `i64::MAX`) and max (`[1]`, NULL rows `i64::MIN`). Without
    /// NULLs one vector serves both and `[1]` stays empty.
    keys: [Vec<i64>; 2],
}

impl Lane {
    /// The lane of column `ty` over `values` (the argument, by row),
    /// holding what `needs` asks for.
    pub(crate) fn try_new(
        ty: ColumnType,
        values: &ArrayRef,
        needs: Needs,
    ) -> Result<Self> {
        let valid = values.logical_nulls();
        let is_valid = |i: usize| valid.as_ref().is_none_or(|v| v.is_valid(i));
        let (mut floats, mut ints) = (vec![], vec![]);
        match ty {
            ColumnType::Float => {
                let f = cast(values, &DataType::Float64)?;
                let f = f.as_primitive::<Float64Type>();
                floats = (0..f.len())
                    .map(|i| if is_valid(i) { f.value(i) } else { 0.0 })
                    .collect();
            }
            ColumnType::Int => {
                let x = cast(values, &DataType::Int64)?;
                let x = x.as_primitive::<Int64Type>();
                ints = (0..x.len())
                    .map(|i| if is_valid(i) { x.value(i) } else { 0 })
                    .collect();
            }
            ColumnType::NullsOnly => {}
        }
        let mut lane = Lane {
            ty,
            floats,
            ints,
            valid,
            ones: vec![],
            keys: [vec![], vec![]],
        };
        if needs.valid && lane.valid.is_some() {
            lane.ones = (0..values.len())
                .map(|i| lane.is_valid(i as u32) as i64)
                .collect();
        }
        if ty != ColumnType::NullsOnly {
            let keys = |identity: i64| -> Vec<i64> {
                (0..values.len() as u32)
                    .map(|r| match lane.key(r) {
                        Some(k) => k,
                        None => identity,
                    })
                    .collect()
            };
            match (&lane.valid, needs.min, needs.max) {
                (_, false, false) => {}
                (None, _, _) => lane.keys[0] = keys(0),
                (Some(_), min, max) => {
                    let min = if min { keys(i64::MAX) } else { vec![] };
                    let max = if max { keys(i64::MIN) } else { vec![] };
                    lane.keys = [min, max];
                }
            }
        }
        Ok(lane)
    }

    /// Whether right row `row` holds a value.
    #[inline]
    pub(crate) fn is_valid(&self, row: u32) -> bool {
        self.valid.as_ref().is_none_or(|v| v.is_valid(row as usize))
    }

    /// Row `row`'s ordered key (see [`f64_key`]), `None` when NULL.
    #[inline]
    pub(crate) fn key(&self, row: u32) -> Option<i64> {
        let r = row as usize;
        match self.ty {
            _ if !self.is_valid(row) => None,
            ColumnType::Float => Some(f64_key(self.floats[r])),
            ColumnType::Int => Some(self.ints[r]),
            ColumnType::NullsOnly => None,
        }
    }

    /// The keys a min (`max == false`) or max slot folds.
    pub(crate) fn keys(&self, max: bool) -> &[i64] {
        match &self.keys {
            [_, m] if max && !m.is_empty() => m,
            [k, _] => k,
        }
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        (self.floats.capacity()
            + self.ints.capacity()
            + self.ones.capacity()
            + self.keys[0].capacity()
            + self.keys[1].capacity())
            * 8
            + self.valid.as_ref().map_or(0, |v| v.buffer().len())
    }
}
