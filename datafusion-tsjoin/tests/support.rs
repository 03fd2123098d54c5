//! Helpers shared by the integration tests.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::logical_expr::LogicalPlan;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::physical_plan::{ExecutionPlan, displayable};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use std::sync::Arc;

/// A tsjoin session with `partitions` target partitions.
pub fn context(partitions: usize) -> SessionContext {
    tsjoin_context(SessionConfig::new().with_target_partitions(partitions))
}

/// [`datafusion_tsjoin::tsjoin_context`] with the small-scan gate off
/// (`tsjoin.small_scan_rows = 0`): the tests' Parquet files hold hundreds
/// to thousands of rows, below the gate, and the tests are there to run the
/// operators it would leave out. The gate itself is tested in the crate's
/// `small_scan` module.
pub fn tsjoin_context(config: SessionConfig) -> SessionContext {
    datafusion_tsjoin::tsjoin_context(without_small_scan_gate(config))
}

/// `config` with `tsjoin.small_scan_rows = 0` (see [`tsjoin_context`]).
pub fn without_small_scan_gate(config: SessionConfig) -> SessionConfig {
    let mut options = config
        .options()
        .extensions
        .get::<datafusion_tsjoin::TsJoinOptions>()
        .cloned()
        .unwrap_or_default();
    options.small_scan_rows = 0;
    config.with_option_extension(options)
}

/// sqllogictest-style text of one value: NULL, `(empty)`, floats rounded to
/// 9 decimals so that summation order does not show.
pub fn cell(array: &ArrayRef, row: usize) -> String {
    if array.is_null(row) {
        return "NULL".into();
    }
    let float = match array.data_type() {
        DataType::Float64 => Some(array.as_primitive::<Float64Type>().value(row)),
        DataType::Float32 => Some(array.as_primitive::<Float32Type>().value(row) as f64),
        _ => None,
    };
    if let Some(v) = float {
        return if v.is_nan() {
            "NaN".into()
        } else if v.is_infinite() {
            if v > 0.0 { "inf".into() } else { "-inf".into() }
        } else {
            let r = (v * 1e9).round() / 1e9;
            format!("{}", if r == 0.0 { 0.0 } else { r })
        };
    }
    let opts = FormatOptions::default();
    let f = ArrayFormatter::try_new(array.as_ref(), &opts).unwrap();
    let s = f.value(row).to_string().trim_end().to_string();
    if s.is_empty() { "(empty)".into() } else { s }
}

/// Every row of `batches` as [`cell`] text.
pub fn cells(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows())
                .map(move |r| b.columns().iter().map(|c| cell(c, r)).collect())
        })
        .collect()
}

/// Rows an executed plan's inline aggregates read from Parquet dictionary
/// codes (their `dictionary_scan_rows` metric).
pub fn code_rows(p: &Arc<dyn ExecutionPlan>) -> usize {
    let mine = if p.name() == "InlineAggregateExec" {
        p.metrics()
            .and_then(|m| m.sum_by_name("dictionary_scan_rows"))
            .map_or(0, |v| v.as_usize())
    } else {
        0
    };
    mine + p.children().into_iter().map(code_rows).sum::<usize>()
}

/// Cases a randomized test runs: `var` from the environment, else
/// `default`; never fewer than one (0 or a value that does not parse must
/// not make the test vacuous).
pub fn case_count(var: &str, default: u64) -> u64 {
    count_from(std::env::var(var).ok().as_deref(), default)
}

fn count_from(value: Option<&str>, default: u64) -> u64 {
    let cases = value.map_or(default, |s| {
        s.trim().parse().unwrap_or_else(|_| {
            eprintln!("{s:?} is not a count of cases; running {default}");
            default
        })
    });
    cases.max(1)
}

#[test]
fn case_counts_are_at_least_one() {
    assert_eq!(count_from(None, 300), 300);
    assert_eq!(count_from(Some("12"), 300), 12);
    assert_eq!(count_from(Some(" 7 "), 300), 7);
    assert_eq!(count_from(Some("0"), 300), 1);
    assert_eq!(count_from(Some("many"), 300), 300);
    assert_eq!(count_from(Some("-3"), 300), 300);
    assert_eq!(count_from(Some("0"), 0), 1);
}

