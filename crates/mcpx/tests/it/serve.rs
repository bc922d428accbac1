//! The MCP endpoint: streamable HTTP at `/mcp` on the control socket and `mcpx
//! serve` over stdio (cases C09 server side, C15, C16; names; daemon restarts).

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Serve, Spawned, World, fake_server, wait_until};

/// One HTTP exchange with the daemon's socket: (status, headers, body).
pub(crate) fn http(w: &World, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    #[allow(clippy::disallowed_methods)] // Reason: curl is the documented way to reach the socket.
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-s", "-i", "-X", method, "--unix-socket"]).arg(w.path("run/daemon.sock"));
    cmd.args(["-H", "content-type: application/json", "-H", "accept: application/json, text/event-stream"]);
    for (k, v) in headers {
        cmd.args(["-H", &format!("{k}: {v}")]);
    }
    if !body.is_empty() {
        cmd.args(["--data-binary", body]);
    }
    let out = cmd.arg(format!("http://localhost{path}")).output().expect("curl is needed for these tests");
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_lowercase(), body.to_owned())
}

/// Initializes a session at `path` with `version`: (its `Mcp-Session-Id`, the answer).
pub(crate) fn initialize(w: &World, path: &str, version: &str) -> (String, Value) {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": version, "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let (status, head, body) = http(w, "POST", path, &[], &body.to_string());
    assert_eq!(status, 200, "{head}{body}");
    let session = head.lines().find_map(|l| l.strip_prefix("mcp-session-id: ")).unwrap().trim().to_owned();
    (session, serde_json::from_str(&body).unwrap())
}

/// One request of `session` at `path`, answered 200: the response (the last SSE event).
pub(crate) fn rpc(w: &World, path: &str, session: &str, body: Value) -> Value {
    let (status, head, body) = http(w, "POST", path, &[("mcp-session-id", session)], &body.to_string());
    assert_eq!(status, 200, "{head}{body}");
    // An SSE answer: the last event is the response.
    let json = body.lines().filter_map(|l| l.strip_prefix("data: ")).next_back().map(str::to_owned).unwrap_or(body);
    serde_json::from_str(&json).unwrap()
}

/// A legacy (2025-11-25) client's call on the daemon's `/mcp` over its socket, in a
/// session of its own, its SSE answer held open by `curl` (killed on drop) and written
/// to a file: what a client sees while the server asks it something mid-call.
pub(crate) struct SseCall {
    session: String,
    events: std::path::PathBuf,
    curl: Spawned,
}

impl SseCall {
    /// Initializes a session declaring `capabilities`, then sends `call` in it.
    pub(crate) fn start(w: &World, capabilities: Value, call: &Value) -> SseCall {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": { "protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": { "name": "t", "version": "1" } } });
        let (status, head, body) = http(w, "POST", "/mcp", &[], &body.to_string());
        assert_eq!(status, 200, "{head}{body}");
        let session = head.lines().find_map(|l| l.strip_prefix("mcp-session-id: ")).unwrap().trim().to_owned();
        let events = w.path(&format!("call-{session}.sse"));
        #[allow(clippy::disallowed_methods)] // Reason: curl holds the call's SSE answer open.
        let mut curl = std::process::Command::new("curl");
        curl.args(["-s", "-N", "--unix-socket"]).arg(w.path("run/daemon.sock"));
        curl.args(["-H", "content-type: application/json", "-H", "accept: application/json, text/event-stream"]);
        curl.args(["-H", &format!("mcp-session-id: {session}"), "--data-binary", &call.to_string(), "-o"]);
        let curl = Spawned(curl.arg(&events).arg("http://localhost/mcp").spawn().unwrap());
        SseCall { session, events, curl }
    }

