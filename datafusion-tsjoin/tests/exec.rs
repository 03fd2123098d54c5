//! Exec-level tests: tsjoin's operators, found by name in physical plans
//! made from SQL, fed directly from in-memory sources cut into batches of 1,
//! 2, 7 and 8192 rows and compared with references; run under a memory pool
//! too small for them (a resources-exhausted error, no panic) and one large
//! enough (the same answer); a plan executed twice; a WINDOW JOIN under a
//! recursive CTE.

use crate::differential::{Row, Shape, batch, random_rows, reference, schema};
use crate::support::{cells, context, physical_plan};
use datafusion::arrow::array::{
    Float64Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
    UInt32Array,
};
use datafusion::arrow::compute::take_record_batch;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::MemTable;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::memory_pool::GreedyMemoryPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::execution_plan::reset_plan_states;
use datafusion::physical_plan::{
    ExecutionPlan, ExecutionPlanProperties, collect, displayable,
    replace_children_if_necessary,
};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::{TsJoinContextExt, TsJoinSessionStateBuilderExt};
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::sync::Arc;

const BATCH_SIZES: [usize; 4] = [1, 2, 7, 8192];

/// How a table is cut into the batches fed to an operator.
#[derive(Debug, Clone, Copy)]
struct Cut {
    /// Rows per batch (the last of a partition may have fewer).
    size: usize,
    /// Batches are slices of one batch's arrays (sharing their buffers)
    /// rather than arrays of their own, as a source's batches usually are.
    sliced: bool,
}

impl Cut {
    fn copied(size: usize) -> Self {
        Cut {
            size,
            sliced: false,
        }
    }
}

/// Every batch size, with batches of their own arrays and slices of one.
fn cuts() -> impl Iterator<Item = Cut> {
    [false, true]
        .into_iter()
        .flat_map(|sliced| BATCH_SIZES.map(|size| Cut { size, sliced }))
}

/// The columns of `full` that `target` names, cut into `parts` contiguous
/// partitions of batches, as a source with `target`'s schema.
fn feed(
    full: &RecordBatch,
    target: &SchemaRef,
    parts: usize,
    cut: Cut,
) -> Arc<dyn ExecutionPlan> {
    let columns = target
        .fields()
        .iter()
        .map(|f| {
            let i = full.schema().index_of(f.name()).unwrap_or_else(|_| {
                panic!("input column {} is no table column", f.name())
            });
            Arc::clone(full.column(i))
        })
        .collect();
    let projected = RecordBatch::try_new(Arc::clone(target), columns).unwrap();
    let n = projected.num_rows();
    let partitions: Vec<Vec<RecordBatch>> = (0..parts)
        .map(|p| {
            let (lo, hi) = (n * p / parts, n * (p + 1) / parts);
            (lo..hi)
                .step_by(cut.size)
                .map(|s| {
                    let len = cut.size.min(hi - s);
                    if cut.sliced {
                        projected.slice(s, len)
                    } else {
                        let rows =
                            UInt32Array::from_iter_values(s as u32..(s + len) as u32);
                        take_record_batch(&projected, &rows).unwrap()
                    }
                })
                .collect()
        })
        .collect();
    MemorySourceConfig::try_new_exec(&partitions, Arc::clone(target), None).unwrap()
}

/// `plan` with each input of its one node named `name` replaced by
/// [`feed`] over the table in `tables` of the same input index (as many
/// partitions as the input had), and that node.
fn fed(
    plan: Arc<dyn ExecutionPlan>,
    name: &str,
    tables: &[&RecordBatch],
    cut: Cut,
) -> (Arc<dyn ExecutionPlan>, Arc<dyn ExecutionPlan>) {
    let mut found = vec![];
    let plan = plan
        .transform_up(|node| {
            if node.name() != name {
                return Ok(Transformed::no(node));
            }
            let children = node
                .children()
                .into_iter()
                .zip(tables)
                .map(|(c, t)| {
                    feed(
                        t,
                        &c.schema(),
                        c.output_partitioning().partition_count(),
                        cut,
                    )
                })
                .collect();
            let node = replace_children_if_necessary(node, children)?;
            found.push(Arc::clone(&node));
            Ok(Transformed::yes(node))
        })
        .unwrap()
        .data;
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert_eq!(found.len(), 1, "one {name} expected in\n{text}");
    (plan, found.pop().unwrap())
}

