//! How a temporal join (WINDOW, ASOF, HORIZON JOIN) spreads its inputs over
//! partitions: [`JoinDistribution::Broadcast`] (every left partition joins
//! the whole right side, read once into one shared index) or
//! [`JoinDistribution::Partitioned`] (both sides hash-partitioned on the
//! equality keys, as `HashJoinExec`'s Partitioned mode: partition `p` joins
//! left partition `p` against an index of right partition `p` only).
//!
//! ```text
//! Broadcast:    left p ──▶ join ◀── index(right, all partitions)   (one, shared)
//! Partitioned:  left p ──▶ join ◀── index(right partition p)       (one per partition)
//!               both inputs: RepartitionExec Hash(keys), inserted by EnforceDistribution
//! ```
//!
//! Partitioned is correct because every per-key answer (the window, the
//! prevailing row, the ASOF match) depends only on right rows of the same
//! key, and equal keys hash to the same partition on both sides: the key
//! expressions are hashed in one common type ([`hash_keys`]), and NULL keys
//! (which match each other) all hash alike.

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::config::{ConfigField, Visit};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err, plan_err};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::binary::comparison_coercion;
use datafusion::physical_expr::expressions::CastExpr;
use datafusion::physical_expr::{EquivalenceProperties, Partitioning};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, ExecutionPlanProperties,
    InputDistributionRequirements, PhysicalExpr, PlanProperties,
    SendableRecordBatchStream,
};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// How a temporal join operator distributes its inputs (EXPLAIN:
/// `distribution=broadcast|partitioned`).
///
/// ```
/// use datafusion_tsjoin::window_join::JoinDistribution;
/// assert_eq!(JoinDistribution::default(), JoinDistribution::Broadcast);
/// assert_eq!(JoinDistribution::Partitioned.as_str(), "partitioned");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum JoinDistribution {
    /// Every left partition joins the whole right side (all right
    /// partitions read once into one shared index). Any input
    /// partitioning; the only mode for joins without equality keys.
    #[default]
    Broadcast,
    /// Both inputs hash-partitioned on the equality keys (equal partition
    /// counts); partition `p` joins left `p` against right `p` only.
    Partitioned,
}

impl JoinDistribution {
    /// The name EXPLAIN and the setting use.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Broadcast => "broadcast",
            Self::Partitioned => "partitioned",
        }
    }

    /// The codecs' encoding: true for partitioned.
    pub(crate) fn encode(&self) -> bool {
        *self == Self::Partitioned
    }

    /// Inverse of [`encode`](Self::encode).
    pub(crate) fn decode(partitioned: bool) -> Self {
        if partitioned {
            Self::Partitioned
        } else {
            Self::Broadcast
        }
    }
}

/// The `tsjoin.temporal_join_distribution` setting: `auto` (the default)
/// lets the planner choose, `broadcast` / `partitioned` force a mode
/// (`partitioned` only where the join has equality keys).
///
/// ```
/// use datafusion_tsjoin::window_join::DistributionSetting;
/// let s: DistributionSetting = "Partitioned".parse().unwrap();
/// assert_eq!(s, DistributionSetting::Partitioned);
/// assert_eq!(DistributionSetting::default().to_string(), "auto");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DistributionSetting {
    /// Partitioned where it measured faster (see [`Self::choose`]).
    #[default]
    Auto,
    /// Always broadcast.
    Broadcast,
    /// Partitioned whenever the join has equality keys.
    Partitioned,
}

impl DistributionSetting {
    /// The mode of a join with `keyed` equality keys whose hash keys could
    /// be formed, planned for `target_partitions`.
    ///
    /// `auto` chooses broadcast: on the reference workload (2 cores) the
    /// partitioned plan measured slower (its hash repartitions cost more
    /// than the parallel per-partition builds save; benches/README.md),
    /// and broadcast keeps the left input's order and partitions.
    ///
    /// ```
    /// use datafusion_tsjoin::window_join::{DistributionSetting, JoinDistribution};
    /// let p = DistributionSetting::Partitioned;
    /// assert_eq!(p.choose(true, 4), JoinDistribution::Partitioned);
    /// assert_eq!(p.choose(false, 4), JoinDistribution::Broadcast);
    /// ```
    pub fn choose(&self, keyed: bool, target_partitions: usize) -> JoinDistribution {
        let _ = target_partitions;
        match self {
            Self::Partitioned if keyed => JoinDistribution::Partitioned,
            _ => JoinDistribution::Broadcast,
        }
    }
}

impl FromStr for DistributionSetting {
    type Err = datafusion::error::DataFusionError;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(Self::Auto),
            "broadcast" => Ok(Self::Broadcast),
            "partitioned" => Ok(Self::Partitioned),
            _ => plan_err!(
                "invalid tsjoin.temporal_join_distribution '{s}': expected auto, broadcast or partitioned"
            ),
        }
    }
}

impl fmt::Display for DistributionSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Broadcast => "broadcast",
            Self::Partitioned => "partitioned",
        })
    }
}

impl ConfigField for DistributionSetting {
    fn visit<V: Visit>(&self, v: &mut V, key: &str, description: &'static str) {
        v.some(key, self, description)
    }

    fn set(&mut self, _key: &str, value: &str) -> Result<()> {
        *self = value.parse()?;
        Ok(())
    }
}

