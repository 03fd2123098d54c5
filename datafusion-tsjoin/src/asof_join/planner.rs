//! Physical planning of [`AsofJoinNode`] into [`AsofJoinExec`].

use super::exec::AsofJoinExec;
use super::logical::AsofJoinNode;
use super::spec::AsofJoinSpec;
use crate::window_join::{TimeScale, timestamp_unit};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{
    Expr, ExprSchemable, LogicalPlan, UserDefinedLogicalNode,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{ExtensionPlanner, PhysicalPlanner};
use std::sync::Arc;

/// Plans [`AsofJoinNode`]s (installed by tsjoin's query planner).
#[derive(Debug, Default)]
pub struct AsofJoinPlanner;

#[async_trait]
impl ExtensionPlanner for AsofJoinPlanner {
    async fn plan_extension(
        &self,
        planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        session: &dyn Session,
        planning_ctx: &PhysicalPlanningContext,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let Some(node) = node.as_any().downcast_ref::<AsofJoinNode>() else {
            return Ok(None);
        };
        let (ls, rs) = (logical_inputs[0].schema(), logical_inputs[1].schema());
        let phys = |e: &Expr, s: &DFSchema| {
            planner.create_physical_expr(e, s, session, planning_ctx)
        };
        let c = &node.clause;
        let unit =
            |e: &Expr, s: &DFSchema| timestamp_unit(&e.to_string(), &e.get_type(s)?);
        let spec = AsofJoinSpec {
            left_keys: c
                .on
                .iter()
                .map(|(l, _)| phys(l, ls))
                .collect::<Result<_>>()?,
            right_keys: c
                .on
                .iter()
                .map(|(_, r)| phys(r, rs))
                .collect::<Result<_>>()?,
            left_ts: phys(&c.left_ts, ls)?,
            right_ts: phys(&c.right_ts, rs)?,
            scale: TimeScale::new(unit(&c.left_ts, ls)?, unit(&c.right_ts, rs)?),
            matching: c.matching,
            tolerance: c.tolerance,
            left_filter: c.filter.as_ref().map(|f| phys(f, ls)).transpose()?,
            join_type: c.join_type,
            pair_filter: match &c.pair_filter {
                Some(f) => Some(phys(f, &ls.join(rs)?)?),
                None => None,
            },
        };
        let options = session.config_options();
        let distribution = crate::window_join::DistributionSetting::for_session(
            options,
            !spec.left_keys.is_empty(),
            &[&physical_inputs[1]],
        );
        Ok(Some(Arc::new(
            AsofJoinExec::try_new(
                Arc::clone(&physical_inputs[0]),
                Arc::clone(&physical_inputs[1]),
                Arc::new(spec),
            )?
            .with_distribution(distribution)?,
        )))
    }
}
