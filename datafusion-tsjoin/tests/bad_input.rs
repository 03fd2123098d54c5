//! Bad input gives a clear error (never a panic) and the session goes on:
//! corrupt and truncated Parquet files, schemas that differ between files,
//! NULL, unsorted and extreme timestamps, key type mismatches, overflowing
//! bounds, empty tables and a one-row right side.

use crate::support::{context, query_rows};
use datafusion::prelude::ParquetReadOptions;
use datafusion_tsjoin::TsJoinContextExt;
use datafusion_tsjoin::files::check_parquet_files;
use std::path::Path;

/// Writes a small valid Parquet file of (ts, k, v) at `path`.
async fn write_parquet(path: &Path, rows: i64) {
    let ctx = context(1);
    ctx.tsjoin_sql(&format!(
        "COPY (SELECT to_timestamp_millis(value) AS ts, value % 3 AS k, \
         CAST(value AS DOUBLE) AS v FROM generate_series(1, {rows})) TO '{}'",
        path.display()
    ))
    .await
    .unwrap()
    .collect()
    .await
    .unwrap();
}

/// Corrupt files: garbage, a footer whose metadata length is beyond the
/// file, a file cut in half, an empty file.
fn corrupt_files(dir: &Path, valid: &[u8]) -> Vec<(&'static str, std::path::PathBuf)> {
    let mut beyond = b"PAR1garbage".to_vec();
    beyond.extend_from_slice(&1000u32.to_le_bytes());
    beyond.extend_from_slice(b"PAR1");
    let mut flipped = valid.to_vec();
    let mid = flipped.len() - 40;
    for b in &mut flipped[mid..mid + 20] {
        *b ^= 0x5a;
    }
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "garbage",
            b"this is not parquet at all, not even close".to_vec(),
        ),
        ("metadata beyond the file", beyond),
        ("truncated", valid[..valid.len() / 2].to_vec()),
        ("footer only", valid[valid.len() - 8..].to_vec()),
        ("empty", vec![]),
        ("flipped footer bytes", flipped),
    ];
    cases
        .into_iter()
        .map(|(name, bytes)| {
            let path = dir.join(format!("{}.parquet", name.replace(' ', "_")));
            std::fs::write(&path, bytes).unwrap();
            (name, path)
        })
        .collect()
}

/// A corrupt or truncated Parquet file is an error naming the problem,
/// through `register_parquet` and `CREATE EXTERNAL TABLE`, with or without
/// a query over it; the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_parquet_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.parquet");
    write_parquet(&good, 5000).await;
    let valid = std::fs::read(&good).unwrap();
    for (name, path) in corrupt_files(dir.path(), &valid) {
        let ctx = context(2);
        // DataFusion's own `register_parquet` after tsjoin's check (the CLI
        // and the Python module do both).
        let registered = match check_parquet_files(&path) {
            Ok(()) => {
                ctx.register_parquet(
                    "t",
                    path.to_str().unwrap(),
                    ParquetReadOptions::default(),
                )
                .await
            }
            Err(e) => {
                assert!(
                    e.to_string().contains("corrupt Parquet file"),
                    "{name}: {e}"
                );
                Err(e)
            }
        };
        if registered.is_ok() {
            let err = ctx.tsjoin_sql("SELECT count(*), sum(v) FROM t").await;
            let err = match err {
                Ok(df) => df.collect().await.map(|_| ()),
                Err(e) => Err(e),
            };
            // Flipped bytes may fall in statistics nobody reads.
            assert!(
                err.is_err() || name == "flipped footer bytes",
                "{name}: read as valid"
            );
        }
        let sql = format!(
            "CREATE EXTERNAL TABLE c STORED AS PARQUET LOCATION '{}'",
            path.display()
        );
        let created = ctx.tsjoin_sql(&sql).await;
        if created.is_ok() {
            let res = ctx.tsjoin_sql("SELECT k, count(*) FROM c GROUP BY k").await;
            let res = match res {
                Ok(df) => df.collect().await.map(|_| ()),
                Err(e) => Err(e),
            };
            assert!(
                res.is_err() || name == "flipped footer bytes",
                "{name}: read as valid"
            );
        }
        // The session goes on.
        assert_eq!(
            query_rows(&ctx, "SELECT 1").await,
            vec![vec!["1"]],
            "{name}"
        );
    }
}

