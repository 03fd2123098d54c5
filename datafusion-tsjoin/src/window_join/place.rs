//! The pieces the build reduces each right partition to ([`Piece`]), and
//! their placement in position order: a counting sort by key group, in
//! parallel over shares of the input.
//!
//! The input is a list of units (consecutive rows of one piece, see
//! [`layout`]) dealt into shares of consecutive units, one thread
//! each. Every share owns one run of each group's positions, shares in
//! order, so each thread writes only its own runs and rows keep unit order
//! inside a group; no row → position array is needed. The same split
//! places the row numbers and timestamps ([`Placement::rows`]) and each
//! fast column's values ([`Placement::column`]), one pass over the rows
//! each.

use super::par::{cuts, par_each, par_fill, par_map, split_at_cuts};
use crate::priority::{PhaseGate, ROWS_PER_PAUSE};
use datafusion::arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, AsArray, RecordBatch,
};
use datafusion::arrow::compute::cast;
use datafusion::common::{DataFusionError, Result};
use std::ops::Range;

/// Group id of rows that belong to no group (NULL timestamp).
pub(super) const NO_GROUP: u32 = u32::MAX;

/// One right partition, reduced batch by batch.
#[derive(Default)]
pub(super) struct Piece {
    /// Rows that passed the right filter, NULL timestamps included.
    pub rows: usize,
    /// Timestamp per row (0 where NULL).
    pub ts: Vec<i64>,
    /// Global group per row ([`NO_GROUP`] where the timestamp is NULL).
    pub gid: Vec<u32>,
    /// Per aggregate and argument, the evaluated arrays of each batch.
    pub values: Vec<Vec<Vec<ArrayRef>>>,
    /// The batches themselves, when pairs are evaluated.
    pub batches: Vec<RecordBatch>,
    /// What each batch's rows hold, in order (span `i` is batch `i`).
    pub spans: Vec<Span>,
}

/// Consecutive rows of one piece and what their timestamps look like.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    /// First row (of the piece) and number of rows.
    pub start: usize,
    pub rows: usize,
    /// Timestamps with a value are non-decreasing in row order.
    pub sorted: bool,
    /// Smallest and largest timestamp (`None`: no row has one).
    pub range: Option<(i64, i64)>,
}

/// Consecutive rows of one piece, laid out together.
#[derive(Debug, Clone)]
pub(super) struct Unit {
    pub piece: usize,
    /// Rows of the piece: whole spans.
    pub rows: std::ops::Range<usize>,
}

/// The order to lay rows out in, as units, and whether that order leaves
/// every group sorted by `(ts, row)`. It does when every batch is
/// time-ordered and, taken by their first timestamps, each batch ends
/// before the next begins (or at the same instant, with lower row numbers
/// first): files split by time, however the scan dealt them to partitions.
/// Consecutive batches of one piece merge into one unit. Otherwise each
/// piece is one unit, in piece order, and the groups need sorting.
pub(super) fn layout(pieces: &[Piece]) -> (Vec<Unit>, bool) {
    let mut spans: Vec<(i64, usize, usize)> = vec![]; // (first ts, piece, span)
    for (p, piece) in pieces.iter().enumerate() {
        for (i, s) in piece.spans.iter().enumerate() {
            if let Some((lo, _)) = s.range {
                spans.push((lo, p, i));
            }
        }
    }
    spans.sort_unstable();
    let chained = spans.iter().all(|&(_, p, i)| pieces[p].spans[i].sorted)
        && spans.windows(2).all(|w| {
            let end = pieces[w[0].1].spans[w[0].2].range.expect("has rows").1;
            let next = w[1].0;
            end < next || (end == next && (w[0].1, w[0].2) < (w[1].1, w[1].2))
        });
    if !chained {
        let units = pieces
            .iter()
            .enumerate()
            .map(|(p, piece)| Unit {
                piece: p,
                rows: 0..piece.rows,
            })
            .collect();
        return (units, false);
    }
    let mut units: Vec<Unit> = vec![];
    for (_, p, i) in spans {
        let s = &pieces[p].spans[i];
        match units.last_mut() {
            Some(u) if u.piece == p && u.rows.end == s.start => {
                u.rows.end = s.start + s.rows
            }
            _ => units.push(Unit {
                piece: p,
                rows: s.start..s.start + s.rows,
            }),
        }
    }
    // Batches without timestamps hold no positions but still have rows.
    for (p, piece) in pieces.iter().enumerate() {
        for s in piece.spans.iter().filter(|s| s.range.is_none()) {
            units.push(Unit {
                piece: p,
                rows: s.start..s.start + s.rows,
            });
        }
    }
    (units, true)
}

