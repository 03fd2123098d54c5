//! Printing record batches as a table, CSV or JSON, plans as indented
//! text, and writing results to files.

use crate::Format;
use arrow::array::{Array, AsArray};
use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;
use datafusion::dataframe::{DataFrame, DataFrameWriteOptions};
use datafusion::error::{DataFusionError, Result};
use std::io::Write;
use std::path::Path;

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

/// Prints EXPLAIN's `(plan_type, plan)` rows as text, each plan indented
/// under its type, as datafusion-cli and duckdb do: a table would pad every
/// line to the longest one.
pub fn print_plan(batches: &[RecordBatch]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    for batch in batches {
        let (Some(kinds), Some(plans)) = (
            batch.column(0).as_string_opt::<i32>(),
            batch.column(1).as_string_opt::<i32>(),
        ) else {
            return print(&batch.schema(), std::slice::from_ref(batch), Format::Table);
        };
        for row in 0..batch.num_rows() {
            if kinds.is_null(row) || plans.is_null(row) {
                continue;
            }
            writeln!(out, "{}", kinds.value(row))?;
            for line in plans.value(row).lines() {
                writeln!(out, "  {line}")?;
            }
        }
    }
    Ok(())
}

/// A file format `--output` writes, chosen by the file's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    /// `.parquet`
    Parquet,
    /// `.csv`, with a header
    Csv,
    /// `.json`, `.jsonl`, `.ndjson`: one object per line, as COPY TO writes
    Json,
}

impl FileFormat {
    /// The format `path`'s extension names.
    pub fn of(path: &Path) -> Result<Self> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("parquet") => Ok(Self::Parquet),
            Some("csv") => Ok(Self::Csv),
            Some("json" | "jsonl" | "ndjson") => Ok(Self::Json),
            _ => Err(DataFusionError::Plan(format!(
                "--output {}: name a .parquet, .csv or .json file",
                path.display()
            ))),
        }
    }
}

/// Runs `df`, writing its result to one file at `path` (replaced if it
/// exists) in the format of its extension; the number of rows written.
pub async fn write(df: DataFrame, path: &Path) -> Result<usize> {
    let format = FileFormat::of(path)?;
    // DataFusion writes through object_store, which wants an absolute path
    // and an existing directory to put the file in.
    let path = std::path::absolute(path)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let target = path.to_string_lossy();
    let options = DataFrameWriteOptions::new().with_single_file_output(true);
    let counts = match format {
        FileFormat::Parquet => df.write_parquet(&target, options, None).await?,
        FileFormat::Csv => df.write_csv(&target, options, None).await?,
        FileFormat::Json => df.write_json(&target, options, None).await?,
    };
    let rows = counts
        .iter()
        .filter_map(|b| {
            b.column(0)
                .as_primitive_opt::<arrow::datatypes::UInt64Type>()
        })
        .flat_map(|c| c.iter().flatten())
        .sum::<u64>();
    Ok(rows as usize)
}
