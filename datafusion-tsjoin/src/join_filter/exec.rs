//! [`LipFilterExec`]: the operator above a fact scan that applies the join
//! filters of the hash joins it feeds.

use super::build_keys::{BuildKeys, Taken};
use super::filter::BitFilter;
use super::stream::LipFilterStream;
use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::Schema;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool};
use datafusion::physical_expr::expressions::{DynamicFilterPhysicalExpr, Literal};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet,
};
use datafusion::physical_plan::statistics::ChildStats;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PhysicalExpr, PlanProperties,
    SendableRecordBatchStream, Statistics, StatisticsArgs,
};
use parking_lot::Mutex;
use std::fmt;
use std::sync::Arc;

/// Bit filters may be as wide as an eighth of the scan's rows (computing
/// the bits evaluates the join's predicate once per value, a hash lookup
/// of about 100 ns, in one thread, while the filter saves the join a probe
/// of a few tens of ns per scanned row) but always this many values wide
/// ...
pub(crate) const MIN_MAX_BITS: u64 = 1 << 16;
/// ... or, when the scan's row count is unknown, this many ...
pub(crate) const UNKNOWN_ROWS_MAX_BITS: u64 = 1 << 22;
/// ... and never wider than this.
pub(crate) const MAX_MAX_BITS: u64 = 1 << 28;
/// Scan rows per bit of that allowance.
pub(crate) const ROWS_PER_BIT: u64 = 8;
/// Bits per scan row a filter made from the join's build keys may take
/// (making them costs a write per build row, so only memory bounds them).
pub(crate) const KEY_BITS_PER_ROW: u64 = 2;

/// Lookahead information passing (LIP, Quickstep §5.3): drops the rows of
/// its input (a fact-table scan) that the hash joins above cannot match,
/// before any of them probes its hash table.
///
/// Each filter is a hash join's dynamic filter, which DataFusion already
/// pushes into the scan but (without `parquet.pushdown_filters`) only uses
/// to prune row groups. Once a join's build side is done, its filter is
/// compiled into a bit per key value when the key is an integer of a small
/// enough range (an exact filter: Quickstep's bit vector), into a Bloom
/// filter of the join's build keys when their range is too wide but they
/// are few enough, and left to the join otherwise (its membership test
/// costs here what the join's probe costs there); a filter whose build is
/// not done yet
/// is skipped, so the operator never waits. All filters are applied to
/// each batch in adaptive order (see [`super::prober`]). Placed by
/// [`super::JoinFilterRule`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
/// use datafusion::datasource::memory::MemorySourceConfig;
/// use datafusion::physical_plan::collect;
/// use datafusion::arrow::{array::Int32Array, datatypes::*, record_batch::RecordBatch};
/// use datafusion_tsjoin::join_filter::LipFilterExec;
/// use std::sync::Arc;
/// let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int32, false)]));
/// let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int32Array::from(vec![1, 2]))])?;
/// let input = MemorySourceConfig::try_new_exec(&[vec![batch]], schema, None)?;
/// // Without join filters it passes its input through.
/// let lip = LipFilterExec::try_new(input, vec![], 1 << 22)?;
/// assert_eq!(collect(Arc::new(lip), Default::default()).await?[0].num_rows(), 2);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LipFilterExec {
    input: Arc<dyn ExecutionPlan>,
    filters: Vec<JoinFilter>,
    /// Widest key range compiled into bits from the join's predicate.
    max_bits: u64,
    /// Per filter, its join's build keys where a [`super::LipBuildKeysExec`]
    /// keeps them (see [`Self::with_build_keys`]).
    build_keys: Vec<Option<BuildKeysLink>>,
    /// Widest key range turned into bits from build keys.
    max_key_bits: u64,
    /// Each filter compiled once, by the first partition that finds its
    /// build done, and shared by all.
    compiled: Arc<[Mutex<Compiled>]>,
    /// The probe order a partition ended with (filter index, still on),
    /// for EXPLAIN ANALYZE.
    last_order: Arc<Mutex<Vec<(usize, bool)>>>,
    metrics: ExecutionPlanMetricsSet,
}

