//! [`TailNode`]: the logical plan node.

use super::TailRange;
use datafusion::common::{DFSchemaRef, Result};
use datafusion::logical_expr::{Expr, LogicalPlan, UserDefinedLogicalNodeCore};
use std::fmt;

/// The rows of `input` that `range` selects, in input order (QuestDB's
/// negative LIMIT over an input without a reversible order).
///
/// ```
/// # use datafusion::logical_expr::LogicalPlanBuilder;
/// use datafusion_tsjoin::tail::{TailNode, TailRange};
/// let input = LogicalPlanBuilder::empty(true).build().unwrap();
/// let range = TailRange { skip_first: 0, keep_last: Some(2), drop_last: 0 };
/// let node = TailNode::new(input, range);
/// assert_eq!(node.range(), range);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub struct TailNode {
    input: LogicalPlan,
    range: TailRange,
}

impl TailNode {
    /// A node keeping `range` of `input`.
    pub fn new(input: LogicalPlan, range: TailRange) -> Self {
        Self { input, range }
    }

    /// The rows kept.
    pub fn range(&self) -> TailRange {
        self.range
    }
}

impl UserDefinedLogicalNodeCore for TailNode {
    fn name(&self) -> &str {
        "Tail"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.input]
    }

    fn schema(&self) -> &DFSchemaRef {
        self.input.schema()
    }

    fn expressions(&self) -> Vec<Expr> {
        vec![]
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Tail: {}", self.range)
    }

    fn with_exprs_and_inputs(
        &self,
        _exprs: Vec<Expr>,
        mut inputs: Vec<LogicalPlan>,
    ) -> Result<Self> {
        Ok(Self::new(inputs.swap_remove(0), self.range))
    }

    fn necessary_children_exprs(
        &self,
        output_columns: &[usize],
    ) -> Option<Vec<Vec<usize>>> {
        // Row positions do not depend on the columns: any subset passes through.
        Some(vec![output_columns.to_vec()])
    }
}
