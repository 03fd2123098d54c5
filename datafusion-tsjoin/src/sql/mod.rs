//! tsjoin's SQL entry point: DataFusion SQL plus QuestDB's WINDOW JOIN.
//!
//! `SessionContext::sql` cannot be extended with new join syntax, so
//! [`plan_sql`] tokenises with the session's dialect, rewrites WINDOW JOIN
//! clauses (`rewrite.rs`), parses with DataFusion's parser, moves aggregates
//! into place (`ast.rs`) and plans through the session, whose
//! [`WindowJoinRelationPlanner`] builds the logical node.

mod alter;
mod asof;
mod ast;
mod depth;
mod horizon;
mod latest_on;
mod limit;
mod precedence;
mod questdb_ddl;
mod relation;
mod rewrite;

pub use crate::config::{DESIGNATED_TIMESTAMP_OPTION, registry};
pub use asof::AsofJoinRelationPlanner;
pub use horizon::HorizonJoinRelationPlanner;
pub use limit::{LIMIT_MARKER, LimitMarker, limit_marker};
pub use relation::WindowJoinRelationPlanner;

use ast::{AstContext, norm, right_table_names};
use datafusion::common::{DataFusionError, Result, plan_datafusion_err};
use datafusion::dataframe::DataFrame;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::parser::{CopyToSource, DFParserBuilder, Statement as DFStatement};
use sqlparser::ast::{ObjectNamePart, Value};
use sqlparser::dialect::dialect_from_str;
use sqlparser::tokenizer::Tokenizer;
use std::collections::{HashMap, HashSet};

/// Parses `sql` (one or more statements), WINDOW JOINs included. Each
/// statement still needs [`prepare`] (against the catalog as it is when the
/// statement runs) before DataFusion can plan it.
pub async fn parse_sql(ctx: &SessionContext, sql: &str) -> Result<Vec<DFStatement>> {
    let state = ctx.state();
    let options = &state.config().options().sql_parser;
    let dialect_name = options.dialect.to_string();
    let recursion_limit = options.recursion_limit.get();
    let dialect = dialect_from_str(&dialect_name)
        .ok_or_else(|| plan_datafusion_err!("unsupported SQL dialect: {dialect_name}"))?;
    let tokens = Tokenizer::new(dialect.as_ref(), sql)
        .tokenize_with_location()
        .map_err(|e| DataFusionError::SQL(Box::new(e.into()), None))?;
    let tokens = questdb_ddl::rewrite_questdb_ddl(tokens);
    let tokens = latest_on::rewrite_latest_on(tokens)?;
    let tokens = rewrite::rewrite_window_joins(tokens, dialect.as_ref())?;
    let tokens = asof::rewrite_asof_joins(tokens)?;
    let tokens = horizon::rewrite_horizon_joins(tokens)?;
    let tokens = limit::rewrite_limits(tokens)?;
    let statements = DFParserBuilder::new(tokens)
        .with_dialect(dialect.as_ref())
        .with_recursion_limit(recursion_limit)
        .build()?
        .parse_statements()?;
    let mut statements: Vec<DFStatement> = statements.into_iter().collect();
    for st in &mut statements {
        depth::check_depth(st)?;
        let mut st = st;
        while let DFStatement::Explain(e) = st {
            st = e.statement.as_mut();
        }
        if let DFStatement::Statement(s) = st {
            precedence::fix_is_distinct_from(s);
        }
    }
    Ok(statements)
}

