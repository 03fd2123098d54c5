//! Parquet's RLE / bit-packing hybrid encoding, decoded without
//! materialising values: dictionary indices and definition levels as `u32`
//! codes, or straight into a histogram.
//!
//! The format (Parquet `Encodings.md`): a sequence of runs, each led by a
//! ULEB128 header `h`. `h & 1 == 0`: an RLE run of `h >> 1` copies of one
//! value stored in `ceil(width / 8)` little-endian bytes. `h & 1 == 1`: a
//! bit-packed run of `h >> 1` groups of 8 values, `width` bytes per group,
//! values packed least significant bit first. The last bit-packed run may be
//! padded past the values the page holds (callers ask for the count they
//! know) or, from some writers, cut short of its last group.
//!
//! Invariant: [`HybridDecoder`] never reads past its buffer; malformed input
//! (a header past the end, a run past the data, a width over 32) is an error,
//! never a panic.
//!
//! ```
//! use datafusion_tsjoin::bench::rle::HybridDecoder;
//! // An RLE run of five 3s, then one bit-packed group of 0..8 at width 3.
//! let data = [10u8, 3, 3, 0b10_001_000, 0b1_100_011_0, 0b111_110_10];
//! let mut d = HybridDecoder::new(&data[..], 3).unwrap();
//! let mut out = [0u32; 13];
//! assert_eq!(d.read(&mut out).unwrap(), 13);
//! assert_eq!(out, [3, 3, 3, 3, 3, 0, 1, 2, 3, 4, 5, 6, 7]);
//! ```

use datafusion::common::{DataFusionError, Result};

fn corrupt(what: &str) -> DataFusionError {
    DataFusionError::External(format!("corrupt Parquet page: {what}").into())
}

/// Bits of value `i` of a bit-packed run starting at byte `base` of `data`
/// (`width <= 32`, so the value lies in the 8 bytes from its first byte).
#[inline]
fn packed_value(data: &[u8], base: usize, i: usize, width: u32, mask: u64) -> u32 {
    let bit = i * width as usize;
    let byte = base + (bit >> 3);
    let word = match data.get(byte..byte + 8) {
        Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
        None => {
            let mut b = [0u8; 8];
            let tail = &data[byte.min(data.len())..];
            b[..tail.len().min(8)].copy_from_slice(&tail[..tail.len().min(8)]);
            u64::from_le_bytes(b)
        }
    };
    ((word >> (bit & 7)) & mask) as u32
}

/// The 8 values of the bit-packed group at byte `at` of `data` (the group
/// is `width` bytes; `width <= 32`). Two 16-byte little-endian loads: values
/// 0-3 lie in the first (`4 * width <= 128` bits), values 4-7 in the one from
/// byte `4 * width / 8` (their bits start at most 4 bits in, and
/// `4 * width + 4 <= 128` for odd widths). Near the end of the data the group
/// is copied out, zero-padded.
#[inline]
fn packed_group(data: &[u8], at: usize, width: u32, mask: u64) -> [u32; 8] {
    let mut padded = [0u8; 32];
    let bytes: &[u8] = match data.get(at..at + 32) {
        Some(b) => b,
        None => {
            let tail = &data[at.min(data.len())..];
            padded[..tail.len().min(32)].copy_from_slice(&tail[..tail.len().min(32)]);
            &padded
        }
    };
    let w = width as usize;
    let lo = u128::from_le_bytes(bytes[..16].try_into().expect("16 bytes"));
    let off = 4 * w / 8;
    let hi = u128::from_le_bytes(bytes[off..off + 16].try_into().expect("16 bytes"))
        >> (4 * w % 8);
    let mask = mask as u128;
    let mut out = [0u32; 8];
    for i in 0..4 {
        out[i] = ((lo >> (i * w)) & mask) as u32;
        out[4 + i] = ((hi >> (i * w)) & mask) as u32;
    }
    out
}

