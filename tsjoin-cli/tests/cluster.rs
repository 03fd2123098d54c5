//! `tsjoin-cli scheduler`, two `tsjoin-cli executor` processes and
//! `tsjoin-cli --cluster` on loopback ports: the showcase query answers as
//! locally; an executor killed mid-query gives a clear error or a retried
//! success, never a hang or a wrong answer. Every process is stopped.

use crate::{cli, run};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Processes killed when dropped, even when an assertion fails.
struct Processes(Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A port free right now on 127.0.0.1.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn spawn(args: &[String]) -> Child {
    cli()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// A scheduler and two executors; returns the processes and the address.
fn start_cluster(dir: &std::path::Path) -> (Processes, String) {
    let port = free_port();
    let mut procs = Processes(vec![spawn(&[
        "scheduler".into(),
        "--port".into(),
        port.to_string(),
        "--executor-timeout".into(),
        "5".into(),
    ])]);
    wait_for_port(port);
    for i in 0..2 {
        let (flight, grpc) = (free_port(), free_port());
        let work = dir.join(format!("executor-{i}"));
        std::fs::create_dir_all(&work).unwrap();
        procs.0.push(spawn(&[
            "executor".into(),
            "--scheduler".into(),
            format!("localhost:{port}"),
            "--port".into(),
            flight.to_string(),
            "--grpc-port".into(),
            grpc.to_string(),
            "--concurrent-tasks".into(),
            "2".into(),
            "--heartbeat".into(),
            "1".into(),
            "--work-dir".into(),
            work.to_str().unwrap().into(),
        ]));
        wait_for_port(flight);
    }
    (procs, format!("df://localhost:{port}"))
}

/// Runs `sql` over the demo data, locally or on `cluster`.
fn query(dir: &str, cluster: Option<&str>, sql: &str) -> (bool, String, String) {
    let trades = format!("trades={dir}/trades");
    let prices = format!("prices={dir}/prices");
    let mut args = vec!["-t", &trades, "-t", &prices, "--format", "csv", "-c", sql];
    if let Some(url) = cluster {
        args.extend(["--cluster", url]);
    }
    run(&args)
}

const SHOWCASE: &str = "SELECT symbol, sum(n) AS n, round(avg(bid), 6) AS bid, max(ask) AS ask \
    FROM (SELECT t.symbol, count(*) AS n, avg(p.bid) AS bid, max(p.ask) AS ask \
    FROM trades t WINDOW JOIN prices p ON p.sym = t.symbol \
    RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING EXCLUDE PREVAILING) \
    GROUP BY symbol ORDER BY symbol";

#[test]
fn cli_processes_run_the_demo_query_on_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (ok, _, err) = run(&["demo", "--dir", d, "--trades", "20000"]);
    assert!(ok, "{err}");
    let (procs, url) = start_cluster(dir.path());

    let (ok, local, err) = query(d, None, SHOWCASE);
    assert!(ok, "{err}");
    let (ok, remote, err) = query(d, Some(&url), SHOWCASE);
    assert!(ok, "{err}");
    assert_eq!(remote, local);
    let asof = "SELECT t.symbol, count(p.bid) AS matched FROM trades t ASOF JOIN prices p \
                ON p.sym = t.symbol GROUP BY t.symbol ORDER BY t.symbol";
    assert_eq!(query(d, Some(&url), asof), query(d, None, asof));

    // A scheduler address that does not answer is a clear error.
    let (ok, _, err) = query(
        d,
        Some(&format!("df://127.0.0.1:{}", free_port())),
        SHOWCASE,
    );
    assert!(!ok && err.starts_with("Error: "), "{err}");
    drop(procs);
}

#[test]
fn a_killed_executor_gives_an_error_or_the_right_answer() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (ok, _, err) = run(&["demo", "--dir", d, "--trades", "200000"]);
    assert!(ok, "{err}");
    let (ok, local, err) = query(d, None, SHOWCASE);
    assert!(ok, "{err}");
    let (mut procs, url) = start_cluster(dir.path());

    let trades = format!("trades={d}/trades");
    let prices = format!("prices={d}/prices");
    let client = cli()
        .args([
            "-t",
            &trades,
            "-t",
            &prices,
            "--format",
            "csv",
            "--cluster",
            &url,
            "-c",
            SHOWCASE,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut executor = procs.0.remove(1);
    executor.kill().unwrap();
    executor.wait().unwrap();
    let started = Instant::now();
    let mut client = client;
    // Never a hang: the scheduler notices the lost executor within its
    // 5 s timeout and retries its tasks or fails the job.
    while client.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            let _ = client.kill();
            panic!("the query still runs 120 s after its executor was killed");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = client.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    eprintln!(
        "after the kill: {} in {:?}",
        if out.status.success() {
            "answered"
        } else {
            "failed"
        },
        started.elapsed()
    );
    if out.status.success() {
        assert_eq!(stdout, local);
    } else {
        assert!(stderr.starts_with("Error: "), "{stderr}");
    }
    drop(procs);
}
