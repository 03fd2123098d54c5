//! Files of disjoint time ranges (a table partitioned by day): files pruned
//! while planning (`PruneFilesRule`) and GROUP BY time buckets aggregated
//! once per partition when the inline aggregate falls back
//! (`inline_aggregate/time_disjoint.rs`). Differential against DataFusion's
//! plain plan on random files (out-of-order rows, NULL keys and values, NaN,
//! overlapping or NULL timestamps in some cases, 1–4 partitions), and what
//! EXPLAIN shows.

use crate::support::{
    cells, context, explained_plan, physical_plan, register_dir, write_parquet,
};
use datafusion::arrow::array::{
    Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;

/// Microseconds per "day" of the generated files (an hour keeps buckets of
/// seconds and minutes meaningful at a few thousand rows per file).
const DAY: i64 = 3_600_000_000;

/// How the files' time ranges relate.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    /// One day per file, rows out of order within it.
    Disjoint,
    /// Every file reaches half a day into the next one.
    Overlapping,
    /// Disjoint, with NULL timestamps in some rows.
    NullTimestamps,
}

/// Writes `files` day files of `rows` rows each into `dir`: `ts`, a string
/// key `name` (nullable), an integer key `k`, a value `v` (NULL, NaN) and `w`, `v` without NaN.
fn write_files(dir: &Path, rng: &mut StdRng, files: usize, rows: usize, layout: Layout) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("name", DataType::Utf8, true),
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Float64, true),
        Field::new("w", DataType::Float64, true),
    ]));
    let names = rng.random_range(3..200);
    for day in 0..files as i64 {
        let span = if layout == Layout::Overlapping {
            DAY * 3 / 2
        } else {
            DAY
        };
        let ts: Vec<Option<i64>> = (0..rows)
            .map(|_| {
                (layout != Layout::NullTimestamps || !rng.random_bool(0.01))
                    .then(|| day * DAY + rng.random_range(0..span))
            })
            .collect();
        let name: Vec<Option<String>> = (0..rows)
            .map(|_| {
                (!rng.random_bool(0.05))
                    .then(|| format!("truck_{}", rng.random_range(0..names)))
            })
            .collect();
        let k: Vec<i64> = (0..rows).map(|_| rng.random_range(0..3)).collect();
        let v: Vec<Option<f64>> = (0..rows)
            .map(|_| match rng.random_range(0..40) {
                0 => None,
                1 => Some(f64::NAN),
                _ => Some(rng.random_range(-1000..1000) as f64 / 8.0),
            })
            .collect();
        // DataFusion's min/max over NaN depends on the order rows arrive in:
        // `w` has NULLs but no NaN.
        let w: Vec<Option<f64>> = v.iter().map(|x| x.filter(|x| !x.is_nan())).collect();
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(TimestampMicrosecondArray::from(ts)),
                Arc::new(StringArray::from(name)),
                Arc::new(Int64Array::from(k)),
                Arc::new(Float64Array::from(v)),
                Arc::new(Float64Array::from(w)),
            ],
        )
        .unwrap();
        write_parquet(
            &dir.join(format!("day{day:02}.parquet")),
            &batch,
            rng.random_range(500..4000),
        );
    }
}

fn sorted(mut rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    rows.sort();
    rows
}

async fn rows(ctx: &SessionContext, sql: &str, tsjoin: bool) -> Vec<Vec<String>> {
    let df = if tsjoin {
        ctx.tsjoin_sql(sql).await
    } else {
        ctx.sql(sql).await
    };
    sorted(cells(&df.unwrap().collect().await.unwrap()))
}

