//! `mcpx.sandbox` (`docs/configuration.md`, "Sandbox"): a server confined by the kernel,
//! from its supervisor, is refused every way out its sandbox forbids; unconfined, the
//! same attempts succeed; the confinement outlives the daemon; a sandbox the kernel
//! cannot enforce keeps the server from running at all.

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::harness::{World, fake_server};

/// Where a hostile server would go: a secret file outside its paths, a link to it
/// inside them, a file to create outside them, a local TCP listener (counting the
/// connections it gets), the daemon's socket and the daemon's pid.
struct Targets {
    allowed: PathBuf,
    secret: PathBuf,
    link: PathBuf,
    outside: PathBuf,
    port: u16,
    accepted: Arc<AtomicUsize>,
}

impl Targets {
    fn new(w: &World) -> Targets {
        let allowed = w.path("allowed");
        std::fs::create_dir_all(&allowed).unwrap();
        let secret = w.path("secret.txt");
        std::fs::write(&secret, "secret").unwrap();
        let link = allowed.join("link.txt");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let (port, accepted) = listen();
        Targets { allowed, secret, link, outside: w.path("made.txt"), port, accepted }
    }

    /// What each attempt of `fake.escape` got, by attempt.
    fn attempt(&self, w: &World) -> serde_json::Map<String, Value> {
        w.run(&["ls"]).ok(); // a daemon to aim at
        let args = json!({
            "read": [self.secret, self.link],
            "write": [self.outside],
            "connect": [self.port],
            "unix": [w.path("run/daemon.sock")],
            "signal": [w.daemon_pid().expect("a daemon")],
        });
        let out = w.run(&["call", "fake.escape", &args.to_string(), "--json"]).json();
        let text = out["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{out}"));
        serde_json::from_str::<Value>(text).unwrap().as_object().unwrap().clone()
    }
}

/// A local TCP listener: its port, and how many connections it got.
fn listen() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let _ = (&stream).read(&mut [0; 1]);
        }
    });
    (port, accepted)
}

/// `fake` with the escape fixture, under `sandbox` (none: unconfined).
fn configure(w: &World, sandbox: Option<Value>) {
    let mut entry = json!({ "command": fake_server(), "env": { "FAKE_ESCAPE": "1" } });
    if let Some(sandbox) = sandbox {
        entry["mcpx"] = json!({ "sandbox": sandbox });
    }
    w.set_servers(json!({ "fake": entry }));
}

#[track_caller]
fn all_refused(got: &serde_json::Map<String, Value>, targets: &Targets) {
    assert_eq!(got.len(), 6, "{got:?}");
    for (attempt, answer) in got {
        let answer = answer.as_str().unwrap_or_default();
        assert!(!answer.starts_with("ok"), "{attempt} got through: {got:?}");
    }
    assert!(!targets.outside.exists(), "a file was made outside the sandbox");
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(targets.accepted.load(Ordering::SeqCst), 0, "the listener got a connection");
}

#[test]
fn a_confined_server_is_refused_every_way_out_and_an_unconfined_one_is_not() {
    let w = World::new(json!({}));
    let targets = Targets::new(&w);
    configure(&w, None);
    let got = targets.attempt(&w);
    assert!(got.values().all(|a| a == "ok"), "unconfined, every attempt succeeds: {got:?}");
    assert!(targets.outside.exists() && targets.accepted.load(Ordering::SeqCst) >= 1);
    std::fs::remove_file(&targets.outside).unwrap();
    targets.accepted.store(0, Ordering::SeqCst);

    configure(&w, Some(json!({ "preset": "binary", "read": [targets.allowed], "network": false })));
    let got = targets.attempt(&w);
    all_refused(&got, &targets);
    // Named paths and ports are the sandbox's own: what it grants still works.
    std::fs::write(targets.allowed.join("ok.txt"), "ok").unwrap();
    let args = json!({ "read": [targets.allowed.join("ok.txt")] });
    let ok = w.run(&["call", "fake.escape", &args.to_string(), "--json"]).json();
    assert!(ok["content"][0]["text"].as_str().unwrap().contains(":\"ok\""), "{ok}");

    // The confinement is the process's: it outlives the daemon and an upgrade.
    let pids = |w: &World| -> Vec<Value> {
        let instances = w.status()["instances"].as_array().cloned().unwrap_or_default();
        instances.iter().filter(|i| i["server"] == "fake").map(|i| i["pid"].clone()).collect()
    };
    let before = pids(&w);
    w.kill_daemon();
    all_refused(&targets.attempt(&w), &targets);
    // The adopted instance is the confined one (the unconfined one left with its entry).
    let adopted = pids(&w);
    assert!(adopted.len() == 1 && before.contains(&adopted[0]), "{before:?} -> {adopted:?}");
    w.run(&["upgrade"]).ok();
    all_refused(&targets.attempt(&w), &targets);
    assert_eq!(pids(&w), adopted, "the same, adopted server");
    assert!(targets.secret.exists() && !targets.link.starts_with(&targets.secret));
}

