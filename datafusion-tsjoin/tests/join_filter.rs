//! Lookahead join filters (`LipFilterExec`): the same answers with and
//! without them over random star schemas, exact filters that keep exactly
//! the matching rows, EXPLAIN, memory limits and the codec.

use crate::support::{case_count, cells, contains_operator, limited_context_with};
use datafusion::arrow::array::{
    ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;

/// Writes `batch` as Parquet files `dir/part-*.parquet` of `files` parts
/// with row groups of `group` rows.
pub(crate) fn write_table(dir: &Path, batch: &RecordBatch, files: usize, group: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let rows = batch.num_rows();
    let per = rows.div_ceil(files.max(1)).max(1);
    let mut start = 0;
    let mut part = 0;
    loop {
        let len = per.min(rows - start);
        let path = dir.join(format!("part-{part}.parquet"));
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(group.max(1)))
            .build();
        let mut w = ArrowWriter::try_new(
            std::fs::File::create(path).unwrap(),
            batch.schema(),
            Some(props),
        )
        .unwrap();
        w.write(&batch.slice(start, len)).unwrap();
        w.close().unwrap();
        start += len;
        part += 1;
        if start >= rows {
            break;
        }
    }
}

/// How a random dimension's keys look.
#[derive(Debug, Clone, Copy)]
enum Keys {
    /// 1..=n (bits).
    Dense,
    /// Spread over a billion values (DataFusion's predicate).
    Sparse,
    /// Strings (DataFusion's predicate).
    Text,
    /// 64-bit keys in a dense range far from zero (bits).
    WideDense,
}

struct Dim {
    keys: Keys,
    /// The key values the dimension holds (with duplicates, maybe none).
    values: Vec<Option<i64>>,
}

fn key_array(keys: Keys, values: &[Option<i64>]) -> ArrayRef {
    match keys {
        Keys::Dense | Keys::Sparse => Arc::new(Int32Array::from(
            values
                .iter()
                .map(|v| v.map(|v| v as i32))
                .collect::<Vec<_>>(),
        )),
        Keys::WideDense => Arc::new(Int64Array::from(values.to_vec())),
        Keys::Text => Arc::new(StringArray::from(
            values
                .iter()
                .map(|v| v.map(|v| format!("k{v}")))
                .collect::<Vec<_>>(),
        )),
    }
}

fn key_type(keys: Keys) -> DataType {
    match keys {
        Keys::Dense | Keys::Sparse => DataType::Int32,
        Keys::WideDense => DataType::Int64,
        Keys::Text => DataType::Utf8,
    }
}

fn random_dim(rng: &mut StdRng) -> Dim {
    let keys = match rng.random_range(0..4) {
        0 => Keys::Sparse,
        1 => Keys::Text,
        2 => Keys::WideDense,
        _ => Keys::Dense,
    };
    // Empty dimensions now and then.
    let n = if rng.random_bool(0.1) {
        0
    } else {
        rng.random_range(1..300)
    };
    let base = match keys {
        Keys::WideDense => 5_000_000_000,
        _ => 1,
    };
    let mut values: Vec<Option<i64>> = (0..n)
        .map(|i| match keys {
            Keys::Sparse => Some(rng.random_range(0..1_000_000_000)),
            _ => Some(base + i),
        })
        .collect();
    // Duplicate keys (no primary key) and NULL keys.
    for _ in 0..rng.random_range(0..3) {
        if let Some(&v) = values.first() {
            values.push(v);
        }
    }
    if rng.random_bool(0.3) {
        values.push(None);
    }
    Dim { keys, values }
}

