//! All integration tests in one binary (each test binary links DataFusion).

mod asof;
mod codec;
mod dictionary_scan;
mod differential;
mod exec;
mod explain;
mod groupby;
mod lifecycle;
mod limit_diff;
mod limits;
mod progress;
mod slt;
mod support;
mod user_facing;
