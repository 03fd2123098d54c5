//! [`BestKeys`]: per group, the ORDER BY key of the row it keeps, and the
//! comparison that says whether a new row ranks before it.
//! One integer-like ORDER BY column is ranked as a number; anything else
//! through arrow's row format.

use crate::inline_aggregate::int_like;
use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::{SortOptions, cast};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::Result;
use datafusion::physical_expr::PhysicalSortExpr;

/// A group that has no row yet: worse than every rank an
/// [`BestKeys::Int`] row can have.
const NO_ROW: u128 = u128::MAX;

/// Per group, the ORDER BY key of the row it keeps. Smaller ranks first: a
/// row replaces its group's row when it ranks before it or ties with it, so
/// among rows with equal keys the last one read stays (`row_number` numbers
/// ties in an unspecified order, one of them is row 1; QuestDB's `LATEST
/// ON` keeps the last of tied rows in table order, which this is whenever
/// one partition reads the table).
#[derive(Debug)]
pub(super) enum BestKeys {
    /// No ORDER BY: a group's first row stays.
    First { taken: Vec<bool> },
    /// One integer, date or timestamp column (the inline aggregate's
    /// integer key types), ranked as a `u128`:
    /// NULL first is 0, values `1 + (v as order-preserving u64)` (flipped
    /// for DESC), NULL last `u128::MAX - 1`, so that [`NO_ROW`] loses to
    /// every row.
    Int {
        options: SortOptions,
        ranks: Vec<u128>,
    },
    /// Any other ORDER BY: arrow's row format, whose byte order is the sort
    /// order. An empty encoding is a group without a row (a row's encoding
    /// is never empty).
    Rows {
        converter: RowConverter,
        best: Vec<Vec<u8>>,
    },
}

/// The rank of one value under `options` (see [`BestKeys::Int`]).
#[inline]
fn int_rank(value: Option<i64>, options: SortOptions) -> u128 {
    match value {
        None if options.nulls_first => 0,
        None => NO_ROW - 1,
        Some(v) => {
            let ascending = (v as u64) ^ (1 << 63);
            let key = if options.descending {
                !ascending
            } else {
                ascending
            };
            1 + u128::from(key)
        }
    }
}

impl BestKeys {
    /// Keys for an ORDER BY of `order` over columns of `types`.
    pub(super) fn try_new(
        order: &[PhysicalSortExpr],
        types: &[DataType],
    ) -> Result<Self> {
        Ok(match (order, types) {
            ([], _) => BestKeys::First { taken: vec![] },
            ([o], [t]) if int_like(t) => BestKeys::Int {
                options: o.options,
                ranks: vec![],
            },
            _ => BestKeys::Rows {
                converter: RowConverter::new(
                    order
                        .iter()
                        .zip(types)
                        .map(|(o, t)| SortField::new_with_options(t.clone(), o.options))
                        .collect(),
                )?,
                best: vec![],
            },
        })
    }

    /// Bytes held.
    pub(super) fn memory_size(&self) -> usize {
        match self {
            BestKeys::First { taken } => taken.capacity(),
            BestKeys::Int { ranks, .. } => ranks.capacity() * 16,
            BestKeys::Rows { converter, best } => {
                converter.size()
                    + best.capacity() * size_of::<Vec<u8>>()
                    + best.iter().map(Vec::capacity).sum::<usize>()
            }
        }
    }

