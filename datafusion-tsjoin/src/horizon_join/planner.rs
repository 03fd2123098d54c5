//! Physical planning of [`HorizonJoinNode`] into [`HorizonJoinExec`].

use super::exec::HorizonJoinExec;
use super::logical::HorizonJoinNode;
use super::spec::{HorizonJoinSpec, HorizonRightSpec};
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

/// Plans [`HorizonJoinNode`]s (installed by tsjoin's query planner).
#[derive(Debug, Default)]
pub struct HorizonJoinPlanner;

#[async_trait]
impl ExtensionPlanner for HorizonJoinPlanner {
    async fn plan_extension(
        &self,
        planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        session: &dyn Session,
        planning_ctx: &PhysicalPlanningContext,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let Some(node) = node.as_any().downcast_ref::<HorizonJoinNode>() else {
            return Ok(None);
        };
        let ls = logical_inputs[0].schema();
        let phys = |e: &Expr, s: &DFSchema| {
            planner.create_physical_expr(e, s, session, planning_ctx)
        };
        let unit =
            |e: &Expr, s: &DFSchema| timestamp_unit(&e.to_string(), &e.get_type(s)?);
        let c = &node.clause;
        let left_unit = unit(&c.left_ts, ls)?;
        let mut rights = vec![];
        for (i, r) in c.rights.iter().enumerate() {
            let rs = logical_inputs[i + 1].schema();
            rights.push(HorizonRightSpec {
                left_keys: r
                    .on
                    .iter()
                    .map(|(l, _)| phys(l, ls))
                    .collect::<Result<_>>()?,
                right_keys: r
                    .on
                    .iter()
                    .map(|(_, e)| phys(e, rs))
                    .collect::<Result<_>>()?,
                right_ts: phys(&r.right_ts, rs)?,
                scale: TimeScale::new(left_unit, unit(&r.right_ts, rs)?),
                left_filter: r.filter.as_ref().map(|f| phys(f, ls)).transpose()?,
            });
        }
        let spec = HorizonJoinSpec {
            left_ts: phys(&c.left_ts, ls)?,
            offsets: c.offsets.clone(),
            rights,
        };
        let options = session.config_options();
        let keyed = spec.rights.iter().all(|r| !r.left_keys.is_empty());
        let rights: Vec<_> = physical_inputs[1..].iter().collect();
        let distribution =
            crate::window_join::DistributionSetting::for_session(options, keyed, &rights);
        Ok(Some(Arc::new(
            HorizonJoinExec::try_new(
                Arc::clone(&physical_inputs[0]),
                physical_inputs[1..].to_vec(),
                Arc::new(spec),
                c.alias.clone(),
            )?
            .with_distribution(distribution)?,
        )))
    }
}
