//! Differential cases, run by the integration test `verify` (a few hundred)
//! and by `tsjoin-bench verify --cases N` (any number): a WINDOW JOIN case
//! checks tsjoin against the naive [`reference`](super::reference), an
//! ASOF JOIN case against [`asof`](super::asof), a HORIZON JOIN case
//! against [`horizon`](super::horizon), an `approx_percentile` case against
//! [`percentile`](super::percentile) (bit for bit), a GROUP
//! BY case the inline aggregate against DataFusion's. A failure comes back
//! as a minimal SQL script that reproduces it.
//!
//! To verify a new operator, add a `case` function here (random tables and
//! shape from the seed, the reference answer, tsjoin's answer) and a kind to
//! [`Kind`].

use super::Rng;
use super::asof::AsofShape;
use super::horizon::HorizonShape;
use super::percentile::{PctRow, PctShape, pct_batch, pct_rows, pct_schema, pct_script};
use super::reference::{self, Row, Shape};
use crate::{TsJoinContextExt, TsJoinSessionStateBuilderExt};
use datafusion::arrow::array::{ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::MemTable;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use std::sync::Arc;

/// The kinds of differential case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// WINDOW JOIN against the naive reference.
    WindowJoin,
    /// The inline GROUP BY against DataFusion's aggregate.
    GroupBy,
    /// ASOF / LT JOIN (all four directions, tolerances) against the naive
    /// [`asof`](super::asof) reference.
    Asof,
    /// HORIZON JOIN (RANGE and LIST offsets, one or two right tables)
    /// against the naive [`horizon`](super::horizon) reference.
    Horizon,
    /// `approx_percentile` / `approx_median` (GROUP BY, no GROUP BY, OVER;
    /// every input type and precision, the array form) against the naive
    /// [`percentile`](super::percentile) reference, bit for bit.
    Percentile,
}

impl Kind {
    /// Every kind, in the order `tsjoin-bench verify` interleaves them.
    pub const ALL: [Kind; 5] = [
        Kind::WindowJoin,
        Kind::GroupBy,
        Kind::Asof,
        Kind::Horizon,
        Kind::Percentile,
    ];
}

/// A case whose answer differs from the reference, or that failed.
#[derive(Debug, Clone)]
pub struct Mismatch {
    /// The case's seed.
    pub seed: u64,
    /// What differed.
    pub what: String,
    /// A SQL script reproducing it (shrunk).
    pub script: String,
}

/// Runs case `seed` of `kind`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use datafusion_tsjoin::testing::verify::{Kind, run};
/// assert!(run(Kind::WindowJoin, 1).await.is_ok());
/// assert!(run(Kind::GroupBy, 1).await.is_ok());
/// assert!(run(Kind::Asof, 1).await.is_ok());
/// assert!(run(Kind::Horizon, 1).await.is_ok());
/// assert!(run(Kind::Percentile, 4).await.is_ok());
/// # }
/// ```
pub async fn run(kind: Kind, seed: u64) -> std::result::Result<(), Box<Mismatch>> {
    match kind {
        Kind::WindowJoin | Kind::Asof | Kind::Horizon => temporal_case(seed, kind).await,
        Kind::GroupBy => group_by_case(seed).await,
        Kind::Percentile => percentile_case(seed).await,
    }
}

/// A float or any value as text (floats rounded to 9 decimals, or to 11
/// significant digits from a million up, so that summation order does not
/// show: DataFusion's `avg` of a BIGINT sums doubles, the inline one sums
/// the integers exactly, and near 2^61 the two differ in the 17th digit).
fn cell(array: &ArrayRef, row: usize) -> String {
    if array.is_null(row) {
        return "NULL".into();
    }
    if array.data_type() == &DataType::Float64 {
        let v = array.as_primitive::<Float64Type>().value(row);
        if v.is_finite() && v.abs() >= 1e6 {
            return format!("{v:.10e}");
        }
        return reference::fmt_f(Some(v));
    }
    let opts = FormatOptions::default();
    match ArrayFormatter::try_new(array.as_ref(), &opts) {
        Ok(f) => f.value(row).to_string(),
        Err(e) => format!("<{e}>"),
    }
}

