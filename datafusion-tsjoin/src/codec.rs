//! datafusion-proto extension codecs for tsjoin's plan nodes, so plans can
//! be shipped to other processes (Ballista, datafusion-distributed).
//!
//! Every encoding starts with a tag byte ([`WINDOW_JOIN_TAG`]), so a codec
//! that wraps these (as Ballista's must) can tell tsjoin's bytes from its own.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> datafusion::error::Result<()> {
//! use datafusion_proto::bytes::{
//!     physical_plan_from_bytes_with_extension_codec,
//!     physical_plan_to_bytes_with_extension_codec,
//! };
//! use datafusion_tsjoin::{TsJoinContextExt, codec::TsJoinPhysicalCodec, tsjoin_context};
//! let ctx = tsjoin_context(Default::default());
//! ctx.tsjoin_sql("CREATE TABLE t (ts TIMESTAMP, v INT) AS VALUES ('2024-01-01T00:00:00', 1)").await?;
//! let plan = ctx.tsjoin_sql("SELECT t.v, sum(r.v) FROM t WINDOW JOIN t r \
//!     RANGE BETWEEN 1 minute PRECEDING AND CURRENT ROW").await?
//!     .create_physical_plan().await?;
//! let bytes = physical_plan_to_bytes_with_extension_codec(plan, &TsJoinPhysicalCodec)?;
//! let back = physical_plan_from_bytes_with_extension_codec(&bytes, &ctx.task_ctx(), &TsJoinPhysicalCodec)?;
//! let shown = datafusion::physical_plan::displayable(back.as_ref()).indent(false).to_string();
//! assert!(shown.contains("WindowJoinExec"));
//! # Ok(()) }
//! ```

use crate::functions::PercentileSpec;
use crate::inline_aggregate::{AggFn, InlineAgg, InlineAggregateExec, with_leaf};
use crate::tail::{TailExec, TailNode, decode_range, encode_range};
use crate::window_join::{
    AggInput, BoundUnit, Direction, ExprLayout, PhysicalBound, Prevailing, TimeScale,
    WindowAgg, WindowAggKind, WindowJoinExec, WindowJoinNode, WindowJoinSettings,
    WindowJoinSpec, timestamp_unit,
};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::{
    DataFusionError, Result, internal_datafusion_err, internal_err,
};
use datafusion::execution::TaskContext;
use datafusion::execution::registry::FunctionRegistry;
use datafusion::logical_expr::{Extension, LogicalPlan, UserDefinedLogicalNodeCore};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};
use datafusion::physical_plan::{Partitioning, PlanProperties};
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::logical_plan::from_proto::parse_expr;
use datafusion_proto::logical_plan::to_proto::serialize_expr;
use datafusion_proto::physical_plan::from_proto::parse_physical_expr;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use datafusion_proto::physical_plan::{
    AsExecutionPlan, PhysicalExtensionCodec, PhysicalProtoConverterExtension,
};
use datafusion_proto::protobuf::{
    self, LogicalExprNode, PhysicalExprNode, PhysicalPlanNode,
};
use prost::Message;
use std::sync::Arc;

/// First byte of an encoded [`crate::priority::PriorityGateExec`].
pub const PRIORITY_GATE_TAG: u8 = 0xB6;
/// First byte of an encoded WINDOW JOIN node (logical or physical).
pub const WINDOW_JOIN_TAG: u8 = 0xB1;
/// First byte of an encoded [`InlineAggregateExec`].
pub const INLINE_AGGREGATE_TAG: u8 = 0xB2;
/// First byte of an encoded ASOF JOIN node (logical or physical).
pub const ASOF_JOIN_TAG: u8 = 0xB3;
/// First byte of an encoded [`crate::tail::TailNode`] or [`TailExec`].
pub const TAIL_TAG: u8 = 0xB4;
/// First byte of an encoded HORIZON JOIN node (logical or physical).
pub const HORIZON_JOIN_TAG: u8 = 0xB5;
/// First byte of an encoded [`crate::newest_first::NewestFirstTopKExec`].
pub const NEWEST_FIRST_TAG: u8 = 0xB8;
/// First byte of an encoded [`crate::filter_aggregate::FilterAggregateExec`].
pub const FILTER_AGGREGATE_TAG: u8 = 0xB7;
/// First byte of an encoded [`crate::join_filter::LipFilterExec`].
pub const LIP_FILTER_TAG: u8 = 0xB9;
/// First byte of an encoded [`crate::join_filter::LipBuildKeysExec`].
pub const LIP_BUILD_KEYS_TAG: u8 = 0xBB;
/// First byte of an encoded [`crate::latest_by::LatestByExec`].
pub const LATEST_BY_TAG: u8 = 0xBA;

