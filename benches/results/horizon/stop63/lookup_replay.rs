// Stop 63 (2026-12-01): a standalone replay of the folding HORIZON JOIN's
// lookups (datafusion-tsjoin/src/temporal/directory.rs) on synthetic data
// shaped like `tsjoin-bench window-join`'s (1,000 Zipf s = 1 symbols, 3M
// prices and 1M trades over 1,728 s, trades in chunks of 131,072 put in key
// order, slices of 8,192 rows, blocks of 8 of the 61 offsets 0..60 s), one
// thread, to try lookup loops without a 10-minute release build each.
// Not part of the workspace. To run it:
//   cargo new --bin replay && cp lookup_replay.rs replay/src/main.rs
//   (Cargo.toml: [profile.release] codegen-units = 1)
//   cargo build --release && VS=0,3,7,8,9 G=0 ./target/release/replay 8
// Argument: quarter-rows per bucket (8 = production's ROWS_PER_BUCKET 2);
// VS: variants; G=1 adds a separate gather pass of an f64 leaf per offset.
// Variants: v0 production loop; v1/v7 "lean" loops (padded array, branchless
// clamp or one combined range check, TZCNT); v2/v6 four-row windows; v3 two
// passes (bucket starts, then counts); v4 bucket starts only; v8 v0 with the
// leaf's value gathered in the loop; v9 rows in pairs (the second counted on
// from the first's answer). Each variant prints a checksum of the positions
// it found (all must agree) before the timings. Results: benches/README.md,
// HORIZON, "Stop 63".
#![allow(unsafe_op_in_unsafe_fn)]
use std::arch::x86_64::*;
use std::time::Instant;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn f(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Clone, Copy, Default)]
struct Buckets {
    t0: i64,
    shift: u32,
    at: usize,
    buckets: usize,
}
fn bucket_of(ts: &[i64], at: usize, rpb: usize) -> Buckets {
    let (Some(&t0), Some(&last)) = (ts.first(), ts.last()) else {
        return Buckets {
            at,
            ..Default::default()
        };
    };
    let span = (last as u64).wrapping_sub(t0 as u64);
    let want = ((ts.len() * 4) / rpb).max(1) as u64;
    let mut shift = 0;
    while shift < 63 && (span >> shift) >= want {
        shift += 1;
    }
    Buckets {
        t0,
        shift,
        at,
        buckets: (span >> shift) as usize + 1,
    }
}
fn fill(b: &Buckets, ts: &[i64], out: &mut Vec<u32>) {
    let mut p = 0;
    for k in 0..b.buckets as u64 {
        while p < ts.len() && (ts[p] as u64).wrapping_sub(b.t0 as u64) < k << b.shift {
            p += 1;
        }
        out.push(p as u32);
    }
    out.push(ts.len() as u32);
}

fn search(ts: &[i64], f: usize, t: i64) -> usize {
    f + ts[f..].partition_point(|&x| x <= t)
}

#[inline(always)]
unsafe fn count8(near: &[i64], t: i64) -> u32 {
    let tv = _mm256_set1_epi64x(t);
    let lo = _mm256_loadu_si256(near.as_ptr().cast());
    let hi = _mm256_loadu_si256(near[4..].as_ptr().cast());
    let above = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(lo, tv)))
        | (_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(hi, tv))) << 4);
    above as u32
}

