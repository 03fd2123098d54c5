//! Input partitions whose groups cannot meet: a GROUP BY over a time bucket
//! (`date_bin`, `date_trunc`) of a Parquet scan whose files cover disjoint
//! time ranges.
//!
//! TSBS's `GROUP BY name, driver, fleet, date_bin(10 minutes, ts)` over 100M
//! readings ends with 11.5M groups, where a composite key loses to
//! DataFusion's hash aggregate and [`InlineAggregateExec`] falls back to it.
//! That plan aggregates each partition (`Partial`), hashes the 11.5M partial
//! rows across partitions and merges them again (`FinalPartitioned`): a
//! third of its CPU time goes to the merge. But files partitioned by day
//! hold disjoint time ranges, and when each input partition reads a
//! contiguous run of whole files, no bucket, and so no group, is in two
//! partitions: each partition's aggregate is already final.
//!
//! [`disjoint_input`] finds such an input: a bucket key over a column that
//! reaches a Parquet scan through projections and filters only, files with
//! exact min/max statistics and no NULLs in that column, at least as many
//! files as partitions, and no declared output ordering. It regroups the
//! scan's files (whole files, sorted by their minimum, contiguous runs of
//! about equal bytes read, none over 1.5x its share, each file's bytes
//! weighed by the share of its time range the scan's WHERE keeps;
//! DataFusion's byte-range split may have cut one file across two
//! partitions) and checks that the bucket of each run's maximum is below
//! the bucket of the next run's minimum (the bucket functions are monotone
//! in time). The fallback then runs `AggregateExec(Single)` per
//! partition and only hashes its final rows to the output partitions
//! ([`per_partition_template`]); the output's partitioning is the one the
//! plan declared.
//!
//! [`InlineAggregateExec`]: super::InlineAggregateExec

use crate::prune_files::{passing_share, scan_conjuncts, with_group_statistics};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::array::RecordBatchOptions;
use datafusion::arrow::datatypes::Schema;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Result, ScalarValue};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{
    FileGroup, FileScanConfigBuilder, FileSource, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::functions::datetime::date_bin::DateBinFunc;
use datafusion::functions::datetime::date_trunc::DateTruncFunc;
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::ScalarFunctionExpr;
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, ExecutionPlan, ExecutionPlanProperties, PhysicalExpr,
    ReplaceChildrenOptions,
};
use std::cmp::Ordering;
use std::collections::HashSet;
use std::sync::Arc;

/// `input` with its scan's files regrouped so that no group of
/// `group_exprs` is in two of its partitions, or `None` when that cannot be
/// shown from the plan and the files' statistics (see the module docs).
pub(super) fn disjoint_input(
    input: &Arc<dyn ExecutionPlan>,
    group_exprs: &[(Arc<dyn PhysicalExpr>, String)],
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let partitions = input.output_partitioning().partition_count();
    if partitions < 2 {
        return Ok(None);
    }
    for (expr, _) in group_exprs {
        let Some(column) = bucket_column(expr) else {
            continue;
        };
        if let Some(new) = regrouped(input, column, expr, partitions)? {
            return Ok(Some(new));
        }
    }
    Ok(None)
}

/// The fallback plan for a disjoint input: `AggregateExec(Single)` per
/// input partition, then the replaced plan's repartition (or coalesce) of
/// its final rows, so the output is partitioned as the plan declared.
/// `None` when `template` is not a two-phase aggregate.
pub(super) fn per_partition_template(
    template: &Arc<dyn ExecutionPlan>,
    input: &Arc<dyn ExecutionPlan>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(top) = template.downcast_ref::<AggregateExec>() else {
        return Ok(None);
    };
    let between = top.input();
    let Some(partial) = between.children().first().and_then(|c| {
        c.downcast_ref::<AggregateExec>()
            .filter(|p| *p.mode() == AggregateMode::Partial)
    }) else {
        return Ok(None);
    };
    let single: Arc<dyn ExecutionPlan> = Arc::new(AggregateExec::try_new(
        AggregateMode::Single,
        partial.group_expr().clone(),
        partial.aggr_expr().to_vec(),
        partial.filter_expr().to_vec(),
        Arc::clone(input),
        partial.input_schema(),
    )?);
    let out: Arc<dyn ExecutionPlan> =
        if let Some(r) = between.downcast_ref::<RepartitionExec>() {
            // The group columns lead both the partial and the final schema, so
            // the hash expressions read the same columns.
            Arc::new(RepartitionExec::try_new(single, r.partitioning().clone())?)
        } else if between.is::<CoalescePartitionsExec>() {
            Arc::new(CoalescePartitionsExec::new(single))
        } else {
            return Ok(None);
        };
    Ok((out.schema() == template.schema()).then_some(out))
}

