//! [`FoldPlan`]: how a folding HORIZON JOIN evaluates its aggregates'
//! arguments without building the (row, offset) pairs' columns from
//! scratch for every offset.
//!
//! Each argument (an expression over the pairs) is split into *leaves*:
//! its largest subexpressions that read one side only, and the bare
//! `offset` and `timestamp` columns. A right leaf is evaluated once per
//! right row, in the per-key index's order, and each offset's pairs
//! gather it at their matches; a left leaf is evaluated once per left row
//! and shared by every offset. What is left of the argument (the parts
//! that mix the sides) runs per offset over the leaves:
//!
//! ```text
//! avg((p.bid + p.ask) / 2 - t.price)
//!   right leaf #1: (bid + ask) / 2   once per right row (plus a NULL row)
//!   left leaf  #0: price             once per left row
//!   per offset:    avg(#1 - #0)      over #1 gathered at the matches
//! ```
//!
//! A pair without a match reads the right leaves' extra row, evaluated
//! over a right row of NULLs, so an expression that does not propagate
//! NULL (`coalesce(p.bid, 0)`) gives what it gives over the pair's NULL
//! columns. Only bare columns become leaves under a conditional (`CASE`,
//! `AND`, `OR`), whose branches the pairs might never evaluate; volatile
//! expressions are never evaluated ahead. When a right leaf fails over
//! the whole right side (a division by zero in a row no pair matches),
//! the fold is planned again with bare columns only
//! ([`FoldPlan::try_new`]'s `precompute`).

use super::columns::Source;
use super::fold::OffsetFold;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::common::Result;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, CaseExpr, Column};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr_common::physical_expr::is_volatile;
use std::sync::Arc;

/// Which side a [`Leaf`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LeafSide {
    /// The left input: evaluated over its batches.
    Left,
    /// Right table `j`: evaluated over [`FoldPlan::right_inputs`]`[j]`.
    Right(usize),
    /// The pair's offset.
    Offset,
    /// The pair's timestamp (left time + offset).
    Timestamp,
}

/// One leaf of the folded arguments.
#[derive(Debug, Clone)]
pub(super) struct Leaf {
    /// What it reads.
    pub side: LeafSide,
    /// Over the left input's schema ([`LeafSide::Left`]), or right table
    /// `j`'s inputs ([`LeafSide::Right`]); unused for the offset and the
    /// timestamp.
    pub expr: Arc<dyn PhysicalExpr>,
}

/// The folded aggregates' arguments split into leaves (see the module
/// docs).
///
/// ```ignore
/// let plan = FoldPlan::try_new(&fold, &columns.sources, true)?;
/// // per offset: a batch of `plan.schema` (one column per leaf), then
/// for (args, acc) in plan.args.iter().zip(accumulators) { /* evaluate, update */ }
/// ```
#[derive(Debug)]
pub(super) struct FoldPlan {
    /// The leaves; leaf `i` is column `i` of [`Self::schema`].
    pub leaves: Vec<Leaf>,
    /// One nullable column per leaf.
    pub schema: SchemaRef,
    /// Per aggregate, its arguments over [`Self::schema`].
    pub args: Vec<Vec<Arc<dyn PhysicalExpr>>>,
    /// Per right table, the columns of its input (indices into its schema)
    /// its leaves read, in the order the leaves' columns number them.
    pub right_inputs: Vec<Vec<usize>>,
}

impl FoldPlan {
    /// The plan of `fold`'s arguments; `sources` says what each pair
    /// column is, `rights` is the number of right tables. With
    /// `precompute` false only bare columns become leaves.
    pub(super) fn try_new(
        fold: &OffsetFold,
        sources: &[Source],
        rights: usize,
        precompute: bool,
    ) -> Result<Self> {
        let mut split = Split {
            sources,
            pairs: &fold.pairs,
            leaves: vec![],
            fields: vec![],
            right_inputs: vec![vec![]; rights],
        };
        let args = fold
            .aggr
            .iter()
            .map(|a| {
                a.expressions()
                    .iter()
                    .map(|e| split.rewrite(e, precompute))
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            leaves: split.leaves,
            schema: Arc::new(Schema::new(split.fields)),
            args,
            right_inputs: split.right_inputs,
        })
    }

