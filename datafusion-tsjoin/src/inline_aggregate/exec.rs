//! [`InlineAggregateExec`]: grouped count/sum/min/max/avg on the inline
//! two-phase design.

use super::accumulate::InlineAgg;
use super::dictionary_scan::DictionaryScan;
use super::group_keys::KeyShape;
use super::metrics::InlineAggregateMetrics;
use super::spec::AggregateSpec;
use super::stream::{Run, StreamArgs, inline_aggregate_stream};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, Distribution, ExecutionPlan,
    InputDistributionRequirements, PhysicalExpr, PlanProperties, ReplaceChildrenOptions,
    SendableRecordBatchStream, apply_expression_roots,
};
use parking_lot::Mutex;
use std::fmt;
use std::sync::Arc;

/// Grouped aggregation in one operator, in place of DataFusion's partial
/// aggregate, repartition and final aggregate.
///
/// **Phase 1**, one task per input partition: every row's group keys become
/// a dense `u32` group id and the group's row count grows (`KeyShape`
/// picks the path: direct-indexed or hashed integers, dictionary codes, or
/// DataFusion's `GroupValues`); then one tight loop per aggregate folds the
/// batch into typed per-group state vectors (`sums[gid] += v`).
/// **Phase 2**, one task per output partition: the partial tables' groups
/// are split by DataFusion's repartition hash (so the output has the same
/// hash partitioning the replaced plan had) and each output partition
/// merges its share and emits it. Memory is accounted in the session's
/// pool; over budget the query fails with a resources-exhausted error.
///
/// Over Parquet files whose integer key is dictionary-encoded, phase 1
/// reads the key's codes itself (`DictionaryScan`; setting
/// `tsjoin.inline_aggregate_dictionary_scan`).
///
/// With a fallback ([`Self::with_fallback`]: the aggregate it replaced),
/// phase 1 first probes its input and, when the groups turn out many, runs
/// that plan instead over the same rows (see `fallback.rs`).
///
/// Made by [`super::InlineAggregateRule`]; EXPLAIN shows
/// `InlineAggregateExec: gby=[…], aggr=[…], keys=int|dictionary|composite|general`,
/// plus `, scan=parquet codes` when phase 1 may read the codes and
/// `, fallback=hash aggregate when groups are many` when it may fall back
/// (EXPLAIN ANALYZE: metric `fallback`, the output partitions that did).
#[derive(Debug)]
pub struct InlineAggregateExec {
    pub(crate) input: Arc<dyn ExecutionPlan>,
    /// Group expressions over the input, with their output names.
    pub(crate) group_exprs: Vec<(Arc<dyn PhysicalExpr>, String)>,
    pub(crate) aggs: Vec<InlineAgg>,
    pub(crate) schema: SchemaRef,
    pub(crate) shape: KeyShape,
    /// Phase 1 from the Parquet files' dictionary codes, when it qualifies.
    pub(crate) dictionary: Option<DictionaryScan>,
    /// Setting `tsjoin.inline_aggregate_dictionary_scan` as the plan was
    /// made: whether `dictionary` may be used when the input qualifies.
    pub(crate) dictionary_scan: bool,
    /// The replaced aggregate, run instead when a probe shows many groups.
    pub(crate) fallback: Option<Arc<dyn ExecutionPlan>>,
    /// The replaced aggregate, run instead (over the input read again) when
    /// the memory pool refuses the inline tables: DataFusion's aggregate
    /// spills where the inline one cannot (see `exhausted.rs`).
    pub(crate) on_exhausted: Option<Arc<dyn ExecutionPlan>>,
    /// The current execution: phase 1, started by the first output
    /// partition to run and shared by all of them.
    run: Mutex<Run>,
    /// What both phases compute, resolved when the plan is made.
    spec: Arc<AggregateSpec>,
    pub(crate) metrics: ExecutionPlanMetricsSet,
    cache: Arc<PlanProperties>,
}

