//! tsjoin's benchmarks: a deterministic generator for the WINDOW JOIN
//! reference workload ([`generate`]) and the side-by-side runner behind
//! `tsjoin-bench window-join` ([`runner`]).

pub mod generate;
pub mod runner;
