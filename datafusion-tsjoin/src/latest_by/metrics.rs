//! What a [`super::LatestByExec`] reports in EXPLAIN ANALYZE.

use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder,
};

/// Input rows, keys kept, store compactions, and the baseline (output
/// rows, compute time).
#[derive(Debug, Clone)]
pub(super) struct LatestByMetrics {
    pub(super) baseline: BaselineMetrics,
    pub(super) input_rows: Count,
    pub(super) groups: Count,
    pub(super) compactions: Count,
}

impl LatestByMetrics {
    /// Registers partition `partition`'s metrics in `metrics`.
    pub(super) fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let counter =
            |name: &'static str| MetricBuilder::new(metrics).counter(name, partition);
        Self {
            baseline: BaselineMetrics::new(metrics, partition),
            input_rows: counter("input_rows"),
            groups: counter("groups"),
            compactions: counter("compactions"),
        }
    }
}
