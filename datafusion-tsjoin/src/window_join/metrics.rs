//! [`WindowJoinMetrics`]: what a WINDOW JOIN reports in `EXPLAIN ANALYZE`,
//! under DataFusion's join metric names (`build_time`, `build_input_rows`,
//! `build_mem_used`, `input_batches`, `input_rows`, `join_time`, and the
//! baseline `output_rows` and `elapsed_compute`).

use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, Gauge, MetricBuilder, Time,
};

/// One partition's metrics of a [`WindowJoinExec`](super::WindowJoinExec).
#[derive(Debug, Clone)]
pub(super) struct WindowJoinMetrics {
    /// Time building the right index, from the first right batch to the
    /// assembled index (recorded by the partition that builds it).
    pub build_time: Time,
    /// Right rows indexed (after the right-only ON filter).
    pub build_input_rows: Count,
    /// Bytes the right index holds.
    pub build_mem_used: Gauge,
    /// Left batches joined.
    pub input_batches: Count,
    /// Left rows joined.
    pub input_rows: Count,
    /// Time finding windows and aggregating them.
    pub join_time: Time,
    /// Output rows and total compute time.
    pub baseline: BaselineMetrics,
}

impl WindowJoinMetrics {
    /// Registers partition `partition`'s metrics in `metrics`.
    pub(super) fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let build = |name| MetricBuilder::new(metrics).counter(name, partition);
        Self {
            build_time: MetricBuilder::new(metrics).subset_time("build_time", partition),
            build_input_rows: build("build_input_rows"),
            build_mem_used: MetricBuilder::new(metrics)
                .gauge("build_mem_used", partition),
            input_batches: build("input_batches"),
            input_rows: build("input_rows"),
            join_time: MetricBuilder::new(metrics).subset_time("join_time", partition),
            baseline: BaselineMetrics::new(metrics, partition),
        }
    }
}
