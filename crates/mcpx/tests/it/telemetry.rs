//! Telemetry (`docs/telemetry.md`): the spans of recorded requests reach a real OTLP/HTTP
//! receiver (e2e/otlp_receiver.py, decoding with the official `opentelemetry-proto`
//! definitions) in the caller's trace, and the server sees the span's context in
//! `_meta`; a stopped receiver fails no call and its spans are counted dropped; and
//! `GET /metrics` passes Debian's `promtool check metrics` and counts the calls made.

use std::io::BufRead;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Spawned, World, e2e_dir, fake_server, wait_until};
use crate::serve::{http, initialize, rpc};

/// The OTLP/HTTP receiver, killed on drop: its port, and the file it writes each
/// span to as a JSON line.
struct Receiver {
    child: Option<Spawned>,
    port: u16,
    spans: PathBuf,
}

fn receiver(w: &World) -> Receiver {
    let spans = w.path("spans.jsonl");
    #[allow(clippy::disallowed_methods)] // Reason: the receiver is the test's peer.
    let mut child = std::process::Command::new(e2e_dir().join(".venv/bin/python"))
        .arg(e2e_dir().join("otlp_receiver.py"))
        .arg(&spans)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("e2e/.venv/bin/python (scripts/setup-e2e.sh installs it)");
    let stdout = child.stdout.take().unwrap();
    let child = Spawned(child);
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line).unwrap();
    let port = line.trim().parse().unwrap_or_else(|_| panic!("the receiver printed {line:?}"));
    Receiver { child: Some(child), port, spans }
}

impl Receiver {
    /// The spans received, once there are at least `count`.
    fn spans(&self, count: usize) -> Vec<Value> {
        let mut spans = Vec::new();
        wait_until(&format!("{count} spans at the receiver"), Duration::from_secs(20), || {
            let text = std::fs::read_to_string(&self.spans).unwrap_or_default();
            spans = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            spans.len() >= count
        });
        spans
    }
}

/// The config: the fake server (logging each call's `_meta` to `meta`, `add` left out
/// by the entry) and `otel`.
fn config(w: &World, otel: Value, meta: &std::path::Path) {
    let fake = json!({ "command": fake_server(), "env": { "FAKE_META_LOG": meta },
        "mcpx": { "excludeTools": ["add"] } });
    w.write_config(&json!({ "otel": otel, "mcpServers": { "fake": fake } }).to_string());
}

fn call(id: u64, name: &str, message: &str, meta: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": name, "arguments": { "message": message }, "_meta": meta } })
}

