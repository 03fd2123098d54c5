//! The work of [`super::NewestFirstTopKExec`]: footers, the row-group order,
//! reads a few at a time, the running best rows and the stop.

use super::exec::shape;
use super::metrics::NewestFirstMetrics;
use crate::parquet_read::fetch_footers;
use datafusion::arrow::array::{Array, ArrayRef, Int64Array, RecordBatch};
use datafusion::arrow::compute::{SortOptions, cast, concat_batches, sort_to_indices};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::{
    DefaultParquetFileReaderFactory, ParquetAccessPlan,
};
use datafusion::datasource::physical_plan::{
    FileGroup, FileScanConfig, FileScanConfigBuilder, ParquetFileReaderFactory,
    ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use datafusion::physical_expr::PhysicalSortExpr;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions,
};
use futures::StreamExt;
use std::sync::Arc;

/// One row group to read, with the largest key it may hold (`i128::MAX`
/// when its statistics do not say, or it holds NULL keys that rank first).
#[derive(Debug, Clone, Copy)]
struct Candidate {
    key: i128,
    file: usize,
    row_group: usize,
    row_groups: usize,
}

/// A key value as a rank: larger is better (descending order).
fn rank(value: Option<i64>, nulls_first: bool) -> i128 {
    match value {
        Some(v) => i128::from(v),
        None if nulls_first => i128::MAX,
        None => i128::MIN,
    }
}

/// The row groups of all files, best first.
async fn candidates(
    files: &[PartitionedFile],
    factory: &Arc<dyn ParquetFileReaderFactory>,
    key: &str,
    key_type: &DataType,
    nulls_first: bool,
) -> Result<Vec<Candidate>> {
    let footers =
        fetch_footers(files, factory, &ExecutionPlanMetricsSet::new(), false).await;
    let mut out = vec![];
    for (file, meta) in footers.into_iter().enumerate() {
        let meta = meta?;
        let descr = meta.file_metadata().schema_descr();
        let arrow =
            parquet_to_arrow_schema(descr, meta.file_metadata().key_value_metadata())?;
        let groups = meta.row_groups();
        let stats = StatisticsConverter::try_new(key, &arrow, descr).and_then(|c| {
            Ok((
                c.row_group_maxes(groups.iter())?,
                c.row_group_null_counts(groups.iter())?,
            ))
        });
        let (maxes, nulls) = match stats {
            Ok((maxes, nulls)) => {
                let maxes = cast(&cast(&maxes, key_type)?, &DataType::Int64)?;
                (Some(maxes), Some(nulls))
            }
            Err(_) => (None, None),
        };
        for (rg, group) in groups.iter().enumerate() {
            let max = maxes.as_ref().and_then(|m| {
                let m = m.as_any().downcast_ref::<Int64Array>()?;
                m.is_valid(rg).then(|| m.value(rg))
            });
            let null_count = nulls
                .as_ref()
                .and_then(|n| n.is_valid(rg).then(|| n.value(rg)));
            let rows = group.num_rows().max(0) as u64;
            let key = match (max, null_count) {
                (_, Some(n)) if n > 0 && nulls_first => i128::MAX,
                (Some(v), Some(_)) => i128::from(v),
                // Only NULL keys: they rank last here.
                (None, Some(n)) if n == rows => i128::MIN,
                _ => i128::MAX,
            };
            out.push(Candidate {
                key,
                file,
                row_group: rg,
                row_groups: groups.len(),
            });
        }
    }
    // Best first; among equals the later file and row group (newer data).
    out.sort_by(|a, b| {
        b.key
            .cmp(&a.key)
            .then(b.file.cmp(&a.file))
            .then(b.row_group.cmp(&a.row_group))
    });
    Ok(out)
}

/// The best `fetch` rows of `batches` by `expr`, and the rank of the last
/// one when there are `fetch`.
fn best(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    expr: &PhysicalSortExpr,
    fetch: usize,
) -> Result<(RecordBatch, Option<i128>)> {
    let all = concat_batches(schema, batches)?;
    let keys = expr.expr.evaluate(&all)?.into_array(all.num_rows())?;
    let options = SortOptions {
        descending: true,
        nulls_first: expr.options.nulls_first,
    };
    let indices = sort_to_indices(&keys, Some(options), Some(fetch))?;
    let top = datafusion::arrow::compute::take_record_batch(&all, &indices)?;
    if top.num_rows() < fetch || fetch == 0 {
        return Ok((top, None));
    }
    let last: ArrayRef = expr
        .expr
        .evaluate(&top.slice(fetch - 1, 1))?
        .into_array(1)?;
    let last = cast(&last, &DataType::Int64)?;
    let last = last.as_any().downcast_ref::<Int64Array>();
    let value = last.and_then(|a| a.is_valid(0).then(|| a.value(0)));
    Ok((top, Some(rank(value, expr.options.nulls_first))))
}

