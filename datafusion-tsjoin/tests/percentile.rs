//! `approx_percentile` / `approx_median` against an obviously correct
//! reference (`testing::percentile`, also behind `tsjoin-bench verify`):
//! sort each group's values, take QuestDB's nearest rank, round
//! it to its HdrHistogram bucket's highest (p = 0: lowest) equivalent
//! value. Random data (NULLs, NaN, zeros, duplicates, skewed keys, wide
//! ranges), random precision and p, 1..4 partitions and random batch
//! sizes: the answers are exact, hence the same at any parallelism.

use crate::support::{case_count, context};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch,
};
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Schema};
use datafusion::common::ScalarValue;
use datafusion::datasource::MemTable;
use datafusion::functions_aggregate::expr_fn::count;
use datafusion::logical_expr::{AggregateUDF, col, lit};
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use datafusion_tsjoin::functions::ApproxPercentile;
use datafusion_tsjoin::testing::percentile::{M, rank, reference_double, reference_int};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A random value column: integers or doubles, with NULLs (and NaN, inf
/// and zeros for doubles), over a random range.
fn column(rng: &mut StdRng, n: usize, double: bool) -> ArrayRef {
    let scale: f64 = [10.0, 1e3, 1e6, 1e12][rng.random_range(0..4)];
    let nulls = rng.random_range(0.0..0.3);
    let dups = rng.random_bool(0.3);
    let draw = |rng: &mut StdRng| {
        // Log-normal-ish: a uniform exponent.
        let v = scale.powf(rng.random_range(0.0..1.0)) * rng.random_range(0.5..1.5);
        if dups { v.round() } else { v }
    };
    if double {
        Arc::new(Float64Array::from_iter((0..n).map(|_| {
            if rng.random_bool(nulls) {
                return None;
            }
            Some(match rng.random_range(0..40) {
                0 => f64::NAN,
                1 => f64::INFINITY,
                2 => 0.0,
                _ => draw(rng),
            })
        })))
    } else {
        Arc::new(Int64Array::from_iter(
            (0..n).map(|_| (!rng.random_bool(nulls)).then(|| draw(rng) as i64)),
        ))
    }
}

fn split(rng: &mut StdRng, batch: &RecordBatch, parts: usize) -> Vec<Vec<RecordBatch>> {
    let mut out = vec![vec![]; parts];
    let mut at = 0;
    while at < batch.num_rows() {
        let len = rng.random_range(1..=300).min(batch.num_rows() - at);
        out[rng.random_range(0..parts)].push(batch.slice(at, len));
        at += len;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_the_reference_at_any_partitioning() {
    let mut rng = StdRng::seed_from_u64(23);
    let cases = case_count("TSJOIN_PERCENTILE_CASES", 120);
    for case in 0..cases {
        let double = rng.random_bool(0.5);
        // Some groups large enough to fill their buffers and turn dense.
        let rows = if rng.random_bool(0.1) {
            rng.random_range(3000..20_000)
        } else {
            rng.random_range(0..3000)
        };
        let groups = [1i64, 7, 60, 1000][rng.random_range(0..4)];
        let keys = Int64Array::from_iter_values((0..rows).map(|_| {
            // Skewed: half the rows in group 0.
            if rng.random_bool(0.5) {
                0
            } else {
                rng.random_range(0..groups)
            }
        }));
        let values = column(&mut rng, rows, double);
        let precision = rng.random_range(0..=5usize);
        let p = match rng.random_range(0..5) {
            0 => 0.0,
            1 => 1.0,
            2 => 0.99,
            _ => rng.random_range(0.0..=1.0),
        };
        // The reference, group by group.
        let mut by_key: BTreeMap<i64, (Vec<i64>, Vec<f64>)> = BTreeMap::new();
        for r in 0..rows {
            let e = by_key.entry(keys.value(r)).or_default();
            if values.is_null(r) {
                continue;
            }
            if double {
                let v = values.as_primitive::<Float64Type>().value(r);
                if v.is_finite() {
                    e.1.push(v);
                }
            } else {
                e.0.push(
                    values
                        .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
                        .value(r),
                );
            }
        }
        let want: Vec<(i64, Option<f64>)> = by_key
            .iter()
            .map(|(&k, (ints, doubles))| {
                let r = if double {
                    reference_double(doubles, p, precision)
                } else {
                    reference_int(ints, p, precision)
                };
                (k, r)
            })
            .collect();
        // The relative error bound: one bucket, 2^-(m-1) of the exact value.
        for ((_, (ints, doubles)), (_, got)) in by_key.iter().zip(&want) {
            let exact = if double {
                let mut d = doubles.clone();
                d.sort_by(f64::total_cmp);
                d.get(rank(p, d.len().max(1)) - 1).copied()
            } else {
                let mut d = ints.clone();
                d.sort_unstable();
                d.get(rank(p, d.len().max(1)) - 1).map(|&v| v as f64)
            };
            if let (Some(exact), Some(got)) = (exact, got)
                && exact > 0.0
            {
                let bound = 2f64.powi(-(M[precision] as i32 - 1));
                let err = (got - exact).abs() / exact;
                assert!(
                    err <= bound,
                    "case {case}: {got} vs exact {exact}, bound {bound}"
                );
            }
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", values.data_type().clone(), true),
        ]));
        let batch =
            RecordBatch::try_new(schema.clone(), vec![Arc::new(keys), values]).unwrap();
        // Inline GROUP BY (the default) and DataFusion's two-phase plan.
        for (parts, inline) in (1..=4).flat_map(|p| [(p, true), (p, false)]) {
            let ctx = context(parts);
            if !inline {
                ctx.sql("SET tsjoin.inline_aggregate = false")
                    .await
                    .unwrap();
            }
            let table = MemTable::try_new(schema.clone(), split(&mut rng, &batch, parts))
                .unwrap();
            ctx.register_table("t", Arc::new(table)).unwrap();
            let sql = format!(
                "SELECT k, approx_percentile(v, {p:?}, {precision}) FROM t GROUP BY k ORDER BY k"
            );
            let batches = ctx.tsjoin_sql(&sql).await.unwrap().collect().await.unwrap();
            let got: Vec<(i64, Option<f64>)> = batches
                .iter()
                .flat_map(|b| {
                    let k = b
                        .column(0)
                        .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
                        .clone();
                    let v = b.column(1).as_primitive::<Float64Type>().clone();
                    (0..b.num_rows())
                        .map(move |i| (k.value(i), v.is_valid(i).then(|| v.value(i))))
                })
                .collect();
            assert_eq!(
                got, want,
                "case {case}: {sql} double={double} rows={rows} partitions={parts} \
                 inline={inline}"
            );
        }
    }
}

/// `tsjoin_sql` gives QuestDB's `approx_median`, `SessionContext::sql`
/// keeps DataFusion's t-digest one; both columns are named as written.
#[tokio::test]
async fn approx_median_is_questdbs_in_tsjoin_sql_and_datafusions_in_sql() {
    let ctx = context(2);
    let sql = "SELECT approx_median(x) FROM (VALUES (1.0), (2.0), (3.0), (100.0)) t(x)";
    let ours = ctx.tsjoin_sql(sql).await.unwrap().collect().await.unwrap();
    let theirs = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    for b in [&ours, &theirs] {
        assert_eq!(b[0].schema().field(0).name(), "approx_median(t.x)");
    }
    let value = |b: &[RecordBatch]| b[0].column(0).as_primitive::<Float64Type>().value(0);
    // HdrHistogram at precision 1: the 2nd value, 2.0, reported as the
    // highest value of its bucket (scale 2^-4): 2.0625.
    assert_eq!(value(&ours), 2.0625);
    // DataFusion's t-digest: the value itself.
    assert_eq!(value(&theirs), 2.0);
    // Negative values: DataFusion's answers, QuestDB's error.
    let neg = "SELECT approx_median(x) FROM (VALUES (-1.0), (2.0)) t(x)";
    assert!(ctx.sql(neg).await.unwrap().collect().await.is_ok());
    let err = ctx
        .tsjoin_sql(neg)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Negative values cannot be recorded"),
        "{err}"
    );
    // QuestDB's median is callable by its own name from plain SQL too.
    let direct = ctx
        .sql(
            "SELECT approx_median_hdr(x) FROM (VALUES (1.0), (2.0), (3.0), (100.0)) t(x)",
        )
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(value(&direct), 2.0625);
}

