//! Run tsjoin's SQL on a [Ballista](https://datafusion.apache.org/ballista/)
//! cluster: WINDOW, ASOF and HORIZON JOIN, the inline GROUP BY and
//! `approx_percentile` plan and run as they do locally, split into stages
//! across executors.
//!
//! Three roles, one session recipe ([`cluster_state`]):
//! - a **scheduler** ([`run_scheduler`]) receives the client's optimised
//!   logical plan, plans it with tsjoin's planners and rules and cuts it
//!   into stages;
//! - **executors** ([`run_executor`]) run the stages; they decode tsjoin's
//!   operators with [`codec::ClusterPhysicalCodec`] and find tsjoin's
//!   aggregate functions by name;
//! - a **client** ([`cluster_context`]) parses tsjoin's SQL and submits it.
//!
//! [`start_local_cluster`] starts a scheduler and executors in this process
//! (loopback ports).
//! `tsjoin-cli scheduler`, `tsjoin-cli executor` and `tsjoin-cli --cluster`
//! wrap the same functions.
//!
//! This crate is apart from `datafusion-tsjoin` because Ballista needs
//! DataFusion's default features and a gRPC stack that a library user of
//! tsjoin should not have to build.
//!
//! ```
//! # #[tokio::main] async fn main() -> datafusion::error::Result<()> {
//! use datafusion::prelude::SessionConfig;
//! use datafusion_tsjoin::TsJoinContextExt;
//! let url = tsjoin_ballista::start_local_cluster(1, 2).await?;
//! let ctx = tsjoin_ballista::cluster_context(&url, SessionConfig::new()).await?;
//! let batches = ctx.tsjoin_sql("SELECT sum(x) FROM (VALUES (1), (2), (3)) t(x)").await?
//!     .collect().await?;
//! assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
//! # Ok(()) }
//! ```

mod client;
pub mod codec;
mod executor;
mod scheduler;
mod shipping;
mod state;

pub use client::{cluster_context, start_local_cluster};
pub use executor::{ExecutorOptions, run_executor};
pub use scheduler::{SchedulerOptions, run_scheduler};
pub use state::{cluster_config, cluster_functions, cluster_state};
