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

use super::plan::left_preserving_properties;
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::config::{ConfigField, ConfigOptions, Visit};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err, plan_err};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::binary::comparison_coercion;
use datafusion::physical_expr::expressions::CastExpr;
use datafusion::physical_expr::{EquivalenceProperties, Partitioning};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::execution_plan::{
    InvariantLevel, check_default_invariants,
};
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
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
    /// be formed; `broadcastable` says whether every task may read the
    /// right side whole (see [`Self::for_session`]).
    ///
    /// `auto` chooses broadcast where it may: on the reference workload the
    /// partitioned plan measured slower, locally (its hash repartitions
    /// cost more than the parallel per-partition builds save) and on an
    /// in-process cluster (shuffles through files and Arrow Flight;
    /// benches/README.md), and broadcast keeps the left input's order and
    /// partitions. Where the right side is too big for every task to hold,
    /// it chooses partitioned.
    ///
    /// ```
    /// use datafusion_tsjoin::window_join::{DistributionSetting, JoinDistribution};
    /// let p = DistributionSetting::Partitioned;
    /// assert_eq!(p.choose(true, true), JoinDistribution::Partitioned);
    /// assert_eq!(p.choose(false, true), JoinDistribution::Broadcast);
    /// let auto = DistributionSetting::Auto;
    /// assert_eq!(auto.choose(true, true), JoinDistribution::Broadcast);
    /// assert_eq!(auto.choose(true, false), JoinDistribution::Partitioned);
    /// ```
    pub fn choose(&self, keyed: bool, broadcastable: bool) -> JoinDistribution {
        match self {
            Self::Partitioned if keyed => JoinDistribution::Partitioned,
            Self::Auto if keyed && !broadcastable => JoinDistribution::Partitioned,
            _ => JoinDistribution::Broadcast,
        }
    }

    /// The mode of a join with `keyed` equality keys over `rights` under
    /// the session's settings (`tsjoin.temporal_join_distribution`).
    ///
    /// On one machine the right side may always be broadcast: one index
    /// is built per process and shared by the partitions. On a cluster
    /// (`tsjoin.distributed`) every task builds its own, so the right side
    /// is broadcast only under the thresholds a hash join's build side is
    /// collected under (`datafusion.optimizer.hash_join_single_partition_threshold`
    /// and `..._rows`, which Ballista sets from its broadcast-join
    /// thresholds, 128 MiB and 1M rows), judged from the inputs'
    /// statistics; without statistics it is not.
    pub(crate) fn for_session(
        options: &ConfigOptions,
        keyed: bool,
        rights: &[&Arc<dyn ExecutionPlan>],
    ) -> JoinDistribution {
        let ts = options.extensions.get::<crate::config::TsJoinOptions>();
        let distributed = ts.is_some_and(|o| o.distributed);
        let broadcastable = !distributed
            || rights
                .iter()
                .all(|r| under_broadcast_thresholds(r, options));
        ts.map(|o| o.temporal_join_distribution)
            .unwrap_or_default()
            .choose(keyed, broadcastable)
    }
}