// V0: like production.
#[target_feature(enable = "avx2,popcnt")]
unsafe fn v0(
    b: &Buckets,
    starts: &[u32],
    base: usize,
    ts: &[i64],
    offsets: &[i64],
    lt: &[i64],
    out: &mut [u32],
    stride: usize,
    none: u32,
) {
    for (k, &o) in offsets.iter().enumerate() {
        let out = &mut out[k * stride..][..lt.len()];
        for (slot, &t) in out.iter_mut().zip(lt) {
            let t = t.wrapping_add(o);
            let (mut p, end) = if t < b.t0 {
                (0, 0)
            } else {
                let k = ((t as u64).wrapping_sub(b.t0 as u64) >> b.shift)
                    .min(b.buckets as u64) as usize;
                (starts[k] as usize, (k + 1).min(b.buckets))
            };
            let mut done = None;
            for _ in 0..4 {
                let Some(near) = ts.get(p..p + 8) else {
                    done = Some(
                        p + ts[p..].iter().map(|&x| usize::from(x <= t)).sum::<usize>(),
                    );
                    break;
                };
                let hits = (!count8(near, t) & 0xff).count_ones() as usize;
                if hits < 8 {
                    done = Some(p + hits);
                    break;
                } else {
                    p += 8
                }
            }
            let p = match done {
                Some(p) => p,
                None => search(&ts[..(starts[end] as usize).max(p)], p, t),
            };
            *slot = if p > 0 { (base + p - 1) as u32 } else { none };
        }
    }
}

#[inline(always)]
fn slow(ts: &[i64], p: usize, t: i64) -> usize {
    search(ts, p, t)
}

// V1: lean; `all` = every group's times + 8 padding; group at base..base+n.
#[target_feature(enable = "avx2,popcnt,bmi1,bmi2")]
unsafe fn v1(
    b: &Buckets,
    starts: &[u32],
    base: usize,
    n: usize,
    all: &[i64],
    offsets: &[i64],
    lt: &[i64],
    out: &mut [u32],
    stride: usize,
    none: u32,
) {
    let (t0, shift, nb) = (b.t0, b.shift, b.buckets as u64);
    for (k, &o) in offsets.iter().enumerate() {
        let out = &mut out[k * stride..][..lt.len()];
        for (slot, &t) in out.iter_mut().zip(lt) {
            let t = t.wrapping_add(o);
            let d = t.saturating_sub(t0).max(0) as u64;
            let kk = (d >> shift).min(nb) as usize;
            let p = starts[kk] as usize;
            let at = base + p;
            let mut q = match all.get(at..at + 8) {
                Some(near) => p + (count8(near, t) | 0x100).trailing_zeros() as usize,
                None => n, // unreachable with padding
            };
            if q >= p + 8 && q < n {
                q = slow(&all[base..base + n], q, t);
            }
            let q = q.min(n);
            *slot = if q > 0 { (base + q - 1) as u32 } else { none };
        }
    }
}

// V2: lean, 4 rows per check.
#[target_feature(enable = "avx2,popcnt,bmi1,bmi2")]
unsafe fn v2(
    b: &Buckets,
    starts: &[u32],
    base: usize,
    n: usize,
    all: &[i64],
    offsets: &[i64],
    lt: &[i64],
    out: &mut [u32],
    stride: usize,
    none: u32,
) {
    let (t0, shift, nb) = (b.t0, b.shift, b.buckets as u64);
    for (k, &o) in offsets.iter().enumerate() {
        let out = &mut out[k * stride..][..lt.len()];
        for (slot, &t) in out.iter_mut().zip(lt) {
            let t = t.wrapping_add(o);
            let d = t.saturating_sub(t0).max(0) as u64;
            let kk = (d >> shift).min(nb) as usize;
            let p = starts[kk] as usize;
            let at = base + p;
            let mut q = match all.get(at..at + 4) {
                Some(near) => {
                    let tv = _mm256_set1_epi64x(t);
                    let lo = _mm256_loadu_si256(near.as_ptr().cast());
                    p + ((_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(
                        lo, tv,
                    ))) as u32)
                        | 0x10)
                        .trailing_zeros() as usize
                }
                None => n,
            };
            if q >= p + 4 && q < n {
                q = slow(&all[base..base + n], q, t);
            }
            let q = q.min(n);
            *slot = if q > 0 { (base + q - 1) as u32 } else { none };
        }
    }
}

