//! Differential test of the inline aggregate's Parquet dictionary scan
//! against DataFusion's own aggregate over the same files: random integer,
//! date and timestamp keys (nullable or not), files split into byte ranges
//! across partitions or dealt out round-robin, many row groups and pages,
//! V1 and V2 pages, with and without compression, and dictionaries that
//! overflow into PLAIN pages (where the scan must step aside); and keys of
//! one or several integer, string and float columns (NaN, -0.0), under
//! `IS NOT NULL` filters over keys and other filters the scan evaluates on
//! the rows it reads, whose row groups past the tuple bound are grouped
//! from decoded keys.

use crate::support::{cell, code_rows, context, explained_plan, physical_plan};
use datafusion::arrow::array::{
    ArrayRef, Date32Array, Float64Array, Int16Array, Int32Array, Int64Array, RecordBatch,
    StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::{WriterProperties, WriterVersion};
use datafusion::physical_plan::collect;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

fn key_array(t: &DataType, v: Vec<Option<i64>>) -> ArrayRef {
    match t {
        DataType::Int64 => Arc::new(Int64Array::from(v)),
        DataType::Int32 => Arc::new(Int32Array::from(
            v.iter()
                .map(|x| x.map(|x| x as i32 - 1000))
                .collect::<Vec<_>>(),
        )),
        DataType::Int16 => Arc::new(Int16Array::from(
            v.iter()
                .map(|x| x.map(|x| x as i16 - 7))
                .collect::<Vec<_>>(),
        )),
        DataType::Date32 => Arc::new(Date32Array::from(
            v.iter()
                .map(|x| x.map(|x| x as i32 + 19_000))
                .collect::<Vec<_>>(),
        )),
        _ => Arc::new(TimestampMicrosecondArray::from(
            v.iter()
                .map(|x| x.map(|x| 1_700_000_000_000_000 + x * 1_000_003))
                .collect::<Vec<_>>(),
        )),
    }
}

/// Rows of `sql`, and the rows phase 1 read from dictionary codes.
async fn run(ctx: &SessionContext, sql: &str) -> (Vec<Vec<String>>, usize) {
    let plan = physical_plan(ctx, sql).await;
    let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
    let rows = batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows())
                .map(move |r| b.columns().iter().map(|c| cell(c, r)).collect())
        })
        .collect();
    (rows, code_rows(&plan))
}

/// Rows of `sql` from DataFusion's own aggregate (the inline aggregate off
/// for the one query), and the rows read from codes (none).
async fn datafusion_run(ctx: &SessionContext, sql: &str) -> (Vec<Vec<String>>, usize) {
    ctx.tsjoin_sql("SET tsjoin.inline_aggregate = false")
        .await
        .unwrap();
    let out = run(ctx, sql).await;
    ctx.tsjoin_sql("SET tsjoin.inline_aggregate = true")
        .await
        .unwrap();
    out
}

