//! Differential test: the inline aggregate against DataFusion's own hash
//! aggregate on random data, for every key shape (integers dense and
//! sparse, dates, strings, dictionaries, several columns), NULL keys and
//! values, empty input, 1 to 4 partitions, one group to all-distinct.

use crate::support::{cell, context};
use datafusion::arrow::array::{
    ArrayRef, Date32Array, DictionaryArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray, UInt32Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Schema};
use datafusion::datasource::MemTable;
use datafusion::physical_plan::displayable;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// Key column `k` of a random shape; `groups` distinct values at most.
fn key_column(rng: &mut StdRng, shape: usize, n: usize, groups: i64, nulls: bool) -> ArrayRef {
    let pick = |rng: &mut StdRng| (!(nulls && rng.random_bool(0.1))).then(|| rng.random_range(0..groups.max(1)));
    let vals: Vec<Option<i64>> = (0..n).map(|_| pick(rng)).collect();
    match shape {
        0 => Arc::new(Int64Array::from(vals)),
        // sparse: far apart values (the hashed path)
        1 => Arc::new(Int64Array::from(vals.iter().map(|v| v.map(|v| v * 1_000_003 - 7_000_000_000)).collect::<Vec<_>>())),
        2 => Arc::new(Int32Array::from(vals.iter().map(|v| v.map(|v| v as i32 - 5)).collect::<Vec<_>>())),
        3 => Arc::new(UInt32Array::from(vals.iter().map(|v| v.map(|v| v as u32)).collect::<Vec<_>>())),
        4 => Arc::new(Date32Array::from(vals.iter().map(|v| v.map(|v| v as i32 + 19_000)).collect::<Vec<_>>())),
        5 => Arc::new(StringArray::from(vals.iter().map(|v| v.map(|v| format!("key-{v}"))).collect::<Vec<_>>())),
        _ => {
            let strings: Vec<Option<String>> = vals.iter().map(|v| v.map(|v| format!("sym{v}"))).collect();
            let d: DictionaryArray<Int32Type> = strings.iter().map(|s| s.as_deref()).collect();
            Arc::new(d)
        }
    }
}

fn value_columns(rng: &mut StdRng, n: usize) -> (ArrayRef, ArrayRef, ArrayRef) {
    // Multiples of 1/4: float sums are exact in any order.
    let f: Vec<Option<f64>> =
        (0..n).map(|_| (!rng.random_bool(0.15)).then(|| rng.random_range(-400..400) as f64 / 4.0)).collect();
    let i: Vec<Option<i64>> =
        (0..n).map(|_| (!rng.random_bool(0.1)).then(|| rng.random_range(-1_000_000..1_000_000))).collect();
    let j: Vec<Option<i32>> = (0..n).map(|_| Some(rng.random_range(-50..50))).collect();
    (Arc::new(Float64Array::from(f)), Arc::new(Int64Array::from(i)), Arc::new(Int32Array::from(j)))
}

async fn rows(ctx: &SessionContext, sql: &str) -> Vec<Vec<String>> {
    let batches = ctx.tsjoin_sql(sql).await.unwrap().collect().await.unwrap();
    batches
        .iter()
        .flat_map(|b| (0..b.num_rows()).map(move |r| b.columns().iter().map(|c| cell(c, r)).collect()))
        .collect()
}

