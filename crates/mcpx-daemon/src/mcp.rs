//! The aggregated MCP endpoint: streamable HTTP at `/mcp` on the control socket
//! (MCP 2025-11-25, Transports, "Streamable HTTP"), presenting every configured
//! server as one MCP server, and `/mcp/<server>` passing one server through.
//!
//! - `initialize` creates a session (`Mcp-Session-Id`); later requests without the
//!   header get 400, with an unknown one 404; `DELETE` ends a session.
//! - The client's revision is echoed when supported, else the newest is answered;
//!   JSON-RPC batches are processed only under 2025-03-26, else refused with -32600.
//! - Tools and prompts are named `<server>__<name>` ([`crate::names`]); resource URIs
//!   become `mcpx://<server>/<original>`; calls, reads and gets map back.
//! - Lists come from the schema cache; servers never listed are started and listed
//!   first, together (up to their `startTimeout`). A server whose last start or listing
//!   failed is left out at once, logged, and started again in the background (its
//!   backoff applies); when it comes up, sessions with a stream hear `list_changed`.
//! - A `tools/call` whose client accepts `text/event-stream` is answered as SSE, with
//!   its progress notifications before the response.
//! - One GET stream per session carries what the daemon sends on its own: a server's
//!   `list_changed` becomes one to every session with a stream.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use mcpx_proto::mcp::{self, error_code};
use mcpx_proto::{Message, MessageKind};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::api::{Caller, Request};
use crate::daemon::Daemon;
use crate::instance::CallContext;
use crate::names::NameMap;
use crate::sync::lock;

/// The session header (Transports, "Session Management").
pub const SESSION_HEADER: &str = "mcp-session-id";
/// Headers `mcpx serve` sends so the daemon sees its caller: working directory,
/// explicit config, pool session and the MCP client's pid.
pub const CWD_HEADER: &str = "x-mcpx-cwd";
/// See [`CWD_HEADER`].
pub const CONFIG_HEADER: &str = "x-mcpx-config";
/// See [`CWD_HEADER`].
pub const CALLER_SESSION_HEADER: &str = "x-mcpx-session";
/// See [`CWD_HEADER`].
pub const PPID_HEADER: &str = "x-mcpx-ppid";

/// One MCP client session.
#[derive(Debug)]
pub struct McpSession {
    /// Only this server, passed through (`/mcp/<server>`); `None`: the aggregate.
    server: Option<String>,
    /// Who the client is, for configuration and pool keys.
    caller: Caller,
    /// The negotiated revision.
    version: String,
    /// Exposed tool and prompt names of the last listing.
    tools: Mutex<NameMap>,
    prompts: Mutex<NameMap>,
    /// The GET stream for messages the server sends on its own, while one is open.
    stream: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    /// The server requests this client declared it can answer (from its capabilities).
    can_answer: Vec<String>,
    /// Its answers to forwarded server requests.
    replies: Arc<crate::instance::ClientReplies>,
    /// Its requests being answered, by id (JSON text): `notifications/cancelled` from
    /// the client stops one, which cancels it upstream too.
    inflight: Mutex<HashMap<String, Arc<tokio::sync::Notify>>>,
    /// Discovery mode: only mcpx's own few tools, so an agent pays no context for
    /// schemas it has not asked for.
    discover: bool,
}

/// Sent on `initialize` (`mcpx serve --discover`): the session offers only mcpx's
/// discovery tools.
pub const MODE_HEADER: &str = "x-mcpx-mode";

/// Every open MCP session of the daemon.
#[derive(Debug, Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<McpSession>>>,
}

impl Sessions {
    /// Sends `message` on the GET stream of every session that has one (a server's
    /// `list_changed` becomes one to every session, which then lists again).
    pub fn broadcast(&self, message: &Message) {
        let sessions: Vec<Arc<McpSession>> = lock(&self.map).values().cloned().collect();
        for s in sessions {
            if let Some(tx) = lock(&s.stream).as_ref() {
                let _ = tx.try_send(sse_event(message.as_str()));
            }
        }
    }
}

