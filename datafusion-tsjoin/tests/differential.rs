//! Differential test: WINDOW JOIN against an obviously correct reference
//! (nested loops over rows, straight from the spec) on random data with
//! NULL keys, values and timestamps, NaN, duplicate timestamps, empty
//! windows, skewed keys, every window shape, both prevailing modes, pair
//! filters, 1–3 left partitions and unsorted input; each case runs on the
//! fast path (SIMD and scalar kernels, block structures and kernel scans) and on the
//! general path.

use crate::support::{cell, context, physical_plan};
use datafusion::arrow::array::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

pub use datafusion_tsjoin::testing::reference::{
    Row, Shape, batch, schema, window_join as reference,
};

/// `n` random rows (see [`datafusion_tsjoin::testing::reference::random_rows`])
/// from a seed drawn from `rng`.
pub fn random_rows(rng: &mut StdRng, n: usize, span: i64, keys: i64) -> Vec<Row> {
    let mut g = datafusion_tsjoin::testing::Rng::new(rng.random());
    datafusion_tsjoin::testing::reference::random_rows(&mut g, n, span, keys)
}

fn split(rng: &mut StdRng, rows: &[Row], parts: usize) -> Vec<Vec<RecordBatch>> {
    crate::support::split(rng, rows, parts, 7, batch)
}

