//! [`LipFilterExec`] in datafusion-proto: its dynamic filters and bit
//! budget; the child travels as the plan's input.
//!
//! A decoded operator holds copies of the filters that no join in the
//! receiving process updates, and it applies only finished filters, so it
//! passes its input through there (the rule does not place it on a
//! cluster; this keeps a plan that has one shippable).

use super::LipFilterExec;
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
