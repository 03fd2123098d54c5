//! Small helpers that split work over scoped threads.

/// Runs `f` on `threads` runs of whole groups in parallel, each with its
/// slices of `a` and `b` and its offsets rebased to 0.
pub(crate) fn for_group_ranges<A: Send, B: Send>(
    a: &mut [A],
    b: &mut [B],
    offsets: &[u32],
    threads: usize,
    f: impl Fn(&mut [A], &mut [B], &[u32]) + Sync,
) {
    let total = a.len();
    let mut cuts = vec![0usize];
    for k in 1..threads {
        let target = (total * k / threads) as u32;
        let g = offsets.partition_point(|&o| o < target).min(offsets.len() - 1);
        if g > *cuts.last().expect("non-empty") {
            cuts.push(g);
        }
    }
    if *cuts.last().expect("non-empty") < offsets.len() - 1 {
        cuts.push(offsets.len() - 1);
    }
    let f = &f;
    std::thread::scope(|scope| {
        let (mut a, mut b) = (a, b);
        for w in cuts.windows(2) {
            let (g0, g1) = (w[0], w[1]);
            let len = (offsets[g1] - offsets[g0]) as usize;
            let (x, rest_a) = std::mem::take(&mut a).split_at_mut(len);
            let (y, rest_b) = std::mem::take(&mut b).split_at_mut(len);
            (a, b) = (rest_a, rest_b);
            let base = offsets[g0];
            let local: Vec<u32> = offsets[g0..=g1].iter().map(|&x| x - base).collect();
            scope.spawn(move || f(x, y, &local));
        }
    });
}

