//! Printing record batches as a table, CSV or JSON.

use crate::Format;
use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;
use datafusion::error::Result;
use std::io::Write;

/// Prints `batches` to stdout in `format`.
pub fn print(schema: &Schema, batches: &[RecordBatch], format: Format) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        Format::Table => {
            let table = if batches.is_empty() {
                arrow::util::pretty::pretty_format_batches(&[RecordBatch::new_empty(
                    schema.clone().into(),
                )])?
            } else {
                arrow::util::pretty::pretty_format_batches(batches)?
            };
            writeln!(out, "{table}")?;
        }
        Format::Csv => {
            let mut w = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut out);
            if batches.is_empty() {
                w.write(&RecordBatch::new_empty(schema.clone().into()))?;
            }
            for b in batches {
                w.write(b)?;
            }
        }
        Format::Json => {
            let mut w = arrow::json::ArrayWriter::new(&mut out);
            let refs: Vec<&RecordBatch> = batches.iter().collect();
            w.write_batches(&refs)?;
            w.finish()?;
            drop(w);
            writeln!(out)?;
        }
    }
    Ok(())
}
