//! A modern server's notifications (MCP 2026-07-28, Basic, Patterns,
//! "Subscriptions"): mcpx holds a `subscriptions/listen` open on it, so its
//! `list_changed` reaches the schema cache and `/mcp` clients of both eras, and a
//! legacy client's `resources/subscribe` becomes a URI of that listen, whose updates
//! come back as `notifications/resources/updated`. A new daemon opens its own. What
//! has no counterpart across the eras (tasks) is refused by name.

use std::path::Path;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Serve, World, fake_http, fake_server, wait_until};

/// The `subscriptions/listen` requests the fake received, in order.
fn listens(record: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(record).unwrap_or_default();
    let messages = text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok());
    messages.filter(|m| m["method"] == "subscriptions/listen").collect()
}

/// The next message from `rx` that `wanted` accepts, skipping others (30 s at most).
#[track_caller]
fn next_such(rx: &Receiver<Value>, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let m = rx.recv_timeout(left).unwrap_or_else(|_| panic!("no {what} within 30 s"));
        if wanted(&m) {
            return m;
        }
    }
}

/// Whether `search` finds the tool `name` in the schema cache.
fn cached(w: &World, name: &str) -> bool {
    let hits = w.run(&["search", name, "--json"]).json();
    hits.as_array().is_some_and(|a| a.iter().any(|h| h["tool"] == name))
}

/// The whole round against modern `server`, whose fake records to `record`: a tool
/// added reaches the cache, a legacy `serve` client and a modern listen through
/// `serve`; the legacy client's subscription is a URI of mcpx's listen upstream
/// (no `resources/subscribe` reaches the server), its update comes back, and its
/// unsubscription opens a listen without it.
fn heard_by_every_client(w: &World, server: &str, record: &Path) {
    let uri = format!("mcpx://{server}/fake://static");
    let mut legacy = Serve::start(w, json!({}));
    let subscribed = legacy.request("resources/subscribe", json!({ "uri": uri }));
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");
    let last = listens(record).pop().expect("no subscriptions/listen upstream");
    assert_eq!(last["params"]["notifications"]["resourceSubscriptions"], json!(["fake://static"]), "{last}");
    assert_eq!(last["params"]["notifications"]["toolsListChanged"], true, "{last}");
    assert_eq!(last["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{last}");

    let (_modern, mut stdin, modern) = crate::serve::spawn_serve(w);
    let meta = json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                       "io.modelcontextprotocol/clientCapabilities": {} });
    let listen = json!({ "jsonrpc": "2.0", "id": "l1", "method": "subscriptions/listen",
        "params": { "notifications": { "toolsListChanged": true }, "_meta": meta } });
    std::io::Write::write_all(&mut stdin, format!("{listen}\n").as_bytes()).unwrap();
    next_such(&modern, "acknowledgement", |m| m["method"] == "notifications/subscriptions/acknowledged");

    w.call(&format!("{server}.add_tool"), r#"{"name":"fresh"}"#).ok();
    wait_until("the new tool reaches the schema cache", Duration::from_secs(20), || cached(w, "fresh"));
    let changed =
        next_such(&modern, "list_changed on the modern listen", |m| m["method"] == "notifications/tools/list_changed");
    assert_eq!(changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "l1", "{changed}");
    let update = r#"{"method":"notifications/resources/updated","params":{"uri":"fake://static"}}"#;
    w.call(&format!("{server}.notify"), update).ok();
    let (mut changed, mut updated) = (None, None);
    while changed.is_none() || updated.is_none() {
        let m = legacy.recv();
        match m["method"].as_str() {
            Some("notifications/tools/list_changed") => changed = Some(m),
            Some("notifications/resources/updated") => updated = Some(m),
            _ => {}
        }
    }
    let updated = updated.unwrap();
    assert_eq!(updated["params"], json!({ "uri": uri }), "a legacy client's update, without the listen's id");
    let sent = std::fs::read_to_string(record).unwrap();
    assert!(!sent.contains("\"resources/subscribe\""), "a modern server got resources/subscribe: {sent}");

    let unsubscribed = legacy.request("resources/unsubscribe", json!({ "uri": uri }));
    assert_eq!(unsubscribed["result"], json!({}), "{unsubscribed}");
    let last = listens(record).pop().unwrap();
    assert!(last["params"]["notifications"].get("resourceSubscriptions").is_none(), "{last}");
}

