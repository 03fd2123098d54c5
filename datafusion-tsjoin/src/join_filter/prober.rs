//! [`Prober`]: applies a scan's join filters to each batch in adaptive
//! order, as Quickstep's `LIPFilterAdaptiveProber` does.
//!
//! Each filter only sees the rows every filter before it kept, so the order
//! decides the work. The prober measures each filter's time per row and
//! the share of rows it drops, and runs them cheapest-per-dropped-row first
//! (the order that minimises the expected cost of independent filters). It
//! learns on small slices of the first batches (64 rows, then 128, …), so a
//! bad first guess costs little, and switches off a filter that drops
//! almost nothing once it has seen enough rows (Q4.1's date filter passes
//! every row).

use super::filter::BitFilter;
use super::metrics::FilterMetrics;
use datafusion::arrow::array::RecordBatch;
use datafusion::common::Result;
use std::sync::Arc;
use std::time::Instant;

/// Rows of the first slice while learning; each next slice is twice as
/// long, until slices reach this many rows in total.
const FIRST_SLICE: usize = 64;
const LEARNING_ROWS: usize = 1 << 15;
/// A filter that has checked this many rows ...
const SWITCH_OFF_AFTER: u64 = 1 << 16;
/// ... and kept at least this share of them is switched off.
const SWITCH_OFF_PASS_RATE: f64 = 0.98;

/// One filter in the prober, with what it measured.
#[derive(Debug)]
struct Slot {
    /// The filter's index in its operator.
    index: usize,
    filter: Arc<BitFilter>,
    metrics: FilterMetrics,
    rows_in: u64,
    rows_out: u64,
    nanos: u64,
    on: bool,
}

impl Slot {
    /// Expected nanoseconds spent per row this filter drops (lower runs
    /// first); unmeasured filters first.
    fn rank(&self) -> f64 {
        if self.rows_in == 0 {
            return 0.0;
        }
        let cost = (self.nanos.max(1)) as f64 / self.rows_in as f64;
        let dropped = 1.0 - self.rows_out as f64 / self.rows_in as f64;
        cost / dropped.max(1e-3)
    }
}

/// The join filters of one stream, in the order they run.
#[derive(Debug, Default)]
pub(crate) struct Prober {
    slots: Vec<Slot>,
    rows_seen: usize,
    /// The rows of the slice at hand (kept to reuse its allocation).
    part: Vec<u32>,
}

impl Prober {
    /// Adds the operator's filter `index` (it runs first until measured,
    /// if it is bits).
    pub(crate) fn push(
        &mut self,
        index: usize,
        filter: Arc<BitFilter>,
        metrics: FilterMetrics,
    ) {
        self.slots.push(Slot {
            index,
            filter,
            metrics,
            rows_in: 0,
            rows_out: 0,
            nanos: 0,
            on: true,
        });
        self.reorder();
    }

    /// The filters' indices in probe order, each with whether it is on.
    pub(crate) fn order(&self) -> Vec<(usize, bool)> {
        self.slots.iter().map(|s| (s.index, s.on)).collect()
    }

    /// Whether any filter is on.
    pub(crate) fn is_active(&self) -> bool {
        self.slots.iter().any(|s| s.on)
    }

    /// Fills `sel` with the rows of `batch` that pass every filter that is
    /// on, ascending.
    pub(crate) fn select(
        &mut self,
        batch: &RecordBatch,
        sel: &mut Vec<u32>,
    ) -> Result<()> {
        sel.clear();
        let rows = batch.num_rows();
        let mut start = 0;
        let mut slice = sel_slice_len(self.rows_seen, rows);
        let mut part = std::mem::take(&mut self.part);
        while start < rows {
            let end = start.saturating_add(slice).min(rows);
            part.clear();
            part.extend(start as u32..end as u32);
            self.probe(batch, &mut part)?;
            sel.extend_from_slice(&part);
            self.rows_seen += end - start;
            start = end;
            slice = sel_slice_len(self.rows_seen, slice.saturating_mul(2));
        }
        self.part = part;
        Ok(())
    }

    /// Runs the filters that are on over `sel`, then re-ranks them.
    fn probe(&mut self, batch: &RecordBatch, sel: &mut Vec<u32>) -> Result<()> {
        for slot in self.slots.iter_mut().filter(|s| s.on) {
            if sel.is_empty() {
                break;
            }
            let before = sel.len();
            let timer = slot.metrics.time.timer();
            let started = Instant::now();
            slot.filter.retain(batch, sel)?;
            slot.nanos += started.elapsed().as_nanos() as u64;
            timer.done();
            slot.rows_in += before as u64;
            slot.rows_out += sel.len() as u64;
            slot.metrics.rows_in.add(before);
            slot.metrics.rows_out.add(sel.len());
            if slot.rows_in >= SWITCH_OFF_AFTER
                && slot.rows_out as f64 >= SWITCH_OFF_PASS_RATE * slot.rows_in as f64
            {
                slot.on = false;
                slot.metrics.switched_off.add(1);
            }
        }
        self.reorder();
        Ok(())
    }