/// `files::register_parquet` (the library's entry point for Parquet
/// files) on every kind of damage: an error naming the file, or a table
/// whose query fails; never a panic, and the session goes on. The same for
/// a directory holding one damaged file among good ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_parquet_reports_corrupt_files() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.parquet");
    write_parquet(&good, 5000).await;
    let valid = std::fs::read(&good).unwrap();
    let bad_dir = tempfile::tempdir().unwrap();
    for (name, path) in corrupt_files(bad_dir.path(), &valid) {
        let ctx = context(2);
        let registered = datafusion_tsjoin::files::register_parquet(
            &ctx,
            "t",
            path.to_str().unwrap(),
            ParquetReadOptions::default(),
        )
        .await;
        match registered {
            Err(e) => {
                let text = e.to_string();
                assert!(!text.contains("internal error"), "{name}: {text}");
            }
            Ok(()) => {
                let res = async {
                    ctx.tsjoin_sql("SELECT sum(v) FROM t")
                        .await?
                        .collect()
                        .await
                };
                assert!(
                    res.await.is_err() || name == "flipped footer bytes",
                    "{name}: read as valid"
                );
            }
        }
        assert_eq!(
            query_rows(&ctx, "SELECT 1").await,
            vec![vec!["1"]],
            "{name}"
        );
        // One damaged file in a directory of good ones.
        let mixed = tempfile::tempdir().unwrap();
        std::fs::copy(&good, mixed.path().join("a.parquet")).unwrap();
        std::fs::copy(&path, mixed.path().join("b.parquet")).unwrap();
        let ctx = context(2);
        let registered = datafusion_tsjoin::files::register_parquet(
            &ctx,
            "m",
            &format!("{}/", mixed.path().display()),
            ParquetReadOptions::default(),
        )
        .await;
        if registered.is_ok() {
            let res = async {
                ctx.tsjoin_sql("SELECT sum(v) FROM m")
                    .await?
                    .collect()
                    .await
            };
            let res = res.await;
            assert!(
                res.is_err() || matches!(name, "flipped footer bytes" | "empty"),
                "{name} in a directory: read as valid"
            );
        }
    }
}

/// Rows of `sql`, or its error's text; an internal error fails the test
/// (and a panic, of course).
async fn outcome(
    ctx: &datafusion::prelude::SessionContext,
    sql: &str,
) -> Result<Vec<Vec<String>>, String> {
    let run = async { ctx.tsjoin_sql(sql).await?.collect().await };
    match run.await {
        Ok(batches) => Ok(crate::support::cells(&batches)),
        Err(e) => {
            assert!(
                !matches!(
                    e.find_root(),
                    datafusion::common::DataFusionError::Internal(_)
                ),
                "{sql}: internal error {e}"
            );
            Err(e.to_string())
        }
    }
}

/// Files of one directory with different schemas: an extra column merges
/// (every row is read), a column whose type changes is an error or reads
/// every row; never a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_with_differing_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(2);
    for (file, select) in [
        (
            "a.parquet",
            "SELECT to_timestamp_millis(value) AS ts, value AS k, CAST(value AS DOUBLE) AS v",
        ),
        (
            "b.parquet",
            "SELECT to_timestamp_millis(value) AS ts, value AS k, CAST(value AS DOUBLE) AS v, value AS w",
        ),
    ] {
        let sql = format!(
            "COPY ({select} FROM generate_series(1, 100)) TO '{}'",
            dir.path().join(file).display()
        );
        ctx.tsjoin_sql(&sql).await.unwrap().collect().await.unwrap();
    }
    let create = format!(
        "CREATE EXTERNAL TABLE d STORED AS PARQUET LOCATION '{}/'",
        dir.path().display()
    );
    ctx.tsjoin_sql(&create).await.unwrap();
    let rows = outcome(&ctx, "SELECT count(*), count(w) FROM d")
        .await
        .unwrap();
    assert_eq!(rows, vec![vec!["200", "100"]]);
    // A type change: `v` a string in one more file.
    let sql = format!(
        "COPY (SELECT to_timestamp_millis(value) AS ts, value AS k, 'x' || value AS v \
         FROM generate_series(1, 10)) TO '{}'",
        dir.path().join("c.parquet").display()
    );
    ctx.tsjoin_sql(&sql).await.unwrap().collect().await.unwrap();
    let ctx = context(2);
    let created = outcome(&ctx, &create).await;
    if created.is_ok() {
        for sql in [
            "SELECT count(*) FROM d",
            "SELECT k, sum(v) FROM d GROUP BY k",
            "SELECT a.ts, count(*) FROM d a WINDOW JOIN d b ON b.k = a.k \
             RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW",
        ] {
            if let Ok(rows) = outcome(&ctx, sql).await {
                assert!(!rows.is_empty(), "{sql}");
            }
        }
    }
}