/// A streaming HTTP body fed by a channel: each item is sent as it comes; the body
/// ends when every sender is gone. Dropping the body (the client went away) closes
/// the channel, which is how producers notice.
pub(crate) fn channel_body(rx: mpsc::Receiver<Vec<u8>>) -> axum::body::Body {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, std::convert::Infallible>(Bytes::from(b)), rx))
    });
    axum::body::Body::from_stream(stream)
}

/// An SSE response streaming what `rx` yields, with the session's `Mcp-Session-Id`.
fn sse_response(rx: mpsc::Receiver<Vec<u8>>, session_id: &str) -> Response {
    let mut response = (
        [(axum::http::header::CONTENT_TYPE, "text/event-stream"), (axum::http::header::CACHE_CONTROL, "no-cache")],
        channel_body(rx),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(session_id) {
        response.headers_mut().insert(SESSION_HEADER, v);
    }
    response
}

fn sse_event(data: &str) -> Vec<u8> {
    format!("event: message\ndata: {data}\n\n").into_bytes()
}

/// How the TCP listener for `/mcp` admits requests (design: "Processes and files"):
/// the `Host` (and `Origin`, when sent) must name this machine's loopback, against DNS
/// rebinding; and unless `token` is `None`, `Authorization: Bearer <token>` is required.
#[derive(Debug, Clone)]
pub struct TcpGuard {
    /// The bearer token (`<state>/token`), or `None` with `--http-no-auth`.
    pub token: Option<String>,
}

/// The `/mcp` routes for the TCP listener, behind [`TcpGuard`].
pub fn tcp_routes(guard: TcpGuard) -> Router<Arc<Daemon>> {
    routes().layer(axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
        let guard = guard.clone();
        async move {
            if let Some(refusal) = guard.check(req.headers()) {
                return refusal;
            }
            next.run(req).await
        }
    }))
}

impl TcpGuard {
    /// `Some(response)` when the request must be refused.
    fn check(&self, headers: &HeaderMap) -> Option<Response> {
        let loopback = |host: &str| {
            let host = host
                .rsplit_once(':')
                .filter(|(h, p)| !h.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
                .map_or(host, |(h, _)| h);
            matches!(host, "localhost" | "127.0.0.1" | "[::1]")
        };
        let host = header(headers, "host").unwrap_or_default();
        if !loopback(&host) {
            return Some(
                (StatusCode::FORBIDDEN, "Host must be localhost, 127.0.0.1 or [::1] (DNS rebinding protection)")
                    .into_response(),
            );
        }
        if let Some(origin) = header(headers, "origin") {
            let authority = origin.split_once("://").map_or(origin.as_str(), |(_, a)| a).trim_end_matches('/');
            if !loopback(authority) {
                return Some(
                    (StatusCode::FORBIDDEN, "Origin must be a loopback address (DNS rebinding protection)")
                        .into_response(),
                );
            }
        }
        if let Some(token) = &self.token {
            let given = header(headers, "authorization");
            if given.as_deref().and_then(|a| a.strip_prefix("Bearer ")) != Some(token.as_str()) {
                let mut r =
                    (StatusCode::UNAUTHORIZED, "a bearer token is required: the one in <state>/token").into_response();
                r.headers_mut().insert("www-authenticate", HeaderValue::from_static("Bearer realm=\"mcpx\""));
                return Some(r);
            }
        }
        None
    }
}

/// The `/mcp` routes.
pub fn routes() -> Router<Arc<Daemon>> {
    Router::new()
        .route("/mcp", post(post_aggregate).delete(delete).get(get_stream))
        .route("/mcp/{server}", post(post_server).delete(delete).get(get_stream))
}

async fn post_aggregate(State(d): State<Arc<Daemon>>, headers: HeaderMap, body: Bytes) -> Response {
    handle_post(d, None, headers, body).await
}

async fn post_server(
    State(d): State<Arc<Daemon>>,
    Path(server): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    handle_post(d, Some(server), headers, body).await
}

async fn delete(State(d): State<Arc<Daemon>>, headers: HeaderMap) -> Response {
    match session_id(&headers) {
        None => (StatusCode::BAD_REQUEST, "Mcp-Session-Id header is required").into_response(),
        Some(id) => match lock(&d.mcp.map).remove(&id) {
            Some(_) => StatusCode::NO_CONTENT.into_response(),
            None => StatusCode::NOT_FOUND.into_response(),
        },
    }
}

/// The GET stream for messages the server sends on its own (Transports, "Listening
/// for Messages from the Server"): one per session; a second one while the first is
/// open is refused with 409, and the session is left as it was.
async fn get_stream(State(d): State<Arc<Daemon>>, headers: HeaderMap) -> Response {
    let Some(id) = session_id(&headers) else {
        return (StatusCode::BAD_REQUEST, "Mcp-Session-Id header is required").into_response();
    };
    let Some(session) = lock(&d.mcp.map).get(&id).cloned() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let (tx, rx) = mpsc::channel::<Vec<u8>>(64);
    {
        let mut stream = lock(&session.stream);
        if stream.as_ref().is_some_and(|s| !s.is_closed()) {
            return (StatusCode::CONFLICT, "this session already has a GET stream open").into_response();
        }
        *stream = Some(tx.clone());
    }
    // A comment line at once, so clients see the stream is open.
    let _ = tx.try_send(b": stream open\n\n".to_vec());
    sse_response(rx, &id)
}

fn session_id(headers: &HeaderMap) -> Option<String> {
    headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()).map(str::to_owned)
}

