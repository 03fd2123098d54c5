//! Placing [`PriorityGateExec`]s in a physical plan.

use super::exec::{PlannedAdmission, PriorityGateExec};
use super::{Priority, Scheduler};
use crate::config::TsJoinOptions;
use datafusion::catalog::Session;
use datafusion::common::Result;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::execution_plan::{
    ChildrenPropertiesMode, ReplaceChildrenOptions,
};
use datafusion::physical_plan::explain::ExplainExec;
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
use std::sync::Arc;
use std::time::Duration;

/// Puts a [`PriorityGateExec`] above every input (leaf) of `plan` that
/// reads data, so the whole query pauses while `scheduler` runs a higher
/// priority. Leaves that read nothing (EXPLAIN's text, empty relations)
/// and inputs already gated are left alone. When it places a gate, the
/// query counts as running from now ([`PlannedAdmission`]) until its first
/// gate opens a stream, the plan is dropped or [`PLANNED_GRACE`] has passed.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion::physical_plan::displayable;
/// use datafusion_tsjoin::priority::{gate_inputs, Priority, Scheduler};
/// let ctx = datafusion::prelude::SessionContext::new();
/// ctx.sql("CREATE TABLE t AS VALUES (1), (2)").await?.collect().await?;
/// let plan = ctx.sql("SELECT * FROM t").await?.create_physical_plan().await?;
/// let gated = gate_inputs(plan, Priority::LOW, &Scheduler::new())?;
/// assert!(displayable(gated.as_ref()).indent(false).to_string().contains("PriorityGateExec: priority=low"));
/// # Ok(()) }
/// ```
pub fn gate_inputs(
    plan: Arc<dyn ExecutionPlan>,
    priority: Priority,
    scheduler: &Arc<Scheduler>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let planned = Arc::new(PlannedAdmission::default());
    let gated = gate(Arc::clone(&plan), priority, scheduler, &planned)?;
    // At least one gate holds it: the query is admitted from now, for at
    // most `PLANNED_GRACE` (a plan may be kept without running: a
    // cluster's scheduler keeps the plans it splits into stages, a client
    // may plan and never execute) and only where a runtime can time that.
    if Arc::strong_count(&planned) > 1
        && let Ok(runtime) = tokio::runtime::Handle::try_current()
    {
        planned.hold(scheduler.admit(priority));
        let planned = Arc::downgrade(&planned);
        runtime.spawn(async move {
            tokio::time::sleep(PLANNED_GRACE).await;
            if let Some(planned) = planned.upgrade() {
                planned.release();
            }
        });
    }
    Ok(gated)
}

/// How long a query holds its place from planning when none of its gates
/// opens a stream: long enough to cover the wait between planning and the
/// spawned tasks that open the gates on a loaded runtime (tens of
/// milliseconds), short enough that a plan kept without running pauses
/// lower priorities only briefly, never for good.
pub const PLANNED_GRACE: Duration = Duration::from_secs(1);

fn gate(
    plan: Arc<dyn ExecutionPlan>,
    priority: Priority,
    scheduler: &Arc<Scheduler>,
    planned: &Arc<PlannedAdmission>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if is_gate(&plan) || reads_nothing(&plan) {
        return Ok(plan);
    }
    let children = plan.children();
    if children.is_empty() {
        let gate = PriorityGateExec::new(plan, priority, Arc::clone(scheduler))
            .with_planned(Arc::clone(planned));
        return Ok(Arc::new(gate));
    }
    let gated = children
        .into_iter()
        .map(|child| gate(Arc::clone(child), priority, scheduler, planned))
        .collect::<Result<Vec<_>>>()?;
    let changed = gated
        .iter()
        .zip(plan.children())
        .any(|(new, old)| !Arc::ptr_eq(new, old));
    if changed {
        // A gate has its input's properties, so the parent's stay as they were.
        plan.replace_children(
            gated,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep),
        )
    } else {
        Ok(plan)
    }
}

/// Gates `plan`'s inputs at the session's `tsjoin.priority`, ranked by the
/// session's [`Scheduler`] (the process-wide one unless the session was
/// given its own), unless `tsjoin.priority_scheduling` is off.
pub fn gate_session_plan(
    plan: Arc<dyn ExecutionPlan>,
    session: &dyn Session,
) -> Result<Arc<dyn ExecutionPlan>> {
    let options = session.config().options().extensions.get::<TsJoinOptions>();
    let (enabled, priority) = options
        .map(|o| (o.priority_scheduling, o.priority))
        .unwrap_or((false, Priority::NORMAL));
    if !enabled {
        return Ok(plan);
    }
    let scheduler = session
        .config()
        .get_extension::<Scheduler>()
        .unwrap_or_else(Scheduler::global);
    gate_inputs(plan, priority, &scheduler)
}

fn is_gate(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.downcast_ref::<PriorityGateExec>().is_some()
}

fn reads_nothing(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.downcast_ref::<ExplainExec>().is_some()
        || plan.downcast_ref::<EmptyExec>().is_some()
        || plan.downcast_ref::<PlaceholderRowExec>().is_some()
}
