//! Metrics helpers shared by the temporal joins' streams.

use datafusion::physical_plan::metrics::{BaselineMetrics, Time};
use std::time::Instant;

/// Adds the time since `start` to a join's `join_time` and to its
/// `elapsed_compute` (the join phase is the operator's own compute).
///
/// ```ignore
/// let start = Instant::now();
/// let out = self.join_batch(left);
/// record_join_time(&self.metrics.join_time, &self.metrics.baseline, start);
/// ```
pub(crate) fn record_join_time(
    join_time: &Time,
    baseline: &BaselineMetrics,
    start: Instant,
) {
    let elapsed = start.elapsed();
    join_time.add_duration(elapsed);
    baseline.elapsed_compute().add_duration(elapsed);
}
