//! Profiles (`docs/configuration.md`, "Profiles"): a client on a profile, through
//! `mcpx serve --profile`, `/mcp/p/<name>` or the CLI's `--profile`, lists and calls only
//! the profile's servers and the tools its patterns name; anything else gets the refusal
//! of an excluded tool. A project file's `profiles` are ignored with a warning, and an
//! unknown profile is an error that lists the ones there are.

use serde_json::{Value, json};

use crate::harness::{Serve, World, fake_server, free_port};
use crate::tcp::post_to;

/// A world with three fake servers, `fake`, `mem` and `other`, and the profile `review`:
/// three of `fake`'s tools by pattern, every tool of `mem`, nothing of `other`.
fn world() -> World {
    let w = World::new(json!({}));
    let config = json!({
        "mcpServers": { "fake": { "command": fake_server() }, "mem": { "command": fake_server() },
                        "other": { "command": fake_server() } },
        "profiles": { "review": { "servers": { "fake": ["ec*", "s?ow", "p*d"], "mem": "*", "absent": "*" } } },
    });
    w.write_config(&config.to_string());
    w
}

/// The tool names of a `tools/list` result.
fn names(result: &Value) -> Vec<String> {
    let tools = result["tools"].as_array().unwrap_or_else(|| panic!("{result}"));
    let mut names: Vec<String> = tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect();
    names.sort();
    names
}

/// What the aggregate of `review` lists: `fake`'s three tools and every one of `mem`'s.
fn assert_review_listing(names: &[String]) {
    let fake: Vec<&String> = names.iter().filter(|n| n.starts_with("fake__")).collect();
    assert_eq!(fake, ["fake__echo", "fake__pid", "fake__slow"], "{names:?}");
    assert!(names.iter().any(|n| n == "mem__counter") && names.iter().any(|n| n == "mem__test_simple_text"));
    assert!(!names.iter().any(|n| n.starts_with("other__")), "{names:?}");
}

