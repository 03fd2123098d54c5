//! datafusion-proto encodings of [`HorizonJoinNode`] and
//! [`HorizonJoinExec`], called by [`crate::codec`] for bytes tagged
//! [`crate::codec::HORIZON_JOIN_TAG`].

use super::exec::HorizonJoinExec;
use super::fold::OffsetFold;
use super::logical::HorizonJoinNode;
use super::spec::{HorizonJoinSpec, HorizonOffsets, HorizonRightSpec};
use crate::codec::{decode_projection, encode_projection};
use crate::temporal::JoinDistribution;
use crate::window_join::{TimeScale, timestamp_unit};
use datafusion::common::{DataFusionError, Result, internal_datafusion_err};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{LogicalPlan, UserDefinedLogicalNodeCore};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::aggregates::{
    AggregateExec, AggregateMode, PhysicalGroupBy,
};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::logical_plan::from_proto::parse_expr;
use datafusion_proto::logical_plan::to_proto::serialize_expr;
use datafusion_proto::physical_plan::AsExecutionPlan;
use datafusion_proto::physical_plan::PhysicalExtensionCodec;
use datafusion_proto::physical_plan::from_proto::parse_physical_expr;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use datafusion_proto::protobuf::PhysicalPlanNode;
use datafusion_proto::protobuf::{LogicalExprNode, PhysicalExprNode};
use prost::Message;
use std::sync::Arc;

#[derive(Clone, PartialEq, Message)]
struct HorizonNodeProto {
    /// In [`HorizonJoinNode`]'s `expressions()` order.
    #[prost(message, repeated, tag = "1")]
    exprs: Vec<LogicalExprNode>,
    /// Per right: key count.
    #[prost(uint32, repeated, tag = "2")]
    keys: Vec<u32>,
    /// Per right: whether it has a filter.
    #[prost(bool, repeated, tag = "3")]
    has_filter: Vec<bool>,
    #[prost(bool, tag = "4")]
    range: bool,
    /// RANGE: from, to, step; LIST: the offsets (nanoseconds).
    #[prost(int64, repeated, tag = "5")]
    offsets: Vec<i64>,
    #[prost(string, tag = "6")]
    alias: String,
}

#[derive(Clone, PartialEq, Message)]
struct RightProto {
    #[prost(message, repeated, tag = "1")]
    left_keys: Vec<PhysicalExprNode>,
    #[prost(message, repeated, tag = "2")]
    right_keys: Vec<PhysicalExprNode>,
    #[prost(message, optional, tag = "3")]
    right_ts: Option<PhysicalExprNode>,
    #[prost(message, optional, tag = "4")]
    left_filter: Option<PhysicalExprNode>,
}

#[derive(Clone, PartialEq, Message)]
struct HorizonExecProto {
    #[prost(message, optional, tag = "1")]
    left_ts: Option<PhysicalExprNode>,
    #[prost(message, repeated, tag = "2")]
    rights: Vec<RightProto>,
    #[prost(bool, tag = "3")]
    range: bool,
    #[prost(int64, repeated, tag = "4")]
    offsets: Vec<i64>,
    #[prost(string, tag = "5")]
    alias: String,
    /// Partitioned mode; false (broadcast) in plans encoded before the
    /// mode existed.
    #[prost(bool, tag = "6")]
    partitioned: bool,
    /// The embedded projection (indices into the join's full output), when
    /// `projected`; plans encoded before it existed emit every column.
    #[prost(uint32, repeated, tag = "7")]
    projection: Vec<u32>,
    #[prost(bool, tag = "8")]
    projected: bool,
    /// The folded aggregates (see [`OffsetFold`]), as datafusion-proto's
    /// encoding of the aggregate the fold replaced, over an `EmptyExec`
    /// of the pairs' schema; empty without a fold.
    #[prost(bytes = "vec", tag = "9")]
    fold: Vec<u8>,
}

fn err(what: &str) -> DataFusionError {
    internal_datafusion_err!("tsjoin codec: malformed HORIZON JOIN {what}")
}

fn offsets_parts(o: &HorizonOffsets) -> (bool, Vec<i64>) {
    match o {
        HorizonOffsets::Range { from, to, step } => (true, vec![*from, *to, *step]),
        HorizonOffsets::List(v) => (false, v.clone()),
    }
}

