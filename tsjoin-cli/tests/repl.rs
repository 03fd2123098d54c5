//! The interactive shell (fed through a pipe) and its backslash commands.

use crate::{example_tables, run, run_stdin};

fn shell(input: &str) -> (bool, String, String) {
    let tables = example_tables();
    let args: Vec<&str> = tables.iter().map(String::as_str).collect();
    run_stdin(&args, input)
}

#[test]
fn help_lists_every_command() {
    let (ok, out, err) = shell("\\?\n");
    assert!(ok, "{err}");
    for command in ["\\d", "\\d NAME", "\\timing", "\\format", "\\?", "\\q"] {
        assert!(out.contains(command), "{command} missing from:\n{out}");
    }
    let (_, same, _) = shell("\\h\n");
    assert_eq!(same, out);
    // --help lists them too.
    let (ok, help, _) = run(&["--help"]);
    assert!(ok);
    for command in [
        "\\d NAME", "\\timing", "\\format", "\\q", "--output", "COPY",
    ] {
        assert!(
            help.contains(command),
            "{command} missing from --help:\n{help}"
        );
    }
}

#[test]
fn list_and_describe_tables() {
    let (ok, out, err) = shell("\\format csv\n\\d\n\\d trades\n");
    assert!(ok, "{err}");
    assert!(err.is_empty(), "{err}");
    assert!(
        out.contains("name,type\nprices,BASE TABLE\ntrades,BASE TABLE\n"),
        "{out}"
    );
    assert!(
        out.contains("column_name,data_type,is_nullable\nts,"),
        "{out}"
    );
    assert!(out.contains("\nsymbol,Utf8,YES\n"), "{out}");
    let (_, _, err) = shell("\\d nowhere\n");
    assert!(
        err.starts_with("Error: ") && err.contains("nowhere"),
        "{err}"
    );
}

#[test]
fn show_tables_and_describe_are_sql_too() {
    let tables = example_tables();
    let mut args: Vec<&str> = tables.iter().map(String::as_str).collect();
    args.extend(["--format", "csv", "-c", "SHOW TABLES; DESCRIBE prices"]);
    let (ok, out, err) = run(&args);
    assert!(ok, "{err}");
    assert!(out.contains(",public,trades,BASE TABLE\n"), "{out}");
    assert!(out.contains("\nbid,Float64,YES\n"), "{out}");
}

#[test]
fn timing_and_format_switch() {
    let (ok, out, err) = shell(
        "SELECT 1 AS a;\n\\timing\nSELECT 2 AS a;\n\\timing off\n\\format json\nSELECT 3 AS a;\n\\format\n",
    );
    assert!(ok, "{err}");
    assert!(out.contains("| a |"), "{out}");
    assert!(
        out.contains("timing is on") && out.contains("timing is off"),
        "{out}"
    );
    assert_eq!(err.matches("row(s) in").count(), 1, "{err}");
    assert!(out.contains("[{\"a\":3}]"), "{out}");
    assert!(out.trim_end().ends_with("format is json"), "{out}");
}

#[test]
fn quit_stops_reading_and_errors_do_not() {
    let (ok, out, err) = shell(
        "SELECT * FROM nowhere;\n\\bogus\n\\timing maybe\nSELECT\n 42 AS answer;\n\\q\nSELECT 7 AS never;\n",
    );
    assert!(ok, "{err}");
    assert!(out.contains("| 42 "), "{out}");
    assert!(!out.contains("never"), "{out}");
    let errors: Vec<&str> = err.lines().collect();
    assert_eq!(errors.len(), 3, "{err}");
    assert!(errors.iter().all(|e| e.starts_with("Error: ")), "{err}");
    assert!(errors[1].contains("unknown command \\bogus"), "{err}");
    for quit in ["quit\n", "exit;\n", "\\q;\n"] {
        let (ok, out, _) = shell(&format!("{quit}SELECT 7 AS never;\n"));
        assert!(ok && !out.contains("never"), "{quit}: {out}");
    }
}