async fn run_case(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let shape = rng.random_range(0..7);
    let n = if rng.random_bool(0.05) { 0 } else { rng.random_range(1..3000) };
    let groups = *[1i64, 3, 50, 1000, 100_000].get(rng.random_range(0..5)).unwrap();
    let nulls = rng.random_bool(0.5);
    let two_keys = rng.random_bool(0.2);
    let k = key_column(&mut rng, shape, n, groups, nulls);
    let k2 = key_column(&mut rng, 0, n, 4, nulls);
    let (f, i, j) = value_columns(&mut rng, n);
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", k.data_type().clone(), true),
        Field::new("k2", DataType::Int64, true),
        Field::new("f", DataType::Float64, true),
        Field::new("i", DataType::Int64, true),
        Field::new("j", DataType::Int32, true),
    ]));
    let batch = RecordBatch::try_new(Arc::clone(&schema), vec![k, k2, f, i, j]).unwrap();
    // Random partitions of random batch sizes.
    let partitions = rng.random_range(1..=4);
    let mut parts: Vec<Vec<RecordBatch>> = vec![vec![]; partitions];
    let mut at = 0;
    while at < n {
        let len = rng.random_range(1..=700).min(n - at);
        parts[rng.random_range(0..partitions)].push(batch.slice(at, len));
        at += len;
    }
    let keys = if two_keys { "k, k2" } else { "k" };
    let sql = format!(
        "SELECT {keys}, count(*), count(f), sum(f), min(f), max(f), avg(f), sum(i), min(i), max(i), avg(i), \
         sum(j), min(j), max(j), count(j) FROM t GROUP BY {keys} ORDER BY {keys}"
    );
    let ctx = context(rng.random_range(1..=4));
    ctx.register_table("t", Arc::new(MemTable::try_new(schema, parts).unwrap())).unwrap();
    // Filters below, HAVING / ORDER BY / LIMIT above, and the two stacked
    // aggregates DataFusion plans for count(DISTINCT).
    let composed = format!(
        "SELECT {keys}, count(DISTINCT j), sum(i) FROM t WHERE f IS NULL OR f > -50 GROUP BY {keys} \
         HAVING count(*) > 1 ORDER BY sum(i) DESC NULLS LAST, {keys} LIMIT 25"
    );
    for sql in [&sql, &composed] {
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate = false").await.unwrap();
        let want = rows(&ctx, sql).await;
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate = true").await.unwrap();
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate_all_keys = true").await.unwrap();
        let got = rows(&ctx, sql).await;
        assert_eq!(got, want, "seed {seed}: {sql}");
    }
    let plan = ctx.tsjoin_sql(&sql).await.unwrap().create_physical_plan().await.unwrap();
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert!(text.contains("InlineAggregateExec"), "seed {seed}: {sql}\n{text}");
    assert!(!text.contains("AggregateExec: mode"), "seed {seed}: DataFusion's aggregate still there\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_aggregate_matches_datafusion() {
    let cases: u64 = std::env::var("TSJOIN_GROUPBY_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    for seed in 0..cases {
        run_case(seed).await;
    }
}

#[tokio::test]
async fn unsupported_aggregates_stay_on_datafusion() {
    let ctx = context(2);
    ctx.tsjoin_sql("CREATE TABLE t (k INT, v DOUBLE, s VARCHAR) AS VALUES (1, 1.0, 'a'), (1, 2.0, 'b'), (2, 3.0, 'c')")
        .await
        .unwrap();
    for sql in [
        "SELECT k, min(s) FROM t GROUP BY k",
        "SELECT k, sum(v) FILTER (WHERE v > 1) FROM t GROUP BY k",
        "SELECT count(*), sum(v) FROM t",
        // Multi-column and plain string keys: only with
        // `tsjoin.inline_aggregate_all_keys`.
        "SELECT k, s, count(*) FROM t GROUP BY k, s",
        "SELECT s, sum(v) FROM t GROUP BY s",
    ] {
        let plan = ctx.tsjoin_sql(sql).await.unwrap().create_physical_plan().await.unwrap();
        let text = displayable(plan.as_ref()).indent(true).to_string();
        assert!(!text.contains("InlineAggregateExec"), "{sql}\n{text}");
        assert!(!rows(&ctx, sql).await.is_empty());
    }
}

#[tokio::test]
async fn nan_is_the_largest_float() {
    let ctx = context(1);
    ctx.tsjoin_sql(
        "CREATE TABLE t (k INT, v DOUBLE) AS VALUES (1, 'NaN'), (1, 2.0), (2, 'NaN'), (2, 'NaN'), (3, -1.0), (3, NULL)",
    )
    .await
    .unwrap();
    let got = rows(&ctx, "SELECT k, min(v), max(v), sum(v), count(v) FROM t GROUP BY k ORDER BY k").await;
    let want: Vec<Vec<String>> = [["1", "2", "NaN", "NaN", "2"], ["2", "NaN", "NaN", "NaN", "2"], ["3", "-1", "-1", "-1", "1"]]
        .iter()
        .map(|r| r.iter().map(|s| s.to_string()).collect())
        .collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn over_budget_is_a_clear_error() {
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use datafusion::prelude::SessionConfig;
    let runtime = RuntimeEnvBuilder::new().with_memory_limit(64 * 1024, 1.0).build_arc().unwrap();
    let state = datafusion::execution::SessionStateBuilder::new()
        .with_config(SessionConfig::new().with_target_partitions(2))
        .with_runtime_env(runtime)
        .with_default_features();
    let state = datafusion_tsjoin::TsJoinSessionStateBuilderExt::with_tsjoin(state).build();
    let ctx = SessionContext::new_with_state(state);
    let n = 200_000;
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false), Field::new("v", DataType::Int64, false)])),
        vec![
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| i * 7919 % 1_000_003))),
            Arc::new(Int64Array::from_iter_values(0..n)),
        ],
    )
    .unwrap();
    ctx.register_batch("t", batch).unwrap();
    let err = ctx.tsjoin_sql("SELECT k, sum(v) FROM t GROUP BY k").await.unwrap().collect().await.unwrap_err();
    assert!(err.to_string().contains("Resources exhausted"), "{err}");
}