/// Eight bytes of `data` from `at`, little-endian, zero-padded past its end.
#[inline(always)]
fn load_u64(data: &[u8], at: usize) -> u64 {
    match data.get(at..at + 8) {
        Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
        None => {
            let tail = data.get(at..).unwrap_or_default();
            let mut b = [0u8; 8];
            b[..tail.len().min(8)].copy_from_slice(&tail[..tail.len().min(8)]);
            u64::from_le_bytes(b)
        }
    }
}

/// `f` of the codes of the whole bit-packed groups that fill `out`
/// (`out.len()` a multiple of 8), the first at byte `at` of `data`, for a
/// width `W` known at compile time (1 to 16). A group is `W` bytes; values
/// 0-3 lie in the 8 bytes from its start (`4 * W <= 64` bits) and values 4-7
/// in the 8 bytes from byte `4 * W / 8`, after a shift of 0 or 4 bits
/// (`4 * W + 4 <= 64` for odd `W`): two loads and constant shifts per group,
/// where [`packed_group`]'s runtime widths shift 128-bit words.
#[inline(always)]
fn unpack_groups<const W: usize>(
    data: &[u8],
    mut at: usize,
    out: &mut [u32],
    f: &impl Fn(u32) -> u32,
) {
    let mask = (1u64 << W) - 1;
    for chunk in out.chunks_exact_mut(8) {
        let lo = load_u64(data, at);
        let hi = load_u64(data, at + 4 * W / 8) >> (4 * W % 8);
        for i in 0..4 {
            chunk[i] = f(((lo >> (i * W)) & mask) as u32);
            chunk[4 + i] = f(((hi >> (i * W)) & mask) as u32);
        }
        at += W;
    }
}

/// `f` of the codes of the whole groups that fill `out`, the first at byte
/// `at`: one loop per width up to 16 ([`unpack_groups`]), [`packed_group`]
/// for the wider ones (and width 0).
#[inline(always)]
fn map_groups(
    data: &[u8],
    at: usize,
    width: u32,
    mask: u64,
    out: &mut [u32],
    f: &impl Fn(u32) -> u32,
) {
    macro_rules! by_width {
        ($($w:literal)*) => {
            match width {
                $($w => unpack_groups::<$w>(data, at, out, f),)*
                _ => {
                    for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
                        let g = packed_group(data, at + i * width as usize, width, mask);
                        for (o, c) in chunk.iter_mut().zip(g) {
                            *o = f(c);
                        }
                    }
                }
            }
        };
    }
    by_width!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
}

/// A stretch of codes as [`HybridDecoder::visit_runs`] meets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run<'a> {
    /// `count` copies of `value`.
    Repeat { value: u32, count: usize },
    /// `count` bit-packed codes from code `first` of the packed run that
    /// starts at `bytes` (at width 1 the run's bytes are a bitmap, least
    /// significant bit first).
    Packed {
        bytes: &'a [u8],
        first: usize,
        count: usize,
    },
}

/// A resumable reader of one RLE / bit-packed hybrid stream of `width`-bit
/// codes over `D` (a byte slice or `Bytes`).
#[derive(Debug, Clone)]
pub struct HybridDecoder<D> {
    data: D,
    /// Next run header.
    pos: usize,
    width: u32,
    mask: u64,
    /// Current RLE run: value and copies left.
    repeat: (u32, usize),
    /// Current bit-packed run: first byte, next value, values it holds.
    packed: (usize, usize, usize),
}

impl<D: AsRef<[u8]>> HybridDecoder<D> {
    /// Bits per code.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// A decoder of `width`-bit codes (0 to 32) over `data`.
    pub fn new(data: D, width: u8) -> Result<Self> {
        if width > 32 {
            return Err(corrupt(&format!("bit width {width} over 32")));
        }
        let width = width as u32;
        let mask = if width == 0 {
            0
        } else {
            u64::MAX >> (64 - width)
        };
        Ok(Self {
            data,
            pos: 0,
            width,
            mask,
            repeat: (0, 0),
            packed: (0, 0, 0),
        })
    }

