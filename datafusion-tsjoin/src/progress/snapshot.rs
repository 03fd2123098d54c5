//! [`ProgressSnapshot`]: what a [`super::ProgressHandle`] reports at one
//! moment, and its text renderings (the CLI's bar and operator tree).

use std::fmt::Write;
use std::time::Duration;

/// Where one operator of the plan is, read from its live metrics.
///
/// ```
/// use datafusion_tsjoin::progress::OperatorState;
/// assert_eq!(OperatorState::Running.to_string(), "running");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorState {
    /// No metric of the operator has moved yet.
    NotStarted,
    /// Some metric moved and not every partition has finished.
    Running,
    /// Every partition that started has recorded its end.
    Done,
}

impl std::fmt::Display for OperatorState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NotStarted => "not started",
            Self::Running => "running",
            Self::Done => "done",
        })
    }
}

/// One operator of the plan in a [`ProgressSnapshot`] (Quickstep's Fig. 12
/// row: state, span and effective concurrency).
///
/// ```
/// # use datafusion_tsjoin::progress::{OperatorProgress, OperatorState};
/// # use std::time::Duration;
/// let op = OperatorProgress { depth: 0, name: "SortExec".into(),
///     state: OperatorState::Done, output_rows: 10, partitions: 2,
///     span: Duration::from_secs(2), compute: Duration::from_secs(3) };
/// assert_eq!(op.effective_concurrency(), Some(1.5));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorProgress {
    /// Depth in the plan tree (the root is 0).
    pub depth: usize,
    /// The operator's name (`ExecutionPlan::name`).
    pub name: String,
    /// Not started, running or done.
    pub state: OperatorState,
    /// Rows the operator has produced so far, over all partitions.
    pub output_rows: u64,
    /// Partitions whose streams have started.
    pub partitions: usize,
    /// From its first partition's start to its last one's end (or now).
    pub span: Duration,
    /// CPU time its partitions report (`elapsed_compute`), summed.
    pub compute: Duration,
}

impl OperatorProgress {
    /// Compute time over span: how many threads the operator kept busy on
    /// average (None before any span).
    pub fn effective_concurrency(&self) -> Option<f64> {
        (!self.span.is_zero())
            .then(|| self.compute.as_secs_f64() / self.span.as_secs_f64())
    }
}

/// The progress of a running plan at one moment.
///
/// `fraction` is monotone over a handle's snapshots and is exactly 1.0
/// once (and only once) the stream has ended.
///
/// ```
/// # use datafusion_tsjoin::progress::ProgressSnapshot;
/// let s = ProgressSnapshot::default();
/// assert_eq!(s.fraction, 0.0);
/// assert!(!s.finished);
/// assert!(s.bar_line(20).contains("0.0%"));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProgressSnapshot {
    /// Rows the plan's sources have read (scans' output rows, plus rows an
    /// operator read from files itself, as the inline aggregate's
    /// dictionary scan does).
    pub rows_read: u64,
    /// Rows the sources will read in all, when every source knows its size
    /// (Parquet footers, in-memory tables); None when some does not.
    pub rows_total: Option<u64>,
    /// Bytes the Parquet scans have fetched (only the columns they read).
    pub bytes_read: u64,
    /// Size of the files the plan scans, when it scans files.
    pub bytes_total: Option<u64>,
    /// Estimated fraction of the work done, in `[0, 1]`: the sources'
    /// fractions weighted by their rows; below 1 until the stream ends.
    pub fraction: f64,
    /// Time since the stream was created.
    pub elapsed: Duration,
    /// Estimated time left (elapsed × (1 − fraction) / fraction), once the
    /// fraction is worth extrapolating.
    pub eta: Option<Duration>,
    /// Whether the stream has ended (its last batch was returned).
    pub finished: bool,
    /// Every operator of the plan, in pre-order.
    pub operators: Vec<OperatorProgress>,
}

impl ProgressSnapshot {
    /// One line for a terminal: a bar of `width` cells, the percentage,
    /// rows, bytes, elapsed time and ETA.
    ///
    /// ```
    /// # use datafusion_tsjoin::progress::ProgressSnapshot;
    /// let s = ProgressSnapshot { fraction: 0.5, rows_read: 1500, rows_total: Some(3000),
    ///     ..Default::default() };
    /// let line = s.bar_line(10);
    /// assert!(line.starts_with("[#####     ]  50.0%"), "{line}");
    /// assert!(line.contains("1.5K/3.0K rows"), "{line}");
    /// ```
    pub fn bar_line(&self, width: usize) -> String {
        let filled = ((self.fraction * width as f64).floor() as usize).min(width);
        let mut s = String::with_capacity(width + 80);
        s.push('[');
        s.extend(std::iter::repeat_n('#', filled));
        s.extend(std::iter::repeat_n(' ', width - filled));
        let _ = write!(s, "] {:5.1}% ", self.fraction * 100.0);
        match self.rows_total {
            Some(t) => {
                let _ = write!(s, "{}/{} rows", si(self.rows_read), si(t));
            }
            None => {
                let _ = write!(s, "{} rows", si(self.rows_read));
            }
        }
        if self.bytes_read > 0 {
            let _ = write!(s, ", {} read", bytes(self.bytes_read));
        }
        let _ = write!(s, ", {}", clock(self.elapsed));
        if let Some(eta) = self.eta.filter(|_| !self.finished) {
            let _ = write!(s, ", ETA {}", clock(eta));
        }
        s
    }

    /// The plan as an indented tree, one operator per line with its state,
    /// rows, span and effective concurrency.
    ///
    /// ```
    /// # use datafusion_tsjoin::progress::{OperatorProgress, OperatorState, ProgressSnapshot};
    /// # use std::time::Duration;
    /// let op = OperatorProgress { depth: 1, name: "DataSourceExec".into(),
    ///     state: OperatorState::Running, output_rows: 8192, partitions: 2,
    ///     span: Duration::from_millis(1500), compute: Duration::from_millis(2400) };
    /// let s = ProgressSnapshot { operators: vec![op], ..Default::default() };
    /// assert_eq!(s.operator_tree(), "  DataSourceExec  running  8.2K rows  0:01.5  x1.6\n");
    /// ```
    pub fn operator_tree(&self) -> String {
        let mut s = String::new();
        for op in &self.operators {
            let _ = write!(
                s,
                "{:indent$}{}  {}  {} rows",
                "",
                op.name,
                op.state,
                si(op.output_rows),
                indent = op.depth * 2
            );
            if op.state != OperatorState::NotStarted {
                let _ = write!(s, "  {}", clock(op.span));
                if let Some(c) = op.effective_concurrency() {
                    let _ = write!(s, "  x{c:.1}");
                }
            }
            s.push('\n');
        }
        s
    }
}

/// `n` with a K/M/G suffix.
fn si(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}K", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}M", n as f64 / 1e6),
        _ => format!("{:.1}G", n as f64 / 1e9),
    }
}

/// Bytes in KiB/MiB/GiB.
fn bytes(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / 1024.0),
        1_048_576..1_073_741_824 => format!("{:.1} MiB", n as f64 / 1_048_576.0),
        _ => format!("{:.1} GiB", n as f64 / 1_073_741_824.0),
    }
}

/// `m:ss.t`.
fn clock(d: Duration) -> String {
    let tenths = d.as_millis() / 100;
    format!("{}:{:02}.{}", tenths / 600, (tenths / 10) % 60, tenths % 10)
}