fn offsets_of(range: bool, v: &[i64]) -> Result<HorizonOffsets> {
    Ok(if range {
        let [from, to, step] = v else {
            return Err(err("range"));
        };
        HorizonOffsets::Range {
            from: *from,
            to: *to,
            step: *step,
        }
    } else {
        HorizonOffsets::List(v.to_vec())
    })
}

/// Encodes a logical node (without the tag byte).
pub(crate) fn encode_node(
    n: &HorizonJoinNode,
    codec: &dyn LogicalExtensionCodec,
    buf: &mut Vec<u8>,
) -> Result<()> {
    let (range, offsets) = offsets_parts(&n.clause.offsets);
    let shape = n.shape();
    let msg = HorizonNodeProto {
        exprs: n
            .expressions()
            .iter()
            .map(|e| Ok(serialize_expr(e, codec)?))
            .collect::<Result<_>>()?,
        keys: shape.iter().map(|(k, _)| *k as u32).collect(),
        has_filter: shape.iter().map(|(_, f)| *f).collect(),
        range,
        offsets,
        alias: n.clause.alias.clone(),
    };
    crate::codec::encode_message(&msg, buf)
}

/// Decodes a logical node (without the tag byte).
pub(crate) fn decode_node(
    buf: &[u8],
    inputs: &[LogicalPlan],
    ctx: &TaskContext,
    codec: &dyn LogicalExtensionCodec,
) -> Result<HorizonJoinNode> {
    let msg = crate::codec::decode_message::<HorizonNodeProto>(buf)?;
    let exprs = msg
        .exprs
        .iter()
        .map(|e| Ok(parse_expr(e, ctx, codec)?))
        .collect::<Result<Vec<_>>>()?;
    if msg.keys.len() != msg.has_filter.len() {
        return Err(err("shape"));
    }
    let shape: Vec<(usize, bool)> = msg
        .keys
        .iter()
        .zip(&msg.has_filter)
        .map(|(k, f)| (*k as usize, *f))
        .collect();
    HorizonJoinNode::try_from_exprs(
        inputs.to_vec(),
        exprs,
        &shape,
        offsets_of(msg.range, &msg.offsets)?,
        msg.alias,
    )
}

/// Encodes an operator (without the tag byte).
pub(crate) fn encode_exec(
    exec: &HorizonJoinExec,
    codec: &dyn PhysicalExtensionCodec,
    buf: &mut Vec<u8>,
) -> Result<()> {
    let s = exec.spec();
    let ser = |e: &Arc<dyn PhysicalExpr>| serialize_physical_expr(e, codec);
    let many =
        |v: &[Arc<dyn PhysicalExpr>]| v.iter().map(ser).collect::<Result<Vec<_>>>();
    let (range, offsets) = offsets_parts(&s.offsets);
    let (projection, projected) = encode_projection(exec.projection());
    let msg = HorizonExecProto {
        left_ts: Some(ser(&s.left_ts)?),
        rights: s
            .rights
            .iter()
            .map(|r| {
                Ok(RightProto {
                    left_keys: many(&r.left_keys)?,
                    right_keys: many(&r.right_keys)?,
                    right_ts: Some(ser(&r.right_ts)?),
                    left_filter: r.left_filter.as_ref().map(ser).transpose()?,
                })
            })
            .collect::<Result<_>>()?,
        range,
        offsets,
        alias: exec.alias().to_string(),
        partitioned: exec.distribution().encode(),
        projection,
        projected,
        fold: match exec.fold() {
            Some(f) => encode_fold(f, codec)?,
            None => vec![],
        },
    };
    crate::codec::encode_message(&msg, buf)
}