/// A session of `partitions` partitions whose table `t` is `batch`, written
/// as one Parquet file into `dir` (the writer's defaults, or `props`).
async fn one_file_table(
    dir: &std::path::Path,
    batch: &RecordBatch,
    props: Option<WriterProperties>,
    partitions: usize,
) -> SessionContext {
    let out = std::fs::File::create(dir.join("a.parquet")).unwrap();
    let mut w = ArrowWriter::try_new(out, batch.schema(), props).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
    let ctx = context(partitions);
    ctx.register_parquet("t", dir.to_str().unwrap(), ParquetReadOptions::default())
        .await
        .unwrap();
    ctx
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
        // Summed through a cast to Int64.
        Field::new("s", DataType::Int16, true),
    ]));
    let files = rng.random_range(1..=3);
    let mut total = 0;
    for file in 0..files {
        let n = if rng.random_bool(0.1) {
            0
        } else {
            rng.random_range(1..12_000)
        };
        total += n;
        // Runs of one key, as sorted or clustered data gives (RLE runs).
        let mut keys = Vec::with_capacity(n);
        while keys.len() < n {
            let k = (!(nullable && rng.random_bool(0.1)))
                .then(|| rng.random_range(0..groups));
            let run = if rng.random_bool(0.2) {
                rng.random_range(1..60)
            } else {
                1
            };
            keys.extend(std::iter::repeat_n(k, run.min(n - keys.len())));
        }
        let v: Vec<Option<i64>> = (0..n)
            .map(|_| (!rng.random_bool(0.1)).then(|| rng.random_range(-1000..1000)))
            .collect();
        let f: Vec<Option<f64>> = (0..n)
            .map(|_| {
                (!rng.random_bool(0.1)).then(|| rng.random_range(-400..400) as f64 / 4.0)
            })
            .collect();
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                key_array(&key_type, keys),
                Arc::new(Int64Array::from(v)),
                Arc::new(Float64Array::from(f)),
                Arc::new(Int16Array::from(
                    (0..n)
                        .map(|i| (i % 11 != 0).then_some((i % 900) as i16 - 450))
                        .collect::<Vec<_>>(),
                )),
            ],
        )
        .unwrap();
        let mut props = WriterProperties::builder()
            .set_writer_version(if rng.random_bool(0.5) {
                WriterVersion::PARQUET_1_0
            } else {
                WriterVersion::PARQUET_2_0
            })
            .set_compression(if rng.random_bool(0.5) {
                Compression::UNCOMPRESSED
            } else {
                Compression::SNAPPY
            })
            .set_write_batch_size(37)
            .set_data_page_row_count_limit(rng.random_range(50..5000))
            .set_max_row_group_row_count(Some(rng.random_range(500..20_000)));
        if overflow {
            props = props.set_dictionary_page_size_limit(64);
        }
        let out = std::fs::File::create(dir.path().join(format!("part-{file}.parquet")))
            .unwrap();
        let mut w =
            ArrowWriter::try_new(out, Arc::clone(&schema), Some(props.build())).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }
    let ctx = context(rng.random_range(1..=4));
    // Small files split into byte ranges across partitions, or (by default,
    // fewer files than partitions) dealt out by a round-robin repartition.
    if rng.random_bool(0.5) {
        ctx.tsjoin_sql("SET datafusion.optimizer.repartition_file_min_size = 1")
            .await
            .unwrap();
    }
    ctx.register_parquet(
        "t",
        dir.path().to_str().unwrap(),
        ParquetReadOptions::default(),
    )
    .await
    .unwrap();
    let mut args_read_codes = false;
    for (with_args, sql) in [
        (false, "SELECT k, count(*) FROM t GROUP BY k ORDER BY k"),
        (
            true,
            "SELECT k, count(*), count(k), count(v), sum(v), min(v), max(v), avg(f), sum(f), sum(s), avg(s) FROM t GROUP BY k ORDER BY k",
        ),
    ] {
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate = false")
            .await
            .unwrap();
        let (want, _) = run(&ctx, sql).await;
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate = true")
            .await
            .unwrap();
        let (got, code_rows) = run(&ctx, sql).await;
        assert_eq!(
            got, want,
            "seed {seed} ({key_type}, nullable {nullable}, {groups} groups): {sql}"
        );
        // Dictionaries that fit: a count-only query reads every row from
        // its code; one with arguments all rows or none.
        if !overflow && !with_args {
            assert_eq!(
                code_rows, total,
                "seed {seed}: the dictionary scan did not run: {sql}"
            );
        }
        assert!(
            code_rows == 0 || code_rows == total,
            "seed {seed}: {code_rows} of {total} rows from codes"
        );
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
    assert!(
        with_args >= 10,
        "only {with_args} cases read arguments alongside the codes"
    );
}

