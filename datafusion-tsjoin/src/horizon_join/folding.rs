//! The folding HORIZON JOIN's execution: the aggregates grouped by
//! `h.offset` alone (see [`OffsetFold`]) updated from the matches without
//! emitting pairs.
//!
//! Left rows are gathered into chunks (up to [`CHUNK_ROWS`]). Each chunk
//! is put in key-group order (a stable counting sort by the first read
//! right table's group), then folded in slices of `batch_size` rows and,
//! per slice, blocks of [`OFFSET_BLOCK`] offsets: every group's run of
//! rows is looked up in the table's [`TimeDirectory`] (each lookup starts
//! from its time's bucket, so none waits on another), reading the group's
//! times front to back, and the right leaves ([`FoldPlan`]) are gathered
//! at the matches' positions in the per-key index, where they were laid
//! out in the same order. So lookups and gathers read memory in order,
//! where the pair-emitting path ([`super::stream`]) jumps between the 61
//! places of a row's offsets. Rows the fold never matches (a NULL time, a
//! key the right side lacks, a left-only ON filter that rejects them) go
//! last and read the leaves' NULL row.
//!
//! The pairs reach each offset's accumulators in group order rather than
//! left order: an aggregate without ORDER BY (the only kind folded)
//! promises no order.

use super::columns::OutputColumns;
use super::fold::OffsetFold;
use super::fold_plan::{FoldPlan, LeafSide};
use super::metrics::HorizonJoinMetrics;
use super::spec::HorizonJoinSpec;
use crate::kernels::KernelSet;
use crate::temporal::{
    BuiltTimeline, RunShape, TimeDirectory, Timeline, joined, key_arrays,
    record_join_time, ticks,
};
use datafusion::arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, AsArray, Int64Array, PrimitiveArray,
    RecordBatch, RecordBatchOptions, UInt32Array, downcast_primitive_array, make_array,
    new_null_array,
};
use datafusion::arrow::buffer::{BooleanBuffer, NullBuffer, ScalarBuffer};
use datafusion::arrow::compute::{cast, concat, take};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::logical_expr::Accumulator;
use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// Left rows folded together at most (about 60-100 bytes each while the
/// chunk is folded): enough that a key group's run is long, so its
/// lookups read the group's times and leaves in order.
pub(super) const CHUNK_ROWS: usize = 1 << 17;

/// Offsets looked up together before their pairs are evaluated: positions
/// for a slice of `batch_size` rows at this many offsets stay in the
/// core's cache.
const OFFSET_BLOCK: usize = 8;

/// What every partition's fold shares, built once with the timelines:
/// the [`FoldPlan`] and each right leaf's values.
#[derive(Debug)]
pub(super) struct FoldInputs {
    /// The arguments split into leaves.
    pub plan: FoldPlan,
    /// Per leaf, for a right leaf: its values (see [`RightLeaf`]).
    right: Vec<Option<RightLeaf>>,
    /// Per right table the leaves read, where its key groups' time
    /// buckets start (what every lookup starts from).
    directories: Vec<Option<TimeDirectory>>,
}

/// A right leaf's value at each position of its table's per-key index,
/// then one more over a right row of NULLs (what a pair without a match
/// reads).
#[derive(Debug)]
struct RightLeaf {
    values: ArrayRef,
    /// The same values without a null buffer, when only the last (the NULL
    /// row's) is NULL: what a slice whose pairs all matched gathers from,
    /// so that `take` copies no validity bits.
    dense: Option<ArrayRef>,
}

impl RightLeaf {
    fn new(values: ArrayRef) -> Result<Self> {
        let last_only =
            values.logical_null_count() == usize::from(values.is_null(values.len() - 1));
        let dense = if last_only && values.nulls().is_some() {
            Some(make_array(
                values.to_data().into_builder().nulls(None).build()?,
            ))
        } else {
            None
        };
        Ok(Self { values, dense })
    }

    /// The values for pairs whose positions are in a slice (`none`: some
    /// pair there did not match).
    fn for_slice(&self, none: bool) -> &ArrayRef {
        match (&self.dense, none) {
            (Some(dense), false) => dense,
            _ => &self.values,
        }
    }
}