/// The array form: several percentiles from one histogram, a list per
/// group, through the DataFrame API with a list literal (SQL `ARRAY[...]`
/// is in approx_percentile.slt).
#[tokio::test]
async fn array_form_gives_a_list_per_group() {
    let ctx: SessionContext = context(3);
    ctx.tsjoin_sql(
        "CREATE TABLE t AS SELECT value % 2 AS k, value AS v FROM generate_series(1, 1000)",
    )
    .await
    .unwrap();
    let ps = ScalarValue::List(ScalarValue::new_list_nullable(
        &[0.5, 0.9, 0.99].map(|p| ScalarValue::Float64(Some(p))),
        &DataType::Float64,
    ));
    let f = Arc::new(AggregateUDF::new_from_impl(ApproxPercentile::percentile()));
    let df = ctx
        .table("t")
        .await
        .unwrap()
        .aggregate(
            vec![col("k")],
            vec![
                f.call(vec![col("v"), lit(ps), lit(3i64)]).alias("ps"),
                count(col("v")).alias("n"),
            ],
        )
        .unwrap()
        .sort(vec![col("k").sort(true, true)])
        .unwrap();
    let batches = df.collect().await.unwrap();
    let lists = batches[0].column(1).as_list::<i32>();
    let row = |i: usize| {
        lists
            .value(i)
            .as_primitive::<Float64Type>()
            .values()
            .to_vec()
    };
    // Evens 2..1000 and odds 1..999, 500 each: ranks 250, 450, 495.
    assert_eq!(row(0), [500.0, 900.0, 990.0]);
    assert_eq!(row(1), [499.0, 899.0, 989.0]);
    // An invalid element fails at planning.
    let bad = ScalarValue::List(ScalarValue::new_list_nullable(
        &[ScalarValue::Float64(Some(1.5))],
        &DataType::Float64,
    ));
    let err = ctx
        .table("t")
        .await
        .unwrap()
        .aggregate(vec![], vec![f.call(vec![col("v"), lit(bad)])])
        .unwrap()
        .collect()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("invalid percentile"), "{err}");
}

