//! The session every cluster process builds: tsjoin's planners, rules,
//! functions and settings, Ballista's configuration and the cluster codecs.
//!
//! The client, the scheduler and every executor must agree on these. The
//! client parses tsjoin's SQL and sends the optimised logical plan; the
//! scheduler plans it again into physical stages with tsjoin's planners;
//! executors decode the stages with the physical codec and look tsjoin's
//! aggregate functions up by name.
//!
//! ```
//! use datafusion::prelude::SessionConfig;
//! let state = tsjoin_ballista::cluster_state(SessionConfig::new()).unwrap();
//! assert!(state.aggregate_functions().contains_key("approx_percentile"));
//! ```

use crate::codec::{ClusterLogicalCodec, ClusterPhysicalCodec};
use ballista_core::extension::SessionConfigExt;
use ballista_core::optimizer::ballista_default_optimizer_rules;
use ballista_core::registry::BallistaFunctionRegistry;
use datafusion::common::Result;
use datafusion::execution::{SessionState, SessionStateBuilder};
use datafusion::prelude::SessionConfig;
use datafusion_tsjoin::{TsJoinOptions, TsJoinSessionStateBuilderExt};
use std::sync::Arc;

/// `config` with Ballista's settings, tsjoin's `tsjoin.*` settings and the
/// cluster codecs. Settings a client `SET`s travel to the scheduler and the
/// executors as key/value pairs, which land only in extensions the
/// receiving config already has: every process starts from this.
///
/// ```
/// use datafusion::prelude::SessionConfig;
/// use datafusion_tsjoin::TsJoinOptions;
/// let config = tsjoin_ballista::cluster_config(SessionConfig::new());
/// let tsjoin = config.options().extensions.get::<TsJoinOptions>().unwrap();
/// assert!(tsjoin.distributed);
/// ```
pub fn cluster_config(config: SessionConfig) -> SessionConfig {
    let mut config = config
        .upgrade_for_ballista()
        .with_ballista_logical_extension_codec(Arc::new(ClusterLogicalCodec::default()))
        .with_ballista_physical_extension_codec(Arc::new(ClusterPhysicalCodec::default()))
        .with_information_schema(true);
    if config.options().extensions.get::<TsJoinOptions>().is_none() {
        config
            .options_mut()
            .extensions
            .insert(TsJoinOptions::default());
    }
    // Plan for tasks that see only their own input partitions (the
    // newest-first scan over one file group, QuestDB's `LIMIT -n` over one
    // merged input).
    if let Some(tsjoin) = config.options_mut().extensions.get_mut::<TsJoinOptions>() {
        tsjoin.distributed = true;
    }
    config
}

/// A session state for any cluster process: DataFusion's defaults with
/// Ballista's logical rules, then tsjoin (see [`cluster_config`]).
///
/// ```
/// use datafusion::prelude::SessionConfig;
/// let state = tsjoin_ballista::cluster_state(SessionConfig::new()).unwrap();
/// assert!(state.config().information_schema());
/// ```
pub fn cluster_state(config: SessionConfig) -> Result<SessionState> {
    Ok(SessionStateBuilder::new()
        .with_config(cluster_config(config))
        .with_default_features()
        .with_optimizer_rules(ballista_default_optimizer_rules())
        .with_tsjoin()
        .build())
}

/// The functions an executor resolves by name when it decodes a stage:
/// DataFusion's and tsjoin's.
///
/// ```
/// let registry = tsjoin_ballista::cluster_functions().unwrap();
/// assert!(registry.aggregate_functions.contains_key("approx_percentile"));
/// ```
pub fn cluster_functions() -> Result<BallistaFunctionRegistry> {
    Ok(BallistaFunctionRegistry::from(&cluster_state(
        SessionConfig::new(),
    )?))
}