impl InlineAggregateExec {
    /// An inline aggregate over `input` with the output schema and
    /// properties (partitioning) of the aggregate it replaces.
    pub(crate) fn try_new(
        input: Arc<dyn ExecutionPlan>,
        group_exprs: Vec<(Arc<dyn PhysicalExpr>, String)>,
        aggs: Vec<InlineAgg>,
        properties: Arc<PlanProperties>,
    ) -> Result<Self> {
        let types = group_exprs
            .iter()
            .map(|(e, _)| e.data_type(&input.schema()))
            .collect::<Result<Vec<_>>>()?;
        let schema = Arc::clone(properties.eq_properties.schema());
        if schema.fields().len() != group_exprs.len() + aggs.len() {
            return internal_err!(
                "InlineAggregateExec: schema does not match keys and aggregates"
            );
        }
        let dictionary = DictionaryScan::try_new(&input, &group_exprs, &aggs);
        // One string key takes its own shape only where its codes are read.
        let shape = match &dictionary {
            Some(_) => KeyShape::of_codes(&types),
            None => KeyShape::of(&types),
        };
        let spec = Arc::new(AggregateSpec::try_new(
            &group_exprs,
            (types, shape),
            &aggs,
            &input.schema(),
            properties.output_partitioning().partition_count(),
        )?);
        Ok(Self {
            spec,
            dictionary,
            dictionary_scan: true,
            fallback: None,
            on_exhausted: None,
            input,
            group_exprs,
            aggs,
            schema,
            shape,
            run: Mutex::new(Run::default()),
            metrics: ExecutionPlanMetricsSet::new(),
            cache: properties,
        })
    }

    /// This operator, running `template` (the aggregate it replaces, over
    /// the same input) instead when phase 1's probe shows many groups.
    /// Ignored unless the keys are `composite` (EXPLAIN `keys=composite`),
    /// the shape whose winning depends on the data, or `string`, which runs
    /// `template` whenever the dictionary scan does not take over.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
    /// use datafusion_tsjoin::TsJoinContextExt;
    /// let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
    /// ctx.tsjoin_sql("CREATE TABLE t (a INT, b VARCHAR, v DOUBLE) AS VALUES (1, 'x', 2.0), (1, 'y', 3.0)").await?;
    /// let plan = ctx.tsjoin_sql("EXPLAIN SELECT a, b, sum(v) FROM t GROUP BY a, b").await?.collect().await?;
    /// let text = datafusion::arrow::util::pretty::pretty_format_batches(&plan)?.to_string();
    /// assert!(text.contains("keys=composite, fallback=hash aggregate when groups are many"));
    /// # Ok(()) }
    /// ```
    pub fn with_fallback(mut self, template: Arc<dyn ExecutionPlan>) -> Self {
        if matches!(self.shape, KeyShape::Composite | KeyShape::String)
            && template.schema() == self.schema
        {
            self.fallback = Some(template);
        }
        self
    }

    /// This operator, running `template` (the aggregate it replaces, over
    /// the same input) instead when the memory pool refuses its tables:
    /// the inline state is dropped and `template`, whose hash aggregate
    /// spills to disk, reads the input again. Any key shape; ignored when
    /// the schemas differ. Without it, over budget is a `Resources
    /// exhausted` error.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
    /// use datafusion::execution::{SessionStateBuilder, runtime_env::RuntimeEnvBuilder};
    /// use datafusion::prelude::{SessionConfig, SessionContext};
    /// use datafusion_tsjoin::{TsJoinContextExt, TsJoinSessionStateBuilderExt};
    /// let runtime = RuntimeEnvBuilder::new().with_memory_limit(16 << 20, 1.0).build_arc()?;
    /// let state = SessionStateBuilder::new()
    ///     .with_config(SessionConfig::new().with_target_partitions(2))
    ///     .with_runtime_env(runtime)
    ///     .with_default_features()
    ///     .with_tsjoin()
    ///     .build();
    /// let ctx = SessionContext::new_with_state(state);
    /// ctx.tsjoin_sql("CREATE TABLE t AS SELECT value AS k FROM generate_series(1, 400000)").await?;
    /// // 400,000 groups do not fit in 16 MB inline: DataFusion's aggregate spills.
    /// let sql = "SELECT k, count(*) FROM t GROUP BY k";
    /// let rows: usize = ctx.tsjoin_sql(sql).await?.collect().await?.iter().map(|b| b.num_rows()).sum();
    /// assert_eq!(rows, 400_000);
    /// # Ok(()) }
    /// ```
    pub fn with_memory_fallback(mut self, template: Arc<dyn ExecutionPlan>) -> Self {
        if template.schema() == self.schema {
            self.on_exhausted = Some(template);
        }
        self
    }

