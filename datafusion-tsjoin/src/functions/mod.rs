//! SQL functions tsjoin adds to a session.

mod first_last;
mod known;
mod percentile;

pub(crate) use first_last::Position;
pub use first_last::{FirstLast, first_last_udafs};
pub(crate) use known::KnownAggregate;
pub use percentile::{
    ApproxPercentile, ConstantArrayPlanner, HDR_MEDIAN, percentile_udafs,
    rename_approx_median,
};
pub(crate) use percentile::{PercentileGroups, PercentileSpec, percentile_spec};
