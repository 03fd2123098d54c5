//! Differential test: the inline aggregate against DataFusion's own hash
//! aggregate on random data, for every key shape (integers dense and
//! sparse, dates, strings, dictionaries, several columns), NULL keys and
//! values, empty input, 1 to 4 partitions, one group to all-distinct.

use crate::support::{cell, cells, context, physical_plan, query_error};
use datafusion::arrow::array::{
    ArrayRef, Date32Array, DictionaryArray, Float64Array, Int32Array, Int64Array,
    RecordBatch, StringArray, UInt32Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Schema};
use datafusion::datasource::MemTable;
use datafusion::physical_plan::{ExecutionPlan, displayable};
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use datafusion_tsjoin::inline_aggregate::InlineAggregateExec;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// Key column `k` of a random shape; `groups` distinct values at most.
fn key_column(
    rng: &mut StdRng,
    shape: usize,
    n: usize,
    groups: i64,
    nulls: bool,
) -> ArrayRef {
    let pick = |rng: &mut StdRng| {
        (!(nulls && rng.random_bool(0.1))).then(|| rng.random_range(0..groups.max(1)))
    };
    let vals: Vec<Option<i64>> = (0..n).map(|_| pick(rng)).collect();
    match shape {
        0 => Arc::new(Int64Array::from(vals)),
        // sparse: far apart values (the hashed path)
        1 => Arc::new(Int64Array::from(
            vals.iter()
                .map(|v| v.map(|v| v * 1_000_003 - 7_000_000_000))
                .collect::<Vec<_>>(),
        )),
        2 => Arc::new(Int32Array::from(
            vals.iter()
                .map(|v| v.map(|v| v as i32 - 5))
                .collect::<Vec<_>>(),
        )),
        3 => Arc::new(UInt32Array::from(
            vals.iter().map(|v| v.map(|v| v as u32)).collect::<Vec<_>>(),
        )),
        4 => Arc::new(Date32Array::from(
            vals.iter()
                .map(|v| v.map(|v| v as i32 + 19_000))
                .collect::<Vec<_>>(),
        )),
        5 => Arc::new(StringArray::from(
            vals.iter()
                // Short strings (held in their views) and long ones.
                .map(|v| {
                    v.map(|v| {
                        if v % 3 == 0 {
                            format!("a key longer than a view {v}")
                        } else {
                            format!("key-{v}")
                        }
                    })
                })
                .collect::<Vec<_>>(),
        )),
        _ => {
            let strings: Vec<Option<String>> =
                vals.iter().map(|v| v.map(|v| format!("sym{v}"))).collect();
            let d: DictionaryArray<Int32Type> =
                strings.iter().map(|s| s.as_deref()).collect();
            Arc::new(d)
        }
    }
}

fn value_columns(rng: &mut StdRng, n: usize) -> (ArrayRef, ArrayRef, ArrayRef) {
    // Multiples of 1/4: float sums are exact in any order.
    let f: Vec<Option<f64>> = (0..n)
        .map(|_| {
            (!rng.random_bool(0.15)).then(|| rng.random_range(-400..400) as f64 / 4.0)
        })
        .collect();
    let i: Vec<Option<i64>> = (0..n)
        .map(|_| (!rng.random_bool(0.1)).then(|| rng.random_range(-1_000_000..1_000_000)))
        .collect();
    let j: Vec<Option<i32>> = (0..n).map(|_| Some(rng.random_range(-50..50))).collect();
    (
        Arc::new(Float64Array::from(f)),
        Arc::new(Int64Array::from(i)),
        Arc::new(Int32Array::from(j)),
    )
}

async fn rows(ctx: &SessionContext, sql: &str) -> Vec<Vec<String>> {
    cells(&ctx.tsjoin_sql(sql).await.unwrap().collect().await.unwrap())
}

