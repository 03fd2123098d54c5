//! [`AsofJoinNode`]: the logical plan node of an ASOF / LT JOIN.

use super::spec::{AsofMatch, Tolerance};
use datafusion::common::{DFSchema, DFSchemaRef, JoinType, Result, internal_err};
use datafusion::logical_expr::{Expr, LogicalPlan, UserDefinedLogicalNodeCore};
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// The parts of an ASOF JOIN besides its inputs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub struct AsofJoinClause {
    /// Equality keys `(left expr, right expr)`, coerced to one type per
    /// pair; NULL matches NULL, as in QuestDB.
    pub on: Vec<(Expr, Expr)>,
    /// Left-only ON conditions: when not true for a left row, the row gets
    /// no match (it is still emitted). Right-only conditions are applied to
    /// the right input before the join.
    pub filter: Option<Expr>,
    /// Left time (the designated timestamp, or the match condition's).
    pub left_ts: Expr,
    /// Right time.
    pub right_ts: Expr,
    /// Direction and strictness.
    pub matching: AsofMatch,
    /// Optional TOLERANCE.
    pub tolerance: Option<Tolerance>,
    /// Which rows without a match the join emits: `Left` (QuestDB's ASOF /
    /// LT JOIN, Snowflake's, DuckDB's `ASOF LEFT JOIN`: every left row),
    /// `Inner` (DuckDB's `ASOF JOIN`: matched left rows only), `Right` and
    /// `Full` (DuckDB's: also every right row no left row matched, with
    /// NULL left columns, after the left rows).
    pub join_type: JoinType,
    /// ON conditions reading both sides (over left columns then right
    /// columns): the match is the latest (forward: earliest) right row
    /// that also satisfies them.
    pub pair_filter: Option<Expr>,
}

/// An ASOF JOIN: every left row once, in left order, followed by the
/// columns of its matching right row (NULL when none; with
/// [`AsofJoinClause::join_type`] `Inner` or `Right`, only the left rows that
/// match; `Right` and `Full` then add the right rows nothing matched).
///
/// Output schema: left columns then right columns (qualifiers kept; right
/// columns nullable). Planned by [`super::AsofJoinPlanner`] into an
/// [`super::AsofJoinExec`].
///
/// ```ignore
/// let node = AsofJoinNode::try_new(left, right, clause)?;
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AsofJoinNode {
    /// Left (FROM) input.
    pub left: Arc<LogicalPlan>,
    /// Right (ASOF JOIN) input.
    pub right: Arc<LogicalPlan>,
    /// Keys, filter, times, direction and tolerance.
    pub clause: AsofJoinClause,
    schema: DFSchemaRef,
}

impl AsofJoinNode {
    /// Builds the node and derives its output schema.
    pub fn try_new(
        left: Arc<LogicalPlan>,
        right: Arc<LogicalPlan>,
        clause: AsofJoinClause,
    ) -> Result<Self> {
        // Right and Full emit right rows without a left one.
        let left_nullable = super::spec::emits_unmatched_right(clause.join_type);
        let mut fields: Vec<_> = left
            .schema()
            .iter()
            .map(|(q, f)| {
                let f = if left_nullable {
                    Arc::new(f.as_ref().clone().with_nullable(true))
                } else {
                    Arc::clone(f)
                };
                (q.cloned(), f)
            })
            .collect();
        fields.extend(right.schema().iter().map(|(q, f)| {
            (q.cloned(), Arc::new(f.as_ref().clone().with_nullable(true)))
        }));
        let schema =
            DFSchema::new_with_metadata(fields, left.schema().metadata().clone())?;
        Ok(Self {
            left,
            right,
            clause,
            schema: Arc::new(schema),
        })
    }

