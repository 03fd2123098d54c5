//! What one `approx_percentile` call computes: how a value becomes a key
//! (with QuestDB's errors), and how a group's counts become its answer.

use super::layout::{HIGHEST_ALLOWED_DOUBLE, Layout, count_at_percentile, java_double};
use super::slots::Slots;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result, internal_err};

/// Which HdrHistogram QuestDB uses for the input type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `LONG`/`INT` (and unsigned) input: the integer histogram.
    Int,
    /// `DOUBLE`/`FLOAT` input: `DoubleHistogram`.
    Double,
}

/// The constant arguments of one call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spec {
    /// Bucket geometry for the precision.
    pub layout: Layout,
    /// Integer or double histogram.
    pub kind: Kind,
    /// The percentiles, each in `[0, 1]`.
    pub ps: Vec<f64>,
    /// Whether the result is a list (the array form).
    pub list: bool,
}

impl Spec {
    /// The call at `precision` (0..=5) over values read as `value` (the
    /// integer histogram for integers, `DoubleHistogram` otherwise).
    pub fn new(precision: u8, value: &DataType, ps: Vec<f64>, list: bool) -> Self {
        let kind = match value {
            DataType::Float64 => Kind::Double,
            _ => Kind::Int,
        };
        Self {
            layout: Layout::new(precision),
            kind,
            ps,
            list,
        }
    }
}

/// The binary exponents of the positive doubles a group holds, as
/// `(lowest, highest)`; empty while `lowest > highest`.
pub(crate) type ExpRange = (i16, i16);

/// The range of a group that holds no positive double.
pub(crate) const NO_RANGE: ExpRange = (i16::MAX, i16::MIN);

fn range_of(r: ExpRange) -> Option<(i32, i32)> {
    (r.0 <= r.1).then_some((r.0 as i32, r.1 as i32))
}

/// The integer histogram's error for a negative value.
pub(crate) fn negative_int_error() -> DataFusionError {
    DataFusionError::Execution("Histogram recorded value cannot be negative.".into())
}

/// `DoubleHistogram`'s error for a value it cannot cover, as QuestDB words it.
fn out_of_bounds(
    layout: &Layout,
    value: f64,
    range: ExpRange,
    cause: &str,
) -> DataFusionError {
    let (lo, hi) = layout.covered_range(range_of(range));
    let mut msg = format!(
        "The value {} is out of bounds for histogram, current covered range [{}, {}) \
         cannot be extended any further.\nCaused by: {cause}\
         \nHint: Try normalizing your values to fit into the covered range",
        java_double(value),
        java_double(lo),
        java_double(hi)
    );
    if layout.precision > 0 {
        msg.push_str(
            "\nOr lower the histogram precision (for example, use approx_median(x, 0))",
        );
    }
    DataFusionError::Execution(msg)
}

/// The key of a finite double for a group whose positive values so far have
/// exponents `range`, widening `range`; QuestDB's error when the group's
/// `DoubleHistogram` could not take it.
#[inline]
pub(crate) fn double_key(layout: &Layout, v: f64, range: &mut ExpRange) -> Result<u32> {
    if v <= 0.0 {
        if v == 0.0 {
            return Ok(0);
        }
        return Err(out_of_bounds(
            layout,
            v,
            *range,
            "Negative values cannot be recorded",
        ));
    }
    let e = ((v.to_bits() >> 52) as i32 - 1023) as i16;
    if e < range.0 || e > range.1 {
        widen(layout, v, e, range)?;
    }
    Ok(layout.double_key(v))
}

/// The slow path of [`double_key`]: a value outside the group's exponents.
#[cold]
fn widen(layout: &Layout, v: f64, e: i16, range: &mut ExpRange) -> Result<()> {
    if v > HIGHEST_ALLOWED_DOUBLE {
        return Err(out_of_bounds(
            layout,
            v,
            *range,
            &format!(
                "Values above {} cannot be recorded",
                java_double(HIGHEST_ALLOWED_DOUBLE)
            ),
        ));
    }
    let (lo, hi) = match range_of(*range) {
        None => (e, e),
        Some(_) => (range.0.min(e), range.1.max(e)),
    };
    if !layout.double_range_fits(lo as i32, hi as i32) {
        let shift = if e > range.1 && range.0 <= range.1 {
            "Operation would underflow and lose precision of already recorded value counts"
        } else {
            "Operation would overflow, would discard recorded value counts"
        };
        let cause = format!(
            "Cannot resize histogram covered range beyond (1L << 63) / (1L << {}) - 1.\
             \nCaused by: {shift}",
            layout.m - 1
        );
        return Err(out_of_bounds(layout, v, *range, &cause));
    }
    *range = (lo, hi);
    Ok(())
}

/// Widens `range` by the keys of a merged partial state; the error a
/// `DoubleHistogram` recording those values would have raised.
pub(crate) fn merge_double_key(
    layout: &Layout,
    key: u32,
    range: &mut ExpRange,
) -> Result<()> {
    if key == 0 {
        return Ok(());
    }
    let e = layout.key_exponent(key) as i16;
    if e < range.0 || e > range.1 {
        // The lowest value of the key's bucket stands for the value.
        let v = f64::from_bits((key as u64) << (53 - layout.m));
        widen(layout, v, e, range)?;
    }
    Ok(())
}