/// Values by position, and NULL flags by position when there are NULLs.
pub(crate) type ByPosition<N> = (Vec<N>, Option<Vec<bool>>);

/// The plan of the counting sort: which share of units fills which run of
/// each group's positions.
pub(crate) struct Placement<'a> {
    pieces: &'a [Piece],
    units: &'a [Unit],
    /// Consecutive units per thread.
    shares: Vec<Range<usize>>,
    /// `counts[k][g]`: rows of share `k` in group `g`.
    counts: Vec<Vec<u32>>,
    /// Group `g` owns positions `offsets[g]..offsets[g + 1]`.
    pub offsets: Vec<u32>,
    /// First global row number of each piece.
    bases: Vec<usize>,
    /// Where the placing threads pause for a query of higher priority.
    gate: &'a PhaseGate,
}

impl<'a> Placement<'a> {
    /// Counts the rows of each group per share (in parallel). Shares are
    /// up to `threads` runs of units with about equal rows, or one when
    /// shares × groups would not be small next to the rows. The threads
    /// here and in the passes that follow pause at `gate`.
    pub fn new(
        pieces: &'a [Piece],
        units: &'a [Unit],
        n_groups: usize,
        threads: usize,
        gate: &'a PhaseGate,
    ) -> Self {
        let rows: usize = pieces.iter().map(|p| p.rows).sum();
        let mut shares = share_units(units, threads, rows);
        if shares.len() * n_groups > rows {
            shares.clear();
            shares.push(0..units.len());
        }
        let counts: Vec<Vec<u32>> = par_map(&shares, threads, |share| {
            let mut counts = vec![0u32; n_groups];
            for u in &units[share.clone()] {
                for chunk in pieces[u.piece].gid[u.rows.clone()].chunks(ROWS_PER_PAUSE) {
                    gate.pass();
                    for &g in chunk {
                        if g != NO_GROUP {
                            counts[g as usize] += 1;
                        }
                    }
                }
            }
            counts
        });
        let mut offsets = vec![0u32; n_groups + 1];
        for c in &counts {
            for (g, &c) in c.iter().enumerate() {
                offsets[g + 1] += c;
            }
        }
        for g in 0..n_groups {
            offsets[g + 1] += offsets[g];
        }
        let mut base = 0;
        let bases = pieces
            .iter()
            .map(|p| {
                base += p.rows;
                base - p.rows
            })
            .collect();
        Placement {
            pieces,
            units,
            shares,
            counts,
            offsets,
            bases,
            gate,
        }
    }

    /// Number of positions (rows with a timestamp).
    pub fn positions(&self) -> usize {
        *self.offsets.last().expect("offsets are never empty") as usize
    }

