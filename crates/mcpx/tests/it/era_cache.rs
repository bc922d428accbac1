//! The per-request parts of MCP 2026-07-28 between callers and a shared modern server:
//! each caller's log level travels with its own requests and its log messages come
//! back to it alone ("Logging"), and the schema cache honours `ttlMs` and keeps
//! `cacheScope: "private"` lists apart per authorization context ("Caching").

use std::path::Path;

use serde_json::{Value, json};

use crate::harness::{Serve, World, fake_http, fake_server};

/// Every message the fake recorded (`FAKE_RECORD`), parsed.
fn recorded(record: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(record).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The `tools/call` of the `notify` tool sending a log message at `level` with `data`.
fn log_call(level: &str, data: &str) -> Value {
    let message = json!({ "level": level, "data": data });
    json!({ "name": "notify", "arguments": { "method": "notifications/message", "params": message } })
}

/// The `data` of the log messages among `seen`.
fn logged(seen: &[Value]) -> Vec<String> {
    let messages = seen.iter().filter(|m| m["method"] == "notifications/message");
    messages.filter_map(|m| m["params"]["data"].as_str().map(str::to_owned)).collect()
}

/// Two legacy clients (`mcpx serve --server fake`) of one shared modern server, at
/// different levels: each `tools/call` reaches the server with its own caller's level
/// in `_meta`, and each client hears only its own log messages, on its own calls.
#[test]
fn two_legacy_clients_of_a_modern_server_each_carry_and_hear_their_own_level() {
    let w = World::new(json!({}));
    let record = w.path("fake.jsonl");
    w.set_servers(json!({ "fake": { "command": fake_server(),
        "env": { "FAKE_ERA": "2026-07-28", "FAKE_RECORD": record } } }));
    let mut a = Serve::start_args(&w, &["--server", "fake"], json!({}));
    let mut b = Serve::start_args(&w, &["--server", "fake"], json!({}));
    assert_eq!(a.request("logging/setLevel", json!({ "level": "debug" }))["result"], json!({}));
    assert_eq!(b.request("logging/setLevel", json!({ "level": "error" }))["result"], json!({}));
    let (mut heard_a, mut heard_b) = (Vec::new(), Vec::new());
    a.request_seeing("tools/call", log_call("info", "a info"), &mut heard_a);
    b.request_seeing("tools/call", log_call("info", "b info"), &mut heard_b);
    b.request_seeing("tools/call", log_call("error", "b error"), &mut heard_b);
    a.request_seeing("tools/call", log_call("error", "a error"), &mut heard_a);
    // Concurrent calls of both, each logging three times at info.
    let tool = json!({ "name": "test_tool_with_logging", "arguments": {} });
    std::thread::scope(|s| {
        s.spawn(|| a.request_seeing("tools/call", tool.clone(), &mut heard_a));
        s.spawn(|| b.request_seeing("tools/call", tool.clone(), &mut heard_b));
    });
    // A last call of each: anything misrouted to it would have arrived before its answer.
    a.request_seeing("tools/call", log_call("error", "a last"), &mut heard_a);
    b.request_seeing("tools/call", log_call("error", "b last"), &mut heard_b);
    let steps = ["Tool execution started", "Tool processing data", "Tool execution completed"];
    let mut expected_a = vec!["a info", "a error"];
    expected_a.extend(steps);
    expected_a.push("a last");
    assert_eq!(logged(&heard_a), expected_a, "a hears its own, from debug up");
    assert_eq!(logged(&heard_b), ["b error", "b last"], "b hears its own, from error up");

    let calls: Vec<Value> = recorded(&record).into_iter().filter(|m| m["method"] == "tools/call").collect();
    assert_eq!(calls.len(), 8, "{calls:?}");
    for call in &calls {
        let data = call["params"]["arguments"]["params"]["data"].as_str().unwrap_or_default();
        let level = &call["params"]["_meta"]["io.modelcontextprotocol/logLevel"];
        if data.starts_with('a') {
            assert_eq!(level, "debug", "{call}");
        } else if data.starts_with('b') {
            assert_eq!(level, "error", "{call}");
        }
    }
    let levels: Vec<&Value> = calls.iter().map(|c| &c["params"]["_meta"]["io.modelcontextprotocol/logLevel"]).collect();
    assert_eq!(levels.iter().filter(|l| **l == "debug").count(), 4, "{levels:?}");
    assert_eq!(levels.iter().filter(|l| **l == "error").count(), 4, "{levels:?}");
    assert!(!recorded(&record).iter().any(|m| m["method"] == "logging/setLevel"), "no setLevel upstream");
}

/// Two clients at the same level calling a shared modern server at once, each logging
/// three times: over streamable HTTP each message comes on the answer stream of the
/// request it belongs to, so each client hears exactly its own three; over stdio,
/// which relates no message to a request, neither hears messages that could be the
/// other's (they go to the daemon's log).
#[test]
fn concurrent_log_messages_reach_their_own_caller_over_http_and_nobody_else_over_stdio() {
    let w = World::new(json!({}));
    let (_server, url) = fake_http("127.0.0.1:0", &[("FAKE_ERA", "2026-07-28")]);
    w.set_servers(json!({ "web": { "url": url },
        "local": { "command": fake_server(), "env": { "FAKE_ERA": "2026-07-28" } } }));
    for server in ["web", "local"] {
        let mut a = Serve::start_args(&w, &["--server", server], json!({}));
        let mut b = Serve::start_args(&w, &["--server", server], json!({}));
        for client in [&mut a, &mut b] {
            assert_eq!(client.request("logging/setLevel", json!({ "level": "info" }))["result"], json!({}));
        }
        let (mut heard_a, mut heard_b) = (Vec::new(), Vec::new());
        // Both calls wait at the barrier until the other is in flight too.
        let barrier = json!({ "name": "barrier", "arguments": { "n": 2 } });
        let tool = json!({ "name": "test_tool_with_logging", "arguments": {} });
        std::thread::scope(|s| {
            s.spawn(|| {
                a.request_seeing("tools/call", barrier.clone(), &mut heard_a);
                a.request_seeing("tools/call", tool.clone(), &mut heard_a)
            });
            s.spawn(|| {
                b.request_seeing("tools/call", barrier.clone(), &mut heard_b);
                b.request_seeing("tools/call", tool.clone(), &mut heard_b)
            });
        });
        a.request_seeing("tools/call", log_call("error", "a last"), &mut heard_a);
        b.request_seeing("tools/call", log_call("error", "b last"), &mut heard_b);
        let (heard_a, heard_b) = (logged(&heard_a), logged(&heard_b));
        if server == "web" {
            assert_eq!(heard_a.len(), 4, "{heard_a:?}");
            assert_eq!(heard_b.len(), 4, "{heard_b:?}");
        } else {
            // Whatever overlapped went to the log; nothing of the other's arrived.
            assert!(heard_a.len() <= 4 && heard_a.last().is_some_and(|l| l == "a last"), "{heard_a:?}");
            assert!(heard_b.len() <= 4 && heard_b.last().is_some_and(|l| l == "b last"), "{heard_b:?}");
        }
    }
}

/// A shell call carries no level, so a modern server sends it no log messages; the
/// call works as before.
#[test]
fn a_shell_call_to_a_modern_server_carries_no_level() {
    let w = World::new(json!({}));
    let record = w.path("fake.jsonl");
    w.set_servers(json!({ "fake": { "command": fake_server(),
        "env": { "FAKE_ERA": "2026-07-28", "FAKE_RECORD": record } } }));
    let out = w.call("fake.notify", &log_call("error", "x")["arguments"].to_string()).ok();
    assert_eq!(out, "sent notifications/message\n");
    let calls: Vec<Value> = recorded(&record).into_iter().filter(|m| m["method"] == "tools/call").collect();
    assert!(calls[0]["params"]["_meta"].get("io.modelcontextprotocol/logLevel").is_none(), "{calls:?}");
}

/// How many `method` requests the fake recorded.
fn count(record: &Path, method: &str) -> usize {
    recorded(record).iter().filter(|m| m["method"] == method && m.get("id").is_some()).count()
}

/// A modern server's `ttlMs`: a listing of 200 ms is listed again by the next `ls`
/// once it has passed, while one of ten minutes is not; with the servers no longer
/// running, the short one shows `stale` and the long one `ready`.
#[test]
fn the_schema_cache_honours_ttl_ms() {
    let w = World::new(json!({}));
    let (short, long) = (w.path("short.jsonl"), w.path("long.jsonl"));
    let server = |ttl: &str, record: &Path| {
        json!({ "command": fake_server(), "mcpx": { "supervised": false },
            "env": { "FAKE_ERA": "2026-07-28", "FAKE_TTL_MS": ttl, "FAKE_RECORD": record } })
    };
    w.set_servers(json!({ "short": server("200", &short), "long": server("600000", &long) }));
    w.run(&["tools", "short"]).ok();
    w.run(&["tools", "long"]).ok();
    assert_eq!((count(&short, "tools/list"), count(&long, "tools/list")), (1, 1));
    crate::harness::wait_until("ls lists the short one again", std::time::Duration::from_secs(10), || {
        w.run(&["ls"]).ok();
        count(&short, "tools/list") >= 2
    });
    w.run(&["search", "echo"]).ok();
    assert_eq!(count(&long, "tools/list"), 1, "fresh for ten minutes: not listed again");
    assert_eq!(w.ls_row("long")["state"], "running");

    w.run(&["stop"]).ok();
    crate::harness::wait_until("the short listing is stale", std::time::Duration::from_secs(10), || {
        w.ls_row("short")["state"] == "stale"
    });
    let (short_row, long_row) = (w.ls_row("short"), w.ls_row("long"));
    assert_eq!(long_row["state"], "ready", "{long_row}");
    assert_eq!(short_row["tools"], long_row["tools"], "a stale listing is still shown: {short_row}");
    assert_eq!(w.status()["instances"].as_array().map(Vec::len), Some(0), "ls started nothing");
}

/// The `tools` count `mcpx ls --json` shows for `server`, and its state.
fn ls_row(w: &World, server: &str) -> (Value, String) {
    let rows: Value = serde_json::from_str(&w.run(&["ls", "--json"]).ok()).unwrap();
    let row = rows.as_array().unwrap().iter().find(|r| r["name"] == server).unwrap().clone();
    (row["tools"].clone(), row["state"].as_str().unwrap_or_default().to_owned())
}

/// Sets secret `name` to `value` in `w`'s store.
fn set_secret(w: &World, name: &str, value: &str) {
    let file = w.path("secret-value");
    std::fs::write(&file, format!("{value}\n")).unwrap();
    w.run_with(&["secret", "set", name], |cmd| {
        cmd.stdin(std::fs::File::open(&file).unwrap());
    })
    .ok();
}

/// A private listing (`cacheScope: "private"`, `ttlMs: 0`: every list of the Python SDK
/// 2.x) is kept per authorization context, which is what the entry expands to: here a
/// secret that sets how many tools the fake lists. After `mcpx stop --all` each context
/// gets its own listing back, as `stale`; the other context's is never shown; nothing
/// private is in the server's own cache file, and the context files are private.
#[test]
fn a_private_list_is_kept_per_authorization_context_across_daemons() {
    let w = World::new(json!({}));
    set_secret(&w, "tools", "1");
    w.set_servers(json!({ "fake": { "command": fake_server(), "mcpx": { "scope": "session" },
        "env": { "FAKE_ERA": "2026-07-28", "FAKE_CACHE_SCOPE": "private", "FAKE_TTL_MS": "0",
            "FAKE_TOOLS": "${secret:tools}" } } }));
    w.call("fake.echo", r#"{"message":"one"}"#).ok();
    let (one, _) = ls_row(&w, "fake");
    let one = one.as_u64().expect("listed");
    w.run(&["stop", "--all"]).ok();
    assert_eq!(ls_row(&w, "fake"), (json!(one), "stale".to_owned()), "its listing after the daemon stopped");
    assert!(w.run(&["search", "gen_0000"]).ok().contains("gen_0000"));
    // Another secret is another context: nothing of the first is shown.
    set_secret(&w, "tools", "2");
    assert_eq!(ls_row(&w, "fake").0, Value::Null, "another context's listing was shown");
    assert!(!w.run(&["search", "gen_0000"]).ok().contains("gen_0000"));
    w.call("fake.echo", r#"{"message":"two"}"#).ok();
    w.run(&["stop", "--all"]).ok();
    assert_eq!(ls_row(&w, "fake").0, json!(one + 1));
    // Each gets its own back, whichever listed last.
    set_secret(&w, "tools", "1");
    assert_eq!(ls_row(&w, "fake").0, json!(one));
    for file in std::fs::read_dir(w.path("cache/servers")).unwrap() {
        let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
        let entry: Value = serde_json::from_str(&text).unwrap();
        assert!(!text.contains("gen_0000") && entry.get("tools").is_none(), "{text}");
        assert_eq!(entry["private"], true, "{text}");
    }
    let contexts: Vec<_> = std::fs::read_dir(w.path("cache/private"))
        .unwrap()
        .flat_map(|k| std::fs::read_dir(k.unwrap().path()).unwrap().map(|f| f.unwrap().path()))
        .collect();
    assert_eq!(contexts.len(), 2, "{contexts:?}");
    for file in contexts {
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600, "{}", file.display());
    }
}

/// The quickstart's mcp-server-time (the Python SDK 2.x: `ttlMs: 0`, `cacheScope:
/// "private"`) and a modern fake answering the same: after `mcpx stop --all`, `ls`
/// shows their tool counts (`stale`), `search` finds their tools, `types` declares
/// them, all from the cache, starting nothing.
#[test]
fn private_never_fresh_listings_serve_ls_search_and_types_after_a_stop() {
    let e2e = crate::harness::e2e_dir();
    let w = World::new(json!({
        "time": { "command": e2e.join(".venv/bin/mcp-server-time").display().to_string(), "args": ["--local-timezone", "UTC"] },
        "fake": { "command": fake_server(),
            "env": { "FAKE_ERA": "2026-07-28", "FAKE_CACHE_SCOPE": "private", "FAKE_TTL_MS": "0" } },
    }));
    w.call("time.get_current_time", r#"{"timezone":"UTC"}"#).ok();
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let before = (ls_row(&w, "time").0, ls_row(&w, "fake").0);
    assert!(before.0.as_u64().is_some_and(|n| n >= 2) && before.1.as_u64().is_some(), "{before:?}");
    w.run(&["stop", "--all"]).ok();
    for server in ["time", "fake"] {
        let (tools, state) = ls_row(&w, server);
        assert_eq!(tools, if server == "time" { before.0.clone() } else { before.1.clone() }, "{server}");
        assert_eq!(state, "stale", "{server}");
    }
    assert!(w.run(&["search", "current", "time"]).ok().contains("get_current_time"));
    assert!(w.run(&["search", "echo"]).ok().contains("fake"));
    let types = w.run(&["types"]).ok();
    assert!(types.contains("declare namespace time") && types.contains("get_current_time"), "{types}");
    assert!(types.contains("declare namespace fake"), "{types}");
    let status = w.status();
    assert!(status["instances"].as_array().is_none_or(|i| i.is_empty()), "something started: {status}");
}
