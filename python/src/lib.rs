//! `tsjoin._tsjoin`: the native half of the `tsjoin` Python package.
//!
//! Two classes: [`PySessionContext`] (register data, run SQL, settings) and
//! [`QueryResult`] (a planned query, turned into Arrow, pandas or polars on
//! demand, or streamed). Every wait on the engine releases the GIL and
//! checks for signals every 50 ms, so Ctrl-C raises `KeyboardInterrupt` and
//! drops (cancels) the query. Arrow data crosses the boundary through the
//! Arrow C data/stream interfaces (`arrow-pyarrow`), without copies.

use arrow::array::{RecordBatch, RecordBatchReader};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::ffi_stream::ArrowArrayStreamReader;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use arrow::util::pretty::{pretty_format_batches, pretty_format_batches_with_schema};
use arrow_pyarrow::{FromPyArrow, IntoPyArrow, ToPyArrow};
use datafusion::datasource::MemTable;
use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::prelude::{
    CsvReadOptions, DataFrame, ParquetReadOptions, SessionConfig, SessionContext,
};
use datafusion_tsjoin::{TsJoinContextExt, TsJoinSessionStateBuilderExt};
use futures::{FutureExt, StreamExt};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

mod progress;

create_exception!(
    _tsjoin,
    TsJoinError,
    PyException,
    "Base class of tsjoin's errors."
);
create_exception!(
    _tsjoin,
    SQLError,
    TsJoinError,
    "The SQL did not parse or plan (syntax, unknown table or column, types)."
);
create_exception!(
    _tsjoin,
    ExecutionError,
    TsJoinError,
    "The query failed while running (I/O, bad data, memory budget)."
);

/// Rows per partition slice when registering in-memory data.
const SLICE_ROWS: usize = 64 * 1024;

/// The engine's tokio runtime, shared by all sessions.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("tsjoin")
            .build()
            .expect("tokio runtime")
    })
}

/// A Python exception for an engine error: [`SQLError`] for parse, plan
/// and schema errors, [`ExecutionError`] for the rest.
fn py_err(e: DataFusionError) -> PyErr {
    let message = e.to_string();
    match e.find_root() {
        DataFusionError::SQL(..)
        | DataFusionError::Plan(_)
        | DataFusionError::SchemaError(..)
        | DataFusionError::NotImplemented(_) => SQLError::new_err(message),
        _ => ExecutionError::new_err(message),
    }
}

fn arrow_err(e: ArrowError) -> PyErr {
    py_err(DataFusionError::ArrowError(Box::new(e), None))
}

/// Runs `fut` to completion on the engine's runtime while this thread
/// waits without the GIL, waking every 50 ms to let Python handle signals:
/// a `KeyboardInterrupt` aborts the task, which drops (cancels) the query.
/// The wait is a channel, not a tokio timer, so it wakes even when every
/// worker is busy. A panic in the engine (a bug, or a reader tripping over
/// corrupt data) becomes an [`ExecutionError`] instead of taking the
/// interpreter down.
fn wait<F>(py: Python<'_>, fut: F) -> PyResult<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    wait_ticking(py, fut, |_| Ok(()))
}

