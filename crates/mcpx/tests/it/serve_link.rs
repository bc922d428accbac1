//! `mcpx serve`'s link to the daemon (one upgraded connection carrying lines): the
//! fallback to HTTP when the daemon does not offer it, a daemon killed or upgraded
//! under a call, an answer cut by a daemon's death, messages of 16 MiB both ways, and
//! a client that reads only after closing stdin.

use std::time::Duration;

use serde_json::json;

use crate::harness::{Serve, World, fake_server, wait_until};

/// What the daemon logs when serve links.
const LINKED: &str = "mcpx serve linked";

/// A daemon that does not offer the upgrade (as one from before it): serve relays
/// over HTTP, with the same answers, and its reconnect after a daemon kill works too.
#[test]
fn without_the_upgrade_serve_relays_over_http() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let mut cmd = w.command();
    cmd.env("MCPX_TEST_NO_STREAM", "1");
    let mut serve = Serve::start_with(cmd, json!({}));
    let call = serve.request("tools/call", json!({ "name": "fake__counter", "arguments": {} }));
    assert_eq!(call["result"]["content"][0]["text"], "1", "{call}");
    w.kill_daemon();
    let call = serve.request("tools/call", json!({ "name": "fake__counter", "arguments": {} }));
    assert_eq!(call["result"]["content"][0]["text"], "2", "{call}");
    assert!(!w.log().contains(LINKED), "serve linked to a daemon that refused it:\n{}", w.log());
}

/// A daemon killed during a call over the link: the call gets a JSON-RPC error saying
/// so (never a hang), and the next call reconnects, initializes again by itself and
/// reaches the same server.
#[test]
fn a_daemon_killed_mid_call_fails_that_call_and_serve_reconnects() {
    let w = World::new(json!({}));
    let record = w.path("record.jsonl");
    w.set_servers(json!({ "fake": { "command": fake_server(), "env": { "FAKE_RECORD": record } } }));
    let mut serve = Serve::start(&w, json!({}));
    let call = serve.request("tools/call", json!({ "name": "fake__counter", "arguments": {} }));
    assert_eq!(call["result"]["content"][0]["text"], "1", "{call}");
    w.assert_log_has(LINKED);
    serve.send(json!({ "jsonrpc": "2.0", "id": "slow", "method": "tools/call",
        "params": { "name": "fake__slow", "arguments": { "ms": 60000 } } }));
    wait_until("the slow call reaches the server", Duration::from_secs(15), || {
        std::fs::read_to_string(&record).unwrap_or_default().contains("\"slow\"")
    });
    w.kill_daemon();
    let failed = serve.recv();
    assert_eq!(failed["id"], "slow", "{failed}");
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    assert!(failed["error"]["message"].as_str().unwrap().contains("went away"), "{failed}");
    let call = serve.request("tools/call", json!({ "name": "fake__counter", "arguments": {} }));
    assert_eq!(call["result"]["content"][0]["text"], "2", "{call}");
}

/// An upgrade during a call over the link: the call finishes on the old daemon, and a
/// call sent while it drains reaches the new one; none is lost or answered twice.
#[test]
fn an_upgrade_under_the_link_loses_no_call() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let mut serve = Serve::start(&w, json!({}));
    let call = serve.request("tools/call", json!({ "name": "fake__counter", "arguments": {} }));
    assert_eq!(call["result"]["content"][0]["text"], "1", "{call}");
    serve.send(json!({ "jsonrpc": "2.0", "id": "slow", "method": "tools/call",
        "params": { "name": "fake__slow", "arguments": { "ms": 1500 } } }));
    let next = w.path("mcpx-next");
    std::fs::copy(crate::harness::mcpx_bin(), &next).unwrap();
    let run = w.run(&["upgrade", "--binary", next.to_str().unwrap(), "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    serve.send(json!({ "jsonrpc": "2.0", "id": "during", "method": "tools/call",
        "params": { "name": "fake__counter", "arguments": {} } }));
    let mut answers = vec![serve.recv(), serve.recv()];
    answers.sort_by_key(|a| a["id"].to_string());
    assert_eq!(answers[0]["id"], "during", "{answers:?}");
    assert_eq!(answers[0]["result"]["content"][0]["text"], "2", "{answers:?}");
    assert_eq!(answers[1]["id"], "slow", "{answers:?}");
    assert_eq!(answers[1]["result"]["content"][0]["text"], "slept 1500", "{answers:?}");
    let call = serve.request("tools/call", json!({ "name": "fake__counter", "arguments": {} }));
    assert_eq!(call["result"]["content"][0]["text"], "3", "{call}");
}

/// A 16 MiB argument and a 16 MiB result cross the link whole.
#[test]
fn sixteen_mib_cross_the_link_both_ways() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let mut serve = Serve::start(&w, json!({}));
    let message = "y".repeat(16 << 20);
    let call = serve.request("tools/call", json!({ "name": "fake__echo", "arguments": { "message": message } }));
    assert_eq!(call["result"]["content"][0]["text"].as_str().map(str::len), Some(16 << 20));
    let call = serve.request("tools/call", json!({ "name": "fake__big", "arguments": { "line_bytes": 16 << 20 } }));
    let text = call["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.len() > (16 << 20) - 200 && text.bytes().all(|b| b == b'x'), "{}", text.len());
    w.assert_log_has(LINKED);
}

