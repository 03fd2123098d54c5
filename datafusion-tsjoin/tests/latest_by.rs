//! `LatestByExec` (one row per key for `row_number() … = 1` and QuestDB's
//! `LATEST ON`): differential
//! against DataFusion's window over random inputs (NULL and skewed keys,
//! duplicate and NULL timestamps, NaN, 1–4 partitions, random batch
//! sizes), where the rule applies and where it must not, the codec, and a
//! memory limit.

use crate::support::{
    assert_round_trips, case_count, cells, contains_operator, context, limited_context,
    parquet_copies, physical_plan, query_rows, split,
};
use datafusion::arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::datasource::MemTable;
use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

#[derive(Clone, Debug)]
struct Row {
    k: Option<i64>,
    s: Option<String>,
    ts: Option<i64>,
    f: Option<f64>,
    id: i64,
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
        Field::new("f", DataType::Float64, true),
        Field::new("id", DataType::Int64, false),
    ]))
}

fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.k).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.s.clone()).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.ts).collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from(
                rows.iter().map(|r| r.f).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.id))),
        ],
    )
    .unwrap()
}

/// Random rows: few or many keys (one of them often hot), timestamps with
/// duplicates and NULLs, floats with NaN and NULLs.
fn rows(rng: &mut StdRng) -> Vec<Row> {
    let n = rng.random_range(0..2000);
    let keys = [1, 3, 50, 2000][rng.random_range(0..4)];
    let null_rate = rng.random_range(0.0..0.3);
    (0..n)
        .map(|id| {
            let hot = rng.random_bool(0.3);
            let k = (!rng.random_bool(null_rate))
                .then(|| if hot { 0 } else { rng.random_range(0..keys) });
            let s = (!rng.random_bool(null_rate))
                .then(|| format!("s{}", rng.random_range(0..3)));
            let ts =
                (!rng.random_bool(null_rate / 2.0)).then(|| rng.random_range(0..300));
            let f = (!rng.random_bool(null_rate)).then(|| {
                if rng.random_bool(0.05) {
                    f64::NAN
                } else {
                    f64::from(rng.random_range(-50..50)) / 4.0
                }
            });
            Row { k, s, ts, f, id }
        })
        .collect()
}

/// First-row queries whose answers do not depend on which tied row is
/// kept: ties are broken by `id`, or only tied values are selected.
const QUERIES: &[&str] = &[
    "SELECT k, s, ts, f, id FROM (SELECT *, row_number() OVER (PARTITION BY k, s ORDER BY ts DESC, id) AS rn FROM t) WHERE rn = 1",
    "SELECT k, s, ts FROM (SELECT *, row_number() OVER (PARTITION BY k, s ORDER BY ts DESC) AS rn FROM t) WHERE rn = 1",
    "SELECT k, ts FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts NULLS FIRST) AS rn FROM t) WHERE rn <= 1",
    "SELECT s, f, id FROM (SELECT *, row_number() OVER (PARTITION BY s ORDER BY f DESC NULLS LAST, id DESC) AS rn FROM t) WHERE 2 > rn",
    "SELECT k, s, f, id, rn FROM (SELECT *, row_number() OVER (PARTITION BY s, k ORDER BY f, id) AS rn FROM t) WHERE rn = 1 AND f > 0",
    "SELECT ts, id FROM (SELECT *, row_number() OVER (ORDER BY ts DESC, id) AS rn FROM t) WHERE rn = 1",
    "SELECT k FROM (SELECT *, row_number() OVER (PARTITION BY k) AS rn FROM t) WHERE rn = 1",
    // QuestDB's spelling.
    "SELECT k, s, ts FROM t WHERE f IS NOT NULL LATEST ON ts PARTITION BY k, s",
    "SELECT count(*), min(s), max(ts) FROM t LATEST ON ts PARTITION BY s",
];

async fn register(ctx: &SessionContext, parts: Vec<Vec<RecordBatch>>) {
    let table = MemTable::try_new(schema(), parts).unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
}

fn sorted(mut rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    rows.sort();
    rows
}

#[tokio::test]
async fn first_rows_match_the_window() {
    let cases = case_count("TSJOIN_LATEST_CASES", 30);
    for seed in 0..cases {
        let mut rng = StdRng::seed_from_u64(0x1a7e57 + seed);
        let data = rows(&mut rng);
        let partitions = rng.random_range(1..=4);
        let max_batch = [1, 7, 64, 4096][rng.random_range(0..4)];
        let parts = split(&mut rng, &data, partitions, max_batch, batch);
        let ctx = context(partitions);
        ctx.tsjoin_sql(&format!(
            "SET datafusion.execution.batch_size = {}",
            rng.random_range(1..100)
        ))
        .await
        .unwrap();
        register(&ctx, parts).await;
        for sql in QUERIES {
            ctx.tsjoin_sql("SET tsjoin.latest_by = true").await.unwrap();
            let plan = physical_plan(&ctx, sql).await;
            assert!(
                contains_operator(&plan, "LatestByExec"),
                "seed {seed}: {sql} not on LatestByExec"
            );
            let got = sorted(cells(&collect(plan, ctx.task_ctx()).await.unwrap()));
            ctx.tsjoin_sql("SET tsjoin.latest_by = false")
                .await
                .unwrap();
            let want = sorted(query_rows(&ctx, sql).await);
            assert_eq!(got, want, "seed {seed}, {partitions} partitions: {sql}");
        }
    }
}

