//! [`WindowJoinRelationPlanner`]: plans a nested WINDOW JOIN (see `ast.rs`)
//! into a [`WindowJoinNode`].

use super::ast::{agg_column, call_args, marker, marker_number};
use crate::config::TimestampRegistry;
use crate::window_join::{
    BoundUnit, Direction, Prevailing, Side, WindowBound, WindowJoinClause,
    WindowJoinNode, constant_i64, side_of, timestamp_unit, unit_nanos,
};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Column, DFSchema, Result, plan_datafusion_err, plan_err};
use datafusion::logical_expr::binary::comparison_coercion;
use datafusion::logical_expr::planner::{
    PlannedRelation, RelationPlanner, RelationPlannerContext, RelationPlanning,
};
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{
    BinaryExpr, Expr, ExprSchemable, Extension, LogicalPlan, Operator, cast,
};
use sqlparser::ast::{
    self as ast, Ident, JoinConstraint, JoinOperator, TableFactor, Value,
};
use std::sync::Arc;

/// An ON clause split into equality keys `(left, right)` and the rest.
type OnClause = (Vec<(Expr, Expr)>, Option<Expr>);

/// Plans `NestedJoin(left WINDOW JOIN right)` table factors; leaves every
/// other relation to DataFusion.
#[derive(Debug)]
pub struct WindowJoinRelationPlanner {
    timestamps: Arc<TimestampRegistry>,
}

impl WindowJoinRelationPlanner {
    /// A planner that finds designated timestamps in `timestamps`.
    pub fn new(timestamps: Arc<TimestampRegistry>) -> Self {
        Self { timestamps }
    }
}

impl RelationPlanner for WindowJoinRelationPlanner {
    fn plan_relation(
        &self,
        relation: TableFactor,
        ctx: &mut dyn RelationPlannerContext,
    ) -> Result<RelationPlanning> {
        let is_ours = matches!(&relation, TableFactor::NestedJoin { table_with_joins, .. }
            if table_with_joins.joins.len() == 1 && marker(&table_with_joins.joins[0]).is_some());
        if !is_ours {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        }
        let TableFactor::NestedJoin {
            table_with_joins,
            alias,
        } = relation
        else {
            unreachable!()
        };
        let twj = *table_with_joins;
        let join = twj.joins.into_iter().next().unwrap();
        let JoinOperator::AsOf {
            match_condition: ast::Expr::Function(f),
            constraint,
        } = join.join_operator
        else {
            unreachable!()
        };
        let left = ctx.plan(twj.relation)?;
        let right = ctx.plan(join.relation)?;
        let node = self.plan_window_join(ctx, left, right, &f, constraint)?;
        let plan = LogicalPlan::Extension(Extension {
            node: Arc::new(node),
        });
        Ok(RelationPlanning::Planned(Box::new(PlannedRelation::new(
            plan, alias,
        ))))
    }
}

/// The text of a single-quoted string argument (a marker's unit, direction...).
pub(super) fn string_arg(e: &ast::Expr) -> Option<String> {
    match e {
        ast::Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    }
}