/// [`wait`], calling `tick` (with the GIL) at every wake-up: progress
/// reports ride on the signal checks.
fn wait_ticking<F>(
    py: Python<'_>,
    fut: F,
    mut tick: impl FnMut(Python<'_>) -> PyResult<()>,
) -> PyResult<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let task = runtime().spawn(async move {
        let _ = tx.send(AssertUnwindSafe(fut).catch_unwind().await);
    });
    let mut rx = Some(rx);
    loop {
        // (The receiver is not `Sync`: it moves into the GIL-free closure and back.)
        let waiting = rx.take().expect("receiver");
        let (got, back) =
            py.detach(move || (waiting.recv_timeout(Duration::from_millis(50)), waiting));
        rx = Some(back);
        match got {
            Ok(Ok(out)) => return Ok(out),
            Ok(Err(panic)) => {
                let what = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("unknown panic");
                return Err(ExecutionError::new_err(format!(
                    "internal error (the engine panicked): {what}"
                )));
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals().and_then(|()| tick(py)) {
                    task.abort();
                    return Err(e);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(ExecutionError::new_err("query task ended without a result"));
            }
        }
    }
}

/// Runs `df` to completion, reporting its progress through `reporter`.
fn collect_with_progress(
    py: Python<'_>,
    df: DataFrame,
    reporter: progress::Reporter,
) -> PyResult<Vec<RecordBatch>> {
    let (stream, handle) = wait(py, async move {
        let task = df.task_ctx();
        let plan = df.create_physical_plan().await?;
        datafusion_tsjoin::progress::execute_with_progress(plan, Arc::new(task))
    })?
    .map_err(py_err)?;
    let mut ticker = progress::Ticker::new(reporter, handle);
    let batches =
        wait_ticking(py, async move { stream.collect::<Vec<_>>().await }, |py| {
            ticker.tick(py)
        })?;
    let batches = batches
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(py_err)?;
    ticker.finish(py)?;
    Ok(batches)
}

/// A tsjoin session: DataFusion with WINDOW JOIN and the inline GROUP BY.
#[pyclass(name = "SessionContext", module = "tsjoin._tsjoin", frozen)]
struct PySessionContext {
    ctx: SessionContext,
}

#[pymethods]
impl PySessionContext {
    #[new]
    #[pyo3(signature = (threads=None, memory_limit=None, settings=None, spill_dir=None, cluster=None))]
    fn new(
        py: Python<'_>,
        threads: Option<usize>,
        memory_limit: Option<usize>,
        settings: Option<HashMap<String, String>>,
        spill_dir: Option<std::path::PathBuf>,
        cluster: Option<String>,
    ) -> PyResult<Self> {
        // information_schema on, as in `tsjoin_context`: SHOW TABLES and
        // SHOW COLUMNS work.
        let mut config = SessionConfig::new().with_information_schema(true);
        if let Some(n) = threads {
            if n == 0 {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "threads must be at least 1",
                ));
            }
            config = config.with_target_partitions(n);
        }
        if let Some(url) = cluster {
            // Queries run on the cluster's executors, which have their own
            // memory limits and spill directories.
            if memory_limit.is_some() || spill_dir.is_some() {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "memory_limit and spill_dir are the executors' settings on a cluster",
                ));
            }
            let ctx = wait(py, async move {
                tsjoin_ballista::cluster_context(&url, config).await
            })?
            .map_err(py_err)?;
            let this = Self { ctx };
            for (key, value) in settings.unwrap_or_default() {
                this.set(&key, &value)?;
            }
            return Ok(this);
        }
        let mut runtime_env = RuntimeEnvBuilder::new();
        if let Some(bytes) = memory_limit {
            runtime_env = runtime_env.with_memory_limit(bytes, 1.0);
        }
        if let Some(dir) = spill_dir {
            std::fs::create_dir_all(&dir).map_err(|e| py_err(e.into()))?;
            runtime_env = runtime_env.with_temp_file_path(dir);
        }
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime_env.build_arc().map_err(py_err)?)
            .with_default_features()
            .with_tsjoin()
            .build();
        let this = Self {
            ctx: SessionContext::new_with_state(state),
        };
        for (key, value) in settings.unwrap_or_default() {
            this.set(&key, &value)?;
        }
        Ok(this)
    }

    /// Sets a session setting (`tsjoin.*` or `datafusion.*`), as SQL's SET.
    fn set(&self, key: &str, value: &str) -> PyResult<()> {
        let state = self.ctx.state_ref();
        let mut state = state.write();
        state
            .config_mut()
            .options_mut()
            .set(key, value)
            .map_err(py_err)
    }

    /// The value of a session setting, as a string.
    fn get(&self, key: &str) -> PyResult<String> {
        let options = self.ctx.copied_config().options().entries();
        options
            .into_iter()
            .find(|e| e.key == key)
            .map(|e| e.value.unwrap_or_default())
            .ok_or_else(|| SQLError::new_err(format!("unknown setting {key}")))
    }

    /// Registers a Parquet file or a directory of Parquet files as `name`.
    #[pyo3(signature = (name, path, timestamp=None))]
    fn register_parquet(
        &self,
        py: Python<'_>,
        name: &str,
        path: &str,
        timestamp: Option<&str>,
    ) -> PyResult<()> {
        let (ctx, table, path) = (self.ctx.clone(), name.to_string(), path.to_string());
        wait(py, async move {
            // A corrupt footer would panic the reader: reported by name.
            datafusion_tsjoin::files::check_parquet_files(std::path::Path::new(&path))?;
            ctx.register_parquet(&table, &path, ParquetReadOptions::default())
                .await
        })?
        .map_err(py_err)?;
        self.designate(name, timestamp)
    }

    /// Registers a CSV file (with a header) as `name`.
    #[pyo3(signature = (name, path, timestamp=None))]
    fn register_csv(
        &self,
        py: Python<'_>,
        name: &str,
        path: &str,
        timestamp: Option<&str>,
    ) -> PyResult<()> {
        let (ctx, table, path) = (self.ctx.clone(), name.to_string(), path.to_string());
        wait(py, async move {
            ctx.register_csv(&table, &path, CsvReadOptions::new()).await
        })?
        .map_err(py_err)?;
        self.designate(name, timestamp)
    }

    /// Registers in-memory Arrow data as `name`: any object with
    /// `__arrow_c_stream__` (pyarrow Table or RecordBatchReader, polars
    /// DataFrame, ...). Buffers are shared, not copied.
    #[pyo3(signature = (name, data, timestamp=None))]
    fn register_arrow(
        &self,
        name: &str,
        data: &Bound<'_, PyAny>,
        timestamp: Option<&str>,
    ) -> PyResult<()> {
        let reader = ArrowArrayStreamReader::from_pyarrow_bound(data)?;
        let schema = reader.schema();
        let batches = reader
            .collect::<Result<Vec<RecordBatch>, _>>()
            .map_err(arrow_err)?;
        let partitions =
            partition(&batches, self.ctx.copied_config().target_partitions());
        let table = MemTable::try_new(schema, partitions).map_err(py_err)?;
        self.ctx
            .register_table(name, Arc::new(table))
            .map_err(py_err)?;
        self.designate(name, timestamp)
    }

    /// Drops a registered table (no error when there is none).
    fn deregister(&self, name: &str) -> PyResult<()> {
        self.ctx.deregister_table(name).map_err(py_err)?;
        Ok(())
    }

    /// Names the designated timestamp column of a registered table.
    fn set_designated_timestamp(&self, table: &str, column: &str) -> PyResult<()> {
        self.ctx
            .set_designated_timestamp(table, column)
            .map_err(py_err)
    }

    /// Plans `query` (statements separated by `;`; DDL, SET and COPY ... TO
    /// run now). `priority` ("high", "normal", "low" or an int) ranks this
    /// query against the others running in the process, overriding the
    /// session's `tsjoin.priority`: while a higher one runs it pauses.
    #[pyo3(signature = (query, priority=None))]
    fn sql(
        &self,
        py: Python<'_>,
        query: &str,
        priority: Option<Bound<'_, PyAny>>,
    ) -> PyResult<QueryResult> {
        let priority = priority
            .map(|p| {
                p.str()?
                    .to_string()
                    .parse::<datafusion_tsjoin::priority::Priority>()
                    .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
            })
            .transpose()?;
        let ctx = self.ctx.clone();
        let query = query.to_string();
        let df = wait(py, async move {
            let df = ctx.tsjoin_sql(&query).await?;
            let df = match priority {
                Some(p) => {
                    let (mut state, plan) = df.into_parts();
                    state
                        .config_mut()
                        .options_mut()
                        .set("tsjoin.priority", &p.to_string())?;
                    DataFrame::new(state, plan)
                }
                None => df,
            };
            // A COPY that waited for a conversion would write nothing when
            // its result is dropped unread: run it now, as DDL runs, and
            // keep the row count it returns.
            if matches!(df.logical_plan(), LogicalPlan::Copy(_)) {
                let counts = df.collect().await?;
                return ctx.read_batches(counts);
            }
            Ok(df)
        })?
        .map_err(py_err)?;
        Ok(QueryResult { df })
    }

    /// Names of the registered tables.
    fn tables(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .ctx
            .catalog("datafusion")
            .and_then(|c| c.schema("public"))
            .map(|s| s.table_names())
            .unwrap_or_default();
        names.sort();
        names
    }
}

