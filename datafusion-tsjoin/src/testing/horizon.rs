//! The naive HORIZON JOIN reference: for each left row and offset, a scan
//! of the whole right side for the ASOF match at the row's time plus the
//! offset. Used by `tests/horizon.rs` and `tsjoin-bench verify`.

use super::Rng;
use super::reference::{Row, fmt_f};

/// Which query a [`HorizonShape`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HorizonQuery {
    /// Every (left row, offset) pair: the matched right row and
    /// `h.timestamp`.
    Pairs,
    /// Markouts: aggregates per offset over the pairs (left and right
    /// values).
    Markouts,
    /// Two right tables (`r2` unkeyed) and a WHERE on the left side.
    TwoRights,
    /// Markouts over two right tables (`r2` unkeyed; `r`, when keyed, with
    /// a left-only ON filter): the fold looks up the second table row by
    /// row.
    MarkoutsTwoRights,
}

/// A HORIZON JOIN query shape over tables `l`, `r` (and `r2`) of
/// [`reference::schema`](super::reference::schema) (millisecond times).
///
/// ```
/// use datafusion_tsjoin::testing::{Rng, horizon::HorizonShape};
/// let s = HorizonShape::random(&mut Rng::new(3), 40);
/// assert!(s.sql().contains("HORIZON JOIN r") && !s.offsets.is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct HorizonShape {
    /// `ON (k)` on the first right table.
    pub keyed: bool,
    /// The offsets, milliseconds, ascending and distinct.
    pub offsets: Vec<i64>,
    /// The offsets as written (`RANGE FROM … TO … STEP …` or `LIST (…)`).
    pub horizon: String,
    /// The query.
    pub query: HorizonQuery,
}

impl HorizonShape {
    /// A random shape whose offsets reach about `span` milliseconds: RANGE
    /// or LIST, negative offsets too, in milliseconds or (now and then)
    /// seconds.
    pub fn random(rng: &mut Rng, span: i64) -> Self {
        let seconds = rng.chance(0.15);
        let (unit, scale) = if seconds { ("s", 1000) } else { ("T", 1) };
        let reach = (span / scale).max(2);
        // A bare `0` is QuestDB's only unitless offset.
        let lit = |v: i64| {
            if v == 0 {
                "0".to_string()
            } else {
                format!("{v}{unit}")
            }
        };
        let (offsets, horizon) = if rng.chance(0.5) {
            let from = rng.range(-reach, reach);
            let to = from + rng.range(0, reach);
            let step = rng.range(1, reach + 1);
            let offsets = (0..)
                .map(|i| from + i * step)
                .take_while(|o| *o <= to)
                .map(|o| o * scale)
                .collect();
            let sql =
                format!("RANGE FROM {} TO {} STEP {}", lit(from), lit(to), lit(step));
            (offsets, sql)
        } else {
            let n = rng.range(1, 6);
            let mut v: Vec<i64> = (0..n).map(|_| rng.range(-reach, reach)).collect();
            v.sort_unstable();
            v.dedup();
            let sql = v.iter().map(|o| lit(*o)).collect::<Vec<_>>().join(", ");
            (
                v.iter().map(|o| o * scale).collect(),
                format!("LIST ({sql})"),
            )
        };
        Self {
            keyed: rng.chance(0.7),
            offsets,
            horizon,
            query: *rng.pick(&[
                HorizonQuery::Pairs,
                HorizonQuery::Markouts,
                HorizonQuery::TwoRights,
                HorizonQuery::MarkoutsTwoRights,
            ]),
        }
    }

    /// The query's SQL.
    pub fn sql(&self) -> String {
        let on = if self.keyed { "ON (k) " } else { "" };
        let h = &self.horizon;
        match self.query {
            HorizonQuery::Pairs => format!(
                "SELECT l.id, h.offset, r.id, CAST(h.timestamp AS BIGINT) FROM l \
                 HORIZON JOIN r {on}{h} AS h ORDER BY l.id, h.offset"
            ),
            HorizonQuery::Markouts => format!(
                "SELECT h.offset, count(*), count(r.v), sum(r.v), sum(r.i), sum(l.i), \
                 sum(r.i - l.i), sum(coalesce(r.i, 7) * 2), sum(l.i * 3 - r.i), \
                 sum(CASE WHEN r.i > l.i THEN r.i ELSE l.i END), \
                 max(CAST(h.timestamp AS BIGINT)) \
                 FROM l HORIZON JOIN r {on}{h} AS h ORDER BY h.offset"
            ),
            HorizonQuery::TwoRights => format!(
                "SELECT l.id, h.offset, r.id, r2.id FROM l HORIZON JOIN r {on}\
                 HORIZON JOIN r2 {h} AS h WHERE l.i > 0 ORDER BY l.id, h.offset"
            ),
            HorizonQuery::MarkoutsTwoRights => {
                // Keyed, with a left-only ON filter: a row it rejects
                // matches nothing in `r` but still pairs with every offset.
                let on = if self.keyed {
                    "ON l.k = r.k AND l.i > 0 "
                } else {
                    ""
                };
                format!(
                    "SELECT h.offset, count(*), sum(r.i), sum(r2.i), \
                     sum(coalesce(r2.i, 5) - r.i) FROM l HORIZON JOIN r {on}\
                     HORIZON JOIN r2 {h} AS h ORDER BY h.offset"
                )
            }
        }
    }
}

