//! The queries of datafusion-tsjoin's .slt suites (WINDOW, ASOF and HORIZON
//! JOIN, the inline GROUP BY, approx_percentile, QuestDB's LIMIT) run on an
//! in-process cluster and locally: the answers must be equal, with
//! Ballista's adaptive planner on and off.
//!
//! The suites build their tables with `CREATE TABLE ... AS VALUES`
//! (in-memory tables, which cannot travel to executors): each table is
//! written to a Parquet file after every statement that may change it and
//! registered under its name on the cluster session, with its designated
//! timestamp.

use ballista_core::extension::SessionConfigExt;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::Result;
use datafusion::dataframe::DataFrameWriteOptions;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_tsjoin::testing::text::rows_as_text;
use datafusion_tsjoin::{TsJoinContextExt, tsjoin_context};
use sqllogictest::{QueryExpect, Record, StatementExpect};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The suites whose queries run on the cluster.
const SUITES: &[&str] = &[
    "window_join_basic.slt",
    "window_join_clauses.slt",
    "window_join_types.slt",
    "asof_join.slt",
    "horizon_join.slt",
    "groupby.slt",
    "approx_percentile.slt",
    "limit.slt",
];

/// Queries known to fail on the cluster: (suite, line, adaptive planner
/// on?, why). Each is a gap to close (docs/cluster.md lists them); the test
/// fails on any other failure, and reports a listed one that passes.
const KNOWN_GAPS: &[(&str, u32, Option<bool>, &str)] = &[];

fn known_gap(suite: &str, line: u32, adaptive: bool) -> Option<&'static str> {
    KNOWN_GAPS
        .iter()
        .find(|(s, l, a, _)| *s == suite && *l == line && a.is_none_or(|a| a == adaptive))
        .map(|g| g.3)
}

/// A column type letter of any kind: the comparison here is against local
/// execution, not against the files' expected text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AnyType;

impl sqllogictest::ColumnType for AnyType {
    fn from_char(_: char) -> Option<Self> {
        Some(AnyType)
    }
    fn to_char(&self) -> char {
        '?'
    }
}

/// A result as comparable text: column types (of the plan, so that an
/// empty answer's columns count too), then rows sorted (floats to 9
/// significant digits, since a cluster sums partial results in another
/// order).
fn canonical(
    (schema, batches): &(SchemaRef, Vec<RecordBatch>),
) -> Result<(Vec<DataType>, Vec<String>)> {
    let types = schema
        .fields()
        .iter()
        // Cluster sessions read strings as Utf8 (Ballista's defaults),
        // local ones as Utf8View: the same values.
        .map(|f| match f.data_type() {
            DataType::Utf8View => DataType::Utf8,
            t => t.clone(),
        })
        .collect();
    let mut rows = rows_as_text(batches, Some(9))?;
    rows.sort();
    Ok((types, rows))
}

/// Copies every table of `local` to a Parquet file and registers it on
/// `remote` under the same name and designated timestamp.
async fn sync_tables(
    local: &SessionContext,
    remote: &SessionContext,
    dir: &Path,
    generation: &mut usize,
) -> Result<()> {
    let names = local
        .catalog("datafusion")
        .and_then(|c| c.schema("public"))
        .map(|s| s.table_names())
        .unwrap_or_default();
    let registry = datafusion_tsjoin::config::registry(local)?;
    for name in names {
        *generation += 1;
        let path = dir.join(format!("{name}-{generation}.parquet"));
        let df = local.table(name.as_str()).await?;
        df.write_parquet(
            path.to_str().unwrap(),
            DataFrameWriteOptions::new().with_single_file_output(true),
            None,
        )
        .await?;
        remote.deregister_table(name.as_str())?;
        remote
            .register_parquet(
                name.as_str(),
                path.to_str().unwrap(),
                ParquetReadOptions::default(),
            )
            .await?;
        if let Some(ts) = registry.get(&name) {
            remote.set_designated_timestamp(&name, &ts)?;
        }
    }
    Ok(())
}

