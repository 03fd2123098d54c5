//! [`AggregateSpec`]: what an [`InlineAggregateExec`](super::InlineAggregateExec)
//! computes, resolved once when the plan is made and shared by both phases.

use super::accumulate::InlineAgg;
use super::group_keys::KeyShape;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::Result;
use datafusion::physical_plan::PhysicalExpr;
use std::sync::Arc;

/// What both phases compute, fixed when the plan is made.
#[derive(Debug)]
pub(super) struct AggregateSpec {
    pub(super) group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    pub(super) key_types: Vec<DataType>,
    /// How the tables hold the keys.
    pub(super) shape: KeyShape,
    pub(super) aggs: Vec<InlineAgg>,
    pub(super) arg_types: Vec<Option<DataType>>,
    pub(super) outputs: usize,
}

impl AggregateSpec {
    /// The spec of grouping by `group_exprs` (of types `key_types`, in
    /// `shape`) into `outputs` partitions, over an input of schema `input`.
    pub(super) fn try_new(
        group_exprs: &[(Arc<dyn PhysicalExpr>, String)],
        (key_types, shape): (Vec<DataType>, KeyShape),
        aggs: &[InlineAgg],
        input: &Schema,
        outputs: usize,
    ) -> Result<Self> {
        Ok(Self {
            group_exprs: group_exprs.iter().map(|(e, _)| Arc::clone(e)).collect(),
            key_types,
            shape,
            aggs: aggs.to_vec(),
            arg_types: aggs
                .iter()
                .map(|a| a.arg.as_ref().map(|e| e.data_type(input)).transpose())
                .collect::<Result<_>>()?,
            outputs,
        })
    }
}
