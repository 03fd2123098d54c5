//! [`RowBits`]: a row group's bits (whether the WHERE holds), built page
//! by page from 0/1 codes, other bitmaps, and values' bits spread over the
//! non-NULL rows.
//!
//! Bits are packed into `u64` words least significant first, as arrow's
//! bitmaps are; bits past `len` in the last word are always zero, so
//! [`RowBits::and`] and [`RowBits::count`] work word by word.
//!
//! ```text
//! validity  1 0 1 1 0 1   (rows)
//! values    a   b c   d   (one bit per non-NULL row)
//! spread    a 0 b c 0 d
//! ```

use std::sync::OnceLock;

/// Packed bits, appended to at any bit position.
#[derive(Debug, Default, Clone)]
pub(crate) struct RowBits {
    words: Vec<u64>,
    len: usize,
}

/// For each validity byte `v` and each pattern `s` of `popcount(v)` value
/// bits, the byte with `s`'s bits at `v`'s set positions, in order
/// (`deposit(v, s)`, BMI2's `pdep` on one byte; a table because `pdep` is
/// microcoded on some CPUs). 64 KiB.
fn deposit_table() -> &'static [u8] {
    static TABLE: OnceLock<Vec<u8>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = vec![0u8; 256 * 256];
        for v in 0..256usize {
            for s in 0..256usize {
                let (mut out, mut k) = (0u8, 0);
                for bit in 0..8 {
                    if v >> bit & 1 == 1 {
                        out |= ((s >> k & 1) as u8) << bit;
                        k += 1;
                    }
                }
                t[v << 8 | s] = out;
            }
        }
        t
    })
}

/// The bits of eight 0/1 flags, the first lowest: the flags as bytes of
/// a little-endian word, times a constant that moves byte `i`'s bit to
/// bit `56 + i` (no two partial products carry into each other).
#[inline(always)]
fn pack8(flags: &[u32]) -> u64 {
    let mut b = [0u8; 8];
    for (o, &f) in b.iter_mut().zip(flags) {
        *o = (f & 1) as u8;
    }
    u64::from_le_bytes(b).wrapping_mul(0x0102_0408_1020_4080) >> 56
}