/// A random star: fact `f(k0.., m)`, dimensions `d0..` with `(k, a)`;
/// returns the query over it.
fn random_star(rng: &mut StdRng, dir: &Path) -> String {
    let dims: Vec<Dim> = (0..rng.random_range(1..=4))
        .map(|_| random_dim(rng))
        .collect();
    let fact_rows = rng.random_range(0..4000);
    let mut fact_fields = vec![];
    let mut fact_cols: Vec<ArrayRef> = vec![];
    for (i, d) in dims.iter().enumerate() {
        let dim_rows = d.values.len();
        let attr =
            Int32Array::from_iter_values((0..dim_rows).map(|_| rng.random_range(0..5)));
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", key_type(d.keys), true),
            Field::new("a", DataType::Int32, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![key_array(d.keys, &d.values), Arc::new(attr)],
        )
        .unwrap();
        write_table(
            &dir.join(format!("d{i}")),
            &batch,
            1,
            1 + rng.random_range(0..200),
        );
        // Fact keys: mostly the dimension's (skewed to a few), some misses,
        // some NULLs.
        let present: Vec<i64> = d.values.iter().flatten().copied().collect();
        let fk: Vec<Option<i64>> = (0..fact_rows)
            .map(|_| match rng.random_range(0..10) {
                0 => None,
                1 => Some(rng.random_range(0..2_000_000_000)),
                2 | 3 if !present.is_empty() => Some(present[0]),
                _ if !present.is_empty() => {
                    Some(present[rng.random_range(0..present.len())])
                }
                _ => Some(rng.random_range(0..100)),
            })
            .map(|v| match d.keys {
                Keys::Dense | Keys::Sparse => v.map(|v| v % (i32::MAX as i64)),
                _ => v,
            })
            .collect();
        fact_fields.push(Field::new(format!("k{i}"), key_type(d.keys), true));
        fact_cols.push(key_array(d.keys, &fk));
    }
    let m = Float64Array::from(
        (0..fact_rows)
            .map(|i| match i % 17 {
                0 => None,
                1 => Some(f64::NAN),
                _ => Some(rng.random_range(-100.0..100.0)),
            })
            .collect::<Vec<_>>(),
    );
    fact_fields.push(Field::new("m", DataType::Float64, true));
    fact_cols.push(Arc::new(m));
    let fact =
        RecordBatch::try_new(Arc::new(Schema::new(fact_fields)), fact_cols).unwrap();
    let files = rng.random_range(1..4);
    write_table(&dir.join("f"), &fact, files, 1 + rng.random_range(0..1500));

    // FROM order: the fact anywhere among the dimensions.
    let mut tables: Vec<String> = (0..dims.len()).map(|i| format!("d{i}")).collect();
    let at = rng.random_range(0..=tables.len());
    tables.insert(at, "f".into());
    let on: Vec<String> = (0..dims.len())
        .map(|i| format!("f.k{i} = d{i}.k"))
        .collect();
    let mut wheres = Vec::new();
    for i in 0..dims.len() {
        if rng.random_bool(0.7) {
            wheres.push(match rng.random_range(0..3) {
                0 => format!("d{i}.a = {}", rng.random_range(0..5)),
                1 => format!("d{i}.a < {}", rng.random_range(1..5)),
                _ => format!("d{i}.a IN (1, 3)"),
            });
        }
    }
    let predicate = on
        .into_iter()
        .chain(wheres)
        .collect::<Vec<_>>()
        .join(" AND ");
    format!(
        "SELECT d0.a, count(*), sum(f.m), count(f.m) FROM {} WHERE {predicate} \
         GROUP BY d0.a ORDER BY d0.a",
        tables.join(", ")
    )
}

/// Runs each `;`-separated statement of `sql` to completion.
async fn exec(ctx: &SessionContext, sql: &str) {
    for statement in sql.split(';').filter(|s| !s.trim().is_empty()) {
        ctx.tsjoin_sql(statement)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
    }
}

/// A fact `f(k)` of 100 rows and a dimension `d1(k, a)` of 10.
const SMALL_STAR: [(&str, &str); 2] = [
    ("f", "SELECT value AS k FROM generate_series(1, 100)"),
    (
        "d1",
        "SELECT value AS k, value % 3 AS a FROM generate_series(1, 10)",
    ),
];
/// Four fact rows match: k = 1, 4, 7, 10.
const SMALL_STAR_QUERY: &str =
    "SELECT count(*) FROM f JOIN d1 ON f.k = d1.k WHERE d1.a = 1";

/// Writes each `(name, query)` of `tables` as Parquet under `dir/name/`
/// and registers them all in `ctx`.
pub(crate) async fn tables(ctx: &SessionContext, dir: &Path, tables: &[(&str, &str)]) {
    for (name, query) in tables {
        let path = dir.join(name).join("a.parquet");
        exec(ctx, &format!("COPY ({query}) TO '{}'", path.display())).await;
    }
    register_star(ctx, dir).await;
}

