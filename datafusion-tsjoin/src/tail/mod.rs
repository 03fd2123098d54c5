//! The last rows of an input, in input order: QuestDB's `LIMIT -m, -n` and
//! `LIMIT m, -n` over inputs that have no order tsjoin can reverse.
//!
//! QuestDB's negative LIMIT counts from the end of the LIMIT's input. Over a
//! table with a designated timestamp, or under an ORDER BY, tsjoin plans it
//! as a reversed TopK sort and a re-sort (see `sql/limit.rs`), which reads
//! only what the answer needs. Other inputs (GROUP BY output, DISTINCT,
//! joins, tables without a designated timestamp) get a [`TailNode`], which
//! keeps a bounded buffer of the rows it has seen and emits them at the end:
//!
//! ```text
//! SELECT sym, count(*) FROM t GROUP BY sym LIMIT -2
//! ⇒ Tail: rows [size-2, size)
//!     Aggregate: groupBy=[[sym]], aggr=[[count(*)]]
//! ```
//!
//! An ordered input is asked for as one partition (merged in order, so a
//! re-optimisation, as a distributed scheduler runs, cannot drop the merge).
//! An unordered input's partitions are read one after the other, partition 0
//! first: for a scan of files without a designated timestamp, "input order"
//! is the file order then the row order.

mod exec;
mod logical;
mod planner;
mod stream;

pub use exec::TailExec;
pub use logical::TailNode;
pub use planner::TailPlanner;

/// Which rows of its input a [`TailNode`] keeps: after skipping the first
/// `skip_first` rows, the last `keep_last` (all if `None`) minus the last
/// `drop_last`. QuestDB's `LIMIT -m, -n` is `{0, Some(m), n}`, `LIMIT m, -n`
/// is `{m, None, n}`.
///
/// ```
/// use datafusion_tsjoin::tail::TailRange;
/// let last_three = TailRange { skip_first: 0, keep_last: Some(3), drop_last: 0 };
/// assert_eq!(last_three.rows_of(10), 7..10);
/// let middle = TailRange { skip_first: 2, keep_last: None, drop_last: 3 };
/// assert_eq!(middle.rows_of(10), 2..7);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd)]
pub struct TailRange {
    /// Rows dropped from the start.
    pub skip_first: u64,
    /// Rows kept from the end (before `drop_last`); `None` keeps all.
    pub keep_last: Option<u64>,
    /// Rows dropped from the end.
    pub drop_last: u64,
}

impl TailRange {
    /// The row numbers this range selects from an input of `size` rows.
    pub fn rows_of(&self, size: u64) -> std::ops::Range<u64> {
        let mut start = self.skip_first.min(size);
        if let Some(k) = self.keep_last {
            start = start.max(size.saturating_sub(k));
        }
        let end = size.saturating_sub(self.drop_last).max(start);
        start..end
    }
}

impl std::fmt::Display for TailRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let start = match self.keep_last {
            Some(k) if self.skip_first == 0 => format!("size-{k}"),
            Some(k) => format!("max({}, size-{k})", self.skip_first),
            None => self.skip_first.to_string(),
        };
        write!(f, "rows [{start}, size-{})", self.drop_last)
    }
}

/// The bytes of a [`TailRange`] in tsjoin's codecs: three little-endian
/// u64 (`skip_first`, `keep_last` or `u64::MAX` for none, `drop_last`).
pub(crate) fn encode_range(r: TailRange, buf: &mut Vec<u8>) {
    buf.extend_from_slice(&r.skip_first.to_le_bytes());
    buf.extend_from_slice(&r.keep_last.unwrap_or(u64::MAX).to_le_bytes());
    buf.extend_from_slice(&r.drop_last.to_le_bytes());
}

/// The [`TailRange`] [`encode_range`] wrote, if `buf` is one.
pub(crate) fn decode_range(buf: &[u8]) -> Option<TailRange> {
    if buf.len() != 24 {
        return None;
    }
    let word = |i: usize| u64::from_le_bytes(buf[i * 8..i * 8 + 8].try_into().unwrap());
    Some(TailRange {
        skip_first: word(0),
        keep_last: Some(word(1)).filter(|&k| k != u64::MAX),
        drop_last: word(2),
    })
}
