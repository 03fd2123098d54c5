//! `to_arrow(progress=...)`: a bar on `sys.stderr` (`progress=True`) or
//! snapshots passed to a Python callable, taken on the thread that waits
//! for the query (with the GIL, every 100 ms), from a
//! [`ProgressHandle`] beside the query's stream.

use datafusion_tsjoin::progress::{ProgressHandle, ProgressSnapshot};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::time::{Duration, Instant};

/// Snapshots per second at most.
const EVERY: Duration = Duration::from_millis(100);

/// Width of the bar in cells.
const BAR_WIDTH: usize = 30;

/// What `progress=` asked for.
pub enum Reporter {
    /// A bar on `sys.stderr`, redrawn in place (`\r`), as a terminal and
    /// Jupyter's stderr stream both show it.
    Bar,
    /// A callable taking one `dict` per snapshot.
    Callback(Py<PyAny>),
}

impl Reporter {
    /// `None` for `progress=None`/`False`, a bar for `True`, else the
    /// callable.
    pub fn from_arg(arg: Option<Bound<'_, PyAny>>) -> PyResult<Option<Self>> {
        let Some(arg) = arg else { return Ok(None) };
        if arg.is_none() {
            return Ok(None);
        }
        if let Ok(flag) = arg.extract::<bool>() {
            return Ok(flag.then_some(Self::Bar));
        }
        if !arg.is_callable() {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "progress must be True, False, None or a callable taking a dict",
            ));
        }
        Ok(Some(Self::Callback(arg.unbind())))
    }
}

/// Reports `handle` through `reporter`, at most every [`EVERY`].
pub struct Ticker {
    reporter: Reporter,
    handle: ProgressHandle,
    last: Option<Instant>,
}

impl Ticker {
    pub fn new(reporter: Reporter, handle: ProgressHandle) -> Self {
        Self {
            reporter,
            handle,
            last: None,
        }
    }

    /// Called while the query runs: reports when [`EVERY`] has passed.
    pub fn tick(&mut self, py: Python<'_>) -> PyResult<()> {
        if self.last.is_some_and(|t| t.elapsed() < EVERY) {
            return Ok(());
        }
        self.last = Some(Instant::now());
        self.report(py, &self.handle.snapshot())
    }

    /// Called once the stream has ended: the final (100%) snapshot.
    pub fn finish(&mut self, py: Python<'_>) -> PyResult<()> {
        let snapshot = self.handle.snapshot();
        self.report(py, &snapshot)?;
        if matches!(self.reporter, Reporter::Bar) {
            write_stderr(py, "\n")?;
        }
        Ok(())
    }

    fn report(&self, py: Python<'_>, s: &ProgressSnapshot) -> PyResult<()> {
        match &self.reporter {
            Reporter::Bar => write_stderr(py, &format!("\r{}", s.bar_line(BAR_WIDTH))),
            Reporter::Callback(f) => f.call1(py, (to_dict(py, s)?,)).map(|_| ()),
        }
    }
}

fn write_stderr(py: Python<'_>, text: &str) -> PyResult<()> {
    let stderr = py.import("sys")?.getattr("stderr")?;
    stderr.call_method1("write", (text,))?;
    stderr.call_method0("flush")?;
    Ok(())
}

/// A snapshot as a `dict`: `fraction`, `rows_read`, `rows_total`,
/// `bytes_read`, `bytes_total`, `elapsed` and `eta` (seconds), `finished`
/// and `operators` (a list of dicts: `name`, `depth`, `state`, `rows`,
/// `span`, `compute`).
fn to_dict<'py>(py: Python<'py>, s: &ProgressSnapshot) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("fraction", s.fraction)?;
    d.set_item("rows_read", s.rows_read)?;
    d.set_item("rows_total", s.rows_total)?;
    d.set_item("bytes_read", s.bytes_read)?;
    d.set_item("bytes_total", s.bytes_total)?;
    d.set_item("elapsed", s.elapsed.as_secs_f64())?;
    d.set_item("eta", s.eta.map(|e| e.as_secs_f64()))?;
    d.set_item("finished", s.finished)?;
    let mut ops = Vec::with_capacity(s.operators.len());
    for op in &s.operators {
        let o = PyDict::new(py);
        o.set_item("name", &op.name)?;
        o.set_item("depth", op.depth)?;
        o.set_item("state", op.state.to_string())?;
        o.set_item("rows", op.output_rows)?;
        o.set_item("span", op.span.as_secs_f64())?;
        o.set_item("compute", op.compute.as_secs_f64())?;
        ops.push(o);
    }
    d.set_item("operators", ops)?;
    Ok(d)
}
