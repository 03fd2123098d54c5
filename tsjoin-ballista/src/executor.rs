//! A Ballista executor that runs tsjoin's operators.

use crate::codec::{ClusterLogicalCodec, ClusterPhysicalCodec};
use crate::scheduler::ballista_error;
use crate::state::{cluster_config, cluster_functions};
use ballista_executor::executor_process::{
    ExecutorProcessConfig, start_executor_process,
};
use datafusion::common::Result;
use datafusion::prelude::SessionConfig;
use std::sync::Arc;

/// Where an executor listens, which scheduler it serves and how much of
/// this machine it uses.
///
/// ```
/// let options = tsjoin_ballista::ExecutorOptions::default();
/// assert_eq!((options.port, options.grpc_port), (50051, 50052));
/// ```
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// The scheduler's host.
    pub scheduler_host: String,
    /// The scheduler's port.
    pub scheduler_port: u16,
    /// Address to bind.
    pub bind_host: String,
    /// Host name others use to fetch this executor's shuffle files.
    pub external_host: Option<String>,
    /// Arrow Flight port (shuffle reads).
    pub port: u16,
    /// gRPC port (task launches from the scheduler).
    pub grpc_port: u16,
    /// Tasks run at once (default: this machine's cores).
    pub concurrent_tasks: usize,
    /// Where shuffle files go (default: a fresh temporary directory).
    pub work_dir: Option<String>,
    /// Seconds between heartbeats to the scheduler.
    pub heartbeat_seconds: u64,
    /// Memory pool of each task's session, in bytes (default: unbounded).
    pub memory_limit: Option<u64>,
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        Self {
            scheduler_host: "localhost".into(),
            scheduler_port: 50050,
            bind_host: "127.0.0.1".into(),
            external_host: None,
            port: 50051,
            grpc_port: 50052,
            concurrent_tasks: std::thread::available_parallelism().map_or(1, |n| n.get()),
            work_dir: None,
            heartbeat_seconds: 60,
            memory_limit: None,
        }
    }
}

impl ExecutorOptions {
    /// Ballista's executor configuration with tsjoin's functions, settings
    /// and codecs.
    pub fn executor_config(&self) -> Result<ExecutorProcessConfig> {
        Ok(ExecutorProcessConfig {
            scheduler_host: self.scheduler_host.clone(),
            scheduler_port: self.scheduler_port,
            bind_host: self.bind_host.clone(),
            external_host: self.external_host.clone(),
            port: self.port,
            grpc_port: self.grpc_port,
            vcores: self.concurrent_tasks.max(1),
            work_dir: self.work_dir.clone(),
            executor_heartbeat_interval_seconds: self.heartbeat_seconds.max(1),
            memory_pool_size: self.memory_limit,
            print_thread_info: false,
            override_function_registry: Some(Arc::new(cluster_functions()?)),
            override_config_producer: Some(Arc::new(|| {
                cluster_config(SessionConfig::new())
            })),
            override_logical_codec: Some(Arc::new(ClusterLogicalCodec::default())),
            override_physical_codec: Some(Arc::new(ClusterPhysicalCodec::default())),
            ..ExecutorProcessConfig::default()
        })
    }
}

/// Runs an executor until it is stopped (Ctrl-C, SIGTERM or the scheduler).
///
/// ```no_run
/// # async fn f() -> datafusion::error::Result<()> {
/// tsjoin_ballista::run_executor(tsjoin_ballista::ExecutorOptions::default()).await
/// # }
/// ```
pub async fn run_executor(options: ExecutorOptions) -> Result<()> {
    start_executor_process(Arc::new(options.executor_config()?))
        .await
        .map_err(ballista_error)
}