/// Reads row group `c` of `file` through a copy of the scan (under the
/// filter when there is one); returns its best rows and the rows scanned.
async fn read(
    filter: Option<Arc<dyn ExecutionPlan>>,
    config: FileScanConfig,
    file: PartitionedFile,
    c: Candidate,
    expr: PhysicalSortExpr,
    fetch: usize,
    context: Arc<TaskContext>,
) -> Result<(RecordBatch, usize)> {
    let mut access = ParquetAccessPlan::new_none(c.row_groups);
    access.scan(c.row_group);
    let config = FileScanConfigBuilder::from(config)
        .with_file_groups(vec![FileGroup::new(vec![file.with_extension(access)])])
        .with_limit(None)
        .build();
    let scan: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(config);
    let plan = match filter {
        None => Arc::clone(&scan),
        Some(filter) => filter.replace_children(
            vec![Arc::clone(&scan)],
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )?,
    };
    let schema = plan.schema();
    // The best rows so far and one batch: a row group is never held whole.
    let mut stream = plan.execute(0, context)?;
    let mut top = RecordBatch::new_empty(Arc::clone(&schema));
    while let Some(batch) = stream.next().await {
        top = best(&schema, &[top, batch?], &expr, fetch)?.0;
    }
    let scanned = scan
        .metrics()
        .and_then(|m| m.output_rows())
        .unwrap_or_default();
    Ok((top, scanned))
}

/// Runs the scan newest first and returns the best `fetch` rows, sorted.
pub(crate) async fn run(
    input: Arc<dyn ExecutionPlan>,
    expr: PhysicalSortExpr,
    fetch: usize,
    context: Arc<TaskContext>,
    reservation: MemoryReservation,
    metrics: NewestFirstMetrics,
) -> Result<RecordBatch> {
    let schema = input.schema();
    let Some(s) = shape(&input, &expr.expr) else {
        return Err(DataFusionError::Internal(
            "NewestFirstTopKExec over an unexpected input".into(),
        ));
    };
    let config = s.config.clone();
    let key = s.key.clone();
    let filter = s.filter.cloned();
    let key_type = config
        .file_schema()
        .field_with_name(&key)?
        .data_type()
        .clone();
    let factory: Arc<dyn ParquetFileReaderFactory> = match s
        .scan
        .downcast_to_file_source::<ParquetSource>()
        .and_then(|(_, source)| source.parquet_file_reader_factory().cloned())
    {
        Some(f) => f,
        None => Arc::new(DefaultParquetFileReaderFactory::new(
            context
                .runtime_env()
                .object_store(&config.object_store_url)?,
        )),
    };
    // Each file once (a large file may be split into byte ranges).
    let mut files: Vec<PartitionedFile> = vec![];
    for f in config.file_groups.iter().flat_map(|g| g.files()) {
        if !files
            .iter()
            .any(|g| g.object_meta.location == f.object_meta.location)
        {
            let mut whole = f.clone();
            whole.range = None;
            files.push(whole);
        }
    }
    let order =
        candidates(&files, &factory, &key, &key_type, expr.options.nulls_first).await?;
    metrics.row_groups_total.add(order.len());
    let width = context.session_config().target_partitions().max(1);
    let (task_filter, task_config, task_files, task_expr, task_context) = (
        filter,
        config.clone(),
        files.clone(),
        expr.clone(),
        Arc::clone(&context),
    );
    let reads = order.clone().into_iter().map(move |c| {
        let task = read(
            task_filter.clone(),
            task_config.clone(),
            task_files[c.file].clone(),
            c,
            task_expr.clone(),
            fetch,
            Arc::clone(&task_context),
        );
        // Spawned so that row groups decode on several threads; dropping
        // the task (the stop below) cancels it.
        let task = SpawnedTask::spawn(task);
        async move {
            task.join()
                .await
                .map_err(|e| DataFusionError::External(Box::new(e)))?
        }
    });
    let mut reads = futures::stream::iter(reads).buffered(width);
    let mut top = RecordBatch::new_empty(Arc::clone(&schema));
    let mut done = 0;
    while let Some(result) = reads.next().await {
        let (batch, scanned) = result?;
        done += 1;
        metrics.row_groups_read.add(1);
        metrics.rows_scanned.add(scanned);
        let (next, nth) = best(&schema, &[top, batch], &expr, fetch)?;
        reservation.try_resize(next.get_array_memory_size())?;
        top = next;
        // The next row group's best key cannot beat the n-th row: stop.
        if let Some(nth) = nth
            && order.get(done).is_none_or(|c| c.key <= nth)
        {
            break;
        }
    }
    drop(reads);
    metrics.baseline.record_output(top.num_rows());
    metrics.baseline.done();
    Ok(top)
}
