//! Newest-first Parquet reading for a TopK over a filtered scan:
//! `ORDER BY ts DESC LIMIT n` with a WHERE, and QuestDB's `LIMIT -n` (which
//! tsjoin plans as that TopK and a re-sort).
//!
//! DataFusion 55 reads such a query's files whole (with
//! [`crate::sort_through_filter`], the newest file of each partition; without
//! it, every file oldest first). [`NewestFirstTopKExec`] replaces the TopK:
//! it reads every file's footer, orders all row groups by the largest sort
//! key their statistics allow (newest first), reads and filters several of
//! them at a time (one task each, as many as the session has partitions),
//! keeps the best `n` matches, and stops, cancelling the reads in flight,
//! once the next row group's largest key cannot beat the `n`-th match. Each
//! row group is read by a copy of the original scan restricted to that row
//! group (a [`ParquetAccessPlan`](datafusion::datasource::physical_plan::parquet::ParquetAccessPlan)),
//! so projection, schema adaptation, page pruning and the filter are
//! DataFusion's own.
//!
//! ```text
//! SortExec: TopK(fetch=10), expr=[ts DESC]         NewestFirstTopKExec: fetch=10, expr=[ts DESC]
//!   FilterExec: v > 75                        ⇒      FilterExec: v > 75
//!     DataSourceExec: parquet                          DataSourceExec: parquet
//! ```
//!
//! EXPLAIN ANALYZE shows `row_groups_total` and `row_groups_read`. The rule
//! ([`NewestFirstRule`], setting `tsjoin.newest_first_scan`) applies to a
//! single-key descending TopK over a Parquet scan without partition columns
//! whose key is an integer, date or timestamp file column. Rows with a NULL
//! key rank as the sort says (a row group with NULL keys is read first for
//! `NULLS FIRST`).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
//! use datafusion_tsjoin::TsJoinContextExt;
//! let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
//! let dir = std::env::temp_dir().join(format!("nf-doc-{}", std::process::id()));
//! ctx.tsjoin_sql(&format!("COPY (SELECT CAST(v * 1000000 AS TIMESTAMP) AS ts, v % 7 AS x \
//!     FROM generate_series(1, 1000) AS g(v)) TO '{}/a.parquet'", dir.display())).await?.collect().await?;
//! ctx.register_parquet("t", dir.to_str().unwrap(), Default::default()).await?;
//! let df = ctx.tsjoin_sql("SELECT x FROM t WHERE x > 3 ORDER BY ts DESC LIMIT 2").await?;
//! assert_eq!(df.collect().await?.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
//! # std::fs::remove_dir_all(dir).ok(); Ok(()) }
//! ```

mod exec;
mod metrics;
pub(crate) mod proto;
mod rule;
mod stream;

pub use exec::NewestFirstTopKExec;
pub use rule::NewestFirstRule;