/// The time column of `expr` when it is `date_bin(…, column[, origin])` or
/// `date_trunc(…, column)` with every other argument a literal: functions
/// that never decrease as the column grows.
fn bucket_column(expr: &Arc<dyn PhysicalExpr>) -> Option<usize> {
    let f = expr.downcast_ref::<ScalarFunctionExpr>()?;
    let inner = f.fun().inner();
    if !(inner.is::<DateBinFunc>() || inner.is::<DateTruncFunc>()) {
        return None;
    }
    let mut column = None;
    for arg in f.args() {
        if let Some(c) = arg.downcast_ref::<Column>() {
            if column.replace(c.index()).is_some() {
                return None;
            }
        } else if !arg.is::<Literal>() {
            return None;
        }
    }
    column
}

/// A scan under an aggregate's input, as [`path_to_scan`] finds it.
struct ScanPath {
    /// The plans from the input down to the scan, outermost first.
    path: Vec<Arc<dyn ExecutionPlan>>,
    scan: Arc<dyn ExecutionPlan>,
    /// The time column's index in the scan's output.
    column: usize,
}

/// The scan under `input` when every plan between passes `column` through
/// unchanged and keeps partitions apart (projections and filters).
fn path_to_scan(input: &Arc<dyn ExecutionPlan>, column: usize) -> Option<ScanPath> {
    let mut path = vec![];
    let mut node = Arc::clone(input);
    let mut column = column;
    loop {
        if let Some(p) = node.downcast_ref::<ProjectionExec>() {
            column = p.expr().get(column)?.expr.downcast_ref::<Column>()?.index();
        } else if let Some(f) = node.downcast_ref::<FilterExec>() {
            if let Some(projection) = f.projection() {
                column = *projection.get(column)?;
            }
        } else if node.is::<DataSourceExec>() {
            return Some(ScanPath {
                path,
                scan: node,
                column,
            });
        } else {
            return None;
        }
        let child = Arc::clone(node.children().first()?);
        path.push(node);
        node = child;
    }
}

