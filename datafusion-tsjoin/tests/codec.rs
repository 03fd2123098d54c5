//! EXPLAIN output and the datafusion-proto round trip of WINDOW JOIN plans.

use crate::support::{
    code_rows, context, logical_round_trip, operator_line, physical_plan,
    physical_round_trip,
};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::physical_plan::{ExecutionPlan, collect, displayable};
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use std::sync::Arc;

async fn tables(ctx: &SessionContext) {
    ctx.tsjoin_sql(
        "CREATE TABLE t (ts TIMESTAMP, sym VARCHAR, price DOUBLE, lb BIGINT) AS VALUES
          ('2024-01-01T00:01:00', 'A', 10.0, 1), ('2024-01-01T00:02:00', 'B', 20.0, 2)",
    )
    .await
    .unwrap();
    ctx.tsjoin_sql(
        "CREATE TABLE p (ts TIMESTAMP, sym VARCHAR, v BIGINT) AS VALUES
          ('2024-01-01T00:00:00', 'A', 1), ('2024-01-01T00:01:30', 'B', 3)",
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn explain_shows_the_operator() {
    let ctx = context(2);
    tables(&ctx).await;
    ctx.tsjoin_sql("SET tsjoin.window_join_workers = 3")
        .await
        .unwrap();
    let df = ctx
        .tsjoin_sql(
            "SELECT t.ts, avg(p.v) FROM t WINDOW JOIN p ON p.sym = t.sym \
             RANGE BETWEEN 1 second PRECEDING AND 2 seconds FOLLOWING EXCLUDE PREVAILING",
        )
        .await
        .unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    let text = displayable(plan.as_ref()).indent(true).to_string();
    for part in [
        "WindowJoinExec: on=[(sym@1, sym@1)]",
        "range=[1 second preceding, 2 seconds following]",
        "prevailing=exclude",
        "aggs=[avg(",
        "path=fast, kernels=",
        "workers=3",
    ] {
        assert!(
            text.contains(part.replace("2 seconds", "2 second").as_str()),
            "missing {part} in\n{text}"
        );
    }
}

/// Session settings switch the fast path and the SIMD kernels off, and
/// EXPLAIN says which path and kernels run.
#[tokio::test]
async fn settings_choose_the_path() {
    let ctx = context(2);
    tables(&ctx).await;
    let sql = "SELECT t.ts, avg(p.v), max(p.v) FROM t WINDOW JOIN p ON p.sym = t.sym \
               RANGE BETWEEN 1 second PRECEDING AND 2 seconds FOLLOWING";
    let explain = |ctx: SessionContext| async move {
        let plan = physical_plan(&ctx, sql).await;
        displayable(plan.as_ref()).indent(true).to_string()
    };
    let best = datafusion_tsjoin::bench::KernelSet::detect().name();
    // The streaming path where the fast path applies when the setting
    // (kept by the codec) is on.
    ctx.tsjoin_sql("SET tsjoin.window_join_streaming = true")
        .await
        .unwrap();
    let text = explain(ctx.clone()).await;
    assert!(
        text.contains("path=streaming (left order checked;"),
        "{text}"
    );
    let streaming = physical_plan(&ctx, sql).await;
    let back = physical_round_trip(&streaming, &ctx);
    assert!(
        displayable(back.as_ref())
            .indent(true)
            .to_string()
            .contains("path=streaming")
    );
    ctx.tsjoin_sql("SET tsjoin.window_join_streaming = false")
        .await
        .unwrap();
    let index = physical_plan(&ctx, sql).await;
    let back = physical_round_trip(&index, &ctx);
    assert!(
        displayable(back.as_ref())
            .indent(true)
            .to_string()
            .contains(&format!("path=fast, kernels={best}"))
    );
    assert!(
        explain(ctx.clone())
            .await
            .contains(&format!("path=fast, kernels={best}"))
    );
    ctx.tsjoin_sql("SET tsjoin.window_join_simd = false")
        .await
        .unwrap();
    assert!(
        explain(ctx.clone())
            .await
            .contains("path=fast, kernels=scalar")
    );
    ctx.tsjoin_sql("SET tsjoin.window_join_fast_path = false")
        .await
        .unwrap();
    assert!(explain(ctx.clone()).await.contains("path=general,"));
    ctx.tsjoin_sql("SET tsjoin.window_join_fast_path = true")
        .await
        .unwrap();
    // Aggregates without a kernel, pair conditions and dynamic bounds take
    // the general path.
    for general in [
        "SELECT t.ts, stddev(p.v) FROM t WINDOW JOIN p ON p.sym = t.sym RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW",
        "SELECT t.ts, sum(p.v) FROM t WINDOW JOIN p ON p.sym = t.sym AND p.v > t.lb RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW",
        "SELECT t.ts, sum(p.v) FROM t WINDOW JOIN p ON p.sym = t.sym RANGE BETWEEN t.lb seconds PRECEDING AND CURRENT ROW",
    ] {
        let plan = physical_plan(&ctx, general).await;
        let text = displayable(plan.as_ref()).indent(true).to_string();
        assert!(text.contains("path=general"), "{general}\n{text}");
    }
}

/// Parquet-backed tables (memory tables have no proto form).
async fn parquet_tables(ctx: &SessionContext, dir: &std::path::Path) {
    let d = dir.display();
    for sql in [
        format!(
            "COPY (SELECT * FROM (VALUES (CAST('2024-01-01T00:01:00' AS TIMESTAMP), 'A', 10.0, 1), \
             (CAST('2024-01-01T00:02:00' AS TIMESTAMP), 'B', 20.0, NULL), (CAST('2024-01-01T00:03:00' AS TIMESTAMP), 'A', 30.0, 2)) \
             AS v(ts, sym, price, lb)) TO '{d}/t.parquet' STORED AS PARQUET"
        ),
        format!(
            "COPY (SELECT * FROM (VALUES (CAST('2024-01-01T00:00:00' AS TIMESTAMP), 'A', 1.5, 1), \
             (CAST('2024-01-01T00:01:30' AS TIMESTAMP), 'B', 3.0, 3), (CAST('2024-01-01T00:02:30' AS TIMESTAMP), 'A', NULL, 4), \
             (CAST('2024-01-01T00:03:00' AS TIMESTAMP), 'A', 7.0, 5)) AS v(ts, sym, v, i)) TO '{d}/p.parquet' STORED AS PARQUET"
        ),
        format!(
            "CREATE EXTERNAL TABLE t STORED AS PARQUET LOCATION '{d}/t.parquet' OPTIONS ('designated_timestamp' 'ts')"
        ),
        format!("CREATE EXTERNAL TABLE p STORED AS PARQUET LOCATION '{d}/p.parquet'"),
    ] {
        ctx.tsjoin_sql(&sql).await.unwrap().collect().await.unwrap();
    }
}

const ROUND_TRIP_SQL: &str = "SELECT t.ts, t.sym, count(*), avg(p.v), min(p.v), first(p.v), last_not_null(p.v), \
    sum(p.i * t.lb), count(DISTINCT p.i) \
    FROM t WINDOW JOIN p ON p.sym = t.sym AND p.i > 0 AND p.i >= t.lb \
    RANGE BETWEEN t.lb minutes PRECEDING AND 30 seconds FOLLOWING INCLUDE PREVAILING ORDER BY t.ts";

#[tokio::test]
async fn physical_plan_round_trips_through_proto() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(2);
    parquet_tables(&ctx, dir.path()).await;
    let df = ctx.tsjoin_sql(ROUND_TRIP_SQL).await.unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    let back = physical_round_trip(&plan, &ctx);
    // DataFusion's own scan nodes drop a display-only hint in proto form,
    // so compare the WINDOW JOIN lines.
    let join_line = |p| operator_line(p, "WindowJoinExec");
    assert_eq!(join_line(&plan), join_line(&back));
    let a = datafusion::physical_plan::collect(plan, ctx.task_ctx())
        .await
        .unwrap();
    let b = datafusion::physical_plan::collect(back, ctx.task_ctx())
        .await
        .unwrap();
    let fmt = |x: &[datafusion::arrow::array::RecordBatch]| {
        datafusion::arrow::util::pretty::pretty_format_batches(x)
            .unwrap()
            .to_string()
    };
    assert_eq!(fmt(&a), fmt(&b));
    assert_eq!(a.iter().map(|b| b.num_rows()).sum::<usize>(), 3);
}

#[tokio::test]
async fn logical_plan_round_trips_through_proto() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(2);
    parquet_tables(&ctx, dir.path()).await;
    let plan = ctx
        .tsjoin_sql(ROUND_TRIP_SQL)
        .await
        .unwrap()
        .into_optimized_plan()
        .unwrap();
    let back = logical_round_trip(&plan, &ctx);
    assert_eq!(
        plan.display_indent().to_string(),
        back.display_indent().to_string()
    );
    let a = ctx
        .execute_logical_plan(plan)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let b = ctx
        .execute_logical_plan(back)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let fmt = |x: &[datafusion::arrow::array::RecordBatch]| {
        datafusion::arrow::util::pretty::pretty_format_batches(x)
            .unwrap()
            .to_string()
    };
    assert_eq!(fmt(&a), fmt(&b));
}

