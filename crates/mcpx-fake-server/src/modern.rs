//! The modern era of the fake (`FAKE_ERA=2026-07-28` or `--era 2026-07-28`; `dual`
//! serves both eras), after MCP 2026-07-28: no `initialize` and no session, a
//! `server/discover` ("Lifecycle"), every request's envelope in `_meta`
//! ("Per-request protocol fields"), input asked for with an `InputRequiredResult` and
//! answered by the retried request ("Multi round-trip requests", SEP-2322), the
//! `subscriptions/listen` stream ("Subscriptions", SEP-2575), and `ttlMs` /
//! `cacheScope` on list results ("Caching").
//!
//! The engine's tools are the same in both eras: the tools that ask the client
//! (`roots`, `sample`, `elicit`, the conformance `test_sampling` /
//! `test_elicitation*`) go through [`ask`], which on a modern request answers from
//! the retry's `inputResponses` or records the question for [`finish`] to turn the
//! reply into an `InputRequiredResult`. `add_tool` and `notify` go through
//! [`publish`], which stamps each change with the `subscriptionId` of every open
//! listen stream that asked for it.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use serde_json::{Map, Value, json};

use crate::protocol::{self, INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::server::{Reply, SUPPORTED_VERSIONS, Server};

/// The modern revision the fake speaks.
pub const MODERN_VERSION: &str = "2026-07-28";

/// MCP 2026-07-28 error code: HTTP headers do not match the body ("Transports").
pub const HEADER_MISMATCH: i64 = -32020;

/// MCP 2026-07-28 error code: the request lacks a client capability the server needs.
const MISSING_CAPABILITY: i64 = -32021;

/// MCP 2026-07-28 error code: the request's protocol version is not supported.
const UNSUPPORTED_VERSION: i64 = -32022;

/// Request `_meta` key of the protocol version.
const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// Request `_meta` key of the client capabilities.
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";

/// Result `_meta` key of the server's `Implementation`.
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// Notification and result `_meta` key naming the listen stream (its request id).
const SUBSCRIPTION_KEY: &str = "io.modelcontextprotocol/subscriptionId";

/// Request `_meta` key of the per-request log level ("Logging").
const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";

/// The log levels, from the most verbose to the least (RFC 5424, as MCP names them).
const LOG_LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// Prefix of the opaque `requestState` of an `InputRequiredResult`.
const STATE_PREFIX: &str = "fake-state:";

/// Which protocol eras the fake serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Era {
    /// Up to 2025-11-25 only (the default): `server/discover` is `-32601`.
    #[default]
    Legacy,
    /// 2026-07-28 only: `initialize` is refused with `-32022`, every request needs
    /// its `_meta` envelope.
    Modern,
    /// Both: a request with the envelope is served as 2026-07-28, one without as
    /// before.
    Dual,
}

impl Era {
    /// Parses `legacy`, `2026-07-28` or `dual`.
    pub fn parse(raw: &str) -> Result<Self, String> {
        match raw.trim() {
            "legacy" => Ok(Self::Legacy),
            MODERN_VERSION => Ok(Self::Modern),
            "dual" => Ok(Self::Dual),
            other => Err(format!("unknown era {other:?}: use legacy, {MODERN_VERSION} or dual")),
        }
    }
}

/// The open `subscriptions/listen` streams, and whether a legacy client initialized.
#[derive(Default)]
pub struct Listens {
    /// Open streams, in the order they were opened.
    open: Mutex<Vec<Listen>>,
    /// A client sent `initialize` (dual era): changes also go out as plain
    /// notifications, as in the legacy era.
    legacy_client: AtomicBool,
}

/// One open `subscriptions/listen` stream.
struct Listen {
    /// The listen request's id, which is the stream's `subscriptionId`.
    id: Value,
    /// The notifications the server agreed to send (a `SubscriptionFilter`).
    agreed: Value,
    /// The transport route of the listen request (its HTTP stream).
    route: Option<u64>,
}

