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
//! Phase 1 maps each row to a dense group id per input partition
//! (`group_keys.rs`, `int_map.rs`, `view_keys.rs`, `composite.rs`) and folds each
//! aggregate's input into typed per-group vectors with one tight loop
//! (`accumulate.rs`); the partial tables (`table.rs`) are then merged per
//! output partition (`stream.rs`). Over Parquet files with a
//! dictionary-encoded key, phase 1 reads the key's codes itself
//! (`dictionary_scan.rs`, `dictionary_codes.rs`, `fetched.rs`); with many
//! groups it may hand over to DataFusion's aggregate (`fallback.rs`), and
//! over the memory limit it runs that aggregate, which spills, instead
//! (`exhausted.rs`).
//!
//! Files depend one way: `rule.rs ─▶ exec.rs ─▶ stream.rs ─▶
//! dictionary_scan.rs, fallback.rs ─▶ table.rs ─▶ group_keys.rs, accumulate.rs`,
//! with `spec.rs` and `metrics.rs` shared. One pair is mutually recursive
//! by nature: a composite key (`composite.rs`) is a list of column keys and
//! is itself one kind of key (`group_keys.rs`).

mod accumulate;
mod composite;
mod dictionary_codes;
mod dictionary_scan;
mod exec;
mod exhausted;
mod fallback;
mod group_keys;
mod int_map;
mod metrics;
mod rule;
mod spec;
mod stream;
mod table;
mod time_disjoint;
mod view_keys;

pub use exec::InlineAggregateExec;
pub use rule::InlineAggregateRule;

pub(crate) use accumulate::{AggFn, InlineAgg};
pub(crate) use fallback::with_leaf;
pub(crate) use group_keys::{GroupKeys, int_like};
