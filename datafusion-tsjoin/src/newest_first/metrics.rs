//! What [`super::NewestFirstTopKExec`] reports in EXPLAIN ANALYZE.

use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder,
};

/// Row groups in the files, row groups read (started and finished), rows
/// the row-group scans produced, and the baseline (output rows, time).
#[derive(Debug, Clone)]
pub(crate) struct NewestFirstMetrics {
    pub(crate) baseline: BaselineMetrics,
    pub(crate) row_groups_total: Count,
    pub(crate) row_groups_read: Count,
    pub(crate) rows_scanned: Count,
}

impl NewestFirstMetrics {
    pub(crate) fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let counter =
            |name: &'static str| MetricBuilder::new(metrics).counter(name, partition);
        Self {
            baseline: BaselineMetrics::new(metrics, partition),
            row_groups_total: counter("row_groups_total"),
            row_groups_read: counter("row_groups_read"),
            rows_scanned: counter("rows_scanned"),
        }
    }
}
