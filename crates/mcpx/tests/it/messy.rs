//! Messy setups: a wrong entry in a project file fails only itself, and every other
//! server, in that file and from the user config, keeps working.

use std::path::PathBuf;

use serde_json::json;

use crate::harness::{Run, World, fake_server};

/// A world without an explicit config file: a project `.mcp.json` in its directory
/// holding `good` and `bad` (the entry under test), trusted, a user config holding
/// `user`, and a directory `below` the project file to run commands in.
fn project(bad: serde_json::Value) -> (World, PathBuf) {
    let mut w = World::new(json!({}));
    w.unset.push("MCPX_CONFIG".to_owned());
    let xdg = w.path("xdg");
    std::fs::create_dir_all(xdg.join("mcpx")).unwrap();
    let user = json!({ "mcpServers": { "user": { "command": fake_server() } } });
    std::fs::write(xdg.join("mcpx/config.json"), user.to_string()).unwrap();
    w.env.push(("XDG_CONFIG_HOME".to_owned(), xdg.display().to_string()));
    let servers = json!({ "mcpServers": { "good": { "command": fake_server() }, "bad": bad } });
    std::fs::write(w.path(".mcp.json"), servers.to_string()).unwrap();
    let below = w.path("below");
    std::fs::create_dir_all(&below).unwrap();
    w.trust_in(&below);
    (w, below)
}

/// Runs `mcpx <args>` in `dir`.
fn run_in(w: &World, dir: &PathBuf, args: &[&str]) -> Run {
    w.run_with(args, |cmd| {
        cmd.current_dir(dir);
    })
}

