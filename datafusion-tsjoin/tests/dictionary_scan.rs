//! Differential test of the inline aggregate's Parquet dictionary scan
//! against DataFusion's own aggregate over the same files: random integer,
//! date and timestamp keys (nullable or not), files split into byte ranges
//! across partitions or dealt out round-robin, many row groups and pages,
//! V1 and V2 pages, with and without compression, and dictionaries that
//! overflow into PLAIN pages (where the scan must step aside).

use crate::support::{cell, context};
use datafusion::arrow::array::{
    ArrayRef, Date32Array, Float64Array, Int16Array, Int32Array, Int64Array, RecordBatch, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::{WriterProperties, WriterVersion};
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

fn key_array(t: &DataType, v: Vec<Option<i64>>) -> ArrayRef {
    match t {
        DataType::Int64 => Arc::new(Int64Array::from(v)),
        DataType::Int32 => Arc::new(Int32Array::from(v.iter().map(|x| x.map(|x| x as i32 - 1000)).collect::<Vec<_>>())),
        DataType::Int16 => Arc::new(Int16Array::from(v.iter().map(|x| x.map(|x| x as i16 - 7)).collect::<Vec<_>>())),
        DataType::Date32 => Arc::new(Date32Array::from(v.iter().map(|x| x.map(|x| x as i32 + 19_000)).collect::<Vec<_>>())),
        _ => Arc::new(TimestampMicrosecondArray::from(
            v.iter().map(|x| x.map(|x| 1_700_000_000_000_000 + x * 1_000_003)).collect::<Vec<_>>(),
        )),
    }
}

/// Rows of `sql`, and the rows phase 1 read from dictionary codes.
async fn run(ctx: &SessionContext, sql: &str) -> (Vec<Vec<String>>, usize) {
    let plan = ctx.tsjoin_sql(sql).await.unwrap().create_physical_plan().await.unwrap();
    let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
    let rows = batches
        .iter()
        .flat_map(|b| (0..b.num_rows()).map(move |r| b.columns().iter().map(|c| cell(c, r)).collect()))
        .collect();
    fn code_rows(p: &Arc<dyn ExecutionPlan>) -> usize {
        let mine = if p.name() == "InlineAggregateExec" {
            p.metrics().and_then(|m| m.sum_by_name("dictionary_scan_rows")).map_or(0, |v| v.as_usize())
        } else {
            0
        };
        mine + p.children().into_iter().map(code_rows).sum::<usize>()
    }
    (rows, code_rows(&plan))
}

/// Runs one random case; returns whether the query with arguments read
/// the codes (it steps aside for large dictionaries).
async fn run_case(seed: u64) -> bool {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let types = [
        DataType::Int64,
        DataType::Int32,
        DataType::Int16,
        DataType::Date32,
        DataType::Timestamp(TimeUnit::Microsecond, None),
    ];
    let key_type = types[rng.random_range(0..types.len())].clone();
    let nullable = rng.random_bool(0.6);
    let groups = [1i64, 7, 300, 5000][rng.random_range(0..4)];
    let overflow = rng.random_bool(0.2);
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", key_type.clone(), nullable),
        Field::new("v", DataType::Int64, true),
        Field::new("f", DataType::Float64, true),
    ]));
    let files = rng.random_range(1..=3);
    let mut total = 0;
    for file in 0..files {
        let n = if rng.random_bool(0.1) { 0 } else { rng.random_range(1..12_000) };
        total += n;
        // Runs of one key, as sorted or clustered data gives (RLE runs).
        let mut keys = Vec::with_capacity(n);
        while keys.len() < n {
            let k = (!(nullable && rng.random_bool(0.1))).then(|| rng.random_range(0..groups));
            let run = if rng.random_bool(0.2) { rng.random_range(1..60) } else { 1 };
            keys.extend(std::iter::repeat_n(k, run.min(n - keys.len())));
        }
        let v: Vec<Option<i64>> = (0..n).map(|_| (!rng.random_bool(0.1)).then(|| rng.random_range(-1000..1000))).collect();
        let f: Vec<Option<f64>> =
            (0..n).map(|_| (!rng.random_bool(0.1)).then(|| rng.random_range(-400..400) as f64 / 4.0)).collect();
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![key_array(&key_type, keys), Arc::new(Int64Array::from(v)), Arc::new(Float64Array::from(f))],
        )
        .unwrap();
        let mut props = WriterProperties::builder()
            .set_writer_version(if rng.random_bool(0.5) { WriterVersion::PARQUET_1_0 } else { WriterVersion::PARQUET_2_0 })
            .set_compression(if rng.random_bool(0.5) { Compression::UNCOMPRESSED } else { Compression::SNAPPY })
            .set_write_batch_size(37)
            .set_data_page_row_count_limit(rng.random_range(50..5000))
            .set_max_row_group_row_count(Some(rng.random_range(500..20_000)));
        if overflow {
            props = props.set_dictionary_page_size_limit(64);
        }
        let out = std::fs::File::create(dir.path().join(format!("part-{file}.parquet"))).unwrap();
        let mut w = ArrowWriter::try_new(out, Arc::clone(&schema), Some(props.build())).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }
    let ctx = context(rng.random_range(1..=4));
    // Small files split into byte ranges across partitions, or (by default,
    // fewer files than partitions) dealt out by a round-robin repartition.
    if rng.random_bool(0.5) {
        ctx.tsjoin_sql("SET datafusion.optimizer.repartition_file_min_size = 1").await.unwrap();
    }
    ctx.register_parquet("t", dir.path().to_str().unwrap(), ParquetReadOptions::default()).await.unwrap();
    let mut args_read_codes = false;
    for (with_args, sql) in [
        (false, "SELECT k, count(*) FROM t GROUP BY k ORDER BY k"),
        (true, "SELECT k, count(*), count(k), count(v), sum(v), min(v), max(v), avg(f), sum(f) FROM t GROUP BY k ORDER BY k"),
    ] {
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate = false").await.unwrap();
        let (want, _) = run(&ctx, sql).await;
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate = true").await.unwrap();
        let (got, code_rows) = run(&ctx, sql).await;
        assert_eq!(got, want, "seed {seed} ({key_type}, nullable {nullable}, {groups} groups): {sql}");
        // Dictionaries that fit: a count-only query reads every row from
        // its code; one with arguments all rows or none.
        if !overflow && !with_args {
            assert_eq!(code_rows, total, "seed {seed}: the dictionary scan did not run: {sql}");
        }
        assert!(code_rows == 0 || code_rows == total, "seed {seed}: {code_rows} of {total} rows from codes");
        args_read_codes |= with_args && code_rows > 0;
    }
    args_read_codes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dictionary_scan_matches_datafusion() {
    let mut with_args = 0;
    for seed in 0..60 {
        with_args += run_case(seed).await as usize;
    }
    assert!(with_args >= 10, "only {with_args} cases read arguments alongside the codes");
}