/// The queries of one case: time-bucket GROUP BYs (fine buckets, so the
/// groups are many and the inline aggregate falls back), with and without a
/// WHERE that prunes files.
fn queries(rng: &mut StdRng, files: usize) -> Vec<String> {
    let from = rng.random_range(0..files as i64) * DAY + rng.random_range(0..DAY);
    let to = from + rng.random_range(1..3) * DAY;
    let lo = format!("to_timestamp_micros({from})");
    let hi = format!("to_timestamp_micros({to})");
    vec![
        "SELECT name, k, date_bin(INTERVAL '1 second', ts) AS b, count(*), sum(v), \
         avg(v), min(w), max(w) FROM t GROUP BY name, k, b"
            .into(),
        "SELECT name, date_trunc('second', ts) AS b, count(v), max(w) FROM t \
         GROUP BY name, b HAVING count(*) > 1"
            .into(),
        format!(
            "SELECT k, name, date_bin(INTERVAL '2 seconds', ts, TIMESTAMP '2020-01-01 00:00:01') AS b, \
             avg(v) FROM t WHERE ts >= {lo} AND ts < {hi} GROUP BY k, name, b"
        ),
        format!(
            "SELECT count(*), sum(v) FROM t WHERE ts >= {lo} AND ts < {hi} AND k = 1"
        ),
        format!("SELECT * FROM t WHERE ts >= {lo} AND ts < {hi} AND name = 'truck_1'"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn day_files_answer_as_datafusion_does() {
    let cases = crate::support::case_count("TSJOIN_TIME_PARTITION_CASES", 6);
    for case in 0..cases {
        let mut rng = StdRng::seed_from_u64(0x7D15 + case);
        let layout = [
            Layout::Disjoint,
            Layout::Overlapping,
            Layout::NullTimestamps,
        ][case as usize % 3];
        let files = rng.random_range(1..7);
        let dir = tempfile::tempdir().unwrap();
        let per_file = rng.random_range(2000..9000);
        write_files(dir.path(), &mut rng, files, per_file, layout);
        let partitions = rng.random_range(1..5);
        let config = SessionConfig::new().with_target_partitions(partitions);
        let ours = crate::support::tsjoin_context(config.clone());
        let plain = SessionContext::new_with_config(config);
        register_dir(&ours, "t", dir.path()).await;
        register_dir(&plain, "t", dir.path()).await;
        for sql in queries(&mut rng, files) {
            let want = rows(&plain, &sql, false).await;
            let got = rows(&ours, &sql, true).await;
            if got != want {
                let only_got: Vec<_> =
                    got.iter().filter(|r| !want.contains(r)).take(5).collect();
                let only_want: Vec<_> =
                    want.iter().filter(|r| !got.contains(r)).take(5).collect();
                panic!(
                    "case {case} ({layout:?}, {files} files, {partitions} partitions): {sql}\n\
                     {} vs {} rows; only tsjoin: {only_got:?}; only DataFusion: {only_want:?}",
                    got.len(),
                    want.len()
                );
            }
        }
    }
}

/// Six disjoint day files with second buckets: many groups.
async fn six_days(layout: Layout) -> (SessionContext, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &mut StdRng::seed_from_u64(7), 6, 6000, layout);
    let ctx = context(2);
    register_dir(&ctx, "t", dir.path()).await;
    (ctx, dir)
}

const BUCKETS: &str = "SELECT name, k, date_bin(INTERVAL '1 second', ts) AS b, count(*), \
                       avg(v) FROM t GROUP BY name, k, b";

#[tokio::test]
async fn explain_names_the_per_partition_fallback_only_where_it_is_sound() {
    let (ctx, dir) = six_days(Layout::Disjoint).await;
    let plan = explained_plan(&ctx, BUCKETS).await;
    assert!(
        plan.contains("fallback=hash aggregate per partition (time ranges disjoint)"),
        "{plan}"
    );
    // Whole files, three per partition.
    assert!(!plan.contains(".parquet:"), "{plan}");
    // The EXPLAIN ANALYZE of a run shows that it fell back, and the answer
    // is DataFusion's.
    let analyzed =
        crate::support::query_rows(&ctx, &format!("EXPLAIN ANALYZE {BUCKETS}")).await;
    let text = format!("{analyzed:?}");
    assert!(text.contains("fallback=2"), "{text}");
    let plain =
        SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    register_dir(&plain, "t", dir.path()).await;
    assert_eq!(
        rows(&ctx, BUCKETS, true).await,
        rows(&plain, BUCKETS, false).await
    );

    for layout in [Layout::Overlapping, Layout::NullTimestamps] {
        let (ctx, _dir) = six_days(layout).await;
        let plan = explained_plan(&ctx, BUCKETS).await;
        assert!(
            plan.contains("fallback=hash aggregate when groups are many"),
            "{layout:?}: {plan}"
        );
    }
}

#[tokio::test]
async fn files_weigh_what_the_window_keeps_of_them() {
    let (ctx, _dir) = six_days(Layout::Disjoint).await;
    let window = |from: i64, to: i64| {
        format!(
            "SELECT name, k, date_bin(INTERVAL '1 second', ts) AS b, count(*) FROM t \
             WHERE ts >= to_timestamp_micros({from}) AND ts < to_timestamp_micros({to}) \
             GROUP BY name, k, b"
        )
    };
    // Days 2 and 3 whole: a file per partition.
    let plan = explained_plan(&ctx, &window(2 * DAY, 4 * DAY)).await;
    assert!(
        plan.contains("per partition (time ranges disjoint)"),
        "{plan}"
    );
    // A fifth of day 1, day 2, a fifth of day 3: one file and two by bytes,
    // but 0.2 and 1.2 of a day by the rows read, which whole files cannot
    // balance; the byte ranges DataFusion draws (and `row_group_balance`
    // redraws) can.
    let sql = window(DAY * 9 / 5, DAY * 16 / 5);
    let plan = explained_plan(&ctx, &sql).await;
    assert!(
        plan.contains("fallback=hash aggregate when groups are many"),
        "{plan}"
    );
    // (The rows are out of order within a day: the scan reads the three
    // files whole, 6,000 rows each, and a file per partition would read
    // 6,000 and 12,000. Partitions run one after the other here, so
    // DataFusion's work stealing would hand every file to the first.)
    ctx.tsjoin_sql("SET datafusion.execution.enable_file_stream_work_stealing = false")
        .await
        .unwrap();
    let read = scan_partition_rows(&ctx, &sql).await;
    let most = read.iter().max().copied().unwrap_or(0);
    assert!(most * 3 < read.iter().sum::<usize>() * 2, "{read:?}");
}

#[tokio::test]
async fn files_the_where_rules_out_are_not_planned() {
    let (ctx, _dir) = six_days(Layout::Disjoint).await;
    let sql = format!(
        "SELECT count(*) FROM t WHERE ts >= to_timestamp_micros({}) AND ts < to_timestamp_micros({})",
        2 * DAY,
        3 * DAY
    );
    let plan = explained_plan(&ctx, &sql).await;
    assert!(plan.contains("day02.parquet"), "{plan}");
    assert!(
        !plan.contains("day01.parquet") && !plan.contains("day03.parquet"),
        "{plan}"
    );
    // The scan keeps a row estimate: the file left in one of its two
    // groups, the other empty (an unknown count there would make the
    // whole scan's unknown, and every estimate above it).
    let scan_rows: Vec<_> = scans(&ctx, &sql.replace("count(*)", "*"))
        .await
        .iter()
        .map(|scan| {
            StatisticsContext::new()
                .compute(scan.as_ref(), &StatisticsArgs::new())
                .unwrap()
                .num_rows
        })
        .collect();
    assert_eq!(scan_rows, vec![Precision::Inexact(6000)]);
    let pruned = crate::support::query_rows(&ctx, &sql).await;
    ctx.tsjoin_sql("SET tsjoin.prune_files = false")
        .await
        .unwrap();
    let plan = explained_plan(&ctx, &sql).await;
    assert!(plan.contains("day01.parquet"), "{plan}");
    assert_eq!(crate::support::query_rows(&ctx, &sql).await, pruned);
    assert_eq!(pruned, vec![vec!["6000".to_string()]]);
}

#[tokio::test]
async fn partition_columns_are_left_to_datafusion() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    for day in 0..3 {
        let sub = dir.path().join(format!("day={day}"));
        std::fs::create_dir(&sub).unwrap();
        write_files(&sub, &mut rng, 1, 1000, Layout::Disjoint);
    }
    let ddl = format!(
        "CREATE EXTERNAL TABLE h STORED AS PARQUET PARTITIONED BY (day) LOCATION '{}/'",
        dir.path().display()
    );
    let ours = context(2);
    let plain =
        SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    ours.tsjoin_sql(&ddl)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    plain.sql(&ddl).await.unwrap().collect().await.unwrap();
    for sql in [
        "SELECT day, count(*), sum(v) FROM h WHERE day = '1' GROUP BY day",
        "SELECT count(*) FROM h WHERE day = '2' OR ts < to_timestamp_micros(100)",
        "SELECT count(*) FROM h WHERE ts < to_timestamp_micros(1000000000) AND day <> '0'",
    ] {
        assert_eq!(
            rows(&ours, sql, true).await,
            rows(&plain, sql, false).await,
            "{sql}"
        );
    }
}

/// Writes one file of `groups` row groups of `per_group` rows, `ts`
/// ascending (one row per millisecond) so that a time window leaves a run of
/// neighbouring row groups; `k` and `w` as in [`write_files`].
fn write_sorted_file(path: &Path, rng: &mut StdRng, groups: usize, per_group: usize) {
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            false,
        ),
        Field::new("k", DataType::Int64, false),
        Field::new("w", DataType::Float64, true),
    ]));
    let rows = groups * per_group;
    let ts: Vec<i64> = (0..rows as i64).map(|i| i * 1000).collect();
    let k: Vec<i64> = (0..rows).map(|_| rng.random_range(0..5)).collect();
    let w: Vec<Option<f64>> = (0..rows)
        .map(|_| {
            (!rng.random_bool(0.05)).then(|| rng.random_range(-800..800) as f64 / 4.0)
        })
        .collect();
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(TimestampMicrosecondArray::from(ts)),
            Arc::new(Int64Array::from(k)),
            Arc::new(Float64Array::from(w)),
        ],
    )
    .unwrap();
    write_parquet(path, &batch, per_group);
}

