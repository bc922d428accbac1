//! A daemon started by the CLI that fails at start: its reason reaches that CLI at
//! once (exit 3), and it leaves no socket or pid file behind. A daemon started by
//! the CLI holds none of the descriptors that CLI inherited.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{World, free_port};

/// Well before the 15 s a CLI waits for a daemon that never answers.
const AT_ONCE: Duration = Duration::from_secs(5);

/// `mcpx ls` with `MCPX_HTTP_ADDR` set to `addr` exits 3 at once with a message
/// holding `reason`, the daemon's own words, and no `daemon.sock` or `daemon.pid`
/// remains; `daemon.lock` may (it is only ever locked).
#[track_caller]
fn start_fails(addr: &str, reason: &str) {
    let w = World::new(json!({}));
    let began = Instant::now();
    let run = w.run_with(&["ls"], |c| {
        c.env("MCPX_HTTP_ADDR", addr).env("MCPX_HTTP_NO_AUTH", "1");
    });
    let took = began.elapsed();
    assert_eq!(run.code, 3, "`mcpx ls` with MCPX_HTTP_ADDR={addr}\nstdout: {}\nstderr: {}", run.stdout, run.stderr);
    assert!(took < AT_ONCE, "`mcpx ls` took {took:?} to report the failed start: {}", run.stderr);
    assert!(run.stderr.contains(reason), "the message does not hold the daemon's `{reason}`: {}", run.stderr);
    for file in ["daemon.sock", "daemon.pid"] {
        assert!(!w.path("run").join(file).exists(), "{file} remains after the failed start: {}", run.stderr);
    }
}

/// An address that is not loopback is refused by the daemon, and the CLI says why.
#[test]
fn a_daemon_refusing_a_non_loopback_address_reports_it() {
    start_fails(&format!("0.0.0.0:{}", free_port()), "not a loopback address");
}

/// An address that does not parse is refused by the daemon, and the CLI says why.
#[test]
fn a_daemon_refusing_an_unparsable_address_reports_it() {
    start_fails("localhost:notaport", "is not an address like 127.0.0.1:8765");
}

/// A pipe the CLI inherited besides its standard streams (here as descriptor 7, as a
/// shell's `> >(tee log)` or a build tool's jobserver hands it) ends when the CLI
/// exits, although the daemon it started lives on: the daemon holds no copy of it.
#[test]
fn a_daemon_started_by_the_cli_holds_no_descriptor_the_cli_inherited() {
    use std::io::Read;
    let w = World::new(json!({}));
    let mut cmd = w.launcher().program("bash");
    cmd.args(["-c", "exec \"$0\" ls 7>&1 >/dev/null", &crate::harness::mcpx_bin().to_string_lossy()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("bash runs");
    let mut pipe = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = tx.send(pipe.read_to_end(&mut sink).map(|_| sink.len()));
    });
    assert!(child.wait().expect("mcpx ls ends").success(), "mcpx ls failed");
    assert!(w.daemon_pid().is_some(), "mcpx ls started no daemon");
    let ended = rx.recv_timeout(Duration::from_secs(20));
    assert!(ended.is_ok(), "the pipe the CLI inherited stays open after it exited: the daemon holds it");
}
