//! [`FilterAggregateExec`] in datafusion-proto: the predicate, the
//! aggregates and the output schema; the child travels as the plan's input.

use super::FilterAggregateExec;
use crate::codec::{TsJoinPhysicalCodec, decode_one_input, encode_message};
use datafusion::arrow::datatypes::Schema;
use datafusion::common::{Result, internal_err};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::from_proto::parse_physical_expr;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use datafusion_proto::protobuf::{self, PhysicalExprNode};
use std::sync::Arc;

#[derive(Clone, PartialEq, prost::Message)]
struct FilterAggregateProto {
    #[prost(message, optional, tag = "1")]
    predicate: Option<PhysicalExprNode>,
    #[prost(string, repeated, tag = "2")]
    aggs: Vec<String>,
    #[prost(message, optional, tag = "3")]
    schema: Option<protobuf::Schema>,
    /// It must not read the Parquet files itself: setting
    /// `tsjoin.filter_aggregate_pages` was off when the plan was made
    /// (whether the input qualifies is decided again on decoding).
    #[prost(bool, tag = "4")]
    no_pages: bool,
}

/// Appends `exec`'s fields (after the tag) to `buf`.
pub(crate) fn encode_exec(
    exec: &FilterAggregateExec,
    codec: &TsJoinPhysicalCodec,
    buf: &mut Vec<u8>,
) -> Result<()> {
    let msg = FilterAggregateProto {
        predicate: Some(serialize_physical_expr(exec.predicate(), codec)?),
        aggs: exec.agg_codes(),
        schema: Some(exec.schema().as_ref().try_into()?),
        no_pages: !exec.reads_pages(),
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
        decode_one_input::<FilterAggregateProto>("FilterAggregateExec", buf, inputs)?;
    let (Some(predicate), Some(schema)) = (&msg.predicate, &msg.schema) else {
        return internal_err!(
            "tsjoin codec: FilterAggregateExec without predicate or schema"
        );
    };
    let predicate = parse_physical_expr(predicate, ctx, &input.schema(), codec)?;
    let schema: Schema = schema.try_into()?;
    let exec = FilterAggregateExec::from_codes(
        Arc::clone(input),
        predicate,
        &msg.aggs,
        Arc::new(schema),
    )?;
    Ok(Arc::new(if msg.no_pages {
        exec.without_page_scan()
    } else {
        exec
    }))
}