// V3: two passes: bucket starts for the run first, then the counts.
#[target_feature(enable = "avx2,popcnt,bmi1,bmi2")]
unsafe fn v3(
    b: &Buckets,
    starts: &[u32],
    base: usize,
    ts: &[i64],
    offsets: &[i64],
    lt: &[i64],
    out: &mut [u32],
    stride: usize,
    none: u32,
    buf: &mut Vec<u32>,
) {
    for (k, &o) in offsets.iter().enumerate() {
        let out = &mut out[k * stride..][..lt.len()];
        buf.clear();
        buf.extend(lt.iter().map(|&t| {
            let t = t.wrapping_add(o);
            if t < b.t0 {
                0
            } else {
                starts[((t as u64).wrapping_sub(b.t0 as u64) >> b.shift)
                    .min(b.buckets as u64) as usize]
            }
        }));
        for ((slot, &t), &p) in out.iter_mut().zip(lt).zip(buf.iter()) {
            let t = t.wrapping_add(o);
            let mut p = p as usize;
            let mut done = None;
            for _ in 0..4 {
                let Some(near) = ts.get(p..p + 8) else {
                    done = Some(
                        p + ts[p..].iter().map(|&x| usize::from(x <= t)).sum::<usize>(),
                    );
                    break;
                };
                let hits = (!count8(near, t) & 0xff).count_ones() as usize;
                if hits < 8 {
                    done = Some(p + hits);
                    break;
                } else {
                    p += 8
                }
            }
            let p = match done {
                Some(p) => p,
                None => search(ts, p, t),
            };
            *slot = if p > 0 { (base + p - 1) as u32 } else { none };
        }
    }
}

#[target_feature(enable = "avx2,popcnt,bmi1,bmi2")]
unsafe fn v4(
    b: &Buckets,
    starts: &[u32],
    base: usize,
    _ts: &[i64],
    offsets: &[i64],
    lt: &[i64],
    out: &mut [u32],
    stride: usize,
    _none: u32,
) {
    for (k, &o) in offsets.iter().enumerate() {
        let out = &mut out[k * stride..][..lt.len()];
        for (slot, &t) in out.iter_mut().zip(lt) {
            let t = t.wrapping_add(o);
            *slot = base as u32
                + if t < b.t0 {
                    0
                } else {
                    starts[((t as u64).wrapping_sub(b.t0 as u64) >> b.shift)
                        .min(b.buckets as u64) as usize]
                }
        }
    }
}

#[inline(always)]
unsafe fn count4(near: &[i64], t: i64) -> u32 {
    let tv = _mm256_set1_epi64x(t);
    let lo = _mm256_loadu_si256(near.as_ptr().cast());
    _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(lo, tv))) as u32
}
// V6: v0 with 4-row steps.
#[target_feature(enable = "avx2,popcnt")]
unsafe fn v6(
    b: &Buckets,
    starts: &[u32],
    base: usize,
    ts: &[i64],
    offsets: &[i64],
    lt: &[i64],
    out: &mut [u32],
    stride: usize,
    none: u32,
) {
    for (k, &o) in offsets.iter().enumerate() {
        let out = &mut out[k * stride..][..lt.len()];
        for (slot, &t) in out.iter_mut().zip(lt) {
            let t = t.wrapping_add(o);
            let (mut p, end) = if t < b.t0 {
                (0, 0)
            } else {
                let k = ((t as u64).wrapping_sub(b.t0 as u64) >> b.shift)
                    .min(b.buckets as u64) as usize;
                (starts[k] as usize, (k + 1).min(b.buckets))
            };
            let mut done = None;
            for _ in 0..4 {
                let Some(near) = ts.get(p..p + 4) else {
                    done = Some(
                        p + ts[p..].iter().map(|&x| usize::from(x <= t)).sum::<usize>(),
                    );
                    break;
                };
                let hits = (!count4(near, t) & 0xf).count_ones() as usize;
                if hits < 4 {
                    done = Some(p + hits);
                    break;
                } else {
                    p += 4
                }
            }
            let p = match done {
                Some(p) => p,
                None => search(&ts[..(starts[end] as usize).max(p)], p, t),
            };
            *slot = if p > 0 { (base + p - 1) as u32 } else { none };
        }
    }
}

#[cold]
#[inline(never)]
fn cold(ts: &[i64], t: i64) -> usize {
    ts.partition_point(|&x| x <= t)
}

