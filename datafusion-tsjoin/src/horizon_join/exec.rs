//! [`HorizonJoinExec`]: the physical HORIZON JOIN operator.

use super::columns::OutputColumns;
use super::fold::OffsetFold;
use super::metrics::HorizonJoinMetrics;
use super::spec::HorizonJoinSpec;
use super::stream::{SharedState, StreamArgs, horizon_join_stream};
use crate::temporal::{
    JoinDistribution, KeyedRight, TemporalDistribution, combined_projection,
    projected_properties, projection_text,
};
use crate::window_join::{TimeScale, timestamp_unit};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err, plan_err};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, Partitioning};
use datafusion::physical_plan::execution_plan::InvariantLevel;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::projection::{
    EmbeddedProjection, ProjectionExec, try_embed_projection,
};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, InputDistributionRequirements,
    PhysicalExpr, PlanProperties, SendableRecordBatchStream, apply_expression_roots,
};
use std::fmt;
use std::sync::Arc;

/// Physical HORIZON JOIN.
///
/// Every right input (all partitions, in parallel) is drained once into a
/// shared time-ordered [`Timeline`](crate::temporal) (sorted only if it did
/// not arrive in time order) with its per-key index. Each left partition
/// then streams: for every left row and offset it looks up each right table
/// at `left time + offset` by a galloping finger per (key group, offset) in
/// that index, so on time-ordered input each lookup moves a few rows, and
/// any left order is answered. Output, in
/// left order with a row's offsets consecutive: left columns, each right
/// table's columns (NULL without a match), `offset` (BIGINT, left unit) and
/// `timestamp` (left time + offset). An embedded projection (see
/// [`with_projection`](Self::with_projection), placed by DataFusion's
/// projection push-down) keeps only some of these columns: the operator
/// then neither gathers the others nor matches a right table none of whose
/// columns is kept.
///
/// In [`JoinDistribution::Partitioned`] mode (see
/// [`with_distribution`](Self::with_distribution)) every input is
/// hash-partitioned on the keys (which every right table must share on the
/// left side) and partition `p` builds its timelines from right partitions
/// `p` only.
///
/// ```ignore
/// let exec = HorizonJoinExec::try_new(left, vec![right], Arc::new(spec), "h".into())?;
/// ```
#[derive(Debug)]
pub struct HorizonJoinExec {
    left: Arc<dyn ExecutionPlan>,
    rights: Vec<Arc<dyn ExecutionPlan>>,
    spec: Arc<HorizonJoinSpec>,
    alias: String,
    /// The offsets in left ticks.
    offsets: Arc<Vec<i64>>,
    /// Every column the join can emit: left, each right table's, `offset`,
    /// `timestamp`.
    join_schema: SchemaRef,
    /// The columns emitted, as indices into `join_schema`; `None`: all.
    projection: Option<Arc<[usize]>>,
    /// Aggregates folded per offset (see [`OffsetFold`]): the operator then
    /// emits their rows instead of the pairs.
    fold: Option<Arc<OffsetFold>>,
    /// What the operator emits: `join_schema` under `projection`, or the
    /// fold's rows.
    schema: SchemaRef,
    /// The mode, hash keys (partitioned: the left ones, and each right
    /// table's) and the built right sides: one slot when broadcast, one
    /// per partition when partitioned.
    distribution: TemporalDistribution<Arc<SharedState>>,
    metrics: ExecutionPlanMetricsSet,
    cache: Arc<PlanProperties>,
}

