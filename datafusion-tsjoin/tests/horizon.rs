//! HORIZON JOIN: a differential test against a nested-loop reference on
//! random data, EXPLAIN, the proto round trip and the memory limit.

use crate::support::{
    case_count, cells, context, explained_plan, physical_plan, query_rows,
};
use datafusion::arrow::array::{Int64Array, RecordBatch, TimestampMicrosecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::datasource::MemTable;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::{collect, displayable};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// One row: id, time (µs), key, value; all but id nullable.
type Row = (i64, Option<i64>, Option<i64>, Option<i64>);

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
    ]))
}

fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(TimestampMicrosecondArray::from_iter(
                rows.iter().map(|r| r.1),
            )),
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.2))),
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.3))),
        ],
    )
    .unwrap()
}

fn random_rows(
    rng: &mut StdRng,
    n: usize,
    span: i64,
    keys: i64,
    sorted: bool,
) -> Vec<Row> {
    let mut rows: Vec<Row> = (0..n as i64)
        .map(|id| {
            let ts = (!rng.random_bool(0.05)).then(|| rng.random_range(0..span));
            // Skewed: key 0 is common.
            let k = if rng.random_bool(0.08) {
                None
            } else if rng.random_bool(0.4) {
                Some(0)
            } else {
                Some(rng.random_range(0..keys))
            };
            let v = (!rng.random_bool(0.1)).then(|| rng.random_range(-50..50));
            (id, ts, k, v)
        })
        .collect();
    if sorted {
        rows.sort_by_key(|r| r.1.unwrap_or(i64::MIN));
    }
    rows
}

/// The ASOF match of `l` in `right` at its time + `offset`: the latest
/// right time `<=` the target, the latest row in input order among equal
/// times; keys compare NULL as a value.
fn asof(l: &Row, right: &[Row], keyed: bool, offset: i64) -> Option<usize> {
    let t = l.1? + offset;
    let mut best: Option<(i64, usize)> = None;
    for (j, r) in right.iter().enumerate() {
        let Some(rt) = r.1 else { continue };
        if (keyed && r.2 != l.2) || rt > t {
            continue;
        }
        if best.is_none_or(|(bt, _)| rt >= bt) {
            best = Some((rt, j));
        }
    }
    best.map(|(_, j)| j)
}

fn show(v: Option<i64>) -> String {
    v.map_or("NULL".to_string(), |v| v.to_string())
}

/// Random offsets (µs) and their SQL: RANGE or LIST, negative ones too,
/// in microseconds or milliseconds.
fn random_offsets(rng: &mut StdRng, span: i64) -> (Vec<i64>, String) {
    let ms = rng.random_bool(0.2);
    let (unit, scale) = if ms { ("T", 1000) } else { ("U", 1) };
    let reach = (span / scale).max(2);
    let lit = |v: i64| {
        // A bare `0` is QuestDB's only unitless offset.
        if v == 0 {
            "0".to_string()
        } else {
            format!("{v}{unit}")
        }
    };
    if rng.random_bool(0.5) {
        let from = rng.random_range(-reach..reach);
        let to = from + rng.random_range(0..reach);
        let step = rng.random_range(1..=reach.max(1));
        let offsets = (0..)
            .map(|i| from + i * step)
            .take_while(|o| *o <= to)
            .map(|o| o * scale)
            .collect();
        (
            offsets,
            format!("RANGE FROM {} TO {} STEP {}", lit(from), lit(to), lit(step)),
        )
    } else {
        let n = rng.random_range(1..6);
        let mut v: Vec<i64> = (0..n).map(|_| rng.random_range(-reach..reach)).collect();
        v.sort();
        v.dedup();
        let sql = v.iter().map(|o| lit(*o)).collect::<Vec<_>>().join(", ");
        (
            v.iter().map(|o| o * scale).collect(),
            format!("LIST ({sql})"),
        )
    }
}