/// The good server and the user's server work, `ls` shows `bad` as `error` naming
/// the file, the server and `needle`, `status --json` lists it in
/// `daemon.config_errors`, and calling `bad` exits 2 with that message.
#[track_caller]
fn only_the_bad_entry_fails(bad: serde_json::Value, needle: &str) {
    let (w, below) = project(bad);
    let dir = w.dir.path().to_path_buf();
    assert_eq!(run_in(&w, &dir, &["call", "good.echo", r#"{"message":"hi"}"#]).ok(), "hi\n");
    assert_eq!(run_in(&w, &below, &["call", "user.echo", r#"{"message":"up"}"#]).ok(), "up\n");
    let ls = run_in(&w, &below, &["ls", "--json"]);
    assert_eq!(ls.code, 0, "ls: {ls:?}");
    let rows = ls.json();
    let row = rows.as_array().unwrap().iter().find(|r| r["name"] == "bad").unwrap_or_else(|| panic!("{rows}"));
    assert_eq!(row["state"], "error", "{row}");
    let error = row["error"].as_str().unwrap();
    for part in [".mcp.json", "`bad`", needle] {
        assert!(error.contains(part), "`{part}` not in {error}");
    }
    let status = w.status();
    let errors = status["daemon"]["config_errors"].as_array().unwrap_or_else(|| panic!("{status}"));
    assert!(
        errors.iter().any(|e| e["server"] == "bad" && e["message"].as_str().is_some_and(|m| m.contains(needle))),
        "{status}"
    );
    let call = run_in(&w, &below, &["call", "bad.echo", "{}"]);
    assert_eq!(call.code, 2, "{call:?}");
    assert!(call.stderr.contains(needle), "{call:?}");
}

#[test]
fn an_unknown_key_in_an_mcpx_block_fails_only_its_entry() {
    only_the_bad_entry_fails(json!({ "command": fake_server(), "mcpx": { "idleTimeot": "5m" } }), "idleTimeot");
}

#[test]
fn an_entry_with_neither_command_nor_url_fails_only_itself() {
    only_the_bad_entry_fails(json!({ "args": ["x"] }), "needs a `command`");
}

#[test]
fn a_command_that_is_a_number_fails_only_its_entry() {
    only_the_bad_entry_fails(json!({ "command": 42 }), "invalid `command`");
}

/// A VS Code input reads the secret store: unset, only its server shows `error`,
/// saying what to run, and fails its calls with exit 2.
#[test]
fn an_unset_vs_code_input_fails_only_its_entry() {
    let w = World::new(json!({
        "a": { "command": fake_server(), "env": { "KEY": "${input:api-key}" } },
        "b": { "command": fake_server() },
    }));
    let row = w.ls_row("a");
    assert_eq!(row["state"], "error", "{row}");
    assert!(row["error"].as_str().unwrap().contains("run `mcpx secret set api-key`"), "{row}");
    let call = w.call("a.echo", "{}");
    assert_eq!(call.code, 2, "{call:?}");
    assert!(call.stderr.contains("run `mcpx secret set api-key`"), "{call:?}");
    assert_eq!(w.call("b.echo", r#"{"message":"ok"}"#).ok(), "ok\n");
}

#[test]
fn an_unset_variable_is_shown_as_error() {
    let w = World::new(json!({
        "a": { "command": fake_server(), "env": { "TOKEN": "${MCPX_TEST_SURELY_UNSET}" } },
        "b": { "command": fake_server() },
    }));
    let row = w.ls_row("a");
    assert_eq!(row["state"], "error", "{row}");
    assert!(row["error"].as_str().unwrap().contains("MCPX_TEST_SURELY_UNSET"), "{row}");
    assert_eq!(w.call("b.echo", r#"{"message":"ok"}"#).ok(), "ok\n");
}

#[test]
fn a_file_that_does_not_parse_is_one_error_row_and_keeps_its_last_good_read() {
    let (w, below) = project(json!({ "command": fake_server() }));
    assert_eq!(run_in(&w, &below, &["call", "good.echo", r#"{"message":"before"}"#]).ok(), "before\n");
    let file = w.path(".mcp.json");
    std::fs::write(&file, "{\n  \"mcpServers\": {\n    \"good\": { \"command\": \"x\" ]\n  }\n}\n").unwrap();
    let ls = run_in(&w, &below, &["ls", "--json"]);
    assert_eq!(ls.code, 0, "ls: {ls:?}");
    let rows = ls.json();
    let row = rows.as_array().unwrap().iter().find(|r| r["name"] == file.display().to_string());
    let row = row.unwrap_or_else(|| panic!("no row for the file: {rows}"));
    assert_eq!((row["state"].as_str(), row["source"]["file"].as_str()), (Some("error"), file.to_str()), "{row}");
    assert!(row["error"].as_str().unwrap().contains(".mcp.json:3:"), "{row}");
    assert_eq!(run_in(&w, &below, &["call", "good.echo", r#"{"message":"kept"}"#]).ok(), "kept\n");
    assert_eq!(run_in(&w, &below, &["call", "user.echo", r#"{"message":"up"}"#]).ok(), "up\n");
    let status = w.status();
    let errors = status["daemon"]["config_errors"].as_array().unwrap();
    assert!(errors.iter().any(|e| e["file"] == file.display().to_string() && e["server"].is_null()), "{status}");
}

#[test]
fn two_commas_in_a_row_are_reported_as_such() {
    let w = World::new(json!({}));
    w.write_config(&format!(
        "{{\n  \"mcpServers\": {{\n    \"a\": {{ \"command\": \"{}\" }},\n    \"b\": {{ \"command\": \"x\" }},,\n  }}\n}}\n",
        fake_server()
    ));
    let row = w.ls_row(&w.config.display().to_string());
    let error = row["error"].as_str().unwrap();
    assert!(error.contains("config.json:4:") && error.contains("two commas"), "{row}");
    assert!(!error.contains(": trailing comma"), "{row}");
}

#[test]
fn a_name_defined_twice_in_one_file_is_a_warning() {
    let w = World::new(json!({}));
    w.write_config(&format!(
        "{{\"mcpServers\": {{\"a\": {{\"command\": \"nope\"}}, \"a\": {{\"command\": \"{}\"}}}}}}",
        fake_server()
    ));
    let row = w.ls_row("a");
    let warnings = row["warnings"].as_array().unwrap_or_else(|| panic!("no warnings: {row}"));
    assert!(warnings.iter().any(|x| x.as_str().unwrap().contains("`a` is defined twice")), "{row}");
    let ls = w.run(&["ls"]);
    assert_eq!(ls.code, 0, "{ls:?}");
    assert!(ls.stderr.contains("`a` is defined twice"), "the footnote: {ls:?}");
    assert_eq!(w.call("a.echo", r#"{"message":"last"}"#).ok(), "last\n");
}

#[test]
fn a_name_defined_differently_in_two_files_warns_that_the_nearer_wins() {
    let (w, below) = project(json!({ "command": fake_server() }));
    let xdg = w.path("xdg/mcpx/config.json");
    let user = json!({ "mcpServers": { "user": { "command": fake_server() }, "good": { "command": "far" } } });
    std::fs::write(&xdg, user.to_string()).unwrap();
    let rows = run_in(&w, &below, &["ls", "--json"]).json();
    let row = rows.as_array().unwrap().iter().find(|r| r["name"] == "good").unwrap();
    let warnings = row["warnings"].as_array().unwrap_or_else(|| panic!("no warnings: {row}"));
    assert!(warnings.iter().any(|x| x.as_str().unwrap().contains("config.json")), "names the farther file: {row}");
    let same = rows.as_array().unwrap().iter().find(|r| r["name"] == "user").unwrap();
    assert!(same.get("warnings").is_none(), "{same}");
    assert_eq!(run_in(&w, &below, &["call", "good.echo", r#"{"message":"near"}"#]).ok(), "near\n");
}

#[test]
fn a_cwd_that_does_not_exist_is_named_as_the_reason_a_server_cannot_start() {
    let w = World::new(json!({ "nowhere": { "command": fake_server(), "cwd": "/nonexistent/mcpx-test-dir" } }));
    let call = w.run(&["call", "nowhere.echo", r#"{"message":"x"}"#]);
    assert_eq!(call.code, 4, "{call:?}");
    assert!(call.stderr.contains("its working directory does not exist (fix `cwd`"), "{}", call.stderr);
    assert!(!call.stderr.contains("/nonexistent"), "the expanded path may hold a secret: {}", call.stderr);
}
