//! All integration tests in one binary (each test binary links DataFusion).

mod codec;
mod dictionary_scan;
mod differential;
mod exec;
mod explain;
mod groupby;
mod lifecycle;
mod limits;
mod percentile;
mod slt;
mod support;
mod user_facing;
