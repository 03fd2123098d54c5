//! What [`super::FilterAggregateExec`] reports in EXPLAIN ANALYZE.

use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder,
};

/// Rows read and rows matching the WHERE, with the baseline (output rows,
/// compute time); when it reads Parquet itself ([`super::page_scan`]),
/// the rows it read there (`page_scan_rows`, which the progress monitor
/// counts as read from files), row groups read and pruned, column chunks
/// that went through arrow's reader instead of the page kernels, and row
/// groups read as a page-index row selection.
#[derive(Debug, Clone)]
pub(crate) struct FilterAggregateMetrics {
    pub(crate) baseline: BaselineMetrics,
    pub(crate) input_rows: Count,
    pub(crate) matched_rows: Count,
    pub(crate) page_scan_rows: Count,
    pub(crate) row_groups_read: Count,
    pub(crate) row_groups_pruned: Count,
    pub(crate) chunks_by_arrow: Count,
    pub(crate) row_groups_by_selection: Count,
}

impl FilterAggregateMetrics {
    pub(crate) fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let count =
            |name: &'static str| MetricBuilder::new(metrics).counter(name, partition);
        Self {
            baseline: BaselineMetrics::new(metrics, partition),
            input_rows: count("input_rows"),
            matched_rows: count("matched_rows"),
            page_scan_rows: count("page_scan_rows"),
            row_groups_read: count("row_groups_read"),
            row_groups_pruned: count("row_groups_pruned"),
            chunks_by_arrow: count("chunks_by_arrow"),
            row_groups_by_selection: count("row_groups_by_selection"),
        }
    }
}
