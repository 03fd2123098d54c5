//! The naive `approx_percentile` reference: sort a group's values, take
//! QuestDB's nearest rank, round it to its HdrHistogram bucket's highest
//! (p = 0: lowest) equivalent value; the random tables and query shapes it
//! is checked on. Written from the documented layout
//! (design/approx-percentile.md §2.4), not from `functions::percentile`.
//! Used by `tests/percentile.rs` and `tsjoin-bench verify`.

use super::Rng;
use datafusion::arrow::array::{
    ArrayRef, Float32Array, Float64Array, Int32Array, Int64Array, RecordBatch,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `subBucketCountMagnitude` per precision: `ceil(log2(2 * 10^precision))`.
pub const M: [u32; 6] = [1, 5, 8, 11, 15, 18];

/// Java's `getValueAtPercentile` rank (1-based) among `n` values: one ulp
/// off `p * 100` before rounding up.
///
/// ```
/// use datafusion_tsjoin::testing::percentile::rank;
/// assert_eq!(rank(0.07, 100), 7);
/// assert_eq!(rank(0.0, 100), 1);
/// ```
pub fn rank(p: f64, n: usize) -> usize {
    let pct = p * 100.0;
    let down = if pct == 0.0 {
        -f64::from_bits(1)
    } else {
        f64::from_bits(pct.to_bits() - 1)
    };
    let req = down.clamp(0.0, 100.0);
    (((req * n as f64) / 100.0).ceil() as usize).max(1)
}

/// HdrHistogram's highest (or lowest) value equivalent to integer `v`:
/// buckets hold `2^m` values at first, then double in width.
///
/// ```
/// use datafusion_tsjoin::testing::percentile::equivalent;
/// assert_eq!(equivalent(100, 5, false), 103);
/// assert_eq!(equivalent(100, 5, true), 100);
/// ```
pub fn equivalent(v: u64, m: u32, lowest: bool) -> u64 {
    let mut width = 1u64;
    while (v as u128) >= (1u128 << m) * width as u128 {
        width *= 2;
    }
    let lo = v / width * width;
    if lowest { lo } else { lo + (width - 1) }
}

/// The answer for non-negative integers (None for no values).
///
/// ```
/// use datafusion_tsjoin::testing::percentile::reference_int;
/// let v: Vec<i64> = (1..=100).collect();
/// assert_eq!(reference_int(&v, 0.5, 1), Some(51.0));
/// ```
pub fn reference_int(values: &[i64], p: f64, precision: usize) -> Option<f64> {
    let mut v: Vec<i64> = values.to_vec();
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let x = v[rank(p, v.len()) - 1] as u64;
    Some(equivalent(x, M[precision], p * 100.0 == 0.0) as f64)
}

/// The binary exponent of a positive normal double, exactly.
fn exponent(v: f64) -> i32 {
    let e = v.log2().floor() as i32;
    // log2 can round across a power of two; fix it exactly.
    (e - 1..=e + 1)
        .rev()
        .find(|&e| 2f64.powi(e) <= v)
        .unwrap_or(e)
}

/// The answer for finite, non-negative doubles whose range fits
/// ([`double_error`] is None). DoubleHistogram: values are scaled so that
/// the lowest positive one's power of two lands on `2^(m-1)`, truncated to
/// integers, and reported back through the same scale.
///
/// ```
/// use datafusion_tsjoin::testing::percentile::reference_double;
/// let v: Vec<f64> = (1..=100).map(f64::from).collect();
/// assert_eq!(reference_double(&v, 0.5, 1), Some(51.9375));
/// ```
pub fn reference_double(values: &[f64], p: f64, precision: usize) -> Option<f64> {
    let mut v: Vec<f64> = values.to_vec();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let x = v[rank(p, v.len()) - 1];
    if x == 0.0 {
        return Some(0.0);
    }
    let min_pos = v.iter().copied().find(|&y| y > 0.0)?;
    let k = exponent(min_pos) - (M[precision] as i32 - 1);
    let int = (x * 2f64.powi(-k)).floor() as u64;
    Some(equivalent(int, M[precision], p * 100.0 == 0.0) as f64 * 2f64.powi(k))
}

/// Why a `DoubleHistogram` of `precision` cannot take `values` (finite
/// ones; NaN and infinities are skipped before): a negative value, a value
/// above 2^1022, or a range whose scaled integers pass 2^63 or whose scale
/// is not a normal double.
///
/// ```
/// use datafusion_tsjoin::testing::percentile::double_error;
/// assert!(double_error(&[1e-10, 1e10], 1).is_some());
/// assert!(double_error(&[1e-6, 1e9], 1).is_none());
/// assert!(double_error(&[-1.0], 1).is_some());
/// ```
pub fn double_error(values: &[f64], precision: usize) -> Option<&'static str> {
    double_errors(values, precision).into_iter().next()
}

