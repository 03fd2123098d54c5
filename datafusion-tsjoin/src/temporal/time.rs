//! Timestamps as common ticks, and the cheap sortedness check that picks
//! the streaming path.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::Result;

/// The values of a timestamp (or integer) array as ticks of the common unit
/// (`factor` common ticks per input tick); NULL stays `None`. Saturates
/// rather than wraps on overflow (only dates beyond year 2262 in
/// nanoseconds could).
///
/// ```ignore
/// let t = ticks(&array, 1000)?; // microseconds compared in nanoseconds
/// ```
#[allow(dead_code)] // ASOF reads `tick_array`; kept for row-by-row callers
pub(crate) fn ticks(array: &ArrayRef, factor: i64) -> Result<Vec<Option<i64>>> {
    let ints = cast(array, &DataType::Int64)?;
    let ints = ints.as_primitive::<Int64Type>();
    Ok(if factor == 1 {
        ints.iter().collect()
    } else {
        ints.iter()
            .map(|v| v.map(|v| v.saturating_mul(factor)))
            .collect()
    })
}

/// Like [`ticks`], as an Arrow array (values and validity apart): no
/// `Option` per row, and a no-op cast for `Int64`-backed timestamps.
///
/// ```ignore
/// let t = tick_array(&array, 1)?;
/// let (values, nulls) = (t.values(), t.nulls());
/// ```
pub(crate) fn tick_array(array: &ArrayRef, factor: i64) -> Result<Int64Array> {
    let ints = cast(array, &DataType::Int64)?;
    let ints = ints.as_primitive::<Int64Type>();
    Ok(if factor == 1 {
        ints.clone()
    } else {
        ints.unary(|v: i64| v.saturating_mul(factor))
    })
}

/// [`is_non_decreasing`] over an array (NULLs skipped).
///
/// ```ignore
/// assert!(array_is_non_decreasing(&Int64Array::from(vec![1, 1, 3])));
/// ```
pub(crate) fn array_is_non_decreasing(ts: &Int64Array) -> bool {
    if ts.null_count() == 0 {
        slice_is_non_decreasing(ts.values())
    } else {
        let mut prev = i64::MIN;
        for t in ts.iter().flatten() {
            if t < prev {
                return false;
            }
            prev = t;
        }
        true
    }
}

/// Values per block of [`slice_is_non_decreasing`].
const ORDER_BLOCK: usize = 512;

/// True when `v` never decreases. Blocks of [`ORDER_BLOCK`] pairs are
/// compared without an early exit, which the compiler turns into vector
/// compares (every right and left batch of a temporal join is checked);
/// the first block that fails ends the scan.
fn slice_is_non_decreasing(v: &[i64]) -> bool {
    let mut start = 0;
    while start + 1 < v.len() {
        let end = (start + ORDER_BLOCK + 1).min(v.len());
        let (a, b) = (&v[start..end - 1], &v[start + 1..end]);
        if !a.iter().zip(b).fold(true, |ok, (x, y)| ok & (x <= y)) {
            return false;
        }
        start = end - 1;
    }
    true
}

/// True when the non-NULL times of `ts` never decrease (NULLs are skipped:
/// they never match, so they do not break the order).
///
/// ```ignore
/// assert!(is_non_decreasing(&[Some(1), None, Some(1), Some(3)]));
/// ```
#[allow(dead_code)] // as `ticks`
pub(crate) fn is_non_decreasing(ts: &[Option<i64>]) -> bool {
    let mut prev = i64::MIN;
    for t in ts.iter().flatten() {
        if *t < prev {
            return false;
        }
        prev = *t;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blocked check agrees with a plain pairwise one on slices of
    /// every length around the block size, with one descent anywhere.
    #[test]
    fn blocked_order_check_matches_pairwise() {
        for len in [
            0,
            1,
            2,
            3,
            ORDER_BLOCK - 1,
            ORDER_BLOCK,
            ORDER_BLOCK + 1,
            2 * ORDER_BLOCK + 2,
        ] {
            let sorted: Vec<i64> = (0..len as i64).map(|i| i / 3).collect();
            assert!(slice_is_non_decreasing(&sorted), "len {len}");
            for at in 1..len {
                let mut v = sorted.clone();
                v[at] = v[at - 1] - 1;
                let want = v.windows(2).all(|w| w[0] <= w[1]);
                assert_eq!(
                    slice_is_non_decreasing(&v),
                    want,
                    "len {len}, descent at {at}"
                );
            }
        }
    }
    use datafusion::arrow::array::TimestampMicrosecondArray;
    use std::sync::Arc;

    #[test]
    fn ticks_scale_and_keep_nulls() {
        let a: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![
            Some(1),
            None,
            Some(3),
        ]));
        assert_eq!(ticks(&a, 1000).unwrap(), vec![Some(1000), None, Some(3000)]);
    }

    #[test]
    fn tick_array_matches_ticks() {
        let a: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![
            Some(1),
            None,
            Some(3),
        ]));
        for f in [1, 1000] {
            let t = tick_array(&a, f).unwrap();
            assert_eq!(t.iter().collect::<Vec<_>>(), ticks(&a, f).unwrap());
        }
        assert!(array_is_non_decreasing(&tick_array(&a, 1).unwrap()));
        let b = Int64Array::from(vec![Some(2), None, Some(1)]);
        assert!(!array_is_non_decreasing(&b));
        assert!(!array_is_non_decreasing(&Int64Array::from(vec![2, 1])));
        assert!(array_is_non_decreasing(&Int64Array::from(vec![1, 1, 2])));
    }

    #[test]
    fn sortedness_skips_nulls() {
        assert!(is_non_decreasing(&[Some(1), None, Some(1), Some(3)]));
        assert!(!is_non_decreasing(&[Some(2), None, Some(1)]));
        assert!(is_non_decreasing(&[]));
    }
}
