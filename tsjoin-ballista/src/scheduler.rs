//! A Ballista scheduler that plans tsjoin's SQL.

use crate::codec::{ClusterLogicalCodec, ClusterPhysicalCodec};
use crate::state::{cluster_config, cluster_state};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::start_server;
use datafusion::common::{DataFusionError, Result};
use datafusion::prelude::SessionConfig;
use std::net::SocketAddr;
use std::sync::Arc;

/// Where a scheduler listens and how long it waits for a silent executor.
///
/// ```
/// let options = tsjoin_ballista::SchedulerOptions::default();
/// assert_eq!(options.port, 50050);
/// ```
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// Address to bind (`127.0.0.1` keeps the scheduler on this machine).
    pub bind_host: String,
    /// The host name executors and clients use to reach this scheduler.
    pub external_host: String,
    /// gRPC port (Ballista's default is 50050).
    pub port: u16,
    /// Seconds without a heartbeat after which an executor is dead and its
    /// tasks are run elsewhere (or the job fails).
    pub executor_timeout_seconds: u64,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        Self {
            bind_host: "127.0.0.1".into(),
            external_host: "localhost".into(),
            port: 50050,
            executor_timeout_seconds: 180,
        }
    }
}

impl SchedulerOptions {
    /// Ballista's scheduler configuration with tsjoin's session builder and
    /// codecs: every job is planned with tsjoin's planners and rules.
    pub fn scheduler_config(&self) -> SchedulerConfig {
        SchedulerConfig {
            bind_host: self.bind_host.clone(),
            external_host: self.external_host.clone(),
            bind_port: self.port,
            executor_timeout_seconds: self.executor_timeout_seconds,
            // Ballista checks for dead executors at this period.
            expire_dead_executor_interval_seconds: self
                .executor_timeout_seconds
                .clamp(1, 15),
            override_session_builder: Some(Arc::new(cluster_state)),
            override_config_producer: Some(Arc::new(|| {
                cluster_config(SessionConfig::new())
            })),
            override_logical_codec: Some(Arc::new(ClusterLogicalCodec::default())),
            override_physical_codec: Some(Arc::new(ClusterPhysicalCodec::default())),
            ..SchedulerConfig::default()
        }
    }
}

/// Runs a scheduler until the process is stopped.
///
/// ```no_run
/// # async fn f() -> datafusion::error::Result<()> {
/// tsjoin_ballista::run_scheduler(tsjoin_ballista::SchedulerOptions::default()).await
/// # }
/// ```
pub async fn run_scheduler(options: SchedulerOptions) -> Result<()> {
    let config = options.scheduler_config();
    let address: SocketAddr = format!("{}:{}", options.bind_host, options.port)
        .parse()
        .map_err(|e| {
        DataFusionError::Configuration(format!(
            "scheduler address {}:{}: {e}",
            options.bind_host, options.port
        ))
    })?;
    let cluster = BallistaCluster::new_from_config(&config)
        .await
        .map_err(ballista_error)?;
    start_server(cluster, address, Arc::new(config))
        .await
        .map_err(ballista_error)
}

/// Ballista's error as DataFusion's, keeping its text.
pub(crate) fn ballista_error(e: ballista_core::error::BallistaError) -> DataFusionError {
    match e {
        ballista_core::error::BallistaError::DataFusionError(e) => *e,
        other => DataFusionError::External(Box::new(other)),
    }
}
