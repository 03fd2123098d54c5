//! tsjoin's benchmarks: a deterministic generator for the WINDOW JOIN
//! reference workload ([`generate`]) and the side-by-side runner behind
//! `tsjoin-bench window-join` ([`runner`]); the grouped-aggregation data
//! sets and runner behind `tsjoin-bench groupby` ([`groupby`]); the synthetic
//! ClickBench `hits` table and runner behind `tsjoin-bench clickbench`
//! ([`clickbench`]); the TSBS IoT data set and queries behind
//! `tsjoin-bench tsbs` ([`tsbs`]); the Star Schema Benchmark's generator
//! and queries behind `tsjoin-bench ssb` ([`ssb`]).

pub mod clickbench;
pub mod generate;
pub mod groupby;
pub mod runner;
pub mod ssb;
pub mod tsbs;