// V7: lean; `all` = every group's times + 8 padding; group at base..base+n.
#[target_feature(enable = "avx2,popcnt,bmi1,bmi2")]
unsafe fn v7(
    b: &Buckets,
    starts: &[u32],
    base: usize,
    n: usize,
    all: &[i64],
    offsets: &[i64],
    lt: &[i64],
    out: &mut [u32],
    stride: usize,
    none: u32,
) -> u64 {
    let t0 = b.t0;
    let max_d = (i64::MAX as u64).wrapping_sub(t0 as u64).wrapping_sub(1);
    let last = starts.len() - 1;
    let group = &all[base..base + n];
    let mut missed = 0;
    for (k, &o) in offsets.iter().enumerate() {
        let out = &mut out[k * stride..][..lt.len()];
        let mut miss = false;
        for (slot, &t) in out.iter_mut().zip(lt) {
            let t = t.wrapping_add(o);
            let d = (t as u64).wrapping_sub(t0 as u64);
            let q = if d > max_d {
                cold(group, t)
            } else {
                let p = starts[((d >> b.shift) as usize).min(last)] as usize;
                let h = match all.get(base + p..base + p + 8) {
                    Some(near) => (count8(near, t) | 0x100).trailing_zeros() as usize,
                    None => 9,
                };
                let q = p + h;
                if h >= 8 && (h > 8 || q < n) {
                    cold(group, t)
                } else {
                    q.min(n)
                }
            };
            miss |= q == 0;
            *slot = if q > 0 { (base + q - 1) as u32 } else { none };
        }
        missed |= u64::from(miss) << k;
    }
    missed
}

// V8: v0 that also gathers the value at each match (NaN-free: none reads vals[none]).
#[target_feature(enable = "avx2,popcnt")]
unsafe fn v8(
    b: &Buckets,
    starts: &[u32],
    base: usize,
    ts: &[i64],
    offsets: &[i64],
    lt: &[i64],
    out: &mut [u32],
    stride: usize,
    none: u32,
    vals: &[f64],
    vout: &mut [f64],
) {
    for (k, &o) in offsets.iter().enumerate() {
        let out = &mut out[k * stride..][..lt.len()];
        let vout = &mut vout[k * stride..][..lt.len()];
        for ((slot, v), &t) in out.iter_mut().zip(vout.iter_mut()).zip(lt) {
            let t = t.wrapping_add(o);
            let (mut p, end) = if t < b.t0 {
                (0, 0)
            } else {
                let k = ((t as u64).wrapping_sub(b.t0 as u64) >> b.shift)
                    .min(b.buckets as u64) as usize;
                (starts[k] as usize, (k + 1).min(b.buckets))
            };
            let mut done = None;
            for _ in 0..4 {
                let Some(near) = ts.get(p..p + 8) else {
                    done = Some(
                        p + ts[p..].iter().map(|&x| usize::from(x <= t)).sum::<usize>(),
                    );
                    break;
                };
                let hits = (!count8(near, t) & 0xff).count_ones() as usize;
                if hits < 8 {
                    done = Some(p + hits);
                    break;
                } else {
                    p += 8
                }
            }
            let p = match done {
                Some(p) => p,
                None => search(&ts[..(starts[end] as usize).max(p)], p, t),
            };
            let at = if p > 0 { (base + p - 1) as u32 } else { none };
            *slot = at;
            *v = vals[at as usize];
        }
    }
}