/// A client that writes all its requests before reading anything, more than stdout's
/// pipe and the link's socket hold, and then closes stdin (`printf … | mcpx serve`),
/// gets every answer, in full, before serve exits.
#[test]
fn requests_written_without_reading_and_before_stdin_ends_are_all_answered() {
    use std::io::{Read, Write};
    const CALLS: usize = 8;
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let mut cmd = w.command();
    cmd.arg("serve").stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut child = crate::harness::Spawned(cmd.spawn().unwrap());
    let big = "x".repeat(1024 * 1024);
    let mut stdin = child.0.stdin.take().unwrap();
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    writeln!(stdin, "{init}").unwrap();
    writeln!(stdin, "{}", json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).unwrap();
    for id in 1..=CALLS {
        let call = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": "fake__echo", "arguments": { "message": format!("{id}{big}") } } });
        writeln!(stdin, "{call}").unwrap();
    }
    drop(stdin);
    let mut stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        let _ = tx.send(out);
    });
    let out = rx.recv_timeout(Duration::from_secs(60)).expect("serve stalled: its stdout did not end");
    let answers: Vec<serde_json::Value> = out.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let mut ids: Vec<u64> = answers.iter().filter_map(|a| a["id"].as_u64()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..=CALLS as u64).collect::<Vec<_>>(), "{} answers", answers.len());
    for a in answers.iter().filter(|a| a["id"] != 0) {
        let text = a["result"]["content"][0]["text"].as_str().unwrap_or_default();
        assert_eq!(text, format!("{}{big}", a["id"]), "the answer to {} came cut", a["id"]);
    }
    assert!(child.0.wait().unwrap().success());
}

/// A daemon that dies in the middle of writing an answer (as one killed while it relays
/// a large result): serve writes no part of that line, the request gets a JSON-RPC
/// error saying the daemon went away, and the next request reconnects and is answered.
/// The "daemon" is the test's own listener on the daemon's socket, offering the link
/// and cutting the answer to any call whose arguments say `cut`.
#[test]
fn an_answer_cut_by_the_daemon_dying_is_never_written_in_part() {
    use std::io::{BufRead, Write};
    let w = World::new(json!({}));
    let listener = std::os::unix::net::UnixListener::bind(w.path("run/daemon.sock")).unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || cutting_daemon(conn));
        }
    });
    let mut cmd = w.command();
    cmd.arg("serve").stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut child = crate::harness::Spawned(cmd.spawn().unwrap());
    let mut stdin = child.0.stdin.take().unwrap();
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let _ = tx.send(line);
        }
    });
    let next = || {
        let line = rx.recv_timeout(Duration::from_secs(30)).expect("no line from mcpx serve");
        serde_json::from_str::<serde_json::Value>(&line)
            .unwrap_or_else(|e| panic!("serve wrote a line that is not JSON ({e}): {line:.200}"))
    };
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    writeln!(stdin, "{init}").unwrap();
    assert_eq!(next()["id"], 0);
    writeln!(stdin, "{}", json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).unwrap();
    let call = |id: u64, cut: bool| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": "echo", "arguments": { "cut": cut } } })
    };
    writeln!(stdin, "{}", call(1, true)).unwrap();
    let failed = next();
    assert_eq!(failed["id"], 1, "{failed}");
    assert!(failed["error"]["message"].as_str().unwrap_or_default().contains("went away"), "{failed}");
    writeln!(stdin, "{}", call(2, false)).unwrap();
    let answered = next();
    assert_eq!(answered["id"], 2, "{answered}");
    assert_eq!(answered["result"]["content"][0]["text"], "whole", "{answered}");
}

/// One connection of the test's daemon: answers `GET /v1/health`, and the upgrade to
/// serve's link, then
/// `initialize` and every call, except that a call with `"cut": true` gets the first
/// part of its answer and the connection closes.
fn cutting_daemon(conn: std::os::unix::net::UnixStream) {
    use std::io::{BufRead, Write};
    let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
    let mut writer = conn;
    loop {
        let mut head = String::new();
        while reader.read_line(&mut head).is_ok_and(|n| n > 0) && !head.ends_with("\r\n\r\n") {}
        if head.is_empty() {
            return;
        }
        if head.contains("/v1/health ") {
            let health = format!(r#"{{"pid":{},"build":"cutting","started_at_ms":0}}"#, std::process::id());
            write!(
                writer,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{health}",
                health.len()
            )
            .unwrap();
            continue;
        }
        write!(writer, "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: mcpx-mcp/1\r\n\r\n")
            .unwrap();
        break;
    }
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
        let message: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        line.clear();
        let id = &message["id"];
        if message["method"] == "initialize" {
            let result = json!({ "protocolVersion": "2025-11-25", "capabilities": { "tools": {} },
                "serverInfo": { "name": "cutting", "version": "1" } });
            writeln!(writer, "{}", json!({ "jsonrpc": "2.0", "id": id, "result": result })).unwrap();
        } else if message["params"]["arguments"]["cut"] == true {
            let answer = json!({ "jsonrpc": "2.0", "id": id, "result": { "content": [{ "type": "text", "text": "x".repeat(4096) }] } }).to_string();
            let _ = writer.write_all(&answer.as_bytes()[..answer.len() / 2]);
            return;
        } else if !id.is_null() {
            let result = json!({ "content": [{ "type": "text", "text": "whole" }] });
            writeln!(writer, "{}", json!({ "jsonrpc": "2.0", "id": id, "result": result })).unwrap();
        }
    }
}