/// The physical plan tsjoin makes for `sql` (panics on a planning error:
/// tests call it with SQL that must plan).
pub async fn physical_plan(ctx: &SessionContext, sql: &str) -> Arc<dyn ExecutionPlan> {
    ctx.tsjoin_sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap()
}

/// The rows of `sql`'s result, as [`cells`].
pub async fn query_rows(ctx: &SessionContext, sql: &str) -> Vec<Vec<String>> {
    cells(&query_batches(ctx, sql).await)
}

/// The physical plan EXPLAIN shows for `sql`.
pub async fn explained_plan(ctx: &SessionContext, sql: &str) -> String {
    use datafusion::arrow::compute::concat_batches;
    let batches = query_batches(ctx, &format!("EXPLAIN {sql}")).await;
    let batch = concat_batches(&batches[0].schema(), &batches).unwrap();
    let kinds = batch.column(0).as_string::<i32>();
    let plans = batch.column(1).as_string::<i32>();
    (0..batch.num_rows())
        .find(|&r| kinds.value(r) == "physical_plan")
        .map(|r| plans.value(r).to_string())
        .unwrap_or_else(|| panic!("no physical plan for {sql}"))
}

/// The batches of `sql`'s result (panics on an error: tests call it with
/// SQL that must run).
pub async fn query_batches(ctx: &SessionContext, sql: &str) -> Vec<RecordBatch> {
    ctx.tsjoin_sql(sql).await.unwrap().collect().await.unwrap()
}

/// The error `sql` fails with while it runs (panics if it plans wrong or
/// runs to the end: tests call it with SQL that must fail mid-way).
pub async fn query_error(ctx: &SessionContext, sql: &str) -> String {
    ctx.tsjoin_sql(sql)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err()
        .to_string()
}

/// Splits `rows` into `parts` contiguous partitions of random batches of 1 to
/// `max_batch` rows (input order is the rows' order, partition after
/// partition): batch and partition boundaries are a classic bug source.
pub fn split<R>(
    rng: &mut rand::rngs::StdRng,
    rows: &[R],
    parts: usize,
    max_batch: usize,
    batch: impl Fn(&[R]) -> RecordBatch,
) -> Vec<Vec<RecordBatch>> {
    use rand::Rng as _;
    let mut out = vec![vec![]; parts];
    let mut start = 0;
    for (p, part) in out.iter_mut().enumerate() {
        let end = if p + 1 == parts {
            rows.len()
        } else {
            rng.random_range(start..=rows.len())
        };
        let mut s = start;
        while s < end {
            let e = (s + rng.random_range(1..=max_batch)).min(end);
            part.push(batch(&rows[s..e]));
            s = e;
        }
        start = end;
    }
    out
}

/// `plan` encoded with tsjoin's physical codec, and those bytes decoded in
/// `ctx`: what crosses the wire to a cluster's executors.
pub fn physical_proto(
    plan: &Arc<dyn ExecutionPlan>,
    ctx: &SessionContext,
) -> (Vec<u8>, Arc<dyn ExecutionPlan>) {
    use datafusion_proto::bytes::{
        physical_plan_from_bytes_with_extension_codec,
        physical_plan_to_bytes_with_extension_codec,
    };
    use datafusion_tsjoin::codec::TsJoinPhysicalCodec;
    let bytes = physical_plan_to_bytes_with_extension_codec(
        Arc::clone(plan),
        &TsJoinPhysicalCodec,
    )
    .unwrap();
    let back = physical_plan_from_bytes_with_extension_codec(
        &bytes,
        &ctx.task_ctx(),
        &TsJoinPhysicalCodec,
    )
    .unwrap();
    (bytes.to_vec(), back)
}

/// `plan` after a round trip through tsjoin's physical codec (see
/// [`physical_proto`]).
pub fn physical_round_trip(
    plan: &Arc<dyn ExecutionPlan>,
    ctx: &SessionContext,
) -> Arc<dyn ExecutionPlan> {
    physical_proto(plan, ctx).1
}

