//! Operators under small memory limits: the answer is right (spilling or
//! handing over to DataFusion's spilling operators) or the error is a clear
//! `Resources exhausted` naming the operator; the process stays alive.

use crate::support::limited_context as limited;
use crate::support::{cells, explained_plan, physical_plan};
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use std::sync::Arc;

async fn sorted_rows(
    ctx: &SessionContext,
    sql: &str,
) -> datafusion::common::Result<Vec<Vec<String>>> {
    let batches = ctx.tsjoin_sql(sql).await?.collect().await?;
    let mut rows = cells(&batches);
    rows.sort();
    Ok(rows)
}

/// The reported case, scaled down: one group per row (timestamps all
/// distinct) under a limit the inline tables cannot fit in. DataFusion's
/// aggregate answers by spilling; the inline aggregate hands over to it and
/// gives the same answer.
///
/// With several partitions, DataFusion's final aggregate can itself run out
/// under the greedy pool, depending on timing alone: a partition that
/// starts last finds the others holding the whole pool and has nothing of
/// its own to spill (seen once in six runs on a loaded 2-core machine, in
/// the hand-over's run and possible in the plain one). Such a run must end
/// in a clear `Resources exhausted` error that says the inline path handed
/// over; it is recorded, not failed. One partition has no such race, so at
/// least that case compares the answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_aggregate_with_many_groups_hands_over_under_a_small_limit() {
    let mut compared = 0;
    for partitions in [1, 2, 4] {
        let ctx = limited(16 << 20, partitions);
        ctx.tsjoin_sql(
            "CREATE TABLE prices AS SELECT to_timestamp_micros(value) AS ts, \
             CAST(value % 1000 AS DOUBLE) AS bid FROM generate_series(1, 400000)",
        )
        .await
        .unwrap();
        let sql = "SELECT ts, count(*), sum(bid) FROM prices GROUP BY ts";
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate = false")
            .await
            .unwrap();
        let plain = physical_plan(&ctx, sql).await;
        let what = format!("DataFusion's aggregate, {partitions} partitions");
        let Some(want) = sorted_unless_stalled(&plain, &ctx, &what, true).await else {
            continue;
        };
        let want = match want {
            Ok(want) => want,
            Err(e) if partitions > 1 && exhausted(&e) => {
                eprintln!(
                    "{what}: DataFusion's aggregate ran out under the greedy pool: {e}"
                );
                continue;
            }
            Err(e) => panic!("{what}: {e}"),
        };
        ctx.tsjoin_sql("SET tsjoin.inline_aggregate = true")
            .await
            .unwrap();
        assert!(
            explained_plan(&ctx, sql)
                .await
                .contains("InlineAggregateExec")
        );
        let plan = physical_plan(&ctx, sql).await;
        let what = format!("inline, {partitions} partitions");
        let Some(got) = sorted_unless_stalled(&plan, &ctx, &what, false).await else {
            continue;
        };
        // It did hand over: the inline tables did not fit.
        assert!(
            metric(&plan, "InlineAggregateExec", "fallback") > 0,
            "{partitions}"
        );
        let got = match got {
            Ok(got) => got,
            Err(e) if partitions > 1 && exhausted(&e) => {
                let message = e.to_string();
                assert!(message.contains("spilling aggregate instead"), "{message}");
                eprintln!(
                    "{what}: DataFusion's aggregate ran out after the hand-over: {e}"
                );
                continue;
            }
            Err(e) => panic!("{what}: {e}"),
        };
        assert_eq!(got.len(), 400_000);
        assert!(got == want, "partitions {partitions}");
        compared += 1;
    }
    assert!(compared >= 1, "no partition count compared its answers");
}

/// Whether `e` is (or wraps) a `Resources exhausted` error.
fn exhausted(e: &datafusion::error::DataFusionError) -> bool {
    matches!(
        e.find_root(),
        datafusion::error::DataFusionError::ResourcesExhausted(_)
    )
}

/// The sum of metric `name` over the nodes called `node` of an executed
/// plan.
pub fn metric(plan: &Arc<dyn ExecutionPlan>, node: &str, name: &str) -> usize {
    let mine = if plan.name() == node {
        plan.metrics()
            .and_then(|m| m.sum_by_name(name))
            .map_or(0, |v| v.as_usize())
    } else {
        0
    };
    mine + plan
        .children()
        .into_iter()
        .map(|c| metric(c, node, name))
        .sum::<usize>()
}