async fn run_case(seed: u64) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let big = seed % 50 == 7;
    let (nl, nr, nr2) = if big {
        (300, 3000, 50)
    } else {
        (
            rng.random_range(0..30),
            rng.random_range(0..40),
            rng.random_range(0..10),
        )
    };
    let span = if big { 50_000 } else { rng.random_range(1..60) };
    let keys = rng.random_range(1..6);
    let sorted = rng.random_bool(0.7);
    let left = random_rows(&mut rng, nl, span, keys, sorted);
    let sorted = rng.random_bool(0.7);
    let right = random_rows(&mut rng, nr, span, keys, sorted);
    let right2 = random_rows(&mut rng, nr2, span, keys, true);
    let ctx = context(rng.random_range(1..4));
    for (name, rows, parts) in [
        ("l", &left, rng.random_range(1..5)),
        ("r", &right, rng.random_range(1..4)),
        ("r2", &right2, 1),
    ] {
        let parts = crate::support::split(&mut rng, rows, parts, 9, batch);
        let t = MemTable::try_new(schema(), parts).unwrap();
        ctx.register_table(name, Arc::new(t)).unwrap();
    }
    let keyed = rng.random_bool(0.7);
    let on = if keyed { "ON (k)" } else { "" };
    let (offsets, horizon) = random_offsets(&mut rng, span);
    let mut cases = 0;
    // The second pass (every other seed) in partitioned mode, the right
    // side in one partition (see `partitioned::one_partition`).
    for pass in 0..1 + (seed % 2) {
        if pass == 1 {
            let parts = crate::support::split(&mut rng, &right, 1, 9, batch);
            crate::partitioned::one_partition(&ctx, "r", parts);
            crate::partitioned::force_partitioned(&ctx).await;
        }

        // Every pair, with the matched row and h.timestamp.
        let sql = format!(
            "SELECT l.id, h.offset, r.id, CAST(h.timestamp AS BIGINT) FROM l \
         HORIZON JOIN r {on} {horizon} AS h ORDER BY l.id, h.offset"
        );
        let mut want = vec![];
        let mut sorted_left = left.clone();
        sorted_left.sort_by_key(|l| l.0);
        for l in &sorted_left {
            for &o in &offsets {
                let m = asof(l, &right, keyed, o);
                want.push(vec![
                    l.0.to_string(),
                    o.to_string(),
                    show(m.map(|j| right[j].0)),
                    show(l.1.map(|t| t + o)),
                ]);
            }
        }
        assert_eq!(
            query_rows(&ctx, &sql).await,
            want,
            "seed {seed} pass {pass}: {sql}"
        );
        cases += 1;

        // Markouts per offset: aggregates over the pairs, left and right values.
        let sql = format!(
            "SELECT h.offset, count(*), count(r.v), sum(r.v), sum(l.v), sum(r.v - l.v) FROM l \
         HORIZON JOIN r {on} {horizon} AS h ORDER BY h.offset"
        );
        let mut want = vec![];
        if !left.is_empty() {
            for &o in &offsets {
                let (mut n, mut nv, mut sr, mut sl, mut sd) = (0, 0, None, None, None);
                let add = |acc: &mut Option<i64>, v: Option<i64>| {
                    if let Some(v) = v {
                        *acc = Some(acc.unwrap_or(0) + v);
                    }
                };
                for l in &left {
                    n += 1;
                    let rv = asof(l, &right, keyed, o).and_then(|j| right[j].3);
                    nv += usize::from(rv.is_some());
                    add(&mut sr, rv);
                    add(&mut sl, l.3);
                    add(&mut sd, rv.zip(l.3).map(|(a, b)| a - b));
                }
                want.push(vec![
                    o.to_string(),
                    n.to_string(),
                    nv.to_string(),
                    show(sr),
                    show(sl),
                    show(sd),
                ]);
            }
        }
        assert_eq!(
            query_rows(&ctx, &sql).await,
            want,
            "seed {seed} pass {pass}: {sql}"
        );
        cases += 1;

        // Two right tables (the second without keys), a left-only WHERE.
        let sql = format!(
            "SELECT l.id, h.offset, r.id, r2.id FROM l HORIZON JOIN r {on} \
         HORIZON JOIN r2 {horizon} AS h WHERE l.v > 0 ORDER BY l.id, h.offset"
        );
        let mut want = vec![];
        for l in sorted_left.iter().filter(|l| l.3.is_some_and(|v| v > 0)) {
            for &o in &offsets {
                let m = asof(l, &right, keyed, o);
                let m2 = asof(l, &right2, false, o);
                want.push(vec![
                    l.0.to_string(),
                    o.to_string(),
                    show(m.map(|j| right[j].0)),
                    show(m2.map(|j| right2[j].0)),
                ]);
            }
        }
        assert_eq!(
            query_rows(&ctx, &sql).await,
            want,
            "seed {seed} pass {pass}: {sql}"
        );
        cases += 1;
    }
    cases
}

