//! Floods the daemon must survive without growing: a progress flood to a caller
//! that does not read (bounded queues, drops counted), and a log that grows past
//! its cap (rotation, which `mcpx logs -f` follows).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{Spawned, World, fake_server, wait_until};

/// The daemon's memory ceiling under a flood (issue 12: 1.18 GB before the fix).
const CEILING_KIB: u64 = 200 * 1024;

/// A `VmHWM`/`VmRSS`-style field of `/proc/<pid>/status`, in KiB.
fn status_kib(pid: i32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':')?.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} for pid {pid}"))
}

/// Six seconds of ~1 KiB progress notifications to a `mcpx call` whose output
/// nobody reads keep the daemon under 200 MiB, the drops are counted in `status`
/// and said in the log, and the call goes at once when its caller does.
#[test]
fn a_progress_flood_to_a_reader_that_stopped_stays_bounded() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.call("fake.echo", r#"{"message":"warm"}"#).ok();
    let daemon = w.daemon_pid().unwrap();
    // With `--json` it prints every notification on stderr, a pipe nobody reads:
    // once the pipe is full, the CLI stops reading the daemon's answer, as a Ctrl-Z'd
    // terminal would.
    let mut cmd = w.command();
    cmd.args(["call", "fake.progress", r#"{"flood_ms":6000}"#, "--json", "--timeout", "60s"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut call = Spawned(cmd.spawn().unwrap());
    let start = Instant::now();
    let mut peak = 0;
    while start.elapsed() < Duration::from_millis(7000) {
        peak = peak.max(status_kib(daemon, "VmHWM"));
        assert!(peak < CEILING_KIB, "the daemon grew to {peak} KiB under the flood");
        std::thread::sleep(Duration::from_millis(100));
    }
    peak = peak.max(status_kib(daemon, "VmHWM"));
    eprintln!("daemon peak RSS under the flood: {peak} KiB ({} MiB)", peak / 1024);
    assert!(peak < CEILING_KIB, "the daemon grew to {peak} KiB under the flood");
    let status = w.status();
    let dropped = status["daemon"]["dropped_notifications"].as_u64().unwrap_or(0);
    assert!(dropped > 0, "no drop counted in status: {}", status["daemon"]);
    let instance = w.instance("fake").unwrap();
    assert!(instance["dropped_notifications"].as_u64().unwrap_or(0) > 0, "{instance}");
    assert!(w.log().contains("dropping progress and log notifications"), "{}", w.log());

    // The caller goes: its call leaves the instance at once.
    call.0.kill().unwrap();
    call.0.wait().unwrap();
    wait_until("the gone caller's call ends", Duration::from_secs(5), || {
        w.instance("fake").is_some_and(|i| i["calls"] == 0)
    });
}
