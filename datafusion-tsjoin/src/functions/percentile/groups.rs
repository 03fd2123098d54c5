//! The `GroupsAccumulator`: every group's histogram in one accumulator, in
//! the compact [`Slots`] representation, with exact merges of partial
//! states (so answers do not depend on partitioning or thread count).
//!
//! The inline GROUP BY keeps the same accumulator as its per-aggregate
//! state ([`PercentileGroups::update`] with its dense `u32` group ids,
//! [`PercentileGroups::merge_groups`] straight from another partition's
//! accumulator, without encoding states).

use super::buffers::KeyBuffers;
use super::histogram::{
    ExpRange, Kind, NO_RANGE, Spec, decode_state, double_key, evaluate, evaluate_keys,
    merge_range, negative_int_error,
};
use super::slots::Slots;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BinaryBuilder, BooleanArray, Float64Array, Float64Builder,
    ListBuilder,
};
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type, UInt64Type};
use datafusion::common::{Result, internal_err};
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use std::mem::size_of;
use std::sync::Arc;

/// A group's index: `usize` from DataFusion's aggregate, `u32` from the
/// inline GROUP BY.
pub(crate) trait GroupIndex: Copy {
    fn at(self) -> usize;
}

impl GroupIndex for usize {
    #[inline(always)]
    fn at(self) -> usize {
        self
    }
}

impl GroupIndex for u32 {
    #[inline(always)]
    fn at(self) -> usize {
        self as usize
    }
}

/// Groups up to which a value goes straight to its group's [`Slots`]
/// (where a busy group counts it in place). With more, while the groups
/// have had fewer than [`BUSY`] values each on average, values wait in
/// [`KeyBuffers`] and a group is counted when it has [`COUNT_AT`] of them
/// or is answered: small groups are best kept as plain keys, busy ones as
/// counts.
const DIRECT_GROUPS: usize = 16;

/// Values per group (on average) from which groups are busy.
const BUSY: u64 = 64;

/// Buffered keys a group counts at once.
const COUNT_AT: usize = 1024;

/// Rows ahead whose count the scatter prefetches.
const AHEAD: usize = 16;

/// Prefetches the count that row `i + AHEAD` adds to, its key given by
/// `key` (`None` past the batch's end).
#[inline(always)]
fn prefetch_ahead<G: GroupIndex>(
    groups: &[Slots],
    group_indices: &[G],
    i: usize,
    key: impl FnOnce(usize) -> Option<u32>,
) {
    if let (Some(g), Some(k)) = (group_indices.get(i + AHEAD), key(i + AHEAD)) {
        groups[g.at()].prefetch(k);
    }
}

/// `approx_percentile` over many groups.
#[derive(Debug, Clone)]
pub(crate) struct PercentileGroups {
    spec: Arc<Spec>,
    groups: Vec<Slots>,
    /// Keys not counted yet, with more than [`DIRECT_GROUPS`] groups.
    buffers: KeyBuffers,
    /// Double input only: each group's exponent range.
    ranges: Vec<ExpRange>,
    /// Heap bytes of all groups' slots.
    heap: usize,
    /// One batch's keys (reused).
    keys: Vec<u32>,
    /// One state's pairs (reused).
    pairs: Vec<(u32, u64)>,
    /// One group's buffered keys (reused).
    scratch: Vec<u32>,
    /// Rows updated so far.
    rows: u64,
}

impl PercentileGroups {
    pub fn new(spec: Arc<Spec>) -> Self {
        Self {
            spec,
            groups: vec![],
            buffers: KeyBuffers::default(),
            ranges: vec![],
            heap: 0,
            keys: vec![],
            pairs: vec![],
            scratch: vec![],
            rows: 0,
        }
    }

    /// Makes room for `groups` groups in all.
    pub fn reserve(&mut self, groups: usize) {
        self.groups
            .reserve(groups.saturating_sub(self.groups.len()));
    }