/// `input` over a regrouped scan when the groups of the bucket `expr` (over
/// `column` of `input`) are disjoint between its partitions.
fn regrouped(
    input: &Arc<dyn ExecutionPlan>,
    column: usize,
    expr: &Arc<dyn PhysicalExpr>,
    partitions: usize,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(ScanPath {
        path,
        scan: scan_node,
        column: scan_column,
    }) = path_to_scan(input, column)
    else {
        return Ok(None);
    };
    let Some((config, source)) = scan_node
        .downcast_ref::<DataSourceExec>()
        .and_then(|d| d.downcast_to_file_source::<ParquetSource>())
    else {
        return Ok(None);
    };
    if scan_node.output_partitioning().partition_count() != partitions
        || scan_node.properties().output_ordering().is_some()
        || config.limit.is_some()
    {
        return Ok(None);
    }
    let table_column = match source.projection() {
        None => scan_column,
        Some(p) => match p
            .iter()
            .nth(scan_column)
            .and_then(|e| e.expr.downcast_ref::<Column>())
        {
            Some(c) => c.index(),
            None => return Ok(None),
        },
    };
    if table_column >= source.table_schema().file_schema().fields().len() {
        return Ok(None);
    }
    // Whole files (DataFusion may have cut one into byte ranges), each with
    // exact bounds and no NULL in the column.
    let mut seen = HashSet::new();
    let mut files = vec![];
    for file in config.file_groups.iter().flat_map(|g| g.iter()) {
        // The byte ranges of one file become that file once; a file listed
        // twice without ranges is read twice, as before.
        if file.range.is_some() && !seen.insert(file.object_meta.location.clone()) {
            continue;
        }
        let Some(stats) = file.statistics.as_ref() else {
            return Ok(None);
        };
        let Some(c) = stats.column_statistics.get(table_column) else {
            return Ok(None);
        };
        let (Precision::Exact(min), Precision::Exact(max), Precision::Exact(0)) =
            (&c.min_value, &c.max_value, &c.null_count)
        else {
            return Ok(None);
        };
        let mut whole = file.clone();
        whole.range = None;
        files.push((min.clone(), max.clone(), whole));
    }
    if files.len() < partitions {
        return Ok(None);
    }
    files.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(Ordering::Equal));
    let weights = read_weights(source, table_column, files.iter().map(|f| &f.2));
    let Some(runs) = balanced_runs(&weights, partitions) else {
        return Ok(None);
    };
    // Bucket bounds per run, each below the next run's.
    let mut last: Option<ScalarValue> = None;
    for run in &runs {
        let lo = run.iter().map(|&i| &files[i].0).min_by(|a, b| cmp(a, b));
        let hi = run.iter().map(|&i| &files[i].1).max_by(|a, b| cmp(a, b));
        let (Some(lo), Some(hi)) = (lo, hi) else {
            return Ok(None);
        };
        let (Some(lo), Some(hi)) =
            (bucket_of(expr, column, lo)?, bucket_of(expr, column, hi)?)
        else {
            return Ok(None);
        };
        if last.as_ref().is_some_and(|l| cmp(l, &lo) != Ordering::Less) {
            return Ok(None);
        }
        last = Some(hi);
    }
    let table = source.table_schema().table_schema();
    let groups = runs
        .iter()
        .map(|run| {
            let files = run.iter().map(|&i| files[i].2.clone()).collect();
            with_group_statistics(FileGroup::new(files), table)
        })
        .collect();
    let config = FileScanConfigBuilder::from(config.clone())
        .with_file_groups(groups)
        .build();
    let mut plan: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(config);
    let recompute = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
    for parent in path.into_iter().rev() {
        plan = parent.replace_children(vec![plan], recompute)?;
    }
    Ok(Some(plan))
}

/// What a partition will read of each file: its bytes times the share of
/// its rows that the scan's conjuncts over the time `column` alone keep
/// (DataFusion's interval analysis over the file's statistics, the values
/// taken as uniform over the file's range; 1 where it cannot tell). A
/// one-day window that starts in the evening keeps 5 hours of one day file
/// and 19 of the next: equal bytes, but whole files would leave one core
/// four fifths of the rows (TSBS `long-daily-sessions`).
fn read_weights<'a>(
    source: &ParquetSource,
    column: usize,
    files: impl Iterator<Item = &'a PartitionedFile>,
) -> Vec<u64> {
    let table = source.table_schema().table_schema();
    let on_time = scan_conjuncts(source, |c| {
        collect_columns(c).iter().all(|c| c.index() == column)
    });
    files
        .map(|file| {
            let share = match (&on_time, file.statistics.as_deref()) {
                (Some(p), Some(stats)) => {
                    passing_share(p, table, &stats.column_statistics)
                }
                _ => 1.0,
            };
            (file.object_meta.size as f64 * share).round() as u64
        })
        .collect()
}

/// [`contiguous_runs`] when none of them holds more than half again its
/// share of the weights (the bytes each will read, [`read_weights`]):
/// whole files can balance partitions worse than DataFusion's byte ranges
/// (one large file among small ones, or a window that keeps little of one
/// file), and losing a core costs more than the merge this saves.
fn balanced_runs(sizes: &[u64], n: usize) -> Option<Vec<Vec<usize>>> {
    let total: u64 = sizes.iter().sum();
    let runs = contiguous_runs(sizes, n);
    let largest = runs
        .iter()
        .map(|r| r.iter().map(|&i| sizes[i]).sum::<u64>())
        .max()?;
    (largest * n as u64 * 2 <= total * 3).then_some(runs)
}