/// What a query did under a limit.
#[derive(Debug, PartialEq)]
enum Cell {
    /// The unlimited answer, inline.
    Answer,
    /// The unlimited answer, after handing over to DataFusion's aggregate
    /// (over the memory limit, or many composite groups) or with spills.
    HandedOver,
    /// A `Resources exhausted` error naming the operator.
    Error,
    /// No answer in time after DataFusion's `RepartitionExec` spilled: the
    /// spill-pool deadlock of DataFusion 55.2 (apache/datafusion#24883,
    /// fixed after 55.2), which any plan that repartitions under a small
    /// limit can meet (DataFusion's own aggregate, or the inline one after
    /// it hands over). Recorded, not failed: it is not tsjoin's operator.
    Stalled,
}

/// Every tsjoin operator under limits from 256 KiB to 64 MiB: the answer is
/// the unlimited one (inline, or after a hand-over/spill), or the error is a
/// clear `Resources exhausted` naming the operator; the process stays alive.
/// Prints the matrix (`cargo test … memory_limit_matrix -- --nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_limit_matrix() {
    let rows = 200_000;
    let setup = format!(
        "CREATE TABLE t AS SELECT to_timestamp_millis(value * 3) AS ts, value % 97 AS k, \
           CAST(value AS DOUBLE) AS v, CAST(value % 1000 AS VARCHAR) AS s \
           FROM generate_series(1, {rows}); \
         CREATE TABLE p AS SELECT to_timestamp_millis(value) AS ts, value % 97 AS k, \
           CAST(value AS DOUBLE) AS v FROM generate_series(1, {rows})"
    );
    // (operator, the node its errors name, query)
    let queries = [
        (
            "WINDOW JOIN (fast path)",
            "WindowJoinExec",
            "SELECT t.k, count(*), sum(n), avg(a) FROM (SELECT t.k, count(*) AS n, avg(p.v) AS a \
             FROM t WINDOW JOIN p ON p.k = t.k RANGE BETWEEN 1 second PRECEDING AND 1 second \
             FOLLOWING) t GROUP BY t.k",
        ),
        (
            "WINDOW JOIN (general path)",
            "WindowJoinExec",
            "SELECT t.k, count(*), sum(n) FROM (SELECT t.k, count(*) AS n FROM t WINDOW JOIN p \
             ON p.k = t.k AND p.v > t.v - 1000 RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW) t \
             GROUP BY t.k",
        ),
        (
            "inline GROUP BY, one group per row",
            "InlineAggregateExec",
            "SELECT ts, count(*), sum(v) FROM t GROUP BY ts",
        ),
        (
            "inline GROUP BY, 97 groups",
            "InlineAggregateExec",
            "SELECT k, count(*), sum(v), min(v), max(v), avg(v) FROM t GROUP BY k",
        ),
        (
            "inline GROUP BY, composite keys",
            "InlineAggregateExec",
            "SELECT k, s, count(*), sum(v) FROM t GROUP BY k, s",
        ),
        (
            "ASOF JOIN",
            "AsofJoinExec",
            "SELECT t.k, count(p.v), sum(p.v) FROM t ASOF JOIN p ON (k) GROUP BY t.k",
        ),
        (
            "HORIZON JOIN",
            "HorizonJoinExec",
            "SELECT h.offset, count(p.v), sum(p.v) FROM t HORIZON JOIN p ON (k) \
             LIST (-1s, 0, 1s) AS h",
        ),
        (
            "approx_percentile, 97 groups",
            "Aggregate",
            "SELECT k, approx_percentile(v, 0.99, 3), approx_median(v) FROM t GROUP BY k",
        ),
        (
            "approx_percentile, one group per row",
            "Aggregate",
            "SELECT ts, approx_percentile(v, 0.5, 2) FROM t GROUP BY ts",
        ),
        (
            "ORDER BY over LIMIT … OFFSET",
            "Sort",
            "SELECT * FROM (SELECT ts, v FROM t ORDER BY v LIMIT 150000 OFFSET 10) ORDER BY ts DESC",
        ),
    ];
    let limits = [256usize << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20];
    // Each inline GROUP BY also on DataFusion's aggregate, to compare.
    let runs = queries.iter().flat_map(|&(name, node, sql)| {
        let plain = node == "InlineAggregateExec";
        std::iter::once((name.to_string(), node, sql, true)).chain(plain.then(|| {
            (
                format!("{name} (DataFusion's aggregate)"),
                "Aggregate",
                sql,
                false,
            )
        }))
    });
    let mut matrix = vec![];
    for (name, node, sql, inline) in runs {
        let set = format!("SET tsjoin.inline_aggregate = {inline}");
        let ctx = limited(usize::MAX / 2, 2);
        ctx.tsjoin_sql(&setup).await.unwrap();
        let want = sorted_rows(&ctx, sql).await.unwrap();
        let mut line = vec![];
        for limit in limits {
            let ctx = limited(limit, 2);
            ctx.tsjoin_sql(&setup).await.unwrap();
            ctx.tsjoin_sql(&set).await.unwrap();
            let plan = physical_plan(&ctx, sql).await;
            let what = format!("{name} under {limit}");
            let cell = match sorted_unless_stalled(&plan, &ctx, &what, !inline).await {
                None => Cell::Stalled,
                Some(Ok(got)) => {
                    assert!(got == want, "{name} under {limit}: wrong answer");
                    let handed = metric(&plan, "InlineAggregateExec", "fallback") > 0;
                    let spilled = spill_count(&plan) > 0;
                    if handed || spilled {
                        Cell::HandedOver
                    } else {
                        Cell::Answer
                    }
                }
                Some(Err(e)) => {
                    let text = e.to_string();
                    assert!(
                        matches!(
                            e.find_root(),
                            datafusion::common::DataFusionError::ResourcesExhausted(_)
                        ) && (text.contains(node) || !inline),
                        "{name} under {limit}: unclear error {text}"
                    );
                    Cell::Error
                }
            };
            line.push(cell);
        }
        matrix.push((name, line));
    }
    let header: Vec<String> = limits.iter().map(|l| format!("{} KiB", l >> 10)).collect();
    eprintln!("| operator ({rows} rows) | {} |", header.join(" | "));
    for (name, line) in &matrix {
        let cells: Vec<String> = line.iter().map(|c| format!("{c:?}")).collect();
        eprintln!("| {name} | {} |", cells.join(" | "));
    }
    // At 64 MiB every query answers, and from 16 MiB the inline aggregate
    // never fails where DataFusion's answers.
    for (name, line) in &matrix {
        let last = &line[limits.len() - 1];
        assert!(
            matches!(last, Cell::Answer | Cell::HandedOver),
            "{name} at 64 MiB: {last:?}"
        );
    }
    for pair in matrix.windows(2) {
        let [(inline, a), (plain, b)] = pair else {
            continue;
        };
        if plain.ends_with("(DataFusion's aggregate)") {
            // (Below 16 MiB DataFusion's own aggregate answers or not from
            // run to run, as its partitions race for the pool.)
            for ((x, y), limit) in a.iter().zip(b).zip(limits).skip(3) {
                let answered = matches!(y, Cell::Answer | Cell::HandedOver);
                assert!(
                    !answered || *x != Cell::Error,
                    "{inline} fails at {limit} where DataFusion's aggregate answers"
                );
            }
        }
    }
}