impl FoldInputs {
    /// The plan of `fold` over the join's `columns` and its right leaves
    /// evaluated over `timelines` (whose per-key indexes this builds);
    /// planned again with bare columns when a one-sided right expression
    /// fails over the whole right side.
    pub(super) fn try_new(
        fold: &OffsetFold,
        columns: &OutputColumns,
        timelines: &[BuiltTimeline],
    ) -> Result<Self> {
        let plan = |precompute| {
            FoldPlan::try_new(fold, &columns.sources, timelines.len(), precompute)
        };
        match Self::evaluate(plan(true)?, timelines) {
            Err(DataFusionError::ResourcesExhausted(e)) => {
                Err(DataFusionError::ResourcesExhausted(e))
            }
            Err(_) => Self::evaluate(plan(false)?, timelines),
            ok => ok,
        }
    }

    /// Builds what the fold reads in two rounds of two threads (the
    /// steps of a round need nothing from each other, and the partitions
    /// wait for the build): the right leaves evaluated beside the per-key
    /// indexes, then the leaves scattered into index order beside the
    /// directories.
    fn evaluate(plan: FoldPlan, timelines: &[BuiltTimeline]) -> Result<Self> {
        let reads = |j: usize| plan.reads_right(j);
        let (evaluated, indexed) = std::thread::scope(|scope| {
            let evaluated = scope.spawn(|| Self::evaluate_leaves(&plan, timelines));
            let indexed = timelines
                .iter()
                .enumerate()
                .filter(|&(j, _)| reads(j))
                .try_for_each(|(_, built)| built.ensure_index());
            let doing = "HorizonJoinExec: evaluating the right leaves";
            (joined(evaluated.join(), doing), indexed)
        });
        indexed?;
        let evaluated = evaluated?;
        let kernels = KernelSet::detect();
        let (directories, right) = std::thread::scope(|scope| {
            let directories = scope.spawn(|| {
                Ok(timelines
                    .iter()
                    .enumerate()
                    .map(|(j, built)| {
                        reads(j).then(|| TimeDirectory::new(&built.timeline, kernels))
                    })
                    .collect::<Vec<_>>())
            });
            let right = plan
                .leaves
                .iter()
                .zip(evaluated)
                .map(|(leaf, values)| match (leaf.side, values) {
                    (LeafSide::Right(j), Some((values, null))) => {
                        let tl = &timelines[j].timeline;
                        let keyed = tl.to_keyed_order(values.as_ref(), null.as_ref())?;
                        RightLeaf::new(keyed).map(Some)
                    }
                    _ => Ok(None),
                })
                .collect::<Result<Vec<_>>>();
            let doing = "HorizonJoinExec: building the time directories";
            (joined(directories.join(), doing), right)
        });
        let (directories, right) = (directories?, right?);
        for (built, dir) in timelines.iter().zip(&directories) {
            if let Some(dir) = dir {
                built.try_grow(dir.bytes())?;
            }
        }
        for (leaf, values) in plan.leaves.iter().zip(&right) {
            if let (LeafSide::Right(j), Some(v)) = (leaf.side, values) {
                let dense = v.dense.as_ref().map_or(0, |d| d.get_array_memory_size());
                timelines[j].try_grow(v.values.get_array_memory_size() + dense)?;
            }
        }
        Ok(Self {
            plan,
            right,
            directories,
        })
    }

