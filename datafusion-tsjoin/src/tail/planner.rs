//! Physical planning of [`TailNode`].

use super::{TailExec, TailNode};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::Result;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{LogicalPlan, UserDefinedLogicalNode};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{ExtensionPlanner, PhysicalPlanner};
use std::sync::Arc;

/// Plans [`TailNode`] as [`TailExec`]; installed by tsjoin's query planner.
///
/// ```
/// use datafusion::physical_planner::DefaultPhysicalPlanner;
/// use datafusion_tsjoin::tail::TailPlanner;
/// use std::sync::Arc;
/// let _planner = DefaultPhysicalPlanner::with_extension_planners(vec![Arc::new(TailPlanner)]);
/// ```
#[derive(Debug, Default)]
pub struct TailPlanner;

#[async_trait]
impl ExtensionPlanner for TailPlanner {
    async fn plan_extension(
        &self,
        _planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        _logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        session: &dyn Session,
        _planning_ctx: &PhysicalPlanningContext,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let Some(node) = node.as_any().downcast_ref::<TailNode>() else {
            return Ok(None);
        };
        let distributed = session
            .config_options()
            .extensions
            .get::<crate::TsJoinOptions>()
            .is_some_and(|o| o.distributed);
        Ok(Some(Arc::new(
            TailExec::new(Arc::clone(&physical_inputs[0]), node.range())
                .with_whole_input(distributed),
        )))
    }
}
