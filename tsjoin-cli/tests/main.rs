//! End-to-end tests of the `tsjoin-cli` binary (one test binary: the
//! modules below share it).

mod cluster;
mod files;
mod progress;
mod readme;
mod repl;
mod user_facing;

use std::io::Write;
use std::process::{Command, Stdio};

/// The binary as a user runs it (RUST_BACKTRACE, which makes it print
/// panics it contains, unset).
fn cli() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tsjoin-cli"));
    command.env_remove("RUST_BACKTRACE");
    command
}

fn run(args: &[&str]) -> (bool, String, String) {
    let out = cli().args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs the binary with `input` on stdin (the interactive shell reading a
/// pipe): (success, stdout, stderr).
fn run_stdin(args: &[&str], input: &str) -> (bool, String, String) {
    let mut child = cli()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `--table` arguments for the shipped CSV example.
fn example_tables() -> Vec<String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata");
    vec![
        "-t".into(),
        format!("trades={root}/trades.csv"),
        "-t".into(),
        format!("prices={root}/prices.csv"),
    ]
}

/// A WINDOW JOIN over the shipped example.
const EXAMPLE_JOIN: &str = "SELECT t.ts, t.symbol, count(*) AS quotes, avg(p.bid) \
    FROM trades t WINDOW JOIN prices p ON p.sym = t.symbol \
    RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW ORDER BY t.ts";

#[test]
fn demo_generates_data_and_runs_the_showcase() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (ok, out, err) = run(&["demo", "--dir", d, "--trades", "2000"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("WindowJoinExec: on=[(symbol@1, sym@1)]"),
        "{out}"
    );
    assert!(out.contains("| 2000   |"), "{out}");
    assert!(err.contains("row(s) in"), "{err}");

    // The generated files work as CLI tables, in every output format.
    let trades = format!("trades={d}/trades");
    let prices = format!("prices={d}/prices");
    let sql = "SELECT t.symbol, count(*) AS n FROM trades t WINDOW JOIN prices p ON p.sym = t.symbol \
               RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING EXCLUDE PREVAILING \
               ORDER BY t.ts LIMIT 3";
    let (ok, csv, err) = run(&[
        "-t",
        &trades,
        "-t",
        &prices,
        "--timestamp",
        "trades=ts",
        "--format",
        "csv",
        "-c",
        sql,
    ]);
    assert!(ok, "{err}");
    assert_eq!(csv.lines().next(), Some("symbol,n"));
    assert_eq!(csv.lines().count(), 4);
    let (ok, json, err) =
        run(&["-t", &trades, "-t", &prices, "--format", "json", "-c", sql]);
    assert!(ok, "{err}");
    assert!(json.trim_start().starts_with("[{\"symbol\":"), "{json}");
}

#[test]
fn sql_file_and_csv_tables() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("q.csv");
    std::fs::write(
        &csv,
        "ts,sym,v\n2024-01-01T00:00:00,A,1\n2024-01-01T00:00:01,A,2\n",
    )
    .unwrap();
    let file = dir.path().join("q.sql");
    std::fs::write(
        &file,
        "SELECT a.v, sum(b.v) AS s FROM q a WINDOW JOIN q b ON (sym) \
         RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW ORDER BY a.v;",
    )
    .unwrap();
    let t = format!("q={}", csv.display());
    let (ok, out, err) =
        run(&["-t", &t, "-f", file.to_str().unwrap(), "--format", "csv"]);
    assert!(ok, "{err}");
    assert_eq!(out, "v,s\n1,1\n2,3\n");
}

#[test]
fn failures_print_one_line_and_exit_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.parquet");
    std::fs::write(&bad, b"this is not parquet").unwrap();
    // Magic at both ends and a footer length far past the end: the Parquet
    // reader panics on this one; registration names it, and a table made
    // with SQL (no pre-check) reports the panic as an error.
    let garbage = dir.path().join("garbage.parquet");
    std::fs::write(&garbage, b"PAR1garbagePAR1").unwrap();
    let external = format!(
        "CREATE EXTERNAL TABLE g STORED AS PARQUET LOCATION '{}'",
        garbage.display()
    );
    let cases = [
        vec!["-t".into(), format!("x={}", dir.path().display()), "-c".into(), "SELECT 1".into()],
        vec!["-c".into(), external],
        vec!["-t".to_string(), "x=/no/such/path.parquet".into(), "-c".into(), "SELECT 1".into()],
        vec!["-t".into(), format!("x={}", bad.display()), "-c".into(), "SELECT * FROM x".into()],
        vec!["-c".into(), "SELECT * FROM nowhere".into()],
        vec!["-c".into(), "SELECT 1 FROM (SELECT 1) a WINDOW JOIN b RANGE BETWEEN 1 week PRECEDING AND CURRENT ROW".into()],
        vec!["-t".into(), "missing-equals".into(), "-c".into(), "SELECT 1".into()],
    ];
    for args in cases {
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let (ok, _, err) = run(&args);
        assert!(!ok, "{args:?} should fail");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("Error: "), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let (_, _, err) = run(&["-t", &format!("x={}", garbage.display()), "-c", "SELECT 1"]);
    assert!(
        err.contains("corrupt Parquet file") && err.contains("15 bytes"),
        "{err}"
    );
}

#[test]
fn shipped_csv_example() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata");
    let (ok, out, err) = run(&[
        "-t",
        &format!("trades={root}/trades.csv"),
        "-t",
        &format!("prices={root}/prices.csv"),
        "--format",
        "csv",
        "-c",
        "SELECT t.ts, t.symbol, count(*) AS quotes, max(p.ask) AS max_ask FROM trades t \
         WINDOW JOIN prices p ON p.sym = t.symbol RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW \
         ORDER BY t.ts",
    ]);
    assert!(ok, "{err}");
    // 09:30:00.1 AAPL: nothing in [59.1, 00.1], the prevailing 59.0 quote counts;
    // 09:30:01.2 AAPL: 00.3 and 01.0 in the window plus the prevailing 59.0.
    assert_eq!(
        out,
        "ts,symbol,quotes,max_ask\n\
         2024-01-02T09:30:00.100,AAPL,1,185.1\n\
         2024-01-02T09:30:00.450,MSFT,1,370.3\n\
         2024-01-02T09:30:01.200,AAPL,3,185.2\n\
         2024-01-02T09:30:02.900,AAPL,2,185.2\n\
         2024-01-02T09:30:03,MSFT,1,370.25\n"
    );
}

