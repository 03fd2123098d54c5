//! [`AsofJoinMetrics`]: what an ASOF JOIN reports in `EXPLAIN ANALYZE`.

use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, Gauge, MetricBuilder, Time,
};

/// One partition's metrics of an [`AsofJoinExec`](super::AsofJoinExec).
#[derive(Debug, Clone)]
pub(super) struct AsofJoinMetrics {
    /// Time draining the right input into the timeline.
    pub build_time: Time,
    /// Right rows read.
    pub build_input_rows: Count,
    /// Bytes the timeline holds.
    pub build_mem_used: Gauge,
    /// 1 when the right input arrived in time order (no sort ran).
    pub right_sorted: Gauge,
    /// Left rows joined.
    pub input_rows: Count,
    /// Left rows matched by the streaming merge.
    pub merge_rows: Count,
    /// Left rows matched by binary search in the per-key index.
    pub index_rows: Count,
    /// Time matching.
    pub join_time: Time,
    /// Output rows and total compute time.
    pub baseline: BaselineMetrics,
}

impl AsofJoinMetrics {
    /// Registers partition `partition`'s metrics in `metrics`.
    pub(super) fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let count = |name| MetricBuilder::new(metrics).counter(name, partition);
        Self {
            build_time: MetricBuilder::new(metrics).subset_time("build_time", partition),
            build_input_rows: count("build_input_rows"),
            build_mem_used: MetricBuilder::new(metrics)
                .gauge("build_mem_used", partition),
            right_sorted: MetricBuilder::new(metrics).gauge("right_sorted", partition),
            input_rows: count("input_rows"),
            merge_rows: count("merge_rows"),
            index_rows: count("index_rows"),
            join_time: MetricBuilder::new(metrics).subset_time("join_time", partition),
            baseline: BaselineMetrics::new(metrics, partition),
        }
    }
}
