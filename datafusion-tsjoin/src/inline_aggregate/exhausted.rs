//! The way out when the memory pool refuses the inline tables: DataFusion's
//! own aggregate, which spills to disk where the inline one cannot.
//!
//! The inline tables hold one entry per group and cannot be split to disk;
//! DataFusion's hash aggregate sorts and spills its state and merges the
//! runs. So when any reservation of an [`InlineAggregateExec`] run is
//! refused, the output partition that saw it drops the inline state
//! (phase-1 tasks are stopped, finished tables released) and runs the
//! aggregate the operator replaced over a fresh copy of the input: the rows
//! phase 1 had consumed are read again, so none is lost. Every other output
//! partition that has not emitted yet does the same when its inline path
//! fails (whatever the error, once one has given up, since stopping phase 1
//! makes them fail); a partition that already emitted its groups keeps
//! them, which is right because both plans partition the groups by the same
//! hash.
//!
//! ```text
//! InlineAggregateExec ─ refused ─▶ AggregateExec(FinalPartitioned)   (spills)
//!   <input>                          RepartitionExec(Hash)             (spills)
//!                                      AggregateExec(Partial)
//!                                        <input, state reset, read again>
//! ```
//!
//! The input must give the same rows when executed again, as DataFusion's
//! scans and in-memory tables do (not a one-shot stream).
//!
//! [`InlineAggregateExec`]: super::InlineAggregateExec

use super::fallback::with_leaf;
use datafusion::common::{DataFusionError, Result, exec_datafusion_err};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::execution_plan::reset_plan_states;
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::OnceCell;

/// One run's way out: the replaced aggregate over the operator's input, and
/// whether an output partition has given up on the inline path.
#[derive(Debug)]
pub(super) struct Exhausted {
    template: Arc<dyn ExecutionPlan>,
    input: Arc<dyn ExecutionPlan>,
    given_up: AtomicBool,
    /// Built once per run: its output partitions share its repartition.
    plan: OnceCell<Arc<dyn ExecutionPlan>>,
}

impl Exhausted {
    /// `template` (the replaced aggregate) to run over `input` when over
    /// the memory limit.
    pub(super) fn new(
        template: Arc<dyn ExecutionPlan>,
        input: Arc<dyn ExecutionPlan>,
    ) -> Self {
        Self {
            template,
            input,
            given_up: AtomicBool::new(false),
            plan: OnceCell::new(),
        }
    }

    /// Whether an output partition whose inline path failed with `error`
    /// runs the fallback plan: when the pool refused memory, or when another
    /// partition has given up (its stopping phase 1 is the likely cause).
    pub(super) fn applies(&self, error: &DataFusionError) -> bool {
        if is_exhausted(error) {
            self.given_up.store(true, Ordering::SeqCst);
        }
        self.given_up.load(Ordering::SeqCst)
    }

    /// The fallback plan of this run, with fresh state throughout.
    pub(super) async fn plan(&self) -> Result<Arc<dyn ExecutionPlan>> {
        let plan = self
            .plan
            .get_or_try_init(|| async {
                reset_plan_states(with_leaf(&self.template, Arc::clone(&self.input))?)
            })
            .await?;
        Ok(Arc::clone(plan))
    }
}

/// Whether `error` is (or wraps) the memory pool's refusal.
pub(crate) fn is_exhausted(error: &DataFusionError) -> bool {
    matches!(error.find_root(), DataFusionError::ResourcesExhausted(_))
}

/// A value shared by the output partitions that one of them may release
/// (its memory is freed when the last user's clone is dropped).
#[derive(Debug)]
pub(super) struct Released<T>(Mutex<Option<Arc<T>>>);

impl<T> Released<T> {
    pub(super) fn new(value: T) -> Self {
        Self(Mutex::new(Some(Arc::new(value))))
    }

    /// The value, unless released (an error: the run went over its memory
    /// limit and its partitions run the fallback plan).
    pub(super) fn get(&self) -> Result<Arc<T>> {
        self.0.lock().clone().ok_or_else(|| {
            exec_datafusion_err!(
                "InlineAggregateExec: tables released over the memory limit"
            )
        })
    }

    pub(super) fn release(&self) {
        self.0.lock().take();
    }
}