    /// Sorts the filters that are on by rank; those switched off go last.
    fn reorder(&mut self) {
        self.slots
            .sort_by(|a, b| b.on.cmp(&a.on).then_with(|| a.rank().total_cmp(&b.rank())));
    }
}

/// The next slice length: `wanted` while learning, the whole batch after.
fn sel_slice_len(rows_seen: usize, wanted: usize) -> usize {
    if rows_seen < LEARNING_ROWS {
        wanted.max(FIRST_SLICE)
    } else {
        usize::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::join_filter::filter::BitFilter;
    use datafusion::arrow::array::Int32Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, col, lit};
    use datafusion::physical_plan::PhysicalExpr;
    use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;

    fn range(s: &Schema, c: &str, lo: i32, hi: i32) -> Arc<dyn PhysicalExpr> {
        let k = col(c, s).unwrap();
        Arc::new(BinaryExpr::new(
            Arc::new(BinaryExpr::new(Arc::clone(&k), Operator::GtEq, lit(lo))),
            Operator::And,
            Arc::new(BinaryExpr::new(k, Operator::LtEq, lit(hi))),
        ))
    }

    #[test]
    fn selective_filters_move_first_and_useless_ones_switch_off() {
        let s = Schema::new(vec![
            Field::new("a", DataType::Int32, false),
            Field::new("b", DataType::Int32, false),
        ]);
        let metrics = ExecutionPlanMetricsSet::new();
        let mut prober = Prober::default();
        // `a` passes everything (first by insertion), `b` 1 %.
        let a = col("a", &s).unwrap();
        let useless = BitFilter::try_new(&range(&s, "a", 0, 9999), &a, &s, 1 << 20)
            .unwrap()
            .unwrap();
        prober.push(
            0,
            Arc::new(useless),
            FilterMetrics::new(&metrics, 0, "a", "exact_bits"),
        );
        let b = col("b", &s).unwrap();
        let selective = BitFilter::try_new(&range(&s, "b", 0, 0), &b, &s, 1 << 10)
            .unwrap()
            .unwrap();
        prober.push(
            1,
            Arc::new(selective),
            FilterMetrics::new(&metrics, 0, "b", "exact_bits"),
        );
        let n = 8192;
        let batch = RecordBatch::try_new(
            Arc::new(s),
            vec![
                Arc::new(Int32Array::from_iter_values(0..n)),
                Arc::new(Int32Array::from_iter_values((0..n).map(|v| v % 100))),
            ],
        )
        .unwrap();
        let mut sel = Vec::new();
        for _ in 0..12 {
            prober.select(&batch, &mut sel).unwrap();
            let want: Vec<u32> = (0..n as u32).filter(|v| v % 100 == 0).collect();
            assert_eq!(sel, want);
        }
        assert_eq!(prober.order(), vec![(1, true), (0, true)]);
        // Once measured, `b` runs first and `a` sees only what `b` keeps.
        assert!(
            prober.slots[1].rows_in < prober.slots[0].rows_in,
            "{prober:?}"
        );
        assert!(prober.is_active());
    }

    #[test]
    fn a_filter_that_drops_nothing_is_switched_off() {
        let s = Schema::new(vec![Field::new("a", DataType::Int32, false)]);
        let metrics = ExecutionPlanMetricsSet::new();
        let mut prober = Prober::default();
        let a = col("a", &s).unwrap();
        let all = BitFilter::try_new(&range(&s, "a", 0, 9999), &a, &s, 1 << 20)
            .unwrap()
            .unwrap();
        prober.push(
            0,
            Arc::new(all),
            FilterMetrics::new(&metrics, 0, "a", "exact_bits"),
        );
        let batch = RecordBatch::try_new(
            Arc::new(s),
            vec![Arc::new(Int32Array::from_iter_values(0..8192))],
        )
        .unwrap();
        let mut sel = Vec::new();
        for _ in 0..9 {
            prober.select(&batch, &mut sel).unwrap();
            assert_eq!(sel.len(), 8192);
        }
        assert!(!prober.is_active());
        assert_eq!(prober.order(), vec![(0, false)]);
    }
}