    /// Compares each row (ORDER BY columns `order`, group `ids[row]`)
    /// with its group's kept key; where the row ranks first or ties, keeps the
    /// row's key and calls `won(row, group)`. Groups new to this batch
    /// have the ids up to `groups` that no earlier batch had.
    pub(super) fn update(
        &mut self,
        order: &[ArrayRef],
        ids: &[u32],
        groups: usize,
        mut won: impl FnMut(usize, usize),
    ) -> Result<()> {
        match self {
            BestKeys::First { taken } => {
                taken.resize(groups, false);
                for (row, &g) in ids.iter().enumerate() {
                    let g = g as usize;
                    if !taken[g] {
                        taken[g] = true;
                        won(row, g);
                    }
                }
            }
            BestKeys::Int { options, ranks } => {
                ranks.resize(groups, NO_ROW);
                let values = cast(&order[0], &DataType::Int64)?;
                let values = values.as_primitive::<Int64Type>();
                let options = *options;
                match values.nulls().filter(|n| n.null_count() > 0) {
                    None => {
                        for (row, (&g, &v)) in ids.iter().zip(values.values()).enumerate()
                        {
                            let rank = int_rank(Some(v), options);
                            let best = &mut ranks[g as usize];
                            if rank <= *best {
                                *best = rank;
                                won(row, g as usize);
                            }
                        }
                    }
                    Some(nulls) => {
                        for (row, &g) in ids.iter().enumerate() {
                            let v = nulls.is_valid(row).then(|| values.value(row));
                            let rank = int_rank(v, options);
                            let best = &mut ranks[g as usize];
                            if rank <= *best {
                                *best = rank;
                                won(row, g as usize);
                            }
                        }
                    }
                }
            }
            BestKeys::Rows { converter, best } => {
                best.resize_with(groups, Vec::new);
                let rows = converter.convert_columns(order)?;
                for (row, &g) in ids.iter().enumerate() {
                    let key = rows.row(row);
                    let kept = &mut best[g as usize];
                    if kept.is_empty() || key.as_ref() <= kept.as_slice() {
                        kept.clear();
                        kept.extend_from_slice(key.as_ref());
                        won(row, g as usize);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Float64Array, Int64Array, StringArray};
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::physical_expr::expressions::col;
    use std::sync::Arc;

    /// The winning row per group of one batch, by `keys`.
    fn winners(
        keys: &mut BestKeys,
        order: ArrayRef,
        ids: &[u32],
        groups: usize,
    ) -> Vec<usize> {
        let mut out = vec![usize::MAX; groups];
        keys.update(&[order], ids, groups, |row, g| out[g] = row)
            .unwrap();
        out
    }

    fn sort(
        descending: bool,
        nulls_first: bool,
        t: DataType,
    ) -> (Vec<PhysicalSortExpr>, Vec<DataType>) {
        let schema = Schema::new(vec![Field::new("o", t.clone(), true)]);
        let expr = PhysicalSortExpr::new(
            col("o", &schema).unwrap(),
            SortOptions {
                descending,
                nulls_first,
            },
        );
        (vec![expr], vec![t])
    }

    #[test]
    fn int_and_row_paths_agree_with_a_sort() {
        let values = vec![
            Some(3),
            None,
            Some(-5),
            Some(7),
            Some(7),
            None,
            Some(i64::MIN),
            Some(i64::MAX),
        ];
        let ids = [0, 0, 1, 1, 0, 1, 2, 2];
        for descending in [false, true] {
            for nulls_first in [false, true] {
                let order: ArrayRef = Arc::new(Int64Array::from(values.clone()));
                let (exprs, types) = sort(descending, nulls_first, DataType::Int64);
                let mut int = BestKeys::try_new(&exprs, &types).unwrap();
                assert!(matches!(int, BestKeys::Int { .. }));
                let got = winners(&mut int, Arc::clone(&order), &ids, 3);
                // The row format is the reference: the same sort options.
                let mut rows = BestKeys::Rows {
                    converter: RowConverter::new(vec![SortField::new_with_options(
                        DataType::Int64,
                        SortOptions {
                            descending,
                            nulls_first,
                        },
                    )])
                    .unwrap(),
                    best: vec![],
                };
                let want = winners(&mut rows, order, &ids, 3);
                assert_eq!(
                    got, want,
                    "descending={descending} nulls_first={nulls_first}"
                );
            }
        }
    }

    #[test]
    fn ties_keep_the_last_row_and_later_batches_compare_with_kept_keys() {
        let (exprs, types) = sort(true, false, DataType::Int64);
        let mut keys = BestKeys::try_new(&exprs, &types).unwrap();
        let got = winners(
            &mut keys,
            Arc::new(Int64Array::from(vec![5, 5, 4])),
            &[0, 0, 0],
            1,
        );
        assert_eq!(got, vec![1]);
        let got = winners(
            &mut keys,
            Arc::new(Int64Array::from(vec![5, 6])),
            &[0, 0],
            1,
        );
        assert_eq!(got, vec![1]);
    }

    #[test]
    fn nulls_alone_still_give_a_group_its_row() {
        for nulls_first in [false, true] {
            let (exprs, types) = sort(false, nulls_first, DataType::Int64);
            let mut keys = BestKeys::try_new(&exprs, &types).unwrap();
            let got = winners(
                &mut keys,
                Arc::new(Int64Array::from(vec![None, None])),
                &[0, 0],
                1,
            );
            assert_eq!(got, vec![1]);
        }
    }

    #[test]
    fn floats_and_strings_take_the_row_format() {
        let (exprs, types) = sort(true, true, DataType::Float64);
        let mut keys = BestKeys::try_new(&exprs, &types).unwrap();
        assert!(matches!(keys, BestKeys::Rows { .. }));
        let order = Arc::new(Float64Array::from(vec![
            Some(1.0),
            Some(f64::NAN),
            None,
            Some(2.0),
        ]));
        // DESC NULLS FIRST: the NULL (row 2) first, then NaN (largest).
        assert_eq!(winners(&mut keys, order, &[0, 0, 1, 1], 2), vec![1, 2]);
        let (exprs, types) = sort(false, false, DataType::Utf8);
        let mut keys = BestKeys::try_new(&exprs, &types).unwrap();
        let order = Arc::new(StringArray::from(vec!["b", "a", "c"]));
        assert_eq!(winners(&mut keys, order, &[0, 0, 0], 1), vec![1]);
    }

    #[test]
    fn no_order_keeps_each_groups_first_row() {
        let mut keys = BestKeys::try_new(&[], &[]).unwrap();
        let mut out = vec![usize::MAX; 2];
        keys.update(&[], &[1, 0, 1, 0], 2, |row, g| out[g] = row)
            .unwrap();
        assert_eq!(out, vec![1, 0]);
    }
}