#[test]
fn spans_reach_a_real_receiver_in_the_callers_trace_and_the_server_sees_their_context() {
    let w = World::new(json!({}));
    let r = receiver(&w);
    let meta = w.path("meta.jsonl");
    let endpoint = format!("http://127.0.0.1:{}", r.port);
    config(&w, json!({ "endpoint": endpoint, "serviceName": "mcpx-under-test", "headers": { "x-team": "t1" } }), &meta);
    // A caller's trace in `_meta` (on /mcp/fake), one in the HTTP headers (on /mcp),
    // and a call with none (the CLI); `status` starts the daemon.
    w.run(&["status"]).ok();
    let in_meta = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let (session, _) = initialize(&w, "/mcp/fake", "2025-11-25");
    let parent = json!({ "traceparent": format!("00-{}-{}-01", in_meta.0, in_meta.1) });
    assert!(rpc(&w, "/mcp/fake", &session, call(2, "echo", "in meta", parent))["result"].is_object());
    let in_header = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let (session, _) = initialize(&w, "/mcp", "2025-11-25");
    let traceparent = format!("00-{}-{}-01", in_header.0, in_header.1);
    let headers = [("mcp-session-id", session.as_str()), ("traceparent", traceparent.as_str())];
    let (status, _, body) =
        http(&w, "POST", "/mcp", &headers, &call(3, "fake__echo", "in header", json!({})).to_string());
    assert!(status == 200 && body.contains("in header"), "{status} {body}");
    assert_eq!(w.call("fake.echo", r#"{"message":"no parent"}"#).ok(), "no parent\n");
    // A tool's error, and a call the entry refuses.
    assert!(w.call("fake.env", r#"{"name":"MCPX_TEST_UNSET_VARIABLE"}"#).code != 0);
    assert!(w.call("fake.add", r#"{"a":1,"b":2}"#).code != 0);

    let spans = r.spans(5);
    let by_message = |trace: &str| spans.iter().find(|s| s["trace_id"] == trace).cloned();
    let first = by_message(in_meta.0).unwrap_or_else(|| panic!("no span in the caller's trace: {spans:#?}"));
    assert_eq!(first["parent_span_id"], in_meta.1);
    assert_eq!(first["name"], "tools/call echo");
    assert_eq!(first["kind"], 3, "SPAN_KIND_CLIENT");
    assert_eq!(first["service_name"], "mcpx-under-test");
    assert_eq!(first["headers"]["x-team"], "t1", "the block's headers go with the export");
    let attributes = &first["attributes"];
    for (key, value) in [
        ("mcp.method.name", json!("tools/call")),
        ("gen_ai.tool.name", json!("echo")),
        ("gen_ai.operation.name", json!("execute_tool")),
        ("jsonrpc.request.id", json!("2")),
        ("network.transport", json!("pipe")),
        ("mcpx.server", json!("fake")),
        ("mcpx.path", json!("/mcp/fake")),
        ("mcpx.client", json!("t 1")),
        ("mcp.protocol.version", json!("2025-11-25")),
    ] {
        assert_eq!(attributes[key], value, "{key} of {first:#}");
    }
    assert!(attributes.get("error.type").is_none() && first["status"] == 0, "{first:#}");
    // The server saw the span's own context: its child, in the caller's trace.
    let seen: Vec<Value> =
        std::fs::read_to_string(&meta).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let carried = format!("00-{}-{}-01", in_meta.0, first["span_id"].as_str().unwrap());
    assert_eq!(seen[0]["traceparent"], carried, "{seen:?}");
    // The HTTP header's trace is continued when `_meta` carries none.
    let second = by_message(in_header.0).unwrap_or_else(|| panic!("the header's trace was not continued: {spans:#?}"));
    assert_eq!((&second["parent_span_id"], &second["attributes"]["mcpx.path"]), (&json!(in_header.1), &json!("/mcp")));
    assert_eq!(seen[1]["traceparent"], format!("00-{}-{}-01", in_header.0, second["span_id"].as_str().unwrap()));
    // Without a parent, a trace of its own.
    let own = spans.iter().filter(|s| s["parent_span_id"] == "").collect::<Vec<_>>();
    assert_eq!(own.len(), 3, "{spans:#?}");
    let tool_error = own.iter().find(|s| s["attributes"]["gen_ai.tool.name"] == "env").unwrap();
    assert_eq!((&tool_error["attributes"]["error.type"], &tool_error["status"]), (&json!("tool_error"), &json!(2)));
    let refused = own.iter().find(|s| s["attributes"]["gen_ai.tool.name"] == "add").unwrap();
    assert_eq!(refused["attributes"]["error.type"], "refused", "{refused:#}");
    let daemon = &w.status()["daemon"];
    assert_eq!(daemon["otel_url"], format!("{endpoint}/v1/traces"));
    assert_eq!((daemon["spans_exported"].as_u64(), daemon["spans_dropped"].as_u64()), (Some(5), Some(0)), "{daemon}");
}

#[test]
fn a_stopped_receiver_fails_no_call_and_its_spans_are_counted_dropped() {
    let w = World::new(json!({}));
    let mut r = receiver(&w);
    let port = r.port;
    drop(r.child.take());
    config(&w, json!({ "endpoint": format!("http://127.0.0.1:{port}") }), &w.path("meta.jsonl"));
    for n in 0..5 {
        let message = format!("call {n}");
        assert_eq!(w.call("fake.echo", &json!({ "message": message }).to_string()).ok(), format!("{message}\n"));
    }
    let mut daemon = Value::Null;
    wait_until("5 spans counted dropped", Duration::from_secs(20), || {
        daemon = w.status()["daemon"].clone();
        daemon["spans_dropped"].as_u64() >= Some(5)
    });
    assert_eq!(daemon["spans_exported"], 0);
    assert!(daemon["otel_error"].as_str().is_some_and(|e| e.contains("exporting")), "{daemon}");
    let text = w.run(&["status"]).ok();
    assert!(text.contains("OTEL") && text.contains("dropped"), "{text}");
}

/// The value of the sample `series` (its name and labels as promtool prints them) in
/// `text`, 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines().find_map(|l| l.strip_prefix(series)?.trim().parse().ok()).unwrap_or(0.0)
}

#[test]
fn metrics_pass_promtool_and_count_the_calls_made_failed_and_refused() {
    let w = World::new(json!({}));
    config(&w, Value::Null, &w.path("meta.jsonl"));
    for n in 0..3 {
        assert_eq!(w.call("fake.echo", &format!(r#"{{"message":"m{n}"}}"#)).ok(), format!("m{n}\n"));
    }
    assert!(w.call("fake.env", r#"{"name":"MCPX_TEST_UNSET_VARIABLE"}"#).code != 0);
    assert!(w.call("fake.add", r#"{"a":1,"b":2}"#).code != 0);
    // A crash, and the restart the next call makes.
    assert!(w.call("fake.exit", r#"{"code":3}"#).code != 0);
    wait_until("the crash counted", Duration::from_secs(10), || {
        sample(&http(&w, "GET", "/metrics", &[], "").2, r#"mcpx_server_crashes_total{server="fake"}"#) == 1.0
    });
    assert_eq!(w.call("fake.echo", r#"{"message":"again"}"#).ok(), "again\n");
    let (status, head, text) = http(&w, "GET", "/metrics", &[], "");
    assert_eq!(status, 200, "{head}{text}");
    assert!(head.contains("content-type: text/plain; version=0.0.4"), "{head}");
    #[allow(clippy::disallowed_methods)] // Reason: Debian's promtool is the judge here.
    let mut promtool = std::process::Command::new(e2e_dir().join("prometheus/usr/bin/promtool"))
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("e2e/prometheus/usr/bin/promtool (scripts/setup-e2e.sh downloads it)");
    std::io::Write::write_all(&mut promtool.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let checked = promtool.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&checked.stdout), String::from_utf8_lossy(&checked.stderr));
    assert!(checked.status.success() && said.trim().is_empty(), "promtool check metrics: {said}\n{text}");
    let calls = |name: &str, outcome: &str| {
        let series =
            format!(r#"mcpx_calls_total{{method="tools/call",name="{name}",outcome="{outcome}",server="fake"}}"#);
        sample(&text, &series)
    };
    let counted = (calls("echo", "ok"), calls("env", "is-error"), calls("add", "refused"), calls("exit", "failed"));
    assert_eq!(counted, (4.0, 1.0, 1.0, 1.0), "{text}");
    let durations = sample(&text, r#"mcpx_call_duration_seconds_count{method="tools/call",server="fake"}"#);
    assert_eq!(durations, 7.0, "{text}");
    assert_eq!(sample(&text, r#"mcpx_restarts_total{server="fake"}"#), 1.0, "{text}");
    assert_eq!(sample(&text, r#"mcpx_instances{server="fake",state="running"}"#), 1.0, "{text}");
    assert!(text.contains("mcpx_activity_queue_depth ") && text.contains("mcpx_build_info{version="), "{text}");
    // On TCP, only with the daemon's token.
    let port = crate::harness::free_port();
    w.run(&["stop"]).ok();
    let addr = format!("127.0.0.1:{port}");
    w.run_with(&["status"], |c| {
        c.env("MCPX_HTTP_ADDR", &addr);
    })
    .ok();
    let token = std::fs::read_to_string(w.path("state/token")).unwrap();
    let get = |auth: Option<&str>| {
        #[allow(clippy::disallowed_methods)] // Reason: curl is the Prometheus scraper's stand-in.
        let mut cmd = std::process::Command::new("curl");
        cmd.args(["-s", "-o", "/dev/null", "-w", "%{http_code}"]);
        if let Some(token) = auth {
            cmd.args(["-H", &format!("authorization: Bearer {}", token.trim())]);
        }
        String::from_utf8(cmd.arg(format!("http://{addr}/metrics")).output().unwrap().stdout).unwrap()
    };
    assert_eq!(get(None), "401");
    assert_eq!(get(Some(&token)), "200");
}
