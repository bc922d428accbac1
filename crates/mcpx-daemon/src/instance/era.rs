//! Which era of the protocol an instance's server speaks, and the pure parts of
//! finding out: the `server/discover` probe, how its outcome is judged, and the
//! per-request envelope a modern server needs.
//!
//! MCP 2026-07-28, Basic, "Versioning", "Backward Compatibility with
//! Initialization-Based Versions": a client that speaks both eras probes with
//! `server/discover` and falls back to `initialize` "on any error that is not a
//! recognized modern error" (stdio, Transports, "Backward Compatibility"); over
//! Streamable HTTP the body of a `400` is read first, since modern servers answer
//! their own errors (`UnsupportedProtocolVersionError`, `HeaderMismatch`,
//! `MissingRequiredClientCapabilityError`) with `400` too. The verdict is a property
//! of the server, so the daemon remembers it (the schema cache keeps the session).

use std::time::Duration;

use mcpx_proto::mcp;
use mcpx_proto::{Message, RpcError, response_result};
use serde_json::{Value, json};

use super::error::CallError;
use super::session::ServerSession;
use mcpx_proto::era::{
    HEADER_MISMATCH, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION,
    META_SERVER_INFO, MISSING_CAPABILITY, MODERN_VERSIONS, UNSUPPORTED_PROTOCOL_VERSION, is_modern,
};

/// How long an unknown server has to answer the `server/discover` probe before mcpx
/// falls back to `initialize` (`discoverTimeout` is not configurable: a modern server
/// slower than this refuses the `initialize` that follows with an
/// `UnsupportedProtocolVersionError` naming its revisions, and is then probed again
/// with the whole `startTimeout`; a legacy server that stays silent costs this once,
/// since the verdict is remembered).
pub const DISCOVER_TIMEOUT: Duration = Duration::from_secs(3);

/// The era of a server's protocol, as the instance settled it at its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Era {
    /// An `initialize` handshake and a session (MCP 2024-11-05 to 2025-11-25): the
    /// revision the server agreed to.
    Legacy {
        /// The negotiated revision.
        version: String,
    },
    /// No session; every request carries the revision and the client capabilities
    /// in `_meta` (MCP 2026-07-28): the revision chosen from `server/discover`.
    Modern {
        /// The revision every request names.
        version: String,
    },
}

impl Era {
    /// The era of a negotiated session: modern when its revision is one of the
    /// modern ones mcpx speaks.
    pub fn of(session: &ServerSession) -> Era {
        let version = session.protocol_version.clone();
        if is_modern(&version) { Era::Modern { version } } else { Era::Legacy { version } }
    }

    /// The revision.
    pub fn version(&self) -> &str {
        match self {
            Era::Legacy { version } | Era::Modern { version } => version,
        }
    }

    /// Whether the server is of the modern era.
    pub fn is_modern(&self) -> bool {
        matches!(self, Era::Modern { .. })
    }
}

/// What the daemon knows of a server's era before starting it (the session its
/// schema cache keeps, from the last start that listed it).
#[derive(Debug, Clone, Default)]
pub enum Known {
    /// Never started, or its last start failed: probe with `server/discover`.
    #[default]
    Unknown,
    /// Legacy: `initialize` first, no probe.
    Legacy,
    /// Modern: no probe; the session `server/discover` gave last time.
    Modern(ServerSession),
}

impl Known {
    /// What a remembered session says.
    pub fn from_session(session: Option<&ServerSession>) -> Known {
        match session {
            Some(s) if is_modern(&s.protocol_version) => Known::Modern(s.clone()),
            Some(s) if mcp::is_supported(&s.protocol_version) => Known::Legacy,
            _ => Known::Unknown,
        }
    }
}

/// The client capabilities mcpx declares to a modern server on every request
/// (`_meta` `io.modelcontextprotocol/clientCapabilities`): what it relays to its
/// callers, the same as it declares at a legacy `initialize`.
pub fn client_capabilities() -> Value {
    json!({ "roots": {}, "sampling": {}, "elicitation": {} })
}

