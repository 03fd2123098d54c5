//! Window bounds (`N <unit> PRECEDING | FOLLOWING`), the prevailing mode and
//! timestamp-unit arithmetic shared by the logical node and the operator.

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::{Result, plan_err};
use datafusion::logical_expr::Expr;
use std::fmt;

/// Which side of the left row's timestamp a bound lies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd)]
pub enum Direction {
    /// `N PRECEDING`: `ts - N`
    Preceding,
    /// `N FOLLOWING`: `ts + N` (`CURRENT ROW` is `0 FOLLOWING`)
    Following,
}

impl Direction {
    /// `-1` for PRECEDING, `+1` for FOLLOWING.
    pub fn sign(self) -> i64 {
        match self {
            Direction::Preceding => -1,
            Direction::Following => 1,
        }
    }

    /// SQL keyword, lower case.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Preceding => "preceding",
            Direction::Following => "following",
        }
    }

    /// Parses `preceding` / `following` (any case).
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "preceding" => Some(Direction::Preceding),
            "following" => Some(Direction::Following),
            _ => None,
        }
    }
}

/// The unit of a bound's value. `Raw` means "in the left table's timestamp
/// resolution", as QuestDB reads a bound written without a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd)]
pub enum BoundUnit {
    /// No unit: the left timestamp's own resolution.
    Raw,
    /// nanosecond(s)
    Nanosecond,
    /// microsecond(s)
    Microsecond,
    /// millisecond(s)
    Millisecond,
    /// second(s)
    Second,
    /// minute(s)
    Minute,
    /// hour(s)
    Hour,
    /// day(s)
    Day,
}

impl BoundUnit {
    /// Parses a unit word, singular or plural, any case (`second`, `SECONDS`).
    ///
    /// ```
    /// use datafusion_tsjoin::window_join::BoundUnit;
    /// assert_eq!(BoundUnit::parse("Minutes"), Some(BoundUnit::Minute));
    /// assert_eq!(BoundUnit::parse("week"), None);
    /// ```
    pub fn parse(word: &str) -> Option<Self> {
        let w = word.to_ascii_lowercase();
        let w = w.strip_suffix('s').unwrap_or(&w);
        Some(match w {
            "nanosecond" => BoundUnit::Nanosecond,
            "microsecond" => BoundUnit::Microsecond,
            "millisecond" => BoundUnit::Millisecond,
            "second" => BoundUnit::Second,
            "minute" => BoundUnit::Minute,
            "hour" => BoundUnit::Hour,
            "day" => BoundUnit::Day,
            _ => return None,
        })
    }

    /// Canonical lower-case name (`raw` for no unit).
    pub fn as_str(self) -> &'static str {
        match self {
            BoundUnit::Raw => "raw",
            BoundUnit::Nanosecond => "nanosecond",
            BoundUnit::Microsecond => "microsecond",
            BoundUnit::Millisecond => "millisecond",
            BoundUnit::Second => "second",
            BoundUnit::Minute => "minute",
            BoundUnit::Hour => "hour",
            BoundUnit::Day => "day",
        }
    }

    /// Length of one unit in nanoseconds; `None` for [`BoundUnit::Raw`].
    pub fn nanos(self) -> Option<i64> {
        Some(match self {
            BoundUnit::Raw => return None,
            BoundUnit::Nanosecond => 1,
            BoundUnit::Microsecond => 1_000,
            BoundUnit::Millisecond => 1_000_000,
            BoundUnit::Second => 1_000_000_000,
            BoundUnit::Minute => 60_000_000_000,
            BoundUnit::Hour => 3_600_000_000_000,
            BoundUnit::Day => 86_400_000_000_000,
        })
    }
}

/// Whether the last candidate row at or before the window start joins the
/// window (QuestDB's default is INCLUDE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd)]
pub enum Prevailing {
    /// `INCLUDE PREVAILING` (the default)
    Include,
    /// `EXCLUDE PREVAILING`
    Exclude,
}

impl Prevailing {
    /// `include` / `exclude`
    pub fn as_str(self) -> &'static str {
        match self {
            Prevailing::Include => "include",
            Prevailing::Exclude => "exclude",
        }
    }

    /// Parses `include` / `exclude` (any case).
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "include" => Some(Prevailing::Include),
            "exclude" => Some(Prevailing::Exclude),
            _ => None,
        }
    }
}

