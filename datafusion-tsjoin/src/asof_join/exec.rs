//! [`AsofJoinExec`]: the physical ASOF / LT JOIN operator.

use super::metrics::AsofJoinMetrics;
use super::spec::{AsofDirection, AsofJoinSpec, emits_unmatched_right};
use super::stream::{SharedState, StreamArgs, asof_join_stream};
use crate::temporal::{
    JoinDistribution, KeyedRight, TemporalDistribution, combined_projection,
    projected_properties, projection_text,
};
use crate::window_join::{TimeScale, timestamp_unit};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{JoinType, Result, internal_err, plan_err};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_plan::execution_plan::InvariantLevel;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::projection::{
    EmbeddedProjection, ProjectionExec, try_embed_projection,
};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties,
    InputDistributionRequirements, Partitioning, PhysicalExpr, PlanProperties,
    SendableRecordBatchStream, apply_expression_roots,
};
use std::fmt;
use std::sync::Arc;

/// Physical ASOF JOIN.
///
/// The right input (all partitions, in parallel) is drained once into a
/// shared time-ordered timeline (sorted only if it did not arrive in time
/// order). Each left partition then streams: a batch whose times do not
/// decrease (and continue the previous one's) is matched by a streaming
/// merge that keeps the latest right row per key; other batches, and the
/// forward directions, by binary search in a per-key index built on first
/// need. Output: left columns then right columns, one row per left row, in
/// left order; partitioning and ordering are the left input's. An embedded
/// projection (see [`with_projection`](Self::with_projection), placed by
/// DataFusion's projection push-down) keeps only some of these columns:
/// the right columns it drops are never gathered, nor copied into the
/// timeline.
///
/// In [`JoinDistribution::Partitioned`] mode (see
/// [`with_distribution`](Self::with_distribution)) both inputs are
/// hash-partitioned on the keys and partition `p` builds its own timeline
/// of right partition `p`.
#[derive(Debug)]
pub struct AsofJoinExec {
    left: Arc<dyn ExecutionPlan>,
    right: Arc<dyn ExecutionPlan>,
    spec: Arc<AsofJoinSpec>,
    /// Left columns then right columns: the output before `projection`.
    join_schema: SchemaRef,
    /// Indices into `join_schema` of the columns emitted; `None`: all.
    projection: Option<Arc<[usize]>>,
    /// What the operator emits: `join_schema` under `projection`.
    schema: SchemaRef,
    /// The mode, hash keys and the built right side: one slot when
    /// broadcast, one per partition when partitioned.
    distribution: TemporalDistribution<Arc<SharedState>>,
    metrics: ExecutionPlanMetricsSet,
    cache: Arc<PlanProperties>,
}

impl AsofJoinExec {
    /// Creates the operator; `spec.scale` must be the units of its times.
    pub fn try_new(
        left: Arc<dyn ExecutionPlan>,
        right: Arc<dyn ExecutionPlan>,
        spec: Arc<AsofJoinSpec>,
    ) -> Result<Self> {
        let actual = TimeScale::new(
            timestamp_unit("left timestamp", &spec.left_ts.data_type(&left.schema())?)?,
            timestamp_unit(
                "right timestamp",
                &spec.right_ts.data_type(&right.schema())?,
            )?,
        );
        if actual != spec.scale {
            return plan_err!(
                "AsofJoinExec: the spec's time scale {:?} does not match its timestamps' {actual:?}",
                spec.scale
            );
        }
        check_keys(&spec, &left.schema(), &right.schema())?;
        // Right and Full emit right rows without a left one.
        let left_nullable = emits_unmatched_right(spec.join_type);
        let mut fields: Vec<FieldRef> = left
            .schema()
            .fields()
            .iter()
            .map(|f| match left_nullable {
                true => Arc::new(Field::clone(f).with_nullable(true)),
                false => Arc::clone(f),
            })
            .collect();
        fields.extend(
            right
                .schema()
                .fields()
                .iter()
                .map(|f| Arc::new(Field::clone(f).with_nullable(true))),
        );
        let schema = Arc::new(Schema::new_with_metadata(
            fields,
            left.schema().metadata().clone(),
        ));
        let cache = Arc::new(right_rows_unordered(
            crate::temporal::left_preserving_properties(&left, &schema),
            &schema,
            spec.join_type,
        ));
        Ok(Self {
            left,
            right,
            spec,
            join_schema: Arc::clone(&schema),
            projection: None,
            schema,
            distribution: TemporalDistribution::broadcast(|_| Arc::default()),
            metrics: ExecutionPlanMetricsSet::new(),
            cache,
        })
    }

