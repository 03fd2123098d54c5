//! [`NewestFirstTopKExec`] in datafusion-proto: the sort key, its NULL
//! order and `fetch`; the child travels as the plan's input.

use super::NewestFirstTopKExec;
use crate::codec::{TsJoinPhysicalCodec, decode_one_input, encode_message};
use datafusion::arrow::compute::SortOptions;
use datafusion::common::{Result, internal_err};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalSortExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::from_proto::parse_physical_expr;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use datafusion_proto::protobuf::PhysicalExprNode;
use std::sync::Arc;

#[derive(Clone, PartialEq, prost::Message)]
struct NewestFirstProto {
    #[prost(message, optional, tag = "1")]
    expr: Option<PhysicalExprNode>,
    #[prost(bool, tag = "2")]
    nulls_first: bool,
    #[prost(uint64, tag = "3")]
    fetch: u64,
}

/// Appends `exec`'s fields (after the tag) to `buf`.
pub(crate) fn encode_exec(
    exec: &NewestFirstTopKExec,
    codec: &TsJoinPhysicalCodec,
    buf: &mut Vec<u8>,
) -> Result<()> {
    let msg = NewestFirstProto {
        expr: Some(serialize_physical_expr(&exec.expr().expr, codec)?),
        nulls_first: exec.expr().options.nulls_first,
        fetch: exec.fetch() as u64,
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
    let (msg, input) =
        decode_one_input::<NewestFirstProto>("NewestFirstTopKExec", buf, inputs)?;
    let Some(expr) = &msg.expr else {
        return internal_err!("tsjoin codec: NewestFirstTopKExec without a key");
    };
    let expr = parse_physical_expr(expr, ctx, &input.schema(), codec)?;
    let sort = PhysicalSortExpr::new(
        expr,
        SortOptions {
            descending: true,
            nulls_first: msg.nulls_first,
        },
    );
    Ok(Arc::new(NewestFirstTopKExec::new(
        Arc::clone(input),
        sort,
        msg.fetch as usize,
    )))
}
