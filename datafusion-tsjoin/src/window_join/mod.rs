//! QuestDB-style WINDOW JOIN.
//!
//! For every left row, aggregate the right rows of the same key whose
//! timestamp lies in `[ts - lo, ts + hi]`, plus (under INCLUDE PREVAILING,
//! the default) the last such row at or before the window start.
//!
//! ```text
//! SQL ── sql::rewrite ──▶ WindowJoinNode ── WindowJoinPlanner ──▶ WindowJoinExec
//!                         (logical.rs,       (planner.rs: bounds    (exec.rs, stream.rs)
//!                          bounds.rs)         resolved into spec.rs)
//! ```
//!
//! Execution reads one way, each file using only the ones below it:
//!
//! ```text
//! exec.rs ─▶ stream.rs ─▶ build.rs (right index) ─▶ place.rs, key_index.rs, fast/column.rs
//!                     ├─▶ probe.rs, aggregate.rs  (general path)
//!                     └─▶ fast/probe.rs            (per-key buffers, kernels)
//!        └─▶ streaming/ (time-ordered left: sliding per-key windows over
//!                        temporal::Timeline; index path for unordered batches)
//! shared by all: spec.rs (what to compute), metrics.rs, eval.rs, search.rs, par.rs
//! ```

mod aggregate;
mod bounds;
mod build;
mod eval;
mod exec;
mod fast;
mod key_index;
mod logical;
mod metrics;
mod par;
mod place;
mod planner;
mod probe;
mod pushdown;
mod search;
mod spec;
mod stream;
mod streaming;

pub use crate::temporal::{DistributionSetting, JoinDistribution};
pub use bounds::{BoundUnit, Direction, Prevailing, WindowBound};
pub use exec::WindowJoinExec;
pub use logical::{ExprLayout, WindowJoinClause, WindowJoinNode};
pub use planner::{TsJoinQueryPlanner, WindowJoinPlanner};
pub use pushdown::PushDownWindowJoinFilter;
pub use spec::{
    AggInput, PhysicalBound, TimeScale, WindowAgg, WindowAggKind, WindowJoinSettings,
    WindowJoinSpec,
};

pub(crate) use bounds::{constant_i64, timestamp_unit, unit_nanos};
pub(crate) use key_index::KeyIndex;
pub(crate) use logical::{Side, side_of};
pub(crate) use search::search_near;
pub(crate) use spec::{DEFAULT_MIN_MAX_TABLE_MIN, DEFAULT_SUM_PREFIX_MIN};
