//! ASOF JOIN and LT JOIN (QuestDB semantics), with the DuckDB and Snowflake
//! spellings mapped onto the same operator.
//!
//! For every left row, the latest right row with equal keys (NULL matches
//! NULL) whose time is `<=` the left time (`<` for LT JOIN), or, in the
//! forward directions, the earliest with time `>=` (`>`); within the
//! TOLERANCE when one is given. Left rows are never dropped: without a match
//! the right columns are NULL. Among right rows with equal times the latest
//! in input order wins (backward) or the first (forward).
//!
//! ```text
//! SQL ── sql::asof ──▶ AsofJoinNode ── AsofJoinPlanner ──▶ AsofJoinExec
//!                      (logical.rs)     (planner.rs)        (exec.rs, stream.rs)
//!                                                             │
//!                                     crate::temporal ◀───────┘ (timeline, merge cursor)
//! ```

mod exec;
mod logical;
mod metrics;
mod planner;
pub(crate) mod proto;
mod spec;
mod stream;

pub use exec::AsofJoinExec;
pub use logical::{AsofJoinClause, AsofJoinNode};
pub use planner::AsofJoinPlanner;
pub(crate) use spec::emits_unmatched_right;
pub use spec::{AsofDirection, AsofJoinSpec, AsofMatch, Tolerance, ToleranceUnit};
