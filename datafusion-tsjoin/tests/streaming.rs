//! Differential test of the WINDOW JOIN streaming path: time-ordered left
//! partitions (each its own time range, or overlapping ones), random batch
//! sizes, windows much longer than a partition's range, duplicate
//! timestamps at partition and batch boundaries, keys met only in the
//! warm-up, NULL keys and times, NaN, both prevailing modes, batches out of
//! order (restarts) and out of order inside (the index path for that
//! batch). Streaming = index path = general path = reference.

use crate::differential::{Row, Shape, batch, random_rows, reference, schema};
use crate::support::{cells, context, physical_plan};
use datafusion::arrow::array::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::logical_expr::col;
use datafusion::physical_plan::displayable;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// How the left partitions lie in time.
#[derive(Debug, Clone, Copy)]
enum Layout {
    /// Each partition a contiguous time range (files split by time).
    Ranges,
    /// Rows dealt round robin: every partition ordered, ranges overlap.
    Dealt,
    /// Ranges, but each partition's batches shuffled (the walk restarts).
    ShuffledBatches,
    /// Ranges, with one batch shuffled inside (joined on the index path).
    OneUnorderedBatch,
}

fn left_partitions(
    rng: &mut StdRng,
    rows: &[Row],
    parts: usize,
    layout: Layout,
) -> Vec<Vec<RecordBatch>> {
    let max_batch = rng.random_range(1..=9);
    match layout {
        Layout::Dealt => {
            let mut dealt: Vec<Vec<Row>> = vec![vec![]; parts];
            for (i, r) in rows.iter().enumerate() {
                dealt[i % parts].push(r.clone());
            }
            dealt
                .iter()
                .map(|p| crate::support::split(rng, p, 1, max_batch, batch).remove(0))
                .collect()
        }
        Layout::Ranges => crate::support::split(rng, rows, parts, max_batch, batch),
        Layout::ShuffledBatches => {
            let mut out = crate::support::split(rng, rows, parts, max_batch, batch);
            for p in &mut out {
                p.shuffle(rng);
            }
            out
        }
        Layout::OneUnorderedBatch => {
            let mut sorted = rows.to_vec();
            let n = sorted.len();
            if n > 2 {
                let a = rng.random_range(0..n - 2);
                let b = (a + rng.random_range(2..=9)).min(n);
                sorted[a..b].reverse();
            }
            crate::support::split(rng, &sorted, parts, max_batch.max(4), batch)
        }
    }
}

async fn run(
    ctx: &SessionContext,
    sql: &str,
    streaming: bool,
    fast: bool,
) -> Vec<Vec<String>> {
    for set in [
        format!("tsjoin.window_join_streaming = {streaming}"),
        format!("tsjoin.window_join_fast_path = {fast}"),
    ] {
        ctx.tsjoin_sql(&format!("SET {set}")).await.unwrap();
    }
    let batches = ctx.tsjoin_sql(sql).await.unwrap().collect().await.unwrap();
    cells(&batches)
}