pub(crate) async fn register_star(ctx: &SessionContext, dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        crate::support::register_dir(ctx, &name, &entry.path()).await;
    }
}

/// Runs `sql` over the tables under `dir` with and without join filters,
/// in sessions of 1–4 partitions, a batch size and collect-left or
/// partitioned joins drawn from `rng`; asserts that the answers agree and
/// returns both plans, run (with filters, without).
pub(crate) async fn with_and_without(
    rng: &mut StdRng,
    dir: &Path,
    sql: &str,
    case: u64,
) -> (Arc<dyn ExecutionPlan>, Arc<dyn ExecutionPlan>) {
    let partitions = rng.random_range(1..=4);
    let batch = rng.random_range(1..=2000);
    let with = session(partitions, batch, true);
    let without = session(partitions, batch, false);
    let partitioned = rng.random_bool(0.5);
    if partitioned {
        partitioned_joins(&with);
        partitioned_joins(&without);
    }
    register_star(&with, dir).await;
    register_star(&without, dir).await;
    let (plan_without, want) = executed(&without, sql).await;
    let (plan_with, got) = executed(&with, sql).await;
    assert_eq!(
        cells(&got),
        cells(&want),
        "case {case} ({partitions} partitions, partitioned joins {partitioned}, \
         batch {batch}): {sql}"
    );
    (plan_with, plan_without)
}

/// Rows a `LipFilterExec`'s filters checked, over all filters.
pub(crate) fn rows_in(lip: &Arc<dyn ExecutionPlan>) -> usize {
    lip.metrics().map_or(0, |m| {
        m.iter()
            .filter(|x| x.value().name().ends_with(".rows_in"))
            .map(|x| x.value().as_usize())
            .sum()
    })
}

/// The metrics of the plan's `LipFilterExec`s, as text.
fn lip_metrics(plan: &Arc<dyn ExecutionPlan>) -> String {
    let own = match plan.metrics() {
        Some(m) if plan.name() == "LipFilterExec" => m.to_string(),
        _ => String::new(),
    };
    plan.children()
        .into_iter()
        .fold(own, |text, c| text + &lip_metrics(c))
}

/// Rows the plan's join filters checked.
fn filtered_rows(plan: &Arc<dyn ExecutionPlan>) -> usize {
    let own = if plan.name() == "LipFilterExec" {
        rows_in(plan)
    } else {
        0
    };
    own + plan
        .children()
        .into_iter()
        .map(filtered_rows)
        .sum::<usize>()
}

pub(crate) fn session(
    partitions: usize,
    batch: usize,
    join_filters: bool,
) -> SessionContext {
    let ctx = crate::support::tsjoin_context(
        SessionConfig::new()
            .with_target_partitions(partitions)
            .with_batch_size(batch),
    );
    ctx.state_ref()
        .write()
        .config_mut()
        .options_mut()
        .extensions
        .get_mut::<datafusion_tsjoin::TsJoinOptions>()
        .expect("tsjoin's options")
        .join_filters = join_filters;
    ctx
}

/// Makes every hash join of `ctx` partitioned (both sides hashed), as
/// large builds are: their filters route each key by its hash.
pub(crate) fn partitioned_joins(ctx: &SessionContext) {
    let state = ctx.state_ref();
    let mut state = state.write();
    let optimizer = &mut state.config_mut().options_mut().optimizer;
    optimizer.hash_join_single_partition_threshold = 0;
    optimizer.hash_join_single_partition_threshold_rows = 0;
}