/// A tsjoin session whose memory pool holds `bytes`.
fn pooled(bytes: usize, partitions: usize) -> SessionContext {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(GreedyMemoryPool::new(bytes)))
        .build_arc()
        .unwrap();
    let state = SessionStateBuilder::new()
        .with_config(SessionConfig::new().with_target_partitions(partitions))
        .with_runtime_env(runtime)
        .with_default_features()
        .with_tsjoin()
        .build();
    SessionContext::new_with_state(state)
}

async fn set(ctx: &SessionContext, settings: &[String]) {
    for s in settings {
        ctx.tsjoin_sql(&format!("SET {s}")).await.unwrap();
    }
}

/// Sorted rows of `plan` run alone (a memory error can only be its own).
async fn run_alone(
    plan: &Arc<dyn ExecutionPlan>,
    ctx: &SessionContext,
) -> Result<Vec<Vec<String>>, DataFusionError> {
    let mut rows = cells(&collect(Arc::clone(plan), ctx.task_ctx()).await?);
    rows.sort();
    Ok(rows)
}

/// Asserts that `err` is a resources-exhausted error naming `operator`.
fn assert_exhausted(err: &DataFusionError, operator: &str, label: &str) {
    assert!(
        matches!(err.find_root(), DataFusionError::ResourcesExhausted(_))
            && err.to_string().contains(operator),
        "{label}: {err}"
    );
}

fn window_join_data() -> (Vec<Row>, Vec<Row>) {
    let mut rng = StdRng::seed_from_u64(20);
    let left = random_rows(&mut rng, 150, 3000, 4);
    let mut right = random_rows(&mut rng, 2500, 3000, 4);
    // Mostly time-ordered, as tables usually are (the build's presorted path).
    right[..2000].sort_by_key(|r| r.ts);
    (left, right)
}

/// Registers `l` and `r`, one batch each.
fn register(ctx: &SessionContext, left: &[Row], right: &[Row]) {
    for (name, rows) in [("l", left), ("r", right)] {
        let table = MemTable::try_new(schema(), vec![vec![batch(rows)]]).unwrap();
        ctx.register_table(name, Arc::new(table)).unwrap();
    }
}

fn window_join_shapes() -> Vec<Shape> {
    let shape = |keyed, pair_filter, lo, hi, include, dynamic_lo| Shape {
        keyed,
        pair_filter,
        lo,
        hi,
        include,
        dynamic_lo,
    };
    vec![
        shape(true, false, -40, 15, true, false),
        shape(false, false, -25, -5, false, false),
        shape(true, true, -30, 30, true, false),
        shape(true, false, 0, 20, false, true),
    ]
}

/// `WindowJoinExec` fed batches of every size, on the fast and the general
/// path, over one and two left partitions, gives the reference answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_join_over_batch_sizes() {
    let (left, right) = window_join_data();
    let (lb, rb) = (batch(&left), batch(&right));
    let mut runs = 0;
    for shape in window_join_shapes() {
        let sql = shape.sql();
        let want = reference(&left, &right, &shape);
        for partitions in [1, 2] {
            let ctx = context(partitions);
            register(&ctx, &left, &right);
            for fast in [true, false] {
                set(&ctx, &[format!("tsjoin.window_join_fast_path = {fast}")]).await;
                let plan = physical_plan(&ctx, &sql).await;
                for cut in cuts() {
                    let (plan, _) =
                        fed(Arc::clone(&plan), "WindowJoinExec", &[&lb, &rb], cut);
                    let got = cells(&collect(plan, ctx.task_ctx()).await.unwrap());
                    assert!(
                        got == want,
                        "{cut:?}, fast {fast}, {partitions} partitions: {sql}\n\
                         got {got:?}\nwant {want:?}"
                    );
                    runs += 1;
                }
            }
        }
    }
    assert_eq!(runs, 4 * 2 * 2 * 2 * BATCH_SIZES.len());
}

