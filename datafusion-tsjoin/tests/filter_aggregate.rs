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
    // Count-only aggregates read the files by pages; others read batches.
    for (sql, pages) in [
        ("SELECT count(*) FROM t WHERE a > 1.0 AND b < 3", true),
        ("SELECT count(a), count(*) FROM t WHERE a > 1.0", true),
        ("SELECT count(c) FROM t WHERE a > 1.0", false),
        ("SELECT count(*), max(c) FROM t WHERE 2 >= b", false),
    ] {
        let plan = crate::support::physical_plan(&ctx, sql).await;
        let text = displayable(plan.as_ref()).indent(true).to_string();
        assert_eq!(text.contains(", read=pages"), pages, "{sql}\n{text}");
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
    // Folding batches; counting by pages; and with reading by pages off
    // (which the decoded plan must keep).
    for (sql, pages) in [
        (
            "SELECT count(*), sum(a), min(b), max(c), count(c) FROM t \
             WHERE a > -5.0 AND b <> 3 AND 10.0 > c",
            None,
        ),
        (
            "SELECT count(*), count(a) FROM t WHERE a > -5.0 AND b <> 3",
            Some(true),
        ),
        ("SELECT count(*) FROM t WHERE a > -5.0", Some(false)),
    ] {
        if let Some(p) = pages {
            ctx.tsjoin_sql(&format!("SET tsjoin.filter_aggregate_pages = {p}"))
                .await
                .unwrap();
        }
        let plan = crate::support::physical_plan(&ctx, sql).await;
        let text = displayable(plan.as_ref()).indent(true).to_string();
        assert!(text.contains("FilterAggregateExec"), "{text}");
        assert_eq!(text.contains("read=pages"), pages == Some(true), "{text}");
        let (bytes, back) = physical_proto(&plan, &ctx);
        assert!(bytes.contains(&FILTER_AGGREGATE_TAG));
        assert_eq!(text, displayable(back.as_ref()).indent(true).to_string());
        let a = cells(&collect(plan, ctx.task_ctx()).await.unwrap());
        let b = cells(&collect(back, ctx.task_ctx()).await.unwrap());
        assert_eq!(a, b);
    }
}

/// Sums metric `name` of every `FilterAggregateExec` in `plan`.
fn fused_metric(
    plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    name: &str,
) -> usize {
    crate::memory::metric(plan, "FilterAggregateExec", name)
}

