//! # datafusion-tsjoin
//!
//! Time-series operators for [Apache DataFusion](https://datafusion.apache.org):
//! QuestDB's `WINDOW JOIN` in SQL, planned as a logical node and executed by
//! a parallel physical operator, serialisable with datafusion-proto.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
//! use datafusion_tsjoin::{TsJoinContextExt, tsjoin_context};
//! let ctx = tsjoin_context(Default::default());
//! ctx.tsjoin_sql("CREATE TABLE t (ts TIMESTAMP, v INT) AS VALUES ('2024-01-01T00:00:00', 1)").await?;
//! let df = ctx.tsjoin_sql("SELECT t.v, sum(r.v) FROM t WINDOW JOIN t r \
//!     RANGE BETWEEN 1 minute PRECEDING AND CURRENT ROW").await?;
//! assert_eq!(df.collect().await?[0].num_rows(), 1);
//! # Ok(()) }
//! ```
//!
//! Data flows one way: [`sql`] → [`window_join::WindowJoinNode`] →
//! [`window_join::WindowJoinExec`] → the kernels. Grouped aggregation runs
//! on [`inline_aggregate::InlineAggregateExec`] where the
//! [`inline_aggregate::InlineAggregateRule`] finds it applies.

pub mod asof_join;
pub mod codec;
pub mod config;
pub mod files;
pub mod filter_aggregate;
pub mod functions;
pub mod horizon_join;
pub mod inline_aggregate;
pub mod join_filter;
mod kernels;
pub mod late_materialize;
pub mod latest_by;
pub mod newest_first;
pub mod offset_topk;
mod parquet_read;
pub mod priority;
pub mod progress;
pub mod prune_files;
mod row_group_balance;
mod session;
mod small_scan;
pub mod sort_through_filter;
pub mod sql;
pub mod tail;
mod temporal;
pub mod testing;
pub mod window_join;

pub use config::{TimestampRegistry, TsJoinOptions};
pub use session::tsjoin_context_with_limits;
pub use session::{TsJoinContextExt, TsJoinSessionStateBuilderExt, tsjoin_context};

/// The hand-written kernels, for the criterion benches and their doc
/// examples only: not part of the supported API.
#[doc(hidden)]
pub mod bench {
    pub use crate::kernels::{KernelSet, block_sums, block_table, prefix, rle};
}
