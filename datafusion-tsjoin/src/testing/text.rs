//! Answers as comparable text, for checks between two ways of running a
//! query (local vs a cluster, one plan vs another).

use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::Result;

/// One line per row, cells joined by `|`, NULL as `NULL`, in the batches'
/// order. With `float_digits`, floating-point cells are written to that
/// many significant digits: two runs that sum partial results in another
/// order (a cluster, other partitions) differ only in the last digits.
///
/// ```
/// use datafusion::arrow::array::{Float64Array, Int64Array, RecordBatch};
/// use std::sync::Arc;
/// use datafusion_tsjoin::testing::text::rows_as_text;
/// let batch = RecordBatch::try_from_iter([
///     ("k", Arc::new(Int64Array::from(vec![Some(1), None])) as _),
///     ("v", Arc::new(Float64Array::from(vec![0.1 + 0.2, 1.0])) as _),
/// ]).unwrap();
/// assert_eq!(rows_as_text(&[batch], Some(9)).unwrap(), ["1|3.00000000e-1", "NULL|1.00000000e0"]);
/// ```
pub fn rows_as_text(
    batches: &[RecordBatch],
    float_digits: Option<usize>,
) -> Result<Vec<String>> {
    let options = FormatOptions::default().with_null("NULL");
    let mut rows = vec![];
    for b in batches {
        let formatters = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for r in 0..b.num_rows() {
            let cells: Vec<String> = formatters
                .iter()
                .zip(b.columns())
                .map(|(f, c)| {
                    let text = f.value(r).to_string();
                    let float = matches!(
                        c.data_type(),
                        DataType::Float16 | DataType::Float32 | DataType::Float64
                    );
                    match float_digits {
                        Some(d) if float && c.is_valid(r) => text
                            .parse::<f64>()
                            .map_or(text, |v| format!("{v:.*e}", d.saturating_sub(1))),
                        _ => text,
                    }
                })
                .collect();
            rows.push(cells.join("|"));
        }
    }
    Ok(rows)
}