/// A sandbox that opens TCP ports lets the server reach those, and no other.
#[test]
fn a_sandbox_opens_the_ports_it_names_only() {
    let w = World::new(json!({}));
    let ((open, _), (closed, accepted)) = (listen(), listen());
    configure(&w, Some(json!({ "preset": "binary", "network": { "connect": [open] } })));
    let args = json!({ "connect": [open, closed] });
    let out = w.run(&["call", "fake.escape", &args.to_string(), "--json"]).json();
    let got: Value = serde_json::from_str(out["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(got[format!("connect {open}")], "ok", "{got}");
    assert!(got[format!("connect {closed}")].as_str().unwrap().starts_with("refused"), "{got}");
    assert_eq!(accepted.load(Ordering::SeqCst), 0);
}

/// Where the kernel cannot enforce a sandbox (a kernel without Landlock, simulated), the
/// server does not run: a `config` error naming the file and the server.
#[test]
fn a_sandbox_the_kernel_cannot_enforce_keeps_the_server_from_running() {
    let mut w = World::new(json!({}));
    w.env.push(("MCPX_TEST_LANDLOCK_ABI".to_owned(), "0".to_owned()));
    configure(&w, Some(json!({ "preset": "binary" })));
    let run = w.run(&["call", "fake.escape", "{}"]);
    assert_eq!(run.code, 2, "{run:?}");
    for words in ["server `fake`", "its sandbox cannot be enforced on this machine", "it does not run"] {
        assert!(run.stderr.contains(words), "{}", run.stderr);
    }
    assert!(w.instance("fake").is_none(), "it ran: {}", w.status());
    let row = w.ls_row("fake");
    assert_eq!(row["state"], "error", "ls says no start can succeed: {row}");
    assert!(row["error"].as_str().unwrap_or_default().contains("its sandbox cannot be enforced"), "{row}");
}

/// A sandboxed server that fails to start says it runs in a sandbox, that the kernel
/// does not name what it refused, and, for `npx` with the network off, that it cannot
/// download; `status --json` shows each instance's sandbox.
#[test]
fn a_sandboxed_server_that_fails_says_so() {
    let w = World::new(json!({}));
    let script = w.path("npx");
    // A stand-in for `npx`: it reads a file its sandbox does not grant, and fails.
    std::fs::write(&script, format!("#!/bin/sh\nexec cat {}\n", w.path("config.json").display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    w.set_servers(json!({
        "boxed": { "command": script, "mcpx": { "sandbox": { "preset": "binary" } } },
        "fake": { "command": fake_server(), "mcpx": { "sandbox": { "preset": "binary", "network": { "connect": [443] } } } },
    }));
    let run = w.run(&["call", "boxed.anything", "{}"]);
    assert_eq!(run.code, 4, "{run:?}");
    for words in ["it runs in a sandbox", "Landlock's audit records need root", "`npx` downloads the package"] {
        assert!(run.stderr.contains(words), "{words}: {}", run.stderr);
    }
    w.call("fake.echo", r#"{"message":"hi"}"#).ok();
    let status = w.instance("fake").unwrap();
    assert_eq!(status["sandbox"]["network"], json!({ "connect": [443], "bind": [] }), "{status}");
}

/// A server the daemon runs itself (`"supervised": false`) is confined the same way.
#[test]
fn an_unsupervised_server_is_confined_too() {
    let w = World::new(json!({}));
    let targets = Targets::new(&w);
    let sandbox = json!({ "preset": "binary", "read": [targets.allowed] });
    let entry = json!({ "command": fake_server(), "env": { "FAKE_ESCAPE": "1" },
        "mcpx": { "sandbox": sandbox, "supervised": false } });
    w.set_servers(json!({ "fake": entry }));
    all_refused(&targets.attempt(&w), &targets);
    assert_eq!(w.instance("fake").unwrap()["supervised"], false);
}