/// The scan shows in EXPLAIN, steps aside for filters, and turns off.
#[tokio::test]
async fn dictionary_scan_shows_and_switches_off() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true), Field::new("v", DataType::Int64, true)]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new(Int64Array::from(vec![1, 2, 1, 3])), Arc::new(Int64Array::from(vec![10, 20, 30, 40]))],
    )
    .unwrap();
    let out = std::fs::File::create(dir.path().join("a.parquet")).unwrap();
    let mut w = ArrowWriter::try_new(out, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let ctx = context(2);
    ctx.register_parquet("t", dir.path().to_str().unwrap(), ParquetReadOptions::default()).await.unwrap();
    let explain = |sql: &str| {
        let ctx = ctx.clone();
        let sql = format!("EXPLAIN {sql}");
        async move {
            let batches = ctx.tsjoin_sql(&sql).await.unwrap().collect().await.unwrap();
            datafusion::arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string()
        }
    };
    let sql = "SELECT k, sum(v) FROM t GROUP BY k";
    assert!(explain(sql).await.contains("scan=parquet codes"));
    assert!(!explain("SELECT k, sum(v) FROM t WHERE v > 15 GROUP BY k").await.contains("scan=parquet codes"));
    let strings = |v: &[[&str; 2]]| v.iter().map(|r| r.iter().map(|c| c.to_string()).collect()).collect::<Vec<Vec<_>>>();
    // Four rows for three entries: the sum reads decoded keys, the count
    // reads the codes.
    assert_eq!(run(&ctx, &format!("{sql} ORDER BY k")).await, (strings(&[["1", "40"], ["2", "20"], ["3", "40"]]), 0));
    let count = "SELECT k, count(*) FROM t GROUP BY k ORDER BY k";
    assert_eq!(run(&ctx, count).await, (strings(&[["1", "2"], ["2", "1"], ["3", "1"]]), 4));
    ctx.tsjoin_sql("SET tsjoin.inline_aggregate_dictionary_scan = false").await.unwrap();
    assert_eq!(run(&ctx, count).await.1, 0);
}
