//! `subscriptions/listen` for modern clients (MCP 2026-07-28) on `/mcp`: the stream
//! is the POST's SSE answer, acknowledged first, carrying a server's `list_changed`
//! and the updates of the resources it asked for, each stamped with its
//! `subscriptionId`; closing it unsubscribes the server; its headers must match it.

use std::io::Write;
use std::time::Duration;

use serde_json::json;

use crate::harness::{World, fake_server, wait_until};

/// A modern listen stream on `/mcp` over the control socket hears a tool list change
/// and its resource's update, and ends its subscription when closed.
#[test]
fn a_modern_listen_stream_hears_what_it_asked_for() {
    let w = World::new(json!({}));
    let record = w.path("record.jsonl");
    w.set_servers(json!({ "fake": { "command": fake_server(), "env": { "FAKE_RECORD": record } } }));
    w.call("fake.echo", r#"{"message":"start"}"#).ok();
    let (events, head) = (w.path("events.txt"), w.path("head.txt"));
    let listen = json!({ "jsonrpc": "2.0", "id": "l1", "method": "subscriptions/listen", "params": {
        "notifications": { "toolsListChanged": true, "resourceSubscriptions": ["mcpx://fake/fake://static"] },
        "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                   "io.modelcontextprotocol/clientCapabilities": {} } } });
    #[allow(clippy::disallowed_methods)] // Reason: curl holds the listen stream open.
    let mut stream = std::process::Command::new("curl")
        .args(["-s", "-N", "--unix-socket"])
        .arg(w.path("run/daemon.sock"))
        .args(["-H", "content-type: application/json", "-H", "accept: application/json, text/event-stream"])
        .args(["-H", "mcp-method: subscriptions/listen", "-H", "mcp-protocol-version: 2026-07-28"])
        .args(["-d", &listen.to_string(), "-D"])
        .arg(&head)
        .arg("-o")
        .arg(&events)
        .arg("http://localhost/mcp")
        .spawn()
        .unwrap();
    let read = || std::fs::read_to_string(&events).unwrap_or_default();
    wait_until("the stream is acknowledged", Duration::from_secs(20), || {
        read().contains("notifications/subscriptions/acknowledged")
    });
    let ack = read();
    assert!(ack.contains(r#""resourceSubscriptions":["mcpx://fake/fake://static"]"#), "{ack}");
    assert!(ack.contains(r#""io.modelcontextprotocol/subscriptionId":"l1""#), "{ack}");
    let head = std::fs::read_to_string(&head).unwrap().to_lowercase();
    assert!(head.contains("text/event-stream") && !head.contains("mcp-session-id"), "{head}");

    w.call("fake.add_tool", r#"{"name":"fresh"}"#).ok();
    wait_until("list_changed reaches the stream, stamped", Duration::from_secs(20), || {
        read().lines().any(|l| l.contains("notifications/tools/list_changed") && l.contains(r#""l1""#))
    });
    let update = r#"{"method":"notifications/resources/updated","params":{"uri":"fake://static"}}"#;
    w.call("fake.notify", update).ok();
    wait_until("the resource update reaches the stream, stamped", Duration::from_secs(20), || {
        read().lines().any(|l| l.contains(r#""uri":"mcpx://fake/fake://static""#) && l.contains(r#""l1""#))
    });
    assert!(std::fs::read_to_string(&record).unwrap().contains("resources/subscribe"));

    let _ = stream.kill();
    let _ = stream.wait();
    wait_until("a closed stream unsubscribes the server", Duration::from_secs(20), || {
        std::fs::read_to_string(&record).unwrap_or_default().contains("resources/unsubscribe")
    });

    // Headers that do not match the body: 400 with -32020, no stream.
    #[allow(clippy::disallowed_methods)] // Reason: curl posts to the control socket.
    let refused = std::process::Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}", "--unix-socket"])
        .arg(w.path("run/daemon.sock"))
        .args(["-H", "content-type: application/json", "-H", "accept: application/json, text/event-stream"])
        .args(["-H", "mcp-method: tools/list", "-d", &listen.to_string(), "http://localhost/mcp"])
        .output()
        .unwrap();
    let refused = String::from_utf8_lossy(&refused.stdout).into_owned();
    assert!(refused.ends_with("\n400") && refused.contains("-32020"), "{refused}");
}

/// `subscriptions/listen` through `mcpx serve` (stdio, MCP 2026-07-28, Basic, Patterns,
/// "Subscriptions"): each event comes as a line, stamped; the client's
/// `notifications/cancelled` for the listen ends it (the server is unsubscribed, nothing
/// more arrives, no response), and the same cancel closes a modern tool call, whose
/// server is told.
#[test]
fn a_modern_listen_through_serve_ends_on_the_clients_cancel() {
    let w = World::new(json!({}));
    let record = w.path("record.jsonl");
    // One list_changed for the tool added: pinning would hold it and say so again (pins.rs).
    let off = json!({ "pinning": "off" });
    w.set_servers(json!({ "fake": { "command": fake_server(), "mcpx": off, "env": { "FAKE_RECORD": record } } }));
    w.call("fake.echo", r#"{"message":"start"}"#).ok();
    let recorded = || std::fs::read_to_string(&record).unwrap_or_default();
    let (_serve, mut stdin, rx) = crate::serve::spawn_serve(&w);
    let meta = json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                       "io.modelcontextprotocol/clientCapabilities": {} });
    let mut send = |m: serde_json::Value| writeln!(stdin, "{m}").unwrap();
    let next = || rx.recv_timeout(Duration::from_secs(30)).expect("no line from mcpx serve");
    send(json!({ "jsonrpc": "2.0", "id": "l1", "method": "subscriptions/listen", "params": {
        "notifications": { "toolsListChanged": true, "resourceSubscriptions": ["mcpx://fake/fake://static"] },
        "_meta": meta } }));
    let ack = next();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "l1", "{ack}");

    w.call("fake.add_tool", r#"{"name":"fresh"}"#).ok();
    let changed = next();
    assert_eq!(changed["method"], "notifications/tools/list_changed", "{changed}");
    assert_eq!(changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "l1", "{changed}");
    w.call("fake.notify", r#"{"method":"notifications/resources/updated","params":{"uri":"fake://static"}}"#).ok();
    let updated = next();
    assert_eq!(updated["params"]["uri"], "mcpx://fake/fake://static", "{updated}");
    assert!(recorded().contains("resources/subscribe"));

    send(json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": "l1" } }));
    wait_until("the cancelled listen unsubscribes the server", Duration::from_secs(20), || {
        recorded().contains("resources/unsubscribe")
    });
    w.call("fake.add_tool", r#"{"name":"later"}"#).ok();
    // A slow modern call, cancelled: its relay closes and the server hears of it.
    send(json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call",
                 "params": { "name": "fake__slow", "arguments": { "ms": 20000 }, "_meta": meta } }));
    wait_until("the slow call reaches the server", Duration::from_secs(20), || recorded().contains("\"slow\""));
    send(json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 7 } }));
    wait_until("the cancellation reaches the server", Duration::from_secs(20), || {
        recorded().contains("notifications/cancelled")
    });
    send(json!({ "jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": { "_meta": meta } }));
    let listed = next();
    assert_eq!(listed["id"], 8, "nothing but the list's answer after the cancels: {listed}");
    assert!(listed["result"]["tools"].as_array().unwrap().iter().any(|t| t["name"] == "fake__later"), "{listed}");
    assert!(rx.try_recv().is_err(), "a cancelled request is not answered");
}
