//! [`FilterAggregateRule`]: puts [`FilterAggregateExec`] in place of a
//! partial (or single) ungrouped aggregate over a `FilterExec`.

use super::exec::FilterAggregateExec;
use super::spec::{FusedAgg, conjuncts};
use crate::functions::KnownAggregate;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use std::sync::Arc;

/// Replaces `AggregateExec(Partial|Single, no GROUP BY)` over a
/// `FilterExec` whose predicate is a conjunction of column-vs-literal
/// comparisons by a [`FilterAggregateExec`] (see the module docs for what
/// qualifies). Runs right before DataFusion's `SanityCheckPlan`;
/// `SET tsjoin.filter_aggregate = false` turns it off.
///
/// ```
/// use datafusion::physical_optimizer::PhysicalOptimizerRule;
/// assert_eq!(datafusion_tsjoin::filter_aggregate::FilterAggregateRule.name(), "FilterAggregateRule");
/// ```
#[derive(Debug, Default)]
pub struct FilterAggregateRule;

/// The fused form of `agg` over `filter`, if every piece qualifies.
fn fuse(
    agg: &AggregateExec,
    filter: &FilterExec,
    pages: bool,
) -> Option<FilterAggregateExec> {
    if !matches!(agg.mode(), AggregateMode::Partial | AggregateMode::Single)
        || !agg.group_expr().is_empty()
        || agg.filter_expr().iter().any(Option::is_some)
    {
        return None;
    }
    let input = filter.input();
    let in_schema = input.schema();
    conjuncts(filter.predicate(), &in_schema)?;
    // An aggregate's column over the filter's output, as an input column.
    let column = |e: &Arc<dyn datafusion::physical_plan::PhysicalExpr>| -> Option<usize> {
        let i = e.downcast_ref::<Column>()?.index();
        match filter.projection() {
            Some(p) => p.get(i).copied(),
            None => Some(i),
        }
    };
    let value_column = |e: &Arc<dyn datafusion::physical_plan::PhysicalExpr>| {
        let c = column(e)?;
        matches!(
            in_schema.field(c).data_type(),
            DataType::Float64 | DataType::Int64
        )
        .then_some(c)
    };
    let mut aggs = vec![];
    for e in agg.aggr_expr() {
        if e.is_distinct() || !e.order_bys().is_empty() {
            return None;
        }
        let args = e.expressions();
        let [arg] = args.as_slice() else {
            return None;
        };
        aggs.push(match KnownAggregate::of(e.fun())? {
            KnownAggregate::Count => match arg.downcast_ref::<Literal>() {
                Some(l) if !l.value().is_null() => FusedAgg::CountStar,
                Some(_) => return None,
                None => FusedAgg::Count(column(arg)?),
            },
            KnownAggregate::Sum => FusedAgg::Sum(value_column(arg)?),
            KnownAggregate::Min => FusedAgg::Min(value_column(arg)?),
            KnownAggregate::Max => FusedAgg::Max(value_column(arg)?),
            _ => return None,
        });
    }
    let schema = agg.schema();
    // One state field per aggregate, of the type the fold produces.
    let types_match = schema.fields().len() == aggs.len()
        && aggs
            .iter()
            .zip(schema.fields())
            .all(|(a, f)| match a.column() {
                Some(c) if !matches!(a, FusedAgg::Count(_)) => {
                    f.data_type() == in_schema.field(c).data_type()
                }
                _ => f.data_type() == &DataType::Int64,
            });
    if !types_match {
        return None;
    }
    let exec = FilterAggregateExec::try_new(
        Arc::clone(input),
        Arc::clone(filter.predicate()),
        aggs,
        schema,
    )
    .ok()?;
    Some(if pages {
        exec
    } else {
        exec.without_page_scan()
    })
}

impl PhysicalOptimizerRule for FilterAggregateRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let on = crate::config::rule_enabled(config, |o| o.filter_aggregate);
        if !on {
            return Ok(plan);
        }
        let pages = crate::config::rule_enabled(config, |o| o.filter_aggregate_pages);
        plan.transform_up(|node| {
            let Some(agg) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            let Some(filter) = agg.input().downcast_ref::<FilterExec>() else {
                return Ok(Transformed::no(node));
            };
            match fuse(agg, filter, pages) {
                Some(exec) => {
                    Ok(Transformed::yes(Arc::new(exec) as Arc<dyn ExecutionPlan>))
                }
                None => Ok(Transformed::no(node)),
            }
        })
        .data()
    }

    fn name(&self) -> &str {
        "FilterAggregateRule"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
