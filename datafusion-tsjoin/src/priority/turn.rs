//! [`Turn`] and [`PhaseGate`]: waiting for a query's turn in work that does
//! not flow through a [`PriorityGateExec`](super::PriorityGateExec) batch by
//! batch.
//!
//! A gate pauses a query between input batches. Two kinds of work escape
//! it: operators that read files themselves (the inline aggregate's
//! dictionary scan), and CPU phases that start once the inputs are read
//! (a join's build of its right side, on a blocking thread). Left alone,
//! the second kind keeps the CPU for its whole length while a query of
//! higher priority waits; at 5M rows a WINDOW JOIN's build is a third of
//! the query. Such work takes the query's [`Turn`] from the gates below it
//! and waits at its own boundaries: the async kind between row groups, the
//! blocking kind through a [`PhaseGate`] between chunks of rows.

use super::exec::PriorityGateExec;
use super::{Priority, Scheduler};
use datafusion::common::{DataFusionError, Result};
use datafusion::physical_plan::ExecutionPlan;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Rows a blocking phase processes between two pause points of its
/// [`PhaseGate`]: about a millisecond of work, so a query of higher
/// priority waits no longer than that for the phase's threads to step
/// aside, while the check (one atomic load) stays invisible in the loop.
pub const ROWS_PER_PAUSE: usize = 1 << 16;

/// How long a blocked phase sleeps between looks at its cancellation flag.
const CANCEL_POLL: Duration = Duration::from_millis(10);

/// A query's priority and the scheduler that ranks it.
///
/// ```
/// use datafusion_tsjoin::priority::{Priority, Scheduler, Turn};
/// let scheduler = Scheduler::new();
/// let turn = Turn::new(scheduler.clone(), Priority::LOW);
/// assert!(!turn.outranked());
/// let _high = scheduler.admit(Priority::HIGH);
/// assert!(turn.outranked());
/// ```
#[derive(Debug, Clone)]
pub struct Turn {
    scheduler: Arc<Scheduler>,
    priority: Priority,
}

impl Turn {
    /// The turn of a query at `priority` under `scheduler`.
    pub fn new(scheduler: Arc<Scheduler>, priority: Priority) -> Self {
        Self {
            scheduler,
            priority,
        }
    }

    /// The turn of the query `plan` belongs to, from the first
    /// [`PriorityGateExec`] in it (pre-order): the priority the query was
    /// planned with, also where the plan was decoded on a cluster. `None`
    /// when nothing below is gated (priorities are off).
    pub fn below(plan: &Arc<dyn ExecutionPlan>) -> Option<Self> {
        if let Some(gate) = plan.downcast_ref::<PriorityGateExec>() {
            return Some(Self::new(Arc::clone(gate.scheduler()), gate.priority()));
        }
        plan.children().into_iter().find_map(Self::below)
    }

    /// The priority.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// Whether a higher priority is running now (one atomic load).
    pub fn outranked(&self) -> bool {
        self.scheduler.outranked(self.priority)
    }

    /// Records the query as running (for work that reads its input without
    /// opening the gate's stream) until the admission drops.
    pub fn admit(&self) -> super::Admission {
        self.scheduler.admit(self.priority)
    }

    /// Waits, holding no thread, while a higher priority runs.
    pub async fn wait(&self) {
        self.scheduler.wait_turn(self.priority).await
    }
}

/// Pause points for a CPU phase on a blocking thread: [`Self::pass`]
/// blocks the calling thread while a higher priority runs (the thread
/// sleeps: the CPU goes to the higher query), and gives way at once when
/// the phase's query is cancelled. Cheap to clone; without a [`Turn`] it
/// never blocks.
///
/// ```
/// use datafusion_tsjoin::priority::{PhaseGate, Priority, Scheduler, Turn};
/// let scheduler = Scheduler::new();
/// let gate = PhaseGate::new(Some(Turn::new(scheduler.clone(), Priority::LOW)));
/// gate.check().unwrap(); // nothing outranks it
/// let guard = gate.cancel_on_drop();
/// drop(guard); // the query went away: the phase stops at its next check
/// assert!(gate.check().is_err());
/// ```
#[derive(Debug, Clone, Default)]
pub struct PhaseGate {
    turn: Option<Turn>,
    cancelled: Arc<AtomicBool>,
}