impl WindowJoinRelationPlanner {
    fn plan_window_join(
        &self,
        ctx: &mut dyn RelationPlannerContext,
        left: LogicalPlan,
        right: LogicalPlan,
        marker: &ast::Function,
        constraint: JoinConstraint,
    ) -> Result<WindowJoinNode> {
        marker_number(marker)
            .ok_or_else(|| plan_datafusion_err!("malformed WINDOW JOIN marker"))?;
        let args = call_args(marker);
        if args.len() < 8 {
            return plan_err!("malformed WINDOW JOIN marker");
        }
        let (lschema, rschema) = (Arc::clone(left.schema()), Arc::clone(right.schema()));
        let joined = lschema.join(&rschema)?;
        let left_ts = self.designated_timestamp(&left, "left")?;
        let right_ts = self.designated_timestamp(&right, "right")?;

        // ON: keys and a residual filter.
        let (on, filter) = self.plan_on(ctx, constraint, &lschema, &rschema, &joined)?;

        // RANGE BETWEEN
        let left_unit =
            timestamp_unit(&left_ts.to_string(), &left_ts.get_type(&lschema)?)?;
        let mut bound = |value: &ast::Expr,
                         unit: &ast::Expr,
                         dir: &ast::Expr|
         -> Result<WindowBound> {
            let unit = string_arg(unit)
                .and_then(|u| {
                    if u == "raw" {
                        Some(BoundUnit::Raw)
                    } else {
                        BoundUnit::parse(&u)
                    }
                })
                .ok_or_else(|| {
                    plan_datafusion_err!("malformed WINDOW JOIN bound unit")
                })?;
            let direction = string_arg(dir)
                .and_then(|d| Direction::parse(&d))
                .ok_or_else(|| {
                    plan_datafusion_err!("malformed WINDOW JOIN bound direction")
                })?;
            let value = ctx.sql_to_expr(value.clone(), &joined)?;
            match side_of(&value, &lschema, &rschema) {
                Side::Right | Side::Both => {
                    return plan_err!(
                        "RANGE BETWEEN expression must not reference right table columns: {value}"
                    );
                }
                Side::None => match constant_i64(&value) {
                    Some(v) if v < 0 => {
                        return plan_err!(
                            "non-negative integer expression expected, got {value}"
                        );
                    }
                    Some(_) => {}
                    None if is_null_literal(&value) => {}
                    None => {
                        return plan_err!(
                            "integer expression expected in RANGE BETWEEN, got {value}"
                        );
                    }
                },
                Side::Left => {
                    let t = value.get_type(&lschema)?;
                    if !t.is_integer() && t != DataType::Null {
                        return plan_err!(
                            "integer expression expected in RANGE BETWEEN, got {value} of type {t}"
                        );
                    }
                }
            }
            Ok(WindowBound {
                value,
                unit,
                direction,
            })
        };
        let lo = bound(args[1], args[2], args[3])?;
        let hi = bound(args[4], args[5], args[6])?;
        if let (Some(l), Some(h)) = (lo.constant(), hi.constant()) {
            let nanos = |v: i64, b: &WindowBound| {
                v as i128
                    * b.unit.nanos().unwrap_or(unit_nanos(left_unit)) as i128
                    * b.direction.sign() as i128
            };
            if nanos(h, &hi) < nanos(l, &lo) {
                return plan_err!(
                    "WINDOW join hi value cannot be less than lo value: RANGE BETWEEN {lo} AND {hi}"
                );
            }
        }
        let prevailing = string_arg(args[7])
            .and_then(|p| Prevailing::parse(&p))
            .ok_or_else(|| {
                plan_datafusion_err!("malformed WINDOW JOIN prevailing mode")
            })?;

        // Aggregates moved here by the AST pass.
        let mut aggs = vec![];
        let mut names = vec![];
        for a in &args[8..] {
            let e = ctx.sql_to_expr((*a).clone(), &joined)?;
            let e = match e {
                Expr::Alias(a) => *a.expr,
                e => e,
            };
            if !matches!(e, Expr::AggregateFunction(_)) {
                return plan_err!("WINDOW JOIN expects an aggregate function, got {e}");
            }
            let name = agg_column(a);
            // The column would be ambiguous next to a left column of that
            // name (a sub-query's unaliased aggregate, say).
            if left.schema().fields().iter().any(|f| *f.name() == name) {
                return plan_err!(
                    "WINDOW JOIN aggregate {name}: its left side already has a column named {name}; alias one of them"
                );
            }
            aggs.push(e);
            names.push(name);
        }
        WindowJoinNode::try_new(
            Arc::new(left),
            Arc::new(right),
            WindowJoinClause {
                on,
                filter,
                left_ts,
                right_ts,
                lo,
                hi,
                prevailing,
                aggs,
                agg_names: names,
            },
        )
    }

