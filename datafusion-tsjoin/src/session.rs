//! Enabling tsjoin on a session, and the SQL entry point.

use crate::config::{TimestampRegistry, TsJoinOptions};
use crate::functions::{first_last_udafs, percentile_udafs};
use crate::inline_aggregate::InlineAggregateRule;
use crate::offset_topk::OffsetTopK;
use crate::sql::{
    AsofJoinRelationPlanner, HorizonJoinRelationPlanner, WindowJoinRelationPlanner,
    execute_sql, registry,
};
use crate::window_join::{PushDownWindowJoinFilter, TsJoinQueryPlanner};
use datafusion::common::Result;
use datafusion::dataframe::DataFrame;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::context::SessionContext;
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::prelude::SessionConfig;
use std::future::Future;
use std::sync::Arc;

/// Adds tsjoin to a [`SessionStateBuilder`]: the WINDOW JOIN relation
/// planner, query planner and optimizer rule, the inline aggregate's
/// physical optimizer rule, the `first`/`last` family of aggregates,
/// `tsjoin.*` settings and the designated-timestamp registry. Call it after
/// `with_default_features()` (it sets the physical optimizer rules:
/// DataFusion's defaults plus tsjoin's).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion::execution::SessionStateBuilder;
/// use datafusion::prelude::SessionContext;
/// use datafusion_tsjoin::{TsJoinContextExt, TsJoinSessionStateBuilderExt};
/// let state = SessionStateBuilder::new().with_default_features().with_tsjoin().build();
/// let ctx = SessionContext::new_with_state(state);
/// ctx.tsjoin_sql("CREATE TABLE t (ts TIMESTAMP, v INT) AS VALUES ('2024-01-01T00:00:00', 1)").await?;
/// let batches = ctx.tsjoin_sql("SELECT t.v, count(*) AS n FROM t WINDOW JOIN t r \
///     RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW").await?.collect().await?;
/// assert_eq!(batches[0].num_rows(), 1);
/// # Ok(()) }
/// ```
pub trait TsJoinSessionStateBuilderExt {
    /// Enables tsjoin on this builder.
    fn with_tsjoin(self) -> Self;
}

