//! Lookahead join filters (LIP, Quickstep §5.3): the fact rows no join can
//! match are dropped right after the scan, before any hash probe.
//!
//! In a star join, the fact table is the probe side of every hash join and
//! each dimension's build side knows which fact keys can match. DataFusion
//! 55 already passes that knowledge down: each hash join's *dynamic filter*
//! (`k >= min AND k <= max AND k IN/lookup(build keys)`) lands in the fact
//! scan's predicate once the build is done. But without
//! `datafusion.execution.parquet.pushdown_filters` the scan uses it only to
//! prune row groups, so every fact row still probes every hash table; and
//! with it, the decoder evaluates the filters in written order at a cost
//! that measured higher than the savings.
//!
//! [`JoinFilterRule`] puts a [`LipFilterExec`] above each such scan, and a
//! [`LipBuildKeysExec`] on the build side of each single-key join whose
//! filter it applies: that operator passes the build rows to the join and
//! keeps their keys. When a join's build finishes, its filter is compiled
//! once (shared by all partitions): an integer key whose build keys span a
//! range the memory budget allows becomes one bit per key value, set from
//! those keys (an exact filter, like Quickstep's `BitVectorExactFilter`:
//! dense dimension keys cost `(max - min + 1) / 8` bytes, accounted to the
//! memory pool; a filter without build keys evaluates DataFusion's own
//! predicate over a narrower range instead); integer build keys spread too
//! widely for that but few enough for the same budget at 16 bits each
//! become a split-block Bloom filter; any other key is left to the
//! join (checking DataFusion's membership test before the join costs what
//! the join's own probe costs: TPC-H measured slower that way). The operator
//! applies all finished filters to each batch in adaptive order
//! ([`prober`]): cheapest per dropped row first, learnt on small slices of
//! the first batches, a filter that drops almost nothing switched off.
//!
//! ```text
//! HashJoinExec: (d_datekey = lo_orderdate)        HashJoinExec: (d_datekey = lo_orderdate)
//!   …date…                                          LipBuildKeysExec: key=d_datekey
//!                                                     …date…
//!   HashJoinExec: (c_custkey = lo_custkey)    ⇒     HashJoinExec: (c_custkey = lo_custkey)
//!     …customer…                                      LipBuildKeysExec: key=c_custkey
//!                                                       …customer…
//!     DataSourceExec: lineorder,                      LipFilterExec: join_filters=[lo_custkey; lo_orderdate]
//!       predicate=DynamicFilter[…] AND …                DataSourceExec: lineorder, predicate=…
//! ```
//!
//! DataFusion pushes a join's filter only into a scan that reads all of
//! its probe keys. A join on keys from several tables (TPC-H Q5's
//! `l_suppkey = s_suppkey AND c_nationkey = s_nationkey`) filters nothing
//! before it; the rule then follows each of its integer keys down to the
//! scan that reads it, where the join's build keys filter it (EXPLAIN
//! names such a filter `probe=build`: `l_suppkey=s_suppkey`).
//!
//! [`FactProbeRule`] keeps the fact table on the probe side of the star's
//! joins where DataFusion's size estimates would build over it, so that
//! every dimension's filter reaches the fact scan whatever the FROM order.
//!
//! EXPLAIN ANALYZE shows each filter's kind (`exact_bits` with its size, or
//! `left to the join`) in the operator's line, in the order a partition ended
//! with (`off`: switched off), and per filter the metrics
//! `<key>.rows_in`, `<key>.rows_out`, `<key>.time` and
//! `<key>.switched_off` (partitions that switched it off).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
//! use datafusion_tsjoin::TsJoinContextExt;
//! let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
//! let dir = std::env::temp_dir().join(format!("lip-doc-{}", std::process::id()));
//! ctx.tsjoin_sql(&format!("COPY (SELECT v % 100 AS k, v AS x FROM generate_series(1, 10000) AS g(v)) \
//!     TO '{}/fact/a.parquet'", dir.display())).await?.collect().await?;
//! ctx.tsjoin_sql(&format!("COPY (SELECT v AS k, v % 10 AS c FROM generate_series(0, 99) AS g(v)) \
//!     TO '{}/dim/a.parquet'", dir.display())).await?.collect().await?;
//! ctx.register_parquet("fact", dir.join("fact").to_str().unwrap(), Default::default()).await?;
//! ctx.register_parquet("dim", dir.join("dim").to_str().unwrap(), Default::default()).await?;
//! let sql = "SELECT count(*) FROM fact JOIN dim ON fact.k = dim.k WHERE dim.c = 3";
//! let plan = ctx.tsjoin_sql(&format!("EXPLAIN {sql}")).await?.collect().await?;
//! let shown = datafusion::arrow::util::pretty::pretty_format_batches(&plan)?.to_string();
//! assert!(shown.contains("LipFilterExec: join_filters=[k]"));
//! let n = ctx.tsjoin_sql(sql).await?.collect().await?;
//! datafusion::assert_batches_eq!(["+----------+", "| count(*) |", "+----------+",
//!     "| 1000     |", "+----------+"], &n);
//! # std::fs::remove_dir_all(dir).ok(); Ok(()) }
//! ```

mod bloom;
mod build_keys;
mod exec;
mod filter;
mod key_filters;
mod metrics;
pub mod prober;
pub(crate) mod proto;
mod rule;
mod star;
mod stream;

pub use build_keys::LipBuildKeysExec;
pub use exec::LipFilterExec;
pub use rule::JoinFilterRule;
pub(crate) use rule::{join_filter_ids, join_filters_in};
pub use star::FactProbeRule;
