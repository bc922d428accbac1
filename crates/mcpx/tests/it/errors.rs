//! Bad input gets one clear line and the contract's exit status; the messages are
//! snapshotted so a change to them is a reviewed change.

use serde_json::json;

use crate::harness::{World, fake_server};

/// Runs `mcpx <args>`, expects `code`, and returns stderr with the world's
/// directory redacted.
#[track_caller]
fn fails(w: &World, args: &[&str], code: i32) -> String {
    let run = w.run(args);
    assert_eq!(run.code, code, "`mcpx {}`: {run:?}", args.join(" "));
    assert!(run.stdout.is_empty(), "errors go to stderr: {run:?}");
    let err = w.redact(run.stderr.trim_end());
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn malformed_config_names_file_and_line() {
    let w = World::new(json!({}));
    w.write_config("{\n  \"mcpServers\": {\n    \"a\": { \"command\": \"x\" ]\n  }\n}\n");
    insta::assert_snapshot!(fails(&w, &["call", "a.echo", "{}"], 2));
}

#[test]
fn unknown_key_in_mcpx_block_names_file_and_key() {
    let w = World::new(json!({ "a": { "command": "x", "mcpx": { "idleTimeot": "5m" } } }));
    insta::assert_snapshot!(fails(&w, &["call", "a.echo", "{}"], 2));
}

#[test]
fn unset_variable_names_variable_and_server() {
    let w = World::new(json!({ "a": { "command": fake_server(), "env": { "TOKEN": "${MCPX_TEST_SURELY_UNSET}" } } }));
    insta::assert_snapshot!(fails(&w, &["call", "a.echo", "{}"], 2));
}

#[test]
fn unknown_server_lists_the_names_that_exist() {
    let w = World::new(json!({ "alpha": { "command": "x" }, "beta": { "command": "y" } }));
    insta::assert_snapshot!(fails(&w, &["call", "gamma.tool", "{}"], 2));
}

#[test]
fn arguments_that_are_not_an_object() {
    let w = World::new(json!({ "a": { "command": fake_server() } }));
    insta::assert_snapshot!("arguments_array", fails(&w, &["call", "a.echo", "[1,2]"], 2));
    insta::assert_snapshot!("arguments_not_json", fails(&w, &["call", "a.echo", "{oops"], 2));
}

#[test]
fn json_errors_carry_kind_and_message_on_stdout() {
    let w = World::new(json!({ "alpha": { "command": "x" } }));
    let run = w.run(&["call", "gamma.tool", "{}", "--json"]);
    assert_eq!(run.code, 2);
    assert_eq!(run.json()["error"]["kind"], "unknown_server");
}

/// A command that does not exist and a server that exits before `initialize`:
/// both show `error` with the reason (and stderr tail) in `ls` and `status`, their
/// calls exit 4, and the daemon keeps serving the other servers.
#[test]
fn broken_servers_show_error_and_the_rest_keeps_working() {
    let w = World::new(json!({
        "missing": { "command": "mcpx-no-such-command" },
        "dies": { "command": fake_server(), "env": { "FAKE_EXIT_BEFORE_INIT": "3" } },
        "good": { "command": fake_server() },
    }));
    let missing = w.run_with(&["call", "missing.tool", "{}"], |c| {
        c.env("PATH", "/usr/bin:/bin");
    });
    assert_eq!(missing.code, 4);
    insta::assert_snapshot!("missing_command", w.redact(missing.stderr.trim_end()));
    let dies = w.run(&["call", "dies.echo", "{}"]);
    assert_eq!(dies.code, 4);
    insta::assert_snapshot!("exits_before_initialize", w.redact(dies.stderr.trim_end()));

    assert_eq!(w.call("good.echo", r#"{"message":"still here"}"#).ok(), "still here\n");
    for name in ["missing", "dies"] {
        assert_eq!(w.ls_row(name)["state"], "error");
        let inst = w.instance(name).unwrap();
        assert_eq!(inst["state"], "error", "{inst}");
        assert!(inst["last_error"].as_str().is_some_and(|e| !e.is_empty()));
    }
    assert_eq!(w.instance("dies").unwrap()["stderr_tail"], "fake server failing before initialize\n");
    let human = w.run(&["status"]).ok();
    assert!(human.contains("fake server failing before initialize"), "{human}");
}

/// An expanded `${VAR}` value may be a secret: errors name the command as written.
#[test]
fn launch_errors_never_print_expanded_values() {
    let w = World::new(json!({ "s": { "command": "${MCPX_T_SECRET}/bin/server" } }));
    let run = w.run_with(&["call", "s.tool", "{}", "--json"], |c| {
        c.env("MCPX_T_SECRET", "/hunter2-secret");
    });
    assert_eq!(run.code, 4, "{run:?}");
    let everything = format!("{}{}{}", run.stdout, w.run(&["status", "--json"]).stdout, w.log());
    assert!(!everything.contains("hunter2"), "the secret leaked: {everything}");
    assert!(run.stdout.contains("${MCPX_T_SECRET}/bin/server"), "{}", run.stdout);
}

/// The control API answers a malformed body with its JSON error body.
#[test]
fn a_malformed_request_body_gets_a_json_error() {
    let w = World::new(json!({}));
    w.run(&["ls"]).ok();
    #[allow(clippy::disallowed_methods)] // Reason: curl is the documented way to reach the API.
    let out = std::process::Command::new("curl")
        .args(["-s", "--unix-socket"])
        .arg(w.path("run/daemon.sock"))
        .args(["-H", "content-type: application/json", "-d", "{not json", "http://localhost/v1/ls"])
        .output();
    let Ok(out) = out else { panic!("curl is needed for this test") };
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["error"]["kind"], "usage", "{body}");
}

/// The runtime directory must be private; a socket path over the platform limit
/// fails at once with a message rather than hanging.
#[test]
fn unsafe_runtime_dir_and_long_socket_path_are_refused() {
    let w = World::new(json!({}));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(w.path("run"), std::fs::Permissions::from_mode(0o755)).unwrap();
    insta::assert_snapshot!("runtime_dir_mode", fails(&w, &["ls"], 3));
    std::fs::set_permissions(w.path("run"), std::fs::Permissions::from_mode(0o700)).unwrap();

    let long = w.path(&"d".repeat(100));
    let run = w.run_with(&["ls"], |c| {
        c.env("MCPX_RUNTIME_DIR", &long);
    });
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr.contains("over the platform limit of 107") && run.stderr.contains("MCPX_RUNTIME_DIR"),
        "{}",
        run.stderr
    );
    // Short enough for daemon.sock, too long for a supervisor's socket: refused too.
    let base = w.dir.path().as_os_str().len();
    let near = w.path(&"n".repeat(90 - base - 1));
    let run = w.run_with(&["ls"], |c| {
        c.env("MCPX_RUNTIME_DIR", &near);
    });
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("/sup/") && run.stderr.contains("over the platform limit"), "{}", run.stderr);
}

/// A second foreground daemon is refused while one runs.
#[test]
fn a_second_daemon_is_refused() {
    let w = World::new(json!({}));
    w.run(&["ls"]).ok();
    let run = w.run(&["daemon"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("a daemon is already running"), "{}", run.stderr);
}

#[test]
fn upgrade_refuses_a_binary_that_is_not_mcpx_and_call_needs_a_tool_name() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.run(&["ls"]).ok();
    let pid = w.daemon_pid();
    let run = w.run(&["upgrade", "--binary", "/bin/true"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("is not an mcpx binary"), "{}", run.stderr);
    assert_eq!(w.daemon_pid(), pid, "the daemon keeps running");
    insta::assert_snapshot!("call_without_tool", fails(&w, &["call", "fake.", "{}"], 2));
}
