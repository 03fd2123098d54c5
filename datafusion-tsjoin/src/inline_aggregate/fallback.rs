//! The way back to DataFusion's own aggregate when a probe of the input
//! shows that the inline path would lose.
//!
//! Multi-column keys win inline while their groups are few (TPC-H Q1's flag
//! and status) and lose to DataFusion's hash aggregate when they are many
//! (ClickBench's `GROUP BY UserID, SearchPhrase`), and a plan cannot tell
//! which from its statistics. So [`InlineAggregateExec`] keeps the aggregate
//! it replaced as a template, and each phase-1 task keeps its first batches
//! while it aggregates them. The first task to judge decides for all (one
//! plan runs, never a mix): as soon as its key table holds more than
//! [`MANY_GROUPS`] groups (or overflowed its direct tables), or after a
//! quarter of the probe averages fewer than [`MIN_ROWS_PER_GROUP`] rows per
//! group in a task whose input is expected to run well past the probe
//! (at least [`EARLY_INPUT_ROWS`]: so the work done twice stays small), or
//! when at the end of the
//! probe new groups are still arriving at a rate that would take the task's
//! input past [`MANY_GROUPS`] (keys that grow with time, such as a time
//! bucket over time-ordered rows: TSBS's `GROUP BY name, driver, fleet,
//! ten_minutes` sees a few thousand groups in its first 100K rows and ends
//! with over a million), every task hands its kept
//! batches and the rest
//! of its input stream to a [`ReplayExec`] under a fresh copy of the
//! original plan, and the output partitions run that plan instead.
//! After [`PROBE_ROWS`] rows with fewer groups, the kept
//! batches are dropped and phase 1 goes on inline.
//!
//! ```text
//! InlineAggregateExec ─ decided "many" ─▶ AggregateExec(FinalPartitioned)
//!   <input>                                 RepartitionExec(Hash)
//!                                             AggregateExec(Partial)
//!                                               ReplayExec  (kept batches, then the rest)
//! ```
//!
//! [`InlineAggregateExec`]: super::InlineAggregateExec

use super::group_keys::GroupKeys;
use super::table::Phase1Task;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result, exec_datafusion_err, internal_err};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::execution_plan::{
    ChildrenPropertiesMode, ReplaceChildrenOptions,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PhysicalExpr, PlanProperties,
    SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt, stream};
use parking_lot::Mutex;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{OnceCell, oneshot, watch};

/// Rows phase 1 aggregates before judging whether aggregating pays (as
/// DataFusion's `skip_partial_aggregation_probe_rows_threshold`).
pub(crate) const PROBE_ROWS: usize = 100_000;
/// Groups above which, during the probe, the run falls back: past this,
/// composite keys lose to DataFusion's aggregate on ClickBench's columns
/// (the measurements are in benches/README.md).
pub(crate) const MANY_GROUPS: usize = 8192;

/// Rows per group below which, a quarter into the probe, the run falls
/// back early: keys that repeat this rarely are on their way past
/// [`MANY_GROUPS`], and falling back only then would aggregate most rows
/// twice (benches/README.md has the ClickBench groupings that set it).
pub(crate) const MIN_ROWS_PER_GROUP: usize = 12;

/// The least input a task is expected to hold for the early
/// [`MIN_ROWS_PER_GROUP`] test to send the run back. That test pays by
/// sparing the rows after it from being aggregated twice; in a smaller
/// input few rows come after it, and keys that repeat rarely may still end
/// under [`MANY_GROUPS`], where the inline path wins (TSBS
/// `long-driving-sessions`: 6.4K groups of a date bin, name and driver in
/// 54K rows, fell back at 25K rows and ran 15% behind DataFusion). Such an
/// input is left to the [`MANY_GROUPS`] test, whose double work is bounded
/// by the probe. Estimates over-count filtered inputs (DataFusion cannot
/// estimate most string predicates), so the bar is twice the probe.
pub(crate) const EARLY_INPUT_ROWS: usize = 2 * PROBE_ROWS;

