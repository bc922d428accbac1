//! A hostile server: what a server sends cannot carry the daemon's secrets
//! elsewhere or leave a call hanging. Remote redirects to another origin, replies
//! that cannot be decoded, and a byte-order mark that can (case C18).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{World, fake_http, fake_server};

/// The header-name lines `FAKE_RECORD` wrote to `<record>.headers`.
fn header_lines(record: &std::path::Path) -> Vec<String> {
    let path = format!("{}.headers", record.display());
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// A remote server that redirects to another origin (another port of 127.0.0.1)
/// does not get the configured `X-Api-Key` carried there: the redirect is refused
/// with an error that says why and what to do, and the other server sees nothing.
#[test]
fn a_cross_origin_redirect_does_not_carry_configured_headers() {
    let w = World::new(json!({}));
    let (target_record, moved_record) = (w.path("target-record"), w.path("moved-record"));
    let (_target, target_url) = fake_http("127.0.0.1:0", &[("FAKE_RECORD", target_record.to_str().unwrap())]);
    let (_moved, moved_url) = fake_http(
        "127.0.0.1:0",
        &[("FAKE_RECORD", moved_record.to_str().unwrap()), ("FAKE_HTTP_REDIRECT", target_url.as_str())],
    );
    w.set_servers(json!({
        "moved": { "url": moved_url, "headers": { "X-Api-Key": "${MCPX_TEST_SECRET}" } },
    }));
    let run = w.run_with(&["call", "moved.echo", r#"{"message":"hi"}"#], |c| {
        c.env("MCPX_TEST_SECRET", "s3cret-value");
    });
    assert!(header_lines(&moved_record).iter().any(|l| l.split(',').any(|h| h == "x-api-key")), "never sent: {run:?}");
    let carried: Vec<String> = header_lines(&target_record).into_iter().filter(|l| l.contains("x-api-key")).collect();
    assert!(carried.is_empty(), "X-Api-Key followed the redirect to {target_url}: {carried:?}");
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("redirected to another origin") && run.stderr.contains(&target_url), "{}", run.stderr);
    assert!(!run.stderr.contains("s3cret-value"), "{}", run.stderr);
}

/// A reply whose id can be read but whose bytes cannot be decoded (an invalid UTF-8
/// byte, a raw control character in a string) fails its call at once with a clear
/// error, not after the call's timeout; the server carries on. Over stdio, and as
/// the SSE event answering a remote call.
#[test]
fn an_undecodable_reply_fails_its_call_at_once() {
    let (_remote, url) = fake_http("127.0.0.1:0", &[]);
    let w = World::new(json!({
        "bad": { "command": fake_server(), "mcpx": { "callTimeout": "60s" } },
        "remote": { "url": url, "mcpx": { "callTimeout": "60s" } },
    }));
    for (server, kind) in [("bad", "utf8"), ("bad", "control"), ("remote", "control")] {
        let started = Instant::now();
        let run = w.call(&format!("{server}.bad_reply"), &json!({ "kind": kind }).to_string());
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(20), "{server} {kind}: the call waited {waited:?}");
        assert_eq!(run.code, 4, "{server} {kind}: {run:?}");
        assert!(run.stderr.contains("could not be decoded"), "{server} {kind}: {}", run.stderr);
        let out = w.call(&format!("{server}.echo"), r#"{"message":"still here"}"#).ok();
        assert!(out.contains("still here"), "{server} {kind}: {out}");
    }
}

/// C18: a line that starts with a UTF-8 byte-order mark, split across two writes and
/// ending in CRLF, is a message like any other: a reply, a notification, and a
/// request to the client (a `ping` the server waits for before it replies).
#[test]
fn c18_a_byte_order_mark_starts_a_reply() {
    let w = World::new(json!({ "bom": { "command": fake_server(), "mcpx": { "callTimeout": "60s" } } }));
    let started = Instant::now();
    let out = w.call("bom.bad_reply", r#"{"kind":"bom"}"#).ok();
    assert!(out.contains("bom ok"), "{out}");
    let out = w.call("bom.bad_reply", r#"{"kind":"bom_all"}"#).ok();
    assert!(out.contains("bom all ok"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(20), "the calls waited {:?}", started.elapsed());
    let instance = w.instance("bom").unwrap();
    assert_eq!(instance["skipped_lines"], 0, "a marked line was skipped: {instance}");
}
