//! datafusion-proto encodings of [`AsofJoinNode`] and [`AsofJoinExec`],
//! called by [`crate::codec`] for bytes tagged [`crate::codec::ASOF_JOIN_TAG`].

use super::exec::AsofJoinExec;
use super::logical::AsofJoinNode;
use super::spec::{AsofJoinSpec, AsofMatch, Tolerance, ToleranceUnit};
use crate::codec::{decode_projection, encode_projection};
use crate::temporal::JoinDistribution;
use crate::window_join::{TimeScale, timestamp_unit};
use datafusion::arrow::datatypes::Schema;
use datafusion::common::JoinType;
use datafusion::common::{DataFusionError, Result, internal_datafusion_err};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{LogicalPlan, UserDefinedLogicalNodeCore};
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::logical_plan::from_proto::parse_expr;
use datafusion_proto::logical_plan::to_proto::serialize_expr;
use datafusion_proto::physical_plan::PhysicalExtensionCodec;
use datafusion_proto::physical_plan::from_proto::parse_physical_expr;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use datafusion_proto::protobuf::{LogicalExprNode, PhysicalExprNode};
use prost::Message;
use std::sync::Arc;

#[derive(Clone, PartialEq, Message)]
struct AsofNodeProto {
    /// Left keys, right keys, left time, right time, then the filter.
    #[prost(message, repeated, tag = "1")]
    exprs: Vec<LogicalExprNode>,
    #[prost(uint32, tag = "2")]
    keys: u32,
    #[prost(bool, tag = "3")]
    has_filter: bool,
    #[prost(string, tag = "4")]
    matching: String,
    /// Tolerance amount (0: none) and unit letter.
    #[prost(int64, tag = "5")]
    tolerance: i64,
    #[prost(string, tag = "6")]
    tolerance_unit: String,
    /// The join type (`JoinType`'s name); empty (Left) in plans encoded
    /// before it existed.
    #[prost(string, tag = "7")]
    join_type: String,
    /// Whether the last expression is the pair filter.
    #[prost(bool, tag = "8")]
    has_pair_filter: bool,
}

#[derive(Clone, PartialEq, Message)]
struct AsofExecProto {
    #[prost(message, repeated, tag = "1")]
    left_keys: Vec<PhysicalExprNode>,
    #[prost(message, repeated, tag = "2")]
    right_keys: Vec<PhysicalExprNode>,
    #[prost(message, optional, tag = "3")]
    left_ts: Option<PhysicalExprNode>,
    #[prost(message, optional, tag = "4")]
    right_ts: Option<PhysicalExprNode>,
    #[prost(message, optional, tag = "5")]
    left_filter: Option<PhysicalExprNode>,
    #[prost(string, tag = "6")]
    matching: String,
    #[prost(int64, tag = "7")]
    tolerance: i64,
    #[prost(string, tag = "8")]
    tolerance_unit: String,
    /// Partitioned mode; false (broadcast) in plans encoded before the
    /// mode existed.
    #[prost(bool, tag = "9")]
    partitioned: bool,
    /// The embedded projection (indices into the join's full output), when
    /// `projected`; plans encoded before it existed emit every column.
    #[prost(uint32, repeated, tag = "10")]
    projection: Vec<u32>,
    #[prost(bool, tag = "11")]
    projected: bool,
    /// The join type; empty (Left) in plans encoded before it existed.
    #[prost(string, tag = "12")]
    join_type: String,
    /// Over the left columns then the right input's.
    #[prost(message, optional, tag = "13")]
    pair_filter: Option<PhysicalExprNode>,
}

fn err(what: &str) -> DataFusionError {
    internal_datafusion_err!("tsjoin codec: malformed ASOF JOIN {what}")
}

fn join_type_of(s: &str) -> Result<JoinType> {
    match s {
        "" => Ok(JoinType::Left),
        s => match s.parse()? {
            t @ (JoinType::Left | JoinType::Inner | JoinType::Right | JoinType::Full) => {
                Ok(t)
            }
            _ => Err(err("join type")),
        },
    }
}

fn tolerance_parts(t: Option<Tolerance>) -> (i64, String) {
    t.map_or((0, String::new()), |t| {
        (t.value, t.unit.as_str().to_string())
    })
}

fn tolerance_of(value: i64, unit: &str) -> Result<Option<Tolerance>> {
    if value == 0 {
        return Ok(None);
    }
    let unit = ToleranceUnit::parse(unit).ok_or_else(|| err("tolerance"))?;
    Ok(Some(Tolerance { value, unit }))
}

