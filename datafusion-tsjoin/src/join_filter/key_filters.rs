//! Key filters: join filters that DataFusion pushes nowhere, placed by
//! tsjoin itself.
//!
//! DataFusion pushes a hash join's dynamic filter into a scan only when
//! the filter's probe keys all come from that scan. A join on several keys
//! from different tables (TPC-H Q5's `l_suppkey = s_suppkey AND
//! c_nationkey = s_nationkey`, over a probe side that joined lineitem,
//! orders and customer) filters no scan at all, though each of its keys
//! alone would: `l_suppkey` drops 80% of lineitem and `c_nationkey` 80% of
//! customer. Here each such key pair's probe column is followed down the
//! probe side (through projections, filters, repartitions and the joins
//! that pass its rows without padding them with NULLs) to the scan that
//! reads it, and the scan's [`LipFilterExec`] matches it against the
//! join's build keys, which a [`LipBuildKeysExec`] under the join keeps:
//!
//! ```text
//! HashJoinExec: on=[(s_suppkey, l_suppkey), (s_nationkey, c_nationkey)]
//!   LipBuildKeysExec: key=s_nationkey
//!     LipBuildKeysExec: key=s_suppkey
//!       …supplier…
//!   HashJoinExec: on=[(o_orderkey, l_orderkey)]
//!     …HashJoinExec: on=[(c_custkey, o_custkey)]
//!        …LipFilterExec: join_filters=[c_nationkey=s_nationkey]
//!           DataSourceExec: customer
//!     LipFilterExec: join_filters=[l_orderkey; l_suppkey=s_suppkey]
//!       DataSourceExec: lineitem
//! ```
//!
//! A key filter drops only rows that cannot match that join's build keys:
//! it is placed only above joins that drop such probe rows (inner, left and
//! semi joins with the build on the left) and followed only through
//! operators where a dropped row could have reached that join alone.

use super::build_keys::{BuildKeys, LipBuildKeysExec};
use super::exec::{BuildKeysLink, LipFilterExec};
use super::filter::bit_key_type;
use super::rule::{bit_budgets, filters_rows};
use datafusion::common::tree_node::{
    Transformed, TransformedResult, TreeNode, TreeNodeRecursion,
};
use datafusion::common::{JoinType, NullEquality, Result};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, ExecutionPlan, ExecutionPlanProperties, PhysicalExpr,
    ReplaceChildrenOptions,
};
use std::collections::HashSet;
use std::sync::Arc;

/// `plan` with a key filter for each integer key pair of each hash join
/// whose probe column can be followed to a scan, except single-key joins
/// whose own filter a [`LipFilterExec`] applies already. `fixed_bits`: the
/// `tsjoin.join_filter_max_bits` setting (0: sized by the scan's rows).
pub(super) fn place_key_filters(
    plan: Arc<dyn ExecutionPlan>,
    fixed_bits: u64,
) -> Result<Arc<dyn ExecutionPlan>> {
    let applied = applied_filter_ids(&plan)?;
    plan.transform_down(|node| {
        let Some(join) = node.downcast_ref::<HashJoinExec>() else {
            return Ok(Transformed::no(node));
        };
        if !drops_unmatched_probe_rows(join)
            || already_filtered(join, &applied)
            || !narrowed(join.left())?
        {
            return Ok(Transformed::no(node));
        }
        let null_equal = join.null_equality() == NullEquality::NullEqualsNull;
        let partitions = join.left().output_partitioning().partition_count();
        let (mut left, mut right) = (Arc::clone(join.left()), Arc::clone(join.right()));
        let integers = |e: &Arc<dyn PhysicalExpr>, side: &Arc<dyn ExecutionPlan>| {
            e.data_type(&side.schema()).is_ok_and(|t| bit_key_type(&t))
        };
        let mut placed = false;
        for (build_key, probe_key) in join.on() {
            let Some(column) = probe_key.downcast_ref::<Column>() else {
                continue;
            };
            if !integers(probe_key, &right) || !integers(build_key, &left) {
                continue;
            }
            let keys = BuildKeys::new(partitions);
            let filter = KeyFilter {
                build_key: build_key.to_string(),
                link: BuildKeysLink {
                    keys: Arc::clone(&keys),
                    null_equal,
                },
                fixed_bits,
            };
            if let Some(probe) = place(&right, column.index(), &filter)? {
                right = probe;
                left = Arc::new(LipBuildKeysExec::with_keys(
                    left,
                    Arc::clone(build_key),
                    &keys,
                ));
                placed = true;
            }
        }
        if !placed {
            return Ok(Transformed::no(node));
        }
        // Pass-through operators added under it: same properties.
        let options = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep);
        Ok(Transformed::yes(
            node.replace_children(vec![left, right], options)?,
        ))
    })
    .data()
}

/// One key pair's filter on its way down.
struct KeyFilter {
    /// The join's build key, for EXPLAIN.
    build_key: String,
    link: BuildKeysLink,
    fixed_bits: u64,
}

