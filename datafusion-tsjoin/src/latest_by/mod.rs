//! One row per key, the first by an ordering: `row_number() OVER
//! (PARTITION BY k ORDER BY ts DESC) = 1`, the way SQL engines spell
//! QuestDB's `LATEST ON ts PARTITION BY k` (TSBS IoT's `last-loc`,
//! `low-fuel` and `high-load` are written so).
//!
//! DataFusion 55 plans that filter over a window: it repartitions the rows
//! by the keys, sorts every one of them by key and ORDER BY, numbers them
//! and throws all but the first of each key away. [`LatestByExec`] keeps,
//! for each key, only the best row seen so far (the keys interned by the
//! inline aggregate's group keys, the ORDER BY compared as a number or in
//! arrow's row format, the rows taken out of their batches and compacted
//! now and then), partial per input partition and then merged after a
//! repartition by the keys, as a two-phase aggregate does. Memory is one
//! row per key, reserved from the pool (past it: `Resources exhausted`;
//! it does not spill).
//!
//! ```text
//! FilterExec: rn@4 = 1                                   FilterExec: rn@4 = 1
//!   BoundedWindowAggExec: row_number() …                   LatestByExec: mode=Final
//!     SortExec: [name, driver, ts DESC]           ⇒          RepartitionExec: Hash([name, driver])
//!       RepartitionExec: Hash([name, driver])                  LatestByExec: mode=Partial
//!         <input>                                                <input>
//! ```
//!
//! [`LatestByRule`] (setting `tsjoin.latest_by`) places it; EXPLAIN
//! ANALYZE shows `input_rows`, `groups` and `compactions` per operator.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
//! use datafusion_tsjoin::TsJoinContextExt;
//! let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
//! ctx.tsjoin_sql("CREATE TABLE r (name TEXT, ts INT, lat DOUBLE) AS VALUES \
//!     ('a', 1, 1.0), ('a', 3, 3.0), ('b', 2, 2.0), ('a', 2, 2.5)").await?.collect().await?;
//! let df = ctx.tsjoin_sql("SELECT name, lat FROM (SELECT name, lat, row_number() OVER \
//!     (PARTITION BY name ORDER BY ts DESC) AS rn FROM r) WHERE rn = 1 ORDER BY name").await?;
//! let batches = df.collect().await?;
//! let lat = batches[0].column(1).as_any().downcast_ref::<datafusion::arrow::array::Float64Array>().unwrap();
//! assert_eq!(lat.values(), &[3.0, 2.0]);
//! # Ok(()) }
//! ```

mod exec;
mod metrics;
mod order;
pub(crate) mod proto;
mod rule;
mod stream;
mod table;

pub use exec::{LatestByExec, LatestByMode};
pub use rule::LatestByRule;