/// mcpx's `clientInfo`.
fn client_info() -> Value {
    json!({ "name": "mcpx", "version": env!("CARGO_PKG_VERSION") })
}

/// The `server/discover` probe (2026-07-28, Server, "Discovery"), at the newest
/// modern revision, with id `0` (the instance gives it an upstream id).
pub fn discover_request() -> Message {
    let version = MODERN_VERSIONS[MODERN_VERSIONS.len() - 1];
    let params = json!({ "_meta": envelope(version, None) });
    Message::request("0", "server/discover", Some(&params.to_string()))
}

/// The `_meta` keys of a modern request (2026-07-28, Basic, "Per-request protocol
/// fields"; the log level: Server, Utilities, "Logging").
fn envelope(version: &str, log_level: Option<&str>) -> Value {
    let mut meta = json!({
        META_PROTOCOL_VERSION: version,
        META_CLIENT_CAPABILITIES: client_capabilities(),
        META_CLIENT_INFO: client_info(),
    });
    if let Some(level) = log_level {
        meta[META_LOG_LEVEL] = json!(level);
    }
    meta
}

/// `request` as a modern server at `version` takes it: the envelope's keys set in
/// `params._meta` (any a caller sent are replaced: mcpx speaks for itself upstream),
/// with `log_level`, the lowest level its clients want to hear, when one is set.
/// Anything but a request is returned unchanged.
pub fn with_envelope(request: Message, version: &str, log_level: Option<&str>) -> Message {
    if request.kind() != mcpx_proto::MessageKind::Request {
        return request;
    }
    let Ok(mut v) = serde_json::from_str::<Value>(request.as_str()) else { return request };
    if !v["params"].is_object() {
        v["params"] = json!({});
    }
    let params = &mut v["params"];
    if !params["_meta"].is_object() {
        params["_meta"] = json!({});
    }
    if let (Some(meta), Value::Object(add)) = (params["_meta"].as_object_mut(), envelope(version, log_level)) {
        meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
        meta.extend(add);
    }
    Message::parse(v.to_string()).unwrap_or(request)
}

/// A modern server's `response` as a caller of either era takes it from mcpx: a
/// result without `resultType: "complete"` (2026-07-28, Basic, "Results": a legacy
/// client knows no such field; a modern client's answer gets it back from mcpx), and
/// without `ttlMs` and `cacheScope` (Server, Utilities, "Caching": what mcpx relays
/// is cached as mcpx says, not as one server said). Any other `resultType` (an
/// `InputRequiredResult`) and errors are returned unchanged.
pub fn plain_result(response: Message) -> Message {
    let Ok(mut v) = serde_json::from_str::<Value>(response.as_str()) else { return response };
    let Some(result) = v.get_mut("result").and_then(Value::as_object_mut) else { return response };
    if result.get("resultType").is_some_and(|t| t != "complete") {
        return response;
    }
    let before = result.len();
    for key in ["resultType", "ttlMs", "cacheScope"] {
        result.remove(key);
    }
    if result.len() == before {
        return response;
    }
    Message::parse(v.to_string()).unwrap_or(response)
}

/// What becomes of a request on its way to the server.
#[derive(Debug)]
pub enum Upstream {
    /// Send this.
    Send(Message),
    /// Nothing is sent: this is the answer.
    Answered(Message),
}

/// What a `server/discover` probe found.
#[derive(Debug)]
pub enum Probe {
    /// A modern server: its session (the revision chosen, capabilities, identity).
    Modern(ServerSession),
    /// Not a modern server, for the reason given: fall back to `initialize`.
    Legacy(String),
    /// A modern server that refused, or a server that is gone: the start fails.
    Failed(CallError),
}

