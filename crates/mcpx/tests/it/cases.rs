//! The handed cases of the core (`C01`, `C02`, `C03`, `C14`): inputs that broke
//! other MCP software, each asserted by its positive outcome.

use std::time::Duration;

use serde_json::json;

use crate::harness::{World, fake_server, wait_until};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

/// C01: lines of 64 KiB + 1 and 1 MiB + 1 pass intact; one over the configured
/// limit fails alone with a size error; the instance answers the next call
/// without a respawn.
#[test]
fn c01_long_lines_pass_and_only_the_oversize_one_fails() {
    let w = World::new(json!({ "fake": { "command": fake_server(), "mcpx": { "maxMessageBytes": "2MiB" } } }));
    for bytes in [64 * KIB + 1, MIB + 1] {
        let run = w.run(&["call", "fake.big", &json!({ "line_bytes": bytes }).to_string(), "--json"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let text = run.json()["content"][0]["text"].as_str().unwrap().to_owned();
        assert!(text.len() > bytes - 200 && text.bytes().all(|b| b == b'x'), "line of {bytes} bytes arrived cut");
    }
    let pid = w.instance("fake").unwrap()["pid"].clone();
    let run = w.run(&["call", "fake.big", &json!({ "line_bytes": 2 * MIB + 1 }).to_string(), "--json"]);
    assert_eq!(run.code, 4, "{run:?}");
    let error = &run.json()["error"];
    assert_eq!(error["kind"], "protocol");
    assert!(error["message"].as_str().unwrap().contains("maxMessageBytes (2097152 bytes)"), "{error}");
    assert_eq!(w.call("fake.echo", r#"{"message":"next"}"#).ok(), "next\n");
    let inst = w.instance("fake").unwrap();
    assert_eq!(inst["pid"], pid, "the instance was respawned");
    assert!(inst["dropped_bytes"].as_u64().unwrap() > 2 * MIB as u64);
    w.assert_log_has("discarded a message over maxMessageBytes");
}

/// C02: plain log lines and a line holding only `{` on stdout are skipped and
/// logged; every reply still reaches its caller.
#[test]
fn c02_non_json_lines_on_stdout_are_skipped_and_logged() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    for i in 0..3 {
        let message = format!("reply {i}");
        assert_eq!(w.call("fake.junk", &json!({ "message": message }).to_string()).ok(), format!("{message}\n"));
    }
    let inst = w.instance("fake").unwrap();
    assert_eq!(inst["skipped_lines"], 9, "{inst}");
    for needle in ["skipped a stdout line that is not a JSON-RPC message", "line={", "Processing request"] {
        w.assert_log_has(needle);
    }
}

/// C03: 1 MiB on stderr before each reply never blocks the server; three calls
/// succeed and the stderr tail is in status.
#[test]
fn c03_a_megabyte_of_stderr_before_each_reply() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    for _ in 0..3 {
        let out = w.call("fake.stderr", &json!({ "bytes": MIB }).to_string()).ok();
        assert_eq!(out, format!("wrote {MIB} bytes to stderr\n"));
    }
    let tail = w.instance("fake").unwrap()["stderr_tail"].as_str().unwrap().to_owned();
    assert!(tail.len() > 1000 && tail.contains("eeee"), "stderr tail: {tail:?}");
}

/// C14: a server configured as `npx` resolves through the daemon's PATH and sees
/// the daemon's environment (HTTPS_PROXY), not a later caller's; with a minimal
/// PATH it shows `error` naming `npx` and the PATH searched, and its call exits 4.
#[test]
fn c14_command_resolution_and_environment_come_from_the_daemon() {
    let w = World::new(json!({ "tool": { "command": "npx", "args": ["-y", "some-mcp-server"] } }));
    // An `npx` of our own on the daemon's PATH, standing in for the real one.
    let bin = w.path("bin");
    std::fs::create_dir(&bin).unwrap();
    let npx = bin.join("npx");
    std::fs::write(&npx, format!("#!/bin/sh\nexec {} \"$@\"\n", fake_server())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&npx, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());

    let first = w.run_with(&["call", "tool.env", r#"{"name":"HTTPS_PROXY"}"#], |c| {
        c.env("PATH", &path).env("HTTPS_PROXY", "http://proxy.invalid:3128");
    });
    assert_eq!(first.ok(), "http://proxy.invalid:3128\n");
    let later = w.run_with(&["call", "tool.env", r#"{"name":"LATER_CALLER_VAR"}"#], |c| {
        c.env("PATH", &path).env("LATER_CALLER_VAR", "should-not-arrive");
    });
    assert_eq!(later.code, 1, "a later caller's variable reached the server: {later:?}");
    assert_eq!(later.stdout, "unset\n");
    w.run(&["stop", "--all"]).ok();

    // A daemon started with a minimal PATH.
    let minimal = "/nonexistent-bin";
    let run = w.run_with(&["call", "tool.env", r#"{"name":"HOME"}"#, "--json"], |c| {
        c.env("PATH", minimal);
    });
    assert_eq!(run.code, 4, "{run:?}");
    let message = run.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("`npx` not found on PATH (searched: /nonexistent-bin)"), "{message}");
    let row = w.ls_row("tool");
    assert_eq!(row["state"], "error");
    assert!(row["error"].as_str().unwrap().contains("npx"), "{row}");
    wait_until("status shows the failure", Duration::from_secs(5), || {
        w.instance("tool").is_some_and(|i| {
            i["state"] == "error" && i["last_error"].as_str().unwrap_or("").contains("/nonexistent-bin")
        })
    });
}

/// The command resolves through the child's PATH: the entry's `env.PATH` when it sets one.
#[test]
fn command_resolves_through_the_entry_path() {
    let w = World::new(json!({}));
    let bin = w.path("bin");
    std::fs::create_dir(&bin).unwrap();
    let script = bin.join("my-server");
    std::fs::write(&script, format!("#!/bin/sh\nexec {} \"$@\"\n", fake_server())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    w.set_servers(
        json!({ "s": { "command": "my-server", "env": { "PATH": format!("{}:/usr/bin:/bin", bin.display()) } } }),
    );
    assert_eq!(w.call("s.echo", r#"{"message":"found"}"#).ok(), "found\n");
}