/// A table for the aggregate tests: integer key `k` (50 values), string key
/// `s` (7 values), float `v` (multiples of 1/4: exact sums in any order),
/// integer `i`, NULLs in every column.
fn groupby_table(n: i64) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("v", DataType::Float64, true),
        Field::new("i", DataType::Int64, true),
    ]));
    let k = Int64Array::from_iter((0..n).map(|x| (x % 31 != 0).then_some(x * 7 % 50)));
    let s = StringArray::from_iter(
        (0..n).map(|x| (x % 29 != 0).then(|| format!("s{}", x * 3 % 7))),
    );
    let v = Float64Array::from_iter(
        (0..n).map(|x| (x % 13 != 0).then_some((x % 400 - 200) as f64 / 4.0)),
    );
    let i =
        Int64Array::from_iter((0..n).map(|x| (x % 11 != 0).then_some(x % 1000 - 500)));
    RecordBatch::try_new(
        schema,
        vec![Arc::new(k), Arc::new(s), Arc::new(v), Arc::new(i)],
    )
    .unwrap()
}

/// Integer, string and composite keys (string keys with every key list
/// inline).
const GROUPBY_QUERIES: [&str; 3] = [
    "SELECT k, count(*), count(v), sum(v), min(v), max(i), avg(i) FROM t GROUP BY k ORDER BY k",
    "SELECT s, count(*), sum(i), min(i), avg(v) FROM t GROUP BY s ORDER BY s",
    "SELECT k, s, count(*), sum(v), max(i) FROM t GROUP BY k, s ORDER BY k, s",
];

/// `InlineAggregateExec` fed batches of every size over one and three
/// input partitions gives DataFusion's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_aggregate_over_batch_sizes() {
    let table = groupby_table(3000);
    let mut runs = 0;
    for sql in GROUPBY_QUERIES {
        for partitions in [1, 3] {
            let ctx = context(partitions);
            ctx.register_batch("t", table.clone()).unwrap();
            set(
                &ctx,
                &[
                    "tsjoin.inline_aggregate = false".into(),
                    "tsjoin.inline_aggregate_all_keys = true".into(),
                ],
            )
            .await;
            let want =
                cells(&ctx.tsjoin_sql(sql).await.unwrap().collect().await.unwrap());
            assert!(want.len() > 5, "{sql}");
            set(&ctx, &["tsjoin.inline_aggregate = true".into()]).await;
            let plan = physical_plan(&ctx, sql).await;
            for cut in cuts() {
                let (plan, _) =
                    fed(Arc::clone(&plan), "InlineAggregateExec", &[&table], cut);
                let got = cells(&collect(plan, ctx.task_ctx()).await.unwrap());
                assert!(
                    got == want,
                    "{cut:?}, {partitions} partitions: {sql}\ngot {got:?}\nwant {want:?}"
                );
                runs += 1;
            }
        }
    }
    assert_eq!(runs, GROUPBY_QUERIES.len() * 2 * 2 * BATCH_SIZES.len());
}

/// Under a memory pool too small for its right index a fed `WindowJoinExec`
/// fails with a resources-exhausted error; under a large one it gives the
/// answer it gives without a limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_join_under_a_memory_limit() {
    let (left, right) = window_join_data();
    let (lb, rb) = (batch(&left), batch(&right));
    let sql = window_join_shapes()[0].sql();
    for fast in [true, false] {
        let mut want = None;
        for (bytes, fits) in [(usize::MAX, true), (16 * 1024, false), (64 << 20, true)] {
            let ctx = if bytes == usize::MAX {
                context(2)
            } else {
                pooled(bytes, 2)
            };
            register(&ctx, &left, &right);
            set(&ctx, &[format!("tsjoin.window_join_fast_path = {fast}")]).await;
            let plan = physical_plan(&ctx, &sql).await;
            for size in BATCH_SIZES {
                let (_, join) = fed(
                    Arc::clone(&plan),
                    "WindowJoinExec",
                    &[&lb, &rb],
                    Cut::copied(size),
                );
                let label = format!("pool {bytes}, fast {fast}, batch size {size}");
                match run_alone(&join, &ctx).await {
                    Ok(got) => {
                        assert!(fits, "{label}: ran within the pool");
                        assert_eq!(got.len(), left.len(), "{label}");
                        let want = want.get_or_insert_with(|| got.clone());
                        assert!(&got == want, "{label}: answers differ");
                    }
                    Err(e) => {
                        assert!(!fits, "{label}: {e}");
                        assert_exhausted(&e, "WindowJoinExec", &label);
                    }
                }
            }
        }
    }
}

