//! `FilterAggregateExec` (fused `count`/`sum`/`min`/`max` over a WHERE of
//! comparisons): differential against DataFusion's filter + aggregate on
//! random Parquet files (NULLs, NaN, ±0.0, empty tables, all-false
//! predicates, 1–4 partitions, random batch sizes); which plans it takes;
//! the codec round trip.

use crate::support::{cells, contains_operator, context, physical_proto, register_dir};
use datafusion::arrow::array::{Float64Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::physical_plan::{collect, displayable};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

fn write_file(path: &std::path::Path, rng: &mut StdRng, rows: usize) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Float64, true),
        Field::new("b", DataType::Int64, true),
        Field::new("c", DataType::Float64, true),
    ]));
    let float = |rng: &mut StdRng| match rng.random_range(0..20) {
        0 => None,
        1 => Some(f64::NAN),
        2 => Some(-0.0),
        3 => Some(0.0),
        _ => Some(rng.random_range(-50..50) as f64 / 2.0),
    };
    let a: Vec<_> = (0..rows).map(|_| float(rng)).collect();
    let c: Vec<_> = (0..rows).map(|_| float(rng)).collect();
    let b: Vec<_> = (0..rows)
        .map(|_| (!rng.random_bool(0.1)).then(|| rng.random_range(-20..20)))
        .collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Float64Array::from(a)),
            Arc::new(Int64Array::from(b)),
            Arc::new(Float64Array::from(c)),
        ],
    )
    .unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rng.random_range(1..200)))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// Whether two cells agree: equal text, or numbers within 1e-9 relative
/// (sums add in another order).
fn close(x: &str, y: &str) -> bool {
    x == y
        || match (x.parse::<f64>(), y.parse::<f64>()) {
            (Ok(p), Ok(q)) => (p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0),
            _ => false,
        }
}

fn comparison(rng: &mut StdRng) -> String {
    let ops = ["=", "<>", "<", "<=", ">", ">="];
    let op = ops[rng.random_range(0..ops.len())];
    let (col, lit) = match rng.random_range(0..4) {
        0 => ("b", format!("{}", rng.random_range(-20..20))),
        1 => ("a", "'NaN'::double".to_string()),
        2 => (
            "c",
            format!("{:.1}", rng.random_range(-50..50) as f64 / 2.0),
        ),
        _ => (
            "a",
            format!("{:.1}", rng.random_range(-50..50) as f64 / 2.0),
        ),
    };
    if rng.random_bool(0.2) {
        // Literal on the left.
        let flipped = match op {
            "<" => ">",
            "<=" => ">=",
            ">" => "<",
            ">=" => "<=",
            o => o,
        };
        format!("{lit} {flipped} {col}")
    } else {
        format!("{col} {op} {lit}")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_aggregate_matches_datafusion() {
    let cases = crate::support::case_count("TSJOIN_FILTER_AGGREGATE_CASES", 24);
    let aggregates = "count(*), count(a), sum(a), sum(b), min(a), max(a), min(b), max(b), \
                      min(c), max(c)";
    let (mut checked, mut ours) = (0, 0);
    for seed in 0..cases {
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let files = rng.random_range(1..5usize);
        for f in 0..files {
            // Some files empty, some tables entirely empty.
            let rows = if rng.random_bool(0.15) {
                0
            } else {
                rng.random_range(0..700)
            };
            write_file(&dir.path().join(format!("{f}.parquet")), &mut rng, rows);
        }
        let location = format!("{}/", dir.path().display());
        for partitions in [1, 2, 4] {
            let batch_size = rng.random_range(1..300);
            let tsjoin = context(partitions);
            let plain = SessionContext::new_with_config(
                SessionConfig::new()
                    .with_target_partitions(partitions)
                    .with_batch_size(batch_size),
            );
            tsjoin
                .tsjoin_sql(&format!(
                    "SET datafusion.execution.batch_size = {batch_size}"
                ))
                .await
                .unwrap();
            for ctx in [&tsjoin, &plain] {
                ctx.register_parquet("t", &location, ParquetReadOptions::default())
                    .await
                    .unwrap();
            }
            for _ in 0..6 {
                let n = rng.random_range(1..4);
                let filter: Vec<String> = (0..n).map(|_| comparison(&mut rng)).collect();
                let sql =
                    format!("SELECT {aggregates} FROM t WHERE {}", filter.join(" AND "));
                let plan = crate::support::physical_plan(&tsjoin, &sql).await;
                ours += usize::from(contains_operator(&plan, "FilterAggregateExec"));
                let got = cells(&collect(plan, tsjoin.task_ctx()).await.unwrap());
                let want =
                    cells(&plain.sql(&sql).await.unwrap().collect().await.unwrap());
                assert_eq!(got.len(), want.len(), "{sql}");
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        g.iter().zip(w).all(|(x, y)| close(x, y)),
                        "seed {seed}, {partitions} partitions: {sql}\n{g:?}\n{w:?}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(
        ours * 10 >= checked * 9,
        "the operator ran in {ours} of {checked} cases"
    );
}

/// What takes the fused operator and what keeps DataFusion's plan.
#[tokio::test]
async fn filter_aggregate_plans() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    write_file(&dir.path().join("a.parquet"), &mut rng, 100);
    let ctx = context(2);
    register_dir(&ctx, "t", dir.path()).await;
    for (sql, fused) in [
        ("SELECT count(*) FROM t WHERE a > 1.0 AND b < 3", true),
        ("SELECT count(*), max(c) FROM t WHERE 2 >= b", true),
        ("SELECT count(*) FROM t WHERE a + 1 > 2", false),
        ("SELECT avg(a) FROM t WHERE b > 1", false),
        ("SELECT b, count(*) FROM t WHERE a > 1.0 GROUP BY b", false),
        ("SELECT count(DISTINCT b) FROM t WHERE a > 1.0", false),
        ("SELECT count(*) FROM t WHERE a > 1.0 OR b < 3", false),
    ] {
        let plan = crate::support::physical_plan(&ctx, sql).await;
        let text = displayable(plan.as_ref()).indent(true).to_string();
        assert_eq!(
            text.contains("FilterAggregateExec: predicate="),
            fused,
            "{sql}\n{text}"
        );
    }
    ctx.tsjoin_sql("SET tsjoin.filter_aggregate = false")
        .await
        .unwrap();
    let plan =
        crate::support::physical_plan(&ctx, "SELECT count(*) FROM t WHERE a > 1.0").await;
    assert!(!contains_operator(&plan, "FilterAggregateExec"));
}

/// The operator crosses the wire (tag 0xB7) and answers the same after.
#[tokio::test]
async fn filter_aggregate_round_trips_through_proto() {
    use datafusion_tsjoin::codec::FILTER_AGGREGATE_TAG;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    write_file(&dir.path().join("a.parquet"), &mut rng, 500);
    let ctx = context(2);
    register_dir(&ctx, "t", dir.path()).await;
    let sql = "SELECT count(*), sum(a), min(b), max(c), count(c) FROM t \
               WHERE a > -5.0 AND b <> 3 AND 10.0 > c";
    let plan = crate::support::physical_plan(&ctx, sql).await;
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert!(text.contains("FilterAggregateExec"), "{text}");
    let (bytes, back) = physical_proto(&plan, &ctx);
    assert!(bytes.contains(&FILTER_AGGREGATE_TAG));
    assert_eq!(text, displayable(back.as_ref()).indent(true).to_string());
    let a = cells(&collect(plan, ctx.task_ctx()).await.unwrap());
    let b = cells(&collect(back, ctx.task_ctx()).await.unwrap());
    assert_eq!(a, b);
}
