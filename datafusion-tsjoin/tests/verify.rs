//! A short run of `tsjoin-bench verify` (which runs any number): WINDOW
//! JOIN, ASOF JOIN and HORIZON JOIN against the naive references,
//! `approx_percentile` against its reference (bit for bit) and the inline
//! GROUP BY against DataFusion's aggregate, on random shapes, some under a
//! memory limit.

use datafusion_tsjoin::testing::verify::{Kind, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn differential_cases_match() {
    let cases = crate::support::case_count("TSJOIN_VERIFY_CASES", 400);
    let mut failures = vec![];
    for seed in 0..cases {
        let kind = Kind::ALL[seed as usize % Kind::ALL.len()];
        if let Err(m) = run(kind, seed).await {
            failures.push(format!("{kind:?} seed {seed}: {}\n{}", m.what, m.script));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
