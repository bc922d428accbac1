//! A modern server's `InputRequiredResult` answered by the caller that owns the
//! request, and the request retried with the answers (MCP 2026-07-28, Basic,
//! Patterns, "Multi Round-Trip Requests"): a modern client gets mcpx's own
//! `InputRequiredResult`; a legacy client gets `elicitation/create` on its call's SSE
//! answer; a shell caller without a terminal the documented refusal. Two concurrent
//! callers of one shared stdio instance each get their own question, and a server
//! that keeps asking is given up on after a bounded number of rounds. Against the
//! fake server in its modern era.

use serde_json::{Value, json};

use crate::harness::fake_server;
use crate::input_modern::{accept, answers, asked, call, text, world};
use crate::serve::SseCall;

/// The fake server over stdio, in the modern era, with `env` besides.
pub(crate) fn modern_fake(env: Value) -> Value {
    let mut env = env;
    env["FAKE_ERA"] = json!("2026-07-28");
    json!({ "fake": { "command": fake_server(), "env": env } })
}

#[test]
fn two_concurrent_modern_clients_of_a_modern_stdio_server_each_answer_their_own_question() {
    let (w, addr, token) = world(modern_fake(json!({})), &[]);
    let a = call(&addr, &token, "fake__elicit", json!({}), answers(), json!({}));
    let b = call(&addr, &token, "fake__elicit", json!({}), answers(), json!({}));
    let (key_a, request_a, state_a) = asked(&a);
    let (key_b, _, state_b) = asked(&b);
    assert_eq!(request_a["method"], "elicitation/create", "{a}");
    assert_ne!(state_a, state_b, "mcpx's own tokens, one per call");
    // Unlike a legacy server, a modern one holds no request while its callers think.
    assert_eq!(w.instance("fake").unwrap()["calls"], 0, "nothing is in flight upstream");
    // Answered in the other order: each answer reaches the server's retry of its call.
    let done_b = call(&addr, &token, "fake__elicit", json!({}), answers(), accept(&key_b, "Bea", &state_b));
    let done_a = call(&addr, &token, "fake__elicit", json!({}), answers(), accept(&key_a, "Al", &state_a));
    assert!(text(&done_a).contains("\"Al\"") && !text(&done_a).contains("Bea"), "{done_a}");
    assert!(text(&done_b).contains("\"Bea\"") && !text(&done_b).contains("\"Al\""), "{done_b}");

    // A client that cannot answer: the call ends with an error naming what was asked.
    let refused = call(&addr, &token, "fake__elicit", json!({}), json!({}), json!({}));
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("`elicitation/create`"), "{refused}");

    // The shell without a terminal: the documented refusal.
    let piped = w.call("fake.elicit", "{}");
    assert_ne!(piped.code, 0, "{piped:?}");
    assert!(piped.stderr.contains("ran without a terminal (or with --no-input)"), "{piped:?}");
}

#[test]
fn a_server_that_keeps_asking_is_given_up_on_after_the_bounded_rounds() {
    let (_w, addr, token) = world(modern_fake(json!({ "FAKE_INPUT_REPEAT": "1" })), &[]);
    let mut response = call(&addr, &token, "fake__elicit", json!({}), answers(), json!({}));
    let mut rounds = 0;
    while response["result"]["resultType"] == "input_required" {
        rounds += 1;
        assert!(rounds <= 8, "{response}");
        let (key, _, state) = asked(&response);
        response = call(&addr, &token, "fake__elicit", json!({}), answers(), accept(&key, "Ada", &state));
    }
    assert_eq!(rounds, 8, "the client answered each of mcpx's rounds: {response}");
    assert_eq!(response["error"]["code"], -32603, "{response}");
    assert!(response["error"]["message"].as_str().unwrap().contains("asked for input 8 times"), "{response}");
}

#[test]
fn a_legacy_client_answers_a_modern_servers_question_on_its_calls_stream() {
    let (w, _, _) = world(modern_fake(json!({})), &[]);
    let call = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": "fake__elicit", "arguments": {} } });
    let pending = SseCall::start(&w, json!({ "elicitation": {} }), &call);
    let request = pending.request("elicitation/create");
    assert_eq!(request["params"]["message"], "Tell the fake server about you.", "{request}");
    pending.answer(&w, &request, json!({ "action": "accept", "content": { "name": "Legacy", "age": 7 } }));
    let last = pending.finish();
    assert_eq!(last["id"], 2);
    let said = last["result"]["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("accept") && said.contains("Legacy"), "{last}");
    assert!(last["result"].get("resultType").is_none(), "a legacy client sees a legacy result: {last}");
}
