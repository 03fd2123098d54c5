//! [`InlineAggregateRule`]: swaps DataFusion's grouped aggregates for
//! [`InlineAggregateExec`] where it applies.

use super::accumulate::{AggFn, InlineAgg, supported};
use super::exec::InlineAggregateExec;
use super::group_keys::KeyShape;
use super::time_disjoint;
use crate::config::TsJoinOptions;
use crate::functions::percentile_spec;
use crate::small_scan::{is_small, lone_parquet_scan};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::physical_expr::expressions::Literal;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, InputOrderMode};
use std::sync::Arc;

/// Replaces a grouped `AggregateExec` pair (`Partial` below `Final` or
/// `FinalPartitioned`, with the repartition between them) or a `Single` /
/// `SinglePartitioned` one with an [`InlineAggregateExec`] over the same
/// input, keeping the output schema and partitioning.
///
/// Applies when the aggregate has group keys (no grouping sets), no LIMIT
/// pushed into it, no ordered (streaming) input, and only `count`, `sum`,
/// `min`, `max`, `avg` over numeric arguments (`count` over any) and
/// `approx_percentile` / `approx_median` (QuestDB's), without DISTINCT,
/// FILTER or ORDER BY. Placed right after DataFusion's
/// `CombinePartialFinalAggregate` (see `session.rs`); off when
/// `tsjoin.inline_aggregate = false`. By default single integer-like and
/// dictionary keys are taken, one string key where the Parquet dictionary
/// scan reads its codes (else the replaced plan runs), and multi-column
/// integer/string/dictionary keys with a fallback to the replaced plan when
/// a probe of the input shows many groups (see
/// [`InlineAggregateExec::with_fallback`]);
/// `tsjoin.inline_aggregate_all_keys = true` takes every key list and
/// never falls back.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion_tsjoin::TsJoinContextExt;
/// let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
/// ctx.tsjoin_sql("CREATE TABLE t (k INT, v DOUBLE) AS VALUES (1, 2.0), (1, 3.0), (2, 4.0)").await?;
/// let plan = ctx.tsjoin_sql("EXPLAIN SELECT k, count(*), sum(v) FROM t GROUP BY k").await?.collect().await?;
/// let text = datafusion::arrow::util::pretty::pretty_format_batches(&plan)?.to_string();
/// assert!(text.contains("InlineAggregateExec"));
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct InlineAggregateRule;

