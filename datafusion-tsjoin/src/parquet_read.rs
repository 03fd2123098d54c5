//! Reading Parquet row groups beside DataFusion's scan, for operators that
//! read files themselves (the inline aggregate's dictionary scan, the
//! fused filter aggregate's page scan, the newest-first TopK): footers
//! fetched a few at a time ([`fetch_footers`]), the row groups of a file
//! range as DataFusion's opener assigns them ([`row_groups_in_range`]) and
//! prunes them ([`access_plan`]), and
//! [`Chunks`]: the column chunks of one row group, fetched in one request
//! and read back as if they were the file, so that the page reader and
//! arrow's record batch reader work on bytes already in memory.
//!
//! ```text
//! file:    [ k chunk ][ other columns ... ][ v chunk ]
//! Chunks:  (offset of k, k's bytes), (offset of v, v's bytes)
//! reads:   any range inside one fetched chunk; anything else is an error
//! ```

use bytes::Bytes;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::config::TableParquetOptions;
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::ParquetFileReaderFactory;
use datafusion::datasource::physical_plan::parquet::{
    PagePruningAccessPlanFilter, ParquetAccessPlan, ParquetFileMetrics,
    RowGroupAccessPlanFilter,
};
use datafusion::parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use datafusion::parquet::basic::Encoding;
use datafusion::parquet::column::page::Page;
use datafusion::parquet::file::metadata::PageIndexPolicy;
use datafusion::parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};
use datafusion::parquet::file::reader::{ChunkReader, Length};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::pruning::{
    PruningPredicate, PruningPredicateBuilder,
};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::StreamExt;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// Footers fetched at once, as the scan's partitions would fetch theirs
/// side by side.
const FOOTER_FETCHES: usize = 16;

/// The footers of `files`, in order, through `factory` (DataFusion's
/// default caches them), with their page indexes when `page_index` (and
/// the files have them); reads are counted in `metrics`.
pub(crate) async fn fetch_footers(
    files: &[PartitionedFile],
    factory: &Arc<dyn ParquetFileReaderFactory>,
    metrics: &ExecutionPlanMetricsSet,
    page_index: bool,
) -> Vec<Result<Arc<ParquetMetaData>>> {
    let options = ArrowReaderOptions::new().with_page_index_policy(if page_index {
        PageIndexPolicy::Optional
    } else {
        PageIndexPolicy::Skip
    });
    let fetches: Vec<_> = files
        .iter()
        .map(|file| {
            let reader =
                factory.create_reader(0, file.clone(), file.metadata_size_hint, metrics);
            let options = options.clone();
            async move {
                reader?
                    .get_metadata(Some(&options))
                    .await
                    .map_err(DataFusionError::from)
            }
        })
        .collect();
    futures::stream::iter(fetches)
        .buffered(FOOTER_FETCHES)
        .collect()
        .await
}

/// How a predicate prunes a file's row groups, as DataFusion's opener
/// would with the scan's settings: by their statistics
/// (`datafusion.execution.parquet.pruning`) and by the page index
/// (`enable_page_index`).
///
/// Built on first use and shared by clones: an operator holding one is
/// rebuilt by every optimizer rule that replaces its children (four times
/// for a TSBS plan), and EXPLAIN never prunes; building the two pruners
/// each time cost a millisecond-long query more than 1% of its time.
///
/// ```ignore
/// let pruning = Pruning::new(&predicate, &table_schema, &parquet_options);
/// let plan = access_plan(&arrow, &[0, 1, 2], &file, &pruning, &scratch);
/// ```
#[derive(Debug, Clone, Default)]
pub(crate) struct Pruning(Option<Arc<LazyPruning>>);

/// What [`Pruning`] is built from, and what it built.
#[derive(Debug)]
struct LazyPruning {
    predicate: Arc<dyn PhysicalExpr>,
    table: SchemaRef,
    statistics: bool,
    page_index: bool,
    built: OnceLock<Pruners>,
}

/// The two pruners of a [`Pruning`].
#[derive(Debug)]
struct Pruners {
    stats: Option<Arc<PruningPredicate>>,
    pages: Option<PagePruningAccessPlanFilter>,
}