/// The scan shows in EXPLAIN, steps aside for filters, and turns off.
#[tokio::test]
async fn dictionary_scan_shows_and_switches_off() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int64Array::from(vec![1, 2, 1, 3])),
            Arc::new(Int64Array::from(vec![10, 20, 30, 40])),
        ],
    )
    .unwrap();
    let ctx = one_file_table(dir.path(), &batch, None, 2).await;
    let sql = "SELECT k, sum(v) FROM t GROUP BY k";
    assert!(
        explained_plan(&ctx, sql)
            .await
            .contains("scan=parquet codes")
    );
    // A filter is evaluated on the rows read (shown with the scan).
    assert!(
        explained_plan(&ctx, "SELECT k, sum(v) FROM t WHERE v > 15 GROUP BY k")
            .await
            .contains("scan=parquet codes (filter v@")
    );
    // One over a key column would decode the key twice: DataFusion's scan.
    assert!(
        !explained_plan(&ctx, "SELECT k, sum(v) FROM t WHERE k <> 2 GROUP BY k")
            .await
            .contains("scan=parquet codes")
    );
    let strings = |v: &[[&str; 2]]| {
        v.iter()
            .map(|r| r.iter().map(|c| c.to_string()).collect())
            .collect::<Vec<Vec<_>>>()
    };
    // Four rows for three entries: the sum reads decoded keys, the count
    // reads the codes.
    assert_eq!(
        run(&ctx, &format!("{sql} ORDER BY k")).await,
        (strings(&[["1", "40"], ["2", "20"], ["3", "40"]]), 0)
    );
    let count = "SELECT k, count(*) FROM t GROUP BY k ORDER BY k";
    assert_eq!(
        run(&ctx, count).await,
        (strings(&[["1", "2"], ["2", "1"], ["3", "1"]]), 4)
    );
    ctx.tsjoin_sql("SET tsjoin.inline_aggregate_dictionary_scan = false")
        .await
        .unwrap();
    assert_eq!(run(&ctx, count).await.1, 0);
}

