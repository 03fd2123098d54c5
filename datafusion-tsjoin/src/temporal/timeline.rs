//! [`Timeline`]: the right side of a temporal join, in time order, with a
//! key group per row and (built only when a lookup needs it) a per-key
//! index for binary search.

use super::time::{is_non_decreasing, ticks};
use crate::window_join::KeyIndex;
use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::compute::{cast, concat_batches};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::{Result, exec_err};
use datafusion::physical_plan::PhysicalExpr;
use std::sync::{Arc, OnceLock};

/// How to turn right batches into a [`Timeline`].
pub(crate) struct TimelineBuild<'a> {
    /// Right schema (of the batches).
    pub schema: SchemaRef,
    /// Equality key expressions over the right schema (may be empty).
    pub keys: &'a [Arc<dyn PhysicalExpr>],
    /// The right time expression.
    pub ts: &'a Arc<dyn PhysicalExpr>,
    /// Common ticks per right tick.
    pub factor: i64,
}

/// The right rows of a temporal join, time-ordered.
///
/// `seq` lists the rows that have a time, ordered by time with ties in input
/// order (a stable sort, skipped when the input arrived ordered), so "the
/// last row at or before `t`" is the latest row in input order among equal
/// times.
pub(crate) struct Timeline {
    /// Right rows, all columns, in input order.
    pub batch: RecordBatch,
    /// Rows (into `batch`) that have a time, in time order.
    pub seq: Vec<u32>,
    /// Time of each `seq` entry, in common ticks.
    pub seq_ts: Vec<i64>,
    /// Key group of each `seq` entry.
    pub seq_key: Vec<u32>,
    /// Number of key groups (1 without keys).
    pub groups: usize,
    /// True when the right input arrived in time order (no sort ran).
    pub arrived_sorted: bool,
    keys: Option<KeyIndex>,
    index: OnceLock<KeyedIndex>,
}

/// Per key group, its `seq` entries (rows and times) in time order.
struct KeyedIndex {
    offsets: Vec<usize>,
    rows: Vec<u32>,
    ts: Vec<i64>,
}

/// A dictionary key compares by value: arrow's row format (several keys)
/// would tell a dictionary from its plain values.
fn plain(a: ArrayRef) -> Result<ArrayRef> {
    match a.data_type() {
        DataType::Dictionary(_, v) => Ok(cast(&a, v)?),
        _ => Ok(a),
    }
}

/// Evaluates key expressions on a batch, dictionaries decoded when there is
/// more than one key (see [`plain`]).
pub(crate) fn key_arrays(
    keys: &[Arc<dyn PhysicalExpr>],
    batch: &RecordBatch,
) -> Result<Vec<ArrayRef>> {
    let n = keys.len();
    keys.iter()
        .map(|k| {
            let a = k.evaluate(batch)?.into_array(batch.num_rows())?;
            if n > 1 { plain(a) } else { Ok(a) }
        })
        .collect()
}