/// Timestamps at the ends of their range: windows reaching past them do
/// not overflow (the answer counts what is there), and so do bounds of
/// `i64::MAX` units.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extreme_timestamps_and_bounds() {
    let ctx = context(2);
    ctx.tsjoin_sql(
        "CREATE TABLE x AS SELECT to_timestamp_millis(t) AS ts, 1 AS k, t AS v FROM (VALUES \
         (9223372036854775807), (9223372036854775806), (-9223372036854775808), (0), (NULL)) AS s(t)",
    )
    .await
    .unwrap();
    ctx.tsjoin_sql(
        "CREATE TABLE n AS SELECT CAST(to_timestamp_millis(t) AS TIMESTAMP) AS ts, 1 AS k, t AS v \
         FROM (VALUES (9223372036854), (0), (-9223372036854), (NULL)) AS s(t)",
    )
    .await
    .unwrap();
    for table in ["x", "n"] {
        for range in [
            "1 minute PRECEDING AND 1 minute FOLLOWING",
            "9223372036854775807 microseconds PRECEDING AND CURRENT ROW",
            "9223372036854775807 microseconds PRECEDING AND 9223372036854775807 microseconds FOLLOWING",
            "9223372036854775807 days PRECEDING AND 1 day FOLLOWING",
            "CURRENT ROW AND 9223372036854775807 nanoseconds FOLLOWING",
        ] {
            for fast in [true, false] {
                ctx.tsjoin_sql(&format!("SET tsjoin.window_join_fast_path = {fast}"))
                    .await
                    .unwrap();
                let sql = format!(
                    "SELECT a.v, count(*) FROM {table} a WINDOW JOIN {table} b ON b.k = a.k \
                     RANGE BETWEEN {range} ORDER BY a.v"
                );
                if let Ok(rows) = outcome(&ctx, &sql).await {
                    // One output row per left row.
                    assert_eq!(rows.len(), if table == "x" { 5 } else { 4 }, "{sql}");
                }
            }
        }
    }
    // A window that covers everything counts every non-NULL timestamp.
    let sql = "SELECT a.v, count(*) FROM n a WINDOW JOIN n b ON b.k = a.k RANGE BETWEEN \
               9223372036854775807 microseconds PRECEDING AND 9223372036854775807 microseconds \
               FOLLOWING WHERE a.v = 0";
    if let Ok(rows) = outcome(&ctx, sql).await {
        assert_eq!(rows, vec![vec!["0", "3"]], "{sql}");
    }
}

/// Keys of different types: integer widths join; an integer against a
/// string is coerced or a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_type_mismatches() {
    let ctx = context(2);
    ctx.tsjoin_sql(
        "CREATE TABLE a (ts TIMESTAMP, k INT, s VARCHAR) AS VALUES ('2024-01-01T00:00:01', 1, '1'); \
         CREATE TABLE b (ts TIMESTAMP, k BIGINT, s VARCHAR, d DOUBLE) AS VALUES \
         ('2024-01-01T00:00:00', 1, '1', 1.0), ('2024-01-01T00:00:00', 2, 'x', 1.0)",
    )
    .await
    .unwrap();
    let range = "RANGE BETWEEN 1 minute PRECEDING AND CURRENT ROW";
    let rows = outcome(
        &ctx,
        &format!("SELECT count(*) FROM a WINDOW JOIN b ON b.k = a.k {range}"),
    )
    .await
    .unwrap();
    assert_eq!(rows, vec![vec!["1"]]);
    for on in ["b.s = a.k", "b.k = a.s", "b.d = a.k", "b.ts = a.k"] {
        let sql = format!("SELECT count(*) FROM a WINDOW JOIN b ON {on} {range}");
        let _ = outcome(&ctx, &sql).await;
    }
}

