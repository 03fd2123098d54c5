//! Session settings (`SET tsjoin.…`) and the designated-timestamp registry.

use datafusion::common::config::{
    ConfigEntry, ConfigExtension, ConfigField, ExtensionOptions, Visit,
};
use datafusion::common::config_namespace;
use datafusion::common::{Result, plan_datafusion_err};
use datafusion::execution::context::SessionContext;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;

config_namespace! {
    /// tsjoin's session settings, set with `SET tsjoin.<name> = <value>` or
    /// through `SessionConfig::options_mut().extensions`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
    /// use datafusion_tsjoin::TsJoinContextExt;
    /// let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
    /// ctx.tsjoin_sql("SET tsjoin.window_join_workers = 4").await?.collect().await?;
    /// let state = ctx.state();
    /// let options = state.config().options().extensions.get::<datafusion_tsjoin::TsJoinOptions>();
    /// assert_eq!(options.map(|o| o.window_join_workers), Some(4));
    /// # Ok(()) }
    /// ```
    pub struct TsJoinOptions {
        /// Left batches a WINDOW JOIN joins at once, in total over its left
        /// partitions, but at least one per partition (0: the session's
        /// `target_partitions`).
        pub window_join_workers: usize, default = 0
        /// Run WINDOW JOINs on the fast path (typed per-key buffers and
        /// slice kernels) where the query allows it.
        pub window_join_fast_path: bool, default = true
        /// Let the WINDOW JOIN fast path use SIMD (AVX2) kernels when the
        /// CPU has them; false forces the scalar kernels.
        pub window_join_simd: bool, default = true
        /// WINDOW JOIN float sums and averages over windows of at least this
        /// many rows read compensated prefix sums over blocks (O(1) plus two
        /// partial blocks per window) instead of running the sum kernel over
        /// the whole window (0: always the block sums).
        pub window_join_sum_prefix_min: usize, default = crate::window_join::DEFAULT_SUM_PREFIX_MIN
        /// WINDOW JOIN min and max over windows of at least this many rows
        /// read a block min/max table (O(1) per window) instead of scanning
        /// the window with the kernels (0: always the table).
        pub window_join_min_max_table_min: usize, default = crate::window_join::DEFAULT_MIN_MAX_TABLE_MIN
        /// Run WINDOW JOINs whose query the fast path covers on the
        /// streaming path (sliding per-key windows over left input in time
        /// order; EXPLAIN: `path=streaming`). Off by default: on this
        /// machine it measured slower than the index path (benches/README.md).
        pub window_join_streaming: bool, default = false
        /// Run grouped count/sum/min/max/avg and `approx_percentile` on
        /// tsjoin's inline two-phase aggregate (`InlineAggregateExec`) where
        /// it applies, instead of DataFusion's hash aggregate.
        pub inline_aggregate: bool, default = true
        /// Run every GROUP BY key list inline, never falling back. Off by
        /// default: single string and other `general` keys stay on
        /// DataFusion's aggregate (measured no faster inline), and
        /// multi-column integer/string keys (`composite`) run inline only
        /// while a probe of the input shows few groups, falling back to
        /// DataFusion's aggregate when they are many (benches/README.md).
        pub inline_aggregate_all_keys: bool, default = false
        /// Let the inline aggregate read a dictionary-encoded integer key
        /// straight from its Parquet codes (phase 1 skips the scan's
        /// decoding of the key; see `inline_aggregate::dictionary_scan`).
        pub inline_aggregate_dictionary_scan: bool, default = true
        /// Forward a TopK's order (`ORDER BY ts DESC LIMIT n`, QuestDB's
        /// `LIMIT -n`) through a WHERE's filter into the Parquet scan, which
        /// then reads newest-first and prunes what the TopK has beaten
        /// (see `sort_through_filter`).
        pub sort_through_filter: bool, default = true
        /// Run a descending TopK over a (filtered) Parquet scan row group
        /// by row group, newest first, stopping once no unread row group
        /// can contribute (see `newest_first`).
        pub newest_first_scan: bool, default = true
        /// Answer `row_number() OVER (PARTITION BY k ORDER BY o) = 1` (one
        /// row per key, QuestDB's `LATEST ON`) by keeping each key's best
        /// row as the rows stream past, partial per partition then merged,
        /// instead of sorting the input (see `latest_by`).
        pub latest_by: bool, default = true
        /// Fold `count`/`sum`/`min`/`max` without GROUP BY over a WHERE of
        /// column-vs-literal comparisons in one pass per batch (see
        /// `filter_aggregate`).
        pub filter_aggregate: bool, default = true
        /// Drop the files a Parquet scan's WHERE rules out by their
        /// statistics while planning, before the scan's files are spread
        /// over partitions (see `prune_files`).
        pub prune_files: bool, default = true
        /// Redraw the byte ranges of a filtered Parquet scan feeding an
        /// aggregate so that its partitions read equal shares of the row
        /// groups the WHERE leaves, while planning (see
        /// `row_group_balance`).
        pub balance_row_groups: bool, default = true
        /// Leave Parquet scans expected to read fewer rows than this (each
        /// file's rows times the share of its range the WHERE keeps, from
        /// the files' statistics) to DataFusion's plain plan: late
        /// materialisation, the row-group balance and the inline GROUP BY
        /// each cost a fixed fraction of a millisecond to plan and start,
        /// more than they save on so few rows (see `small_scan`). 0 turns
        /// the gate off.
        pub small_scan_rows: usize, default = crate::small_scan::DEFAULT_SMALL_SCAN_ROWS
        /// Let a count-only fused filter aggregate over Parquet read the
        /// files itself, the WHERE evaluated on each page's dictionary
        /// and codes (see `filter_aggregate::page_scan`).
        pub filter_aggregate_pages: bool, default = true
        /// Apply hash joins' filters to the fact rows right after the scan,
        /// before any hash probe (lookahead information passing, see
        /// `join_filter`): exact bit filters for integer keys of small range,
        /// in adaptive order.
        pub join_filters: bool, default = true
        /// Widest key range (values) a join filter turns into bits; 0:
        /// automatic (two per scanned row from the join's build keys, an
        /// eighth of a row from its predicate; from 64 Ki to 256 Mi).
        pub join_filter_max_bits: u64, default = 0
        /// Let a filtered Parquet scan evaluate its WHERE while decoding
        /// (DataFusion's row filter, per scan) and decode the columns the
        /// WHERE does not read only for the rows that pass, where those
        /// columns are a large share of the scan's bytes (see
        /// `late_materialize`).
        pub late_materialize: bool, default = true
        /// A HORIZON JOIN grouped by `h.offset` alone aggregates inside
        /// the operator, per offset, instead of emitting every pair
        /// (`horizon_fold`).
        pub horizon_fold: bool, default = true
        /// This session's query priority: `high`, `normal`, `low` or an
        /// integer (higher runs first). While a query of higher priority
        /// runs, lower ones pause at batch boundaries (see `priority`).
        pub priority: crate::priority::Priority, default = crate::priority::Priority::NORMAL
        /// Gate queries' inputs by `priority`; off, queries ignore each
        /// other's priorities (and plans carry no `PriorityGateExec`).
        pub priority_scheduling: bool, default = true
        /// How WINDOW, ASOF and HORIZON JOINs with equality keys spread
        /// their inputs: `partitioned` (both inputs hash-partitioned on the
        /// keys, one right index per partition), `broadcast` (every left
        /// partition joins the whole right side, one shared index) or
        /// `auto` (the planner's choice; see `temporal::distribution`).
        /// Joins without keys are always broadcast.
        pub temporal_join_distribution: crate::window_join::DistributionSetting, default = crate::window_join::DistributionSetting::Auto
        /// Plan for a distributed scheduler (Ballista), whose tasks see
        /// only the input partitions they own: operators that would read
        /// several input partitions themselves ask for one instead (QuestDB's
        /// `LIMIT -n` over an unordered input then keeps all rows but not
        /// the file order). Cluster sessions set it.
        pub distributed: bool, default = false
    }
}