/// What a statement does to the sessions.
fn statement_kind(sql: &str) -> &'static str {
    let head = sql.trim_start().to_ascii_uppercase();
    if head.starts_with("SET") || head.starts_with("RESET") {
        "setting"
    } else if ["CREATE", "INSERT", "DROP", "COPY", "DELETE", "UPDATE"]
        .iter()
        .any(|k| head.starts_with(k))
    {
        "data"
    } else {
        "other"
    }
}

/// Runs `sql`: the schema of its physical plan and its batches.
async fn collect(
    ctx: &SessionContext,
    sql: &str,
) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let plan = ctx.tsjoin_sql(sql).await?.create_physical_plan().await?;
    let batches =
        datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    Ok((plan.schema(), batches))
}

/// Runs one suite; returns (queries compared, failures as (line, text)).
async fn run_suite(
    url: &str,
    adaptive: bool,
    settings: &str,
    file: &Path,
) -> Result<(usize, Vec<(u32, String)>)> {
    let config = || SessionConfig::new().with_target_partitions(2);
    let local = tsjoin_context(config());
    let remote = tsjoin_ballista::cluster_context(
        url,
        config().with_ballista_adaptive_query_planner(adaptive),
    )
    .await?;
    // `settings` and `TSJOIN_SLT_SET="tsjoin.x = y; ..."` start both
    // sessions with these settings.
    let extra = std::env::var("TSJOIN_SLT_SET").unwrap_or_default();
    for set in settings.split(';').chain(extra.split(';')) {
        if !set.trim().is_empty() {
            for ctx in [&local, &remote] {
                collect(ctx, &format!("SET {set}")).await?;
            }
        }
    }
    let dir = tempfile::tempdir()?;
    let mut generation = 0;
    let records = sqllogictest::parse_file::<AnyType>(file)
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
    let (mut compared, mut failures) = (0, vec![]);
    for record in records {
        match record {
            Record::Statement {
                sql, expected, loc, ..
            } => {
                if matches!(expected, StatementExpect::Error(_)) {
                    continue;
                }
                let kind = statement_kind(&sql);
                if let Err(e) = collect(&local, &sql).await {
                    failures.push((
                        loc.line(),
                        format!("{loc}: local statement failed: {e}"),
                    ));
                    continue;
                }
                match kind {
                    "setting" => {
                        if let Err(e) = collect(&remote, &sql).await {
                            failures.push((
                                loc.line(),
                                format!("{loc}: cluster setting failed: {e}"),
                            ));
                        }
                    }
                    "data" => {
                        sync_tables(&local, &remote, dir.path(), &mut generation).await?
                    }
                    _ => {}
                }
            }
            Record::Query {
                sql, expected, loc, ..
            } => {
                if !matches!(expected, QueryExpect::Results { .. }) {
                    continue;
                }
                let head = sql.trim_start().to_ascii_uppercase();
                // Plans print differently on a cluster; catalog views read
                // the client's session.
                if head.starts_with("EXPLAIN")
                    || head.starts_with("SHOW")
                    || head.starts_with("DESCRIBE")
                {
                    continue;
                }
                if !selected(&loc.line()) {
                    continue;
                }
                if std::env::var_os("TSJOIN_SLT_EXPLAIN").is_some() {
                    for ctx in [&local, &remote] {
                        let plan = collect(ctx, &format!("EXPLAIN {sql}")).await;
                        let text = plan
                            .map(|(_, b)| {
                                datafusion::arrow::util::pretty::pretty_format_batches(&b)
                                    .map(|t| t.to_string())
                                    .unwrap_or_default()
                            })
                            .unwrap_or_else(|e| e.to_string());
                        println!("{loc} (adaptive={adaptive}):\n{text}");
                    }
                }
                let want = canonical(&collect(&local, &sql).await?)?;
                // A query that does not finish is a failure, not a hung test.
                let limit = std::time::Duration::from_secs(60);
                let got = match tokio::time::timeout(limit, collect(&remote, &sql)).await
                {
                    Ok(r) => r,
                    Err(_) => {
                        failures.push((
                            loc.line(),
                            format!("{loc}: no answer within {limit:?}\n{sql}"),
                        ));
                        continue;
                    }
                };
                match got.and_then(|b| canonical(&b)) {
                    Ok(got) if got == want => compared += 1,
                    Ok(got) => failures.push((
                        loc.line(),
                        format!(
                            "{loc}: cluster answer differs\n{sql}\nlocal:   {want:?}\ncluster: {got:?}"
                        ),
                    )),
                    Err(e) => failures
                        .push((loc.line(), format!("{loc}: cluster failed: {e}\n{sql}"))),
                }
            }
            _ => {}
        }
    }
    Ok((compared, failures))
}

