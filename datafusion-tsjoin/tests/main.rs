//! All integration tests in one binary (each test binary links DataFusion).

mod asof;
mod bad_input;
mod codec;
mod concurrency;
mod dictionary_scan;
mod differential;
mod exec;
mod explain;
mod filter_aggregate;
mod fuzz;
mod groupby;
mod horizon;
mod lifecycle;
mod limit_diff;
mod limits;
mod memory;
mod newest_first;
mod partitioned;
mod percentile;
mod priority;
mod progress;
mod slt;
mod streaming;
mod support;
mod user_facing;
mod verify;