    fn resize(&mut self, total: usize) {
        if self.groups.len() < total {
            self.groups.resize_with(total, Slots::default);
            self.buffers.resize(total);
            if self.spec.kind == Kind::Double {
                self.ranges.resize(total, NO_RANGE);
            }
        }
    }

    /// Counts `self.keys[i]` in group `group_indices[i]` for every row `i`
    /// that `keep` accepts: the hot loop, one tight scatter over the batch
    /// (the keys were computed before, in a loop of their own).
    #[inline]
    fn scatter<G: GroupIndex>(
        &mut self,
        group_indices: &[G],
        keep: impl Fn(usize) -> bool,
    ) {
        if self.buffering() {
            let keys = std::mem::take(&mut self.keys);
            for (i, (&k, &g)) in keys.iter().zip(group_indices).enumerate() {
                if keep(i) {
                    self.buffer(g.at(), k);
                }
            }
            self.keys = keys;
            return;
        }
        let groups = &mut self.groups;
        let keys = &self.keys;
        let mut heap = 0isize;
        // Busy groups' dense counts miss the cache at many groups and high
        // precision: ask for the count a few rows ahead (not for a few
        // groups, whose counts stay in the cache).
        let ahead = groups.len() > DIRECT_GROUPS;
        for (i, (&k, &g)) in keys.iter().zip(group_indices).enumerate() {
            if ahead {
                prefetch_ahead(groups, group_indices, i, |j| keys.get(j).copied());
            }
            if !keep(i) {
                continue;
            }
            let s = &mut groups[g.at()];
            if !s.add_fast(k) {
                heap -= s.heap_size() as isize;
                s.add_slow(k);
                heap += s.heap_size() as isize;
            }
        }
        self.heap = (self.heap as isize + heap) as usize;
    }

    /// Whether values go to the buffers (see [`DIRECT_GROUPS`]).
    fn buffering(&self) -> bool {
        let groups = self.groups.len();
        groups > DIRECT_GROUPS && self.rows < groups as u64 * BUSY
    }

    /// Buffers `key` for group `g`, counting the group's buffer when full.
    #[inline(always)]
    fn buffer(&mut self, g: usize, key: u32) {
        if self.buffers.push(g, key) >= COUNT_AT {
            self.count_buffered(g);
        }
    }

    /// Changes group `g`'s slots with `f`, keeping [`Self::heap`] right.
    #[inline]
    fn change_slots<T>(&mut self, g: usize, f: impl FnOnce(&mut Slots) -> T) -> T {
        let s = &mut self.groups[g];
        self.heap -= s.heap_size();
        let out = f(s);
        self.heap += s.heap_size();
        out
    }

    /// Takes group `g`'s buffered keys out of the buffers and calls `f`
    /// with them and the group's slots (the keys' vector is reused).
    fn with_buffered(
        &mut self,
        g: usize,
        f: impl FnOnce(&Spec, &mut Slots, &mut Vec<u32>),
    ) {
        let mut keys = std::mem::take(&mut self.scratch);
        keys.clear();
        self.buffers.take(g, &mut keys);
        let spec = Arc::clone(&self.spec);
        self.change_slots(g, |s| f(&spec, s, &mut keys));
        self.scratch = keys;
    }

    /// Counts group `g`'s buffered keys.
    #[cold]
    #[inline(never)]
    fn count_buffered(&mut self, g: usize) {
        self.with_buffered(g, |_, s, keys| s.add_keys(keys));
    }

    /// Group `g`'s answers, appended to `out`; its buffered keys are used
    /// up.
    fn answer(&mut self, g: usize, out: &mut Vec<Option<f64>>) {
        self.with_buffered(g, |spec, s, keys| {
            if s.is_empty() {
                // Only buffered keys (most groups, with many groups).
                evaluate_keys(spec, keys, out);
            } else {
                s.extend_buffer(keys);
                evaluate(spec, s, out);
            }
        });
    }