/// Under a memory pool too small for its tables a fed `InlineAggregateExec`
/// fails with a resources-exhausted error; under a large one it gives the
/// answer it gives without a limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_aggregate_under_a_memory_limit() {
    let table = groupby_table(20_000);
    for sql in GROUPBY_QUERIES {
        let mut want = None;
        for (bytes, fits) in [(usize::MAX, true), (1024, false), (64 << 20, true)] {
            let ctx = if bytes == usize::MAX {
                context(2)
            } else {
                pooled(bytes, 2)
            };
            ctx.register_batch("t", table.clone()).unwrap();
            set(&ctx, &["tsjoin.inline_aggregate_all_keys = true".into()]).await;
            let plan = physical_plan(&ctx, sql).await;
            for size in BATCH_SIZES {
                let (_, agg) = fed(
                    Arc::clone(&plan),
                    "InlineAggregateExec",
                    &[&table],
                    Cut::copied(size),
                );
                let label = format!("pool {bytes}, batch size {size}: {sql}");
                match run_alone(&agg, &ctx).await {
                    Ok(got) => {
                        assert!(fits, "{label}: ran within the pool");
                        assert!(got.len() > 5, "{label}");
                        let want = want.get_or_insert_with(|| got.clone());
                        assert!(&got == want, "{label}: answers differ");
                    }
                    Err(e) => {
                        assert!(!fits, "{label}: {e}");
                        assert_exhausted(&e, "InlineAggregateExec", &label);
                    }
                }
            }
        }
    }
}

/// One physical plan with a WINDOW JOIN (and an inline aggregate over its
/// output) executed twice gives the reference answer twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_join_plan_executed_twice() {
    let (left, right) = window_join_data();
    let shape = &window_join_shapes()[0];
    let want = reference(&left, &right, shape);
    let ctx = context(2);
    register(&ctx, &left, &right);
    let plan = physical_plan(&ctx, &shape.sql()).await;
    for run in 0..2 {
        let got = cells(&collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap());
        assert!(got == want, "run {run}\ngot {got:?}\nwant {want:?}");
    }
    // Grouped over the join's output: the counts per key.
    let sql = "SELECT l.k, count(*) AS n FROM l WINDOW JOIN r ON r.k = l.k \
        RANGE BETWEEN 40 milliseconds PRECEDING AND 15 milliseconds FOLLOWING";
    let sql = format!("SELECT k, sum(n), count(*) FROM ({sql}) GROUP BY k ORDER BY k");
    let plan = physical_plan(&ctx, &sql).await;
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert!(
        text.contains("WindowJoinExec") && text.contains("InlineAggregateExec"),
        "{text}"
    );
    let mut per_key = std::collections::BTreeMap::<Option<i64>, (i64, i64)>::new();
    for (l, row) in left.iter().zip(&want) {
        let e = per_key.entry(l.k).or_default();
        e.0 += row[1].parse::<i64>().unwrap();
        e.1 += 1;
    }
    // NULL keys sort last.
    let mut want: Vec<Vec<String>> = per_key
        .iter()
        .map(|(k, (n, c))| {
            let k = k.map_or("NULL".into(), |k| k.to_string());
            vec![k, n.to_string(), c.to_string()]
        })
        .collect();
    want.rotate_left(usize::from(per_key.contains_key(&None)));
    // DataFusion's RepartitionExec runs once per instance (a second
    // execution panics: "partition not used yet"); DataFusion resets a plan
    // before running it again (as recursive queries do).
    let repartitions = text.contains("RepartitionExec");
    for run in 0..2 {
        let plan = if run > 0 && repartitions {
            reset_plan_states(Arc::clone(&plan)).unwrap()
        } else {
            Arc::clone(&plan)
        };
        let got = cells(&collect(plan, ctx.task_ctx()).await.unwrap());
        assert!(got == want, "run {run}\ngot {got:?}\nwant {want:?}\n{text}");
    }
}