/// The least share of new groups, in the probe's second half, of the groups
/// seen in its first half for the groups to count as still growing. A fixed
/// set of keys, at the [`MIN_ROWS_PER_GROUP`] a probe that stays inline
/// sees, shows under 1% new ones in the second half (e^-6 of them unseen);
/// a time bucket over time-ordered rows shows tens of percent.
pub(crate) const MIN_GROWTH: f64 = 0.25;

/// What a phase-1 task hands over: the batches it kept, then the rest of
/// its input (none when the input ended during the probe).
struct Handed {
    kept: Vec<RecordBatch>,
    rest: Option<SendableRecordBatchStream>,
    /// The error that stopped the task during the probe, if any (raised
    /// where the replayed partition would have read past its kept batches).
    error: Option<DataFusionError>,
}

/// The decision of one execution, shared by its phase-1 tasks and output
/// partitions, and the replay plan once it says "fall back".
pub(crate) struct Fallback {
    /// `None` until decided; then whether to fall back.
    decided: watch::Sender<Option<bool>>,
    /// Tasks that stopped probing before any decision (input ended, error
    /// or cancellation); when all have, the inline path goes on.
    stopped: AtomicUsize,
    tasks: usize,
    /// Per task, where its hand-over arrives (taken by the replay plan).
    handed: Mutex<Vec<oneshot::Receiver<Handed>>>,
    template: Arc<dyn ExecutionPlan>,
    input: Arc<PlanProperties>,
    plan: OnceCell<Arc<dyn ExecutionPlan>>,
}

impl fmt::Debug for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fallback")
            .field("decided", &*self.decided.borrow())
            .finish()
    }
}

impl Fallback {
    /// A fresh decision for phase-1 tasks over an input with these
    /// properties, one per entry of `task_rows`: the rows each task's input
    /// is expected to hold, when statistics give an estimate; and each
    /// task's probe.
    pub(crate) fn new(
        template: Arc<dyn ExecutionPlan>,
        input: Arc<PlanProperties>,
        task_rows: Vec<Option<usize>>,
    ) -> (Arc<Self>, Vec<Probe>) {
        let tasks = task_rows.len();
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..tasks).map(|_| oneshot::channel()).unzip();
        let fallback = Arc::new(Self {
            decided: watch::Sender::new(None),
            stopped: AtomicUsize::new(0),
            tasks,
            handed: Mutex::new(receivers),
            template,
            input,
            plan: OnceCell::new(),
        });
        if tasks == 0 {
            fallback.decide(false);
        }
        let probes = senders
            .into_iter()
            .zip(task_rows)
            .map(|(tx, expected)| Probe {
                fallback: Arc::clone(&fallback),
                expected,
                tx: Some(tx),
                kept: vec![],
                rows: 0,
                half: None,
                voted: false,
            })
            .collect();
        (fallback, probes)
    }

    /// Sets the decision unless one was made; returns the one that stands.
    fn decide(&self, fall_back: bool) -> bool {
        self.decided
            .send_if_modified(|d| d.is_none() && d.replace(fall_back).is_none());
        self.decided.borrow().expect("decided")
    }

    /// Waits for the decision.
    pub(crate) async fn decision(&self) -> bool {
        let mut rx = self.decided.subscribe();
        // The sender lives in `self`: waiting cannot fail.
        rx.wait_for(Option::is_some)
            .await
            .map(|d| d.expect("decided"))
            .unwrap_or(false)
    }

    /// The original plan over the handed-over input (built once per
    /// execution, so its output partitions share one repartition).
    /// `tasks` gives the phase-1 tasks (once): each replayed partition
    /// keeps its task alive until it has handed over (a dropped task is
    /// aborted).
    pub(crate) async fn plan(
        &self,
        tasks: impl FnOnce() -> Vec<Phase1Task>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let plan = self
            .plan
            .get_or_try_init(|| async {
                let receivers = std::mem::take(&mut *self.handed.lock());
                let mut tasks = tasks().into_iter();
                let parts = receivers
                    .into_iter()
                    .map(|rx| Some((rx, tasks.next())))
                    .collect();
                let replay = Arc::new(ReplayExec {
                    parts: Mutex::new(parts),
                    schema: Arc::clone(self.input.eq_properties.schema()),
                    properties: Arc::clone(&self.input),
                });
                with_leaf(&self.template, replay)
            })
            .await?;
        Ok(Arc::clone(plan))
    }
}