/// One join filter.
#[derive(Debug, Clone)]
pub(crate) struct JoinFilter {
    source: FilterSource,
    /// What EXPLAIN calls it: its probe keys (a key filter: `probe=build`).
    name: String,
}

/// Where a join filter comes from.
#[derive(Debug, Clone)]
enum FilterSource {
    /// A hash join's dynamic filter, as the scan holds it.
    Dynamic(Arc<dyn PhysicalExpr>),
    /// A key column of the input (over the input's schema) that one key pair
    /// of a hash join above matches against that join's build keys (always
    /// linked): placed by [`super::JoinFilterRule`] where DataFusion pushes
    /// no filter, such as a key of a join on several keys.
    KeyColumn(Arc<dyn PhysicalExpr>),
}

/// A join's build keys, kept by a [`super::LipBuildKeysExec`] under that
/// join.
#[derive(Debug, Clone)]
pub(crate) struct BuildKeysLink {
    pub(crate) keys: Arc<BuildKeys>,
    /// Whether the join matches NULL with NULL.
    pub(crate) null_equal: bool,
}

/// A filter's compilation state.
#[derive(Debug, Default, Clone)]
pub(crate) enum Compiled {
    #[default]
    NotYet,
    /// Nothing to apply: the join passes every row, or its filter cannot be
    /// bits and is left to the join.
    Nothing,
    Ready(Arc<BitFilter>),
}