/// Random star schemas (1–4 dimensions; dense, sparse, 64-bit and string
/// keys; NULL and duplicate dimension keys; empty dimensions; skewed fact
/// keys; 1–4 partitions; collect-left or partitioned joins; random batch
/// and row-group sizes; the fact anywhere in FROM): with join filters, the
/// answer is the one without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_stars_answer_as_without_join_filters() {
    let cases = case_count("TSJOIN_LIP_CASES", 40);
    let mut fired = 0;
    let mut blooms = 0;
    for case in 0..cases {
        let mut rng = StdRng::seed_from_u64(7000 + case);
        let dir = tempfile::tempdir().unwrap();
        let sql = random_star(&mut rng, dir.path());
        let (with, without) = with_and_without(&mut rng, dir.path(), &sql, case).await;
        assert_eq!(
            filtered_rows(&without),
            0,
            "case {case}: join filters ran while off"
        );
        fired += usize::from(filtered_rows(&with) > 0);
        blooms += usize::from(lip_metrics(&with).contains("kind=bloom"));
    }
    // The filters must actually have run for the comparison to mean much,
    // Bloom filters (sparse keys) among them.
    assert!(
        fired * 2 >= cases as usize,
        "join filters ran in only {fired} of {cases} cases"
    );
    assert!(blooms > 0, "no Bloom filter in {cases} cases");
}

/// Two dense dimensions: EXPLAIN shows the operator, ANALYZE shows exact
/// bit filters, and the fact rows they keep are exactly the matching ones
/// (no false positives).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_filters_keep_exactly_the_matching_fact_rows() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = session(2, 1000, true);
    tables(
        &ctx,
        dir.path(),
        &[
            ("f", "SELECT value AS k1, value % 50 AS k2, value % 7 AS x FROM generate_series(1, 20000)"),
            ("d1", "SELECT value AS k, value % 10 AS a FROM generate_series(1, 20000)"),
            ("d2", "SELECT value AS k, value % 5 AS a FROM generate_series(0, 49)"),
        ],
    )
    .await;
    let sql = "SELECT count(*) FROM f, d1, d2 WHERE f.k1 = d1.k AND f.k2 = d2.k AND d1.a = 3 AND d2.a = 0";
    let plan = crate::support::explained_plan(&ctx, sql).await;
    assert!(plan.contains("LipFilterExec: join_filters=["), "{plan}");
    let (physical, batches) = executed(&ctx, sql).await;
    // k1 % 10 = 3 and k1 % 50 % 5 = 0 never hold together: k1 ≡ 3 (mod 10)
    // means k1 % 5 = 3.
    assert_eq!(cells(&batches), vec![vec!["0".to_string()]]);
    let lip = find(&physical, "LipFilterExec").expect("a LipFilterExec");
    let shown = lip.metrics().unwrap().to_string();
    assert!(shown.contains("kind=exact_bits"), "{shown}");
    // Exact filters: the fact rows left are exactly those matching both.
    assert_eq!(lip.metrics().unwrap().output_rows(), Some(0));

    // One filter alone: d1.a = 3 keeps the k1 with k1 % 10 = 3, 2000 rows.
    let sql = "SELECT count(*) FROM f JOIN d1 ON f.k1 = d1.k WHERE d1.a = 3";
    let (physical, batches) = executed(&ctx, sql).await;
    assert_eq!(cells(&batches), vec![vec!["2000".to_string()]]);
    let lip = find(&physical, "LipFilterExec").expect("a LipFilterExec");
    assert_eq!(lip.metrics().unwrap().output_rows(), Some(2000));
    assert_eq!(rows_in(lip), 20000);
    // EXPLAIN ANALYZE's line names the kind and size of each filter.
    let line = crate::support::operator_line(&physical, "LipFilterExec");
    assert!(line.contains("join_filters=[k1: exact_bits "), "{line}");
}

