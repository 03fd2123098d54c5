//! The right-side index of a WINDOW JOIN: every right row grouped by key and
//! ordered by `(timestamp, input order)` inside each key, built once per
//! execution and shared read-only by all left partitions and tasks.

use super::exec::{AggInput, WindowJoinSpec};
use super::fast::{FastColumn, FastPlan};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch};
use datafusion::arrow::compute::{cast, concat_batches, filter_record_batch, kernels::numeric::mul};
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::{DataFusionError, HashMap, Result};
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::physical_plan::{PhysicalExpr, SendableRecordBatchStream};
use futures::StreamExt;
use std::sync::Arc;

/// Key → dense group id, for equality keys (null-safe: NULL is a value).
pub(crate) struct KeyIndex {
    converter: RowConverter,
    map: HashMap<Box<[u8]>, u32>,
}

impl KeyIndex {
    /// Group id of each row's key, `None` when the right side has no such key.
    pub(crate) fn lookup(&self, keys: &[ArrayRef]) -> Result<Vec<Option<u32>>> {
        let rows = self.converter.convert_columns(keys)?;
        Ok((0..rows.num_rows())
            .map(|i| self.map.get(rows.row(i).as_ref()).copied())
            .collect())
    }
}

/// Right rows in `(key, ts, input order)` order. Positions index `ts` and
/// `order`; `order[pos]` is the row of `batch` at that position. Key group `g`
/// owns positions `group_offsets[g]..group_offsets[g + 1]`.
pub(crate) struct RightIndex {
    /// All right rows that passed the right-only ON filter (rows with a NULL
    /// timestamp never match and are still here, but in no group).
    pub batch: RecordBatch,
    /// Timestamps in common ticks, by position (ascending inside a group).
    pub ts: Vec<i64>,
    /// Row of `batch` at each position.
    pub order: Vec<u32>,
    /// Group boundaries over positions; `len = groups + 1`.
    pub group_offsets: Vec<u32>,
    /// `None` when the join has no equality keys (one group holds every row).
    pub keys: Option<KeyIndex>,
    /// Per aggregate, its argument arrays evaluated over `batch` when the
    /// aggregate reads right columns only (empty for pair-evaluated ones).
    pub agg_values: Vec<Vec<ArrayRef>>,
    /// Fast-path buffers, one per [`FastPlan`] column (empty on the general
    /// path).
    pub fast: Vec<FastColumn>,
    _reservation: MemoryReservation,
}

impl std::fmt::Debug for RightIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RightIndex").field("rows", &self.batch.num_rows()).field("groups", &(self.group_offsets.len() - 1)).finish()
    }
}

impl RightIndex {
    /// Positions of key group `g`.
    pub(crate) fn group(&self, g: u32) -> (usize, usize) {
        (self.group_offsets[g as usize] as usize, self.group_offsets[g as usize + 1] as usize)
    }

    /// Number of rows indexed (rows with a timestamp).
    pub(crate) fn num_positions(&self) -> usize {
        self.order.len()
    }
}

/// Evaluates a designated-timestamp expression and returns its values as
/// ticks of the common unit (`factor` common ticks per input tick).
pub(crate) fn eval_ticks(expr: &Arc<dyn PhysicalExpr>, batch: &RecordBatch, factor: i64) -> Result<Int64Array> {
    let array = expr.evaluate(batch)?.into_array(batch.num_rows())?;
    let raw = cast(&array, &DataType::Int64)?;
    let raw = raw.as_primitive::<Int64Type>();
    if factor == 1 {
        return Ok(raw.clone());
    }
    let scaled = mul(raw, &Int64Array::new_scalar(factor)).map_err(|e| {
        DataFusionError::Execution(format!(
            "timestamp out of range when converting to a finer unit for the WINDOW JOIN: {e}"
        ))
    })?;
    Ok(scaled.as_primitive::<Int64Type>().clone())
}

/// Evaluates expressions over a batch into arrays.
pub(crate) fn eval_all(exprs: &[Arc<dyn PhysicalExpr>], batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    exprs.iter().map(|e| e.evaluate(batch)?.into_array(batch.num_rows())).collect()
}