impl Listens {
    fn lock(&self) -> MutexGuard<'_, Vec<Listen>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What one modern request asked of the client, and the answers its retry carried.
struct Round {
    /// The retry's `inputResponses` (empty on a first try).
    responses: Map<String, Value>,
    /// The request's client capabilities.
    capabilities: Value,
    /// Questions asked so far, by key.
    asked: Map<String, Value>,
    /// A capability the client lacks that a question needed.
    missing: Option<&'static str>,
    /// `FAKE_INPUT_REPEAT`: never take an answer.
    repeat: bool,
    /// The request's `_meta` `io.modelcontextprotocol/logLevel`, an index into
    /// [`LOG_LEVELS`]; `None`: no log messages for it.
    log_level: Option<usize>,
}

thread_local! {
    /// The modern request this thread handles, if any (see [`ask`]).
    static ROUND: RefCell<Option<Round>> = const { RefCell::new(None) };
}

/// Handles a request in a non-legacy era; `None` when it is to be served as a legacy
/// request (dual era, no envelope).
pub fn handle(server: &Server, id: &Value, method: &str, params: &Value) -> Option<Reply> {
    let era = server.config.era;
    if method == "server/discover" {
        return Some(Reply::Result(decorate(server, method, discover(server))));
    }
    let envelope = match check_envelope(params) {
        Ok(envelope) => envelope,
        Err(_) if era == Era::Dual => {
            if method == "initialize" {
                server.listens.legacy_client.store(true, Ordering::Relaxed);
            }
            return None;
        }
        Err(_) if method == "initialize" => {
            let requested = params.get("protocolVersion").cloned().unwrap_or(Value::Null);
            let data = json!({ "supported": [MODERN_VERSION], "requested": requested });
            return Some(error_with_data(id, UNSUPPORTED_VERSION, "Unsupported protocol version", data));
        }
        Err(message) => return Some(Reply::Error(INVALID_PARAMS, message)),
    };
    let Envelope { version, capabilities } = envelope;
    if version != MODERN_VERSION {
        let data = json!({ "supported": [MODERN_VERSION], "requested": version });
        return Some(error_with_data(id, UNSUPPORTED_VERSION, "Unsupported protocol version", data));
    }
    match method {
        "subscriptions/listen" => return Some(listen(server, id, params)),
        // Removed in 2026-07-28 (the changelog): pings, the session log level, and
        // the subscribe RPCs (replaced by `subscriptions/listen`).
        "initialize" | "ping" | "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe" => {
            return Some(Reply::Error(
                METHOD_NOT_FOUND,
                format!("Method not found: {method} (removed in {MODERN_VERSION})"),
            ));
        }
        _ => {}
    }
    if let Some(state) = params.get("requestState") {
        if !state.as_str().is_some_and(|s| s.starts_with(STATE_PREFIX)) {
            return Some(Reply::Error(INVALID_PARAMS, format!("requestState was altered: {state}")));
        }
    }
    let responses = params.get("inputResponses").and_then(Value::as_object).cloned().unwrap_or_default();
    let log_level = params.pointer("/_meta/io.modelcontextprotocol~1logLevel").and_then(Value::as_str);
    let log_level = match log_level.map(|l| LOG_LEVELS.iter().position(|x| *x == l)) {
        Some(None) => return Some(Reply::Error(INVALID_PARAMS, format!("unknown {LOG_LEVEL_KEY}: {log_level:?}"))),
        Some(index) => index,
        None => None,
    };
    let repeat = server.config.input_repeat;
    let round = Round { responses, capabilities, asked: Map::new(), missing: None, repeat, log_level };
    ROUND.with(|cell| cell.replace(Some(round)));
    let reply = crate::server::answer(server, id, method, params);
    let round = ROUND.with(|cell| cell.take());
    Some(finish(server, id, method, reply, round))
}

/// A request's `_meta` envelope.
struct Envelope {
    /// `io.modelcontextprotocol/protocolVersion`.
    version: String,
    /// `io.modelcontextprotocol/clientCapabilities`.
    capabilities: Value,
}

/// Reads the envelope, or says which key is missing.
fn check_envelope(params: &Value) -> Result<Envelope, String> {
    let meta = params.get("_meta").and_then(Value::as_object);
    let missing: Vec<&str> =
        [VERSION_KEY, CAPABILITIES_KEY].into_iter().filter(|key| !meta.is_some_and(|m| m.contains_key(*key))).collect();
    if !missing.is_empty() {
        return Err(format!("params._meta is missing the required key(s): {}", missing.join(", ")));
    }
    let meta = meta.cloned().unwrap_or_default();
    let version = meta.get(VERSION_KEY).and_then(Value::as_str).ok_or("the protocol version is not a string")?;
    Ok(Envelope { version: version.to_owned(), capabilities: meta.get(CAPABILITIES_KEY).cloned().unwrap_or_default() })
}

/// The `server/discover` result (2026-07-28 "Lifecycle"): the versions, the same
/// capabilities as `initialize` (logging too: its tools send log messages, for the
/// requests that carry a level), and the instructions.
fn discover(server: &Server) -> Value {
    if let Some(ms) = server.config.discover_delay_ms {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    let mut versions = vec![MODERN_VERSION];
    if server.config.era == Era::Dual {
        versions.extend(SUPPORTED_VERSIONS.iter().rev());
    }
    json!({
        "supportedVersions": versions,
        "capabilities": {
            "tools": { "listChanged": true },
            "resources": { "listChanged": true, "subscribe": true },
            "prompts": { "listChanged": true },
            "logging": {},
            "completions": {},
        },
        "instructions": "A fake server for tests.",
    })
}

/// Turns a handler's reply into its modern form: an `InputRequiredResult` when it
/// asked the client, `-32021` when the client lacks what it asked, else the result
/// with its `resultType` (and caching fields on lists).
fn finish(server: &Server, id: &Value, method: &str, reply: Reply, round: Option<Round>) -> Reply {
    let round = round.unwrap_or_else(|| Round {
        responses: Map::new(),
        capabilities: Value::Null,
        asked: Map::new(),
        missing: None,
        repeat: false,
        log_level: None,
    });
    if let Some(capability) = round.missing {
        let data = json!({ "requiredCapabilities": { capability: {} } });
        let message = format!("the client capability {capability} is required to call this");
        return error_with_data(id, MISSING_CAPABILITY, &message, data);
    }
    if !round.asked.is_empty() {
        let state = format!("{STATE_PREFIX}{}", round.asked.len());
        let result = json!({ "resultType": "input_required", "inputRequests": round.asked, "requestState": state });
        return Reply::Result(decorate(server, "", result));
    }
    match reply {
        Reply::Result(result) => Reply::Result(decorate(server, method, result)),
        other => other,
    }
}

/// Adds `resultType` (unless set), the server info in `_meta`, and on lists and
/// discover `ttlMs` / `cacheScope` (2026-07-28 "Caching").
fn decorate(server: &Server, method: &str, mut result: Value) -> Value {
    let Value::Object(fields) = &mut result else { return result };
    fields.entry("resultType").or_insert_with(|| json!("complete"));
    let info = json!({ "name": "mcpx-fake-server", "version": env!("CARGO_PKG_VERSION") });
    if let Value::Object(meta) = fields.entry("_meta").or_insert_with(|| json!({})) {
        meta.insert(SERVER_INFO_KEY.to_owned(), info);
    }
    if method.ends_with("/list") || method == "server/discover" {
        fields.insert("ttlMs".to_owned(), json!(server.config.ttl_ms));
        fields.insert("cacheScope".to_owned(), json!(server.config.cache_scope));
    }
    result
}

/// An error response with `data`, as a whole line.
fn error_with_data(id: &Value, code: i64, message: &str, data: Value) -> Reply {
    let mut error = protocol::error_response(id, code, message);
    error["error"]["data"] = data;
    Reply::RawLine(protocol::to_line(&error))
}

/// A tool's question to the client (`roots/list`, `sampling/createMessage`,
/// `elicitation/create`) on a modern request: `None` outside one (ask the legacy
/// way), `Some(Ok(answer))` when the retry carries it under its key, else records
/// the question and gives `Some(Err)` (the reply becomes an `InputRequiredResult`).
///
/// The n-th question of a request has the key `<kind>-<n>` (`elicitation-1`).
pub fn ask(method: &str, params: &Value) -> Option<Result<Value, String>> {
    ROUND.with(|cell| {
        let mut slot = cell.borrow_mut();
        let round = slot.as_mut()?;
        let kind = method.split('/').next().unwrap_or(method);
        let capability = match kind {
            "sampling" => "sampling",
            "roots" => "roots",
            _ => "elicitation",
        };
        if round.capabilities.get(capability).is_none() {
            round.missing = Some(capability);
            return Some(Err(format!("the client lacks the {capability} capability")));
        }
        let key = format!("{kind}-{}", round.asked.len() + 1);
        if let Some(answer) = round.responses.get(&key).filter(|_| !round.repeat) {
            return Some(Ok(answer.clone()));
        }
        round.asked.insert(key, json!({ "method": method, "params": params }));
        Some(Err("input required".to_owned()))
    })
}

/// Whether `message`, sent while this thread handles a request, may go out: on a
/// modern request, a `notifications/message` only when the request carried a log
/// level and at or above it (2026-07-28 "Logging": "MUST NOT emit
/// `notifications/message` for a request that does not include this field").
pub fn admits(message: &Value) -> bool {
    if message.get("method").and_then(Value::as_str) != Some("notifications/message") {
        return true;
    }
    let said = message.pointer("/params/level").and_then(Value::as_str);
    let said = said.and_then(|l| LOG_LEVELS.iter().position(|x| *x == l));
    ROUND.with(|cell| match cell.borrow().as_ref() {
        None => true,
        Some(round) => round.log_level.is_some_and(|wanted| said.is_none_or(|s| s >= wanted)),
    })
}

/// `subscriptions/listen` (2026-07-28 "Subscriptions"): agrees to every kind of
/// notification the fake can send, acknowledges first, and keeps the stream open
/// (no response until the server ends it).
fn listen(server: &Server, id: &Value, params: &Value) -> Reply {
    let asked = params.get("notifications").cloned().unwrap_or_else(|| json!({}));
    let mut agreed = Map::new();
    for key in ["toolsListChanged", "resourcesListChanged", "promptsListChanged"] {
        if asked.get(key) == Some(&Value::Bool(true)) {
            agreed.insert(key.to_owned(), json!(true));
        }
    }
    if let Some(uris) = asked.get("resourceSubscriptions").filter(|v| v.is_array()) {
        agreed.insert("resourceSubscriptions".to_owned(), uris.clone());
    }
    let agreed = Value::Object(agreed);
    let ack = protocol::notification(
        "notifications/subscriptions/acknowledged",
        json!({ "notifications": agreed, "_meta": { SUBSCRIPTION_KEY: id } }),
    );
    let mut open = server.listens.lock();
    server.out.send(&ack);
    open.push(Listen { id: id.clone(), agreed, route: protocol::current_route() });
    Reply::Sent
}

/// Sends a change notification: as is in the legacy era (and to a legacy client in
/// the dual era), and on every open listen stream that asked for it, stamped with
/// its `subscriptionId`. Other notifications are sent as they are.
pub fn publish(server: &Server, notification: &Value) {
    let method = notification.get("method").and_then(Value::as_str).unwrap_or_default();
    let filter_key = match method {
        "notifications/tools/list_changed" => "toolsListChanged",
        "notifications/resources/list_changed" => "resourcesListChanged",
        "notifications/prompts/list_changed" => "promptsListChanged",
        "notifications/resources/updated" => "resourceSubscriptions",
        _ => "",
    };
    let era = server.config.era;
    if filter_key.is_empty() || era == Era::Legacy || server.listens.legacy_client.load(Ordering::Relaxed) {
        server.out.send(notification);
    }
    if filter_key.is_empty() || era == Era::Legacy {
        return;
    }
    let uri = notification.pointer("/params/uri").cloned().unwrap_or_default();
    for listen in server.listens.lock().iter() {
        let wanted = match listen.agreed.get(filter_key) {
            Some(Value::Array(uris)) => uris.contains(&uri),
            Some(flag) => flag == &Value::Bool(true),
            None => false,
        };
        if wanted {
            let mut stamped = notification.clone();
            if !stamped.get("params").is_some_and(Value::is_object) {
                stamped["params"] = json!({});
            }
            stamped["params"]["_meta"][SUBSCRIPTION_KEY] = listen.id.clone();
            protocol::with_route(listen.route, || server.out.send(&stamped));
        }
    }
}

/// `notifications/cancelled` of a listen request: the stream ends, no response.
pub fn cancelled(server: &Server, params: &Value) {
    if let Some(request) = params.get("requestId") {
        server.listens.lock().retain(|listen| &listen.id != request);
    }
}

/// Ends every open listen stream with its `SubscriptionsListenResult` (the server
/// shuts down).
pub fn end_listens(server: &Server) {
    let open = std::mem::take(&mut *server.listens.lock());
    for listen in open {
        let result = json!({ "resultType": "complete", "_meta": { SUBSCRIPTION_KEY: listen.id } });
        protocol::with_route(listen.route, || server.out.send(&protocol::response(&listen.id, result)));
    }
}

/// The HTTP header check of a modern POST (2026-07-28 "Transports"):
/// `MCP-Protocol-Version` must equal the envelope's version, `Mcp-Method` the body's
/// method, and `Mcp-Name` the tool or prompt name or resource URI (a
/// `=?base64?…?=` name is not checked). `header(name)` reads a request header.
/// Returns what does not match.
pub fn header_mismatch<'a>(message: &Value, header: impl Fn(&str) -> Option<&'a str>) -> Option<String> {
    let method = message.get("method").and_then(Value::as_str);
    if header("mcp-method") != method {
        return Some("Mcp-Method header does not match the request body's method".to_owned());
    }
    let params = message.get("params").cloned().unwrap_or_default();
    if let Ok(envelope) = check_envelope(&params) {
        if header("mcp-protocol-version") != Some(envelope.version.as_str()) {
            return Some("MCP-Protocol-Version header does not match the request's _meta".to_owned());
        }
    }
    let name_key = match method {
        Some("tools/call" | "prompts/get") => "name",
        Some("resources/read") => "uri",
        _ => return None,
    };
    let body = params.get(name_key).and_then(Value::as_str);
    let sent = header("mcp-name");
    if sent.is_some_and(|s| s.starts_with("=?base64?")) || sent == body {
        return None;
    }
    Some(format!("Mcp-Name header does not match the request body's {name_key}"))
}

/// Whether an HTTP POST without a session is a modern request: `server/discover`, or
/// anything carrying the envelope's protocol version.
pub fn is_modern(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some("server/discover")
        || message.pointer("/params/_meta").and_then(|meta| meta.get(VERSION_KEY)).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Value {
        json!({ VERSION_KEY: MODERN_VERSION, CAPABILITIES_KEY: { "elicitation": {} } })
    }

    #[test]
    fn eras_parse() {
        assert_eq!(Era::parse("2026-07-28"), Ok(Era::Modern));
        assert_eq!(Era::parse("dual"), Ok(Era::Dual));
        assert!(Era::parse("2025-11-25").is_err());
    }

    #[test]
    fn headers_are_checked_against_the_body() {
        let message = json!({ "method": "tools/call", "params": { "name": "echo", "_meta": meta() } });
        let good = |name: &str| match name {
            "mcp-method" => Some("tools/call"),
            "mcp-name" => Some("echo"),
            "mcp-protocol-version" => Some(MODERN_VERSION),
            _ => None,
        };
        assert_eq!(header_mismatch(&message, good), None);
        let wrong_name = |name: &str| if name == "mcp-name" { Some("other") } else { good(name) };
        assert!(header_mismatch(&message, wrong_name).is_some_and(|m| m.contains("Mcp-Name")));
        let no_method = |name: &str| if name == "mcp-method" { None } else { good(name) };
        assert!(header_mismatch(&message, no_method).is_some_and(|m| m.contains("Mcp-Method")));
        let old_version = |name: &str| if name == "mcp-protocol-version" { Some("2025-11-25") } else { good(name) };
        assert!(header_mismatch(&message, old_version).is_some_and(|m| m.contains("MCP-Protocol-Version")));
    }

    #[test]
    fn a_question_is_asked_then_answered_by_the_retry() {
        let round = |responses: Value| Round {
            responses: responses.as_object().cloned().unwrap_or_default(),
            capabilities: json!({ "elicitation": {} }),
            asked: Map::new(),
            missing: None,
            repeat: false,
            log_level: None,
        };
        ROUND.with(|cell| cell.replace(Some(round(json!({})))));
        assert_eq!(ask("elicitation/create", &json!({ "message": "hi" })), Some(Err("input required".to_owned())));
        let asked = ROUND.with(|cell| cell.take()).map(|r| r.asked).unwrap_or_default();
        assert_eq!(asked["elicitation-1"]["method"], "elicitation/create");
        ROUND.with(|cell| cell.replace(Some(round(json!({ "elicitation-1": { "action": "accept" } })))));
        assert_eq!(ask("elicitation/create", &json!({})), Some(Ok(json!({ "action": "accept" }))));
        assert_eq!(
            ask("sampling/createMessage", &json!({})).and_then(Result::err).as_deref(),
            Some("the client lacks the sampling capability")
        );
        ROUND.with(|cell| cell.take());
        assert_eq!(ask("elicitation/create", &json!({})), None, "no modern request on this thread");
    }
}
