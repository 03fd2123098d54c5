//! [`WindowJoinNode`]: the logical plan node of a WINDOW JOIN.

use super::bounds::{BoundUnit, Direction, Prevailing, WindowBound};
use datafusion::common::{DFSchema, DFSchemaRef, Result, internal_err};
use datafusion::logical_expr::{
    Expr, ExprSchemable, LogicalPlan, UserDefinedLogicalNodeCore,
};
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// Which side(s) of the join an expression reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// No columns at all (a constant)
    None,
    /// Left columns only
    Left,
    /// Right columns only
    Right,
    /// Both
    Both,
}

/// The side(s) whose columns `expr` references.
pub(crate) fn side_of(expr: &Expr, left: &DFSchema, right: &DFSchema) -> Side {
    let (mut l, mut r) = (false, false);
    for c in expr.column_refs() {
        if left.has_column(c) {
            l = true;
        } else if right.has_column(c) {
            r = true;
        }
    }
    match (l, r) {
        (false, false) => Side::None,
        (true, false) => Side::Left,
        (false, true) => Side::Right,
        (true, true) => Side::Both,
    }
}

/// What a WINDOW JOIN clause says besides its inputs: the parts of a
/// [`WindowJoinNode`], as the SQL front end resolves them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub struct WindowJoinClause {
    /// Equality keys `(left expr, right expr)`, coerced to one type per pair.
    /// Keys compare null-safely: NULL matches NULL, as in QuestDB.
    pub on: Vec<(Expr, Expr)>,
    /// Remaining ON conjuncts over left and/or right columns; a pair joins
    /// only when it is true. Never removes a left row.
    pub filter: Option<Expr>,
    /// Designated timestamp of the left input.
    pub left_ts: Expr,
    /// Designated timestamp of the right input.
    pub right_ts: Expr,
    /// Window start.
    pub lo: WindowBound,
    /// Window end.
    pub hi: WindowBound,
    /// INCLUDE or EXCLUDE PREVAILING.
    pub prevailing: Prevailing,
    /// Aggregate expressions (`Expr::AggregateFunction`) over the joined schema.
    pub aggs: Vec<Expr>,
    /// Output column name of each aggregate.
    pub agg_names: Vec<String>,
}

/// How a [`WindowJoinNode`]'s flat expression list (keys, timestamps,
/// bounds, aggregates, filter) maps back to its parts, with the parts that
/// are not expressions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprLayout {
    /// Number of equality key pairs.
    pub n_keys: usize,
    /// Whether the last expression is the ON filter.
    pub has_filter: bool,
    /// Unit and direction of the window start.
    pub lo: (BoundUnit, Direction),
    /// Unit and direction of the window end.
    pub hi: (BoundUnit, Direction),
    /// INCLUDE or EXCLUDE PREVAILING.
    pub prevailing: Prevailing,
    /// Output column name of each aggregate.
    pub agg_names: Vec<String>,
}

/// A WINDOW JOIN: for every left row, aggregates over the right rows with an
/// equal key whose timestamp lies in `[ts + lo, ts + hi]` (both inclusive),
/// plus the prevailing row under [`Prevailing::Include`].
///
/// Output schema: every left column (qualifiers kept) followed by one
/// unqualified column per aggregate, named by `agg_names`. Exactly one output
/// row per left row, in left input order.
///
/// Planned by [`super::WindowJoinPlanner`] into a [`super::WindowJoinExec`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WindowJoinNode {
    /// Left (FROM) input
    pub left: Arc<LogicalPlan>,
    /// Right (WINDOW JOIN) input
    pub right: Arc<LogicalPlan>,
    /// The clause: keys, filter, timestamps, bounds, prevailing mode and
    /// aggregates.
    pub clause: WindowJoinClause,
    schema: DFSchemaRef,
}

impl WindowJoinNode {
    /// Builds the node and derives its output schema from the inputs.
    pub fn try_new(
        left: Arc<LogicalPlan>,
        right: Arc<LogicalPlan>,
        clause: WindowJoinClause,
    ) -> Result<Self> {
        let (aggs, agg_names) = (&clause.aggs, &clause.agg_names);
        if aggs.len() != agg_names.len() {
            return internal_err!(
                "WindowJoinNode: {} aggregates but {} names",
                aggs.len(),
                agg_names.len()
            );
        }
        let joined = left.schema().join(right.schema())?;
        let mut fields: Vec<_> = left
            .schema()
            .iter()
            .map(|(q, f)| (q.cloned(), Arc::clone(f)))
            .collect();
        for (agg, name) in aggs.iter().zip(agg_names) {
            let (_, field) = agg.to_field(&joined)?;
            let field = field.as_ref().clone().with_name(name).with_nullable(true);
            fields.push((None, Arc::new(field)));
        }
        let schema =
            DFSchema::new_with_metadata(fields, left.schema().metadata().clone())?;
        Ok(Self {
            left,
            right,
            clause,
            schema: Arc::new(schema),
        })
    }

