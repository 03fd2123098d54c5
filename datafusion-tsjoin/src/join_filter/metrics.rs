//! What a [`super::LipFilterExec`] reports in EXPLAIN ANALYZE: per join
//! filter the rows it checked and kept, its time and whether the prober
//! switched it off.
//!
//! EXPLAIN ANALYZE sums metrics of the same name over partitions and drops
//! their labels, so each filter's metrics carry its key in their names
//! (`lo_custkey.rows_in`); the kind, size and final order, which are not
//! sums, are in the operator's line instead.

use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, Label, MetricBuilder, Time,
};

/// One join filter's metrics in one partition.
#[derive(Debug, Clone)]
pub(crate) struct FilterMetrics {
    pub(crate) rows_in: Count,
    pub(crate) rows_out: Count,
    pub(crate) time: Time,
    /// 1 per partition whose prober switched the filter off (it dropped
    /// almost nothing).
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
        let name = |what: &str| format!("{key}.{what}");
        Self {
            rows_in: builder().counter(name("rows_in"), partition),
            rows_out: builder().counter(name("rows_out"), partition),
            time: builder().subset_time(name("time"), partition),
            switched_off: builder().counter(name("switched_off"), partition),
        }
    }
}
