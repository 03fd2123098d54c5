//! Partitioned mode of the temporal joins (`tsjoin.temporal_join_distribution`):
//! EXPLAIN, plan shape, idempotent optimisation, NULL and mixed-type keys.

use crate::support::{context, explained_plan, physical_plan, query_rows};
use datafusion::arrow::array::{
    ArrayRef, DictionaryArray, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray, StringViewArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Schema, TimeUnit};
use datafusion::datasource::MemTable;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_optimizer::ensure_requirements::EnsureRequirements;
use datafusion::physical_plan::displayable;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

async fn set(ctx: &SessionContext, mode: &str) {
    ctx.tsjoin_sql(&format!("SET tsjoin.temporal_join_distribution = {mode}"))
        .await
        .unwrap();
}

async fn tables(ctx: &SessionContext) {
    ctx.tsjoin_sql(
        "CREATE TABLE t (ts TIMESTAMP, sym VARCHAR, price DOUBLE) AS VALUES
          ('2024-01-01T00:01:00', 'A', 10.0), ('2024-01-01T00:02:00', 'B', 20.0),
          ('2024-01-01T00:03:00', NULL, 30.0);
         CREATE TABLE p (ts TIMESTAMP, sym VARCHAR, bid DOUBLE) AS VALUES
          ('2024-01-01T00:00:00', 'A', 1.0), ('2024-01-01T00:01:30', 'B', 3.0),
          ('2024-01-01T00:02:30', NULL, 5.0)",
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn explain_shows_the_distribution() {
    let ctx = context(3);
    tables(&ctx).await;
    let wj = "SELECT t.sym, sum(p.bid) FROM t WINDOW JOIN p ON (sym) \
              RANGE BETWEEN 1 minute PRECEDING AND CURRENT ROW";
    let asof = "SELECT t.sym, p.bid FROM t ASOF JOIN p ON (sym)";
    let hz = "SELECT t.sym, h.offset, p.bid FROM t HORIZON JOIN p ON (sym) \
              LIST (0, 1m) AS h";
    set(&ctx, "partitioned").await;
    for sql in [wj, asof, hz] {
        let plan = explained_plan(&ctx, sql).await;
        println!("{plan}");
        assert!(plan.contains("distribution=partitioned"), "{sql}\n{plan}");
    }
    set(&ctx, "broadcast").await;
    for sql in [wj, asof, hz] {
        let plan = explained_plan(&ctx, sql).await;
        assert!(plan.contains("distribution=broadcast"), "{sql}\n{plan}");
    }
}

/// Forces partitioned mode on `ctx`, with a small batch size so that even
/// small single-partition inputs are hash-repartitioned to the session's
/// target partitions (EnforceDistribution skips inputs it deems tiny), and
/// scans kept in their partitions (see [`one_partition`]).
pub async fn force_partitioned(ctx: &SessionContext) {
    set(ctx, "partitioned").await;
    for set in [
        "datafusion.execution.batch_size = 4",
        "datafusion.optimizer.repartition_file_scans = false",
    ] {
        ctx.tsjoin_sql(&format!("SET {set}")).await.unwrap();
    }
}

/// Registers `batches` as table `name` in one partition (replacing it):
/// hash-repartitioning one partition keeps each key's rows in table order,
/// which breaks timestamp ties, so partitioned answers stay deterministic.
pub fn one_partition(
    ctx: &SessionContext,
    name: &str,
    parts: Vec<Vec<datafusion::arrow::array::RecordBatch>>,
) {
    let schema = parts.iter().flatten().next().map(|b| b.schema());
    let Some(schema) = schema else {
        return;
    };
    let one = vec![parts.into_iter().flatten().collect::<Vec<_>>()];
    ctx.deregister_table(name).unwrap();
    ctx.register_table(
        name,
        std::sync::Arc::new(
            datafusion::datasource::MemTable::try_new(schema, one).unwrap(),
        ),
    )
    .unwrap();
}

/// Asserts that `sql` runs `mode` in every temporal join of its plan.
pub async fn assert_mode(ctx: &SessionContext, sql: &str, mode: &str) {
    let plan = explained_plan(ctx, sql).await;
    assert!(
        plan.contains(&format!("distribution={mode}")),
        "{sql}\n{plan}"
    );
}

/// Key column types of the two sides of a join.
#[derive(Debug, Clone, Copy)]
enum KeyType {
    Int32,
    Int64,
    Utf8,
    Utf8View,
    Dictionary,
}

impl KeyType {
    fn array(self, keys: &[Option<i64>]) -> ArrayRef {
        let text = || -> Vec<Option<String>> {
            keys.iter().map(|k| k.map(|k| format!("k{k}"))).collect()
        };
        match self {
            Self::Int32 => Arc::new(Int32Array::from_iter(
                keys.iter().map(|k| k.map(|k| k as i32)),
            )),
            Self::Int64 => Arc::new(Int64Array::from(keys.to_vec())),
            Self::Utf8 => Arc::new(StringArray::from_iter(text())),
            Self::Utf8View => Arc::new(StringViewArray::from_iter(text())),
            Self::Dictionary => Arc::new(
                text()
                    .iter()
                    .map(|s| s.as_deref())
                    .collect::<DictionaryArray<Int32Type>>(),
            ),
        }
    }
}

/// A table (ts, k, v) of `n` rows in `parts` partitions: times 0..span
/// seconds (unique when `unique_ts`: no ties, so any arrival order gives
/// the same answer), keys 0..4 or NULL (one in five).
fn keyed_table(
    rng: &mut StdRng,
    n: usize,
    parts: usize,
    key: KeyType,
    unique_ts: bool,
) -> MemTable {
    let mut ts: Vec<i64> = if unique_ts {
        (0..n as i64)
            .map(|i| i * 1_000_000 + rng.random_range(0..1000))
            .collect()
    } else {
        (0..n)
            .map(|_| rng.random_range(0..n as i64 / 4 + 1) * 1_000_000)
            .collect()
    };
    if rng.random_bool(0.5) {
        use rand::seq::SliceRandom;
        ts.shuffle(rng);
    }
    let keys: Vec<Option<i64>> = (0..n)
        .map(|_| rng.random_bool(0.8).then(|| rng.random_range(0..4)))
        .collect();
    let v: Vec<f64> = (0..n).map(|_| rng.random_range(0..100) as f64).collect();
    let key_array = key.array(&keys);
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            false,
        ),
        Field::new("k", key_array.data_type().clone(), true),
        Field::new("v", DataType::Float64, false),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(TimestampMicrosecondArray::from(ts)),
            key_array,
            Arc::new(Float64Array::from(v)),
        ],
    )
    .unwrap();
    let mut partitions = vec![vec![]; parts];
    let chunk = n.div_ceil(parts).max(1);
    for (i, start) in (0..n).step_by(chunk).enumerate() {
        partitions[i].push(batch.slice(start, chunk.min(n - start)));
    }
    MemTable::try_new(schema, partitions).unwrap()
}