/// Encodes a logical node (without the tag byte).
pub(crate) fn encode_node(
    n: &AsofJoinNode,
    codec: &dyn LogicalExtensionCodec,
    buf: &mut Vec<u8>,
) -> Result<()> {
    let (tolerance, tolerance_unit) = tolerance_parts(n.clause.tolerance);
    let msg = AsofNodeProto {
        exprs: n
            .expressions()
            .iter()
            .map(|e| Ok(serialize_expr(e, codec)?))
            .collect::<Result<_>>()?,
        keys: n.clause.on.len() as u32,
        has_filter: n.clause.filter.is_some(),
        matching: n.clause.matching.as_str(),
        tolerance,
        tolerance_unit,
        join_type: n.clause.join_type.to_string(),
        has_pair_filter: n.clause.pair_filter.is_some(),
    };
    crate::codec::encode_message(&msg, buf)
}

/// Decodes a logical node (without the tag byte).
pub(crate) fn decode_node(
    buf: &[u8],
    inputs: &[LogicalPlan],
    ctx: &TaskContext,
    codec: &dyn LogicalExtensionCodec,
) -> Result<AsofJoinNode> {
    let msg = crate::codec::decode_message::<AsofNodeProto>(buf)?;
    let exprs = msg
        .exprs
        .iter()
        .map(|e| Ok(parse_expr(e, ctx, codec)?))
        .collect::<Result<Vec<_>>>()?;
    AsofJoinNode::try_from_exprs(
        inputs.to_vec(),
        exprs,
        msg.keys as usize,
        (msg.has_filter, msg.has_pair_filter),
        AsofMatch::parse(&msg.matching).ok_or_else(|| err("match"))?,
        tolerance_of(msg.tolerance, &msg.tolerance_unit)?,
        join_type_of(&msg.join_type)?,
    )
}

/// Encodes an operator (without the tag byte).
pub(crate) fn encode_exec(
    exec: &AsofJoinExec,
    codec: &dyn PhysicalExtensionCodec,
    buf: &mut Vec<u8>,
) -> Result<()> {
    let s = exec.spec();
    let ser = |e: &Arc<dyn PhysicalExpr>| serialize_physical_expr(e, codec);
    let many =
        |v: &[Arc<dyn PhysicalExpr>]| v.iter().map(ser).collect::<Result<Vec<_>>>();
    let (tolerance, tolerance_unit) = tolerance_parts(s.tolerance);
    let (projection, projected) = encode_projection(exec.projection());
    let msg = AsofExecProto {
        left_keys: many(&s.left_keys)?,
        right_keys: many(&s.right_keys)?,
        left_ts: Some(ser(&s.left_ts)?),
        right_ts: Some(ser(&s.right_ts)?),
        left_filter: s.left_filter.as_ref().map(ser).transpose()?,
        matching: s.matching.as_str(),
        tolerance,
        tolerance_unit,
        partitioned: exec.distribution().encode(),
        projection,
        projected,
        join_type: s.join_type.to_string(),
        pair_filter: s.pair_filter.as_ref().map(ser).transpose()?,
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
    let msg = crate::codec::decode_message::<AsofExecProto>(buf)?;
    let [left, right] = inputs else {
        return Err(err("inputs"));
    };
    let (ls, rs) = (left.schema(), right.schema());
    let one = |e: &Option<PhysicalExprNode>, s| -> Result<Arc<dyn PhysicalExpr>> {
        parse_physical_expr(e.as_ref().ok_or_else(|| err("expression"))?, ctx, s, codec)
    };
    let many = |v: &[PhysicalExprNode], s| -> Result<Vec<Arc<dyn PhysicalExpr>>> {
        v.iter()
            .map(|e| parse_physical_expr(e, ctx, s, codec))
            .collect()
    };
    let left_ts = one(&msg.left_ts, &ls)?;
    let right_ts = one(&msg.right_ts, &rs)?;
    let scale = TimeScale::new(
        timestamp_unit("left timestamp", &left_ts.data_type(&ls)?)?,
        timestamp_unit("right timestamp", &right_ts.data_type(&rs)?)?,
    );
    let spec = AsofJoinSpec {
        left_keys: many(&msg.left_keys, &ls)?,
        right_keys: many(&msg.right_keys, &rs)?,
        left_ts,
        right_ts,
        scale,
        matching: AsofMatch::parse(&msg.matching).ok_or_else(|| err("match"))?,
        tolerance: tolerance_of(msg.tolerance, &msg.tolerance_unit)?,
        left_filter: msg
            .left_filter
            .as_ref()
            .map(|e| parse_physical_expr(e, ctx, &ls, codec))
            .transpose()?,
        join_type: join_type_of(&msg.join_type)?,
        pair_filter: match &msg.pair_filter {
            Some(e) => {
                let joined = Schema::new(
                    ls.fields()
                        .iter()
                        .chain(rs.fields().iter())
                        .cloned()
                        .collect::<Vec<_>>(),
                );
                Some(parse_physical_expr(e, ctx, &joined, codec)?)
            }
            None => None,
        },
    };
    Ok(Arc::new(
        AsofJoinExec::try_new(Arc::clone(left), Arc::clone(right), Arc::new(spec))?
            .with_distribution(JoinDistribution::decode(msg.partitioned))?
            .with_projection(decode_projection(&msg.projection, msg.projected))?,
    ))
}