async fn run_case(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    // Now and then a long right side, so that windows span whole blocks of
    // the fast path's block sums and min/max tables.
    let long = rng.random_bool(0.1);
    let span = rng.random_range(0..if long { 400 } else { 40 });
    let keys = rng.random_range(1..5);
    let (nl, nr) = (
        rng.random_range(0..30),
        rng.random_range(0..if long { 600 } else { 50 }),
    );
    let mut left = random_rows(&mut rng, nl, span, keys);
    let mut right = random_rows(&mut rng, nr, span, keys);
    left.shuffle(&mut rng);
    right.shuffle(&mut rng);
    // Time-ordered right input (the usual layout) takes the build's
    // presorted path; shuffled input the per-group sort.
    if rng.random_bool(0.5) {
        right.sort_by_key(|r| r.ts);
    }
    let a = rng.random_range(-10..=10);
    let b = rng.random_range(-10..=10);
    let shape = Shape {
        keyed: rng.random_bool(0.7),
        pair_filter: rng.random_bool(0.25),
        lo: a.min(b),
        hi: a.max(b),
        include: rng.random_bool(0.5),
        dynamic_lo: rng.random_bool(0.2),
    };
    let partitions = rng.random_range(1..=3);
    let ctx = context(partitions);
    let lparts = split(&mut rng, &left, partitions);
    ctx.register_table("l", Arc::new(MemTable::try_new(schema(), lparts).unwrap()))
        .unwrap();
    // Right partitions are contiguous runs of the table, so "table order"
    // (which breaks timestamp ties) is partition order, then row order.
    let right_partitions = rng.random_range(1..=3);
    let rparts = split(&mut rng, &right, right_partitions);
    ctx.register_table("r", Arc::new(MemTable::try_new(schema(), rparts).unwrap()))
        .unwrap();

    let sql = shape.sql();
    let want = reference(&left, &right, &shape);
    // Every execution path must give the reference answer: the fast path
    // with the best kernels, with the scalar kernels, and the general path.
    // `blocks` 0 makes every float sum and min/max read the block structures,
    // 100000 makes every one scan its window with the kernels.
    // The streaming path walks the ordered batches of this
    // shuffled left input and hands the others to the index path; the rest
    // run the index path alone (tests/streaming.rs covers ordered input).
    for (fast, simd, blocks, streaming) in [
        (true, true, 0, true),
        (true, true, 0, false),
        (true, true, 100_000, false),
        (true, false, 0, false),
        (true, false, 100_000, false),
        (false, true, 0, false),
    ] {
        ctx.tsjoin_sql(&format!("SET tsjoin.window_join_fast_path = {fast}"))
            .await
            .unwrap();
        ctx.tsjoin_sql(&format!("SET tsjoin.window_join_streaming = {streaming}"))
            .await
            .unwrap();
        ctx.tsjoin_sql(&format!("SET tsjoin.window_join_simd = {simd}"))
            .await
            .unwrap();
        ctx.tsjoin_sql(&format!("SET tsjoin.window_join_sum_prefix_min = {blocks}"))
            .await
            .unwrap();
        ctx.tsjoin_sql(&format!(
            "SET tsjoin.window_join_min_max_table_min = {blocks}"
        ))
        .await
        .unwrap();
        let batches = ctx.tsjoin_sql(&sql).await.unwrap().collect().await.unwrap();
        let got: Vec<Vec<String>> = batches
            .iter()
            .flat_map(|b| {
                (0..b.num_rows())
                    .map(move |r| b.columns().iter().map(|c| cell(c, r)).collect())
            })
            .collect();
        assert_eq!(
            got, want,
            "seed {seed} fast={fast} simd={simd} blocks={blocks} streaming={streaming}\n{sql}\nleft {left:?}\nright {right:?}"
        );
    }
    // Partitioned mode (keyless shapes stay broadcast) at 1..4 partitions,
    // the right side in one partition (see `partitioned::one_partition`),
    // on the fast and the general path.
    if seed.is_multiple_of(2) {
        let ctx = context(rng.random_range(1..=4));
        let lp = rng.random_range(1..=3);
        let lparts = split(&mut rng, &left, lp);
        ctx.register_table("l", Arc::new(MemTable::try_new(schema(), lparts).unwrap()))
            .unwrap();
        let rparts = split(&mut rng, &right, 1);
        ctx.register_table("r", Arc::new(MemTable::try_new(schema(), rparts).unwrap()))
            .unwrap();
        crate::partitioned::force_partitioned(&ctx).await;
        let mode = if shape.keyed {
            "partitioned"
        } else {
            "broadcast"
        };
        crate::partitioned::assert_mode(&ctx, &sql, mode).await;
        for fast in [true, false] {
            ctx.tsjoin_sql(&format!("SET tsjoin.window_join_fast_path = {fast}"))
                .await
                .unwrap();
            let got = crate::support::query_rows(&ctx, &sql).await;
            let plan = crate::support::explained_plan(&ctx, &sql).await;
            assert_eq!(
                got, want,
                "seed {seed} partitioned fast={fast}\n{sql}\n{plan}"
            );
        }
    }
    // The shapes the fast path covers do take it.
    if !shape.pair_filter && !shape.dynamic_lo {
        ctx.tsjoin_sql("SET tsjoin.window_join_fast_path = true")
            .await
            .unwrap();
        let plan = physical_plan(&ctx, &sql).await;
        let text = datafusion::physical_plan::displayable(plan.as_ref())
            .indent(true)
            .to_string();
        assert!(text.contains("path=fast"), "{sql}\n{text}");
        ctx.tsjoin_sql("SET tsjoin.window_join_streaming = true")
            .await
            .unwrap();
        let plan = physical_plan(&ctx, &sql).await;
        let text = datafusion::physical_plan::displayable(plan.as_ref())
            .indent(true)
            .to_string();
        assert!(text.contains("path=streaming"), "{sql}\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_join_matches_reference() {
    let cases = crate::support::case_count("TSJOIN_DIFF_CASES", 1500);
    let mut ran = 0;
    for seed in 0..cases {
        run_case(seed).await;
        ran += 1;
    }
    assert!(ran >= 1);
}

/// A right side large enough for the build's parallel passes (rows placed
/// by shares of the input, fast columns gathered and reduced over several
/// threads): the fast path with 4 workers gives the answer of the fast path
/// with one worker and of the general path, with the block structures read
/// by every window and by none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_build_matches_serial_build_and_general_path() {
    for (seed, sorted) in [(1, true), (2, false)] {
        let mut rng = StdRng::seed_from_u64(seed);
        let span = 200_000;
        let left = random_rows(&mut rng, 2000, span, 6);
        let mut right = random_rows(&mut rng, 150_000, span, 6);
        if sorted {
            right.sort_by_key(|r| r.ts);
        }
        let shape = Shape {
            keyed: true,
            pair_filter: false,
            lo: -300,
            hi: 200,
            include: sorted,
            dynamic_lo: false,
        };
        let sql = shape.sql();
        let lparts = split(&mut rng, &left, 2);
        let rparts = split(&mut rng, &right, 4);
        let mut answers = vec![];
        for (fast, workers, blocks) in [
            (true, 4, 0),
            (true, 1, 0),
            (true, 4, 100_000),
            (false, 4, 0),
        ] {
            let ctx = context(4);
            ctx.register_table(
                "l",
                Arc::new(MemTable::try_new(schema(), lparts.clone()).unwrap()),
            )
            .unwrap();
            ctx.register_table(
                "r",
                Arc::new(MemTable::try_new(schema(), rparts.clone()).unwrap()),
            )
            .unwrap();
            for set in [
                format!("tsjoin.window_join_fast_path = {fast}"),
                format!("tsjoin.window_join_workers = {workers}"),
                format!("tsjoin.window_join_sum_prefix_min = {blocks}"),
                format!("tsjoin.window_join_min_max_table_min = {blocks}"),
            ] {
                ctx.tsjoin_sql(&format!("SET {set}")).await.unwrap();
            }
            let batches = ctx.tsjoin_sql(&sql).await.unwrap().collect().await.unwrap();
            let got: Vec<Vec<String>> = batches
                .iter()
                .flat_map(|b| {
                    (0..b.num_rows())
                        .map(move |r| b.columns().iter().map(|c| cell(c, r)).collect())
                })
                .collect();
            assert_eq!(got.len(), left.len());
            answers.push(((fast, workers, blocks), got));
        }
        for (setup, got) in &answers[1..] {
            assert!(
                got == &answers[0].1,
                "seed {seed}: {setup:?} differs from {:?}\n{sql}",
                answers[0].0
            );
        }
    }
}
