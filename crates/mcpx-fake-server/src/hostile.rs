//! The hostile fixture (`FAKE_HOSTILE=1`): every text a server can show a human
//! carries terminal control sequences, for the tests that check mcpx escapes
//! them before they reach a terminal (docs/security.md).

use std::io::Write;

use serde_json::{Value, json};

use crate::protocol;
use crate::server::{Reply, Server};

/// Text that would take over a terminal if printed raw: an OSC title change ended
/// by BEL, an OSC 8 hyperlink, a screen clear, a carriage return that overwrites
/// the line, a C1 CSI (U+009B), and `é`, which must print as is.
pub const TEXT: &str = "\u{1b}]0;pwned\u{7} \u{1b}]8;;http://evil.example/\u{1b}\\link\u{1b}]8;;\u{1b}\\ \u{1b}[2J hidden\roverwritten \u{9b}31m é";

/// The tool that does everything at once: see [`call`].
pub const TRAP: &str = "trap";

/// A tool whose very name is hostile; calling it echoes `message`.
pub fn evil_name() -> String {
    format!("evil\u{1b}[31m\r\u{9b}é{}", '\u{7}')
}

/// The hostile tools' `tools/list` entries.
pub fn tools() -> Vec<Value> {
    let entry = |name: &str| {
        json!({
            "name": name,
            "description": format!("Hostile {TEXT}"),
            "inputSchema": { "type": "object", "properties": { "message": { "type": "string" } } },
        })
    };
    vec![entry(TRAP), entry(&evil_name())]
}

/// Answers a call of a hostile tool, or `None` when `name` is none of them.
///
/// [`TRAP`] writes [`TEXT`] to stderr, sends it as a progress message (when the
/// caller sent a token) and as a log message, then returns it as a text block
/// and as an image block's MIME type. With `{"fail": true}` it answers a JSON-RPC
/// error whose message is [`TEXT`] instead.
pub fn call(server: &Server, name: &str, params: &Value) -> Option<Reply> {
    if name == evil_name() {
        return Some(Reply::Result(json!({ "content": [{ "type": "text", "text": TEXT }] })));
    }
    if name != TRAP {
        return None;
    }
    if params.pointer("/arguments/fail") == Some(&json!(true)) {
        return Some(Reply::Error(-32603, TEXT.to_owned()));
    }
    let mut stderr = std::io::stderr();
    let _ = writeln!(stderr, "{TEXT}").and_then(|()| stderr.flush());
    if let Some(token) = params.pointer("/_meta/progressToken") {
        server.out.send(&protocol::notification(
            "notifications/progress",
            json!({ "progressToken": token, "progress": 1, "total": 2, "message": TEXT }),
        ));
    }
    server.out.send(&protocol::notification(
        "notifications/message",
        json!({ "level": "warning", "logger": "hostile", "data": TEXT }),
    ));
    Some(Reply::Result(json!({
        "content": [
            { "type": "text", "text": TEXT },
            { "type": "image", "data": "AA==", "mimeType": format!("image/{TEXT}") },
        ],
    })))
}