    /// Every message the answer stream carried so far.
    pub(crate) fn messages(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.events).unwrap_or_default();
        text.lines().filter_map(|l| l.strip_prefix("data: ")).filter_map(|d| serde_json::from_str(d).ok()).collect()
    }

    /// Waits (15 s at most) for the server's request `method` on the answer stream.
    #[track_caller]
    pub(crate) fn request(&self, method: &str) -> Value {
        self.nth_request(method, 1)
    }

    /// Waits (15 s at most) for the `n`-th (from 1) request `method` on the answer stream.
    #[track_caller]
    pub(crate) fn nth_request(&self, method: &str, n: usize) -> Value {
        let mut request = Value::Null;
        wait_until(&format!("{method} number {n} reaches the client"), Duration::from_secs(15), || {
            let mut asked = self.messages().into_iter().filter(|m| m["method"] == method);
            request = asked.nth(n - 1).unwrap_or(Value::Null);
            !request.is_null()
        });
        request
    }

    /// Sends `result` in the session as the answer to the server's `request`.
    #[track_caller]
    pub(crate) fn answer(&self, w: &World, request: &Value, result: Value) {
        let answer = json!({ "jsonrpc": "2.0", "id": request["id"], "result": result });
        let (status, head, body) = http(w, "POST", "/mcp", &[("mcp-session-id", &self.session)], &answer.to_string());
        assert_eq!(status, 202, "{head}{body}");
    }

    /// Waits (30 s at most) for the call's answer stream to end: its last message.
    #[track_caller]
    pub(crate) fn finish(self) -> Value {
        self.finish_all().pop().expect("the answer stream carried a response")
    }

    /// Waits (30 s at most) for the call's answer stream to end: every message it carried.
    #[track_caller]
    pub(crate) fn finish_all(mut self) -> Vec<Value> {
        let mut status = None;
        wait_until("the call's answer stream ends", Duration::from_secs(30), || {
            status = self.curl.0.try_wait().unwrap();
            status.is_some()
        });
        assert!(status.unwrap().success(), "curl failed: {status:?}");
        self.messages()
    }
}

/// C15: each supported revision is echoed; an unknown one gets the newest.
#[test]
fn c15_protocol_versions() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.run(&["ls"]).ok();
    for v in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        assert_eq!(initialize(&w, "/mcp", v).1["result"]["protocolVersion"], v);
    }
    assert_eq!(initialize(&w, "/mcp", "2031-01-01").1["result"]["protocolVersion"], "2025-11-25");
}

/// C09 (server side): 404 for an unknown session, 400 for a missing one; DELETE ends one.
#[test]
fn c09_sessions_unknown_missing_and_deleted() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.run(&["ls"]).ok();
    let ping = json!({ "jsonrpc": "2.0", "id": 2, "method": "ping" }).to_string();
    assert_eq!(http(&w, "POST", "/mcp", &[("mcp-session-id", "no-such-session")], &ping).0, 404);
    assert_eq!(http(&w, "POST", "/mcp", &[], &ping).0, 400);
    let (session, _) = initialize(&w, "/mcp", "2025-11-25");
    assert_eq!(rpc(&w, "/mcp", &session, json!({ "jsonrpc": "2.0", "id": 2, "method": "ping" }))["result"], json!({}));
    assert_eq!(http(&w, "DELETE", "/mcp", &[("mcp-session-id", &session)], "").0, 204);
    assert_eq!(http(&w, "POST", "/mcp", &[("mcp-session-id", &session)], &ping).0, 404);
    // server/discover (2026-07-28) is answered in a legacy session too.
    let (session, _) = initialize(&w, "/mcp", "2025-11-25");
    let answer = rpc(&w, "/mcp", &session, json!({ "jsonrpc": "2.0", "id": 3, "method": "server/discover" }));
    assert!(answer["result"]["supportedVersions"].as_array().unwrap().contains(&json!("2026-07-28")), "{answer}");
}

/// C16: a batch of tools/call is processed under 2025-03-26 and refused with -32600 later.
#[test]
fn c16_batches_only_under_2025_03_26() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.run(&["ls"]).ok();
    let batch = json!([
        { "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "fake__echo", "arguments": { "message": "a" } } },
        { "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": "fake__echo", "arguments": { "message": "b" } } },
    ])
    .to_string();
    let (old, _) = initialize(&w, "/mcp", "2025-03-26");
    let (status, _, body) = http(&w, "POST", "/mcp", &[("mcp-session-id", &old)], &batch);
    assert_eq!(status, 200);
    let answers: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert_eq!(answers[0]["result"]["content"][0]["text"], "a");
    assert_eq!(answers[1]["result"]["content"][0]["text"], "b");
    let (new, _) = initialize(&w, "/mcp", "2025-06-18");
    let (_, _, body) = http(&w, "POST", "/mcp", &[("mcp-session-id", &new)], &batch);
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["code"], -32600);
}