/// Judges the outcome of the probe: a result naming a modern revision mcpx speaks
/// is a modern server; a recognized modern error (`-32022` naming only revisions
/// mcpx does not speak, `-32020`, `-32021`) fails the start with what the server
/// said; the process ending fails it too; anything else (another error, no answer
/// in time, an HTTP failure without a modern error) falls back.
pub fn judge(outcome: Result<Message, CallError>) -> Probe {
    let response = match outcome {
        Ok(response) => response,
        Err(e @ (CallError::Timeout(_) | CallError::Transport(_) | CallError::Protocol(_))) => {
            return Probe::Legacy(e.to_string());
        }
        Err(e) => return Probe::Failed(e),
    };
    match response_result(&response) {
        Ok(result) => match discovered(result.get()) {
            Ok(session) => Probe::Modern(session),
            Err(why) => Probe::Legacy(why),
        },
        Err(e) if e.code == UNSUPPORTED_PROTOCOL_VERSION => {
            let supported = supported_of(&e);
            if supported.iter().any(|v| mcp::is_supported(v)) || supported.is_empty() {
                return Probe::Legacy(e.to_string());
            }
            Probe::Failed(CallError::Protocol(format!(
                "the server speaks only MCP {}, and mcpx speaks {}: use a version of the server that supports one of them",
                supported.join(", "),
                mcpx_proto::era::all_versions().join(", ")
            )))
        }
        Err(e) if e.code == HEADER_MISMATCH || e.code == MISSING_CAPABILITY => Probe::Failed(CallError::Protocol(
            format!("the server refused mcpx's server/discover: {e}; report it to the server's maintainers"),
        )),
        Err(e) => Probe::Legacy(e.to_string()),
    }
}

/// Whether an error answering `initialize` names a modern revision mcpx speaks (a
/// modern-only server that the probe missed, being slow): then it is probed again.
pub fn names_modern(error: &RpcError) -> bool {
    error.code == UNSUPPORTED_PROTOCOL_VERSION && supported_of(error).iter().any(|v| is_modern(v))
}