/// When partial aggregation does not reduce the rows, DataFusion skips it and
/// turns each row into a one-value state (`convert_to_state`): the answers
/// must be those of the ordinary two-phase plan, and of the inline GROUP BY
/// (which keeps the accumulators itself and merges them without states).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_partial_aggregation_gives_the_same_answers() {
    let sql = "SELECT k, approx_percentile(v, 0.9, 2) AS i, \
               approx_percentile(CAST(v AS DOUBLE) / 3, 0.5) AS d \
               FROM (SELECT value % 7 AS k, \
                            CASE WHEN value % 11 = 0 THEN NULL ELSE value END AS v \
                     FROM generate_series(1, 5000)) \
               GROUP BY k ORDER BY k";
    // `inline`: tsjoin's GROUP BY (the default), else DataFusion's.
    let run = |inline: bool, skip: bool| async move {
        let ctx = context(2);
        let mut sets = vec![];
        if !inline {
            sets.push("SET tsjoin.inline_aggregate = false");
        }
        if skip {
            sets.extend([
                "SET datafusion.execution.skip_partial_aggregation_probe_rows_threshold = 1",
                "SET datafusion.execution.skip_partial_aggregation_probe_ratio_threshold = 0.0",
            ]);
        }
        for set in sets {
            ctx.sql(set).await.unwrap().collect().await.unwrap();
        }
        let plan = ctx.tsjoin_sql(&format!("EXPLAIN {sql}")).await.unwrap();
        let plan = crate::support::cells(&plan.collect().await.unwrap()).concat();
        assert_eq!(
            plan.iter().any(|c| c.contains("InlineAggregateExec")),
            inline,
            "{plan:?}"
        );
        let batches = ctx.tsjoin_sql(sql).await.unwrap().collect().await.unwrap();
        crate::support::cells(&batches)
    };
    let inline = run(true, false).await;
    let (plain, skipped) = (run(false, false).await, run(false, true).await);
    assert_eq!(plain.len(), 7);
    assert_eq!(plain, skipped);
    assert_eq!(plain, inline);
}
