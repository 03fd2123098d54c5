//! `NewestFirstTopKExec` (`ORDER BY ts DESC LIMIT n` over a filtered
//! Parquet scan, read row group by row group newest first): differential
//! against DataFusion's plain plan on random files (random row-group sizes,
//! time ranges overlapping between files, files named out of time order,
//! NULL and NaN values, NULL keys), 1–3 partitions; the early stop; the
//! codec round trip.

use crate::support::{cells, contains_operator, context, physical_proto, register_dir};
use datafusion::arrow::array::{
    Float64Array, Int64Array, RecordBatch, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::physical_plan::{ExecutionPlan, collect, displayable};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

#[derive(Clone, Debug)]
struct Row {
    id: i64,
    ts: Option<i64>,
    v: Option<f64>,
}

fn write_file(path: &std::path::Path, rows: &[Row], row_group: usize) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("v", DataType::Float64, true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.id))),
            Arc::new(TimestampMicrosecondArray::from(
                rows.iter().map(|r| r.ts).collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from(
                rows.iter().map(|r| r.v).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap();
    crate::support::write_parquet(path, &batch, row_group);
}

/// A metric of the plan's `NewestFirstTopKExec`.
fn metric(plan: &Arc<dyn ExecutionPlan>, name: &str) -> Option<usize> {
    if plan.name() == "NewestFirstTopKExec" {
        return plan
            .metrics()
            .and_then(|m| m.sum_by_name(name))
            .map(|v| v.as_usize());
    }
    plan.children().into_iter().find_map(|c| metric(c, name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newest_first_matches_datafusion() {
    let cases = crate::support::case_count("TSJOIN_NEWEST_FIRST_CASES", 16);
    let (mut checked, mut ours) = (0, 0);
    for seed in 0..cases {
        let mut rng = StdRng::seed_from_u64(seed);
        let n = rng.random_range(0..600usize);
        let null_keys = rng.random_bool(0.3);
        // Unique timestamps with gaps (NULL in some cases), dealt to files
        // with overlapping ranges.
        let mut ts: Vec<i64> = (0..n as i64 * 3).collect();
        ts.shuffle(&mut rng);
        ts.truncate(n);
        let rows: Vec<Row> = ts
            .iter()
            .enumerate()
            .map(|(id, &ts)| Row {
                id: id as i64,
                ts: (!(null_keys && rng.random_bool(0.1))).then_some(ts),
                v: match rng.random_range(0..10) {
                    0 => None,
                    1 => Some(f64::NAN),
                    _ => Some(rng.random_range(0..100) as f64),
                },
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let files = rng.random_range(1..5usize);
        let mut parts: Vec<Vec<Row>> = vec![vec![]; files];
        for r in &rows {
            parts[rng.random_range(0..files)].push(r.clone());
        }
        for (f, part) in parts.iter_mut().enumerate() {
            // Mostly sorted by time, as a time-series table is.
            if rng.random_bool(0.8) {
                part.sort_by_key(|r| r.ts);
            }
            let name = format!("{:04}-{f}.parquet", rng.random_range(0..10000));
            write_file(&dir.path().join(name), part, rng.random_range(1..80));
        }
        let location = format!("{}/", dir.path().display());
        for partitions in 1..=3 {
            let tsjoin = context(partitions);
            let plain = SessionContext::new_with_config(
                SessionConfig::new().with_target_partitions(partitions),
            );
            for ctx in [&tsjoin, &plain] {
                ctx.register_parquet("r", &location, ParquetReadOptions::default())
                    .await
                    .unwrap();
            }
            for _ in 0..8 {
                let x = rng.random_range(0..100);
                let filter = match rng.random_range(0..4) {
                    0 => "TRUE".to_string(),
                    1 => format!("v > {x}"),
                    2 => format!("v > {x} AND id % 2 = 0"),
                    _ => "v IS NULL OR id % 3 = 0".into(),
                };
                let nulls = if rng.random_bool(0.5) {
                    ""
                } else {
                    " NULLS LAST"
                };
                let limit = rng.random_range(0..30);
                let offset = if rng.random_bool(0.2) {
                    format!(" OFFSET {}", rng.random_range(0..10))
                } else {
                    String::new()
                };
                let sql = format!(
                    "SELECT id, ts, v FROM r WHERE {filter} ORDER BY ts DESC{nulls} \
                     LIMIT {limit}{offset}"
                );
                let plan = crate::support::physical_plan(&tsjoin, &sql).await;
                ours += usize::from(contains_operator(&plan, "NewestFirstTopKExec"));
                let got = cells(&collect(plan, tsjoin.task_ctx()).await.unwrap());
                let want =
                    cells(&plain.sql(&sql).await.unwrap().collect().await.unwrap());
                // NULL keys tie: then only the key column is determined.
                let key = |rows: Vec<Vec<String>>| -> Vec<Vec<String>> {
                    if null_keys {
                        rows.into_iter().map(|r| vec![r[1].clone()]).collect()
                    } else {
                        rows
                    }
                };
                assert_eq!(
                    key(got),
                    key(want),
                    "seed {seed}, {partitions} partitions: {sql}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 0);
    assert!(
        ours * 2 > checked,
        "the operator ran in {ours} of {checked} cases"
    );
}

/// Many row groups, a selective-enough filter: a handful of row groups are
/// read, EXPLAIN ANALYZE says how many of how many, and the answer is
/// DataFusion's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newest_first_stops_early() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    for day in 0..8 {
        let rows: Vec<Row> = (0..1000)
            .map(|i| Row {
                id: day * 1000 + i,
                ts: Some(day * 1000 + i),
                v: Some(rng.random_range(0..100) as f64),
            })
            .collect();
        write_file(&dir.path().join(format!("day{day}.parquet")), &rows, 50);
    }
    let location = format!("{}/", dir.path().display());
    for partitions in [1, 2, 3] {
        let ctx = context(partitions);
        ctx.register_parquet("r", &location, ParquetReadOptions::default())
            .await
            .unwrap();
        let plain = SessionContext::new_with_config(
            SessionConfig::new().with_target_partitions(partitions),
        );
        plain
            .register_parquet("r", &location, ParquetReadOptions::default())
            .await
            .unwrap();
        let sql = "SELECT * FROM r WHERE v > 50 ORDER BY ts DESC LIMIT 5";
        let plan = crate::support::physical_plan(&ctx, sql).await;
        let got = cells(&collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap());
        let want = cells(&plain.sql(sql).await.unwrap().collect().await.unwrap());
        assert_eq!(got, want);
        assert_eq!(metric(&plan, "row_groups_total"), Some(160));
        let read = metric(&plan, "row_groups_read").unwrap();
        assert!(
            (1..=partitions + 2).contains(&read),
            "{partitions} partitions: read {read} row groups"
        );
        let text =
            datafusion::physical_plan::display::DisplayableExecutionPlan::with_metrics(
                plan.as_ref(),
            )
            .indent(true)
            .to_string();
        assert!(text.contains("row_groups_read="), "{text}");
        // QuestDB's LIMIT -n takes the same path (designated timestamp).
        ctx.set_designated_timestamp("r", "ts").unwrap();
        let plan =
            crate::support::physical_plan(&ctx, "SELECT * FROM r WHERE v > 50 LIMIT -5")
                .await;
        let got = cells(&collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap());
        let mut want = want.clone();
        want.reverse();
        assert_eq!(got, want);
        assert!(metric(&plan, "row_groups_read").unwrap() <= partitions + 2);
        // Switched off: DataFusion's TopK.
        ctx.tsjoin_sql("SET tsjoin.newest_first_scan = false")
            .await
            .unwrap();
        let plan = crate::support::physical_plan(&ctx, sql).await;
        assert!(!contains_operator(&plan, "NewestFirstTopKExec"));
    }
}

/// The operator crosses the wire (tag 0xB8) with its key, NULL order and
/// fetch, and runs the same after.
#[tokio::test]
async fn newest_first_round_trips_through_proto() {
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<Row> = (0..300)
        .map(|i| Row {
            id: i,
            ts: (i % 17 != 0).then_some(i),
            v: Some((i % 10) as f64),
        })
        .collect();
    write_file(&dir.path().join("a.parquet"), &rows, 40);
    let ctx = context(2);
    register_dir(&ctx, "r", dir.path()).await;
    for sql in [
        "SELECT * FROM r WHERE v > 4 ORDER BY ts DESC LIMIT 7",
        "SELECT * FROM r WHERE v > 4 ORDER BY ts DESC NULLS LAST LIMIT 7",
    ] {
        let plan = crate::support::physical_plan(&ctx, sql).await;
        let text = displayable(plan.as_ref()).indent(true).to_string();
        assert!(text.contains("NewestFirstTopKExec: fetch=7"), "{text}");
        let (bytes, back) = physical_proto(&plan, &ctx);
        assert!(bytes.contains(&datafusion_tsjoin::codec::NEWEST_FIRST_TAG));
        // (datafusion-proto drops the scan's reverse-reading hints, which
        // the operator does not use.)
        let mine = |t: &str| {
            t.lines()
                .filter(|l| !l.contains("DataSourceExec"))
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            mine(&text),
            mine(&displayable(back.as_ref()).indent(true).to_string())
        );
        let a = cells(&collect(plan, ctx.task_ctx()).await.unwrap());
        let b = cells(&collect(back, ctx.task_ctx()).await.unwrap());
        assert_eq!(a, b);
        assert_eq!(a.len(), 7);
    }
}