/// Splits items of these sizes, in order, into `n` non-empty contiguous
/// runs of about equal total size (`sizes.len() >= n`).
fn contiguous_runs(sizes: &[u64], n: usize) -> Vec<Vec<usize>> {
    let total: u64 = sizes.iter().sum();
    let mut runs: Vec<Vec<usize>> = vec![vec![]];
    let mut done = 0u64;
    for (i, &size) in sizes.iter().enumerate() {
        let left_items = sizes.len() - i;
        let left_runs = n - runs.len();
        let current = runs.last().expect("one run");
        // Close the run once this item would end more than half past its
        // share, or when the items left are only enough to give each
        // remaining run one.
        let share = total * runs.len() as u64 / n as u64;
        if !current.is_empty()
            && left_runs > 0
            && (2 * done + size > 2 * share || left_items == left_runs)
        {
            runs.push(vec![]);
        }
        runs.last_mut().expect("one run").push(i);
        done += size;
    }
    runs
}

/// Orders two statistics values of one column (incomparable as equal).
fn cmp(a: &ScalarValue, b: &ScalarValue) -> Ordering {
    a.partial_cmp(b).unwrap_or(Ordering::Equal)
}

/// `expr` evaluated with its `column` set to `value`; `None` when the
/// result is NULL or not a scalar.
fn bucket_of(
    expr: &Arc<dyn PhysicalExpr>,
    column: usize,
    value: &ScalarValue,
) -> Result<Option<ScalarValue>> {
    let bound = Arc::clone(expr)
        .transform(|e| {
            Ok(match e.downcast_ref::<Column>() {
                Some(c) if c.index() == column => {
                    Transformed::yes(Arc::new(Literal::new(value.clone())) as _)
                }
                _ => Transformed::no(e),
            })
        })
        .data()?;
    let one_row = RecordBatch::try_new_with_options(
        Arc::new(Schema::empty()),
        vec![],
        &RecordBatchOptions::new().with_row_count(Some(1)),
    )?;
    Ok(match bound.evaluate(&one_row)? {
        ColumnarValue::Scalar(s) if !s.is_null() => Some(s),
        ColumnarValue::Array(a) if a.len() == 1 && a.is_valid(0) => {
            Some(ScalarValue::try_from_array(&a, 0)?)
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::{balanced_runs, contiguous_runs};

    #[test]
    fn runs_that_would_idle_a_core_are_refused() {
        assert!(balanced_runs(&[10, 10, 10, 10], 2).is_some());
        assert!(balanced_runs(&[10, 9, 11, 10, 10, 10], 3).is_some());
        // One large file among small ones: byte ranges balance it, whole
        // files cannot.
        assert!(balanced_runs(&[100, 1, 1, 1], 2).is_none());
        assert!(balanced_runs(&[1, 1, 1, 1, 20], 2).is_none());
    }

    #[test]
    fn runs_are_contiguous_non_empty_and_balanced() {
        assert_eq!(
            contiguous_runs(&[1, 1, 1, 1], 2),
            vec![vec![0, 1], vec![2, 3]]
        );
        assert_eq!(
            contiguous_runs(&[10, 1, 1], 3),
            vec![vec![0], vec![1], vec![2]]
        );
        assert_eq!(contiguous_runs(&[1, 1, 10], 2), vec![vec![0, 1], vec![2]]);
        for n in 1..6 {
            for len in n..12 {
                let sizes: Vec<u64> = (0..len).map(|i| (i * 7 % 5 + 1) as u64).collect();
                let runs = contiguous_runs(&sizes, n);
                assert_eq!(runs.len(), n, "{sizes:?} into {n}");
                let flat: Vec<usize> = runs.concat();
                assert_eq!(flat, (0..len).collect::<Vec<_>>());
                assert!(runs.iter().all(|r| !r.is_empty()));
            }
        }
    }
}