/// A float column in a composite key goes inline only where the scan reads
/// its Parquet codes (EXPLAIN says so, naming a `IS NOT NULL` filter it
/// took over); elsewhere the aggregate stays DataFusion's.
#[tokio::test]
async fn float_keys_go_inline_only_through_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, true),
        Field::new("cap", DataType::Float64, true),
        Field::new("v", DataType::Float64, true),
    ]));
    let n = 6000;
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(StringArray::from(
                (0..n)
                    .map(|i| (i % 7 != 0).then(|| format!("truck_{}", i % 13)))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from(
                (0..n)
                    .map(|i| (i % 11 != 0).then_some((i % 13 % 3) as f64 * 500.0))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from(
                (0..n).map(|i| i as f64 / 8.0).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap();
    let ctx = one_file_table(dir.path(), &batch, None, 2).await;
    ctx.tsjoin_sql("CREATE TABLE m AS SELECT * FROM t")
        .await
        .unwrap();
    let query = |table: &str, filter: &str| {
        format!(
            "SELECT name, cap, count(*), avg(v) FROM {table} {filter} GROUP BY name, cap \
             ORDER BY name, cap"
        )
    };
    let sql = query("t", "WHERE name IS NOT NULL");
    assert!(
        explained_plan(&ctx, &sql)
            .await
            .contains("keys=composite, scan=parquet codes (NULL name skipped)")
    );
    let (got, read) = run(&ctx, &sql).await;
    assert_eq!(read, n);
    assert!(got.iter().all(|r| r[0] != "NULL"));
    assert_eq!(datafusion_run(&ctx, &sql).await.0, got);
    // Another filter: evaluated by the scan on the rows it reads.
    let sql = query("t", "WHERE v > 10 AND name IS NOT NULL");
    assert!(
        explained_plan(&ctx, &sql)
            .await
            .contains("keys=composite, scan=parquet codes (NULL name skipped; filter v@")
    );
    let (got, read) = run(&ctx, &sql).await;
    assert_eq!(read, n);
    assert_eq!(datafusion_run(&ctx, &sql).await.0, got);
    // A table not in Parquet, the scan off: DataFusion's aggregate.
    assert!(
        !explained_plan(&ctx, &query("m", ""))
            .await
            .contains("InlineAggregateExec")
    );
    ctx.tsjoin_sql("SET tsjoin.inline_aggregate_dictionary_scan = false")
        .await
        .unwrap();
    assert!(
        !explained_plan(&ctx, &query("t", ""))
            .await
            .contains("InlineAggregateExec")
    );
}

/// One string key (TSBS's `GROUP BY fleet`) goes inline only from Parquet
/// codes: where the files' pages are not dictionary codes the operator
/// hands every row to DataFusion's aggregate before reading any, and the
/// answers agree either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_string_key_reads_codes_or_hands_over() {
    let n = 20_000;
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("fleet", DataType::Utf8, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("v", DataType::Float64, true),
        ])),
        vec![
            Arc::new(StringArray::from(
                (0..n)
                    .map(|i| {
                        (i % 17 != 0)
                            .then(|| ["North", "South", "a fleet past 12 bytes"][i % 3])
                    })
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                (0..n)
                    .map(|i| (i % 5 != 0).then(|| format!("truck_{}", i % 50)))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from(
                (0..n)
                    .map(|i| (i % 7 != 0).then_some((i % 101) as f64 / 4.0))
                    .collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap();
    // `name` tested for NULL only (read as a dictionary), then compared
    // (read as views).
    let sqls = [
        "SELECT fleet, count(*), avg(v), max(v) FROM t \
         WHERE v > 1 AND name IS NOT NULL AND fleet IS NOT NULL \
         GROUP BY fleet ORDER BY fleet",
        "SELECT fleet, count(*), avg(v), max(v) FROM t \
         WHERE name > 'truck_3' AND fleet IS NOT NULL GROUP BY fleet ORDER BY fleet",
    ];
    for (dictionary, sql) in [(true, sqls[0]), (false, sqls[0]), (true, sqls[1])] {
        let dir = tempfile::tempdir().unwrap();
        let props = WriterProperties::builder()
            .set_dictionary_enabled(dictionary)
            .set_max_row_group_row_count(Some(3000))
            .build();
        let ctx = one_file_table(dir.path(), &batch, Some(props), 2).await;
        let plan = explained_plan(&ctx, sql).await;
        assert!(
            plan.contains("keys=string, scan=parquet codes (NULL fleet skipped; filter"),
            "{plan}"
        );
        assert!(
            plan.contains("when the files' codes are not read"),
            "{plan}"
        );
        let (got, read) = run(&ctx, sql).await;
        assert_eq!(read, if dictionary { n } else { 0 }, "{sql}");
        assert_eq!(got.len(), 3);
        assert_eq!(datafusion_run(&ctx, sql).await, (got, 0));
    }
}

/// Where the filter's page index would skip more than a tenth of the rows,
/// DataFusion's scan (which reads only the pages left) runs; skipping
/// less, the scan reads every row and the filter drops them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_index_that_skips_much_keeps_datafusions_scan() {
    let n = 20_000i64;
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("seq", DataType::Int64, false),
        ])),
        vec![
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| i % 7))),
            Arc::new(Int64Array::from_iter_values(0..n)),
        ],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let props = WriterProperties::builder()
        .set_data_page_row_count_limit(500)
        .set_write_batch_size(500)
        .build();
    let ctx = one_file_table(dir.path(), &batch, Some(props), 2).await;
    for (from, read) in [(15_000, 0), (1_000, n as usize)] {
        let sql = format!(
            "SELECT k, count(*), sum(seq) FROM t WHERE seq >= {from} GROUP BY k ORDER BY k"
        );
        assert!(
            explained_plan(&ctx, &sql)
                .await
                .contains("scan=parquet codes (filter")
        );
        let (got, code_rows) = run(&ctx, &sql).await;
        assert_eq!(code_rows, read, "{sql}");
        assert_eq!(datafusion_run(&ctx, &sql).await.0, got, "{sql}");
    }
}