impl HorizonJoinExec {
    /// Creates the operator; each right's `scale` must be the units of its
    /// times, and the offsets must pass QuestDB's rules.
    pub fn try_new(
        left: Arc<dyn ExecutionPlan>,
        rights: Vec<Arc<dyn ExecutionPlan>>,
        spec: Arc<HorizonJoinSpec>,
        alias: String,
    ) -> Result<Self> {
        if rights.is_empty() || rights.len() != spec.rights.len() {
            return plan_err!(
                "HorizonJoinExec: {} right inputs for {} right specs",
                rights.len(),
                spec.rights.len()
            );
        }
        let ls = left.schema();
        let left_type = spec.left_ts.data_type(&ls)?;
        let left_unit = timestamp_unit("left timestamp", &left_type)?;
        for (r, input) in spec.rights.iter().zip(&rights) {
            let rs = input.schema();
            let actual = TimeScale::new(
                left_unit,
                timestamp_unit("right timestamp", &r.right_ts.data_type(&rs)?)?,
            );
            if actual != r.scale {
                return plan_err!(
                    "HorizonJoinExec: the spec's time scale {:?} does not match its timestamps' {actual:?}",
                    r.scale
                );
            }
            check_keys(&r.left_keys, &r.right_keys, &ls, &rs)?;
        }
        let left_nanos = TimeScale::new(left_unit, left_unit).common_nanos();
        let offsets = Arc::new(spec.offsets.ticks(left_nanos)?);
        let mut fields: Vec<FieldRef> = ls.fields().iter().cloned().collect();
        for r in &rights {
            fields.extend(
                r.schema()
                    .fields()
                    .iter()
                    .map(|f| Arc::new(Field::clone(f).with_nullable(true))),
            );
        }
        fields.push(Arc::new(Field::new("offset", DataType::Int64, false)));
        fields.push(Arc::new(Field::new("timestamp", left_type, true)));
        let schema = Arc::new(Schema::new_with_metadata(fields, ls.metadata().clone()));
        let cache = Arc::new(crate::temporal::left_preserving_properties(&left, &schema));
        Ok(Self {
            left,
            rights,
            spec,
            alias,
            offsets,
            join_schema: Arc::clone(&schema),
            projection: None,
            fold: None,
            schema,
            distribution: TemporalDistribution::broadcast(|_| Arc::default()),
            metrics: ExecutionPlanMetricsSet::new(),
            cache,
        })
    }

    /// The operator emitting only the columns `projection` names (indices
    /// into its current output; `None` keeps them as they are). The rows
    /// are the same: every (left row, offset) pair, even with no column.
    ///
    /// ```ignore
    /// // Only the third left column and `offset` (of 2 left + 2 right columns).
    /// let exec = exec.with_projection(Some(vec![1, 4]))?;
    /// ```
    pub fn with_projection(&self, projection: Option<Vec<usize>>) -> Result<Self> {
        if self.fold.is_some() {
            return plan_err!(
                "HorizonJoinExec: a folding join emits no pairs to project"
            );
        }
        let Some(projection) = projection else {
            return self.rebuilt(self.projection.clone(), None);
        };
        let combined = combined_projection(
            "HorizonJoinExec",
            self.projection.as_deref(),
            projection,
            self.schema.fields().len(),
        )?;
        self.rebuilt(Some(combined), None)
    }

    /// The embedded projection: indices into the join's full output (left
    /// columns, each right table's, `offset`, `timestamp`).
    pub fn projection(&self) -> Option<&[usize]> {
        self.projection.as_deref()
    }

    /// The aggregates folded per offset, if any.
    pub fn fold(&self) -> Option<&Arc<OffsetFold>> {
        self.fold.as_ref()
    }

    /// Where `offset` is among the pairs' columns (after the projection);
    /// `None` when projected away.
    pub fn offset_column(&self) -> Option<usize> {
        let offset = self.join_schema.fields().len() - 2;
        match &self.projection {
            Some(p) => p.iter().position(|&i| i == offset),
            None => Some(offset),
        }
    }

    /// The operator aggregating its pairs per offset with `fold` (whose
    /// `pairs` schema must be this operator's output, up to names) instead
    /// of emitting them; `None` emits the pairs.
    ///
    /// ```ignore
    /// let exec = exec.with_fold(Some(Arc::new(fold)))?;
    /// ```
    pub fn with_fold(&self, fold: Option<Arc<OffsetFold>>) -> Result<Self> {
        if let Some(f) = &fold {
            let (ours, theirs) = (self.pair_schema(), &f.pairs);
            let same = ours.fields().len() == theirs.fields().len()
                && ours
                    .fields()
                    .iter()
                    .zip(theirs.fields())
                    .all(|(a, b)| a.data_type() == b.data_type());
            if !same || self.offset_column() != Some(f.key) {
                return plan_err!(
                    "HorizonJoinExec: the fold's pairs do not match the join's output"
                );
            }
        }
        self.rebuilt(self.projection.clone(), fold)
    }

    /// The pairs' schema: `join_schema` under `projection`.
    fn pair_schema(&self) -> SchemaRef {
        match &self.fold {
            Some(f) => Arc::clone(&f.pairs),
            None => Arc::clone(&self.schema),
        }
    }