/// A file of the page-scan test: columns of every type the page kernels
/// read (and an Int16 and a Boolean, which go through arrow's reader),
/// values from a few distinct ones (dictionary pages) or many (PLAIN),
/// NULLs, NaN and ±0.0, an ascending timestamp; random writer settings (page sizes, V1/V2 pages,
/// compression, dictionaries that overflow into PLAIN pages, dictionary
/// encoding off); column `e` only in some files.
fn write_typed_file(path: &std::path::Path, rng: &mut StdRng, rows: usize, with_e: bool) {
    use datafusion::arrow::array::{
        ArrayRef, BooleanArray, Date32Array, Float32Array, Int16Array, Int32Array,
        TimestampMillisecondArray, UInt32Array,
    };
    use datafusion::arrow::datatypes::TimeUnit;
    use datafusion::parquet::basic::Compression;
    use datafusion::parquet::file::properties::WriterVersion;
    let distinct = [3i64, 40, 100_000][rng.random_range(0..3)];
    let nulls = [0.0, 0.1, 0.6][rng.random_range(0..3)];
    let int = |rng: &mut StdRng| -> Option<i64> {
        (!rng.random_bool(nulls)).then(|| rng.random_range(0..distinct) - distinct / 2)
    };
    let ints: Vec<Vec<Option<i64>>> = (0..8)
        .map(|_| (0..rows).map(|_| int(rng)).collect())
        .collect();
    let float = |v: Option<i64>, rng: &mut StdRng| -> Option<f64> {
        v.map(|v| match rng.random_range(0..30) {
            0 => f64::NAN,
            1 => -0.0,
            2 => 0.0,
            _ => v as f64 / 2.0,
        })
    };
    let mut fields = vec![
        Field::new("i32", DataType::Int32, true),
        Field::new("i64", DataType::Int64, true),
        Field::new("f32", DataType::Float32, true),
        Field::new("f64", DataType::Float64, true),
        Field::new("d", DataType::Date32, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("u32", DataType::UInt32, true),
        Field::new("i16", DataType::Int16, true),
        Field::new("flag", DataType::Boolean, true),
        Field::new("req", DataType::Int64, false),
    ];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from_iter(
            ints[0].iter().map(|v| v.map(|v| v as i32)),
        )),
        Arc::new(Int64Array::from(ints[1].clone())),
        Arc::new(Float32Array::from_iter(
            ints[2]
                .iter()
                .map(|&v| float(v, rng).map(|f| f as f32))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            ints[3].iter().map(|&v| float(v, rng)).collect::<Vec<_>>(),
        )),
        Arc::new(Date32Array::from_iter(
            ints[4].iter().map(|v| v.map(|v| v as i32 + 19_000)),
        )),
        // Ascending (a time column): page indexes rule pages out.
        Arc::new(TimestampMillisecondArray::from_iter(
            ints[5].iter().enumerate().map(|(i, v)| {
                v.map(|_| 1_700_000_000_000 + (i as i64 * 120_000 / rows as i64) - 60_000)
            }),
        )),
        Arc::new(UInt32Array::from_iter(
            ints[6].iter().map(|v| v.map(|v| (v + distinct) as u32)),
        )),
        Arc::new(Int16Array::from_iter(
            ints[7].iter().map(|v| v.map(|v| (v % 1000) as i16)),
        )),
        Arc::new(BooleanArray::from_iter(
            ints[0].iter().map(|v| v.map(|v| v % 2 == 0)),
        )),
        Arc::new(Int64Array::from_iter_values(
            (0..rows).map(|_| rng.random_range(0..distinct)),
        )),
    ];
    if with_e {
        fields.push(Field::new("e", DataType::Int64, true));
        columns.push(Arc::new(Int64Array::from(
            ints[1].iter().map(|v| v.map(|v| -v)).collect::<Vec<_>>(),
        )));
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns).unwrap();
    let mut props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rng.random_range(1..3000)))
        .set_data_page_row_count_limit(rng.random_range(7..2000))
        .set_write_batch_size(rng.random_range(1..500))
        .set_writer_version(if rng.random_bool(0.5) {
            WriterVersion::PARQUET_2_0
        } else {
            WriterVersion::PARQUET_1_0
        })
        .set_compression(if rng.random_bool(0.5) {
            Compression::SNAPPY
        } else {
            Compression::UNCOMPRESSED
        });
    match rng.random_range(0..4) {
        0 => props = props.set_dictionary_enabled(false),
        1 => props = props.set_dictionary_page_size_limit(64),
        _ => {}
    }
    let file = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, schema, Some(props.build())).unwrap();
    // In several writes, so that row groups and pages end anywhere.
    let mut at = 0;
    while at < rows {
        let n = rng.random_range(1..=rows - at);
        w.write(&batch.slice(at, n)).unwrap();
        at += n;
    }
    w.close().unwrap();
}

fn typed_comparison(rng: &mut StdRng) -> String {
    let ops = ["=", "<>", "<", "<=", ">", ">="];
    let op = ops[rng.random_range(0..ops.len())];
    let v = rng.random_range(-60..60);
    let (col, lit) = match rng.random_range(0..12) {
        0 => ("i32", format!("{v}")),
        1 => ("i64", format!("{v}")),
        2 => ("f32", format!("CAST({:.1} AS REAL)", v as f64 / 2.0)),
        3 => ("f64", format!("{:.1}", v as f64 / 2.0)),
        4 => ("f64", "'NaN'::double".to_string()),
        5 => {
            let day =
                datafusion::arrow::temporal_conversions::date32_to_datetime(v + 19_000)
                    .unwrap();
            ("d", format!("DATE '{}'", day.format("%Y-%m-%d")))
        }
        6 => (
            "ts",
            format!(
                "to_timestamp_millis({})",
                1_700_000_000_000i64 + v as i64 * 1000
            ),
        ),
        7 => ("u32", format!("CAST({} AS INT UNSIGNED)", v.abs() + 50)),
        8 => ("i16", format!("CAST({v} AS SMALLINT)")),
        9 => ("flag", "true".to_string()),
        10 => ("req", format!("{}", v.abs())),
        _ => ("e", format!("{v}")),
    };
    format!("{col} {op} {lit}")
}

