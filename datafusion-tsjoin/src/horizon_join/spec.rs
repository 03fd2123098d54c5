//! The offsets of a HORIZON JOIN (RANGE or LIST) and what its operator
//! evaluates, shared by the logical node, the operator and the codec.

use crate::window_join::TimeScale;
use datafusion::common::{Result, plan_err};
use datafusion::physical_plan::PhysicalExpr;
use std::fmt;
use std::sync::Arc;

/// Most offsets one HORIZON JOIN may have: every left row becomes this many
/// (row, offset) pairs.
pub const MAX_HORIZON_OFFSETS: usize = 10_000;

/// The offsets as written, in nanoseconds.
///
/// ```
/// use datafusion_tsjoin::horizon_join::HorizonOffsets;
/// let r = HorizonOffsets::Range { from: 0, to: 2_000_000_000, step: 1_000_000_000 };
/// assert_eq!(r.nanos().unwrap(), vec![0, 1_000_000_000, 2_000_000_000]);
/// assert_eq!(r.to_string(), "RANGE FROM 0s TO 2s STEP 1s");
/// let l = HorizonOffsets::List(vec![-1_000_000, 0, 60_000_000_000]);
/// assert_eq!(l.to_string(), "LIST (-1T, 0, 1m)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub enum HorizonOffsets {
    /// `RANGE FROM from TO to STEP step`: `from, from + step, ...` up to `to`.
    Range {
        /// First offset.
        from: i64,
        /// Last offset (inclusive, if reached).
        to: i64,
        /// Positive step.
        step: i64,
    },
    /// `LIST (a, b, ...)`: strictly increasing offsets.
    List(Vec<i64>),
}

impl HorizonOffsets {
    /// Checks QuestDB's rules and expands to the offsets, in nanoseconds.
    pub fn nanos(&self) -> Result<Vec<i64>> {
        match self {
            Self::Range { from, to, step } => {
                if *step <= 0 {
                    return plan_err!("HORIZON JOIN RANGE STEP must be positive");
                }
                if from > to {
                    return plan_err!(
                        "HORIZON JOIN RANGE FROM must be less than or equal to TO"
                    );
                }
                let count = ((*to as i128 - *from as i128) / *step as i128) + 1;
                if count > MAX_HORIZON_OFFSETS as i128 {
                    return plan_err!(
                        "HORIZON JOIN has too many offsets ({count}); at most {MAX_HORIZON_OFFSETS} are supported"
                    );
                }
                Ok((0..count as i64).map(|i| from + i * step).collect())
            }
            Self::List(v) => {
                if v.is_empty() {
                    return plan_err!("at least one offset expression expected");
                }
                if v.len() > MAX_HORIZON_OFFSETS {
                    return plan_err!(
                        "HORIZON JOIN has too many offsets ({}); at most {MAX_HORIZON_OFFSETS} are supported",
                        v.len()
                    );
                }
                if v.windows(2).any(|w| w[0] >= w[1]) {
                    return plan_err!(
                        "HORIZON JOIN LIST offsets must be strictly increasing"
                    );
                }
                Ok(v.clone())
            }
        }
    }

    /// The offsets in ticks of `unit_nanos` nanoseconds, truncated toward
    /// zero (as QuestDB converts an interval to the table resolution); an
    /// error when truncation makes two offsets equal.
    pub fn ticks(&self, unit_nanos: i64) -> Result<Vec<i64>> {
        let v: Vec<i64> = self.nanos()?.iter().map(|n| n / unit_nanos).collect();
        if v.windows(2).any(|w| w[0] >= w[1]) {
            return plan_err!(
                "HORIZON JOIN offsets {self} are finer than the left timestamp's resolution ({unit_nanos} ns): two offsets become equal"
            );
        }
        Ok(v)
    }
}

/// `n` nanoseconds in the largest QuestDB unit that holds it exactly.
pub(crate) fn format_nanos(n: i64) -> String {
    if n == 0 {
        return "0".to_string();
    }
    const UNITS: [(i64, &str); 8] = [
        (604_800_000_000_000, "w"),
        (86_400_000_000_000, "d"),
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "T"),
        (1_000, "U"),
        (1, "n"),
    ];
    let (u, s) = UNITS.iter().find(|(u, _)| n % u == 0).unwrap();
    format!("{}{s}", n / u)
}

impl fmt::Display for HorizonOffsets {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Self::Range { from, to, step } => {
                let from = if *from == 0 {
                    "0s".to_string()
                } else {
                    format_nanos(*from)
                };
                write!(
                    f,
                    "RANGE FROM {from} TO {} STEP {}",
                    format_nanos(*to),
                    format_nanos(*step)
                )
            }
            Self::List(v) => {
                let v: Vec<String> = v.iter().map(|n| format_nanos(*n)).collect();
                write!(f, "LIST ({})", v.join(", "))
            }
        }
    }
}

/// One right table of a [`HorizonJoinSpec`].
#[derive(Debug, Clone)]
pub struct HorizonRightSpec {
    /// Equality keys over the left schema.
    pub left_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Equality keys over this right input's schema.
    pub right_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// This right input's time.
    pub right_ts: Arc<dyn PhysicalExpr>,
    /// Units of the left and this right time.
    pub scale: TimeScale,
    /// Left-only ON conditions: a left row for which this is not true gets
    /// no match in this table (the row is still emitted).
    pub left_filter: Option<Arc<dyn PhysicalExpr>>,
}

/// What a [`HorizonJoinExec`](super::HorizonJoinExec) evaluates.
#[derive(Debug, Clone)]
pub struct HorizonJoinSpec {
    /// Left time.
    pub left_ts: Arc<dyn PhysicalExpr>,
    /// The offsets as written.
    pub offsets: HorizonOffsets,
    /// One entry per right input, in join order.
    pub rights: Vec<HorizonRightSpec>,
}

impl HorizonJoinSpec {
    /// Every expression, for `apply_expressions`.
    pub(crate) fn all_exprs(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        let mut v = vec![&self.left_ts];
        for r in &self.rights {
            v.extend(r.left_keys.iter().chain(&r.right_keys));
            v.push(&r.right_ts);
            v.extend(r.left_filter.iter());
        }
        v
    }
}