    /// Starts the next run; `false` at the end of the data.
    fn next_run(&mut self) -> Result<bool> {
        let data = self.data.as_ref();
        if self.pos >= data.len() {
            return Ok(false);
        }
        let mut header = 0u64;
        let mut shift = 0;
        loop {
            let b = *data
                .get(self.pos)
                .ok_or_else(|| corrupt("run header past the end"))?;
            self.pos += 1;
            header |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 56 {
                return Err(corrupt("run header too long"));
            }
        }
        let n = (header >> 1) as usize;
        if header & 1 == 0 {
            let bytes = self.width.div_ceil(8) as usize;
            let v = data
                .get(self.pos..self.pos + bytes)
                .ok_or_else(|| corrupt("RLE value past the end"))?;
            let value = v.iter().rev().fold(0u32, |acc, &b| (acc << 8) | b as u32);
            self.pos += bytes;
            self.repeat = (value & self.mask as u32, n);
        } else {
            let bytes = n
                .checked_mul(self.width as usize)
                .ok_or_else(|| corrupt("bit-packed run too long"))?;
            // A last run cut short still holds its complete values.
            let available = bytes.min(data.len() - self.pos);
            let values = if self.width == 0 {
                n * 8
            } else {
                (available * 8 / self.width as usize).min(n * 8)
            };
            self.packed = (self.pos, 0, values);
            self.pos += available;
        }
        Ok(true)
    }

    /// Fills `out` with the next codes; returns how many it wrote (fewer
    /// than `out.len()` only at the end of the data).
    pub fn read(&mut self, out: &mut [u32]) -> Result<usize> {
        self.read_map(out, |c| c)
    }

    /// [`Self::read`], writing `f(code)` for each code (a dictionary lookup
    /// fused into the decoding).
    #[inline]
    pub fn read_map(&mut self, out: &mut [u32], f: impl Fn(u32) -> u32) -> Result<usize> {
        let mut filled = 0;
        while filled < out.len() {
            if self.repeat.1 > 0 {
                let k = self.repeat.1.min(out.len() - filled);
                out[filled..filled + k].fill(f(self.repeat.0));
                self.repeat.1 -= k;
                filled += k;
            } else if self.packed.1 < self.packed.2 {
                let (base, mut next, end) = self.packed;
                let k = (end - next).min(out.len() - filled);
                let stop = next + k;
                let data = self.data.as_ref();
                let group_bytes = self.width as usize;
                // Single values up to a group boundary, whole groups, then
                // single values again.
                while next < stop {
                    if next % 8 == 0 && next + 8 <= stop {
                        let k = (stop - next) / 8 * 8;
                        map_groups(
                            data,
                            base + next / 8 * group_bytes,
                            self.width,
                            self.mask,
                            &mut out[filled..filled + k],
                            &f,
                        );
                        filled += k;
                        next += k;
                    } else {
                        out[filled] =
                            f(packed_value(data, base, next, self.width, self.mask));
                        filled += 1;
                        next += 1;
                    }
                }
                self.packed.1 = next;
            } else if !self.next_run()? {
                break;
            }
        }
        Ok(filled)
    }