    /// Applies `fold` to the schema and the plan properties: one row per
    /// offset and partition, at the end.
    fn folded(mut self, fold: Option<Arc<OffsetFold>>) -> Result<Self> {
        let Some(fold) = fold else {
            return Ok(self);
        };
        let partitions = self.cache.output_partitioning().partition_count();
        self.schema = Arc::clone(&fold.schema);
        self.cache = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&fold.schema)),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        self.fold = Some(fold);
        Ok(self)
    }

    /// A fresh operator over the same inputs, spec and distribution (no
    /// state carried) with `projection` and `fold`.
    fn rebuilt(
        &self,
        projection: Option<Arc<[usize]>>,
        fold: Option<Arc<OffsetFold>>,
    ) -> Result<Self> {
        Self::try_new(
            Arc::clone(&self.left),
            self.rights.clone(),
            Arc::clone(&self.spec),
            self.alias.clone(),
        )?
        .with_distribution(self.distribution())?
        .projected(projection)?
        .folded(fold)
    }

    /// Applies `projection` (indices into the full output) to the schema
    /// and the plan properties.
    fn projected(mut self, projection: Option<Arc<[usize]>>) -> Result<Self> {
        let Some(projection) = projection else {
            return Ok(self);
        };
        let full = self.distribution.properties(&self.left, &self.join_schema);
        let (schema, props) =
            projected_properties(&full, &self.join_schema, &projection)?;
        self.cache = Arc::new(props);
        self.schema = schema;
        self.projection = Some(projection);
        Ok(self)
    }

    /// The operator in `distribution` mode. Partitioned needs every right
    /// table keyed on the same left key expressions, with common hash
    /// types; otherwise the operator stays broadcast.
    ///
    /// ```ignore
    /// let exec = HorizonJoinExec::try_new(left, vec![right], spec, "h".into())?
    ///     .with_distribution(JoinDistribution::Partitioned)?;
    /// ```
    pub fn with_distribution(mut self, distribution: JoinDistribution) -> Result<Self> {
        let rights: Vec<KeyedRight> = self
            .spec
            .rights
            .iter()
            .zip(&self.rights)
            .map(|(r, input)| KeyedRight {
                left_keys: &r.left_keys,
                right_keys: &r.right_keys,
                input,
            })
            .collect();
        self.distribution =
            TemporalDistribution::new(distribution, &self.left, &rights, |_| {
                Arc::default()
            })?;
        self.cache =
            Arc::new(self.distribution.properties(&self.left, &self.join_schema));
        let projection = self.projection.take();
        let fold = self.fold.take();
        self.schema = Arc::clone(&self.join_schema);
        self.projected(projection)?.folded(fold)
    }

    /// The mode this operator runs in.
    pub fn distribution(&self) -> JoinDistribution {
        self.distribution.mode()
    }

    /// The specification.
    pub fn spec(&self) -> &Arc<HorizonJoinSpec> {
        &self.spec
    }

    /// The pseudo-table's alias.
    pub fn alias(&self) -> &str {
        &self.alias
    }

    /// `path=…` as EXPLAIN shows it.
    fn path(&self) -> String {
        let rights: Vec<&str> = self
            .rights
            .iter()
            .zip(&self.spec.rights)
            .map(|(p, r)| {
                if crate::temporal::ordered_by(p, &r.right_ts) {
                    "known"
                } else {
                    "checked"
                }
            })
            .collect();
        let (n, order) = (self.offsets.len() * self.rights.len(), rights.join("/"));
        // The fold starts every lookup from its time's bucket; the pairs'
        // path from a finger per (key, offset) (see `crate::temporal`).
        match self.fold {
            Some(_) => {
                format!("time-bucket directory x{n} (per key, right order {order})")
            }
            None => {
                format!("finger search x{n} (per key and offset, right order {order})")
            }
        }
    }
}

