//! [`HorizonJoinMetrics`]: what a HORIZON JOIN reports in `EXPLAIN ANALYZE`.

use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, Gauge, MetricBuilder, Time,
};

/// One partition's metrics of a [`HorizonJoinExec`](super::HorizonJoinExec).
#[derive(Debug, Clone)]
pub(super) struct HorizonJoinMetrics {
    /// Time draining the right inputs into their timelines.
    pub build_time: Time,
    /// Bytes the timelines hold.
    pub build_mem_used: Gauge,
    /// Left rows joined.
    pub input_rows: Count,
    /// (left row, offset, right table) lookups.
    pub lookups: Count,
    /// Time matching.
    pub join_time: Time,
    /// Output rows and total compute time.
    pub baseline: BaselineMetrics,
}

impl HorizonJoinMetrics {
    /// Registers partition `partition`'s metrics in `metrics`.
    pub(super) fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let count = |name| MetricBuilder::new(metrics).counter(name, partition);
        Self {
            build_time: MetricBuilder::new(metrics).subset_time("build_time", partition),
            build_mem_used: MetricBuilder::new(metrics)
                .gauge("build_mem_used", partition),
            input_rows: count("input_rows"),
            lookups: count("lookups"),
            join_time: MetricBuilder::new(metrics).subset_time("join_time", partition),
            baseline: BaselineMetrics::new(metrics, partition),
        }
    }
}