/// Every reason of [`double_error`] that `values` give. Which one a query
/// reports depends on the order the values arrive in (a range already too
/// wide fails before a later negative value is seen), so a reference
/// accepts any of them.
///
/// ```
/// use datafusion_tsjoin::testing::percentile::double_errors;
/// assert_eq!(double_errors(&[2.0e17, 235.3, -1.0], 4).len(), 2);
/// assert!(double_errors(&[1.0, 2.0], 1).is_empty());
/// ```
pub fn double_errors(values: &[f64], precision: usize) -> Vec<&'static str> {
    let mut errors = vec![];
    if values.iter().any(|v| *v < 0.0) {
        errors.push("Negative values cannot be recorded");
    }
    if values.iter().any(|v| *v > 2f64.powi(1022)) {
        errors.push("Values above 4.49423283715579E307 cannot be recorded");
    }
    let pos = values.iter().copied().filter(|v| *v > 0.0);
    if let (Some(lo), Some(hi)) = (pos.clone().reduce(f64::min), pos.reduce(f64::max)) {
        let m = M[precision] as i32;
        let k = exponent(lo) - (m - 1);
        // The largest value's integer must stay below 2^63.
        if k < -1022 || exponent(hi) - k >= 63 {
            errors.push("Cannot resize histogram covered range");
        }
    }
    errors
}

/// One row of the percentile case's table `g`.
#[derive(Clone, Debug, PartialEq)]
pub struct PctRow {
    /// Row number (unique).
    pub id: i64,
    /// Group key.
    pub k: Option<i64>,
    /// BIGINT values (the integer histogram).
    pub x: Option<i64>,
    /// INT values.
    pub n: Option<i32>,
    /// DOUBLE values (NaN, infinities, zeros, -0.0 too).
    pub d: Option<f64>,
    /// REAL values.
    pub f: Option<f32>,
}

/// The table `g`'s schema.
pub fn pct_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("k", DataType::Int64, true),
        Field::new("x", DataType::Int64, true),
        Field::new("n", DataType::Int32, true),
        Field::new("d", DataType::Float64, true),
        Field::new("f", DataType::Float32, true),
    ]))
}

/// `rows` as one batch of [`pct_schema`].
pub fn pct_batch(rows: &[PctRow]) -> RecordBatch {
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.id))),
        Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.k))),
        Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.x))),
        Arc::new(Int32Array::from_iter(rows.iter().map(|r| r.n))),
        Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.d))),
        Arc::new(Float32Array::from_iter(rows.iter().map(|r| r.f))),
    ];
    RecordBatch::try_new(pct_schema(), cols).expect("columns match the schema")
}

/// The regime a table's values are drawn from.
#[derive(Clone, Copy, Debug)]
struct Regime {
    /// Values up to `scale`, log-uniform.
    scale: f64,
    /// Whole numbers only (duplicates).
    whole: bool,
    /// Chance of a NULL.
    nulls: f64,
    /// Now and then a negative value (an error).
    negative: bool,
    /// Values from 1e-10 to 1e10 (too wide a double range at most
    /// precisions).
    wide: bool,
}

impl Regime {
    fn random(rng: &mut Rng) -> Self {
        Self {
            scale: *rng.pick(&[10.0, 1e3, 1e6, 1e12, 1e18]),
            whole: rng.chance(0.4),
            nulls: *rng.pick(&[0.0, 0.05, 0.3, 0.9]),
            negative: rng.chance(0.03),
            wide: rng.chance(0.04),
        }
    }

    fn draw(&self, rng: &mut Rng) -> f64 {
        let u = rng.below(1 << 30) as f64 / (1u64 << 30) as f64;
        let w = 0.5 + rng.below(1 << 20) as f64 / (1u64 << 20) as f64;
        let v = if self.wide {
            10f64.powf(-10.0 + 20.0 * u)
        } else {
            self.scale.powf(u) * w
        };
        if self.whole { v.round() } else { v }
    }

