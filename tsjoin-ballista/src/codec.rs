//! Codecs that carry tsjoin's plan nodes beside Ballista's own.
//!
//! Ballista's codecs ([`BallistaLogicalExtensionCodec`],
//! [`BallistaPhysicalExtensionCodec`]) encode its shuffle operators and file
//! formats and have no hook for another codec, so these wrap them: a tsjoin
//! node is encoded by tsjoin's codec (its bytes start with a tag in
//! `0xB1..=0xBF`, see [`is_tsjoin_tag`]); anything else is written as
//! [`BALLISTA_TAG`] followed by Ballista's bytes. Decoding routes on the
//! first byte, so foreign bytes are never handed to the wrong decoder.
//!
//! A node neither codec can encode is an error that names it and gives both
//! codecs' reasons; the plan is never run locally instead.
//!
//! ```
//! use datafusion_proto::physical_plan::PhysicalExtensionCodec;
//! use tsjoin_ballista::codec::ClusterPhysicalCodec;
//! let codec: &dyn PhysicalExtensionCodec = &ClusterPhysicalCodec::default();
//! # let _ = codec;
//! ```

use ballista_core::serde::{
    BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec,
};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::{DataFusionError, Result, TableReference, plan_err};
use datafusion::datasource::file_format::FileFormatFactory;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{
    AggregateUDF, Extension, LogicalPlan, ScalarUDF, WindowUDF,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::{
    PhysicalExtensionCodec, PhysicalProtoConverterExtension,
};
use datafusion_tsjoin::codec::{TsJoinLogicalCodec, TsJoinPhysicalCodec, is_tsjoin_tag};
use std::sync::Arc;

/// First byte of a node encoded by Ballista's codec inside these codecs.
pub const BALLISTA_TAG: u8 = 0x00;

/// Splits `buf` into its route: `Some(true)` for tsjoin's bytes (kept
/// whole: tsjoin's decoders read their own tag), `Some(false)` for
/// Ballista's (the tag dropped).
fn route(buf: &[u8]) -> Result<(bool, &[u8])> {
    match buf.first() {
        Some(&b) if is_tsjoin_tag(b) => Ok((true, buf)),
        Some(&BALLISTA_TAG) => Ok((false, &buf[1..])),
        Some(b) => plan_err!("cluster codec: unknown plan node tag 0x{b:02X}"),
        None => plan_err!("cluster codec: empty plan node"),
    }
}

/// Tries tsjoin's encoder, then Ballista's (tagged); when both refuse, a
/// planning error naming the node and both reasons.
fn encode_either(
    name: &str,
    buf: &mut Vec<u8>,
    tsjoin: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    ballista: impl FnOnce(&mut Vec<u8>) -> Result<()>,
) -> Result<()> {
    let start = buf.len();
    let Err(ours) = tsjoin(buf) else {
        return Ok(());
    };
    buf.truncate(start);
    buf.push(BALLISTA_TAG);
    let Err(theirs) = ballista(buf) else {
        return Ok(());
    };
    buf.truncate(start);
    Err(DataFusionError::Plan(format!(
        "plan node `{name}` cannot be sent to the cluster: no codec encodes it \
         (tsjoin: {ours}; Ballista: {theirs})"
    )))
}

/// Logical codec for a tsjoin session on Ballista: tsjoin's logical nodes
/// ([`TsJoinLogicalCodec`]) plus Ballista's ([`BallistaLogicalExtensionCodec`]).
///
/// ```
/// use datafusion_proto::logical_plan::LogicalExtensionCodec;
/// use tsjoin_ballista::codec::ClusterLogicalCodec;
/// let codec: &dyn LogicalExtensionCodec = &ClusterLogicalCodec::default();
/// # let _ = codec;
/// ```
#[derive(Debug, Default)]
pub struct ClusterLogicalCodec {
    tsjoin: TsJoinLogicalCodec,
    ballista: BallistaLogicalExtensionCodec,
}

impl LogicalExtensionCodec for ClusterLogicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[LogicalPlan],
        ctx: &TaskContext,
    ) -> Result<Extension> {
        match route(buf)? {
            (true, bytes) => self.tsjoin.try_decode(bytes, inputs, ctx),
            (false, bytes) => self.ballista.try_decode(bytes, inputs, ctx),
        }
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> Result<()> {
        encode_either(
            node.node.name(),
            buf,
            |b| self.tsjoin.try_encode(node, b),
            |b| self.ballista.try_encode(node, b),
        )
    }

    // Tables, file formats and functions are Ballista's (and DataFusion's)
    // business: tsjoin registers its functions by name in every process.
    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        self.ballista
            .try_decode_table_provider(buf, table_ref, schema, ctx)
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        self.ballista
            .try_encode_table_provider(table_ref, node, buf)
    }

    fn try_decode_file_format(
        &self,
        buf: &[u8],
        ctx: &TaskContext,
    ) -> Result<Arc<dyn FileFormatFactory>> {
        self.ballista.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(
        &self,
        buf: &mut Vec<u8>,
        node: Arc<dyn FileFormatFactory>,
    ) -> Result<()> {
        self.ballista.try_encode_file_format(buf, node)
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        self.ballista.try_decode_udf(name, buf)
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.ballista.try_encode_udf(node, buf)
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        self.ballista.try_decode_udaf(name, buf)
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.ballista.try_encode_udaf(node, buf)
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        self.ballista.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.ballista.try_encode_udwf(node, buf)
    }
}

/// Physical codec for a tsjoin session on Ballista: tsjoin's operators
/// ([`TsJoinPhysicalCodec`]) plus Ballista's shuffle operators and file
/// formats ([`BallistaPhysicalExtensionCodec`]).
///
/// ```
/// use datafusion_proto::physical_plan::PhysicalExtensionCodec;
/// use tsjoin_ballista::codec::ClusterPhysicalCodec;
/// let codec: &dyn PhysicalExtensionCodec = &ClusterPhysicalCodec::default();
/// # let _ = codec;
/// ```
#[derive(Debug, Default)]
pub struct ClusterPhysicalCodec {
    tsjoin: TsJoinPhysicalCodec,
    ballista: BallistaPhysicalExtensionCodec,
}

impl PhysicalExtensionCodec for ClusterPhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match route(buf)? {
            (true, bytes) => self.tsjoin.try_decode(bytes, inputs, ctx, converter),
            (false, bytes) => self.ballista.try_decode(bytes, inputs, ctx, converter),
        }
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        encode_either(
            node.name(),
            buf,
            |b| self.tsjoin.try_encode(Arc::clone(&node), b, converter),
            |b| self.ballista.try_encode(Arc::clone(&node), b, converter),
        )
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        self.ballista.try_decode_udf(name, buf)
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.ballista.try_encode_udf(node, buf)
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        self.ballista.try_decode_udaf(name, buf)
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.ballista.try_encode_udaf(node, buf)
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        self.ballista.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.ballista.try_encode_udwf(node, buf)
    }
}