    /// This operator with phase 1 reading Parquet dictionary codes
    /// (`DictionaryScan`) only if `enabled` (setting
    /// `tsjoin.inline_aggregate_dictionary_scan`, read when the plan is made
    /// so that EXPLAIN shows what will run).
    pub fn with_dictionary_scan(mut self, enabled: bool) -> Self {
        self.dictionary_scan = enabled;
        if !enabled {
            self.dictionary = None;
        }
        self
    }

    /// A new instance with the same configuration over `input`, with fresh
    /// execution state (phase 1, metrics) and the given properties.
    fn fresh(
        &self,
        input: Arc<dyn ExecutionPlan>,
        cache: Arc<PlanProperties>,
        dictionary: Option<DictionaryScan>,
    ) -> Self {
        Self {
            input,
            group_exprs: self.group_exprs.clone(),
            aggs: self.aggs.clone(),
            schema: Arc::clone(&self.schema),
            shape: self.shape,
            dictionary,
            dictionary_scan: self.dictionary_scan,
            fallback: self.fallback.clone(),
            on_exhausted: self.on_exhausted.clone(),
            run: Mutex::new(Run::default()),
            spec: Arc::clone(&self.spec),
            metrics: ExecutionPlanMetricsSet::new(),
            cache,
        }
    }

    /// The aggregate run instead when the groups turn out many, if any.
    pub fn fallback(&self) -> Option<&Arc<dyn ExecutionPlan>> {
        self.fallback.as_ref()
    }

    /// The input.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// EXPLAIN's note of the filters the dictionary scan took over:
    /// ` (NULL k skipped; filter p)`, or nothing.
    fn scan_note(&self, scan: &DictionaryScan) -> String {
        let keys: Vec<&str> = scan
            .non_null_keys()
            .iter()
            .map(|&k| self.group_exprs[k].1.as_str())
            .collect();
        let mut notes = vec![];
        if !keys.is_empty() {
            notes.push(format!("NULL {} skipped", keys.join(", ")));
        }
        if let Some(filter) = scan.filter() {
            notes.push(format!("filter {filter}"));
        }
        match notes.is_empty() {
            true => String::new(),
            false => format!(" ({})", notes.join("; ")),
        }
    }

    /// EXPLAIN's note of when the fallback plan runs.
    fn fallback_when(&self) -> &'static str {
        match self.shape {
            KeyShape::String => "when the files' codes are not read",
            _ => "when groups are many",
        }
    }
}