/// DataFusion's answer to `sql` (the inline aggregate off for it), leaving
/// the session with the inline aggregate on.
async fn datafusion_rows(ctx: &SessionContext, sql: &str) -> Vec<Vec<String>> {
    let set = |on: bool| format!("SET tsjoin.inline_aggregate = {on}");
    ctx.tsjoin_sql(&set(false)).await.unwrap();
    let want = rows(ctx, sql).await;
    ctx.tsjoin_sql(&set(true)).await.unwrap();
    want
}

async fn run_case(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let shape = rng.random_range(0..7);
    let n = if rng.random_bool(0.05) {
        0
    } else {
        rng.random_range(1..3000)
    };
    let groups = *[1i64, 3, 50, 1000, 100_000]
        .get(rng.random_range(0..5))
        .unwrap();
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
    ctx.register_table("t", Arc::new(MemTable::try_new(schema, parts).unwrap()))
        .unwrap();
    // Filters below, HAVING / ORDER BY / LIMIT above, and the two stacked
    // aggregates DataFusion plans for count(DISTINCT).
    let composed = format!(
        "SELECT {keys}, count(DISTINCT j), sum(i) FROM t WHERE f IS NULL OR f > -50 GROUP BY {keys} \
         HAVING count(*) > 1 ORDER BY sum(i) DESC NULLS LAST, {keys} LIMIT 25"
    );
    for sql in [&sql, &composed] {
        let want = datafusion_rows(&ctx, sql).await;
        // Defaults (composite keys may fall back), then every key inline.
        for all_keys in [false, true] {
            ctx.tsjoin_sql(&format!(
                "SET tsjoin.inline_aggregate_all_keys = {all_keys}"
            ))
            .await
            .unwrap();
            let got = rows(&ctx, sql).await;
            assert_eq!(got, want, "seed {seed}, all keys {all_keys}: {sql}");
        }
    }
    let plan = physical_plan(&ctx, &sql).await;
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert!(
        text.contains("InlineAggregateExec"),
        "seed {seed}: {sql}\n{text}"
    );
    assert!(
        !text.contains("AggregateExec: mode"),
        "seed {seed}: DataFusion's aggregate still there\n{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_aggregate_matches_datafusion() {
    let cases = crate::support::case_count("TSJOIN_GROUPBY_CASES", 300);
    let mut ran = 0;
    for seed in 0..cases {
        run_case(seed).await;
        ran += 1;
    }
    assert!(ran >= 1);
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
        // Single float and plain string keys: only with
        // `tsjoin.inline_aggregate_all_keys` (a string key coded by its
        // views was measured: ClickBench Q13 0.88x, benches/README.md).
        "SELECT v, count(*) FROM t GROUP BY v",
        "SELECT s, sum(v) FROM t GROUP BY s",
    ] {
        let plan = physical_plan(&ctx, sql).await;
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
    let got = rows(
        &ctx,
        "SELECT k, min(v), max(v), sum(v), count(v) FROM t GROUP BY k ORDER BY k",
    )
    .await;
    let want: Vec<Vec<String>> = [
        ["1", "2", "NaN", "NaN", "2"],
        ["2", "NaN", "NaN", "NaN", "2"],
        ["3", "-1", "-1", "-1", "1"],
    ]
    .iter()
    .map(|r| r.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn over_budget_is_a_clear_error() {
    let ctx = crate::support::limited_context(64 * 1024, 2);
    let n = 200_000;
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Int64, false),
        ])),
        vec![
            Arc::new(Int64Array::from_iter_values(
                (0..n).map(|i| i * 7919 % 1_000_003),
            )),
            Arc::new(Int64Array::from_iter_values(0..n)),
        ],
    )
    .unwrap();
    ctx.register_batch("t", batch).unwrap();
    let err = query_error(&ctx, "SELECT k, sum(v) FROM t GROUP BY k").await;
    assert!(err.contains("Resources exhausted"), "{err}");
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
                let base = if rng.random_bool(0.1) {
                    rng.random_range(0..i.max(1))
                } else {
                    i
                };
                // A permutation of 0..n (dense: 5x wider with the spacing,
                // so the direct table spans over a million slots) or keys
                // scattered over the i64 range (sparse).
                let k = (base * 7919) % n;
                (!rng.random_bool(0.01)).then_some(if shape == "dense" {
                    k * 5
                } else {
                    k.wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64)
                })
            })
            .collect();
        let values: Vec<Option<i64>> = (0..n)
            .map(|i| (i % 13 != 0).then_some(i % 1000 - 500))
            .collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("v", DataType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(keys)),
                Arc::new(Int64Array::from(values)),
            ],
        )
        .unwrap();
        let mut parts: Vec<Vec<RecordBatch>> = vec![vec![]; partitions];
        for (c, at) in (0..n as usize).step_by(8192).enumerate() {
            parts[c % partitions].push(batch.slice(at, 8192.min(n as usize - at)));
        }
        let ctx = context(2);
        ctx.register_table("t", Arc::new(MemTable::try_new(schema, parts).unwrap()))
            .unwrap();
        let sql = "SELECT k, count(*), count(v), sum(v), min(v), avg(v) FROM t GROUP BY k ORDER BY k";
        let want = datafusion_rows(&ctx, sql).await;
        let got = rows(&ctx, sql).await;
        assert!(want.len() > 200_000, "{shape}: {} groups", want.len());
        assert!(
            got == want,
            "{shape}, {partitions} partitions: results differ"
        );
    }
}