/// The ASOF match of `l` in `right` at its time + `offset`: the latest
/// right time `<=` the target, the last row in input order among equal
/// times; keys compare NULL as a value. None for a NULL left time.
///
/// ```
/// use datafusion_tsjoin::testing::{Rng, horizon::asof_at, reference::random_rows};
/// let rows = random_rows(&mut Rng::new(1), 20, 10, 2);
/// let l = rows.iter().find(|r| r.ts.is_some()).unwrap();
/// assert!(asof_at(l, &rows, false, 0).is_some());
/// ```
pub fn asof_at(l: &Row, right: &[Row], keyed: bool, offset: i64) -> Option<usize> {
    let t = l.ts? + offset;
    let mut best: Option<(i64, usize)> = None;
    for (j, r) in right.iter().enumerate() {
        let Some(rt) = r.ts else { continue };
        if (keyed && r.k != l.k) || rt > t {
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

/// The reference answer of `shape`'s query over `left`, `right` and
/// `right2` (the second right table of [`HorizonQuery::TwoRights`]).
pub fn horizon(
    left: &[Row],
    right: &[Row],
    right2: &[Row],
    shape: &HorizonShape,
) -> Vec<Vec<String>> {
    let mut sorted = left.to_vec();
    sorted.sort_by_key(|l| l.id);
    let keyed = shape.keyed;
    let mut out = vec![];
    match shape.query {
        HorizonQuery::Pairs => {
            for l in &sorted {
                for &o in &shape.offsets {
                    let m = asof_at(l, right, keyed, o);
                    out.push(vec![
                        l.id.to_string(),
                        o.to_string(),
                        show(m.map(|j| right[j].id)),
                        show(l.ts.map(|t| t + o)),
                    ]);
                }
            }
        }
        HorizonQuery::Markouts if left.is_empty() => {}
        HorizonQuery::Markouts => {
            for &o in &shape.offsets {
                let matched: Vec<Option<&Row>> = left
                    .iter()
                    .map(|l| asof_at(l, right, keyed, o).map(|j| &right[j]))
                    .collect();
                let rv: Vec<f64> = matched.iter().filter_map(|r| (*r)?.v).collect();
                let ri: Vec<i64> = matched.iter().filter_map(|r| (*r)?.i).collect();
                let li: Vec<i64> = left.iter().filter_map(|l| l.i).collect();
                let diff: Vec<i64> = left
                    .iter()
                    .zip(&matched)
                    .filter_map(|(l, r)| Some(r.as_ref()?.i? - l.i?))
                    .collect();
                let isum = |v: &[i64]| (!v.is_empty()).then(|| v.iter().sum::<i64>());
                let pairs = || left.iter().zip(&matched);
                let or7: Vec<i64> = matched
                    .iter()
                    .map(|r| r.and_then(|r| r.i).unwrap_or(7) * 2)
                    .collect();
                let tripled: Vec<i64> = pairs()
                    .filter_map(|(l, r)| Some(l.i? * 3 - r.as_ref()?.i?))
                    .collect();
                let case: Vec<i64> = pairs()
                    .filter_map(|(l, r)| match (r.and_then(|r| r.i), l.i) {
                        (Some(ri), Some(li)) if ri > li => Some(ri),
                        (_, li) => li,
                    })
                    .collect();
                let latest = left.iter().filter_map(|l| Some(l.ts? + o)).max();
                out.push(vec![
                    o.to_string(),
                    left.len().to_string(),
                    rv.len().to_string(),
                    fmt_f((!rv.is_empty()).then(|| rv.iter().sum::<f64>())),
                    show(isum(&ri)),
                    show(isum(&li)),
                    show(isum(&diff)),
                    show(isum(&or7)),
                    show(isum(&tripled)),
                    show(isum(&case)),
                    show(latest),
                ]);
            }
        }
        HorizonQuery::MarkoutsTwoRights if left.is_empty() => {}
        HorizonQuery::MarkoutsTwoRights => {
            for &o in &shape.offsets {
                let at = |rows: &[Row], keyed: bool, l: &Row| {
                    asof_at(l, rows, keyed, o).and_then(|j| rows[j].i)
                };
                let pairs: Vec<(Option<i64>, Option<i64>)> = left
                    .iter()
                    .map(|l| {
                        let passes = !keyed || l.i.is_some_and(|i| i > 0);
                        let r = if passes { at(right, keyed, l) } else { None };
                        (r, at(right2, false, l))
                    })
                    .collect();
                let isum = |v: Vec<i64>| (!v.is_empty()).then(|| v.iter().sum::<i64>());
                out.push(vec![
                    o.to_string(),
                    left.len().to_string(),
                    show(isum(pairs.iter().filter_map(|p| p.0).collect())),
                    show(isum(pairs.iter().filter_map(|p| p.1).collect())),
                    show(isum(
                        pairs
                            .iter()
                            .filter_map(|&(r, r2)| Some(r2.unwrap_or(5) - r?))
                            .collect(),
                    )),
                ]);
            }
        }
        HorizonQuery::TwoRights => {
            for l in sorted.iter().filter(|l| l.i.is_some_and(|v| v > 0)) {
                for &o in &shape.offsets {
                    let m = asof_at(l, right, keyed, o);
                    let m2 = asof_at(l, right2, false, o);
                    out.push(vec![
                        l.id.to_string(),
                        o.to_string(),
                        show(m.map(|j| right[j].id)),
                        show(m2.map(|j| right2[j].id)),
                    ]);
                }
            }
        }
    }
    out
}