    fn int(&self, rng: &mut Rng) -> Option<i64> {
        if rng.chance(self.nulls) {
            return None;
        }
        if self.negative && rng.chance(0.05) {
            return Some(-rng.range(1, 100));
        }
        Some(match rng.below(30) {
            0 => 0,
            1 => i64::MAX / 3,
            _ => self.draw(rng).min(i64::MAX as f64 / 2.0) as i64,
        })
    }

    fn double(&self, rng: &mut Rng) -> Option<f64> {
        if rng.chance(self.nulls) {
            return None;
        }
        if self.negative && rng.chance(0.05) {
            return Some(-self.draw(rng) - 1.0);
        }
        Some(match rng.below(40) {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            3 => 0.0,
            4 => -0.0,
            _ => self.draw(rng),
        })
    }
}

/// A random table: skewed keys with NULL, values of one regime per table.
///
/// ```
/// use datafusion_tsjoin::testing::{Rng, percentile::pct_rows};
/// assert_eq!(pct_rows(&mut Rng::new(2), 30).len(), 30);
/// ```
pub fn pct_rows(rng: &mut Rng, n: usize) -> Vec<PctRow> {
    let ints = Regime::random(rng);
    let doubles = Regime::random(rng);
    let keys = *rng.pick(&[1i64, 3, 8, 200]);
    (0..n)
        .map(|id| PctRow {
            id: id as i64,
            k: (!rng.chance(0.05)).then(|| {
                if rng.chance(0.4) {
                    0
                } else {
                    rng.range(0, keys)
                }
            }),
            x: ints.int(rng),
            n: ints
                .int(rng)
                .map(|v| v.clamp(i32::MIN as i64, i32::MAX as i64) as i32),
            d: doubles.double(rng),
            f: doubles.double(rng).map(|v| v as f32),
        })
        .collect()
}

/// The value column an aggregate reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PctColumn {
    /// BIGINT `x`.
    X,
    /// INT `n`.
    N,
    /// DOUBLE `d`.
    D,
    /// REAL `f`.
    F,
}

impl PctColumn {
    fn name(self) -> &'static str {
        match self {
            Self::X => "x",
            Self::N => "n",
            Self::D => "d",
            Self::F => "f",
        }
    }
}

/// One `approx_percentile` / `approx_median` call.
#[derive(Clone, Debug)]
pub struct PctCall {
    /// The value column.
    pub column: PctColumn,
    /// The percentiles (one, or several in the array form).
    pub ps: Vec<f64>,
    /// The array form `ARRAY[p1, …]` (a list answer).
    pub list: bool,
    /// The precision argument (default 1).
    pub precision: Option<u8>,
    /// Written as `approx_median`.
    pub median: bool,
}

impl PctCall {
    fn random(rng: &mut Rng, list_ok: bool) -> Self {
        let p = |rng: &mut Rng| -> f64 {
            match rng.below(8) {
                0 => 0.0,
                1 => 1.0,
                2 => 0.5,
                3 => 0.99,
                4 => 0.07,
                _ => rng.below(1001) as f64 / 1000.0,
            }
        };
        let column = *rng.pick(&[PctColumn::X, PctColumn::N, PctColumn::D, PctColumn::F]);
        let precision = rng.chance(0.7).then(|| rng.below(6) as u8);
        match rng.below(6) {
            0 => Self {
                column,
                ps: vec![0.5],
                list: false,
                precision,
                median: true,
            },
            1 if list_ok => Self {
                column,
                ps: (0..rng.range(1, 5)).map(|_| p(rng)).collect(),
                list: true,
                precision,
                median: false,
            },
            _ => Self {
                column,
                ps: vec![p(rng)],
                list: false,
                precision,
                median: false,
            },
        }
    }

    fn sql(&self) -> String {
        let c = self.column.name();
        let prec = self.precision.map_or(String::new(), |p| format!(", {p}"));
        if self.median {
            return format!("approx_median({c}{prec})");
        }
        let ps: Vec<String> = self.ps.iter().map(|p| format!("{p:?}")).collect();
        if self.list {
            format!("approx_percentile({c}, ARRAY[{}]{prec})", ps.join(", "))
        } else {
            format!("approx_percentile({c}, {}{prec})", ps[0])
        }
    }