/// Widens `range` by another group's exponents `theirs` (a partition's
/// histogram of the same group); the error a `DoubleHistogram` recording
/// both groups' values would have raised.
pub(crate) fn merge_range(
    layout: &Layout,
    range: &mut ExpRange,
    theirs: ExpRange,
) -> Result<()> {
    for e in [theirs.0, theirs.1] {
        if range_of(theirs).is_some() && (e < range.0 || e > range.1) {
            // The lowest value of the exponent stands for the values.
            widen(layout, 2f64.powi(e as i32), e, range)?;
        }
    }
    Ok(())
}

/// Decodes a partial state into `pairs` (ascending keys), widening `range`
/// for double input (QuestDB's error where the merged range is too wide).
pub(crate) fn decode_state(
    spec: &Spec,
    bytes: &[u8],
    range: &mut ExpRange,
    pairs: &mut Vec<(u32, u64)>,
) -> Result<()> {
    pairs.clear();
    let double = spec.kind == Kind::Double;
    let mut err = Ok(());
    let ok = Slots::decode(bytes, |k, c| {
        if double && err.is_ok() {
            err = merge_double_key(&spec.layout, k, range);
        }
        pairs.push((k, c));
    });
    err?;
    if ok.is_none() {
        return internal_err!("corrupt approx_percentile state");
    }
    Ok(())
}

/// The answers for one group: one per percentile of `spec`, `None` for a
/// group without values.
pub(crate) fn evaluate(spec: &Spec, slots: &mut Slots, out: &mut Vec<Option<f64>>) {
    if let Some(keys) = slots.only_buffered() {
        return evaluate_keys(spec, keys, out);
    }
    let n = slots.total();
    let mut first_positive = None;
    slots.walk(|k, _| {
        first_positive = (k != 0).then_some(k);
        first_positive.is_none()
    });
    if n == 0 {
        out.extend(spec.ps.iter().map(|_| None));
        return;
    }
    let value = answer(spec, first_positive);
    // One walk for every percentile, in ascending order of target count.
    let targets = targets(spec, n);
    let counts: Vec<u64> = targets.iter().map(|t| t.0).collect();
    let start = out.len();
    out.extend(spec.ps.iter().map(|_| None));
    slots.find_ranks(&counts, |j, k| {
        let i = targets[j].1;
        out[start + i] = Some(value(k, i));
    });
}

/// [`evaluate`] for a group that is a list of keys, one per value: each
/// target rank is selected (`select_nth_unstable`, linear) instead of
/// sorting the keys. At many groups most groups are such lists.
pub(crate) fn evaluate_keys(spec: &Spec, keys: &mut [u32], out: &mut Vec<Option<f64>>) {
    if keys.is_empty() {
        out.extend(spec.ps.iter().map(|_| None));
        return;
    }
    let first_positive = keys.iter().copied().filter(|&k| k != 0).min();
    let value = answer(spec, first_positive);
    let start = out.len();
    out.extend(spec.ps.iter().map(|_| None));
    // Ascending targets: each selection leaves the keys after its rank at
    // least as large, so the next one searches only those.
    let mut lo = 0;
    for (target, i) in targets(spec, keys.len() as u64) {
        // `count_at_percentile` is in 1..=n.
        let at = target as usize - 1;
        let (_, k, _) = keys[lo..].select_nth_unstable(at - lo);
        out[start + i] = Some(value(*k, i));
        lo = at;
    }
}

/// `(count, percentile index)` of each percentile among `n` values, in
/// ascending order of count.
fn targets(spec: &Spec, n: u64) -> Vec<(u64, usize)> {
    let mut targets: Vec<(u64, usize)> = spec
        .ps
        .iter()
        .enumerate()
        .map(|(i, p)| (count_at_percentile(p * 100.0, n), i))
        .collect();
    targets.sort_unstable();
    targets
}

