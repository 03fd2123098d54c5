//! The naive WINDOW JOIN reference: nested loops over rows, straight from
//! the spec (design/window-join.md §3–§7), with the random tables and query
//! shapes it is checked on. Used by the differential tests and by
//! `tsjoin-bench verify`.

use super::Rng;
use datafusion::arrow::array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, TimestampMillisecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use std::sync::Arc;

/// One row of a test table `(id, ts, k, v, i)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Row number (not null, unique on the left: the output order).
    pub id: i64,
    /// Timestamp in milliseconds.
    pub ts: Option<i64>,
    /// Join key.
    pub k: Option<i64>,
    /// Float value (NULL, NaN or a multiple of 1/4).
    pub v: Option<f64>,
    /// Integer value (also the per-row lower bound of dynamic shapes).
    pub i: Option<i64>,
}

/// The test tables' schema.
///
/// ```
/// assert_eq!(datafusion_tsjoin::testing::reference::schema().fields().len(), 5);
/// ```
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Float64, true),
        Field::new("i", DataType::Int64, true),
    ]))
}

/// `rows` as one batch of [`schema`].
///
/// ```
/// use datafusion_tsjoin::testing::{Rng, reference::{batch, random_rows}};
/// assert_eq!(batch(&random_rows(&mut Rng::new(1), 4, 10, 2)).num_rows(), 4);
/// ```
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
    RecordBatch::try_new(schema(), cols).expect("columns match the schema")
}

/// `n` random rows: timestamps in `0..=span` (5% NULL), skewed keys in
/// `0..keys` (10% NULL, key 0 as likely as all others together), values
/// with NULLs and NaN.
///
/// ```
/// use datafusion_tsjoin::testing::{Rng, reference::random_rows};
/// let rows = random_rows(&mut Rng::new(3), 50, 20, 4);
/// assert!(rows.iter().all(|r| r.ts.is_none_or(|t| (0..=20).contains(&t))));
/// ```
pub fn random_rows(rng: &mut Rng, n: usize, span: i64, keys: i64) -> Vec<Row> {
    (0..n)
        .map(|id| Row {
            id: id as i64,
            ts: (!rng.chance(0.05)).then(|| rng.range(0, span + 1)),
            k: (!rng.chance(0.1)).then(|| {
                if rng.chance(0.5) {
                    0
                } else {
                    rng.range(0, keys)
                }
            }),
            v: match rng.below(10) {
                0 => None,
                1 => Some(f64::NAN),
                _ => Some(rng.range(-100, 100) as f64 / 4.0),
            },
            i: (!rng.chance(0.1)).then(|| rng.range(-5, 5)),
        })
        .collect()
}

/// A WINDOW JOIN query shape over tables `l` and `r`.
#[derive(Clone, Debug)]
pub struct Shape {
    /// `ON r.k = l.k`.
    pub keyed: bool,
    /// `AND r.i > l.i` (a pair filter).
    pub pair_filter: bool,
    /// Window start, milliseconds from the left row (negative: preceding).
    pub lo: i64,
    /// Window end.
    pub hi: i64,
    /// INCLUDE PREVAILING (else EXCLUDE).
    pub include: bool,
    /// lower bound `l.i milliseconds PRECEDING` (per row) instead of `lo`
    pub dynamic_lo: bool,
}

impl Shape {
    /// A random shape with bounds in `-10..=10`.
    ///
    /// ```
    /// let s = datafusion_tsjoin::testing::reference::Shape::random(&mut datafusion_tsjoin::testing::Rng::new(5));
    /// assert!(s.lo <= s.hi && s.sql().contains("WINDOW JOIN"));
    /// ```
    pub fn random(rng: &mut Rng) -> Self {
        let (a, b) = (rng.range(-10, 11), rng.range(-10, 11));
        Self {
            keyed: rng.chance(0.7),
            pair_filter: rng.chance(0.25),
            lo: a.min(b),
            hi: a.max(b),
            include: rng.chance(0.5),
            dynamic_lo: rng.chance(0.2),
        }
    }

    fn bound(v: i64) -> String {
        if v < 0 {
            format!("{} milliseconds PRECEDING", -v)
        } else {
            format!("{v} milliseconds FOLLOWING")
        }
    }