/// The hash-partitioning expressions of both sides of a keyed join: each
/// key pair in one common type, so equal keys hash equally (an `Int32`
/// key against an `Int64` one, a dictionary against its plain values,
/// `Utf8` against `Utf8View`). A pair already of one type is hashed as is.
/// `None` when there are no keys or a pair has no common type (the join
/// then stays broadcast).
pub(crate) fn hash_keys(
    left_keys: &[Arc<dyn PhysicalExpr>],
    right_keys: &[Arc<dyn PhysicalExpr>],
    left: &Schema,
    right: &Schema,
) -> Result<Option<PartitionKeys>> {
    if left_keys.is_empty() || left_keys.len() != right_keys.len() {
        return Ok(None);
    }
    let value_type = |t: &DataType| match t {
        DataType::Dictionary(_, v) => v.as_ref().clone(),
        t => t.clone(),
    };
    let (mut l_out, mut r_out) = (vec![], vec![]);
    for (l, r) in left_keys.iter().zip(right_keys) {
        let (lt, rt) = (l.data_type(left)?, r.data_type(right)?);
        if lt == rt {
            l_out.push(Arc::clone(l));
            r_out.push(Arc::clone(r));
            continue;
        }
        let (lv, rv) = (value_type(&lt), value_type(&rt));
        let common = if lv == rv {
            lv
        } else {
            match comparison_coercion(&lv, &rv) {
                Some(t) if !matches!(t, DataType::Dictionary(..)) => t,
                _ => return Ok(None),
            }
        };
        let wrap = |e: &Arc<dyn PhysicalExpr>, t: &DataType| -> Arc<dyn PhysicalExpr> {
            if *t == common {
                Arc::clone(e)
            } else {
                Arc::new(CastExpr::new(Arc::clone(e), common.clone(), None))
            }
        };
        l_out.push(wrap(l, &lt));
        r_out.push(wrap(r, &rt));
    }
    Ok(Some(PartitionKeys {
        left: l_out,
        right: r_out,
    }))
}

/// What both sides of a partitioned join are hash-partitioned on.
#[derive(Debug, Clone)]
pub(crate) struct PartitionKeys {
    /// Over the left schema (and the output's: left columns come first).
    pub left: Vec<Arc<dyn PhysicalExpr>>,
    /// Over the right schema.
    pub right: Vec<Arc<dyn PhysicalExpr>>,
}

/// Input requirements of a temporal join: none when broadcast; when
/// partitioned, every input key-partitioned on its hash keys, all
/// co-partitioned (partition `p` of each covers the same keys).
pub(crate) fn input_requirements(
    partition_keys: Option<&PartitionKeys>,
    rights: &[Vec<Arc<dyn PhysicalExpr>>],
    children: usize,
) -> InputDistributionRequirements {
    match partition_keys {
        None => InputDistributionRequirements::new(vec![
            Distribution::UnspecifiedDistribution;
            children
        ]),
        Some(keys) => {
            let mut per_child = vec![Distribution::KeyPartitioned(keys.left.clone())];
            per_child.extend(
                rights
                    .iter()
                    .map(|r| Distribution::KeyPartitioned(r.clone())),
            );
            InputDistributionRequirements::co_partitioned(per_child)
        }
    }
}

/// The plan properties of a partitioned join: the broadcast ones
/// (`left_preserving_properties`), but hash-partitioned on the left keys,
/// which still name the output's left columns.
pub(crate) fn partitioned_properties(
    mut props: PlanProperties,
    keys: &PartitionKeys,
    partitions: usize,
) -> PlanProperties {
    props.partitioning = Partitioning::Hash(keys.left.clone(), partitions);
    props
}

/// Partition `partition` of `input`, seen as a plan of one partition: what
/// a partitioned join hands its right-side builders (which drain every
/// partition of the plan they get) so that they read only their own.
/// Never placed in a plan tree.
#[derive(Debug)]
pub(crate) struct OnePartition {
    input: Arc<dyn ExecutionPlan>,
    partition: usize,
    cache: Arc<PlanProperties>,
}

impl OnePartition {
    /// Partition `partition` of `input`.
    pub(crate) fn new(input: Arc<dyn ExecutionPlan>, partition: usize) -> Self {
        let cache = Arc::new(PlanProperties::new(
            EquivalenceProperties::new_with_orderings(
                input.schema(),
                input
                    .equivalence_properties()
                    .oeq_class()
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>(),
            ),
            Partitioning::UnknownPartitioning(1),
            input.pipeline_behavior(),
            input.boundedness(),
        ));
        Self {
            input,
            partition,
            cache,
        }
    }
}

impl DisplayAs for OnePartition {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "OnePartition: partition={}", self.partition)
    }
}

impl ExecutionPlan for OnePartition {
    fn name(&self) -> &str {
        "OnePartition"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match (children.pop(), children.is_empty()) {
            (Some(input), true) => Ok(Arc::new(Self::new(input, self.partition))),
            _ => internal_err!("OnePartition expects one child"),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("OnePartition: partition {partition} of 1");
        }
        self.input.execute(self.partition, context)
    }
}

/// The state slot and the right side partition `partition` of a join in
/// `distribution` mode reads: broadcast, slot 0 and all of `right` (every
/// partition shares them); partitioned, slot `partition` and right
/// partition `partition` only, which must exist (`left_partitions` equal
/// on both sides, as the co-partitioned requirement makes them).
pub(crate) fn right_for_partition(
    name: &str,
    distribution: JoinDistribution,
    right: &Arc<dyn ExecutionPlan>,
    partition: usize,
    left_partitions: usize,
) -> Result<(usize, Arc<dyn ExecutionPlan>)> {
    match distribution {
        JoinDistribution::Broadcast => Ok((0, Arc::clone(right))),
        JoinDistribution::Partitioned => {
            let m = right.output_partitioning().partition_count();
            if m != left_partitions {
                return internal_err!(
                    "{name}: partitioned with {left_partitions} left but {m} right partitions"
                );
            }
            let one = OnePartition::new(Arc::clone(right), partition);
            Ok((partition, Arc::new(one)))
        }
    }
}
