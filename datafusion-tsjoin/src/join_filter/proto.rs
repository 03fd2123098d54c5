//! [`LipFilterExec`] and [`LipBuildKeysExec`] in datafusion-proto: the
//! filter's dynamic filters and bit budget, the build keys' key
//! expression; the child travels as the plan's input.
//!
//! A decoded [`LipFilterExec`] holds copies of the filters that no join in
//! the receiving process updates, and it applies only finished filters, so
//! it passes its input through there (its key filters, which read the
//! build keys of a join in the sending process, are not sent); a decoded
//! [`LipBuildKeysExec`] keeps
//! its keys for no filter (the rule does not place them on a cluster; this
//! keeps a plan that has them shippable).

use super::{LipBuildKeysExec, LipFilterExec};
use crate::codec::{TsJoinPhysicalCodec, decode_one_input, encode_message};
use datafusion::common::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::from_proto::parse_physical_expr;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use datafusion_proto::protobuf::PhysicalExprNode;
use std::sync::Arc;

#[derive(Clone, PartialEq, prost::Message)]
struct LipFilterProto {
    #[prost(message, repeated, tag = "1")]
    filters: Vec<PhysicalExprNode>,
    #[prost(uint64, tag = "2")]
    max_bits: u64,
}

/// Appends `exec`'s fields (after the tag) to `buf`.
pub(crate) fn encode_exec(
    exec: &LipFilterExec,
    codec: &TsJoinPhysicalCodec,
    buf: &mut Vec<u8>,
) -> Result<()> {
    let msg = LipFilterProto {
        filters: exec
            .filters()
            .iter()
            .map(|f| serialize_physical_expr(f, codec))
            .collect::<Result<_>>()?,
        max_bits: exec.max_bits(),
    };
    encode_message(&msg, buf)
}

/// The exec from its fields (after the tag) over `inputs[0]`.
pub(crate) fn decode_exec(
    buf: &[u8],
    inputs: &[Arc<dyn ExecutionPlan>],
    ctx: &TaskContext,
    codec: &TsJoinPhysicalCodec,
) -> Result<Arc<dyn ExecutionPlan>> {
    let (msg, input) = decode_one_input::<LipFilterProto>("LipFilterExec", buf, inputs)?;
    let schema = input.schema();
    let filters = msg
        .filters
        .iter()
        .map(|f| parse_physical_expr(f, ctx, &schema, codec))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        // A filter that arrives as a plain expression is a snapshot, not a
        // join filter: nothing to apply.
        .filter(|f| f.downcast_ref::<DynamicFilterPhysicalExpr>().is_some())
        .collect();
    Ok(Arc::new(LipFilterExec::try_new(
        Arc::clone(input),
        filters,
        msg.max_bits,
    )?))
}

#[derive(Clone, PartialEq, prost::Message)]
struct LipBuildKeysProto {
    #[prost(message, optional, tag = "1")]
    key: Option<PhysicalExprNode>,
}

/// Appends `exec`'s fields (after the tag) to `buf`.
pub(crate) fn encode_build_keys(
    exec: &LipBuildKeysExec,
    codec: &TsJoinPhysicalCodec,
    buf: &mut Vec<u8>,
) -> Result<()> {
    let msg = LipBuildKeysProto {
        key: Some(serialize_physical_expr(exec.key(), codec)?),
    };
    encode_message(&msg, buf)
}

/// The exec from its fields (after the tag) over `inputs[0]`.
pub(crate) fn decode_build_keys(
    buf: &[u8],
    inputs: &[Arc<dyn ExecutionPlan>],
    ctx: &TaskContext,
    codec: &TsJoinPhysicalCodec,
) -> Result<Arc<dyn ExecutionPlan>> {
    let (msg, input) =
        decode_one_input::<LipBuildKeysProto>("LipBuildKeysExec", buf, inputs)?;
    let Some(key) = &msg.key else {
        return datafusion::common::internal_err!("LipBuildKeysExec without a key");
    };
    let key = parse_physical_expr(key, ctx, &input.schema(), codec)?;
    Ok(Arc::new(LipBuildKeysExec::new(Arc::clone(input), key)))
}
