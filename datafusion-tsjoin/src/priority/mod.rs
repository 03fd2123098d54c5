//! Priority scheduling across concurrent queries.
//!
//! DataFusion executes a query by pulling batches through tokio tasks with
//! cooperative yielding; it has no notion of one query mattering more than
//! another. tsjoin adds one at the smallest possible place: tsjoin's query
//! planner puts a [`PriorityGateExec`] above every input of a query, at the
//! session's `tsjoin.priority` (`high`, `normal`, `low` or an integer).
//! Before pulling each input batch a gate asks the session's [`Scheduler`]
//! whether a higher priority is running (one atomic load); if so, it waits
//! — a pending future, no thread held — until the running set changes.
//! Everything above a paused input runs out of work, so the whole query
//! pauses at batch boundaries with its state intact and resumes where it
//! stopped. Equal priorities share the CPU as tokio shares it.
//!
//! Work that does not pull batches through a gate waits for the query's
//! [`Turn`] itself: an operator that reads files directly before each row
//! group, a CPU phase on a blocking thread (a join's build) at the pause
//! points of a [`PhaseGate`].
//!
//! A query counts as running from when its inputs are opened until they
//! end or are dropped; its final phase after the inputs are read (a sort's
//! or an aggregate's output) no longer holds lower priorities back.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
//! use datafusion_tsjoin::TsJoinContextExt;
//! let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
//! ctx.tsjoin_sql("SET tsjoin.priority = low").await?.collect().await?;
//! let plan = ctx.tsjoin_sql("SELECT * FROM (VALUES (1)) t(a)").await?.create_physical_plan().await?;
//! # Ok(()) }
//! ```

mod class;
mod exec;
mod plan;
mod scheduler;
mod stream;
mod turn;

pub use class::Priority;
pub(crate) use exec::decode_gate;
pub use exec::{PlannedAdmission, PriorityGateExec};
pub use plan::{PLANNED_GRACE, gate_inputs, gate_session_plan};
pub use scheduler::{Admission, Scheduler};
pub use turn::{CancelOnDrop, PhaseGate, ROWS_PER_PAUSE, Turn};