    /// The operator in `distribution` mode. Partitioned needs equality keys
    /// with a common hash type; without them the operator stays broadcast.
    ///
    /// ```ignore
    /// let exec = AsofJoinExec::try_new(left, right, spec)?
    ///     .with_distribution(JoinDistribution::Partitioned)?;
    /// ```
    pub fn with_distribution(mut self, distribution: JoinDistribution) -> Result<Self> {
        let right = KeyedRight {
            left_keys: &self.spec.left_keys,
            right_keys: &self.spec.right_keys,
            input: &self.right,
        };
        self.distribution =
            TemporalDistribution::new(distribution, &self.left, &[right], |_| {
                Arc::default()
            })?;
        self.cache = Arc::new(self.full_properties());
        self.schema = Arc::clone(&self.join_schema);
        let projection = self.projection.take();
        self.projected(projection)
    }

    /// The operator emitting only the columns `projection` names (indices
    /// into its current output; `None` keeps them as they are). The rows
    /// are the same: one per left row, even with no column.
    ///
    /// ```ignore
    /// // Only the right side's third column (of 2 left + 3 right columns).
    /// let exec = exec.with_projection(Some(vec![4]))?;
    /// ```
    pub fn with_projection(&self, projection: Option<Vec<usize>>) -> Result<Self> {
        let Some(projection) = projection else {
            return self.rebuilt(self.projection.clone());
        };
        let combined = combined_projection(
            "AsofJoinExec",
            self.projection.as_deref(),
            projection,
            self.schema.fields().len(),
        )?;
        self.rebuilt(Some(combined))
    }

    /// The properties of the join's full output in its distribution.
    fn full_properties(&self) -> PlanProperties {
        right_rows_unordered(
            self.distribution.properties(&self.left, &self.join_schema),
            &self.join_schema,
            self.spec.join_type,
        )
    }

    /// The embedded projection: indices into the join's full output (left
    /// columns, then right columns).
    pub fn projection(&self) -> Option<&[usize]> {
        self.projection.as_deref()
    }

    /// A fresh operator over the same inputs, spec and distribution (no
    /// state carried) with `projection`.
    fn rebuilt(&self, projection: Option<Arc<[usize]>>) -> Result<Self> {
        Self::try_new(
            Arc::clone(&self.left),
            Arc::clone(&self.right),
            Arc::clone(&self.spec),
        )?
        .with_distribution(self.distribution())?
        .projected(projection)
    }

    /// Applies `projection` (indices into the full output) to the schema
    /// and the plan properties.
    fn projected(mut self, projection: Option<Arc<[usize]>>) -> Result<Self> {
        let Some(projection) = projection else {
            return Ok(self);
        };
        let full = self.full_properties();
        let (schema, props) =
            projected_properties(&full, &self.join_schema, &projection)?;
        self.cache = Arc::new(props);
        self.schema = schema;
        self.projection = Some(projection);
        Ok(self)
    }

    /// The right columns the output reads (indices into the right schema),
    /// in order; every one without a projection.
    fn right_columns(&self) -> Vec<usize> {
        let left = self.left.schema().fields().len();
        match &self.projection {
            None => (0..self.right.schema().fields().len()).collect(),
            Some(p) => {
                // The pair filter reads right columns of the candidates too.
                let read = self
                    .spec
                    .pair_filter
                    .iter()
                    .flat_map(|f| collect_columns(f).into_iter().map(|c| c.index()));
                let mut cols: Vec<usize> = p
                    .iter()
                    .copied()
                    .chain(read)
                    .filter(|&i| i >= left)
                    .map(|i| i - left)
                    .collect();
                cols.sort_unstable();
                cols.dedup();
                cols
            }
        }
    }

    /// The mode this operator runs in.
    pub fn distribution(&self) -> JoinDistribution {
        self.distribution.mode()
    }

    /// The specification.
    pub fn spec(&self) -> &Arc<AsofJoinSpec> {
        &self.spec
    }

    /// `path=…` as EXPLAIN shows it.
    fn path(&self) -> String {
        if self.spec.matching.direction == AsofDirection::Forward {
            return "index".to_string();
        }
        if self.spec.pair_filter.is_some() {
            return "index (candidates tried in rounds under the pair filter)"
                .to_string();
        }
        let known = |p: &Arc<dyn ExecutionPlan>, ts| {
            if crate::temporal::ordered_by(p, ts) {
                "known"
            } else {
                "checked"
            }
        };
        format!(
            "merge (left order {}, right order {}), index for unordered batches",
            known(&self.left, &self.spec.left_ts),
            known(&self.right, &self.spec.right_ts)
        )
    }
}

