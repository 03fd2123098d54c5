//! [`NewestFirstRule`]: puts [`NewestFirstTopKExec`] in place of a
//! descending single-key TopK over a (filtered) Parquet scan.

use super::exec::{NewestFirstTopKExec, shape};
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{
    Transformed, TransformedResult, TreeNode, TreeNodeRecursion,
};
use datafusion::datasource::physical_plan::{
    FileGroup, FileScanConfigBuilder, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
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
        let distributed = crate::config::rule_enabled(config, |o| o.distributed);
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
            let input = if distributed {
                one_file_group(Arc::clone(sort.input()))?
            } else {
                Arc::clone(sort.input())
            };
            let exec = NewestFirstTopKExec::new(input, expr.clone(), fetch);
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

/// `input` with its Parquet scan's files in one file group, in their order.
///
/// The operator reads the row groups of every file of its scan from its
/// one partition, whatever the scan's file groups. A distributed scheduler
/// (Ballista) gives the task that runs it only the scan partitions the
/// task owns, partition 0 of one output partition: with several file
/// groups it saw the first alone and lost rows. One group makes partition
/// 0 the whole scan.
fn one_file_group(input: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    input
        .transform_down(|node| {
            let Some(scan) = node.downcast_ref::<DataSourceExec>() else {
                return Ok(Transformed::no(node));
            };
            let Some((config, _)) = scan.downcast_to_file_source::<ParquetSource>()
            else {
                return Ok(Transformed::no(node));
            };
            if config.file_groups.len() <= 1 {
                return Ok(Transformed::no(node));
            }
            let files: Vec<_> = config
                .file_groups
                .iter()
                .flat_map(|g| g.files().iter().cloned())
                .collect();
            let config = FileScanConfigBuilder::from(config.clone())
                .with_file_groups(vec![FileGroup::new(files)])
                .build();
            let scan: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(config);
            Ok(Transformed::new(scan, true, TreeNodeRecursion::Jump))
        })
        .data()
}