/// Whether `byte` starts a tsjoin encoding: tsjoin reserves the tags
/// `0xB1..=0xBF` for its nodes, so a codec that wraps these codecs beside
/// another (Ballista's) can route bytes by their first byte alone.
///
/// ```
/// use datafusion_tsjoin::codec::{WINDOW_JOIN_TAG, is_tsjoin_tag};
/// assert!(is_tsjoin_tag(WINDOW_JOIN_TAG));
/// assert!(!is_tsjoin_tag(0x00));
/// ```
pub fn is_tsjoin_tag(byte: u8) -> bool {
    (0xB1..=0xBF).contains(&byte)
}

/// [`InlineAggregateExec`] in proto form.
#[derive(Clone, PartialEq, Message)]
struct InlineAggregateProto {
    #[prost(message, repeated, tag = "1")]
    group_exprs: Vec<PhysicalExprNode>,
    /// Output schema: keys, then one field per aggregate.
    #[prost(message, optional, tag = "2")]
    schema: Option<protobuf::Schema>,
    /// Per aggregate: `count_star`, `count`, `sum`, `min`, `max`, `avg` or
    /// `approx_percentile`.
    #[prost(string, repeated, tag = "3")]
    funs: Vec<String>,
    /// Per aggregate its argument (absent for `count(*)`, in `has_arg`).
    #[prost(message, repeated, tag = "4")]
    args: Vec<PhysicalExprNode>,
    #[prost(bool, repeated, tag = "5")]
    has_arg: Vec<bool>,
    /// Output partitions, hash-partitioned on the keys or not.
    #[prost(uint64, tag = "6")]
    partitions: u64,
    #[prost(bool, tag = "7")]
    hashed: bool,
    /// Phase 1 must not read Parquet dictionary codes: setting
    /// `tsjoin.inline_aggregate_dictionary_scan` was off when the plan was
    /// made (whether the input qualifies is decided again on decoding).
    #[prost(bool, tag = "8")]
    no_dictionary_scan: bool,
    /// The constants of each `approx_percentile` aggregate, in order.
    #[prost(message, repeated, tag = "9")]
    percentiles: Vec<PercentileProto>,
    /// The aggregate run instead when the groups are many
    /// (`with_fallback`) and when over the memory limit
    /// (`with_memory_fallback`): datafusion-proto plans whose input is an
    /// `EmptyExec` in place of this operator's input (put back when they
    /// run). Absent: none, or one datafusion-proto cannot encode (the
    /// operator then runs inline whatever the groups, and over the limit
    /// reports `Resources exhausted`).
    #[prost(bytes = "vec", optional, tag = "10")]
    fallback: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "11")]
    on_exhausted: Option<Vec<u8>>,
}

/// An inline `approx_percentile`'s constants (its histogram kind follows
/// from its argument's type).
#[derive(Clone, PartialEq, Message)]
struct PercentileProto {
    #[prost(double, repeated, tag = "1")]
    ps: Vec<f64>,
    #[prost(uint32, tag = "2")]
    precision: u32,
    #[prost(bool, tag = "3")]
    list: bool,
}

