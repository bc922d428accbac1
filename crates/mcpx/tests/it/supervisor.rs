//! The supervisor (design: "The supervisor"): servers outlive the daemon, a new
//! daemon adopts them, and nothing is lost silently.

use std::time::Duration;

use serde_json::json;

use crate::harness::{World, alive, e2e_dir, fake_server, start_time, wait_until};

fn pid_of(w: &World, server: &str) -> i32 {
    w.instance(server).unwrap()["pid"].as_i64().unwrap() as i32
}

/// The defining test: `kill -9` of the daemon during a call fails that call with
/// exit 3; the next call starts a new daemon that adopts the instance, whose pid,
/// start time and in-memory state are unchanged.
#[test]
fn daemon_kill_9_mid_call_then_the_next_daemon_adopts_the_server() {
    let w = World::new(json!({}));
    let record = w.path("calls.jsonl");
    w.set_servers(json!({ "fake": { "command": fake_server(), "env": { "FAKE_RECORD": record } } }));
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n");
    let pid = pid_of(&w, "fake");
    let born = start_time(pid);
    let inst = w.instance("fake").unwrap();
    assert_eq!(inst["supervised"], true);
    assert_ne!(inst["supervisor_pid"], inst["pid"]);

    let mut slow = w.command();
    slow.args(["call", "fake.slow", r#"{"ms":4000}"#])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let slow = slow.spawn().unwrap();
    wait_until("the slow call reaches the server", Duration::from_secs(10), || {
        std::fs::read_to_string(&record).unwrap_or_default().contains("\"slow\"")
    });
    w.kill_daemon();
    let out = slow.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));

    assert_eq!(w.call("fake.counter", "{}").ok(), "2\n", "the server's memory survived");
    assert_eq!(pid_of(&w, "fake"), pid);
    assert_eq!(start_time(pid), born);
    w.assert_log_has("adopted a running server");
    // The slow call's late reply belonged to the dead daemon's epoch: dropped, not delivered.
    assert_eq!(w.call("fake.echo", r#"{"message":"after"}"#).ok(), "after\n");
}

/// The same with a real server from npm: the process survives the daemon.
#[test]
fn server_memory_survives_a_daemon_kill_9() {
    let w = World::new(json!({}));
    let e2e = e2e_dir();
    w.set_servers(json!({
        "memory": {
            "command": e2e.join("node_modules/.bin/mcp-server-memory").display().to_string(),
            "env": { "MEMORY_FILE_PATH": w.path("memory.jsonl") },
        },
    }));
    w.call("memory.read_graph", "{}").ok();
    let pid = pid_of(&w, "memory");
    let born = start_time(pid);
    w.kill_daemon();
    let entities =
        json!({ "entities": [{ "name": "adopted", "entityType": "test", "observations": ["same process"] }] });
    w.call("memory.create_entities", &entities.to_string()).ok();
    assert_eq!(pid_of(&w, "memory"), pid);
    assert_eq!(start_time(pid), born);
    assert!(w.call("memory.read_graph", "{}").ok().contains("same process"));
}

/// Output while no daemon is attached: the server never blocks, the buffer keeps
/// the newest whole lines, and what was dropped is counted exactly.
#[test]
fn unattached_output_is_buffered_and_every_dropped_byte_counted() {
    let w = World::new(json!({}));
    let report = w.path("flood.report");
    w.set_servers(json!({ "fake": { "command": fake_server(), "mcpx": { "bufferBytes": "64KiB" } } }));
    let pid = {
        w.call("fake.echo", r#"{"message":"x"}"#).ok();
        pid_of(&w, "fake")
    };
    let bytes = 10 * 64 * 1024;
    w.call("fake.flood_later", &json!({ "bytes": bytes, "after_ms": 300, "report": report }).to_string()).ok();
    // `stop` without --all detaches: the supervisor keeps the server.
    w.run(&["stop"]).ok();
    wait_until("the flood is written", Duration::from_secs(20), || report.exists());
    let produced: u64 = std::fs::read_to_string(&report).unwrap().trim().parse().unwrap();
    assert!(produced >= bytes as u64);
    assert_eq!(w.call("fake.echo", r#"{"message":"after"}"#).ok(), "after\n");
    let inst = w.instance("fake").unwrap();
    assert_eq!(inst["pid"], pid, "the server kept running");
    let kept = inst["buffered_at_attach"].as_u64().unwrap();
    let dropped = inst["dropped_bytes"].as_u64().unwrap();
    assert!(kept > 0 && kept <= 64 * 1024, "kept {kept}");
    assert_eq!(dropped, produced - kept, "dropped {dropped}, produced {produced}, kept {kept}");
    assert!(std::fs::read_to_string(w.path("state/supervisors.log")).unwrap().contains("dropped"));
}

/// Output while a daemon is attached passes through whatever `bufferBytes` is: reply
/// lines far over a 4 KiB buffer arrive whole and at once, and nothing is dropped
/// (a slow daemon gets flow control, never loss).
#[test]
fn attached_output_is_never_dropped_however_small_the_buffer() {
    let w = World::new(json!({
        "b": { "command": fake_server(), "mcpx": { "bufferBytes": "4KiB", "callTimeout": "5s" } },
    }));
    for bytes in [10_000, 1 << 20] {
        let run = w.run(&["call", "b.big", &json!({ "line_bytes": bytes }).to_string(), "--json"]);
        assert_eq!(run.code, 0, "a reply line of {bytes} bytes: {}", run.stderr);
        let text = run.json()["content"][0]["text"].as_str().unwrap().to_owned();
        assert!(text.len() > bytes - 200 && text.bytes().all(|b| b == b'x'), "line of {bytes} bytes arrived cut");
    }
    assert_eq!(w.instance("b").unwrap()["dropped_bytes"], 0);
    assert!(!std::fs::read_to_string(w.path("state/supervisors.log")).unwrap().contains("dropped so far"));
}

/// A daemon killed after sending part of a large request: the server never sees
/// a partial message, and the next call works.
#[test]
fn a_daemon_killed_mid_message_leaves_no_partial_message() {
    let w = World::new(json!({}));
    let record = w.path("calls.jsonl");
    let marker = w.path("paused");
    w.set_servers(json!({ "fake": { "command": fake_server(), "env": { "FAKE_RECORD": record } } }));
    let big = "y".repeat(3 << 20);
    let mut call = w.command();
    call.env("MCPX_TEST_PAUSE_MID_MESSAGE", &marker)
        .args(["call", "fake.echo", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut call = call.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = call.stdin.take().unwrap();
        stdin.write_all(json!({ "message": big }).to_string().as_bytes()).unwrap();
    }
    wait_until("the daemon paused mid-message", Duration::from_secs(30), || marker.exists());
    w.kill_daemon();
    assert_eq!(call.wait().unwrap().code(), Some(3));
    assert_eq!(w.call("fake.echo", r#"{"message":"whole"}"#).ok(), "whole\n");
    let seen = std::fs::read_to_string(&record).unwrap();
    assert!(!seen.contains("yyyy"), "a part of the big message reached the server");
    assert!(!w.path("calls.jsonl.invalid").exists(), "the server received an unparsable message");
}

/// `kill -9` of a supervisor: the instance shows `lost`, its orphaned server is
/// killed, and the next call starts a fresh instance; nothing is left behind.
#[test]
fn a_killed_supervisor_is_lost_and_cleaned_up() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let inst = w.instance("fake").unwrap();
    let sup = inst["supervisor_pid"].as_i64().unwrap() as i32;
    let child = inst["pid"].as_i64().unwrap() as i32;
    let old_files = w.sup_files();
    assert_eq!(old_files.len(), 2, "{old_files:?}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(sup), nix::sys::signal::Signal::SIGKILL).unwrap();
    wait_until("the instance shows lost", Duration::from_secs(15), || {
        w.instance("fake").is_some_and(|i| i["state"] == "lost")
    });
    wait_until("the orphaned server is gone", Duration::from_secs(10), || !alive(child) && !alive(sup));
    assert!(w.sup_files().iter().all(|f| !old_files.contains(f)), "{:?}", w.sup_files());
    assert_eq!(w.call("fake.echo", r#"{"message":"fresh"}"#).ok(), "fresh\n");
    let fresh = w.instance("fake").unwrap();
    assert_ne!(fresh["supervisor_pid"].as_i64().unwrap() as i32, sup);
}

/// The server dies (by a signal) while no daemon is attached: the next daemon
/// reports the signal, distinct from an exit code, then starts a fresh instance.
#[test]
fn an_exit_while_unattached_is_reported_with_its_signal() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let child = pid_of(&w, "fake");
    w.run(&["stop"]).ok();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child), nix::sys::signal::Signal::SIGKILL).unwrap();
    wait_until("the server is gone", Duration::from_secs(10), || !alive(child));
    let inst = w.instance("fake").unwrap();
    assert_eq!(inst["state"], "error", "{inst}");
    let error = inst["last_error"].as_str().unwrap();
    assert!(error.contains("killed by signal 9 (SIGKILL)"), "{error}");
    assert_eq!(w.call("fake.echo", r#"{"message":"again"}"#).ok(), "again\n");
    assert_ne!(pid_of(&w, "fake"), child);
    wait_until("the old supervisor left", Duration::from_secs(10), || w.sup_files().len() == 2);
}

/// `mcpx restart` goes through the supervisor: a new server process, the same supervisor.
#[test]
fn restart_keeps_the_supervisor_and_replaces_the_process() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n");
    let before = w.instance("fake").unwrap();
    w.run(&["restart", "fake"]).ok();
    let after = w.instance("fake").unwrap();
    assert_eq!(after["supervisor_pid"], before["supervisor_pid"]);
    assert_ne!(after["pid"], before["pid"]);
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n", "a fresh process");
}

/// `stop --all` leaves no process, socket or record; `orphanTimeout` stops a
/// supervisor no daemon attaches to.
#[test]
fn stop_all_and_orphan_timeout_leave_nothing() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let inst = w.instance("fake").unwrap();
    let (sup, child) = (inst["supervisor_pid"].as_i64().unwrap() as i32, inst["pid"].as_i64().unwrap() as i32);
    w.run(&["stop", "--all"]).ok();
    wait_until("supervisor and server are gone", Duration::from_secs(10), || !alive(sup) && !alive(child));
    assert!(w.sup_files().is_empty(), "{:?}", w.sup_files());
    assert!(!w.path("run/daemon.sock").exists());

    w.set_servers(json!({ "fake": { "command": fake_server(), "mcpx": { "orphanTimeout": "300ms" } } }));
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let inst = w.instance("fake").unwrap();
    let (sup, child) = (inst["supervisor_pid"].as_i64().unwrap() as i32, inst["pid"].as_i64().unwrap() as i32);
    w.run(&["stop"]).ok();
    wait_until("the orphaned supervisor stopped itself", Duration::from_secs(15), || !alive(sup) && !alive(child));
    assert!(w.sup_files().is_empty(), "{:?}", w.sup_files());
}

/// `supervised: false` keeps the server as the daemon's own child.
#[test]
fn unsupervised_servers_are_the_daemons_children() {
    let w = World::new(json!({ "fake": { "command": fake_server(), "mcpx": { "supervised": false } } }));
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let inst = w.instance("fake").unwrap();
    assert_eq!(inst["supervised"], false);
    assert_eq!(inst["supervisor_pid"], serde_json::Value::Null);
    assert!(w.sup_files().is_empty());
    let ppid = std::fs::read_to_string(format!("/proc/{}/stat", inst["pid"])).unwrap();
    let ppid: i32 = ppid.rsplit_once(") ").unwrap().1.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_eq!(Some(ppid), w.daemon_pid());
}

/// A supervisor speaking a newer major version is left running and shown
/// `incompatible` with both versions; `mcpx restart` replaces it. One a major
/// version older is adopted.
#[test]
fn incompatible_supervisors_are_left_alone_until_restart_and_older_ones_adopted() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    // A daemon and supervisor of a newer protocol (test-only setting).
    let newer = w.run_with(&["call", "fake.counter", "{}"], |c| {
        c.env("MCPX_TEST_ATTACH_VERSION", "2.0");
    });
    assert_eq!(newer.ok(), "1\n");
    let child = pid_of(&w, "fake");
    w.kill_daemon();
    let inst = w.instance("fake").unwrap();
    assert_eq!(inst["state"], "incompatible", "{inst}");
    assert_eq!(inst["supervisor_protocol"], "2.0");
    let error = inst["last_error"].as_str().unwrap();
    assert!(error.contains("2.0") && error.contains("1.2") && error.contains("mcpx restart fake"), "{error}");
    assert!(alive(child), "an incompatible supervisor's server is left running");
    w.run(&["restart", "fake"]).ok();
    wait_until("the old server is replaced", Duration::from_secs(10), || !alive(child));
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n", "a fresh server");
    w.run(&["stop", "--all"]).ok();

    // One major version older: adopted with its state.
    let older = w.run_with(&["call", "fake.counter", "{}"], |c| {
        c.env("MCPX_TEST_ATTACH_VERSION", "0.9");
    });
    assert_eq!(older.ok(), "1\n");
    let child = pid_of(&w, "fake");
    w.kill_daemon();
    assert_eq!(w.call("fake.counter", "{}").ok(), "2\n");
    assert_eq!(pid_of(&w, "fake"), child);
    assert_eq!(w.instance("fake").unwrap()["supervisor_protocol"], "0.9");
}

/// Records that do not match a live supervisor: one pointing at a process the test
/// owns but with another start time is never signalled; one from another boot is
/// removed with its socket.
#[test]
fn forged_and_stale_records_never_signal_strangers() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let sup_dir = w.path("run/sup");
    // Private, as the daemon makes it and requires it.
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700).create(&sup_dir).unwrap();
    #[allow(clippy::disallowed_methods)] // Reason: a bystander process the test owns.
    let mut bystander = std::process::Command::new("sleep").arg("300").spawn().unwrap();
    let pid = bystander.id();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap().trim().to_owned();
    let record = |id: &str, boot_id: &str| {
        json!({
            "id": id, "server": "fake", "fingerprint": "0000000000000000", "cache_key": "0000000000000000",
            "key": "global", "sharing": "shared",
            "supervisor": { "pid": pid, "start_time": start_time(pid as i32) + 12345 },
            "child": { "pid": pid, "start_time": start_time(pid as i32) + 12345 },
            "boot_id": boot_id, "protocol": { "major": 1, "minor": 0 }, "build": "forged",
            "last_epoch": 1, "exit": null,
        })
    };
    std::fs::write(sup_dir.join("aaaaaaaaaaaa.json"), record("aaaaaaaaaaaa", &boot).to_string()).unwrap();
    std::fs::write(sup_dir.join("bbbbbbbbbbbb.json"), record("bbbbbbbbbbbb", "another-boot").to_string()).unwrap();
    std::fs::write(sup_dir.join("bbbbbbbbbbbb.sock"), "").unwrap();
    w.run(&["ls"]).ok();
    assert!(alive(pid as i32), "a process whose start time differs was signalled");
    assert!(w.sup_files().is_empty(), "stale records were left: {:?}", w.sup_files());
    let _ = bystander.kill();
    let _ = bystander.wait();
}

/// A connection from another uid is refused before anything is said.
#[test]
fn a_connection_from_another_uid_is_refused() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("skipped: needs root to connect as another uid");
        return;
    }
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let socket = w.sup_files().into_iter().find(|f| f.ends_with(".sock")).unwrap();
    let socket = w.path("run/sup").join(socket);
    // Test-only: open the way to accept() for uid 65534.
    use std::os::unix::fs::PermissionsExt;
    for dir in [w.dir.path().to_path_buf(), w.path("run"), w.path("run/sup")] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    // perl (in every Debian base system) as a client that prints how many bytes it got.
    let script = r#"use IO::Socket::UNIX; my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "connect: $!"; my $n = sysread($s, my $buf, 64); print defined $n ? $n : -1"#;
    #[allow(clippy::disallowed_methods)] // Reason: setpriv runs the client as another uid.
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/perl", "-e", script])
        .arg(&socket)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0", "the other uid was answered");
    let log = std::fs::read_to_string(w.path("state/supervisors.log")).unwrap();
    assert!(log.contains("refused a connection from uid 65534"), "{log}");
    std::fs::set_permissions(w.path("run"), std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(w.call("fake.echo", r#"{"message":"still"}"#).ok(), "still\n");
}

/// `mcpx upgrade` to another build under a steady load: calls in flight finish
/// during the drain, calls issued meanwhile wait in the kept listen backlog, none
/// fails; the daemon's pid and the servers' pids stay, the build changes.
#[test]
fn upgrade_under_load_loses_no_call() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n");
    let daemon = w.daemon_pid().unwrap();
    let child = pid_of(&w, "fake");
    let before = w.status()["daemon"]["build"].as_str().unwrap().to_owned();
    // Another build: a copy of the binary is another executable, so another build id.
    let next = w.path("mcpx-next");
    std::fs::copy(crate::harness::mcpx_bin(), &next).unwrap();

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let finished = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|n| {
            let stop = stop.clone();
            let finished = finished.clone();
            let launcher = w.launcher();
            std::thread::spawn(move || {
                let mut done = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let message = format!("worker {n} call {done}");
                    let mut cmd = launcher.command();
                    cmd.args(["call", "fake.echo", &json!({ "message": message, "delay_ms": 50 }).to_string()]);
                    let out = cmd.output().unwrap();
                    assert!(out.status.success(), "{message} failed: {}", String::from_utf8_lossy(&out.stderr));
                    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{message}\n"));
                    done += 1;
                    finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                done
            })
        })
        .collect();
    // The load is on once calls complete; it goes on until calls complete after the
    // upgrade too, against the new image. A worker ends early only when a call failed,
    // which the join below reports.
    let calls_done = || finished.load(std::sync::atomic::Ordering::Relaxed);
    let failed = |workers: &[std::thread::JoinHandle<usize>]| workers.iter().any(|h| h.is_finished());
    wait_until("four calls completed before the upgrade", Duration::from_secs(30), || {
        calls_done() >= 4 || failed(&workers)
    });
    let run = w.run(&["upgrade", "--binary", next.to_str().unwrap(), "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let upgraded = calls_done();
    wait_until("four calls completed after the upgrade", Duration::from_secs(30), || {
        calls_done() >= upgraded + 4 || failed(&workers)
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let calls: usize = workers.into_iter().map(|h| h.join().expect("a call failed during the upgrade")).sum();
    assert!(calls >= 8, "only {calls} calls ran");
    let status = w.status();
    assert_eq!(w.daemon_pid(), Some(daemon));
    assert_eq!(status["daemon"]["pid"], daemon);
    assert_ne!(status["daemon"]["build"].as_str().unwrap(), before);
    assert_eq!(pid_of(&w, "fake"), child);
    assert_eq!(w.call("fake.counter", "{}").ok(), "2\n");
}

/// A daemon that dies during `initialize` stored no session: the next daemon
/// restarts that server (same supervisor, new process) instead of resuming it.
#[test]
fn a_server_whose_session_was_never_stored_is_restarted() {
    let w = World::new(json!({}));
    let record = w.path("calls.jsonl");
    w.set_servers(
        json!({ "fake": { "command": fake_server(), "env": { "FAKE_INIT_DELAY_MS": "1500", "FAKE_RECORD": record } } }),
    );
    let mut first = w.command();
    first
        .args(["call", "fake.echo", r#"{"message":"x"}"#])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut first = first.spawn().unwrap();
    wait_until("initialize reached the server", Duration::from_secs(10), || {
        std::fs::read_to_string(&record).unwrap_or_default().contains("initialize")
    });
    let files = w.sup_files();
    w.kill_daemon();
    assert_eq!(first.wait().unwrap().code(), Some(3));
    assert_eq!(w.call("fake.echo", r#"{"message":"restarted"}"#).ok(), "restarted\n");
    w.assert_log_has("stored no session: restarting the server");
    assert_eq!(w.sup_files(), files, "the same supervisor");
    let initializes = std::fs::read_to_string(&record).unwrap().matches("\"initialize\"").count();
    assert_eq!(initializes, 2, "the restarted process was initialized once more");
}

/// `stop --all` after the daemon was killed still stops the supervisors it left:
/// a daemon adopts them to stop them.
#[test]
fn stop_all_after_a_daemon_kill_stops_the_orphans() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let inst = w.instance("fake").unwrap();
    let (sup, child) = (inst["supervisor_pid"].as_i64().unwrap() as i32, inst["pid"].as_i64().unwrap() as i32);
    w.kill_daemon();
    w.run(&["stop", "--all"]).ok();
    wait_until("supervisor and server are gone", Duration::from_secs(10), || !alive(sup) && !alive(child));
    assert!(w.sup_files().is_empty(), "{:?}", w.sup_files());
}

/// The context switches of process `pid` so far: each is a wake-up.
fn wakeups(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .filter(|l| l.starts_with("voluntary_ctxt_switches") || l.starts_with("nonvoluntary_ctxt_switches"))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
        .sum()
}

/// Idle costs nothing (attach protocol 1.2): the supervisor of an idle server is not
/// woken at all, by no timer and no heartbeat, and stays attached past the 10 s of
/// silence that ended a 1.1 daemon's link. A supervisor that hangs while a call waits
/// on it is still found: the call's heartbeats go unanswered, and after 10 s the
/// instance is lost and the call fails, naming the silence; the hung supervisor is
/// stopped with its server.
#[test]
fn an_idle_supervisor_sleeps_and_a_hung_one_is_found_while_a_call_waits() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let inst = w.instance("fake").unwrap();
    let sup = inst["supervisor_pid"].as_i64().unwrap() as i32;
    let child = pid_of(&w, "fake");
    std::thread::sleep(Duration::from_millis(500));
    let before = wakeups(sup);
    std::thread::sleep(Duration::from_secs(11));
    assert_eq!(wakeups(sup), before, "the supervisor of an idle server woke");
    let log = std::fs::read_to_string(w.path("state/supervisors.log")).unwrap();
    assert!(!log.contains("daemon detached"), "{log}");
    assert_eq!(w.call("fake.echo", r#"{"message":"still"}"#).ok(), "still\n");
    assert_eq!(pid_of(&w, "fake"), child);

    /// Lets the stopped supervisor go and ends it, even when the test fails.
    struct Resume(i32, i32);
    impl Drop for Resume {
        fn drop(&mut self) {
            for pid in [self.0, self.1] {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = kill(Pid::from_raw(self.0), Signal::SIGCONT);
        }
    }
    kill(Pid::from_raw(sup), Signal::SIGSTOP).unwrap();
    let _resume = Resume(sup, child);
    let started = std::time::Instant::now();
    let run = w.run(&["call", "fake.slow", r#"{"ms":120000}"#]);
    let took = started.elapsed();
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(run.stderr.contains("silent"), "{}", run.stderr);
    assert!(took >= Duration::from_secs(10) && took < Duration::from_secs(60), "{took:?}");
    assert_eq!(w.instance("fake").unwrap()["state"], "lost");
    // Left running, it would come back beside the instance that replaces it, and the next
    // daemon would adopt both.
    wait_until("the hung supervisor and its server are stopped", Duration::from_secs(10), || {
        !alive(sup) && !alive(child)
    });
    assert!(w.sup_files().is_empty(), "{:?}", w.sup_files());
    assert_eq!(w.call("fake.echo", r#"{"message":"again"}"#).ok(), "again\n");
}

/// The one binary, which every supervisor maps, stays position-independent, so the
/// kernel places it at a random address in every process (docs/security.md, "The
/// binary's address"): an ELF executable of type `ET_DYN` (3), not `ET_EXEC` (2).
#[test]
fn the_binary_stays_position_independent() {
    let head = std::fs::read(crate::harness::mcpx_bin()).unwrap();
    assert_eq!(&head[..4], b"\x7fELF");
    let e_type = u16::from_le_bytes([head[16], head[17]]);
    assert_eq!(e_type, 3, "e_type {e_type}: not a position-independent executable");
}

/// The supervisor blocks `SIGCHLD` but while it waits; its server must not inherit that
/// mask, or a server that waits for a child of its own (here a shell, `sleep & wait`)
/// never hears of its exit and never starts. No signal is blocked in the server.
#[test]
fn a_supervised_server_starts_with_no_signal_blocked() {
    let script = format!("sleep 0.2 & wait; exec {}", fake_server());
    let w = World::new(json!({
        "fake": { "command": "sh", "args": ["-c", script], "mcpx": { "startTimeout": "10s" } }
    }));
    assert_eq!(w.call("fake.echo", r#"{"message":"up"}"#).ok(), "up\n");
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid_of(&w, "fake"))).unwrap();
    let blocked = status.lines().find_map(|l| l.strip_prefix("SigBlk:")).unwrap().trim();
    assert_eq!(u64::from_str_radix(blocked, 16).unwrap(), 0, "the server starts with signals blocked: {blocked}");
}
