//! [`LatestByExec`] in datafusion-proto: the mode, the keys, the ORDER BY
//! (expression, direction and NULL order each) and the final mode's
//! `row_number` field; the child travels as the plan's input.

use super::{LatestByExec, LatestByMode};
use crate::codec::{TsJoinPhysicalCodec, decode_one_input, encode_message};
use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::{Result, internal_err};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalSortExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::from_proto::parse_physical_expr;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use datafusion_proto::protobuf::PhysicalExprNode;
use std::sync::Arc;

#[derive(Clone, PartialEq, prost::Message)]
struct LatestByProto {
    /// Final mode (with `row_number`), else partial.
    #[prost(bool, tag = "1")]
    final_mode: bool,
    #[prost(message, repeated, tag = "2")]
    partition_by: Vec<PhysicalExprNode>,
    #[prost(message, repeated, tag = "3")]
    order_by: Vec<PhysicalExprNode>,
    #[prost(bool, repeated, tag = "4")]
    descending: Vec<bool>,
    #[prost(bool, repeated, tag = "5")]
    nulls_first: Vec<bool>,
    /// The final mode's `row_number` column name (a non-null `UInt64`).
    #[prost(string, tag = "6")]
    row_number: String,
}

/// Appends `exec`'s fields (after the tag) to `buf`.
pub(crate) fn encode_exec(
    exec: &LatestByExec,
    codec: &TsJoinPhysicalCodec,
    buf: &mut Vec<u8>,
) -> Result<()> {
    let msg = LatestByProto {
        final_mode: exec.mode() == LatestByMode::Final,
        partition_by: exec
            .partition_by()
            .iter()
            .map(|e| serialize_physical_expr(e, codec))
            .collect::<Result<_>>()?,
        order_by: exec
            .order_by()
            .iter()
            .map(|o| serialize_physical_expr(&o.expr, codec))
            .collect::<Result<_>>()?,
        descending: exec
            .order_by()
            .iter()
            .map(|o| o.options.descending)
            .collect(),
        nulls_first: exec
            .order_by()
            .iter()
            .map(|o| o.options.nulls_first)
            .collect(),
        row_number: exec
            .row_number()
            .map(|f| f.name().clone())
            .unwrap_or_default(),
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
    let (msg, input) = decode_one_input::<LatestByProto>("LatestByExec", buf, inputs)?;
    let schema = input.schema();
    let partition_by = msg
        .partition_by
        .iter()
        .map(|e| parse_physical_expr(e, ctx, &schema, codec))
        .collect::<Result<Vec<_>>>()?;
    let n = msg.order_by.len();
    if msg.descending.len() != n || msg.nulls_first.len() != n {
        return internal_err!("tsjoin codec: LatestByExec ORDER BY options do not match");
    }
    let order_by = msg
        .order_by
        .iter()
        .zip(msg.descending.iter().zip(&msg.nulls_first))
        .map(|(e, (&descending, &nulls_first))| {
            Ok(PhysicalSortExpr::new(
                parse_physical_expr(e, ctx, &schema, codec)?,
                SortOptions {
                    descending,
                    nulls_first,
                },
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let input = Arc::clone(input);
    Ok(Arc::new(if msg.final_mode {
        let field = Field::new(msg.row_number, DataType::UInt64, false);
        LatestByExec::final_rows(input, partition_by, order_by, Arc::new(field))
    } else {
        LatestByExec::partial(input, partition_by, order_by)
    }))
}