/// A partitioned join's filter (a `CASE` over the key's hash) becomes bits
/// too, over the widest bounds of its partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_joins_filters_are_bits_too() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = session(2, 1000, true);
    partitioned_joins(&ctx);
    tables(
        &ctx,
        dir.path(),
        &[
            (
                "f",
                "SELECT value AS k1, value % 7 AS x FROM generate_series(1, 20000)",
            ),
            (
                "d1",
                "SELECT value AS k, value % 10 AS a FROM generate_series(1, 20000)",
            ),
        ],
    )
    .await;
    let sql = "SELECT count(*) FROM f JOIN d1 ON f.k1 = d1.k WHERE d1.a = 3";
    let (physical, batches) = executed(&ctx, sql).await;
    assert_eq!(cells(&batches), vec![vec!["2000".to_string()]]);
    let plan = datafusion::physical_plan::displayable(physical.as_ref())
        .indent(false)
        .to_string();
    assert!(plan.contains("mode=Partitioned"), "{plan}");
    let lip = find(&physical, "LipFilterExec").expect("a LipFilterExec");
    let line = crate::support::operator_line(&physical, "LipFilterExec");
    assert!(line.contains("join_filters=[k1: exact_bits "), "{line}");
    // Rows that passed before both builds were done reach the join
    // unchecked; of the checked ones only matching rows pass (exact bits).
    let out = lip.metrics().unwrap().output_rows().unwrap();
    let unchecked = 20000 - rows_in(lip);
    assert!(
        out >= 2000 && out <= 2000 + unchecked,
        "{out} rows out, {line}"
    );
}

/// The physical plan of `sql`, run to completion, and its output.
pub(crate) async fn executed(
    ctx: &SessionContext,
    sql: &str,
) -> (Arc<dyn ExecutionPlan>, Vec<RecordBatch>) {
    let physical = crate::support::physical_plan(ctx, sql).await;
    let batches = collect(Arc::clone(&physical), ctx.task_ctx())
        .await
        .unwrap();
    (physical, batches)
}

pub(crate) fn find<'a>(
    plan: &'a Arc<dyn ExecutionPlan>,
    name: &str,
) -> Option<&'a Arc<dyn ExecutionPlan>> {
    if plan.name() == name {
        return Some(plan);
    }
    plan.children().into_iter().find_map(|c| find(c, name))
}

/// Off by setting; on a cluster session; and with Parquet row-level
/// pushdown (the scan applies the filters itself).
#[tokio::test]
async fn where_join_filters_are_not_placed() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = session(2, 1000, true);
    tables(&ctx, dir.path(), &SMALL_STAR).await;
    let sql = SMALL_STAR_QUERY;
    let has = |ctx: SessionContext| async move {
        contains_operator(
            &crate::support::physical_plan(&ctx, sql).await,
            "LipFilterExec",
        )
    };
    assert!(has(ctx.clone()).await);
    for set in [
        "SET tsjoin.join_filters = false",
        "SET tsjoin.distributed = true",
        "SET datafusion.execution.parquet.pushdown_filters = true",
    ] {
        let ctx = session(2, 1000, true);
        register_star(&ctx, dir.path()).await;
        ctx.tsjoin_sql(set).await.unwrap().collect().await.unwrap();
        assert!(!has(ctx.clone()).await, "{set}");
        assert_eq!(
            crate::support::query_rows(&ctx, sql).await,
            vec![vec!["4".to_string()]]
        );
    }
}

/// Under a memory limit too small for the bits, the filter is left to the
/// join: same answer, no error, every row passed on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bits_over_the_memory_limit_are_left_to_the_join() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let setup = crate::support::context(1);
    // Keys 1 and 3,000,000: 375 KB of bits, over the 256 KB limit (the bit
    // budget raised past the range, so only the memory pool refuses).
    exec(&setup, &format!(
            "COPY (SELECT value * 1000 AS k FROM generate_series(1, 5000)) TO '{d}/f/a.parquet'; \
             COPY (SELECT * FROM (VALUES (1000, 1), (3000000, 1), (2000, 2)) AS t(k, a)) \
               TO '{d}/d1/a.parquet'"
        ))
        .await;
    let ctx =
        limited_context_with(256 << 10, SessionConfig::new().with_target_partitions(1));
    exec(&ctx, "SET tsjoin.join_filter_max_bits = 4194304").await;
    register_star(&ctx, dir.path()).await;
    let sql = "SELECT count(*) FROM f JOIN d1 ON f.k = d1.k WHERE d1.a = 1";
    let (physical, batches) = executed(&ctx, sql).await;
    assert_eq!(cells(&batches), vec![vec!["2".to_string()]]);
    let lip = find(&physical, "LipFilterExec").expect("a LipFilterExec");
    let line = crate::support::operator_line(&physical, "LipFilterExec");
    assert!(
        line.contains("join_filters=[k: left to the join]"),
        "{line}"
    );
    // No filter checked a row (the scan itself may prune with the
    // dynamic filter's bounds).
    assert_eq!(rows_in(lip), 0);
    // With room in the pool the same filter is bits: the limit refused it.
    let roomy =
        limited_context_with(64 << 20, SessionConfig::new().with_target_partitions(1));
    exec(&roomy, "SET tsjoin.join_filter_max_bits = 4194304").await;
    register_star(&roomy, dir.path()).await;
    let (physical, _) = executed(&roomy, sql).await;
    let line = crate::support::operator_line(&physical, "LipFilterExec");
    assert!(line.contains("join_filters=[k: exact_bits "), "{line}");
}