    /// Splits ON into equality keys (left expr, right expr) and the rest.
    pub(super) fn plan_on(
        &self,
        ctx: &mut dyn RelationPlannerContext,
        constraint: JoinConstraint,
        lschema: &DFSchema,
        rschema: &DFSchema,
        joined: &DFSchema,
    ) -> Result<OnClause> {
        let shorthand = |ids: Vec<Ident>,
                         ctx: &mut dyn RelationPlannerContext|
         -> Result<Vec<(Expr, Expr)>> {
            ids.into_iter()
                .map(|id| {
                    let name = ctx.normalize_ident(id);
                    let col = |s: &DFSchema, side: &str| -> Result<Expr> {
                        // In a chain the left side may hold the name twice: the
                        // first relation's column is meant (QuestDB's master).
                        let (q, f) = s
                            .iter()
                            .find(|(_, f)| *f.name() == name)
                            .ok_or_else(|| {
                                plan_datafusion_err!("WINDOW JOIN ON ({name}): the {side} side has no column {name}")
                            })?;
                        Ok(Expr::Column(Column::new(q.cloned(), f.name())))
                    };
                    Ok((col(lschema, "left")?, col(rschema, "right")?))
                })
                .collect()
        };
        let (mut keys, expr) = match constraint {
            JoinConstraint::None => (vec![], None),
            JoinConstraint::Using(names) => {
                let ids = names
                    .into_iter()
                    .filter_map(|n| n.0.last().and_then(|p| p.as_ident().cloned()))
                    .collect();
                (shorthand(ids, ctx)?, None)
            }
            JoinConstraint::On(e) => {
                let mut inner = &e;
                while let ast::Expr::Nested(x) = inner {
                    inner = x;
                }
                match inner {
                    ast::Expr::Identifier(id) => {
                        (shorthand(vec![id.clone()], ctx)?, None)
                    }
                    ast::Expr::Tuple(items)
                        if items
                            .iter()
                            .all(|i| matches!(i, ast::Expr::Identifier(_))) =>
                    {
                        let ids = items
                            .iter()
                            .map(|i| match i {
                                ast::Expr::Identifier(id) => id.clone(),
                                _ => unreachable!(),
                            })
                            .collect();
                        (shorthand(ids, ctx)?, None)
                    }
                    _ => {
                        let on = ctx.sql_to_expr(e, joined)?;
                        let t = on.get_type(joined)?;
                        if t != DataType::Boolean && t != DataType::Null {
                            return plan_err!(
                                "boolean expression expected in WINDOW JOIN ON, got {on} of type {t}"
                            );
                        }
                        (vec![], Some(on))
                    }
                }
            }
            JoinConstraint::Natural => {
                return plan_err!("NATURAL is not supported with WINDOW JOIN");
            }
        };
        let mut rest = vec![];
        if let Some(on) = expr {
            for c in split_conjunction(&on) {
                let key = match c {
                    Expr::BinaryExpr(BinaryExpr {
                        left: a,
                        op: Operator::Eq | Operator::IsNotDistinctFrom,
                        right: b,
                    }) => {
                        match (side_of(a, lschema, rschema), side_of(b, lschema, rschema))
                        {
                            (Side::Left, Side::Right) => {
                                Some(((**a).clone(), (**b).clone()))
                            }
                            (Side::Right, Side::Left) => {
                                Some(((**b).clone(), (**a).clone()))
                            }
                            _ => None,
                        }
                    }
                    _ => None,
                };
                match key {
                    Some(k) => keys.push(k),
                    None => rest.push(null_as_value(c.clone())?),
                }
            }
        }
        let keys = keys
            .into_iter()
            .map(|(l, r)| coerce_key(l, r, lschema, rschema))
            .collect::<Result<Vec<_>>>()?;
        Ok((keys, conjunction(rest)))
    }

    /// The designated timestamp column of `plan`, by registry or by type.
    pub(super) fn designated_timestamp(
        &self,
        plan: &LogicalPlan,
        side: &str,
    ) -> Result<Expr> {
        let schema = plan.schema();
        // A chain: the time of the join to the left is its left time.
        if let LogicalPlan::Extension(ext) = plan
            && let Some(node) = ext
                .node
                .as_any()
                .downcast_ref::<crate::asof_join::AsofJoinNode>()
        {
            return Ok(node.clause.left_ts.clone());
        }
        if let Some(c) = designated_column(plan, &self.timestamps) {
            timestamp_unit(
                &c.name,
                schema.qualified_field_from_column(&c)?.1.data_type(),
            )?;
            return Ok(Expr::Column(c));
        }
        let ts: Vec<_> = schema
            .iter()
            .filter(|(_, f)| matches!(f.data_type(), DataType::Timestamp(..)))
            .collect();
        let pick = match ts.len() {
            1 => Some(ts[0]),
            0 => None,
            _ => {
                let named: Vec<_> = ts
                    .iter()
                    .filter(|(_, f)| self.timestamps.is_designated_anywhere(f.name()))
                    .collect();
                (named.len() == 1).then(|| *named[0])
            }
        };
        match pick {
            Some((q, f)) => Ok(Expr::Column(Column::new(q.cloned(), f.name()))),
            None if ts.is_empty() => plan_err!(
                "{side} side of time series join has no timestamp: it has no timestamp column"
            ),
            None => {
                let names: Vec<&str> =
                    ts.iter().map(|(_, f)| f.name().as_str()).collect();
                plan_err!(
                    "{side} side of time series join has no timestamp: it has several timestamp columns ({}); name the designated one when registering the table",
                    names.join(", ")
                )
            }
        }
    }
}

fn is_null_literal(e: &Expr) -> bool {
    matches!(e, Expr::Literal(v, _) if v.is_null())
}

