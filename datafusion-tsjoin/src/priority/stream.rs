//! [`GateStream`]: passes its input's batches on while no higher priority
//! runs, and waits (holding no thread) while one does.

use super::Priority;
use super::scheduler::{Admission, Scheduler};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::Result;
use datafusion::physical_plan::metrics::{Count, Time};
use datafusion::physical_plan::{RecordBatchStream, SendableRecordBatchStream};
use futures::{Stream, ready};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::sync::futures::OwnedNotified;

/// What a gate measures: how often and how long it paused.
#[derive(Debug, Clone)]
pub(crate) struct GateMetrics {
    pub(crate) pauses: Count,
    pub(crate) paused_time: Time,
}

/// A stream that checks, before pulling each batch from its input, whether
/// its [`Scheduler`] runs a higher priority, and if so waits for the
/// running set to change. The check happens at batch boundaries only, so a
/// paused query keeps its state and resumes exactly where it stopped;
/// waiting is a pending future, so a paused query holds no thread, and
/// dropping the stream (cancelling the query) works while paused.
pub(crate) struct GateStream {
    input: SendableRecordBatchStream,
    scheduler: Arc<Scheduler>,
    priority: Priority,
    /// Held until the input ends or the stream is dropped.
    admission: Option<Admission>,
    waiting: Option<(Pin<Box<OwnedNotified>>, Instant)>,
    metrics: GateMetrics,
}

impl GateStream {
    pub(crate) fn new(
        input: SendableRecordBatchStream,
        scheduler: Arc<Scheduler>,
        priority: Priority,
        metrics: GateMetrics,
    ) -> Self {
        let admission = Some(scheduler.admit(priority));
        Self {
            input,
            scheduler,
            priority,
            admission,
            waiting: None,
            metrics,
        }
    }
}

impl Stream for GateStream {
    type Item = Result<RecordBatch>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some((changed, _)) = this.waiting.as_mut() {
                ready!(changed.as_mut().poll(cx));
                if let Some((_, since)) = this.waiting.take() {
                    this.metrics.paused_time.add_elapsed(since);
                }
            }
            if this.admission.is_some() && this.scheduler.outranked(this.priority) {
                // Taken before the second check, so a change between the
                // check and the wait still wakes us.
                let changed = Box::pin(this.scheduler.changed());
                if this.scheduler.outranked(this.priority) {
                    if this.waiting.is_none() {
                        this.metrics.pauses.add(1);
                    }
                    this.waiting = Some((changed, Instant::now()));
                    continue;
                }
            }
            let next = ready!(this.input.as_mut().poll_next(cx));
            if next.is_none() {
                this.admission = None;
            }
            return Poll::Ready(next);
        }
    }
}

impl RecordBatchStream for GateStream {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}