/// Whether `plan`'s statistics put it below the session's thresholds for
/// collecting a hash join's build side: its bytes when known, else its
/// rows; false when neither is (DataFusion's `JoinSelection` rule, which
/// keeps this test private).
fn under_broadcast_thresholds(
    plan: &Arc<dyn ExecutionPlan>,
    options: &ConfigOptions,
) -> bool {
    let Ok(stats) =
        StatisticsContext::new().compute(plan.as_ref(), &StatisticsArgs::new())
    else {
        return false;
    };
    let limits = &options.optimizer;
    if let Some(&bytes) = stats.total_byte_size.get_value() {
        return bytes < limits.hash_join_single_partition_threshold;
    }
    if let Some(&rows) = stats.num_rows.get_value() {
        return rows < limits.hash_join_single_partition_threshold_rows;
    }
    false
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
fn hash_keys(
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

/// What both sides of a keyed join pair are hash-partitioned on.
#[derive(Debug, Clone)]
struct PartitionKeys {
    /// Over the left schema (and the output's: left columns come first).
    left: Vec<Arc<dyn PhysicalExpr>>,
    /// Over the right schema.
    right: Vec<Arc<dyn PhysicalExpr>>,
}

/// One right input of a temporal join, as its distribution sees it: the
/// equality keys pairing it with the left input, and the input itself.
pub(crate) struct KeyedRight<'a> {
    /// Left key expressions (over the left schema).
    pub left_keys: &'a [Arc<dyn PhysicalExpr>],
    /// Right key expressions (over `input`'s schema).
    pub right_keys: &'a [Arc<dyn PhysicalExpr>],
    /// The right input.
    pub input: &'a Arc<dyn ExecutionPlan>,
}

/// What every input of a partitioned temporal join is hash-partitioned on:
/// the left keys (shared by every right input) and each right input's.
#[derive(Debug, Clone)]
struct HashKeys {
    left: Vec<Arc<dyn PhysicalExpr>>,
    rights: Vec<Vec<Arc<dyn PhysicalExpr>>>,
}

impl HashKeys {
    /// The hash keys of a partitioned plan over `rights`: `None` unless
    /// every right input has keys with common hash types whose left side
    /// is the same expressions.
    fn resolve(left: &Schema, rights: &[KeyedRight<'_>]) -> Result<Option<Self>> {
        let mut left_keys: Option<Vec<Arc<dyn PhysicalExpr>>> = None;
        let mut right_keys = vec![];
        for r in rights {
            let Some(keys) =
                hash_keys(r.left_keys, r.right_keys, left, &r.input.schema())?
            else {
                return Ok(None);
            };
            if left_keys.as_ref().is_some_and(|l| *l != keys.left) {
                return Ok(None);
            }
            right_keys.push(keys.right);
            left_keys.get_or_insert(keys.left);
        }
        Ok(left_keys.map(|left| Self {
            left,
            rights: right_keys,
        }))
    }
}

/// The distribution state one temporal join operator (WINDOW, ASOF,
/// HORIZON JOIN) holds: its mode, the hash keys its inputs are partitioned
/// on, and its per-execution state slots (`S`: what the right side is built
/// into, shared by the partitions that read it).
///
/// Invariants (kept by the constructors): the mode is partitioned exactly
/// when there are hash keys, with one key list per right input; there is
/// one slot when broadcast (every partition shares it) and one per left
/// partition (at least one) when partitioned.
///
/// ```ignore
/// let dist = TemporalDistribution::new(
///     JoinDistribution::Partitioned,
///     &left,
///     &[KeyedRight { left_keys: &lk, right_keys: &rk, input: &right }],
///     |_mode| Arc::new(SharedState::default()),
/// )?;
/// let (slot, rights) = dist.for_partition("AsofJoinExec", &left, 0, &[right])?;
/// ```
#[derive(Debug)]
pub(crate) struct TemporalDistribution<S> {
    keys: Option<HashKeys>,
    slots: Vec<S>,
}

impl<S> TemporalDistribution<S> {
    /// Broadcast, with one slot made by `make_slot`.
    pub(crate) fn broadcast(make_slot: impl FnOnce(JoinDistribution) -> S) -> Self {
        Self {
            keys: None,
            slots: vec![make_slot(JoinDistribution::Broadcast)],
        }
    }

    /// The state of a join over `left` and `rights` in `distribution` mode.
    /// Partitioned needs equality keys with a common hash type (and, over
    /// several right inputs, the same left keys); without them the join
    /// stays broadcast. `make_slot` makes each slot, told the mode taken.
    pub(crate) fn new(
        distribution: JoinDistribution,
        left: &Arc<dyn ExecutionPlan>,
        rights: &[KeyedRight<'_>],
        make_slot: impl FnMut(JoinDistribution) -> S,
    ) -> Result<Self> {
        let known_empty = std::iter::once(left)
            .chain(rights.iter().map(|r| r.input))
            .any(|p| p.downcast_ref::<EmptyExec>().is_some());
        let keys = match distribution {
            JoinDistribution::Broadcast => None,
            // An input that is known to be empty needs no partitioning, and
            // asking for it never finishes on Ballista: its adaptive planner
            // replaces a stage that produced no rows with an `EmptyExec`,
            // the hash requirement puts a new shuffle stage over it, and the
            // next re-plan replaces that one again, forever. Broadcast reads
            // every input as it is, which is right for any input.
            JoinDistribution::Partitioned if known_empty => None,
            JoinDistribution::Partitioned => HashKeys::resolve(&left.schema(), rights)?,
        };
        Ok(Self::with_keys(keys, left, make_slot))
    }

    /// The same mode and keys with fresh slots for a join over `left`
    /// (whose partitioning is the current left input's).
    pub(crate) fn fresh(
        &self,
        left: &Arc<dyn ExecutionPlan>,
        make_slot: impl FnMut(JoinDistribution) -> S,
    ) -> Self {
        Self::with_keys(self.keys.clone(), left, make_slot)
    }

    fn with_keys(
        keys: Option<HashKeys>,
        left: &Arc<dyn ExecutionPlan>,
        mut make_slot: impl FnMut(JoinDistribution) -> S,
    ) -> Self {
        let mode = JoinDistribution::decode(keys.is_some());
        let slots = match mode {
            JoinDistribution::Broadcast => 1,
            JoinDistribution::Partitioned => {
                left.output_partitioning().partition_count().max(1)
            }
        };
        Self {
            keys,
            slots: (0..slots).map(|_| make_slot(mode)).collect(),
        }
    }

    /// The mode the join runs in.
    pub(crate) fn mode(&self) -> JoinDistribution {
        JoinDistribution::decode(self.keys.is_some())
    }

    /// The plan properties of a join over `left` with output `schema`: the
    /// left-preserving ones (see [`left_preserving_properties`]); when
    /// partitioned, hash-partitioned on the left keys, which still name
    /// the output's left columns.
    pub(crate) fn properties(
        &self,
        left: &Arc<dyn ExecutionPlan>,
        schema: &SchemaRef,
    ) -> PlanProperties {
        let mut props = left_preserving_properties(left, schema);
        if let Some(keys) = &self.keys {
            let n = left.output_partitioning().partition_count();
            props.partitioning = Partitioning::Hash(keys.left.clone(), n);
        }
        props
    }

    /// Input requirements of a join with `children` inputs: none when
    /// broadcast; when partitioned, every input key-partitioned on its hash
    /// keys, all co-partitioned (partition `p` of each covers the same
    /// keys).
    pub(crate) fn input_requirements(
        &self,
        children: usize,
    ) -> InputDistributionRequirements {
        match &self.keys {
            None => InputDistributionRequirements::new(vec![
                Distribution::UnspecifiedDistribution;
                children
            ]),
            Some(keys) => {
                let mut per_child = vec![Distribution::KeyPartitioned(keys.left.clone())];
                per_child.extend(
                    keys.rights
                        .iter()
                        .map(|r| Distribution::KeyPartitioned(r.clone())),
                );
                InputDistributionRequirements::co_partitioned(per_child)
            }
        }
    }

    /// DataFusion's invariants of `plan`, a join in this mode, at `check`;
    /// but a partitioned join none of whose inputs is hash-partitioned yet
    /// is checked only at [`InvariantLevel::Always`].
    ///
    /// Such a plan is one the distribution rules have not run on: Ballista's
    /// adaptive planner first plans a job with only its preparation rules
    /// and checks it as executable, then inserts the shuffles. DataFusion's
    /// executable check of a co-partitioned requirement refused that
    /// first plan for inputs of several partitions (every keyed join over
    /// a multi-file table). Nothing runs such a plan: the per-input
    /// `KeyPartitioned` requirements still fail `SanityCheckPlan`, and
    /// once a shuffle is in place the full check applies again.
    pub(crate) fn check_invariants<P: ExecutionPlan>(
        &self,
        plan: &P,
        check: InvariantLevel,
    ) -> Result<()> {
        let before_shuffles = self.keys.is_some()
            && !plan
                .children()
                .iter()
                .any(|c| matches!(c.output_partitioning(), Partitioning::Hash(..)));
        let check = if before_shuffles {
            InvariantLevel::Always
        } else {
            check
        };
        check_default_invariants(plan, check)
    }

    /// `benefits_from_input_partitioning` of a join with `children` inputs:
    /// broadcast, no (repartitioning the left would scramble its order);
    /// partitioned, yes, even over single-partition inputs (the hash
    /// repartitions are what spread the keys).
    pub(crate) fn benefits_from_input_partitioning(&self, children: usize) -> Vec<bool> {
        vec![self.keys.is_some(); children]
    }

    /// What partition `partition` of the join named `name` (over `left`)
    /// reads: its state slot, and each of `rights` as it reads it.
    /// Broadcast: slot 0 and all of every right input (every partition
    /// shares them); partitioned: slot `partition` and right partition
    /// `partition` only, which must exist (partition counts equal on all
    /// sides, as the co-partitioned requirement makes them).
    pub(crate) fn for_partition(
        &self,
        name: &str,
        left: &Arc<dyn ExecutionPlan>,
        partition: usize,
        rights: &[Arc<dyn ExecutionPlan>],
    ) -> Result<(&S, Vec<Arc<dyn ExecutionPlan>>)> {
        let n = left.output_partitioning().partition_count();
        if partition >= n {
            return internal_err!(
                "{name}: partition {partition} out of range ({n} partitions)"
            );
        }
        let mut slot = 0;
        let mut read = Vec::with_capacity(rights.len());
        for r in rights {
            let (s, right) = right_for_partition(name, self.mode(), r, partition, n)?;
            slot = s;
            read.push(right);
        }
        Ok((&self.slots[slot], read))
    }
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
fn right_for_partition(
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