// V9: rows in pairs: the first from its bucket, the second counted on from the first's answer.
#[target_feature(enable = "avx2,popcnt")]
unsafe fn v9(
    b: &Buckets,
    starts: &[u32],
    base: usize,
    ts: &[i64],
    offsets: &[i64],
    lt: &[i64],
    out: &mut [u32],
    stride: usize,
    none: u32,
) {
    #[inline(always)]
    unsafe fn from(ts: &[i64], mut p: usize, t: i64) -> usize {
        for _ in 0..4 {
            let Some(near) = ts.get(p..p + 8) else {
                return p + ts[p..].iter().map(|&x| usize::from(x <= t)).sum::<usize>();
            };
            let hits = (!count8(near, t) & 0xff).count_ones() as usize;
            if hits < 8 { return p + hits } else { p += 8 }
        }
        search(ts, p, t)
    }
    for (k, &o) in offsets.iter().enumerate() {
        let out = &mut out[k * stride..][..lt.len()];
        let mut prev = 0usize;
        for (i, (slot, &t)) in out.iter_mut().zip(lt).enumerate() {
            let t = t.wrapping_add(o);
            let p = if i % 2 == 1 {
                from(ts, prev, t)
            } else {
                let p0 = if t < b.t0 {
                    0
                } else {
                    starts[((t as u64).wrapping_sub(b.t0 as u64) >> b.shift)
                        .min(b.buckets as u64) as usize] as usize
                };
                from(ts, p0, t)
            };
            prev = p;
            *slot = if p > 0 { (base + p - 1) as u32 } else { none };
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rpb: usize = args.get(1).map(|s| s.parse().unwrap()).unwrap_or(2);
    let np: usize = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(3_000_000);
    let span: i64 = args
        .get(3)
        .map(|s| s.parse().unwrap())
        .unwrap_or(1_728_000_000);
    let (nsym, nt) = (1000usize, 1_000_000usize);
    let h: f64 = (1..=nsym).map(|i| 1.0 / i as f64).sum();
    let cdf: Vec<f64> = (1..=nsym)
        .scan(0.0, |a, i| {
            *a += 1.0 / i as f64 / h;
            Some(*a)
        })
        .collect();
    let mut r = Rng(88172645463325252);
    let zipf = |r: &mut Rng| cdf.partition_point(|&c| c < r.f()).min(nsym - 1);
    let mut groups: Vec<Vec<i64>> = vec![vec![]; nsym];
    for _ in 0..np {
        let g = zipf(&mut r);
        groups[g].push((r.next() % span as u64) as i64);
    }
    for g in &mut groups {
        g.sort();
    }
    let mut offs = vec![0usize];
    let mut all = vec![];
    for g in &groups {
        all.extend_from_slice(g);
        offs.push(all.len());
    }
    all.extend([i64::MAX; 8]);
    let mut trades: Vec<(i64, usize)> = (0..nt)
        .map(|_| ((r.next() % span as u64) as i64, zipf(&mut r)))
        .collect();
    trades.sort();
    let mut bs = vec![];
    let mut starts = vec![];
    for (g, ts) in groups.iter().enumerate() {
        let b = bucket_of(ts, starts.len(), rpb);
        fill(&b, ts, &mut starts);
        let _ = g;
        bs.push(b);
    }
    let offsets: Vec<i64> = (0..61).map(|k| k * 1_000_000).collect();
    // chunks of 131072 trades ordered by group
    let mut runs_all = vec![];
    for chunk in trades.chunks(131072) {
        let mut c = chunk.to_vec();
        c.sort_by_key(|x| x.1);
        runs_all.push(c);
    }
    let none = all.len() as u32;
    let vals: Vec<f64> = (0..=all.len()).map(|i| i as f64 * 0.5).collect();
    let gmode: usize = std::env::var("G").map(|s| s.parse().unwrap()).unwrap_or(0);
    let mut gbuf = vec![0f64; 8192];
    let mut vbuf = vec![0f64; 8192 * 8];
    let mut buf = vec![];
    let vs: Vec<usize> = std::env::var("VS")
        .unwrap_or("0,3,4".into())
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    let mut best = vec![f64::MAX; 10];
    for round in 0..7 {
        for &variant in &vs {
            let mut out = vec![0u32; 8192 * 8];
            let mut sum = 0u64;
            let t = Instant::now();
            for c in &runs_all {
                let lt: Vec<i64> = c.iter().map(|x| x.0).collect();
                for s in (0..c.len()).step_by(8192) {
                    let e = (s + 8192).min(c.len());
                    let len = e - s;
                    for blk in offsets.chunks(8) {
                        let mut i = s;
                        while i < e {
                            let g = c[i].1;
                            let mut j = i;
                            while j < e && c[j].1 == g {
                                j += 1;
                            }
                            let b = &bs[g];
                            let st = &starts[b.at..b.at + b.buckets + 1];
                            let (base, n) = (offs[g], offs[g + 1] - offs[g]);
                            unsafe {
                                match variant {
                                    0 => v0(
                                        b,
                                        st,
                                        base,
                                        &all[base..base + n],
                                        blk,
                                        &lt[i..j],
                                        &mut out[i - s..],
                                        len,
                                        none,
                                    ),
                                    1 => v1(
                                        b,
                                        st,
                                        base,
                                        n,
                                        &all,
                                        blk,
                                        &lt[i..j],
                                        &mut out[i - s..],
                                        len,
                                        none,
                                    ),
                                    3 => v3(
                                        b,
                                        st,
                                        base,
                                        &all[base..base + n],
                                        blk,
                                        &lt[i..j],
                                        &mut out[i - s..],
                                        len,
                                        none,
                                        &mut buf,
                                    ),
                                    4 => v4(
                                        b,
                                        st,
                                        base,
                                        &all[base..base + n],
                                        blk,
                                        &lt[i..j],
                                        &mut out[i - s..],
                                        len,
                                        none,
                                    ),
                                    2 => v2(
                                        b,
                                        st,
                                        base,
                                        n,
                                        &all,
                                        blk,
                                        &lt[i..j],
                                        &mut out[i - s..],
                                        len,
                                        none,
                                    ),
                                    6 => v6(
                                        b,
                                        st,
                                        base,
                                        &all[base..base + n],
                                        blk,
                                        &lt[i..j],
                                        &mut out[i - s..],
                                        len,
                                        none,
                                    ),
                                    7 => {
                                        v7(
                                            b,
                                            st,
                                            base,
                                            n,
                                            &all,
                                            blk,
                                            &lt[i..j],
                                            &mut out[i - s..],
                                            len,
                                            none,
                                        );
                                    }
                                    8 => v8(
                                        b,
                                        st,
                                        base,
                                        &all[base..base + n],
                                        blk,
                                        &lt[i..j],
                                        &mut out[i - s..],
                                        len,
                                        none,
                                        &vals,
                                        &mut vbuf[i - s..],
                                    ),
                                    9 => v9(
                                        b,
                                        st,
                                        base,
                                        &all[base..base + n],
                                        blk,
                                        &lt[i..j],
                                        &mut out[i - s..],
                                        len,
                                        none,
                                    ),
                                    v => panic!("no variant {v}"),
                                }
                            }
                            i = j;
                        }
                        for kk in 0..blk.len() {
                            let at = &out[kk * len..][..len];
                            match gmode {
                                1 => {
                                    for (o, &p) in gbuf.iter_mut().zip(at) {
                                        *o = vals[p as usize];
                                    }
                                }
                                2 => {
                                    for (i, (o, &p)) in
                                        gbuf.iter_mut().zip(at).enumerate()
                                    {
                                        if let Some(&q) = at.get(i + 16) {
                                            unsafe {
                                                _mm_prefetch::<_MM_HINT_T0>(
                                                    vals.as_ptr().add(q as usize).cast(),
                                                );
                                            }
                                        }
                                        *o = vals[p as usize];
                                    }
                                }
                                _ => {}
                            }
                            // The positions' checksum (every variant must agree) and,
                            // with G=1, one gathered value.
                            sum = sum
                                .wrapping_add(at.iter().map(|&x| x as u64).sum::<u64>());
                            sum = sum.wrapping_add(gbuf[len / 2] as u64);
                        }
                    }
                }
            }
            let el = t.elapsed().as_secs_f64();
            if el < best[variant] {
                best[variant] = el;
            }
            if round == 0 {
                println!("v{variant} sum {sum}");
            }
        }
    }
    for &v in &vs {
        println!("v{v} rpb {rpb}: best {:.3}", best[v]);
    }
}