    /// How many groups `emit_to` takes.
    fn emitted(&self, emit_to: EmitTo) -> usize {
        match emit_to {
            EmitTo::All => self.groups.len(),
            EmitTo::First(n) => n.min(self.groups.len()),
        }
    }

    /// Groups `emit_to` takes, their buffered keys moved into their slots.
    fn take_groups(&mut self, emit_to: EmitTo) -> Vec<Slots> {
        let n = self.emitted(emit_to);
        for g in 0..n {
            if self.buffers.len(g) > 0 {
                self.with_buffered(g, |_, s, keys| s.extend_buffer(keys));
            }
        }
        self.forget(emit_to, n)
    }

    /// Takes the first `n` groups (as `emit_to` says), their buffers empty.
    fn forget(&mut self, emit_to: EmitTo, n: usize) -> Vec<Slots> {
        let groups = emit_to.take_needed(&mut self.groups);
        if self.spec.kind == Kind::Double {
            emit_to.take_needed(&mut self.ranges);
        }
        self.buffers.drop_first(n);
        self.heap -= groups.iter().map(Slots::heap_size).sum::<usize>();
        groups
    }

    /// Records `values[i]` in group `group_indices[i]` for every row `i`
    /// that is not NULL and that `opt_filter` keeps.
    pub fn update<G: GroupIndex>(
        &mut self,
        values: &ArrayRef,
        group_indices: &[G],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.resize(total_num_groups);
        self.rows += group_indices.len() as u64;
        let all = values.null_count() == 0 && opt_filter.is_none();
        let layout = self.spec.layout;
        let mut keys = std::mem::take(&mut self.keys);
        keys.clear();
        match values.data_type() {
            DataType::Int64 => {
                let a = values.as_primitive::<Int64Type>().values();
                let negative = if all {
                    a.iter().fold(0, |m, &v| m.min(v)) < 0
                } else {
                    (0..a.len()).any(|i| a[i] < 0 && keep(values, opt_filter, i))
                };
                if negative {
                    return Err(negative_int_error());
                }
                keys.extend(a.iter().map(|&v| layout.int_key(v as u64)));
            }
            DataType::UInt64 => {
                let a = values.as_primitive::<UInt64Type>().values();
                keys.extend(a.iter().map(|&v| layout.int_key(v)));
            }
            DataType::Float64 => {
                // The exponent range is per group and its error depends on
                // the order of values, so doubles stay one loop (computing
                // the keys first, as integers do, then the scatter took 11%
                // more CPU at 1,000 groups), which prefetches the count a
                // few rows ahead as the scatter does (a key is a shift of
                // the value's bits).
                let a = values.as_primitive::<Float64Type>().values();
                let buffered = self.buffering();
                let ahead = !buffered && self.groups.len() > DIRECT_GROUPS;
                for (i, (&v, &g)) in a.iter().zip(group_indices).enumerate() {
                    if ahead {
                        prefetch_ahead(&self.groups, group_indices, i, |j| {
                            a.get(j).map(|&v| layout.double_key(v))
                        });
                    }
                    let g = g.at();
                    if v.is_finite() && (all || keep(values, opt_filter, i)) {
                        let k = double_key(&layout, v, &mut self.ranges[g])?;
                        if buffered {
                            self.buffer(g, k);
                        } else if !self.groups[g].add_fast(k) {
                            self.change_slots(g, |s| s.add_slow(k));
                        }
                    }
                }
                self.keys = keys;
                return Ok(());
            }
            t => return internal_err!("approx_percentile got input type {t}"),
        }
        self.keys = keys;
        if all {
            self.scatter(group_indices, |_| true);
        } else {
            self.scatter(group_indices, |i| keep(values, opt_filter, i));
        }
        Ok(())
    }