/// Drains the right input and builds its [`RightIndex`], accounting every
/// buffer in `reservation` (an over-budget build fails with
/// `ResourcesExhausted`).
pub(crate) async fn build_right_index(
    mut input: SendableRecordBatchStream,
    schema: SchemaRef,
    spec: Arc<WindowJoinSpec>,
    fast_plan: Option<&FastPlan>,
    reservation: MemoryReservation,
) -> Result<RightIndex> {
    let mut batches = vec![];
    while let Some(batch) = input.next().await {
        let batch = batch?;
        reservation.try_grow(batch.get_array_memory_size())?;
        batches.push(batch);
    }
    let mut batch = concat_batches(&schema, &batches)?;
    drop(batches);
    reservation.try_resize(batch.get_array_memory_size())?;

    if let Some(filter) = &spec.right_filter {
        let mask = filter.evaluate(&batch)?.into_array(batch.num_rows())?;
        batch = filter_record_batch(&batch, mask.as_boolean())?;
        reservation.try_resize(batch.get_array_memory_size())?;
    }

    let ts = eval_ticks(&spec.right_ts, &batch, spec.right_factor())?;
    // Dense group id per row: the key's group, or 0 without keys. Rows whose
    // timestamp is NULL get no group: they can never be in a window.
    let (groups, keys, n_groups) = if spec.right_keys.is_empty() {
        (vec![0u32; batch.num_rows()], None, 1usize)
    } else {
        let arrays = eval_all(&spec.right_keys, &batch)?;
        let fields = arrays.iter().map(|a| SortField::new(a.data_type().clone())).collect();
        let converter = RowConverter::new(fields)?;
        let rows = converter.convert_columns(&arrays)?;
        let mut map: HashMap<Box<[u8]>, u32> = HashMap::new();
        let mut groups = Vec::with_capacity(rows.num_rows());
        for row in rows.iter() {
            let g = match map.get(row.as_ref()) {
                Some(&g) => g,
                None => {
                    let g = map.len() as u32;
                    map.insert(row.as_ref().into(), g);
                    g
                }
            };
            groups.push(g);
        }
        let n = map.len();
        (groups, Some(KeyIndex { converter, map }), n)
    };

    // Counting sort by group (stable, so input order survives), then a stable
    // sort by timestamp inside each group that is not already sorted.
    let mut group_offsets = vec![0u32; n_groups + 1];
    for (row, &g) in groups.iter().enumerate() {
        if ts.is_valid(row) {
            group_offsets[g as usize + 1] += 1;
        }
    }
    for g in 0..n_groups {
        group_offsets[g + 1] += group_offsets[g];
    }
    let positions = group_offsets[n_groups] as usize;
    reservation.try_grow(positions * 12 + group_offsets.len() * 4)?;
    let mut cursor = group_offsets.clone();
    let mut order = vec![0u32; positions];
    for (row, &g) in groups.iter().enumerate() {
        if ts.is_valid(row) {
            order[cursor[g as usize] as usize] = row as u32;
            cursor[g as usize] += 1;
        }
    }
    let raw = ts.values();
    for g in 0..n_groups {
        let slice = &mut order[group_offsets[g] as usize..group_offsets[g + 1] as usize];
        if !slice.windows(2).all(|w| raw[w[0] as usize] <= raw[w[1] as usize]) {
            slice.sort_by_key(|&r| raw[r as usize]);
        }
    }
    let ts_sorted: Vec<i64> = order.iter().map(|&r| raw[r as usize]).collect();

    let agg_values = spec
        .aggs
        .iter()
        .map(|agg| match agg.input {
            AggInput::Right => eval_all(&agg.args, &batch),
            AggInput::Pair => Ok(vec![]),
        })
        .collect::<Result<Vec<_>>>()?;
    let values_size: usize = agg_values.iter().flatten().map(|a| a.get_array_memory_size()).sum();
    reservation.try_grow(values_size)?;

    let mut fast = vec![];
    for column in fast_plan.map(|p| p.columns.as_slice()).unwrap_or_default() {
        let built = FastColumn::build(column, &agg_values[column.agg][0], &order)?;
        reservation.try_grow(built.memory_size())?;
        fast.push(built);
    }

    Ok(RightIndex {
        batch,
        ts: ts_sorted,
        order,
        group_offsets,
        keys,
        agg_values,
        fast,
        _reservation: reservation,
    })
}