/// `data.supported` of an `UnsupportedProtocolVersionError`.
fn supported_of(error: &RpcError) -> Vec<String> {
    let data = error.data.as_ref().and_then(|d| serde_json::from_str::<Value>(d.get()).ok()).unwrap_or_default();
    data["supported"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect()
}

/// The session a `DiscoverResult` describes, at the newest modern revision both
/// sides speak. Errors: the result is malformed or names none.
fn discovered(result: &str) -> Result<ServerSession, String> {
    let v: Value = serde_json::from_str(result).map_err(|e| format!("the discover result is malformed: {e}"))?;
    let offered: Vec<&str> =
        v["supportedVersions"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let Some(version) = MODERN_VERSIONS.iter().rev().find(|m| offered.contains(m)) else {
        return Err(format!("server/discover named no modern revision mcpx speaks ({})", offered.join(", ")));
    };
    let raw = |v: &Value| serde_json::value::to_raw_value(v).ok();
    let empty = json!({});
    let capabilities = raw(if v["capabilities"].is_object() { &v["capabilities"] } else { &empty })
        .ok_or("the discover result's capabilities are malformed")?;
    let info = &v["_meta"][META_SERVER_INFO];
    Ok(ServerSession {
        protocol_version: (*version).to_owned(),
        capabilities,
        server_info: if info.is_object() { raw(info) } else { None },
        instructions: v["instructions"].as_str().map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(body: Value) -> Result<Message, CallError> {
        let mut v = body;
        v["jsonrpc"] = json!("2.0");
        v["id"] = json!(1);
        Ok(Message::parse(v.to_string()).unwrap())
    }

    #[test]
    fn a_discover_result_naming_a_modern_revision_is_a_modern_server() {
        let result = json!({ "result": {
            "supportedVersions": ["2026-07-28", "2025-11-25"],
            "capabilities": { "tools": {} },
            "_meta": { META_SERVER_INFO: { "name": "s", "version": "1" } },
            "instructions": "hi",
        }});
        let Probe::Modern(session) = judge(answer(result)) else { panic!("not modern") };
        assert_eq!(Era::of(&session), Era::Modern { version: "2026-07-28".into() });
        assert!(session.has_capability("tools"));
        assert_eq!(session.instructions.as_deref(), Some("hi"));
        assert!(matches!(Known::from_session(Some(&session)), Known::Modern(_)));
    }

    #[test]
    fn anything_but_a_recognized_modern_error_falls_back() {
        let legacy_only = json!({ "result": { "supportedVersions": ["2025-11-25"] } });
        assert!(matches!(judge(answer(legacy_only)), Probe::Legacy(_)));
        for code in [-32601, -32600, -32602, -32603, -32000, 1] {
            let error = json!({ "error": { "code": code, "message": "no" } });
            assert!(matches!(judge(answer(error)), Probe::Legacy(_)), "code {code}");
        }
        assert!(matches!(judge(Err(CallError::Timeout(DISCOVER_TIMEOUT))), Probe::Legacy(_)));
        let dual = json!({ "error": { "code": -32022, "message": "v", "data": { "supported": ["2025-06-18"] } } });
        assert!(matches!(judge(answer(dual)), Probe::Legacy(_)));
    }

    #[test]
    fn a_plain_result_has_no_modern_fields_but_input_required_is_kept() {
        let listed =
            answer(json!({ "result": { "tools": [], "resultType": "complete", "ttlMs": 5, "cacheScope": "public" } }));
        assert_eq!(plain_result(listed.unwrap()).as_str(), r#"{"id":1,"jsonrpc":"2.0","result":{"tools":[]}}"#);
        let asked = answer(json!({ "result": { "resultType": "input_required", "inputRequests": {} } })).unwrap();
        assert_eq!(plain_result(asked.clone()).as_str(), asked.as_str());
    }

    #[test]
    fn a_recognized_modern_error_fails_the_start() {
        let future = json!({ "error": { "code": -32022, "message": "v", "data": { "supported": ["2099-01-01"] } } });
        let Probe::Failed(e) = judge(answer(future)) else { panic!("not failed") };
        assert!(e.to_string().contains("speaks only MCP 2099-01-01"), "{e}");
        let mismatch = json!({ "error": { "code": -32020, "message": "Mcp-Method header does not match" } });
        assert!(matches!(judge(answer(mismatch)), Probe::Failed(_)));
        let gone = CallError::Lost("gone".into());
        assert!(matches!(judge(Err(gone)), Probe::Failed(_)));
    }

    #[test]
    fn the_envelope_replaces_a_callers_and_keeps_other_meta() {
        let request = Message::request(
            "5",
            "tools/call",
            Some(r#"{"name":"echo","_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"x"}}"#),
        );
        let v: Value = serde_json::from_str(with_envelope(request, "2026-07-28", Some("debug")).as_str()).unwrap();
        let meta = &v["params"]["_meta"];
        assert_eq!(meta["progressToken"], 7);
        assert_eq!(meta[META_PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(meta[META_CLIENT_CAPABILITIES], client_capabilities());
        assert_eq!(meta[META_LOG_LEVEL], "debug");
        assert_eq!(v["id"], 5);
        let bare: Value =
            serde_json::from_str(with_envelope(Message::request("1", "tools/list", None), "2026-07-28", None).as_str())
                .unwrap();
        assert_eq!(bare["params"]["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
        let note = Message::notification("notifications/cancelled", Some(r#"{"requestId":1}"#));
        assert_eq!(with_envelope(note.clone(), "2026-07-28", None).as_str(), note.as_str());
        let modern_named = RpcError {
            code: -32022,
            message: "v".into(),
            data: serde_json::value::to_raw_value(&json!({ "supported": ["2026-07-28"] })).ok(),
        };
        assert!(names_modern(&modern_named));
    }
}