    /// Whether any leaf reads right table `j`.
    pub(super) fn reads_right(&self, j: usize) -> bool {
        self.leaves.iter().any(|l| l.side == LeafSide::Right(j))
    }
}

/// The state of one [`FoldPlan::try_new`].
struct Split<'a> {
    sources: &'a [Source],
    pairs: &'a SchemaRef,
    leaves: Vec<Leaf>,
    fields: Vec<Field>,
    right_inputs: Vec<Vec<usize>>,
}

impl Split<'_> {
    /// `e` over the leaves: its one-sided subexpressions (bare columns
    /// only, without `precompute`) replaced by leaf columns.
    fn rewrite(
        &mut self,
        e: &Arc<dyn PhysicalExpr>,
        precompute: bool,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        let is_column = e.downcast_ref::<Column>().is_some();
        if (is_column || (precompute && !is_volatile(e)))
            && let Some(side) = self.side(e, is_column)
        {
            return self.leaf(e, side);
        }
        let children = e.children();
        if children.is_empty() {
            return Ok(Arc::clone(e));
        }
        let inner = precompute && !is_conditional(e);
        let children = children
            .into_iter()
            .map(|c| self.rewrite(c, inner))
            .collect::<Result<Vec<_>>>()?;
        Arc::clone(e).with_new_children(children)
    }

    /// The one side `e` reads, if it reads exactly one: left columns, or
    /// one right table's; the offset or timestamp only as a bare column.
    /// `None` for an expression without columns (it stays as it is).
    fn side(&self, e: &Arc<dyn PhysicalExpr>, is_column: bool) -> Option<LeafSide> {
        let mut side = None;
        for c in collect_columns(e) {
            let s = match self.sources[c.index()] {
                Source::Left(_) => LeafSide::Left,
                Source::Right(j, _) => LeafSide::Right(j),
                Source::Offset if is_column => LeafSide::Offset,
                Source::Timestamp if is_column => LeafSide::Timestamp,
                Source::Offset | Source::Timestamp => return None,
            };
            if side.is_some_and(|x| x != s) {
                return None;
            }
            side = Some(s);
        }
        side
    }

    /// The leaf column for `e` (over the pairs) on `side`: an existing
    /// leaf when one is equal.
    fn leaf(
        &mut self,
        e: &Arc<dyn PhysicalExpr>,
        side: LeafSide,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        let expr = self.over_input(e)?;
        let at = match self
            .leaves
            .iter()
            .position(|l| l.side == side && l.expr.as_ref() == expr.as_ref())
        {
            Some(at) => at,
            None => {
                let name = format!("leaf{}", self.leaves.len());
                let data_type = e.data_type(self.pairs)?;
                self.fields.push(Field::new(name, data_type, true));
                self.leaves.push(Leaf { side, expr });
                self.leaves.len() - 1
            }
        };
        Ok(Arc::new(Column::new(self.fields[at].name(), at)))
    }

    /// `e` (over the pairs, one side's columns) with its columns
    /// renumbered into that side's input: the left input's schema, or the
    /// right table's leaf inputs (which this extends).
    fn over_input(&mut self, e: &Arc<dyn PhysicalExpr>) -> Result<Arc<dyn PhysicalExpr>> {
        if let Some(c) = e.downcast_ref::<Column>() {
            let index = match self.sources[c.index()] {
                Source::Left(i) => i,
                Source::Right(j, i) => {
                    let inputs = &mut self.right_inputs[j];
                    match inputs.iter().position(|&x| x == i) {
                        Some(p) => p,
                        None => {
                            inputs.push(i);
                            inputs.len() - 1
                        }
                    }
                }
                // Evaluated by the fold itself, not over an input.
                Source::Offset | Source::Timestamp => return Ok(Arc::clone(e)),
            };
            return Ok(Arc::new(Column::new(c.name(), index)));
        }
        let children = e
            .children()
            .into_iter()
            .map(|c| self.over_input(c))
            .collect::<Result<Vec<_>>>()?;
        if children.is_empty() {
            return Ok(Arc::clone(e));
        }
        Arc::clone(e).with_new_children(children)
    }
}