fn json_response(status: StatusCode, body: String, session: Option<&str>) -> Response {
    let mut response = (status, [(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response();
    if let Some(id) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
        response.headers_mut().insert(SESSION_HEADER, id);
    }
    response
}

fn rpc_error(id: &str, code: i64, message: &str) -> Message {
    Message::error_response(id, code, message)
}

async fn handle_post(d: Arc<Daemon>, server: Option<String>, headers: HeaderMap, body: Bytes) -> Response {
    let messages = match Message::parse_line(&body) {
        Ok(m) if !m.is_empty() => m,
        Ok(_) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                rpc_error("null", error_code::INVALID_REQUEST, "empty batch").into_string(),
                None,
            );
        }
        Err(e) => {
            let code = if matches!(e, mcpx_proto::ParseError::NotJson(_)) {
                error_code::PARSE_ERROR
            } else {
                error_code::INVALID_REQUEST
            };
            return json_response(StatusCode::BAD_REQUEST, rpc_error("null", code, &e.to_string()).into_string(), None);
        }
    };
    let batch = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    let first = &messages[0];
    if !batch && first.method() == Some("initialize") && first.kind() == MessageKind::Request {
        return initialize(&d, server, &headers, first).await;
    }
    let Some(id) = session_id(&headers) else {
        let e = rpc_error("null", -32000, "Bad Request: Mcp-Session-Id header is required");
        return json_response(StatusCode::BAD_REQUEST, e.into_string(), None);
    };
    let Some(session) = lock(&d.mcp.map).get(&id).cloned() else {
        let e = rpc_error("null", -32001, "Session not found: initialize again");
        return json_response(StatusCode::NOT_FOUND, e.into_string(), None);
    };
    if batch && session.version != "2025-03-26" {
        let e = rpc_error(
            "null",
            error_code::INVALID_REQUEST,
            &format!("JSON-RPC batches are not allowed under protocol revision {}", session.version),
        );
        return json_response(StatusCode::BAD_REQUEST, e.into_string(), None);
    }
    // The client cancels one of its requests (Utilities, "Cancellation").
    for m in messages.iter().filter(|m| m.method() == Some("notifications/cancelled")) {
        let id = serde_json::from_str::<Value>(m.as_str()).ok().map(|v| v["params"]["requestId"].to_string());
        if let Some(stop) = id.and_then(|id| lock(&session.inflight).get(&id).cloned()) {
            stop.notify_one();
        }
    }
    // Responses answer server requests mcpx forwarded to this client.
    for m in messages.iter().filter(|m| m.kind() == MessageKind::Response) {
        if !session.replies.deliver(m.clone()) {
            tracing::info!(id = m.id().unwrap_or("null"), "dropped a client response no forwarded request waits for");
        }
    }
    let requests: Vec<Message> = messages.into_iter().filter(|m| m.kind() == MessageKind::Request).collect();
    if requests.is_empty() {
        // Notifications and responses: accepted.
        return StatusCode::ACCEPTED.into_response();
    }
    let wants_sse = header(&headers, "accept").is_some_and(|a| a.contains("text/event-stream"));
    if !batch && wants_sse && requests[0].method() == Some("tools/call") {
        return sse_call(d, session, requests.into_iter().next().unwrap_or_else(|| unreachable!()), id);
    }
    let mut answers = Vec::new();
    for r in requests {
        answers.push(cancellable(&d, &session, r, None).await.into_string());
    }
    let body = if batch { format!("[{}]", answers.join(",")) } else { answers.remove(0) };
    json_response(StatusCode::OK, body, Some(&id))
}