impl DisplayAs for InlineAggregateExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let gby: Vec<String> = self
            .group_exprs
            .iter()
            .map(|(e, name)| format!("{e} as {name}"))
            .collect();
        let aggr: Vec<&str> = self.aggs.iter().map(|a| a.field.name().as_str()).collect();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "InlineAggregateExec: gby=[{}], aggr=[{}], keys={}",
                    gby.join(", "),
                    aggr.join(", "),
                    self.shape.name()
                )?;
                if let Some(d) = &self.dictionary {
                    write!(f, ", scan=parquet codes{}", self.scan_note(d))?;
                }
                if let Some(template) = &self.fallback {
                    let name = fallback_name(template);
                    write!(f, ", fallback={name} {}", self.fallback_when())?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "gby=[{}]", gby.join(", "))?;
                writeln!(f, "aggr=[{}]", aggr.join(", "))?;
                write!(f, "keys={}", self.shape.name())?;
                if let Some(d) = &self.dictionary {
                    write!(f, "\nscan=parquet codes{}", self.scan_note(d))?;
                }
                if let Some(template) = &self.fallback {
                    let name = fallback_name(template);
                    write!(f, "\nfallback={name} {}", self.fallback_when())?;
                }
                Ok(())
            }
        }
    }
}

impl ExecutionPlan for InlineAggregateExec {
    fn name(&self) -> &str {
        "InlineAggregateExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        // Phase 1 reads every input partition and phase 2 partitions the
        // groups itself: any input distribution will do.
        InputDistributionRequirements::new(vec![Distribution::UnspecifiedDistribution])
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![true]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        let keys = self.group_exprs.iter().map(|(e, _)| e);
        let args = self.aggs.iter().filter_map(|a| a.arg.as_ref());
        apply_expression_roots(keys.chain(args), f)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [input]: [Arc<dyn ExecutionPlan>; 1] = match children.try_into() {
            Ok(c) => c,
            Err(_) => return internal_err!("InlineAggregateExec expects one child"),
        };
        if options.children_properties == ChildrenPropertiesMode::Keep {
            let dictionary = self
                .dictionary_scan
                .then(|| DictionaryScan::try_new(&input, &self.group_exprs, &self.aggs))
                .flatten();
            return Ok(Arc::new(self.fresh(
                input,
                Arc::clone(&self.cache),
                dictionary,
            )));
        }
        // The fallback replays this operator's input: it stays while the
        // new input has the same schema.
        let same = input.schema() == self.input.schema();
        let exec = Self::try_new(
            input,
            self.group_exprs.clone(),
            self.aggs.clone(),
            Arc::clone(&self.cache),
        )?
        .with_dictionary_scan(self.dictionary_scan);
        let exec = match self.on_exhausted.as_ref().filter(|_| same) {
            Some(t) => exec.with_memory_fallback(Arc::clone(t)),
            None => exec,
        };
        Ok(Arc::new(match self.fallback.as_ref().filter(|_| same) {
            Some(t) => exec.with_fallback(Arc::clone(t)),
            None => exec,
        }))
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )
    }

    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        let input = Arc::clone(&self.input);
        Ok(Arc::new(self.fresh(
            input,
            Arc::clone(&self.cache),
            self.dictionary.clone(),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let n = self.cache.output_partitioning().partition_count();
        if partition >= n {
            return internal_err!(
                "InlineAggregateExec: partition {partition} out of range ({n} partitions)"
            );
        }
        let phase1 = self.run.lock().join(partition, n);
        Ok(inline_aggregate_stream(StreamArgs {
            input: Arc::clone(&self.input),
            spec: Arc::clone(&self.spec),
            schema: Arc::clone(&self.schema),
            dictionary: self.dictionary.clone(),
            fallback: self.fallback.clone(),
            on_exhausted: self.on_exhausted.clone(),
            phase1,
            metrics_set: self.metrics.clone(),
            metrics: InlineAggregateMetrics::new(&self.metrics, partition),
            partition,
            context,
        }))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// How EXPLAIN names a fallback plan: DataFusion's two-phase hash aggregate,
/// or one aggregate per partition when the input's partitions hold disjoint
/// time ranges of a bucket key (`time_disjoint.rs`).
fn fallback_name(template: &Arc<dyn ExecutionPlan>) -> &'static str {
    if template.is::<AggregateExec>() {
        "hash aggregate"
    } else {
        "hash aggregate per partition (time ranges disjoint)"
    }
}