    /// The answer over `rows` (one group), as text; Err for values the
    /// histogram rejects.
    fn answer(&self, rows: &[&PctRow]) -> Result<String, Vec<&'static str>> {
        let precision = self.precision.unwrap_or(1) as usize;
        let answers: Vec<Option<f64>> = match self.column {
            PctColumn::X | PctColumn::N => {
                let v: Vec<i64> = rows
                    .iter()
                    .filter_map(|r| match self.column {
                        PctColumn::X => r.x,
                        _ => r.n.map(i64::from),
                    })
                    .collect();
                if v.iter().any(|x| *x < 0) {
                    return Err(vec!["Histogram recorded value cannot be negative."]);
                }
                self.ps
                    .iter()
                    .map(|p| reference_int(&v, *p, precision))
                    .collect()
            }
            PctColumn::D | PctColumn::F => {
                let v: Vec<f64> = rows
                    .iter()
                    .filter_map(|r| match self.column {
                        PctColumn::D => r.d,
                        _ => r.f.map(f64::from),
                    })
                    .filter(|v| v.is_finite())
                    .collect();
                let errors = double_errors(&v, precision);
                if !errors.is_empty() {
                    return Err(errors);
                }
                self.ps
                    .iter()
                    .map(|p| reference_double(&v, *p, precision))
                    .collect()
            }
        };
        let show = |v: &Option<f64>| v.map_or("NULL".to_string(), |v| format!("{v:?}"));
        // The array form: NULL (not a list of NULLs) for a group without
        // values.
        Ok(if self.list && answers.iter().all(Option::is_some) {
            let all: Vec<String> = answers.iter().map(show).collect();
            format!("[{}]", all.join(", "))
        } else if self.list {
            "NULL".to_string()
        } else {
            show(&answers[0])
        })
    }
}

/// How the calls are used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PctForm {
    /// `GROUP BY k` (the GroupsAccumulator).
    Grouped,
    /// No GROUP BY: one row, also over an empty table.
    Global,
    /// `OVER (PARTITION BY k)`: the Accumulator, per row.
    Partition,
    /// `OVER (PARTITION BY k ORDER BY id)`: a running answer per row.
    Running,
}

/// A percentile query over table `g` of [`pct_schema`].
///
/// ```
/// use datafusion_tsjoin::testing::{Rng, percentile::PctShape};
/// let s = PctShape::random(&mut Rng::new(4));
/// assert!(s.sql().contains("FROM g"));
/// ```
#[derive(Clone, Debug)]
pub struct PctShape {
    /// How the calls are used.
    pub form: PctForm,
    /// The aggregate calls (one or more).
    pub calls: Vec<PctCall>,
}

impl PctShape {
    /// A random shape.
    pub fn random(rng: &mut Rng) -> Self {
        let form = *rng.pick(&[
            PctForm::Grouped,
            PctForm::Grouped,
            PctForm::Global,
            PctForm::Partition,
            PctForm::Running,
        ]);
        let list_ok = matches!(form, PctForm::Grouped | PctForm::Global);
        let calls = (0..rng.range(1, 4))
            .map(|_| PctCall::random(rng, list_ok))
            .collect();
        Self { form, calls }
    }