    /// Per leaf, for a right leaf: its values over its table's rows as
    /// they are, and over one row of NULLs (what a pair without a match
    /// reads).
    fn evaluate_leaves(
        plan: &FoldPlan,
        timelines: &[BuiltTimeline],
    ) -> Result<Vec<Option<LeafValues>>> {
        let mut inputs = vec![];
        for (j, built) in timelines.iter().enumerate() {
            if !plan.reads_right(j) {
                inputs.push(None);
                continue;
            }
            let batch = &built.timeline.batch;
            let schema = batch.schema();
            let fields: Vec<Field> = plan.right_inputs[j]
                .iter()
                .map(|&c| schema.field(c).clone().with_nullable(true))
                .collect();
            let schema = Arc::new(Schema::new(fields));
            let rows = RecordBatch::try_new_with_options(
                Arc::clone(&schema),
                plan.right_inputs[j]
                    .iter()
                    .map(|&c| Arc::clone(batch.column(c)))
                    .collect(),
                &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
            )?;
            let nulls = RecordBatch::try_new_with_options(
                Arc::clone(&schema),
                schema
                    .fields()
                    .iter()
                    .map(|f| new_null_array(f.data_type(), 1))
                    .collect(),
                &RecordBatchOptions::new().with_row_count(Some(1)),
            )?;
            inputs.push(Some((rows, nulls)));
        }
        plan.leaves
            .iter()
            .map(|leaf| {
                let LeafSide::Right(j) = leaf.side else {
                    return Ok(None);
                };
                let Some((rows, nulls)) = &inputs[j] else {
                    unreachable!("a right leaf's table is read")
                };
                let values = leaf.expr.evaluate(rows)?.into_array(rows.num_rows())?;
                let null = leaf.expr.evaluate(nulls)?.into_array(1)?;
                Ok(Some((values, null)))
            })
            .collect()
    }
}

/// A right leaf's values over its table's rows (input order), and over
/// one row of NULLs.
type LeafValues = (ArrayRef, ArrayRef);

/// Per offset, one accumulator per folded aggregate (see [`OffsetFold`]).
pub(super) struct Folding {
    fold: Arc<OffsetFold>,
    accumulators: Vec<Vec<Box<dyn Accumulator>>>,
    /// Whether any left row came (no row: no group, as an aggregate).
    seen: bool,
    /// The accumulators' memory (as `Accumulator::size` reports it).
    reservation: MemoryReservation,
}

impl Folding {
    pub(super) fn try_new(
        fold: Arc<OffsetFold>,
        offsets: usize,
        context: &TaskContext,
    ) -> Result<Self> {
        let accumulators = (0..offsets)
            .map(|_| fold.aggr.iter().map(|a| a.create_accumulator()).collect())
            .collect::<Result<_>>()?;
        let reservation =
            MemoryConsumer::new("HorizonJoinExec[fold]").register(context.memory_pool());
        let mut this = Self {
            fold,
            accumulators,
            seen: false,
            reservation,
        };
        this.account()?;
        Ok(this)
    }

    /// Resizes the reservation to what the accumulators hold now: a
    /// `Resources exhausted` error when the pool has no room.
    fn account(&mut self) -> Result<()> {
        let bytes = self.accumulators.iter().flatten().map(|a| a.size()).sum();
        self.reservation.try_resize(bytes)
    }

    /// The fold's rows: per offset, its states (partial) or values.
    fn finish(mut self, offsets: &[i64]) -> Result<Option<RecordBatch>> {
        if !self.seen {
            return Ok(None);
        }
        let mut columns: Vec<ArrayRef> =
            vec![Arc::new(Int64Array::from(offsets.to_vec()))];
        for a in 0..self.fold.aggr.len() {
            let mut per_offset: Vec<Vec<ScalarValue>> = vec![];
            for accs in &mut self.accumulators {
                per_offset.push(if self.fold.partial {
                    accs[a].state()?
                } else {
                    vec![accs[a].evaluate()?]
                });
            }
            let width = per_offset.first().map_or(0, Vec::len);
            for c in 0..width {
                columns.push(ScalarValue::iter_to_array(
                    per_offset.iter().map(|s| s[c].clone()),
                )?);
            }
        }
        Ok(Some(RecordBatch::try_new(
            Arc::clone(&self.fold.schema),
            columns,
        )?))
    }
}

/// Left rows waiting to be folded: per left leaf its arrays, per row its
/// time, and per read right table its key group (`None`: matches nothing).
#[derive(Default)]
struct Chunk {
    left: Vec<Vec<ArrayRef>>,
    ticks: Vec<Option<i64>>,
    groups: Vec<Vec<Option<u32>>>,
    rows: usize,
}