/// The count-only page scan against DataFusion's own plan, over files of
/// every writer shape (see `write_typed_file`), split into byte ranges
/// across 1-4 partitions; and `SET tsjoin.filter_aggregate_pages = false`
/// giving the same answers through batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_scan_counts_match_datafusion() {
    let cases = crate::support::case_count("TSJOIN_FILTER_AGGREGATE_CASES", 24);
    let (mut checked, mut by_pages, mut by_arrow, mut by_selection) = (0, 0, 0, 0);
    for seed in 0..cases {
        let mut rng = StdRng::seed_from_u64(1000 + seed);
        let dir = tempfile::tempdir().unwrap();
        let files = rng.random_range(1..4usize);
        for f in 0..files {
            let rows = if rng.random_bool(0.1) {
                0
            } else {
                rng.random_range(1..6000)
            };
            let with_e = f == 0 || rng.random_bool(0.5);
            write_typed_file(
                &dir.path().join(format!("{f}.parquet")),
                &mut rng,
                rows,
                with_e,
            );
        }
        let location = format!("{}/", dir.path().display());
        for partitions in [1, 2, 4] {
            let tsjoin = context(partitions);
            tsjoin
                .tsjoin_sql("SET datafusion.optimizer.repartition_file_min_size = 1")
                .await
                .unwrap();
            let plain = SessionContext::new_with_config(
                SessionConfig::new().with_target_partitions(partitions),
            );
            for ctx in [&tsjoin, &plain] {
                ctx.register_parquet("t", &location, ParquetReadOptions::default())
                    .await
                    .unwrap();
            }
            for q in 0..4 {
                let n = rng.random_range(1..4);
                let filter: Vec<String> =
                    (0..n).map(|_| typed_comparison(&mut rng)).collect();
                let aggs = if q % 2 == 0 {
                    "count(*)".to_string()
                } else {
                    let col = filter[0].split(' ').next().unwrap();
                    format!("count({col}), count(*)")
                };
                let sql = format!("SELECT {aggs} FROM t WHERE {}", filter.join(" AND "));
                let pages = q != 3;
                tsjoin
                    .tsjoin_sql(&format!("SET tsjoin.filter_aggregate_pages = {pages}"))
                    .await
                    .unwrap();
                let plan = crate::support::physical_plan(&tsjoin, &sql).await;
                let text = displayable(plan.as_ref()).indent(true).to_string();
                let got =
                    cells(&collect(Arc::clone(&plan), tsjoin.task_ctx()).await.unwrap());
                let want =
                    cells(&plain.sql(&sql).await.unwrap().collect().await.unwrap());
                assert_eq!(
                    got, want,
                    "seed {seed}, {partitions} partitions: {sql}\n{text}"
                );
                if text.contains("FilterAggregateExec") {
                    assert_eq!(text.contains("read=pages"), pages, "{sql}\n{text}");
                }
                if pages {
                    by_pages += usize::from(fused_metric(&plan, "page_scan_rows") > 0);
                    by_arrow += usize::from(fused_metric(&plan, "chunks_by_arrow") > 0);
                    by_selection +=
                        usize::from(fused_metric(&plan, "row_groups_by_selection") > 0);
                }
                checked += 1;
            }
        }
    }
    // (Some queries are not fused: DataFusion simplifies `flag = true` to
    // `flag`; some tables are empty or pruned whole.)
    assert!(
        by_pages * 4 >= checked && by_arrow > 0 && by_selection > 0,
        "pages read in {by_pages} of {checked} cases, chunks by arrow in {by_arrow}, \
         page-index selections in {by_selection}"
    );
}