/// A WINDOW JOIN in the recursive term of a recursive CTE: each step joins
/// the rows the previous step made, one second later, against `p`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_join_under_a_recursive_cte() {
    let ctx = context(2);
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
        Field::new("v", DataType::Int64, false),
    ]));
    // p: one row a second, v = 1, 2, 4, 8, ... (every window sum is unique).
    let p = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(TimestampMillisecondArray::from_iter_values(
                (0..8).map(|s| s * 1000),
            )),
            Arc::new(Int64Array::from_iter_values((0..8).map(|s| 1 << s))),
        ],
    )
    .unwrap();
    ctx.register_batch("p", p).unwrap();
    let sql = "WITH RECURSIVE r AS ( \
          SELECT 1 AS n, CAST(to_timestamp_millis(1000) AS TIMESTAMP(3)) AS ts, CAST(0 AS BIGINT) AS total \
          UNION ALL \
          SELECT q.n + 1, q.ts + INTERVAL '1 second', q.s FROM ( \
            SELECT r.n, r.ts, sum(p.v) AS s FROM r WINDOW JOIN p \
            RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW EXCLUDE PREVAILING \
          ) q WHERE q.n < 4 \
        ) SELECT n, ts, total FROM r ORDER BY n";
    let got = recursive(&ctx, sql).await;
    // Step n joins the row at second n: p at seconds n-1 and n, 2^(n-1) + 2^n.
    let want: Vec<Vec<String>> = [
        ["1", "1970-01-01T00:00:01", "0"],
        ["2", "1970-01-01T00:00:02", "3"],
        ["3", "1970-01-01T00:00:03", "6"],
        ["4", "1970-01-01T00:00:04", "12"],
    ]
    .iter()
    .map(|r| r.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(got, want, "{sql}");
}

/// The work table of a recursive CTE on the right of a WINDOW JOIN (the
/// right index must be rebuilt every step: DataFusion resets the recursive
/// term's plan before each step).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_join_right_of_a_recursive_cte() {
    let ctx = context(2);
    let p = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                false,
            ),
            Field::new("v", DataType::Int64, false),
        ])),
        vec![
            Arc::new(TimestampMillisecondArray::from_iter_values(
                (0..8).map(|s| s * 1000),
            )),
            Arc::new(Int64Array::from_iter_values((0..8).map(|s| 1 << s))),
        ],
    )
    .unwrap();
    ctx.register_batch("p", p).unwrap();
    // Step n+1 at second s sums step n's values at seconds s-1 and s.
    let sql = "WITH RECURSIVE r AS ( \
          SELECT CAST(1 AS BIGINT) AS n, ts, v FROM p \
          UNION ALL \
          SELECT q.n + 1, q.ts, q.s FROM ( \
            SELECT p.ts, max(r.n) AS n, sum(r.v) AS s FROM p WINDOW JOIN r \
            RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW EXCLUDE PREVAILING \
          ) q WHERE q.n < 3 \
        ) SELECT n, sum(v), count(*) FROM r GROUP BY n ORDER BY n";
    let got = recursive(&ctx, sql).await;
    let mut level: Vec<i64> = (0..8).map(|s| 1 << s).collect();
    let mut want = vec![];
    for n in 1..=3 {
        want.push(vec![
            n.to_string(),
            level.iter().sum::<i64>().to_string(),
            "8".to_string(),
        ]);
        level = (0..8)
            .map(|s| level[s] + if s > 0 { level[s - 1] } else { 0 })
            .collect();
    }
    // By hand: 255; 1 + 3 * 127; 1 + 4 + 9 * 63.
    assert_eq!(want[1][1], "382");
    assert_eq!(want[2][1], "572");
    assert_eq!(got, want, "{sql}");
}

/// Batches that are slices of one table share its buffers: the right index
/// must not count those buffers once per batch. 2,500 rows of five 8-byte
/// columns (100 KB) cut into 1-row slices fit in 16 MB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_join_counts_sliced_input_once() {
    let (left, right) = window_join_data();
    let (lb, rb) = (batch(&left), batch(&right));
    let ctx = pooled(16 << 20, 2);
    register(&ctx, &left, &right);
    let plan = ctx
        .tsjoin_sql(&window_join_shapes()[0].sql())
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    for size in [1, 7] {
        let cut = Cut { size, sliced: true };
        let (_, join) = fed(Arc::clone(&plan), "WindowJoinExec", &[&lb, &rb], cut);
        let got = run_alone(&join, &ctx).await;
        assert!(got.is_ok(), "{cut:?}: {}", got.unwrap_err());
    }
}

/// Rows of `sql`, a recursive query with a WINDOW JOIN.
async fn recursive(ctx: &SessionContext, sql: &str) -> Vec<Vec<String>> {
    let df = ctx.tsjoin_sql(sql).await.unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert!(
        text.contains("RecursiveQueryExec") && text.contains("WindowJoinExec"),
        "{text}"
    );
    cells(&collect(plan, ctx.task_ctx()).await.unwrap())
}
