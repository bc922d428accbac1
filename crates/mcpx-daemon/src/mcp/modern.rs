//! What the endpoint answers in the 2026-07-28 era ([`crate::mcp::era`]) beside a
//! legacy session's answers: `server/discover` (MCP 2026-07-28, Server,
//! "server/discover"), the identity `initialize` shares with it, the envelope taken
//! off a request before it goes to a legacy server, and the fields a modern result
//! carries: `resultType` (Basic, "Results"), `ttlMs` and `cacheScope` on lists, reads
//! and discovery (Server, Utilities, "Caching"), tools in a deterministic order.

use mcpx_proto::Message;
use serde_json::{Value, json};

use crate::daemon::Daemon;
use crate::instance::LOG_LEVELS;
use crate::mcp::catalog::{listed, servers};
use crate::mcp::era;
use crate::mcp::sessions::ClientSession;

/// How long (ms) a modern client may keep a list or discovery result: 0, stale at
/// once. mcpx's lists change whenever a server's do, or a server comes up, and a
/// legacy server behind it gives no lifetime; `list_changed` tells the client when
/// to list again.
pub const TTL_MS: u64 = 0;

/// `cacheScope` of every cacheable result: `private`, since what a session sees
/// depends on its caller's configuration, directory and policy.
pub const CACHE_SCOPE: &str = "private";

/// The methods whose results are cacheable (2026-07-28, Server, Utilities, "Caching").
const CACHEABLE: [&str; 6] =
    ["server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"];

/// What mcpx presents as itself to a session: its capabilities, `serverInfo` and
/// instructions, and the revisions it serves; a passed-through server's own.
pub(crate) struct Identity {
    /// The `capabilities` object.
    pub(crate) capabilities: Value,
    /// The `serverInfo` object (`name`, `version`).
    pub(crate) server_info: Value,
    /// The `instructions` text.
    pub(crate) instructions: String,
    /// The legacy revision the passed-through server negotiated with mcpx, when known.
    pub(crate) upstream_version: Option<String>,
}

/// The identity of `session`: mcpx's own for the aggregate (discovery mode's
/// instructions when `session.discover`); for one server passed through, that
/// server's capabilities, info and instructions, starting it when never listed (and
/// mcpx's when it cannot be listed).
///
/// Errors: (code, message) when the server passed through is not configured or the
/// policy refuses it (-32602), or the configuration cannot be read (-32603).
pub(crate) async fn identity(d: &Daemon, session: &ClientSession) -> Result<Identity, (i64, String)> {
    let instructions = match &session.server {
        _ if session.discover => "mcpx: every configured MCP server, discovered on demand: mcpx_list_servers, mcpx_search, mcpx_describe, then mcpx_call.".to_owned(),
        Some(s) => format!("mcpx passes the server `{s}` through."),
        None => "mcpx: every configured MCP server behind one endpoint. Tools are named <server>__<tool>.".to_owned(),
    };
    let mut identity = Identity {
        capabilities: json!({ "tools": { "listChanged": true }, "resources": { "listChanged": true, "subscribe": true }, "prompts": { "listChanged": true }, "logging": {}, "completions": {} }),
        server_info: json!({ "name": "mcpx", "version": env!("CARGO_PKG_VERSION") }),
        instructions,
        upstream_version: None,
    };
    let Some(name) = &session.server else { return Ok(identity) };
    let entries = servers(d, session)?;
    let entry = entries
        .into_iter()
        .find(|e| &e.name == name)
        .ok_or_else(|| (mcpx_proto::mcp::error_code::INVALID_PARAMS, format!("no server `{name}` is configured")))?;
    if let Some(upstream) = listed(d, session, &entry).await.and_then(|c| c.session.clone()) {
        identity.capabilities = serde_json::from_str(upstream.capabilities.get()).unwrap_or_default();
        if let Some(info) = &upstream.server_info {
            identity.server_info = serde_json::from_str(info.get()).unwrap_or_default();
        }
        if let Some(text) = &upstream.instructions {
            identity.instructions.clone_from(text);
        }
        identity.upstream_version = Some(upstream.protocol_version).filter(|v| !v.is_empty());
    }
    Ok(identity)
}

/// `server/discover` of request `id` (2026-07-28, Server, "server/discover"):
/// `supportedVersions`, `capabilities`, `instructions`, and `serverInfo` in `_meta`.
///
/// The aggregate answers every revision mcpx serves (legacy by `initialize`, and
/// 2026-07-28). One server passed through answers what both mcpx and it speak: the
/// legacy revision it negotiated with mcpx, which a legacy client reaches through
/// mcpx unchanged, and 2026-07-28, which mcpx serves by translating each modern
/// request into the server's session (mcpx speaks every legacy revision, so the
/// server's is the one they share). When the server cannot be listed, 2026-07-28
/// alone.
pub(crate) async fn discover(d: &Daemon, session: &ClientSession, id: &str) -> Message {
    let identity = match identity(d, session).await {
        Ok(i) => i,
        Err((code, message)) => return Message::error_response(id, code, &message),
    };
    let versions: Vec<String> = match (&session.server, identity.upstream_version) {
        (None, _) => era::all_versions().into_iter().map(str::to_owned).collect(),
        (Some(_), upstream) => {
            upstream.into_iter().chain(era::MODERN_VERSIONS.iter().map(|v| (*v).to_owned())).collect()
        }
    };
    let result = json!({
        "supportedVersions": versions,
        "capabilities": identity.capabilities,
        "instructions": identity.instructions,
        "_meta": { era::META_SERVER_INFO: identity.server_info },
    });
    Message::response(id, &result.to_string())
}