/// One key column of a multi-column case: its values drawn from `groups`
/// values, shifted by `drift` new values every `drift_every` rows (0: no
/// drift), so later row groups bring dictionaries of values never seen.
struct MultiKey {
    string: bool,
    /// A `Float64` column (when not `string`): NaN, -0.0 and 0.0 among
    /// the values.
    float: bool,
    nullable: bool,
    groups: i64,
    drift: i64,
}

fn multi_key_array(k: &MultiKey, v: Vec<Option<i64>>) -> ArrayRef {
    if k.string {
        // Short and long (past 12 bytes, out of line in a view) strings.
        let s: Vec<Option<String>> = v
            .iter()
            .map(|x| {
                x.map(|x| {
                    if x % 5 == 4 {
                        format!("a longer string key {x}")
                    } else {
                        format!("s{x}")
                    }
                })
            })
            .collect();
        Arc::new(StringArray::from(s))
    } else if k.float {
        Arc::new(Float64Array::from(
            v.iter()
                .map(|x| {
                    x.map(|x| match x % 9 {
                        8 => f64::NAN,
                        7 => -0.0,
                        6 => 0.0,
                        _ => x as f64 / 4.0 - 3.0,
                    })
                })
                .collect::<Vec<_>>(),
        ))
    } else {
        Arc::new(Int64Array::from(
            v.iter().map(|x| x.map(|x| x * 3 - 50)).collect::<Vec<_>>(),
        ))
    }
}

/// Writes one file of `n` rows of keys `keys` (columns k0, k1, ...) and
/// arguments v, f, s into `dir`, `rg` rows per row group.
fn write_multi(
    rng: &mut StdRng,
    dir: &std::path::Path,
    name: &str,
    keys: &[MultiKey],
    n: usize,
    drift_every: usize,
    rg: usize,
) {
    let mut fields: Vec<Field> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            Field::new(
                format!("k{i}"),
                if k.string {
                    DataType::Utf8
                } else if k.float {
                    DataType::Float64
                } else {
                    DataType::Int64
                },
                k.nullable,
            )
        })
        .collect();
    fields.push(Field::new("v", DataType::Int64, true));
    fields.push(Field::new("f", DataType::Float64, true));
    fields.push(Field::new("s", DataType::Int16, true));
    fields.push(Field::new(
        "ts",
        DataType::Timestamp(TimeUnit::Microsecond, None),
        true,
    ));
    let schema = Arc::new(Schema::new(fields));
    let mut columns: Vec<ArrayRef> = keys
        .iter()
        .map(|k| {
            let v = (0..n)
                .map(|r| {
                    let shift =
                        r.checked_div(drift_every).map_or(0, |q| q as i64 * k.drift);
                    (!(k.nullable && rng.random_bool(0.1)))
                        .then(|| shift + rng.random_range(0..k.groups))
                })
                .collect();
            multi_key_array(k, v)
        })
        .collect();
    columns.push(Arc::new(Int64Array::from(
        (0..n)
            .map(|_| (!rng.random_bool(0.1)).then(|| rng.random_range(-1000..1000)))
            .collect::<Vec<_>>(),
    )));
    columns.push(Arc::new(Float64Array::from(
        (0..n)
            .map(|_| {
                (!rng.random_bool(0.1)).then(|| rng.random_range(-400..400) as f64 / 4.0)
            })
            .collect::<Vec<_>>(),
    )));
    columns.push(Arc::new(Int16Array::from(
        (0..n)
            .map(|_| (!rng.random_bool(0.1)).then(|| rng.random_range(-30_000..30_000)))
            .collect::<Vec<_>>(),
    )));
    // Times in file order over one to eight hours from 2020-01-01, jittered
    // by up to a minute, 5% NULL (their own generator: the draws above
    // stay as they were).
    let mut times = StdRng::seed_from_u64(n as u64 ^ 0x75);
    let span = times.random_range(1..=8i64) * 3_600_000_000;
    let step = span / n.max(1) as i64;
    columns.push(Arc::new(TimestampMicrosecondArray::from(
        (0..n as i64)
            .map(|r| {
                (!times.random_bool(0.05)).then(|| {
                    1_577_836_800_000_000 + r * step + times.random_range(0..60_000_000)
                })
            })
            .collect::<Vec<_>>(),
    )));
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns).unwrap();
    let props = WriterProperties::builder()
        .set_writer_version(if rng.random_bool(0.5) {
            WriterVersion::PARQUET_1_0
        } else {
            WriterVersion::PARQUET_2_0
        })
        .set_compression(if rng.random_bool(0.5) {
            Compression::UNCOMPRESSED
        } else {
            Compression::SNAPPY
        })
        .set_data_page_row_count_limit(rng.random_range(50..5000))
        .set_max_row_group_row_count(Some(rg));
    let out = std::fs::File::create(dir.join(name)).unwrap();
    let mut w = ArrowWriter::try_new(out, schema, Some(props.build())).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// The keys `k0, k1, ...` of `n` columns.
