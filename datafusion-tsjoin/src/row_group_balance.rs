//! A filtered Parquet scan's partitions given equal shares of the row groups
//! its WHERE leaves, while planning.
//!
//! DataFusion spreads a scan's files over partitions by bytes (each
//! partition a byte range of the files), and each partition's opener then
//! keeps the row groups that *start* in its range and survive the
//! predicate's statistics. A time window over a file sorted by time leaves a
//! few neighbouring row groups, and they often start in one partition's
//! range: TSBS `long-driving-sessions` (4 hours of a day file) reads its
//! three row groups on one core while the other has nothing to do.
//!
//! [`balance_row_groups`] reads the footers of such a scan's files (through
//! DataFusion's metadata cache, where the listing's statistics put them),
//! prunes the row groups by the same statistics and page index the opener
//! will use, and redraws the byte ranges at row-group boundaries so that
//! each partition gets a contiguous run of about the same number of
//! surviving rows. Only the ranges change: every row group still starts in
//! exactly one range (pruned ones too), so the answer cannot, whatever the
//! pruning here says; the opener prunes as before. Ranges, unlike access
//! plans, travel through datafusion-proto to Ballista's executors.
//!
//! It runs after the physical optimizer, on scans whose rows go through
//! filters and projections into an aggregate (DataFusion's or the inline
//! one), which read their input as a stream. tsjoin's operators that read
//! the files themselves from the scan's plan (newest-first TopK, fused
//! filter aggregates, late materialisation, the per-partition fallback of
//! time-disjoint files) are left as they are. Scans of more than two files
//! per partition are left too: their byte ranges already hold many row
//! groups each, and so are scans expected to read too few rows to be worth
//! the footers' pruning (`crate::small_scan`). `SET
//! tsjoin.balance_row_groups = false` turns it off; EXPLAIN shows the
//! ranges in the scan's `file_groups`.
//!
//! ```text
//! before: p0 = [0, 18.8 MB) → row groups 2, 3, 4 (start at 7.6, 11.4, 15.2 MB)
//!         p1 = [18.8, 37.5 MB) → none survive
//! after:  p0 = [0, 15.2 MB) → row groups 2, 3 (0, 1 pruned; the page index
//!                                 leaves fewer rows of 2 than of 4)
//!         p1 = [15.2, 37.5 MB) → row group 4 (5-9 pruned)
//! ```

