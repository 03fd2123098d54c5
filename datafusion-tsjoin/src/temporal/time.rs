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
        ts.values().windows(2).all(|w| w[0] <= w[1])
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
