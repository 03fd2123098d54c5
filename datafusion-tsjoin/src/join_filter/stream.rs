//! [`LipFilterStream`]: one partition of a [`super::LipFilterExec`].

use super::exec::{Compiled, LipFilterExec};
use super::metrics::FilterMetrics;
use super::prober::Prober;
use datafusion::arrow::array::{RecordBatch, UInt32Array};
use datafusion::arrow::compute::take_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::Result;
use datafusion::execution::memory_pool::MemoryPool;
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet};
use datafusion::physical_plan::{RecordBatchStream, SendableRecordBatchStream};
use futures::{Stream, ready};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Filters each input batch by the join filters whose builds are done,
/// taking up each filter as its build finishes (checked before every
/// batch, never waited for).
pub(crate) struct LipFilterStream {
    input: SendableRecordBatchStream,
    exec: Arc<LipFilterExec>,
    /// Filters not yet taken up (their builds were still running).
    pending: Vec<usize>,
    prober: Prober,
    /// The surviving rows of the batch at hand.
    sel: Vec<u32>,
    baseline: BaselineMetrics,
    metrics: ExecutionPlanMetricsSet,
    partition: usize,
    pool: Arc<dyn MemoryPool>,
}

impl LipFilterStream {
    pub(crate) fn new(
        input: SendableRecordBatchStream,
        exec: Arc<LipFilterExec>,
        baseline: BaselineMetrics,
        metrics: ExecutionPlanMetricsSet,
        partition: usize,
        pool: Arc<dyn MemoryPool>,
    ) -> Self {
        let pending = (0..exec.filter_count()).collect();
        Self {
            input,
            exec,
            pending,
            prober: Prober::default(),
            sel: Vec::new(),
            baseline,
            metrics,
            partition,
            pool,
        }
    }

    /// Takes up the filters whose builds finished since the last batch.
    fn take_up_finished(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut still = Vec::new();
        for &i in &self.pending {
            match self.exec.compiled(i, &self.pool)? {
                Compiled::NotYet => still.push(i),
                Compiled::Nothing => {}
                Compiled::Ready(filter) => {
                    let metrics = FilterMetrics::new(
                        &self.metrics,
                        self.partition,
                        self.exec.filter_name(i),
                        filter.kind(),
                    );
                    self.prober.push(i, filter, metrics);
                }
            }
        }
        self.pending = still;
        Ok(())
    }

    /// `batch` without the rows the filters drop (`None`: no row passes).
    fn filter(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>> {
        self.take_up_finished()?;
        if !self.prober.is_active() || batch.num_rows() == 0 {
            return Ok(Some(batch));
        }
        self.prober.select(&batch, &mut self.sel)?;
        let rows = batch.num_rows();
        if self.sel.len() == rows {
            return Ok(Some(batch));
        }
        if self.sel.is_empty() {
            return Ok(None);
        }
        // Gathering the kept rows by index costs per kept row, where a
        // boolean filter would cost per input row; the indices are the
        // selection itself (moved, not copied).
        let indices = UInt32Array::from(std::mem::take(&mut self.sel));
        Ok(Some(take_record_batch(&batch, &indices)?))
    }
}

impl Stream for LipFilterStream {
    type Item = Result<RecordBatch>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        loop {
            let next = ready!(self.input.as_mut().poll_next(cx));
            let out = match next {
                Some(Ok(batch)) => {
                    let elapsed = self.baseline.elapsed_compute().clone();
                    let timer = elapsed.timer();
                    let out = self.filter(batch);
                    timer.done();
                    match out {
                        Ok(None) => continue,
                        Ok(Some(batch)) => Some(Ok(batch)),
                        Err(e) => Some(Err(e)),
                    }
                }
                None => {
                    self.exec.record_order(self.prober.order());
                    None
                }
                other => other,
            };
            return self.baseline.record_poll(Poll::Ready(out));
        }
    }
}

impl RecordBatchStream for LipFilterStream {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}
