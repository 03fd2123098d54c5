//! Differential test: WINDOW JOIN against an obviously correct reference
//! (nested loops over rows, straight from the spec) on random data with
//! NULL keys, values and timestamps, NaN, duplicate timestamps, empty
//! windows, skewed keys, every window shape, both prevailing modes, pair
//! filters, 1–3 left partitions and unsorted input; each case runs on the
//! fast path (SIMD and scalar kernels, block structures and kernel scans) and on the
//! general path.

use crate::support::{cell, context, physical_plan};
use datafusion::arrow::array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, TimestampMillisecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::datasource::MemTable;
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct Row {
    pub id: i64,
    pub ts: Option<i64>,
    pub k: Option<i64>,
    pub v: Option<f64>,
    pub i: Option<i64>,
}

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Float64, true),
        Field::new("i", DataType::Int64, true),
    ]))
}

pub fn batch(rows: &[Row]) -> RecordBatch {
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.id))),
        Arc::new(TimestampMillisecondArray::from(
            rows.iter().map(|r| r.ts).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter().map(|r| r.k).collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            rows.iter().map(|r| r.v).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter().map(|r| r.i).collect::<Vec<_>>(),
        )),
    ];
    RecordBatch::try_new(schema(), cols).unwrap()
}

pub fn random_rows(rng: &mut StdRng, n: usize, span: i64, keys: i64) -> Vec<Row> {
    (0..n)
        .map(|id| Row {
            id: id as i64,
            ts: (!rng.random_bool(0.05)).then(|| rng.random_range(0..=span)),
            // skewed keys: key 0 is as likely as all others together
            k: (!rng.random_bool(0.1)).then(|| {
                if rng.random_bool(0.5) {
                    0
                } else {
                    rng.random_range(0..keys)
                }
            }),
            v: match rng.random_range(0..10) {
                0 => None,
                1 => Some(f64::NAN),
                _ => Some(rng.random_range(-100..100) as f64 / 4.0),
            },
            i: (!rng.random_bool(0.1)).then(|| rng.random_range(-5..5)),
        })
        .collect()
}

/// A random query shape.
pub struct Shape {
    pub keyed: bool,
    pub pair_filter: bool,
    pub lo: i64,
    pub hi: i64,
    pub include: bool,
    /// lower bound `l.i milliseconds PRECEDING` (per row) instead of `lo`
    pub dynamic_lo: bool,
}

impl Shape {
    fn bound(v: i64) -> String {
        if v < 0 {
            format!("{} milliseconds PRECEDING", -v)
        } else {
            format!("{v} milliseconds FOLLOWING")
        }
    }

    pub fn sql(&self) -> String {
        let mut on = vec![];
        if self.keyed {
            on.push("r.k = l.k".to_string());
        }
        if self.pair_filter {
            on.push("r.i > l.i".to_string());
        }
        let on = if on.is_empty() {
            String::new()
        } else {
            format!("ON {}", on.join(" AND "))
        };
        format!(
            "SELECT l.id, count(*), count(r.v), sum(r.v), min(r.v), max(r.v), first(r.v), last(r.v), sum(r.i), avg(r.i) \
             FROM l WINDOW JOIN r {on} RANGE BETWEEN {} AND {} {} PREVAILING ORDER BY l.id",
            if self.dynamic_lo {
                "l.i milliseconds PRECEDING".to_string()
            } else {
                Self::bound(self.lo)
            },
            Self::bound(self.hi),
            if self.include { "INCLUDE" } else { "EXCLUDE" }
        )
    }
}

fn fmt_f(v: Option<f64>) -> String {
    match v {
        None => "NULL".into(),
        Some(x) if x.is_nan() => "NaN".into(),
        Some(x) => {
            let r = (x * 1e9).round() / 1e9;
            format!("{}", if r == 0.0 { 0.0 } else { r })
        }
    }
}

fn fmt_i(v: Option<i64>) -> String {
    v.map_or("NULL".into(), |x| x.to_string())
}

