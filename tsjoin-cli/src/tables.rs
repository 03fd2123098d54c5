//! Registering files and directories as tables.

use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::{CsvReadOptions, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use std::path::Path;
use std::sync::Arc;

fn split_pair<'a>(arg: &'a str, what: &str) -> Result<(&'a str, &'a str)> {
    arg.split_once('=')
        .filter(|(n, v)| !n.is_empty() && !v.is_empty())
        .ok_or_else(|| DataFusionError::Plan(format!("expected {what}, got '{arg}'")))
}

/// Registers every `NAME=PATH` table and `NAME=COLUMN` designated timestamp.
pub async fn register_all(
    ctx: &SessionContext,
    tables: &[String],
    timestamps: &[String],
) -> Result<()> {
    for t in tables {
        let (name, path) = split_pair(t, "--table NAME=PATH")?;
        register(ctx, name, path).await?;
    }
    for t in timestamps {
        let (name, column) = split_pair(t, "--timestamp NAME=COLUMN")?;
        let provider = ctx.table_provider(name).await.map_err(|_| {
            DataFusionError::Plan(format!("--timestamp {t}: no table named {name}"))
        })?;
        if provider.schema().field_with_name(column).is_err() {
            return Err(DataFusionError::Plan(format!(
                "--timestamp {t}: table {name} has no column {column}"
            )));
        }
        ctx.set_designated_timestamp(name, column)?;
    }
    Ok(())
}

/// Registers one Parquet file, Parquet directory or CSV file as `name`.
pub async fn register(ctx: &SessionContext, name: &str, path: &str) -> Result<()> {
    let p = Path::new(path);
    if !p.exists() {
        return Err(DataFusionError::Plan(format!(
            "table {name}: no such file or directory: {path}"
        )));
    }
    let is_csv =
        p.is_file() && p.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    if is_csv {
        return ctx
            .register_csv(name, path, CsvReadOptions::new().has_header(true))
            .await;
    }
    datafusion_tsjoin::files::check_parquet_files(p)
        .map_err(|e| DataFusionError::Plan(format!("table {name}: {e}")))?;
    let url = ListingTableUrl::parse(std::fs::canonicalize(p)?.to_string_lossy())?;
    let mut options = ListingOptions::new(Arc::new(ParquetFormat::default()));
    if p.is_dir() {
        options = options.with_file_extension(".parquet");
    } else {
        options = options.with_file_extension("");
    }
    let state = ctx.state();
    let config = ListingTableConfig::new(url)
        .with_listing_options(options)
        .infer_partitions_from_path(&state)
        .await?
        .infer_schema(&state)
        .await
        .map_err(|e| {
            DataFusionError::Plan(format!(
                "table {name}: cannot read {path} as Parquet: {e}"
            ))
        })?;
    ctx.register_table(name, Arc::new(ListingTable::try_new(config)?))?;
    Ok(())
}
