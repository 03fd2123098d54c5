//! Keeping results: `COPY (query) TO 'file'` and `--output FILE`, read back.

use crate::{EXAMPLE_JOIN, example_tables, run};
use std::path::Path;

/// The example join's result as CSV, printed.
fn expected() -> String {
    let tables = example_tables();
    let mut args: Vec<&str> = tables.iter().map(String::as_str).collect();
    args.extend(["--format", "csv", "-c", EXAMPLE_JOIN]);
    let (ok, out, err) = run(&args);
    assert!(ok, "{err}");
    out
}

/// `file` read back through the CLI as a table, as CSV.
fn read_back(file: &Path) -> String {
    let (ok, out, err) = run(&[
        "-t",
        &format!("kept={}", file.display()),
        "--format",
        "csv",
        "-c",
        "SELECT * FROM kept ORDER BY ts",
    ]);
    assert!(ok, "{err}");
    out
}

fn with_tables(extra: &[&str]) -> (bool, String, String) {
    let tables = example_tables();
    let mut args: Vec<&str> = tables.iter().map(String::as_str).collect();
    args.extend(extra);
    run(&args)
}

#[test]
fn copy_to_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let expected = expected();
    for ext in ["parquet", "csv", "json"] {
        let file = dir.path().join(format!("copy.{ext}"));
        let sql = format!("COPY ({EXAMPLE_JOIN}) TO '{}'", file.display());
        let (ok, out, err) = with_tables(&["--format", "csv", "-c", &sql]);
        assert!(ok, "{ext}: {err}");
        // COPY answers the number of rows it wrote.
        assert_eq!(out, "count\n5\n", "{ext}");
        match ext {
            "json" => {
                let text = std::fs::read_to_string(&file).unwrap();
                assert_eq!(text.lines().count(), 5, "{text}");
                assert!(
                    text.starts_with("{\"ts\":\"2024-01-02T09:30:00.100\""),
                    "{text}"
                );
            }
            _ => assert_eq!(read_back(&file), expected, "{ext}"),
        }
    }
}

#[test]
fn output_writes_the_last_result_by_extension() {
    let dir = tempfile::tempdir().unwrap();
    let expected = expected();
    for ext in ["parquet", "csv", "json"] {
        let file = dir.path().join("sub").join(format!("out.{ext}"));
        // An existing file is replaced.
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "stale").unwrap();
        let script = format!("SELECT 1 AS printed; {EXAMPLE_JOIN}");
        let (ok, out, err) = with_tables(&[
            "--format",
            "csv",
            "--timing",
            "--output",
            file.to_str().unwrap(),
            "-c",
            &script,
        ]);
        assert!(ok, "{ext}: {err}");
        // Earlier results still print; the last one goes to the file.
        assert_eq!(out, "printed\n1\n", "{ext}");
        assert!(err.contains("5 row(s) in"), "{err}");
        match ext {
            "json" => {
                let text = std::fs::read_to_string(&file).unwrap();
                assert_eq!(text.lines().count(), 5, "{text}");
            }
            _ => assert_eq!(read_back(&file), expected, "{ext}"),
        }
    }
}

#[test]
fn output_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("out.xlsx");
    let none = dir.path().join("none.csv");
    let cases: [(Vec<&str>, &str); 3] = [
        (
            vec!["-o", bad.to_str().unwrap(), "-c", "SELECT 1"],
            "name a .parquet, .csv or .json file",
        ),
        (vec!["-o", none.to_str().unwrap()], "needs the SQL to run"),
        (
            vec![
                "-o",
                none.to_str().unwrap(),
                "-c",
                "CREATE TABLE x AS VALUES (1)",
            ],
            "returns no result",
        ),
    ];
    for (args, message) in cases {
        let (ok, _, err) = run(&args);
        assert!(!ok, "{args:?}");
        assert!(err.starts_with("Error: ") && err.contains(message), "{err}");
    }
    assert!(!bad.exists() && !none.exists());
}

/// `--primary-key` declares a Parquet table's key: a join that reads only
/// the key becomes a semi join; a missing column or table is a clear error.
#[test]
fn primary_keys_make_key_only_joins_semi_joins() {
    let dir = tempfile::tempdir().unwrap();
    let (d, f) = (dir.path().join("d.parquet"), dir.path().join("f.parquet"));
    let sql = format!(
        "COPY (SELECT value AS k, value % 5 AS a FROM generate_series(1, 100)) TO '{}'; \
         COPY (SELECT value % 100 + 1 AS k, value AS x FROM generate_series(1, 1000)) TO '{}'",
        d.display(),
        f.display()
    );
    let (ok, _, err) = run(&["-c", &sql]);
    assert!(ok, "{err}");
    let tables = [format!("d={}", d.display()), format!("f={}", f.display())];
    let query = "SELECT count(*) AS n FROM f JOIN d ON f.k = d.k WHERE d.a = 1";
    let explain = format!("EXPLAIN {query}");
    let args = |pk: &[&'static str], sql: &str| {
        let mut a: Vec<String> = vec![
            "-t".into(),
            tables[0].clone(),
            "-t".into(),
            tables[1].clone(),
        ];
        a.extend(pk.iter().map(|s| s.to_string()));
        a.extend([
            "--format".into(),
            "csv".into(),
            "-c".into(),
            sql.to_string(),
        ]);
        a
    };
    let call = |a: Vec<String>| run(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let (ok, plan, err) = call(args(&["--primary-key", "d=k"], &explain));
    assert!(ok, "{err}");
    assert!(plan.contains("Semi"), "{plan}");
    let (ok, plan, err) = call(args(&[], &explain));
    assert!(ok, "{err}");
    assert!(!plan.contains("Semi"), "{plan}");
    let (ok, out, err) = call(args(&["--primary-key", "d=k"], query));
    assert!(ok, "{err}");
    assert_eq!(out, "n\n200\n");
    let (ok, _, err) = call(args(&["--primary-key", "d=nope"], query));
    assert!(!ok && err.contains("table d has no column nope"), "{err}");
    let (ok, _, err) = call(args(&["--primary-key", "e=k"], query));
    assert!(!ok && err.contains("no --table named e"), "{err}");
}
