//! HORIZON JOIN: a differential test against the nested-loop reference
//! (`testing::horizon`) on random data, EXPLAIN, the proto round trip and
//! the memory limit.

use crate::support::{
    assert_round_trips, case_count, cells, context, explained_plan, parquet_copies,
    query_error, query_rows,
};
use datafusion::physical_plan::collect;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use datafusion_tsjoin::testing::verify::{Kind, run};

/// Hundreds of random cases (TSJOIN_HORIZON_CASES) of
/// `testing::verify`'s HORIZON JOIN kind against the nested-loop reference
/// in `testing::horizon`: NULL keys, values and times, duplicate times,
/// empty sides, skewed keys, RANGE and LIST offsets incl. negative ones (ms
/// and s), 1..3 partitions, batches of 1..7 rows, sorted and unsorted
/// inputs, pairs, markouts and two right tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn horizon_join_matches_reference() {
    let n = case_count("TSJOIN_HORIZON_CASES", 300);
    let mut failures = vec![];
    for seed in 0..n {
        if let Err(m) = run(Kind::Horizon, seed).await {
            failures.push(format!("seed {seed}: {}\n{}", m.what, m.script));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

async fn tables(ctx: &SessionContext) {
    ctx.tsjoin_sql(
        "CREATE TABLE t (ts TIMESTAMP, sym VARCHAR, price DOUBLE) AS VALUES
          ('2024-01-01T00:01:00', 'A', 10.0), ('2024-01-01T00:02:00', 'B', 20.0);
         CREATE TABLE p (ts TIMESTAMP, sym VARCHAR, mid DOUBLE) AS VALUES
          ('2024-01-01T00:00:00', 'A', 1.0), ('2024-01-01T00:01:30', 'B', 3.0),
          ('2024-01-01T00:01:40', 'A', 2.0)",
    )
    .await
    .unwrap();
}

const MARKOUT: &str = "SELECT h.offset, avg(p.mid - t.price) FROM t HORIZON JOIN p ON (sym) \
                       RANGE FROM 0s TO 60s STEP 30s AS h ORDER BY h.offset";

#[tokio::test]
async fn markouts_and_offsets_in_the_left_unit() {
    let ctx = context(2);
    tables(&ctx).await;
    // DataFusion's TIMESTAMP is nanoseconds: h.offset is too.
    assert_eq!(
        query_rows(&ctx, MARKOUT).await,
        [
            ["0", "-13"],
            ["30000000000", "-13"],
            ["60000000000", "-12.5"]
        ]
    );
}

#[tokio::test]
async fn explain_shows_keys_offsets_and_path() {
    let ctx = context(2);
    tables(&ctx).await;
    let text = explained_plan(&ctx, MARKOUT).await;
    for part in [
        "HorizonJoinExec: rights=[[on=[(sym@1, sym@1)], ts=ts@0]]",
        "offsets=RANGE FROM 0s TO 1m STEP 30s AS h (3 offsets)",
        // Folded, each lookup starts from its time's bucket.
        "path=time-bucket directory x3 (per key, right order",
        // Only the columns the aggregate reads leave the join, and the
        // aggregate grouped by the offset alone is folded into it.
        "projection=[price@2, mid@5, offset@6], fold=[avg(p.mid - t.price)] by offset (partial)",
    ] {
        assert!(text.contains(part), "missing {part} in\n{text}");
    }
}

/// The embedded projection drops columns, a right table nothing reads and
/// every column, and still emits one row per (left row, offset) pair.
#[tokio::test]
async fn projection_keeps_the_pairs() {
    let ctx = context(2);
    tables(&ctx).await;
    let cases: [(&str, &[&[&str]]); 3] = [
        (
            "SELECT count(*) FROM t HORIZON JOIN p ON (sym) LIST (0, 1s, 30s) AS h",
            &[&["6"]],
        ),
        (
            "SELECT t.sym, count(*) FROM t HORIZON JOIN p ON (sym) LIST (0, 30s) AS h \
             ORDER BY t.sym",
            &[&["A", "2"], &["B", "2"]],
        ),
        (
            "SELECT h.timestamp, p.mid FROM t HORIZON JOIN p ON (sym) LIST (0, 30s) AS h \
             ORDER BY h.timestamp",
            &[
                // A at 00:01:30 still sees 00:00's 1 (its 2 comes at 00:01:40).
                &["2024-01-01T00:01:00", "1"],
                &["2024-01-01T00:01:30", "1"],
                &["2024-01-01T00:02:00", "3"],
                &["2024-01-01T00:02:30", "3"],
            ],
        ),
    ];
    for (sql, want) in cases {
        let text = explained_plan(&ctx, sql).await;
        assert!(text.contains("projection=["), "no projection in\n{text}");
        assert_eq!(query_rows(&ctx, sql).await, want, "{sql}");
    }
}

#[tokio::test]
async fn plans_round_trip_through_proto() {
    let ctx = context(2);
    tables(&ctx).await;
    let dir = tempfile::tempdir().unwrap();
    parquet_copies(&ctx, &["t", "p"], dir.path()).await;
    for sql in [
        "SELECT h.offset, avg(p.mid - t.price) FROM tq t HORIZON JOIN pq p ON t.sym = p.sym \
         AND t.price > 5 LIST (-1m, 0, 30s) AS h ORDER BY h.offset",
        "SELECT t.sym, h.offset, count(p.mid), count(q.mid) FROM tq t HORIZON JOIN pq p \
         ON (sym) HORIZON JOIN pq q RANGE FROM 0s TO 20s STEP 10s AS h \
         ORDER BY t.sym, h.offset",
    ] {
        let want = query_rows(&ctx, sql).await;
        let back = assert_round_trips(&ctx, sql, "HorizonJoinExec").await;
        let got = cells(&collect(back, ctx.task_ctx()).await.unwrap());
        assert_eq!(got, want);
    }
}

#[tokio::test]
async fn over_the_memory_limit_is_a_clear_error() {
    let ctx = crate::support::limited_context_with(64 * 1024, SessionConfig::new());
    ctx.tsjoin_sql(
        "CREATE TABLE big AS SELECT to_timestamp_micros(value) AS ts, value % 7 AS k, \
         value AS v FROM generate_series(1, 200000)",
    )
    .await
    .unwrap();
    let err = query_error(
        &ctx,
        "SELECT h.offset, count(b.v) FROM big a HORIZON JOIN big b ON (k) \
         LIST (0, 1s) AS h",
    )
    .await;
    assert!(err.contains("Resources exhausted"), "{err}");
}

/// Grouped by `h.offset` alone, the aggregates are folded into the join
/// (partial states on several partitions, values on one) with the same
/// answers as over the pairs; `tsjoin.horizon_fold = false` keeps the
/// pairs; any other grouping keeps them too.
#[tokio::test]
async fn offset_aggregates_fold_into_the_join() {
    let folded = "SELECT h.offset, count(*), avg(p.mid - t.price), min(p.mid), max(t.price), \
                  sum(p.mid), approx_percentile(p.mid, 0.5) FROM t HORIZON JOIN p ON (sym) \
                  LIST (-1m, 0, 30s, 1m) AS h ORDER BY h.offset";
    let by_sym = "SELECT t.sym, h.offset, avg(p.mid) FROM t HORIZON JOIN p ON (sym) \
                  LIST (0, 30s) AS h ORDER BY t.sym, h.offset";
    for partitions in [1, 3] {
        let ctx = context(partitions);
        tables(&ctx).await;
        let text = explained_plan(&ctx, folded).await;
        let mode = if partitions == 1 { "single" } else { "partial" };
        assert!(
            text.contains(&format!("by offset ({mode})")),
            "not folded:\n{text}"
        );
        let on = query_rows(&ctx, folded).await;
        assert!(!explained_plan(&ctx, by_sym).await.contains("fold="));
        ctx.sql("SET tsjoin.horizon_fold = false").await.unwrap();
        assert!(!explained_plan(&ctx, folded).await.contains("fold="));
        assert_eq!(
            query_rows(&ctx, folded).await,
            on,
            "{partitions} partitions"
        );
        assert_eq!(on.len(), 4);
        // -1m: A (10 at 00:01) sees 00:00's 1, B (20 at 00:02) nothing yet;
        // 0: A still 1, B 3.
        assert_eq!(on[0][1..4], ["2", "-9", "1"]);
        assert_eq!(on[1][1..4], ["2", "-13", "1"]);
    }
}

/// The folded accumulators' memory is reserved: over the pool, a clear
/// error naming the fold (the pairs themselves stay small here).
#[tokio::test]
async fn folded_accumulators_are_reserved() {
    let ctx = crate::support::limited_context_with(
        2 * 1024 * 1024,
        SessionConfig::new().with_target_partitions(1),
    );
    ctx.tsjoin_sql(
        "CREATE TABLE big AS SELECT to_timestamp_micros(value) AS ts, value AS v \
         FROM generate_series(1, 300000);
         CREATE TABLE few AS SELECT to_timestamp_micros(value) AS ts, value AS w \
         FROM generate_series(1, 10)",
    )
    .await
    .unwrap();
    let sql = "SELECT h.offset, array_agg(b.v) FROM big b HORIZON JOIN few f \
               LIST (0, 1s) AS h";
    assert!(explained_plan(&ctx, sql).await.contains("fold=["));
    let err = query_error(&ctx, sql).await;
    assert!(
        err.contains("Resources exhausted") && err.contains("HorizonJoinExec[fold]"),
        "{err}"
    );
}