impl ConfigExtension for TsJoinOptions {
    const PREFIX: &'static str = "tsjoin";
}

/// Written by hand rather than with `extensions_options!`, whose `entries`
/// lists the settings without their `tsjoin.` prefix: Ballista sends a
/// session's settings to the scheduler and executors as these entries and
/// sets them there by key, so unprefixed keys were dropped and no
/// `SET tsjoin.…` reached a cluster. `SHOW ALL` lists them prefixed too.
///
/// ```
/// use datafusion::common::config::ExtensionOptions;
/// let keys: Vec<String> = datafusion_tsjoin::TsJoinOptions::default()
///     .entries().into_iter().map(|e| e.key).collect();
/// assert!(keys.contains(&"tsjoin.distributed".to_string()));
/// ```
impl ExtensionOptions for TsJoinOptions {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn cloned(&self) -> Box<dyn ExtensionOptions> {
        Box::new(self.clone())
    }

    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        ConfigField::set(self, key, value)
    }

    fn entries(&self) -> Vec<ConfigEntry> {
        struct Entries(Vec<ConfigEntry>);
        impl Visit for Entries {
            fn some<V: std::fmt::Display>(
                &mut self,
                key: &str,
                value: V,
                description: &'static str,
            ) {
                self.0.push(ConfigEntry {
                    key: key.to_string(),
                    value: Some(value.to_string()),
                    description,
                })
            }

            fn none(&mut self, key: &str, description: &'static str) {
                self.0.push(ConfigEntry {
                    key: key.to_string(),
                    value: None,
                    description,
                })
            }
        }
        let mut entries = Entries(vec![]);
        self.visit(&mut entries, Self::PREFIX, "");
        entries.0
    }
}

