//! Pools (design: "Pools"): sharing × scope, limits, crashes, and every message
//! routed to its caller, driven through the real binary.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{World, alive, fake_server, wait_until};

fn pids(w: &World, server: &str) -> Vec<i64> {
    let mut pids: Vec<i64> = w.status()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["server"] == server && i["state"] == "running")
        .map(|i| i["pid"].as_i64().unwrap())
        .collect();
    pids.sort();
    pids
}

fn scoped(scope: &str) -> serde_json::Value {
    json!({ "fake": { "command": fake_server(), "mcpx": { "scope": scope } } })
}

/// Two sessions get two processes; state made in one is not seen in the other; the
/// same session twice reaches the same process.
#[test]
fn sessions_get_their_own_instances() {
    let w = World::new(scoped("session"));
    let in_session = |id: &str| {
        let id = id.to_owned();
        move |c: &mut std::process::Command| {
            c.env("MCPX_SESSION_ID", &id);
        }
    };
    assert_eq!(w.run_with(&["call", "fake.counter", "{}"], in_session("a")).ok(), "1\n");
    assert_eq!(w.run_with(&["call", "fake.counter", "{}"], in_session("a")).ok(), "2\n");
    assert_eq!(w.run_with(&["call", "fake.counter", "{}"], in_session("b")).ok(), "1\n", "session b saw a's state");
    assert_eq!(w.run(&["call", "fake.counter", "{}", "--session", "a"]).ok(), "3\n");
    assert_eq!(pids(&w, "fake").len(), 2);
    let keys: Vec<String> =
        w.status()["instances"].as_array().unwrap().iter().map(|i| i["key"].as_str().unwrap().to_owned()).collect();
    assert!(keys.contains(&"session:a".to_owned()) && keys.contains(&"session:b".to_owned()), "{keys:?}");
}

/// Two git worktrees of one repository get their own `worktree` instances.
#[test]
fn worktrees_get_their_own_instances() {
    let w = World::new(scoped("worktree"));
    // A repository and a linked worktree, laid out as git-worktree(1) does.
    let repo = w.path("repo");
    let linked = w.path("linked");
    std::fs::create_dir_all(repo.join(".git/worktrees/linked")).unwrap();
    std::fs::create_dir_all(linked.join("src")).unwrap();
    std::fs::write(linked.join(".git"), format!("gitdir: {}\n", repo.join(".git/worktrees/linked").display())).unwrap();
    std::fs::write(repo.join(".git/worktrees/linked/commondir"), "../..\n").unwrap();
    let from = |dir: std::path::PathBuf| {
        move |c: &mut std::process::Command| {
            c.current_dir(&dir);
        }
    };
    assert_eq!(w.run_with(&["call", "fake.counter", "{}"], from(repo.clone())).ok(), "1\n");
    assert_eq!(w.run_with(&["call", "fake.counter", "{}"], from(linked.join("src"))).ok(), "1\n");
    assert_eq!(w.run_with(&["call", "fake.counter", "{}"], from(repo.clone())).ok(), "2\n");
    assert_eq!(pids(&w, "fake").len(), 2);
}

/// Two parent processes get their own `pid` instances, and one is stopped when its
/// parent exits.
#[test]
fn parent_processes_get_their_own_instances() {
    let w = World::new(scoped("pid"));
    let mcpx = crate::harness::mcpx_bin();
    // Each `sh` is a distinct parent process of the mcpx it runs.
    let via_shell = |n: usize| {
        let mut cmd = w.command();
        cmd.env("MCPX_BIN", &mcpx).args(["call", "fake.counter", "{}"]);
        let script = format!("\"$MCPX_BIN\" call fake.counter '{{}}'; \"$MCPX_BIN\" call fake.counter '{{}}' # {n}");
        #[allow(clippy::disallowed_methods)] // Reason: a shell as a distinct parent process.
        let mut shell = std::process::Command::new("/bin/sh");
        shell.args(["-c", &script]).envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))));
        shell.current_dir(w.dir.path());
        shell.output().unwrap()
    };
    let first = via_shell(1);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert_eq!(String::from_utf8_lossy(&first.stdout), "1\n2\n");
    let second = via_shell(2);
    assert_eq!(String::from_utf8_lossy(&second.stdout), "1\n2\n", "another parent shares no state");
    // Both shells have exited: their instances are released.
    wait_until("instances of exited parents are stopped", Duration::from_secs(10), || pids(&w, "fake").is_empty());
}

