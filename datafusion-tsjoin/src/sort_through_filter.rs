//! Sort pushdown through `FilterExec`, so that `ORDER BY ts DESC LIMIT n`
//! with a WHERE (and QuestDB's `LIMIT -n`, planned as that TopK) reads a
//! Parquet table newest-first.
//!
//! DataFusion 55 pushes a TopK's order into a Parquet scan (files and row
//! groups re-ordered by statistics, `reverse_row_groups=true` for DESC), and
//! the TopK's dynamic filter then prunes the row groups it has beaten at run
//! time. But `FilterExec` does not forward the order, so with a WHERE the
//! scan runs oldest-first and every row group is read (the threshold never
//! excludes an older row group read after it). A filter keeps its input's
//! order, so forwarding is always correct; the TopK stays on top (the
//! pushdown is only `Inexact`), so answers do not change.
//!
//! ```text
//! SortExec: TopK(fetch=10), expr=[ts DESC]      SortExec: TopK(fetch=10), expr=[ts DESC]
//!   FilterExec: v > 75                     ⇒      FilterExec: v > 75
//!     DataSourceExec: file_groups=…                 DataSourceExec: …, reverse_row_groups=true
//! ```
//!
//! Upstream discussion: apache/datafusion#19446. Drop this rule with the
//! upgrade that lets `FilterExec` forward sort pushdown.

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions,
    SortOrderPushdownResult,
};
use std::sync::Arc;

/// Forwards a TopK's order through a `FilterExec` (without projection) to
/// the filter's input. Runs right before DataFusion's `PushdownSort`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion_tsjoin::TsJoinContextExt;
/// let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
/// ctx.tsjoin_sql("CREATE TABLE t (ts TIMESTAMP, v INT) AS VALUES ('2024-01-01', 1), ('2024-01-02', 2)").await?;
/// let batches = ctx.tsjoin_sql("SELECT v FROM t WHERE v > 0 ORDER BY ts DESC LIMIT 1").await?.collect().await?;
/// assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct SortThroughFilter;

impl PhysicalOptimizerRule for SortThroughFilter {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let on = crate::config::rule_enabled(config, |o| o.sort_through_filter);
        if !config.optimizer.enable_sort_pushdown || !on {
            return Ok(plan);
        }
        plan.transform_down(|node| {
            let Some(sort) = node.downcast_ref::<SortExec>() else {
                return Ok(Transformed::no(node));
            };
            let Some(filter) = sort.input().downcast_ref::<FilterExec>() else {
                return Ok(Transformed::no(node));
            };
            // Only a TopK gains (it stops early); a projecting filter would
            // need the sort keys mapped.
            if sort.fetch().is_none() || filter.projection().is_some() {
                return Ok(Transformed::no(node));
            }
            let inner = match filter.input().try_pushdown_sort(sort.expr())? {
                SortOrderPushdownResult::Exact { inner }
                | SortOrderPushdownResult::Inexact { inner } => inner,
                SortOrderPushdownResult::Unsupported => return Ok(Transformed::no(node)),
            };
            let filter = Arc::clone(sort.input()).replace_children(
                vec![inner],
                ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
            )?;
            let sort = Arc::clone(&node).replace_children(
                vec![filter],
                ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
            )?;
            Ok(Transformed::yes(sort))
        })
        .data()
    }

    fn name(&self) -> &str {
        "SortThroughFilter"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
