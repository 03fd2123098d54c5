//! A short run of `tsjoin-bench verify` (which runs any number): WINDOW
//! JOIN and ASOF JOIN against the naive references and the inline GROUP BY
//! against DataFusion's aggregate, on random shapes, some under a memory limit.

use datafusion_tsjoin::testing::verify::{Kind, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn differential_cases_match() {
    let cases = crate::support::case_count("TSJOIN_VERIFY_CASES", 300);
    let mut failures = vec![];
    for seed in 0..cases {
        let kind = [Kind::WindowJoin, Kind::GroupBy, Kind::Asof][seed as usize % 3];
        if let Err(m) = run(kind, seed).await {
            failures.push(format!("{kind:?} seed {seed}: {}\n{}", m.what, m.script));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
