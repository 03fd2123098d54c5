//! SQL functions tsjoin adds to a session.

mod first_last;
mod known;
mod order_key;
mod percentile;

pub(crate) use first_last::Position;
pub use first_last::{FirstLast, first_last_udafs};
pub(crate) use known::KnownAggregate;
pub(crate) use order_key::order_key_udf;
pub use percentile::{
    ApproxPercentile, ConstantArrayPlanner, HDR_MEDIAN, percentile_udafs,
    rename_approx_median,
};
pub(crate) use percentile::{PercentileGroups, PercentileSpec, percentile_spec};