    /// The query: per left row (by `l.id`) count, sum, min, max, first,
    /// last and avg over its window (min and max of a float and of an
    /// integer column).
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
            "SELECT l.id, count(*), count(r.v), sum(r.v), min(r.v), max(r.v), first(r.v), last(r.v), sum(r.i), avg(r.i), min(r.i), max(r.i) \
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

/// A float as the tests print it: NULL, NaN, or rounded to 9 decimals (so
/// that summation order does not show).
pub fn fmt_f(v: Option<f64>) -> String {
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

/// Expected output rows of `s.sql()` over `left` and `right` (in table
/// order, which breaks timestamp ties), as text cells.
pub fn window_join(left: &[Row], right: &[Row], s: &Shape) -> Vec<Vec<String>> {
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
                .filter(|r| (start..=end).contains(&r.ts.unwrap_or(i64::MIN)))
                .collect();
            if s.include
                && let Some(p) = cands
                    .iter()
                    .rev()
                    .find(|r| r.ts.is_some_and(|t| t <= start))
                && p.ts < Some(start)
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
            fmt_i(ints.iter().copied().min()),
            fmt_i(ints.iter().copied().max()),
        ]);
    }
    out
}

/// A SQL script that makes tables `l` and `r` from `left` and `right` (one
/// partition each, rows in order) and runs `query`: a failure's minimal
/// reproduction, for `tsjoin-cli` or any tsjoin session. (A failure that
/// needs several partitions shows only with them: the verify command
/// names the partitions the case ran on.)
///
/// ```
/// use datafusion_tsjoin::testing::reference::{Row, script};
/// let row = Row { id: 0, ts: Some(5), k: None, v: Some(f64::NAN), i: Some(1) };
/// let sql = script(&[row.clone()], &[row], "SELECT * FROM l");
/// assert!(sql.contains("CREATE TABLE l") && sql.contains("'NaN'"));
/// ```
pub fn script(left: &[Row], right: &[Row], query: &str) -> String {
    format!(
        "SET datafusion.execution.target_partitions = 1;\n{}\n{}\n{query};\n",
        table_sql("l", left),
        table_sql("r", right)
    )
}

/// The `CREATE TABLE name AS …` statement of `rows` (one partition, rows
/// in order), as [`script`] writes it.
///
/// ```
/// use datafusion_tsjoin::testing::reference::table_sql;
/// assert!(table_sql("r2", &[]).starts_with("CREATE TABLE r2 AS"));
/// ```
pub fn table_sql(name: &str, rows: &[Row]) -> String {
    let f = |v: Option<f64>| match v {
        None => "NULL".to_string(),
        Some(x) if x.is_nan() => "'NaN'".to_string(),
        Some(x) => format!("{x:?}"),
    };
    let i = |v: Option<i64>| v.map_or("NULL".to_string(), |x| x.to_string());
    // An empty table still needs one typed row to select from.
    let (values, filter) = if rows.is_empty() {
        ("(0, NULL, NULL, NULL, NULL)".to_string(), " WHERE false")
    } else {
        let values: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "({}, {}, {}, {}, {})",
                    r.id,
                    i(r.ts),
                    i(r.k),
                    f(r.v),
                    i(r.i)
                )
            })
            .collect();
        (values.join(", "), "")
    };
    format!(
        "CREATE TABLE {name} AS SELECT CAST(id AS BIGINT) AS id, \
         to_timestamp_millis(CAST(ts AS BIGINT)) AS ts, CAST(k AS BIGINT) AS k, \
         CAST(v AS DOUBLE) AS v, CAST(i AS BIGINT) AS i \
         FROM (VALUES {values}) AS x(id, ts, k, v, i){filter};"
    )
}

/// Splits `rows` into `parts` contiguous partitions of small random
/// batches (1–7 rows: batch boundaries are a classic bug source).
pub fn split(rng: &mut Rng, rows: &[Row], parts: usize) -> Vec<Vec<RecordBatch>> {
    let mut out = vec![vec![]; parts.max(1)];
    let n = out.len();
    let mut start = 0;
    for (p, part) in out.iter_mut().enumerate() {
        let end = if p + 1 == n {
            rows.len()
        } else {
            rng.range(start as i64, rows.len() as i64 + 1) as usize
        };
        let mut s = start;
        while s < end {
            let e = (s + rng.range(1, 8) as usize).min(end);
            part.push(batch(&rows[s..e]));
            s = e;
        }
        start = end;
    }
    out
}