#[test]
fn serve_on_a_profile_lists_and_calls_only_its_tools() {
    let w = world();
    let mut serve = Serve::start_cmd_args(
        {
            let mut cmd = w.command();
            cmd.args(["serve", "--profile", "review"]);
            cmd
        },
        json!({}),
    );
    let listed = serve.request("tools/list", json!({}));
    assert_review_listing(&names(&listed["result"]));
    let echo = serve.request("tools/call", json!({ "name": "fake__echo", "arguments": { "message": "in" } }));
    assert_eq!(echo["result"]["content"][0]["text"], "in", "{echo}");
    for (tool, what) in [("fake__counter", "tool `counter` of server `fake`"), ("other__echo", "server `other`")] {
        let refused = serve.request("tools/call", json!({ "name": tool, "arguments": { "message": "x" } }));
        assert_eq!(refused["error"]["code"], -32602, "{tool}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(what) && message.contains("excluded by profile `review`"), "{tool}: {message}");
    }
    // The same profile with discovery mode: its search and call keep to the profile.
    let mut discover = Serve::start_cmd_args(
        {
            let mut cmd = w.command();
            cmd.args(["serve", "--discover", "--profile", "review"]);
            cmd
        },
        json!({}),
    );
    let called = discover.request(
        "tools/call",
        json!({ "name": "mcpx_call", "arguments": { "server": "fake", "tool": "counter", "arguments": {} } }),
    );
    let text = called.to_string();
    assert!(text.contains("excluded by profile `review`"), "{text}");
}

#[test]
fn the_cli_and_http_on_a_profile_see_only_its_servers() {
    let w = world();
    let rows = w.run(&["--profile", "review", "ls", "--json"]).json();
    let listed: Vec<&str> = rows.as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(listed, ["fake", "mem"], "{rows}");
    let out = w.run(&["--profile", "review", "call", "fake.echo", r#"{"message":"cli"}"#]).ok();
    assert_eq!(out, "cli\n");
    let refused = w.run(&["--profile", "review", "call", "fake.counter", "{}"]);
    assert_ne!(refused.code, 0);
    assert!(refused.stderr.contains("excluded by profile `review`"), "{}", refused.stderr);
    // What code mode declares and calls goes through the same caller: its declarations
    // hold only the profile's tools.
    let types = w.run(&["--profile", "review", "types", "fake", "--json"]).json();
    let mut declared: Vec<&str> =
        types["names"].as_array().unwrap().iter().filter_map(|n| n["tool"].as_str()).collect();
    declared.sort();
    assert_eq!(declared, ["echo", "pid", "slow"], "{types}");
    let unknown = w.run(&["--profile", "nope", "ls"]);
    assert_ne!(unknown.code, 0);
    assert!(unknown.stderr.contains("no profile `nope`") && unknown.stderr.contains("review"), "{}", unknown.stderr);
    let config = w.run(&["--profile", "review", "config", "--json"]).json();
    assert_eq!(config["profiles"]["review"]["servers"]["fake"], json!(["ec*", "s?ow", "p*d"]), "{config}");
    let shown = w.run(&["config"]).stdout;
    assert!(shown.contains("profile review") && shown.contains("absent: every tool (not configured here)"), "{shown}");

    let addr = format!("127.0.0.1:{}", free_port());
    w.run_with(&["stop"], |_| {});
    w.run_with(&["ls"], |c| {
        c.env("MCPX_HTTP_ADDR", &addr);
    })
    .ok();
    let token = std::fs::read_to_string(w.path("state/token")).unwrap().trim().to_owned();
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let (status, head, body) = post_to(&addr, "/mcp/p/review", &token, &[], &init);
    assert_eq!(status, 200, "{head}\n{body}");
    let session = head.lines().find_map(|l| l.strip_prefix("mcp-session-id: ")).unwrap().trim().to_owned();
    let rpc = |method: &str, params: Value| -> Value {
        let body = json!({ "jsonrpc": "2.0", "id": 2, "method": method, "params": params });
        let (status, head, body) = post_to(&addr, "/mcp/p/review", &token, &[("mcp-session-id", &session)], &body);
        assert_eq!(status, 200, "{head}\n{body}");
        serde_json::from_str(&body).unwrap()
    };
    assert_review_listing(&names(&rpc("tools/list", json!({}))["result"]));
    let refused = rpc("tools/call", json!({ "name": "fake__counter", "arguments": {} }));
    assert!(refused["error"]["message"].as_str().unwrap_or_default().contains("excluded by profile"), "{refused}");
    let (_, _, body) = post_to(&addr, "/mcp/p/nope", &token, &[], &init);
    assert!(body.contains("no profile `nope`"), "{body}");
}

#[test]
fn a_project_files_profiles_are_ignored_with_a_warning() {
    let mut w = World::new(json!({}));
    w.unset.push("MCPX_CONFIG".into());
    w.env.push(("XDG_CONFIG_HOME".into(), w.path("xdg").display().to_string()));
    let project = w.path("proj");
    std::fs::create_dir_all(&project).unwrap();
    let text = json!({ "mcpServers": { "p": { "command": fake_server() } },
                       "profiles": { "mine": { "servers": { "p": "*" } } } });
    std::fs::write(project.join(".mcpx.json"), text.to_string()).unwrap();
    let run = w.run_with(&["ls", "--json"], |c| {
        c.current_dir(&project);
    });
    let rows = run.json();
    let warning = rows.as_array().unwrap().iter().find(|r| r["state"] == "warning").cloned().unwrap_or_default();
    assert!(warning.to_string().contains("`profiles` is read only in the mcpx user config"), "{rows}");
    let on = w.run_with(&["--profile", "mine", "ls"], |c| {
        c.current_dir(&project);
    });
    assert!(on.stderr.contains("no profile `mine`"), "{on:?}");
}
