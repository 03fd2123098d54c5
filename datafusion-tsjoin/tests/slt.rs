//! Runs `tests/slt/*.slt` through tsjoin's SQL entry point.

use crate::support::{cell, context};
use datafusion::arrow::datatypes::DataType;
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use sqllogictest::{AsyncDB, DBOutput};
use std::path::PathBuf;

/// A result column's type letter in a `query` header, as DataFusion's own
/// sqllogictest writes them: `I` integers, `R` floats and decimals, `T`
/// strings, `B` booleans, `P` timestamps, `D` dates and times, `?` any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Integer,
    Float,
    Text,
    Boolean,
    Timestamp,
    DateTime,
    Other,
}

impl sqllogictest::ColumnType for ColumnType {
    fn from_char(value: char) -> Option<Self> {
        Some(match value {
            'I' => Self::Integer,
            'R' => Self::Float,
            'T' => Self::Text,
            'B' => Self::Boolean,
            'P' => Self::Timestamp,
            'D' => Self::DateTime,
            '?' => Self::Other,
            _ => return None,
        })
    }

    fn to_char(&self) -> char {
        match self {
            Self::Integer => 'I',
            Self::Float => 'R',
            Self::Text => 'T',
            Self::Boolean => 'B',
            Self::Timestamp => 'P',
            Self::DateTime => 'D',
            Self::Other => '?',
        }
    }
}

impl ColumnType {
    /// The letter of a column of type `t` (a dictionary's by its values).
    pub fn of(t: &DataType) -> Self {
        match t {
            t if t.is_integer() => Self::Integer,
            t if t.is_floating() || t.is_decimal() => Self::Float,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Self::Text,
            DataType::Boolean => Self::Boolean,
            DataType::Timestamp(..) => Self::Timestamp,
            DataType::Date32
            | DataType::Date64
            | DataType::Time32(_)
            | DataType::Time64(_) => Self::DateTime,
            DataType::Dictionary(_, v) => Self::of(v),
            _ => Self::Other,
        }
    }
}

/// Whether `sql` returns rows to compare (a `query` record) rather than a
/// statement's completion.
fn is_query(sql: &str) -> bool {
    let s = sql.trim_start().to_ascii_lowercase();
    [
        "select", "with", "explain", "values", "show", "describe", "(",
    ]
    .iter()
    .any(|k| s.starts_with(k))
}

struct TsJoinDb {
    ctx: SessionContext,
}

#[derive(Debug)]
struct Error(DataFusionError);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl std::error::Error for Error {}

#[async_trait::async_trait]
impl AsyncDB for TsJoinDb {
    type Error = Error;
    type ColumnType = ColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<ColumnType>, Error> {
        let df = self.ctx.tsjoin_sql(sql).await.map_err(Error)?;
        let types = df
            .schema()
            .fields()
            .iter()
            .map(|f| ColumnType::of(f.data_type()))
            .collect();
        let batches = df.collect().await.map_err(Error)?;
        if !is_query(sql) {
            return Ok(DBOutput::StatementComplete(0));
        }
        let rows = batches
            .iter()
            .flat_map(|b| {
                (0..b.num_rows())
                    .map(move |r| b.columns().iter().map(|c| cell(c, r)).collect())
            })
            .collect();
        Ok(DBOutput::Rows { types, rows })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "tsjoin"
    }
}

fn slt_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/slt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        // TSJOIN_SLT=name runs only the files whose path contains it.
        .filter(|p| {
            std::env::var("TSJOIN_SLT").is_ok_and(|f| p.to_string_lossy().contains(&f))
                || std::env::var("TSJOIN_SLT").is_err()
        })
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictests() {
    let files = slt_files();
    assert!(!files.is_empty());
    let mut failures = vec![];
    for (partitions, file) in [1usize, 3]
        .iter()
        .flat_map(|p| files.iter().map(move |f| (*p, f)))
    {
        let mut runner = sqllogictest::Runner::new(move || async move {
            Ok(TsJoinDb {
                ctx: context(partitions),
            })
        });
        runner.with_column_validator(sqllogictest::strict_column_validator);
        if let Err(e) = runner.run_file_async(file).await {
            failures.push(format!(
                "{} (target_partitions={partitions}):\n{e}",
                file.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
