//! [`JoinFilterRule`]: places a [`LipFilterExec`] above every file scan
//! that holds a hash join's dynamic filter, then the key filters that
//! DataFusion pushes nowhere (`key_filters.rs`).

use super::build_keys::{BuildKeys, LipBuildKeysExec};
use super::exec::{
    BuildKeysLink, KEY_BITS_PER_ROW, LipFilterExec, MAX_MAX_BITS, MIN_MAX_BITS,
    ROWS_PER_BIT, UNKNOWN_ROWS_MAX_BITS,
};
use super::key_filters::place_key_filters;
use crate::config::{TsJoinOptions, rule_enabled};
use datafusion::common::config::ConfigOptions;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{
    Transformed, TransformedResult, TreeNode, TreeNodeRecursion,
};
use datafusion::common::{NullEquality, Result};
use datafusion::datasource::physical_plan::{FileScanConfig, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::{
    ChildrenPropertiesMode, ExecutionPlan, ExecutionPlanProperties, PhysicalExpr,
    ReplaceChildrenOptions,
};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Puts a [`LipFilterExec`] directly above each file scan into which
/// DataFusion pushed hash-join dynamic filters, so that every join the scan
/// feeds drops its non-matching rows there, before any hash probe; then
/// follows each integer key of the joins whose filters reach no scan (a
/// join on keys of several tables) down to the scan that reads it and
/// filters it there by that join's build keys. Runs
/// after DataFusion's post-optimisation filter pushdown (which places those
/// filters). Off with `SET tsjoin.join_filters = false`, on a cluster
/// (`tsjoin.distributed`: a join and the scan it filters may run in other
/// processes) and for Parquet scans that evaluate their predicate row by
/// row already (`datafusion.execution.parquet.pushdown_filters`).
///
/// ```
/// use datafusion::physical_optimizer::PhysicalOptimizerRule;
/// assert_eq!(datafusion_tsjoin::join_filter::JoinFilterRule.name(), "JoinFilterRule");
/// ```
#[derive(Debug, Default)]
pub struct JoinFilterRule;

impl PhysicalOptimizerRule for JoinFilterRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !rule_enabled(config, |o| o.join_filters && !o.distributed) {
            return Ok(plan);
        }
        let fixed_bits = config
            .extensions
            .get::<TsJoinOptions>()
            .map_or(0, |o| o.join_filter_max_bits);
        let joins = join_filter_ids(&plan)?;
        let plan = if joins.is_empty() {
            plan
        } else {
            place_join_filters(plan, &joins, fixed_bits)?
        };
        // Then the key pairs DataFusion pushes nowhere.
        place_key_filters(plan, fixed_bits)
    }

    fn name(&self) -> &str {
        "JoinFilterRule"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with a [`LipFilterExec`] over each scan that holds some of the
/// dynamic filters `joins`, and a [`LipBuildKeysExec`] under each of those
/// single-key joins.
fn place_join_filters(
    plan: Arc<dyn ExecutionPlan>,
    joins: &HashSet<u64>,
    fixed_bits: u64,
) -> Result<Arc<dyn ExecutionPlan>> {
    let build_keys = join_build_keys(&plan)?;
    // The keys each filter's join keeps, made as scans use the filter
    // (a scan is met before the join above it) and placed under the join.
    let mut linked: HashMap<u64, Arc<BuildKeys>> = HashMap::new();
    plan.transform_up(|node| {
        if node.downcast_ref::<HashJoinExec>().is_some() {
            return keep_build_keys(node, &build_keys, &linked);
        }
        let Some(filters) = scan_join_filters(&node, joins) else {
            return Ok(Transformed::no(node));
        };
        let (max_bits, max_key_bits) = bit_budgets(&node, fixed_bits);
        let links = filters
            .iter()
            .map(|f| {
                let id = f.expression_id()?;
                let (_, null_equal, partitions) = build_keys.get(&id)?;
                let keys = linked
                    .entry(id)
                    .or_insert_with(|| BuildKeys::new(*partitions));
                Some(BuildKeysLink {
                    keys: Arc::clone(keys),
                    null_equal: *null_equal,
                })
            })
            .collect();
        let lip = LipFilterExec::try_new(node, filters, max_bits)?
            .with_build_keys(links, max_key_bits);
        Ok(Transformed::yes(Arc::new(lip) as _))
    })
    .data()
}

/// The ids of the hash joins' dynamic filters in `plan`.
pub(crate) fn join_filter_ids(plan: &Arc<dyn ExecutionPlan>) -> Result<HashSet<u64>> {
    let mut ids = HashSet::new();
    plan.apply(|node| {
        if let Some(join) = node.downcast_ref::<HashJoinExec>() {
            ids.extend(
                join.dynamic_expressions_produced()
                    .iter()
                    .filter_map(|f| f.expression_id()),
            );
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(ids)
}

/// Per dynamic filter id of a single-key hash join: the join's build key
/// (over its build side), whether it matches NULL with NULL, and the build
/// side's partitions.
type JoinBuildKeys = HashMap<u64, (Arc<dyn PhysicalExpr>, bool, usize)>;

/// The build keys of `plan`'s single-key hash joins that publish a filter.
fn join_build_keys(plan: &Arc<dyn ExecutionPlan>) -> Result<JoinBuildKeys> {
    let mut keys = HashMap::new();
    plan.apply(|node| {
        if let Some(join) = node.downcast_ref::<HashJoinExec>()
            && let [(build_key, _)] = join.on()
        {
            let null_equal = join.null_equality() == NullEquality::NullEqualsNull;
            let partitions = join.left().output_partitioning().partition_count();
            for id in join
                .dynamic_expressions_produced()
                .iter()
                .filter_map(|f| f.expression_id())
            {
                keys.insert(id, (Arc::clone(build_key), null_equal, partitions));
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(keys)
}

/// `join` with a [`LipBuildKeysExec`] over its build side when a scan's
/// [`LipFilterExec`] takes its filter's bits from the build keys (`linked`).
fn keep_build_keys(
    node: Arc<dyn ExecutionPlan>,
    build_keys: &JoinBuildKeys,
    linked: &HashMap<u64, Arc<BuildKeys>>,
) -> Result<Transformed<Arc<dyn ExecutionPlan>>> {
    let Some(join) = node.downcast_ref::<HashJoinExec>() else {
        return Ok(Transformed::no(node));
    };
    let link = join
        .dynamic_expressions_produced()
        .iter()
        .filter_map(|f| f.expression_id())
        .find_map(|id| Some((linked.get(&id)?, build_keys.get(&id)?)));
    let Some((keys, (key, _, partitions))) = link else {
        return Ok(Transformed::no(node));
    };
    let left = Arc::clone(join.left());
    if left.output_partitioning().partition_count() != *partitions {
        // Not the build the keys were sized for: the filter falls back to
        // the join's predicate.
        return Ok(Transformed::no(node));
    }
    let left = LipBuildKeysExec::with_keys(left, Arc::clone(key), keys);
    let right = Arc::clone(join.right());
    Ok(Transformed::yes(
        // The keys' operator passes the build side through: same properties.
        node.replace_children(
            vec![Arc::new(left), right],
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep),
        )?,
    ))
}

/// The join filters (dynamic filters whose id is in `joins`) in the
/// predicate of `node`, a file scan that does not apply its predicate row
/// by row; `None` when there are none.
fn scan_join_filters(
    node: &Arc<dyn ExecutionPlan>,
    joins: &HashSet<u64>,
) -> Option<Vec<Arc<dyn PhysicalExpr>>> {
    let scan = node.downcast_ref::<DataSourceExec>()?;
    let config = scan.data_source().downcast_ref::<FileScanConfig>()?;
    let source = config.file_source();
    if filters_rows(config) {
        return None;
    }
    let filters = join_filters_in(&source.filter()?, joins);
    (!filters.is_empty()).then_some(filters)
}

/// Whether the scan `config` evaluates its predicate row by row (a
/// Parquet scan with `pushdown_filters`): the joins' filters are applied
/// there already, and tsjoin's are left out of it.
pub(super) fn filters_rows(config: &FileScanConfig) -> bool {
    config
        .file_source()
        .downcast_ref::<ParquetSource>()
        .is_some_and(|p| p.table_parquet_options().global.pushdown_filters)
}

/// The dynamic filters in `predicate` whose id is in `joins` (the hash
/// joins' filters, [`join_filter_ids`]), each once.
pub(crate) fn join_filters_in(
    predicate: &Arc<dyn PhysicalExpr>,
    joins: &HashSet<u64>,
) -> Vec<Arc<dyn PhysicalExpr>> {
    let mut seen = HashSet::new();
    let mut filters = Vec::new();
    // The closure never fails.
    let _ = predicate.apply(|e| {
        if e.downcast_ref::<DynamicFilterPhysicalExpr>().is_some()
            && let Some(id) = e.expression_id()
            && joins.contains(&id)
            && seen.insert(id)
        {
            filters.push(Arc::clone(e));
            return Ok(TreeNodeRecursion::Jump);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    filters
}

/// The widest key ranges a filter over `scan` turns into bits, from the
/// join's predicate and from its build keys: `fixed_bits` for both when set
/// (`tsjoin.join_filter_max_bits`), else sized by the rows `scan` reads.
pub(super) fn bit_budgets(scan: &Arc<dyn ExecutionPlan>, fixed_bits: u64) -> (u64, u64) {
    match fixed_bits {
        0 => {
            let rows = scan_rows(scan);
            (max_bits(rows), max_key_bits(rows))
        }
        bits => (bits, bits),
    }
}

/// The rows `scan` reads, as its statistics estimate them.
fn scan_rows(scan: &Arc<dyn ExecutionPlan>) -> Option<u64> {
    StatisticsContext::new()
        .compute(scan.as_ref(), &StatisticsArgs::new())
        .ok()
        .and_then(|s| match s.num_rows {
            Precision::Exact(n) | Precision::Inexact(n) => Some(n as u64),
            Precision::Absent => None,
        })
}

/// The widest key range worth compiling into bits from the join's
/// predicate over a scan of `rows`: evaluating the predicate once per key
/// value (serially) should cost a small share of evaluating it once per
/// scanned row (in parallel).
fn max_bits(rows: Option<u64>) -> u64 {
    rows.map_or(UNKNOWN_ROWS_MAX_BITS, |rows| {
        (rows / ROWS_PER_BIT).clamp(MIN_MAX_BITS, MAX_MAX_BITS)
    })
}

/// The widest key range turned into bits from a join's build keys over a
/// scan of `rows`: they cost a write per build row to make, so only their
/// memory bounds them, [`KEY_BITS_PER_ROW`] bits per scanned row (a 64th
/// of an 8-byte key column's bytes per bit).
fn max_key_bits(rows: Option<u64>) -> u64 {
    rows.map_or(UNKNOWN_ROWS_MAX_BITS, |rows| {
        rows.saturating_mul(KEY_BITS_PER_ROW)
            .clamp(MIN_MAX_BITS, MAX_MAX_BITS)
    })
}