/// A physical plan executed twice gives the same answer twice, with keys
/// distinct enough that phase 1 passes rows on to phase 2 while it runs
/// (each execution shares one phase 1 among its output partitions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_executed_twice_answers_twice() {
    let n = 150_000i64;
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| i * 7919 % n))),
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| i % 100))),
        ],
    )
    .unwrap();
    let parts: Vec<Vec<RecordBatch>> = (0..2)
        .map(|p| {
            (p * 8192..n as usize)
                .step_by(2 * 8192)
                .map(|at| batch.slice(at, 8192.min(n as usize - at)))
                .collect()
        })
        .collect();
    let ctx = context(2);
    ctx.register_table("t", Arc::new(MemTable::try_new(schema, parts).unwrap()))
        .unwrap();
    let df = ctx.tsjoin_sql("SELECT count(*), sum(c), sum(s) FROM (SELECT k, count(*) AS c, sum(v) AS s FROM t GROUP BY k)").await.unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    assert!(
        displayable(plan.as_ref())
            .indent(false)
            .to_string()
            .contains("InlineAggregateExec")
    );
    let want = vec![
        n.to_string(),
        n.to_string(),
        ((0..n).map(|i| i % 100).sum::<i64>()).to_string(),
    ];
    for run in 0..2 {
        let batches =
            datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx())
                .await
                .unwrap();
        let got: Vec<String> = batches[0].columns().iter().map(|c| cell(c, 0)).collect();
        assert_eq!(got, want, "run {run}");
    }
}

/// Sums the `fallback` metric of the plan's inline aggregates (the output
/// partitions that ran DataFusion's aggregate instead); `None` when the
/// plan has no inline aggregate.
fn fallbacks(plan: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    let mine = plan.downcast_ref::<InlineAggregateExec>().map(|e| {
        e.metrics()
            .and_then(|m| m.sum_by_name("fallback"))
            .map_or(0, |v| v.as_usize())
    });
    plan.children()
        .into_iter()
        .filter_map(fallbacks)
        .chain(mine)
        .reduce(|a, b| a + b)
}

/// Runs `sql` once on tsjoin's plan, checks its answer against
/// DataFusion's aggregate, and returns the plan's [`fallbacks`].
async fn fallbacks_of_run(ctx: &SessionContext, sql: &str, label: &str) -> usize {
    let want = datafusion_rows(ctx, sql).await;
    let plan = physical_plan(ctx, sql).await;
    let got = cells(
        &datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx())
            .await
            .unwrap(),
    );
    assert!(got == want, "{label}: results differ");
    fallbacks(&plan).expect("an inline aggregate")
}

