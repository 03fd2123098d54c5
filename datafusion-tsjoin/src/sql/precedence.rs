//! [`fix_is_distinct_from`]: `IS [NOT] DISTINCT FROM` binds tighter than
//! `AND` / `OR`, as in PostgreSQL and DuckDB.
//!
//! sqlparser 0.62 parses the right operand of `IS [NOT] DISTINCT FROM` as a
//! whole expression, so `a IS NOT DISTINCT FROM b AND c` becomes `a IS NOT
//! DISTINCT FROM (b AND c)`: a type error for most `b`, a wrong answer when
//! `b` and `c` are booleans. DuckDB's ASOF tests write exactly that (`ON
//! t.symbol IS NOT DISTINCT FROM p.symbol AND t.ts >= p.ts`). Parentheses
//! the user wrote survive as [`Expr::Nested`], so a bare `AND` / `OR`
//! under the operator can only come from this mis-parse; it is rotated back
//! out: `a IS NOT DISTINCT FROM (b AND c)` → `(a IS NOT DISTINCT FROM b) AND
//! c`, the operator applied to the leftmost operand of the chain.

use sqlparser::ast::{
    BinaryOperator, Expr, Statement, UnaryOperator, Value, VisitMut, VisitorMut,
};
use std::ops::ControlFlow;

/// Re-associates every mis-parsed `IS [NOT] DISTINCT FROM` in `stmt` (see
/// the module docs).
///
/// ```ignore
/// // a IS NOT DISTINCT FROM (b AND c), as sqlparser 0.62 parses it
/// fix_is_distinct_from(&mut stmt); // (a IS NOT DISTINCT FROM b) AND c
/// ```
pub(super) fn fix_is_distinct_from(stmt: &mut Statement) {
    struct Fix;
    impl VisitorMut for Fix {
        type Break = ();
        // Children first: a repaired child can leave its parent (an AND
        // over an OR, a NOT over either) to repair in turn.
        fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            if needs_repair(e) {
                let taken = std::mem::replace(e, Expr::Value(Value::Null.into()));
                *e = repair(taken);
            }
            ControlFlow::Continue(())
        }
    }
    let _ = stmt.visit(&mut Fix);
}

fn is_and_or(e: &Expr) -> bool {
    matches!(
        e,
        Expr::BinaryOp {
            op: BinaryOperator::And | BinaryOperator::Or,
            ..
        }
    )
}

/// Shapes sqlparser's precedence climbing never builds from text (written
/// parentheses are [`Expr::Nested`]), so only the mis-parse or its repair
/// below leaves them: `IS [NOT] DISTINCT FROM` over a bare AND / OR, an AND
/// whose right operand is a bare OR, a NOT over a bare AND / OR.
fn needs_repair(e: &Expr) -> bool {
    match e {
        Expr::IsDistinctFrom(_, r) | Expr::IsNotDistinctFrom(_, r) => is_and_or(r),
        Expr::BinaryOp {
            op: BinaryOperator::And,
            right,
            ..
        } => matches!(
            right.as_ref(),
            Expr::BinaryOp {
                op: BinaryOperator::Or,
                ..
            }
        ),
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => is_and_or(expr),
        _ => false,
    }
}

/// `e` with its top re-associated as PostgreSQL's precedence reads it (NOT
/// above IS above AND above OR), recursively where that leaves a new
/// shape to repair.
fn repair(e: Expr) -> Expr {
    let fixed = |e: Expr| if needs_repair(&e) { repair(e) } else { e };
    match e {
        Expr::IsDistinctFrom(a, b) if is_and_or(&b) => rotate(*a, *b, false),
        Expr::IsNotDistinctFrom(a, b) if is_and_or(&b) => rotate(*a, *b, true),
        // b AND (x OR y), bare → (b AND x) OR y
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => match *right {
            Expr::BinaryOp {
                left: x,
                op: BinaryOperator::Or,
                right: y,
            } => Expr::BinaryOp {
                left: Box::new(fixed(Expr::BinaryOp {
                    left,
                    op: BinaryOperator::And,
                    right: x,
                })),
                op: BinaryOperator::Or,
                right: y,
            },
            right => Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right: Box::new(right),
            },
        },
        // NOT (x AND|OR y), bare → (NOT x) AND|OR y
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => match *expr {
            Expr::BinaryOp { left, op, right }
                if matches!(op, BinaryOperator::And | BinaryOperator::Or) =>
            {
                Expr::BinaryOp {
                    left: Box::new(fixed(Expr::UnaryOp {
                        op: UnaryOperator::Not,
                        expr: left,
                    })),
                    op,
                    right,
                }
            }
            expr => Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr: Box::new(expr),
            },
        },
        e => e,
    }
}