/// Every statement of a script runs and prints its result, in order; DDL
/// takes effect for the statements after it; an error stops the script with
/// a failing exit status after the results before it.
#[test]
fn every_statement_of_a_script_prints_its_result() {
    let sql = "CREATE TABLE t AS VALUES (1), (2), (3); SELECT count(*) AS n FROM t; \
               SELECT sum(column1) AS s FROM t; SELECT 'x;y' AS v";
    let (ok, out, err) = run(&["--format", "csv", "--timing", "-c", sql]);
    assert!(ok, "{err}");
    assert_eq!(out, "n\n3\ns\n6\nv\nx;y\n");
    assert_eq!(err.matches("row(s) in").count(), 4, "{err}");
    let (ok, out, err) = run(&[
        "--format",
        "csv",
        "-c",
        "SELECT 1 AS a; SELECT * FROM missing; SELECT 2 AS b",
    ]);
    assert!(!ok);
    assert_eq!(out, "a\n1\n");
    assert!(err.contains("missing"), "{err}");
}

/// `--priority` sets the session's `tsjoin.priority`: the query's inputs
/// are gated at it (EXPLAIN ANALYZE shows the gates); a bad value is an
/// error naming the accepted ones.
#[test]
fn priority_sets_the_session_priority() {
    let sql = "EXPLAIN ANALYZE SELECT count(*) FROM generate_series(1, 1000)";
    let (ok, out, err) = run(&["--priority", "low", "-c", sql]);
    assert!(ok, "{err}");
    assert!(out.contains("PriorityGateExec: priority=low"), "{out}");
    let (ok, _, err) = run(&["--priority", "urgent", "-c", "SELECT 1"]);
    assert!(
        !ok && err.contains("expected high, normal, low or an integer"),
        "{err}"
    );
}

