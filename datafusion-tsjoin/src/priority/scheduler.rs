//! [`Scheduler`]: which priorities are running, shared by the queries of a
//! session (by default, of the whole process).

use super::Priority;
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::sync::futures::OwnedNotified;

/// No admission is held: nothing outranks anybody.
const NONE: i64 = i64::MIN;

/// Counts the input streams running at each priority, so that a stream can
/// ask, once per batch, whether a higher priority is running.
///
/// A query's input streams hold an [`Admission`] from the moment they are
/// opened until they end or are dropped. The check on the hot path is one
/// atomic load of the highest priority admitted; the map behind it changes
/// only when a stream opens or ends. Waiters are woken through a
/// [`Notify`] whenever the highest priority goes down.
///
/// ```
/// use datafusion_tsjoin::priority::{Priority, Scheduler};
/// let scheduler = Scheduler::new();
/// assert!(!scheduler.outranked(Priority::LOW));
/// let high = scheduler.admit(Priority::HIGH);
/// assert!(scheduler.outranked(Priority::LOW));
/// assert!(!scheduler.outranked(Priority::HIGH));
/// drop(high);
/// assert!(!scheduler.outranked(Priority::LOW));
/// ```
#[derive(Debug)]
pub struct Scheduler {
    running: Mutex<BTreeMap<Priority, usize>>,
    top: AtomicI64,
    changed: Arc<Notify>,
    /// Wakes threads blocked in [`Self::wait_blocking`] when the highest
    /// priority goes down (waits under the `running` lock).
    lowered: Condvar,
}

static GLOBAL: LazyLock<Arc<Scheduler>> = LazyLock::new(Scheduler::new);

impl Scheduler {
    /// A scheduler of its own (queries planned with it rank only against
    /// each other).
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            running: Mutex::new(BTreeMap::new()),
            top: AtomicI64::new(NONE),
            changed: Arc::new(Notify::new()),
            lowered: Condvar::new(),
        })
    }

    /// The process-wide scheduler, which tsjoin sessions use unless given
    /// their own (so that the CLI's or a server's sessions rank together).
    pub fn global() -> Arc<Self> {
        Arc::clone(&GLOBAL)
    }

    /// Whether a priority above `priority` is running.
    pub fn outranked(&self, priority: Priority) -> bool {
        self.top.load(Ordering::Acquire) > i64::from(priority.value())
    }

    /// Records a stream running at `priority` until the admission drops.
    pub fn admit(self: &Arc<Self>, priority: Priority) -> Admission {
        let mut running = self.running.lock();
        *running.entry(priority).or_default() += 1;
        self.publish(&running);
        Admission {
            scheduler: Arc::clone(self),
            priority,
        }
    }

    /// A future that completes on the next change of the running set.
    /// Taken before checking [`Self::outranked`], it cannot miss a change
    /// that happens between the check and the wait.
    pub fn changed(&self) -> OwnedNotified {
        Arc::clone(&self.changed).notified_owned()
    }

    /// Waits (holding no thread) while a priority above `priority` runs.
    /// For operators that read their input themselves rather than through
    /// a [`PriorityGateExec`](super::PriorityGateExec)'s stream.
    pub async fn wait_turn(&self, priority: Priority) {
        while self.outranked(priority) {
            let changed = self.changed();
            if !self.outranked(priority) {
                return;
            }
            changed.await;
        }
    }

    /// Blocks the calling thread (a blocking phase's, never a tokio
    /// worker's) while a priority above `priority` runs, for at most `max`.
    /// The check and the wait are under the lock that publishes changes, so
    /// a change in between is not missed.
    pub fn wait_blocking(&self, priority: Priority, max: Duration) {
        let mut running = self.running.lock();
        if self.outranked(priority) {
            self.lowered.wait_for(&mut running, max);
        }
    }

    /// The number of streams admitted at each priority (highest first).
    pub fn running(&self) -> Vec<(Priority, usize)> {
        self.running
            .lock()
            .iter()
            .rev()
            .map(|(p, n)| (*p, *n))
            .collect()
    }

    fn leave(&self, priority: Priority) {
        let mut running = self.running.lock();
        if let Some(n) = running.get_mut(&priority) {
            *n -= 1;
            if *n == 0 {
                running.remove(&priority);
            }
        }
        let before = self.top.load(Ordering::Acquire);
        self.publish(&running);
        let lowered = self.top.load(Ordering::Acquire) < before;
        drop(running);
        if lowered {
            self.lowered.notify_all();
            self.changed.notify_waiters();
        }
    }

    fn publish(&self, running: &BTreeMap<Priority, usize>) {
        let top = running
            .keys()
            .next_back()
            .map_or(NONE, |p| i64::from(p.value()));
        self.top.store(top, Ordering::Release);
    }
}

/// A stream's place in a [`Scheduler`]'s running set; leaves it on drop.
#[derive(Debug)]
pub struct Admission {
    scheduler: Arc<Scheduler>,
    priority: Priority,
}

impl Admission {
    /// The priority admitted.
    pub fn priority(&self) -> Priority {
        self.priority
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.scheduler.leave(self.priority);
    }
}
