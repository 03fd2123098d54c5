//! Helpers shared by the integration tests.

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::prelude::{SessionConfig, SessionContext};

/// A tsjoin session with `partitions` target partitions.
pub fn context(partitions: usize) -> SessionContext {
    datafusion_tsjoin::tsjoin_context(SessionConfig::new().with_target_partitions(partitions))
}

/// sqllogictest-style text of one value: NULL, `(empty)`, floats rounded to
/// 9 decimals so that summation order does not show.
pub fn cell(array: &ArrayRef, row: usize) -> String {
    if array.is_null(row) {
        return "NULL".into();
    }
    let float = match array.data_type() {
        DataType::Float64 => Some(array.as_primitive::<Float64Type>().value(row)),
        DataType::Float32 => Some(array.as_primitive::<Float32Type>().value(row) as f64),
        _ => None,
    };
    if let Some(v) = float {
        return if v.is_nan() {
            "NaN".into()
        } else if v.is_infinite() {
            if v > 0.0 { "inf".into() } else { "-inf".into() }
        } else {
            let r = (v * 1e9).round() / 1e9;
            format!("{}", if r == 0.0 { 0.0 } else { r })
        };
    }
    let opts = FormatOptions::default();
    let f = ArrayFormatter::try_new(array.as_ref(), &opts).unwrap();
    let s = f.value(row).to_string().trim_end().to_string();
    if s.is_empty() { "(empty)".into() } else { s }
}
