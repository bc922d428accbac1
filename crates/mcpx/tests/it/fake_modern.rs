//! The fake server's modern era (MCP 2026-07-28), which later tests of modern
//! servers behind mcpx rely on: checked against the official Python SDK's client, and
//! its envelope, input requests, listen streams and fault knobs message by message.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Spawned, e2e_dir, fake_http, fake_server};

/// How long a test waits for one message of the fake.
const MESSAGE_DEADLINE: Duration = Duration::from_secs(20);

/// The fake on stdio: what the test writes and what the fake says, line by line.
struct FakeStdio {
    _child: Spawned,
    stdin: ChildStdin,
    lines: Receiver<Value>,
}

impl FakeStdio {
    /// Starts the fake with `env`.
    fn start(env: &[(&str, &str)]) -> Self {
        #[allow(clippy::disallowed_methods)] // Reason: the fake server is the server under test.
        let mut child = std::process::Command::new(fake_server())
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(serde_json::from_str(&line).unwrap_or(Value::String(line))).is_err() {
                    return;
                }
            }
        });
        Self { _child: Spawned(child), stdin, lines }
    }

    /// Writes one message.
    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
    }

    /// The next message the fake writes.
    fn next(&self) -> Value {
        self.lines.recv_timeout(MESSAGE_DEADLINE).expect("the fake said nothing in time")
    }

    /// Sends request `id` and returns its response, failing on anything said before it.
    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        let message = self.next();
        assert_eq!(message["id"], id, "expected the response to {method}, got {message}");
        message
    }
}