/// One group's rows in a chunk's group order: `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    g: u32,
    start: usize,
    end: usize,
}

/// Folds the left batches of one partition (see the module docs).
pub(super) struct Folder {
    args: FolderArgs,
    /// The right tables the leaves read; the first orders each chunk.
    read: Vec<usize>,
    /// Per leaf, its slot in [`Chunk::left`] (left leaves only).
    left_slot: Vec<Option<usize>>,
    chunk: Chunk,
    /// Rows per evaluated slice (the session's batch size).
    slice: usize,
    /// Per read table, the positions of a slice's rows at a block of
    /// offsets and, per offset, whether some pair did not match: reused
    /// from block to block.
    positions: Vec<(Vec<u32>, Vec<bool>)>,
    reservation: MemoryReservation,
}

/// What a [`Folder`] is made of.
pub(super) struct FolderArgs {
    pub timelines: Arc<Vec<BuiltTimeline>>,
    pub inputs: Arc<FoldInputs>,
    pub spec: Arc<HorizonJoinSpec>,
    pub offsets: Arc<Vec<i64>>,
    pub metrics: HorizonJoinMetrics,
    pub folding: Folding,
}

impl Folder {
    pub(super) fn new(args: FolderArgs, context: &TaskContext) -> Self {
        let plan = &args.inputs.plan;
        let read = (0..args.timelines.len())
            .filter(|&j| plan.reads_right(j))
            .collect();
        let mut slots = 0;
        let left_slot = plan
            .leaves
            .iter()
            .map(|l| {
                (l.side == LeafSide::Left).then(|| {
                    slots += 1;
                    slots - 1
                })
            })
            .collect();
        let reservation = MemoryConsumer::new("HorizonJoinExec[fold chunk]")
            .register(context.memory_pool());
        Self {
            args,
            read,
            left_slot,
            chunk: Chunk::default(),
            slice: context.session_config().batch_size().max(1),
            positions: vec![],
            reservation,
        }
    }

    /// Adds one left batch, folding the chunk when it is full (or when
    /// the pool has no room for the batch beside it).
    pub(super) fn push(&mut self, left: &RecordBatch) -> Result<()> {
        let n = left.num_rows();
        if n == 0 {
            return Ok(());
        }
        let start = Instant::now();
        self.args.folding.seen = true;
        self.args.metrics.input_rows.add(n);
        let ts = self.args.spec.left_ts.evaluate(left)?.into_array(n)?;
        let lt = ticks(&ts, 1)?;
        let mut arrays = vec![];
        for leaf in &self.args.inputs.plan.leaves {
            if leaf.side == LeafSide::Left {
                arrays.push(leaf.expr.evaluate(left)?.into_array(n)?);
            }
        }
        let groups = self
            .read
            .iter()
            .map(|&j| self.groups(j, left, &lt))
            .collect::<Result<Vec<_>>>()?;
        let bytes = arrays
            .iter()
            .map(|a| a.get_array_memory_size())
            .sum::<usize>()
            + n * (16 + 8 * groups.len());
        // Room for the batch and for the chunk's ordered copies beside it.
        if let Err(e) = self.reservation.try_grow(2 * bytes) {
            if self.chunk.rows == 0 {
                return Err(e);
            }
            self.fold_chunk()?;
            self.reservation.try_grow(2 * bytes)?;
        }
        let chunk = &mut self.chunk;
        chunk.left.resize_with(arrays.len(), Vec::new);
        for (slot, a) in chunk.left.iter_mut().zip(arrays) {
            slot.push(a);
        }
        chunk.ticks.extend(lt);
        chunk.groups.resize_with(groups.len(), Vec::new);
        for (slot, g) in chunk.groups.iter_mut().zip(groups) {
            slot.extend(g);
        }
        chunk.rows += n;
        if chunk.rows >= CHUNK_ROWS {
            self.fold_chunk()?;
        }
        record_join_time(
            &self.args.metrics.join_time,
            &self.args.metrics.baseline,
            start,
        );
        Ok(())
    }

