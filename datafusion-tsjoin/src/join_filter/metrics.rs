//! What a [`super::LipFilterExec`] reports in EXPLAIN ANALYZE: per join
//! filter (labelled with its key and kind) the rows it checked and kept,
//! its time, size and final position in the probe order.

use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, Gauge, Label, MetricBuilder, Time,
};

/// One join filter's metrics in one partition.
#[derive(Debug, Clone)]
pub(crate) struct FilterMetrics {
    pub(crate) rows_in: Count,
    pub(crate) rows_out: Count,
    pub(crate) time: Time,
    pub(crate) bytes: Gauge,
    /// 1-based position in the probe order after the last batch.
    pub(crate) position: Gauge,
    /// 1 when the prober switched the filter off (it dropped almost nothing).
    pub(crate) switched_off: Count,
}

impl FilterMetrics {
    /// Registers the metrics of the filter on `key` of kind `kind` in
    /// `partition`.
    pub(crate) fn new(
        metrics: &ExecutionPlanMetricsSet,
        partition: usize,
        key: &str,
        kind: &'static str,
    ) -> Self {
        let builder = || {
            MetricBuilder::new(metrics)
                .with_label(Label::new("filter", key.to_string()))
                .with_label(Label::new("kind", kind))
        };
        Self {
            rows_in: builder().counter("filter_rows_in", partition),
            rows_out: builder().counter("filter_rows_out", partition),
            time: builder().subset_time("filter_time", partition),
            bytes: builder().gauge("filter_bytes", partition),
            position: builder().gauge("filter_position", partition),
            switched_off: builder().counter("filter_switched_off", partition),
        }
    }
}
