//! The progress display: drawn on stderr when it is a terminal (a
//! pseudo-terminal here), never when it is not, and stdout is the same
//! either way.

use crate::cli;
use nix::pty::openpty;
use std::io::Read;
use std::process::Stdio;

/// A statement that runs for a few hundred milliseconds.
const SLOW: &str = "SELECT value % 5 AS k, count(*) AS n FROM generate_series(1, 3000000) \
    WHERE value % 7 = 3 GROUP BY 1 ORDER BY 1";

/// Runs the CLI with stderr on a pseudo-terminal: (success, stdout, what
/// the terminal received).
fn run_on_terminal(args: &[&str]) -> (bool, String, String) {
    let pty = openpty(None, None).unwrap();
    let mut child = cli()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(pty.slave))
        .spawn()
        .unwrap();
    // Read the terminal while the child runs (its buffer is small); the
    // read fails (EIO) once the child has closed its side.
    let mut master = std::fs::File::from(pty.master);
    let reader = std::thread::spawn(move || {
        let mut seen = vec![];
        let mut buf = [0u8; 4096];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let ok = child.wait().unwrap().success();
    (ok, stdout, reader.join().unwrap())
}

#[test]
fn bar_on_a_terminal_only_and_stdout_unchanged() {
    for format in ["csv", "json", "table"] {
        let args = ["--format", format, "--progress-after-ms", "0", "-c", SLOW];
        let (ok, plain_out, plain_err) = crate::run(&args);
        assert!(ok, "{plain_err}");
        assert_eq!(plain_err, "", "not a terminal: no progress");
        let (ok, out, terminal) = run_on_terminal(&args);
        assert!(ok, "{terminal}");
        assert_eq!(out, plain_out, "{format}: stdout is the same");
        assert!(!out.contains('%') && !out.contains('\x1b'), "{out}");
        assert!(terminal.contains("100.0%"), "{format}: {terminal:?}");
        assert!(terminal.contains("rows"), "{terminal:?}");
    }
    let (_, _, terminal) =
        run_on_terminal(&["--progress-after-ms", "0", "--progress", "off", "-c", SLOW]);
    assert_eq!(terminal, "", "--progress off");
    // Statements quicker than the delay show nothing.
    let (_, _, terminal) = run_on_terminal(&["-c", "SELECT 1"]);
    assert_eq!(terminal, "");
}

#[test]
fn operators_view_lists_the_plan() {
    let (ok, _, terminal) = run_on_terminal(&[
        "--progress",
        "operators",
        "--progress-after-ms",
        "0",
        "--format",
        "csv",
        "-c",
        SLOW,
    ]);
    assert!(ok, "{terminal}");
    for op in ["SortExec", "AggregateExec", "LazyMemoryExec", "done"] {
        assert!(terminal.contains(op), "{op}: {terminal:?}");
    }
}