    /// Splits `out` (one slot per position) into every share's runs, one
    /// per group, in group order.
    fn runs<'b, T>(&self, out: &'b mut [T]) -> Vec<Vec<&'b mut [T]>> {
        let n_groups = self.offsets.len() - 1;
        let mut runs: Vec<Vec<&mut [T]>> = self
            .shares
            .iter()
            .map(|_| Vec::with_capacity(n_groups))
            .collect();
        let mut rest = out;
        for g in 0..n_groups {
            for (k, c) in self.counts.iter().enumerate() {
                let (run, tail) = std::mem::take(&mut rest).split_at_mut(c[g] as usize);
                rest = tail;
                runs[k].push(run);
            }
        }
        runs
    }

    /// Every share's runs of `out`, with its first unit's index and its
    /// units, one thread per share: `f(first, units, runs)`.
    fn each_share<T: Send, R: Send>(
        &self,
        out: &mut [T],
        f: impl Fn(usize, &[Unit], &mut [&mut [T]]) -> Result<R> + Sync,
    ) -> Result<Vec<R>> {
        let work: Vec<_> = self.shares.iter().zip(self.runs(out)).collect();
        par_each(work, |(share, mut runs)| {
            f(share.start, &self.units[share.clone()], &mut runs)
        })
        .into_iter()
        .collect()
    }

    /// The global row number and the timestamp at every position, and each
    /// unit's slots: `slots[u][i]` is where row `i` of unit `u` went in its
    /// share's run of its group, so that columns are placed
    /// ([`Self::column`]) without counting again. Without `with_order` the
    /// row numbers are left out (an empty vector).
    pub fn rows(&self, with_order: bool) -> (Vec<u32>, Vec<i64>, Vec<Vec<u32>>) {
        let positions = self.positions();
        let mut order = vec![0u32; if with_order { positions } else { 0 }];
        let mut ts = vec![0i64; positions];
        let ts_runs = self.runs(&mut ts);
        let order_runs = if with_order {
            self.runs(&mut order)
        } else {
            self.shares.iter().map(|_| vec![]).collect()
        };
        let work: Vec<_> = self.shares.iter().zip(order_runs).zip(ts_runs).collect();
        let slots = par_each(work, |((share, mut order), mut ts)| {
            let mut filled = vec![0u32; ts.len()];
            let units = &self.units[share.clone()];
            units
                .iter()
                .map(|u| {
                    let (piece, base) = (&self.pieces[u.piece], self.bases[u.piece]);
                    u.rows
                        .clone()
                        .map(|row| {
                            if (row - u.rows.start) % ROWS_PER_PAUSE == 0 {
                                self.gate.pass();
                            }
                            let g = piece.gid[row];
                            if g == NO_GROUP {
                                return u32::MAX;
                            }
                            let g = g as usize;
                            let k = filled[g];
                            filled[g] = k + 1;
                            if with_order {
                                order[g][k as usize] = (base + row) as u32;
                            }
                            ts[g][k as usize] = piece.ts[row];
                            k
                        })
                        .collect::<Vec<u32>>()
                })
                .collect::<Vec<_>>()
        });
        (order, ts, slots.into_iter().flatten().collect())
    }

    /// One argument's values at every position, cast to `T` (0 under
    /// NULLs), and its NULL flags by position when it has NULLs.
    /// `parts[p][s]` holds the values of span `s` of piece `p`; `slots` are
    /// [`Self::rows`]'. Valid while positions keep the placement's order
    /// (no group was re-sorted).
    pub fn column<T: ArrowPrimitiveType>(
        &self,
        parts: &[&[ArrayRef]],
        slots: &[Vec<u32>],
    ) -> Result<ByPosition<T::Native>> {
        let mut values = vec![T::Native::default(); self.positions()];
        self.each_share(&mut values, |first, units, runs| {
            self.each_span(first, units, slots, parts, |gids, slot, part| {
                let v = cast(part, &T::DATA_TYPE)?;
                let v = v.as_primitive::<T>();
                let nulls = v.nulls().filter(|n| n.null_count() > 0);
                for (i, ((&g, &k), &x)) in
                    gids.iter().zip(slot).zip(v.values().iter()).enumerate()
                {
                    if g != NO_GROUP {
                        // NULL slots hold 0 whatever the buffer has there.
                        let null = nulls.is_some_and(|n| n.is_null(i));
                        runs[g as usize][k as usize] =
                            if null { T::Native::default() } else { x };
                    }
                }
                Ok(())
            })
        })?;
        Ok((values, self.flags(parts, slots)?))
    }

    /// NULL flags by position of any arrays (`None` without NULLs), laid
    /// out as [`Self::column`] says.
    pub fn flags(
        &self,
        parts: &[&[ArrayRef]],
        slots: &[Vec<u32>],
    ) -> Result<Option<Vec<bool>>> {
        if !parts
            .iter()
            .flat_map(|p| p.iter())
            .any(|a| a.logical_null_count() > 0)
        {
            return Ok(None);
        }
        let mut flags = vec![false; self.positions()];
        self.each_share(&mut flags, |first, units, runs| {
            self.each_span(first, units, slots, parts, |gids, slot, part| {
                if let Some(nulls) = part.logical_nulls().filter(|n| n.null_count() > 0) {
                    for (i, (&g, &k)) in gids.iter().zip(slot).enumerate() {
                        if g != NO_GROUP {
                            runs[g as usize][k as usize] = nulls.is_null(i);
                        }
                    }
                }
                Ok(())
            })
        })?;
        Ok(Some(flags))
    }

    /// `f(gids, slots, part)` for each span of `units` (a share's, the
    /// first numbered `first`; units are whole spans of their piece): the
    /// span's group ids, its rows' slots and its part.
    fn each_span(
        &self,
        first: usize,
        units: &[Unit],
        slots: &[Vec<u32>],
        parts: &[&[ArrayRef]],
        mut f: impl FnMut(&[u32], &[u32], &ArrayRef) -> Result<()>,
    ) -> Result<()> {
        for (j, u) in units.iter().enumerate() {
            let piece = &self.pieces[u.piece];
            let spans = &piece.spans;
            let s0 = spans.partition_point(|s| s.start < u.rows.start);
            for (s, part) in spans[s0..].iter().zip(&parts[u.piece][s0..]) {
                if s.start >= u.rows.end {
                    break;
                }
                debug_assert_eq!(part.len(), s.rows);
                self.gate.pass();
                let at = s.start - u.rows.start;
                f(
                    &piece.gid[s.start..s.start + s.rows],
                    &slots[first + j][at..at + s.rows],
                    part,
                )?;
            }
        }
        Ok(())
    }
}

