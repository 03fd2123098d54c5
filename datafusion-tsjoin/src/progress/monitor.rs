//! [`ProgressHandle`]: reads a running plan's live metrics into
//! [`ProgressSnapshot`]s. Nothing in the operators changes: every
//! DataFusion operator (and tsjoin's) keeps atomic counters and start/end
//! timestamps that can be read while the query runs.

use super::snapshot::{OperatorProgress, OperatorState, ProgressSnapshot};
use super::stage::{Stage, collect_stages};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::{MetricValue, MetricsSet};
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;

/// Metrics of rows an operator read from files itself, bypassing its scan
/// child (the inline aggregate's dictionary scan): they count as read.
const SOURCE_ROW_METRICS: &[&str] = &["dictionary_scan_rows", "page_scan_rows"];

/// No ETA is extrapolated from less than this fraction.
const ETA_MIN_FRACTION: f64 = 0.01;

/// Below 1 until the stream ends, whatever the sources say: blocking
/// operators above them may still have work after the last row is read.
const RUNNING_CAP: f64 = 0.99;

/// What a source (a leaf of the plan) will read, known before it runs.
#[derive(Debug)]
struct Source {
    plan: Arc<dyn ExecutionPlan>,
    /// Rows it reads in all, from its statistics (Parquet footers,
    /// in-memory batches), when known.
    rows: Option<u64>,
    /// Files (or file ranges) it scans; 0 for non-file sources.
    files: u64,
    /// Their size in bytes.
    bytes: u64,
}

/// Watches one execution of a plan; cheap to clone, safe to read from any
/// thread while the plan's stream is polled elsewhere.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion_tsjoin::progress::execute_with_progress;
/// use futures::TryStreamExt;
/// let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
/// let df = ctx.sql("SELECT count(*) FROM (VALUES (1), (2)) t(x)").await?;
/// let plan = df.create_physical_plan().await?;
/// let (stream, progress) = execute_with_progress(plan, ctx.task_ctx())?;
/// let _batches: Vec<_> = stream.try_collect().await?;
/// assert_eq!(progress.snapshot().fraction, 1.0);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ProgressHandle {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    plan: Arc<dyn ExecutionPlan>,
    sources: Vec<Source>,
    /// Sorts and temporal joins, whose work the sources do not show.
    stages: Vec<Stage>,
    start: Instant,
    /// Set by the stream when it returns its end.
    finished: AtomicBool,
    /// Set when the stream is dropped, ended or not.
    closed: AtomicBool,
    /// Wakes [`ProgressHandle::wait_closed`] when the stream ends or drops.
    notify: Notify,
    /// When it finished, and the last fraction reported (kept monotone).
    state: Mutex<(Option<Duration>, f64)>,
}

impl ProgressHandle {
    /// A handle over `plan`, whose execution starts now. Reads the
    /// sources' sizes from their statistics (no I/O: file scans carry
    /// the footers' row counts gathered when the table was planned).
    pub fn new(plan: Arc<dyn ExecutionPlan>) -> Self {
        let mut sources = vec![];
        collect_sources(&plan, &mut sources);
        let mut stages = vec![];
        collect_stages(&plan, &mut stages);
        Self {
            inner: Arc::new(Inner {
                plan,
                sources,
                stages,
                start: Instant::now(),
                finished: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                notify: Notify::new(),
                state: Mutex::new((None, 0.0)),
            }),
        }
    }

    /// Marks the execution finished: the next snapshots report 1.0.
    pub(crate) fn finish(&self) {
        let mut state = self.inner.state.lock();
        if state.0.is_none() {
            state.0 = Some(self.inner.start.elapsed());
        }
        self.inner.finished.store(true, Ordering::Release);
        self.inner.notify.notify_waiters();
    }