fn cells(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows())
                .map(move |r| b.columns().iter().map(|c| cell(c, r)).collect())
        })
        .collect()
}

async fn rows(ctx: &SessionContext, sql: &str) -> Result<Vec<Vec<String>>> {
    Ok(cells(&ctx.tsjoin_sql(sql).await?.collect().await?))
}

/// How long a GROUP BY case under a memory limit may run before it counts
/// as DataFusion's repartition stall (a case takes well under a second).
const UPSTREAM_STALL: std::time::Duration = std::time::Duration::from_secs(30);

fn context(partitions: usize, memory: Option<usize>) -> Result<SessionContext> {
    let mut runtime = RuntimeEnvBuilder::new();
    if let Some(bytes) = memory {
        runtime = runtime.with_memory_limit(bytes, 1.0);
    }
    let state = SessionStateBuilder::new()
        .with_config(SessionConfig::new().with_target_partitions(partitions))
        .with_runtime_env(runtime.build_arc()?)
        .with_default_features()
        .with_tsjoin()
        .build();
    Ok(SessionContext::new_with_state(state))
}

/// The query of a temporal join case.
enum Query {
    Window(Shape),
    Asof(AsofShape),
    Horizon(HorizonShape),
}

impl Query {
    fn sql(&self) -> String {
        match self {
            Self::Window(s) => s.sql(),
            Self::Asof(s) => s.sql(),
            Self::Horizon(s) => s.sql(),
        }
    }

    fn reference(&self, left: &[Row], right: &[Row], right2: &[Row]) -> Vec<Vec<String>> {
        match self {
            Self::Window(s) => reference::window_join(left, right, s),
            Self::Asof(s) => super::asof::asof(left, right, s),
            Self::Horizon(s) => super::horizon::horizon(left, right, right2, s),
        }
    }
}

/// One temporal join case (WINDOW, ASOF or HORIZON JOIN): tables, query,
/// partitions and the execution path from `seed`.
struct TemporalCase {
    left: Vec<Row>,
    right: Vec<Row>,
    /// HORIZON JOIN's second right table `r2` (empty for the others).
    right2: Vec<Row>,
    query: Query,
    partitions: usize,
    fast: bool,
    /// Run in `tsjoin.temporal_join_distribution = partitioned`, the right
    /// table in one partition (hash-repartitioning one partition keeps
    /// each key's table order, which breaks timestamp ties).
    partitioned: bool,
    split_seed: u64,
}

impl TemporalCase {
    fn new(seed: u64, kind: Kind) -> Self {
        let mut rng = Rng::new(seed);
        let long = rng.chance(0.1);
        let span = rng.range(0, if long { 400 } else { 40 });
        let keys = rng.range(1, 5);
        let nl = rng.range(0, 30) as usize;
        let nr = rng.range(0, if long { 600 } else { 50 }) as usize;
        let mut left = reference::random_rows(&mut rng, nl, span, keys);
        let mut right = reference::random_rows(&mut rng, nr, span, keys);
        rng.shuffle(&mut left);
        rng.shuffle(&mut right);
        if rng.chance(0.5) {
            right.sort_by_key(|r| r.ts);
        }
        for (i, r) in right.iter_mut().enumerate() {
            r.id = i as i64;
        }
        let query = match kind {
            Kind::Asof => Query::Asof(AsofShape::random(&mut rng)),
            Kind::Horizon => Query::Horizon(HorizonShape::random(&mut rng, span)),
            _ => Query::Window(Shape::random(&mut rng)),
        };
        let (partitions, fast, split_seed) =
            (rng.range(1, 4) as usize, rng.chance(0.7), rng.next_u64());
        let mut right2 = vec![];
        if kind == Kind::Horizon {
            let n = rng.range(0, 12) as usize;
            right2 = reference::random_rows(&mut rng, n, span, keys);
            right2.sort_by_key(|r| r.ts);
            for (i, r) in right2.iter_mut().enumerate() {
                r.id = i as i64;
            }
        }
        Self {
            left,
            right,
            right2,
            query,
            partitions,
            fast,
            // One case in four, not drawn from `rng` (every seed keeps the
            // case it had before this dimension existed), and by a hash of
            // the seed, not `seed % n`, which callers use to pick the kind.
            partitioned: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 62 == 1,
            split_seed,
        }
    }