/// Cuts `units` into up to `threads` runs of consecutive units holding
/// about the same number of rows.
fn share_units(units: &[Unit], threads: usize, rows: usize) -> Vec<Range<usize>> {
    let mut shares = vec![];
    let (mut start, mut seen) = (0, 0);
    for (i, u) in units.iter().enumerate() {
        seen += u.rows.len();
        if seen * threads >= rows * (shares.len() + 1) && shares.len() + 1 < threads {
            shares.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < units.len() || shares.is_empty() {
        shares.push(start..units.len());
    }
    shares
}

/// One argument's values by global row (rows numbered across `parts` in
/// order), cast to `T` (0 under NULLs), with NULL flags by row when there
/// are NULLs, and then gathered into position order through `order` (the
/// row at each position): for groups that were re-sorted after placing.
pub(crate) fn gather_column<T: ArrowPrimitiveType>(
    parts: &[ArrayRef],
    order: &[u32],
    threads: usize,
) -> Result<ByPosition<T::Native>> {
    let (row_cuts, part_cuts) = part_cuts(parts, threads);
    let rows = *row_cuts.last().expect("non-empty");
    let mut values = vec![T::Native::default(); rows];
    let work: Vec<_> = split_at_cuts(&mut values, &row_cuts)
        .into_iter()
        .zip(part_cuts.windows(2).map(|w| &parts[w[0]..w[1]]))
        .collect();
    par_each(work, |(out, parts)| {
        let mut at = 0;
        for part in parts {
            let v = cast(part, &T::DATA_TYPE)?;
            let v = v.as_primitive::<T>();
            let out = &mut out[at..at + v.len()];
            out.copy_from_slice(v.values());
            if let Some(nulls) = v.nulls().filter(|n| n.null_count() > 0) {
                for i in (0..v.len()).filter(|&i| nulls.is_null(i)) {
                    out[i] = T::Native::default();
                }
            }
            at += v.len();
        }
        Ok::<_, DataFusionError>(())
    })
    .into_iter()
    .collect::<Result<()>>()?;
    let flags = gather_flags(parts, order, threads);
    Ok((gather(&values, order, threads), flags))
}

/// NULL flags by position of any arrays (`None` without NULLs), rows
/// numbered across `parts`, gathered through `order`.
pub(crate) fn gather_flags(
    parts: &[ArrayRef],
    order: &[u32],
    threads: usize,
) -> Option<Vec<bool>> {
    let rows: usize = parts.iter().map(|p| p.len()).sum();
    let mut flags: Option<Vec<bool>> = None;
    let mut at = 0;
    for part in parts {
        if let Some(nulls) = part.logical_nulls().filter(|n| n.null_count() > 0) {
            let flags = flags.get_or_insert_with(|| vec![false; rows]);
            for (f, ok) in flags[at..at + part.len()].iter_mut().zip(nulls.iter()) {
                *f = !ok;
            }
        }
        at += part.len();
    }
    flags.map(|f| gather(&f, order, threads))
}

/// Boundaries between `parts` (rows numbered across them in order) that
/// split the rows into up to `threads` ranges of whole parts: `(rows,
/// parts)` cut pairs.
fn part_cuts(parts: &[ArrayRef], threads: usize) -> (Vec<usize>, Vec<usize>) {
    let mut starts = vec![0];
    for p in parts {
        starts.push(starts.last().expect("non-empty") + p.len());
    }
    let rows = *starts.last().expect("non-empty");
    let (mut row_cuts, mut part_cuts) = (vec![0], vec![0]);
    for target in cuts(rows, threads, 1).into_iter().skip(1) {
        let i = starts.partition_point(|&s| s < target).min(parts.len());
        if i > *part_cuts.last().expect("non-empty") {
            row_cuts.push(starts[i]);
            part_cuts.push(i);
        }
    }
    (row_cuts, part_cuts)
}

/// `by_row[order[p]]` for every position `p`, in parallel over positions.
fn gather<T: Copy + Default + Send + Sync>(
    by_row: &[T],
    order: &[u32],
    threads: usize,
) -> Vec<T> {
    let mut out = vec![T::default(); order.len()];
    par_fill(&mut out, &cuts(order.len(), threads, 1), |_, r, chunk| {
        for (o, &row) in chunk.iter_mut().zip(&order[r]) {
            *o = by_row[row as usize];
        }
    });
    out
}