    /// Folds what is left and returns the fold's rows.
    pub(super) fn finish(mut self) -> Result<Option<RecordBatch>> {
        let start = Instant::now();
        self.fold_chunk()?;
        record_join_time(
            &self.args.metrics.join_time,
            &self.args.metrics.baseline,
            start,
        );
        self.args.folding.finish(&self.args.offsets)
    }

    /// Each row's key group in right table `j` (`None` where it can match
    /// nothing: a NULL time, a key the table lacks, rejected by the
    /// table's left-only ON filter).
    fn groups(
        &self,
        j: usize,
        left: &RecordBatch,
        lt: &[Option<i64>],
    ) -> Result<Vec<Option<u32>>> {
        let r = &self.args.spec.rights[j];
        let allowed = match &r.left_filter {
            Some(f) => Some(f.evaluate(left)?.into_array(left.num_rows())?),
            None => None,
        };
        let keys = key_arrays(&r.left_keys, left)?;
        let tl = &self.args.timelines[j].timeline;
        tl.matchable_groups(&keys, lt, allowed.as_ref().map(|a| a.as_boolean()))
    }

    /// Folds the chunk's rows into every offset's accumulators: in blocks
    /// of [`OFFSET_BLOCK`] offsets, each looked up over a slice of rows
    /// at once, then evaluated offset by offset.
    fn fold_chunk(&mut self) -> Result<()> {
        let chunk = std::mem::take(&mut self.chunk);
        let n = chunk.rows;
        if n == 0 {
            return Ok(());
        }
        let ordered = self.order(chunk)?;
        let offsets = Arc::clone(&self.args.offsets);
        // Slice after slice, every block of offsets: a slice's key groups'
        // times, buckets and leaves stay in the core's cache over the
        // blocks (block after block over the whole chunk read them again
        // from memory for each block).
        let mut run_at = 0;
        for s in (0..n).step_by(self.slice) {
            let rows = s..(s + self.slice).min(n);
            let slice_runs = run_at;
            for first in (0..offsets.len()).step_by(OFFSET_BLOCK) {
                let block = first..(first + OFFSET_BLOCK).min(offsets.len());
                // Each block starts at the slice's first run and stops at
                // the same run.
                run_at = slice_runs;
                let mut positions = std::mem::take(&mut self.positions);
                self.positions(&ordered, &block, &rows, &mut run_at, &mut positions);
                for ki in block.clone() {
                    self.fold_slice(&ordered, ki, &rows, &positions, ki - first)?;
                }
                self.positions = positions;
            }
            self.args.folding.account()?;
        }
        self.args
            .metrics
            .lookups
            .add(n * offsets.len() * self.read.len());
        self.reservation.free();
        Ok(())
    }

    /// `chunk`'s rows put in key-group order (see [`Ordered`]).
    fn order(&self, chunk: Chunk) -> Result<Ordered> {
        let n = chunk.rows;
        let (perm, runs) = match self.read.first() {
            Some(&j) => {
                order_by_group(&chunk.groups[0], self.args.timelines[j].timeline.groups)
            }
            None => ((0..n as u32).collect(), vec![]),
        };
        let lt: Vec<i64> = perm
            .iter()
            .map(|&r| chunk.ticks[r as usize].unwrap_or(0))
            .collect();
        let lt_valid = NullBuffer::from_iter(
            perm.iter().map(|&r| chunk.ticks[r as usize].is_some()),
        );
        let others = chunk
            .groups
            .iter()
            .skip(1)
            .map(|g| perm.iter().map(|&r| g[r as usize]).collect())
            .collect();
        let plain: Vec<bool> = self
            .read
            .iter()
            .map(|&j| {
                let factor = self.args.spec.rights[j].scale.left_factor();
                no_overflow(&lt, &self.args.offsets, factor)
            })
            .collect();
        let scaled = self
            .read
            .iter()
            .zip(&plain)
            .map(|(&j, &plain)| {
                let factor = self.args.spec.rights[j].scale.left_factor();
                (plain && factor != 1).then(|| times_factor(&lt, factor))
            })
            .collect();
        let perm = UInt32Array::from(perm);
        let mut left = vec![];
        for slot in &self.left_slot {
            left.push(match slot {
                Some(s) => {
                    let parts: Vec<&dyn Array> =
                        chunk.left[*s].iter().map(|a| a.as_ref()).collect();
                    Some(take(concat(&parts)?.as_ref(), &perm, None)?)
                }
                None => None,
            });
        }
        Ok(Ordered {
            lt,
            lt_valid,
            left,
            runs,
            others,
            plain,
            scaled,
        })
    }