impl PySessionContext {
    fn designate(&self, name: &str, timestamp: Option<&str>) -> PyResult<()> {
        match timestamp {
            Some(column) => self
                .ctx
                .set_designated_timestamp(name, column)
                .map_err(py_err),
            None => Ok(()),
        }
    }
}

/// Splits batches into `n` partitions of whole slices of at most
/// [`SLICE_ROWS`] rows (zero-copy), round robin, so scans run in parallel.
fn partition(batches: &[RecordBatch], n: usize) -> Vec<Vec<RecordBatch>> {
    let n = n.max(1);
    let mut parts: Vec<Vec<RecordBatch>> = vec![vec![]; n];
    let mut i = 0;
    for b in batches {
        for start in (0..b.num_rows()).step_by(SLICE_ROWS) {
            parts[i % n].push(b.slice(start, SLICE_ROWS.min(b.num_rows() - start)));
            i += 1;
        }
    }
    parts
}

/// A planned query. Each conversion runs it (again).
#[pyclass(name = "Result", module = "tsjoin._tsjoin", frozen)]
struct QueryResult {
    df: DataFrame,
}

#[pymethods]
impl QueryResult {
    /// The result's schema, as a `pyarrow.Schema`.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.df.schema().as_arrow().to_pyarrow(py)
    }

    /// Runs the query; all rows as a `pyarrow.Table`. `progress=True`
    /// draws a bar on `sys.stderr`; a callable gets a `dict` snapshot
    /// (`fraction`, `rows_read`, `rows_total`, `elapsed`, `eta`,
    /// `operators`, ...) every 100 ms and once at the end.
    #[pyo3(signature = (progress=None))]
    fn to_arrow<'py>(
        &self,
        py: Python<'py>,
        progress: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let df = self.df.clone();
        let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
        let batches = match progress::Reporter::from_arg(progress)? {
            None => wait(py, async move { df.collect().await })?.map_err(py_err)?,
            Some(reporter) => collect_with_progress(py, df, reporter)?,
        };
        arrow_pyarrow::Table::try_new(batches, schema)
            .map_err(arrow_err)?
            .into_pyarrow(py)
    }

    /// Runs the query as a stream: a `pyarrow.RecordBatchReader` that
    /// computes batches as they are read.
    fn to_reader<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let df = self.df.clone();
        let stream =
            wait(py, async move { df.execute_stream().await })?.map_err(py_err)?;
        let reader: Box<dyn RecordBatchReader + Send> = Box::new(StreamReader {
            schema: stream.schema(),
            stream,
        });
        reader.into_pyarrow(py)
    }

    /// The Arrow PyCapsule stream interface: `pyarrow.table(result)`,
    /// `polars.DataFrame(result)`, DuckDB and others read it directly.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.to_reader(py)?
            .call_method1("__arrow_c_stream__", (requested_schema,))
    }

    /// Runs the query; a pandas DataFrame.
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.to_arrow(py, None)?.call_method0("to_pandas")
    }

    /// Runs the query; a polars DataFrame.
    fn to_polars<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let table = self.to_arrow(py, None)?;
        py.import("polars")?.call_method1("from_arrow", (table,))
    }

    /// The plan as text: logical and physical (with `analyze`, runs the
    /// query and shows the physical plan with its metrics).
    #[pyo3(signature = (analyze=false, verbose=false))]
    fn explain(&self, py: Python<'_>, analyze: bool, verbose: bool) -> PyResult<String> {
        let df = self.df.clone();
        let batches = wait(
            py,
            async move { df.explain(verbose, analyze)?.collect().await },
        )?
        .map_err(py_err)?;
        Ok(pretty_format_batches(&batches)
            .map_err(arrow_err)?
            .to_string())
    }

    /// Runs the query and prints its first `limit` rows as a table (and
    /// how many rows it has when there are more).
    #[pyo3(signature = (limit=20))]
    fn show(&self, py: Python<'_>, limit: usize) -> PyResult<()> {
        let (batches, more) = self.head(py, limit)?;
        let mut text = pretty_format_batches_with_schema(self.arrow_schema(), &batches)
            .map_err(arrow_err)?
            .to_string();
        if more {
            text.push_str(&format!("\n(first {limit} rows shown)"));
        }
        py.import("builtins")?.call_method1("print", (text,))?;
        Ok(())
    }

    /// The first rows as an HTML table: how Jupyter and other notebooks
    /// show a result that ends a cell.
    fn _repr_html_(&self, py: Python<'_>) -> PyResult<String> {
        let (batches, more) = self.head(py, HTML_ROWS)?;
        let schema = self.arrow_schema();
        let mut html = String::from("<table>\n<thead><tr>");
        for field in schema.fields() {
            html.push_str(&format!("<th>{}</th>", escape_html(field.name())));
        }
        html.push_str("</tr></thead>\n<tbody>\n");
        let options = FormatOptions::default().with_null("NULL");
        for batch in &batches {
            let formatters = batch
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
                .collect::<Result<Vec<_>, _>>()
                .map_err(arrow_err)?;
            for row in 0..batch.num_rows() {
                html.push_str("<tr>");
                for f in &formatters {
                    let cell = f.value(row).to_string();
                    html.push_str(&format!("<td>{}</td>", escape_html(&cell)));
                }
                html.push_str("</tr>\n");
            }
        }
        html.push_str("</tbody>\n</table>\n");
        if more {
            html.push_str(&format!("<p>first {HTML_ROWS} rows shown</p>\n"));
        }
        Ok(html)
    }

    fn __repr__(&self) -> String {
        let columns: Vec<String> = self
            .df
            .schema()
            .fields()
            .iter()
            .map(|f| format!("{}: {}", f.name(), f.data_type()))
            .collect();
        format!("tsjoin.Result({})", columns.join(", "))
    }
}

