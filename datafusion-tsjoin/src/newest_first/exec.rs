//! [`NewestFirstTopKExec`]: the physical operator.

use super::metrics::NewestFirstMetrics;
use super::stream;
use crate::priority::PriorityGateExec;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err};
use datafusion::datasource::physical_plan::{FileScanConfig, FileSource, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{
    EquivalenceProperties, LexOrdering, Partitioning, PhysicalSortExpr,
};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PhysicalExpr,
    PlanProperties, SendableRecordBatchStream,
};
use std::fmt;
use std::sync::Arc;

/// The best `fetch` rows of its input by one descending key, read from a
/// Parquet scan (optionally under a `FilterExec`) row group by row group,
/// newest first, stopping once no unread row group can contribute. One
/// output partition, sorted by the key. Its child is the plan it reads a
/// copy of per row group; when the child is not of that shape (a later rule
/// changed it) it runs as DataFusion's TopK would.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion::physical_plan::displayable;
/// use datafusion_tsjoin::TsJoinContextExt;
/// let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
/// let dir = std::env::temp_dir().join(format!("nf-exec-doc-{}", std::process::id()));
/// ctx.tsjoin_sql(&format!("COPY (SELECT CAST(v * 1000000 AS TIMESTAMP) AS ts, v AS x \
///     FROM generate_series(1, 100) AS g(v)) TO '{}/a.parquet'", dir.display())).await?.collect().await?;
/// ctx.register_parquet("t", dir.to_str().unwrap(), Default::default()).await?;
/// let plan = ctx.tsjoin_sql("SELECT * FROM t WHERE x > 3 ORDER BY ts DESC LIMIT 2").await?
///     .create_physical_plan().await?;
/// assert!(displayable(plan.as_ref()).indent(true).to_string().contains("NewestFirstTopKExec"));
/// # std::fs::remove_dir_all(dir).ok(); Ok(()) }
/// ```
#[derive(Debug)]
pub struct NewestFirstTopKExec {
    input: Arc<dyn ExecutionPlan>,
    expr: PhysicalSortExpr,
    fetch: usize,
    cache: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

/// The scan a [`NewestFirstTopKExec`] reads: the filter over it (if any),
/// the Parquet scan, its configuration and the file column name of the key.
pub(crate) struct Shape<'a> {
    pub(crate) filter: Option<&'a Arc<dyn ExecutionPlan>>,
    pub(crate) scan: &'a DataSourceExec,
    pub(crate) config: &'a FileScanConfig,
    pub(crate) key: String,
}

/// `input`'s shape when it is a Parquet scan (or a filter without
/// projection over one) without partition columns, and `key` one of its
/// integer, date or timestamp file columns. A round-robin repartition or a
/// priority gate between filter and scan only deal batches out: the
/// row-group reads skip them.
pub(crate) fn shape<'a>(
    input: &'a Arc<dyn ExecutionPlan>,
    key: &Arc<dyn PhysicalExpr>,
) -> Option<Shape<'a>> {
    let (filter, mut scan_plan) = match input.downcast_ref::<FilterExec>() {
        Some(f) if f.projection().is_some() || f.fetch().is_some() => return None,
        Some(f) => (Some(input), f.input()),
        None => (None, input),
    };
    loop {
        if let Some(r) = scan_plan.downcast_ref::<RepartitionExec>()
            && matches!(r.partitioning(), Partitioning::RoundRobinBatch(_))
        {
            scan_plan = r.input();
        } else if let Some(g) = scan_plan.downcast_ref::<PriorityGateExec>() {
            scan_plan = g.input();
        } else {
            break;
        }
    }
    let scan = scan_plan.downcast_ref::<DataSourceExec>()?;
    let (config, source) = scan.downcast_to_file_source::<ParquetSource>()?;
    if !config.table_partition_cols().is_empty() {
        return None;
    }
    let crypto = &source.table_parquet_options().crypto;
    if crypto.file_decryption.is_some() || crypto.factory_id.is_some() {
        return None;
    }
    if config
        .file_groups
        .iter()
        .flat_map(|g| g.files())
        .any(|f| !f.extensions.is_empty())
    {
        return None;
    }
    let out = key.downcast_ref::<Column>()?.index();
    let table = match source.projection() {
        Some(p) => p.iter().nth(out)?.expr.downcast_ref::<Column>()?.index(),
        None => out,
    };
    let field = config.file_schema().fields().get(table)?;
    let ok = matches!(
        field.data_type(),
        DataType::Int32
            | DataType::Int64
            | DataType::Date32
            | DataType::Date64
            | DataType::Timestamp(_, _)
    );
    ok.then(|| Shape {
        filter,
        scan,
        config,
        key: field.name().clone(),
    })
}

impl NewestFirstTopKExec {
    /// The best `fetch` rows of `input` by `expr` (descending).
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        expr: PhysicalSortExpr,
        fetch: usize,
    ) -> Self {
        let ordering = LexOrdering::new([expr.clone()]);
        let eq = EquivalenceProperties::new_with_orderings(input.schema(), ordering);
        let cache = Arc::new(PlanProperties::new(
            eq,
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Self {
            input,
            expr,
            fetch,
            cache,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The sort key.
    pub fn expr(&self) -> &PhysicalSortExpr {
        &self.expr
    }

    /// Rows kept.
    pub fn fetch(&self) -> usize {
        self.fetch
    }

    /// The plan read per row group.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }
}

impl DisplayAs for NewestFirstTopKExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "NewestFirstTopKExec: fetch={}, expr=[{}]",
                self.fetch, self.expr
            ),
            DisplayFormatType::TreeRender => {
                write!(f, "fetch={}\nexpr=[{}]", self.fetch, self.expr)
            }
        }
    }
}

impl ExecutionPlan for NewestFirstTopKExec {
    fn name(&self) -> &str {
        "NewestFirstTopKExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        f(&self.expr.expr)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return internal_err!("NewestFirstTopKExec expects one child");
        }
        Ok(Arc::new(Self::new(
            children.swap_remove(0),
            self.expr.clone(),
            self.fetch,
        )))
    }

    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        // Fresh metrics for a re-run; no other state lives in the node.
        Ok(Arc::new(Self::new(
            Arc::clone(&self.input),
            self.expr.clone(),
            self.fetch,
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!(
                "NewestFirstTopKExec has one partition, asked for {partition}"
            );
        }
        if shape(&self.input, &self.expr.expr).is_none() {
            // Not a Parquet scan any more: DataFusion's TopK.
            let ordering =
                LexOrdering::new([self.expr.clone()]).expect("one sort expression");
            let sort = SortExec::new(ordering, Arc::clone(&self.input))
                .with_fetch(Some(self.fetch));
            let sort: Arc<dyn ExecutionPlan> = if self
                .input
                .output_partitioning()
                .partition_count()
                > 1
            {
                Arc::new(datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec::new(
                    sort.expr().clone(),
                    Arc::new(sort.with_preserve_partitioning(true)),
                ).with_fetch(Some(self.fetch)))
            } else {
                Arc::new(sort)
            };
            return sort.execute(0, context);
        }
        let reservation =
            MemoryConsumer::new("NewestFirstTopKExec").register(context.memory_pool());
        let metrics = NewestFirstMetrics::new(&self.metrics, partition);
        let fut = stream::run(
            Arc::clone(&self.input),
            self.expr.clone(),
            self.fetch,
            context,
            reservation,
            metrics,
        );
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema(),
            futures::stream::once(fut),
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
