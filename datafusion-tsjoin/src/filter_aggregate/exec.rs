//! [`FilterAggregateExec`]: the physical operator.

use super::metrics::FilterAggregateMetrics;
use super::page_scan::PageScan;
use super::spec::{Acc, Cmp, FusedAgg, conjuncts};
use super::stream;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err, plan_err};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::physical_expr::{EquivalenceProperties, Partitioning};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PhysicalExpr,
    PlanProperties, SendableRecordBatchStream,
};
use std::fmt;
use std::sync::Arc;

/// Per input partition, one row of aggregate states (those of DataFusion's
/// partial aggregate it replaces) over the input rows where every
/// comparison of `predicate` holds. See the [module docs](super).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion_tsjoin::TsJoinContextExt;
/// let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
/// ctx.tsjoin_sql("CREATE TABLE t (a DOUBLE) AS VALUES (1.0), (2.0)").await?;
/// let batches = ctx.tsjoin_sql("SELECT count(*) FROM t WHERE a > 1.0").await?.collect().await?;
/// assert_eq!(batches[0].num_rows(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct FilterAggregateExec {
    input: Arc<dyn ExecutionPlan>,
    predicate: Arc<dyn PhysicalExpr>,
    cmps: Vec<Cmp>,
    aggs: Vec<FusedAgg>,
    schema: SchemaRef,
    /// Reads the Parquet files itself, WHERE evaluated by pages (count-only
    /// aggregates; setting `tsjoin.filter_aggregate_pages`).
    page_scan: Option<PageScan>,
    cache: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl FilterAggregateExec {
    /// `aggs` over the rows of `input` where `predicate` (a conjunction of
    /// column-vs-literal comparisons) holds; `schema` is the output (one
    /// field per aggregate).
    pub(crate) fn try_new(
        input: Arc<dyn ExecutionPlan>,
        predicate: Arc<dyn PhysicalExpr>,
        aggs: Vec<FusedAgg>,
        schema: SchemaRef,
    ) -> Result<Self> {
        let Some(cmps) = conjuncts(&predicate, &input.schema()) else {
            return plan_err!(
                "FilterAggregateExec: not a conjunction of comparisons: {predicate}"
            );
        };
        if schema.fields().len() != aggs.len() {
            return plan_err!("FilterAggregateExec: one output field per aggregate");
        }
        let n = input.output_partitioning().partition_count();
        let cache = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(n),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        let page_scan = PageScan::try_new(&input, &cmps, &aggs);
        Ok(Self {
            input,
            predicate,
            cmps,
            aggs,
            schema,
            page_scan,
            cache,
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// The same exec reading its input's batches even where it could read
    /// the Parquet files itself (`SET tsjoin.filter_aggregate_pages =
    /// false`).
    pub(crate) fn without_page_scan(mut self) -> Self {
        self.page_scan = None;
        self
    }

    /// Whether it reads the Parquet files itself (EXPLAIN: `read=pages`).
    pub fn reads_pages(&self) -> bool {
        self.page_scan.is_some()
    }

    /// The WHERE.
    pub fn predicate(&self) -> &Arc<dyn PhysicalExpr> {
        &self.predicate
    }

    /// The aggregates as text (`count_star`, `count:3`, `sum:1`, …).
    pub fn agg_codes(&self) -> Vec<String> {
        self.aggs
            .iter()
            .map(|a| match a {
                FusedAgg::CountStar => "count_star".to_string(),
                FusedAgg::Count(c) => format!("count:{c}"),
                FusedAgg::Sum(c) => format!("sum:{c}"),
                FusedAgg::Min(c) => format!("min:{c}"),
                FusedAgg::Max(c) => format!("max:{c}"),
            })
            .collect()
    }

    /// The exec from [`Self::agg_codes`].
    pub(crate) fn from_codes(
        input: Arc<dyn ExecutionPlan>,
        predicate: Arc<dyn PhysicalExpr>,
        codes: &[String],
        schema: SchemaRef,
    ) -> Result<Self> {
        let aggs = codes
            .iter()
            .map(|c| {
                let (kind, col) = c.split_once(':').unwrap_or((c.as_str(), ""));
                let col = col.parse::<usize>();
                Ok(match (kind, col) {
                    ("count_star", _) => FusedAgg::CountStar,
                    ("count", Ok(c)) => FusedAgg::Count(c),
                    ("sum", Ok(c)) => FusedAgg::Sum(c),
                    ("min", Ok(c)) => FusedAgg::Min(c),
                    ("max", Ok(c)) => FusedAgg::Max(c),
                    _ => return internal_err!("FilterAggregateExec: bad aggregate {c}"),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Self::try_new(input, predicate, aggs, schema)
    }
}

impl DisplayAs for FilterAggregateExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let names: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "FilterAggregateExec: predicate={}, aggr=[{}]{}",
                self.predicate,
                names.join(", "),
                if self.reads_pages() {
                    ", read=pages"
                } else {
                    ""
                }
            ),
            DisplayFormatType::TreeRender => {
                write!(
                    f,
                    "predicate={}\naggr=[{}]{}",
                    self.predicate,
                    names.join(", "),
                    if self.reads_pages() {
                        "\nread=pages"
                    } else {
                        ""
                    }
                )
            }
        }
    }
}

impl ExecutionPlan for FilterAggregateExec {
    fn name(&self) -> &str {
        "FilterAggregateExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        f(&self.predicate)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return internal_err!("FilterAggregateExec expects one child");
        }
        let exec = Self::try_new(
            children.swap_remove(0),
            Arc::clone(&self.predicate),
            self.aggs.clone(),
            Arc::clone(&self.schema),
        )?;
        Ok(Arc::new(if self.page_scan.is_some() {
            exec
        } else {
            exec.without_page_scan()
        }))
    }

    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        // Fresh metrics for a re-run; the states live in the streams.
        Ok(Arc::new(Self {
            input: Arc::clone(&self.input),
            predicate: Arc::clone(&self.predicate),
            cmps: self.cmps.clone(),
            aggs: self.aggs.clone(),
            schema: Arc::clone(&self.schema),
            page_scan: self.page_scan.clone(),
            cache: Arc::clone(&self.cache),
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let metrics = FilterAggregateMetrics::new(&self.metrics, partition);
        if let Some(scan) = &self.page_scan {
            let (scan, aggs, schema) =
                (scan.clone(), self.aggs.clone(), Arc::clone(&self.schema));
            let partitions = self.cache.partitioning.partition_count();
            let reservation =
                MemoryConsumer::new(format!("FilterAggregateExec[{partition}]"))
                    .register(context.memory_pool());
            let fut = async move {
                let n = scan
                    .count(partition, partitions, context, &metrics, reservation)
                    .await?;
                // Every aggregate is a count of the passing rows.
                let accs = vec![Acc::Count(n as i64); aggs.len()];
                stream::state_row(&accs, schema, &metrics)
            };
            return Ok(Box::pin(RecordBatchStreamAdapter::new(
                Arc::clone(&self.schema),
                futures::stream::once(fut),
            )));
        }
        let input = self.input.execute(partition, context)?;
        let fut = stream::fold(
            input,
            self.cmps.clone(),
            self.aggs.clone(),
            Arc::clone(&self.schema),
            metrics,
        );
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            futures::stream::once(fut),
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