/// Designated timestamp column per table name, shared by a session's
/// planners. A table's designated timestamp is the column a WINDOW JOIN
/// orders and windows it by; a table with exactly one timestamp column
/// needs no entry.
#[derive(Debug, Default)]
pub struct TimestampRegistry {
    columns: RwLock<HashMap<String, String>>,
}

impl TimestampRegistry {
    /// Records `column` as the designated timestamp of `table`.
    pub fn set(&self, table: &str, column: &str) {
        self.columns
            .write()
            .insert(table.to_string(), column.to_string());
    }

    /// The designated timestamp of `table`, if one was registered.
    pub fn get(&self, table: &str) -> Option<String> {
        self.columns.read().get(table).cloned()
    }

    /// Whether `column` is registered as designated for any table.
    pub fn is_designated_anywhere(&self, column: &str) -> bool {
        self.columns.read().values().any(|c| c == column)
    }
}

/// Option of `CREATE EXTERNAL TABLE … OPTIONS (...)` naming the designated
/// timestamp column; tsjoin removes it before DataFusion sees the options.
pub const DESIGNATED_TIMESTAMP_OPTION: &str = "designated_timestamp";

/// The session's designated-timestamp registry (present once tsjoin is enabled).
pub fn registry(ctx: &SessionContext) -> Result<Arc<TimestampRegistry>> {
    ctx.state()
        .config()
        .get_extension::<TimestampRegistry>()
        .ok_or_else(|| {
            plan_datafusion_err!("tsjoin is not enabled on this SessionContext")
        })
}

/// Whether the tsjoin setting `flag` reads is on in `config`: what gates a
/// tsjoin physical rule. A session without tsjoin options runs with the
/// defaults, under which every rule is on.
///
/// ```ignore
/// if !rule_enabled(config, |o| o.newest_first_scan) {
///     return Ok(plan);
/// }
/// ```
pub(crate) fn rule_enabled(
    config: &datafusion::common::config::ConfigOptions,
    flag: impl FnOnce(&TsJoinOptions) -> bool,
) -> bool {
    config.extensions.get::<TsJoinOptions>().is_none_or(flag)
}
