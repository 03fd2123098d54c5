//! What a user reads: errors and EXPLAIN name only what the query wrote,
//! and plans print as indented text.

use crate::{EXAMPLE_JOIN, example_tables, run};

fn with_tables(extra: &[&str]) -> (bool, String, String) {
    let tables = example_tables();
    let mut args: Vec<&str> = tables.iter().map(String::as_str).collect();
    args.extend(extra);
    run(&args)
}

#[test]
fn no_error_shows_internal_names() {
    let from = "FROM trades t WINDOW JOIN prices p ON p.sym = t.symbol \
                RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING";
    let queries = [
        format!("SELECT t.nope, avg(p.bid) {from}"),
        format!("SELECT t.ts, avg(p.nope) {from}"),
        format!("SELECT t.ts, avg(p.bid) AS a {from} ORDER BY nope"),
        format!("SELECT t.ts, count(*) {from} WHERE nope > 1"),
        format!("SELECT t.ts, avg(p.bid) + 'x' {from}"),
        format!("SELECT t.ts, avg(p.bid) {from} GROUP BY t.ts"),
        format!("SELECT t.ts, p.bid {from}"),
        format!("SELECT * FROM (SELECT t.ts, avg(p.bid) {from}) w WHERE nope"),
        format!("SELECT t.ts, avg(p.bid) {from} trailing garbage"),
        format!("COPY (SELECT t.nope, avg(p.bid) {from}) TO '/nonexistent/x.csv'"),
        format!("CREATE VIEW v AS SELECT t.ts, avg(p.nope) {from}"),
        "SELECT 1 FROM trades t WINDOW JOIN prices p ON p.sym = t.symbol".into(),
        "SELECT 1 FROM trades t WINDOW JOIN prices p RANGE BETWEEN".into(),
        "SELECT 1 FROM trades t WINDOW JOIN nowhere p ON (sym) RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW".into(),
    ];
    for sql in &queries {
        let (ok, _, err) = with_tables(&["-c", sql]);
        assert!(!ok, "{sql} should fail");
        assert!(err.starts_with("Error: "), "{sql}: {err}");
        assert!(!err.contains("__tsjoin"), "{sql}: {err}");
    }
    let (_, _, err) = with_tables(&["-c", &queries[0]]);
    assert!(
        err.contains("No field named t.nope") && err.contains("\"avg(p.bid)\""),
        "{err}"
    );
}

#[test]
fn explain_prints_indented_text_with_aggregates_as_written() {
    let (ok, out, err) = with_tables(&["-c", &format!("EXPLAIN {EXAMPLE_JOIN}")]);
    assert!(ok, "{err}");
    assert!(!out.contains("__tsjoin"), "{out}");
    assert!(!out.contains("| plan_type"), "{out}");
    assert!(out.starts_with("logical_plan\n  "), "{out}");
    assert!(out.contains("\nphysical_plan\n  "), "{out}");
    assert!(
        out.contains("aggs=[count(Int64(1)) AS count(*), avg(p.bid)]"),
        "{out}"
    );
    assert!(out.contains("avg(p.bid)"), "{out}");
    // No line is padded to the longest one.
    assert!(out.lines().all(|l| l == l.trim_end()), "{out}");
    // Other formats keep EXPLAIN's rows as data.
    let (ok, csv, _) =
        with_tables(&["--format", "csv", "-c", &format!("EXPLAIN {EXAMPLE_JOIN}")]);
    assert!(ok && csv.starts_with("plan_type,plan\n"), "{csv}");
    // The result's column is named as written.
    let (ok, csv, _) = with_tables(&["--format", "csv", "-c", EXAMPLE_JOIN]);
    assert!(
        ok && csv.starts_with("ts,symbol,quotes,avg(p.bid)\n"),
        "{csv}"
    );
}
