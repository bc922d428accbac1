//! OAuth for remote servers, beyond the conformance suite's scenarios
//! (`conformance_client.rs`): what a call to a server that needs a login does when no
//! one has logged in.

use serde_json::json;

use crate::harness::{World, fake_http, fake_server};

/// A server that answers 401 with no login kept: the call fails at once (no browser,
/// no wait) with the error kind `auth`, exit 4, saying to run `mcpx auth login`; a
/// `command` server cannot log in.
#[test]
fn a_call_that_needs_a_login_fails_at_once_saying_to_log_in() {
    let (_server, url) = fake_http("127.0.0.1:0", &[("FAKE_HTTP_STATUS", "401")]);
    let w = World::new(json!({ "docs": { "url": url }, "local": { "command": fake_server() } }));
    let run = w.run(&["--json", "call", "docs.echo", r#"{"message":"hi"}"#]);
    assert_eq!(run.code, 4, "{run:?}");
    let error = &run.json()["error"];
    assert_eq!(error["kind"], "auth", "{run:?}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("run `mcpx auth login docs`"), "{message}");
    let human = w.call("docs.echo", r#"{"message":"hi"}"#);
    assert_eq!(human.code, 4, "{human:?}");
    assert!(human.stderr.contains("run `mcpx auth login docs`"), "{human:?}");

    let local = w.run(&["auth", "login", "local"]);
    assert_eq!(local.code, 2, "{local:?}");
    assert!(local.stderr.contains("server `local` is not a remote server"), "{local:?}");
}