/// The scans (`DataSourceExec`) of `sql`'s physical plan.
async fn scans(ctx: &SessionContext, sql: &str) -> Vec<Arc<dyn ExecutionPlan>> {
    let plan = physical_plan(ctx, sql).await;
    let mut scans = vec![];
    plan.apply(|node| {
        if node.downcast_ref::<DataSourceExec>().is_some() {
            scans.push(Arc::clone(node));
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    scans
}

/// The rows each partition of the plan's Parquet scan reads.
async fn scan_partition_rows(ctx: &SessionContext, sql: &str) -> Vec<usize> {
    let scans = scans(ctx, sql).await;
    let [scan] = &scans[..] else {
        panic!("one scan expected: {scans:?}")
    };
    let mut rows = vec![];
    for p in 0..scan.properties().partitioning.partition_count() {
        let batches = datafusion::physical_plan::common::collect(
            scan.execute(p, ctx.task_ctx()).unwrap(),
        )
        .await
        .unwrap();
        rows.push(batches.iter().map(|b| b.num_rows()).sum());
    }
    rows
}

/// A time window over a time-sorted file leaves neighbouring row groups
/// that all start in the first half of the file: DataFusion's byte ranges
/// give them all to one partition, the balanced ranges share them out.
/// Answers equal DataFusion's with the ranges redrawn and without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn surviving_row_groups_are_shared_out_over_partitions() {
    let dir = tempfile::tempdir().unwrap();
    write_sorted_file(
        &dir.path().join("t.parquet"),
        &mut StdRng::seed_from_u64(3),
        12,
        1000,
    );
    // Rows 2000..5000: row groups 2, 3 and 4 of 12.
    let sql = "SELECT k, count(*), sum(w), min(ts), max(ts) FROM t \
               WHERE ts >= to_timestamp_micros(2000000) AND ts < to_timestamp_micros(5000000) \
               GROUP BY k ORDER BY k";
    // A small file is split into byte ranges only below this size; and
    // the partitions are read one after the other below, so the first
    // would take its sibling's ranges if it could steal them.
    let config = SessionConfig::new()
        .with_target_partitions(2)
        .set_usize("datafusion.optimizer.repartition_file_min_size", 0)
        .set_bool(
            "datafusion.execution.enable_file_stream_work_stealing",
            false,
        );
    let ours = crate::support::tsjoin_context(config.clone());
    let plain = SessionContext::new_with_config(config);
    register_dir(&ours, "t", dir.path()).await;
    register_dir(&plain, "t", dir.path()).await;
    let want = rows(&plain, sql, false).await;
    assert_eq!(rows(&ours, sql, true).await, want);
    let scan = "SELECT * FROM t WHERE ts >= to_timestamp_micros(2000000) \
                AND ts < to_timestamp_micros(5000000) AND k >= 0";
    let balanced = scan_partition_rows(
        &ours,
        &format!("SELECT k, count(*) FROM ({scan}) GROUP BY k"),
    )
    .await;
    ours.tsjoin_sql("SET tsjoin.balance_row_groups = false")
        .await
        .unwrap();
    let spread = scan_partition_rows(
        &ours,
        &format!("SELECT k, count(*) FROM ({scan}) GROUP BY k"),
    )
    .await;
    assert_eq!(rows(&ours, sql, true).await, want);
    // Rows read before the row filter: the three row groups, 3,000 rows.
    assert_eq!(spread.iter().sum::<usize>(), 3000, "{spread:?}");
    assert_eq!(balanced.iter().sum::<usize>(), 3000, "{balanced:?}");
    assert!(spread.contains(&0), "DataFusion's ranges: {spread:?}");
    assert!(!balanced.contains(&0), "balanced ranges: {balanced:?}");
}

/// Random windows over time-sorted files of random row-group sizes, 1..4
/// partitions, files split into ranges or whole: tsjoin (ranges redrawn)
/// answers as DataFusion does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balanced_ranges_answer_as_datafusion_does() {
    for case in 0..8u64 {
        let mut rng = StdRng::seed_from_u64(0xBA1 + case);
        let dir = tempfile::tempdir().unwrap();
        let files = rng.random_range(1..4);
        let mut total = 0;
        for f in 0..files {
            let (groups, per_group) =
                (rng.random_range(1..15), rng.random_range(100..900));
            total += groups * per_group;
            write_sorted_file(
                &dir.path().join(format!("f{f}.parquet")),
                &mut rng,
                groups,
                per_group,
            );
        }
        let partitions = rng.random_range(1..5);
        let min_size = if rng.random_bool(0.7) { 0 } else { 10 << 20 };
        let config = SessionConfig::new()
            .with_target_partitions(partitions)
            .set_usize("datafusion.optimizer.repartition_file_min_size", min_size);
        let ours = crate::support::tsjoin_context(config.clone());
        let plain = SessionContext::new_with_config(config);
        register_dir(&ours, "t", dir.path()).await;
        register_dir(&plain, "t", dir.path()).await;
        let from = rng.random_range(0..total as i64) * 1000;
        let to = from + rng.random_range(1..3000) * 1000;
        for sql in [
            format!(
                "SELECT k, count(*), sum(w), min(ts), max(ts) FROM t WHERE ts >= to_timestamp_micros({from}) \
                 AND ts < to_timestamp_micros({to}) GROUP BY k"
            ),
            format!(
                "SELECT count(*), avg(w) FROM t WHERE ts BETWEEN to_timestamp_micros({from}) \
                 AND to_timestamp_micros({to}) AND w > 0"
            ),
        ] {
            let want = rows(&plain, &sql, false).await;
            let got = rows(&ours, &sql, true).await;
            assert_eq!(
                got, want,
                "case {case} ({files} files, {partitions} partitions): {sql}"
            );
        }
    }
}
