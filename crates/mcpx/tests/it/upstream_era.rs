//! Servers of either era behind mcpx (MCP 2026-07-28, Basic, "Versioning",
//! "Backward Compatibility"): an unknown server is probed with `server/discover` and
//! falls back to `initialize`; the verdict is remembered across daemons and, for a
//! supervised modern server, kept by its supervisor; a modern server's every request
//! carries the `_meta` envelope (and, over HTTP, the routing headers), and nothing
//! the modern era removed reaches it.

use serde_json::{Value, json};
use std::path::Path;

use crate::harness::{Serve, World, e2e_dir, fake_http, fake_server, free_port, start_time};
use crate::tcp::post;

/// Every message the fake recorded (`FAKE_RECORD`), parsed.
fn recorded(record: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(record).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The methods of the requests the fake received, in order (notifications left out:
/// a probe that timed out is cancelled, as MCP 2026-07-28's "Cancellation" asks).
fn methods(record: &Path) -> Vec<String> {
    let requests = recorded(record).into_iter().filter(|m| m.get("id").is_some());
    requests.filter_map(|m| m["method"].as_str().map(str::to_owned)).collect()
}

/// How many times the fake received `method`.
fn count(record: &Path, method: &str) -> usize {
    methods(record).iter().filter(|m| *m == method).count()
}

fn pid_of(w: &World, server: &str) -> i32 {
    w.instance(server).unwrap()["pid"].as_i64().unwrap() as i32
}

/// A modern-only fake on stdio (supervised, the default): discovered once, never
/// initialized; every request carries the envelope; no ping and no setLevel reach
/// it. After `kill -9` of the daemon the next call reaches the same process, and
/// nothing is discovered again: the supervisor kept the era (attach protocol 1.1).
#[test]
fn a_supervised_modern_server_is_discovered_once_and_survives_the_daemon() {
    let w = World::new(json!({}));
    let record = w.path("fake.jsonl");
    w.set_servers(json!({ "fake": { "command": fake_server(),
        "env": { "FAKE_ERA": "2026-07-28", "FAKE_RECORD": record } } }));
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n");
    let sent = methods(&record);
    assert_eq!(sent.first().map(String::as_str), Some("server/discover"), "{sent:?}");
    assert!(!sent.iter().any(|m| m == "initialize" || m == "ping" || m == "logging/setLevel"), "{sent:?}");
    for m in recorded(&record).iter().filter(|m| m["id"].is_number() || m["id"].is_string()) {
        let meta = &m["params"]["_meta"];
        assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{m}");
        assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object(), "{m}");
    }
    let pid = pid_of(&w, "fake");
    let born = start_time(pid);
    assert_eq!(w.instance("fake").unwrap()["supervised"], true);

    w.kill_daemon();
    assert_eq!(w.call("fake.counter", "{}").ok(), "2\n", "the server's memory survived");
    assert_eq!((pid_of(&w, "fake"), start_time(pid)), (pid, born));
    w.assert_log_has("adopted a running server");
    assert_eq!(count(&record, "server/discover"), 1, "discovered again: {:?}", methods(&record));
    assert_eq!(count(&record, "initialize"), 0);
    // The same after a restart in place: the era is known, so nothing is probed.
    w.run(&["restart", "fake"]).ok();
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n");
    assert_eq!(count(&record, "server/discover"), 1, "{:?}", methods(&record));
}

/// A legacy server answers the probe with an error: mcpx falls back to `initialize`
/// and remembers; a later daemon starting it anew sends `initialize` first. A modern
/// server started anew by a later daemon is not probed either.
#[test]
fn the_era_is_remembered_across_daemons() {
    let w = World::new(json!({}));
    let legacy = w.path("legacy.jsonl");
    let modern = w.path("modern.jsonl");
    w.set_servers(json!({
        "old": { "command": fake_server(), "env": { "FAKE_RECORD": legacy }, "mcpx": { "supervised": false } },
        "new": { "command": fake_server(), "env": { "FAKE_ERA": "2026-07-28", "FAKE_RECORD": modern },
            "mcpx": { "supervised": false } },
    }));
    assert_eq!(w.call("old.echo", r#"{"message":"a"}"#).ok(), "a\n");
    assert_eq!(w.call("new.echo", r#"{"message":"b"}"#).ok(), "b\n");
    assert_eq!(methods(&legacy)[..2], ["server/discover".to_owned(), "initialize".to_owned()]);
    w.kill_daemon();
    assert_eq!(w.call("old.echo", r#"{"message":"c"}"#).ok(), "c\n");
    assert_eq!(w.call("new.echo", r#"{"message":"d"}"#).ok(), "d\n");
    assert_eq!((count(&legacy, "server/discover"), count(&legacy, "initialize")), (1, 2), "{:?}", methods(&legacy));
    assert_eq!((count(&modern, "server/discover"), count(&modern, "initialize")), (1, 0), "{:?}", methods(&modern));
}

/// A probe that gets no answer in time falls back: a dual-era server is then served
/// as legacy; a modern-only one refuses `initialize` naming its revision, and is
/// probed again with the whole start timeout.
#[test]
fn a_slow_discover_falls_back_and_a_modern_refusal_probes_again() {
    let w = World::new(json!({}));
    let dual = w.path("dual.jsonl");
    let modern = w.path("modern.jsonl");
    w.set_servers(json!({
        "dual": { "command": fake_server(),
            "env": { "FAKE_ERA": "dual", "FAKE_DISCOVER_DELAY_MS": "5000", "FAKE_RECORD": dual } },
        "slow": { "command": fake_server(),
            "env": { "FAKE_ERA": "2026-07-28", "FAKE_DISCOVER_DELAY_MS": "4000", "FAKE_RECORD": modern } },
    }));
    assert_eq!(w.call("dual.echo", r#"{"message":"a"}"#).ok(), "a\n");
    assert_eq!(methods(&dual)[..2], ["server/discover".to_owned(), "initialize".to_owned()]);
    let calls: Vec<Value> = recorded(&dual).into_iter().filter(|m| m["method"] == "tools/call").collect();
    assert!(calls.iter().all(|m| m["params"]["_meta"].get("io.modelcontextprotocol/protocolVersion").is_none()));
    assert_eq!(w.call("slow.echo", r#"{"message":"b"}"#).ok(), "b\n");
    let sent = methods(&modern);
    assert_eq!(sent[..3], ["server/discover".to_owned(), "initialize".to_owned(), "server/discover".to_owned()]);
    w.assert_log_has("probing with server/discover again");
}

/// The fake's modern era over streamable HTTP: no session, the routing headers on
/// every POST; a server refusing mcpx's headers (`FAKE_HEADER_FAULT`, a modern
/// `-32020` in a 400) fails the start with its own error instead of falling back.
#[test]
fn a_modern_http_server_gets_routing_headers_and_its_400_body_is_read() {
    let w = World::new(json!({}));
    let record = w.path("http.jsonl");
    let faulty = w.path("faulty.jsonl");
    let env = [("FAKE_ERA", "2026-07-28"), ("FAKE_RECORD", record.to_str().unwrap())];
    let (_server, url) = fake_http("127.0.0.1:0", &env);
    let fault = [("FAKE_ERA", "2026-07-28"), ("FAKE_HEADER_FAULT", "1"), ("FAKE_RECORD", faulty.to_str().unwrap())];
    let (_faulty, faulty_url) = fake_http("127.0.0.1:0", &fault);
    w.set_servers(json!({ "web": { "url": url }, "bad": { "url": faulty_url } }));
    assert_eq!(w.call("web.echo", r#"{"message":"hi"}"#).ok(), "hi\n");
    let http = std::fs::read_to_string(format!("{}.http", record.display())).unwrap();
    assert!(http.lines().next().is_some_and(|l| l == "POST - server/discover"), "{http}");
    assert!(http.lines().all(|l| l.starts_with("POST - ")), "no session, no GET, no DELETE: {http}");
    assert!(http.contains("POST - tools/call"), "{http}");
    let headers = std::fs::read_to_string(format!("{}.headers", record.display())).unwrap();
    assert!(headers.lines().all(|l| l.contains("mcp-method") && l.contains("mcp-protocol-version")), "{headers}");
    assert_eq!(count(&record, "initialize"), 0);

    let refused = w.call("bad.echo", r#"{"message":"hi"}"#);
    assert!(refused.stderr.contains("-32020"), "{}", refused.stderr);
    assert_eq!(count(&faulty, "initialize"), 0, "a modern error is not a reason to fall back");
}

/// What a client of either era receives from a modern server through `mcpx serve`:
/// a legacy client sees no field of the modern era in a result.
#[test]
fn a_legacy_client_sees_no_modern_fields() {
    let w = World::new(json!({ "fake": { "command": fake_server(), "env": { "FAKE_ERA": "2026-07-28" } } }));
    let mut serve = Serve::start(&w, json!({}));
    let called = serve.request("tools/call", json!({ "name": "fake__echo", "arguments": { "message": "x" } }));
    assert_eq!(called["result"]["content"][0]["text"], "x", "{called}");
    for key in ["resultType", "ttlMs", "cacheScope"] {
        assert!(called["result"].get(key).is_none(), "{called}");
    }
    let read = serve.request("resources/read", json!({ "uri": "mcpx://fake/fake://static" }));
    assert!(read["result"].get("resultType").is_none(), "{read}");
    // A ping to mcpx is answered by mcpx; none reaches the server.
    assert_eq!(serve.request("ping", json!({}))["result"], json!({}));
}

/// The Python SDK 2.3's server (`e2e/sdk_modern_server.py`), which answers
/// `server/discover`: `(python, script)`.
fn python_sdk_server() -> (String, String) {
    let python = crate::era_matrix::python().display().to_string();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e/sdk_modern_server.py");
    (python, script.canonicalize().unwrap().display().to_string())
}

/// A modern server built with the official Python SDK, on stdio (supervised) and over
/// streamable HTTP: settled as modern, then called, read and prompted through the
/// CLI; after `kill -9` of the daemon the stdio one answers from the same process.
#[test]
fn python_sdk_servers_are_served_as_modern() {
    let (python, script) = python_sdk_server();
    let (_http, url) = crate::era_matrix::python_sdk_http();
    let w = World::new(json!({
        "py": { "command": python, "args": [script, "stdio"] },
        "pyweb": { "url": url },
    }));
    for server in ["py", "pyweb"] {
        assert_eq!(w.call(&format!("{server}.echo"), r#"{"message":"hi"}"#).ok(), "sdk echo: hi\n");
        assert_eq!(w.run(&["read", server, "sdk://greeting"]).ok(), "hello from the sdk\n");
        assert!(w.run(&["prompt", &format!("{server}.greet"), "name=Ada"]).ok().contains("Hello, Ada!"));
    }
    let log = w.log();
    let modern = log.lines().filter(|l| l.contains("server initialized") && l.contains("modern")).count();
    assert_eq!(modern, 2, "both settled as modern: {log}");
    let pid = w.call("py.pid", "{}").ok();
    w.kill_daemon();
    assert_eq!(w.call("py.pid", "{}").ok(), pid, "the same process answers after the daemon's kill -9");
    w.assert_log_has("adopted a running server");
}

/// A modern server built with the TypeScript SDK v2 (`@modelcontextprotocol/server`,
/// pinned in e2e/package.json; `serveStdio`), supervised: settled as modern, called
/// through the CLI and through `mcpx serve` by a legacy client, and answering from the
/// same process after `kill -9` of the daemon.
#[test]
fn a_typescript_sdk_v2_server_is_served_as_modern() {
    let e2e = e2e_dir();
    let node = crate::era_matrix::node().display().to_string();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e/sdk_modern_server.mjs");
    let w = World::new(json!({ "ts": { "command": node, "args": [script.canonicalize().unwrap()],
        "env": { "MCPX_E2E_DIR": e2e } } }));
    assert_eq!(w.call("ts.echo", r#"{"message":"hi"}"#).ok(), "ts echo: hi\n");
    w.assert_log_has("server initialized");
    let log = w.log();
    assert!(log.lines().any(|l| l.contains("server initialized") && l.contains("modern")), "{log}");
    let mut serve = Serve::start(&w, json!({}));
    let called = serve.request("tools/call", json!({ "name": "ts__echo", "arguments": { "message": "x" } }));
    assert_eq!(called["result"]["content"][0]["text"], "ts echo: x", "{called}");
    assert!(called["result"].get("resultType").is_none(), "{called}");
    drop(serve);
    let pid = w.call("ts.pid", "{}").ok();
    w.kill_daemon();
    assert_eq!(w.call("ts.pid", "{}").ok(), pid, "the same process answers after the daemon's kill -9");
}

/// A modern client's `tools/call` on `/mcp` with an `Mcp-Param-*` header reaches a
/// modern remote server with that header (2026-07-28, Transports, "Custom headers"),
/// beside the routing headers mcpx sets for the server's own names.
#[test]
fn a_modern_clients_param_headers_reach_a_modern_remote_server() {
    let w = World::new(json!({}));
    let record = w.path("http.jsonl");
    let env = [("FAKE_ERA", "2026-07-28"), ("FAKE_RECORD", record.to_str().unwrap())];
    let (_server, url) = fake_http("127.0.0.1:0", &env);
    w.set_servers(json!({ "web": { "url": url } }));
    let addr = format!("127.0.0.1:{}", free_port());
    w.run_with(&["ls"], |c| {
        c.env("MCPX_HTTP_ADDR", &addr);
    })
    .ok();
    let token = std::fs::read_to_string(w.path("state/token")).unwrap().trim().to_owned();
    let meta = json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} });
    let call = json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": { "name": "web__echo", "arguments": { "message": "eu" }, "_meta": meta } });
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "web__echo"),
        ("mcp-param-region", "eu"),
    ];
    let (status, _, body) = post(&addr, &token, &headers, &call);
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "eu", "{answer}");
    assert_eq!(answer["result"]["resultType"], "complete", "a modern client's answer carries it: {answer}");
    let seen = std::fs::read_to_string(format!("{}.headers", record.display())).unwrap();
    let http = std::fs::read_to_string(format!("{}.http", record.display())).unwrap();
    let call_headers = http.lines().zip(seen.lines()).find(|(h, _)| h.ends_with("tools/call")).map(|(_, s)| s);
    assert!(call_headers.is_some_and(|h| h.contains("mcp-param-region") && h.contains("mcp-name")), "{http}\n{seen}");
}