    /// Visits the next `n` codes run by run, without decoding them (see
    /// [`Run`]). Returns how many codes it visited (fewer than `n` only at
    /// the end of the data).
    pub fn visit_runs(&mut self, n: usize, mut f: impl FnMut(Run<'_>)) -> Result<usize> {
        let mut done = 0;
        while done < n {
            if self.repeat.1 > 0 {
                let k = self.repeat.1.min(n - done);
                f(Run::Repeat {
                    value: self.repeat.0,
                    count: k,
                });
                self.repeat.1 -= k;
                done += k;
            } else if self.packed.1 < self.packed.2 {
                let (base, next, end) = self.packed;
                let k = (end - next).min(n - done);
                f(Run::Packed {
                    bytes: &self.data.as_ref()[base..],
                    first: next,
                    count: k,
                });
                self.packed.1 += k;
                done += k;
            } else if !self.next_run()? {
                break;
            }
        }
        Ok(done)
    }

    /// Adds the next `n` codes to `hist` (`hist[code] += 1`; an RLE run adds
    /// its length at once). Returns how many codes it read (fewer than `n`
    /// only at the end of the data). A code past `hist` is an error.
    pub fn count(&mut self, n: usize, hist: &mut [u64]) -> Result<usize> {
        let out_of_range = || corrupt("dictionary index out of range");
        let mut done = 0;
        while done < n {
            if self.repeat.1 > 0 {
                let k = self.repeat.1.min(n - done);
                *hist
                    .get_mut(self.repeat.0 as usize)
                    .ok_or_else(out_of_range)? += k as u64;
                self.repeat.1 -= k;
                done += k;
            } else if self.packed.1 < self.packed.2 {
                let (base, mut next, end) = self.packed;
                let stop = next + (end - next).min(n - done);
                let data = self.data.as_ref();
                let group_bytes = self.width as usize;
                let mut codes = [0u32; 256];
                while next < stop {
                    if next % 8 == 0 && next + 8 <= stop {
                        // Whole groups, up to 256 codes at a time.
                        let k = ((stop - next) / 8 * 8).min(codes.len());
                        map_groups(
                            data,
                            base + next / 8 * group_bytes,
                            self.width,
                            self.mask,
                            &mut codes[..k],
                            &|c| c,
                        );
                        for &code in &codes[..k] {
                            *hist.get_mut(code as usize).ok_or_else(out_of_range)? += 1;
                        }
                        next += k;
                    } else {
                        let code = packed_value(data, base, next, self.width, self.mask)
                            as usize;
                        *hist.get_mut(code).ok_or_else(out_of_range)? += 1;
                        next += 1;
                    }
                }
                done += stop - self.packed.1;
                self.packed.1 = stop;
            } else if !self.next_run()? {
                break;
            }
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    /// A straightforward encoder: runs of 8+ equal codes as RLE runs, the
    /// rest bit-packed (padded to whole groups only at the end).
    fn encode(codes: &[u32], width: u8) -> Vec<u8> {
        fn varint(out: &mut Vec<u8>, mut v: u64) {
            loop {
                let b = (v & 0x7f) as u8;
                v >>= 7;
                if v == 0 {
                    out.push(b);
                    return;
                }
                out.push(b | 0x80);
            }
        }
        fn pack(out: &mut Vec<u8>, vals: &[u32], width: u8) {
            let groups = vals.len().div_ceil(8);
            varint(out, ((groups as u64) << 1) | 1);
            let mut bits = vec![0u8; groups * width as usize];
            for (i, &v) in vals.iter().enumerate() {
                for b in 0..width as usize {
                    if v >> b & 1 == 1 {
                        let bit = i * width as usize + b;
                        bits[bit / 8] |= 1 << (bit % 8);
                    }
                }
            }
            out.extend(bits);
        }
        let mut out = vec![];
        let mut i = 0;
        let mut pending: Vec<u32> = vec![];
        while i < codes.len() {
            let mut j = i;
            while j < codes.len() && codes[j] == codes[i] {
                j += 1;
            }
            // RLE only where the pending bit-packed values fill whole groups.
            if j - i >= 8 && pending.len().is_multiple_of(8) {
                if !pending.is_empty() {
                    pack(&mut out, &pending, width);
                    pending.clear();
                }
                varint(&mut out, ((j - i) as u64) << 1);
                out.extend(&codes[i].to_le_bytes()[..(width as usize).div_ceil(8)]);
            } else {
                pending.extend(&codes[i..j]);
            }
            i = j;
        }
        if !pending.is_empty() {
            pack(&mut out, &pending, width);
        }
        out
    }

    fn random_codes(rng: &mut StdRng, n: usize, width: u8) -> Vec<u32> {
        let max = if width == 32 {
            u32::MAX
        } else {
            (1u32 << width) - 1
        };
        let mut codes = vec![];
        while codes.len() < n {
            let v = rng.random_range(0..=max);
            let run = if rng.random_bool(0.3) {
                rng.random_range(1..40)
            } else {
                1
            };
            codes.extend(std::iter::repeat_n(v, run.min(n - codes.len())));
        }
        codes
    }

    #[test]
    fn reads_what_was_encoded_at_every_width() {
        let mut rng = StdRng::seed_from_u64(7);
        for width in 0..=32u8 {
            for n in [0, 1, 7, 8, 9, 100, 1000, 5000] {
                let codes = random_codes(&mut rng, n, width);
                let data = encode(&codes, width);
                // In pieces of random size, as batches ask for them (some
                // long: many whole groups in one call).
                let mut d = HybridDecoder::new(&data[..], width).unwrap();
                let mut got: Vec<u32> = vec![];
                while got.len() < n {
                    let mut buf = vec![
                        0u32;
                        if rng.random_bool(0.5) {
                            rng.random_range(1..50)
                        } else {
                            rng.random_range(1..3000)
                        }
                    ];
                    let k = d.read(&mut buf).unwrap();
                    got.extend(&buf[..k]);
                    if k < buf.len() {
                        break;
                    }
                }
                got.truncate(n);
                assert_eq!(got, codes, "width {width}, {n} codes");
            }
        }
    }

    #[test]
    fn runs_visited_hold_what_was_encoded() {
        let mut rng = StdRng::seed_from_u64(9);
        for width in [1u8, 2, 7, 13] {
            let codes = random_codes(&mut rng, 3000, width);
            let data = encode(&codes, width);
            let mut d = HybridDecoder::new(&data[..], width).unwrap();
            let mut got = vec![];
            // Two calls: the split falls inside a run.
            for n in [1111, 3000 - 1111] {
                let visited = d
                    .visit_runs(n, |run| match run {
                        Run::Repeat { value, count } => {
                            got.extend(std::iter::repeat_n(value, count))
                        }
                        Run::Packed {
                            bytes,
                            first,
                            count,
                        } => got.extend((first..first + count).map(|i| {
                            packed_value(bytes, 0, i, width as u32, (1u64 << width) - 1)
                        })),
                    })
                    .unwrap();
                assert_eq!(visited, n);
            }
            assert_eq!(got, codes, "width {width}");
        }
    }

    #[test]
    fn counts_what_was_encoded() {
        let mut rng = StdRng::seed_from_u64(8);
        for width in [1u8, 3, 4, 10] {
            let codes = random_codes(&mut rng, 5000, width);
            let data = encode(&codes, width);
            let mut hist = vec![0u64; 1 << width];
            let mut d = HybridDecoder::new(&data[..], width).unwrap();
            // Two calls: the split falls inside a run.
            assert_eq!(d.count(1234, &mut hist).unwrap(), 1234);
            assert_eq!(d.count(5000 - 1234, &mut hist).unwrap(), 5000 - 1234);
            let mut want = vec![0u64; 1 << width];
            codes.iter().for_each(|&c| want[c as usize] += 1);
            assert_eq!(hist, want, "width {width}");
        }
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        // A header that never ends, an RLE value past the end, a width over 32.
        assert!(
            HybridDecoder::new(&[0x80u8, 0x80][..], 3)
                .unwrap()
                .read(&mut [0; 4])
                .is_err()
        );
        assert!(
            HybridDecoder::new(&[4u8][..], 16)
                .unwrap()
                .read(&mut [0; 4])
                .is_err()
        );
        assert!(HybridDecoder::new(&[0u8][..], 33).is_err());
        // A code past the histogram.
        let data = encode(&[5; 10], 3);
        assert!(
            HybridDecoder::new(&data[..], 3)
                .unwrap()
                .count(10, &mut [0; 4])
                .is_err()
        );
        // A bit-packed run cut short gives its complete values, then ends.
        let mut data = encode(&(0..16).map(|i| i % 8).collect::<Vec<_>>(), 3);
        data.truncate(data.len() - 2);
        let mut out = [0u32; 16];
        let k = HybridDecoder::new(&data[..], 3)
            .unwrap()
            .read(&mut out)
            .unwrap();
        assert_eq!(k, (data.len() - 1) * 8 / 3);
        assert_eq!(&out[..8], &[0, 1, 2, 3, 4, 5, 6, 7]);
    }
}
