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
    w.assert_log_has("dropping progress and log notifications");

    // The caller goes: its call leaves the instance at once.
    call.0.kill().unwrap();
    call.0.wait().unwrap();
    wait_until("the gone caller's call ends", Duration::from_secs(5), || {
        w.instance("fake").is_some_and(|i| i["calls"] == 0)
    });
}

/// The daemon's log rotates at its cap (`daemon.log.1`, one old file), and a
/// `mcpx logs -f` started before the rotation goes on with the new file.
#[test]
fn the_log_rotates_at_its_cap_and_logs_follow_goes_on() {
    let mut w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.env.push(("MCPX_TEST_LOG_CAP".into(), "4096".into()));
    w.call("fake.echo", r#"{"message":"hi"}"#).ok();
    let mut cmd = w.command();
    cmd.args(["logs", "-f"]).stdin(std::process::Stdio::null()).stdout(std::process::Stdio::piped());
    let mut follow = Spawned(cmd.spawn().unwrap());
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = follow.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let rotated = w.path("state/daemon.log.1");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !rotated.exists() {
        assert!(Instant::now() < deadline, "the log never rotated: {} bytes", w.log().len());
        w.run(&["restart", "fake"]).ok();
    }
    // A server that appears only after the rotation (its own environment, so not
    // the same instance as `fake`): its lines are in the new file.
    w.set_servers(json!({
        "fake": { "command": fake_server() },
        "after-rotation": { "command": fake_server(), "env": { "MARK": "1" } },
    }));
    w.call("after-rotation.echo", r#"{"message":"hi"}"#).ok();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen.iter().any(|l: &String| l.contains("after-rotation")) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "`logs -f` did not go on after the rotation; it printed:\n{}", seen.join("\n"));
        if let Ok(line) = rx.recv_timeout(left) {
            seen.push(line);
        }
    }
    let size = |name: &str| std::fs::metadata(w.path(name)).map(|m| m.len()).unwrap_or(0);
    assert!(size("state/daemon.log") <= 4096 && size("state/daemon.log.1") <= 4096);
    assert!(!w.path("state/daemon.log.2").exists(), "one old file is kept");
}
