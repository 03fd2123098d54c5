//! [`HorizonJoinNode`]: the logical plan node of a HORIZON JOIN.

use super::spec::HorizonOffsets;
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::{DFSchema, DFSchemaRef, Result, TableReference, internal_err};
use datafusion::logical_expr::{
    Expr, ExprSchemable, LogicalPlan, UserDefinedLogicalNodeCore,
};
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// Name of the pseudo-table column with the offset (left resolution).
pub const OFFSET_COLUMN: &str = "offset";
/// Name of the pseudo-table column with `left time + offset`.
pub const TIMESTAMP_COLUMN: &str = "timestamp";

/// How one right table is matched.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub struct HorizonRight {
    /// Equality keys `(left expr, right expr)`; NULL matches NULL.
    pub on: Vec<(Expr, Expr)>,
    /// Left-only ON conditions (a left row that fails them gets no match in
    /// this table). Right-only ones filter the right input before the join.
    pub filter: Option<Expr>,
    /// This right table's time.
    pub right_ts: Expr,
}

/// The parts of a HORIZON JOIN besides its inputs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub struct HorizonJoinClause {
    /// Left time (the designated timestamp).
    pub left_ts: Expr,
    /// One entry per right input, in join order.
    pub rights: Vec<HorizonRight>,
    /// RANGE or LIST.
    pub offsets: HorizonOffsets,
    /// The pseudo-table's alias (`h` in `AS h`).
    pub alias: String,
}

/// A HORIZON JOIN: for every left row and every offset (row-major: a left
/// row's offsets are consecutive, in offset order), the left columns, each
/// right table's columns at its ASOF match for `left time + offset` (NULL
/// when none), then `<alias>.offset` (BIGINT, in the left timestamp's unit)
/// and `<alias>.timestamp` (left time + offset). Aggregation over these
/// pairs is left to the plan above (the SQL front end adds the implicit
/// GROUP BY). Planned by [`super::HorizonJoinPlanner`] into a
/// [`super::HorizonJoinExec`].
///
/// ```ignore
/// let node = HorizonJoinNode::try_new(left, vec![right], clause)?;
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HorizonJoinNode {
    /// Left (FROM) input.
    pub left: Arc<LogicalPlan>,
    /// Right inputs, in join order.
    pub rights: Vec<Arc<LogicalPlan>>,
    /// Keys, times, offsets and alias.
    pub clause: HorizonJoinClause,
    schema: DFSchemaRef,
}

impl HorizonJoinNode {
    /// Builds the node and derives its output schema.
    pub fn try_new(
        left: Arc<LogicalPlan>,
        rights: Vec<Arc<LogicalPlan>>,
        clause: HorizonJoinClause,
    ) -> Result<Self> {
        if rights.len() != clause.rights.len() || rights.is_empty() {
            return internal_err!("HorizonJoinNode: one clause per right input expected");
        }
        let mut fields: Vec<_> = left
            .schema()
            .iter()
            .map(|(q, f)| (q.cloned(), Arc::clone(f)))
            .collect();
        for r in &rights {
            fields.extend(r.schema().iter().map(|(q, f)| {
                (q.cloned(), Arc::new(f.as_ref().clone().with_nullable(true)))
            }));
        }
        let ts_type = clause.left_ts.get_type(left.schema())?;
        let alias = Some(TableReference::bare(clause.alias.as_str()));
        fields.push((
            alias.clone(),
            Arc::new(Field::new(OFFSET_COLUMN, DataType::Int64, false)),
        ));
        fields.push((alias, Arc::new(Field::new(TIMESTAMP_COLUMN, ts_type, true))));
        let schema =
            DFSchema::new_with_metadata(fields, left.schema().metadata().clone())?;
        Ok(Self {
            left,
            rights,
            clause,
            schema: Arc::new(schema),
        })
    }

