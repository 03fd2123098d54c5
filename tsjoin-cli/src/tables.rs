//! Registering files and directories as tables.

use datafusion::common::{Constraint, Constraints};
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

/// Registers every `NAME=PATH` table (with its `NAME=COLUMNS` primary key
/// if one is declared) and `NAME=COLUMN` designated timestamp.
pub async fn register_all(
    ctx: &SessionContext,
    tables: &[String],
    timestamps: &[String],
    primary_keys: &[String],
) -> Result<()> {
    let mut keys = std::collections::HashMap::new();
    for k in primary_keys {
        let (name, columns) = split_pair(k, "--primary-key NAME=COLUMN[,COLUMN...]")?;
        if !tables
            .iter()
            .any(|t| t.split_once('=').is_some_and(|(n, _)| n == name))
        {
            return Err(DataFusionError::Plan(format!(
                "--primary-key {k}: no --table named {name}"
            )));
        }
        keys.insert(name, columns.split(',').map(str::trim).collect::<Vec<_>>());
    }
    for t in tables {
        let (name, path) = split_pair(t, "--table NAME=PATH")?;
        register(ctx, name, path, keys.get(name).map(Vec::as_slice)).await?;
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

/// Registers one Parquet file, Parquet directory or CSV file as `name`,
/// with `primary_key` (Parquet only) as its declared primary key.
pub async fn register(
    ctx: &SessionContext,
    name: &str,
    path: &str,
    primary_key: Option<&[&str]>,
) -> Result<()> {
    let p = Path::new(path);
    if !p.exists() {
        return Err(DataFusionError::Plan(format!(
            "table {name}: no such file or directory: {path}"
        )));
    }
    let is_csv =
        p.is_file() && p.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    if is_csv {
        if primary_key.is_some() {
            return Err(DataFusionError::Plan(format!(
                "table {name}: --primary-key applies to Parquet tables"
            )));
        }
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
    // The session's file-statistics cache (what `register_parquet` uses):
    // without it every query re-reads each file's footer statistics, ~10 ms
    // of planning on a 78-file table.
    let mut table = ListingTable::try_new(config)?
        .with_cache(ctx.runtime_env().cache_manager.get_file_statistic_cache());
    if let Some(columns) = primary_key {
        let constraints = primary_key_constraint(name, &table, columns)?;
        table = table.with_constraints(constraints);
    }
    ctx.register_table(name, Arc::new(table))?;
    Ok(())
}

/// `columns` of `table` as its primary key (an error naming a missing one).
fn primary_key_constraint(
    name: &str,
    table: &ListingTable,
    columns: &[&str],
) -> Result<Constraints> {
    use datafusion::catalog::TableProvider;
    let schema = table.schema();
    let indices = columns
        .iter()
        .map(|c| {
            schema.index_of(c).map_err(|_| {
                DataFusionError::Plan(format!(
                    "--primary-key: table {name} has no column {c}"
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Constraints::new_unverified(vec![Constraint::PrimaryKey(
        indices,
    )]))
}