/// A key range wider than the bit budget (two bits per fact row, at least
/// 64 Ki) becomes a Bloom filter of the build keys when they fit that
/// budget at 16 bits each, and is left to the join when not;
/// `tsjoin.join_filter_max_bits` overrides the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_over_the_bit_budget_take_a_bloom_filter() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = session(2, 1000, true);
    tables(
        &ctx,
        dir.path(),
        &[
            (
                "f",
                "SELECT value * 10 AS k1 FROM generate_series(1, 20000)",
            ),
            (
                "d1",
                "SELECT value * 10 AS k, value % 10 AS a FROM generate_series(1, 20000)",
            ),
        ],
    )
    .await;
    // Keys 30..199930: 200 K values, over the budget of max(2 * 20000,
    // 64 Ki) bits; their 2000 keys at 16 bits each fit it as a Bloom filter.
    let sql = "SELECT count(*) FROM f JOIN d1 ON f.k1 = d1.k WHERE d1.a = 3";
    let (physical, batches) = executed(&ctx, sql).await;
    assert_eq!(cells(&batches), vec![vec!["2000".to_string()]]);
    let line = crate::support::operator_line(&physical, "LipFilterExec");
    assert!(line.contains("join_filters=[k1: bloom 4000 B"), "{line}");
    // No false negatives; false positives within the design bound (~0.1%
    // of the 18,000 other rows; allow 1%).
    let lip = find(&physical, "LipFilterExec").expect("a LipFilterExec");
    let out = lip.metrics().unwrap().output_rows().unwrap();
    assert!((2000..=2180).contains(&out), "{out} rows out: {line}");
    // A budget that holds the range: exact bits.
    exec(&ctx, "SET tsjoin.join_filter_max_bits = 262144").await;
    let (physical, batches) = executed(&ctx, sql).await;
    assert_eq!(cells(&batches), vec![vec!["2000".to_string()]]);
    let line = crate::support::operator_line(&physical, "LipFilterExec");
    assert!(line.contains("join_filters=[k1: exact_bits "), "{line}");
    // One that holds neither: left to the join.
    exec(&ctx, "SET tsjoin.join_filter_max_bits = 16384").await;
    let (physical, batches) = executed(&ctx, sql).await;
    assert_eq!(cells(&batches), vec![vec!["2000".to_string()]]);
    let line = crate::support::operator_line(&physical, "LipFilterExec");
    assert!(
        line.contains("join_filters=[k1: left to the join]"),
        "{line}"
    );
}

/// A key range too wide to evaluate the join's predicate over (150 K values,
/// over the 64 Ki that a 150 K-row fact allows) still becomes bits when the
/// join's build keys are kept (`LipBuildKeysExec` under the join): a write
/// per build row, up to two bits per fact row. Exact: only matching rows
/// pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wide_ranges_take_their_bits_from_the_build_keys() {
    let dir = tempfile::tempdir().unwrap();
    for partitioned in [false, true] {
        let ctx = session(2, 4096, true);
        if partitioned {
            partitioned_joins(&ctx);
        }
        let dir = dir.path().join(format!("p{partitioned}"));
        tables(
            &ctx,
            &dir,
            &[
                ("f", "SELECT value AS k1 FROM generate_series(1, 150000)"),
                (
                    "d1",
                    "SELECT value AS k, value % 10 AS a FROM generate_series(1, 150000)",
                ),
            ],
        )
        .await;
        let sql = "SELECT count(*) FROM f JOIN d1 ON f.k1 = d1.k WHERE d1.a = 3";
        let (physical, batches) = executed(&ctx, sql).await;
        assert_eq!(cells(&batches), vec![vec!["15000".to_string()]]);
        let plan = datafusion::physical_plan::displayable(physical.as_ref())
            .indent(false)
            .to_string();
        assert!(plan.contains("LipBuildKeysExec: key=k"), "{plan}");
        let line = crate::support::operator_line(&physical, "LipFilterExec");
        // 150 K bits: 18,752 bytes.
        assert!(
            line.contains("join_filters=[k1: exact_bits 18752 B"),
            "{line}"
        );
        let lip = find(&physical, "LipFilterExec").expect("a LipFilterExec");
        let out = lip.metrics().unwrap().output_rows().unwrap();
        let unchecked = 150000 - rows_in(lip);
        assert!(
            out >= 15000 && out <= 15000 + unchecked,
            "{out} rows out, {line}"
        );
        if !partitioned {
            // The build is done before the first fact row: every row checked.
            assert_eq!(out, 15000, "{line}");
        }
    }
}

