//! Inline two-phase grouped aggregation: [`InlineAggregateExec`] and the
//! [`InlineAggregateRule`] that puts it in place of DataFusion's hash
//! aggregate.
//!
//! ```text
//! AggregateExec(FinalPartitioned)          InlineAggregateExec
//!   RepartitionExec(Hash)          ──▶       <input>
//!     AggregateExec(Partial)
//!       <input>
//! ```
//!
//! Phase 1 ([`keys`], [`int_map`]) maps each row to a dense group id per
//! input partition; phase 2 ([`accumulate`]) folds each aggregate's input
//! into typed per-group vectors with one tight loop; the partial tables are
//! then merged per output partition ([`stream`]). Over Parquet files with a
//! dictionary-encoded integer key, phase 1 reads the key's codes itself
//! ([`dictionary_scan`]).

mod accumulate;
mod composite;
mod dictionary_codes;
mod dictionary_scan;
mod exec;
mod fallback;
mod fetched;
mod int_map;
mod keys;
mod rule;
mod stream;
mod view_keys;

pub use accumulate::{AggFn, Domain, InlineAgg, supported};
pub use composite::MAX_PAIR_SLOTS;
pub use exec::InlineAggregateExec;
pub use fallback::{MANY_GROUPS, MIN_ROWS_PER_GROUP, ReplayExec};
pub use int_map::{IntKeys, MAX_SLOTS_PER_GROUP, MIN_DIRECT_SLOTS, hash_i64};
pub use keys::{COMPOSITE_MAX_GROUPS, KeyShape};
pub use rule::InlineAggregateRule;
pub use view_keys::ViewKeys;