    /// Rebuilds a node from its inputs and expressions (layout: see
    /// [`UserDefinedLogicalNodeCore::expressions`]); `shape` is, per right,
    /// its key count and whether it has a filter.
    pub fn try_from_exprs(
        mut inputs: Vec<LogicalPlan>,
        exprs: Vec<Expr>,
        shape: &[(usize, bool)],
        offsets: HorizonOffsets,
        alias: String,
    ) -> Result<Self> {
        let wanted: usize = 1 + shape
            .iter()
            .map(|(k, f)| 2 * k + 1 + usize::from(*f))
            .sum::<usize>();
        if inputs.len() != shape.len() + 1 || exprs.len() != wanted {
            return internal_err!(
                "HorizonJoinNode: wrong number of inputs or expressions"
            );
        }
        let mut it = exprs.into_iter();
        let left_ts = it.next().unwrap();
        let mut rights = vec![];
        for &(k, has_filter) in shape {
            let l: Vec<Expr> = it.by_ref().take(k).collect();
            let r: Vec<Expr> = it.by_ref().take(k).collect();
            let right_ts = it.next().unwrap();
            let filter = if has_filter { it.next() } else { None };
            rights.push(HorizonRight {
                on: l.into_iter().zip(r).collect(),
                filter,
                right_ts,
            });
        }
        let right_inputs = inputs.split_off(1).into_iter().map(Arc::new).collect();
        let left = inputs.pop().unwrap();
        Self::try_new(
            Arc::new(left),
            right_inputs,
            HorizonJoinClause {
                left_ts,
                rights,
                offsets,
                alias,
            },
        )
    }

    /// Per right: key count and whether it has a filter.
    pub fn shape(&self) -> Vec<(usize, bool)> {
        self.clause
            .rights
            .iter()
            .map(|r| (r.on.len(), r.filter.is_some()))
            .collect()
    }
}

impl PartialOrd for HorizonJoinNode {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        let key = |n: &Self| (Arc::clone(&n.left), n.rights.clone(), n.clause.clone());
        key(self)
            .partial_cmp(&key(other))
            .filter(|o| *o != Ordering::Equal || self == other)
    }
}

impl UserDefinedLogicalNodeCore for HorizonJoinNode {
    fn name(&self) -> &str {
        "HorizonJoin"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        std::iter::once(self.left.as_ref())
            .chain(self.rights.iter().map(|r| r.as_ref()))
            .collect()
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    /// Order: left time, then per right: left keys, right keys, right
    /// time, and the filter if there is one.
    fn expressions(&self) -> Vec<Expr> {
        let c = &self.clause;
        let mut v = vec![c.left_ts.clone()];
        for r in &c.rights {
            v.extend(r.on.iter().map(|(l, _)| l.clone()));
            v.extend(r.on.iter().map(|(_, r)| r.clone()));
            v.push(r.right_ts.clone());
            v.extend(r.filter.iter().cloned());
        }
        v
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let c = &self.clause;
        write!(f, "HorizonJoin: ")?;
        for (i, r) in c.rights.iter().enumerate() {
            write!(f, "right{i}=[")?;
            if !r.on.is_empty() {
                let on: Vec<String> =
                    r.on.iter().map(|(l, r)| format!("{l} = {r}")).collect();
                write!(f, "on=[{}], ", on.join(", "))?;
            }
            if let Some(filter) = &r.filter {
                write!(f, "filter={filter}, ")?;
            }
            write!(f, "ts={}], ", r.right_ts)?;
        }
        write!(f, "ts={}, offsets={} AS {}", c.left_ts, c.offsets, c.alias)
    }

    fn with_exprs_and_inputs(
        &self,
        exprs: Vec<Expr>,
        inputs: Vec<LogicalPlan>,
    ) -> Result<Self> {
        Self::try_from_exprs(
            inputs,
            exprs,
            &self.shape(),
            self.clause.offsets.clone(),
            self.clause.alias.clone(),
        )
    }

    /// Column pruning: the output columns the parent needs, per input; the
    /// optimizer adds what the node's own expressions read.
    fn necessary_children_exprs(
        &self,
        output_columns: &[usize],
    ) -> Option<Vec<Vec<usize>>> {
        let mut start = 0;
        let mut out = vec![];
        for input in self.inputs() {
            let n = input.schema().fields().len();
            out.push(
                output_columns
                    .iter()
                    .filter(|&&i| i >= start && i < start + n)
                    .map(|&i| i - start)
                    .collect(),
            );
            start += n;
        }
        Some(out)
    }

    // Each left row yields several rows: no LIMIT goes below.
    fn supports_limit_pushdown(&self) -> bool {
        false
    }
}