/// The ids of the dynamic filters `plan`'s [`LipFilterExec`]s apply.
fn applied_filter_ids(plan: &Arc<dyn ExecutionPlan>) -> Result<HashSet<u64>> {
    let mut ids = HashSet::new();
    plan.apply(|node| {
        if let Some(lip) = node.downcast_ref::<LipFilterExec>() {
            ids.extend(lip.filters().iter().filter_map(|f| f.expression_id()));
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(ids)
}

/// Whether `join` has a single key and its own dynamic filter is applied
/// by a [`LipFilterExec`] already.
fn already_filtered(join: &HashJoinExec, applied: &HashSet<u64>) -> bool {
    join.on().len() == 1
        && join
            .dynamic_expressions_produced()
            .iter()
            .filter_map(|f| f.expression_id())
            .any(|id| applied.contains(&id))
}

/// Whether the build side `build` may hold fewer keys than its tables:
/// some operator in it drops rows (a filter, a join, a limit, a scan with a
/// predicate). A build side that reads a whole table holds every key a
/// foreign key can point at (TPC-H Q9's partsupp), so a filter from it
/// would drop nothing for the cost of keeping its keys.
fn narrowed(build: &Arc<dyn ExecutionPlan>) -> Result<bool> {
    build.exists(|node| {
        let scan_filter = node
            .downcast_ref::<DataSourceExec>()
            .and_then(|scan| scan.data_source().downcast_ref::<FileScanConfig>())
            .is_some_and(|config| config.file_source().filter().is_some());
        Ok(scan_filter
            || node.fetch().is_some()
            || node.downcast_ref::<FilterExec>().is_some()
            || node.downcast_ref::<HashJoinExec>().is_some()
            || node.downcast_ref::<LipFilterExec>().is_some())
    })
}

/// Whether `join` drops the probe rows that match no build key (so a
/// filter may drop them before it). Not anti joins: a null-aware one
/// (`NOT IN`) answers by the probe side's NULLs.
fn drops_unmatched_probe_rows(join: &HashJoinExec) -> bool {
    matches!(
        join.join_type(),
        JoinType::Inner | JoinType::Left | JoinType::LeftSemi | JoinType::RightSemi
    )
}

/// `plan` with `filter` applied to its output column `column` at the scan
/// that reads it, or `None` when the column cannot be followed there.
fn place(
    plan: &Arc<dyn ExecutionPlan>,
    column: usize,
    filter: &KeyFilter,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let key = |schema: &datafusion::arrow::datatypes::Schema| -> Arc<dyn PhysicalExpr> {
        Arc::new(Column::new(schema.field(column).name(), column))
    };
    if let Some(lip) = plan.downcast_ref::<LipFilterExec>()
        && lip.input().downcast_ref::<DataSourceExec>().is_some()
    {
        let lip = lip
            .with_fresh_state(Arc::clone(lip.input()))
            .with_key_filter(key(&plan.schema()), &filter.build_key, filter.link.clone());
        return Ok(Some(Arc::new(lip)));
    }
    if let Some(scan) = plan.downcast_ref::<DataSourceExec>() {
        if scan
            .data_source()
            .downcast_ref::<FileScanConfig>()
            .is_some_and(filters_rows)
        {
            return Ok(None);
        }
        let (bits, key_bits) = bit_budgets(plan, filter.fixed_bits);
        let lip = LipFilterExec::try_new(Arc::clone(plan), vec![], bits)?
            .with_build_keys(vec![], key_bits)
            .with_key_filter(key(&plan.schema()), &filter.build_key, filter.link.clone());
        return Ok(Some(Arc::new(lip)));
    }
    let Some((child, column)) = source_column(plan, column) else {
        return Ok(None);
    };
    let children = plan.children();
    let Some(placed) = place(children[child], column, filter)? else {
        return Ok(None);
    };
    let mut children: Vec<_> = children.into_iter().cloned().collect();
    children[child] = placed;
    let options = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep);
    Ok(Some(Arc::clone(plan).replace_children(children, options)?))
}

/// The child of `plan` and its column that output column `column` is,
/// where every output row carries the value of one input row of that child
/// (so dropping that input row drops only output rows with its value).
fn source_column(plan: &Arc<dyn ExecutionPlan>, column: usize) -> Option<(usize, usize)> {
    if plan.fetch().is_some() {
        // Rows dropped below a limit would let others take their places.
        return None;
    }
    if plan.downcast_ref::<RepartitionExec>().is_some()
        || plan.downcast_ref::<CoalescePartitionsExec>().is_some()
        || plan.downcast_ref::<LipBuildKeysExec>().is_some()
        || plan.downcast_ref::<LipFilterExec>().is_some()
    {
        return Some((0, column));
    }
    if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
        let expr = &projection.expr().get(column)?.expr;
        return Some((0, expr.downcast_ref::<Column>()?.index()));
    }
    if let Some(filter) = plan.downcast_ref::<FilterExec>() {
        let column = match filter.projection() {
            Some(projection) => *projection.get(column)?,
            None => column,
        };
        return Some((0, column));
    }
    let join = plan.downcast_ref::<HashJoinExec>()?;
    let column = match &join.projection {
        Some(projection) => *projection.get(column)?,
        None => column,
    };
    let left = join.left().schema().fields().len();
    match join.join_type() {
        JoinType::Inner if column < left => Some((0, column)),
        JoinType::Inner => Some((1, column - left)),
        JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti if column < left => {
            Some((0, column))
        }
        JoinType::Right if column >= left => Some((1, column - left)),
        JoinType::RightSemi | JoinType::RightAnti => Some((1, column)),
        _ => None,
    }
}
