//! `tsjoin-cli scheduler`, `tsjoin-cli executor` and `--cluster`: the same
//! binary runs every role of a Ballista cluster (see `tsjoin-ballista`).

use clap::Args;
use datafusion::error::{DataFusionError, Result};
use tsjoin_ballista::{ExecutorOptions, SchedulerOptions};

/// Options of `tsjoin-cli scheduler`.
#[derive(Args, Debug)]
pub struct SchedulerArgs {
    /// Address to listen on (0.0.0.0 for other machines).
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Port clients and executors connect to.
    #[arg(long, default_value_t = 50050)]
    port: u16,
    /// Host name executors and clients reach this scheduler by.
    #[arg(long, default_value = "localhost")]
    external_host: String,
    /// Seconds without a heartbeat before an executor counts as lost (its
    /// tasks are retried elsewhere or the query fails).
    #[arg(long, default_value_t = 180)]
    executor_timeout: u64,
}

/// Options of `tsjoin-cli executor`.
#[derive(Args, Debug)]
pub struct ExecutorArgs {
    /// The scheduler, HOST:PORT.
    #[arg(long, default_value = "localhost:50050")]
    scheduler: String,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Host name other executors fetch this one's shuffle files by
    /// (default: the bind address).
    #[arg(long)]
    external_host: Option<String>,
    /// Arrow Flight port (shuffle reads).
    #[arg(long, default_value_t = 50051)]
    port: u16,
    /// gRPC port (tasks from the scheduler).
    #[arg(long, default_value_t = 50052)]
    grpc_port: u16,
    /// Tasks run at once (default: all cores).
    #[arg(long)]
    concurrent_tasks: Option<usize>,
    /// Directory for shuffle files (default: a temporary directory).
    #[arg(long)]
    work_dir: Option<String>,
    /// Seconds between heartbeats to the scheduler.
    #[arg(long, default_value_t = 60)]
    heartbeat: u64,
    /// Memory pool of each task, e.g. 2G (default: none).
    #[arg(long, value_name = "SIZE")]
    memory_limit: Option<String>,
}

/// Runs a scheduler until the process is stopped.
pub async fn scheduler(args: SchedulerArgs) -> Result<()> {
    eprintln!(
        "tsjoin scheduler listening on {}:{} (clients: --cluster df://{}:{})",
        args.bind, args.port, args.external_host, args.port
    );
    tsjoin_ballista::run_scheduler(SchedulerOptions {
        bind_host: args.bind,
        external_host: args.external_host,
        port: args.port,
        executor_timeout_seconds: args.executor_timeout,
    })
    .await
}

/// Runs an executor until it is stopped.
pub async fn executor(args: ExecutorArgs) -> Result<()> {
    let (host, port) = args
        .scheduler
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
        .ok_or_else(|| {
            DataFusionError::Configuration(format!(
                "--scheduler {}: expected HOST:PORT",
                args.scheduler
            ))
        })?;
    let memory_limit = args
        .memory_limit
        .as_deref()
        .map(|s| {
            datafusion::prelude::SessionContext::parse_capacity_limit("--memory-limit", s)
        })
        .transpose()?;
    let defaults = ExecutorOptions::default();
    eprintln!(
        "tsjoin executor on {}:{} (grpc {}) serving scheduler {host}:{port}",
        args.bind, args.port, args.grpc_port
    );
    tsjoin_ballista::run_executor(ExecutorOptions {
        scheduler_host: host,
        scheduler_port: port,
        bind_host: args.bind,
        external_host: args.external_host,
        port: args.port,
        grpc_port: args.grpc_port,
        concurrent_tasks: args.concurrent_tasks.unwrap_or(defaults.concurrent_tasks),
        work_dir: args.work_dir,
        heartbeat_seconds: args.heartbeat,
        memory_limit: memory_limit.map(|b| b as u64),
    })
    .await
}
