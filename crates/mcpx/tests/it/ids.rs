//! Request ids an MCP client may not use (case C19 and its neighbours): `null`,
//! `true`, `1.5` and `{}` are answered with -32600 at once, through `/mcp` and
//! through `mcpx serve`, never with silence (JSON-RPC 2.0, section 4; MCP requires a
//! string or an integer).

use std::io::Write;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{World, fake_server};
use crate::serve::{http, initialize, spawn_serve};

/// The ids no request may carry, as JSON texts.
const BAD_IDS: [&str; 4] = ["null", "true", "1.5", "{}"];

/// A `tools/list` request whose id is the JSON text `id`.
fn request_with_id(id: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#)
}

/// C19 through `/mcp`: each bad id gets a -32600 error response.
#[test]
fn c19_bad_request_ids_are_refused_at_mcp() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.run(&["ls"]).ok();
    let (session, _) = initialize(&w, "/mcp", "2025-11-25");
    for id in BAD_IDS {
        let (status, head, body) = http(&w, "POST", "/mcp", &[("mcp-session-id", &session)], &request_with_id(id));
        let answer: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        assert_eq!(answer["error"]["code"], -32600, "id {id}: {status} {head}{body}");
        assert_eq!(answer["id"], Value::Null, "id {id}: {body}");
    }
    // The session still works.
    let (status, _, body) = http(&w, "POST", "/mcp", &[("mcp-session-id", &session)], &request_with_id("2"));
    assert_eq!(status, 200, "{body}");
}

/// C19 through `mcpx serve`: each bad id gets a -32600 error response at once.
#[test]
fn c19_bad_request_ids_are_refused_by_serve() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let (mut child, mut stdin, rx) = spawn_serve(&w);
    let recv = |what: &str| {
        rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("serve answered nothing to {what}"))
    };
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    writeln!(stdin, "{init}").unwrap();
    assert_eq!(recv("initialize")["result"]["protocolVersion"], "2025-11-25");
    writeln!(stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
    for id in BAD_IDS {
        writeln!(stdin, "{}", request_with_id(id)).unwrap();
        let answer = recv(&format!("id {id}"));
        assert_eq!(answer["error"]["code"], -32600, "id {id}: {answer}");
    }
    writeln!(stdin, "{}", request_with_id("2")).unwrap();
    assert_eq!(recv("id 2")["id"], 2);
    drop(stdin); // EOF: serve ends its session and exits.
    let _ = child.0.wait();
}