/// The value percentile `i` answers when its count falls in key `k`, for a
/// group whose lowest positive key is `first_positive`.
fn answer(spec: &Spec, first_positive: Option<u32>) -> impl Fn(u32, usize) -> f64 {
    let layout = spec.layout;
    let e_min = first_positive.map_or(800, |k| layout.key_exponent(k));
    move |k, i| {
        let lowest = spec.ps[i] * 100.0 == 0.0;
        match spec.kind {
            Kind::Int => layout.int_value(k, lowest),
            Kind::Double => layout.double_value(k, e_min, lowest),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    fn answer(kind: Kind, precision: u8, p: f64, values: &[f64]) -> Result<Option<f64>> {
        let spec = Spec {
            layout: Layout::new(precision),
            kind,
            ps: vec![p],
            list: false,
        };
        let mut slots = Slots::default();
        let mut range = NO_RANGE;
        for &v in values {
            let k = match kind {
                Kind::Int => spec.layout.int_key(v as u64),
                Kind::Double => double_key(&spec.layout, v, &mut range)?,
            };
            slots.add(k);
        }
        let mut out = vec![];
        evaluate(&spec, &mut slots, &mut out);
        Ok(out[0])
    }

    fn seq(n: u32) -> Vec<f64> {
        (1..=n).map(f64::from).collect()
    }

    /// A group of buffered keys (answered by selection) and the same group
    /// counted (answered by a walk) give the same answers.
    #[test]
    fn selection_and_walk_agree() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut next = move || rng.random::<u32>() as u64;
        for case in 0..300 {
            let kind = if case % 2 == 0 {
                Kind::Int
            } else {
                Kind::Double
            };
            let spec = Spec {
                layout: Layout::new((case % 4) as u8),
                kind,
                ps: vec![0.99, 0.0, 0.5, 1.0, 0.5, (next() % 1000) as f64 / 1000.0],
                list: true,
            };
            let spread = [3, 50, 5000, 1 << 30][case % 4];
            let mut slots = Slots::default();
            for _ in 0..next() % 900 {
                let v = next() % spread;
                let k = match kind {
                    Kind::Int => spec.layout.int_key(v),
                    Kind::Double => {
                        double_key(&spec.layout, v as f64 / 8.0, &mut NO_RANGE.clone())
                            .unwrap()
                    }
                };
                slots.add(k);
            }
            let (mut by_selection, mut by_walk) = (vec![], vec![]);
            let mut counted = slots.clone().counted();
            evaluate(&spec, &mut slots, &mut by_selection);
            evaluate(&spec, &mut counted, &mut by_walk);
            assert_eq!(by_selection, by_walk, "case {case}");
        }
    }

    #[test]
    fn questdb_long_cases() {
        let a = |pr, p, n| answer(Kind::Int, pr, p, &seq(n)).unwrap().unwrap();
        assert_eq!(a(1, 0.5, 100), 51.0);
        assert_eq!(a(1, 1.0, 100), 103.0);
        assert_eq!(a(1, 0.0, 100), 1.0);
        assert_eq!(a(3, 0.07, 100), 7.0);
        let want = [511.0, 501.0, 500.0, 500.0, 500.0];
        for (pr, w) in (1..=5).zip(want) {
            assert_eq!(a(pr, 0.5, 1000), w);
        }
    }

    #[test]
    fn questdb_double_cases() {
        let a = |pr, p, n| answer(Kind::Double, pr, p, &seq(n)).unwrap().unwrap();
        assert_eq!(a(1, 0.5, 100), 51.9375);
        assert_eq!(a(1, 1.0, 100), 103.9375);
        assert_eq!(a(1, 0.0, 100), 1.0);
        let want = [
            511.9375,
            501.9921875,
            500.2490234375,
            500.01556396484375,
            500.00194549560547,
        ];
        for (pr, w) in (1..=5).zip(want) {
            assert_eq!(a(pr, 0.5, 1000), w);
        }
        let want = [
            51.9375,
            50.2421875,
            50.0302734375,
            50.00189208984375,
            50.00023651123047,
        ];
        for (pr, w) in (1..=5).zip(want) {
            assert_eq!(a(pr, 0.5, 100), w);
        }
        assert_eq!(
            answer(Kind::Double, 1, 0.5, &[5.0; 100]).unwrap(),
            Some(5.0)
        );
        assert_eq!(
            answer(Kind::Double, 1, 0.5, &[0.0, 0.0, 5.0]).unwrap(),
            Some(0.0)
        );
        assert_eq!(answer(Kind::Double, 1, 0.5, &[]).unwrap(), None);
    }

    #[test]
    fn double_errors_word_it_like_questdb() {
        let e = answer(Kind::Double, 1, 0.5, &[1.0, -1.0])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "The value -1.0 is out of bounds for histogram, current covered range \
                 [1.0, 2048.0) cannot be extended any further.\nCaused by: Negative values \
                 cannot be recorded\nHint: Try normalizing your values to fit into the \
                 covered range\nOr lower the histogram precision (for example, use \
                 approx_median(x, 0))"
            ),
            "{e}"
        );
        let e = answer(Kind::Double, 0, 0.5, &[-1.0])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("[6.668014432879854E240, 1.3656093558537942E244)"),
            "{e}"
        );
        assert!(!e.contains("lower the histogram precision"), "{e}");
        // The ranges measured with the Java library configured like QuestDB.
        for (pr, lo, hi, fails) in [
            (1, 1e-10, 1e10, true),
            (3, 1e-10, 1e10, true),
            (5, 1e-10, 1e10, true),
            (1, 1e-6, 1e9, false),
            (3, 1e-6, 1e9, false),
            (5, 1e-6, 1e9, true),
            (1, 1e-300, 1e300, true),
        ] {
            let r = answer(Kind::Double, pr, 0.5, &[lo, hi]);
            assert_eq!(r.is_err(), fails, "precision {pr} [{lo}, {hi}]");
            if let Err(e) = r {
                assert!(
                    e.to_string()
                        .contains("Cannot resize histogram covered range")
                );
            }
        }
    }
}
