//! Results that fit (`docs/configuration.md`, "Results that fit"): a 5 MB tool result
//! with `maxResultBytes` of 20 kB reaches an MCP client cut, at a character boundary,
//! with a note; the whole reads back as `mcpx://results/<id>` through the same session
//! and is gone once it expires; `structuredContent` is never half-sent; the shell gets
//! the whole result.

use serde_json::{Value, json};

use crate::harness::{Serve, World, fake_server};

/// The limit, as the config writes it, and in bytes.
const LIMIT: (&str, usize) = ("20kB", 20_000);

fn world() -> World {
    let mut w = World::new(json!({
        "fake": { "command": fake_server(), "mcpx": { "maxResultBytes": LIMIT.0, "maxResultBytesPerTool": { "echo": "1MiB" } } },
    }));
    // Kept results expire after 3 s here (10 minutes otherwise).
    w.env.push(("MCPX_TEST_RESULTS_TTL_MS".into(), "3000".into()));
    w
}

/// The text of the `mcpx://results/...` URI in a note.
fn uri_in(note: &str) -> String {
    let at = note.find("mcpx://results/").unwrap_or_else(|| panic!("no URI in {note}"));
    note[at..].split(|c: char| c.is_whitespace()).next().unwrap().to_owned()
}

#[test]
fn a_large_result_is_cut_with_a_note_and_the_whole_reads_back_until_it_expires() {
    let w = world();
    let mut serve = Serve::start(&w, json!({}));
    let called = serve.request("tools/call", json!({ "name": "fake__large", "arguments": { "bytes": 5_000_000 } }));
    let result = &called["result"];
    assert!(result.to_string().len() <= LIMIT.1, "{} bytes", result.to_string().len());
    let blocks = result["content"].as_array().unwrap();
    let shown = blocks[0]["text"].as_str().unwrap();
    let full = "é✓😀x".repeat(5_000_000_usize.div_ceil("é✓😀x".len()));
    assert!(full.starts_with(shown) && shown.len() > 15_000, "a prefix, cut at a character boundary");
    assert!(!shown.contains('\u{FFFD}'));
    let note = blocks.last().unwrap()["text"].as_str().unwrap();
    assert!(note.contains("over the 20000 bytes") && note.contains("resources/read"), "{note}");
    let uri = uri_in(note);
    let read = serve.request("resources/read", json!({ "uri": uri }));
    let whole: Value = serde_json::from_str(read["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(whole["content"][0]["text"].as_str().unwrap().len(), full.len(), "the whole result");

    // Another session cannot read it; and after it expires, neither can this one.
    let mut other = Serve::start(&w, json!({}));
    let refused = other.request("resources/read", json!({ "uri": uri }));
    assert_eq!(refused["error"]["code"], -32002, "{refused}");
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let gone = serve.request("resources/read", json!({ "uri": uri }));
    assert_eq!(gone["error"]["code"], -32002, "expired: {gone}");

    // Under the limit, or under a per-tool limit: untouched.
    let small = serve.request("tools/call", json!({ "name": "fake__large", "arguments": { "bytes": 1000 } }));
    assert_eq!(small["result"]["content"].as_array().unwrap().len(), 1, "{small}");
    let echo =
        serve.request("tools/call", json!({ "name": "fake__echo", "arguments": { "message": "x".repeat(50_000) } }));
    assert_eq!(echo["result"]["content"][0]["text"].as_str().unwrap().len(), 50_000, "maxResultBytesPerTool wins");
}

#[test]
fn structured_content_is_never_half_sent_and_the_shell_gets_everything() {
    let w = world();
    let mut serve = Serve::start_args(&w, &["--server", "fake"], json!({}));
    let called = serve.request(
        "tools/call",
        json!({ "name": "large", "arguments": { "bytes": 5_000_000, "blocks": 3, "structured": true } }),
    );
    let result = &called["result"];
    assert!(result.get("structuredContent").is_none(), "left out whole: {}", result.to_string().len());
    let note = result["content"].as_array().unwrap().last().unwrap()["text"].as_str().unwrap().to_owned();
    assert!(note.contains("structuredContent is left out whole"), "{note}");
    let read = serve.request("resources/read", json!({ "uri": uri_in(&note) }));
    let whole: Value = serde_json::from_str(read["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(whole["content"].as_array().unwrap().len(), 3, "through /mcp/<server> too");
    assert!(whole["structuredContent"]["items"].as_array().unwrap().len() > 100_000);
    let fits =
        serve.request("tools/call", json!({ "name": "large", "arguments": { "bytes": 2000, "structured": true } }));
    assert!(fits["result"]["structuredContent"]["items"].is_array(), "a result that fits keeps it: {fits}");

    let out = w.run(&["call", "fake.large", r#"{"bytes":300000}"#]).ok();
    assert!(out.len() >= 300_000, "the shell is not cut: {}", out.len());
}