/// A modern request's `_meta` with these client capabilities.
fn envelope(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

/// `tools/call` params of a modern request.
fn call_params(name: &str, arguments: Value, extra: Value) -> Value {
    let mut params = json!({ "name": name, "arguments": arguments, "_meta": envelope(json!({ "elicitation": {} })) });
    if let Value::Object(extra) = extra {
        params.as_object_mut().unwrap().extend(extra);
    }
    params
}

/// The Python SDK 2.3 client (this repository's script, the venv of the e2e
/// directory), in `auto` mode and pinned to 2026-07-28, over stdio and
/// over HTTP: it negotiates 2026-07-28, lists and calls, answers an elicitation asked
/// with an `InputRequiredResult`, and hears a change on a listen stream.
#[test]
fn python_sdk_client_speaks_to_the_modern_era() {
    let e2e = e2e_dir();
    let (_http, url) = fake_http("127.0.0.1:0", &[("FAKE_ERA", "2026-07-28")]);
    let fake = fake_server();
    for (mode, transport, target) in
        [("auto", "stdio", &fake), ("2026-07-28", "stdio", &fake), ("auto", "http", &url), ("2026-07-28", "http", &url)]
    {
        #[allow(clippy::disallowed_methods)] // Reason: the Python SDK client under test.
        let out = std::process::Command::new(e2e.join(".venv/bin/python"))
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e/sdk_fake_modern.py"))
            .args([mode, transport, target])
            .output()
            .unwrap();
        assert!(out.status.success(), "{mode} {transport}: {}", String::from_utf8_lossy(&out.stderr));
        let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(seen["protocol"], "2026-07-28", "{seen}");
        assert_eq!(seen["echo"], "modern");
        assert_eq!(seen["read"], "static resource");
        assert_eq!(seen["prompt"], "Hello, Ada!");
        assert_eq!(seen["elicit"], r#"{"action":"accept","content":{"age":36,"name":"Ada"}}"#);
        assert_eq!(seen["event"], "ToolsListChanged");
    }
}

/// No `initialize`, the envelope on every request, `server/discover`, the caching
/// fields, the removed methods, and an input request answered by the retry.
#[test]
fn modern_requests_need_their_envelope_and_retry_for_input() {
    let mut fake =
        FakeStdio::start(&[("FAKE_ERA", "2026-07-28"), ("FAKE_TTL_MS", "5"), ("FAKE_CACHE_SCOPE", "private")]);
    let discover = fake.call(1, "server/discover", json!({}));
    assert_eq!(discover["result"]["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(discover["result"]["resultType"], "complete");
    assert_eq!(discover["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcpx-fake-server");
    let init = fake.call(2, "initialize", json!({ "protocolVersion": "2025-11-25", "capabilities": {} }));
    assert_eq!(init["error"]["code"], -32022, "{init}");
    assert_eq!(init["error"]["data"]["supported"], json!(["2026-07-28"]));
    let bare = fake.call(3, "tools/list", json!({}));
    assert_eq!(bare["error"]["code"], -32602, "{bare}");
    let list = fake.call(4, "tools/list", json!({ "_meta": envelope(json!({})) }));
    assert_eq!((&list["result"]["ttlMs"], &list["result"]["cacheScope"]), (&json!(5), &json!("private")));
    let ping = fake.call(5, "ping", json!({ "_meta": envelope(json!({})) }));
    assert_eq!(ping["error"]["code"], -32601, "{ping}");
    let old = json!({ "_meta": { "io.modelcontextprotocol/protocolVersion": "2099-01-01",
                                 "io.modelcontextprotocol/clientCapabilities": {} } });
    assert_eq!(fake.call(6, "tools/list", old)["error"]["code"], -32022);

    let mut no_capability = call_params("elicit", json!({}), json!({}));
    no_capability["_meta"] = envelope(json!({}));
    let refused = fake.call(7, "tools/call", no_capability);
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(refused["error"]["data"]["requiredCapabilities"], json!({ "elicitation": {} }));
    let asked = fake.call(8, "tools/call", call_params("elicit", json!({}), json!({})));
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    assert_eq!(result["inputRequests"]["elicitation-1"]["method"], "elicitation/create");
    let state = result["requestState"].clone();
    let answer = json!({ "inputResponses": { "elicitation-1": { "action": "decline" } }, "requestState": state });
    let done = fake.call(9, "tools/call", call_params("elicit", json!({}), answer));
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], r#"{"action":"decline"}"#);
    let forged = json!({ "inputResponses": { "elicitation-1": {} }, "requestState": "mine" });
    assert_eq!(fake.call(10, "tools/call", call_params("elicit", json!({}), forged))["error"]["code"], -32602);
}

/// `subscriptions/listen`: acknowledged first, only what it asked for, each change
/// stamped with its `subscriptionId`; cancelled, it hears nothing more; at the end
/// of input it gets its `SubscriptionsListenResult`.
#[test]
fn listen_streams_carry_what_they_asked_for() {
    let mut fake = FakeStdio::start(&[("FAKE_ERA", "2026-07-28")]);
    let filter = json!({ "resourceSubscriptions": ["fake://static"], "promptsListChanged": true });
    let ack = fake
        .call_notification("subscriptions/listen", json!({ "notifications": filter, "_meta": envelope(json!({})) }));
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["notifications"], filter);
    assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "listen");
    // A change it did not ask for, then one it did: only the second is heard, before
    // the answer of the call that made it.
    let other = json!({ "method": "notifications/resources/updated", "params": { "uri": "fake://other" } });
    assert_eq!(fake.call(1, "tools/call", call_params("notify", other, json!({})))["id"], 1);
    assert_eq!(fake.call(2, "tools/call", call_params("add_tool", json!({ "name": "x" }), json!({})))["id"], 2);
    let wanted = json!({ "method": "notifications/resources/updated", "params": { "uri": "fake://static" } });
    fake.send(json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call_params("notify", wanted, json!({})) }));
    let heard = fake.next();
    assert_eq!(heard["method"], "notifications/resources/updated", "{heard}");
    assert_eq!(heard["params"]["uri"], "fake://static");
    assert_eq!(heard["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "listen");
    assert_eq!(fake.next()["id"], 3);
    fake.send(json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": "listen" } }));
    let again = json!({ "method": "notifications/prompts/list_changed" });
    assert_eq!(
        fake.call(4, "tools/call", call_params("notify", again, json!({})))["id"],
        4,
        "cancelled: nothing heard"
    );

    let mut fake = FakeStdio::start(&[("FAKE_ERA", "2026-07-28")]);
    fake.call_notification("subscriptions/listen", json!({ "notifications": {}, "_meta": envelope(json!({})) }));
    let FakeStdio { stdin, lines, _child } = fake;
    drop(stdin);
    let end = lines.recv_timeout(MESSAGE_DEADLINE).unwrap();
    assert_eq!(end["id"], "listen", "{end}");
    assert_eq!(end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "listen");
}

impl FakeStdio {
    /// Sends request `listen` and returns the first message (its acknowledgement).
    fn call_notification(&mut self, method: &str, params: Value) -> Value {
        self.send(json!({ "jsonrpc": "2.0", "id": "listen", "method": method, "params": params }));
        self.next()
    }
}

/// The fault knobs: an input request that repeats forever, a slow discover, and the
/// dual era serving a legacy client beside modern requests.
#[test]
fn modern_faults_and_the_dual_era() {
    let mut fake = FakeStdio::start(&[("FAKE_ERA", "2026-07-28"), ("FAKE_INPUT_REPEAT", "1")]);
    let answer = json!({ "inputResponses": { "elicitation-1": { "action": "accept", "content": {} } },
                         "requestState": "fake-state:1" });
    for id in 1..=3 {
        let again = fake.call(id, "tools/call", call_params("elicit", json!({}), answer.clone()));
        assert_eq!(again["result"]["resultType"], "input_required", "round {id}: {again}");
    }

    // The discover answers late: a request sent after it is answered first.
    let mut fake = FakeStdio::start(&[("FAKE_ERA", "2026-07-28"), ("FAKE_DISCOVER_DELAY_MS", "1000")]);
    fake.send(json!({ "jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {} }));
    assert_eq!(fake.call(2, "tools/list", json!({ "_meta": envelope(json!({})) }))["id"], 2);
    assert_eq!(fake.next()["result"]["supportedVersions"][0], "2026-07-28");

    let mut fake = FakeStdio::start(&[("FAKE_ERA", "dual")]);
    let discover = fake.call(1, "server/discover", json!({}));
    assert_eq!(discover["result"]["supportedVersions"][0], "2026-07-28");
    assert!(discover["result"]["supportedVersions"].as_array().unwrap().contains(&json!("2025-11-25")));
    let init = fake.call(2, "initialize", json!({ "protocolVersion": "2025-11-25", "capabilities": {} }));
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    let legacy = fake.call(3, "tools/list", json!({}));
    assert!(legacy["result"].get("resultType").is_none(), "a legacy answer: {legacy}");
    let modern = fake.call(4, "tools/list", json!({ "_meta": envelope(json!({})) }));
    assert_eq!(modern["result"]["resultType"], "complete");
}

/// One HTTP/1.0 POST to `url` with `headers`: (status, head, body).
fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> (u16, String, String) {
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let extra: String = headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
    let body = body.to_string();
    let head = format!(
        "POST /mcp HTTP/1.0\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n{extra}\r\n",
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(MESSAGE_DEADLINE)).unwrap();
    stream.write_all(format!("{head}{body}").as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0), head.to_lowercase(), body.to_owned())
}

/// Over HTTP a modern request needs no session, and its headers must match its
/// body (400 with `-32020`); `FAKE_HEADER_FAULT` refuses every one.
#[test]
fn modern_http_checks_headers_and_needs_no_session() {
    let (_fake, url) = fake_http("127.0.0.1:0", &[("FAKE_ERA", "2026-07-28")]);
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": call_params("echo", json!({ "message": "hi" }), json!({})) });
    let good = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "echo")];
    let (status, head, body) = post(&url, &good, &call);
    assert_eq!(status, 200, "{head}\n{body}");
    assert!(!head.contains("mcp-session-id"), "{head}");
    assert!(body.contains(r#""text":"hi""#), "{body}");
    let wrong = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "pid")];
    let (status, _, body) = post(&url, &wrong, &call);
    assert_eq!(status, 400, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["code"], -32020);

    let (_fake, url) = fake_http("127.0.0.1:0", &[("FAKE_ERA", "2026-07-28"), ("FAKE_HEADER_FAULT", "1")]);
    let (status, _, body) = post(&url, &good, &call);
    assert_eq!(status, 400, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["code"], -32020);
}