/// One end of the window: `value unit direction`. The value is an integer
/// expression over left columns (a literal for constant bounds).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub struct WindowBound {
    /// Integer expression; constant or over left-table columns.
    pub value: Expr,
    /// Unit of `value`.
    pub unit: BoundUnit,
    /// PRECEDING or FOLLOWING.
    pub direction: Direction,
}

impl WindowBound {
    /// The literal value of a constant bound, if it is one.
    pub fn constant(&self) -> Option<i64> {
        constant_i64(&self.value)
    }
}

impl fmt::Display for WindowBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_bound(f, &self.value, self.unit, self.direction)
    }
}

/// Writes a bound as SQL reads it: `value [unit] preceding|following`.
pub(crate) fn fmt_bound(
    f: &mut fmt::Formatter<'_>,
    value: &dyn fmt::Display,
    unit: BoundUnit,
    direction: Direction,
) -> fmt::Result {
    match unit {
        BoundUnit::Raw => write!(f, "{value} {}", direction.as_str()),
        u => write!(f, "{value} {} {}", u.as_str(), direction.as_str()),
    }
}

/// The integer value of a literal expression (through casts and aliases).
pub(crate) fn constant_i64(e: &Expr) -> Option<i64> {
    use datafusion::common::ScalarValue;
    match e {
        Expr::Literal(v, _) => match v {
            ScalarValue::Int8(Some(x)) => Some(*x as i64),
            ScalarValue::Int16(Some(x)) => Some(*x as i64),
            ScalarValue::Int32(Some(x)) => Some(*x as i64),
            ScalarValue::Int64(Some(x)) => Some(*x),
            ScalarValue::UInt8(Some(x)) => Some(*x as i64),
            ScalarValue::UInt16(Some(x)) => Some(*x as i64),
            ScalarValue::UInt32(Some(x)) => Some(*x as i64),
            ScalarValue::UInt64(Some(x)) => i64::try_from(*x).ok(),
            _ => None,
        },
        Expr::Cast(c) => constant_i64(&c.expr),
        Expr::Alias(a) => constant_i64(&a.expr),
        _ => None,
    }
}

/// Nanoseconds per tick of an Arrow time unit.
pub(crate) fn unit_nanos(unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

/// The time unit of a designated-timestamp column, or a clear error.
pub(crate) fn timestamp_unit(column: &str, dt: &DataType) -> Result<TimeUnit> {
    match dt {
        DataType::Timestamp(u, _) => Ok(*u),
        other => plan_err!(
            "designated timestamp column {column} has type {other}; a WINDOW JOIN needs a timestamp column"
        ),
    }
}

/// Converts a bound value of `unit_nanos` nanoseconds per unit into ticks
/// of `common_nanos` nanoseconds. Sub-tick remainders are truncated toward
/// zero, as QuestDB does when it converts a bound to the table resolution;
/// `None` on overflow.
pub(crate) fn bound_to_ticks(
    value: i64,
    unit_nanos: i64,
    common_nanos: i64,
) -> Option<i64> {
    let ticks = value as i128 * unit_nanos as i128 / common_nanos as i128;
    i64::try_from(ticks).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_parse_singular_and_plural() {
        for w in ["second", "seconds", "SECOND", "Seconds"] {
            assert_eq!(BoundUnit::parse(w), Some(BoundUnit::Second));
        }
        assert_eq!(BoundUnit::parse("days"), Some(BoundUnit::Day));
        assert_eq!(BoundUnit::parse("month"), None);
        assert_eq!(BoundUnit::parse("weeks"), None);
    }

    #[test]
    fn bounds_convert_to_common_ticks() {
        let ns = |u: BoundUnit| u.nanos().unwrap();
        // 1 second in microsecond ticks
        assert_eq!(
            bound_to_ticks(1, ns(BoundUnit::Second), 1_000),
            Some(1_000_000)
        );
        // raw 5 in a millisecond left table, compared in nanoseconds
        assert_eq!(bound_to_ticks(5, 1_000_000, 1), Some(5_000_000));
        // 1500 ns in microsecond ticks truncates
        assert_eq!(
            bound_to_ticks(1500, ns(BoundUnit::Nanosecond), 1_000),
            Some(1)
        );
        assert_eq!(bound_to_ticks(i64::MAX, ns(BoundUnit::Day), 1), None);
    }
}
