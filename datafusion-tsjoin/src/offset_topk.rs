//! A correction to DataFusion 55's sort pushdown for `ORDER BY` over a
//! `LIMIT … OFFSET` sub-query.
//!
//! `EnforceSorting` pushes the outer sort below the `GlobalLimitExec` and
//! gives the resulting TopK the limit's row count as its fetch, forgetting
//! the rows the limit skips; `LimitPushdown` then folds the two into a limit
//! that returns nothing. So
//! `SELECT * FROM (SELECT * FROM t LIMIT 2 OFFSET 2) ORDER BY ts` returns no
//! rows, and so does a WINDOW JOIN over QuestDB's `(t LIMIT 2, 4)` under an
//! ORDER BY. Fixed upstream (apache/datafusion#24958, the same `skip +
//! fetch`); drop this rule with the upgrade that brings it.

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::limit::GlobalLimitExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use std::sync::Arc;

/// Gives a TopK right under a `GlobalLimitExec` with an offset the rows the
/// offset skips too (`fetch = skip + fetch`). Runs right after
/// `EnsureRequirements`, before `LimitPushdown` folds the limits.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion_tsjoin::TsJoinContextExt;
/// let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
/// ctx.tsjoin_sql("CREATE TABLE t (v INT) AS VALUES (5), (4), (3), (2), (1)").await?;
/// // Without the rule DataFusion 55 returns no rows here.
/// let batches = ctx.tsjoin_sql("SELECT * FROM (SELECT * FROM t LIMIT 2 OFFSET 2) ORDER BY v")
///     .await?.collect().await?;
/// assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct OffsetTopK;

impl PhysicalOptimizerRule for OffsetTopK {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(limit) = node.downcast_ref::<GlobalLimitExec>() else {
                return Ok(Transformed::no(node));
            };
            let (skip, Some(fetch)) = (limit.skip(), limit.fetch()) else {
                return Ok(Transformed::no(node));
            };
            let Some(sort) = limit.input().downcast_ref::<SortExec>() else {
                return Ok(Transformed::no(node));
            };
            // A TopK under an offset must keep the skipped rows as well; one
            // that keeps fewer loses answers, so raising it is always safe.
            if skip == 0 || sort.fetch().is_none_or(|f| f >= skip + fetch) {
                return Ok(Transformed::no(node));
            }
            let sort = Arc::new(sort.clone().with_fetch(Some(skip + fetch)));
            Ok(Transformed::yes(
                Arc::new(GlobalLimitExec::new(sort, skip, Some(fetch)))
                    as Arc<dyn ExecutionPlan>,
            ))
        })
        .data()
    }

    fn name(&self) -> &str {
        "OffsetTopK"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
