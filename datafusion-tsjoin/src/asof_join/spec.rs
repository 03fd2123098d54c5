//! What an ASOF JOIN matches: direction, strictness and tolerance, shared
//! by the logical node, the operator and the codec.

use crate::window_join::TimeScale;
use datafusion::common::JoinType;
use datafusion::physical_plan::PhysicalExpr;
use std::fmt;
use std::sync::Arc;

/// Which way from the left time a match is looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd)]
pub enum AsofDirection {
    /// The latest right row at or before the left time (QuestDB ASOF/LT).
    Backward,
    /// The earliest right row at or after the left time (Snowflake `<=`).
    Forward,
}

/// Direction and strictness of the time match.
///
/// ```
/// use datafusion_tsjoin::asof_join::{AsofDirection, AsofMatch};
/// let lt = AsofMatch { direction: AsofDirection::Backward, strict: true };
/// assert_eq!(lt.to_string(), "right < left");
/// assert_eq!(AsofMatch::parse(&lt.as_str()), Some(lt));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd)]
pub struct AsofMatch {
    /// Backward or forward.
    pub direction: AsofDirection,
    /// Strict inequality (LT JOIN, `>` / `<`).
    pub strict: bool,
}

impl AsofMatch {
    /// QuestDB's ASOF JOIN: `right <= left`.
    pub const ASOF: Self = Self {
        direction: AsofDirection::Backward,
        strict: false,
    };
    /// QuestDB's LT JOIN: `right < left`.
    pub const LT: Self = Self {
        direction: AsofDirection::Backward,
        strict: true,
    };

    /// Short name: `backward`, `backward_strict`, `forward`, `forward_strict`.
    pub fn as_str(&self) -> String {
        let d = match self.direction {
            AsofDirection::Backward => "backward",
            AsofDirection::Forward => "forward",
        };
        if self.strict {
            format!("{d}_strict")
        } else {
            d.to_string()
        }
    }

    /// Inverse of [`Self::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        let (d, strict) = match s.strip_suffix("_strict") {
            Some(d) => (d, true),
            None => (s, false),
        };
        let direction = match d {
            "backward" => AsofDirection::Backward,
            "forward" => AsofDirection::Forward,
            _ => return None,
        };
        Some(Self { direction, strict })
    }
}

impl fmt::Display for AsofMatch {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let op = match (self.direction, self.strict) {
            (AsofDirection::Backward, false) => "<=",
            (AsofDirection::Backward, true) => "<",
            (AsofDirection::Forward, false) => ">=",
            (AsofDirection::Forward, true) => ">",
        };
        write!(f, "right {op} left")
    }
}

/// QuestDB's TOLERANCE units: `n U T s m h d w`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd)]
pub enum ToleranceUnit {
    /// `n`
    Nanosecond,
    /// `U`
    Microsecond,
    /// `T`
    Millisecond,
    /// `s`
    Second,
    /// `m`
    Minute,
    /// `h`
    Hour,
    /// `d`
    Day,
    /// `w`
    Week,
}

impl ToleranceUnit {
    /// The unit of QuestDB's letter (case-sensitive: `m` minutes, `U` micros).
    ///
    /// ```
    /// use datafusion_tsjoin::asof_join::ToleranceUnit;
    /// assert_eq!(ToleranceUnit::parse("T"), Some(ToleranceUnit::Millisecond));
    /// assert_eq!(ToleranceUnit::parse("y"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "n" => Self::Nanosecond,
            "U" => Self::Microsecond,
            "T" => Self::Millisecond,
            "s" => Self::Second,
            "m" => Self::Minute,
            "h" => Self::Hour,
            "d" => Self::Day,
            "w" => Self::Week,
            _ => return None,
        })
    }

    /// The letter.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Nanosecond => "n",
            Self::Microsecond => "U",
            Self::Millisecond => "T",
            Self::Second => "s",
            Self::Minute => "m",
            Self::Hour => "h",
            Self::Day => "d",
            Self::Week => "w",
        }
    }

    /// Nanoseconds per unit.
    pub fn nanos(&self) -> i64 {
        match self {
            Self::Nanosecond => 1,
            Self::Microsecond => 1_000,
            Self::Millisecond => 1_000_000,
            Self::Second => 1_000_000_000,
            Self::Minute => 60_000_000_000,
            Self::Hour => 3_600_000_000_000,
            Self::Day => 86_400_000_000_000,
            Self::Week => 604_800_000_000_000,
        }
    }
}

/// A TOLERANCE: a match further than this from the left time is no match
/// (the boundary is inclusive).
///
/// ```
/// use datafusion_tsjoin::asof_join::{Tolerance, ToleranceUnit};
/// let t = Tolerance { value: 2, unit: ToleranceUnit::Second };
/// assert_eq!(t.to_string(), "2s");
/// assert_eq!(t.ticks(1_000), 2_000_000); // in microseconds
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd)]
pub struct Tolerance {
    /// Positive amount.
    pub value: i64,
    /// Unit.
    pub unit: ToleranceUnit,
}

impl Tolerance {
    /// The tolerance in ticks of `common_nanos` nanoseconds (truncated,
    /// saturating).
    pub fn ticks(&self, common_nanos: i64) -> i64 {
        let t = self.value as i128 * self.unit.nanos() as i128 / common_nanos as i128;
        t.min(i64::MAX as i128) as i64
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}{}", self.value, self.unit.as_str())
    }
}

/// Whether a join of `join_type` emits the right rows no left row matched
/// (after the left ones, with NULL left columns): Right and Full.
pub(crate) fn emits_unmatched_right(join_type: JoinType) -> bool {
    matches!(join_type, JoinType::Right | JoinType::Full)
}

/// Whether a join of `join_type` emits the left rows that found no match
/// (with NULL right columns): Left (QuestDB's ASOF JOIN) and Full.
pub(crate) fn emits_unmatched_left(join_type: JoinType) -> bool {
    matches!(join_type, JoinType::Left | JoinType::Full)
}

/// What an [`AsofJoinExec`](super::AsofJoinExec) evaluates.
#[derive(Debug, Clone)]
pub struct AsofJoinSpec {
    /// Equality keys over the left schema.
    pub left_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Equality keys over the right schema (same types, pairwise).
    pub right_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Left time.
    pub left_ts: Arc<dyn PhysicalExpr>,
    /// Right time.
    pub right_ts: Arc<dyn PhysicalExpr>,
    /// Units of both times.
    pub scale: TimeScale,
    /// Direction and strictness.
    pub matching: AsofMatch,
    /// Optional tolerance.
    pub tolerance: Option<Tolerance>,
    /// Left-only ON conditions: a left row for which this is not true gets
    /// no match (it is still emitted).
    pub left_filter: Option<Arc<dyn PhysicalExpr>>,
    /// Which rows without a match are emitted (see
    /// [`AsofJoinClause::join_type`](super::AsofJoinClause::join_type)).
    pub join_type: JoinType,
    /// ON conditions reading both sides, over the left columns then the
    /// right input's (see
    /// [`AsofJoinClause::pair_filter`](super::AsofJoinClause::pair_filter)).
    pub pair_filter: Option<Arc<dyn PhysicalExpr>>,
}

impl AsofJoinSpec {
    /// Every expression, for `apply_expressions`.
    pub(crate) fn all_exprs(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        let mut v: Vec<_> = self.left_keys.iter().chain(&self.right_keys).collect();
        v.push(&self.left_ts);
        v.push(&self.right_ts);
        v.extend(self.left_filter.iter());
        v.extend(self.pair_filter.iter());
        v
    }
}