/// Whether `e` may leave a child unevaluated for some rows: `CASE`, and
/// `AND`/`OR` (which DataFusion short-circuits).
fn is_conditional(e: &Arc<dyn PhysicalExpr>) -> bool {
    e.downcast_ref::<CaseExpr>().is_some()
        || e.downcast_ref::<BinaryExpr>()
            .is_some_and(|b| matches!(b.op(), Operator::And | Operator::Or))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::DataType;
    use datafusion::functions_aggregate::sum::sum_udaf;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::aggregate::AggregateExprBuilder;
    use datafusion::physical_expr::expressions::{binary, col, lit};

    /// Pairs `price` (left 1), `bid`, `ask` (right 0, columns 2 and 3),
    /// `offset`.
    fn pairs() -> (SchemaRef, Vec<Source>) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("price", DataType::Float64, true),
            Field::new("bid", DataType::Float64, true),
            Field::new("ask", DataType::Float64, true),
            Field::new("offset", DataType::Int64, false),
        ]));
        let sources = vec![
            Source::Left(1),
            Source::Right(0, 2),
            Source::Right(0, 3),
            Source::Offset,
        ];
        (schema, sources)
    }

    fn plan_of(arg: Arc<dyn PhysicalExpr>, precompute: bool) -> FoldPlan {
        let (schema, sources) = pairs();
        let sum = AggregateExprBuilder::new(sum_udaf(), vec![arg])
            .schema(Arc::clone(&schema))
            .alias("s")
            .build()
            .unwrap();
        let fold = OffsetFold {
            aggr: vec![Arc::new(sum)],
            partial: false,
            pairs: Arc::clone(&schema),
            key: 3,
            schema,
        };
        FoldPlan::try_new(&fold, &sources, 1, precompute).unwrap()
    }

    /// The markout's mid becomes one right leaf over the right input's
    /// columns, the price a left leaf, and the argument their difference;
    /// without `precompute` both right columns are leaves of their own.
    #[test]
    fn a_markout_splits_into_a_right_and_a_left_leaf() {
        let (s, _) = pairs();
        let mid = binary(
            binary(
                col("bid", &s).unwrap(),
                Operator::Plus,
                col("ask", &s).unwrap(),
                &s,
            )
            .unwrap(),
            Operator::Divide,
            lit(2.0),
            &s,
        )
        .unwrap();
        let arg = binary(mid, Operator::Minus, col("price", &s).unwrap(), &s).unwrap();
        let plan = plan_of(Arc::clone(&arg), true);
        let sides: Vec<LeafSide> = plan.leaves.iter().map(|l| l.side).collect();
        assert_eq!(sides, [LeafSide::Right(0), LeafSide::Left]);
        assert_eq!(plan.leaves[0].expr.to_string(), "(bid@0 + ask@1) / 2");
        assert_eq!(plan.leaves[1].expr.to_string(), "price@1");
        assert_eq!(plan.right_inputs, [vec![2, 3]]);
        assert_eq!(plan.args[0][0].to_string(), "leaf0@0 - leaf1@1");
        let plain = plan_of(arg, false);
        assert_eq!(plain.leaves.len(), 3);
        assert_eq!(
            plain.args[0][0].to_string(),
            "(leaf0@0 + leaf1@1) / 2 - leaf2@2"
        );
    }

    /// Under a CASE only bare columns become leaves; the same column
    /// read twice is one leaf; the offset is a leaf of its own.
    #[test]
    fn conditionals_keep_their_subexpressions_and_leaves_are_shared() {
        use datafusion::physical_expr::expressions::case;
        let (s, _) = pairs();
        let bid = col("bid", &s).unwrap();
        let when = binary(Arc::clone(&bid), Operator::Gt, lit(0.0), &s).unwrap();
        let then = binary(Arc::clone(&bid), Operator::Multiply, lit(2.0), &s).unwrap();
        let arg =
            case(None, vec![(when, then)], Some(col("price", &s).unwrap())).unwrap();
        let plan = plan_of(arg, true);
        let sides: Vec<LeafSide> = plan.leaves.iter().map(|l| l.side).collect();
        assert_eq!(sides, [LeafSide::Right(0), LeafSide::Left]);
        assert_eq!(plan.right_inputs, [vec![2]]);
        let off = plan_of(
            binary(col("offset", &s).unwrap(), Operator::Plus, bid, &s).unwrap(),
            true,
        );
        let sides: Vec<LeafSide> = off.leaves.iter().map(|l| l.side).collect();
        assert_eq!(sides, [LeafSide::Offset, LeafSide::Right(0)]);
    }
}
