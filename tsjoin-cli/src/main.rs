//! `tsjoin-cli`: run DataFusion SQL with WINDOW JOIN over Parquet and CSV files.
//!
//! ```text
//! tsjoin-cli --table trades=data/trades --timestamp trades=ts -c "SELECT ..."
//! tsjoin-cli --table trades=t.parquet -f query.sql --format csv --timing
//! tsjoin-cli --table trades=t.parquet            # interactive
//! tsjoin-cli --table trades=t.parquet -c "SELECT ..." --output result.parquet
//! tsjoin-cli demo                                 # generate data, run the showcase
//! tsjoin-cli scheduler & tsjoin-cli executor &     # a Ballista cluster
//! tsjoin-cli --cluster df://localhost:50050 --table trades=/data/trades -c "SELECT ..."
//! ```

mod allocator;
mod cluster;
mod contain;
mod demo;
mod meta;
mod output;
mod progress;
mod repl;
mod tables;

use clap::{Parser, Subcommand, ValueEnum};
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion_tsjoin::progress::execute_with_progress;
use datafusion_tsjoin::sql::{execute_statement, parse_sql};
use datafusion_tsjoin::tsjoin_context_with_limits;
use futures::TryStreamExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// What `--help` adds after the options: the interactive commands and how
/// to keep results.
fn after_help() -> String {
    format!(
        "Without -c or -f, tsjoin-cli reads statements interactively (end each with ';').

Interactive commands:
{}
SQL beyond DataFusion's: WINDOW JOIN; SHOW TABLES, SHOW COLUMNS FROM t and
DESCRIBE t work too.

Keeping results:
  --output FILE                   the last statement's result to FILE
                                  (.parquet, .csv, .json)
  COPY (query) TO 'file.parquet'  a query's result to a file, in any interface
                                  (.csv and .json too; or STORED AS PARQUET|CSV|JSON)",
        meta::HELP
    )
}

/// SQL with QuestDB's WINDOW JOIN over Parquet and CSV files.
#[derive(Parser, Debug)]
#[command(name = "tsjoin-cli", version, about, after_help = after_help())]
struct Cli {
    /// Register a table: NAME=PATH, where PATH is a Parquet file, a directory
    /// of Parquet files (Hive-style partitions too) or a CSV file. Repeatable.
    #[arg(long = "table", short = 't', value_name = "NAME=PATH")]
    tables: Vec<String>,

    /// Name a table's designated timestamp column: NAME=COLUMN (needed only
    /// when the table has several timestamp columns). Repeatable.
    #[arg(long = "timestamp", value_name = "NAME=COLUMN")]
    timestamps: Vec<String>,

    /// Declare a Parquet table's primary key: NAME=COLUMN[,COLUMN...]
    /// (not checked: the data must be unique on it). Lets the planner turn
    /// a join that reads nothing of the table but its key into a semi
    /// join. Repeatable.
    #[arg(long = "primary-key", value_name = "NAME=COLUMNS")]
    primary_keys: Vec<String>,

    /// SQL to run (several statements separated by `;`).
    #[arg(long, short = 'c', conflicts_with = "file")]
    command: Option<String>,

    /// File of SQL statements to run.
    #[arg(long, short = 'f')]
    file: Option<std::path::PathBuf>,

    /// Output format of results (EXPLAIN's plans print as indented text in
    /// the table format).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,

    /// Write the last statement's result to FILE instead of printing it, in
    /// the format its extension names: .parquet, .csv, .json (one object per
    /// line). Needs -c or -f.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,

    /// Print the elapsed time of each statement.
    #[arg(long)]
    timing: bool,

    /// Progress display on stderr, for statements running longer than about
    /// a second when stderr is a terminal: a bar (percent, rows, bytes,
    /// elapsed, ETA), the plan's operators with their state and rows, or off.
    #[arg(long, value_enum, default_value_t = progress::Mode::Bar)]
    progress: progress::Mode,

    /// Milliseconds a statement runs before its progress shows.
    #[arg(long, default_value_t = 1000, hide = true)]
    progress_after_ms: u64,

    /// Worker threads and target partitions (default: all cores).
    #[arg(long)]
    threads: Option<usize>,

    /// Memory limit of the session, e.g. 2G, 512M (default: none). Past it
    /// DataFusion's sort, aggregate and repartition spill to disk, the
    /// inline aggregate hands over to DataFusion's, and an operator that
    /// cannot spill stops with a `Resources exhausted` error.
    #[arg(long, value_name = "SIZE")]
    memory_limit: Option<String>,

    /// Directory for spill files (default: the system temp directory).
    #[arg(long, value_name = "DIR")]
    spill_dir: Option<PathBuf>,

    /// Priority of this session's queries: high, normal (default), low or
    /// an integer (`SET tsjoin.priority`). It ranks queries within one
    /// process; to rank whole processes use the OS (`nice`).
    #[arg(long, value_name = "PRIORITY")]
    priority: Option<datafusion_tsjoin::priority::Priority>,

    /// Run the SQL on a cluster: the scheduler's address, df://HOST:PORT
    /// (see the `scheduler` and `executor` commands). Table paths must be
    /// readable by every executor.
    #[arg(long, value_name = "df://HOST:PORT")]
    cluster: Option<String>,

    #[command(subcommand)]
    sub: Option<Sub>,
}

#[derive(Subcommand, Debug)]
enum Sub {
    /// Generate a small trades/prices data set and run the showcase WINDOW JOIN.
    Demo {
        /// Where to write the data (default: a directory under the system temp dir).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// Number of trades (prices get three times as many rows).
        #[arg(long, default_value_t = 200_000)]
        trades: usize,
    },
    /// Run a cluster scheduler (Ballista) that plans tsjoin's SQL.
    Scheduler(cluster::SchedulerArgs),
    /// Run a cluster executor (Ballista) that runs tsjoin's operators.
    Executor(cluster::ExecutorArgs),
}

