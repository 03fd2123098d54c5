//! tsjoin's benchmarks: a deterministic generator for the WINDOW JOIN
//! reference workload ([`generate`]) and the side-by-side runner behind
//! `tsjoin-bench window-join` ([`runner`]); the grouped-aggregation data
//! sets and runner behind `tsjoin-bench groupby` ([`groupby`]); the synthetic
//! ClickBench `hits` table and runner behind `tsjoin-bench clickbench`
//! ([`clickbench`]); the TSBS IoT data set and queries behind
//! `tsjoin-bench tsbs` ([`tsbs`]), whose cold runs drop the files from the
//! page cache first ([`page_cache`]); the Star Schema Benchmark's generator
//! and queries behind `tsjoin-bench ssb` ([`ssb`]); TPC-H's tables (from
//! `tpchgen`) and 22 queries behind `tsjoin-bench tpch` ([`tpch`]).

pub mod clickbench;
pub mod generate;
pub mod groupby;
pub mod page_cache;
pub mod runner;
pub mod ssb;
pub mod tpch;
pub mod tsbs;