impl TsJoinSessionStateBuilderExt for SessionStateBuilder {
    fn with_tsjoin(mut self) -> Self {
        let registry = Arc::new(TimestampRegistry::default());
        let mut config = self.config().take().unwrap_or_default();
        if config.options().extensions.get::<TsJoinOptions>().is_none() {
            config
                .options_mut()
                .extensions
                .insert(TsJoinOptions::default());
        }
        config = config.with_extension(Arc::clone(&registry));
        *self.config() = Some(config);
        let aggregates = self.aggregate_functions().get_or_insert_with(Vec::new);
        for f in first_last_udafs().into_iter().chain(percentile_udafs()) {
            if !aggregates.iter().any(|a| a.name() == f.name()) {
                aggregates.push(f);
            }
        }
        // `ARRAY[...]` of constants (approx_percentile's array form), after
        // any planner DataFusion has.
        self.expr_planners()
            .get_or_insert_with(Vec::new)
            .push(Arc::new(crate::functions::ConstantArrayPlanner));
        let scalars = self.scalar_functions().get_or_insert_with(Vec::new);
        scalars.push(Arc::new(crate::sql::limit_marker()));
        scalars.push(Arc::new(crate::functions::order_key_udf()));
        self.relation_planners()
            .get_or_insert_with(Vec::new)
            .push(Arc::new(WindowJoinRelationPlanner::new(Arc::clone(
                &registry,
            ))));
        self.relation_planners()
            .get_or_insert_with(Vec::new)
            .push(Arc::new(AsofJoinRelationPlanner::new(Arc::clone(
                &registry,
            ))));
        self.relation_planners()
            .get_or_insert_with(Vec::new)
            .push(Arc::new(HorizonJoinRelationPlanner::new(registry)));
        // The inline aggregate replaces partial/final aggregate pairs, so it
        // runs right after DataFusion combines those (an appended rule would
        // run after the final sanity check).
        let mut rules = PhysicalOptimizer::new().rules;
        let at = rules
            .iter()
            .position(|r| r.name() == "CombinePartialFinalAggregate")
            .map_or(rules.len(), |i| i + 1);
        rules.insert(at, Arc::new(InlineAggregateRule));
        // Before the inline GROUP BY, which would take the same aggregate.
        rules.insert(at, Arc::new(crate::horizon_join::HorizonFoldRule));
        // Right after JoinSelection picks build sides, before anything is
        // placed for distribution.
        let at = rules
            .iter()
            .position(|r| r.name() == "join_selection")
            .map_or(0, |i| i + 1);
        rules.insert(at, Arc::new(crate::join_filter::FactProbeRule));
        // Before DataFusion places repartitions and sorts (after its own
        // WindowTopN, off by default): the window's sort is never added, and
        // the keys' repartition goes between the partial and the final
        // operator.
        let at = rules
            .iter()
            .position(|r| r.name() == "EnsureRequirements")
            .unwrap_or(0);
        rules.insert(at, Arc::new(crate::latest_by::LatestByRule));
        // Right after DataFusion's filter push-down puts the WHERE into the
        // scans, before `EnsureRequirements` spreads their files over
        // partitions: only the files that will be read get spread.
        let at = rules
            .iter()
            .position(|r| r.name() == "FilterPushdown")
            .map_or(0, |i| i + 1);
        rules.insert(at, Arc::new(crate::prune_files::PruneFilesRule));
        let at = rules
            .iter()
            .position(|r| r.name() == "EnsureRequirements")
            .map_or(rules.len(), |i| i + 1);
        rules.insert(at, Arc::new(OffsetTopK));
        let at = rules
            .iter()
            .position(|r| r.name() == "PushdownSort")
            .unwrap_or(rules.len());
        rules.insert(at, Arc::new(crate::sort_through_filter::SortThroughFilter));
        let at = rules
            .iter()
            .position(|r| r.name() == "SanityCheckPlan")
            .unwrap_or(rules.len());
        rules.insert(at, Arc::new(crate::newest_first::NewestFirstRule));
        rules.insert(
            at + 1,
            Arc::new(crate::filter_aggregate::FilterAggregateRule),
        );
        // After DataFusion's post-optimisation filter pushdown, which puts
        // the joins' dynamic filters into the scans.
        rules.insert(at + 2, Arc::new(crate::join_filter::JoinFilterRule));
        // Last of tsjoin's scan rules: the others match filters over plain
        // scans, and join-filtered scans must already carry their
        // `LipFilterExec`.
        rules.insert(
            at + 3,
            Arc::new(crate::late_materialize::LateMaterializeRule),
        );
        self.with_query_planner(Arc::new(TsJoinQueryPlanner))
            .with_optimizer_rule(Arc::new(PushDownWindowJoinFilter))
            .with_physical_optimizer_rules(rules)
    }
}

