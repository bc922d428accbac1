//! An older mcpx and this one, as they meet during an upgrade: a CLI from before
//! this version against this daemon, and this CLI against a daemon from before it.
//! The older mcpx is built by `scripts/setup-e2e.sh` from the commit `e2e/compat-rev`
//! names (the last before `mcpx call` became one request), into `e2e/compat/mcpx`.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::harness::{Run, Serve, World, e2e_dir};

/// The older mcpx binary.
fn previous() -> PathBuf {
    let bin = e2e_dir().join("compat/mcpx");
    assert!(bin.exists(), "{} is missing: run scripts/setup-e2e.sh, which builds it", bin.display());
    bin
}

/// Runs the older mcpx with `args` in `w`.
fn run_previous(w: &World, args: &[&str]) -> Run {
    let mut cmd = w.launcher().program(previous());
    cmd.args(args).stdin(std::process::Stdio::null());
    Run::of(cmd, &format!("previous mcpx {}", args.join(" ")))
}

/// The running daemon's build, as `mcpx status --json` of this CLI reads it.
fn daemon_build(w: &World) -> Value {
    w.status()["daemon"]["build"].clone()
}

/// The world both directions use: the fake server, whose `echo` requires `message`.
fn world() -> World {
    let w = World::new(json!({}));
    w.set_servers(json!({ "fake": { "command": w.fake_server() } }));
    w
}

/// `mcpx serve` of `cmd`'s binary, initialized, answers a call of the fake's echo.
fn serve_calls(cmd: std::process::Command) {
    let mut cmd = cmd;
    cmd.arg("serve");
    let mut serve = Serve::start_cmd_args(cmd, json!({}));
    let answer = serve.request("tools/call", json!({ "name": "fake__echo", "arguments": { "message": "served" } }));
    assert_eq!(answer["result"]["content"][0]["text"], "served", "{answer}");
}

/// A CLI from before this version, against this daemon: its two-request `call`
/// (`/v1/tools`, then `/v1/call` with the arguments it typed) in each form, its
/// usage error, `ls`, `status` and `serve` all work, and the daemon is still this one.
#[test]
fn an_older_cli_works_with_this_daemon() {
    let w = world();
    assert_eq!(w.run(&["tools", "fake"]).code, 0);
    let ours = daemon_build(&w);
    let hi = run_previous(&w, &["call", "fake.echo", "message=hi"]);
    assert_eq!((hi.code, hi.stdout.as_str()), (0, "hi\n"), "{hi:?}");
    let json = run_previous(&w, &["call", "fake.echo", r#"{"message":"j"}"#]);
    assert_eq!((json.code, json.stdout.as_str()), (0, "j\n"), "{json:?}");
    let missing = run_previous(&w, &["call", "fake.echo"]);
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(missing.stderr.contains("missing required argument `message`"), "{missing:?}");
    let ls = run_previous(&w, &["ls"]);
    assert!(ls.code == 0 && ls.stdout.contains("fake"), "{ls:?}");
    let status = run_previous(&w, &["status", "--json"]);
    assert_eq!(status.code, 0, "{status:?}");
    assert_eq!(status.json()["daemon"]["build"], ours, "the older CLI left this daemon running");
    serve_calls(w.launcher().program(previous()));
    assert_eq!(daemon_build(&w), ours);
}

/// This CLI against a daemon from before it: `call` with `key=value` pairs, which
/// that daemon refuses having run nothing, is typed by the CLI and sent again, with
/// the same usage errors as against this daemon; a JSON object, `ls`, `status` and
/// `serve` work as they are; the daemon stays the older one throughout.
#[test]
fn this_cli_works_with_an_older_daemon() {
    let w = world();
    assert_eq!(run_previous(&w, &["tools", "fake"]).code, 0);
    let theirs = daemon_build(&w);
    assert_ne!(theirs, Value::Null);
    let record_before = w.status();
    let hi = w.run(&["call", "fake.echo", "message=hi"]);
    assert_eq!((hi.code, hi.stdout.as_str()), (0, "hi\n"), "{hi:?}");
    let json = w.run(&["call", "fake.echo", r#"{"message":"j"}"#]);
    assert_eq!((json.code, json.stdout.as_str()), (0, "j\n"), "{json:?}");
    let unknown = w.run(&["call", "fake.echo", "message=x", "mesage=y"]);
    assert_eq!(unknown.code, 2, "{unknown:?}");
    assert!(
        unknown.stderr.contains("unknown argument `mesage`; did you mean `message`?")
            && unknown.stderr.contains("usage: mcpx call fake.echo message=STRING"),
        "{unknown:?}"
    );
    let ls = w.run(&["ls"]);
    assert!(ls.code == 0 && ls.stdout.contains("fake"), "{ls:?}");
    serve_calls(w.command());
    assert_eq!(daemon_build(&w), theirs, "this CLI left the older daemon running");
    assert_eq!(w.status()["daemon"]["pid"], record_before["daemon"]["pid"]);
}