/// Hundreds of random data sets (TSJOIN_HORIZON_CASES, three queries each):
/// NULL keys, values and times, duplicate times, empty sides, skewed keys,
/// RANGE and LIST offsets incl. negative ones, 1..4 partitions, batches of
/// 1..9 rows, sorted and unsorted inputs, one and two right tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn horizon_join_matches_reference() {
    let n = case_count("TSJOIN_HORIZON_CASES", 300);
    let mut cases = 0;
    for seed in 0..n {
        cases += run_case(seed).await;
    }
    assert!(cases >= 3 * n as usize);
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
        "path=merge x3 cursors (left order",
    ] {
        assert!(text.contains(part), "missing {part} in\n{text}");
    }
}

#[tokio::test]
async fn plans_round_trip_through_proto() {
    use datafusion_proto::bytes::{
        logical_plan_from_bytes_with_extension_codec,
        logical_plan_to_bytes_with_extension_codec,
        physical_plan_from_bytes_with_extension_codec,
        physical_plan_to_bytes_with_extension_codec,
    };
    use datafusion_tsjoin::codec::{TsJoinLogicalCodec, TsJoinPhysicalCodec};
    let ctx = context(2);
    tables(&ctx).await;
    // Parquet tables: the logical codec cannot carry in-memory tables.
    let dir = tempfile::tempdir().unwrap();
    for name in ["t", "p"] {
        let path = dir.path().join(format!("{name}.parquet"));
        let path = path.display();
        ctx.tsjoin_sql(&format!(
            "COPY {name} TO '{path}'; \
             CREATE EXTERNAL TABLE {name}q STORED AS PARQUET LOCATION '{path}'"
        ))
        .await
        .unwrap();
    }
    for sql in [
        "SELECT h.offset, avg(p.mid - t.price) FROM tq t HORIZON JOIN pq p ON t.sym = p.sym \
         AND t.price > 5 LIST (-1m, 0, 30s) AS h ORDER BY h.offset",
        "SELECT t.sym, h.offset, count(p.mid), count(q.mid) FROM tq t HORIZON JOIN pq p \
         ON (sym) HORIZON JOIN pq q RANGE FROM 0s TO 20s STEP 10s AS h \
         ORDER BY t.sym, h.offset",
    ] {
        let want = query_rows(&ctx, sql).await;
        let logical = ctx
            .tsjoin_sql(sql)
            .await
            .unwrap()
            .into_optimized_plan()
            .unwrap();
        let bytes =
            logical_plan_to_bytes_with_extension_codec(&logical, &TsJoinLogicalCodec)
                .unwrap();
        let back = logical_plan_from_bytes_with_extension_codec(
            &bytes,
            &ctx.task_ctx(),
            &TsJoinLogicalCodec,
        )
        .unwrap();
        assert_eq!(
            format!("{}", back.display_indent()),
            format!("{}", logical.display_indent())
        );
        let plan = physical_plan(&ctx, sql).await;
        let bytes = physical_plan_to_bytes_with_extension_codec(
            Arc::clone(&plan),
            &TsJoinPhysicalCodec,
        )
        .unwrap();
        let back = physical_plan_from_bytes_with_extension_codec(
            &bytes,
            &ctx.task_ctx(),
            &TsJoinPhysicalCodec,
        )
        .unwrap();
        let shown = |p: &Arc<dyn datafusion::physical_plan::ExecutionPlan>| {
            displayable(p.as_ref()).indent(true).to_string()
        };
        let operator = |p| {
            shown(p)
                .lines()
                .find(|l: &&str| l.contains("HorizonJoinExec"))
                .unwrap()
                .to_string()
        };
        assert_eq!(operator(&back), operator(&plan));
        let got = cells(&collect(back, ctx.task_ctx()).await.unwrap());
        assert_eq!(got, want);
    }
}

#[tokio::test]
async fn over_the_memory_limit_is_a_clear_error() {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(64 * 1024, 1.0)
        .build_arc()
        .unwrap();
    let state = datafusion::execution::SessionStateBuilder::new()
        .with_config(SessionConfig::new())
        .with_runtime_env(runtime)
        .with_default_features();
    use datafusion_tsjoin::TsJoinSessionStateBuilderExt;
    let ctx = SessionContext::new_with_state(state.with_tsjoin().build());
    ctx.tsjoin_sql(
        "CREATE TABLE big AS SELECT to_timestamp_micros(value) AS ts, value % 7 AS k, \
         value AS v FROM generate_series(1, 200000)",
    )
    .await
    .unwrap();
    let err = ctx
        .tsjoin_sql(
            "SELECT h.offset, count(b.v) FROM big a HORIZON JOIN big b ON (k) \
             LIST (0, 1s) AS h",
        )
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Resources exhausted"), "{err}");
}