    /// Rebuilds a node from its inputs and expressions (see
    /// [`UserDefinedLogicalNodeCore::expressions`] for the layout);
    /// `filters`: whether the left filter and the pair filter are there.
    pub fn try_from_exprs(
        mut inputs: Vec<LogicalPlan>,
        mut exprs: Vec<Expr>,
        n_keys: usize,
        (has_filter, has_pair_filter): (bool, bool),
        matching: AsofMatch,
        tolerance: Option<Tolerance>,
        join_type: JoinType,
    ) -> Result<Self> {
        let n = 2 * n_keys + 2 + usize::from(has_filter) + usize::from(has_pair_filter);
        if inputs.len() != 2 || exprs.len() != n {
            return internal_err!("AsofJoinNode: wrong number of inputs or expressions");
        }
        let pair_filter = if has_pair_filter { exprs.pop() } else { None };
        let filter = if has_filter { exprs.pop() } else { None };
        let right_ts = exprs.pop().unwrap();
        let left_ts = exprs.pop().unwrap();
        let rights = exprs.split_off(n_keys);
        let right = inputs.pop().unwrap();
        let left = inputs.pop().unwrap();
        Self::try_new(
            Arc::new(left),
            Arc::new(right),
            AsofJoinClause {
                on: exprs.into_iter().zip(rights).collect(),
                filter,
                left_ts,
                right_ts,
                matching,
                tolerance,
                join_type,
                pair_filter,
            },
        )
    }
}

impl PartialOrd for AsofJoinNode {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        let key =
            |n: &Self| (Arc::clone(&n.left), Arc::clone(&n.right), n.clause.clone());
        key(self)
            .partial_cmp(&key(other))
            .filter(|o| *o != Ordering::Equal || self == other)
    }
}

impl UserDefinedLogicalNodeCore for AsofJoinNode {
    fn name(&self) -> &str {
        "AsofJoin"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![self.left.as_ref(), self.right.as_ref()]
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    /// Order: left keys, right keys, left time, right time, then the filter
    /// and the pair filter, each if there is one.
    fn expressions(&self) -> Vec<Expr> {
        let c = &self.clause;
        let mut v: Vec<Expr> = c.on.iter().map(|(l, _)| l.clone()).collect();
        v.extend(c.on.iter().map(|(_, r)| r.clone()));
        v.push(c.left_ts.clone());
        v.push(c.right_ts.clone());
        v.extend(c.filter.iter().cloned());
        v.extend(c.pair_filter.iter().cloned());
        v
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let c = &self.clause;
        write!(f, "AsofJoin: ")?;
        if !c.on.is_empty() {
            let on: Vec<String> =
                c.on.iter().map(|(l, r)| format!("{l} = {r}")).collect();
            write!(f, "on=[{}], ", on.join(", "))?;
        }
        if let Some(filter) = &c.filter {
            write!(f, "filter={filter}, ")?;
        }
        if let Some(filter) = &c.pair_filter {
            write!(f, "pair_filter={filter}, ")?;
        }
        write!(
            f,
            "ts=[{}, {}], match={}",
            c.left_ts, c.right_ts, c.matching
        )?;
        if let Some(t) = &c.tolerance {
            write!(f, ", tolerance={t}")?;
        }
        if c.join_type != JoinType::Left {
            write!(f, ", join_type={}", c.join_type)?;
        }
        Ok(())
    }

    fn with_exprs_and_inputs(
        &self,
        exprs: Vec<Expr>,
        inputs: Vec<LogicalPlan>,
    ) -> Result<Self> {
        Self::try_from_exprs(
            inputs,
            exprs,
            self.clause.on.len(),
            (
                self.clause.filter.is_some(),
                self.clause.pair_filter.is_some(),
            ),
            self.clause.matching,
            self.clause.tolerance,
            self.clause.join_type,
        )
    }

    /// Column pruning: the output columns the parent needs, per side; the
    /// optimizer adds what the node's own expressions read.
    fn necessary_children_exprs(
        &self,
        output_columns: &[usize],
    ) -> Option<Vec<Vec<usize>>> {
        let n = self.left.schema().fields().len();
        let left = output_columns.iter().copied().filter(|&i| i < n).collect();
        let right = output_columns
            .iter()
            .filter(|&&i| i >= n)
            .map(|&i| i - n)
            .collect();
        Some(vec![left, right])
    }

    // A LIMIT may go to the left input only (one output row per left row);
    // DataFusion's generic rule would push it into both.
    fn supports_limit_pushdown(&self) -> bool {
        false
    }
}
