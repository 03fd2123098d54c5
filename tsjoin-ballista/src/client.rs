//! Sessions that send tsjoin's SQL to a cluster: a remote scheduler, or an
//! in-process one with executors (tests, benchmarks, trying it out).

use crate::codec::{ClusterLogicalCodec, ClusterPhysicalCodec};
use crate::scheduler::ballista_error;
use crate::shipping::ClusterQueryPlanner;
use crate::state::{cluster_config, cluster_state};
use ballista::prelude::SessionContextExt;
use ballista_core::config::BallistaConfig;
use ballista_core::extension::{SessionConfigExt, SessionConfigHelperExt};
use ballista_core::serde::BallistaCodec;
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use ballista_scheduler::standalone::new_standalone_scheduler_with_builder;
use datafusion::common::{DataFusionError, Result};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::functions::{first_last_udafs, percentile_udafs};
use datafusion_tsjoin::sql::limit_marker;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A session whose queries run on the cluster whose scheduler is at `url`
/// (`df://HOST:PORT`). Parse and plan with `tsjoin_sql` as locally;
/// `collect` sends the plan to the scheduler.
///
/// The session starts from Ballista's DataFusion defaults (no round-robin
/// repartitioning, sort-merge joins, no dynamic filters, no view types)
/// even when `config` already holds Ballista settings (which makes
/// Ballista skip them); `SET` changes them afterwards. The client's
/// settings travel to the scheduler and override its own, so a client
/// without them ran plans Ballista cannot run: a hash join with a dynamic
/// filter whose sides Ballista swaps once the build stage has run fails on
/// the scheduler, and the query never finishes.
///
/// ```no_run
/// # async fn f() -> datafusion::error::Result<()> {
/// use datafusion::prelude::SessionConfig;
/// use datafusion_tsjoin::TsJoinContextExt;
/// let ctx = tsjoin_ballista::cluster_context("df://localhost:50050", SessionConfig::new()).await?;
/// ctx.tsjoin_sql("SELECT 1").await?.show().await?;
/// # Ok(()) }
/// ```
pub async fn cluster_context(url: &str, config: SessionConfig) -> Result<SessionContext> {
    if !url.starts_with("df://") {
        return Err(DataFusionError::Configuration(format!(
            "cluster address `{url}`: expected df://HOST:PORT"
        )));
    }
    let config = if config
        .options()
        .extensions
        .get::<BallistaConfig>()
        .is_some()
    {
        config.ballista_restricted_configuration()
    } else {
        config
    };
    let planner = ClusterQueryPlanner::new(
        scheduler_http_url(url)?,
        config.clone().upgrade_for_ballista().ballista_config(),
        Arc::new(ClusterLogicalCodec::default()),
    );
    let config = config.with_ballista_query_planner(Arc::new(planner));
    let ctx = SessionContext::remote_with_state(url, cluster_state(config)?).await?;
    restore_tsjoin_functions(&ctx);
    Ok(ctx)
}

/// The scheduler's gRPC address for `df://HOST[:PORT]` (Ballista's default
/// port 50050 when none is given).
fn scheduler_http_url(url: &str) -> Result<String> {
    let rest = url.trim_start_matches("df://").trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) => (
            host,
            port.parse::<u16>().map_err(|_| {
                DataFusionError::Configuration(format!(
                    "cluster address `{url}`: `{port}` is not a port"
                ))
            })?,
        ),
        None => (rest, 50050),
    };
    if host.is_empty() {
        return Err(DataFusionError::Configuration(format!(
            "cluster address `{url}`: expected df://HOST:PORT"
        )));
    }
    Ok(format!("http://{host}:{port}"))
}

/// Ballista's client set-up replaces the session's functions with
/// DataFusion's defaults; tsjoin's (`first`, `last`, `approx_percentile`,
/// the LIMIT marker, ...) are registered again so that SQL using them
/// plans on the client.
fn restore_tsjoin_functions(ctx: &SessionContext) {
    for f in first_last_udafs().into_iter().chain(percentile_udafs()) {
        ctx.register_udaf(f.as_ref().clone());
    }
    ctx.register_udf(limit_marker());
}

/// Starts a scheduler and `executors` executors in this process, on
/// loopback ports the system chooses, and returns the scheduler's address
/// (`df://localhost:PORT`) for [`cluster_context`]. Each executor runs
/// `tasks_per_executor` tasks at once. The cluster lives as long as the
/// process (Ballista has no way to stop it).
///
/// ```
/// # #[tokio::main] async fn main() -> datafusion::error::Result<()> {
/// use datafusion::prelude::SessionConfig;
/// use datafusion_tsjoin::TsJoinContextExt;
/// let url = tsjoin_ballista::start_local_cluster(2, 1).await?;
/// let ctx = tsjoin_ballista::cluster_context(&url, SessionConfig::new()).await?;
/// let n = ctx.tsjoin_sql("SELECT count(*) FROM (VALUES (1), (2)) t(x)").await?.collect().await?;
/// assert_eq!(n[0].num_rows(), 1);
/// # Ok(()) }
/// ```
pub async fn start_local_cluster(
    executors: usize,
    tasks_per_executor: usize,
) -> Result<String> {
    let codec = BallistaCodec::new(
        Arc::new(ClusterLogicalCodec::default()),
        Arc::new(ClusterPhysicalCodec::default()),
    );
    // Every job builds its session from the client's settings (Ballista's
    // `standalone_with_state` reuses one state for all).
    let address = new_standalone_scheduler_with_builder(
        Arc::new(cluster_state),
        Arc::new(|| cluster_config(SessionConfig::new())),
        codec,
    )
    .await
    .map_err(ballista_error)?;
    let url = format!("http://localhost:{}", address.port());
    let deadline = Instant::now() + Duration::from_secs(30);
    let scheduler = loop {
        match SchedulerGrpcClient::connect(url.clone()).await {
            Ok(client) => break client,
            Err(e) if Instant::now() > deadline => {
                return Err(DataFusionError::External(Box::new(e)));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let state = cluster_state(SessionConfig::new())?;
    for _ in 0..executors.max(1) {
        ballista_executor::new_standalone_executor_from_state(
            scheduler.clone(),
            tasks_per_executor.max(1),
            &state,
        )
        .await
        .map_err(ballista_error)?;
    }
    Ok(format!("df://localhost:{}", address.port()))
}

#[cfg(test)]
mod tests {
    use super::scheduler_http_url;

    #[test]
    fn cluster_addresses_map_to_the_scheduler_or_a_clear_error() {
        assert_eq!(
            scheduler_http_url("df://host:5000").unwrap(),
            "http://host:5000"
        );
        assert_eq!(
            scheduler_http_url("df://host").unwrap(),
            "http://host:50050"
        );
        let bad = scheduler_http_url("df://host:port")
            .unwrap_err()
            .to_string();
        assert!(bad.contains("`port` is not a port"), "{bad}");
        let empty = scheduler_http_url("df://:5000").unwrap_err().to_string();
        assert!(empty.contains("expected df://HOST:PORT"), "{empty}");
    }
}