fn key_list(n: usize) -> String {
    (0..n)
        .map(|i| format!("k{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The queries (count only; every aggregate; every aggregate under
/// `filter`) grouped by `k` on tsjoin and on DataFusion: the rows must
/// agree. Returns the rows read from codes by each.
async fn compare_multi(
    ctx: &SessionContext,
    k: &str,
    filter: &str,
    what: &str,
) -> [usize; 3] {
    let mut read = [0; 3];
    let all = "count(*), count(v), sum(v), min(v), max(v), avg(f), sum(f), sum(s), avg(s), max(s)";
    for (i, (aggs, filter)) in [("count(*)", ""), (all, ""), (all, filter)]
        .into_iter()
        .enumerate()
    {
        let sql = format!("SELECT {k}, {aggs} FROM t {filter} GROUP BY {k} ORDER BY {k}");
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate = false")
            .await
            .unwrap();
        let (want, _) = run(ctx, &sql).await;
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate = true")
            .await
            .unwrap();
        let (got, code_rows) = run(ctx, &sql).await;
        assert_eq!(got, want, "{what}: {sql}");
        read[i] = code_rows;
    }
    read
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_column_dictionary_scan_matches_datafusion() {
    let (mut count_scans, mut arg_scans, mut filtered_scans) = (0, 0, 0);
    for seed in 0..40u64 {
        let mut rng = StdRng::seed_from_u64(1000 + seed);
        // One key too: a single string key reads its codes only here.
        let keys: Vec<MultiKey> = (0..rng.random_range(1..=3))
            .map(|_| MultiKey {
                string: rng.random_bool(0.6),
                float: rng.random_bool(0.5),
                nullable: rng.random_bool(0.5),
                groups: [1, 3, 12, 40][rng.random_range(0..4)],
                drift: rng.random_range(0..3),
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let mut total = 0;
        let drift_every = if rng.random_bool(0.3) {
            rng.random_range(200..2000)
        } else {
            0
        };
        for f in 0..rng.random_range(1..=3) {
            let n = if rng.random_bool(0.1) {
                0
            } else {
                rng.random_range(1..9000)
            };
            total += n;
            let rg = rng.random_range(300..6000);
            write_multi(
                &mut rng,
                dir.path(),
                &format!("part-{f}.parquet"),
                &keys,
                n,
                drift_every,
                rg,
            );
        }
        let ctx = context(rng.random_range(1..=4));
        if rng.random_bool(0.5) {
            ctx.tsjoin_sql("SET datafusion.optimizer.repartition_file_min_size = 1")
                .await
                .unwrap();
        }
        if rng.random_bool(0.3) {
            // Strings read as Utf8 rather than views.
            ctx.tsjoin_sql(
                "SET datafusion.execution.parquet.schema_force_view_types = false",
            )
            .await
            .unwrap();
        }
        ctx.register_parquet(
            "t",
            dir.path().to_str().unwrap(),
            ParquetReadOptions::default(),
        )
        .await
        .unwrap();
        let what = format!(
            "seed {seed}, {} keys, drift every {drift_every}",
            keys.len()
        );
        // `k IS NOT NULL` over keys, and conjuncts the scan evaluates on
        // the rows it reads (any column, ORs, NULLs, a key's IS NULL).
        let filters = [
            "WHERE k0 IS NOT NULL",
            "WHERE v > 0",
            "WHERE k0 IS NOT NULL AND f < 10.0",
            "WHERE (v < -100 OR s > 0) AND f IS NOT NULL",
            "WHERE k0 IS NULL OR v % 3 = 1",
            "WHERE v IS NULL AND k0 IS NOT NULL",
        ];
        let filter = match keys.len() {
            1 => filters[rng.random_range(0..filters.len())],
            _ if rng.random_bool(0.3) => "WHERE k1 IS NOT NULL AND k0 IS NOT NULL",
            _ => filters[rng.random_range(0..filters.len())],
        };
        let what = format!("{what}, {filter}");
        let read = compare_multi(&ctx, &key_list(keys.len()), filter, &what).await;
        for (i, r) in read.into_iter().enumerate() {
            // (A filter's statistics may rule row groups out.)
            assert!(
                r == 0 || r == total || (i == 2 && r < total),
                "{what}: {r} of {total} rows read by the scan"
            );
        }
        count_scans += (read[0] > 0) as usize;
        arg_scans += (read[1] > 0) as usize;
        filtered_scans += (read[2] > 0) as usize;
    }
    assert!(
        count_scans >= 15 && arg_scans >= 8 && filtered_scans >= 8,
        "scan ran on {count_scans} count-only, {arg_scans} full and {filtered_scans} \
         filtered cases"
    );
}

/// Row groups that each bring new values of one key: the tuples soon pass
/// the bound, and the row groups after that are grouped from decoded keys
/// (without the bound, the pair table would outgrow its limit); the
/// groups end past the composite table's own limit, in DataFusion's table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_column_scan_decodes_row_groups_past_the_tuple_bound() {
    let mut rng = StdRng::seed_from_u64(7);
    let dir = tempfile::tempdir().unwrap();
    // 300 row groups of 400 rows, ~250 new values of k0 in each (76K in all).
    let keys = [
        MultiKey {
            string: false,
            float: false,
            nullable: false,
            groups: 400,
            drift: 400,
        },
        MultiKey {
            string: true,
            float: false,
            nullable: true,
            groups: 40,
            drift: 0,
        },
    ];
    write_multi(&mut rng, dir.path(), "a.parquet", &keys, 120_000, 400, 400);
    let ctx = context(2);
    ctx.register_parquet(
        "t",
        dir.path().to_str().unwrap(),
        ParquetReadOptions::default(),
    )
    .await
    .unwrap();
    let read =
        compare_multi(&ctx, &key_list(2), "WHERE k1 IS NOT NULL", "drifting keys").await;
    // Count only takes the scan (its rows-per-entry rule does not apply);
    // with arguments, 64 rows per entry are wanted and it steps aside.
    assert_eq!(read, [120_000, 0, 0]);
}

/// Keys that go together (a truck's name, driver and load capacity) have a
/// product of dictionaries far above their tuples: the scan takes them
/// after the first row group shows few tuples. Independent keys with as
/// large dictionaries show many in the first row group, and the scan steps
/// aside. Both answer as DataFusion does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_that_go_together_take_the_scan_after_one_row_group() {
    for correlated in [true, false] {
        let mut rng = StdRng::seed_from_u64(11);
        // (Enough rows per dictionary entry for the scan to read arguments.)
        let n = 200_000;
        let k0: Vec<i64> = (0..n).map(|_| rng.random_range(0..300)).collect();
        let pick = |k: i64, m: i64, rng: &mut StdRng| {
            if correlated {
                k % m
            } else {
                rng.random_range(0..m)
            }
        };
        let k1: Vec<String> = k0
            .iter()
            .map(|&k| format!("driver_{}", pick(k, 150, &mut rng)))
            .collect();
        let k2: Vec<f64> = k0
            .iter()
            .map(|&k| pick(k, 50, &mut rng) as f64 * 250.0)
            .collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new("k0", DataType::Int64, true),
            Field::new("k1", DataType::Utf8, true),
            Field::new("k2", DataType::Float64, true),
            Field::new("v", DataType::Int64, true),
            Field::new("f", DataType::Float64, true),
            Field::new("s", DataType::Int16, true),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(k0)),
                Arc::new(StringArray::from(k1)),
                Arc::new(Float64Array::from(k2)),
                Arc::new(Int64Array::from_iter_values(
                    (0..n).map(|i| i as i64 % 1000),
                )),
                Arc::new(Float64Array::from_iter_values(
                    (0..n).map(|i| (i % 100) as f64 / 4.0),
                )),
                Arc::new(Int16Array::from_iter_values(
                    (0..n).map(|i| (i % 77) as i16),
                )),
            ],
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(70_000))
            .build();
        let ctx = one_file_table(dir.path(), &batch, Some(props), 2).await;
        let what = format!("correlated {correlated}");
        let read = compare_multi(&ctx, &key_list(3), "WHERE k1 IS NOT NULL", &what).await;
        let want = if correlated { n } else { 0 };
        assert_eq!(read, [want; 3], "{what}");
    }
}

/// A time bucket beside coded keys (TSBS's `GROUP BY name, driver,
/// date_bin(INTERVAL '10 minutes', ts)`) or another key computed from a
/// column that is no key, anywhere in the GROUP BY, under filters over the
/// time and other columns (only passing rows are grouped): the scan
/// computes it on the rows it reads and answers as DataFusion does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn computed_keys_beside_codes_match_datafusion() {
    let mut scans = [0; 3];
    for seed in 0..40u64 {
        let mut rng = StdRng::seed_from_u64(5000 + seed);
        let keys: Vec<MultiKey> = (0..rng.random_range(1..=2))
            .map(|_| MultiKey {
                string: rng.random_bool(0.7),
                float: false,
                nullable: rng.random_bool(0.5),
                groups: [3, 12, 40][rng.random_range(0..3)],
                drift: 0,
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        for f in 0..rng.random_range(1..=2) {
            let n = rng.random_range(1..20_000);
            let rg = rng.random_range(800..3000);
            write_multi(
                &mut rng,
                dir.path(),
                &format!("part-{f}.parquet"),
                &keys,
                n,
                0,
                rg,
            );
        }
        let ctx = context(rng.random_range(1..=4));
        ctx.register_parquet(
            "t",
            dir.path().to_str().unwrap(),
            ParquetReadOptions::default(),
        )
        .await
        .unwrap();
        let computed = [
            "date_bin(INTERVAL '10 minutes', ts)",
            "date_bin(INTERVAL '1 hour', ts, TIMESTAMP '2020-01-01 00:07:00')",
            "v / 100",
        ][rng.random_range(0..3)];
        let mut k: Vec<String> = (0..keys.len()).map(|i| format!("k{i}")).collect();
        k.insert(rng.random_range(0..=k.len()), computed.to_string());
        let filter = [
            "WHERE k0 IS NOT NULL",
            "WHERE ts >= TIMESTAMP '2020-01-01 00:40:00' \
             AND ts < TIMESTAMP '2020-01-01 05:30:00' AND k0 IS NOT NULL",
            "WHERE f < 10.0 AND ts IS NOT NULL",
            "WHERE v > 0 OR ts < TIMESTAMP '2020-01-01 01:00:00'",
        ][rng.random_range(0..4)];
        let what = format!("seed {seed}, GROUP BY {}, {filter}", k.join(", "));
        let read = compare_multi(&ctx, &k.join(", "), filter, &what).await;
        for (n, r) in scans.iter_mut().zip(read) {
            *n += (r > 0) as usize;
        }
    }
    assert!(
        scans.iter().all(|&n| n >= 8),
        "scan ran on {scans:?} of 40 count-only, full and filtered cases"
    );
}