use crate::config::rule_enabled;
use crate::inline_aggregate::InlineAggregateExec;
use crate::parquet_read::{Pruning, access_plan, fetch_footers};
use crate::prune_files::file_predicate;
use crate::small_scan::is_small;
use datafusion::catalog::Session;
use datafusion::common::Result;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::{
    CachedParquetFileReaderFactory, RowGroupAccess,
};
use datafusion::datasource::physical_plan::{
    FileGroup, FileScanConfig, FileScanConfigBuilder, FileSource,
    ParquetFileReaderFactory, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::projection::ProjectionExec;
use std::collections::HashMap;
use std::sync::Arc;

/// Files per partition above which a scan is left as DataFusion spread it.
const MAX_FILES_PER_PARTITION: usize = 2;

/// `plan` with the byte ranges of its filtered Parquet scans redrawn so
/// that their partitions read about the same number of surviving rows (see
/// the [module docs](self)); scans it cannot judge are left as they are.
///
/// ```ignore
/// let plan = planner.create_physical_plan(logical, session).await?;
/// let plan = balance_row_groups(plan, session).await?;
/// ```
pub(crate) async fn balance_row_groups(
    plan: Arc<dyn ExecutionPlan>,
    session: &dyn Session,
) -> Result<Arc<dyn ExecutionPlan>> {
    if !rule_enabled(session.config_options(), |o| o.balance_row_groups) {
        return Ok(plan);
    }
    let mut scans = vec![];
    collect(&plan, false, &mut scans);
    let mut replaced = vec![];
    for scan in scans {
        if let Some(new) = balanced(&scan, session).await {
            replaced.push((scan, new));
        }
    }
    if replaced.is_empty() {
        return Ok(plan);
    }
    plan.transform_up(|node| {
        Ok(
            match replaced.iter().find(|(old, _)| Arc::ptr_eq(old, &node)) {
                Some((_, new)) => Transformed::yes(Arc::clone(new)),
                None => Transformed::no(node),
            },
        )
    })
    .data()
}

/// The scans under `node` whose rows reach an aggregate through filters
/// and projections only (`feeds`: `node`'s own rows do).
fn collect(
    node: &Arc<dyn ExecutionPlan>,
    feeds: bool,
    out: &mut Vec<Arc<dyn ExecutionPlan>>,
) {
    if feeds && node.is::<DataSourceExec>() {
        out.push(Arc::clone(node));
        return;
    }
    // The inline aggregate's per-partition fallback relies on each
    // partition's files as planned (whole files of disjoint time ranges).
    let aggregate = node.is::<AggregateExec>()
        || node
            .downcast_ref::<InlineAggregateExec>()
            .is_some_and(|a| a.fallback().is_none_or(|t| t.is::<AggregateExec>()));
    let passes = node.is::<FilterExec>() || node.is::<ProjectionExec>();
    let feeds = aggregate || (feeds && passes);
    for child in node.children() {
        collect(child, feeds, out);
    }
}

/// `scan` with balanced ranges, or `None` when it is not a filtered
/// Parquet scan of whole or DataFusion-split files, its footers cannot be
/// read, or the ranges it has are balanced enough.
async fn balanced(
    scan: &Arc<dyn ExecutionPlan>,
    session: &dyn Session,
) -> Option<Arc<dyn ExecutionPlan>> {
    let (config, source) = scan
        .downcast_ref::<DataSourceExec>()?
        .downcast_to_file_source::<ParquetSource>()?;
    let partitions = config.file_groups.len();
    let crypto = &source.table_parquet_options().crypto;
    if partitions < 2
        || config.limit.is_some()
        || !config.output_ordering.is_empty()
        || config.output_partitioning.is_some()
        || crypto.file_decryption.is_some()
        || crypto.factory_id.is_some()
        || is_small(config, source, session.config_options())
    {
        return None;
    }
    let file_schema = Arc::clone(source.table_schema().file_schema());
    let predicate = file_predicate(&source.filter()?, &file_schema)?;
    let files = whole_files(config)?;
    if files.len() > MAX_FILES_PER_PARTITION * partitions {
        return None;
    }
    let pruning = Pruning::new(&predicate, &file_schema, source.table_parquet_options());
    pruning.stats()?;
    let factory: Arc<dyn ParquetFileReaderFactory> =
        match source.parquet_file_reader_factory() {
            Some(f) => Arc::clone(f),
            None => Arc::new(CachedParquetFileReaderFactory::new(
                session
                    .runtime_env()
                    .object_store(&config.object_store_url)
                    .ok()?,
                session
                    .runtime_env()
                    .cache_manager
                    .get_file_metadata_cache(),
            )),
        };
    let scratch = ExecutionPlanMetricsSet::new();
    let page_index = pruning.pages().is_some();
    let footers = fetch_footers(&files, &factory, &scratch, page_index).await;
    let mut groups = Vec::with_capacity(files.len());
    for (file, meta) in files.iter().zip(footers) {
        groups.push(row_groups(file, &meta.ok()?, &pruning, &scratch)?);
    }
    let now = loads(config, &files, &groups, partitions)?;
    let sizes: Vec<u64> = files.iter().map(|f| f.object_meta.size).collect();
    let (ranges, new) = split(&groups, &sizes, partitions);
    let (now_max, new_max) = (now.into_iter().max()?, new.into_iter().max()?);
    // Only a clear gain is worth a plan that differs from DataFusion's.
    if new_max * 10 >= now_max * 9 {
        return None;
    }
    let file_groups = ranges
        .into_iter()
        .map(|spans| {
            FileGroup::new(
                spans
                    .into_iter()
                    .map(|(f, start, end)| {
                        files[f].clone().with_range(start as i64, end as i64)
                    })
                    .collect(),
            )
        })
        .collect();
    let config = FileScanConfigBuilder::from(config.clone())
        .with_file_groups(file_groups)
        .build();
    Some(DataSourceExec::from_data_source(config))
}

/// Each file of `config` once, whole, in the order of its groups; `None`
/// when a file is read in ranges that are not DataFusion's split of the
/// whole file, or carries an access plan.
fn whole_files(config: &FileScanConfig) -> Option<Vec<PartitionedFile>> {
    let mut order: Vec<PartitionedFile> = vec![];
    let mut ranges: HashMap<String, Vec<(i64, i64)>> = HashMap::new();
    for file in config.file_groups.iter().flat_map(|g| g.iter()) {
        if !file.extensions.is_empty() {
            return None;
        }
        let path = file.object_meta.location.to_string();
        let size = file.object_meta.size as i64;
        let range = file.range.as_ref().map_or((0, size), |r| (r.start, r.end));
        let seen = ranges.entry(path).or_default();
        if seen.is_empty() {
            let mut whole = file.clone();
            whole.range = None;
            order.push(whole);
        }
        seen.push(range);
    }
    for file in &order {
        let seen = ranges.get_mut(file.object_meta.location.as_ref())?;
        seen.sort_unstable();
        let mut at = 0;
        for &(start, end) in seen.iter() {
            if start != at {
                return None;
            }
            at = end;
        }
        if at != file.object_meta.size as i64 {
            return None;
        }
    }
    Some(order)
}

/// One row group of a file: where it starts and the rows the opener will
/// read of it (0 when pruned).
#[derive(Debug, Clone, Copy)]
struct RowGroup {
    start: u64,
    rows: u64,
}

/// The row groups of `file`, in file order, with the rows that survive
/// `pruning`; `None` when they do not start in increasing order.
fn row_groups(
    file: &PartitionedFile,
    meta: &Arc<ParquetMetaData>,
    pruning: &Pruning,
    scratch: &ExecutionPlanMetricsSet,
) -> Option<Vec<RowGroup>> {
    let arrow =
        ArrowReaderMetadata::try_new(Arc::clone(meta), ArrowReaderOptions::new()).ok()?;
    let all: Vec<usize> = (0..meta.num_row_groups()).collect();
    let plan = access_plan(&arrow, &all, file, pruning, scratch);
    let groups: Vec<RowGroup> = meta
        .row_groups()
        .iter()
        .enumerate()
        .map(|(i, rg)| {
            let col = rg.column(0);
            let start = col
                .dictionary_page_offset()
                .unwrap_or_else(|| col.data_page_offset()) as u64;
            let rows = match &plan.inner()[i] {
                RowGroupAccess::Skip => 0,
                RowGroupAccess::Scan => rg.num_rows() as u64,
                RowGroupAccess::Selection(s) => s.row_count() as u64,
            };
            RowGroup { start, rows }
        })
        .collect();
    groups
        .windows(2)
        .all(|w| w[0].start < w[1].start)
        .then_some(groups)
}

/// The rows each of `config`'s partitions reads now.
fn loads(
    config: &FileScanConfig,
    files: &[PartitionedFile],
    groups: &[Vec<RowGroup>],
    partitions: usize,
) -> Option<Vec<u64>> {
    let index: HashMap<&str, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.object_meta.location.as_ref(), i))
        .collect();
    let mut loads = vec![0; partitions];
    for (p, group) in config.file_groups.iter().enumerate() {
        for file in group.iter() {
            let f = *index.get(file.object_meta.location.as_ref())?;
            loads[p] += groups[f]
                .iter()
                .filter(|g| {
                    file.range.as_ref().is_none_or(|r| {
                        r.start as u64 <= g.start && g.start < r.end as u64
                    })
                })
                .map(|g| g.rows)
                .sum::<u64>();
        }
    }
    Some(loads)
}

