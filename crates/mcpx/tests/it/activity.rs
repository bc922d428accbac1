//! The activity record (`mcpx activity`): calls by the shell and by MCP clients, each
//! with its client, outcome and duration, and a call refused after the daemon took it.

use std::io::{BufRead, BufReader, Write};

use serde_json::{Value, json};

use crate::harness::{Spawned, World, fake_server};

/// `mcpx serve` initialized as the MCP client `name`; its `tools/call` of `tool` is
/// answered before this returns.
fn serve_call(w: &World, name: &str, tool: &str) {
    let mut cmd = w.command();
    cmd.arg("serve").stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut child = Spawned(cmd.spawn().unwrap());
    let mut stdin = child.0.stdin.take().unwrap();
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": { "protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": { "name": name, "version": "1.0" } } });
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": tool, "arguments": { "message": name } } });
    writeln!(stdin, "{init}").unwrap();
    lines.next().unwrap().unwrap();
    writeln!(stdin, "{}", json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).unwrap();
    writeln!(stdin, "{call}").unwrap();
    let answer = lines.next().unwrap().unwrap();
    assert!(answer.contains(name), "{answer}");
}

fn entries(w: &World, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["activity", "--json"];
    all.extend(args);
    let out = w.run(&all).ok();
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

#[test]
fn calls_are_recorded_with_their_client_outcome_and_duration() {
    let w = World::new(json!({}));
    let definitions = w.path("definitions.json");
    std::fs::write(&definitions, "{}").unwrap();
    w.set_servers(json!({ "fake": { "command": fake_server(), "env": { "FAKE_DEFINITIONS": definitions } } }));
    assert_eq!(w.call("fake.echo", r#"{"message":"hi"}"#).ok(), "hi\n");
    assert_ne!(w.call("fake.exit", r#"{"code":3}"#).code, 0);
    // Two MCP clients at once, each named by its clientInfo.
    std::thread::scope(|s| {
        s.spawn(|| serve_call(&w, "client-one", "fake__echo"));
        s.spawn(|| serve_call(&w, "client-two", "fake__echo"));
    });
    // A tool new on the pinned server is held: refused once the daemon has taken the call.
    std::fs::write(&definitions, json!({ "fresh": { "description": "New." } }).to_string()).unwrap();
    w.run(&["restart", "fake"]).ok();
    assert_eq!(w.call("fake.fresh", r#"{"message":"x"}"#).code, 2);

    let mut seen = Vec::new();
    for _ in 0..100 {
        seen = entries(&w, &[]);
        if seen.len() >= 5 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let find = |name: &str, outcome: &str| -> Vec<Value> {
        seen.iter().filter(|e| e["name"] == name && e["outcome"] == outcome).cloned().collect()
    };
    let shell = find("echo", "ok").into_iter().find(|e| e["path"] == "shell").unwrap_or_else(|| panic!("{seen:?}"));
    assert!(shell["client"].as_str().unwrap().starts_with("shell"), "{shell}");
    assert!(shell["duration_us"].as_u64().unwrap() > 0 && shell["pid"].as_u64().is_some(), "{shell}");
    let failed = find("exit", "failed");
    assert_eq!(failed.len(), 1, "{seen:?}");
    assert!(failed[0]["error"].as_str().unwrap().contains("exited with code 3"), "{}", failed[0]);
    let clients: Vec<&str> =
        seen.iter().filter(|e| e["path"] == "mcp").map(|e| e["client"].as_str().unwrap()).collect();
    assert_eq!(clients.len(), 2, "{seen:?}");
    let mut clients = clients;
    clients.sort();
    assert_eq!(clients, ["client-one 1.0", "client-two 1.0"], "each MCP client by its clientInfo");
    assert_eq!(find("fresh", "refused").len(), 1, "{seen:?}");
    // Per server and tool: calls, errors, percentiles.
    let stats: Vec<Value> =
        w.run(&["activity", "--stats", "--json"]).ok().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let echo = stats.iter().find(|s| s["name"] == "echo").unwrap_or_else(|| panic!("{stats:?}"));
    assert_eq!((echo["calls"].as_u64(), echo["error_rate"].as_f64()), (Some(3), Some(0.0)), "{echo}");
    assert!(echo["p99_ms"].as_f64() >= echo["p50_ms"].as_f64(), "{echo}");
    let exit = stats.iter().find(|s| s["name"] == "exit").unwrap();
    assert_eq!(exit["error_rate"].as_f64(), Some(1.0));
    // Filters, and the record emptied.
    assert_eq!(entries(&w, &["--errors"]).len(), 2);
    assert!(entries(&w, &["--server", "nope"]).is_empty());
    assert!(w.run(&["activity", "--clear"]).ok().contains("empty"));
    assert!(entries(&w, &[]).is_empty());
}
