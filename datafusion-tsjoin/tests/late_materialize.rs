//! `LateMaterializeRule` (the Parquet row filter chosen per scan):
//! differential against the same session with the rule off and against
//! DataFusion's plain plan on random Parquet files (NULLs, several row
//! groups, 1–3 files, random predicates and projections, TopKs); which
//! plans it changes and how EXPLAIN shows them.

use crate::support::{cells, contains_operator, context, operator_line, register_dir};
use datafusion::arrow::array::{
    Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::datasource::physical_plan::ParquetSource;
use datafusion::datasource::source::DataSourceExec;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::physical_plan::{ExecutionPlan, collect, displayable};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// A file of `rows` rows: a timestamp `ts` (increasing, with ties), two
/// nullable predicate-friendly columns `a` (float) and `b` (int), a
/// nullable low-cardinality string `s` and a wide payload `w`.
fn write_file(path: &std::path::Path, rng: &mut StdRng, rows: usize, start: i64) {
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            false,
        ),
        Field::new("a", DataType::Float64, true),
        Field::new("b", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("w", DataType::Utf8, true),
    ]));
    let mut t = start;
    let ts: Vec<i64> = (0..rows)
        .map(|_| {
            t += rng.random_range(0..3);
            t
        })
        .collect();
    let a: Vec<_> = (0..rows)
        .map(|_| {
            (!rng.random_bool(0.1)).then(|| rng.random_range(-100..100) as f64 / 4.0)
        })
        .collect();
    let b: Vec<_> = (0..rows)
        .map(|_| (!rng.random_bool(0.1)).then(|| rng.random_range(-20..20)))
        .collect();
    let s: Vec<_> = (0..rows)
        .map(|_| (!rng.random_bool(0.05)).then(|| format!("k{}", rng.random_range(0..5))))
        .collect();
    let w: Vec<_> = (0..rows)
        .map(|i| {
            (!rng.random_bool(0.05))
                .then(|| format!("payload-{i}-{}", "x".repeat(i % 17)))
        })
        .collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(TimestampMicrosecondArray::from(ts)),
            Arc::new(Float64Array::from(a)),
            Arc::new(Int64Array::from(b)),
            Arc::new(StringArray::from(s)),
            Arc::new(StringArray::from(w)),
        ],
    )
    .unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rng.random_range(1..300)))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

/// One random conjunct over `a`, `b` and `s`.
fn conjunct(rng: &mut StdRng) -> String {
    let ops = ["=", "<>", "<", "<=", ">", ">="];
    let op = ops[rng.random_range(0..ops.len())];
    match rng.random_range(0..10) {
        0 => format!("a {op} {:.2}", rng.random_range(-100..100) as f64 / 4.0),
        1 => format!("b {op} {}", rng.random_range(-20..20)),
        2 => format!("s = 'k{}'", rng.random_range(0..6)),
        3 => {
            ["a IS NULL", "b IS NOT NULL", "s IS NOT NULL"][rng.random_range(0..3)].into()
        }
        4 => format!(
            "(a > {} OR b < {})",
            rng.random_range(-20..20),
            rng.random_range(-20..20)
        ),
        5 => format!(
            "b IN ({}, {}, 3)",
            rng.random_range(-20..20),
            rng.random_range(-20..20)
        ),
        6 => format!("a + b > {}", rng.random_range(-30..30)),
        // Selective ones (under 1% of the rows), which the rule takes.
        7 => format!("a > 24.{}", rng.random_range(5..8)),
        _ => format!(
            "(b = {} AND a > {}.5)",
            rng.random_range(-20..20),
            rng.random_range(10..20)
        ),
    }
}

/// Rows sorted, so that answers compare as multisets.
fn sorted(mut rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    rows.sort();
    rows
}

/// Whether a Parquet scan in `plan` evaluates its predicate as a row
/// filter (what the rule turns on; EXPLAIN shows it only by the missing
/// `FilterExec`).
fn row_filtered(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let this = plan
        .downcast_ref::<DataSourceExec>()
        .and_then(|s| s.downcast_to_file_source::<ParquetSource>())
        .is_some_and(|(_, source)| {
            source.table_parquet_options().global.pushdown_filters
        });
    this || plan.children().into_iter().any(row_filtered)
}