const WINDOW: &str = "SELECT l.ts, l.k, l.v, count(*), sum(r.v), max(r.v) FROM l \
     WINDOW JOIN r ON (k) RANGE BETWEEN 3 seconds PRECEDING AND 1 second FOLLOWING";
const ASOF: &str = "SELECT l.ts, l.k, l.v, r.v FROM l ASOF JOIN r ON (k)";
const HORIZON: &str = "SELECT l.ts, l.k, l.v, h.offset, r.v FROM l HORIZON JOIN r ON (k) \
     LIST (-2s, 0, 5s) AS h";

/// Rows of `sql`, sorted (the partitioned plan emits rows by partition).
async fn sorted_rows(ctx: &SessionContext, sql: &str) -> Vec<Vec<String>> {
    let mut rows = query_rows(ctx, sql).await;
    rows.sort();
    rows
}

/// NULL keys (which match each other) and keys of different types on the
/// two sides: the partitioned plan hashes both sides alike and gives the
/// broadcast plan's answer, at 1..4 partitions, with 1..3 input partitions
/// (ties in time only where the right side is one partition).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_and_mixed_type_keys_match_broadcast() {
    use KeyType::*;
    let pairs = [
        (Int64, Int64),
        (Int32, Int64),
        (Utf8, Utf8),
        (Dictionary, Utf8),
        (Utf8, Dictionary),
        (Utf8, Utf8View),
        (Dictionary, Dictionary),
    ];
    let mut checked = 0;
    for seed in 0..28u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let (lk, rk) = pairs[seed as usize % pairs.len()];
        let partitions = 1 + (seed as usize / pairs.len()) % 4;
        let rp = rng.random_range(1..=3);
        let unique = rp > 1;
        let ctx = context(partitions);
        let (nl, nr) = (rng.random_range(0..120), rng.random_range(0..200));
        let lp = rng.random_range(1..=3);
        let l = keyed_table(&mut rng, nl, lp, lk, unique);
        let r = keyed_table(&mut rng, nr, rp, rk, unique);
        ctx.register_table("l", Arc::new(l)).unwrap();
        ctx.register_table("r", Arc::new(r)).unwrap();
        for sql in [WINDOW, ASOF, HORIZON] {
            set(&ctx, "broadcast").await;
            let want = sorted_rows(&ctx, sql).await;
            force_partitioned(&ctx).await;
            assert_mode(&ctx, sql, "partitioned").await;
            let got = sorted_rows(&ctx, sql).await;
            assert_eq!(got, want, "seed {seed} {lk:?}/{rk:?} x{partitions}: {sql}");
            if partitions > 1 && nl > 4 && nr > 4 {
                let plan = explained_plan(&ctx, sql).await;
                assert!(
                    plan.contains("RepartitionExec: partitioning=Hash"),
                    "{plan}"
                );
            }
            ctx.tsjoin_sql("SET datafusion.execution.batch_size = 8192")
                .await
                .unwrap();
            checked += 1;
        }
    }
    assert_eq!(checked, 28 * 3);
}