/// Decodes an operator (without the tag byte).
pub(crate) fn decode_exec(
    buf: &[u8],
    inputs: &[Arc<dyn ExecutionPlan>],
    ctx: &TaskContext,
    codec: &dyn PhysicalExtensionCodec,
) -> Result<Arc<dyn ExecutionPlan>> {
    let msg = crate::codec::decode_message::<HorizonExecProto>(buf)?;
    let Some((left, rights)) = inputs.split_first() else {
        return Err(err("inputs"));
    };
    if rights.len() != msg.rights.len() {
        return Err(err("inputs"));
    }
    let ls = left.schema();
    let left_ts = parse_physical_expr(
        msg.left_ts.as_ref().ok_or_else(|| err("expression"))?,
        ctx,
        &ls,
        codec,
    )?;
    let left_unit = timestamp_unit("left timestamp", &left_ts.data_type(&ls)?)?;
    let mut specs = vec![];
    for (r, input) in msg.rights.iter().zip(rights) {
        let rs = input.schema();
        let many = |v: &[PhysicalExprNode], s| -> Result<Vec<Arc<dyn PhysicalExpr>>> {
            v.iter()
                .map(|e| parse_physical_expr(e, ctx, s, codec))
                .collect()
        };
        let right_ts = parse_physical_expr(
            r.right_ts.as_ref().ok_or_else(|| err("expression"))?,
            ctx,
            &rs,
            codec,
        )?;
        let scale = TimeScale::new(
            left_unit,
            timestamp_unit("right timestamp", &right_ts.data_type(&rs)?)?,
        );
        specs.push(HorizonRightSpec {
            left_keys: many(&r.left_keys, &ls)?,
            right_keys: many(&r.right_keys, &rs)?,
            right_ts,
            scale,
            left_filter: r
                .left_filter
                .as_ref()
                .map(|e| parse_physical_expr(e, ctx, &ls, codec))
                .transpose()?,
        });
    }
    let spec = HorizonJoinSpec {
        left_ts,
        offsets: offsets_of(msg.range, &msg.offsets)?,
        rights: specs,
    };
    Ok(Arc::new(
        HorizonJoinExec::try_new(
            Arc::clone(left),
            rights.to_vec(),
            Arc::new(spec),
            msg.alias,
        )?
        .with_distribution(JoinDistribution::decode(msg.partitioned))?
        .with_projection(decode_projection(&msg.projection, msg.projected))?
        .with_fold(if msg.fold.is_empty() {
            None
        } else {
            Some(Arc::new(decode_fold(&msg.fold, ctx, codec)?))
        })?,
    ))
}

/// The aggregate an [`OffsetFold`] replaced, over an `EmptyExec` of its
/// pairs, in datafusion-proto's encoding (so every aggregate function
/// DataFusion can encode travels).
fn encode_fold(fold: &OffsetFold, codec: &dyn PhysicalExtensionCodec) -> Result<Vec<u8>> {
    let pairs = Arc::clone(&fold.pairs);
    let offset = fold.key;
    let key: Arc<dyn PhysicalExpr> =
        Arc::new(Column::new(pairs.field(offset).name(), offset));
    let group_by =
        PhysicalGroupBy::new_single(vec![(key, fold.schema.field(0).name().clone())]);
    let mode = if fold.partial {
        AggregateMode::Partial
    } else {
        AggregateMode::Single
    };
    let agg = AggregateExec::try_new(
        mode,
        group_by,
        fold.aggr.clone(),
        vec![None; fold.aggr.len()],
        Arc::new(EmptyExec::new(Arc::clone(&pairs))),
        pairs,
    )?;
    let node = PhysicalPlanNode::try_from_physical_plan(Arc::new(agg), codec)?;
    Ok(node.encode_to_vec())
}

/// Decodes [`encode_fold`]'s bytes.
fn decode_fold(
    bytes: &[u8],
    ctx: &TaskContext,
    codec: &dyn PhysicalExtensionCodec,
) -> Result<OffsetFold> {
    let node = PhysicalPlanNode::decode(bytes).map_err(|_| err("fold"))?;
    let plan = node.try_into_physical_plan(ctx, codec)?;
    let agg = plan
        .downcast_ref::<AggregateExec>()
        .ok_or_else(|| err("fold"))?;
    let key = agg
        .group_expr()
        .expr()
        .first()
        .and_then(|(e, _)| e.downcast_ref::<Column>());
    Ok(OffsetFold {
        key: key.ok_or_else(|| err("fold"))?.index(),
        aggr: agg.aggr_expr().to_vec(),
        partial: *agg.mode() == AggregateMode::Partial,
        pairs: agg.input().schema(),
        schema: agg.schema(),
    })
}