impl Timeline {
    /// Builds the timeline from the right input's batches.
    pub(crate) fn try_new(how: TimelineBuild, batches: &[RecordBatch]) -> Result<Self> {
        let batch = concat_batches(&how.schema, batches)?;
        let n = batch.num_rows();
        // Positions are u32, and the two highest values are markers
        // (cursor.rs's UNKNOWN and NONE).
        if n >= (u32::MAX - 1) as usize {
            return exec_err!(
                "ASOF JOIN: the right side has {n} rows; at most {} are supported",
                u32::MAX - 2
            );
        }
        let ts_array = how.ts.evaluate(&batch)?.into_array(n)?;
        let ts = ticks(&ts_array, how.factor)?;
        let (keys, groups_of_row, groups) = if how.keys.is_empty() {
            (None, vec![0u32; n], 1)
        } else {
            let arrays = key_arrays(how.keys, &batch)?;
            let types: Vec<DataType> =
                arrays.iter().map(|a| a.data_type().clone()).collect();
            let mut index = KeyIndex::try_new(&types)?;
            let g = index.intern(&arrays)?;
            let groups = index.len().max(1);
            (Some(index), g, groups)
        };
        let arrived_sorted = is_non_decreasing(&ts);
        let mut seq: Vec<u32> = (0..n as u32)
            .filter(|&i| ts[i as usize].is_some())
            .collect();
        if !arrived_sorted {
            // Stable: equal times keep input order.
            seq.sort_by_key(|&i| ts[i as usize]);
        }
        let seq_ts = seq
            .iter()
            .map(|&i| ts[i as usize].unwrap_or_default())
            .collect();
        let seq_key = seq.iter().map(|&i| groups_of_row[i as usize]).collect();
        Ok(Self {
            batch,
            seq,
            seq_ts,
            seq_key,
            groups,
            arrived_sorted,
            keys,
            index: OnceLock::new(),
        })
    }

    /// Bytes held beyond the batch (for the memory reservation).
    pub(crate) fn extra_bytes(&self) -> usize {
        self.seq.capacity() * 4 + self.seq_ts.capacity() * 8 + self.seq_key.capacity() * 4
    }

    /// Bytes the per-key index would hold once built.
    pub(crate) fn index_bytes(&self) -> usize {
        self.seq.len() * 12 + (self.groups + 1) * 8
    }

    /// Builds the per-key index now (callers reserve its memory first).
    pub(crate) fn build_index(&self) {
        self.index();
    }

    /// True once the per-key index exists.
    pub(crate) fn has_index(&self) -> bool {
        self.index.get().is_some()
    }

    /// The key group of each left row; `None` when the right side has no
    /// such key. `keys` are the left key arrays (see [`key_arrays`]).
    pub(crate) fn groups_of(
        &self,
        keys: &[ArrayRef],
        rows: usize,
    ) -> Result<Vec<Option<u32>>> {
        match &self.keys {
            None => Ok(vec![Some(0); rows]),
            Some(index) => index.lookup(keys),
        }
    }

    fn index(&self) -> &KeyedIndex {
        self.index.get_or_init(|| {
            // Counting sort of `seq` by group: stable, so each group's
            // slice stays in time order.
            let mut offsets = vec![0usize; self.groups + 1];
            for &g in &self.seq_key {
                offsets[g as usize + 1] += 1;
            }
            for i in 0..self.groups {
                offsets[i + 1] += offsets[i];
            }
            let mut fill = offsets.clone();
            let mut rows = vec![0u32; self.seq.len()];
            let mut ts = vec![0i64; self.seq.len()];
            for (k, &g) in self.seq_key.iter().enumerate() {
                let at = &mut fill[g as usize];
                rows[*at] = self.seq[k];
                ts[*at] = self.seq_ts[k];
                *at += 1;
            }
            KeyedIndex { offsets, rows, ts }
        })
    }

    /// The row of group `g` that a lookup at time `t` finds, by binary
    /// search in the per-key index: backward, the last row with time `<= t`
    /// (`< t` when `strict`); forward, the first with time `>= t` (`> t`).
    /// Returns the row and its time.
    pub(crate) fn lookup(
        &self,
        g: u32,
        t: i64,
        forward: bool,
        strict: bool,
    ) -> Option<(u32, i64)> {
        let ix = self.index();
        let (a, b) = (ix.offsets[g as usize], ix.offsets[g as usize + 1]);
        let ts = &ix.ts[a..b];
        if forward {
            let i = ts.partition_point(|&x| if strict { x <= t } else { x < t });
            (i < ts.len()).then(|| (ix.rows[a + i], ts[i]))
        } else {
            let i = ts.partition_point(|&x| if strict { x < t } else { x <= t });
            (i > 0).then(|| (ix.rows[a + i - 1], ts[i - 1]))
        }
    }
}