/// `plan` after a round trip through tsjoin's logical codec, decoded in
/// `ctx`.
pub fn logical_round_trip(plan: &LogicalPlan, ctx: &SessionContext) -> LogicalPlan {
    use datafusion_proto::bytes::{
        logical_plan_from_bytes_with_extension_codec,
        logical_plan_to_bytes_with_extension_codec,
    };
    use datafusion_tsjoin::codec::TsJoinLogicalCodec;
    let bytes =
        logical_plan_to_bytes_with_extension_codec(plan, &TsJoinLogicalCodec).unwrap();
    logical_plan_from_bytes_with_extension_codec(
        &bytes,
        &ctx.task_ctx(),
        &TsJoinLogicalCodec,
    )
    .unwrap()
}

/// The first line of `plan`'s indented display that names `operator`
/// (an operator's line survives a codec round trip unchanged; a scan's
/// display may not).
pub fn operator_line(plan: &Arc<dyn ExecutionPlan>, operator: &str) -> String {
    let text = displayable(plan.as_ref()).indent(true).to_string();
    text.lines()
        .find(|l| l.contains(operator))
        .unwrap_or_else(|| panic!("no {operator} in\n{text}"))
        .to_string()
}

/// Whether an operator named `name` is anywhere in `plan`.
pub fn contains_operator(plan: &Arc<dyn ExecutionPlan>, name: &str) -> bool {
    plan.name() == name
        || plan
            .children()
            .into_iter()
            .any(|c| contains_operator(c, name))
}

/// Registers the Parquet files under `dir` as table `name` in `ctx`.
pub async fn register_dir(ctx: &SessionContext, name: &str, dir: &std::path::Path) {
    ctx.register_parquet(name, &format!("{}/", dir.display()), Default::default())
        .await
        .unwrap();
}

/// Copies each of `ctx`'s tables `names` to a Parquet file in `dir` and
/// registers the copy as `{name}q` (the logical codec cannot carry
/// in-memory tables).
pub async fn parquet_copies(ctx: &SessionContext, names: &[&str], dir: &std::path::Path) {
    for name in names {
        let path = dir.join(format!("{name}.parquet"));
        let path = path.display();
        ctx.tsjoin_sql(&format!(
            "COPY {name} TO '{path}'; \
             CREATE EXTERNAL TABLE {name}q STORED AS PARQUET LOCATION '{path}'"
        ))
        .await
        .unwrap();
    }
}

/// Checks that `sql`'s plans round-trip through tsjoin's codecs: the
/// optimized logical plan displays the same after, and the physical
/// plan's `operator` line is unchanged. Returns the decoded physical plan.
pub async fn assert_round_trips(
    ctx: &SessionContext,
    sql: &str,
    operator: &str,
) -> Arc<dyn ExecutionPlan> {
    let logical = ctx
        .tsjoin_sql(sql)
        .await
        .unwrap()
        .into_optimized_plan()
        .unwrap();
    let back = logical_round_trip(&logical, ctx);
    assert_eq!(
        format!("{}", back.display_indent()),
        format!("{}", logical.display_indent())
    );
    let plan = physical_plan(ctx, sql).await;
    let back = physical_round_trip(&plan, ctx);
    assert_eq!(
        operator_line(&back, operator),
        operator_line(&plan, operator)
    );
    back
}

/// A tsjoin session with `partitions` target partitions and a memory limit
/// of `bytes`.
pub fn limited_context(bytes: usize, partitions: usize) -> SessionContext {
    limited_context_with(
        bytes,
        SessionConfig::new().with_target_partitions(partitions),
    )
}

/// A tsjoin session with `config` and a memory limit of `bytes`.
pub fn limited_context_with(bytes: usize, config: SessionConfig) -> SessionContext {
    use datafusion::execution::SessionStateBuilder;
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use datafusion_tsjoin::TsJoinSessionStateBuilderExt;
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(bytes, 1.0)
        .build_arc()
        .unwrap();
    let state = SessionStateBuilder::new()
        .with_config(without_small_scan_gate(config))
        .with_runtime_env(runtime)
        .with_default_features()
        .with_tsjoin()
        .build();
    SessionContext::new_with_state(state)
}

/// Writes `batch` to a Parquet file at `path` in row groups of at most
/// `rows_per_group` rows.
pub fn write_parquet(path: &std::path::Path, batch: &RecordBatch, rows_per_group: usize) {
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rows_per_group))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}
