//! The MCP messages a caller sends and the checks of what comes back: the request lines
//! (MCP 2025-11-25, Lifecycle and Tools), JSON-RPC answers picked out of a plain JSON body,
//! an SSE body (MCP 2025-11-25, Transports: Streamable HTTP) or one stdio line.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The protocol revision the callers speak: the legacy, session-based one that every path
/// measured (mcpx, the peers, the fake server) serves.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// The `initialize` request, id 1, as one JSON line without its newline.
pub fn initialize() -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{PROTOCOL_VERSION}","capabilities":{{}},"clientInfo":{{"name":"mcpx-load","version":"1"}}}}}}"#
    )
}

/// The `notifications/initialized` notification.
pub const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// The message caller `caller` sends in its call number `id`: distinct for every caller and
/// call, so that an answer meant for another call never passes the check.
pub fn message(caller: usize, id: u64) -> String {
    format!("c{caller}-{id}")
}

/// A `tools/call` of `tool` (already a JSON string, quotes included) with
/// `{"message": message}`, id `id`.
pub fn call(tool_json: &str, id: u64, message: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":{tool_json},"arguments":{{"message":"{message}"}}}}}}"#
    )
}

/// The parts of a JSON-RPC message the checks read.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    method: Option<String>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

/// A `tools/call` result: its text contents and `isError`.
#[derive(Deserialize)]
struct CallResult {
    #[serde(default)]
    content: Vec<Content>,
    #[serde(rename = "isError", default)]
    is_error: bool,
}

/// One content item; only text items count.
#[derive(Deserialize)]
struct Content {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

/// What one JSON-RPC message is, seen from a caller waiting for the answer to `id`.
#[derive(Debug, PartialEq, Eq)]
pub enum Seen {
    /// The answer to `id`, a result.
    Answer,
    /// Something else: a notification, or an answer to another id.
    Other,
}

/// Classifies one JSON-RPC message (one stdio line, one SSE event's data, one JSON body)
/// for a caller waiting for the answer to request `id`.
///
/// # Errors
///
/// The message is not JSON, is an error answer to `id`, or is a request from the server
/// (which these callers do not serve).
pub fn classify(bytes: &[u8], id: u64) -> Result<Seen> {
    let msg: Message<'_> =
        serde_json::from_slice(bytes).with_context(|| format!("an answer that is not JSON-RPC: {}", excerpt(bytes)))?;
    if msg.method.is_some() {
        if msg.id.is_some() {
            bail!("a request from the server, which mcpx-load does not serve: {}", excerpt(bytes));
        }
        return Ok(Seen::Other);
    }
    if msg.id.map(RawValue::get) != Some(id.to_string().as_str()) {
        return Ok(Seen::Other);
    }
    if msg.error.is_some() || msg.result.is_none() {
        bail!("request {id} failed: {}", excerpt(bytes));
    }
    Ok(Seen::Answer)
}

/// Checks that `bytes`, the answer to request `id` (see [`classify`]), is a `tools/call`
/// result whose only text is `message` and that is not an error.
///
/// # Errors
///
/// Anything else, with the start of the answer.
pub fn check_echo(bytes: &[u8], id: u64, message: &str) -> Result<()> {
    let msg: Message<'_> = serde_json::from_slice(bytes).context("an answer that is not JSON")?;
    let result: CallResult = serde_json::from_str(msg.result.map_or("null", RawValue::get))
        .with_context(|| format!("the answer to call {id} is not a tools/call result: {}", excerpt(bytes)))?;
    let texts: Vec<&str> =
        result.content.iter().filter(|c| c.kind == "text").filter_map(|c| c.text.as_deref()).collect();
    if result.is_error || texts != [message] {
        bail!("expected the echo {message:?} to call {id}, got {}", excerpt(bytes));
    }
    Ok(())
}

/// The JSON-RPC message among the events of an SSE body (`data:` lines, events ended by a
/// blank line) that answers `id`, as its bytes.
///
/// # Errors
///
/// As [`classify`] for any event; none answers `id`.
pub fn from_sse(body: &[u8], id: u64) -> Result<Vec<u8>> {
    let mut data: Vec<u8> = Vec::new();
    let mut lines = body.split(|&b| b == b'\n').peekable();
    while let Some(raw) = lines.next() {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if let Some(rest) = line.strip_prefix(b"data:") {
            if !data.is_empty() {
                data.push(b'\n');
            }
            data.extend_from_slice(rest.strip_prefix(b" ").unwrap_or(rest));
        }
        let ends_event = line.is_empty() || lines.peek().is_none();
        if ends_event && !data.is_empty() {
            if classify(&data, id)? == Seen::Answer {
                return Ok(data);
            }
            data.clear();
        }
    }
    bail!("the SSE answer has no response to request {id}: {}", excerpt(body))
}

/// The first 300 bytes of a message, for an error.
pub fn excerpt(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(300)];
    String::from_utf8_lossy(cut).into_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Reason: a failed unwrap is a failed test.

    use super::*;

    const ECHO: &[u8] = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"c0-7"}]}}"#;

    #[test]
    fn requests_are_json() {
        let call: serde_json::Value = serde_json::from_str(&call("\"fake__echo\"", 7, &message(0, 7))).unwrap();
        assert_eq!(call["params"]["name"], "fake__echo");
        assert_eq!(call["params"]["arguments"]["message"], "c0-7");
        let init: serde_json::Value = serde_json::from_str(&initialize()).unwrap();
        assert_eq!(init["params"]["protocolVersion"], PROTOCOL_VERSION);
    }

    #[test]
    fn checks_the_echo() {
        assert_eq!(classify(ECHO, 7).unwrap(), Seen::Answer);
        check_echo(ECHO, 7, "c0-7").unwrap();
        assert!(check_echo(ECHO, 7, "c1-7").is_err(), "another caller's message");
        let error = br#"{"jsonrpc":"2.0","id":7,"result":{"isError":true,"content":[{"type":"text","text":"c0-7"}]}}"#;
        assert!(check_echo(error, 7, "c0-7").is_err());
    }

    #[test]
    fn tells_other_messages_apart() {
        assert_eq!(classify(ECHO, 8).unwrap(), Seen::Other);
        assert_eq!(classify(br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#, 7).unwrap(), Seen::Other);
        assert!(classify(br#"{"jsonrpc":"2.0","id":"s1","method":"roots/list"}"#, 7).is_err());
        assert!(classify(br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}"#, 7).is_err());
        assert!(classify(b"not json", 7).is_err());
    }

    #[test]
    fn finds_the_answer_in_sse() {
        let body = b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\r\n\r\n\
                     id: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\ndata: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"c0-7\"}]}}\n\n";
        let answer = from_sse(body, 7).unwrap();
        check_echo(&answer, 7, "c0-7").unwrap();
        // An event at the very end, without its blank line, counts too.
        let unterminated = format!("data: {}", std::str::from_utf8(ECHO).unwrap());
        assert!(from_sse(unterminated.as_bytes(), 7).is_ok());
        assert!(from_sse(b"data: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n", 7).is_err());
    }
}
