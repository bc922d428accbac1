//! The input bridge: a legacy server's `elicitation/create` and
//! `sampling/createMessage` reach a modern (2026-07-28) client as an
//! `InputRequiredResult`, and the retried request's `inputResponses` reach the server;
//! two concurrent modern clients of one shared instance each get their own question
//! and the server's answer to their own reply; an unknown, expired or altered retry is
//! refused; a request that cannot be routed is answered with an error the server
//! reports. Raw HTTP for the exact shapes, and the Python SDK 2.3 through `mcpx serve`
//! and `/mcp`.

use serde_json::{Value, json};

use crate::harness::{World, e2e_dir, fake_http, free_port, mcpx_bin, wait_until};
use crate::tcp::post_to;

/// A world with `servers`, its daemon serving `/mcp` on TCP with `env`: the world, the
/// address and the token.
pub(crate) fn world(servers: Value, env: &[(&str, &str)]) -> (World, String, String) {
    let w = World::new(json!({}));
    w.set_servers(servers);
    let addr = format!("127.0.0.1:{}", free_port());
    w.run_with(&["ls"], |c| {
        c.env("MCPX_HTTP_ADDR", &addr);
        c.envs(env.iter().copied());
    })
    .ok();
    let token = std::fs::read_to_string(w.path("state/token")).unwrap().trim().to_owned();
    (w, addr, token)
}

/// A modern `tools/call` of `tool` with `arguments` and `more` params (a retry's
/// `inputResponses` and `requestState`), from a client with `capabilities`: the
/// JSON-RPC response.
pub(crate) fn call(addr: &str, token: &str, tool: &str, arguments: Value, capabilities: Value, more: Value) -> Value {
    call_on("/mcp", addr, token, tool, arguments, capabilities, more)
}

/// [`call`] on the endpoint at `path` (`/mcp/<server>`).
fn call_on(
    path: &str,
    addr: &str,
    token: &str,
    tool: &str,
    arguments: Value,
    capabilities: Value,
    more: Value,
) -> Value {
    let mut params = json!({ "name": tool, "arguments": arguments, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities } });
    for (k, v) in more.as_object().unwrap() {
        params[k] = v.clone();
    }
    let request = json!({ "jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": params });
    let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", tool)];
    let (status, head, body) = post_to(addr, path, token, &headers, &request);
    assert_eq!(status, 200, "{head}\n{body}");
    serde_json::from_str(&body).unwrap()
}

/// The capabilities of a client that answers elicitation and sampling.
pub(crate) fn answers() -> Value {
    json!({ "elicitation": {}, "sampling": {} })
}

/// The `(key, request, requestState)` of the one input request of `response`, an
/// `InputRequiredResult`.
pub(crate) fn asked(response: &Value) -> (String, Value, String) {
    let result = &response["result"];
    assert_eq!(result["resultType"], "input_required", "{response}");
    let requests = result["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{response}");
    let (key, request) = requests.iter().next().unwrap();
    (key.clone(), request.clone(), result["requestState"].as_str().unwrap().to_owned())
}

/// The text of a complete result.
pub(crate) fn text(response: &Value) -> String {
    assert_eq!(response["result"]["resultType"], "complete", "{response}");
    response["result"]["content"][0]["text"].as_str().unwrap().to_owned()
}

/// The elicit tool's answer as a person `name` gives it.
pub(crate) fn accept(key: &str, name: &str, state: &str) -> Value {
    json!({ "inputResponses": { key: { "action": "accept", "content": { "name": name, "age": 36 } } }, "requestState": state })
}

