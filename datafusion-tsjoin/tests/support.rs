//! Helpers shared by the integration tests.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use std::sync::Arc;

/// A tsjoin session with `partitions` target partitions.
pub fn context(partitions: usize) -> SessionContext {
    datafusion_tsjoin::tsjoin_context(
        SessionConfig::new().with_target_partitions(partitions),
    )
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

async fn query_batches(ctx: &SessionContext, sql: &str) -> Vec<RecordBatch> {
    ctx.tsjoin_sql(sql).await.unwrap().collect().await.unwrap()
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