/// `request` without the modern envelope's `_meta` keys (`io.modelcontextprotocol/…`),
/// as a legacy server behind mcpx expects it; `_meta` itself goes when nothing else
/// is left in it. Unchanged when it carries none.
pub(crate) fn strip_envelope(request: Message) -> Message {
    let Ok(mut v) = serde_json::from_str::<Value>(request.as_str()) else { return request };
    let Some(meta) = v.pointer_mut("/params/_meta").and_then(Value::as_object_mut) else { return request };
    let before = meta.len();
    meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
    if meta.len() == before {
        return request;
    }
    if meta.is_empty() {
        if let Some(params) = v["params"].as_object_mut() {
            params.remove("_meta");
        }
    }
    let id = request.id().unwrap_or("null").to_owned();
    let method = request.method().unwrap_or_default().to_owned();
    let params = v.get("params").filter(|p| !p.is_null()).map(Value::to_string);
    Message::request(&id, &method, params.as_deref())
}

/// A modern request's `response` to `method` with what the revision adds to a result:
/// `resultType` (`complete` unless the result says otherwise), `ttlMs` and
/// `cacheScope` on cacheable results (kept when the server set them), and the tools
/// of `tools/list` sorted by name. Errors pass unchanged.
pub(crate) fn finish(method: &str, response: Message) -> Message {
    let Ok(mut v) = serde_json::from_str::<Value>(response.as_str()) else { return response };
    let Some(result) = v.get_mut("result").and_then(Value::as_object_mut) else { return response };
    complete_result(method, result);
    let id = response.id().unwrap_or("null").to_owned();
    Message::response(&id, &v["result"].to_string())
}

/// Adds to the result object of a modern request's `method` what the revision adds
/// (MCP 2026-07-28, Basic, "Results"; Server, Utilities, "Caching"): `resultType`
/// (`complete` unless set), `ttlMs` (0) and `cacheScope` (`private`)
/// on cacheable results when the result does not set them, and the tools of
/// `tools/list` sorted by name. Shared by every endpoint mcpx serves modern clients on.
pub fn complete_result(method: &str, result: &mut serde_json::Map<String, Value>) {
    result.entry("resultType").or_insert_with(|| json!("complete"));
    if CACHEABLE.contains(&method) {
        result.entry("ttlMs").or_insert_with(|| json!(TTL_MS));
        result.entry("cacheScope").or_insert_with(|| json!(CACHE_SCOPE));
    }
    if method == "tools/list" {
        if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
            tools.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        }
    }
}

/// Whether a notification belongs on a modern request's stream, given the log level
/// the request asked for (`_meta` `io.modelcontextprotocol/logLevel`; 2026-07-28,
/// Server, Utilities, "Logging"): a `notifications/message` only at or above that
/// level, and none when it asked for none; everything else always.
pub(crate) fn wants(level: Option<&str>, notification: &Message) -> bool {
    if notification.method() != Some("notifications/message") {
        return true;
    }
    let Some(wanted) = level.and_then(|l| LOG_LEVELS.iter().position(|x| *x == l)) else { return false };
    let said = serde_json::from_str::<Value>(notification.as_str())
        .ok()
        .and_then(|v| LOG_LEVELS.iter().position(|l| v["params"]["level"] == *l));
    said.is_none_or(|s| s >= wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_and_envelopes() {
        let listed = Message::response("1", r#"{"tools":[{"name":"b"},{"name":"a"}]}"#);
        let v: Value = serde_json::from_str(finish("tools/list", listed).as_str()).unwrap();
        assert_eq!(v["result"]["tools"][0]["name"], "a");
        assert_eq!((v["result"]["ttlMs"].clone(), v["result"]["cacheScope"].clone()), (json!(0), json!("private")));
        assert_eq!(v["result"]["resultType"], "complete");
        let called = finish("tools/call", Message::response("2", r#"{"content":[]}"#));
        assert!(!called.as_str().contains("ttlMs"));
        let request = Message::request(
            "3",
            "tools/call",
            Some(r#"{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#),
        );
        assert_eq!(
            strip_envelope(request).as_str(),
            Message::request("3", "tools/call", Some(r#"{"name":"x"}"#)).as_str()
        );
        let log =
            |level: &str| Message::notification("notifications/message", Some(&format!(r#"{{"level":"{level}"}}"#)));
        assert!(!wants(None, &log("error")));
        assert!(wants(Some("info"), &log("error")) && !wants(Some("error"), &log("info")));
        assert!(wants(None, &Message::notification("notifications/progress", None)));
    }
}