async fn run(
    ctx: &SessionContext,
    sql: &str,
) -> (Vec<Vec<String>>, Arc<dyn ExecutionPlan>) {
    let plan = crate::support::physical_plan(ctx, sql).await;
    let rows = cells(&collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap());
    (rows, plan)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_materialize_matches_datafusion() {
    let cases = crate::support::case_count("TSJOIN_LATE_MATERIALIZE_CASES", 16);
    let (mut checked, mut rewritten) = (0, 0);
    for seed in 0..cases {
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        for f in 0..rng.random_range(1..4usize) {
            let rows = rng.random_range(0..900);
            let start = rng.random_range(0..2000);
            write_file(
                &dir.path().join(format!("{f}.parquet")),
                &mut rng,
                rows,
                start,
            );
        }
        let partitions = rng.random_range(1..4);
        let batch_size = rng.random_range(7..500);
        let config = SessionConfig::new()
            .with_target_partitions(partitions)
            .with_batch_size(batch_size);
        let on = crate::support::tsjoin_context(config.clone());
        let off = crate::support::tsjoin_context(config.clone());
        off.tsjoin_sql("SET tsjoin.late_materialize = false")
            .await
            .unwrap();
        let plain = SessionContext::new_with_config(config);
        for ctx in [&on, &off, &plain] {
            register_dir(ctx, "t", dir.path()).await;
        }
        for _ in 0..8 {
            let n = rng.random_range(1..4);
            let filter: Vec<String> = (0..n).map(|_| conjunct(&mut rng)).collect();
            let filter = filter.join(" AND ");
            let (sql, topk) = match rng.random_range(0..5) {
                0 => (format!("SELECT * FROM t WHERE {filter}"), false),
                1 => (format!("SELECT w, ts FROM t WHERE {filter}"), false),
                2 => (
                    format!(
                        "SELECT s, count(*), max(w) FROM t WHERE {filter} GROUP BY s"
                    ),
                    false,
                ),
                3 => (format!("SELECT a, b FROM t WHERE {filter}"), false),
                _ => (
                    format!(
                        "SELECT ts, w FROM t WHERE {filter} ORDER BY ts DESC LIMIT {}",
                        rng.random_range(1..20)
                    ),
                    true,
                ),
            };
            let (got, plan) = run(&on, &sql).await;
            let (without, _) = run(&off, &sql).await;
            let want = cells(&plain.sql(&sql).await.unwrap().collect().await.unwrap());
            rewritten += usize::from(row_filtered(&plan));
            if topk {
                // Ties on `ts` may come out in any order: compare the keys.
                let keys = |rows: &[Vec<String>]| {
                    rows.iter().map(|r| r[0].clone()).collect::<Vec<_>>()
                };
                assert_eq!(keys(&got), keys(&want), "seed {seed}: {sql}");
                assert_eq!(keys(&got), keys(&without), "seed {seed}: {sql}");
            } else {
                let got = sorted(got);
                assert_eq!(
                    got,
                    sorted(want),
                    "seed {seed}, {partitions} partitions: {sql}"
                );
                assert_eq!(got, sorted(without), "seed {seed}: {sql}");
            }
            checked += 1;
        }
    }
    assert!(
        rewritten * 4 >= checked,
        "the rule changed {rewritten} of {checked} plans"
    );
}

/// Writes one file of 4000 rows into a fresh directory and registers it as
/// `t` on a two-partition tsjoin session.
async fn table() -> (SessionContext, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    write_file(&dir.path().join("a.parquet"), &mut rng, 4000, 0);
    let ctx = context(2);
    register_dir(&ctx, "t", dir.path()).await;
    (ctx, dir)
}

/// Which scans take the row filter, and how EXPLAIN shows it: no
/// `FilterExec`, the predicate on the scan line, and the scan narrowed to
/// the columns the query returns.
#[tokio::test]
async fn late_materialize_plans() {
    let (ctx, _dir) = table().await;
    for (sql, late) in [
        ("SELECT * FROM t WHERE a > 24.5", true),
        ("SELECT w FROM t WHERE a > 22.0 AND b < -15", true),
        (
            "SELECT s, max(w) FROM t WHERE b = 2 AND a > 15.0 GROUP BY s",
            true,
        ),
        // Not selective: about half the rows pass, 5% scattered over the
        // file (every page still has rows to decode), or the analysis cannot
        // bound the conjunct (string equality, IS NOT NULL).
        ("SELECT * FROM t WHERE a > 1.0", false),
        ("SELECT * FROM t WHERE a > 22.0", false),
        ("SELECT * FROM t WHERE s = 'k1'", false),
        (
            "SELECT * FROM t WHERE s IS NOT NULL AND b < -17 AND a > 20.0",
            true,
        ),
        ("SELECT * FROM t WHERE s IS NOT NULL AND b < 15", false),
        // Every column read is a predicate column.
        ("SELECT a FROM t WHERE a > 1.0", false),
        ("SELECT count(*) FROM t WHERE a > 1.0 AND b < 3", false),
        ("SELECT avg(a) FROM t WHERE a > 1.0 AND b < 3", false),
        // The deferred column is too small a share of the bytes.
        ("SELECT b FROM t WHERE w <> 'x' AND s <> 'k1'", false),
    ] {
        let plan = crate::support::physical_plan(&ctx, sql).await;
        let text = displayable(plan.as_ref()).indent(true).to_string();
        assert_eq!(row_filtered(&plan), late, "{sql}\n{text}");
        if late {
            assert!(!contains_operator(&plan, "FilterExec"), "{sql}\n{text}");
        }
    }
    let plan =
        crate::support::physical_plan(&ctx, "SELECT w FROM t WHERE a > 24.5").await;
    let scan = operator_line(&plan, "DataSourceExec");
    assert!(scan.contains("projection=[w]"), "{scan}");
    assert!(scan.contains("predicate=a@1 > 24.5"), "{scan}");
    ctx.tsjoin_sql("SET tsjoin.late_materialize = false")
        .await
        .unwrap();
    let plan =
        crate::support::physical_plan(&ctx, "SELECT * FROM t WHERE a > 24.5").await;
    assert!(contains_operator(&plan, "FilterExec") && !row_filtered(&plan));
}

/// With the small-scan gate on (the default, `tsjoin.small_scan_rows` at
/// 64 Ki rows), a scan expected to read fewer rows keeps DataFusion's plan:
/// no row filter, no inline GROUP BY; with the gate at 0 the same queries
/// over the same 4000-row file take them, with the same answers.
#[tokio::test]
async fn small_scans_keep_datafusion_plan() {
    let (gate_off, dir) = table().await;
    let gated =
        datafusion_tsjoin::tsjoin_context(SessionConfig::new().with_target_partitions(2));
    register_dir(&gated, "t", dir.path()).await;
    let late = "SELECT * FROM t WHERE a > 24.5";
    let grouped = "SELECT b, count(*), sum(a) FROM t GROUP BY b";
    for (ctx, rewritten) in [(&gated, false), (&gate_off, true)] {
        let plan = crate::support::physical_plan(ctx, late).await;
        let text = displayable(plan.as_ref()).indent(true).to_string();
        assert_eq!(row_filtered(&plan), rewritten, "{late}\n{text}");
        let plan = crate::support::physical_plan(ctx, grouped).await;
        let text = displayable(plan.as_ref()).indent(true).to_string();
        assert_eq!(
            contains_operator(&plan, "InlineAggregateExec"),
            rewritten,
            "{grouped}\n{text}"
        );
    }
    for sql in [late, grouped] {
        let (got, _) = run(&gated, sql).await;
        let (want, _) = run(&gate_off, sql).await;
        assert_eq!(sorted(got), sorted(want), "{sql}");
    }
}

/// A conjunct the row filter cannot evaluate (it reads a partition column)
/// stays in a `FilterExec` above the scan; the others move into the scan.
#[tokio::test]
async fn late_materialize_keeps_a_residual_filter() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    for k in ["1", "2"] {
        let part = dir.path().join(format!("k={k}"));
        std::fs::create_dir_all(&part).unwrap();
        write_file(&part.join("a.parquet"), &mut rng, 500, 0);
    }
    let ctx = context(2);
    let location = format!("{}/", dir.path().display());
    ctx.tsjoin_sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS PARQUET PARTITIONED BY (k) LOCATION '{location}'"
    ))
    .await
    .unwrap();
    let sql = "SELECT * FROM t WHERE b > 16 AND a > 20.0 AND (a > 1.0 OR k = '2')";
    let plan = crate::support::physical_plan(&ctx, sql).await;
    let filter = operator_line(&plan, "FilterExec");
    assert!(
        filter.contains("k@") && !filter.contains("b@2 > 16"),
        "{filter}"
    );
    let scan = operator_line(&plan, "DataSourceExec");
    assert!(scan.contains("b@2 > 16"), "{scan}");
    let got = sorted(cells(&collect(plan, ctx.task_ctx()).await.unwrap()));
    ctx.tsjoin_sql("SET tsjoin.late_materialize = false")
        .await
        .unwrap();
    let want = sorted(crate::support::query_rows(&ctx, sql).await);
    assert!(!got.is_empty());
    assert_eq!(got, want);
}

/// Under `LIMIT -n` (newest-first TopK, which reads a few row groups) the
/// scan keeps DataFusion's filter, even for a selective predicate.
#[tokio::test]
async fn late_materialize_under_newest_first() {
    let (ctx, _dir) = table().await;
    ctx.tsjoin_sql("SET datafusion.execution.collect_statistics = true")
        .await
        .unwrap();
    let sql = "SELECT * FROM t WHERE a > 24.5 ORDER BY ts DESC LIMIT 3";
    let plan = crate::support::physical_plan(&ctx, sql).await;
    assert!(contains_operator(&plan, "NewestFirstTopKExec"));
    assert!(contains_operator(&plan, "FilterExec") && !row_filtered(&plan));
    let got = cells(&collect(plan, ctx.task_ctx()).await.unwrap());
    assert_eq!(got.len(), 3);
}
