//! The state phase 1 builds and phase 2 merges: [`Table`] (groups with
//! their keys, aggregate states and row counts), the [`Rows`] phase 1
//! passes on, and the finished [`Partial`] tables.

use super::accumulate::State;
use super::group_keys::GroupKeys;
use super::spec::AggregateSpec;
use datafusion::arrow::array::{Array, ArrayRef, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::{Result, internal_err};
use datafusion::execution::memory_pool::MemoryReservation;

/// Rows passed on by phase 1: evaluated keys and aggregate arguments.
#[derive(Debug)]
pub(super) struct Rows {
    pub(super) keys: Vec<ArrayRef>,
    pub(super) args: Vec<Option<ArrayRef>>,
}

impl Rows {
    pub(super) fn len(&self) -> usize {
        self.keys.first().map_or(0, |k| k.len())
    }

    pub(super) fn memory_size(&self) -> usize {
        self.keys
            .iter()
            .chain(self.args.iter().flatten())
            .map(|a| a.get_array_memory_size())
            .sum()
    }

    pub(super) fn take(&self, idx: &UInt32Array) -> Result<Rows> {
        let t = |a: &ArrayRef| -> Result<ArrayRef> { Ok(take(a.as_ref(), idx, None)?) };
        Ok(Rows {
            keys: self.keys.iter().map(t).collect::<Result<_>>()?,
            args: self
                .args
                .iter()
                .map(|a| a.as_ref().map(t).transpose())
                .collect::<Result<_>>()?,
        })
    }
}

/// Groups with their keys, aggregate states and row counts.
pub(super) struct Table {
    pub(super) keys: GroupKeys,
    pub(super) states: Vec<State>,
    pub(super) counts: Vec<u64>,
    /// Scratch: the group ids of the last interned rows.
    pub(super) ids: Vec<u32>,
}

impl Table {
    pub(super) fn new(spec: &AggregateSpec) -> Result<Self> {
        let states = spec
            .aggs
            .iter()
            .zip(&spec.arg_types)
            .map(|(a, t)| State::new(a, t.as_ref()))
            .collect::<Result<_>>()?;
        Ok(Self {
            keys: GroupKeys::of_shape(spec.shape, &spec.key_types)?,
            states,
            counts: vec![],
            ids: vec![],
        })
    }

    pub(super) fn len(&self) -> usize {
        self.counts.len()
    }

    pub(super) fn memory_size(&self) -> usize {
        self.keys.memory_size()
            + self.states.iter().map(State::memory_size).sum::<usize>()
            + self.counts.capacity() * 8
            + self.ids.capacity() * 4
    }

    /// Makes room for `groups` groups in all, so that no state vector
    /// grows (and copies) batch by batch.
    pub(super) fn reserve(&mut self, groups: usize) {
        self.keys.reserve_groups(groups);
        self.counts
            .reserve(groups.saturating_sub(self.counts.len()));
        self.states.iter_mut().for_each(|s| s.reserve(groups));
    }

    /// Aggregates rows in (`expected`: rows to come in all, 0 if unknown).
    pub(super) fn update(&mut self, rows: &Rows, expected: usize) -> Result<()> {
        self.keys
            .intern(&rows.keys, &mut self.ids, &mut self.counts, expected)?;
        self.update_states(&rows.args)
    }

    /// Folds each aggregate's argument into its state, for rows whose group
    /// ids are in `self.ids` (and already counted).
    pub(super) fn update_states(&mut self, args: &[Option<ArrayRef>]) -> Result<()> {
        for (state, arg) in self.states.iter_mut().zip(args) {
            state.update(&self.ids, arg.as_ref(), &self.counts)?;
        }
        Ok(())
    }

    /// Merges groups `from` of a finished table (`keys` emitted).
    pub(super) fn merge(
        &mut self,
        other: &Partial,
        from: &[u32],
        expected: usize,
    ) -> Result<()> {
        let keys = if from.len() == other.counts.len() {
            other.keys.clone()
        } else {
            let idx = UInt32Array::from(from.to_vec());
            other
                .keys
                .iter()
                .map(|k| Ok(take(k.as_ref(), &idx, None)?))
                .collect::<Result<Vec<_>>>()?
        };
        let mut scratch = vec![];
        self.keys
            .intern(&keys, &mut self.ids, &mut scratch, expected)?;
        self.counts.resize(self.keys.len(), 0);
        for (&f, &t) in from.iter().zip(&self.ids) {
            self.counts[t as usize] += other.counts[f as usize];
        }
        for (state, theirs) in self.states.iter_mut().zip(&other.states) {
            state.merge(theirs, from, &self.ids, &other.counts, &self.counts)?;
        }
        Ok(())
    }

    /// Takes groups `from` of `other` into this empty table without
    /// interning their keys again, and returns those keys (in `from`'s
    /// order, as [`Self::merge`] would emit them). The groups of one
    /// partial are distinct, so when it is the only one an output
    /// partition receives, interning would only rebuild the key table:
    /// half of phase 2 for 6.4K groups of two strings and a time bucket.
    pub(super) fn adopt(
        &mut self,
        other: &Partial,
        from: &[u32],
    ) -> Result<Vec<ArrayRef>> {
        if self.len() != 0 {
            return internal_err!("adopting groups into a table that holds some");
        }
        let idx = UInt32Array::from(from.to_vec());
        let keys = other
            .keys
            .iter()
            .map(|k| Ok(take(k.as_ref(), &idx, None)?))
            .collect::<Result<Vec<_>>>()?;
        self.ids.clear();
        self.ids.extend(0..from.len() as u32);
        self.counts = from.iter().map(|&f| other.counts[f as usize]).collect();
        for (state, theirs) in self.states.iter_mut().zip(&other.states) {
            state.merge(theirs, from, &self.ids, &other.counts, &self.counts)?;
        }
        Ok(keys)
    }
}

/// One input partition's phase-1 table: keys emitted, and each group's
/// output partition.
#[derive(Debug)]
pub(crate) struct Partial {
    pub(super) keys: Vec<ArrayRef>,
    pub(super) states: Vec<State>,
    pub(super) counts: Vec<u64>,
    /// Output partition of each group (empty with one output partition).
    pub(super) partition: Vec<u32>,
    pub(super) _reservation: MemoryReservation,
}

/// One phase-1 task: the rows it read from dictionary codes, and its table
/// (none when it handed its input over to the fallback plan).
pub(super) type Phase1Task = SpawnedTask<Result<(usize, Option<Partial>)>>;

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("groups", &self.len())
            .finish()
    }
}