/// A [`SessionContext`] with DataFusion's defaults and tsjoin enabled, and
/// `information_schema` on (DataFusion's default is off), so that `SHOW
/// TABLES`, `SHOW COLUMNS` and `information_schema.*` work as users of SQL
/// shells expect.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion_tsjoin::{TsJoinContextExt, tsjoin_context};
/// let ctx = tsjoin_context(Default::default());
/// ctx.tsjoin_sql("CREATE TABLE trades (ts TIMESTAMP, sym VARCHAR, price DOUBLE) AS VALUES
///     ('2024-01-01T00:00:01', 'A', 10.0), ('2024-01-01T00:00:05', 'A', 11.0)").await?;
/// ctx.tsjoin_sql("CREATE TABLE prices (ts TIMESTAMP, sym VARCHAR, bid DOUBLE) AS VALUES
///     ('2024-01-01T00:00:00', 'A', 9.5), ('2024-01-01T00:00:01', 'A', 9.75),
///     ('2024-01-01T00:00:02', 'A', 10.0)").await?;
/// let batches = ctx.tsjoin_sql(
///     "SELECT t.ts, t.price, avg(p.bid) AS avg_bid, count(*) AS n
///      FROM trades t WINDOW JOIN prices p ON p.sym = t.sym
///      RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING EXCLUDE PREVAILING").await?
///     .collect().await?;
/// datafusion::assert_batches_eq!([
///     "+---------------------+-------+---------+---+",
///     "| ts                  | price | avg_bid | n |",
///     "+---------------------+-------+---------+---+",
///     "| 2024-01-01T00:00:01 | 10.0  | 9.75    | 3 |",
///     "| 2024-01-01T00:00:05 | 11.0  |         | 0 |",
///     "+---------------------+-------+---------+---+",
/// ], &batches);
/// # Ok(()) }
/// ```
pub fn tsjoin_context(config: SessionConfig) -> SessionContext {
    let state = SessionStateBuilder::new()
        .with_config(config.with_information_schema(true))
        .with_default_features()
        .with_tsjoin()
        .build();
    SessionContext::new_with_state(state)
}

/// A tsjoin session (as [`tsjoin_context`]) whose memory pool holds
/// `memory_limit` bytes, if given, and whose operators spill to
/// `spill_dir`, if given (else the system's temporary directory). Past the
/// limit DataFusion's sort, aggregate and repartition spill, the inline
/// aggregate hands over to DataFusion's, and an operator that cannot spill
/// fails with a `Resources exhausted` error naming itself.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion_tsjoin::{TsJoinContextExt, tsjoin_context_with_limits};
/// let dir = tempfile::tempdir()?;
/// let config = datafusion::prelude::SessionConfig::new();
/// let ctx = tsjoin_context_with_limits(config, Some(64 << 20), Some(dir.path()))?;
/// let df = ctx.tsjoin_sql("SELECT value % 10 AS k, count(*) FROM generate_series(1, 1000) GROUP BY k").await?;
/// assert_eq!(df.count().await?, 10);
/// # Ok(()) }
/// ```
pub fn tsjoin_context_with_limits(
    config: SessionConfig,
    memory_limit: Option<usize>,
    spill_dir: Option<&std::path::Path>,
) -> Result<SessionContext> {
    let mut runtime = datafusion::execution::runtime_env::RuntimeEnvBuilder::new();
    if let Some(bytes) = memory_limit {
        runtime = runtime.with_memory_limit(bytes, 1.0);
    }
    if let Some(dir) = spill_dir {
        std::fs::create_dir_all(dir)?;
        runtime = runtime.with_temp_file_path(dir);
    }
    let state = SessionStateBuilder::new()
        .with_config(config.with_information_schema(true))
        .with_runtime_env(runtime.build_arc()?)
        .with_default_features()
        .with_tsjoin()
        .build();
    Ok(SessionContext::new_with_state(state))
}

/// tsjoin's SQL entry point and registration helpers on a [`SessionContext`]
/// built with [`tsjoin_context`] or [`TsJoinSessionStateBuilderExt::with_tsjoin`].
pub trait TsJoinContextExt {
    /// Like `SessionContext::sql`, plus WINDOW JOIN. Several statements
    /// separated by `;` run in order; the last one's result is returned.
    /// `COPY (query) TO 'file.parquet'` (or `.csv`, `.json`) keeps a result:
    /// it writes when its [`DataFrame`] is collected.
    fn tsjoin_sql(&self, sql: &str) -> impl Future<Output = Result<DataFrame>> + Send;

    /// Names `column` the designated timestamp of `table`.
    fn set_designated_timestamp(&self, table: &str, column: &str) -> Result<()>;
}

impl TsJoinContextExt for SessionContext {
    fn tsjoin_sql(&self, sql: &str) -> impl Future<Output = Result<DataFrame>> + Send {
        execute_sql(self, sql)
    }

    fn set_designated_timestamp(&self, table: &str, column: &str) -> Result<()> {
        registry(self)?.set(table, column);
        Ok(())
    }
}
