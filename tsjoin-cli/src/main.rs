//! `tsjoin-cli`: run DataFusion SQL with WINDOW JOIN over Parquet and CSV files.
//!
//! ```text
//! tsjoin-cli --table trades=data/trades --timestamp trades=ts -c "SELECT ..."
//! tsjoin-cli --table trades=t.parquet -f query.sql --format csv --timing
//! tsjoin-cli --table trades=t.parquet            # interactive
//! tsjoin-cli demo                                 # generate data, run the showcase
//! ```

mod contain;
mod demo;
mod output;
mod repl;
mod tables;

use clap::{Parser, Subcommand, ValueEnum};
use datafusion::error::Result;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::sql::{execute_statement, parse_sql};
use datafusion_tsjoin::tsjoin_context;
use std::process::ExitCode;
use std::time::Instant;

// DataFusion allocates and frees large buffers all through a query: mimalloc
// (as in datafusion-cli), with an arena reserved up front and purging off,
// so that freed memory (large buffers included) is reused rather than
// returned to the OS and faulted in again as fresh zeroed pages: that was a
// quarter of the CPU time of a WINDOW JOIN over a few million rows, and
// twice the time of a one-shot query. The process holds its peak memory
// until it exits.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc.h (not named by the Rust bindings).
const MI_OPTION_PURGE_DELAY: i32 = 15;

fn tune_allocator() {
    // SAFETY: plain option setters and a reservation of address space (not
    // of memory: pages are backed when touched); failure leaves the defaults.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        libmimalloc_sys::mi_reserve_os_memory_ex(
            4 << 30,
            false,
            true,
            false,
            std::ptr::null_mut(),
        );
    }
}

/// SQL with QuestDB's WINDOW JOIN over Parquet and CSV files.
#[derive(Parser, Debug)]
#[command(name = "tsjoin-cli", version, about)]
struct Cli {
    /// Register a table: NAME=PATH, where PATH is a Parquet file, a directory
    /// of Parquet files (Hive-style partitions too) or a CSV file. Repeatable.
    #[arg(long = "table", short = 't', value_name = "NAME=PATH")]
    tables: Vec<String>,

    /// Name a table's designated timestamp column: NAME=COLUMN (needed only
    /// when the table has several timestamp columns). Repeatable.
    #[arg(long = "timestamp", value_name = "NAME=COLUMN")]
    timestamps: Vec<String>,

    /// SQL to run (several statements separated by `;`).
    #[arg(long, short = 'c', conflicts_with = "file")]
    command: Option<String>,

    /// File of SQL statements to run.
    #[arg(long, short = 'f')]
    file: Option<std::path::PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,

    /// Print the elapsed time of each statement.
    #[arg(long)]
    timing: bool,

    /// Worker threads and target partitions (default: all cores).
    #[arg(long)]
    threads: Option<usize>,

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
}

/// How results are printed.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// An ASCII table
    Table,
    /// CSV with a header
    Csv,
    /// A JSON array of objects
    Json,
}

fn main() -> ExitCode {
    tune_allocator();
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

async fn run(cli: Cli, threads: usize) -> Result<()> {
    let ctx = tsjoin_context(SessionConfig::new().with_target_partitions(threads.max(1)));
    if let Some(Sub::Demo { dir, trades }) = cli.sub {
        return demo::run(&ctx, dir, trades).await;
    }
    contain::contained(tables::register_all(&ctx, &cli.tables, &cli.timestamps)).await?;
    let sql = match (&cli.command, &cli.file) {
        (Some(c), _) => Some(c.clone()),
        (None, Some(f)) => Some(std::fs::read_to_string(f).map_err(|e| {
            datafusion::error::DataFusionError::Execution(format!(
                "cannot read {}: {e}",
                f.display()
            ))
        })?),
        (None, None) => None,
    };
    match sql {
        Some(sql) => run_sql(&ctx, &sql, cli.format, cli.timing).await,
        None => repl::run(&ctx, cli.format, cli.timing).await,
    }
}

/// Runs `sql` (each statement in turn), printing every query's result;
/// the first error stops the rest. Ctrl-C cancels the running statement.
pub async fn run_sql(
    ctx: &SessionContext,
    sql: &str,
    format: Format,
    timing: bool,
) -> Result<()> {
    let statements = parse_sql(ctx, sql).await?;
    if statements.is_empty() {
        return Err(datafusion::error::DataFusionError::Plan(
            "no SQL statement given".into(),
        ));
    }
    for st in statements {
        let start = Instant::now();
        let work = async {
            let df = execute_statement(ctx, st).await?;
            let schema = df.schema().as_arrow().clone();
            let batches = df.collect().await?;
            Ok::<_, datafusion::error::DataFusionError>((schema, batches))
        };
        let (schema, batches) = tokio::select! {
            r = contain::contained(work) => r?,
            _ = tokio::signal::ctrl_c() => {
                return Err(datafusion::error::DataFusionError::Execution("query cancelled".into()));
            }
        };
        if !schema.fields().is_empty() {
            output::print(&schema, &batches, format)?;
        }
        if timing {
            let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
            eprintln!("{rows} row(s) in {:.3} s", start.elapsed().as_secs_f64());
        }
    }
    Ok(())
}
