//! What a [`super::FilterAggregateExec`] computes: the comparisons of the
//! WHERE (column vs literal, all of which must hold) and the aggregates.

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch,
};
use datafusion::arrow::buffer::BooleanBuffer;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, ScalarValue, internal_err};
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
use datafusion::physical_plan::PhysicalExpr;
use std::sync::Arc;

/// One conjunct: `column op value`, evaluated as DataFusion evaluates it
/// (its compare kernel against a scalar, straight into a bitmap), so that
/// NaN, -0.0 and NULL compare exactly as in DataFusion's filter.
#[derive(Debug, Clone)]
pub(crate) struct Cmp {
    pub(crate) expr: Arc<dyn PhysicalExpr>,
}

/// The comparison operator with its sides swapped (`5 < x` is `x > 5`).
fn flip(op: Operator) -> Option<Operator> {
    Some(match op {
        Operator::Eq => Operator::Eq,
        Operator::NotEq => Operator::NotEq,
        Operator::Lt => Operator::Gt,
        Operator::LtEq => Operator::GtEq,
        Operator::Gt => Operator::Lt,
        Operator::GtEq => Operator::LtEq,
        _ => return None,
    })
}

/// The conjuncts of `predicate` when every one is a comparison of a column
/// with a non-NULL literal of the column's type.
pub(crate) fn conjuncts(
    predicate: &Arc<dyn PhysicalExpr>,
    schema: &datafusion::arrow::datatypes::Schema,
) -> Option<Vec<Cmp>> {
    let mut out = vec![];
    collect(predicate, schema, &mut out)?;
    Some(out)
}

fn collect(
    e: &Arc<dyn PhysicalExpr>,
    schema: &datafusion::arrow::datatypes::Schema,
    out: &mut Vec<Cmp>,
) -> Option<()> {
    let b = e.downcast_ref::<BinaryExpr>()?;
    if *b.op() == Operator::And {
        collect(b.left(), schema, out)?;
        return collect(b.right(), schema, out);
    }
    flip(*b.op())?;
    let (column, literal) = match (
        b.left().downcast_ref::<Column>(),
        b.right().downcast_ref::<Literal>(),
    ) {
        (Some(c), Some(l)) => (c, l),
        _ => (
            b.right().downcast_ref::<Column>()?,
            b.left().downcast_ref::<Literal>()?,
        ),
    };
    let value = literal.value();
    let field = schema.fields().get(column.index())?;
    if value.is_null() || &value.data_type() != field.data_type() {
        return None;
    }
    if !(field.data_type().is_primitive() || field.data_type() == &DataType::Boolean) {
        return None;
    }
    out.push(Cmp {
        expr: Arc::clone(e),
    });
    Some(())
}

impl Cmp {
    /// The column it compares (a comparison always has one side a column).
    pub(crate) fn column(&self) -> Option<&Column> {
        let b = self.expr.downcast_ref::<BinaryExpr>()?;
        b.left()
            .downcast_ref::<Column>()
            .or_else(|| b.right().downcast_ref::<Column>())
    }

    /// Rows of `batch` where the comparison is TRUE (NULL is not).
    pub(crate) fn mask(&self, batch: &RecordBatch) -> Result<BooleanBuffer> {
        let r = self.expr.evaluate(batch)?.into_array(batch.num_rows())?;
        let Some(r) = r.as_any().downcast_ref::<BooleanArray>() else {
            return internal_err!("a comparison gave {}", r.data_type());
        };
        Ok(match r.nulls() {
            Some(n) => r.values() & n.inner(),
            None => r.values().clone(),
        })
    }
}

/// An aggregate folded over the matching rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FusedAgg {
    /// `count(*)` (a count of a non-NULL literal).
    CountStar,
    /// `count(column)`.
    Count(usize),
    /// `sum(column)` of Float64 or Int64.
    Sum(usize),
    /// `min(column)`.
    Min(usize),
    /// `max(column)`.
    Max(usize),
}

/// One aggregate's running value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Acc {
    Count(i64),
    F64(Option<f64>),
    I64(Option<i64>),
}

impl FusedAgg {
    /// Its state before any row, for a column of `data_type`.
    pub(crate) fn init(&self, data_type: Option<&DataType>) -> Acc {
        match (self, data_type) {
            (FusedAgg::CountStar | FusedAgg::Count(_), _) => Acc::Count(0),
            (_, Some(DataType::Float64)) => Acc::F64(None),
            _ => Acc::I64(None),
        }
    }

    /// The column it reads.
    pub(crate) fn column(&self) -> Option<usize> {
        match *self {
            FusedAgg::CountStar => None,
            FusedAgg::Count(c)
            | FusedAgg::Sum(c)
            | FusedAgg::Min(c)
            | FusedAgg::Max(c) => Some(c),
        }
    }

    /// Folds the rows set in `mask` (already restricted to valid rows of
    /// the column) into `acc`.
    pub(crate) fn fold(
        &self,
        acc: &mut Acc,
        mask: &BooleanBuffer,
        column: Option<&ArrayRef>,
    ) {
        match (self, acc, column) {
            (FusedAgg::CountStar | FusedAgg::Count(_), Acc::Count(n), _) => {
                *n += mask.count_set_bits() as i64;
            }
            (_, Acc::F64(v), Some(c)) => {
                let Some(a) = c.as_any().downcast_ref::<Float64Array>() else {
                    return;
                };
                let values = a.values();
                for i in mask.set_indices() {
                    let x = values[i];
                    *v = Some(match (*v, self) {
                        (None, _) => x,
                        (Some(s), FusedAgg::Sum(_)) => s + x,
                        (Some(s), FusedAgg::Min(_)) => {
                            if x.total_cmp(&s).is_lt() {
                                x
                            } else {
                                s
                            }
                        }
                        (Some(s), _) => {
                            if x.total_cmp(&s).is_gt() {
                                x
                            } else {
                                s
                            }
                        }
                    });
                }
            }
            (_, Acc::I64(v), Some(c)) => {
                let Some(a) = c.as_any().downcast_ref::<Int64Array>() else {
                    return;
                };
                let values = a.values();
                for i in mask.set_indices() {
                    let x = values[i];
                    *v = Some(match (*v, self) {
                        (None, _) => x,
                        (Some(s), FusedAgg::Sum(_)) => s.wrapping_add(x),
                        (Some(s), FusedAgg::Min(_)) => s.min(x),
                        (Some(s), _) => s.max(x),
                    });
                }
            }
            _ => {}
        }
    }
}

impl Acc {
    /// The state as a one-row value.
    pub(crate) fn scalar(&self) -> ScalarValue {
        match *self {
            Acc::Count(n) => ScalarValue::Int64(Some(n)),
            Acc::F64(v) => ScalarValue::Float64(v),
            Acc::I64(v) => ScalarValue::Int64(v),
        }
    }
}
