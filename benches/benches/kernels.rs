//! Kernel micro-benchmarks (`cargo bench -p tsjoin-bench --bench kernels`):
//! AVX2 vs the portable kernels vs a sequential loop vs arrow's aggregate
//! kernels on slices of 1 to 10,000 values, and sliding windows scanned by
//! the kernels vs read from the block structures.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use datafusion::arrow::array::Float64Array;
use datafusion::arrow::compute::{max, min, sum};
use datafusion_tsjoin::bench::KernelSet;
use datafusion_tsjoin::bench::block_sums::BlockSums;
use datafusion_tsjoin::bench::block_table::{BlockMinMax, Extreme};
use std::hint::black_box;

const LENGTHS: [usize; 7] = [1, 8, 64, 256, 1024, 4096, 10_000];

fn data(n: usize) -> Vec<f64> {
    let mut x = 0x1234_5678u64;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 11) as f64 / (1u64 << 53) as f64 * 100.0
        })
        .collect()
}

fn kernels(c: &mut Criterion) {
    let mut sets = vec![KernelSet::scalar()];
    if KernelSet::detect() != KernelSet::scalar() {
        sets.push(KernelSet::detect());
    }
    for (name, op) in [("sum", 0), ("min", 1), ("max", 2)] {
        let mut group = c.benchmark_group(format!("f64_{name}"));
        for n in LENGTHS {
            let v = data(n);
            let arrow = Float64Array::from(v.clone());
            group.throughput(Throughput::Elements(n as u64));
            for &k in &sets {
                group.bench_with_input(BenchmarkId::new(k.name(), n), &v, |b, v| {
                    b.iter(|| match op {
                        0 => black_box(k.sum_f64(black_box(v))),
                        1 => black_box(k.min_f64(black_box(v)).unwrap_or_default()),
                        _ => black_box(k.max_f64(black_box(v)).unwrap_or_default()),
                    })
                });
            }
            // A plain left-to-right loop: what a strictly sequential scalar
            // reduction costs (the compiler cannot reorder float adds, and
            // the fold's dependency chain stops it from vectorizing min/max).
            group.bench_with_input(BenchmarkId::new("sequential", n), &v, |b, v| {
                b.iter(|| match op {
                    0 => black_box(black_box(v).iter().sum::<f64>()),
                    1 => black_box(
                        black_box(v)
                            .iter()
                            .fold(f64::INFINITY, |a, &x| if x < a { x } else { a }),
                    ),
                    _ => black_box(
                        black_box(v)
                            .iter()
                            .fold(f64::NEG_INFINITY, |a, &x| if x > a { x } else { a }),
                    ),
                })
            });
            group.bench_with_input(BenchmarkId::new("arrow", n), &arrow, |b, a| {
                b.iter(|| match op {
                    0 => black_box(sum(black_box(a)).unwrap_or_default()),
                    1 => black_box(min(black_box(a)).unwrap_or_default()),
                    _ => black_box(max(black_box(a)).unwrap_or_default()),
                })
            });
        }
        group.finish();
    }
}

/// Sliding windows as the fast path sees them: 1000 windows of `len`
/// values moving forward 7 positions at a time through 1M values, each
/// summed (or min/max-ed) by scanning it with the kernel or by the block
/// structure. Where the lines cross sets the `..._min` thresholds.
fn windows(c: &mut Criterion) {
    let k = KernelSet::detect();
    let v = data(1 << 20);
    let sums = BlockSums::new(&v, k);
    let partial = |s: usize, e: usize| {
        k.min_max_f64(&v[s..e])
            .map_or(f64::IDENTITY, |(a, b)| [a, b])
    };
    let table = BlockMinMax::new(v.len(), v.len(), partial);
    let starts: Vec<usize> = (0..1000)
        .map(|i| (i * 7919 * 64) % ((1 << 20) - 20_000) + i * 7)
        .collect();
    for (name, blocks) in [("window_sum", true), ("window_min_max", false)] {
        let mut group = c.benchmark_group(name);
        group.throughput(Throughput::Elements(starts.len() as u64));
        for len in [16usize, 32, 64, 128, 256, 512, 1024, 4096] {
            group.bench_with_input(BenchmarkId::new("kernel", len), &len, |b, &len| {
                b.iter(|| {
                    let mut acc = 0.0;
                    for &s in &starts {
                        acc += if blocks {
                            k.sum_f64(&v[s..s + len])
                        } else {
                            partial(s, s + len)[1]
                        };
                    }
                    black_box(acc)
                })
            });
            group.bench_with_input(BenchmarkId::new("blocks", len), &len, |b, &len| {
                b.iter(|| {
                    let mut acc = 0.0;
                    for &s in &starts {
                        acc += if blocks {
                            sums.sum(&v, s, s + len, k)
                        } else {
                            table.query(s, s + len, partial)[1]
                        };
                    }
                    black_box(acc)
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, kernels, windows);
criterion_main!(benches);