/// Spills of an executed plan (DataFusion's `spill_count` metric).
fn spill_count(plan: &Arc<dyn ExecutionPlan>) -> usize {
    let mine = plan.metrics().and_then(|m| m.spill_count()).unwrap_or(0);
    mine + plan.children().into_iter().map(spill_count).sum::<usize>()
}

/// Runs `plan` and sorts its rows; `None` when it gives no answer within 30 s
/// in DataFusion's own operators under the limit: the plan is DataFusion's
/// alone (`datafusion_plan`: the inline aggregate switched off), a
/// `RepartitionExec` in the plan spilled, or the inline aggregate handed over
/// to the plan it replaced (whose nodes are built when it does). DataFusion
/// 55.2 stalls there now and then under limits this small (see
/// [`Cell::Stalled`]; its own aggregate under 256 KiB did once on a loaded
/// 2-core CI machine, with no repartition spill recorded). Any other run
/// without an answer in 30 s (each takes well under a second alone) fails,
/// naming `what`.
async fn sorted_unless_stalled(
    plan: &Arc<dyn ExecutionPlan>,
    ctx: &SessionContext,
    what: &str,
    datafusion_plan: bool,
) -> Option<datafusion::common::Result<Vec<Vec<String>>>> {
    let run = collect(Arc::clone(plan), ctx.task_ctx());
    match tokio::time::timeout(std::time::Duration::from_secs(30), run).await {
        Ok(result) => Some(result.map(|batches| {
            let mut rows = cells(&batches);
            rows.sort();
            rows
        })),
        Err(_) => {
            // (Metrics are live: readable after the run was dropped.)
            let repartition_spilled = metric(plan, "RepartitionExec", "spill_count") > 0;
            let handed_over = metric(plan, "InlineAggregateExec", "fallback") > 0;
            assert!(
                datafusion_plan || repartition_spilled || handed_over,
                "{what}: no answer within 30 s"
            );
            eprintln!(
                "{what}: stalled in DataFusion's operators (apache/datafusion#24883)"
            );
            None
        }
    }
}