impl DisplayAs for AsofJoinExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let s = &self.spec;
        let on: Vec<String> = s
            .left_keys
            .iter()
            .zip(&s.right_keys)
            .map(|(l, r)| format!("({l}, {r})"))
            .collect();
        let tolerance = s.tolerance.map_or("none".to_string(), |t| t.to_string());
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "AsofJoinExec: on=[{}]", on.join(", "))?;
                if let Some(filter) = &s.left_filter {
                    write!(f, ", left_filter={filter}")?;
                }
                if let Some(filter) = &s.pair_filter {
                    write!(f, ", pair_filter={filter}")?;
                }
                write!(
                    f,
                    ", ts=[{}, {}], match={}, tolerance={tolerance}, path={}, distribution={}",
                    s.left_ts,
                    s.right_ts,
                    s.matching,
                    self.path(),
                    self.distribution().as_str()
                )?;
                if s.join_type != JoinType::Left {
                    write!(f, ", join_type={}", s.join_type)?;
                }
                match &self.projection {
                    Some(p) => write!(f, ", {}", projection_text(&self.join_schema, p)),
                    None => Ok(()),
                }
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "on=[{}]", on.join(", "))?;
                writeln!(f, "match={}", s.matching)?;
                writeln!(f, "tolerance={tolerance}")?;
                if s.join_type != JoinType::Left {
                    writeln!(f, "join_type={}", s.join_type)?;
                }
                writeln!(f, "path={}", self.path())?;
                write!(f, "distribution={}", self.distribution().as_str())
            }
        }
    }
}

impl ExecutionPlan for AsofJoinExec {
    fn name(&self) -> &str {
        "AsofJoinExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn check_invariants(&self, check: InvariantLevel) -> Result<()> {
        self.distribution.check_invariants(self, check)
    }

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        self.distribution.input_requirements(2)
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true, false]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        self.distribution.benefits_from_input_partitioning(2)
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.left, &self.right]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        apply_expression_roots(self.spec.all_exprs(), f)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [left, right]: [Arc<dyn ExecutionPlan>; 2] = match children.try_into() {
            Ok(c) => c,
            Err(_) => return internal_err!("AsofJoinExec expects two children"),
        };
        Ok(Arc::new(
            Self::try_new(left, right, Arc::clone(&self.spec))?
                .with_distribution(self.distribution())?
                .projected(self.projection.clone())?,
        ))
    }

    /// A new instance whose timeline is built again on the next execution.
    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(self.rebuilt(self.projection.clone())?))
    }

    fn try_swapping_with_projection(
        &self,
        projection: &ProjectionExec,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        try_embed_projection(projection, self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let (shared, mut rights) = self.distribution.for_partition(
            "AsofJoinExec",
            &self.left,
            partition,
            std::slice::from_ref(&self.right),
        )?;
        Ok(asof_join_stream(StreamArgs {
            left: self.left.execute(partition, Arc::clone(&context))?,
            right: rights.remove(0),
            spec: Arc::clone(&self.spec),
            schema: Arc::clone(&self.schema),
            projection: self.projection.clone(),
            right_columns: self.right_columns(),
            shared: Arc::clone(shared),
            sharers: match self.distribution.mode() {
                JoinDistribution::Broadcast => {
                    self.left.output_partitioning().partition_count()
                }
                JoinDistribution::Partitioned => 1,
            },
            metrics: AsofJoinMetrics::new(&self.metrics, partition),
            context,
        }))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

impl EmbeddedProjection for AsofJoinExec {
    fn with_projection(&self, projection: Option<Vec<usize>>) -> Result<Self> {
        AsofJoinExec::with_projection(self, projection)
    }
}

/// `props` of a join that follows the left input, for `join_type`: a Right
/// or Full join emits the right rows nothing matched after the left ones,
/// with NULL left columns, so neither the left's order nor its hash
/// partitioning holds.
fn right_rows_unordered(
    props: PlanProperties,
    schema: &SchemaRef,
    join_type: JoinType,
) -> PlanProperties {
    if !emits_unmatched_right(join_type) {
        return props;
    }
    let n = props.output_partitioning().partition_count();
    PlanProperties::new(
        EquivalenceProperties::new(Arc::clone(schema)),
        Partitioning::UnknownPartitioning(n),
        props.emission_type,
        props.boundedness,
    )
}

/// Left and right keys pair up: as many on each side, and a string key only
/// against a string key (the key index compares strings as strings and
/// casts other types; a plan decoded from proto is not checked elsewhere).
fn check_keys(spec: &AsofJoinSpec, left: &Schema, right: &Schema) -> Result<()> {
    if spec.left_keys.len() != spec.right_keys.len() {
        return plan_err!(
            "AsofJoinExec: {} left keys but {} right keys",
            spec.left_keys.len(),
            spec.right_keys.len()
        );
    }
    let is_string = |t: &DataType| match t {
        DataType::Dictionary(_, v) => v.is_string(),
        t => t.is_string(),
    };
    for (l, r) in spec.left_keys.iter().zip(&spec.right_keys) {
        let (lt, rt) = (l.data_type(left)?, r.data_type(right)?);
        if is_string(&lt) != is_string(&rt) {
            return plan_err!("join column type mismatch: {lt} and {rt}");
        }
    }
    Ok(())
}
