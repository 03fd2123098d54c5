//! A short run of the SQL front-end fuzzer (`tsjoin-bench fuzz --minutes N`
//! runs it long): every generated input returns Ok or an error, never
//! panics, hangs or overflows the stack.

use datafusion_tsjoin::testing::Rng;
use datafusion_tsjoin::testing::fuzz::{Outcome, check, input};
use std::time::Duration;

#[test]
fn fuzzed_sql_never_panics_or_hangs() {
    let cases = crate::support::case_count("TSJOIN_FUZZ_CASES", 300);
    let mut rng = Rng::new(crate::support::case_count("TSJOIN_FUZZ_SEED", 28));
    let (mut ok, mut errors, mut internal) = (0, 0, vec![]);
    for case in 0..cases {
        let sql = input(&mut rng);
        if std::env::var_os("TSJOIN_FUZZ_VERBOSE").is_some() {
            eprintln!("case {case}: {}", sql.chars().take(300).collect::<String>());
        }
        // Debug builds have big frames: 16 MiB here is about 2 MiB in release
        // (`tsjoin-bench fuzz` checks the tokio worker's 2 MiB there).
        match check(
            &sql,
            1 + (case % 3) as usize,
            16 << 20,
            Duration::from_secs(60),
        ) {
            Outcome::Ok => ok += 1,
            Outcome::Error(_) => errors += 1,
            Outcome::Internal(e) => {
                internal.push((sql.chars().take(500).collect::<String>(), e))
            }
            bad => panic!(
                "case {case}: {bad:?}\n{}",
                sql.chars().take(500).collect::<String>()
            ),
        }
    }
    eprintln!(
        "fuzz: {cases} cases, {ok} ok, {errors} errors, {} internal",
        internal.len()
    );
    assert!(ok > 0 && errors > 0, "{ok} ok, {errors} errors");
    assert!(internal.is_empty(), "internal errors: {internal:#?}");
}

/// Found by `tsjoin-bench fuzz` (release, 2 MiB stack): `SELECT 1 + 1 + …`
/// of 10,000 terms overflowed the stack in DataFusion's planner (a plain
/// recursive `Expr::clone`), aborting the process. Chains up to the limit
/// (1,000 levels) answer, longer ones are a planning error.
#[test]
fn long_operator_chains_answer_or_are_a_clear_error() {
    let sum = |n: usize| format!("SELECT {}", vec!["1"; n].join(" + "));
    let ors = |n: usize| {
        let terms: Vec<String> = (0..n).map(|i| format!("price = {i}")).collect();
        format!("SELECT count(*) FROM t WHERE {}", terms.join(" OR "))
    };
    for sql in [sum(900), ors(900)] {
        let got = check(&sql, 2, 16 << 20, Duration::from_secs(60));
        assert!(matches!(got, Outcome::Ok), "{got:?}");
    }
    for sql in [sum(10_000), ors(5_000)] {
        match check(&sql, 2, 16 << 20, Duration::from_secs(60)) {
            Outcome::Error(e) => assert!(e.contains("nested too deeply"), "{e}"),
            other => panic!("{other:?}"),
        }
    }
}
