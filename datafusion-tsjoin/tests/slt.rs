//! Runs `tests/slt/*.slt` through tsjoin's SQL entry point.

use crate::support::{cell, context};
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType};
use std::path::PathBuf;

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
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, Error> {
        let df = self.ctx.tsjoin_sql(sql).await.map_err(Error)?;
        let is_query = {
            let s = sql.trim_start().to_ascii_lowercase();
            s.starts_with("select")
                || s.starts_with("with")
                || s.starts_with("explain")
                || s.starts_with('(')
        };
        let batches = df.collect().await.map_err(Error)?;
        if !is_query {
            return Ok(DBOutput::StatementComplete(0));
        }
        let mut rows = vec![];
        let mut width = 0;
        for b in &batches {
            width = b.num_columns();
            for r in 0..b.num_rows() {
                rows.push(b.columns().iter().map(|c| cell(c, r)).collect());
            }
        }
        Ok(DBOutput::Rows {
            types: vec![DefaultColumnType::Any; width],
            rows,
        })
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
        runner.with_column_validator(|_, _| true);
        if let Err(e) = runner.run_file_async(file).await {
            failures.push(format!(
                "{} (target_partitions={partitions}):\n{e}",
                file.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