/// Expected output rows, straight from the spec (design/window-join.md §3–§7).
pub fn reference(left: &[Row], right: &[Row], s: &Shape) -> Vec<Vec<String>> {
    let mut out = vec![];
    let mut left = left.to_vec();
    left.sort_by_key(|r| r.id);
    for l in &left {
        // Candidates in (ts, table order) order.
        let mut cands: Vec<&Row> = right
            .iter()
            .filter(|r| r.ts.is_some())
            .filter(|r| !s.keyed || r.k == l.k)
            .filter(|r| {
                !s.pair_filter || matches!((r.i, l.i), (Some(a), Some(b)) if a > b)
            })
            .collect();
        cands.sort_by_key(|r| r.ts); // stable: table order breaks ties
        let mut w: Vec<&Row> = vec![];
        // dynamic lower bound: NULL aggregates nothing, negative clamps to 0,
        // an end before the start aggregates nothing
        let lo = if s.dynamic_lo {
            l.i.map(|i| -i.max(0))
        } else {
            Some(s.lo)
        };
        if let (Some(t), Some(lo)) = (l.ts, lo)
            && lo <= s.hi
        {
            let (start, end) = (t + lo, t + s.hi);
            w = cands
                .iter()
                .copied()
                .filter(|r| (start..=end).contains(&r.ts.unwrap()))
                .collect();
            if s.include
                && let Some(p) = cands.iter().rev().find(|r| r.ts.unwrap() <= start)
                && p.ts.unwrap() < start
            {
                w.insert(0, p);
            }
        }
        let vals: Vec<f64> = w.iter().filter_map(|r| r.v).collect();
        let ints: Vec<i64> = w.iter().filter_map(|r| r.i).collect();
        let sum = (!vals.is_empty()).then(|| vals.iter().sum::<f64>());
        // arrow/DataFusion order: NaN is the largest value
        let non_nan: Vec<f64> = vals.iter().copied().filter(|x| !x.is_nan()).collect();
        let min = if vals.is_empty() {
            None
        } else if non_nan.is_empty() {
            Some(f64::NAN)
        } else {
            Some(non_nan.iter().copied().fold(f64::INFINITY, f64::min))
        };
        let max = if vals.is_empty() {
            None
        } else if non_nan.len() < vals.len() {
            Some(f64::NAN)
        } else {
            Some(non_nan.iter().copied().fold(f64::NEG_INFINITY, f64::max))
        };
        let isum = (!ints.is_empty()).then(|| ints.iter().sum::<i64>());
        let iavg = (!ints.is_empty())
            .then(|| ints.iter().sum::<i64>() as f64 / ints.len() as f64);
        out.push(vec![
            l.id.to_string(),
            w.len().to_string(),
            vals.len().to_string(),
            fmt_f(sum),
            fmt_f(min),
            fmt_f(max),
            fmt_f(w.first().and_then(|r| r.v)),
            fmt_f(w.last().and_then(|r| r.v)),
            fmt_i(isum),
            fmt_f(iavg),
        ]);
    }
    out
}

fn split(rng: &mut StdRng, rows: &[Row], parts: usize) -> Vec<Vec<RecordBatch>> {
    let mut out = vec![vec![]; parts];
    let mut start = 0;
    for (p, part) in out.iter_mut().enumerate() {
        let end = if p + 1 == parts {
            rows.len()
        } else {
            rng.random_range(start..=rows.len())
        };
        // several small batches per partition: batch boundaries are a classic bug source
        let mut s = start;
        while s < end {
            let e = (s + rng.random_range(1..=7)).min(end);
            part.push(batch(&rows[s..e]));
            s = e;
        }
        start = end;
    }
    out
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
    for (fast, simd, blocks) in [
        (true, true, 0),
        (true, true, 100_000),
        (true, false, 0),
        (true, false, 100_000),
        (false, true, 0),
    ] {
        ctx.tsjoin_sql(&format!("SET tsjoin.window_join_fast_path = {fast}"))
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
            "seed {seed} fast={fast} simd={simd} blocks={blocks}\n{sql}\nleft {left:?}\nright {right:?}"
        );
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
