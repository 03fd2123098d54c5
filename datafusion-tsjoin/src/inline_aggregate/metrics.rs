//! [`InlineAggregateMetrics`]: what an inline aggregate reports in
//! `EXPLAIN ANALYZE`: DataFusion's aggregate names where one fits
//! (`aggregation_time`, `emitting_time`, the baseline `output_rows` and
//! `elapsed_compute`), plus `dictionary_scan_rows` and `fallback`.

use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, Time,
};

/// One output partition's metrics of an
/// [`InlineAggregateExec`](super::InlineAggregateExec).
#[derive(Debug, Clone)]
pub(super) struct InlineAggregateMetrics {
    /// Phase 1's wall time, from its start to its last task's end.
    pub aggregation_time: Time,
    /// Phase 2: merging this partition's share of the tables and emitting it.
    pub emitting_time: Time,
    /// Input rows phase 1 read from Parquet dictionary codes.
    pub dictionary_scan_rows: Count,
    /// 1 when this partition ran the fallback plan instead.
    pub fallback: Count,
    /// Output rows and total compute time.
    pub baseline: BaselineMetrics,
}

impl InlineAggregateMetrics {
    /// Registers partition `partition`'s metrics in `metrics`.
    pub(super) fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let time = |name| MetricBuilder::new(metrics).subset_time(name, partition);
        let count = |name| MetricBuilder::new(metrics).counter(name, partition);
        Self {
            aggregation_time: time("aggregation_time"),
            emitting_time: time("emitting_time"),
            dictionary_scan_rows: count("dictionary_scan_rows"),
            fallback: count("fallback"),
            baseline: BaselineMetrics::new(metrics, partition),
        }
    }
}