impl RowBits {
    /// No bits, room for `n`.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self {
            words: Vec::with_capacity(n.div_ceil(64)),
            len: 0,
        }
    }

    /// Bits held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Drops everything from bit `len` on.
    pub(crate) fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        self.words.truncate(len.div_ceil(64));
        if !len.is_multiple_of(64)
            && let Some(last) = self.words.last_mut()
        {
            *last &= (1u64 << (len % 64)) - 1;
        }
        self.len = len;
    }

    /// Appends the `n` (at most 64) low bits of `w`.
    #[inline]
    fn push_word(&mut self, w: u64, n: usize) {
        debug_assert!(n <= 64);
        if n == 0 {
            return;
        }
        let w = if n == 64 { w } else { w & ((1u64 << n) - 1) };
        let off = self.len % 64;
        if off == 0 {
            self.words.push(w);
        } else {
            *self.words.last_mut().expect("a partial word") |= w << off;
            if off + n > 64 {
                self.words.push(w >> (64 - off));
            }
        }
        self.len += n;
    }

    /// Appends one bit per value of `bits` (each 0 or 1).
    pub(crate) fn push_flags(&mut self, bits: &[u32]) {
        let mut chunks = bits.chunks_exact(64);
        for c in &mut chunks {
            let mut w = 0u64;
            for (k, eight) in c.chunks_exact(8).enumerate() {
                w |= pack8(eight) << (8 * k);
            }
            self.push_word(w, 64);
        }
        let rest = chunks.remainder();
        let mut w = 0u64;
        for (j, &b) in rest.iter().enumerate() {
            w |= u64::from(b & 1) << j;
        }
        self.push_word(w, rest.len());
    }

    /// Appends the first `n` bits of the bitmap `bytes` (least significant
    /// bit first).
    pub(crate) fn push_bitmap(&mut self, bytes: &[u8], n: usize) {
        let mut chunks = bytes[..n.div_ceil(8)].chunks(8);
        let mut left = n;
        for c in &mut chunks {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            let k = left.min(64);
            self.push_word(u64::from_le_bytes(b), k);
            left -= k;
        }
    }

    /// Appends `n` bits of the bitmap `bytes` from bit `offset` on (least
    /// significant bit first); bits past the end of `bytes` read as 0.
    pub(crate) fn push_bitmap_at(&mut self, bytes: &[u8], offset: usize, n: usize) {
        let mut done = 0;
        while done < n {
            let bit = offset + done;
            let at = bit / 8;
            let mut b = [0u8; 8];
            let tail = bytes.get(at..).unwrap_or_default();
            let take = tail.len().min(8);
            b[..take].copy_from_slice(&tail[..take]);
            // 56 bits from any bit of the first byte fit the loaded word.
            let k = (n - done).min(56);
            self.push_word(u64::from_le_bytes(b) >> (bit % 8), k);
            done += k;
        }
    }

    /// Appends `n` bits of `bit`.
    pub(crate) fn push_run(&mut self, bit: bool, n: usize) {
        let w = if bit { u64::MAX } else { 0 };
        let mut left = n;
        while left > 0 {
            let k = left.min(64);
            self.push_word(w, k);
            left -= k;
        }
    }

    /// Appends one bit per bit of `validity`: 0 where it is 0, and where it
    /// is 1 the next bit of `values` (which holds exactly as many bits as
    /// `validity` has set).
    pub(crate) fn push_spread(&mut self, validity: &RowBits, values: &RowBits) {
        let table = deposit_table();
        let mut at = 0usize;
        for (i, &word) in validity.words.iter().enumerate() {
            // A word of rows: eight bytes of validity, each spread on its own.
            let mut w = 0u64;
            for byte in 0..8 {
                let v = (word >> (8 * byte)) as u8;
                let k = v.count_ones() as usize;
                let s = values.bits_at(at, k) as usize;
                at += k;
                w |= u64::from(table[(v as usize) << 8 | s]) << (8 * byte);
            }
            self.push_word(w, (validity.len - 64 * i).min(64));
        }
        debug_assert_eq!(at, values.len);
    }

    /// The `k` (at most 8) bits from bit `at` on, as the low bits.
    #[inline]
    fn bits_at(&self, at: usize, k: usize) -> u64 {
        if k == 0 {
            return 0;
        }
        let (w, off) = (at / 64, at % 64);
        let mut x = self.words[w] >> off;
        if off + k > 64 {
            x |= self.words[w + 1] << (64 - off);
        }
        x & ((1u64 << k) - 1)
    }

    /// Set bits.
    pub(crate) fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Keeps the bits also set in `other` (of the same length).
    pub(crate) fn and(&mut self, other: &RowBits) {
        debug_assert_eq!(self.len, other.len);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= *b;
        }
    }

    /// The bits, one `bool` each.
    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<bool> {
        (0..self.len)
            .map(|i| self.words[i / 64] >> (i % 64) & 1 == 1)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Every way of appending agrees with a `Vec<bool>` built alongside,
    /// whatever the bit positions the pieces start at.
    #[test]
    fn appends_agree_with_a_plain_vector() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let (mut bits, mut want) = (RowBits::default(), vec![]);
            for _ in 0..rng.random_range(0..12) {
                let n: usize = rng.random_range(0..150);
                match rng.random_range(0..5) {
                    4 => {
                        let bytes: Vec<u8> =
                            (0..rng.random_range(0..40)).map(|_| rng.random()).collect();
                        let offset = rng.random_range(0..=bytes.len() * 8);
                        let n = n.min(bytes.len() * 8 - offset);
                        bits.push_bitmap_at(&bytes, offset, n);
                        want.extend(
                            (offset..offset + n)
                                .map(|i| bytes[i / 8] >> (i % 8) & 1 == 1),
                        );
                    }
                    0 => {
                        let v: Vec<u32> =
                            (0..n).map(|_| rng.random_range(0..2)).collect();
                        bits.push_flags(&v);
                        want.extend(v.iter().map(|&b| b == 1));
                    }
                    1 => {
                        let bytes: Vec<u8> =
                            (0..n.div_ceil(8)).map(|_| rng.random()).collect();
                        bits.push_bitmap(&bytes, n);
                        want.extend((0..n).map(|i| bytes[i / 8] >> (i % 8) & 1 == 1));
                    }
                    2 => {
                        let b = rng.random_bool(0.5);
                        bits.push_run(b, n);
                        want.extend(std::iter::repeat_n(b, n));
                    }
                    _ => {
                        let valid: Vec<u32> =
                            (0..n).map(|_| rng.random_range(0..2)).collect();
                        let k = valid.iter().sum::<u32>() as usize;
                        let vals: Vec<u32> =
                            (0..k).map(|_| rng.random_range(0..2)).collect();
                        let (mut v, mut s) = (RowBits::default(), RowBits::default());
                        // Start both off a word boundary, as pages do.
                        v.push_run(false, 3);
                        s.push_run(true, 5);
                        let (mut v2, mut s2) = (RowBits::default(), RowBits::default());
                        v2.push_flags(&valid);
                        s2.push_flags(&vals);
                        v.push_flags(&valid);
                        s.push_flags(&vals);
                        bits.push_spread(&v2, &s2);
                        let mut it = vals.iter();
                        want.extend(
                            valid.iter().map(|&b| b == 1 && *it.next().unwrap() == 1),
                        );
                        assert_eq!(v.to_vec()[3..], v2.to_vec()[..]);
                        assert_eq!(s.to_vec()[5..], s2.to_vec()[..]);
                    }
                }
                assert_eq!(bits.to_vec(), want);
            }
            assert_eq!(bits.count(), want.iter().filter(|&&b| b).count());
            let cut = rng.random_range(0..=want.len());
            bits.truncate(cut);
            want.truncate(cut);
            assert_eq!(bits.to_vec(), want);
            assert_eq!(bits.count(), want.iter().filter(|&&b| b).count());
        }
    }

    #[test]
    fn and_keeps_common_bits() {
        let (mut a, mut b) = (RowBits::default(), RowBits::default());
        a.push_flags(&[1, 1, 0, 1, 0]);
        b.push_flags(&[1, 0, 0, 1, 1]);
        a.and(&b);
        assert_eq!(a.to_vec(), [true, false, false, true, false]);
        assert_eq!(a.count(), 2);
    }
}