/// C16 through `mcpx serve`: a batch refused under 2025-06-18 (one error, `id: null`)
/// leaves nothing waiting, so serve ends when its input does; under 2025-03-26 a batch
/// of two is answered whole, and serve ends too.
#[test]
fn c16_serve_ends_after_a_batch_in_either_era() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    for (version, batch_answered) in [("2025-06-18", false), ("2025-03-26", true)] {
        let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": { "protocolVersion": version, "capabilities": {}, "clientInfo": { "name": "c", "version": "1" } } });
        let batch =
            json!([{ "jsonrpc": "2.0", "id": 5, "method": "ping" }, { "jsonrpc": "2.0", "id": 6, "method": "ping" }]);
        let input = w.path("input.jsonl");
        std::fs::write(&input, format!("{init}\n{batch}\n")).unwrap();
        let run = w.run_with(&["serve"], |cmd| {
            cmd.stdin(std::fs::File::open(&input).unwrap());
        });
        assert_eq!(run.code, 0, "{version}: {run:?}");
        let last: Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
        if batch_answered {
            assert_eq!(last.as_array().map(Vec::len), Some(2), "{version}: {last}");
        } else {
            assert_eq!(last["error"]["code"], -32600, "{version}: {last}");
        }
    }
}

/// Tools named with `.`, `/`, spaces, non-ASCII or too long for one name are exposed
/// under valid names, and calls reach the original tool; resources read through
/// their rewritten URIs return the original content; progress arrives over SSE.
#[test]
fn aggregate_names_resources_and_progress() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let long = "x".repeat(70);
    for name in ["dotted.name", "slash/name", "with space", "naïve", long.as_str()] {
        w.call("fake.add_tool", &json!({ "name": name }).to_string()).ok();
    }
    let (session, _) = initialize(&w, "/mcp", "2025-11-25");
    let tools = rpc(&w, "/mcp", &session, json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }));
    let names: Vec<String> =
        tools["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect();
    let valid = |n: &str| {
        !n.is_empty() && n.len() <= 64 && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    assert!(names.iter().all(|n| valid(n)), "{names:?}");
    assert!(tools["result"]["tools"].as_array().unwrap().iter().all(|t| t["x-fake"] == true), "unknown fields survive");
    for original in ["dotted.name", "slash/name", "with space", "naïve", long.as_str()] {
        let exposed = names.iter().find(|n| {
            n.starts_with("fake__") && n.len() > 6 && {
                let answer = rpc(
                    &w,
                    "/mcp",
                    &session,
                    json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": { "name": n, "arguments": { "message": original } } }),
                );
                answer["result"]["content"][0]["text"] == original && !["fake__echo"].contains(&n.as_str())
            }
        });
        assert!(exposed.is_some(), "no exposed name reaches `{original}`: {names:?}");
    }
    let resources = rpc(&w, "/mcp", &session, json!({ "jsonrpc": "2.0", "id": 4, "method": "resources/list" }));
    let uri = resources["result"]["resources"][0]["uri"].as_str().unwrap().to_owned();
    assert_eq!(uri, "mcpx://fake/fake://static");
    let read = rpc(
        &w,
        "/mcp",
        &session,
        json!({ "jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": { "uri": uri } }),
    );
    assert_eq!(read["result"]["contents"][0]["text"], "static resource");

    let body = json!({ "jsonrpc": "2.0", "id": "p", "method": "tools/call",
        "params": { "name": "fake__progress", "arguments": { "count": 3, "interval_ms": 150 }, "_meta": { "progressToken": "client-token" } } });
    let (_, head, text) = http(&w, "POST", "/mcp", &[("mcp-session-id", &session)], &body.to_string());
    assert!(head.contains("text/event-stream"), "{head}");
    let events: Vec<Value> =
        text.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect();
    assert_eq!(events.len(), 4, "{text}");
    assert!(events[..3].iter().all(|e| e["params"]["progressToken"] == "client-token"));
    assert_eq!(events[3]["id"], "p");
}

/// Runs `mcpx serve` in `w` with piped stdio: the child (killed on drop, so a failed
/// assertion leaves nothing running), its stdin, and each JSON line it writes on
/// stdout, as they come (lines that are not JSON are skipped).
pub(crate) fn spawn_serve(w: &World) -> (Spawned, std::process::ChildStdin, std::sync::mpsc::Receiver<Value>) {
    let mut serve = w.command();
    serve.arg("serve").stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut child = serve.spawn().unwrap();
    let stdin = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    (Spawned(child), stdin, rx)
}

/// `mcpx serve` over stdio: lists and calls; after `kill -9` of the daemon it
/// reconnects by itself and the next call reaches the same server process.
#[test]
fn serve_survives_a_daemon_kill() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let (mut child, mut stdin, rx) = spawn_serve(&w);
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    let recv =
        |rx: &std::sync::mpsc::Receiver<Value>| rx.recv_timeout(Duration::from_secs(30)).expect("no answer from serve");
    send(json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } }));
    assert_eq!(recv(&rx)["result"]["protocolVersion"], "2025-06-18");
    send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    send(
        json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": "fake__counter", "arguments": {} } }),
    );
    assert_eq!(recv(&rx)["result"]["content"][0]["text"], "1");
    let pid = w.instance("fake").unwrap()["pid"].clone();
    w.kill_daemon();
    send(
        json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": { "name": "fake__counter", "arguments": {} } }),
    );
    let answer = recv(&rx);
    assert_eq!(answer["id"], 3);
    assert_eq!(answer["result"]["content"][0]["text"], "2", "{answer}");
    wait_until("the new daemon runs", Duration::from_secs(10), || w.daemon_pid().is_some());
    assert_eq!(w.instance("fake").unwrap()["pid"], pid);
    drop(stdin); // EOF: serve ends its session and exits.
    let _ = child.0.wait();
}