/// `initialize`: a new session, the client's revision echoed when supported
/// (Lifecycle, "Version negotiation").
async fn initialize(d: &Daemon, server: Option<String>, headers: &HeaderMap, request: &Message) -> Response {
    let id = request.id().unwrap_or("null").to_owned();
    let params: Value = serde_json::from_str(request.as_str()).map(|v: Value| v["params"].clone()).unwrap_or_default();
    let version = mcp::negotiate(params["protocolVersion"].as_str().unwrap_or_default()).to_owned();
    let caller = Caller {
        cwd: header(headers, CWD_HEADER).map(Into::into),
        // Without a working directory, the daemon's own MCPX_CONFIG (design: Configuration).
        config: header(headers, CONFIG_HEADER).or_else(|| d.env.get("MCPX_CONFIG").cloned()).map(Into::into),
        session: header(headers, CALLER_SESSION_HEADER),
        parent_session: None,
        ppid: header(headers, PPID_HEADER).and_then(|p| p.parse().ok()),
    };
    let session_id: String = {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(format!("{:?}{}", std::time::SystemTime::now(), std::process::id()).as_bytes());
        h.update(id.as_bytes());
        h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
    };
    let caller = Caller { session: caller.session.or_else(|| Some(format!("mcp-{session_id}"))), ..caller };
    let instructions = match &server {
        _ if header(headers, MODE_HEADER).as_deref() == Some("discover") => "mcpx: every configured MCP server, discovered on demand: mcpx_list_servers, mcpx_search, mcpx_describe, then mcpx_call.".to_owned(),
        Some(s) => format!("mcpx passes the server `{s}` through."),
        None => "mcpx: every configured MCP server behind one endpoint. Tools are named <server>__<tool>.".to_owned(),
    };
    let result = json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": true }, "resources": { "listChanged": true }, "prompts": { "listChanged": true }, "logging": {} },
        "serverInfo": { "name": "mcpx", "version": env!("CARGO_PKG_VERSION") },
        "instructions": instructions,
    });
    let discover = header(headers, MODE_HEADER).as_deref() == Some("discover");
    let session = McpSession {
        server,
        caller,
        version,
        tools: Mutex::default(),
        prompts: Mutex::default(),
        stream: Mutex::default(),
        can_answer: ["sampling", "elicitation", "roots"]
            .iter()
            .filter(|c| params["capabilities"].get(**c).is_some())
            .map(|c| match *c {
                "sampling" => "sampling/createMessage".to_owned(),
                "elicitation" => "elicitation/create".to_owned(),
                _ => "roots/list".to_owned(),
            })
            .collect(),
        replies: Arc::default(),
        inflight: Mutex::default(),
        discover,
    };
    let mut result = result;
    if let Some(name) = &session.server {
        // Passed through: the server's own capabilities, info and instructions.
        let entry = servers(d, &session).ok().and_then(|e| e.into_iter().find(|e| &e.name == name));
        let Some(entry) = entry else {
            let e = rpc_error(&id, error_code::INVALID_PARAMS, &format!("no server `{name}` is configured"));
            return json_response(StatusCode::OK, e.into_string(), None);
        };
        if let Some(upstream) = listed(d, &session, &entry).await.and_then(|c| c.session) {
            result["capabilities"] = serde_json::from_str(upstream.capabilities.get()).unwrap_or_default();
            if let Some(info) = &upstream.server_info {
                result["serverInfo"] = serde_json::from_str(info.get()).unwrap_or_default();
            }
            if let Some(text) = &upstream.instructions {
                result["instructions"] = Value::String(text.clone());
            }
        }
    }
    lock(&d.mcp.map).insert(session_id.clone(), Arc::new(session));
    json_response(StatusCode::OK, Message::response(&id, &result.to_string()).into_string(), Some(&session_id))
}

