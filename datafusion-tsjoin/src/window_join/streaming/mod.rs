//! The streaming path of the WINDOW JOIN: for left input in time order,
//! walk left and right in time order together and keep, per key, only the
//! right rows inside the current window.
//!
//! ```text
//! right ──▶ Timeline (temporal/: rows in time order, key groups) + lanes
//! left partition ──▶ Walker (join.rs): per left row, push right rows up to
//!                    the window end, evict the key's rows before its start
//!                    (the last evicted is the prevailing row), read the
//!                    aggregates off the window state (window.rs)
//! ```
//!
//! Each right row is pushed and popped once per partition, so a left row
//! costs O(1) amortised whatever the window length, and there is no
//! per-key index to build. Applies where the fast path does (constant
//! bounds, no pair conditions, the fast path's aggregates). Each left
//! partition walks its own time range: it starts by binary search and
//! takes the prevailing rows of the keys it meets from the rows just
//! before (`MergeCursor`'s warm-up, shared with the ASOF JOIN). A left
//! batch out of time order is joined on the index path instead, its index
//! built once from the same right rows; one that starts before the previous
//! one ended restarts the walk.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
//! use datafusion_tsjoin::TsJoinContextExt;
//! let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
//! ctx.tsjoin_sql("SET tsjoin.window_join_streaming = true").await?.collect().await?;
//! # Ok(()) }
//! ```

mod join;
mod lanes;
mod stream;
mod window;

pub(crate) use stream::{StreamingArgs, StreamingShared, streaming_stream};