/// One phase-1 task's part in the decision: the batches it keeps until
/// then.
pub(crate) struct Probe {
    fallback: Arc<Fallback>,
    /// The rows this task's input is expected to hold, if estimated.
    expected: Option<usize>,
    tx: Option<oneshot::Sender<Handed>>,
    kept: Vec<RecordBatch>,
    rows: usize,
    /// Rows and groups when the probe was half done.
    half: Option<(usize, usize)>,
    voted: bool,
}

/// What a phase-1 task does after a batch.
pub(crate) enum Next {
    /// Keep probing.
    Probe(Probe),
    /// Decided inline: go on (the kept batches are dropped).
    Inline,
    /// Decided to fall back: hand over the input with [`Probe::hand_over`].
    FallBack(Probe),
}

impl Probe {
    /// Keeps `batch` (before aggregating it, so that a fallback replays it).
    pub(crate) fn keep(&mut self, batch: &RecordBatch) {
        self.rows += batch.num_rows();
        self.kept.push(batch.clone());
    }

    /// Judges the table after the kept batches were aggregated into it (or
    /// takes the decision already made).
    pub(crate) fn judge(mut self, keys: &GroupKeys) -> Next {
        if self.half.is_none() && self.rows >= PROBE_ROWS / 2 {
            self.half = Some((self.rows, keys.len()));
        }
        let decided = *self.fallback.decided.borrow();
        let fall_back = match decided {
            Some(d) => d,
            // Groups only grow: "many" needs no more rows.
            None if keys.overflowed() || keys.len() > MANY_GROUPS => {
                self.fallback.decide(true)
            }
            None if self.rows >= PROBE_ROWS / 4
                && keys.len() * MIN_ROWS_PER_GROUP > self.rows
                && self.expected.is_none_or(|n| n >= EARLY_INPUT_ROWS) =>
            {
                self.fallback.decide(true)
            }
            None if self.rows >= PROBE_ROWS => {
                let growing = self.projected_groups(keys.len()) > MANY_GROUPS;
                self.fallback.decide(growing)
            }
            None => return Next::Probe(self),
        };
        if fall_back {
            Next::FallBack(self)
        } else {
            Next::Inline
        }
    }

    /// The groups this task would end with if new ones kept arriving as in
    /// the probe's second half, when they are still arriving fast (at least
    /// [`MIN_GROWTH`] of the groups seen by half-way: keys that grow with
    /// the data, not the last rare keys of a fixed set, which a probe of at
    /// least [`MIN_ROWS_PER_GROUP`] rows per group finds almost all of
    /// early); else, or when the input's size is unknown, `groups`.
    fn projected_groups(&self, groups: usize) -> usize {
        let (Some((rows0, groups0)), Some(expected)) = (self.half, self.expected) else {
            return groups;
        };
        let new = groups.saturating_sub(groups0);
        if (new as f64) < MIN_GROWTH * groups0 as f64 {
            return groups;
        }
        let span = self.rows.saturating_sub(rows0).max(1) as f64;
        let remaining = expected.saturating_sub(self.rows) as f64;
        groups.saturating_add((new as f64 * remaining / span) as usize)
    }

    /// The task stopped before a decision (its input ended, or `error`):
    /// waits for the other tasks' decision. On "fall back" the kept batches
    /// (and the error) go to the replay and this returns true; else the
    /// error, if any, is the task's.
    pub(crate) async fn stop(mut self, error: Option<DataFusionError>) -> Result<bool> {
        self.vote();
        if self.fallback.decision().await {
            self.hand_over(None, error);
            return Ok(true);
        }
        error.map_or(Ok(false), Err)
    }