/// `n` rows of two keys (`a` integer, `b` string) with about `groups`
/// distinct pairs, NULLs in both keys and the value, over `sizes.len()`
/// partitions holding these shares of the rows (some empty or tiny).
fn two_key_table(n: usize, groups: usize, sizes: &[usize]) -> MemTable {
    let mut rng = StdRng::seed_from_u64(groups as u64);
    let pairs: Vec<usize> = (0..n).map(|_| rng.random_range(0..groups)).collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Utf8, true),
        Field::new("v", DataType::Int64, true),
        Field::new("c", DataType::Int64, true),
    ]));
    let a = Int64Array::from(
        pairs
            .iter()
            .enumerate()
            .map(|(i, &p)| (i % 97 != 0).then_some((p / 7) as i64))
            .collect::<Vec<_>>(),
    );
    let b = StringArray::from(
        pairs
            .iter()
            .enumerate()
            .map(|(i, &p)| (i % 89 != 0).then(|| format!("s{}", p % 7)))
            .collect::<Vec<_>>(),
    );
    let v = Int64Array::from(
        (0..n)
            .map(|i| (i % 13 != 0).then_some(i as i64 % 1000 - 500))
            .collect::<Vec<_>>(),
    );
    // A divisor that is zero in one row only (see the error test).
    let c = Int64Array::from(
        (0..n)
            .map(|i| Some(if i == n - 10 { 0 } else { 1 + i as i64 % 3 }))
            .collect::<Vec<_>>(),
    );
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new(a), Arc::new(b), Arc::new(v), Arc::new(c)],
    )
    .unwrap();
    let total: usize = sizes.iter().sum();
    let (mut parts, mut at, mut shares) = (vec![], 0, 0);
    for &share in sizes {
        shares += share;
        let end = n * shares / total;
        parts.push(
            (at..end)
                .step_by(8192)
                .map(|s| batch.slice(s, 8192.min(end - s)))
                .collect::<Vec<_>>(),
        );
        at = end;
    }
    MemTable::try_new(schema, parts).unwrap()
}

/// Multi-column keys run inline by default and fall back to DataFusion's
/// aggregate when the probe finds many groups: same answers either way,
/// over one partition, several, and some empty or tiny; the fallback plan
/// executed twice answers twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_keys_fall_back_to_datafusion_when_groups_are_many() {
    let n = 300_000;
    let sql = "SELECT a, b, count(*), count(v), sum(v), min(v), max(v), avg(v) FROM t GROUP BY a, b ORDER BY a, b";
    // 6,000 groups never pass MANY_GROUPS: only the rows-per-group rule a
    // quarter into the probe sends them back, and only where a task's input
    // is expected to hold at least 200K rows (EARLY_INPUT_ROWS; one
    // partition spread over two tasks expects 150K each).
    for (groups, many) in [(60, false), (200_000, true), (40_000, true), (6_000, true)] {
        // One target partition plans a single-mode aggregate (the
        // template the fallback replays under), more a partial/final pair.
        for (sizes, target) in
            [(&[1][..], 1), (&[1], 2), (&[3, 0, 1, 40], 4), (&[0, 1], 2)]
        {
            let largest = if sizes.len() < target {
                n / target
            } else {
                n * sizes.iter().max().unwrap() / sizes.iter().sum::<usize>()
            };
            let many = many && (groups > 8192 || largest >= 200_000);
            let ctx = context(target);
            ctx.register_table("t", Arc::new(two_key_table(n, groups, sizes)))
                .unwrap();
            let want = datafusion_rows(&ctx, sql).await;
            let plan = physical_plan(&ctx, sql).await;
            let text = displayable(plan.as_ref()).indent(true).to_string();
            assert!(
                text.contains(
                    "keys=composite, fallback=hash aggregate when groups are many"
                ),
                "{text}"
            );
            for run in 0..2 {
                let got = cells(
                    &datafusion::physical_plan::collect(
                        Arc::clone(&plan),
                        ctx.task_ctx(),
                    )
                    .await
                    .unwrap(),
                );
                let label = format!(
                    "{groups} groups, partitions {sizes:?}, target {target}, run {run}"
                );
                assert!(
                    got == want,
                    "{label}: results differ ({} rows vs {})",
                    got.len(),
                    want.len()
                );
                let fell_back = fallbacks(&plan).expect("an inline aggregate");
                assert_eq!(fell_back > 0, many, "{label}: fallback metric {fell_back}");
            }
            // Through a DataFrame the plan is dropped once its streams are
            // made: phase-1 tasks still probing must stay alive until they
            // have handed their input over.
            for run in 0..2 {
                assert!(
                    rows(&ctx, sql).await == want,
                    "{groups} groups, partitions {sizes:?}, DataFrame run {run}"
                );
            }
        }
    }
}