impl PhysicalOptimizerRule for InlineAggregateRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let options = config.extensions.get::<TsJoinOptions>();
        if !options.is_none_or(|o| o.inline_aggregate) {
            return Ok(plan);
        }
        let all_keys = options.is_some_and(|o| o.inline_aggregate_all_keys);
        let codes = options.is_none_or(|o| o.inline_aggregate_dictionary_scan);
        plan.transform_up(|node| {
            Ok(match inline(&node, all_keys, codes, config)? {
                Some(new) => Transformed::yes(new),
                None => Transformed::no(node),
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        "InlineAggregate"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The replacement for `node`, when it is a supported aggregate (and its
/// keys have a shape where inline wins, unless `all_keys`).
fn inline(
    node: &Arc<dyn ExecutionPlan>,
    all_keys: bool,
    dictionary_scan: bool,
    config: &ConfigOptions,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(top) = node.downcast_ref::<AggregateExec>() else {
        return Ok(None);
    };
    let lower = match top.mode() {
        AggregateMode::Final | AggregateMode::FinalPartitioned => {
            let mut child = top.input();
            if child.is::<RepartitionExec>() || child.is::<CoalescePartitionsExec>() {
                child = child.children()[0];
            }
            match child.downcast_ref::<AggregateExec>() {
                Some(partial) if *partial.mode() == AggregateMode::Partial => partial,
                _ => return Ok(None),
            }
        }
        AggregateMode::Single | AggregateMode::SinglePartitioned => top,
        _ => return Ok(None),
    };
    let gby = lower.group_expr();
    let plain = |a: &AggregateExec| {
        a.limit_options().is_none() && *a.input_order_mode() == InputOrderMode::Linear
    };
    if gby.is_empty() || gby.has_grouping_set() || !plain(top) || !plain(lower) {
        return Ok(None);
    }
    if lower.filter_expr().iter().any(Option::is_some) {
        return Ok(None);
    }
    let input = lower.input();
    // A few thousand rows aggregate faster than the inline path starts.
    if !all_keys && lone_parquet_scan(input).is_some_and(|(c, s)| is_small(c, s, config))
    {
        return Ok(None);
    }
    let input_schema = input.schema();
    let key_types = gby
        .expr()
        .iter()
        .map(|(e, _)| e.data_type(&input_schema))
        .collect::<Result<Vec<_>>>()?;
    let shape = KeyShape::of(&key_types);
    // (One string key may still read its Parquet dictionary codes.)
    if !all_keys && KeyShape::of_codes(&key_types) == KeyShape::General {
        return Ok(None);
    }
    let out_schema = top.schema();
    let mut aggs = Vec::with_capacity(lower.aggr_expr().len());
    for (i, a) in lower.aggr_expr().iter().enumerate() {
        if a.is_distinct() || !a.order_bys().is_empty() {
            return Ok(None);
        }
        let exprs = a.expressions();
        // A percentile's constants (a call that fails its checks stays with
        // DataFusion's aggregate, which reports the error).
        let percentile = match exprs.first() {
            Some(x) => {
                let value = x.data_type(&input_schema)?;
                percentile_spec(a.fun(), &exprs, &value).and_then(Result::ok)
            }
            None => None,
        };
        let (mut fun, mut arg) = if percentile.is_some() {
            (AggFn::Percentile, Some(Arc::clone(&exprs[0])))
        } else {
            let Some(fun) = AggFn::of(a.fun()) else {
                return Ok(None);
            };
            match exprs.as_slice() {
                [] => (fun, None),
                [x] => (fun, Some(Arc::clone(x))),
                _ => return Ok(None),
            }
        };
        // `count(*)` arrives as `count(1)`.
        if fun == AggFn::Count
            && arg
                .as_ref()
                .and_then(|e| e.downcast_ref::<Literal>())
                .is_some_and(|l| !l.value().is_null())
        {
            (fun, arg) = (AggFn::CountStar, None);
        }
        let input_type = arg
            .as_ref()
            .map(|e| e.data_type(&input_schema))
            .transpose()?;
        let field = Arc::new(out_schema.field(gby.expr().len() + i).clone());
        if !supported(fun, input_type.as_ref(), field.data_type()) {
            return Ok(None);
        }
        aggs.push(InlineAgg {
            fun,
            arg,
            field,
            percentile,
        });
    }
    // A fallback over partitions whose groups cannot meet (time buckets
    // over files of disjoint time ranges) aggregates each partition once.
    let mut input = Arc::clone(input);
    let mut template = Arc::clone(node);
    if !all_keys
        && shape == KeyShape::Composite
        && let Some(regrouped) = time_disjoint::disjoint_input(&input, gby.expr())?
        && let Some(per_partition) =
            time_disjoint::per_partition_template(node, &regrouped)?
    {
        (input, template) = (regrouped, per_partition);
    }
    let exec = InlineAggregateExec::try_new(
        input,
        gby.expr().to_vec(),
        aggs,
        Arc::clone(top.properties()),
    )?
    .with_dictionary_scan(dictionary_scan)
    // Over the memory limit, DataFusion's aggregate (which spills) runs.
    .with_memory_fallback(Arc::clone(node));
    // A float column in a composite key pays only read as Parquet
    // dictionary codes; coded row by row, DataFusion's table is faster.
    if !all_keys && exec.dictionary.is_none() && key_types.contains(&DataType::Float64) {
        return Ok(None);
    }
    // One string key: only read as codes.
    let string = exec.shape == KeyShape::String && exec.dictionary.is_none();
    if !all_keys && (exec.shape == KeyShape::General || string) {
        return Ok(None);
    }
    // Composite keys win while their groups are few; by default a probe
    // decides at run time and falls back to this very plan when they are
    // many. `all_keys` keeps every key list inline (to compare).
    Ok(Some(Arc::new(if all_keys {
        exec
    } else {
        exec.with_fallback(template)
    })))
}