/// Rows an HTML repr shows.
const HTML_ROWS: usize = 20;

impl QueryResult {
    fn arrow_schema(&self) -> SchemaRef {
        Arc::new(self.df.schema().as_arrow().clone())
    }

    /// Runs the query for its first `n` rows; and whether there are more.
    fn head(&self, py: Python<'_>, n: usize) -> PyResult<(Vec<RecordBatch>, bool)> {
        let df = self.df.clone();
        let batches = wait(py, async move {
            df.limit(0, Some(n.saturating_add(1)))?.collect().await
        })?
        .map_err(py_err)?;
        let total: usize = batches.iter().map(|b| b.num_rows()).sum();
        let mut kept = vec![];
        let mut left = n;
        for b in batches {
            if left == 0 {
                break;
            }
            let take = left.min(b.num_rows());
            kept.push(b.slice(0, take));
            left -= take;
        }
        Ok((kept, total > n))
    }
}

fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A query's record batch stream as a blocking `RecordBatchReader` (what
/// pyarrow pulls through the C stream interface).
struct StreamReader {
    schema: SchemaRef,
    stream: SendableRecordBatchStream,
}

impl Iterator for StreamReader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        match runtime().block_on(AssertUnwindSafe(self.stream.next()).catch_unwind()) {
            Ok(next) => {
                next.map(|r| r.map_err(|e| ArrowError::ExternalError(Box::new(e))))
            }
            Err(_) => Some(Err(ArrowError::ComputeError(
                "internal error (the engine panicked)".into(),
            ))),
        }
    }
}

impl RecordBatchReader for StreamReader {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

/// The native module.
/// Starts a cluster scheduler and executors in this process; returns the
/// scheduler's `df://` address.
#[pyfunction]
fn start_local_cluster(
    py: Python<'_>,
    executors: usize,
    tasks_per_executor: usize,
) -> PyResult<String> {
    wait(py, async move {
        tsjoin_ballista::start_local_cluster(executors, tasks_per_executor).await
    })?
    .map_err(py_err)
}

#[pymodule]
fn _tsjoin(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySessionContext>()?;
    m.add_function(wrap_pyfunction!(start_local_cluster, m)?)?;
    m.add_class::<QueryResult>()?;
    m.add("TsJoinError", m.py().get_type::<TsJoinError>())?;
    m.add("SQLError", m.py().get_type::<SQLError>())?;
    m.add("ExecutionError", m.py().get_type::<ExecutionError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