#[derive(Clone, PartialEq, Message)]
struct WindowJoinNodeProto {
    #[prost(message, repeated, tag = "1")]
    exprs: Vec<LogicalExprNode>,
    #[prost(uint32, tag = "2")]
    keys: u32,
    #[prost(bool, tag = "3")]
    has_filter: bool,
    #[prost(string, repeated, tag = "4")]
    bounds: Vec<String>,
    #[prost(string, tag = "5")]
    prevailing: String,
    #[prost(string, repeated, tag = "6")]
    agg_names: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct WindowAggProto {
    #[prost(string, tag = "1")]
    kind: String,
    #[prost(string, tag = "2")]
    function: String,
    #[prost(bool, tag = "3")]
    distinct: bool,
    #[prost(bool, tag = "4")]
    ignore_nulls: bool,
    #[prost(bool, tag = "5")]
    pair: bool,
    #[prost(message, repeated, tag = "6")]
    args: Vec<PhysicalExprNode>,
    #[prost(string, tag = "7")]
    display: String,
}

#[derive(Clone, PartialEq, Message)]
struct WindowJoinExecProto {
    #[prost(message, repeated, tag = "1")]
    left_keys: Vec<PhysicalExprNode>,
    #[prost(message, repeated, tag = "2")]
    right_keys: Vec<PhysicalExprNode>,
    #[prost(message, optional, tag = "3")]
    left_ts: Option<PhysicalExprNode>,
    #[prost(message, optional, tag = "4")]
    right_ts: Option<PhysicalExprNode>,
    #[prost(message, optional, tag = "5")]
    lo: Option<PhysicalExprNode>,
    #[prost(message, optional, tag = "6")]
    hi: Option<PhysicalExprNode>,
    /// lo unit, lo direction, hi unit, hi direction
    #[prost(string, repeated, tag = "7")]
    bounds: Vec<String>,
    #[prost(string, tag = "8")]
    prevailing: String,
    #[prost(message, optional, tag = "9")]
    left_filter: Option<PhysicalExprNode>,
    #[prost(message, optional, tag = "10")]
    right_filter: Option<PhysicalExprNode>,
    #[prost(message, optional, tag = "11")]
    pair_filter: Option<PhysicalExprNode>,
    #[prost(message, repeated, tag = "12")]
    aggs: Vec<WindowAggProto>,
    /// Output fields of the aggregates.
    #[prost(message, optional, tag = "13")]
    agg_fields: Option<protobuf::Schema>,
    #[prost(uint64, tag = "14")]
    workers: u64,
    /// Negated so that plans encoded before these settings existed decode
    /// with the fast path and SIMD on (prost's default is false).
    #[prost(bool, tag = "15")]
    fast_path_off: bool,
    #[prost(bool, tag = "16")]
    simd_off: bool,
    #[prost(uint64, tag = "17")]
    sum_prefix_min: u64,
    /// Absent in plans encoded before the setting existed: the default.
    #[prost(uint64, optional, tag = "18")]
    min_max_table_min: Option<u64>,
    /// Off in plans encoded before the setting existed (its default).
    #[prost(bool, tag = "19")]
    streaming: bool,
    /// Partitioned mode; false (broadcast) in plans encoded before the
    /// mode existed.
    #[prost(bool, tag = "20")]
    partitioned: bool,
}

fn decode_err(what: &str) -> DataFusionError {
    internal_datafusion_err!("tsjoin codec: malformed {what}")
}

fn proto_err(e: impl std::fmt::Display) -> DataFusionError {
    internal_datafusion_err!("{}", e)
}

fn tagged(buf: &[u8]) -> Result<&[u8]> {
    match buf.split_first() {
        Some((&WINDOW_JOIN_TAG, rest)) => Ok(rest),
        _ => internal_err!("tsjoin codec: not a tsjoin node"),
    }
}

fn bound_strings(b: [(BoundUnit, Direction); 2]) -> Vec<String> {
    b.iter()
        .flat_map(|(u, d)| [u.as_str().to_string(), d.as_str().to_string()])
        .collect()
}

fn parse_bounds(v: &[String]) -> Result<[(BoundUnit, Direction); 2]> {
    let one = |u: &String, d: &String| -> Result<(BoundUnit, Direction)> {
        let unit = if u == "raw" {
            Some(BoundUnit::Raw)
        } else {
            BoundUnit::parse(u)
        };
        Ok((
            unit.ok_or_else(|| decode_err("bound unit"))?,
            Direction::parse(d).ok_or_else(|| decode_err("bound"))?,
        ))
    };
    if v.len() != 4 {
        return Err(decode_err("bounds"));
    }
    Ok([one(&v[0], &v[1])?, one(&v[2], &v[3])?])
}

/// Logical codec for [`WindowJoinNode`].
#[derive(Debug, Default, Clone, Copy)]
pub struct TsJoinLogicalCodec;

impl LogicalExtensionCodec for TsJoinLogicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[LogicalPlan],
        ctx: &TaskContext,
    ) -> Result<Extension> {
        if let Some((&HORIZON_JOIN_TAG, rest)) = buf.split_first() {
            let node = crate::horizon_join::proto::decode_node(rest, inputs, ctx, self)?;
            return Ok(Extension {
                node: Arc::new(node),
            });
        }
        if let Some((&ASOF_JOIN_TAG, rest)) = buf.split_first() {
            let node = crate::asof_join::proto::decode_node(rest, inputs, ctx, self)?;
            return Ok(Extension {
                node: Arc::new(node),
            });
        }
        if let Some((&TAIL_TAG, rest)) = buf.split_first() {
            let range = decode_range(rest).ok_or_else(|| decode_err("tail range"))?;
            let [input] = inputs else {
                return internal_err!("Tail needs one input");
            };
            let node = TailNode::new(input.clone(), range);
            return Ok(Extension {
                node: Arc::new(node),
            });
        }
        let msg = WindowJoinNodeProto::decode(tagged(buf)?)
            .map_err(|e| internal_datafusion_err!("{}", e))?;
        let exprs = msg
            .exprs
            .iter()
            .map(|e| Ok(parse_expr(e, ctx, self)?))
            .collect::<Result<Vec<_>>>()?;
        let [lo, hi] = parse_bounds(&msg.bounds)?;
        let layout = ExprLayout {
            n_keys: msg.keys as usize,
            has_filter: msg.has_filter,
            lo,
            hi,
            prevailing: Prevailing::parse(&msg.prevailing)
                .ok_or_else(|| decode_err("prevailing"))?,
            agg_names: msg.agg_names,
        };
        let node = WindowJoinNode::try_from_exprs(inputs.to_vec(), exprs, layout)?;
        Ok(Extension {
            node: Arc::new(node),
        })
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> Result<()> {
        if let Some(n) = node
            .node
            .as_any()
            .downcast_ref::<crate::horizon_join::HorizonJoinNode>()
        {
            buf.push(HORIZON_JOIN_TAG);
            return crate::horizon_join::proto::encode_node(n, self, buf);
        }
        if let Some(n) = node
            .node
            .as_any()
            .downcast_ref::<crate::asof_join::AsofJoinNode>()
        {
            buf.push(ASOF_JOIN_TAG);
            return crate::asof_join::proto::encode_node(n, self, buf);
        }
        if let Some(n) = node.node.as_any().downcast_ref::<TailNode>() {
            buf.push(TAIL_TAG);
            encode_range(n.range(), buf);
            return Ok(());
        }
        let Some(n) = node.node.as_any().downcast_ref::<WindowJoinNode>() else {
            return internal_err!("tsjoin codec cannot encode {}", node.node.name());
        };
        let layout = n.expr_layout();
        let msg = WindowJoinNodeProto {
            exprs: n
                .expressions()
                .iter()
                .map(|e| Ok(serialize_expr(e, self)?))
                .collect::<Result<_>>()?,
            keys: layout.n_keys as u32,
            has_filter: layout.has_filter,
            bounds: bound_strings([layout.lo, layout.hi]),
            prevailing: layout.prevailing.as_str().into(),
            agg_names: layout.agg_names,
        };
        buf.push(WINDOW_JOIN_TAG);
        msg.encode(buf)
            .map_err(|e| internal_datafusion_err!("{}", e))
    }

    fn try_decode_table_provider(
        &self,
        _buf: &[u8],
        _table_ref: &datafusion::common::TableReference,
        _schema: SchemaRef,
        _ctx: &TaskContext,
    ) -> Result<Arc<dyn datafusion::catalog::TableProvider>> {
        internal_err!("tsjoin codec has no table providers")
    }

    fn try_encode_table_provider(
        &self,
        _table_ref: &datafusion::common::TableReference,
        _node: Arc<dyn datafusion::catalog::TableProvider>,
        _buf: &mut Vec<u8>,
    ) -> Result<()> {
        internal_err!("tsjoin codec has no table providers")
    }
}