/// A byte span of one file: `(file, start, end)`.
type Span = (usize, u64, u64);

/// Cuts the row groups of all files, in order, into `partitions` runs of
/// about equal rows (a row group goes to the run its middle row falls in),
/// and returns each run's byte spans `(file, start, end)` with its rows.
/// Every row group starts in exactly one span: a file's first span starts
/// at 0, its last ends at the file's end (`sizes`).
fn split(
    groups: &[Vec<RowGroup>],
    sizes: &[u64],
    partitions: usize,
) -> (Vec<Vec<Span>>, Vec<u64>) {
    let total: u64 = groups.iter().flatten().map(|g| g.rows).sum();
    let mut spans: Vec<Vec<Span>> = vec![vec![]; partitions];
    let mut loads = vec![0u64; partitions];
    let mut before = 0u64;
    for (f, file) in groups.iter().enumerate() {
        for (i, g) in file.iter().enumerate() {
            let middle = 2 * before + g.rows;
            let p = if total == 0 {
                0
            } else {
                ((middle as u128 * partitions as u128 / (2 * total as u128)) as usize)
                    .min(partitions - 1)
            };
            before += g.rows;
            loads[p] += g.rows;
            let start = if i == 0 { 0 } else { g.start };
            let end = file.get(i + 1).map_or(sizes[f], |next| next.start);
            match spans[p].last_mut() {
                Some((lf, _, le)) if *lf == f && *le == start => *le = end,
                _ => spans[p].push((f, start, end)),
            }
        }
    }
    (spans, loads)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn file(rows: &[u64]) -> Vec<RowGroup> {
        rows.iter()
            .enumerate()
            .map(|(i, &rows)| RowGroup {
                start: 4 + 100 * i as u64,
                rows,
            })
            .collect()
    }

    /// The partitions whose spans hold `start` (a row group's first byte).
    fn holders(spans: &[Vec<Span>], f: usize, start: u64) -> Vec<usize> {
        (0..spans.len())
            .filter(|&p| {
                spans[p]
                    .iter()
                    .any(|&(sf, s, e)| sf == f && s <= start && start < e)
            })
            .collect()
    }

    #[test]
    fn three_surviving_row_groups_split_one_and_two() {
        let groups = vec![file(&[0, 0, 10, 30, 10, 0, 0, 0, 0, 0])];
        let (spans, loads) = split(&groups, &[1000], 2);
        assert_eq!(loads, [10, 40]);
        assert_eq!(spans, [vec![(0, 0, 304)], vec![(0, 304, 1000)]]);
    }

    /// Whatever the rows, every row group starts in exactly one span, the
    /// spans stay inside their files, and no partition holds more than its
    /// share plus one row group.
    #[test]
    fn every_row_group_starts_in_one_span() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut next = |n: u64| rng.random_range(0..n);
        for _ in 0..300 {
            let files = 1 + next(4) as usize;
            let groups: Vec<Vec<RowGroup>> = (0..files)
                .map(|_| {
                    let n = next(9) as usize;
                    file(
                        &(0..n)
                            .map(|_| if next(3) == 0 { 0 } else { next(1000) })
                            .collect::<Vec<_>>(),
                    )
                })
                .collect();
            let sizes: Vec<u64> =
                groups.iter().map(|g| 4 + 100 * g.len() as u64).collect();
            let partitions = 1 + next(5) as usize;
            let (spans, loads) = split(&groups, &sizes, partitions);
            assert_eq!(spans.len(), partitions);
            for (f, file) in groups.iter().enumerate() {
                for g in file {
                    assert_eq!(
                        holders(&spans, f, g.start).len(),
                        1,
                        "{groups:?} {spans:?}"
                    );
                }
            }
            for &(f, s, e) in spans.iter().flatten() {
                assert!(s < e && e <= sizes[f], "{spans:?}");
            }
            let total: u64 = loads.iter().sum();
            let largest = groups.iter().flatten().map(|g| g.rows).max().unwrap_or(0);
            for load in loads {
                assert!(
                    load <= total / partitions as u64 + largest,
                    "{load} of {total}"
                );
            }
        }
    }
}
