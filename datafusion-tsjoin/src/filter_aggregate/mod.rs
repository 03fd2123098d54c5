//! Fused filter aggregates: `count(*)`, `count(x)`, `sum`, `min` and `max`
//! over `WHERE <conjunction of column-vs-literal comparisons>`, without a
//! group key, evaluated in one pass per batch.
//!
//! DataFusion 55 plans `SELECT count(*) FROM t WHERE a > 1 AND b < 2` as a
//! partial `AggregateExec` over a `FilterExec`: the filter evaluates each
//! conjunct into a `BooleanArray`, ANDs them, and filters the batch; the
//! aggregate then expands `count(Int64(1))`'s literal into an array per
//! batch and counts it. [`FilterAggregateExec`] takes the partial
//! aggregate's and the filter's place: per batch each comparison is an
//! arrow compare kernel into a bitmap, the bitmaps are ANDed
//! (`BooleanBuffer` ops), `count(*)` is the bitmap's set-bit count, and
//! `sum`/`min`/`max`/`count(x)` fold the column's values at the set bits
//! (ANDed with the column's validity): no filtered batch is built. It runs
//! on every partition of its input (the scan's row groups and files, as
//! DataFusion split them), and the Parquet scan below keeps the predicate
//! for row-group statistics pruning. Its output is the partial
//! aggregate's state rows, so DataFusion's final aggregate stays on top.
//!
//! ```text
//! AggregateExec: mode=Final, aggr=[count(Int64(1))]       AggregateExec: mode=Final, …
//!   CoalescePartitionsExec                                   CoalescePartitionsExec
//!     AggregateExec: mode=Partial, aggr=[count(Int64(1))]  ⇒    FilterAggregateExec: predicate=a@0 > 1 AND b@1 < 2, aggr=[count(Int64(1))]
//!       FilterExec: a@0 > 1 AND b@1 < 2                          DataSourceExec: …
//!         DataSourceExec: …
//! ```
//!
//! The rule ([`FilterAggregateRule`], setting `tsjoin.filter_aggregate`)
//! applies when every aggregate is DataFusion's `count` (of a literal or a
//! column), `sum`, `min` or `max` without DISTINCT, ORDER BY or FILTER,
//! the value columns are Float64 or Int64, and every conjunct is
//! `column op literal` (`=`, `<>`, `<`, `<=`, `>`, `>=`, either side) with
//! a non-NULL literal of the column's type. Anything else keeps
//! DataFusion's plan. Each comparison is evaluated by DataFusion's own
//! expression (so NaN, -0.0 and NULL compare exactly as in its filter);
//! `min`/`max` of floats follow arrow's total order (NaN above every
//! number), as DataFusion's `min`/`max` do.
//!
//! A count-only query over Parquet (`count(*)`, or counts of compared
//! columns) goes further ([`page_scan`], setting
//! `tsjoin.filter_aggregate_pages`, EXPLAIN `read=pages`): the operator
//! reads the scan's files itself and evaluates each column's comparisons
//! page by page ([`pages`]): once per dictionary entry, then a table
//! lookup per row fused into the decoding of its codes, so no column array
//! is built. Decoding the compared columns is most of such a query's time
//! in DataFusion's plan.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
//! use datafusion_tsjoin::TsJoinContextExt;
//! let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
//! ctx.tsjoin_sql("CREATE TABLE t (a DOUBLE, b BIGINT) AS VALUES (1.5, 1), (2.5, 2), (3.5, 3)").await?;
//! let df = ctx.tsjoin_sql("SELECT count(*), sum(b), max(a) FROM t WHERE a > 2.0 AND b <= 3").await?;
//! datafusion::assert_batches_eq!([
//!     "+----------+----------+----------+",
//!     "| count(*) | sum(t.b) | max(t.a) |",
//!     "+----------+----------+----------+",
//!     "| 2        | 5        | 3.5      |",
//!     "+----------+----------+----------+",
//! ], &df.collect().await?);
//! # Ok(()) }
//! ```

mod exec;
mod metrics;
mod page_scan;
mod pages;
pub(crate) mod proto;
mod row_bits;
mod rule;
mod spec;
mod stream;

pub use exec::FilterAggregateExec;
pub use rule::FilterAggregateRule;
