//! SQL functions tsjoin adds to a session.

mod first_last;
mod known;

pub(crate) use first_last::Position;
pub use first_last::{FirstLast, first_last_udafs};
pub(crate) use known::KnownAggregate;