    /// Marks the stream dropped (ended, failed or cancelled): watchers stop.
    pub(crate) fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        self.inner.notify.notify_waiters();
    }

    /// Whether the stream has been dropped or has ended.
    pub fn is_closed(&self) -> bool {
        self.is_finished() || self.inner.closed.load(Ordering::Acquire)
    }

    /// Waits until the stream ends or is dropped, or `max` has passed.
    pub async fn wait_closed(&self, max: Duration) {
        let notified = self.inner.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.is_closed() {
            return;
        }
        let _ = tokio::time::timeout(max, notified).await;
    }

    /// Whether the stream has ended.
    pub fn is_finished(&self) -> bool {
        self.inner.finished.load(Ordering::Acquire)
    }

    /// The plan being watched.
    pub fn plan(&self) -> &Arc<dyn ExecutionPlan> {
        &self.inner.plan
    }

    /// The progress now: reads every operator's metrics (a few atomic
    /// loads each).
    pub fn snapshot(&self) -> ProgressSnapshot {
        let inner = &self.inner;
        let now_ns = unix_nanos();
        let mut operators = vec![];
        let mut totals = Totals::default();
        walk(&inner.plan, 0, now_ns, false, &mut operators, &mut totals);

        let mut rows_read = totals.source_rows;
        let (mut bytes_total, mut rows_total) = (0u64, Some(0u64));
        let (mut weighted, mut weights) = (0.0, 0.0);
        // Sources of unknown size weigh as much as the average known one.
        let known: Vec<u64> = inner.sources.iter().filter_map(|s| s.rows).collect();
        let average = if known.is_empty() {
            1.0
        } else {
            (known.iter().sum::<u64>() as f64 / known.len() as f64).max(1.0)
        };
        let finished = self.is_finished();
        for (i, source) in inner.sources.iter().enumerate() {
            let m = read_source(source);
            let bypassed = totals.bypassed.get(i).copied().unwrap_or(false);
            // A source that counts no rows (in-memory batches) has read
            // them all once the stream has ended, unless an operator above
            // read them itself (and counted them).
            rows_read += match m.rows {
                Some(r) => r,
                None if finished && !bypassed => source.rows.unwrap_or(0),
                None => 0,
            };
            let live_rows = m.rows.unwrap_or(0);
            bytes_total += source.bytes;
            rows_total = rows_total.zip(source.rows).map(|(a, b)| a + b);
            let by_rows = source
                .rows
                .filter(|&t| t > 0)
                .map(|t| live_rows as f64 / t as f64);
            let by_files = (source.files > 0)
                .then(|| m.files_processed as f64 / source.files as f64);
            let fraction = if m.done {
                1.0
            } else {
                by_rows
                    .into_iter()
                    .chain(by_files)
                    .fold(0.0, f64::max)
                    .min(1.0)
            };
            let weight = source.rows.map_or(average, |r| r.max(1) as f64);
            weighted += weight * fraction;
            weights += weight;
        }
        // Sources that bypassed their scan (dictionary scan) count toward it.
        if let Some(t) = rows_total.filter(|&t| t > 0) {
            let by_rows = (rows_read as f64 / t as f64).min(1.0);
            if weights > 0.0 && by_rows > weighted / weights {
                weighted = by_rows * weights;
            }
        }

        let mut state = inner.state.lock();
        let elapsed = state.0.unwrap_or_else(|| inner.start.elapsed());
        let fraction = if finished {
            1.0
        } else {
            let read = if weights > 0.0 {
                weighted / weights
            } else {
                0.0
            };
            // The sources count as one pass over the data, each large
            // stage as another.
            let (mut done, mut passes) = (read, 1.0);
            for stage in &inner.stages {
                let (fraction, weight) = stage.progress(rows_total);
                done += weight * fraction;
                passes += weight;
            }
            (done / passes).min(RUNNING_CAP).max(state.1)
        };
        state.1 = fraction;
        drop(state);
        let eta = (!finished && fraction >= ETA_MIN_FRACTION)
            .then(|| elapsed.mul_f64((1.0 - fraction) / fraction));
        ProgressSnapshot {
            rows_read,
            rows_total,
            bytes_read: totals.bytes_scanned,
            bytes_total: (bytes_total > 0).then_some(bytes_total),
            fraction,
            elapsed,
            eta: if finished { Some(Duration::ZERO) } else { eta },
            finished,
            operators,
        }
    }
}

/// Live counts of one source.
struct SourceMetrics {
    /// Output rows (None when the source counts none).
    rows: Option<u64>,
    files_processed: u64,
    done: bool,
}

fn read_source(source: &Source) -> SourceMetrics {
    let Some(metrics) = source.plan.metrics() else {
        return SourceMetrics {
            rows: None,
            files_processed: 0,
            done: false,
        };
    };
    let (starts, ends) = start_end_counts(&metrics);
    SourceMetrics {
        rows: metrics.output_rows().map(|r| r as u64),
        files_processed: metrics
            .sum_by_name("files_processed")
            .map_or(0, |v| v.as_usize()) as u64,
        done: starts > 0 && ends == starts,
    }
}

