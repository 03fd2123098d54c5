//! `approx_percentile` and `approx_median`: QuestDB's HdrHistogram
//! percentiles, bit for bit, as a parallel, exactly mergeable aggregate.
//!
//! - [`layout`]: HdrHistogram's bucket math and QuestDB's percentile walk
//!   (the `nextAfter` detail), for the integer histogram and for
//!   `DoubleHistogram` (whose auto-ranging reduces to a key per value and a
//!   scale set by the lowest positive value).
//! - [`slots`]: one group's counts, compact (sparse slots, a dense array
//!   only where a group fills it, a hash map otherwise).
//! - `buffers`: many groups' not-yet-counted keys in one arena.
//! - `histogram`: recording values (QuestDB's errors) and answering.
//! - `groups` / `accumulator`: the `GroupsAccumulator` for GROUP BY and the
//!   plain `Accumulator` for `OVER (...)` and WINDOW JOIN.
//! - `udaf`: the SQL functions and their argument checks.
//! - [`ConstantArrayPlanner`]: `ARRAY[0.5, 0.9, 0.99]` of constants as a
//!   list literal (the array form's percentile argument).
//!
//! DataFusion has its own `approx_median` (t-digest). tsjoin registers
//! QuestDB's as `approx_median_hdr` and [`rename_approx_median`] makes
//! `approx_median` mean it in `tsjoin_sql` (QuestDB SQL gets QuestDB's
//! answers), while `SessionContext::sql` keeps DataFusion's.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
//! use datafusion_tsjoin::{TsJoinContextExt, tsjoin_context};
//! let ctx = tsjoin_context(Default::default());
//! let df = ctx.tsjoin_sql("SELECT approx_percentile(v, 0.5) AS p50, approx_median(v) AS m \
//!     FROM (VALUES (1), (2), (3), (100)) t(v)").await?;
//! let batches = df.collect().await?;
//! datafusion::assert_batches_eq!([
//!     "+-----+-----+",
//!     "| p50 | m   |",
//!     "+-----+-----+",
//!     "| 2.0 | 2.0 |",
//!     "+-----+-----+",
//! ], &batches);
//! # Ok(()) }
//! ```

mod accumulator;
mod array_literal;
mod buffers;
mod groups;
mod histogram;
pub(crate) mod layout;
pub(crate) mod slots;
mod udaf;

pub use array_literal::ConstantArrayPlanner;
pub(crate) use groups::PercentileGroups;
pub(crate) use histogram::Spec as PercentileSpec;
pub use udaf::{ApproxPercentile, HDR_MEDIAN};

use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::AggregateUDF;
use datafusion::physical_expr::PhysicalExpr;
use sqlparser::ast::{Expr, ObjectNamePart, Statement, VisitMut, VisitorMut};
use std::ops::ControlFlow;
use std::sync::Arc;

/// `approx_percentile` and `approx_median_hdr`, ready for
/// `SessionStateBuilder::with_aggregate_functions`.
///
/// ```
/// let names: Vec<String> = datafusion_tsjoin::functions::percentile_udafs()
///     .iter().map(|f| f.name().to_string()).collect();
/// assert_eq!(names, ["approx_percentile", "approx_median_hdr"]);
/// ```
pub fn percentile_udafs() -> Vec<Arc<AggregateUDF>> {
    [ApproxPercentile::percentile(), ApproxPercentile::median()]
        .into_iter()
        .map(|f| Arc::new(AggregateUDF::new_from_impl(f)))
        .collect()
}

/// The constants of `udf` called on `exprs` (the value first, read as
/// `value`) when `udf` is `approx_percentile` or `approx_median_hdr`
/// (identified by type); `None` for any other function. The inline GROUP
/// BY keeps these calls' state itself.
pub(crate) fn percentile_spec(
    udf: &AggregateUDF,
    exprs: &[Arc<dyn PhysicalExpr>],
    value: &DataType,
) -> Option<Result<Arc<PercentileSpec>>> {
    let f = udf.inner().downcast_ref::<ApproxPercentile>()?;
    Some(f.spec_of(value, exprs))
}

/// Makes `approx_median(...)` in `st` call QuestDB's median
/// ([`HDR_MEDIAN`]) instead of DataFusion's t-digest one: `tsjoin_sql`
/// speaks QuestDB's SQL.
///
/// ```
/// use datafusion::sql::sqlparser::{dialect::GenericDialect, parser::Parser};
/// let mut st = Parser::parse_sql(&GenericDialect {}, "SELECT approx_median(x) FROM t")
///     .unwrap().remove(0);
/// datafusion_tsjoin::functions::rename_approx_median(&mut st);
/// assert_eq!(st.to_string(), "SELECT approx_median_hdr(x) FROM t");
/// ```
pub fn rename_approx_median(st: &mut Statement) {
    struct Rename;
    impl VisitorMut for Rename {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            if let Expr::Function(f) = e
                && let [ObjectNamePart::Identifier(id)] = f.name.0.as_mut_slice()
                && id.value.eq_ignore_ascii_case("approx_median")
            {
                id.value = HDR_MEDIAN.into();
                id.quote_style = None;
            }
            ControlFlow::Continue(())
        }
    }
    let _ = st.visit(&mut Rename);
}