    /// Merges groups `from` of `other` (an accumulator of the same call)
    /// into groups `to`, exactly: the counts add up.
    pub fn merge_groups(
        &mut self,
        other: &Self,
        from: &[u32],
        to: &[u32],
        total_num_groups: usize,
    ) -> Result<()> {
        self.resize(total_num_groups);
        for (&f, &t) in from.iter().zip(to) {
            // A group `other` never saw a value of has no slots there.
            let Some(theirs) = other.groups.get(f as usize) else {
                continue;
            };
            let t = t as usize;
            if self.spec.kind == Kind::Double {
                let range = other.ranges[f as usize];
                merge_range(&self.spec.layout, &mut self.ranges[t], range)?;
            }
            self.change_slots(t, |s| s.merge_slots(theirs));
            other.buffers.for_each_block(f as usize, |keys| {
                keys.iter().for_each(|&k| self.buffer(t, k))
            });
        }
        Ok(())
    }

    /// The answers of groups `0..groups` (a group never updated has none).
    pub fn evaluate_groups(&mut self, groups: usize) -> Result<ArrayRef> {
        // Never more groups than the table has: every update sizes them.
        self.resize(groups);
        self.evaluate(EmitTo::All)
    }
}

/// Row `i` counts: not NULL and not filtered out.
#[inline]
fn keep(values: &dyn Array, filter: Option<&BooleanArray>, i: usize) -> bool {
    values.is_valid(i) && filter.is_none_or(|f| f.is_valid(i) && f.value(i))
}