async fn run_case(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let long = rng.random_bool(0.15);
    let span = rng.random_range(0..if long { 300 } else { 40 });
    let keys = rng.random_range(1..6);
    let nl = rng.random_range(0..40);
    let nr = rng.random_range(0..if long { 500 } else { 60 });
    let mut left = random_rows(&mut rng, nl, span, keys);
    let mut right = random_rows(&mut rng, nr, span, keys);
    // Left in time order (NULL times where they fall: they join nothing),
    // ties in random order; right in time order or not (the timeline sorts).
    left.shuffle(&mut rng);
    let mut keyed: Vec<(i64, Row)> = left
        .into_iter()
        .map(|r| (r.ts.unwrap_or_else(|| rng.random_range(0..=span)), r))
        .collect();
    keyed.sort_by_key(|(t, _)| *t);
    left = keyed.into_iter().map(|(_, r)| r).collect();
    right.shuffle(&mut rng);
    if rng.random_bool(0.5) {
        right.sort_by_key(|r| r.ts);
    }
    // Now and then a window far longer than the whole range.
    let reach = if rng.random_bool(0.2) { 400 } else { 12 };
    let a = rng.random_range(-reach..=reach);
    let b = rng.random_range(-12..=12);
    let shape = Shape {
        keyed: rng.random_bool(0.75),
        pair_filter: false,
        lo: a.min(b),
        hi: a.max(b),
        include: rng.random_bool(0.5),
        dynamic_lo: false,
    };
    let layout = match rng.random_range(0..6) {
        0 => Layout::Dealt,
        1 => Layout::ShuffledBatches,
        2 => Layout::OneUnorderedBatch,
        _ => Layout::Ranges,
    };
    let partitions = rng.random_range(1..=3);
    let ctx = context(partitions);
    let lparts = left_partitions(&mut rng, &left, partitions, layout);
    let mut table = MemTable::try_new(schema(), lparts).unwrap();
    if matches!(layout, Layout::Ranges | Layout::Dealt) && rng.random_bool(0.5) {
        table = table.with_sort_order(vec![vec![col("ts").sort(true, true)]]);
    }
    ctx.register_table("l", Arc::new(table)).unwrap();
    let rp = rng.random_range(1..=3);
    let rparts = crate::support::split(&mut rng, &right, rp, 7, batch);
    ctx.register_table("r", Arc::new(MemTable::try_new(schema(), rparts).unwrap()))
        .unwrap();

    let sql = shape.sql();
    let want = reference(&left, &right, &shape);
    ctx.tsjoin_sql("SET tsjoin.window_join_streaming = true")
        .await
        .unwrap();
    let plan = physical_plan(&ctx, &sql).await;
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert!(text.contains("path=streaming"), "{sql}\n{text}");
    for (streaming, fast) in [(true, true), (false, true), (false, false)] {
        let got = run(&ctx, &sql, streaming, fast).await;
        assert_eq!(
            got, want,
            "seed {seed} streaming={streaming} fast={fast} layout={layout:?} \
             partitions={partitions}\n{sql}\nleft {left:?}\nright {right:?}"
        );
    }
    // Partitioned mode: the hash repartition interleaves the left's
    // ordered runs, which the streaming path must notice.
    if seed % 2 == 1 {
        crate::partitioned::one_partition(
            &ctx,
            "r",
            crate::support::split(&mut rng, &right, 1, 7, batch),
        );
        crate::partitioned::force_partitioned(&ctx).await;
        let got = run(&ctx, &sql, true, true).await;
        assert_eq!(got, want, "seed {seed} partitioned streaming\n{sql}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_matches_reference_and_index_path() {
    let cases = crate::support::case_count("TSJOIN_DIFF_CASES", 800);
    for seed in 0..cases {
        run_case(seed).await;
    }
}

/// A key whose only right row lies far before a left partition's range,
/// beyond the warm-up's bounded look-back: its prevailing row comes from
/// the timeline's per-key index, on the streaming path as on the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prevailing_row_from_far_before_the_partition() {
    let row = |id: i64, ts: i64, k: i64| Row {
        id,
        ts: Some(ts),
        k: Some(k),
        v: Some(id as f64 / 4.0),
        i: Some(id % 5),
    };
    let mut right = vec![row(0, 0, 2)];
    right.extend((1..5000).map(|i| row(i, i, 1)));
    let left = vec![row(0, 5, 1), row(1, 6, 2), row(2, 4990, 2), row(3, 4995, 1)];
    let shape = Shape {
        keyed: true,
        pair_filter: false,
        lo: -3,
        hi: 2,
        include: true,
        dynamic_lo: false,
    };
    let want = reference(&left, &right, &shape);
    let ctx = context(2);
    let lparts = vec![vec![batch(&left[..2])], vec![batch(&left[2..])]];
    ctx.register_table("l", Arc::new(MemTable::try_new(schema(), lparts).unwrap()))
        .unwrap();
    ctx.register_table(
        "r",
        Arc::new(MemTable::try_new(schema(), vec![vec![batch(&right)]]).unwrap()),
    )
    .unwrap();
    let sql = shape.sql();
    assert_eq!(run(&ctx, &sql, true, true).await, want);
    assert_eq!(run(&ctx, &sql, false, true).await, want);
}

/// EXPLAIN names the path and whether the left order is known; the
/// setting switches the streaming path off, and queries the fast path does
/// not cover never take it.
#[tokio::test]
async fn explain_shows_the_streaming_path() {
    let ctx = context(2);
    let rows = random_rows(&mut StdRng::seed_from_u64(1), 20, 50, 3);
    let sorted = MemTable::try_new(schema(), vec![vec![batch(&rows)]])
        .unwrap()
        .with_sort_order(vec![vec![col("ts").sort(true, false)]]);
    ctx.register_table("l", Arc::new(sorted)).unwrap();
    ctx.register_table(
        "r",
        Arc::new(MemTable::try_new(schema(), vec![vec![batch(&rows)]]).unwrap()),
    )
    .unwrap();
    let sql = "SELECT l.id, avg(r.v) FROM l WINDOW JOIN r ON r.k = l.k \
               RANGE BETWEEN 2 milliseconds PRECEDING AND CURRENT ROW";
    let text = |ctx: SessionContext, sql: &'static str| async move {
        let plan = physical_plan(&ctx, sql).await;
        displayable(plan.as_ref()).indent(true).to_string()
    };
    // Off by default.
    let t = text(ctx.clone(), sql).await;
    assert!(t.contains("path=fast, kernels="), "{t}");
    ctx.tsjoin_sql("SET tsjoin.window_join_streaming = true")
        .await
        .unwrap();
    let t = text(ctx.clone(), sql).await;
    assert!(t.contains("path=streaming (left order known;"), "{t}");
    let swapped = "SELECT r.id, avg(l.v) FROM r WINDOW JOIN l ON r.k = l.k \
                   RANGE BETWEEN 2 milliseconds PRECEDING AND CURRENT ROW";
    let t = text(ctx.clone(), swapped).await;
    assert!(t.contains("path=streaming (left order checked;"), "{t}");
    let general = "SELECT l.id, stddev(r.v) FROM l WINDOW JOIN r ON r.k = l.k \
                   RANGE BETWEEN 2 milliseconds PRECEDING AND CURRENT ROW";
    let t = text(ctx.clone(), general).await;
    assert!(t.contains("path=general"), "{t}");
    ctx.tsjoin_sql("SET tsjoin.window_join_streaming = false")
        .await
        .unwrap();
    let t = text(ctx.clone(), sql).await;
    assert!(t.contains("path=fast, kernels="), "{t}");
}