/// A supervised modern fake over stdio: heard by every client through one listen;
/// after `kill -9` of the daemon the new daemon opens its own listen on the same
/// process, and a list change reaches its cache.
#[test]
fn a_modern_stdio_server_is_heard_through_its_listen_across_daemons() {
    let w = World::new(json!({}));
    let record = w.path("fake.jsonl");
    // The tool added is to reach every client at once: pinning would hold it (pins.rs).
    w.set_servers(json!({ "fake": { "command": fake_server(), "mcpx": { "pinning": "off" },
        "env": { "FAKE_ERA": "2026-07-28", "FAKE_RECORD": record } } }));
    w.call("fake.echo", r#"{"message":"start"}"#).ok();
    heard_by_every_client(&w, "fake", &record);

    let before = listens(&record).len();
    let pid = w.instance("fake").unwrap()["pid"].clone();
    w.kill_daemon();
    w.call("fake.echo", r#"{"message":"again"}"#).ok();
    assert_eq!(w.instance("fake").unwrap()["pid"], pid, "the same server process");
    wait_until("the new daemon opens its own listen", Duration::from_secs(20), || listens(&record).len() > before);
    w.call("fake.add_tool", r#"{"name":"after_restart"}"#).ok();
    wait_until("the new daemon hears the list change", Duration::from_secs(20), || cached(&w, "after_restart"));
    // The earlier daemon's stream, heard by nobody, is cancelled by the new one.
    wait_until("the orphaned listen is cancelled", Duration::from_secs(20), || {
        std::fs::read_to_string(&record).unwrap_or_default().contains("its daemon has gone")
    });
}

/// A modern fake over streamable HTTP: the listen is a POST whose stream stays open;
/// replacing it closes the old POST (2026-07-28, "Cancellation"), no
/// `notifications/cancelled` is posted.
#[test]
fn a_modern_http_server_is_heard_through_its_listen() {
    let w = World::new(json!({}));
    let record = w.path("http.jsonl");
    let env = [("FAKE_ERA", "2026-07-28"), ("FAKE_RECORD", record.to_str().unwrap())];
    let (_server, url) = fake_http("127.0.0.1:0", &env);
    // The tool added is to reach every client at once: pinning would hold it (pins.rs).
    w.set_servers(json!({ "web": { "url": url, "mcpx": { "pinning": "off" } } }));
    w.call("web.echo", r#"{"message":"start"}"#).ok();
    heard_by_every_client(&w, "web", &record);
    let http = std::fs::read_to_string(format!("{}.http", record.display())).unwrap();
    assert!(http.lines().all(|l| l.starts_with("POST - ")), "no GET, no session: {http}");
    assert!(!http.contains("notifications/cancelled"), "{http}");
}

/// Tasks have no counterpart across the eras: a legacy client's `tasks/get` and
/// task-augmented `tools/call` toward a modern server, and its `tasks/list` on the
/// aggregate, are refused with -32601 naming tasks; the same call without `task` works.
#[test]
fn tasks_across_the_eras_are_refused_by_name() {
    let w = World::new(json!({}));
    w.set_servers(json!({ "fake": { "command": fake_server(), "env": { "FAKE_ERA": "2026-07-28" } } }));
    let mut through = Serve::start_args(&w, &["--server", "fake"], json!({}));
    let get = through.request("tasks/get", json!({ "taskId": "t1" }));
    assert_eq!(get["error"]["code"], -32601, "{get}");
    let message = get["error"]["message"].as_str().unwrap();
    assert!(message.contains("`tasks/get` is one of the tasks (MCP 2025-11-25"), "{message}");
    assert!(message.contains("`fake`, which speaks MCP 2026-07-28"), "{message}");
    let call = json!({ "name": "echo", "arguments": { "message": "hi" }, "task": { "ttl": 60000 } });
    let augmented = through.request("tools/call", call);
    assert_eq!(augmented["error"]["code"], -32601, "{augmented}");
    assert!(augmented["error"]["message"].as_str().unwrap().contains("without `task`"), "{augmented}");
    let plain = through.request("tools/call", json!({ "name": "echo", "arguments": { "message": "hi" } }));
    assert_eq!(plain["result"]["content"][0]["text"], "hi", "{plain}");

    let mut aggregate = Serve::start(&w, json!({}));
    let list = aggregate.request("tasks/list", json!({}));
    assert_eq!(list["error"]["code"], -32601, "{list}");
    assert!(list["error"]["message"].as_str().unwrap().contains("mcpx's aggregate, which offers no tasks"), "{list}");
}