#[tokio::test]
async fn where_on_left_columns_runs_below_the_join() {
    let ctx = context(2);
    tables(&ctx).await;
    let df = ctx
        .tsjoin_sql(
            "SELECT t.ts, sum(p.v) AS s FROM t WINDOW JOIN p ON p.sym = t.sym \
             RANGE BETWEEN 1 minute PRECEDING AND CURRENT ROW WHERE t.price > 15",
        )
        .await
        .unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    let text = displayable(plan.as_ref()).indent(true).to_string();
    let lines: Vec<&str> = text.lines().collect();
    let join = lines
        .iter()
        .position(|l| l.contains("WindowJoinExec"))
        .unwrap();
    let depth = |l: &str| l.len() - l.trim_start().len();
    // the filter is evaluated under the join, on left rows only
    let mut below = lines[join + 1..]
        .iter()
        .take_while(|l| depth(l) > depth(lines[join]));
    assert!(
        below.any(|l| l.contains("price@") && l.contains("> 15")),
        "{text}"
    );
    assert!(!lines[..join].iter().any(|l| l.contains("> 15")), "{text}");
}

/// The answer of `plan` run in `ctx`, as a table, and its row count.
async fn answer(plan: &Arc<dyn ExecutionPlan>, ctx: &SessionContext) -> (String, usize) {
    let batches = collect(Arc::clone(plan), ctx.task_ctx()).await.unwrap();
    let rows = batches.iter().map(|b| b.num_rows()).sum();
    (pretty_format_batches(&batches).unwrap().to_string(), rows)
}

