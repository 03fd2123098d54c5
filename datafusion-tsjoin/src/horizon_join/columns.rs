//! [`OutputColumns`]: what each column a HORIZON JOIN emits is made of (a
//! left column, a right table's column, the offset or the timestamp), read
//! by the pair-emitting stream and by the fold alike.

use std::sync::Arc;

/// Where one output column comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// Left column `i`.
    Left(usize),
    /// Column `i` of right table `j`: `Right(j, i)`.
    Right(usize, usize),
    /// `offset`.
    Offset,
    /// `timestamp` (left time + offset).
    Timestamp,
}

/// The columns a [`HorizonJoinExec`](super::HorizonJoinExec) emits, in
/// order, each by where it comes from; the join's full output (left
/// columns, each right table's, `offset`, `timestamp`) narrowed by its
/// embedded projection.
#[derive(Debug, Clone)]
pub(super) struct OutputColumns {
    pub(super) sources: Arc<[Source]>,
}

impl OutputColumns {
    /// The output of a join with `left` left columns and right tables of
    /// `rights` columns each, under `projection` (indices into the full
    /// output, in range).
    pub(super) fn new(
        left: usize,
        rights: impl IntoIterator<Item = usize>,
        projection: Option<&[usize]>,
    ) -> Self {
        let mut all: Vec<Source> = (0..left).map(Source::Left).collect();
        for (j, width) in rights.into_iter().enumerate() {
            all.extend((0..width).map(|i| Source::Right(j, i)));
        }
        all.extend([Source::Offset, Source::Timestamp]);
        let sources = match projection {
            Some(p) => p.iter().map(|&i| all[i]).collect(),
            None => all.into(),
        };
        Self { sources }
    }

    /// Whether a column of right table `j` is emitted.
    pub(super) fn reads_right(&self, j: usize) -> bool {
        self.sources
            .iter()
            .any(|s| matches!(s, Source::Right(t, _) if *t == j))
    }

    /// The columns of right table `j` that are emitted, in order.
    pub(super) fn right_columns(&self, j: usize) -> Vec<usize> {
        let mut cols: Vec<usize> = self
            .sources
            .iter()
            .filter_map(|s| match *s {
                Source::Right(t, i) if t == j => Some(i),
                _ => None,
            })
            .collect();
        cols.sort_unstable();
        cols.dedup();
        cols
    }
}