/// How results are printed.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    /// An ASCII table
    Table,
    /// CSV with a header
    Csv,
    /// A JSON array of objects
    Json,
}

fn main() -> ExitCode {
    allocator::tune_allocator();
    let cli = Cli::parse();
    let threads = cli
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()
        .expect("tokio runtime");
    contain::install_hook();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(run(cli, threads))
    }))
    .unwrap_or_else(|_| Err(contain::panic_error()));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let msg = e.to_string().replace('\n', " ");
            eprintln!("Error: {msg}");
            ExitCode::FAILURE
        }
    }
}

async fn run(mut cli: Cli, threads: usize) -> Result<()> {
    match cli.sub.take() {
        Some(Sub::Scheduler(args)) => return cluster::scheduler(args).await,
        Some(Sub::Executor(args)) => return cluster::executor(args).await,
        other => cli.sub = other,
    }
    let memory_limit = cli
        .memory_limit
        .as_deref()
        .map(|s| SessionContext::parse_capacity_limit("--memory-limit", s))
        .transpose()?;
    let config = SessionConfig::new().with_target_partitions(threads.max(1));
    let ctx = match &cli.cluster {
        // Memory limits and spilling are the executors' (`executor --memory-limit`).
        Some(url) => tsjoin_ballista::cluster_context(url, config).await?,
        None => {
            tsjoin_context_with_limits(config, memory_limit, cli.spill_dir.as_deref())?
        }
    };
    if let Some(priority) = cli.priority {
        datafusion_tsjoin::TsJoinContextExt::tsjoin_sql(
            &ctx,
            &format!("SET tsjoin.priority = '{priority}'"),
        )
        .await?
        .collect()
        .await?;
    }
    if let Some(Sub::Demo { dir, trades }) = cli.sub {
        return demo::run(&ctx, dir, trades).await;
    }
    if let Some(path) = &cli.output {
        if cli.command.is_none() && cli.file.is_none() {
            return Err(DataFusionError::Plan(
                "--output needs the SQL to run (-c or -f)".into(),
            ));
        }
        output::FileFormat::of(path)?;
    }
    contain::contained(tables::register_all(
        &ctx,
        &cli.tables,
        &cli.timestamps,
        &cli.primary_keys,
    ))
    .await?;
    let sql = match (&cli.command, &cli.file) {
        (Some(c), _) => Some(c.clone()),
        (None, Some(f)) => Some(std::fs::read_to_string(f).map_err(|e| {
            DataFusionError::Execution(format!("cannot read {}: {e}", f.display()))
        })?),
        (None, None) => None,
    };
    let options = Options {
        format: cli.format,
        timing: cli.timing,
        progress: progress::Settings {
            mode: cli.progress,
            after: std::time::Duration::from_millis(cli.progress_after_ms),
        },
    };
    match sql {
        Some(sql) => run_sql(&ctx, &sql, options, cli.output.as_deref()).await,
        None => repl::run(&ctx, options).await,
    }
}

/// How statements' results are shown (the interactive `\format` and
/// `\timing` change them).
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Format of results
    pub format: Format,
    /// Print each statement's row count and elapsed time (on stderr)
    pub timing: bool,
    /// The progress display on stderr
    pub progress: progress::Settings,
}

/// Runs `sql` (each statement in turn), printing every query's result, or
/// writing the last statement's result to `output`; the first error stops
/// the rest. Ctrl-C cancels the running statement.
pub async fn run_sql(
    ctx: &SessionContext,
    sql: &str,
    options: Options,
    output: Option<&Path>,
) -> Result<()> {
    let statements = parse_sql(ctx, sql).await?;
    if statements.is_empty() {
        return Err(DataFusionError::Plan("no SQL statement given".into()));
    }
    let count = statements.len();
    for (i, st) in statements.into_iter().enumerate() {
        let start = Instant::now();
        let explain = matches!(st, DFStatement::Explain(_));
        let target = output.filter(|_| i + 1 == count);
        let work = async {
            let df = execute_statement(ctx, st).await?;
            let schema = df.schema().as_arrow().clone();
            match target {
                Some(path) => {
                    if schema.fields().is_empty() {
                        return Err(DataFusionError::Plan(format!(
                            "--output {}: the last statement returns no result",
                            path.display()
                        )));
                    }
                    let rows = output::write(df, path).await?;
                    Ok((schema, vec![], rows))
                }
                None => {
                    let plan = df.create_physical_plan().await?;
                    let (stream, handle) = execute_with_progress(plan, ctx.task_ctx())?;
                    let (batches, ()) = futures::join!(
                        stream.try_collect::<Vec<_>>(),
                        progress::show(handle, options.progress)
                    );
                    let batches = batches?;
                    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
                    Ok((schema, batches, rows))
                }
            }
        };
        let (schema, batches, rows) = tokio::select! {
            r = contain::contained(work) => r?,
            _ = tokio::signal::ctrl_c() => {
                return Err(DataFusionError::Execution("query cancelled".into()));
            }
        };
        if target.is_none() && !schema.fields().is_empty() {
            if explain && options.format == Format::Table {
                output::print_plan(&batches)?;
            } else {
                output::print(&schema, &batches, options.format)?;
            }
        }
        if options.timing {
            eprintln!("{rows} row(s) in {:.3} s", start.elapsed().as_secs_f64());
        }
    }
    Ok(())
}
