//! Query progress: a [`ProgressHandle`] beside a running plan's stream
//! reports rows and bytes read of the total, each operator's state and an
//! estimate of the fraction done and the time left
//! ([`ProgressSnapshot`]).
//!
//! As in Quickstep (VLDB 2018, §6.10), progress comes from the executor's
//! own state, not from the operators: the handle reads the live metrics
//! every DataFusion operator keeps (atomic `output_rows`,
//! `elapsed_compute`, start/end timestamps, the file scans'
//! `files_processed` and `bytes_scanned`) and the sizes the sources know
//! before they run (row counts from Parquet footers and in-memory batches,
//! file sizes). The fraction done is the sources' fractions weighted by
//! their rows (DuckDB's cardinality-weighted mean), averaged with the
//! progress of the stages whose work comes after the reading (full sorts,
//! temporal joins: rows emitted of the rows their input gives; see
//! `stage.rs`), kept monotone and held below 1 until the stream ends, when
//! it is exactly 1.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
//! use datafusion_tsjoin::progress::execute_with_progress;
//! use futures::StreamExt;
//! let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
//! let plan = ctx.sql("SELECT x % 3 AS k, count(*) FROM (VALUES (1), (2), (3)) t(x) GROUP BY 1")
//!     .await?.create_physical_plan().await?;
//! let (mut stream, progress) = execute_with_progress(plan, ctx.task_ctx())?;
//! while let Some(batch) = stream.next().await {
//!     let _ = batch?;
//!     assert!(progress.snapshot().fraction <= 1.0);
//! }
//! let done = progress.snapshot();
//! assert_eq!((done.fraction, done.rows_read, done.rows_total), (1.0, 3, Some(3)));
//! # Ok(()) }
//! ```

mod monitor;
mod snapshot;
mod stage;

pub use monitor::ProgressHandle;
pub use snapshot::{OperatorProgress, OperatorState, ProgressSnapshot};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::Result;
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::{ExecutionPlan, execute_stream};
use futures::Stream;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// Executes `plan` (all its partitions merged into one stream, as
/// DataFusion's `execute_stream`) and returns the stream with a handle
/// reporting its progress. Dropping the stream cancels the query as usual;
/// the handle then stays below 1.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion_tsjoin::progress::execute_with_progress;
/// let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
/// let plan = ctx.sql("SELECT 1").await?.create_physical_plan().await?;
/// let (_stream, progress) = execute_with_progress(plan, ctx.task_ctx())?;
/// assert!(!progress.snapshot().finished);
/// # Ok(()) }
/// ```
pub fn execute_with_progress(
    plan: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
) -> Result<(SendableRecordBatchStream, ProgressHandle)> {
    let handle = ProgressHandle::new(Arc::clone(&plan));
    let stream = execute_stream(plan, context)?;
    Ok((
        Box::pin(ProgressStream::new(stream, handle.clone())),
        handle,
    ))
}

/// Calls `report` with a snapshot of `handle` every `interval` until the
/// stream ends, then once more with the final (100%) snapshot (or until
/// the stream is dropped unfinished). Run it
/// beside the stream (`tokio::spawn` or `select!`); it does no work of the
/// query's.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion_tsjoin::progress::{execute_with_progress, watch};
/// use futures::TryStreamExt;
/// use std::time::Duration;
/// let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
/// let plan = ctx.sql("SELECT 1").await?.create_physical_plan().await?;
/// let (stream, progress) = execute_with_progress(plan, ctx.task_ctx())?;
/// let mut last = 0.0;
/// let watcher = watch(progress, Duration::from_millis(10), |s| last = s.fraction);
/// let (batches, ()) = futures::join!(stream.try_collect::<Vec<_>>(), watcher);
/// assert_eq!((batches?.len(), last), (1, 1.0));
/// # Ok(()) }
/// ```
pub async fn watch(
    handle: ProgressHandle,
    interval: Duration,
    mut report: impl FnMut(&ProgressSnapshot),
) {
    loop {
        let closed = handle.is_closed();
        report(&handle.snapshot());
        if closed {
            return;
        }
        handle.wait_closed(interval).await;
    }
}

/// A stream that tells its [`ProgressHandle`] when it ends.
struct ProgressStream {
    input: SendableRecordBatchStream,
    handle: ProgressHandle,
}

impl ProgressStream {
    fn new(input: SendableRecordBatchStream, handle: ProgressHandle) -> Self {
        Self { input, handle }
    }
}

impl Stream for ProgressStream {
    type Item = Result<RecordBatch>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        let poll = self.input.as_mut().poll_next(cx);
        if let Poll::Ready(None) = poll {
            self.handle.finish();
        }
        poll
    }
}

impl Drop for ProgressStream {
    fn drop(&mut self) {
        self.handle.close();
    }
}

impl RecordBatchStream for ProgressStream {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}