/// The registered designated-timestamp column that `plan` passes through,
/// qualified. A join's is its left side's, as in QuestDB (where the left
/// table of a join is the master whose timestamp the result keeps).
fn designated_column(plan: &LogicalPlan, reg: &TimestampRegistry) -> Option<Column> {
    if let LogicalPlan::Join(j) = plan {
        let c = designated_column(&j.left, reg)?;
        return plan.schema().has_column(&c).then_some(c);
    }
    let name = designated_name(plan, reg)?;
    let (q, f) = plan
        .schema()
        .qualified_field_with_unqualified_name(&name)
        .ok()?;
    Some(Column::new(q.cloned(), f.name()))
}

/// The registered designated-timestamp column that `plan` passes through.
fn designated_name(plan: &LogicalPlan, reg: &TimestampRegistry) -> Option<String> {
    let name = match plan {
        LogicalPlan::TableScan(scan) => reg.get(scan.table_name.table()),
        LogicalPlan::Extension(ext) => {
            let any = ext.node.as_any();
            let left_ts = match any.downcast_ref::<WindowJoinNode>() {
                Some(node) => Some(&node.clause.left_ts),
                None => any
                    .downcast_ref::<crate::asof_join::AsofJoinNode>()
                    .map(|node| &node.clause.left_ts),
            };
            // Its left time, qualified: the right side's copy of the name
            // (when `SELECT *` did not rename it) does not make it ambiguous.
            return match left_ts {
                Some(Expr::Column(c)) if plan.schema().has_column(c) => {
                    Some(c.name.clone())
                }
                _ => None,
            };
        }
        LogicalPlan::SubqueryAlias(_)
        | LogicalPlan::Filter(_)
        | LogicalPlan::Sort(_)
        | LogicalPlan::Limit(_)
        | LogicalPlan::Projection(_)
        | LogicalPlan::Repartition(_) => designated_name(plan.inputs()[0], reg),
        _ => None,
    }?;
    plan.schema()
        .qualified_field_with_unqualified_name(&name)
        .ok()
        .map(|_| name)
}

/// Casts a key pair to one type (dictionaries compare by value).
fn coerce_key(
    l: Expr,
    r: Expr,
    lschema: &DFSchema,
    rschema: &DFSchema,
) -> Result<(Expr, Expr)> {
    let value_type = |t: DataType| match t {
        DataType::Dictionary(_, v) => *v,
        t => t,
    };
    let (lt0, rt0) = (l.get_type(lschema)?, r.get_type(rschema)?);
    let (lt, rt) = (value_type(lt0.clone()), value_type(rt0.clone()));
    let family = |t: &DataType| {
        if t.is_numeric() {
            1
        } else if matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) {
            2
        } else {
            0
        }
    };
    let common = if lt == rt {
        lt
    } else if family(&lt) == 0 || family(&lt) != family(&rt) {
        return plan_err!("join column type mismatch: {l} is {lt0} but {r} is {rt0}");
    } else {
        match comparison_coercion(&lt, &rt) {
            Some(t) if !matches!(t, DataType::Dictionary(..)) => t,
            _ => {
                return plan_err!(
                    "join column type mismatch: {l} is {lt0} but {r} is {rt0}"
                );
            }
        }
    };
    let wrap = |e: Expr, t: &DataType| {
        if *t == common {
            e
        } else {
            cast(e, common.clone())
        }
    };
    Ok((wrap(l, &lt0), wrap(r, &rt0)))
}

/// QuestDB compares NULL as a value in join conditions: in an ON filter,
/// `a = b` is true when both sides are NULL and `a != b` (`<>`) is true
/// when exactly one side is NULL. Rewrites those comparisons, anywhere in
/// the filter expression (not inside sub-queries), to `IS NOT DISTINCT
/// FROM` / `IS DISTINCT FROM`. Ordering comparisons (`<`, `>=`, ...) keep
/// SQL's rule: false (NULL) against a NULL.
///
/// ```ignore
/// // ON t.sym = p.sym AND t.venue != p.venue
/// let f = null_as_value(col("t.venue").not_eq(col("p.venue")))?;
/// assert_eq!(f.to_string(), "t.venue IS DISTINCT FROM p.venue");
/// ```
pub(super) fn null_as_value(e: Expr) -> Result<Expr> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    e.transform(|e| {
        Ok(match e {
            Expr::BinaryExpr(BinaryExpr { left, op, right })
                if matches!(op, Operator::Eq | Operator::NotEq) =>
            {
                let op = if op == Operator::Eq {
                    Operator::IsNotDistinctFrom
                } else {
                    Operator::IsDistinctFrom
                };
                Transformed::yes(Expr::BinaryExpr(BinaryExpr { left, op, right }))
            }
            e => Transformed::no(e),
        })
    })
    .map(|t| t.data)
}
