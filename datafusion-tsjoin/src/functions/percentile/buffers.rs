//! [`KeyBuffers`]: the not-yet-counted keys of many groups in one arena of
//! cache-line blocks.
//!
//! With many groups, a buffer per group (a `Vec` each) costs an allocation
//! and copies as it grows, a free at the end, and a cache miss on the
//! group's `Vec` header before the one on its data. Here a group is a
//! chain of 16-key blocks in one arena, found through two dense per-group
//! arrays (8 bytes a group: 100,000 groups fit in L2), and the blocks of
//! counted groups are reused.

use std::mem::size_of;

/// Keys per block (one 64-byte cache line).
const BLOCK: usize = 16;
/// No block.
const NONE: u32 = u32::MAX;

/// Every group's buffered keys, in arrival order within a block.
///
/// ```ignore
/// let mut b = KeyBuffers::default();
/// b.resize(2);
/// b.push(1, 7);
/// let mut keys = vec![];
/// b.take(1, &mut keys);
/// assert_eq!(keys, [7]);
/// ```
#[derive(Debug, Default, Clone)]
pub(crate) struct KeyBuffers {
    blocks: Vec<[u32; BLOCK]>,
    /// Per block: the group's block before it (`NONE`: its first).
    prev: Vec<u32>,
    /// Blocks released by counted groups, to reuse.
    free: Vec<u32>,
    /// Per group: its last block (`NONE`: no keys).
    tail: Vec<u32>,
    /// Per group: keys buffered.
    len: Vec<u32>,
}

impl KeyBuffers {
    /// Makes room for groups `0..groups`.
    pub fn resize(&mut self, groups: usize) {
        if self.len.len() < groups {
            self.tail.resize(groups, NONE);
            self.len.resize(groups, 0);
        }
    }

    /// Keys buffered for group `g`.
    #[inline]
    pub fn len(&self, g: usize) -> usize {
        self.len.get(g).map_or(0, |&n| n as usize)
    }

    /// Buffers `key` for group `g`; returns the group's buffered keys.
    #[inline(always)]
    pub fn push(&mut self, g: usize, key: u32) -> usize {
        let n = self.len[g] as usize;
        let at = n % BLOCK;
        if at == 0 {
            let b = self.new_block();
            self.prev[b as usize] = self.tail[g];
            self.tail[g] = b;
        }
        self.blocks[self.tail[g] as usize][at] = key;
        self.len[g] = (n + 1) as u32;
        n + 1
    }

    /// A block for a group's next keys (one push in 16).
    #[inline(never)]
    fn new_block(&mut self) -> u32 {
        if let Some(b) = self.free.pop() {
            return b;
        }
        self.blocks.push([0; BLOCK]);
        self.prev.push(NONE);
        (self.blocks.len() - 1) as u32
    }

    /// Calls `f` with group `g`'s blocks' keys (the last block first).
    pub fn for_each_block(&self, g: usize, mut f: impl FnMut(&[u32])) {
        let Some(&n) = self.len.get(g) else {
            return;
        };
        let mut b = self.tail[g];
        // The last block holds the rest after the full ones.
        let mut fill = match n as usize % BLOCK {
            0 => BLOCK,
            r => r,
        };
        while b != NONE {
            f(&self.blocks[b as usize][..fill]);
            b = self.prev[b as usize];
            fill = BLOCK;
        }
    }

    /// Appends group `g`'s keys to `out` and empties the group.
    pub fn take(&mut self, g: usize, out: &mut Vec<u32>) {
        if self.len(g) == 0 {
            return;
        }
        self.for_each_block(g, |keys| out.extend_from_slice(keys));
        let mut b = self.tail[g];
        while b != NONE {
            self.free.push(b);
            b = self.prev[b as usize];
        }
        self.tail[g] = NONE;
        self.len[g] = 0;
    }

    /// Forgets groups `0..n` (emptied before) and renumbers the rest from 0.
    pub fn drop_first(&mut self, n: usize) {
        let n = n.min(self.len.len());
        debug_assert!(self.len[..n].iter().all(|&l| l == 0));
        self.tail.drain(..n);
        self.len.drain(..n);
    }

    /// Heap bytes held.
    pub fn memory_size(&self) -> usize {
        self.blocks.capacity() * size_of::<[u32; BLOCK]>()
            + (self.prev.capacity() + self.free.capacity()) * size_of::<u32>()
            + (self.tail.capacity() + self.len.capacity()) * size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    /// Pushes, takes and renumbering keep every group's keys, whatever the
    /// interleaving; released blocks are reused.
    #[test]
    fn groups_keep_their_keys() {
        let mut rng = StdRng::seed_from_u64(3);
        for case in 0..200 {
            let groups = rng.random_range(1..50);
            let mut b = KeyBuffers::default();
            b.resize(groups);
            let mut want: Vec<Vec<u32>> = vec![vec![]; groups];
            for _ in 0..rng.random_range(0..3000) {
                let g = rng.random_range(0..groups);
                if rng.random_bool(0.01) {
                    let mut got = vec![];
                    b.take(g, &mut got);
                    got.sort_unstable();
                    want[g].sort_unstable();
                    assert_eq!(got, std::mem::take(&mut want[g]), "case {case}");
                } else {
                    let k = rng.random();
                    assert_eq!(b.push(g, k), want[g].len() + 1);
                    want[g].push(k);
                }
            }
            let blocks = b.blocks.len();
            let first = rng.random_range(0..=groups);
            for g in 0..first {
                b.take(g, &mut vec![]);
            }
            b.drop_first(first);
            for (g, want) in want[first..].iter_mut().enumerate() {
                assert_eq!(b.len(g), want.len());
                let mut got = vec![];
                b.take(g, &mut got);
                got.sort_unstable();
                want.sort_unstable();
                assert_eq!(&got, want, "case {case}");
            }
            assert_eq!(b.free.len(), blocks, "every block released once");
        }
    }
}
