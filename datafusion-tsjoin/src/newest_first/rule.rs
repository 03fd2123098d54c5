//! [`NewestFirstRule`]: puts [`NewestFirstTopKExec`] in place of a
//! descending single-key TopK over a (filtered) Parquet scan.

use super::exec::{NewestFirstTopKExec, shape};
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::sorts::sort::SortExec;
use std::sync::Arc;

/// Replaces `SortExec: TopK(fetch=n), expr=[k DESC]` over a Parquet scan
/// (or a filter over one) by a [`NewestFirstTopKExec`]. Runs right before
/// DataFusion's `SanityCheckPlan`; `SET tsjoin.newest_first_scan = false`
/// turns it off.
///
/// ```
/// use datafusion::physical_optimizer::PhysicalOptimizerRule;
/// assert_eq!(datafusion_tsjoin::newest_first::NewestFirstRule.name(), "NewestFirstRule");
/// ```
#[derive(Debug, Default)]
pub struct NewestFirstRule;

impl PhysicalOptimizerRule for NewestFirstRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let on = crate::config::rule_enabled(config, |o| o.newest_first_scan);
        if !on {
            return Ok(plan);
        }
        plan.transform_down(|node| {
            let Some(sort) = node.downcast_ref::<SortExec>() else {
                return Ok(Transformed::no(node));
            };
            let (Some(fetch), [expr]) = (sort.fetch(), sort.expr().as_ref()) else {
                return Ok(Transformed::no(node));
            };
            if !expr.options.descending || shape(sort.input(), &expr.expr).is_none() {
                return Ok(Transformed::no(node));
            }
            let exec =
                NewestFirstTopKExec::new(Arc::clone(sort.input()), expr.clone(), fetch);
            Ok(Transformed::yes(Arc::new(exec) as Arc<dyn ExecutionPlan>))
        })
        .data()
    }

    fn name(&self) -> &str {
        "NewestFirstRule"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
