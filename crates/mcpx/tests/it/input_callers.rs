//! A modern server's input request reaches the right one of several concurrent
//! callers of one shared instance, and each answer reaches the server for its own call
//! (MCP 2026-07-28, Basic, Patterns, "Multi Round-Trip Requests"): a shell caller at a
//! terminal (its form), a legacy MCP client (`elicitation/create` on its call's SSE
//! answer) and a modern MCP client (mcpx's own `InputRequiredResult`), all asked at
//! once and answering in the reverse order, each with its own name, which the fake's
//! `elicit` echoes back. And the shell's form answers the Python SDK 2.3 server's
//! question.

use serde_json::{Value, json};

use crate::at_terminal::{Terminal, elicited};
use crate::era_matrix::python;
use crate::harness::World;
use crate::input_modern::{accept, answers, asked, call, text, world};
use crate::input_upstream::modern_fake;
use crate::serve::SseCall;

/// Fills in the fake's elicitation form at terminal `t` with the name `name`.
fn fill_in_the_fakes_form(t: &mut Terminal, name: &str) {
    t.wait_for("Answer");
    t.type_keys("\r"); // Fill in the form (the first choice).
    t.wait_for("age:");
    t.type_keys("42\r");
    t.wait_for("Where to write");
    t.type_keys("someone@example.org\r");
    t.wait_for("Your name:");
    t.type_keys(&format!("{name}\r"));
    t.wait_for("ratio (optional)");
    t.type_keys("\r");
    t.wait_for("Size (optional)");
    t.type_keys("\r");
    t.wait_for("subscribe (optional)");
    t.type_keys("n");
}

/// The names in `said` among the three callers'.
fn names_in(said: &str) -> Vec<&'static str> {
    ["Shell", "Legacy", "Modern"].into_iter().filter(|n| said.contains(&format!("\"{n}\""))).collect()
}

#[test]
fn three_concurrent_callers_of_one_modern_instance_each_answer_their_own_question() {
    let (w, addr, token) = world(modern_fake(json!({})), &[]);
    // The shell at a terminal: asked in its form.
    let mut cmd = w.command();
    cmd.args(["call", "fake.elicit", "--json"]);
    let mut shell = Terminal::spawn(cmd);
    shell.wait_for("Answer");
    // A legacy client: asked on its call's answer stream.
    let legacy_call = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "fake__elicit", "arguments": {} } });
    let legacy = SseCall::start(&w, json!({ "elicitation": {} }), &legacy_call);
    let question = legacy.request("elicitation/create");
    // A modern client: mcpx's own InputRequiredResult.
    let (key, _, state) = asked(&call(&addr, &token, "fake__elicit", json!({}), answers(), json!({})));
    let status = w.status();
    let instances: Vec<&Value> =
        status["instances"].as_array().unwrap().iter().filter(|i| i["server"] == "fake").collect();
    assert_eq!(instances.len(), 1, "one shared instance: {status}");

    // Answered in the reverse order; each caller's answer comes back to it alone.
    let modern = text(&call(&addr, &token, "fake__elicit", json!({}), answers(), accept(&key, "Modern", &state)));
    assert_eq!(names_in(&modern), ["Modern"], "{modern}");
    legacy.answer(&w, &question, json!({ "action": "accept", "content": { "name": "Legacy", "age": 7 } }));
    let last = legacy.finish();
    assert_eq!(last["id"], 2, "{last}");
    let said = last["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(names_in(said), ["Legacy"], "{last}");
    fill_in_the_fakes_form(&mut shell, "Shell");
    let (run, raw) = shell.finish();
    assert_eq!(run.code, 0, "{run:?}\nterminal: {raw}");
    let answer = elicited(&run);
    assert_eq!((&answer["action"], &answer["content"]["name"]), (&json!("accept"), &json!("Shell")), "{answer}");
}

/// The shell's form answers the Python SDK 2.3 server's question: its `ask` tool, whose
/// `Elicit` resolver comes to mcpx as an `InputRequiredResult`.
#[test]
fn the_shells_form_answers_a_python_sdk_servers_question() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e/sdk_modern_server.py");
    let w = World::new(json!({ "py": { "command": python(), "args": [script.canonicalize().unwrap(), "stdio"] } }));
    w.run(&["ls"]).ok();
    let mut cmd = w.command();
    cmd.args(["call", "py.ask"]);
    let mut t = Terminal::spawn(cmd);
    t.wait_for("Answer");
    t.type_keys("\r");
    t.wait_for("Name:");
    t.type_keys("Ada\r");
    let (run, raw) = t.finish();
    assert_eq!((run.code, run.stdout.as_str()), (0, "sdk heard: Ada\n"), "{run:?}\nterminal: {raw}");
}

/// A modern server that keeps asking (`FAKE_INPUT_REPEAT`): a legacy client is asked
/// on its call's answer stream once per round, and after the bounded 8 rounds its call
/// ends with the error that names the count.
#[test]
fn a_legacy_client_of_a_server_that_keeps_asking_is_asked_the_bounded_rounds() {
    let (w, _, _) = world(modern_fake(json!({ "FAKE_INPUT_REPEAT": "1" })), &[]);
    let call = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "fake__elicit", "arguments": {} } });
    let pending = SseCall::start(&w, json!({ "elicitation": {} }), &call);
    for round in 1..=8 {
        let question = pending.nth_request("elicitation/create", round);
        pending.answer(&w, &question, json!({ "action": "accept", "content": { "name": "Legacy", "age": 7 } }));
    }
    let mut seen = pending.finish_all();
    let last = seen.pop().unwrap();
    assert_eq!(seen.iter().filter(|m| m["method"] == "elicitation/create").count(), 8, "{seen:?}");
    assert_eq!(last["id"], 2, "{last}");
    assert!(last.to_string().contains("asked for input 8 times"), "{last}");
}
