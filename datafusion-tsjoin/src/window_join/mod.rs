//! QuestDB-style WINDOW JOIN.
//!
//! For every left row, aggregate the right rows of the same key whose
//! timestamp lies in `[ts - lo, ts + hi]`, plus (under INCLUDE PREVAILING,
//! the default) the last such row at or before the window start.
//!
//! ```text
//! SQL ── sql::rewrite ──▶ WindowJoinNode ── WindowJoinPlanner ──▶ WindowJoinExec
//!                        (logical.rs)       (planner.rs)          (exec.rs, stream.rs,
//!                                                                  build.rs, place.rs, probe.rs,
//!                                                                  aggregate.rs, fast/)
//! ```

mod aggregate;
mod bounds;
mod build;
mod exec;
mod fast;
mod keys;
mod logical;
mod par;
mod place;
mod planner;
mod probe;
mod pushdown;
mod stream;

pub(crate) use bounds::constant_i64;
pub use bounds::{
    BoundUnit, Direction, Prevailing, WindowBound, timestamp_unit, unit_nanos,
};
pub use exec::{
    AggInput, DEFAULT_MIN_MAX_TABLE_MIN, DEFAULT_SUM_PREFIX_MIN, PhysicalBound,
    WindowAgg, WindowAggKind, WindowJoinExec, WindowJoinSettings, WindowJoinSpec,
};
pub use fast::FastPlan;
pub use logical::WindowJoinNode;
pub(crate) use planner::{Side, side_of};
pub use planner::{TsJoinQueryPlanner, WindowJoinPlanner};
pub use pushdown::PushDownWindowJoinFilter;