    /// Rebuilds a node from its inputs and its [`UserDefinedLogicalNodeCore::expressions`]
    /// (used by optimizer rewrites and the proto codec), laid out as `layout` says.
    pub fn try_from_exprs(
        mut inputs: Vec<LogicalPlan>,
        mut exprs: Vec<Expr>,
        layout: ExprLayout,
    ) -> Result<Self> {
        let ExprLayout {
            n_keys,
            has_filter,
            lo,
            hi,
            prevailing,
            agg_names,
        } = layout;
        let k = n_keys;
        let expected = 2 * k + 4 + agg_names.len() + usize::from(has_filter);
        if inputs.len() != 2 || exprs.len() != expected {
            return internal_err!(
                "WindowJoinNode: wrong number of inputs or expressions"
            );
        }
        let filter = if has_filter { exprs.pop() } else { None };
        // Type coercion wraps an aggregate whose display name it changes
        // (`sum(p.price + Int64(1))` → `sum(p.price + Float64(1))`) in an
        // alias to the old name; the node names its outputs itself.
        let aggs = exprs
            .split_off(2 * k + 4)
            .into_iter()
            .map(Expr::unalias)
            .collect();
        let mut it = exprs.into_iter();
        let lefts: Vec<Expr> = it.by_ref().take(k).collect();
        let rights: Vec<Expr> = it.by_ref().take(k).collect();
        let (left_ts, right_ts) = (it.next().unwrap(), it.next().unwrap());
        let lo = WindowBound {
            value: it.next().unwrap(),
            unit: lo.0,
            direction: lo.1,
        };
        let hi = WindowBound {
            value: it.next().unwrap(),
            unit: hi.0,
            direction: hi.1,
        };
        let right = inputs.pop().unwrap();
        let left = inputs.pop().unwrap();
        Self::try_new(
            Arc::new(left),
            Arc::new(right),
            WindowJoinClause {
                on: lefts.into_iter().zip(rights).collect(),
                filter,
                left_ts,
                right_ts,
                lo,
                hi,
                prevailing,
                aggs,
                agg_names,
            },
        )
    }

    /// How [`UserDefinedLogicalNodeCore::expressions`] lays this node's
    /// expressions out, for [`Self::try_from_exprs`].
    pub fn expr_layout(&self) -> ExprLayout {
        ExprLayout {
            n_keys: self.clause.on.len(),
            has_filter: self.clause.filter.is_some(),
            lo: (self.clause.lo.unit, self.clause.lo.direction),
            hi: (self.clause.hi.unit, self.clause.hi.direction),
            prevailing: self.clause.prevailing,
            agg_names: self.clause.agg_names.clone(),
        }
    }

    /// The schema of `left ⨝ right`, against which ON and aggregates resolve.
    pub fn joined_schema(&self) -> Result<DFSchema> {
        self.left.schema().join(self.right.schema())
    }

    /// Same node over a new left input (the schema is rebuilt).
    pub fn with_left(&self, left: LogicalPlan) -> Result<Self> {
        self.with_exprs_and_inputs(
            self.expressions(),
            vec![left, self.right.as_ref().clone()],
        )
    }
}

impl PartialOrd for WindowJoinNode {
    // DFSchema has no ordering, so compare everything but the derived schema.
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        let key =
            |n: &Self| (Arc::clone(&n.left), Arc::clone(&n.right), n.clause.clone());
        key(self)
            .partial_cmp(&key(other))
            .filter(|o| *o != Ordering::Equal || self == other)
    }
}

impl UserDefinedLogicalNodeCore for WindowJoinNode {
    fn name(&self) -> &str {
        "WindowJoin"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![self.left.as_ref(), self.right.as_ref()]
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    /// Order: left keys, right keys, left ts, right ts, lo, hi, aggregates,
    /// then the filter if there is one.
    fn expressions(&self) -> Vec<Expr> {
        let mut v =
            Vec::with_capacity(2 * self.clause.on.len() + 5 + self.clause.aggs.len());
        v.extend(self.clause.on.iter().map(|(l, _)| l.clone()));
        v.extend(self.clause.on.iter().map(|(_, r)| r.clone()));
        v.push(self.clause.left_ts.clone());
        v.push(self.clause.right_ts.clone());
        v.push(self.clause.lo.value.clone());
        v.push(self.clause.hi.value.clone());
        v.extend(self.clause.aggs.iter().cloned());
        v.extend(self.clause.filter.iter().cloned());
        v
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "WindowJoin: ")?;
        if !self.clause.on.is_empty() {
            let on: Vec<String> = self
                .clause
                .on
                .iter()
                .map(|(l, r)| format!("{l} = {r}"))
                .collect();
            write!(f, "on=[{}], ", on.join(", "))?;
        }
        if let Some(filter) = &self.clause.filter {
            write!(f, "filter={filter}, ")?;
        }
        let aggs: Vec<String> = self
            .clause
            .aggs
            .iter()
            .zip(&self.clause.agg_names)
            // Output columns are named by the aggregate as written: show
            // the name only where DataFusion displays the aggregate otherwise.
            .map(|(a, n)| match a.to_string() {
                shown if shown == *n => shown,
                shown => format!("{shown} AS {n}"),
            })
            .collect();
        write!(
            f,
            "ts=[{}, {}], range=[{}, {}], prevailing={}, aggs=[{}]",
            self.clause.left_ts,
            self.clause.right_ts,
            self.clause.lo,
            self.clause.hi,
            self.clause.prevailing.as_str(),
            aggs.join(", ")
        )
    }

    fn with_exprs_and_inputs(
        &self,
        exprs: Vec<Expr>,
        inputs: Vec<LogicalPlan>,
    ) -> Result<Self> {
        Self::try_from_exprs(inputs, exprs, self.expr_layout())
    }

    /// Column pruning: the left columns the parent needs; the optimizer adds
    /// the columns this node's own expressions read, on both sides.
    fn necessary_children_exprs(
        &self,
        output_columns: &[usize],
    ) -> Option<Vec<Vec<usize>>> {
        let left_len = self.left.schema().fields().len();
        let left: Vec<usize> = output_columns
            .iter()
            .copied()
            .filter(|&i| i < left_len)
            .collect();
        Some(vec![left, vec![]])
    }

    // Filters and limits must not be pushed into both inputs (DataFusion's
    // generic rules would); `PushDownWindowJoinFilter` pushes left-only
    // predicates into the left input instead.
    fn supports_limit_pushdown(&self) -> bool {
        false
    }
}