/// A `tools/call` answered as server-sent events: its notifications, then the response.
fn sse_call(d: Arc<Daemon>, session: Arc<McpSession>, request: Message, session_id: String) -> Response {
    let (tx, rx) = mpsc::channel::<Vec<u8>>(64);
    tokio::spawn(async move {
        let (ntx, mut nrx) = mpsc::unbounded_channel::<Message>();
        let call = cancellable(&d, &session, request, Some(ntx));
        tokio::pin!(call);
        let event = sse_event;
        let response = loop {
            tokio::select! {
                biased;
                () = tx.closed() => return,
                Some(n) = nrx.recv() => {
                    if tx.send(event(n.as_str())).await.is_err() {
                        return;
                    }
                }
                r = &mut call => break r,
            }
        };
        while let Ok(n) = nrx.try_recv() {
            let _ = tx.send(event(n.as_str())).await;
        }
        let _ = tx.send(event(response.as_str())).await;
    });
    sse_response(rx, &session_id)
}

/// [`handle_request`], stopped early when the client cancels the request: the work is
/// dropped, which sends `notifications/cancelled` to the server it was forwarded to.
async fn cancellable(
    d: &Daemon,
    session: &McpSession,
    request: Message,
    notify: Option<mpsc::UnboundedSender<Message>>,
) -> Message {
    let id = request.id().unwrap_or("null").to_owned();
    let stop = Arc::new(tokio::sync::Notify::new());
    lock(&session.inflight).insert(id.clone(), stop.clone());
    let answer = tokio::select! {
        answer = handle_request(d, session, request, notify) => answer,
        () = stop.notified() => rpc_error(&id, error_code::INTERNAL_ERROR, "cancelled by the client"),
    };
    lock(&session.inflight).remove(&id);
    answer
}

/// Answers one request of a session; the response carries the request's own id.
async fn handle_request(
    d: &Daemon,
    session: &McpSession,
    request: Message,
    notify: Option<mpsc::UnboundedSender<Message>>,
) -> Message {
    let id = request.id().unwrap_or("null").to_owned();
    let method = request.method().unwrap_or_default().to_owned();
    let params: Value =
        serde_json::from_str::<Value>(request.as_str()).map(|v| v["params"].clone()).unwrap_or(Value::Null);
    if session.discover {
        if let Some(answer) = discover::handle(d, session, &id, &method, &params).await {
            return answer;
        }
    }
    // One server passed through: everything but ping goes to it as it is, lists included.
    if session.server.is_some() && method != "ping" {
        return forward(d, session, request, &params, notify).await;
    }
    let result = match method.as_str() {
        "ping" => Ok(json!({})),
        "logging/setLevel" => Ok(json!({})),
        "tools/list" => list(d, session, "tools").await,
        "prompts/list" => list(d, session, "prompts").await,
        "resources/list" => list(d, session, "resources").await,
        "resources/templates/list" => list(d, session, "resourceTemplates").await,
        "tools/call" | "prompts/get" | "resources/read" => return forward(d, session, request, &params, notify).await,
        // The 2026-07-28 revision's discovery: not offered, so such clients fall back to initialize.
        _ => Err((error_code::METHOD_NOT_FOUND, format!("method `{method}` is not offered by mcpx"))),
    };
    match result {
        Ok(v) => Message::response(&id, &v.to_string()),
        Err((code, message)) => rpc_error(&id, code, &message),
    }
}

type RpcResult = Result<Value, (i64, String)>;

