//! The one policy point: `disabled` and `includeTools`/`excludeTools` hold on every
//! path, with the same errors: the CLI, `/mcp/<server>` on the socket, `mcpx serve
//! --server`, the aggregate `/mcp` and `mcpx serve --discover`.

use std::io::{BufRead, BufReader, Write};

use serde_json::{Value, json};

use crate::harness::{Spawned, World, fake_server};
use crate::serve::{http, initialize, rpc};

/// A world with `fake` (its tool `pid` excluded) and `off` (disabled), both listed
/// once while allowed, so the schema cache knows every tool a bypass could show.
fn world() -> World {
    let w = World::new(json!({ "fake": { "command": fake_server() }, "off": { "command": fake_server() } }));
    w.run(&["refresh"]).ok();
    w.set_servers(json!({
        "fake": { "command": fake_server(), "mcpx": { "excludeTools": ["pid"] } },
        "off": { "command": fake_server(), "mcpx": { "disabled": true } },
    }));
    w
}

/// The CLI's one-line error for `mcpx <args>`, without its `mcpx: ` prefix.
fn cli_error(w: &World, args: &[&str]) -> String {
    let run = w.run(args);
    assert_ne!(run.code, 0, "mcpx {} succeeded: {}", args.join(" "), run.stdout);
    run.stderr.lines().find_map(|l| l.strip_prefix("mcpx: ")).unwrap_or_else(|| panic!("{}", run.stderr)).to_owned()
}

/// The names of a `tools/list` answer.
fn names(answer: &Value) -> Vec<String> {
    let tools = answer["result"]["tools"].as_array().unwrap_or_else(|| panic!("not a tools list: {answer}"));
    tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

/// Asserts that `answer` is JSON-RPC error -32602 with `message`.
#[track_caller]
fn refused(answer: &Value, message: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["message"], message, "{answer}");
}

/// A `tools/call` request.
fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": { "name": name, "arguments": arguments } })
}

/// A request without params.
fn request(id: u64, method: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method })
}

/// `mcpx serve <args>` over stdio, one message out, one back; initialized, and the
/// initialize answer is returned beside the session.
fn serve(w: &World, args: &[&str]) -> (impl FnMut(Value) -> Value, Value) {
    let mut cmd = w.command();
    cmd.arg("serve").args(args).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut child = Spawned(cmd.spawn().unwrap());
    let mut stdin = child.0.stdin.take().unwrap();
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let mut ask = move |v: Value| -> Value {
        // The guard lives as long as the session: dropped, it stops serve.
        let _alive = &child;
        writeln!(stdin, "{v}").unwrap();
        serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
    };
    let init = ask(json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } }));
    (ask, init)
}

/// The errors of the CLI, for an excluded tool and a disabled server.
fn cli_errors(w: &World) -> (String, String) {
    let excluded = cli_error(w, &["call", "fake.pid", "{}"]);
    assert!(excluded.contains("excluded by includeTools/excludeTools"), "{excluded}");
    let disabled = cli_error(w, &["call", "off.echo", r#"{"message":"hi"}"#]);
    assert!(disabled.contains("is disabled"), "{disabled}");
    (excluded, disabled)
}

/// `/mcp/<server>` on the socket and `mcpx serve --server`: an excluded tool is not
/// listed and its call is refused, a disabled server does not initialize, with the
/// CLI's own messages as JSON-RPC error -32602.
#[test]
fn passthrough_refuses_excluded_tools_and_disabled_servers_like_the_cli() {
    let w = world();
    let (excluded, disabled) = cli_errors(&w);

    let (session, _) = initialize(&w, "/mcp/fake", "2025-11-25");
    let listed = names(&rpc(&w, "/mcp/fake", &session, request(2, "tools/list")));
    assert!(listed.contains(&"echo".to_owned()) && !listed.contains(&"pid".to_owned()), "{listed:?}");
    refused(&rpc(&w, "/mcp/fake", &session, call(3, "pid", json!({}))), &excluded);
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let (status, head, body) = http(&w, "POST", "/mcp/off", &[], &init.to_string());
    assert!(!head.contains("mcp-session-id"), "a disabled server opened a session: {status} {head}");
    refused(&serde_json::from_str(&body).unwrap(), &disabled);

    let (mut ask, _) = serve(&w, &["--server", "fake"]);
    let listed = names(&ask(request(1, "tools/list")));
    assert!(listed.contains(&"echo".to_owned()) && !listed.contains(&"pid".to_owned()), "{listed:?}");
    refused(&ask(call(2, "pid", json!({}))), &excluded);
    let (_, init) = serve(&w, &["--server", "off"]);
    refused(&init, &disabled);
}

/// The aggregate and `--discover`: what the policy leaves out is not listed, not
/// described and not called, with the CLI's errors as JSON-RPC error -32602.
#[test]
fn the_aggregate_and_discovery_refuse_what_the_cli_refuses() {
    let w = world();
    let (excluded, disabled) = cli_errors(&w);
    let listed = w.run(&["tools", "fake"]).ok();
    assert!(listed.contains("echo") && !listed.contains("pid"), "{listed}");
    assert_eq!(cli_error(&w, &["tools", "fake", "pid"]), excluded);
    assert_eq!(cli_error(&w, &["tools", "off"]), disabled);
    // Naming a disabled server does not start it either.
    assert_eq!(cli_error(&w, &["refresh", "off"]), disabled);
    assert_eq!(cli_error(&w, &["restart", "off"]), disabled);
    assert!(w.instance("off").is_none(), "a disabled server was started: {}", w.status());
    assert!(!w.run(&["search", "pid"]).ok().contains("pid"), "search found an excluded tool");

    let (session, _) = initialize(&w, "/mcp", "2025-11-25");
    let listed = names(&rpc(&w, "/mcp", &session, request(2, "tools/list")));
    assert!(listed.contains(&"fake__echo".to_owned()), "{listed:?}");
    assert!(listed.iter().all(|n| n != "fake__pid" && !n.starts_with("off__")), "{listed:?}");
    refused(&rpc(&w, "/mcp", &session, call(3, "fake__pid", json!({}))), &excluded);
    refused(&rpc(&w, "/mcp", &session, call(4, "off__echo", json!({ "message": "hi" }))), &disabled);

    let (mut ask, _) = serve(&w, &["--discover"]);
    let text = |answer: &Value| answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    let servers = text(&ask(call(1, "mcpx_list_servers", json!({}))));
    assert!(servers.contains("\"fake\"") && !servers.contains("\"off\""), "{servers}");
    let described = text(&ask(call(2, "mcpx_describe", json!({ "server": "fake" }))));
    assert!(described.contains("\"echo\"") && !described.contains("\"pid\""), "{described}");
    refused(&ask(call(3, "mcpx_describe", json!({ "server": "fake", "tool": "pid" }))), &excluded);
    refused(&ask(call(4, "mcpx_describe", json!({ "server": "off" }))), &disabled);
    refused(&ask(call(5, "mcpx_call", json!({ "server": "fake", "tool": "pid" }))), &excluded);
    refused(&ask(call(6, "mcpx_call", json!({ "server": "off", "tool": "echo" }))), &disabled);
}