/// Keys that repeat rarely in an input too small to pass MANY_GROUPS run
/// inline: the early rows-per-group test (12 rows per group a quarter into
/// the probe) waits for inputs expected to hold at least 200K rows per
/// task, and 6,000 groups of 60K rows (10 rows each) never pass 8,192.
/// The same keys over 300K rows fall back; answers agree either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rare_keys_in_a_small_input_stay_inline() {
    let sql = "SELECT a, b, count(*), sum(v), avg(v) FROM t GROUP BY a, b ORDER BY a, b";
    for (n, many) in [(60_000, false), (300_000, true)] {
        let ctx = context(1);
        ctx.register_table("t", Arc::new(two_key_table(n, 6_000, &[1])))
            .unwrap();
        let fell_back = fallbacks_of_run(&ctx, sql, &format!("{n} rows")).await;
        assert_eq!(fell_back > 0, many, "{n} rows: fallback metric {fell_back}");
    }
}

/// An error in the input during the probe or after it is the query's error
/// whether the run stays inline or falls back; nothing hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_around_the_fallback_decision_are_reported() {
    for (groups, sizes) in [
        (60, &[1, 1][..]),
        (200_000, &[1, 1]),
        (200_000, &[1, 0, 1]),
        (60, &[1]),
    ] {
        for (rows_in, zero_at) in [(300_000, "late"), (50_000, "during the probe")] {
            let ctx = context(sizes.len().max(2));
            ctx.register_table("t", Arc::new(two_key_table(rows_in, groups, sizes)))
                .unwrap();
            // `c` is zero in one row near the end of the last partition.
            let sql = "SELECT a, b, count(*), sum(v / c) FROM t GROUP BY a, b";
            let run = async { ctx.tsjoin_sql(sql).await?.collect().await };
            let result =
                tokio::time::timeout(std::time::Duration::from_secs(60), run).await;
            let label = format!("{groups} groups, partitions {sizes:?}, zero {zero_at}");
            let err = result
                .unwrap_or_else(|_| panic!("{label}: hung"))
                .expect_err(&label);
            assert!(err.to_string().contains("Divide by zero"), "{label}: {err}");
        }
    }
}

/// Keys that grow with the rows (a time bucket over time-ordered rows):
/// the probe sees a few thousand groups, but new ones keep arriving, and
/// the projection over the input's size sends the run to DataFusion's
/// aggregate; keys that grow but stay few run inline. Same answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_keys_growing_with_the_rows_fall_back() {
    // (bucket width in rows, falls back): 10,000 groups in all (3,333 in
    // the probe's 100K rows, 30 rows each), and 6 groups in all.
    for (width, many) in [(60, true), (100_000, false)] {
        let ctx = context(1);
        ctx.tsjoin_sql(&format!(
            "CREATE TABLE g AS SELECT value / {width} AS a, CAST(value % 2 AS VARCHAR) AS b, \
             value AS v FROM generate_series(0, 299999)"
        ))
        .await
        .unwrap();
        let sql = "SELECT a, b, count(*), sum(v) FROM g GROUP BY a, b ORDER BY a, b";
        let fell_back = fallbacks_of_run(&ctx, sql, &format!("width {width}")).await;
        assert_eq!(
            fell_back > 0,
            many,
            "width {width}: fallback metric {fell_back}"
        );
    }
}