/// The operator survives tsjoin's codec (as a pass-through where no join
/// fills its filters).
#[tokio::test]
async fn the_operator_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = session(2, 1000, true);
    tables(&ctx, dir.path(), &SMALL_STAR).await;
    let sql = SMALL_STAR_QUERY;
    let plan = crate::support::physical_plan(&ctx, sql).await;
    let back = crate::support::physical_round_trip(&plan, &ctx);
    assert_eq!(
        crate::support::operator_line(&back, "LipFilterExec"),
        crate::support::operator_line(&plan, "LipFilterExec")
    );
    let rows = cells(&collect(back, ctx.task_ctx()).await.unwrap());
    assert_eq!(rows, vec![vec!["4".to_string()]]);
}

/// A dimension that DataFusion would probe (its estimate exceeds the
/// filtered fact side's) is swapped back to the build side, so its filter
/// reaches the fact scan too; the answer stays the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dimension_filters_the_fact_scan() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = session(2, 8192, true);
    tables(
        &ctx,
        dir.path(),
        &[
            (
                "f",
                "SELECT value % 20000 + 1 AS k1, value % 40000 + 1 AS k2, value AS x \
                   FROM generate_series(1, 200000)",
            ),
            (
                "d1",
                "SELECT value AS k, value % 1000 AS a FROM generate_series(1, 20000)",
            ),
            (
                "d2",
                "SELECT value AS k, value % 3 AS b FROM generate_series(1, 40000)",
            ),
        ],
    )
    .await;
    let sql = "SELECT sum(f.x), count(*) FROM f, d1, d2 \
               WHERE f.k1 = d1.k AND f.k2 = d2.k AND d1.a = 7 AND d2.b <> 2";
    let plan = crate::support::explained_plan(&ctx, sql).await;
    let lip = plan
        .lines()
        .find(|l| l.contains("LipFilterExec"))
        .unwrap_or_else(|| panic!("{plan}"));
    assert!(lip.contains("k1") && lip.contains("k2"), "{plan}");
    let without = session(2, 8192, false);
    register_star(&without, dir.path()).await;
    assert_eq!(
        crate::support::query_rows(&ctx, sql).await,
        crate::support::query_rows(&without, sql).await
    );
}

/// `FactProbeRule` must run right after DataFusion's join selection (it
/// swaps build sides, which is only allowed before distribution and
/// dynamic filters are placed) and `JoinFilterRule` after the last filter
/// pushdown (which places the joins' filters in the scans).
#[test]
fn the_rules_run_where_they_must() {
    let ctx = crate::support::context(1);
    let state = ctx.state();
    let names: Vec<&str> = state
        .physical_optimizers()
        .iter()
        .map(|r| r.name())
        .collect();
    let at = |name: &str| {
        names
            .iter()
            .rposition(|n| *n == name)
            .unwrap_or_else(|| panic!("{names:?}"))
    };
    assert_eq!(at("FactProbeRule"), at("join_selection") + 1, "{names:?}");
    assert!(at("JoinFilterRule") > at("FilterPushdown"), "{names:?}");
    assert!(at("JoinFilterRule") < at("SanityCheckPlan"), "{names:?}");
}
