//! Parquet scans too small for tsjoin's scan rules.
//!
//! Late materialisation ([`crate::late_materialize`]), the row-group balance
//! (`row_group_balance`) and the inline GROUP BY
//! ([`crate::inline_aggregate`]) each pay a fixed cost per query: pruning
//! predicates built and evaluated over the files' row groups while
//! planning, a Parquet row filter set up per page, a dictionary scan that
//! reads the page index before it can decide to step aside. On a scan of
//! millions of rows that cost is lost in the noise; on a time window of a
//! few thousand rows (TSBS `stationary-trucks`: ten minutes of one day
//! file, about 10K rows by the statistics, 2,271 read) it is most of the
//! query, and the three rules together made it about 25% slower than with
//! them off (`tsjoin-cli`, 400 runs per process, benches/README "TSBS").
//!
//! [`is_small`] estimates the rows a scan reads from what the planner
//! already holds (each file's row count times the share of its range that
//! the scan's predicate keeps, DataFusion's interval analysis over the
//! file's column statistics, as [`crate::prune_files::passing_share`]) and
//! the three rules leave scans below `tsjoin.small_scan_rows` (default
//! [`DEFAULT_SMALL_SCAN_ROWS`]; 0 turns the gate off) as DataFusion
//! planned them. The estimate stops as soon as the rows counted reach the
//! threshold, so a scan of many files costs one file's analysis. Only the
//! plan's shape changes: answers are the same either way.
//!
//! ```text
//! stationary-trucks (10 minutes, ~10K rows expected):
//!   AggregateExec ← FilterExec ← DataSourceExec          (DataFusion's plan)
//! long-driving-sessions (4 hours, ~240K rows expected):
//!   InlineAggregateExec ← DataSourceExec (row filter, balanced ranges)
//! ```

use crate::config::TsJoinOptions;
use crate::prune_files::{passing_share, scan_conjuncts};
use datafusion::common::config::ConfigOptions;
use datafusion::common::stats::Precision;
use datafusion::datasource::physical_plan::{FileScanConfig, FileSource, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_expr::intervals::utils::check_support;
use datafusion::physical_plan::ExecutionPlan;
use std::sync::Arc;

/// The default of `tsjoin.small_scan_rows`: half of one of the 128K-row
/// row groups TSBS and ClickBench files hold. Below it a scan decodes in
/// well under a millisecond per column on one core.
pub const DEFAULT_SMALL_SCAN_ROWS: usize = 1 << 16;

/// Whether the Parquet scan `config` over `source` is expected to read
/// fewer than `tsjoin.small_scan_rows` rows (see the [module docs](self)).
/// `false` when the gate is off or a file has no row count.
///
/// ```ignore
/// let (config, source) = scan.downcast_to_file_source::<ParquetSource>()?;
/// if is_small(config, source, options) {
///     return Ok(None); // DataFusion's plan is the cheapest here
/// }
/// ```
pub(crate) fn is_small(
    config: &FileScanConfig,
    source: &ParquetSource,
    options: &ConfigOptions,
) -> bool {
    let threshold = options
        .extensions
        .get::<TsJoinOptions>()
        .map_or(DEFAULT_SMALL_SCAN_ROWS, |o| o.small_scan_rows);
    if threshold == 0 {
        return false;
    }
    let threshold = threshold as f64;
    let table = Arc::clone(source.table_schema().table_schema());
    // The conjuncts the interval analysis can bound (a string equality
    // would make it give up on all of them); the others count as keeping
    // every row.
    let predicate = scan_conjuncts(source, |c| check_support(c, &table));
    let mut rows = 0.0;
    for file in config.file_groups.iter().flat_map(|g| g.files()) {
        let Some(stats) = file.statistics.as_deref() else {
            return false;
        };
        let n = match stats.num_rows {
            Precision::Exact(n) | Precision::Inexact(n) => n as f64,
            Precision::Absent => return false,
        };
        // The analysis only where the whole file would not settle it.
        let share = match &predicate {
            Some(p) if rows + n >= threshold => {
                passing_share(p, &table, &stats.column_statistics)
            }
            _ => 1.0,
        };
        rows += share * n;
        if rows >= threshold {
            return false;
        }
    }
    true
}

/// The Parquet scan at the bottom of `plan` when every operator down to
/// it has exactly one input (filters, projections, repartitions), with its
/// configuration and source.
///
/// ```ignore
/// if let Some((config, source)) = lone_parquet_scan(aggregate.input()) { … }
/// ```
pub(crate) fn lone_parquet_scan(
    plan: &Arc<dyn ExecutionPlan>,
) -> Option<(&FileScanConfig, &ParquetSource)> {
    let mut node = plan;
    loop {
        if let Some(scan) = node.downcast_ref::<DataSourceExec>() {
            return scan.downcast_to_file_source::<ParquetSource>();
        }
        match node.children().as_slice() {
            [child] => node = child,
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tsjoin_context;
    use datafusion::prelude::SessionConfig;

    /// The scan under `sql`'s physical plan, and the session's options.
    async fn scan_is_small(dir: &std::path::Path, set: &str, sql: &str) -> bool {
        let ctx = tsjoin_context(SessionConfig::new().with_target_partitions(2));
        if !set.is_empty() {
            ctx.sql(set).await.unwrap().collect().await.unwrap();
        }
        ctx.register_parquet("t", dir.to_str().unwrap(), Default::default())
            .await
            .unwrap();
        let plan = ctx
            .sql(sql)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let state = ctx.state();
        let (config, source) = lone_parquet_scan(&plan).expect("one parquet scan");
        is_small(config, source, state.config_options())
    }

    #[tokio::test]
    async fn counts_the_rows_the_window_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = tsjoin_context(SessionConfig::new());
        // 100K rows, ts 0..99_999 in order, in two files.
        for (i, start) in [0, 50_000].into_iter().enumerate() {
            ctx.sql(&format!(
                "COPY (SELECT v AS ts, v % 7 AS k FROM generate_series({start}, {}) AS g(v)) \
                 TO '{}/{i}.parquet'",
                start + 49_999,
                dir.path().display()
            ))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        }
        let q = |w: &str| format!("SELECT k, count(*) FROM t WHERE {w} GROUP BY k");
        // The whole table: 100K rows.
        assert!(!scan_is_small(dir.path(), "", &q("k >= 0")).await);
        // A tenth of one file: about 5K rows, also beside a conjunct the
        // analysis cannot bound.
        assert!(scan_is_small(dir.path(), "", &q("ts >= 1000 AND ts < 6000")).await);
        let with_string = q("ts >= 1000 AND ts < 6000 AND CAST(k AS VARCHAR) = '3'");
        assert!(scan_is_small(dir.path(), "", &with_string).await);
        // A range over both files, 80K rows.
        assert!(!scan_is_small(dir.path(), "", &q("ts >= 10000 AND ts < 90000")).await);
        // The gate off.
        let off = "SET tsjoin.small_scan_rows = 0";
        assert!(!scan_is_small(dir.path(), off, &q("ts >= 1000 AND ts < 6000")).await);
        // A lower threshold.
        let low = "SET tsjoin.small_scan_rows = 1000";
        assert!(!scan_is_small(dir.path(), low, &q("ts >= 1000 AND ts < 6000")).await);
    }
}