impl DisplayAs for HorizonJoinExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let s = &self.spec;
        let rights: Vec<String> = s
            .rights
            .iter()
            .map(|r| {
                let on: Vec<String> = r
                    .left_keys
                    .iter()
                    .zip(&r.right_keys)
                    .map(|(l, r)| format!("({l}, {r})"))
                    .collect();
                let mut d = format!("on=[{}]", on.join(", "));
                if let Some(filter) = &r.left_filter {
                    d.push_str(&format!(", left_filter={filter}"));
                }
                format!("[{d}, ts={}]", r.right_ts)
            })
            .collect();
        let offsets = format!(
            "{} AS {} ({} offsets)",
            s.offsets,
            self.alias,
            self.offsets.len()
        );
        let mut projection = self
            .projection
            .as_ref()
            .map(|p| projection_text(&self.join_schema, p));
        if let Some(f) = &self.fold {
            let names: Vec<&str> = f.aggr.iter().map(|a| a.name()).collect();
            let fold = format!(
                "fold=[{}] by offset ({})",
                names.join(", "),
                if f.partial { "partial" } else { "single" }
            );
            projection = Some(match projection {
                Some(p) => format!("{p}, {fold}"),
                None => fold,
            });
        }
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "HorizonJoinExec: rights=[{}], ts={}, offsets={offsets}, path={}, distribution={}",
                    rights.join(", "),
                    s.left_ts,
                    self.path(),
                    self.distribution().as_str()
                )?;
                match projection {
                    Some(p) => write!(f, ", {p}"),
                    None => Ok(()),
                }
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "rights=[{}]", rights.join(", "))?;
                writeln!(f, "offsets={offsets}")?;
                writeln!(f, "path={}", self.path())?;
                write!(f, "distribution={}", self.distribution().as_str())?;
                match projection {
                    Some(p) => write!(f, "\n{p}"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl ExecutionPlan for HorizonJoinExec {
    fn name(&self) -> &str {
        "HorizonJoinExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn check_invariants(&self, check: InvariantLevel) -> Result<()> {
        self.distribution.check_invariants(self, check)
    }

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        self.distribution.input_requirements(1 + self.rights.len())
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        let mut v = vec![self.fold.is_none()];
        v.extend(self.rights.iter().map(|_| false));
        v
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        self.distribution
            .benefits_from_input_partitioning(1 + self.rights.len())
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        std::iter::once(&self.left).chain(&self.rights).collect()
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        apply_expression_roots(self.spec.all_exprs(), f)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 + self.rights.len() {
            return internal_err!(
                "HorizonJoinExec expects {} children",
                1 + self.rights.len()
            );
        }
        let rights = children.split_off(1);
        Ok(Arc::new(
            Self::try_new(
                children.pop().unwrap(),
                rights,
                Arc::clone(&self.spec),
                self.alias.clone(),
            )?
            .with_distribution(self.distribution())?
            .projected(self.projection.clone())?
            .folded(self.fold.clone())?,
        ))
    }

    /// A new instance whose timelines are built again on the next execution.
    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(
            self.rebuilt(self.projection.clone(), self.fold.clone())?,
        ))
    }

    /// Embeds a projection of columns above the join, so the pairs carry
    /// only the columns read above (DataFusion's projection push-down).
    fn try_swapping_with_projection(
        &self,
        projection: &ProjectionExec,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        if self.fold.is_some() {
            return Ok(None);
        }
        try_embed_projection(projection, self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let (shared, rights) = self.distribution.for_partition(
            "HorizonJoinExec",
            &self.left,
            partition,
            &self.rights,
        )?;
        Ok(horizon_join_stream(StreamArgs {
            left: self.left.execute(partition, Arc::clone(&context))?,
            rights,
            spec: Arc::clone(&self.spec),
            offsets: Arc::clone(&self.offsets),
            schema: Arc::clone(&self.schema),
            columns: OutputColumns::new(
                self.left.schema().fields().len(),
                self.rights.iter().map(|r| r.schema().fields().len()),
                self.projection.as_deref(),
            ),
            fold: self.fold.clone(),
            shared: Arc::clone(shared),
            metrics: HorizonJoinMetrics::new(&self.metrics, partition),
            context,
        }))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

impl EmbeddedProjection for HorizonJoinExec {
    fn with_projection(&self, projection: Option<Vec<usize>>) -> Result<Self> {
        HorizonJoinExec::with_projection(self, projection)
    }
}

/// Left and right keys pair up: as many on each side, and a string key only
/// against a string key (a plan decoded from proto is not checked
/// elsewhere).
fn check_keys(
    left_keys: &[Arc<dyn PhysicalExpr>],
    right_keys: &[Arc<dyn PhysicalExpr>],
    left: &Schema,
    right: &Schema,
) -> Result<()> {
    if left_keys.len() != right_keys.len() {
        return plan_err!(
            "HorizonJoinExec: {} left keys but {} right keys",
            left_keys.len(),
            right_keys.len()
        );
    }
    let is_string = |t: &DataType| match t {
        DataType::Dictionary(_, v) => v.is_string(),
        t => t.is_string(),
    };
    for (l, r) in left_keys.iter().zip(right_keys) {
        let (lt, rt) = (l.data_type(left)?, r.data_type(right)?);
        if is_string(&lt) != is_string(&rt) {
            return plan_err!("join column type mismatch: {lt} and {rt}");
        }
    }
    Ok(())
}