impl Pruning {
    /// The pruning of `predicate` over a table of schema `table`, with the
    /// scan's `options`.
    pub(crate) fn new(
        predicate: &Arc<dyn PhysicalExpr>,
        table: &SchemaRef,
        options: &TableParquetOptions,
    ) -> Self {
        Self(Some(Arc::new(LazyPruning {
            predicate: Arc::clone(predicate),
            table: Arc::clone(table),
            statistics: options.global.pruning,
            page_index: options.global.enable_page_index,
            built: OnceLock::new(),
        })))
    }

    fn pruners(&self) -> Option<&Pruners> {
        let lazy = self.0.as_deref()?;
        Some(lazy.built.get_or_init(|| {
            Pruners {
                stats: Some(&lazy.predicate)
                    .filter(|_| lazy.statistics)
                    .and_then(|p| {
                        PruningPredicateBuilder::new()
                            .with_file_schema(Arc::clone(&lazy.table))
                            .build(Arc::clone(p))
                    }),
                pages: Some(&lazy.predicate)
                    .filter(|_| lazy.page_index)
                    .map(|p| PagePruningAccessPlanFilter::new(p, Arc::clone(&lazy.table)))
                    .filter(|f| f.filter_number() > 0),
            }
        }))
    }

    /// The row-group statistics pruner (none: the setting is off or the
    /// predicate prunes nothing by statistics).
    pub(crate) fn stats(&self) -> Option<&PruningPredicate> {
        self.pruners()?.stats.as_deref()
    }

    /// The page-index pruner (none: the setting is off or no conjunct
    /// prunes pages); the footers need their page index only with one.
    pub(crate) fn pages(&self) -> Option<&PagePruningAccessPlanFilter> {
        self.pruners()?.pages.as_ref()
    }
}

/// How to read `groups` (row groups of `arrow`'s file), as DataFusion's
/// opener decides: those `pruning`'s statistics rule out skipped, those
/// its page index narrows down (when the file has one) given a row
/// selection. Pruning counts go to `scratch`.
///
/// ```ignore
/// let plan = access_plan(&arrow, &[0, 1, 2], &file, &pruning, &scratch);
/// let groups: Vec<usize> = plan.row_group_indexes();
/// ```
pub(crate) fn access_plan(
    arrow: &ArrowReaderMetadata,
    groups: &[usize],
    file: &PartitionedFile,
    pruning: &Pruning,
    scratch: &ExecutionPlanMetricsSet,
) -> ParquetAccessPlan {
    let all = arrow.metadata().row_groups();
    let mut plan = ParquetAccessPlan::new_none(all.len());
    for &rg in groups {
        plan.scan(rg);
    }
    let file_metrics =
        ParquetFileMetrics::new(0, file.object_meta.location.as_ref(), scratch);
    if let Some(stats) = pruning.stats() {
        let mut filter = RowGroupAccessPlanFilter::new(plan);
        filter.prune_by_statistics(
            arrow.schema(),
            arrow.parquet_schema(),
            all,
            stats,
            &file_metrics,
        );
        plan = filter.build();
    }
    match pruning.pages() {
        Some(pages) if arrow.metadata().offset_index().is_some() => pages
            .prune_plan_with_page_index(
                plan,
                arrow.schema(),
                arrow.parquet_schema(),
                arrow.metadata(),
                &file_metrics,
            ),
        _ => plan,
    }
}

/// The row groups of `meta` that start inside `file`'s byte range (all
/// without one), as DataFusion's Parquet opener assigns them: by the
/// offset of the first column's first page.
pub(crate) fn row_groups_in_range(
    meta: &ParquetMetaData,
    file: &PartitionedFile,
) -> Vec<usize> {
    (0..meta.num_row_groups())
        .filter(|&rg| {
            let col = meta.row_group(rg).column(0);
            let start = col
                .dictionary_page_offset()
                .unwrap_or_else(|| col.data_page_offset());
            file.range
                .as_ref()
                .is_none_or(|r| r.start <= start && start < r.end)
        })
        .collect()
}

/// The file byte range of a column chunk.
pub(crate) fn chunk_range(c: &ColumnChunkMetaData) -> Range<u64> {
    let (start, len) = c.byte_range();
    start..start + len
}

/// The fetched column chunks of one row group, read as a file.
#[derive(Clone)]
pub(crate) struct Chunks {
    /// The file's size.
    pub(crate) size: u64,
    /// (file offset, bytes) of each chunk.
    pub(crate) parts: Vec<(u64, Bytes)>,
}