/// A NULL key joins the right side's NULL-key rows (IS NOT DISTINCT FROM)
/// in partitioned mode: a left NULL key finds the right NULL key's value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_keys_join_each_other_when_partitioned() {
    let ctx = context(4);
    tables(&ctx).await;
    force_partitioned(&ctx).await;
    ctx.tsjoin_sql("SET datafusion.execution.batch_size = 1")
        .await
        .unwrap();
    let sql = "SELECT t.price, p.bid FROM t ASOF JOIN p ON (sym) ORDER BY t.price";
    assert_mode(&ctx, sql, "partitioned").await;
    assert!(explained_plan(&ctx, sql).await.contains("Hash(["));
    assert_eq!(
        query_rows(&ctx, sql).await,
        [["10", "1"], ["20", "3"], ["30", "5"]]
    );
    let sql = "SELECT t.price, count(*), sum(p.bid) FROM t WINDOW JOIN p ON (sym) \
               RANGE BETWEEN 1 minute PRECEDING AND CURRENT ROW EXCLUDE PREVAILING \
               ORDER BY t.price";
    assert_eq!(
        query_rows(&ctx, sql).await,
        [["10", "1", "1"], ["20", "1", "3"], ["30", "1", "5"]]
    );
}

/// Keyless joins stay broadcast even when partitioned is forced; `auto`
/// keeps the default (broadcast, see `DistributionSetting::choose`).
#[tokio::test]
async fn keyless_joins_stay_broadcast() {
    let ctx = context(3);
    tables(&ctx).await;
    force_partitioned(&ctx).await;
    assert_mode(
        &ctx,
        "SELECT t.price, p.bid FROM t ASOF JOIN p",
        "broadcast",
    )
    .await;
    assert_mode(
        &ctx,
        "SELECT t.price, sum(p.bid) FROM t WINDOW JOIN p \
         RANGE BETWEEN 1 minute PRECEDING AND CURRENT ROW",
        "broadcast",
    )
    .await;
    set(&ctx, "auto").await;
    assert_mode(
        &ctx,
        "SELECT t.price, p.bid FROM t ASOF JOIN p ON (sym)",
        "broadcast",
    )
    .await;
    let err = ctx
        .tsjoin_sql("SET tsjoin.temporal_join_distribution = sideways")
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("expected auto, broadcast or partitioned")
    );
}

/// A 3-partition session in forced partitioned mode with random keyed
/// tables `l` and `r`, each given as (rows, partitions, key type).
async fn partitioned_tables(
    seed: u64,
    l: (usize, usize, KeyType),
    r: (usize, usize, KeyType),
) -> SessionContext {
    let ctx = context(3);
    let mut rng = StdRng::seed_from_u64(seed);
    for (name, (rows, parts, key)) in [("l", l), ("r", r)] {
        let t = keyed_table(&mut rng, rows, parts, key, true);
        ctx.register_table(name, Arc::new(t)).unwrap();
    }
    force_partitioned(&ctx).await;
    ctx
}

/// Optimising a partitioned plan again (as a Ballista scheduler does)
/// changes nothing: the hash repartitions already satisfy the operators.
#[tokio::test]
async fn ensure_requirements_is_idempotent_on_partitioned_plans() {
    let ctx =
        partitioned_tables(5, (100, 2, KeyType::Dictionary), (100, 3, KeyType::Utf8))
            .await;
    let state = ctx.state();
    for sql in [WINDOW, ASOF, HORIZON] {
        let plan = physical_plan(&ctx, sql).await;
        let text = displayable(plan.as_ref()).indent(true).to_string();
        assert!(text.contains("distribution=partitioned"), "{text}");
        assert!(
            text.contains("Hash([CAST("),
            "dictionary key hashed as Utf8: {text}"
        );
        let again = EnsureRequirements::new()
            .optimize(Arc::clone(&plan), state.config_options())
            .unwrap();
        let again = EnsureRequirements::new()
            .optimize(again, state.config_options())
            .unwrap();
        assert_eq!(displayable(again.as_ref()).indent(true).to_string(), text);
    }
}

