//! Stages: the work a plan does after (or beside) reading its sources that
//! the sources' fractions do not show.
//!
//! A sort reads its whole input before it emits a row; a temporal join
//! builds its right side first and then probes the left one row at a time.
//! Counted by rows read alone, such a query looks nearly done when its
//! scans end (a `row_number() OVER (PARTITION BY .. ORDER BY ..)` over a
//! whole table reported 94% at a quarter of its time). These operators
//! emit exactly one row per row of one input, so their own progress is
//! plain to read: rows emitted over the rows that input will give.
//!
//! Each such stage over a large input (at least [`MIN_SHARE`] of the rows
//! the sources hold) counts as much as all the sources together: without a
//! cost model, a pass over the data is the unit. Smaller stages (a final
//! `ORDER BY` over a few aggregated rows) count for nothing.

use crate::asof_join::AsofJoinExec;
use crate::priority::PriorityGateExec;
use crate::window_join::WindowJoinExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use std::sync::Arc;

/// Stages over fewer rows than this share of the sources' rows weigh
/// nothing.
pub(super) const MIN_SHARE: f64 = 0.01;

/// An operator that emits one row per row of `input`, and only after
/// reading (part of) it.
#[derive(Debug)]
pub(super) struct Stage {
    plan: Arc<dyn ExecutionPlan>,
    /// The input whose rows it emits, looked through priority gates (which
    /// count no rows).
    input: Arc<dyn ExecutionPlan>,
    /// The input's rows from its statistics, when estimated.
    expected: Option<u64>,
}

impl Stage {
    /// The stage `plan` is, if it is one: a full sort (a top-k keeps only
    /// `fetch` rows and does its work while reading), a WINDOW JOIN or an
    /// ASOF/LT JOIN (one row per left row).
    fn of(plan: &Arc<dyn ExecutionPlan>) -> Option<Self> {
        let input = if let Some(sort) = plan.downcast_ref::<SortExec>() {
            (sort.fetch().is_none()).then(|| Arc::clone(sort.input()))?
        } else if let Some(join) = plan.downcast_ref::<WindowJoinExec>() {
            Arc::clone(join.left())
        } else if plan.downcast_ref::<AsofJoinExec>().is_some() {
            Arc::clone(plan.children()[0])
        } else {
            return None;
        };
        let input = through_gates(input);
        let expected = StatisticsContext::new()
            .compute(input.as_ref(), &StatisticsArgs::new())
            .ok()
            .and_then(|s| s.num_rows.get_value().map(|&r| r as u64));
        Some(Self {
            plan: Arc::clone(plan),
            input,
            expected,
        })
    }

    /// Its fraction done and its weight against all the sources together
    /// (0 or 1), given the rows the sources hold.
    pub(super) fn progress(&self, source_rows: Option<u64>) -> (f64, f64) {
        let emitted = output_rows(&self.plan);
        let seen = output_rows(&self.input);
        let total = self.expected.unwrap_or(0).max(seen).max(emitted);
        let weight = match source_rows {
            Some(s) if s > 0 => {
                // Until the input is estimated or seen, assume it large.
                let rows = if total == 0 { s } else { total };
                if rows as f64 >= MIN_SHARE * s as f64 {
                    1.0
                } else {
                    0.0
                }
            }
            _ => 1.0,
        };
        let fraction = if total == 0 {
            0.0
        } else {
            emitted as f64 / total as f64
        };
        (fraction.min(1.0), weight)
    }
}

/// The stages of `plan`, in pre-order.
pub(super) fn collect_stages(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<Stage>) {
    out.extend(Stage::of(plan));
    for child in plan.children() {
        collect_stages(child, out);
    }
}

fn through_gates(plan: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    match plan.downcast_ref::<PriorityGateExec>() {
        Some(gate) => through_gates(Arc::clone(gate.input())),
        None => plan,
    }
}

fn output_rows(plan: &Arc<dyn ExecutionPlan>) -> u64 {
    plan.metrics()
        .and_then(|m| m.output_rows())
        .map_or(0, |r| r as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::compute::SortOptions;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
    use datafusion::physical_plan::expressions::col;
    use datafusion::prelude::SessionContext;

    fn sort_over(rows: i64, fetch: Option<usize>) -> Arc<dyn ExecutionPlan> {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from_iter_values((0..rows).rev()))],
        )
        .unwrap();
        let input =
            MemorySourceConfig::try_new_exec(&[vec![batch]], Arc::clone(&schema), None)
                .unwrap();
        let ordering = LexOrdering::new([PhysicalSortExpr::new(
            col("x", &schema).unwrap(),
            SortOptions::default(),
        )])
        .unwrap();
        Arc::new(SortExec::new(ordering, input).with_fetch(fetch))
    }

    #[tokio::test]
    async fn a_full_sort_is_a_stage_done_when_it_has_emitted_its_input() {
        let plan = sort_over(1000, None);
        let mut stages = vec![];
        collect_stages(&plan, &mut stages);
        assert_eq!(stages.len(), 1);
        // Before it runs: nothing emitted of 1000 expected rows, and as
        // large as the sources, so it weighs one pass.
        assert_eq!(stages[0].progress(Some(1000)), (0.0, 1.0));
        // Against sources a thousand times larger it weighs nothing.
        assert_eq!(stages[0].progress(Some(1_000_000)).1, 0.0);
        let ctx = SessionContext::new();
        datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx())
            .await
            .unwrap();
        assert_eq!(stages[0].progress(Some(1000)), (1.0, 1.0));
    }

    #[test]
    fn a_top_k_is_not_a_stage() {
        let mut stages = vec![];
        collect_stages(&sort_over(1000, Some(10)), &mut stages);
        assert!(stages.is_empty());
    }
}