/// Physical codec for [`WindowJoinExec`].
#[derive(Debug, Default, Clone, Copy)]
pub struct TsJoinPhysicalCodec;

impl TsJoinPhysicalCodec {
    fn ser(&self, e: &Arc<dyn PhysicalExpr>) -> Result<PhysicalExprNode> {
        serialize_physical_expr(e, self)
    }

    fn de(
        &self,
        e: &Option<PhysicalExprNode>,
        ctx: &TaskContext,
        schema: &Schema,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        let e = e.as_ref().ok_or_else(|| decode_err("expression"))?;
        parse_physical_expr(e, ctx, schema, self)
    }
}

impl TsJoinPhysicalCodec {
    fn encode_inline_aggregate(
        &self,
        exec: &InlineAggregateExec,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        let partitioning = exec.properties().output_partitioning();
        let msg = InlineAggregateProto {
            group_exprs: exec
                .group_exprs
                .iter()
                .map(|(e, _)| self.ser(e))
                .collect::<Result<_>>()?,
            schema: Some(exec.schema.as_ref().try_into().map_err(proto_err)?),
            funs: exec.aggs.iter().map(|a| a.fun.name().to_string()).collect(),
            args: exec
                .aggs
                .iter()
                .filter_map(|a| a.arg.as_ref())
                .map(|e| self.ser(e))
                .collect::<Result<_>>()?,
            has_arg: exec.aggs.iter().map(|a| a.arg.is_some()).collect(),
            no_dictionary_scan: !exec.dictionary_scan,
            percentiles: exec
                .aggs
                .iter()
                .filter_map(|a| a.percentile.as_ref())
                .map(|p| PercentileProto {
                    ps: p.ps.clone(),
                    precision: p.layout.precision as u32,
                    list: p.list,
                })
                .collect(),
            partitions: partitioning.partition_count() as u64,
            hashed: matches!(partitioning, Partitioning::Hash(..)),
            fallback: self.encode_template(exec.fallback.as_ref(), &exec.input),
            on_exhausted: self.encode_template(exec.on_exhausted.as_ref(), &exec.input),
        };
        buf.push(INLINE_AGGREGATE_TAG);
        msg.encode(buf).map_err(proto_err)
    }