/// The servers a session sees: one, or every enabled one of the caller's configuration.
fn servers(d: &Daemon, session: &McpSession) -> Result<Vec<crate::config::ServerEntry>, (i64, String)> {
    let req = Request { caller: session.caller.clone(), ..Request::default() };
    let config = d.resolve(&req).map_err(|e| (error_code::INTERNAL_ERROR, e.message))?;
    match &session.server {
        Some(name) => {
            d.server(&config, name).map(|e| vec![e.clone()]).map_err(|e| (error_code::INVALID_PARAMS, e.message))
        }
        None => Ok(config.enabled().cloned().collect()),
    }
}

/// The schema cache entry of `entry`, listing the server first when it was never
/// listed (design: "Discovery": MCP clients see every tool on their first listing).
async fn listed(
    d: &Daemon,
    session: &McpSession,
    entry: &crate::config::ServerEntry,
) -> Option<crate::schema::CacheEntry> {
    let key = entry.cache_key();
    let cached = d.schema.get(&key);
    if cached.as_ref().is_some_and(|c| c.tools.is_some() && c.error.is_none()) {
        return cached;
    }
    let target = d.target(entry).ok()?;
    let pool_key = d.pool_key(entry, &session.caller);
    if let Some(error) = cached.and_then(|c| c.error) {
        // Its last start or listing failed: left out at once rather than waited for
        // again, and tried in the background; sessions hear `list_changed` if it comes up.
        tracing::info!(server = %entry.name, error = %error, "left out of an MCP listing: its last start failed");
        d.start_in_background(target, pool_key);
        return None;
    }
    match d.pool.acquire(&target, &pool_key, entry.options.start_timeout).await {
        Ok(_) => d.schema.get(&key),
        Err(e) => {
            tracing::warn!(server = %entry.name, error = %e, "left out of an MCP listing: it failed to start");
            None
        }
    }
}

/// The configured server, left out of listings by its last failure, whose exposed
/// names `exposed` would have (`<server>__...`), with that failure.
fn left_out_owner(d: &Daemon, session: &McpSession, exposed: &str) -> Option<(String, String)> {
    servers(d, session).ok()?.into_iter().find_map(|entry| {
        let error = d.schema.get(&entry.cache_key())?.error?;
        exposed.starts_with(&format!("{}__", entry.name)).then_some((entry.name, error))
    })
}

/// An aggregate list: every server's items with names or URIs made unique.
async fn list(d: &Daemon, session: &McpSession, field: &str) -> RpcResult {
    let entries = servers(d, session)?;
    let passthrough = session.server.is_some();
    let mut items: Vec<(String, Value)> = Vec::new();
    // Unread servers start at once, not one after another.
    let caches = futures_util::future::join_all(entries.iter().map(|entry| listed(d, session, entry))).await;
    for (entry, cached) in entries.iter().zip(caches) {
        let Some(cached) = cached else { continue };
        let list = match field {
            "tools" => cached.tools,
            "prompts" => cached.prompts,
            "resources" => cached.resources,
            _ => cached.resource_templates,
        };
        for raw in list.into_iter().flatten() {
            let Ok(v) = serde_json::from_str::<Value>(raw.get()) else { continue };
            if field == "tools" && !entry.options.tool_allowed(v["name"].as_str().unwrap_or_default()) {
                continue;
            }
            items.push((entry.name.clone(), v));
        }
    }
    if !passthrough {
        match field {
            "tools" | "prompts" => {
                let names =
                    NameMap::build(items.iter().map(|(s, v)| (s.as_str(), v["name"].as_str().unwrap_or_default())));
                for (s, v) in &mut items {
                    if let Some(exposed) = names.exposed(s, v["name"].as_str().unwrap_or_default()) {
                        v["name"] = Value::String(exposed.to_owned());
                    }
                }
                *lock(if field == "tools" { &session.tools } else { &session.prompts }) = names;
            }
            "resources" => {
                for (s, v) in &mut items {
                    if let Some(uri) = v["uri"].as_str() {
                        v["uri"] = Value::String(format!("mcpx://{s}/{uri}"));
                    }
                }
            }
            _ => {
                for (s, v) in &mut items {
                    if let Some(t) = v["uriTemplate"].as_str() {
                        v["uriTemplate"] = Value::String(format!("mcpx://{s}/{t}"));
                    }
                }
            }
        }
    }
    let values: Vec<Value> = items.into_iter().map(|(_, v)| v).collect();
    Ok(json!({ field: values }))
}