/// C10: a second GET stream on a live session is refused with an HTTP error and the
/// server behind it is untouched; a server's `list_changed` reaches the open stream.
#[test]
fn c10_one_get_stream_per_session_and_list_changed_reaches_it() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let pid = w.instance("fake").unwrap()["pid"].clone();
    let (session, _) = initialize(&w, "/mcp", "2025-11-25");
    let events = w.path("events.txt");
    #[allow(clippy::disallowed_methods)] // Reason: curl holds the GET stream open.
    let mut stream = std::process::Command::new("curl")
        .args(["-s", "-N", "--unix-socket"])
        .arg(w.path("run/daemon.sock"))
        .args(["-H", "accept: text/event-stream", "-H", &format!("mcp-session-id: {session}"), "-o"])
        .arg(&events)
        .arg("http://localhost/mcp")
        .spawn()
        .unwrap();
    wait_until("the stream is open", Duration::from_secs(10), || {
        std::fs::read_to_string(&events).unwrap_or_default().contains("stream open")
    });
    let (status, _, _) = http(&w, "GET", "/mcp", &[("mcp-session-id", &session)], "");
    assert_eq!(status, 409, "a second GET stream was accepted");
    assert_eq!(w.instance("fake").unwrap()["pid"], pid);
    w.call("fake.add_tool", r#"{"name":"fresh"}"#).ok();
    wait_until("list_changed reaches the stream", Duration::from_secs(10), || {
        std::fs::read_to_string(&events).unwrap_or_default().contains("notifications/tools/list_changed")
    });
    let _ = stream.kill();
    let _ = stream.wait();
}

