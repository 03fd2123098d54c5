//! [`Priority`]: a query's priority class, parsed from `tsjoin.priority`.

use datafusion::common::{Result, plan_err};
use std::fmt;
use std::str::FromStr;

/// A query's priority: higher runs first. `high`, `normal` and `low` are
/// 10, 0 and -10; any integer is accepted, so a deployment can use finer
/// classes.
///
/// ```
/// use datafusion_tsjoin::priority::Priority;
/// assert_eq!("high".parse::<Priority>().unwrap(), Priority::HIGH);
/// assert_eq!("-3".parse::<Priority>().unwrap().value(), -3);
/// assert!(Priority::HIGH > Priority::NORMAL && Priority::NORMAL > Priority::LOW);
/// assert!("urgent".parse::<Priority>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Priority(i32);

impl Priority {
    /// `high`: lower priorities pause while a query of this class runs.
    pub const HIGH: Priority = Priority(10);
    /// `normal`: the default.
    pub const NORMAL: Priority = Priority(0);
    /// `low`: runs when nothing above it is running.
    pub const LOW: Priority = Priority(-10);

    /// A priority of the given level (higher runs first).
    pub const fn new(value: i32) -> Self {
        Self(value)
    }

    /// The level as an integer.
    pub const fn value(self) -> i32 {
        self.0
    }
}

impl FromStr for Priority {
    type Err = datafusion::error::DataFusionError;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "high" => Ok(Self::HIGH),
            "normal" | "" => Ok(Self::NORMAL),
            "low" => Ok(Self::LOW),
            other => match other.parse::<i32>() {
                Ok(v) => Ok(Self(v)),
                Err(_) => plan_err!(
                    "invalid tsjoin.priority '{s}': expected high, normal, low or an integer"
                ),
            },
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::HIGH => f.write_str("high"),
            Self::NORMAL => f.write_str("normal"),
            Self::LOW => f.write_str("low"),
            Self(v) => write!(f, "{v}"),
        }
    }
}

impl datafusion::common::config::ConfigField for Priority {
    fn visit<V: datafusion::common::config::Visit>(
        &self,
        v: &mut V,
        key: &str,
        description: &'static str,
    ) {
        v.some(key, self, description)
    }

    fn set(&mut self, _key: &str, value: &str) -> Result<()> {
        *self = value.parse()?;
        Ok(())
    }

    fn reset(&mut self, _key: &str) -> Result<()> {
        *self = Self::default();
        Ok(())
    }
}
