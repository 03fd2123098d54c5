//! `ALTER TABLE` on in-memory tables: the schema changes QuestDB scripts
//! make between inserts (its own WINDOW JOIN test fixtures add the key and
//! value columns after the first rows), which DataFusion does not plan.
//!
//! - `ADD COLUMN [IF NOT EXISTS] name type`: rows already in the table get
//!   NULL; the type is any DataFusion SQL type (QuestDB's names are mapped
//!   by [`super::questdb_ddl`], which also spells out QuestDB's lists).
//! - `DROP COLUMN [IF EXISTS] name`: the designated timestamp cannot be
//!   dropped (as in QuestDB).
//! - `RENAME COLUMN a TO b`: a renamed designated timestamp stays designated.
//!
//! Only tables created with `CREATE TABLE` (DataFusion's `MemTable`) can be
//! altered: file-backed tables are read-only here. The operations apply in
//! order and the table is replaced only when all of them succeed.

use super::ast::norm;
use crate::config::registry;
use datafusion::arrow::array::{ArrayRef, new_null_array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::{Result, not_impl_err, plan_datafusion_err, plan_err};
use datafusion::dataframe::DataFrame;
use datafusion::datasource::MemTable;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::LogicalPlanBuilder;
use sqlparser::ast::{AlterTable, AlterTableOperation, ColumnDef, ColumnOption};
use std::collections::HashMap;
use std::sync::Arc;

/// The table being altered: its columns and each partition's columns.
struct Columns {
    fields: Vec<Field>,
    /// Per partition, per batch: (rows, one array per field).
    partitions: Vec<Vec<(usize, Vec<ArrayRef>)>>,
}

impl Columns {
    fn position(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name() == name)
    }

    fn add(&mut self, field: Field) {
        for (rows, arrays) in self.partitions.iter_mut().flatten() {
            arrays.push(new_null_array(field.data_type(), *rows));
        }
        self.fields.push(field);
    }

    fn remove(&mut self, i: usize) {
        self.fields.remove(i);
        for (_, arrays) in self.partitions.iter_mut().flatten() {
            arrays.remove(i);
        }
    }
}