    /// tsjoin's answer and the reference's.
    async fn answers(&self) -> Result<(Vec<Vec<String>>, Vec<Vec<String>>)> {
        let ctx = context(self.partitions, None)?;
        let mut rng = Rng::new(self.split_seed);
        let right_parts = if self.partitioned { 1 } else { self.partitions };
        for (name, rows, n) in [
            ("l", &self.left, self.partitions),
            ("r", &self.right, right_parts),
            ("r2", &self.right2, right_parts),
        ] {
            let parts = reference::split(&mut rng, rows, n);
            ctx.register_table(
                name,
                Arc::new(MemTable::try_new(reference::schema(), parts)?),
            )?;
        }
        for set in self.settings() {
            ctx.tsjoin_sql(&set).await?;
        }
        let got = rows(&ctx, &self.query.sql()).await?;
        let want = self.query.reference(&self.left, &self.right, &self.right2);
        Ok((got, want))
    }

    /// Rows of table `side` (0: `l`, 1: `r`, 2: `r2`).
    fn side(&mut self, side: usize) -> &mut Vec<Row> {
        match side {
            0 => &mut self.left,
            1 => &mut self.right,
            _ => &mut self.right2,
        }
    }

    /// The SET statements of this case's execution path.
    fn settings(&self) -> Vec<String> {
        let mut v = vec![format!("SET tsjoin.window_join_fast_path = {}", self.fast)];
        if self.partitioned {
            v.extend([
                "SET tsjoin.temporal_join_distribution = partitioned".to_string(),
                // Small inputs hash-repartitioned too, scans kept whole.
                "SET datafusion.execution.batch_size = 4".to_string(),
                "SET datafusion.optimizer.repartition_file_scans = false".to_string(),
            ]);
        }
        v
    }

    async fn fails(&self) -> Option<String> {
        match self.answers().await {
            Ok((got, want)) if got == want => None,
            Ok((got, want)) => Some(format!("got {got:?}\nwant {want:?}")),
            Err(e) => Some(format!("error: {e}")),
        }
    }
}

async fn temporal_case(seed: u64, kind: Kind) -> std::result::Result<(), Box<Mismatch>> {
    let mut case = TemporalCase::new(seed, kind);
    let Some(mut what) = case.fails().await else {
        return Ok(());
    };
    // Shrink: drop rows one at a time while the case still fails.
    for side in 0..3 {
        let mut i = 0;
        loop {
            let rows = case.side(side);
            if i >= rows.len() {
                break;
            }
            let removed = rows.remove(i);
            match case.fails().await {
                Some(w) => what = w,
                None => {
                    case.side(side).insert(i, removed);
                    i += 1;
                }
            }
        }
    }
    let mut script = reference::script(&case.left, &case.right, &case.query.sql());
    if kind == Kind::Horizon {
        let r2 = reference::table_sql("r2", &case.right2);
        let at = script.find("\nCREATE TABLE r ").map_or(0, |i| i + 1);
        script.insert_str(at, &format!("{r2}\n"));
    }
    let kind = match kind {
        Kind::Asof => "ASOF JOIN",
        Kind::Horizon => "HORIZON JOIN",
        _ => "WINDOW JOIN",
    };
    script.insert_str(
        0,
        &format!(
            "-- tsjoin verify: {kind} seed {seed}, {} partitions\n{};\n",
            case.partitions,
            case.settings().join(";\n")
        ),
    );
    Err(Box::new(Mismatch { seed, what, script }))
}

/// One GROUP BY case's table: keys of three types, values with NULLs, NaN
/// and extremes.
#[derive(Debug, Clone)]
struct GroupRow {
    a: Option<i64>,
    b: Option<String>,
    c: Option<i32>,
    v: Option<f64>,
    i: Option<i64>,
}

struct GroupByCase {
    rows: Vec<GroupRow>,
    keys: Vec<&'static str>,
    aggs: Vec<&'static str>,
    partitions: usize,
    all_keys: bool,
    memory: Option<usize>,
}

const AGGS: &[&str] = &[
    "count(*)", "count(v)", "sum(v)", "min(v)", "max(v)", "avg(v)", "sum(i)", "min(i)",
    "max(i)", "avg(i)", "count(b)", "min(c)",
];