    /// The query's SQL (its rows in a canonical order).
    pub fn sql(&self) -> String {
        // Aliased: the same call twice would be a duplicate name.
        let alias = |i: usize, c: String| format!("{c} AS a{i}");
        let calls: Vec<String> = self.calls.iter().map(PctCall::sql).collect();
        match self.form {
            PctForm::Grouped => {
                let calls: Vec<String> = calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| alias(i, c))
                    .collect();
                format!(
                    "SELECT k, {} FROM g GROUP BY k ORDER BY k",
                    calls.join(", ")
                )
            }
            PctForm::Global => {
                let calls: Vec<String> = calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| alias(i, c))
                    .collect();
                format!("SELECT {} FROM g", calls.join(", "))
            }
            PctForm::Partition | PctForm::Running => {
                let order = if self.form == PctForm::Running {
                    " ORDER BY id"
                } else {
                    ""
                };
                let over: Vec<String> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, c)| alias(i, format!("{c} OVER (PARTITION BY k{order})")))
                    .collect();
                format!("SELECT id, {} FROM g ORDER BY id", over.join(", "))
            }
        }
    }

    /// The reference answer (rows as text, floats exactly: `{:?}`), or
    /// every error the histograms raise (which one a query reports depends
    /// on the order its partitions and calls run in).
    pub fn reference(
        &self,
        rows: &[PctRow],
    ) -> Result<Vec<Vec<String>>, Vec<&'static str>> {
        let mut groups: BTreeMap<Option<i64>, Vec<&PctRow>> = BTreeMap::new();
        for r in rows {
            groups.entry(r.k).or_default().push(r);
        }
        let mut errors: Vec<&'static str> = groups
            .values()
            .flat_map(|m| self.calls.iter().filter_map(|c| c.answer(m).err()))
            .flatten()
            .collect();
        if self.form == PctForm::Global {
            let all: Vec<&PctRow> = rows.iter().collect();
            errors = self
                .calls
                .iter()
                .filter_map(|c| c.answer(&all).err())
                .flatten()
                .collect();
        }
        if !errors.is_empty() {
            errors.sort_unstable();
            errors.dedup();
            return Err(errors);
        }
        let answers = |members: &[&PctRow]| -> Result<Vec<String>, Vec<&'static str>> {
            self.calls.iter().map(|c| c.answer(members)).collect()
        };
        let key = |k: Option<i64>| k.map_or("NULL".to_string(), |k| k.to_string());
        let mut out = vec![];
        match self.form {
            PctForm::Grouped => {
                for (k, members) in &groups {
                    let mut row = vec![key(*k)];
                    row.extend(answers(members)?);
                    out.push(row);
                }
            }
            PctForm::Global => out.push(answers(&rows.iter().collect::<Vec<_>>())?),
            PctForm::Partition => {
                for members in groups.values() {
                    let a = answers(members)?;
                    for r in members {
                        let mut row = vec![r.id.to_string()];
                        row.extend(a.iter().cloned());
                        out.push(row);
                    }
                }
            }
            PctForm::Running => {
                // Every value is recorded by the end: the whole partition's
                // error is the query's.
                for members in groups.values() {
                    answers(members)?;
                    let mut members = members.clone();
                    members.sort_by_key(|r| r.id);
                    for i in 0..members.len() {
                        let mut row = vec![members[i].id.to_string()];
                        row.extend(answers(&members[..=i])?);
                        out.push(row);
                    }
                }
            }
        }
        out.sort();
        Ok(out)
    }
}

/// A SQL script that makes table `g` from `rows` and runs `query`.
///
/// ```
/// use datafusion_tsjoin::testing::{Rng, percentile::{pct_rows, pct_script}};
/// let sql = pct_script(&pct_rows(&mut Rng::new(1), 3), "SELECT * FROM g");
/// assert!(sql.contains("CREATE TABLE g"));
/// ```
pub fn pct_script(rows: &[PctRow], query: &str) -> String {
    let i = |v: Option<i64>| v.map_or("NULL".to_string(), |x| x.to_string());
    let f = |v: Option<f64>| match v {
        None => "NULL".to_string(),
        Some(x) if x.is_nan() => "'NaN'".to_string(),
        Some(x) if x.is_infinite() => format!("'{}inf'", if x < 0.0 { "-" } else { "" }),
        Some(x) => format!("'{x:?}'"),
    };
    let (values, filter) = if rows.is_empty() {
        (
            "(0, NULL, NULL, NULL, NULL, NULL)".to_string(),
            " WHERE false",
        )
    } else {
        let v: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "({}, {}, {}, {}, {}, {})",
                    r.id,
                    i(r.k),
                    i(r.x),
                    i(r.n.map(i64::from)),
                    f(r.d),
                    f(r.f.map(f64::from))
                )
            })
            .collect();
        (v.join(", "), "")
    };
    format!(
        "CREATE TABLE g AS SELECT CAST(id AS BIGINT) AS id, CAST(k AS BIGINT) AS k, \
         CAST(x AS BIGINT) AS x, CAST(n AS INT) AS n, CAST(CAST(d AS VARCHAR) AS DOUBLE) AS d, \
         CAST(CAST(f AS VARCHAR) AS REAL) AS f \
         FROM (VALUES {values}) AS v(id, k, x, n, d, f){filter};\n{query};\n"
    )
}
