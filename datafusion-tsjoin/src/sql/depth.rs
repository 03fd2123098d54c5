//! A limit on how deeply expressions nest. A long chain of binary
//! operators (`1 + 1 + … + 1`, `x = 1 OR x = 2 OR …`) parses without
//! recursion into a tree as deep as the chain is long, and DataFusion's
//! planner clones such trees with plain recursion (`Expr::clone`), which
//! overflows a 2 MiB thread stack at about 2,000 levels (found by
//! `tsjoin-bench fuzz`): a stack overflow aborts the whole process. Like
//! DuckDB's `max_expression_depth` (also 1,000), a statement whose
//! expressions nest deeper is a planning error instead.

use datafusion::common::{Result, plan_err};
use datafusion::sql::parser::Statement as DFStatement;
use sqlparser::ast::{Expr, Visit, Visitor};
use std::ops::ControlFlow;

/// The deepest expression nesting a statement may have.
pub const MAX_EXPRESSION_DEPTH: usize = 1000;

/// Counts nesting on the way down and stops the walk past the limit, so
/// that the walk itself never recurses deeper than the limit.
struct Depth {
    now: usize,
}

impl Visitor for Depth {
    type Break = ();

    fn pre_visit_expr(&mut self, _: &Expr) -> ControlFlow<()> {
        self.now += 1;
        if self.now > MAX_EXPRESSION_DEPTH {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    fn post_visit_expr(&mut self, _: &Expr) -> ControlFlow<()> {
        self.now -= 1;
        ControlFlow::Continue(())
    }
}

/// An error when an expression of `st` nests deeper than
/// [`MAX_EXPRESSION_DEPTH`].
pub(crate) fn check_depth(st: &DFStatement) -> Result<()> {
    let deep = match st {
        DFStatement::Statement(s) => s.visit(&mut Depth { now: 0 }).is_break(),
        DFStatement::Explain(e) => return check_depth(&e.statement),
        _ => false,
    };
    if deep {
        return plan_err!(
            "expression nested too deeply: more than {MAX_EXPRESSION_DEPTH} levels \
             (a long chain of operators such as `a OR b OR …` nests one level per \
             operator; an IN list or an array does not)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::parser::DFParser;

    fn chain(terms: usize) -> DFStatement {
        let sql = format!("SELECT {}", vec!["1"; terms].join(" + "));
        DFParser::parse_sql(&sql).unwrap().pop_front().unwrap()
    }

    #[test]
    fn deep_chains_are_an_error_and_others_pass() {
        assert!(check_depth(&chain(MAX_EXPRESSION_DEPTH)).is_ok());
        let err = check_depth(&chain(MAX_EXPRESSION_DEPTH + 2)).unwrap_err();
        assert!(err.to_string().contains("nested too deeply"), "{err}");
        let list = format!("SELECT 1 IN ({})", vec!["1"; 5000].join(", "));
        let st = DFParser::parse_sql(&list).unwrap().pop_front().unwrap();
        assert!(check_depth(&st).is_ok());
    }
}