/// Whether the query at `line` runs: all, or those listed in
/// `TSJOIN_SLT_LINES` (comma-separated), to reproduce one query quickly.
fn selected(line: &u32) -> bool {
    std::env::var("TSJOIN_SLT_LINES").map_or(true, |v| {
        v.split(',')
            .any(|l| l.trim().parse::<u32>().ok() == Some(*line))
    })
}

fn suite_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../datafusion-tsjoin/tests/slt")
        .join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slt_queries_answer_as_locally() -> Result<()> {
    debug_log();
    let url = tsjoin_ballista::start_local_cluster(2, 2).await?;
    let mut report = vec![];
    let mut failures = vec![];
    // The temporal joins run again partitioned: on these small tables a
    // cluster's `auto` broadcasts.
    let partitioned = "tsjoin.temporal_join_distribution = partitioned";
    let temporal = |s: &str| {
        s.starts_with("window_join") || s.contains("asof") || s.contains("horizon")
    };
    let runs = [true, false]
        .into_iter()
        .flat_map(|adaptive| [(adaptive, ""), (adaptive, partitioned)]);
    for (adaptive, settings) in runs {
        for suite in SUITES {
            if !settings.is_empty() && !temporal(suite) {
                continue;
            }
            // `TSJOIN_SLT_SUITES=limit.slt,...` runs only those suites.
            if let Ok(only) = std::env::var("TSJOIN_SLT_SUITES")
                && !only.split(',').any(|s| s.trim() == *suite)
            {
                continue;
            }
            let (n, f) = run_suite(&url, adaptive, settings, &suite_path(suite)).await?;
            report.push(format!(
                "{suite} (adaptive={adaptive}{}{settings}): {n} queries equal",
                if settings.is_empty() { "" } else { ", " }
            ));
            let mut gaps = 0;
            for (line, text) in f {
                match known_gap(suite, line, adaptive) {
                    Some(_) => {
                        gaps += 1;
                        if std::env::var_os("TSJOIN_SLT_EXPLAIN").is_some() {
                            println!("known gap: {text}");
                        }
                    }
                    None => failures.push(text),
                }
            }
            let listed = KNOWN_GAPS
                .iter()
                .filter(|(s, _, a, _)| s == suite && a.is_none_or(|a| a == adaptive))
                .count();
            if gaps < listed {
                report.push(format!("{suite}: {} known gap(s) now pass", listed - gaps));
            }
            if n == 0 {
                failures.push(format!("{suite}: no query ran on the cluster"));
            }
        }
    }
    println!("{}", report.join("\n"));
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    Ok(())
}

/// A logger for debugging a cluster query: `TSJOIN_SLT_LOG=ballista_scheduler`
/// prints the log lines of targets starting with that prefix (stage plans,
/// task errors), e.g. with `TSJOIN_SLT_LINES` to pick one query.
struct DebugLog(String);
impl log::Log for DebugLog {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.target().starts_with(self.0.as_str())
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            println!("[{} {}] {}", r.level(), r.target(), r.args());
        }
    }
    fn flush(&self) {}
}

fn debug_log() {
    if let Ok(t) = std::env::var("TSJOIN_SLT_LOG") {
        let _ = log::set_logger(Box::leak(Box::new(DebugLog(t))));
        log::set_max_level(log::LevelFilter::Trace);
    }
}