/// An open GET stream (`mcpx serve` always holds one) does not hold an upgrade back:
/// the daemon ends it when asked to upgrade, so the drain waits for requests only.
/// Found by the chaos soak (`scripts/chaos.sh`, seed 31): with `mcpx serve` clients
/// connected, every upgrade waited the whole 10 s drain, every caller waited with it,
/// and the calls still running then were cut off.
#[test]
fn an_open_get_stream_does_not_hold_an_upgrade_back() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    assert_eq!(w.call("fake.echo", r#"{"message":"before"}"#).ok(), "before\n");
    let (session, _) = initialize(&w, "/mcp", "2025-11-25");
    let events = w.path("events.txt");
    #[allow(clippy::disallowed_methods)] // Reason: curl holds the GET stream open.
    let stream = std::process::Command::new("curl")
        .args(["-s", "-N", "--unix-socket"])
        .arg(w.path("run/daemon.sock"))
        .args(["-H", "accept: text/event-stream", "-H", &format!("mcp-session-id: {session}"), "-o"])
        .arg(&events)
        .arg("http://localhost/mcp")
        .spawn()
        .unwrap();
    let mut stream = Spawned(stream);
    wait_until("the stream is open", Duration::from_secs(10), || {
        std::fs::read_to_string(&events).unwrap_or_default().contains("stream open")
    });
    let next = w.path("mcpx-next");
    std::fs::copy(crate::harness::mcpx_bin(), &next).unwrap();
    let started = std::time::Instant::now();
    let run = w.run(&["upgrade", "--binary", next.to_str().unwrap(), "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let took = started.elapsed();
    wait_until("the GET stream ends", Duration::from_secs(10), || stream.0.try_wait().unwrap().is_some());
    assert!(!w.log().contains("were cut off"), "the drain waited for the stream:\n{}", w.log());
    assert!(took < Duration::from_secs(10), "the upgrade took {took:?}, the whole drain");
    assert_eq!(w.call("fake.echo", r#"{"message":"after"}"#).ok(), "after\n");
}

/// `/mcp` on TCP (opt-in, loopback): a bearer token unless disabled, and Host and
/// Origin checked against DNS rebinding.
#[test]
fn tcp_listener_requires_the_token_and_refuses_rebinding() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    w.run_with(&["ls"], |c| {
        c.env("MCPX_HTTP_ADDR", &addr);
    })
    .ok();
    assert_eq!(w.status()["daemon"]["http_url"], format!("http://{addr}/mcp"));
    let token = std::fs::read_to_string(w.path("state/token")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(w.path("state/token")).unwrap().permissions().mode() & 0o777, 0o600);
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } })
    .to_string();
    let post = |headers: &[&str]| -> u16 {
        #[allow(clippy::disallowed_methods)] // Reason: curl is the HTTP client of these tests.
        let mut cmd = std::process::Command::new("curl");
        cmd.args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            "content-type: application/json",
            "--data-binary",
            &init,
        ]);
        for h in headers {
            cmd.args(["-H", h]);
        }
        let out = cmd.arg(format!("http://{addr}/mcp")).output().unwrap();
        String::from_utf8_lossy(&out.stdout).parse().unwrap_or(0)
    };
    let bearer = format!("authorization: Bearer {token}");
    assert_eq!(post(&[]), 401);
    assert_eq!(post(&["authorization: Bearer wrong"]), 401);
    assert_eq!(post(&[&bearer]), 200);
    assert_eq!(post(&[&bearer, "host: evil.example"]), 403);
    assert_eq!(post(&[&bearer, "origin: http://evil.example"]), 403);
    assert_eq!(post(&[&bearer, &format!("origin: http://localhost:{port}")]), 200);
}

/// `mcpx serve --discover`: four tools, and through them every server's tools.
#[test]
fn serve_discover_offers_four_tools_that_reach_everything() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let mut serve = w.command();
    serve.args(["serve", "--discover"]).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut child = serve.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = |v: Value| -> Value {
        writeln!(stdin, "{v}").unwrap();
        serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
    };
    ask(json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } }));
    let tools = ask(json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }));
    let names: Vec<&str> =
        tools["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["mcpx_list_servers", "mcpx_search", "mcpx_describe", "mcpx_call"]);
    let call = |name: &str, arguments: Value| json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": { "name": name, "arguments": arguments } });
    let described = ask(call("mcpx_describe", json!({ "server": "fake", "tool": "counter" })));
    assert!(described["result"]["content"][0]["text"].as_str().unwrap().contains("\"counter\""), "{described}");
    let found = ask(call("mcpx_search", json!({ "query": "counter" })));
    assert!(found["result"]["content"][0]["text"].as_str().unwrap().contains("\"counter\""), "{found}");
    let servers = ask(call("mcpx_list_servers", json!({})));
    assert!(servers["result"]["content"][0]["text"].as_str().unwrap().contains("\"fake\""), "{servers}");
    let counted = ask(call("mcpx_call", json!({ "server": "fake", "tool": "counter", "arguments": {} })));
    assert_eq!(counted["result"]["content"][0]["text"], "1", "{counted}");
    drop(stdin);
    let _ = child.wait();
}

/// A server that asks for sampling mid-call reaches an MCP client that declared
/// sampling (on the call's SSE answer) and its answer completes the call; a client
/// that did not declare it sees the call fail with a clear error, not a hang.
#[test]
fn sampling_is_forwarded_to_a_client_that_declared_it() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.run(&["ls"]).ok();
    let call = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": "fake__sample", "arguments": {} } });
    let pending = SseCall::start(&w, json!({ "sampling": {} }), &call);
    let request = pending.request("sampling/createMessage");
    let answer =
        json!({ "role": "assistant", "content": { "type": "text", "text": "hello from the client" }, "model": "test" });
    pending.answer(&w, &request, answer);
    let last = pending.finish();
    assert_eq!(last["id"], 2);
    assert!(last["result"]["content"][0]["text"].as_str().unwrap().contains("hello from the client"), "{last}");

    // A client without the capability: the call ends with the server's error, at once.
    let (plain, _) = initialize(&w, "/mcp", "2025-11-25");
    let answer = rpc(&w, "/mcp", &plain, call);
    assert_eq!(answer["result"]["isError"], true, "{answer}");
}