impl GroupsAccumulator for PercentileGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.update(&values[0], group_indices, opt_filter, total_num_groups)
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let n = self.emitted(emit_to);
        let width = self.spec.ps.len();
        let mut answers = Vec::with_capacity(n * width);
        (0..n).for_each(|g| self.answer(g, &mut answers));
        self.forget(emit_to, n);
        if !self.spec.list {
            return Ok(Arc::new(Float64Array::from(answers)) as ArrayRef);
        }
        let mut b = ListBuilder::with_capacity(Float64Builder::new(), n);
        for group in answers.chunks(width) {
            if group.iter().any(Option::is_none) {
                b.append_null();
            } else {
                b.values().extend(group.iter().copied());
                b.append(true);
            }
        }
        Ok(Arc::new(b.finish()))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let mut groups = self.take_groups(emit_to);
        let mut b = BinaryBuilder::with_capacity(groups.len(), groups.len() * 8);
        let mut buf = vec![];
        for s in &mut groups {
            buf.clear();
            s.encode(&mut buf);
            b.append_value(&buf);
        }
        Ok(vec![Arc::new(b.finish())])
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.resize(total_num_groups);
        let states = values[0].as_binary::<i32>();
        let mut no_range = NO_RANGE;
        for (i, &g) in group_indices.iter().enumerate() {
            if states.is_null(i) {
                continue;
            }
            let range = match self.spec.kind {
                Kind::Double => &mut self.ranges[g],
                Kind::Int => &mut no_range,
            };
            decode_state(&self.spec, states.value(i), range, &mut self.pairs)?;
            let s = &mut self.groups[g];
            self.heap -= s.heap_size();
            s.merge_sorted(&self.pairs);
            self.heap += s.heap_size();
        }
        Ok(())
    }

    /// Each row its own one-value state (DataFusion skips partial
    /// aggregation this way when it does not reduce the rows).
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let values = &values[0];
        let layout = self.spec.layout;
        let mut b = BinaryBuilder::with_capacity(values.len(), values.len() * 3);
        let mut buf = Vec::with_capacity(16);
        // One state per row: empty, or the one key with count 1.
        let mut push = |key: Option<u32>| {
            buf.clear();
            if let Some(k) = key {
                Slots::encode_one(k, &mut buf);
            }
            b.append_value(&buf);
        };
        let rows = 0..values.len();
        match values.data_type() {
            DataType::Int64 => {
                let a = values.as_primitive::<Int64Type>();
                for i in rows {
                    let key = if keep(values, opt_filter, i) {
                        let v = a.value(i);
                        if v < 0 {
                            return Err(negative_int_error());
                        }
                        Some(layout.int_key(v as u64))
                    } else {
                        None
                    };
                    push(key);
                }
            }
            DataType::UInt64 => {
                let a = values.as_primitive::<UInt64Type>();
                for i in rows {
                    push(keep(values, opt_filter, i).then(|| layout.int_key(a.value(i))));
                }
            }
            DataType::Float64 => {
                let a = values.as_primitive::<Float64Type>();
                for i in rows {
                    let v = a.value(i);
                    let key = if v.is_finite() && keep(values, opt_filter, i) {
                        let mut range = NO_RANGE;
                        Some(double_key(&layout, v, &mut range)?)
                    } else {
                        None
                    };
                    push(key);
                }
            }
            t => return internal_err!("approx_percentile got input type {t}"),
        }
        Ok(vec![Arc::new(b.finish())])
    }

    fn size(&self) -> usize {
        self.heap
            + self.groups.capacity() * size_of::<Slots>()
            + self.buffers.memory_size()
            + self.scratch.capacity() * size_of::<u32>()
            + self.keys.capacity() * size_of::<u32>()
            + self.pairs.capacity() * size_of::<(u32, u64)>()
            + self.ranges.capacity() * size_of::<ExpRange>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::functions::percentile::layout::Layout;
    use datafusion::arrow::array::{Float64Array, Int64Array};
    use rand::{Rng, SeedableRng, rngs::StdRng};

    /// Values split over two accumulators, one merged into the other
    /// (groups either side may be missing): every group's answers equal
    /// one plain histogram's.
    #[test]
    fn merged_accumulators_answer_like_one_histogram() {
        let mut rng = StdRng::seed_from_u64(5);
        for case in 0..60 {
            let groups = [1usize, 5, 16, 17, 300][case % 5];
            let double = case % 2 == 1;
            let spec = Arc::new(Spec {
                layout: Layout::new(rng.random_range(0..=3)),
                kind: if double { Kind::Double } else { Kind::Int },
                ps: vec![0.0, 0.5, 0.99, 1.0],
                list: true,
            });
            let mut parts: Vec<PercentileGroups> = (0..2)
                .map(|_| PercentileGroups::new(Arc::clone(&spec)))
                .collect();
            let mut want = vec![Slots::default(); groups];
            let mut ranges = vec![NO_RANGE; groups];
            for _ in 0..rng.random_range(1..20) {
                let n = rng.random_range(0..2000);
                let ids: Vec<u32> =
                    (0..n).map(|_| rng.random_range(0..groups as u32)).collect();
                let ints: Vec<i64> =
                    (0..n).map(|_| rng.random_range(0..1_000_000)).collect();
                let values: ArrayRef = if double {
                    Arc::new(Float64Array::from_iter_values(
                        ints.iter().map(|&v| v as f64 / 7.0),
                    ))
                } else {
                    Arc::new(Int64Array::from(ints.clone()))
                };
                for (&g, &v) in ids.iter().zip(&ints) {
                    let k = if double {
                        double_key(&spec.layout, v as f64 / 7.0, &mut ranges[g as usize])
                            .unwrap()
                    } else {
                        spec.layout.int_key(v as u64)
                    };
                    want[g as usize].add(k);
                }
                let part = &mut parts[rng.random_range(0..2)];
                part.update(&values, &ids, None, groups).unwrap();
            }
            let [mut a, b] = <[_; 2]>::try_from(parts).unwrap();
            let all: Vec<u32> = (0..groups as u32).collect();
            a.merge_groups(&b, &all, &all, groups).unwrap();
            let got = a.evaluate_groups(groups).unwrap();
            let mut reference = PercentileGroups::new(Arc::clone(&spec));
            reference.heap = want.iter().map(Slots::heap_size).sum();
            reference.groups = want;
            reference.ranges = ranges;
            let expected = reference.evaluate_groups(groups).unwrap();
            assert_eq!(&got, &expected, "case {case}: {groups} groups");
        }
    }
}