    /// Decides to fall back before any row is read (one string key, which
    /// runs inline only from Parquet codes, when they are not read) and
    /// hands the whole of `input` over.
    pub(crate) fn fall_back_now(self, input: SendableRecordBatchStream) {
        self.fallback.decide(true);
        self.hand_over(Some(input), None);
    }

    /// Bytes the kept batches hold (accounted with the task's table).
    pub(crate) fn kept_bytes(&self) -> usize {
        self.kept
            .iter()
            .map(RecordBatch::get_array_memory_size)
            .sum()
    }

    /// Hands the kept batches and the rest of the input to the replay.
    pub(crate) fn hand_over(
        mut self,
        rest: Option<SendableRecordBatchStream>,
        error: Option<DataFusionError>,
    ) {
        if let Some(tx) = self.tx.take() {
            // A closed receiver: the fallback plan is gone (cancelled).
            let _ = tx.send(Handed {
                kept: std::mem::take(&mut self.kept),
                rest,
                error,
            });
        }
    }

    /// Counts this task as stopped undecided; the last one decides inline.
    fn vote(&mut self) {
        if !std::mem::replace(&mut self.voted, true)
            && self.fallback.stopped.fetch_add(1, Ordering::AcqRel) + 1
                == self.fallback.tasks
        {
            self.fallback.decide(false);
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        // A task dropped while probing (cancelled, or done deciding) must
        // not leave the others waiting for it.
        self.vote();
    }
}

/// The original aggregate `template` with its input replaced by `leaf`
/// (below the partial or single aggregate; fresh nodes, fresh state).
pub(crate) fn with_leaf(
    template: &Arc<dyn ExecutionPlan>,
    leaf: Arc<dyn ExecutionPlan>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let recompute = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
    let lowest = template.downcast_ref::<AggregateExec>().is_some_and(|a| {
        matches!(
            a.mode(),
            AggregateMode::Partial
                | AggregateMode::Single
                | AggregateMode::SinglePartitioned
        )
    });
    if lowest {
        return Arc::clone(template).replace_children(vec![leaf], recompute);
    }
    match template.children().as_slice() {
        [child] => {
            let child = with_leaf(child, leaf)?;
            Arc::clone(template).replace_children(vec![child], recompute)
        }
        _ => internal_err!(
            "InlineAggregateExec: fallback template {} has no single input",
            template.name()
        ),
    }
}

/// Where one partition's input arrives, and the phase-1 task sending it.
type ReplayPart = (oneshot::Receiver<Handed>, Option<Phase1Task>);

/// A leaf that replays what phase 1's tasks handed over: per partition, the
/// batches a task kept, then the rest of its input stream. Exists only
/// inside a fallback plan, for one execution.
pub struct ReplayExec {
    /// Per partition, where its input arrives and the task that sends it.
    parts: Mutex<Vec<Option<ReplayPart>>>,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for ReplayExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayExec")
            .field("schema", &self.schema)
            .finish()
    }
}

impl DisplayAs for ReplayExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "ReplayExec")
    }
}

impl ExecutionPlan for ReplayExec {
    fn name(&self) -> &str {
        "ReplayExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            internal_err!("ReplayExec has no children")
        }
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let part = self.parts.lock().get_mut(partition).and_then(Option::take);
        let Some((rx, task)) = part else {
            return internal_err!(
                "ReplayExec: partition {partition} replayed twice or out of range"
            );
        };
        let stream = stream::once(async move {
            let handed = rx.await;
            drop(task);
            let handed = handed.map_err(|_| {
                exec_datafusion_err!("InlineAggregateExec: input partition {partition} stopped before handing over")
            })?;
            let kept = stream::iter(handed.kept.into_iter().map(Ok));
            let error = stream::iter(handed.error.map(Err));
            let rest = match handed.rest {
                Some(rest) => rest.boxed(),
                None => stream::empty().boxed(),
            };
            Ok::<_, DataFusionError>(kept.chain(error).chain(rest))
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        )))
    }
}