impl Chunks {
    /// The fetched bytes from file offset `start` to the end of its chunk.
    fn tail(&self, start: u64) -> datafusion::parquet::errors::Result<Bytes> {
        self.parts
            .iter()
            .find(|(at, b)| *at <= start && start < at + b.len() as u64)
            .map(|(at, b)| b.slice((start - at) as usize..))
            .ok_or_else(|| {
                datafusion::parquet::errors::ParquetError::General(format!(
                    "offset {start} was not fetched"
                ))
            })
    }
}

impl Length for Chunks {
    fn len(&self) -> u64 {
        self.size
    }
}

impl ChunkReader for Chunks {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> datafusion::parquet::errors::Result<Self::T> {
        use bytes::Buf;
        Ok(self.tail(start)?.reader())
    }

    fn get_bytes(
        &self,
        start: u64,
        length: usize,
    ) -> datafusion::parquet::errors::Result<Bytes> {
        if length == 0 {
            return Ok(Bytes::new());
        }
        let tail = self.tail(start)?;
        if length > tail.len() {
            return Err(datafusion::parquet::errors::ParquetError::General(format!(
                "bytes {start}..{} were not fetched",
                start + length as u64
            )));
        }
        Ok(tail.slice(..length))
    }
}

/// A page of a flat column (no repetition levels, definition levels only
/// when nullable) split into what readers of its codes need.
pub(crate) enum FlatPage {
    /// A dictionary: `len` PLAIN values (PLAIN or PLAIN_DICTIONARY encoded).
    Dictionary { values: Bytes, len: usize },
    /// A data page (v1 or v2).
    Data(DataPage),
}

/// A data page of a flat column.
pub(crate) struct DataPage {
    /// Values and NULLs (one definition level each).
    pub(crate) rows: usize,
    /// How its values are encoded.
    pub(crate) encoding: Encoding,
    /// RLE definition levels (1 bit each), when the column is nullable.
    pub(crate) levels: Option<Bytes>,
    /// The non-NULL values.
    pub(crate) values: Bytes,
}

fn corrupt_page(what: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::External(format!("corrupt Parquet page: {what}").into())
}

/// Splits `page` of a flat column, nullable when its max definition level
/// is 1. Levels encoded other than RLE and dictionaries other than PLAIN
/// are errors (no current writer makes them for such columns).
pub(crate) fn flat_page(page: Page, nullable: bool) -> Result<FlatPage> {
    Ok(match page {
        Page::DictionaryPage {
            buf,
            num_values,
            encoding,
            ..
        } => {
            if !matches!(encoding, Encoding::PLAIN | Encoding::PLAIN_DICTIONARY) {
                return Err(corrupt_page(format!(
                    "dictionary page encoded as {encoding}"
                )));
            }
            FlatPage::Dictionary {
                values: buf,
                len: num_values as usize,
            }
        }
        Page::DataPage {
            buf,
            num_values,
            encoding,
            def_level_encoding,
            ..
        } => {
            if !nullable {
                FlatPage::Data(DataPage {
                    rows: num_values as usize,
                    encoding,
                    levels: None,
                    values: buf,
                })
            } else {
                if def_level_encoding != Encoding::RLE {
                    return Err(corrupt_page(format!(
                        "definition levels encoded as {def_level_encoding}"
                    )));
                }
                let len = buf.get(..4).ok_or_else(|| corrupt_page("page too short"))?;
                let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
                let levels = buf
                    .get(4..4 + len)
                    .ok_or_else(|| corrupt_page("levels past the end"))?;
                FlatPage::Data(DataPage {
                    rows: num_values as usize,
                    encoding,
                    levels: Some(buf.slice_ref(levels)),
                    values: buf.slice(4 + len..),
                })
            }
        }
        Page::DataPageV2 {
            buf,
            num_values,
            encoding,
            def_levels_byte_len,
            rep_levels_byte_len,
            ..
        } => {
            let (r, d) = (rep_levels_byte_len as usize, def_levels_byte_len as usize);
            if buf.len() < r + d {
                return Err(corrupt_page("levels past the end"));
            }
            FlatPage::Data(DataPage {
                rows: num_values as usize,
                encoding,
                levels: nullable.then(|| buf.slice(r..r + d)),
                values: buf.slice(r + d..),
            })
        }
    })
}
