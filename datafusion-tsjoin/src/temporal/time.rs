//! Timestamps as common ticks, and the cheap sortedness check that picks
//! the streaming path.

use datafusion::arrow::array::{ArrayRef, AsArray};
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

/// True when the non-NULL times of `ts` never decrease (NULLs are skipped:
/// they never match, so they do not break the order).
///
/// ```ignore
/// assert!(is_non_decreasing(&[Some(1), None, Some(1), Some(3)]));
/// ```
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
    fn sortedness_skips_nulls() {
        assert!(is_non_decreasing(&[Some(1), None, Some(1), Some(3)]));
        assert!(!is_non_decreasing(&[Some(2), None, Some(1)]));
        assert!(is_non_decreasing(&[]));
    }
}
