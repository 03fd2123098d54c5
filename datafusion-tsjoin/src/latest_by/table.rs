//! [`LatestRows`]: each key's best row so far, kept as rows taken out of
//! the batches that brought them.
//!
//! Per batch: the keys get group ids from the inline aggregate's
//! [`GroupKeys`], [`BestKeys`] finds the rows that rank before their
//! group's kept row, and those rows (at most one per group) are taken into
//! a small batch of the store; each group points at its row there. Rows a
//! later batch beats stay in the store as garbage until the store holds
//! more than twice the groups (plus [`COMPACT_SLACK`]), when the live rows
//! are interleaved into one batch: every stored row is copied at most a
//! constant number of times, and the store stays O(groups).

use super::order::BestKeys;
use crate::inline_aggregate::GroupKeys;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions, UInt32Array,
};
use datafusion::arrow::compute::{interleave_record_batch, take_record_batch};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::Result;
use datafusion::physical_expr::PhysicalSortExpr;
use datafusion::physical_expr_common::utils::evaluate_expressions_to_arrays;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::physical_plan::spill::get_record_batch_memory_size;
use std::sync::Arc;

/// Garbage rows the store may hold beyond its live rows before it is
/// compacted, so that few groups do not compact every batch.
const COMPACT_SLACK: usize = 8192;

/// Where a group's row is: batch and row in the store.
#[derive(Debug, Clone, Copy)]
struct Slot {
    batch: u32,
    row: u32,
}

/// Each key's best row of the rows seen so far.
pub(super) struct LatestRows {
    schema: SchemaRef,
    partition_by: Vec<Arc<dyn PhysicalExpr>>,
    /// The ORDER BY expressions (their directions are in `best`).
    order_by: Vec<Arc<dyn PhysicalExpr>>,
    /// `None` without PARTITION BY: every row is in group 0.
    keys: Option<GroupKeys>,
    best: BestKeys,
    slots: Vec<Slot>,
    store: Vec<RecordBatch>,
    store_rows: usize,
    store_bytes: usize,
    /// Per group, the batch number (`batches`) it last won a row in, and
    /// that row; `touched` lists this batch's winners.
    won_in: Vec<u64>,
    won_row: Vec<u32>,
    touched: Vec<u32>,
    batches: u64,
    ids: Vec<u32>,
    compactions: usize,
}

impl LatestRows {
    /// Empty, for rows of `schema` partitioned by `partition_by` and ranked
    /// by `order_by`.
    pub(super) fn try_new(
        schema: SchemaRef,
        partition_by: Vec<Arc<dyn PhysicalExpr>>,
        order_by: Vec<PhysicalSortExpr>,
    ) -> Result<Self> {
        let key_types = partition_by
            .iter()
            .map(|e| e.data_type(&schema))
            .collect::<Result<Vec<_>>>()?;
        let order_types = order_by
            .iter()
            .map(|e| e.expr.data_type(&schema))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            keys: if key_types.is_empty() {
                None
            } else {
                Some(GroupKeys::try_new(&key_types)?)
            },
            best: BestKeys::try_new(&order_by, &order_types)?,
            schema,
            partition_by,
            order_by: order_by.into_iter().map(|o| o.expr).collect(),
            slots: vec![],
            store: vec![],
            store_rows: 0,
            store_bytes: 0,
            won_in: vec![],
            won_row: vec![],
            touched: vec![],
            batches: 0,
            ids: vec![],
            compactions: 0,
        })
    }

    /// Keys seen.
    pub(super) fn groups(&self) -> usize {
        self.slots.len()
    }

    /// Times the store was compacted.
    pub(super) fn compactions(&self) -> usize {
        self.compactions
    }

    /// Bytes held (keys, kept ORDER BY keys, slots and the store).
    pub(super) fn memory_size(&self) -> usize {
        self.keys.as_ref().map_or(0, GroupKeys::memory_size)
            + self.best.memory_size()
            + self.slots.capacity() * size_of::<Slot>()
            + self.won_in.capacity() * 8
            + (self.won_row.capacity() + self.touched.capacity() + self.ids.capacity())
                * 4
            + self.store_bytes
    }

    /// Folds `batch` in.
    pub(super) fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let n = batch.num_rows();
        let keys = evaluate_expressions_to_arrays(&self.partition_by, batch)?;
        let order = evaluate_expressions_to_arrays(&self.order_by, batch)?;
        let groups = match &mut self.keys {
            Some(k) => {
                k.assign(&keys, &mut self.ids, None, 0)?;
                k.len()
            }
            None => {
                self.ids.clear();
                self.ids.resize(n, 0);
                1
            }
        };
        self.won_in.resize(groups, 0);
        self.won_row.resize(groups, 0);
        self.batches += 1;
        let (stamp, won_in, won_row, touched) = (
            self.batches,
            &mut self.won_in,
            &mut self.won_row,
            &mut self.touched,
        );
        touched.clear();
        self.best.update(&order, &self.ids, groups, |row, g| {
            if won_in[g] != stamp {
                won_in[g] = stamp;
                touched.push(g as u32);
            }
            won_row[g] = row as u32;
        })?;
        self.slots.resize(groups, Slot { batch: 0, row: 0 });
        if !self.touched.is_empty() {
            let indices = UInt32Array::from_iter_values(
                self.touched.iter().map(|&g| self.won_row[g as usize]),
            );
            let taken = detach(take_record_batch(batch, &indices)?)?;
            let at = self.store.len() as u32;
            for (row, &g) in self.touched.iter().enumerate() {
                self.slots[g as usize] = Slot {
                    batch: at,
                    row: row as u32,
                };
            }
            self.store_rows += taken.num_rows();
            self.store_bytes += get_record_batch_memory_size(&taken);
            self.store.push(taken);
        }
        if self.store_rows > 2 * self.slots.len() + COMPACT_SLACK {
            self.compact()?;
        }
        Ok(())
    }

    /// Moves the live rows into one batch, in group order.
    fn compact(&mut self) -> Result<()> {
        let live = self.live()?;
        for (g, slot) in self.slots.iter_mut().enumerate() {
            *slot = Slot {
                batch: 0,
                row: g as u32,
            };
        }
        self.store_rows = live.num_rows();
        self.store_bytes = get_record_batch_memory_size(&live);
        self.store = vec![live];
        self.compactions += 1;
        Ok(())
    }

    /// Each group's row, in group order.
    fn live(&self) -> Result<RecordBatch> {
        let stored: Vec<&RecordBatch> = self.store.iter().collect();
        let indices: Vec<(usize, usize)> = self
            .slots
            .iter()
            .map(|s| (s.batch as usize, s.row as usize))
            .collect();
        detach(interleave_record_batch(&stored, &indices)?)
    }

    /// Each key's row, in the order keys were first seen; empty when no
    /// row came.
    pub(super) fn finish(self) -> Result<RecordBatch> {
        if self.slots.is_empty() {
            return Ok(RecordBatch::new_empty(self.schema));
        }
        self.live()
    }
}

/// `batch` without references to the buffers of the batch it was taken
/// from: view columns hold on to every data buffer of their source, which
/// would keep (and count) whole input batches for a few rows.
fn detach(batch: RecordBatch) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .map(|c| match c.data_type() {
            DataType::Utf8View => Arc::new(c.as_string_view().gc()) as ArrayRef,
            DataType::BinaryView => Arc::new(c.as_binary_view().gc()) as ArrayRef,
            _ => Arc::clone(c),
        })
        .collect();
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        batch.schema(),
        columns,
        &options,
    )?)
}
