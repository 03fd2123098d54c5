//! A split-block Bloom filter (Putze et al.'s blocked Bloom filter in the
//! form Parquet's SBBF uses): the filter for integer join keys too widely
//! spread for one bit per value of their range.
//!
//! Each key sets 8 bits in one 256-bit block (one per 32-bit word, chosen
//! by 8 multiplicative salts of the key's hash), so a probe touches one
//! cache line and branches on nothing. Sized at [`BITS_PER_KEY`] bits per
//! build key, the false-positive rate is about 0.1% (a false positive only
//! costs the join a probe that finds nothing; there are no false negatives).

/// Bits per build key: 16 gives about 0.1% false positives for 8 bits set
/// per key in a 256-bit block (Parquet's SBBF tables).
pub(crate) const BITS_PER_KEY: u64 = 16;

/// Bits in a block.
const BLOCK_BITS: u64 = 256;

/// Parquet's SBBF salts: odd constants, one per word of a block.
const SALT: [u32; 8] = [
    0x47b6_137b,
    0x4497_4d91,
    0x8824_ad5b,
    0xa2b7_289d,
    0x7054_95c7,
    0x2df1_424b,
    0x9efc_4947,
    0x5c6b_fb31,
];

/// A split-block Bloom filter over `i64` keys.
///
/// Invariant: `blocks` is not empty.
#[derive(Debug)]
pub(crate) struct Bloom {
    blocks: Vec<[u32; 8]>,
}

impl Bloom {
    /// A filter sized for `keys` keys at [`BITS_PER_KEY`] bits each, when
    /// that is at most `max_bits`; `None` otherwise.
    pub(crate) fn sized_for(keys: u64, max_bits: u64) -> Option<Self> {
        let blocks = keys.checked_mul(BITS_PER_KEY)?.div_ceil(BLOCK_BITS).max(1);
        (blocks * BLOCK_BITS <= max_bits).then(|| Self {
            blocks: vec![[0; 8]; blocks as usize],
        })
    }

    /// Adds `v`.
    pub(crate) fn insert(&mut self, v: i64) {
        let (block, mask) = self.locate(v);
        for (word, bits) in self.blocks[block].iter_mut().zip(mask) {
            *word |= bits;
        }
    }

    /// Whether `v` may have been added (always true when it was).
    #[inline(always)]
    pub(crate) fn contains(&self, v: i64) -> bool {
        let (block, mask) = self.locate(v);
        let block = &self.blocks[block];
        let mut all = true;
        for i in 0..8 {
            all &= block[i] & mask[i] != 0;
        }
        all
    }

    /// Bytes of blocks.
    pub(crate) fn size(&self) -> usize {
        self.blocks.len() * std::mem::size_of::<[u32; 8]>()
    }

    /// `v`'s block and the bit each of its words must have.
    #[inline(always)]
    fn locate(&self, v: i64) -> (usize, [u32; 8]) {
        let h = mix(v as u64);
        // The upper half picks the block (multiply-shift: any block count),
        // the lower half the bits.
        let block = ((h >> 32) * self.blocks.len() as u64) >> 32;
        let key = h as u32;
        let mut mask = [0u32; 8];
        for i in 0..8 {
            mask[i] = 1 << (key.wrapping_mul(SALT[i]) >> 27);
        }
        (block as usize, mask)
    }
}

/// MurmurHash3's 64-bit finaliser: consecutive keys land far apart.
#[inline(always)]
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(keys: &[i64]) -> Bloom {
        let mut bloom = Bloom::sized_for(keys.len() as u64, 1 << 32).unwrap();
        for &k in keys {
            bloom.insert(k);
        }
        bloom
    }

    #[test]
    fn every_key_added_is_found() {
        // Consecutive, strided and extreme keys.
        let keys: Vec<i64> = (0..50_000)
            .chain((0..50_000).map(|i| i * 1_000_003))
            .chain([i64::MIN, i64::MAX, -1])
            .collect();
        let bloom = filled(&keys);
        assert!(keys.iter().all(|&k| bloom.contains(k)));
    }

    #[test]
    fn false_positives_stay_within_the_design_bound() {
        // 100 K keys spread over 60 M (TPC-H's orderkeys of one filtered
        // build), probed with 1 M keys none of which was added.
        let keys: Vec<i64> = (0..100_000).map(|i| i * 600 + 7).collect();
        let bloom = filled(&keys);
        assert_eq!(bloom.size() as u64 * 8, 100_000 * BITS_PER_KEY);
        // ≡ 1 (mod 60), where every key is ≡ 7.
        let probes = 1_000_000;
        let false_positives = (0..probes)
            .map(|i| i * 60 + 1)
            .filter(|&v| bloom.contains(v))
            .count();
        // The design rate is about 0.1%; allow twice the usual bound.
        assert!(
            false_positives * 200 < probes as usize,
            "{false_positives} false positives in {probes}"
        );
    }

    #[test]
    fn sizes_within_the_budget_only() {
        // 1024 keys: 16 Ki bits, 64 blocks.
        assert_eq!(Bloom::sized_for(1024, 16_384).unwrap().size(), 64 * 32);
        assert!(Bloom::sized_for(1024, 16_383).is_none());
        // At least one block, even for no key.
        assert_eq!(Bloom::sized_for(0, 256).unwrap().size(), 32);
        assert!(Bloom::sized_for(u64::MAX, u64::MAX).is_none());
    }
}
