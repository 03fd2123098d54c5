//! Physical planning of [`WindowJoinNode`] into [`WindowJoinExec`].

use super::bounds::{WindowBound, timestamp_unit};
use super::exec::WindowJoinExec;
use super::logical::{Side, WindowJoinNode, side_of};
use super::spec::{
    AggInput, PhysicalBound, TimeScale, WindowAgg, WindowAggKind, WindowJoinSettings,
    WindowJoinSpec,
};
use crate::config::TsJoinOptions;
use crate::functions::{KnownAggregate, Position};
use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, Result, not_impl_err, plan_err};
use datafusion::execution::context::QueryPlanner;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{
    Expr, ExprSchemable, LogicalPlan, UserDefinedLogicalNode,
};
use datafusion::physical_expr::aggregate::{LoweredAggregate, LoweredAggregateBuilder};
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};
use datafusion::physical_planner::{
    DefaultPhysicalPlanner, ExtensionPlanner, PhysicalPlanner,
};
use std::sync::Arc;

/// Plans [`WindowJoinNode`]s; install it with [`TsJoinQueryPlanner`].
#[derive(Debug, Default)]
pub struct WindowJoinPlanner;

#[async_trait]
impl ExtensionPlanner for WindowJoinPlanner {
    async fn plan_extension(
        &self,
        planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        session: &dyn Session,
        planning_ctx: &PhysicalPlanningContext,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let Some(node) = node.as_any().downcast_ref::<WindowJoinNode>() else {
            return Ok(None);
        };
        let (lschema, rschema) = (logical_inputs[0].schema(), logical_inputs[1].schema());
        let joined = lschema.join(rschema)?;
        let pair_physical: Schema = joined.as_arrow().clone();
        let phys = |e: &Expr, s: &DFSchema| {
            planner.create_physical_expr(e, s, session, planning_ctx)
        };

        let left_keys = node
            .clause
            .on
            .iter()
            .map(|(l, _)| phys(l, lschema))
            .collect::<Result<Vec<_>>>()?;
        let right_keys = node
            .clause
            .on
            .iter()
            .map(|(_, r)| phys(r, rschema))
            .collect::<Result<Vec<_>>>()?;
        let left_ts = phys(&node.clause.left_ts, lschema)?;
        let right_ts = phys(&node.clause.right_ts, rschema)?;
        let left_unit = timestamp_unit(
            &node.clause.left_ts.to_string(),
            &node.clause.left_ts.get_type(lschema)?,
        )?;
        let right_unit = timestamp_unit(
            &node.clause.right_ts.to_string(),
            &node.clause.right_ts.get_type(rschema)?,
        )?;
        // Bounds are resolved against the timestamps' units here, once.
        let scale = TimeScale::new(left_unit, right_unit);
        let bound = |b: &WindowBound| -> Result<PhysicalBound> {
            Ok(PhysicalBound::new(
                phys(&b.value, lschema)?,
                b.unit,
                b.direction,
                &scale,
            ))
        };

        let (mut lf, mut rf, mut pf) = (vec![], vec![], vec![]);
        if let Some(filter) = &node.clause.filter {
            for c in split_conjunction(filter) {
                match side_of(c, lschema, rschema) {
                    Side::None | Side::Left => lf.push(c.clone()),
                    Side::Right => rf.push(c.clone()),
                    Side::Both => pf.push(c.clone()),
                }
            }
        }
        let opt = |v: Vec<Expr>, s: &DFSchema| -> Result<Option<Arc<dyn PhysicalExpr>>> {
            conjunction(v).map(|e| phys(&e, s)).transpose()
        };

        let props = session.execution_props();
        let left_len = lschema.fields().len();
        let mut aggs = Vec::with_capacity(node.clause.aggs.len());
        for (i, agg) in node.clause.aggs.iter().enumerate() {
            let field = Arc::clone(node.schema().as_ref().field(left_len + i));
            let Expr::AggregateFunction(AggregateFunction { func, params }) = agg else {
                return plan_err!("WINDOW JOIN expects an aggregate function, got {agg}");
            };
            let input = match side_of(agg, lschema, rschema) {
                Side::None | Side::Right => AggInput::Right,
                Side::Left | Side::Both => AggInput::Pair,
            };
            let (ls, ps): (&DFSchema, Schema) = match input {
                AggInput::Right => (rschema, rschema.as_arrow().clone()),
                AggInput::Pair => (&joined, pair_physical.clone()),
            };
            let known = KnownAggregate::of(func);
            let simple =
                !params.distinct && params.filter.is_none() && params.order_by.is_empty();
            let one_float_arg = || -> Result<bool> {
                Ok(params.args.len() == 1
                    && matches!(
                        params.args[0].get_type(ls)?,
                        DataType::Float32 | DataType::Float64
                    ))
            };
            let kind_and_args = match known {
                Some(KnownAggregate::Count)
                    if simple
                        && params.args.iter().all(
                            |a| matches!(a, Expr::Literal(v, _) if !v.is_null()),
                        ) =>
                {
                    Some((WindowAggKind::CountStar, vec![]))
                }
                Some(KnownAggregate::Positional(p))
                    if simple && params.args.len() == 1 =>
                {
                    let kind = match p {
                        Position::First => WindowAggKind::First,
                        Position::Last => WindowAggKind::Last,
                        Position::FirstNotNull => WindowAggKind::FirstNotNull,
                        Position::LastNotNull => WindowAggKind::LastNotNull,
                    };
                    Some((kind, vec![phys(&params.args[0], ls)?]))
                }
                Some(KnownAggregate::Min) if simple && one_float_arg()? => {
                    Some((WindowAggKind::MinFloat, vec![phys(&params.args[0], ls)?]))
                }
                Some(KnownAggregate::Max) if simple && one_float_arg()? => {
                    Some((WindowAggKind::MaxFloat, vec![phys(&params.args[0], ls)?]))
                }
                _ => None,
            };
            let (kind, args) = match kind_and_args {
                Some(k) => k,
                None => {
                    let LoweredAggregate {
                        aggregate: expr,
                        filter,
                        order_bys: order,
                    } = LoweredAggregateBuilder::new(agg, ls, &ps, props, planning_ctx)
                        .build()?;
                    if filter.is_some() {
                        return not_impl_err!(
                            "FILTER (WHERE ...) on a WINDOW JOIN aggregate is not supported: {agg}"
                        );
                    }
                    if !order.is_empty() {
                        return not_impl_err!(
                            "ORDER BY inside a WINDOW JOIN aggregate is not supported: {agg}; windows aggregate in timestamp order"
                        );
                    }
                    let args = expr.expressions();
                    (WindowAggKind::Accumulate(expr), args)
                }
            };
            aggs.push(WindowAgg {
                kind,
                input,
                args,
                field,
                display: agg.to_string(),
            });
        }

        let spec = WindowJoinSpec {
            left_keys,
            right_keys,
            left_ts,
            right_ts,
            lo: bound(&node.clause.lo)?,
            hi: bound(&node.clause.hi)?,
            scale,
            prevailing: node.clause.prevailing,
            left_filter: opt(lf, lschema)?,
            right_filter: opt(rf, rschema)?,
            pair_filter: opt(pf, &joined)?,
            aggs,
        };
        let options = session.config_options();
        let ts = options
            .extensions
            .get::<TsJoinOptions>()
            .cloned()
            .unwrap_or_default();
        let settings = WindowJoinSettings {
            workers: if ts.window_join_workers > 0 {
                ts.window_join_workers
            } else {
                options.execution.target_partitions
            },
            fast_path: ts.window_join_fast_path,
            simd: ts.window_join_simd,
            sum_prefix_min: ts.window_join_sum_prefix_min,
            min_max_table_min: ts.window_join_min_max_table_min,
            streaming: ts.window_join_streaming,
        };
        let distribution = crate::window_join::DistributionSetting::for_session(
            options,
            !spec.left_keys.is_empty(),
            &[&physical_inputs[1]],
        );
        let exec = WindowJoinExec::try_new(
            Arc::clone(&physical_inputs[0]),
            Arc::clone(&physical_inputs[1]),
            Arc::new(spec),
            settings,
        )?
        .with_distribution(distribution)?;
        Ok(Some(Arc::new(exec)))
    }
}

/// A [`QueryPlanner`] that knows tsjoin's logical nodes.
#[derive(Debug, Default)]
pub struct TsJoinQueryPlanner;

#[async_trait]
impl QueryPlanner for TsJoinQueryPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session: &dyn Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let planner = DefaultPhysicalPlanner::with_extension_planners(vec![
            Arc::new(WindowJoinPlanner),
            Arc::new(crate::asof_join::AsofJoinPlanner),
            Arc::new(crate::tail::TailPlanner),
            Arc::new(crate::horizon_join::HorizonJoinPlanner),
        ]);
        let plan = planner.create_physical_plan(logical_plan, session).await?;
        let plan = crate::row_group_balance::balance_row_groups(plan, session).await?;
        crate::priority::gate_session_plan(plan, session)
    }
}