#[tokio::test]
async fn ties_keep_one_whole_row() {
    // Every row of a key ties on the ORDER BY: the kept row is one of them,
    // never a mix of columns from several.
    let ctx = context(3);
    let data: Vec<Row> = (0..3000)
        .map(|id| Row {
            k: Some(id % 7),
            s: Some(format!("x{id}")),
            ts: Some(5),
            f: Some(id as f64),
            id,
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(7);
    register(&ctx, split(&mut rng, &data, 3, 100, batch)).await;
    let got = query_rows(
        &ctx,
        "SELECT k, s, f, id FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM t) WHERE rn = 1",
    )
    .await;
    assert_eq!(got.len(), 7);
    for row in got {
        let id: i64 = row[3].parse().unwrap();
        assert_eq!(row[0], (id % 7).to_string());
        assert_eq!(row[1], format!("x{id}"));
        assert_eq!(row[2].parse::<f64>().unwrap(), id as f64);
    }
}

#[tokio::test]
async fn only_first_row_filters_over_row_number_are_replaced() {
    let ctx = context(2);
    let mut rng = StdRng::seed_from_u64(3);
    let data = rows(&mut rng);
    register(&ctx, split(&mut rng, &data, 2, 50, batch)).await;
    let kept = [
        // Not the first row only.
        "SELECT k FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts) AS rn FROM t) WHERE rn = 2",
        "SELECT k FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts) AS rn FROM t) WHERE rn <= 2",
        "SELECT k FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts) AS rn FROM t) WHERE rn = 1 OR k = 3",
        // Ranks keep every tied row.
        "SELECT k FROM (SELECT *, rank() OVER (PARTITION BY k ORDER BY ts) AS rn FROM t) WHERE rn = 1",
        // A second window expression is needed by the output.
        "SELECT k, c FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts) AS rn, count(*) OVER (PARTITION BY k) AS c FROM t) WHERE rn = 1",
    ];
    for sql in kept {
        let plan = physical_plan(&ctx, sql).await;
        assert!(!contains_operator(&plan, "LatestByExec"), "{sql}");
    }
    // A window over no columns stays DataFusion's and answers.
    let rows = query_rows(
        &ctx,
        "SELECT count(*) FROM (SELECT row_number() OVER () AS rn FROM t) WHERE rn = 1",
    )
    .await;
    assert_eq!(
        rows,
        vec![vec![if data.is_empty() { "0" } else { "1" }.to_string()]]
    );
}

#[tokio::test]
async fn latest_by_round_trips_through_the_codec() {
    let ctx = context(3);
    let mut rng = StdRng::seed_from_u64(11);
    let data = rows(&mut rng);
    register(&ctx, split(&mut rng, &data, 3, 64, batch)).await;
    // A Parquet copy: in-memory tables have no proto form.
    let dir = tempfile::tempdir().unwrap();
    parquet_copies(&ctx, &["t"], dir.path()).await;
    let sql = &QUERIES[0].replace("FROM t)", "FROM tq)");
    let want = sorted(query_rows(&ctx, sql).await);
    assert_round_trips(&ctx, sql, "LatestByExec: mode=Partial").await;
    let back = assert_round_trips(&ctx, sql, "LatestByExec: mode=Final").await;
    let got = sorted(cells(&collect(back, ctx.task_ctx()).await.unwrap()));
    assert_eq!(got, want);
}

#[tokio::test]
async fn over_the_memory_limit_is_a_clear_error() {
    // 200k distinct keys with wide strings: the kept rows alone exceed 4 MB.
    let ctx = limited_context(4 << 20, 2);
    let data: Vec<Row> = (0..200_000)
        .map(|id| Row {
            k: Some(id),
            s: Some(format!("{id:0>40}")),
            ts: Some(id),
            f: None,
            id,
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(5);
    register(&ctx, split(&mut rng, &data, 2, 8192, batch)).await;
    let err = ctx
        .tsjoin_sql("SELECT k, s FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM t) WHERE rn = 1")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("Resources exhausted"), "{err}");
}

#[tokio::test]
async fn explain_analyze_counts_what_the_final_operator_emits() {
    let ctx = context(1);
    let data: Vec<Row> = (0..100)
        .map(|id| Row {
            k: Some(id % 4),
            s: None,
            ts: Some(id),
            f: None,
            id,
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(9);
    register(&ctx, split(&mut rng, &data, 1, 30, batch)).await;
    let rows = query_rows(
        &ctx,
        "EXPLAIN ANALYZE SELECT k FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM t) WHERE rn = 1",
    )
    .await;
    let text = rows.concat().join("\n");
    let line = text
        .lines()
        .find(|l| l.contains("LatestByExec: mode=Final"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("output_rows=4"), "{line}");
    assert!(line.contains("output_batches=1"), "{line}");
    assert!(line.contains("input_rows=4"), "{line}");
}
