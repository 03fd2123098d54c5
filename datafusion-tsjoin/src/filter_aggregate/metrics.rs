//! What [`super::FilterAggregateExec`] reports in EXPLAIN ANALYZE.

use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder,
};

/// Rows read and rows matching the WHERE, with the baseline (output rows,
/// compute time).
#[derive(Debug, Clone)]
pub(crate) struct FilterAggregateMetrics {
    pub(crate) baseline: BaselineMetrics,
    pub(crate) input_rows: Count,
    pub(crate) matched_rows: Count,
}

impl FilterAggregateMetrics {
    pub(crate) fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        Self {
            baseline: BaselineMetrics::new(metrics, partition),
            input_rows: MetricBuilder::new(metrics).counter("input_rows", partition),
            matched_rows: MetricBuilder::new(metrics).counter("matched_rows", partition),
        }
    }
}