/// `tools/call`, `prompts/get`, `resources/read`: maps the name or URI back to its
/// server and forwards the request, byte-faithful but for the name or URI.
async fn forward(
    d: &Daemon,
    session: &McpSession,
    request: Message,
    params: &Value,
    notify: Option<mpsc::UnboundedSender<Message>>,
) -> Message {
    let id = request.id().unwrap_or("null").to_owned();
    let method = request.method().unwrap_or_default().to_owned();
    let fail = |code: i64, message: String| rpc_error(&id, code, &message);
    let (server, rewritten) = match (&session.server, method.as_str()) {
        (Some(s), _) => (s.clone(), params.clone()),
        (None, "resources/read") => {
            let uri = params["uri"].as_str().unwrap_or_default();
            let Some((server, original)) = uri.strip_prefix("mcpx://").and_then(|r| r.split_once('/')) else {
                return fail(error_code::INVALID_PARAMS, format!("unknown resource `{uri}`: list resources first"));
            };
            let mut p = params.clone();
            p["uri"] = Value::String(original.to_owned());
            (server.to_owned(), p)
        }
        (None, _) => {
            let exposed = params["name"].as_str().unwrap_or_default();
            let field = if method == "tools/call" { "tools" } else { "prompts" };
            let map = if field == "tools" { &session.tools } else { &session.prompts };
            let mut found = lock(map).original(exposed).map(|(s, t)| (s.to_owned(), t.to_owned()));
            if found.is_none() {
                let _ = list(d, session, field).await;
                found = lock(map).original(exposed).map(|(s, t)| (s.to_owned(), t.to_owned()));
            }
            let Some((server, original)) = found else {
                let what = &field[..field.len() - 1];
                // The name may belong to a server left out of the listing: say why.
                if let Some((name, error)) = left_out_owner(d, session, exposed) {
                    return fail(
                        error_code::INVALID_PARAMS,
                        format!("unknown {what}: `{exposed}`; server `{name}` is not available: {error}"),
                    );
                }
                return fail(error_code::INVALID_PARAMS, format!("unknown {what}: `{exposed}`"));
            };
            let mut p = params.clone();
            p["name"] = Value::String(original);
            (server, p)
        }
    };
    let entries = match servers(d, session) {
        Ok(e) => e,
        Err((code, message)) => return fail(code, message),
    };
    let Some(entry) = entries.into_iter().find(|e| e.name == server) else {
        return fail(error_code::INVALID_PARAMS, format!("no server `{server}`"));
    };
    let target = match d.target(&entry) {
        Ok(t) => t,
        Err(e) => return fail(error_code::INTERNAL_ERROR, e.message),
    };
    let key = d.pool_key(&entry, &session.caller);
    let timeout = entry.options.call_timeout;
    let lease = match d.pool.acquire(&target, &key, timeout).await {
        Ok(l) => l,
        Err(e) => return fail(error_code::INTERNAL_ERROR, format!("server `{server}`: {e}")),
    };
    // Passed through, the request goes as the client wrote it (byte for byte but its
    // id); mapped, only its params are rebuilt, and absent params stay absent.
    let upstream = if session.server.is_some() {
        request
    } else if rewritten.is_null() {
        Message::request(&id, &method, None)
    } else {
        Message::request(&id, &method, Some(&rewritten.to_string()))
    };
    let client = Some((session.can_answer.clone(), session.replies.clone()));
    let ctx = Arc::new(CallContext {
        label: session.caller.session.clone().unwrap_or_default(),
        notify,
        roots: None,
        client,
    });
    let result = lease.instance.forward(upstream, timeout, ctx).await;
    drop(lease);
    d.pool.notify_changed();
    match result {
        // The server's answer, with the client's id, byte for byte otherwise.
        Ok(response) => response,
        Err(e) => fail(error_code::INTERNAL_ERROR, format!("server `{server}`: {e}")),
    }
}

/// `mcpx serve --discover`: four tools instead of every schema (list the servers,
/// search the tools, describe one server's tools, call a tool).
mod discover {
    use super::*;