/// `--memory-limit` and `--spill-dir`: a GROUP BY with one group per row
/// that does not fit inline answers (DataFusion's aggregate spills to the
/// directory), a WINDOW JOIN whose right index does not fit is a clear
/// error, and a size that does not parse is an error.
#[test]
fn memory_limit_and_spill_dir() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("spill");
    let spill = spill.to_str().unwrap();
    let sql = "CREATE TABLE prices AS SELECT to_timestamp_micros(value) AS ts, \
               CAST(value % 1000 AS DOUBLE) AS bid FROM generate_series(1, 300000); \
               SELECT count(*), sum(n) FROM (SELECT ts, count(*) AS n, sum(bid) FROM prices GROUP BY ts)";
    let (ok, out, err) = run(&[
        "--memory-limit",
        "12M",
        "--spill-dir",
        spill,
        "--threads",
        "2",
        "--format",
        "csv",
        "-c",
        sql,
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("300000,300000"), "{out}");
    assert!(std::path::Path::new(spill).is_dir());
    let join = "CREATE TABLE p AS SELECT to_timestamp_millis(value) AS ts, value % 7 AS k, \
                CAST(value AS DOUBLE) AS v FROM generate_series(1, 200000); \
                SELECT count(*) FROM p a WINDOW JOIN p b ON b.k = a.k \
                RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW";
    let (ok, _, err) = run(&["--memory-limit", "1M", "-c", join]);
    assert!(!ok);
    assert!(
        err.contains("Resources exhausted") && err.contains("WindowJoinExec"),
        "{err}"
    );
    let (ok, _, err) = run(&["--memory-limit", "lots", "-c", "SELECT 1"]);
    assert!(!ok && err.contains("lots"), "{err}");
}

/// Ctrl-C (SIGINT) cancels a running statement: the process reports it and
/// exits within a second, its work stopped.
#[cfg(unix)]
#[test]
fn ctrl_c_cancels_the_running_query() {
    use std::time::{Duration, Instant};
    let mut child = cli()
        .args([
            "--threads",
            "2",
            "-c",
            "SELECT k, count(*) FROM (SELECT value % 7 AS k FROM generate_series(1, 100000000000)) GROUP BY k",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let it start and run for a while.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "finished before Ctrl-C"
    );
    let sent = Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "still running 5 s after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let latency = sent.elapsed();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!status.success());
    assert!(err.contains("query cancelled"), "{err}");
    eprintln!("Ctrl-C to exit: {latency:?}");
    assert!(
        latency < Duration::from_secs(1),
        "exited {latency:?} after Ctrl-C"
    );
}

/// The CLI turns the kernel's transparent huge pages off for itself (see
/// `allocator.rs`), and `TSJOIN_THP=1` keeps them: read from the running
/// shell's `/proc/<pid>/status` once it has answered a statement (so its
/// start-up is over). Linux kernels that report `THP_enabled` only.
#[cfg(target_os = "linux")]
#[test]
fn transparent_huge_pages_off_unless_asked() {
    use std::io::{BufRead, BufReader};
    let thp = |pid: u32| -> Option<String> {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("THP_enabled:").map(|v| v.trim().to_string()))
    };
    if thp(std::process::id()).is_none() {
        eprintln!("skipped: this kernel does not report THP_enabled");
        return;
    }
    for (keep, want) in [(false, "0"), (true, "1")] {
        let mut command = cli();
        if keep {
            command.env("TSJOIN_THP", "1");
        } else {
            command.env_remove("TSJOIN_THP");
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"SELECT 41 + 1 AS answer;\n").unwrap();
        stdin.flush().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert!(
            lines.any(|l| l.unwrap().contains("42")),
            "the shell did not answer"
        );
        let got = thp(child.id());
        drop(stdin);
        child.wait().unwrap();
        assert_eq!(got.as_deref(), Some(want), "TSJOIN_THP=1 set: {keep}");
    }
}