/// C11: 50 concurrent first calls for one key start exactly one process, and none is
/// left once the session is released (idle).
#[test]
fn c11_fifty_concurrent_first_calls_start_one_process() {
    let w = World::new(json!({}));
    let record = w.path("calls.jsonl");
    w.set_servers(json!({ "fake": {
        "command": fake_server(),
        "env": { "FAKE_RECORD": record },
        "mcpx": { "scope": "session", "idleTimeout": "1s" },
    } }));
    let handles: Vec<_> = (0..50)
        .map(|i| {
            let mut cmd = w.launcher().command();
            cmd.env("MCPX_SESSION_ID", "s").args([
                "call",
                "fake.echo",
                &json!({ "message": format!("m{i}") }).to_string(),
            ]);
            std::thread::spawn(move || cmd.output().unwrap())
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        let out = h.join().unwrap();
        assert!(out.status.success(), "call {i}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("m{i}\n"));
    }
    let initializes = std::fs::read_to_string(&record).unwrap().matches("\"initialize\"").count();
    assert_eq!(initializes, 1, "more than one process started");
    wait_until("the idle instance is released", Duration::from_secs(15), || pids(&w, "fake").is_empty());
}

/// The barrier tool completes with 10 calls in flight on a shared instance; an
/// exclusive one never sees more than one.
#[test]
fn shared_runs_calls_together_and_exclusive_one_at_a_time() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let run_many = |w: &World, n: usize, tool: &str, args: serde_json::Value| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let mut cmd = w.launcher().command();
                cmd.args(["call", tool, &args.to_string()]);
                std::thread::spawn(move || cmd.output().unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
    };
    for out in run_many(&w, 10, "fake.barrier", json!({ "n": 10, "timeout_ms": 20000 })) {
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "barrier 10 reached\n",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let w = World::new(json!({ "fake": { "command": fake_server(), "mcpx": { "sharing": "exclusive" } } }));
    for out in run_many(&w, 6, "fake.echo", json!({ "message": "x", "delay_ms": 100 })) {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(w.call("fake.inflight", "{}").ok(), "1\n");
    assert_eq!(pids(&w, "fake").len(), 1);
}

/// C07: progress three times reaches the caller with its token; a cancellation
/// (Ctrl-C) while the server runs a slow call reaches the server with that call's
/// upstream id, and the call returns at once.
#[test]
fn c07_progress_and_cancellation_reach_their_peers() {
    let w = World::new(json!({}));
    let record = w.path("calls.jsonl");
    w.set_servers(json!({ "fake": { "command": fake_server(), "env": { "FAKE_RECORD": record } } }));
    let run = w.run(&["call", "fake.progress", r#"{"count":3,"interval_ms":150}"#, "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let progress: Vec<serde_json::Value> = run
        .stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{}", run.stderr);
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == "mcpx-call"), "{progress:?}");
    assert_eq!(progress[2]["params"]["progress"], 3);

    let mut slow = w.command();
    slow.args(["call", "fake.slow", r#"{"ms":20000}"#]).stderr(std::process::Stdio::piped());
    let mut slow = slow.spawn().unwrap();
    wait_until("the slow call reaches the server", Duration::from_secs(10), || {
        std::fs::read_to_string(&record).unwrap_or_default().contains("\"slow\"")
    });
    // The server has the call, so it is in flight: that is all the Ctrl-C needs (the
    // CLI listens for it from its first poll, before it sends the call).
    let sent = Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(slow.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let status = slow.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(sent.elapsed() < Duration::from_secs(5), "the call waited for the tool");
    wait_until("the cancellation reaches the server", Duration::from_secs(10), || {
        std::fs::read_to_string(&record).unwrap_or_default().contains("notifications/cancelled")
    });
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&record).unwrap().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let call = lines.iter().find(|m| m["params"]["name"] == "slow").unwrap();
    let cancel = lines.iter().find(|m| m["method"] == "notifications/cancelled").unwrap();
    assert_eq!(cancel["params"]["requestId"], call["id"]);
}

/// C05: `roots/list` in the middle of a call is answered with the caller's
/// directory and the call completes; sampling from a shell caller gets an error
/// response and the call ends visibly.
#[test]
fn c05_server_requests_mid_call() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let dir = w.path("project");
    std::fs::create_dir(&dir).unwrap();
    let run = w.run_with(&["call", "fake.roots", "{}"], |c| {
        c.current_dir(&dir);
    });
    let roots: serde_json::Value = serde_json::from_str(run.ok().trim()).unwrap();
    assert_eq!(roots["roots"][0]["uri"], format!("file://{}", dir.display()));
    let sample = w.run(&["call", "fake.sample", "{}"]);
    assert_eq!(sample.code, 1, "{sample:?}");
    assert!(sample.stdout.contains("mcpx cannot sample a model from the shell"), "{sample:?}");
}

/// C12: a server that exits before `initialize`, and one that exits mid-call: the
/// caller gets exit 4 naming the exit and the stderr tail at once; the next call
/// starts it again; five quick failures make a crash-loop, shown in ls and status,
/// which `mcpx restart` clears.
#[test]
fn c12_crashes_fail_fast_restart_and_crash_loop() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let started = Instant::now();
    let run = w.run(&["call", "fake.exit", r#"{"code":7}"#, "--json"]);
    assert_eq!(run.code, 4, "{run:?}");
    let message = run.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("exited with code 7") && message.contains("exiting with 7"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(10), "the cause is the exit, not a timeout");
    assert_eq!(w.call("fake.echo", r#"{"message":"back"}"#).ok(), "back\n", "the next call restarts it");

    let dies = World::new(json!({ "dies": { "command": fake_server(), "env": { "FAKE_EXIT_BEFORE_INIT": "3" } } }));
    // The first restart is immediate: two calls in a row both really start it.
    for _ in 0..2 {
        let run = dies.run(&["call", "dies.echo", "{}", "--json"]);
        let error = run.json()["error"]["message"].as_str().unwrap_or("").to_owned();
        assert!(error.contains("exited with code 3"), "{error}");
    }
    // Then restarts back off: a call right away fails fast with the last error.
    let run = dies.run(&["call", "dies.echo", "{}", "--json"]);
    let error = run.json()["error"]["message"].as_str().unwrap_or("").to_owned();
    assert!(error.contains("next start in") && error.contains("exited with code 3"), "{error}");
    wait_out_backoff(&error);
    let mut codes = Vec::new();
    for _ in 0..8 {
        let run = dies.run(&["call", "dies.echo", "{}", "--json"]);
        codes.push(run.code);
        let error = run.json()["error"]["message"].as_str().unwrap_or("").to_owned();
        if error.contains("crash-loop") {
            break;
        }
        assert!(error.contains("exited with code 3") || error.contains("next start in"), "{error}");
        // Wait out the backoff so the next call is a real start. A real start's error
        // does not say how long the next backoff is; the next call, failing fast, does.
        wait_out_backoff(&error);
    }
    assert!(codes.iter().all(|c| *c == 4), "{codes:?}");
    assert_eq!(dies.ls_row("dies")["state"], "crash-loop");
    let run = dies.run(&["call", "dies.echo", "{}", "--json"]);
    assert!(run.json()["error"]["message"].as_str().unwrap().contains("crash-loop"));
    // restart clears the count (and fails again here, which is a fresh failure).
    let _ = dies.run(&["restart", "dies"]);
    assert_ne!(dies.ls_row("dies")["state"], "crash-loop");
}

/// Sleeps through what is left of a restart backoff, as the daemon reported it in
/// `error` ("next start in 1.9s"), and a little more for the rounding to tenths. The
/// backoff window itself must pass (it is what is tested), so this is the one wait
/// that is a sleep, and it is exactly as long as the daemon says.
fn wait_out_backoff(error: &str) {
    let Some((_, rest)) = error.split_once("next start in ") else { return };
    let seconds: f64 = rest.split_once('s').and_then(|(n, _)| n.parse().ok()).expect("a backoff in seconds");
    std::thread::sleep(Duration::from_secs_f64(seconds) + Duration::from_millis(100));
}

/// `idleTimeout` stops an instance; `max` stops the least recently used idle one.
#[test]
fn idle_instances_are_reaped_and_max_evicts_the_least_recent() {
    let w = World::new(json!({ "fake": { "command": fake_server(), "mcpx": { "idleTimeout": "1s" } } }));
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let pid = pids(&w, "fake")[0] as i32;
    wait_until("the idle instance is stopped", Duration::from_secs(15), || !alive(pid));

    let w = World::new(json!({ "fake": { "command": fake_server(), "mcpx": { "scope": "session", "max": 2 } } }));
    let call_as = |session: &str| {
        w.run_with(&["call", "fake.echo", r#"{"message":"x"}"#], |c| {
            c.env("MCPX_SESSION_ID", session);
        })
        .ok();
    };
    call_as("a");
    call_as("b");
    let keyed = |w: &World| -> Vec<String> {
        let mut k: Vec<String> = w.status()["instances"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["state"] == "running")
            .map(|i| i["key"].as_str().unwrap().to_owned())
            .collect();
        k.sort();
        k
    };
    assert_eq!(keyed(&w), ["session:a", "session:b"]);
    call_as("b");
    call_as("c");
    assert_eq!(keyed(&w), ["session:b", "session:c"], "a was the least recently used");
}

/// `min: 1` starts the `global` instance with the daemon and keeps it past its
/// `idleTimeout`.
#[test]
fn min_starts_with_the_daemon_and_is_never_reaped() {
    let w = World::new(json!({ "fake": { "command": fake_server(), "mcpx": { "min": 1, "idleTimeout": "1s" } } }));
    // The daemon learns the config file from a first request, then a new daemon starts it.
    w.run(&["ls"]).ok();
    w.run(&["stop", "--all"]).ok();
    w.run(&["status"]).ok();
    wait_until("the min instance runs", Duration::from_secs(15), || pids(&w, "fake").len() == 1);
    let pid = pids(&w, "fake")[0];
    // Time past the idleTimeout must pass (it is what is tested): wait until status
    // shows the instance idle for 2 s, so the reaper, which runs every second, has
    // looked at it at least once while it was idle for over 1 s. If it was stopped
    // instead, the wait ends at once and the assertion says so.
    wait_until("the min instance has been idle for 2 s", Duration::from_secs(15), || {
        w.instance("fake").is_none_or(|i| i["state"] != "running" || i["idle_s"].as_u64() >= Some(2))
    });
    assert_eq!(pids(&w, "fake"), [pid], "a min instance was reaped");
}

/// `call`-scoped instances under concurrency: every one is stopped after its call,
/// none is left behind (nor its supervisor).
#[test]
fn call_scoped_instances_never_leak() {
    let w = World::new(json!({ "fake": { "command": fake_server(), "mcpx": { "scope": "call" } } }));
    for _ in 0..3 {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let mut cmd = w.launcher().command();
                cmd.args(["call", "fake.pid", "{}"]);
                std::thread::spawn(move || cmd.output().unwrap())
            })
            .collect();
        for h in handles {
            assert!(h.join().unwrap().status.success());
        }
    }
    wait_until("every call's instance and supervisor are gone", Duration::from_secs(20), || w.sup_files().is_empty());
    assert!(pids(&w, "fake").is_empty());
}
