//! The naive ASOF / LT JOIN reference: for each left row, a scan of the
//! whole right side for the best match.

use super::Rng;
use super::reference::Row;

/// An ASOF JOIN query shape over tables `l` and `r`.
///
/// ```
/// use datafusion_tsjoin::testing::{Rng, asof::AsofShape};
/// let s = AsofShape::random(&mut Rng::new(3));
/// assert!(s.sql().contains("JOIN r"));
/// ```
#[derive(Clone, Debug)]
pub struct AsofShape {
    /// Match on `k` (`ON (k)` / `ON l.k = r.k`).
    pub keyed: bool,
    /// The right row at or after the left time (Snowflake's `<=`/`<`);
    /// false: at or before (ASOF, LT).
    pub forward: bool,
    /// Strictly before/after (LT JOIN, `>`/`<`).
    pub strict: bool,
    /// `TOLERANCE n` milliseconds (QuestDB's form only).
    pub tolerance: Option<i64>,
    /// Written as Snowflake's `MATCH_CONDITION` (else QuestDB's ASOF/LT).
    pub match_condition: bool,
}

impl AsofShape {
    /// A random shape.
    pub fn random(rng: &mut Rng) -> Self {
        let forward = rng.chance(0.3);
        let match_condition = forward || rng.chance(0.3);
        Self {
            keyed: rng.chance(0.7),
            forward,
            strict: rng.chance(0.4),
            tolerance: (!match_condition && rng.chance(0.4)).then(|| rng.range(1, 30)),
            match_condition,
        }
    }

    /// The query: per left row (by `l.id`) the matched right row's id and
    /// values.
    pub fn sql(&self) -> String {
        let select = "SELECT l.id, r.id AS rid, r.v, r.i FROM l";
        if self.match_condition {
            let op = match (self.forward, self.strict) {
                (false, false) => ">=",
                (false, true) => ">",
                (true, false) => "<=",
                (true, true) => "<",
            };
            let on = if self.keyed { " ON l.k = r.k" } else { "" };
            format!(
                "{select} ASOF JOIN r MATCH_CONDITION(l.ts {op} r.ts){on} ORDER BY l.id"
            )
        } else {
            let join = if self.strict { "LT" } else { "ASOF" };
            let on = if self.keyed { " ON (k)" } else { "" };
            let tol = self
                .tolerance
                .map_or(String::new(), |t| format!(" TOLERANCE {t}T"));
            format!("{select} {join} JOIN r{on}{tol} ORDER BY l.id")
        }
    }
}

/// The reference answer of `shape`'s query: every left row (NULL time or
/// no match: NULL right columns); backward, the latest right time wins and
/// among equal times the last row in input order; forward, the earliest
/// time and the first row. NULL keys match NULL keys.
pub fn asof(left: &[Row], right: &[Row], shape: &AsofShape) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = left
        .iter()
        .map(|l| {
            let mut best: Option<(i64, usize)> = None;
            if let Some(t) = l.ts {
                for (j, r) in right.iter().enumerate() {
                    let Some(rt) = r.ts else { continue };
                    if shape.keyed && r.k != l.k {
                        continue;
                    }
                    let ok = match (shape.forward, shape.strict) {
                        (false, false) => rt <= t,
                        (false, true) => rt < t,
                        (true, false) => rt >= t,
                        (true, true) => rt > t,
                    };
                    if !ok || shape.tolerance.is_some_and(|tol| (rt - t).abs() > tol) {
                        continue;
                    }
                    let better = match best {
                        None => true,
                        Some((bt, _)) if shape.forward => rt < bt,
                        Some((bt, _)) => rt >= bt,
                    };
                    if better {
                        best = Some((rt, j));
                    }
                }
            }
            let int = |v: Option<i64>| v.map_or("NULL".to_string(), |x| x.to_string());
            match best {
                None => vec![
                    l.id.to_string(),
                    "NULL".into(),
                    "NULL".into(),
                    "NULL".into(),
                ],
                Some((_, j)) => vec![
                    l.id.to_string(),
                    right[j].id.to_string(),
                    super::reference::fmt_f(right[j].v),
                    int(right[j].i),
                ],
            }
        })
        .collect();
    out.sort_by_key(|r| r[0].parse::<i64>().unwrap_or(i64::MAX));
    out
}