#[test]
fn a_legacy_servers_elicitation_and_sampling_reach_a_modern_client_and_its_answers_the_server() {
    let (_w, addr, token) = world(json!({ "fake": { "command": crate::harness::fake_server() } }), &[]);

    // Elicitation: the form, keyed, with a requestState of 128 random bits.
    let first = call(&addr, &token, "fake__elicit", json!({}), answers(), json!({}));
    assert_eq!(first["id"], 11);
    let (key, request, state) = asked(&first);
    assert_eq!(key, "elicitation-1");
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "Tell the fake server about you.");
    assert!(request["params"]["requestedSchema"]["properties"]["name"].is_object(), "{request}");
    assert!(state.len() == 32 && state.chars().all(|c| c.is_ascii_hexdigit()), "{state}");
    let done = call(&addr, &token, "fake__elicit", json!({}), answers(), accept(&key, "Ada", &state));
    let said = text(&done);
    assert!(said.contains(r#""action":"accept""#) && said.contains("Ada"), "{said}");

    // The token was spent: the same retry again names no call.
    let again = call(&addr, &token, "fake__elicit", json!({}), answers(), accept(&key, "Ada", &state));
    assert_eq!(again["error"]["code"], -32602, "{again}");
    assert!(again["error"]["message"].as_str().unwrap().contains("unknown or expired requestState"), "{again}");

    // Sampling the same way.
    let first = call(&addr, &token, "fake__sample", json!({}), answers(), json!({}));
    let (key, request, state) = asked(&first);
    assert_eq!((key.as_str(), request["method"].as_str()), ("sampling-1", Some("sampling/createMessage")));
    assert_eq!(request["params"]["messages"][0]["content"]["text"], "Say hello.");
    let answer =
        json!({ "role": "assistant", "content": { "type": "text", "text": "hello from the model" }, "model": "m" });
    let more = json!({ "inputResponses": { key.as_str(): answer }, "requestState": state });
    let done = call(&addr, &token, "fake__sample", json!({}), answers(), more);
    assert!(text(&done).contains("hello from the model"), "{done}");

    // A retry that does not repeat the call is refused, and the call stays parked.
    let first = call(&addr, &token, "fake__elicit", json!({}), answers(), json!({}));
    let (key, _, state) = asked(&first);
    let other = call(&addr, &token, "fake__sample", json!({}), answers(), accept(&key, "Bob", &state));
    assert_eq!(other["error"]["code"], -32602, "{other}");
    assert!(other["error"]["message"].as_str().unwrap().contains("does not repeat"), "{other}");
    let done = call(&addr, &token, "fake__elicit", json!({}), answers(), accept(&key, "Bob", &state));
    assert!(text(&done).contains("Bob"), "{done}");

    // One server passed through (`/mcp/<server>`) the same; its retry belongs there.
    let on = |tool: &str, more: Value| call_on("/mcp/fake", &addr, &token, tool, json!({}), answers(), more);
    let (key, _, state) = asked(&on("elicit", json!({})));
    let elsewhere = call(&addr, &token, "fake__elicit", json!({}), answers(), accept(&key, "Cy", &state));
    assert!(elsewhere["error"]["message"].as_str().unwrap().contains("does not repeat"), "{elsewhere}");
    assert!(text(&on("elicit", accept(&key, "Cy", &state))).contains("Cy"));

    // A client without the capability: the server's request is not routed to it, and
    // the server is told why (-32003), which the fake reports as its tool's error.
    let refused = call(&addr, &token, "fake__elicit", json!({}), json!({}), json!({}));
    assert_eq!(refused["result"]["resultType"], "complete", "{refused}");
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(refused.to_string().contains("cannot answer `elicitation/create`"), "{refused}");
}

/// Two modern clients call the elicit tool of one shared instance at once (both calls
/// in flight): over streamable HTTP each server request is routed by the stream it
/// came on, so each client gets its own question and the result carrying its own
/// answer, whatever order they answer in. Over stdio the second request carries no
/// link to its call, so it is not routed (-32002) and the server reports that.
#[test]
fn two_concurrent_modern_clients_of_a_shared_instance_each_get_their_own_answer() {
    let (_server, url) = fake_http("127.0.0.1:0", &[]);
    let servers = json!({ "remote": { "url": url }, "local": { "command": crate::harness::fake_server() } });
    let (w, addr, token) = world(servers, &[]);

    let a = call(&addr, &token, "remote__elicit", json!({}), answers(), json!({}));
    let b = call(&addr, &token, "remote__elicit", json!({}), answers(), json!({}));
    let (key_a, _, state_a) = asked(&a);
    let (key_b, _, state_b) = asked(&b);
    assert_ne!(state_a, state_b);
    assert_eq!(w.instance("remote").unwrap()["calls"], 2, "both calls wait on one instance");
    let done_b = call(&addr, &token, "remote__elicit", json!({}), answers(), accept(&key_b, "Bea", &state_b));
    let done_a = call(&addr, &token, "remote__elicit", json!({}), answers(), accept(&key_a, "Al", &state_a));
    assert!(text(&done_a).contains("\"Al\"") && !text(&done_a).contains("Bea"), "{done_a}");
    assert!(text(&done_b).contains("\"Bea\"") && !text(&done_b).contains("\"Al\""), "{done_b}");

    // Over stdio: the first call's request is routed (the only call in flight); the
    // second's is not, as two calls are in flight.
    let a = call(&addr, &token, "local__elicit", json!({}), answers(), json!({}));
    let (key_a, _, state_a) = asked(&a);
    let b = call(&addr, &token, "local__elicit", json!({}), answers(), json!({}));
    assert_eq!(b["result"]["isError"], true, "{b}");
    assert!(b.to_string().contains("2 requests are in flight"), "{b}");
    let done_a = call(&addr, &token, "local__elicit", json!({}), answers(), accept(&key_a, "Al", &state_a));
    assert!(text(&done_a).contains("\"Al\""), "{done_a}");
}

/// A parked call nobody retries is cancelled upstream and forgotten after its
/// timeout (shortened here); its retry is then told to call again.
#[test]
fn a_parked_call_expires_and_is_cancelled_upstream() {
    let servers = json!({ "fake": { "command": crate::harness::fake_server() } });
    let (w, addr, token) = world(servers, &[("MCPX_TEST_INPUT_WAIT_MS", "300")]);
    let first = call(&addr, &token, "fake__elicit", json!({}), answers(), json!({}));
    let (key, _, state) = asked(&first);
    w.log_once_it_has("cancelling a request");
    wait_until("the instance has no call in flight", std::time::Duration::from_secs(10), || {
        w.instance("fake").unwrap()["calls"] == 0
    });
    let late = call(&addr, &token, "fake__elicit", json!({}), answers(), accept(&key, "Ada", &state));
    assert_eq!(late["error"]["code"], -32602, "{late}");
    let message = late["error"]["message"].as_str().unwrap();
    assert!(message.contains("unknown or expired requestState") && message.contains("call again"), "{message}");
}

/// The Python SDK 2.3 pinned to 2026-07-28, with elicitation and sampling callbacks,
/// through `mcpx serve` and `/mcp`: the SDK drives the retries itself.
#[test]
fn python_sdk_answers_a_legacy_servers_questions_through_serve_and_http() {
    let (w, addr, token) = world(json!({ "fake": { "command": crate::harness::fake_server() } }), &[]);
    let sdk = |args: &[&str]| -> Value {
        let cmd = w.command();
        #[allow(clippy::disallowed_methods)] // Reason: the SDK client under test.
        let mut client = std::process::Command::new(e2e_dir().join(".venv/bin/python"));
        client.arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e/sdk_client_input.py")).args(args);
        client.envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))));
        let out = client.output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let mcpx = mcpx_bin().display().to_string();
    let url = format!("http://{addr}/mcp");
    for (transport, seen) in [("stdio", sdk(&["stdio", &mcpx])), ("http", sdk(&["http", &url, &token]))] {
        assert_eq!(seen["protocol"], "2026-07-28", "{seen}");
        assert_eq!(seen["elicit_error"], false, "{seen}");
        let elicit = seen["elicit"].as_str().unwrap();
        assert!(elicit.contains("accept") && elicit.contains(&format!("sdk-{transport}")), "{seen}");
        assert!(seen["sample"].as_str().unwrap().contains("sampled by the sdk"), "{seen}");
        assert_eq!(seen["asked"][0]["elicit"], "Tell the fake server about you.", "{seen}");
        assert_eq!(seen["asked"][1]["sample"], "Say hello.", "{seen}");
    }
}