/// A client's `notifications/cancelled` reaches the server as a cancellation of the
/// forwarded request (its upstream id), and the client's call ends at once.
#[test]
fn a_client_cancellation_reaches_the_server() {
    let w = World::new(json!({}));
    let record = w.path("calls.jsonl");
    w.set_servers(json!({ "fake": { "command": fake_server(), "env": { "FAKE_RECORD": record } } }));
    w.run(&["ls"]).ok();
    let (session, _) = initialize(&w, "/mcp", "2025-11-25");
    let call = json!({ "jsonrpc": "2.0", "id": "slow-1", "method": "tools/call", "params": { "name": "fake__slow", "arguments": { "ms": 20000 } } });
    #[allow(clippy::disallowed_methods)] // Reason: curl holds the call open.
    let mut pending = std::process::Command::new("curl")
        .args(["-s", "--unix-socket"])
        .arg(w.path("run/daemon.sock"))
        .args(["-H", "content-type: application/json", "-H", &format!("mcp-session-id: {session}")])
        .args(["--data-binary", &call.to_string(), "-o", "/dev/null", "http://localhost/mcp"])
        .spawn()
        .unwrap();
    wait_until("the call reaches the server", Duration::from_secs(15), || {
        std::fs::read_to_string(&record).unwrap_or_default().contains("\"slow\"")
    });
    let started = std::time::Instant::now();
    let cancel = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": "slow-1", "reason": "user" } });
    assert_eq!(http(&w, "POST", "/mcp", &[("mcp-session-id", &session)], &cancel.to_string()).0, 202);
    assert!(pending.wait().unwrap().success());
    assert!(started.elapsed() < Duration::from_secs(10), "the call waited for the tool");
    wait_until("the cancellation reaches the server", Duration::from_secs(10), || {
        std::fs::read_to_string(&record).unwrap_or_default().contains("notifications/cancelled")
    });
    let lines: Vec<Value> =
        std::fs::read_to_string(&record).unwrap().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let forwarded = lines.iter().find(|m| m["params"]["name"] == "slow").unwrap();
    let cancelled = lines.iter().find(|m| m["method"] == "notifications/cancelled").unwrap();
    assert_eq!(cancelled["params"]["requestId"], forwarded["id"]);
}

/// A server with `"scope": "call"` gets an instance per call, which ends when its call
/// is answered, on every MCP path (`/mcp`, `/mcp/<server>`, `mcpx serve`), as on the
/// CLI's: five calls leave no instance running.
#[test]
fn call_scoped_instances_end_with_their_call_on_every_mcp_path() {
    let w = World::new(json!({ "fake": { "command": fake_server(), "mcpx": { "scope": "call" } } }));
    w.run(&["ls"]).ok();
    let live = |w: &World| {
        w.status()["instances"].as_array().map_or(0, |i| {
            i.iter().filter(|x| x["server"] == "fake" && x["state"] != "exited" && x["state"] != "lost").count()
        })
    };
    for (path, tool) in [("/mcp", "fake__echo"), ("/mcp/fake", "echo")] {
        let (session, _) = initialize(&w, path, "2025-11-25");
        for n in 0..5 {
            let call = json!({ "jsonrpc": "2.0", "id": n + 2, "method": "tools/call",
                "params": { "name": tool, "arguments": { "message": format!("m{n}") } } });
            let answer = rpc(&w, path, &session, call);
            assert_eq!(answer["result"]["content"][0]["text"], format!("m{n}"), "{path}: {answer}");
        }
        wait_until(&format!("{path}: no call-scoped instance left"), Duration::from_secs(10), || live(&w) == 0);
    }
    let mut serve = Serve::start(&w, json!({}));
    for n in 0..5 {
        let answer =
            serve.request("tools/call", json!({ "name": "fake__echo", "arguments": { "message": format!("s{n}") } }));
        assert_eq!(answer["result"]["content"][0]["text"], format!("s{n}"), "{answer}");
    }
    wait_until("serve: no call-scoped instance left", Duration::from_secs(10), || live(&w) == 0);
}
