//! The time-ordered engine shared by tsjoin's temporal joins (ASOF/LT JOIN
//! today; HORIZON and the streaming WINDOW JOIN are meant to reuse it).
//!
//! ```text
//! right input ──▶ Timeline (time.rs: ticks, sortedness; timeline.rs: time
//!                 order, keys, lazy per-key index)
//! left batch  ──▶ MergeCursor (cursor.rs): streaming merge over the
//!                 timeline with per-key state and a warm-up, or the
//!                 per-key index (binary search) when the left is unordered
//!             ──▶ Fingers (finger.rs): many offsets per left row (HORIZON),
//!                 a galloping finger per (key, offset) in the per-key index
//!             ──▶ TimeDirectory (directory.rs): the same lookups from a
//!                 per-key time-bucket directory (the folding HORIZON JOIN)
//! ```
//!
//! Time is compared in *common ticks*: the finer unit of the two sides
//! ([`crate::window_join::TimeScale`]). A NULL time never matches.

mod build;
mod cursor;
mod directory;
mod distribution;
mod finger;
mod metrics;
mod plan;
mod time;
mod timeline;

pub(crate) use build::{BuiltTimeline, SharedBuild, build_timeline, drain_partitions};
pub(crate) use cursor::MergeCursor;
pub(crate) use directory::{RunShape, TimeDirectory};
pub use distribution::{DistributionSetting, JoinDistribution};
pub(crate) use distribution::{KeyedRight, TemporalDistribution};
pub(crate) use finger::{Fingers, NO_ROW};
pub(crate) use metrics::record_join_time;
pub(crate) use plan::{
    combined_projection, left_preserving_properties, ordered_by, projected_properties,
    projection_text,
};
pub(crate) use time::{array_is_non_decreasing, tick_array};
// Row-by-row forms, kept for the temporal joins that read times as options.
#[allow(unused_imports)]
pub(crate) use time::{is_non_decreasing, ticks};
pub(crate) use timeline::{Timeline, joined, key_arrays};