/// Damaged data pages under a sound footer: the page scan answers or
/// errors, never panics, whatever bytes are hit (levels, run headers,
/// codes, dictionary entries, page headers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_scan_survives_damaged_pages() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.parquet");
    let mut rng = StdRng::seed_from_u64(11);
    write_typed_file(&good, &mut rng, 3000, true);
    let valid = std::fs::read(&good).unwrap();
    // The footer's length sits in the 4 bytes before the closing magic.
    let footer =
        u32::from_le_bytes(valid[valid.len() - 8..valid.len() - 4].try_into().unwrap())
            as usize;
    let data_end = valid.len() - 8 - footer;
    let (mut answered, mut failed, mut queried) = (0, 0, 0);
    for trial in 0..60 {
        let mut bytes = valid.clone();
        for _ in 0..rng.random_range(1..6) {
            let at = rng.random_range(4..data_end);
            bytes[at] ^= rng.random_range(1..=255u8);
        }
        let sub = dir.path().join(format!("t{trial}"));
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("x.parquet"), &bytes).unwrap();
        let ctx = context(2);
        let sql = "SELECT count(*) FROM t WHERE i64 > -5 AND f64 <= 10.0 AND ts > to_timestamp_millis(0)";
        // (Registering reads the footer and may already fail.)
        let result = match ctx
            .register_parquet("t", &format!("{}/", sub.display()), Default::default())
            .await
        {
            Ok(()) => {
                queried += 1;
                match ctx.tsjoin_sql(sql).await {
                    Ok(df) => df.collect().await.map(|_| ()),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => answered += 1,
            Err(e) => {
                assert!(!e.to_string().contains("panicked"), "trial {trial}: {e}");
                failed += 1;
            }
        }
    }
    assert!(
        failed > 0 && queried >= 30,
        "{answered} answered, {failed} failed, {queried} queried"
    );
}

/// Page statistics leave NaN out, so DataFusion's page-index pruning drops
/// a page of `{1.0, NaN}` under `v > 100` although NaN compares above 100:
/// the page scan counts what DataFusion's scan counts, whether the page
/// indexes rule out most of the row group or little of it.
#[tokio::test]
async fn page_scan_follows_page_index_pruning() {
    for pages_over_100 in [1usize, 7] {
        let dir = tempfile::tempdir().unwrap();
        let mut v = vec![Some(1.0), Some(f64::NAN)];
        for i in 0..pages_over_100 * 2 {
            v.push(Some(200.0 + i as f64));
        }
        let schema =
            Arc::new(Schema::new(vec![Field::new("v", DataType::Float64, true)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Float64Array::from(v))],
        )
        .unwrap();
        let props = WriterProperties::builder()
            .set_data_page_row_count_limit(2)
            .set_write_batch_size(2)
            .set_dictionary_enabled(false)
            .build();
        let file = std::fs::File::create(dir.path().join("a.parquet")).unwrap();
        let mut w = ArrowWriter::try_new(file, schema, Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let sql = "SELECT count(*) FROM t WHERE v > 100.0";
        let plain = SessionContext::new();
        register_dir(&plain, "t", dir.path()).await;
        let want = cells(&plain.sql(sql).await.unwrap().collect().await.unwrap());
        let ctx = context(2);
        register_dir(&ctx, "t", dir.path()).await;
        let plan = crate::support::physical_plan(&ctx, sql).await;
        let text = displayable(plan.as_ref()).indent(true).to_string();
        assert!(text.contains("read=pages"), "{text}");
        let got = cells(&collect(plan, ctx.task_ctx()).await.unwrap());
        assert_eq!(got, want, "{pages_over_100} pages over 100");
    }
}