/// `a IS [NOT] DISTINCT FROM` applied to the leftmost operand of the
/// `AND` / `OR` chain `rhs`.
fn rotate(a: Expr, rhs: Expr, not: bool) -> Expr {
    match rhs {
        Expr::BinaryOp { left, op, right }
            if matches!(op, BinaryOperator::And | BinaryOperator::Or) =>
        {
            Expr::BinaryOp {
                left: Box::new(rotate(a, *left, not)),
                op,
                right,
            }
        }
        b if not => Expr::IsNotDistinctFrom(Box::new(a), Box::new(b)),
        b => Expr::IsDistinctFrom(Box::new(a), Box::new(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::ast::{SetExpr, Statement};
    use sqlparser::dialect::GenericDialect;
    use sqlparser::parser::Parser;

    /// The WHERE clause of `sql`, repaired, fully parenthesised.
    fn shape(sql: &str) -> String {
        let mut st =
            Parser::parse_sql(&GenericDialect {}, &format!("SELECT 1 WHERE {sql}"))
                .unwrap()
                .remove(0);
        fix_is_distinct_from(&mut st);
        let Statement::Query(q) = st else { panic!() };
        let SetExpr::Select(s) = *q.body else {
            panic!()
        };
        paren(&s.selection.unwrap())
    }

    fn paren(e: &Expr) -> String {
        match e {
            Expr::BinaryOp { left, op, right } => {
                format!("({} {op} {})", paren(left), paren(right))
            }
            Expr::IsDistinctFrom(a, b) => format!("({} IDF {})", paren(a), paren(b)),
            Expr::IsNotDistinctFrom(a, b) => format!("({} INDF {})", paren(a), paren(b)),
            Expr::UnaryOp { op, expr } => format!("({op} {})", paren(expr)),
            Expr::Nested(e) => format!("[{}]", paren(e)),
            other => other.to_string(),
        }
    }

    /// Each expression comes out as PostgreSQL (and DuckDB) group it:
    /// NOT above IS [NOT] DISTINCT FROM above comparisons' peers, then AND,
    /// then OR; written parentheses kept.
    #[test]
    fn is_distinct_from_binds_tighter_than_and_or() {
        for (sql, want) in [
            (
                "a IS NOT DISTINCT FROM b AND c >= d",
                "((a INDF b) AND (c >= d))",
            ),
            (
                "a IS DISTINCT FROM b OR c AND d",
                "((a IDF b) OR (c AND d))",
            ),
            (
                "a IS DISTINCT FROM b AND c OR d",
                "(((a IDF b) AND c) OR d)",
            ),
            ("a IS DISTINCT FROM (b AND c)", "(a IDF [(b AND c)])"),
            (
                "a IS NOT DISTINCT FROM b AND c IS DISTINCT FROM d OR e",
                "(((a INDF b) AND (c IDF d)) OR e)",
            ),
            (
                "x AND a IS DISTINCT FROM b OR e OR f",
                "(((x AND (a IDF b)) OR e) OR f)",
            ),
            ("NOT a IS DISTINCT FROM b OR c", "((NOT (a IDF b)) OR c)"),
            ("NOT (a OR b)", "(NOT [(a OR b)])"),
            ("a AND b OR c", "((a AND b) OR c)"),
            ("a OR b AND c", "(a OR (b AND c))"),
        ] {
            assert_eq!(shape(sql), want, "{sql}");
        }
    }
}