/// Runs `ALTER TABLE` against the session's catalog (see the module docs).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> datafusion::common::Result<()> {
/// use datafusion_tsjoin::sql::execute_sql;
/// let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
/// execute_sql(&ctx, "CREATE TABLE t (ts TIMESTAMP); INSERT INTO t VALUES (now())").await?.collect().await?;
/// execute_sql(&ctx, "ALTER TABLE t ADD COLUMN sym SYMBOL, price DOUBLE").await?;
/// let batches = execute_sql(&ctx, "SELECT count(*) FROM t WHERE sym IS NULL AND price IS NULL").await?.collect().await?;
/// assert_eq!(batches[0].num_rows(), 1);
/// # Ok(())
/// # }
/// ```
pub async fn alter_table(ctx: &SessionContext, at: &AlterTable) -> Result<DataFrame> {
    let name = at.name.to_string();
    let empty = || {
        Ok(DataFrame::new(
            ctx.state(),
            LogicalPlanBuilder::empty(false).build()?,
        ))
    };
    let provider = match ctx.table_provider(name.as_str()).await {
        Ok(p) => p,
        Err(_) if at.if_exists => return empty(),
        Err(e) => return Err(e),
    };
    let Some(mem) = provider.downcast_ref::<MemTable>() else {
        return plan_err!(
            "ALTER TABLE {name}: only tables created with CREATE TABLE can be altered (this one reads files)"
        );
    };
    let schema = provider.schema();
    let mut columns = Columns {
        fields: schema.fields().iter().map(|f| f.as_ref().clone()).collect(),
        partitions: vec![],
    };
    for partition in &mem.batches {
        let batches = partition.read().await;
        columns.partitions.push(
            batches
                .iter()
                .map(|b| (b.num_rows(), b.columns().to_vec()))
                .collect(),
        );
    }
    let registry = registry(ctx)?;
    let mut designated = registry.get(&name);
    for op in &at.operations {
        match op {
            AlterTableOperation::AddColumn {
                if_not_exists,
                column_def,
                column_position,
                ..
            } => {
                if column_position.is_some() {
                    return not_impl_err!("ALTER TABLE {name}: ADD COLUMN … FIRST/AFTER");
                }
                let column = norm(&column_def.name);
                if columns.position(&column).is_some() {
                    if *if_not_exists {
                        continue;
                    }
                    return plan_err!(
                        "ALTER TABLE {name}: column {column} already exists"
                    );
                }
                columns.add(Field::new(column, sql_type(ctx, column_def).await?, true));
            }
            AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                ..
            } => {
                for ident in column_names {
                    let column = norm(ident);
                    match columns.position(&column) {
                        Some(_) if designated.as_deref() == Some(column.as_str()) => {
                            return plan_err!(
                                "ALTER TABLE {name}: cannot drop the designated timestamp {column}"
                            );
                        }
                        Some(i) => columns.remove(i),
                        None if *if_exists => {}
                        None => {
                            return plan_err!("ALTER TABLE {name}: no column {column}");
                        }
                    }
                }
            }
            AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => {
                let (old, new) = (norm(old_column_name), norm(new_column_name));
                let Some(i) = columns.position(&old) else {
                    return plan_err!("ALTER TABLE {name}: no column {old}");
                };
                if columns.position(&new).is_some() {
                    return plan_err!("ALTER TABLE {name}: column {new} already exists");
                }
                columns.fields[i] = columns.fields[i].clone().with_name(new.clone());
                if designated.as_deref() == Some(old.as_str()) {
                    designated = Some(new);
                }
            }
            other => {
                return not_impl_err!(
                    "ALTER TABLE {name}: {other} (supported: ADD COLUMN, DROP COLUMN, RENAME COLUMN)"
                );
            }
        }
    }
    let new_schema = Arc::new(Schema::new_with_metadata(
        columns.fields,
        schema.metadata().clone(),
    ));
    let mut partitions = Vec::with_capacity(columns.partitions.len());
    for partition in columns.partitions {
        let options = |rows| RecordBatchOptions::new().with_row_count(Some(rows));
        partitions.push(
            partition
                .into_iter()
                .map(|(rows, arrays)| {
                    RecordBatch::try_new_with_options(
                        new_schema.clone(),
                        arrays,
                        &options(rows),
                    )
                })
                .collect::<std::result::Result<Vec<_>, _>>()?,
        );
    }
    let defaults: HashMap<String, _> = new_schema
        .fields()
        .iter()
        .filter_map(|f| {
            Some((
                f.name().clone(),
                provider.get_column_default(f.name())?.clone(),
            ))
        })
        .collect();
    let mut table =
        MemTable::try_new(new_schema, partitions)?.with_column_defaults(defaults);
    if let Some(constraints) = provider.constraints() {
        table = table.with_constraints(constraints.clone());
    }
    ctx.deregister_table(name.as_str())?;
    ctx.register_table(name.as_str(), Arc::new(table))?;
    if let Some(column) = designated {
        registry.set(&name, &column);
    }
    empty()
}

/// The Arrow type DataFusion gives `column`'s SQL type (as in CREATE
/// TABLE); constraints other than NULL are refused, since rows already in
/// the table would break them.
async fn sql_type(ctx: &SessionContext, column: &ColumnDef) -> Result<DataType> {
    if let Some(option) = column
        .options
        .iter()
        .find(|o| !matches!(o.option, ColumnOption::Null))
    {
        return not_impl_err!(
            "ALTER TABLE … ADD COLUMN {}: column option {option}",
            column.name
        );
    }
    let probe = ctx
        .sql(&format!("SELECT CAST(NULL AS {}) AS c", column.data_type))
        .await
        .map_err(|e| {
            plan_datafusion_err!(
                "ADD COLUMN {}: unsupported type {}: {e}",
                column.name,
                column.data_type
            )
        })?;
    Ok(probe.schema().field(0).data_type().clone())
}