    /// A fallback template in datafusion-proto's encoding, its input
    /// (`input`'s place) an `EmptyExec`; `None` when there is none or it
    /// cannot be encoded (the fallback is an optimisation: the operator
    /// answers without it).
    fn encode_template(
        &self,
        template: Option<&Arc<dyn ExecutionPlan>>,
        input: &Arc<dyn ExecutionPlan>,
    ) -> Option<Vec<u8>> {
        let detached =
            with_leaf(template?, Arc::new(EmptyExec::new(input.schema()))).ok()?;
        let node = PhysicalPlanNode::try_from_physical_plan(detached, self).ok()?;
        Some(node.encode_to_vec())
    }

    /// [`Self::encode_template`]'s bytes as a plan.
    fn decode_template(
        &self,
        bytes: &[u8],
        ctx: &TaskContext,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        PhysicalPlanNode::decode(bytes)
            .map_err(proto_err)?
            .try_into_physical_plan(ctx, self)
    }

    fn decode_inline_aggregate(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let msg = InlineAggregateProto::decode(buf).map_err(proto_err)?;
        let [input] = inputs else {
            return internal_err!("InlineAggregateExec needs one input");
        };
        let in_schema = input.schema();
        let schema: Schema = msg
            .schema
            .as_ref()
            .ok_or_else(|| decode_err("schema"))?
            .try_into()
            .map_err(proto_err)?;
        let schema = Arc::new(schema);
        let keys = msg.group_exprs.len();
        if schema.fields().len() != keys + msg.funs.len()
            || msg.has_arg.len() != msg.funs.len()
        {
            return Err(decode_err("inline aggregate"));
        }
        let group_exprs = msg
            .group_exprs
            .iter()
            .zip(schema.fields())
            .map(|(e, f)| {
                Ok((
                    parse_physical_expr(e, ctx, &in_schema, self)?,
                    f.name().clone(),
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut args = msg.args.iter();
        let mut percentiles = msg.percentiles.iter();
        let mut aggs = vec![];
        for ((fun, &has_arg), field) in msg
            .funs
            .iter()
            .zip(&msg.has_arg)
            .zip(schema.fields().iter().skip(keys))
        {
            let fun = AggFn::from_encoded(fun)
                .ok_or_else(|| decode_err("aggregate function"))?;
            let arg = if has_arg {
                Some(parse_physical_expr(
                    args.next().ok_or_else(|| decode_err("argument"))?,
                    ctx,
                    &in_schema,
                    self,
                )?)
            } else {
                None
            };
            let percentile = match (fun, &arg) {
                (AggFn::Percentile, Some(arg)) => {
                    let p = percentiles
                        .next()
                        .filter(|p| p.precision <= 5)
                        .ok_or_else(|| decode_err("percentile"))?;
                    Some(Arc::new(PercentileSpec::new(
                        p.precision as u8,
                        &arg.data_type(&in_schema)?,
                        p.ps.clone(),
                        p.list,
                    )))
                }
                (AggFn::Percentile, None) => return Err(decode_err("percentile")),
                _ => None,
            };
            aggs.push(InlineAgg {
                fun,
                arg,
                field: Arc::clone(field),
                percentile,
            });
        }
        let n = msg.partitions.max(1) as usize;
        let partitioning = if msg.hashed {
            let cols = (0..keys).map(|i| {
                Ok(Arc::new(Column::new(schema.field(i).name(), i))
                    as Arc<dyn PhysicalExpr>)
            });
            Partitioning::Hash(cols.collect::<Result<_>>()?, n)
        } else {
            Partitioning::UnknownPartitioning(n)
        };
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            partitioning,
            EmissionType::Final,
            Boundedness::Bounded,
        );
        let mut exec = InlineAggregateExec::try_new(
            Arc::clone(input),
            group_exprs,
            aggs,
            Arc::new(properties),
        )?
        .with_dictionary_scan(!msg.no_dictionary_scan);
        if let Some(bytes) = &msg.fallback {
            exec = exec.with_fallback(self.decode_template(bytes, ctx)?);
        }
        if let Some(bytes) = &msg.on_exhausted {
            exec = exec.with_memory_fallback(self.decode_template(bytes, ctx)?);
        }
        Ok(Arc::new(exec))
    }
}

impl PhysicalExtensionCodec for TsJoinPhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        _converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if let Some((&PRIORITY_GATE_TAG, rest)) = buf.split_first() {
            return crate::priority::decode_gate(rest, inputs, ctx);
        }
        if let Some((&INLINE_AGGREGATE_TAG, rest)) = buf.split_first() {
            return self.decode_inline_aggregate(rest, inputs, ctx);
        }
        if let Some((&ASOF_JOIN_TAG, rest)) = buf.split_first() {
            return crate::asof_join::proto::decode_exec(rest, inputs, ctx, self);
        }
        if let Some((&HORIZON_JOIN_TAG, rest)) = buf.split_first() {
            return crate::horizon_join::proto::decode_exec(rest, inputs, ctx, self);
        }
        if let Some((&FILTER_AGGREGATE_TAG, rest)) = buf.split_first() {
            return crate::filter_aggregate::proto::decode_exec(rest, inputs, ctx, self);
        }
        if let Some((&NEWEST_FIRST_TAG, rest)) = buf.split_first() {
            return crate::newest_first::proto::decode_exec(rest, inputs, ctx, self);
        }
        if let Some((&LIP_FILTER_TAG, rest)) = buf.split_first() {
            return crate::join_filter::proto::decode_exec(rest, inputs, ctx, self);
        }
        if let Some((&LIP_BUILD_KEYS_TAG, rest)) = buf.split_first() {
            return crate::join_filter::proto::decode_build_keys(rest, inputs, ctx, self);
        }
        if let Some((&LATEST_BY_TAG, rest)) = buf.split_first() {
            return crate::latest_by::proto::decode_exec(rest, inputs, ctx, self);
        }
        if let Some((&TAIL_TAG, rest)) = buf.split_first() {
            let range = decode_range(rest).ok_or_else(|| decode_err("tail range"))?;
            let [input] = inputs else {
                return internal_err!("TailExec needs one input");
            };
            // `whole_input` only steers planning (the scheduler plans from
            // the logical plan with its own settings); a decoded plan is
            // already planned, so it does not travel.
            return Ok(Arc::new(TailExec::new(Arc::clone(input), range)));
        }
        let msg = WindowJoinExecProto::decode(tagged(buf)?)
            .map_err(|e| internal_datafusion_err!("{}", e))?;
        let [left, right] = inputs else {
            return internal_err!("WindowJoinExec needs two inputs");
        };
        let (ls, rs) = (left.schema(), right.schema());
        let pair = Schema::new(
            ls.fields()
                .iter()
                .chain(rs.fields().iter())
                .cloned()
                .collect::<Vec<_>>(),
        );
        let side = |pair_input: bool| if pair_input { &pair } else { rs.as_ref() };
        let many =
            |v: &[PhysicalExprNode], s: &Schema| -> Result<Vec<Arc<dyn PhysicalExpr>>> {
                v.iter()
                    .map(|e| parse_physical_expr(e, ctx, s, self))
                    .collect()
            };
        let opt = |e: &Option<PhysicalExprNode>,
                   s: &Schema|
         -> Result<Option<Arc<dyn PhysicalExpr>>> {
            e.as_ref()
                .map(|e| parse_physical_expr(e, ctx, s, self))
                .transpose()
        };
        let agg_fields: Schema = msg
            .agg_fields
            .as_ref()
            .ok_or_else(|| decode_err("aggregate fields"))?
            .try_into()
            .map_err(|e: datafusion_proto::protobuf::FromProtoError| {
                internal_datafusion_err!("{}", e)
            })?;
        if agg_fields.fields().len() != msg.aggs.len() {
            return Err(decode_err("aggregate fields"));
        }
        let mut aggs = vec![];
        for (a, field) in msg.aggs.iter().zip(agg_fields.fields()) {
            let schema = side(a.pair);
            let args = many(&a.args, schema)?;
            let kind = match a.kind.as_str() {
                "count_star" => WindowAggKind::CountStar,
                "first" => WindowAggKind::First,
                "last" => WindowAggKind::Last,
                "first_not_null" => WindowAggKind::FirstNotNull,
                "last_not_null" => WindowAggKind::LastNotNull,
                "min_float" => WindowAggKind::MinFloat,
                "max_float" => WindowAggKind::MaxFloat,
                "accumulate" => {
                    let udaf = ctx.udaf(&a.function)?;
                    let mut b = AggregateExprBuilder::new(udaf, args.clone())
                        .schema(Arc::new(schema.clone()))
                        .alias(field.name())
                        .human_display(a.display.clone())
                        .with_ignore_nulls(a.ignore_nulls);
                    if a.distinct {
                        b = b.distinct();
                    }
                    WindowAggKind::Accumulate(Arc::new(b.build()?))
                }
                _ => return Err(decode_err("aggregate kind")),
            };
            let input = if a.pair {
                AggInput::Pair
            } else {
                AggInput::Right
            };
            aggs.push(WindowAgg {
                kind,
                input,
                args,
                field: Arc::clone(field),
                display: a.display.clone(),
            });
        }
        let left_ts = self.de(&msg.left_ts, ctx, &ls)?;
        let right_ts = self.de(&msg.right_ts, ctx, &rs)?;
        let [lo, hi] = parse_bounds(&msg.bounds)?;
        let scale = TimeScale::new(
            timestamp_unit("left timestamp", &left_ts.data_type(&ls)?)?,
            timestamp_unit("right timestamp", &right_ts.data_type(&rs)?)?,
        );
        let spec = WindowJoinSpec {
            left_keys: many(&msg.left_keys, &ls)?,
            right_keys: many(&msg.right_keys, &rs)?,
            left_ts,
            right_ts,
            lo: PhysicalBound::new(self.de(&msg.lo, ctx, &ls)?, lo.0, lo.1, &scale),
            hi: PhysicalBound::new(self.de(&msg.hi, ctx, &ls)?, hi.0, hi.1, &scale),
            scale,
            prevailing: Prevailing::parse(&msg.prevailing)
                .ok_or_else(|| decode_err("prevailing"))?,
            left_filter: opt(&msg.left_filter, &ls)?,
            right_filter: opt(&msg.right_filter, &rs)?,
            pair_filter: opt(&msg.pair_filter, &pair)?,
            aggs,
        };
        let settings = WindowJoinSettings {
            workers: msg.workers as usize,
            fast_path: !msg.fast_path_off,
            simd: !msg.simd_off,
            sum_prefix_min: msg.sum_prefix_min as usize,
            min_max_table_min: msg
                .min_max_table_min
                .map_or(crate::window_join::DEFAULT_MIN_MAX_TABLE_MIN, |v| {
                    v as usize
                }),
            streaming: msg.streaming,
        };
        let exec = WindowJoinExec::try_new(
            Arc::clone(left),
            Arc::clone(right),
            Arc::new(spec),
            settings,
        )?
        .with_distribution(crate::temporal::JoinDistribution::decode(msg.partitioned))?;
        Ok(Arc::new(exec))
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        _converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        if let Some(exec) = node.downcast_ref::<crate::priority::PriorityGateExec>() {
            buf.push(PRIORITY_GATE_TAG);
            buf.extend_from_slice(&exec.priority().value().to_le_bytes());
            return Ok(());
        }
        if let Some(exec) = node.downcast_ref::<InlineAggregateExec>() {
            return self.encode_inline_aggregate(exec, buf);
        }
        if let Some(exec) = node.downcast_ref::<crate::asof_join::AsofJoinExec>() {
            buf.push(ASOF_JOIN_TAG);
            return crate::asof_join::proto::encode_exec(exec, self, buf);
        }
        if let Some(exec) = node.downcast_ref::<crate::horizon_join::HorizonJoinExec>() {
            buf.push(HORIZON_JOIN_TAG);
            return crate::horizon_join::proto::encode_exec(exec, self, buf);
        }
        if let Some(exec) =
            node.downcast_ref::<crate::filter_aggregate::FilterAggregateExec>()
        {
            buf.push(FILTER_AGGREGATE_TAG);
            return crate::filter_aggregate::proto::encode_exec(exec, self, buf);
        }
        if let Some(exec) =
            node.downcast_ref::<crate::newest_first::NewestFirstTopKExec>()
        {
            buf.push(NEWEST_FIRST_TAG);
            return crate::newest_first::proto::encode_exec(exec, self, buf);
        }
        if let Some(exec) = node.downcast_ref::<crate::join_filter::LipFilterExec>() {
            buf.push(LIP_FILTER_TAG);
            return crate::join_filter::proto::encode_exec(exec, self, buf);
        }
        if let Some(exec) = node.downcast_ref::<crate::join_filter::LipBuildKeysExec>() {
            buf.push(LIP_BUILD_KEYS_TAG);
            return crate::join_filter::proto::encode_build_keys(exec, self, buf);
        }
        if let Some(exec) = node.downcast_ref::<crate::latest_by::LatestByExec>() {
            buf.push(LATEST_BY_TAG);
            return crate::latest_by::proto::encode_exec(exec, self, buf);
        }
        if let Some(exec) = node.downcast_ref::<TailExec>() {
            buf.push(TAIL_TAG);
            encode_range(exec.range(), buf);
            return Ok(());
        }
        let Some(exec) = node.downcast_ref::<WindowJoinExec>() else {
            return internal_err!("tsjoin codec cannot encode {}", node.name());
        };
        let s = exec.spec();
        let many = |v: &[Arc<dyn PhysicalExpr>]| -> Result<Vec<PhysicalExprNode>> {
            v.iter().map(|e| self.ser(e)).collect()
        };
        let opt = |e: &Option<Arc<dyn PhysicalExpr>>| {
            e.as_ref().map(|e| self.ser(e)).transpose()
        };
        let aggs = s
            .aggs
            .iter()
            .map(|a| {
                let (kind, function, distinct, ignore_nulls) = match &a.kind {
                    WindowAggKind::CountStar => {
                        ("count_star", String::new(), false, false)
                    }
                    WindowAggKind::First => ("first", String::new(), false, false),
                    WindowAggKind::Last => ("last", String::new(), false, false),
                    WindowAggKind::FirstNotNull => {
                        ("first_not_null", String::new(), false, false)
                    }
                    WindowAggKind::LastNotNull => {
                        ("last_not_null", String::new(), false, false)
                    }
                    WindowAggKind::MinFloat => ("min_float", String::new(), false, false),
                    WindowAggKind::MaxFloat => ("max_float", String::new(), false, false),
                    WindowAggKind::Accumulate(e) => (
                        "accumulate",
                        e.fun().name().to_string(),
                        e.is_distinct(),
                        e.ignore_nulls(),
                    ),
                };
                Ok(WindowAggProto {
                    kind: kind.into(),
                    function,
                    distinct,
                    ignore_nulls,
                    pair: a.input == AggInput::Pair,
                    args: many(&a.args)?,
                    display: a.display.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let fields = Schema::new(
            s.aggs
                .iter()
                .map(|a| Arc::clone(&a.field))
                .collect::<Vec<_>>(),
        );
        let msg = WindowJoinExecProto {
            left_keys: many(&s.left_keys)?,
            right_keys: many(&s.right_keys)?,
            left_ts: Some(self.ser(&s.left_ts)?),
            right_ts: Some(self.ser(&s.right_ts)?),
            lo: Some(self.ser(s.lo.value())?),
            hi: Some(self.ser(s.hi.value())?),
            bounds: bound_strings([
                (s.lo.unit(), s.lo.direction()),
                (s.hi.unit(), s.hi.direction()),
            ]),
            prevailing: s.prevailing.as_str().into(),
            left_filter: opt(&s.left_filter)?,
            right_filter: opt(&s.right_filter)?,
            pair_filter: opt(&s.pair_filter)?,
            aggs,
            agg_fields: Some((&fields).try_into().map_err(
                |e: datafusion_proto::protobuf::ToProtoError| {
                    internal_datafusion_err!("{}", e)
                },
            )?),
            workers: exec.workers() as u64,
            fast_path_off: !exec.settings().fast_path,
            simd_off: !exec.settings().simd,
            sum_prefix_min: exec.settings().sum_prefix_min as u64,
            min_max_table_min: Some(exec.settings().min_max_table_min as u64),
            streaming: exec.settings().streaming,
            partitioned: exec.distribution().encode(),
        };
        buf.push(WINDOW_JOIN_TAG);
        msg.encode(buf)
            .map_err(|e| internal_datafusion_err!("{}", e))
    }
}

/// Appends a tsjoin operator's prost message `msg` (its fields, after the
/// tag) to `buf`.
///
/// ```ignore
/// buf.push(NEWEST_FIRST_TAG);
/// encode_message(&msg, buf)?;
/// ```
pub(crate) fn encode_message(msg: &impl Message, buf: &mut Vec<u8>) -> Result<()> {
    msg.encode(buf).map_err(proto_err)
}

/// An operator's embedded projection as its message holds it: the indices
/// and whether there is one (an empty list alone cannot tell "no column"
/// from "no projection").
///
/// ```ignore
/// let (projection, projected) = encode_projection(exec.projection());
/// ```
pub(crate) fn encode_projection(projection: Option<&[usize]>) -> (Vec<u32>, bool) {
    (
        projection
            .unwrap_or_default()
            .iter()
            .map(|&i| i as u32)
            .collect(),
        projection.is_some(),
    )
}

/// The embedded projection [`encode_projection`] wrote.
pub(crate) fn decode_projection(indices: &[u32], projected: bool) -> Option<Vec<usize>> {
    projected.then(|| indices.iter().map(|&i| i as usize).collect())
}

/// Decodes a tsjoin operator's prost message `M` (its fields, after the tag).
pub(crate) fn decode_message<M: Message + Default>(buf: &[u8]) -> Result<M> {
    M::decode(buf).map_err(proto_err)
}

/// What decoding a one-input tsjoin operator named `name` starts with: its
/// only input (`{name} needs one input` otherwise), then its message `M`.
///
/// ```ignore
/// let (msg, input) = decode_one_input::<NewestFirstProto>("NewestFirstTopKExec", buf, inputs)?;
/// ```
pub(crate) fn decode_one_input<'a, M: Message + Default>(
    name: &str,
    buf: &[u8],
    inputs: &'a [Arc<dyn ExecutionPlan>],
) -> Result<(M, &'a Arc<dyn ExecutionPlan>)> {
    let [input] = inputs else {
        return internal_err!("{name} needs one input");
    };
    Ok((decode_message(buf)?, input))
}