impl GroupByCase {
    fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        // Now and then many rows: the spool path, the probe's fallback and
        // the memory fallback.
        let big = rng.chance(0.02);
        let n = if big {
            rng.range(5_000, 40_000)
        } else {
            rng.range(0, 200)
        } as usize;
        let groups = *rng.pick(&[1i64, 3, 20, 1000, 1 << 40]);
        // DataFusion 55's grouped min/max over floats is order-dependent
        // when NaN is present (`partial_cmp` gives None both ways, so a NaN
        // is replaced by the next value): no NaN where they run on `v`.
        let nan = rng.chance(0.5);
        let rows = (0..n)
            .map(|_| GroupRow {
                a: (!rng.chance(0.05)).then(|| rng.range(0, groups)),
                b: (!rng.chance(0.05))
                    .then(|| format!("s{}", rng.range(0, groups.min(50)))),
                c: (!rng.chance(0.05)).then(|| rng.range(-3, 3) as i32),
                v: match rng.below(12) {
                    0 => None,
                    1 if nan => Some(f64::NAN),
                    _ => Some(rng.range(-400, 400) as f64 / 4.0),
                },
                i: match rng.below(20) {
                    0 => None,
                    1 => Some(i64::MAX / 4),
                    _ => Some(rng.range(-1000, 1000)),
                },
            })
            .collect();
        let mut keys: Vec<&str> = ["a", "b", "c"]
            .into_iter()
            .filter(|_| rng.chance(0.5))
            .collect();
        if keys.is_empty() {
            keys.push(*rng.pick(&["a", "b", "c"]));
        }
        let mut aggs: Vec<&str> = AGGS
            .iter()
            .copied()
            .filter(|_| rng.chance(0.4))
            .filter(|a| !nan || !matches!(*a, "min(v)" | "max(v)"))
            .collect();
        if aggs.is_empty() {
            aggs.push("count(*)");
        }
        Self {
            rows,
            keys,
            aggs,
            partitions: rng.range(1, 5) as usize,
            all_keys: rng.chance(0.3),
            memory: (big || rng.chance(0.05))
                .then(|| *rng.pick(&[256usize << 10, 1 << 20, 4 << 20])),
        }
    }

    fn query(&self) -> String {
        let keys = self.keys.join(", ");
        format!(
            "SELECT {keys}, {} FROM g GROUP BY {keys}",
            self.aggs.join(", ")
        )
    }

    fn create(&self) -> String {
        let s =
            |v: &Option<String>| v.as_ref().map_or("NULL".into(), |x| format!("'{x}'"));
        let i = |v: Option<i64>| v.map_or("NULL".into(), |x| x.to_string());
        let f = |v: Option<f64>| match v {
            None => "NULL".to_string(),
            Some(x) if x.is_nan() => "'NaN'".to_string(),
            Some(x) => format!("{x:?}"),
        };
        let values = if self.rows.is_empty() {
            "(NULL, NULL, NULL, NULL, NULL)".to_string()
        } else {
            self.rows
                .iter()
                .map(|r| {
                    format!(
                        "({}, {}, {}, {}, {})",
                        i(r.a),
                        s(&r.b),
                        i(r.c.map(i64::from)),
                        f(r.v),
                        i(r.i)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "CREATE TABLE g AS SELECT CAST(a AS BIGINT) AS a, CAST(b AS VARCHAR) AS b, \
             CAST(c AS INT) AS c, CAST(v AS DOUBLE) AS v, CAST(i AS BIGINT) AS i \
             FROM (VALUES {values}) AS x(a, b, c, v, i){}",
            if self.rows.is_empty() {
                " WHERE false"
            } else {
                ""
            }
        )
    }

    /// DataFusion's sorted answer and the inline one (an over-budget error
    /// of either is a pass when both say so or the inline one answers).
    async fn fails(&self) -> Option<String> {
        let run = async {
            let ctx = context(self.partitions, self.memory)?;
            // Many partitions of small batches, as a MemTable of the rows.
            ctx.tsjoin_sql(&self.create()).await?;
            let df = ctx.table("g").await?;
            let schema = Arc::new(df.schema().as_arrow().clone());
            let table = df.collect().await?;
            ctx.deregister_table("g")?;
            let mut parts = vec![vec![]; self.partitions];
            let mut k = 0;
            for b in &table {
                let mut s = 0;
                while s < b.num_rows() {
                    let len = (b.num_rows() - s).min(1 + (s * 7 + k) % 97);
                    parts[k % self.partitions].push(b.slice(s, len));
                    s += len;
                    k += 1;
                }
            }
            ctx.register_table("g", Arc::new(MemTable::try_new(schema, parts)?))?;
            ctx.tsjoin_sql(&format!(
                "SET tsjoin.inline_aggregate_all_keys = {}",
                self.all_keys
            ))
            .await?;
            let mut answers = vec![];
            let query = self.query();
            for inline in [false, true] {
                ctx.tsjoin_sql(&format!("SET tsjoin.inline_aggregate = {inline}"))
                    .await?;
                let answer = rows(&ctx, &query);
                let answer = if self.memory.is_some() && self.partitions > 1 {
                    // DataFusion 55.2's repartition can stall for good when
                    // it spills (apache/datafusion#24883, fixed after 55.2);
                    // both paths run through it here (the inline one after
                    // handing over), so a stalled case is skipped, not failed.
                    match tokio::time::timeout(UPSTREAM_STALL, answer).await {
                        Ok(answer) => answer,
                        Err(_) => return Ok(None),
                    }
                } else {
                    answer.await
                };
                answers.push(answer.map(|mut r| {
                    r.sort();
                    r
                }));
            }
            Ok::<_, DataFusionError>(Some(answers))
        };
        let answers = match run.await {
            Ok(Some(a)) => a,
            Ok(None) => return None,
            Err(e) => return Some(format!("setup: {e}")),
        };
        let exhausted = |e: &DataFusionError| {
            matches!(e.find_root(), DataFusionError::ResourcesExhausted(_))
        };
        match (&answers[0], &answers[1]) {
            (Ok(want), Ok(got)) if got == want => None,
            (Ok(want), Ok(got)) => Some(format!("got {got:?}\nwant {want:?}")),
            // Over budget for DataFusion too: the inline path may fail alike.
            (Err(d), Err(i)) if exhausted(d) && exhausted(i) => None,
            (Err(d), Ok(_)) if exhausted(d) => None,
            // Near the limit, which plan fits depends on how the partitions'
            // reservations interleave (docs/reliability.md's matrix): a clear
            // over-budget error is not a wrong answer. Any other error is.
            (Ok(_), Err(e)) if self.memory.is_some() && exhausted(e) => None,
            (Ok(_), Err(e)) => Some(format!("inline error: {e}")),
            (Err(d), _) => Some(format!("DataFusion error: {d}")),
        }
    }
}

async fn group_by_case(seed: u64) -> std::result::Result<(), Box<Mismatch>> {
    let mut case = GroupByCase::new(seed);
    let Some(mut what) = case.fails().await else {
        return Ok(());
    };
    // Shrink the rows by halves, then one at a time while small.
    let mut chunk = case.rows.len().div_ceil(2).max(1);
    while chunk >= 1 && !case.rows.is_empty() {
        let mut i = 0;
        while i < case.rows.len() {
            let removed: Vec<GroupRow> = case
                .rows
                .drain(i..(i + chunk).min(case.rows.len()))
                .collect();
            match case.fails().await {
                Some(w) => what = w,
                None => {
                    for (k, r) in removed.into_iter().enumerate() {
                        case.rows.insert(i + k, r);
                    }
                    i += chunk;
                }
            }
        }
        if chunk == 1 {
            break;
        }
        chunk /= 2;
    }
    let script = format!(
        "-- tsjoin verify: GROUP BY seed {seed}\n\
         SET datafusion.execution.target_partitions = {};\n\
         SET tsjoin.inline_aggregate_all_keys = {};\n{};\n\
         SET tsjoin.inline_aggregate = false;\n{q};\n\
         SET tsjoin.inline_aggregate = true;\n{q};\n",
        case.partitions,
        case.all_keys,
        case.create(),
        q = case.query()
    );
    Err(Box::new(Mismatch { seed, what, script }))
}

/// A cell as the percentile case compares it: floats exactly (`{:?}`),
/// lists element by element.
fn exact_cell(array: &ArrayRef, row: usize) -> String {
    if array.is_null(row) {
        return "NULL".into();
    }
    match array.data_type() {
        DataType::Float64 => {
            format!("{:?}", array.as_primitive::<Float64Type>().value(row))
        }
        DataType::List(_) => {
            let items = array.as_list::<i32>().value(row);
            let all: Vec<String> =
                (0..items.len()).map(|i| exact_cell(&items, i)).collect();
            format!("[{}]", all.join(", "))
        }
        _ => cell(array, row),
    }
}

/// One `approx_percentile` case: table `g`, query, partitions and batch
/// sizes from `seed`.
struct PercentileCase {
    rows: Vec<PctRow>,
    shape: PctShape,
    partitions: usize,
    split_seed: u64,
}

impl PercentileCase {
    fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        // Now and then groups large enough to turn their slots dense.
        let n = if rng.chance(0.03) {
            rng.range(2_000, 6_000)
        } else {
            rng.range(0, 120)
        };
        let mut rows = pct_rows(&mut rng, n as usize);
        rng.shuffle(&mut rows);
        Self {
            rows,
            shape: PctShape::random(&mut rng),
            partitions: rng.range(1, 5) as usize,
            split_seed: rng.next_u64(),
        }
    }

    /// tsjoin's answer (sorted rows, exact floats) or its error.
    async fn answer(&self) -> Result<Vec<Vec<String>>> {
        let ctx = context(self.partitions, None)?;
        let mut rng = Rng::new(self.split_seed);
        let mut parts = vec![vec![]; self.partitions];
        let mut at = 0;
        while at < self.rows.len() {
            let len = (rng.range(1, 98) as usize).min(self.rows.len() - at);
            parts[rng.below(self.partitions as u64) as usize]
                .push(pct_batch(&self.rows[at..at + len]));
            at += len;
        }
        ctx.register_table("g", Arc::new(MemTable::try_new(pct_schema(), parts)?))?;
        let batches = ctx.tsjoin_sql(&self.shape.sql()).await?.collect().await?;
        let mut out: Vec<Vec<String>> = batches
            .iter()
            .flat_map(|b| {
                (0..b.num_rows())
                    .map(move |r| b.columns().iter().map(|c| exact_cell(c, r)).collect())
            })
            .collect();
        out.sort();
        Ok(out)
    }

    async fn fails(&self) -> Option<String> {
        match (self.answer().await, self.shape.reference(&self.rows)) {
            (Ok(got), Ok(want)) if got == want => None,
            (Ok(got), Ok(want)) => Some(format!("got {got:?}\nwant {want:?}")),
            (Err(e), Err(want)) if want.iter().any(|w| e.to_string().contains(w)) => None,
            (Err(e), Err(want)) => {
                Some(format!("error {e}\nwant an error with {want:?}"))
            }
            (Ok(got), Err(want)) => Some(format!("got {got:?}\nwant an error: {want:?}")),
            (Err(e), Ok(_)) => Some(format!("error: {e}")),
        }
    }
}

async fn percentile_case(seed: u64) -> std::result::Result<(), Box<Mismatch>> {
    let mut case = PercentileCase::new(seed);
    let Some(mut what) = case.fails().await else {
        return Ok(());
    };
    // Shrink the rows by halves, then one at a time.
    let mut chunk = case.rows.len().div_ceil(2).max(1);
    loop {
        let mut i = 0;
        while i < case.rows.len() {
            let end = (i + chunk).min(case.rows.len());
            let removed: Vec<PctRow> = case.rows.drain(i..end).collect();
            match case.fails().await {
                Some(w) => what = w,
                None => {
                    case.rows.splice(i..i, removed);
                    i += chunk;
                }
            }
        }
        if chunk == 1 {
            break;
        }
        chunk /= 2;
    }
    let script = format!(
        "-- tsjoin verify: approx_percentile seed {seed}, {} partitions\n\
         SET datafusion.execution.target_partitions = {};\n{}",
        case.partitions,
        case.partitions,
        pct_script(&case.rows, &case.shape.sql())
    );
    Err(Box::new(Mismatch { seed, what, script }))
}