/// Ballista's adaptive planner replaces a shuffle stage that produced no
/// rows with an `EmptyExec`. A partitioned join over it plans as
/// broadcast, so optimising again adds no shuffle over the empty input
/// (which Ballista replaced again on every re-plan: the job never ended),
/// and it still answers: every left row with no match, or no rows.
#[tokio::test]
async fn a_known_empty_input_makes_the_join_broadcast() {
    use datafusion::common::tree_node::TreeNode;
    use datafusion::physical_plan::empty::EmptyExec;
    use datafusion::physical_plan::repartition::RepartitionExec;
    use datafusion::physical_plan::{
        ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions,
    };
    let ctx =
        partitioned_tables(11, (50, 2, KeyType::Utf8), (50, 2, KeyType::Utf8)).await;
    let state = ctx.state();
    for sql in [WINDOW, ASOF, HORIZON] {
        let plan = physical_plan(&ctx, sql).await;
        assert!(
            displayable(plan.as_ref())
                .indent(true)
                .to_string()
                .contains("distribution=partitioned")
        );
        for side in [0, 1] {
            // The join's input `side` (its hash repartition) becomes empty.
            let emptied = plan
                .clone()
                .transform_down(|node| {
                    use datafusion::common::tree_node::{Transformed, TreeNodeRecursion};
                    let children = node.children();
                    let is_join =
                        node.name().ends_with("JoinExec") && children.len() >= 2;
                    if !is_join
                        || children[side].downcast_ref::<RepartitionExec>().is_none()
                    {
                        return Ok(Transformed::no(node));
                    }
                    let mut inputs: Vec<Arc<dyn ExecutionPlan>> =
                        children.into_iter().cloned().collect();
                    let n = inputs[side]
                        .properties()
                        .output_partitioning()
                        .partition_count();
                    inputs[side] = Arc::new(
                        EmptyExec::new(inputs[side].schema()).with_partitions(n),
                    );
                    let options =
                        ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
                    Ok(Transformed::new(
                        node.replace_children(inputs, options)?,
                        true,
                        TreeNodeRecursion::Jump,
                    ))
                })
                .map(|t| t.data)
                .unwrap();
            let text = displayable(emptied.as_ref()).indent(true).to_string();
            assert!(text.contains("distribution=broadcast"), "{sql}\n{text}");
            let again = EnsureRequirements::new()
                .optimize(Arc::clone(&emptied), state.config_options())
                .unwrap();
            // EnsureRequirements may drop the other side's repartition,
            // which broadcast does not need, but adds none.
            let again_text = displayable(again.as_ref()).indent(true).to_string();
            assert!(
                again_text.contains("distribution=broadcast"),
                "{again_text}"
            );
            assert!(
                again_text.matches("RepartitionExec").count()
                    <= text.matches("RepartitionExec").count(),
                "no new shuffle over the empty input: {sql}\n{text}\n{again_text}"
            );
            let rows: usize = datafusion::physical_plan::collect(again, ctx.task_ctx())
                .await
                .unwrap()
                .iter()
                .map(|b| b.num_rows())
                .sum();
            if side == 0 {
                assert_eq!(rows, 0, "{sql}: an empty left side answers no rows");
            }
        }
    }
}

/// The physical codecs carry the mode: a partitioned plan decodes
/// partitioned (and runs to the same answer), a broadcast one broadcast.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codecs_carry_the_distribution() {
    let ctx = context(3);
    let mut rng = StdRng::seed_from_u64(9);
    let dir = tempfile::tempdir().unwrap();
    for (name, key) in [("l", KeyType::Utf8), ("r", KeyType::Utf8)] {
        let t = keyed_table(&mut rng, 60, 1, key, true);
        ctx.register_table(format!("{name}m"), Arc::new(t)).unwrap();
        let path = dir.path().join(format!("{name}.parquet"));
        let path = path.display();
        ctx.tsjoin_sql(&format!(
            "COPY {name}m TO '{path}'; \
             CREATE EXTERNAL TABLE {name} STORED AS PARQUET LOCATION '{path}'"
        ))
        .await
        .unwrap();
    }
    for mode in ["partitioned", "broadcast"] {
        if mode == "partitioned" {
            force_partitioned(&ctx).await;
        } else {
            set(&ctx, mode).await;
        }
        for sql in [WINDOW, ASOF, HORIZON] {
            let plan = physical_plan(&ctx, sql).await;
            let back = crate::support::physical_round_trip(&plan, &ctx);
            let text = displayable(back.as_ref()).indent(true).to_string();
            assert!(text.contains(&format!("distribution={mode}")), "{text}");
            assert_eq!(text, displayable(plan.as_ref()).indent(true).to_string());
            let mut got = crate::support::cells(
                &datafusion::physical_plan::collect(back, ctx.task_ctx())
                    .await
                    .unwrap(),
            );
            got.sort();
            assert_eq!(got, sorted_rows(&ctx, sql).await, "{mode}: {sql}");
        }
    }
}