impl PhaseGate {
    /// A gate for a phase of the query whose turn is `turn`.
    pub fn new(turn: Option<Turn>) -> Self {
        Self {
            turn,
            cancelled: Arc::default(),
        }
    }

    /// Blocks while a higher priority runs, unless the phase was cancelled.
    /// Costs one atomic load when nothing outranks the query.
    pub fn pass(&self) {
        let Some(turn) = &self.turn else { return };
        while turn.outranked() && !self.is_cancelled() {
            turn.scheduler.wait_blocking(turn.priority, CANCEL_POLL);
        }
    }

    /// [`Self::pass`], then an error if the phase's query was cancelled
    /// (its work is no longer wanted).
    pub fn check(&self) -> Result<()> {
        self.pass();
        if self.is_cancelled() {
            return Err(DataFusionError::Execution(
                "the query was cancelled".to_string(),
            ));
        }
        Ok(())
    }

    /// Whether the phase's query was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// A guard that cancels the phase when dropped: held by the future that
    /// awaits the blocking phase, so dropping that future (the query was
    /// cancelled) stops the phase at its next pause point.
    pub fn cancel_on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(Arc::clone(&self.cancelled))
    }
}

/// Cancels a [`PhaseGate`]'s phase when dropped (see
/// [`PhaseGate::cancel_on_drop`]). Dropping it after the phase has ended
/// changes nothing.
#[derive(Debug)]
pub struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Instant;

    fn low_gate(scheduler: &Arc<Scheduler>) -> PhaseGate {
        PhaseGate::new(Some(Turn::new(Arc::clone(scheduler), Priority::LOW)))
    }

    #[test]
    fn a_phase_waits_while_a_higher_priority_runs() {
        let scheduler = Scheduler::new();
        let gate = low_gate(&scheduler);
        let high = scheduler.admit(Priority::HIGH);
        let (tx, rx) = mpsc::channel();
        let phase = std::thread::spawn(move || {
            gate.check().unwrap();
            tx.send(Instant::now()).unwrap();
        });
        // Still blocked well past the cancellation poll interval.
        assert!(rx.recv_timeout(CANCEL_POLL * 10).is_err());
        let released = Instant::now();
        drop(high);
        let passed = rx.recv_timeout(Duration::from_secs(5)).expect("released");
        assert!(passed >= released);
        phase.join().unwrap();
    }

    #[test]
    fn equal_and_lower_priorities_do_not_block() {
        let scheduler = Scheduler::new();
        let _low = scheduler.admit(Priority::LOW);
        let _also = scheduler.admit(Priority::new(-20));
        low_gate(&scheduler).check().unwrap();
        PhaseGate::default().check().unwrap();
    }

    #[test]
    fn cancelling_a_blocked_phase_lets_it_stop() {
        let scheduler = Scheduler::new();
        let gate = low_gate(&scheduler);
        let _high = scheduler.admit(Priority::HIGH);
        let guard = gate.cancel_on_drop();
        let phase = std::thread::spawn(move || gate.check());
        std::thread::sleep(CANCEL_POLL * 3);
        drop(guard);
        let start = Instant::now();
        assert!(phase.join().unwrap().is_err());
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn the_turn_comes_from_the_gates_below() {
        use datafusion::physical_plan::empty::EmptyExec;
        use datafusion::physical_plan::union::UnionExec;
        let schema = Arc::new(datafusion::arrow::datatypes::Schema::empty());
        let leaf: Arc<dyn ExecutionPlan> = Arc::new(EmptyExec::new(schema));
        assert!(Turn::below(&leaf).is_none());
        let gated: Arc<dyn ExecutionPlan> = Arc::new(PriorityGateExec::new(
            Arc::clone(&leaf),
            Priority::LOW,
            Scheduler::new(),
        ));
        let union = UnionExec::try_new(vec![leaf, gated]).unwrap();
        assert_eq!(
            Turn::below(&union).map(|t| t.priority()),
            Some(Priority::LOW)
        );
    }
}