/// Past the probe rows with nearly distinct keys phase 1 passes rows on, and
/// phase 2 sizes its tables for them; big tables prefetch. Dense keys (a
/// direct table over millions of slots), sparse keys (a hashed table of
/// hundreds of thousands of entries), with a tenth of the rows repeating an
/// earlier key, NULL keys and NULL values, over 1 to 3 partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nearly_distinct_keys_past_the_probe_match_datafusion() {
    let mut rng = StdRng::seed_from_u64(42);
    let n = 260_000i64;
    for (shape, partitions) in [("dense", 2), ("sparse", 3), ("dense", 1)] {
        let keys: Vec<Option<i64>> = (0..n)
            .map(|i| {
                let base = if rng.random_bool(0.1) { rng.random_range(0..i.max(1)) } else { i };
                // A permutation of 0..n (dense: 5x wider with the spacing,
                // so the direct table spans over a million slots) or keys
                // scattered over the i64 range (sparse).
                let k = (base * 7919) % n;
                (!rng.random_bool(0.01)).then_some(if shape == "dense" { k * 5 } else { k.wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64) })
            })
            .collect();
        let values: Vec<Option<i64>> = (0..n).map(|i| (i % 13 != 0).then_some(i % 1000 - 500)).collect();
        let schema =
            Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true), Field::new("v", DataType::Int64, true)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from(keys)), Arc::new(Int64Array::from(values))],
        )
        .unwrap();
        let mut parts: Vec<Vec<RecordBatch>> = vec![vec![]; partitions];
        for (c, at) in (0..n as usize).step_by(8192).enumerate() {
            parts[c % partitions].push(batch.slice(at, 8192.min(n as usize - at)));
        }
        let ctx = context(2);
        ctx.register_table("t", Arc::new(MemTable::try_new(schema, parts).unwrap())).unwrap();
        let sql = "SELECT k, count(*), count(v), sum(v), min(v), avg(v) FROM t GROUP BY k ORDER BY k";
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate = false").await.unwrap();
        let want = rows(&ctx, sql).await;
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate = true").await.unwrap();
        let got = rows(&ctx, sql).await;
        assert!(want.len() > 200_000, "{shape}: {} groups", want.len());
        assert!(got == want, "{shape}, {partitions} partitions: results differ");
    }
}

/// A physical plan executed twice gives the same answer twice, with keys
/// distinct enough that phase 1 passes rows on to phase 2 while it runs
/// (each execution shares one phase 1 among its output partitions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_executed_twice_answers_twice() {
    let n = 150_000i64;
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false), Field::new("v", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| i * 7919 % n))),
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| i % 100))),
        ],
    )
    .unwrap();
    let parts: Vec<Vec<RecordBatch>> =
        (0..2).map(|p| (p * 8192..n as usize).step_by(2 * 8192).map(|at| batch.slice(at, 8192.min(n as usize - at))).collect()).collect();
    let ctx = context(2);
    ctx.register_table("t", Arc::new(MemTable::try_new(schema, parts).unwrap())).unwrap();
    let df = ctx.tsjoin_sql("SELECT count(*), sum(c), sum(s) FROM (SELECT k, count(*) AS c, sum(v) AS s FROM t GROUP BY k)").await.unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    assert!(displayable(plan.as_ref()).indent(false).to_string().contains("InlineAggregateExec"));
    let want = vec![n.to_string(), n.to_string(), ((0..n).map(|i| i % 100).sum::<i64>()).to_string()];
    for run in 0..2 {
        let batches = datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
        let got: Vec<String> = batches[0].columns().iter().map(|c| cell(c, 0)).collect();
        assert_eq!(got, want, "run {run}");
    }
}