/// Applies tsjoin's AST pass (and the designated-timestamp option) to one statement.
pub async fn prepare(ctx: &SessionContext, st: &mut DFStatement) -> Result<()> {
    match st {
        DFStatement::Statement(s) => {
            if let sqlparser::ast::Statement::CreateTable(ct) = s.as_mut() {
                take_designated_timestamp(ctx, ct)?;
            }
            asof::prepare_asof(ctx, s).await?;
            horizon::prepare_horizon(ctx, s).await?;
            let mut right_columns = HashMap::new();
            for name in right_table_names(s) {
                let key = name
                    .0
                    .iter()
                    .map(|p| match p {
                        ObjectNamePart::Identifier(i) => norm(i),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(".");
                if let Ok(provider) = ctx.table_provider(key.as_str()).await {
                    let cols: HashSet<String> = provider
                        .schema()
                        .fields()
                        .iter()
                        .map(|f| f.name().clone())
                        .collect();
                    right_columns.insert(key, cols);
                }
            }
            let state = ctx.state();
            let mut aggregates: HashSet<String> = HashSet::new();
            for (name, f) in state.aggregate_functions() {
                aggregates.insert(name.to_lowercase());
                aggregates.extend(f.aliases().iter().map(|a| a.to_lowercase()));
            }
            // QuestDB's approx_median, not DataFusion's (functions/percentile).
            crate::functions::rename_approx_median(s);
            ast::rewrite_statement(
                s,
                &AstContext {
                    aggregates,
                    right_columns,
                },
            )
        }
        DFStatement::Explain(e) => Box::pin(prepare(ctx, &mut e.statement)).await,
        // COPY (query) TO ...: the query gets the pass a SELECT gets.
        DFStatement::CopyTo(copy) => {
            if let CopyToSource::Query(query) = &mut copy.source {
                let mut st = DFStatement::Statement(Box::new(
                    sqlparser::ast::Statement::Query(query.clone()),
                ));
                Box::pin(prepare(ctx, &mut st)).await?;
                if let DFStatement::Statement(s) = st
                    && let sqlparser::ast::Statement::Query(q) = *s
                {
                    *query = q;
                }
            }
            Ok(())
        }
        DFStatement::CreateExternalTable(cet) => {
            // A corrupt footer panics the Parquet reader: say so first.
            if cet.file_type.eq_ignore_ascii_case("parquet") {
                for location in &cet.locations {
                    if let Some(path) = crate::files::local_path(location) {
                        crate::files::check_parquet_files(path)?;
                    }
                }
            }
            let pos = cet
                .options
                .iter()
                .position(|(k, _)| k.eq_ignore_ascii_case(DESIGNATED_TIMESTAMP_OPTION));
            if let Some(pos) = pos {
                let (_, v) = cet.options.remove(pos);
                let column = match v {
                    Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => s,
                    other => other.to_string(),
                };
                registry(ctx)?.set(&cet.name.to_string(), &column);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Records and removes the `designated_timestamp` option of a `CREATE
/// TABLE` (QuestDB's `TIMESTAMP(col)` clause, see [`questdb_ddl`]).
fn take_designated_timestamp(
    ctx: &SessionContext,
    ct: &mut sqlparser::ast::CreateTable,
) -> Result<()> {
    use sqlparser::ast::{CreateTableOptions, Expr, SqlOption};
    let CreateTableOptions::With(options) = &mut ct.table_options else {
        return Ok(());
    };
    let is_ours = |o: &SqlOption| matches!(o, SqlOption::KeyValue { key, .. } if key.value.eq_ignore_ascii_case(DESIGNATED_TIMESTAMP_OPTION));
    let Some(pos) = options.iter().position(is_ours) else {
        return Ok(());
    };
    let SqlOption::KeyValue { value, .. } = options.remove(pos) else {
        return Ok(());
    };
    let column = match value {
        Expr::Value(v) => match v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => s,
            other => other.to_string(),
        },
        Expr::Identifier(i) => i.value,
        other => other.to_string(),
    };
    if options.is_empty() {
        ct.table_options = CreateTableOptions::None;
    }
    // With a column list the column can be checked now (with a query, the
    // join that reads the table reports a missing one).
    if !ct.columns.is_empty()
        && !ct
            .columns
            .iter()
            .any(|c| c.name.value.eq_ignore_ascii_case(&column))
    {
        return Err(plan_datafusion_err!(
            "TIMESTAMP({column}): table {} has no column {column}",
            ct.name
        ));
    }
    registry(ctx)?.set(&ct.name.to_string(), &column);
    Ok(())
}

/// Plans every statement of `sql` into a logical plan (statements that
/// depend on earlier ones, such as CREATE then SELECT, need
/// [`execute_sql`]).
pub async fn plan_sql(ctx: &SessionContext, sql: &str) -> Result<Vec<LogicalPlan>> {
    let mut plans = vec![];
    for mut st in parse_sql(ctx, sql).await? {
        prepare(ctx, &mut st).await?;
        let plan = ctx.state().statement_to_plan(st).await?;
        plans.push(limit::plan_limits(
            plan,
            registry(ctx).unwrap_or_default().as_ref(),
        )?);
    }
    Ok(plans)
}

/// Plans and executes each statement of `sql` in turn, returning the last
/// one's [`DataFrame`] (DDL runs eagerly, as in `SessionContext::sql`, and
/// so does `ALTER TABLE` on in-memory tables, see `alter.rs`; a
/// query before the last is planned but not run: to run every query, take
/// the statements from [`parse_sql`] to [`execute_statement`] one by one).
pub async fn execute_sql(ctx: &SessionContext, sql: &str) -> Result<DataFrame> {
    crate::files::contained(execute_script(ctx, sql)).await
}

async fn execute_script(ctx: &SessionContext, sql: &str) -> Result<DataFrame> {
    let statements = parse_sql(ctx, sql).await?;
    if statements.is_empty() {
        return Err(plan_datafusion_err!("no SQL statement given"));
    }
    let n = statements.len();
    let mut last = None;
    for (i, st) in statements.into_iter().enumerate() {
        let df = execute_statement(ctx, st).await?;
        // DDL runs when planned; COPY and INSERT run when collected, so one
        // that is not the last statement runs here (else it would do nothing).
        if i + 1 < n
            && matches!(
                df.logical_plan(),
                LogicalPlan::Copy(_) | LogicalPlan::Dml(_)
            )
        {
            df.collect().await?;
        } else {
            last = Some(df);
        }
    }
    last.ok_or_else(|| plan_datafusion_err!("no SQL statement given"))
}

/// Prepares, plans and executes one statement from [`parse_sql`] against
/// the catalog as it is now: DDL and settings take effect at once, a query
/// comes back as a [`DataFrame`] to collect or stream.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> datafusion::common::Result<()> {
/// use datafusion_tsjoin::sql::{execute_statement, parse_sql};
/// let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
/// let mut rows = vec![];
/// for st in parse_sql(&ctx, "CREATE TABLE t AS VALUES (1), (2); SELECT count(*) FROM t").await? {
///     let batches = execute_statement(&ctx, st).await?.collect().await?;
///     rows.push(batches.iter().map(|b| b.num_rows()).sum::<usize>());
/// }
/// assert_eq!(rows, [0, 1]);
/// # Ok(())
/// # }
/// ```
pub async fn execute_statement(
    ctx: &SessionContext,
    mut st: DFStatement,
) -> Result<DataFrame> {
    if let DFStatement::Statement(s) = &st
        && let sqlparser::ast::Statement::AlterTable(at) = s.as_ref()
    {
        return alter::alter_table(ctx, at).await;
    }
    prepare(ctx, &mut st).await?;
    let plan = ctx.state().statement_to_plan(st).await?;
    // A plain DataFusion session (no tsjoin registry) has no designated
    // timestamps: QuestDB's LIMIT forms still plan, in input order.
    let plan = limit::plan_limits(plan, registry(ctx).unwrap_or_default().as_ref())?;
    ctx.execute_logical_plan(plan).await
}