/// The leaves of `plan`, with what their statistics and file groups say
/// they will read.
fn collect_sources(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<Source>) {
    let children = plan.children();
    if !children.is_empty() {
        for child in children {
            collect_sources(child, out);
        }
        return;
    }
    let rows = StatisticsContext::new()
        .compute(plan.as_ref(), &StatisticsArgs::new())
        .ok()
        .and_then(|s| s.num_rows.get_value().map(|&r| r as u64));
    let (mut files, mut bytes) = (0u64, 0u64);
    if let Some(config) = plan
        .downcast_ref::<DataSourceExec>()
        .and_then(|d| d.data_source().downcast_ref::<FileScanConfig>())
    {
        for file in config.file_groups.iter().flat_map(|g| g.files()) {
            files += 1;
            bytes += match &file.range {
                Some(r) => (r.end - r.start).max(0) as u64,
                None => file.object_meta.size,
            };
        }
    }
    out.push(Source {
        plan: Arc::clone(plan),
        rows,
        files,
        bytes,
    });
}

/// Counts summed over the whole plan.
#[derive(Default)]
struct Totals {
    /// Rows operators read from files themselves (`SOURCE_ROW_METRICS`).
    source_rows: u64,
    /// Parquet `bytes_scanned`.
    bytes_scanned: u64,
    /// Per source (leaf, in pre-order), whether an operator above it read
    /// its rows itself.
    bypassed: Vec<bool>,
}

/// Reads every operator's metrics, in pre-order.
fn walk(
    plan: &Arc<dyn ExecutionPlan>,
    depth: usize,
    now_ns: u64,
    bypassed: bool,
    out: &mut Vec<OperatorProgress>,
    totals: &mut Totals,
) {
    // A priority gate only passes its input on: shown as what it gates.
    if let Some(gate) = plan.downcast_ref::<crate::priority::PriorityGateExec>() {
        return walk(gate.input(), depth, now_ns, bypassed, out, totals);
    }
    let before = totals.source_rows;
    out.push(operator(plan, depth, now_ns, totals));
    let bypassed = bypassed || totals.source_rows > before;
    let children = plan.children();
    if children.is_empty() {
        totals.bypassed.push(bypassed);
    }
    for child in children {
        walk(child, depth + 1, now_ns, bypassed, out, totals);
    }
}

fn operator(
    plan: &Arc<dyn ExecutionPlan>,
    depth: usize,
    now_ns: u64,
    totals: &mut Totals,
) -> OperatorProgress {
    let mut op = OperatorProgress {
        depth,
        name: plan.name().to_string(),
        state: OperatorState::NotStarted,
        output_rows: 0,
        partitions: 0,
        span: Duration::ZERO,
        compute: Duration::ZERO,
    };
    let Some(metrics) = plan.metrics() else {
        return op;
    };
    let (mut first_start, mut last_end) = (u64::MAX, 0u64);
    let (mut starts, mut ends, mut moved) = (0usize, 0usize, false);
    for metric in metrics.iter() {
        let value = metric.value();
        match value {
            MetricValue::StartTimestamp(_) => {
                starts += 1;
                let ns = value.as_usize() as u64;
                if ns > 0 {
                    first_start = first_start.min(ns);
                }
            }
            MetricValue::EndTimestamp(_) => {
                let ns = value.as_usize() as u64;
                if ns > 0 {
                    ends += 1;
                    last_end = last_end.max(ns);
                }
            }
            MetricValue::OutputRows(c) => {
                op.output_rows += c.value() as u64;
                moved |= c.value() > 0;
            }
            MetricValue::ElapsedCompute(t) => {
                op.compute += Duration::from_nanos(t.value() as u64);
                moved |= t.value() > 0;
            }
            MetricValue::Count { name, count } => {
                moved |= count.value() > 0;
                if name == "bytes_scanned" {
                    totals.bytes_scanned += count.value() as u64;
                } else if SOURCE_ROW_METRICS.contains(&name.as_ref()) {
                    totals.source_rows += count.value() as u64;
                }
            }
            MetricValue::Time { time, .. } => moved |= time.value() > 0,
            _ => {}
        }
    }
    op.partitions = starts;
    op.state = if starts > 0 && ends >= starts {
        OperatorState::Done
    } else if moved {
        OperatorState::Running
    } else {
        OperatorState::NotStarted
    };
    if first_start != u64::MAX && op.state != OperatorState::NotStarted {
        let end = if op.state == OperatorState::Done {
            last_end
        } else {
            now_ns
        };
        op.span = Duration::from_nanos(end.saturating_sub(first_start));
    }
    op
}

/// Start timestamps registered and end timestamps recorded.
fn start_end_counts(metrics: &MetricsSet) -> (usize, usize) {
    metrics.iter().fold((0, 0), |(s, e), m| match m.value() {
        MetricValue::StartTimestamp(_) => (s + 1, e),
        v @ MetricValue::EndTimestamp(_) if v.as_usize() > 0 => (s, e + 1),
        _ => (s, e),
    })
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