    /// The tools of discovery mode.
    fn tools() -> Value {
        let object =
            |props: Value, required: &[&str]| json!({ "type": "object", "properties": props, "required": required });
        json!({ "tools": [
            { "name": "mcpx_list_servers", "description": "List the configured MCP servers: name, tool count, state, description.",
              "inputSchema": object(json!({}), &[]) },
            { "name": "mcpx_search", "description": "Find tools of every server whose name or description holds all the words, best first.",
              "inputSchema": object(json!({ "query": { "type": "string", "description": "words to look for" } }), &["query"]) },
            { "name": "mcpx_describe", "description": "The full definitions (with input schemas) of one server's tools, or of one tool.",
              "inputSchema": object(json!({ "server": { "type": "string" }, "tool": { "type": "string" } }), &["server"]) },
            { "name": "mcpx_call", "description": "Call a tool of a server with its arguments; returns the tool's own result.",
              "inputSchema": object(json!({ "server": { "type": "string" }, "tool": { "type": "string" }, "arguments": { "type": "object" } }), &["server", "tool"]) },
        ] })
    }

    fn text(value: &impl serde::Serialize) -> Value {
        json!({ "content": [{ "type": "text", "text": serde_json::to_string_pretty(value).unwrap_or_default() }] })
    }

    fn tool_error(message: &str) -> Value {
        json!({ "content": [{ "type": "text", "text": message }], "isError": true })
    }

    /// Answers what discovery mode changes; `None` for everything else.
    pub(super) async fn handle(
        d: &Daemon,
        session: &McpSession,
        id: &str,
        method: &str,
        params: &Value,
    ) -> Option<Message> {
        let req = |server: Option<&str>, tool: Option<&str>| Request {
            caller: session.caller.clone(),
            server: server.map(str::to_owned),
            tool: tool.map(str::to_owned),
            ..Request::default()
        };
        let result = match method {
            "tools/list" => tools(),
            "prompts/list" => json!({ "prompts": [] }),
            "resources/list" => json!({ "resources": [] }),
            "resources/templates/list" => json!({ "resourceTemplates": [] }),
            "tools/call" => {
                let args = &params["arguments"];
                let s = |k: &str| args[k].as_str().map(str::to_owned);
                match params["name"].as_str().unwrap_or_default() {
                    "mcpx_list_servers" => {
                        d.ls(&req(None, None)).map_or_else(|e| tool_error(&e.message), |rows| text(&rows))
                    }
                    "mcpx_search" => {
                        let words = s("query").unwrap_or_default().split_whitespace().map(str::to_owned).collect();
                        let r = Request { words, ..req(None, None) };
                        d.search(&r).map_or_else(|e| tool_error(&e.message), |hits| text(&hits))
                    }
                    "mcpx_describe" => {
                        let server = s("server").unwrap_or_default();
                        let entries = servers(d, session).unwrap_or_default();
                        if let Some(entry) = entries.iter().find(|e| e.name == server) {
                            // A server never listed is started and listed first.
                            let _ = listed(d, session, entry).await;
                        }
                        let described = d.tools(&req(Some(&server), s("tool").as_deref()));
                        described.map_or_else(
                            |e| tool_error(&e.message),
                            |raw| json!({ "content": [{ "type": "text", "text": raw.get() }] }),
                        )
                    }
                    "mcpx_call" => {
                        let r = Request {
                            arguments: serde_json::value::to_raw_value(&if args["arguments"].is_object() {
                                args["arguments"].clone()
                            } else {
                                json!({})
                            })
                            .ok(),
                            ..req(s("server").as_deref(), s("tool").as_deref())
                        };
                        match d.call(&r, None).await {
                            Ok(raw) => serde_json::from_str(raw.get()).unwrap_or_default(),
                            Err(e) => tool_error(&e.message),
                        }
                    }
                    other => {
                        return Some(rpc_error(id, error_code::INVALID_PARAMS, &format!("unknown tool: `{other}`")));
                    }
                }
            }
            _ => return None,
        };
        Some(Message::response(id, &result.to_string()))
    }
}