/// Empty tables on either side and a right side of one row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_tables_and_a_single_row_right_side() {
    let ctx = context(2);
    ctx.tsjoin_sql(
        "CREATE TABLE full_t (ts TIMESTAMP, k BIGINT, v DOUBLE) AS VALUES \
           ('2024-01-01T00:00:01', 1, 1.0), ('2024-01-01T00:00:02', 1, 2.0), ('2024-01-01T00:00:03', 2, 4.0); \
         CREATE TABLE empty_t (ts TIMESTAMP, k BIGINT, v DOUBLE); \
         CREATE TABLE one_t (ts TIMESTAMP, k BIGINT, v DOUBLE) AS VALUES ('2024-01-01T00:00:02', 1, 8.0)",
    )
    .await
    .unwrap();
    let q = |l: &str, r: &str| {
        format!(
            "SELECT a.ts, count(*), sum(b.v) FROM {l} a WINDOW JOIN {r} b ON b.k = a.k \
             RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW ORDER BY a.ts"
        )
    };
    for fast in [true, false] {
        ctx.tsjoin_sql(&format!("SET tsjoin.window_join_fast_path = {fast}"))
            .await
            .unwrap();
        assert!(
            outcome(&ctx, &q("empty_t", "full_t"))
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            outcome(&ctx, &q("empty_t", "empty_t"))
                .await
                .unwrap()
                .is_empty()
        );
        let rows = outcome(&ctx, &q("full_t", "empty_t")).await.unwrap();
        assert_eq!(rows.len(), 3);
        assert!(
            rows.iter().all(|r| r[1] == "0" && r[2] == "NULL"),
            "{rows:?}"
        );
        let rows = outcome(&ctx, &q("full_t", "one_t")).await.unwrap();
        let counts: Vec<&str> = rows.iter().map(|r| r[1].as_str()).collect();
        assert_eq!(counts, ["0", "1", "0"], "{rows:?}");
    }
    for inline in [true, false] {
        ctx.tsjoin_sql(&format!("SET tsjoin.inline_aggregate = {inline}"))
            .await
            .unwrap();
        let sql = "SELECT k, count(*), sum(v) FROM empty_t GROUP BY k";
        assert!(outcome(&ctx, sql).await.unwrap().is_empty());
        let sql = "SELECT k, count(*), sum(v) FROM one_t GROUP BY k";
        assert_eq!(outcome(&ctx, sql).await.unwrap(), vec![vec!["1", "1", "8"]]);
    }
}

/// Integer sums that overflow give DataFusion's answer (or its error) on
/// the inline path as on DataFusion's, without a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integer_overflow_in_aggregates() {
    let ctx = context(2);
    ctx.tsjoin_sql(
        "CREATE TABLE o (ts TIMESTAMP, k BIGINT, v BIGINT) AS VALUES \
         ('2024-01-01T00:00:01', 1, 9223372036854775807), ('2024-01-01T00:00:02', 1, 9223372036854775807), \
         ('2024-01-01T00:00:03', 2, -9223372036854775808), ('2024-01-01T00:00:04', 2, -1)",
    )
    .await
    .unwrap();
    let sql =
        "SELECT k, sum(v), min(v), max(v), avg(v), count(*) FROM o GROUP BY k ORDER BY k";
    let mut answers = vec![];
    for inline in [false, true] {
        ctx.tsjoin_sql(&format!("SET tsjoin.inline_aggregate = {inline}"))
            .await
            .unwrap();
        answers.push(outcome(&ctx, sql).await);
    }
    assert_eq!(answers[0], answers[1]);
    let sql = "SELECT a.k, sum(b.v), avg(b.v) FROM o a WINDOW JOIN o b ON b.k = a.k \
               RANGE BETWEEN 1 minute PRECEDING AND 1 minute FOLLOWING ORDER BY a.ts";
    let _ = outcome(&ctx, sql).await;
}
