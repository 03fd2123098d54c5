//! HORIZON JOIN (QuestDB 9's markouts): for every left row and every offset
//! of a RANGE or LIST, an ASOF lookup of each right table at `left time +
//! offset`; the (row, offset) pairs are then aggregated.
//!
//! ```text
//! SQL ── sql::horizon ──▶ HorizonJoinNode ── HorizonJoinPlanner ──▶ HorizonJoinExec
//!   (implicit GROUP BY,   (logical.rs)       (planner.rs)           (exec.rs, stream.rs)
//!    WHERE into the left)                                              │
//!                                      crate::temporal ◀───────────────┘
//!                                      (BuiltTimeline, Fingers per key and offset)
//! ```
//!
//! Design: the operator *expands* (it emits one row per (left row,
//! offset), with `offset` and `timestamp` columns) and leaves aggregation
//! to the plan above, except for the markout shape, grouped by `h.offset`
//! alone, whose aggregates it folds per offset itself ([`OffsetFold`],
//! placed by [`HorizonFoldRule`]; run by `folding.rs` over the leaves
//! `fold_plan.rs` splits the arguments into). Elsewhere the plan above is
//! DataFusion's aggregate, or tsjoin's inline GROUP BY where its rule
//! applies. This keeps every aggregate, GROUP BY expression,
//! HAVING and ORDER BY that DataFusion supports working over the pairs, at
//! the cost of materialising the pairs batch by batch (about `batch_size`
//! pairs per output batch, so memory stays bounded; only the columns read
//! above, through an embedded projection). The lookups are the ASOF JOIN's
//! engine: the right side is a [`Timeline`](crate::temporal) built once
//! and shared by the partitions; each left partition keeps a galloping
//! finger per (right table, key group, offset) in its per-key index, which
//! on time-ordered input moves a few rows per lookup and answers any left
//! order.
//!
//! Semantics and decisions (see README "HORIZON JOIN"):
//! - the match is QuestDB's ASOF: the latest right row with equal keys
//!   (NULL matches NULL) and `right time <= left time + offset`; among equal
//!   right times the latest in input order;
//! - `h.offset` is a BIGINT in the left timestamp's unit (QuestDB: "left
//!   resolution"), `h.timestamp` the left time plus the offset (NULL when
//!   the left time is NULL; such a row matches nothing but is still paired
//!   with every offset);
//! - offsets finer than the left unit are truncated toward zero (an error
//!   if two offsets become equal);
//! - at most [`MAX_HORIZON_OFFSETS`] offsets.

mod columns;
mod exec;
mod fold;
mod fold_plan;
mod folding;
mod logical;
mod metrics;
mod planner;
pub(crate) mod proto;
mod spec;
mod stream;

pub use exec::HorizonJoinExec;
pub use fold::{HorizonFoldRule, OffsetFold};
pub use logical::{
    HorizonJoinClause, HorizonJoinNode, HorizonRight, OFFSET_COLUMN, TIMESTAMP_COLUMN,
};
pub use planner::HorizonJoinPlanner;
pub use spec::{HorizonJoinSpec, HorizonOffsets, HorizonRightSpec, MAX_HORIZON_OFFSETS};
