//! SQL functions tsjoin adds to a session.

mod first_last;

pub use first_last::{FirstLast, first_last_udafs};