    /// Per read table, the index positions of `rows` (of `ordered`) at
    /// the offsets numbered `block`, offset after offset (`rows.len()`
    /// apart), and per offset whether some pair did not match: into `out`.
    fn positions(
        &mut self,
        ordered: &Ordered,
        block: &Range<usize>,
        rows: &Range<usize>,
        run_at: &mut usize,
        out: &mut Vec<(Vec<u32>, Vec<bool>)>,
    ) {
        let len = rows.len();
        let offsets = &self.args.offsets[block.clone()];
        out.resize_with(self.read.len(), Default::default);
        for (t, &j) in self.read.iter().enumerate() {
            let tl = &self.args.timelines[j].timeline;
            let factor = self.args.spec.rights[j].scale.left_factor();
            let groups = match t.checked_sub(1) {
                None => Groups::Runs {
                    runs: &ordered.runs,
                    at: &mut *run_at,
                },
                Some(o) => Groups::Rows(&ordered.others[o]),
            };
            let dir = self.args.inputs.directories[j]
                .as_ref()
                .expect("a read table has a directory");
            // Plain lookups take times and offsets in common ticks.
            let plain = ordered.plain[t];
            let (lt, offsets) = match &ordered.scaled[t] {
                Some(lt) => (lt, Cow::Owned(times_factor(offsets, factor))),
                None => (&ordered.lt, Cow::Borrowed(offsets)),
            };
            let scale = (factor, plain);
            let (at, unmatched) = &mut out[t];
            slice_positions(tl, dir, &offsets, scale, (rows, lt), groups, at);
            let none = tl.keyed_len() as u32;
            unmatched.clear();
            unmatched.extend(at.chunks(len).map(|c| c.contains(&none)));
        }
    }