/// The inline aggregate crosses the wire too (percentiles with their
/// constants): same plan line, same answer, and the same output
/// partitioning (hash on the keys).
#[tokio::test]
async fn inline_aggregate_round_trips_through_proto() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(2);
    parquet_tables(&ctx, dir.path()).await;
    let sql = "SELECT sym, count(*), count(v), sum(i), min(v), max(i), avg(v), \
               approx_percentile(i, 0.9, 2), approx_median(v), \
               approx_percentile(v, ARRAY[0.5, 0.99], 3) \
               FROM p WHERE i > 1 GROUP BY sym ORDER BY sym";
    let ctx2 = context(2);
    parquet_tables(&ctx2, dir.path()).await;
    ctx2.tsjoin_sql("SET tsjoin.inline_aggregate_all_keys = true")
        .await
        .unwrap();
    let plan = ctx2
        .tsjoin_sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let back = physical_round_trip(&plan, &ctx);
    let agg_line = |p: &Arc<dyn ExecutionPlan>| {
        let text = displayable(p.as_ref()).indent(true).to_string();
        text.lines()
            .find(|l| l.contains("InlineAggregateExec"))
            .unwrap_or_else(|| panic!("{text}"))
            .to_string()
    };
    assert_eq!(agg_line(&plan), agg_line(&back));
    let (a, rows) = answer(&plan, &ctx).await;
    assert_eq!(a, answer(&back, &ctx).await.0);
    assert_eq!(rows, 2);
}

/// A decoded inline aggregate over Parquet finds the dictionary scan again
/// (it is rebuilt from the plan below it) and reads the codes, as the
/// original does: multi-column keys here, same answer both sides. It keeps
/// its fallback plan for many groups too (the codec used to drop it: a
/// decoded plan ran inline whatever its groups).
#[tokio::test]
async fn dictionary_scan_survives_the_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(2);
    parquet_tables(&ctx, dir.path()).await;
    // (Count only: with arguments, a four-row file has too few rows per
    // dictionary entry for the scan.)
    let sql = "SELECT sym, i, count(*) FROM p GROUP BY sym, i ORDER BY sym, i";
    let plan = physical_plan(&ctx, sql).await;
    let before = displayable(plan.as_ref()).indent(true).to_string();
    assert!(before.contains("fallback=hash aggregate"), "{before}");
    let back = physical_round_trip(&plan, &ctx);
    let text = displayable(back.as_ref()).indent(true).to_string();
    assert!(text.contains("scan=parquet codes"), "{text}");
    assert_eq!(before, text);
    assert_eq!(answer(&plan, &ctx).await.0, answer(&back, &ctx).await.0);
    // Both read their rows from the codes.
    assert_eq!((code_rows(&plan), code_rows(&back)), (4, 4));
}

/// QuestDB's LIMIT over an input without a reversible order plans a
/// TailExec; it crosses the wire in both plan forms with its range.
#[tokio::test]
async fn tail_round_trips_through_proto() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(2);
    parquet_tables(&ctx, dir.path()).await;
    for sql in [
        "SELECT sym, count(*) FROM p GROUP BY sym ORDER BY sym LIMIT 1, -1",
        "SELECT i FROM p LIMIT -3, -1",
    ] {
        let df = ctx.tsjoin_sql(sql).await.unwrap();
        let plan = df.clone().create_physical_plan().await.unwrap();
        let text = displayable(plan.as_ref()).indent(true).to_string();
        assert!(text.contains("TailExec: rows"), "{text}");
        let back = physical_round_trip(&plan, &ctx);
        assert_eq!(text, displayable(back.as_ref()).indent(true).to_string());
        assert_eq!(answer(&plan, &ctx).await, answer(&back, &ctx).await);
        let logical = df.into_optimized_plan().unwrap();
        let back = logical_round_trip(&logical, &ctx);
        assert_eq!(
            logical.display_indent().to_string(),
            back.display_indent().to_string()
        );
    }
}
