//! [`TailStream`]: reads the input's partitions in turn and keeps the rows
//! a [`TailRange`] selects.

use super::TailRange;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::Result;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::physical_plan::metrics::BaselineMetrics;
use datafusion::physical_plan::{
    ExecutionPlan, ExecutionPlanProperties, RecordBatchStream, SendableRecordBatchStream,
};
use futures::{Stream, StreamExt};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

/// The stream of a [`super::TailExec`]. Dropping it drops the input stream
/// it is reading, which stops the input's work.
pub(super) struct TailStream {
    input: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
    schema: SchemaRef,
    next_partition: usize,
    current: Option<SendableRecordBatchStream>,
    range: TailRange,
    /// Rows still to skip from the start.
    to_skip: u64,
    /// Rows that may still be in the answer, oldest first.
    buffer: VecDeque<RecordBatch>,
    buffered: u64,
    /// Rows known to be in the answer, ready to emit.
    ready: VecDeque<RecordBatch>,
    /// Memory of `buffer` and `ready`, kept as batches come and go (a
    /// slice counts its whole buffers, as arrow reports them), so a long
    /// buffer is not re-summed per batch.
    bytes: usize,
    done: bool,
    reservation: MemoryReservation,
    metrics: BaselineMetrics,
}

impl TailStream {
    pub(super) fn new(
        input: Arc<dyn ExecutionPlan>,
        context: Arc<TaskContext>,
        range: TailRange,
        reservation: MemoryReservation,
        metrics: BaselineMetrics,
    ) -> Self {
        Self {
            schema: input.schema(),
            input,
            context,
            next_partition: 0,
            current: None,
            range,
            to_skip: range.skip_first,
            buffer: VecDeque::new(),
            buffered: 0,
            ready: VecDeque::new(),
            bytes: 0,
            done: false,
            reservation,
            metrics,
        }
    }

    fn push(&mut self, mut batch: RecordBatch) -> Result<()> {
        if self.to_skip > 0 {
            let k = self.to_skip.min(batch.num_rows() as u64);
            batch = batch.slice(k as usize, batch.num_rows() - k as usize);
            self.to_skip -= k;
        }
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.buffered += batch.num_rows() as u64;
        self.bytes += batch.get_array_memory_size();
        self.buffer.push_back(batch);
        match self.range.keep_last {
            // Rows before the last `keep` can never be in the answer.
            Some(keep) => {
                while self.buffered > keep {
                    let excess = self.buffered - keep;
                    let front = self.buffer.front_mut().expect("buffered rows");
                    let rows = front.num_rows() as u64;
                    if rows <= excess {
                        let gone = front.get_array_memory_size();
                        self.buffer.pop_front();
                        self.bytes = self.bytes.saturating_sub(gone);
                        self.buffered -= rows;
                    } else {
                        *front = front.slice(excess as usize, (rows - excess) as usize);
                        self.buffered -= excess;
                    }
                }
            }
            // Rows before the last `drop_last` are surely in the answer.
            None => {
                while self.buffered > self.range.drop_last {
                    let excess = self.buffered - self.range.drop_last;
                    let front = self.buffer.front_mut().expect("buffered rows");
                    let rows = front.num_rows() as u64;
                    if rows <= excess {
                        let b = self.buffer.pop_front().expect("buffered rows");
                        self.ready.push_back(b);
                        self.buffered -= rows;
                    } else {
                        let done = front.slice(0, excess as usize);
                        self.bytes += done.get_array_memory_size();
                        self.ready.push_back(done);
                        *front = front.slice(excess as usize, (rows - excess) as usize);
                        self.buffered -= excess;
                    }
                }
            }
        }
        self.reservation.try_resize(self.bytes)
    }

    /// The input is exhausted: drop the last `drop_last` rows, emit the rest.
    fn finish(&mut self) {
        let mut drop = self.range.drop_last;
        while drop > 0
            && let Some(back) = self.buffer.back_mut()
        {
            let rows = back.num_rows() as u64;
            if rows <= drop {
                let gone = back.get_array_memory_size();
                self.buffer.pop_back();
                self.bytes = self.bytes.saturating_sub(gone);
                drop -= rows;
            } else {
                *back = back.slice(0, (rows - drop) as usize);
                drop = 0;
            }
        }
        self.ready.extend(self.buffer.drain(..));
        self.buffered = 0;
        self.done = true;
    }

    fn poll_inner(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<RecordBatch>>> {
        loop {
            if let Some(batch) = self.ready.pop_front() {
                self.bytes = self.bytes.saturating_sub(batch.get_array_memory_size());
                self.reservation.resize(self.bytes);
                return Poll::Ready(Some(Ok(batch)));
            }
            if self.done {
                self.reservation.free();
                return Poll::Ready(None);
            }
            let Some(current) = self.current.as_mut() else {
                let n = self.input.output_partitioning().partition_count();
                if self.next_partition < n {
                    let stream = self
                        .input
                        .execute(self.next_partition, Arc::clone(&self.context));
                    match stream {
                        Ok(s) => self.current = Some(s),
                        Err(e) => return Poll::Ready(Some(Err(e))),
                    }
                    self.next_partition += 1;
                } else {
                    self.finish();
                }
                continue;
            };
            match ready!(current.poll_next_unpin(cx)) {
                Some(Ok(batch)) => {
                    if let Err(e) = self.push(batch) {
                        return Poll::Ready(Some(Err(e)));
                    }
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => self.current = None,
            }
        }
    }
}

impl Stream for TailStream {
    type Item = Result<RecordBatch>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        let poll = self.poll_inner(cx);
        self.metrics.record_poll(poll)
    }
}

impl RecordBatchStream for TailStream {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}