impl LipFilterExec {
    /// An operator over `input` applying `filters`: dynamic filters of hash
    /// joins over `input`'s columns (an error for another expression).
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        filters: Vec<Arc<dyn PhysicalExpr>>,
        max_bits: u64,
    ) -> Result<Self> {
        let filters = filters
            .into_iter()
            .map(|expr| {
                let Some(dynamic) = expr.downcast_ref::<DynamicFilterPhysicalExpr>()
                else {
                    return internal_err!(
                        "LipFilterExec applies dynamic filters, not {expr}"
                    );
                };
                let name = dynamic
                    .children()
                    .iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(", ");
                // `k@3` reads better as `k`.
                let name = strip_indices(&name);
                Ok(JoinFilter {
                    source: FilterSource::Dynamic(expr),
                    name,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let compiled = uncompiled(filters.len());
        let build_keys = vec![None; filters.len()];
        Ok(Self {
            input,
            filters,
            max_bits,
            build_keys,
            max_key_bits: max_bits,
            compiled,
            last_order: Arc::default(),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// Takes filter `i`'s bits from `build_keys[i]` where given (its
    /// join's keys, kept by a [`super::LipBuildKeysExec`] under the join), for
    /// ranges of up to `max_key_bits` values; the others, and any whose keys
    /// are not all there when the join's filter finishes, are compiled from
    /// the predicate as before.
    pub(crate) fn with_build_keys(
        mut self,
        build_keys: Vec<Option<BuildKeysLink>>,
        max_key_bits: u64,
    ) -> Self {
        debug_assert_eq!(build_keys.len(), self.filters.len());
        self.build_keys = build_keys;
        self.max_key_bits = max_key_bits;
        self
    }

    /// Also matches `key` (a column of the input) against the build keys
    /// `link` holds, those of a join above whose key pair `key = build_key`
    /// (EXPLAIN's name for the filter) DataFusion pushes nowhere. Taken up
    /// once every partition of that join's build has ended.
    pub(crate) fn with_key_filter(
        mut self,
        key: Arc<dyn PhysicalExpr>,
        build_key: &str,
        link: BuildKeysLink,
    ) -> Self {
        let mut name = format!(
            "{}={}",
            strip_indices(&key.to_string()),
            strip_indices(build_key)
        );
        // Each filter's metrics are named after it: keep names apart.
        while self.filters.iter().any(|f| f.name == name) {
            name.push('\'');
        }
        self.filters.push(JoinFilter {
            source: FilterSource::KeyColumn(key),
            name,
        });
        self.build_keys.push(Some(link));
        // Planning, not running: nothing is compiled yet.
        self.compiled = uncompiled(self.filters.len());
        self
    }

    /// The same filters over `input`, none compiled or measured yet.
    pub(crate) fn with_fresh_state(&self, input: Arc<dyn ExecutionPlan>) -> Self {
        Self {
            input,
            filters: self.filters.clone(),
            max_bits: self.max_bits,
            build_keys: self.build_keys.clone(),
            max_key_bits: self.max_key_bits,
            compiled: uncompiled(self.filters.len()),
            last_order: Arc::default(),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The input.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// The dynamic filters it applies (the key filters placed with them
    /// are not expressions a join updates: see [`Self::filter_count`]).
    pub fn filters(&self) -> Vec<Arc<dyn PhysicalExpr>> {
        self.filters
            .iter()
            .filter_map(|f| match &f.source {
                FilterSource::Dynamic(expr) => Some(Arc::clone(expr)),
                FilterSource::KeyColumn(_) => None,
            })
            .collect()
    }

    /// How many filters it applies: its dynamic filters and its key
    /// filters.
    pub(crate) fn filter_count(&self) -> usize {
        self.filters.len()
    }

    /// The widest key range it compiles into bits.
    pub fn max_bits(&self) -> u64 {
        self.max_bits
    }

    /// Filter `i` compiled, or `NotYet` while its join's build runs. Compiles
    /// it on the first call after the build is done; the bits are
    /// accounted to `pool` (the filter is left to the join when the pool
    /// refuses them).
    pub(crate) fn compiled(
        &self,
        i: usize,
        pool: &Arc<dyn MemoryPool>,
    ) -> Result<Compiled> {
        let filter = &self.filters[i];
        let mut state = self.compiled[i].lock();
        if let Compiled::NotYet = *state {
            let schema = self.input.schema();
            let link = self.build_keys[i].as_ref();
            let bits = match &filter.source {
                FilterSource::Dynamic(expr) => {
                    let Some(dynamic) = expr.downcast_ref::<DynamicFilterPhysicalExpr>()
                    else {
                        return internal_err!("{expr} is not a dynamic filter");
                    };
                    if futures::FutureExt::now_or_never(dynamic.wait_complete()).is_none()
                    {
                        return Ok(Compiled::NotYet);
                    }
                    let keys = link.and_then(|link| {
                        link.keys
                            .take_finished()
                            .map(|keys| (keys, link.null_equal, self.max_key_bits))
                    });
                    compile(dynamic, keys, &schema, self.max_bits)?
                }
                FilterSource::KeyColumn(key) => match link {
                    Some(link) => match link.keys.take() {
                        Taken::Running => return Ok(Compiled::NotYet),
                        Taken::Keys(keys) => BitFilter::from_build_keys(
                            key,
                            &schema,
                            &keys,
                            link.null_equal,
                            self.max_key_bits,
                        )?,
                        Taken::Gone => None,
                    },
                    None => None,
                },
            };
            *state = reserved(bits, pool, &filter.name);
        }
        Ok(state.clone())
    }

    /// What EXPLAIN calls filter `i`.
    pub(crate) fn filter_name(&self, i: usize) -> &str {
        &self.filters[i].name
    }

    /// Keeps the probe order a partition ended with (the one with the most
    /// filters taken up wins), for EXPLAIN ANALYZE.
    pub(crate) fn record_order(&self, order: Vec<(usize, bool)>) {
        let mut last = self.last_order.lock();
        if order.len() >= last.len() {
            *last = order;
        }
    }

    /// What EXPLAIN shows per filter: its key, and once compiled its kind
    /// and size, in the last probe order when one was recorded (filters
    /// switched off marked `off`).
    fn describe(&self) -> Vec<String> {
        let last = self.last_order.lock().clone();
        let mut order: Vec<(usize, bool)> = last.clone();
        order.extend(
            (0..self.filters.len())
                .filter(|i| !last.iter().any(|(j, _)| j == i))
                .map(|i| (i, true)),
        );
        order
            .into_iter()
            .map(|(i, on)| {
                let name = &self.filters[i].name;
                match &*self.compiled[i].lock() {
                    Compiled::NotYet => name.clone(),
                    Compiled::Nothing => format!("{name}: left to the join"),
                    Compiled::Ready(f) => {
                        let off = if on { "" } else { ", off" };
                        match f.size() {
                            0 => format!("{name}: {}{off}", f.kind()),
                            bytes => format!("{name}: {} {bytes} B{off}", f.kind()),
                        }
                    }
                }
            })
            .collect()
    }
}

/// `col@3, x@0` → `col, x`.
pub(crate) fn strip_indices(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '@' && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
            while chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A finished dynamic filter as bits, or `None`: from its join's build
/// keys when `keys` holds them (with whether NULLs match and the widest
/// range), else from its predicate.
fn compile(
    dynamic: &DynamicFilterPhysicalExpr,
    keys: Option<(Vec<ArrayRef>, bool, u64)>,
    input: &Schema,
    max_bits: u64,
) -> Result<Option<BitFilter>> {
    let predicate = dynamic.current()?;
    if predicate.downcast_ref::<Literal>().is_some_and(|l| {
        l.value() == &datafusion::common::ScalarValue::Boolean(Some(true))
    }) {
        return Ok(None);
    }
    let keys_of_probe = dynamic.children();
    let [key] = keys_of_probe.as_slice() else {
        return Ok(None);
    };
    match keys {
        Some((keys, null_equal, max_key_bits)) => {
            BitFilter::from_build_keys(key, input, &keys, null_equal, max_key_bits)
        }
        None => BitFilter::try_new(&predicate, key, input, max_bits),
    }
}

/// `n` filters' compilation states, none compiled yet.
fn uncompiled(n: usize) -> Arc<[Mutex<Compiled>]> {
    (0..n).map(|_| Mutex::default()).collect()
}

/// `bits` accounted to `pool`, or nothing to apply here.
fn reserved(bits: Option<BitFilter>, pool: &Arc<dyn MemoryPool>, name: &str) -> Compiled {
    if let Some(bits) = bits {
        let reservation =
            MemoryConsumer::new(format!("LipFilterExec[{name}]")).register(pool);
        if reservation.try_grow(bits.size()).is_ok() {
            return Compiled::Ready(Arc::new(bits.with_reservation(reservation)));
        }
    }
    // Not bits (several or non-integer keys, too wide a range, no memory):
    // the join applies its filter itself. Applying DataFusion's membership
    // test here as well measured slower (TPC-H Q3, Q4, Q5, Q20): it costs
    // about what the join's probe costs.
    Compiled::Nothing
}

impl DisplayAs for LipFilterExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let names = self.describe().join("; ");
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "LipFilterExec: join_filters=[{names}]")
            }
            DisplayFormatType::TreeRender => write!(f, "join_filters=[{names}]"),
        }
    }
}

impl ExecutionPlan for LipFilterExec {
    fn name(&self) -> &str {
        "LipFilterExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        // A subset of the input's rows in the input's order: partitioning,
        // ordering and equivalences hold.
        self.input.properties()
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        vec![ChildStats::At(partition)]
    }

    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        // At most the input's rows; how many fewer is known only at run time.
        Ok(Arc::new(input_stats[0].as_ref().clone().to_inexact()))
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        // The joins look for their filter's consumers here.
        for filter in &self.filters {
            let expr = match &filter.source {
                FilterSource::Dynamic(expr) | FilterSource::KeyColumn(expr) => expr,
            };
            if f(expr)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return internal_err!("LipFilterExec expects one child");
        }
        Ok(Arc::new(self.with_fresh_state(children.swap_remove(0))))
    }

    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        // A re-executed plan's joins do not refill these filters: applying
        // the old ones would drop rows by the last run's builds.
        Ok(Arc::new(Self::try_new(
            Arc::clone(&self.input),
            vec![],
            self.max_bits,
        )?))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, Arc::clone(&context))?;
        Ok(Box::pin(LipFilterStream::new(
            input,
            self.shared(),
            BaselineMetrics::new(&self.metrics, partition),
            self.metrics.clone(),
            partition,
            Arc::clone(context.memory_pool()),
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

impl LipFilterExec {
    /// What the streams share: this operator's filters and their
    /// compilation.
    fn shared(&self) -> Arc<Self> {
        Arc::new(Self {
            input: Arc::clone(&self.input),
            filters: self.filters.clone(),
            max_bits: self.max_bits,
            build_keys: self.build_keys.clone(),
            max_key_bits: self.max_key_bits,
            compiled: Arc::clone(&self.compiled),
            last_order: Arc::clone(&self.last_order),
            metrics: self.metrics.clone(),
        })
    }
}