    /// Folds the pairs of `rows` (of `ordered`) at offset `ki` (the
    /// `b`-th of its block, whose `positions` these are) into its
    /// accumulators.
    fn fold_slice(
        &mut self,
        ordered: &Ordered,
        ki: usize,
        rows: &Range<usize>,
        positions: &[(Vec<u32>, Vec<bool>)],
        b: usize,
    ) -> Result<()> {
        let (s, len) = (rows.start, rows.len());
        let o = self.args.offsets[ki];
        let plan = &self.args.inputs.plan;
        let columns = plan
            .leaves
            .iter()
            .zip(&ordered.left)
            .zip(&self.args.inputs.right)
            .zip(plan.schema.fields())
            .map(|(((leaf, left), right), field)| {
                Ok(match leaf.side {
                    LeafSide::Left => left.as_ref().expect("left leaf").slice(s, len),
                    LeafSide::Right(j) => {
                        let t = self.read.iter().position(|&x| x == j);
                        let (at, unmatched) = &positions[t.expect("read")];
                        let right = right.as_ref().expect("right leaf");
                        gather(right.for_slice(unmatched[b]), &at[b * len..][..len])?
                    }
                    LeafSide::Offset => Arc::new(Int64Array::from_value(o, len)),
                    LeafSide::Timestamp => {
                        let times: Vec<i64> = ordered.lt[rows.clone()]
                            .iter()
                            .map(|t| t.saturating_add(o))
                            .collect();
                        let valid = ordered.lt_valid.slice(s, len);
                        cast(
                            &Int64Array::new(times.into(), Some(valid)),
                            field.data_type(),
                        )?
                    }
                })
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(len));
        let batch = RecordBatch::try_new_with_options(
            Arc::clone(&plan.schema),
            columns,
            &options,
        )?;
        let accumulators = &mut self.args.folding.accumulators[ki];
        for (args, acc) in plan.args.iter().zip(accumulators) {
            let values = args
                .iter()
                .map(|e| e.evaluate(&batch)?.into_array(len))
                .collect::<Result<Vec<_>>>()?;
            acc.update_batch(&values)?;
        }
        Ok(())
    }
}

/// A chunk's rows in key-group order (rows without a group last), as the
/// lookups and the leaves read them.
struct Ordered {
    /// Left times, in left ticks (0 where NULL).
    lt: Vec<i64>,
    /// Where the left time is not NULL.
    lt_valid: NullBuffer,
    /// Per leaf, for a left leaf: its values.
    left: Vec<Option<ArrayRef>>,
    /// Each group's rows, for the first read table.
    runs: Vec<Run>,
    /// Every other read table's group per row.
    others: Vec<Vec<Option<u32>>>,
    /// Per read table: no lookup time can overflow (see [`no_overflow`]).
    plain: Vec<bool>,
    /// Per read table, where its lookups are plain and its factor is not
    /// 1: the left times in common ticks (see [`RunShape::plain`]).
    scaled: Vec<Option<Vec<i64>>>,
}

/// How [`slice_positions`] finds a slice's rows' key groups: for the
/// chunk's first read table, by its runs (`at`: the first run not yet
/// done, moved on); for another, its group per row.
enum Groups<'a> {
    Runs { runs: &'a [Run], at: &'a mut usize },
    Rows(&'a [Option<u32>]),
}

/// The per-key index positions in `tl` of the rows `rows` (left times
/// `lt`, in the chunk's group order) at a block of offsets, offset after
/// offset, `none` (the leaves' NULL row) where nothing matches, looked up
/// in `dir`, into `out`. By runs, each group's rows are looked up
/// together; by rows, one by one.
fn slice_positions(
    tl: &Timeline,
    dir: &TimeDirectory,
    block: &[i64],
    (factor, plain): (i64, bool),
    (rows, lt): (&Range<usize>, &[i64]),
    groups: Groups,
    out: &mut Vec<u32>,
) {
    let (s, e, len) = (rows.start, rows.end, rows.len());
    let none = tl.keyed_len() as u32;
    out.clear();
    out.resize(len * block.len(), none);
    let how = RunShape {
        offsets: block,
        factor,
        plain,
        none,
        stride: len,
    };
    match groups {
        Groups::Runs { runs, at } => {
            while let Some(r) = runs.get(*at) {
                if r.start >= e {
                    break;
                }
                let (a, b) = (r.start.max(s), r.end.min(e));
                dir.lookup_run(
                    r.g,
                    tl.group_span(r.g),
                    &how,
                    &lt[a..b],
                    &mut out[a - s..],
                );
                if r.end > e {
                    break;
                }
                *at += 1;
            }
        }
        Groups::Rows(groups) => {
            for (i, g) in groups[s..e].iter().enumerate() {
                if let Some(g) = *g {
                    let t = &lt[s + i..s + i + 1];
                    dir.lookup_run(g, tl.group_span(g), &how, t, &mut out[i..]);
                }
            }
        }
    }
}

/// `values` at positions `at`: arrow's `take` without an index array to
/// build; a primitive array's validity is gathered only where it has
/// NULLs.
fn gather(values: &ArrayRef, at: &[u32]) -> Result<ArrayRef> {
    downcast_primitive_array!(
        values => Ok(Arc::new(gather_primitive(values, at))),
        _ => Ok(take(values.as_ref(), &UInt32Array::from(at.to_vec()), None)?)
    )
}

fn gather_primitive<T: ArrowPrimitiveType>(
    values: &PrimitiveArray<T>,
    at: &[u32],
) -> PrimitiveArray<T> {
    let from = values.values();
    let out: ScalarBuffer<T::Native> = at.iter().map(|&p| from[p as usize]).collect();
    let nulls = values.nulls().filter(|n| n.null_count() > 0).map(|n| {
        NullBuffer::new(BooleanBuffer::collect_bool(at.len(), |i| {
            n.is_valid(at[i] as usize)
        }))
    });
    PrimitiveArray::new(out, nulls).with_data_type(values.data_type().clone())
}

/// `values` times `factor`, wrapping: where `(t + o) * factor` does not
/// overflow (see [`no_overflow`]), `t * factor + o * factor` equals it.
fn times_factor(values: &[i64], factor: i64) -> Vec<i64> {
    values.iter().map(|v| v.wrapping_mul(factor)).collect()
}

/// Whether `(t + o) * factor` stays in range for every time `t` of `lt`
/// and offset `o` of `offsets` (ascending): then the lookups need not
/// saturate.
fn no_overflow(lt: &[i64], offsets: &[i64], factor: i64) -> bool {
    let (Some(&lo), Some(&hi)) = (lt.iter().min(), lt.iter().max()) else {
        return true;
    };
    let (Some(&o_lo), Some(&o_hi)) = (offsets.first(), offsets.last()) else {
        return true;
    };
    [lo.checked_add(o_lo), hi.checked_add(o_hi)]
        .into_iter()
        .all(|t| t.and_then(|t| t.checked_mul(factor)).is_some())
}

/// A chunk's rows (indices) ordered by key group, stably, the rows without
/// one (`None`) last; and each group's run in that order, by group.
fn order_by_group(groups: &[Option<u32>], count: usize) -> (Vec<u32>, Vec<Run>) {
    let n = groups.len();
    let bucket = |g: &Option<u32>| g.map_or(count, |g| g as usize);
    let mut runs = vec![];
    if count <= 4 * n + 1024 {
        // Counting sort; bucket `count` holds the rows without a group.
        let mut start = vec![0usize; count + 2];
        for g in groups {
            start[bucket(g) + 1] += 1;
        }
        for b in 0..=count {
            start[b + 1] += start[b];
        }
        let mut fill = start.clone();
        let mut perm = vec![0u32; n];
        for (r, g) in groups.iter().enumerate() {
            let b = bucket(g);
            perm[fill[b]] = r as u32;
            fill[b] += 1;
        }
        for g in 0..count {
            if start[g + 1] > start[g] {
                runs.push(Run {
                    g: g as u32,
                    start: start[g],
                    end: start[g + 1],
                });
            }
        }
        return (perm, runs);
    }
    // Far more groups than rows: sort the rows that have one.
    let mut keyed: Vec<(u32, u32)> = groups
        .iter()
        .enumerate()
        .filter_map(|(r, g)| Some(((*g)?, r as u32)))
        .collect();
    keyed.sort_unstable();
    for (i, &(g, _)) in keyed.iter().enumerate() {
        match runs.last_mut() {
            Some(Run { g: last, end, .. }) if *last == g => *end = i + 1,
            _ => runs.push(Run {
                g,
                start: i,
                end: i + 1,
            }),
        }
    }
    let perm = keyed
        .iter()
        .map(|&(_, r)| r)
        .chain((0..n as u32).filter(|&r| groups[r as usize].is_none()))
        .collect();
    (perm, runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Both ways of ordering (counting sort, and sorting when the groups
    /// far outnumber the rows) give every row once, groups ascending,
    /// rows ascending within a group, the rows without a group last, and
    /// runs that cover exactly the grouped rows.
    #[test]
    fn rows_are_ordered_by_group_stably() {
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..200 {
            let n = rng.random_range(0..50);
            let count = if rng.random_bool(0.5) { 5 } else { 100_000 };
            let groups: Vec<Option<u32>> = (0..n)
                .map(|_| {
                    rng.random_bool(0.8)
                        .then(|| rng.random_range(0..count.min(7)) as u32)
                })
                .collect();
            let (perm, runs) = order_by_group(&groups, count);
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by_key(|&r| groups[r as usize].map_or(u64::MAX, u64::from));
            assert_eq!(perm, want, "{groups:?}");
            let grouped = groups.iter().filter(|g| g.is_some()).count();
            let mut at = 0;
            for r in &runs {
                assert_eq!(r.start, at);
                assert!(r.end > r.start);
                for &row in &perm[r.start..r.end] {
                    assert_eq!(groups[row as usize], Some(r.g));
                }
                at = r.end;
            }
            assert_eq!(at, grouped);
        }
    }
}
