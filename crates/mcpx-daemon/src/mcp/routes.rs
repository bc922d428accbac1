//! The MCP endpoint's HTTP side (MCP 2025-11-25, Transports, "Streamable HTTP"): the
//! [`Endpoint`] state, `POST`, `GET` and `DELETE` on `/mcp` and `/mcp/<server>`,
//! sessions found by their header, JSON or SSE answers, and the guard of the TCP
//! listener.

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use mcpx_proto::mcp::{self, error_code};
use mcpx_proto::{Message, MessageKind};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::api::Caller;
use crate::daemon::Daemon;
use crate::mcp::dispatch::cancellable;
use crate::mcp::era::{self, Era};
use crate::mcp::input::{self, Answer, Parked};
use crate::mcp::listen::subscribe_listed;
use crate::mcp::modern;
use crate::mcp::sessions::{self, ClientSession, ClientSessions, sse_event, sse_pieces};
use crate::mcp::subscriptions::{self, Listening};
use crate::stream::{Answered, answer_or_stream, channel_body, channel_body_until, stream_call};
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
/// Sent on `initialize` (`mcpx serve --discover`): the session offers only mcpx's
/// discovery tools.
pub const MODE_HEADER: &str = "x-mcpx-mode";
/// The profile the session is on (`mcpx serve --profile NAME`; `/mcp/p/<name>` sets
/// it): only the profile's servers and tools are offered (`docs/configuration.md`,
/// "Profiles"). It only narrows what the client sees, so a TCP client may send it.
pub const PROFILE_HEADER: &str = "x-mcpx-profile";
/// Set by the daemon on the messages of an `mcpx serve` link (`serve`), for the
/// activity record's path; removed from HTTP requests, which cannot claim it.
pub const VIA_HEADER: &str = "x-mcpx-via";

/// The endpoint's state: the daemon it answers from, and its client sessions, shared
/// by every listener that serves `/mcp` (the control socket, and TCP when enabled).
#[derive(Debug)]
pub struct Endpoint {
    /// The daemon whose servers the endpoint presents.
    pub(crate) daemon: Arc<Daemon>,
    /// Every open client session.
    pub(crate) sessions: ClientSessions,
    /// Modern calls that wait for their client's input ([`input`]).
    pub(crate) parked: Arc<Parked>,
    /// `mcpx serve`'s upgraded links, which the drain before an exit waits for.
    pub links: crate::mcp::sessions::Links,
}

impl Endpoint {
    /// The endpoint of `daemon`. Spawns the task that passes the daemon's
    /// announcements ([`Daemon::announce`]) to every session with a stream open, so it
    /// must be called inside a tokio runtime.
    pub fn new(daemon: Arc<Daemon>) -> Arc<Endpoint> {
        let mut notices = daemon.notices();
        let endpoint = Arc::new(Endpoint {
            daemon,
            sessions: ClientSessions::default(),
            parked: Arc::default(),
            links: crate::mcp::sessions::Links::default(),
        });
        let weak = Arc::downgrade(&endpoint);
        tokio::spawn(async move {
            loop {
                match notices.recv().await {
                    Ok(message) => match weak.upgrade() {
                        Some(endpoint) => endpoint.sessions.broadcast(&message),
                        None => return,
                    },
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(dropped = n, "MCP clients missed announcements: too many at once");
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        endpoint
    }
}

type S = State<Arc<Endpoint>>;

/// How the TCP listener for `/mcp` admits requests (design: "Processes and files"):
/// the `Host` (and `Origin`, when sent) must name this machine's loopback, against DNS
/// rebinding; and unless `token` is `None`, `Authorization: Bearer <token>` is required,
/// compared in constant time. A refused request is answered with `Connection: close`
/// before its body is read.
///
/// What it admits is a stranger: the headers that choose a configuration, a directory
/// or a pool key ([`STRANGER_IGNORES`]) are removed, and its session is configured from
/// `config` alone (`docs/security.md`).
#[derive(Debug, Clone)]
pub struct TcpGuard {
    /// The bearer token (`<state>/token`), or `None` with `--http-no-auth`.
    pub token: Option<String>,
    /// The daemon's own configuration file (`--config` or `MCPX_CONFIG`); `None`: the
    /// user config.
    pub config: Option<PathBuf>,
}

/// The caller headers a TCP client may not send: they would pick another
/// configuration, directory, pool session or process than the daemon's own. (The
/// mode header only narrows what the client sees, so it stays.)
pub const STRANGER_IGNORES: [&str; 4] = [CONFIG_HEADER, CWD_HEADER, CALLER_SESSION_HEADER, PPID_HEADER];

/// Marks a request that came through [`TcpGuard`]: its caller is the daemon's own
/// configuration file, with no directory, and its MCP session as its pool session.
#[derive(Debug, Clone)]
pub(crate) struct Stranger {
    config: Option<PathBuf>,
}

/// The `/mcp` routes for the TCP listener, behind [`TcpGuard`].
pub fn tcp_routes(guard: TcpGuard) -> Router<Arc<Endpoint>> {
    routes().layer(axum::middleware::from_fn(move |mut req: axum::extract::Request, next: axum::middleware::Next| {
        let guard = guard.clone();
        async move {
            if let Some(mut refusal) = guard.check(req.headers()) {
                refusal.headers_mut().insert(axum::http::header::CONNECTION, HeaderValue::from_static("close"));
                return refusal;
            }
            for name in STRANGER_IGNORES {
                req.headers_mut().remove(name);
            }
            req.extensions_mut().insert(Stranger { config: guard.config.clone() });
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
            let given = given.as_deref().and_then(|a| a.strip_prefix("Bearer ")).unwrap_or_default();
            if !bool::from(subtle::ConstantTimeEq::ct_eq(given.as_bytes(), token.as_bytes())) {
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
pub fn routes() -> Router<Arc<Endpoint>> {
    Router::new()
        .route("/mcp", post(post_aggregate).delete(delete).get(get_stream))
        .route("/mcp/{server}", post(post_server).delete(delete).get(get_stream))
        .route("/mcp/p/{profile}", post(post_profile).delete(delete).get(get_stream))
        .route("/metrics", axum::routing::get(metrics))
}

/// `GET /metrics`: the daemon's Prometheus metrics ([`crate::control::metrics`]), in
/// the text exposition format 0.0.4; on TCP, behind the same guard and token as `/mcp`.
async fn metrics(State(e): S) -> Response {
    let text = crate::control::metrics::render(&e.daemon);
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response()
}

type Tcp = Option<Extension<Stranger>>;

async fn post_aggregate(State(e): S, tcp: Tcp, mut headers: HeaderMap, body: Bytes) -> Response {
    headers.remove(VIA_HEADER);
    handle_post(e, None, tcp.map(|t| t.0), headers, body).await
}

async fn post_server(
    State(e): S,
    tcp: Tcp,
    Path(server): Path<String>,
    mut headers: HeaderMap,
    body: Bytes,
) -> Response {
    headers.remove(VIA_HEADER);
    handle_post(e, Some(server), tcp.map(|t| t.0), headers, body).await
}

/// `POST /mcp/p/<profile>`: the aggregate of a profile's servers and tools.
async fn post_profile(
    State(e): S,
    tcp: Tcp,
    Path(profile): Path<String>,
    mut headers: HeaderMap,
    body: Bytes,
) -> Response {
    headers.remove(VIA_HEADER);
    match HeaderValue::from_str(&profile) {
        Ok(value) => {
            headers.insert(PROFILE_HEADER, value);
        }
        Err(_) => return (StatusCode::NOT_FOUND, "no such profile").into_response(),
    }
    handle_post(e, None, tcp.map(|t| t.0), headers, body).await
}

/// The activity record's path of a session's requests: `serve` (or `serve <server>`,
/// `serve --profile <name>`) over an `mcpx serve` link, else `/mcp` (or
/// `/mcp/<server>`, `/mcp/p/<name>`).
fn path_of(headers: &HeaderMap, server: Option<&str>) -> String {
    let serve = header(headers, VIA_HEADER).as_deref() == Some("serve");
    if let Some(profile) = header(headers, PROFILE_HEADER) {
        return if serve { format!("serve --profile {profile}") } else { format!("/mcp/p/{profile}") };
    }
    match (serve, server) {
        (true, None) => "serve".to_owned(),
        (true, Some(server)) => format!("serve {server}"),
        (false, None) => "/mcp".to_owned(),
        (false, Some(server)) => format!("/mcp/{server}"),
    }
}

/// `DELETE`: ends the session.
pub(crate) async fn delete(State(e): S, headers: HeaderMap) -> Response {
    match session_id(&headers) {
        None => (StatusCode::BAD_REQUEST, "Mcp-Session-Id header is required").into_response(),
        Some(id) if e.sessions.remove(&id) => StatusCode::NO_CONTENT.into_response(),
        Some(_) => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The GET stream for messages the server sends on its own (Transports, "Listening
/// for Messages from the Server"): one per session; a second one while the first is
/// open is refused with 409, and the session is left as it was.
pub(crate) async fn get_stream(State(e): S, headers: HeaderMap) -> Response {
    let Some(id) = session_id(&headers) else {
        return (StatusCode::BAD_REQUEST, "Mcp-Session-Id header is required").into_response();
    };
    let Some(session) = e.sessions.get(&id) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    match session.open_stream() {
        Some(rx) => open_ended(&e, rx, Some(&id)),
        None => (StatusCode::CONFLICT, "this session already has a GET stream open").into_response(),
    }
}

/// `POST`: one JSON-RPC message or a batch. `initialize` opens a session; for the
/// others the session's header is required. Client notifications and responses are
/// accepted (202); requests are answered as JSON, or a `tools/call` as SSE when the
/// client accepts it. `tcp` is set for a request [`TcpGuard`] admitted.
pub(crate) async fn handle_post(
    e: Arc<Endpoint>,
    server: Option<String>,
    tcp: Option<Stranger>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let d = &e.daemon;
    let messages = match Message::parse_line(&body) {
        Ok(m) if !m.is_empty() => m,
        Ok(_) => {
            let refusal = Message::error_response("null", error_code::INVALID_REQUEST, "empty batch");
            return json_response(StatusCode::BAD_REQUEST, refusal.into_string(), None);
        }
        Err(e) => {
            let code = if matches!(e, mcpx_proto::ParseError::NotJson(_)) {
                error_code::PARSE_ERROR
            } else {
                error_code::INVALID_REQUEST
            };
            let refusal = Message::error_response("null", code, &e.to_string());
            return json_response(StatusCode::BAD_REQUEST, refusal.into_string(), None);
        }
    };
    let batch = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    let mut messages = messages;
    let recorded = messages[0].method().is_some_and(|m| crate::lease::RECORDED.contains(&m));
    if let (false, true, Some(_), Some(parent)) =
        (batch, recorded, &d.telemetry.traces, header(&headers, "traceparent"))
    {
        let request = messages.remove(0);
        let state = header(&headers, "tracestate");
        messages.insert(0, crate::telemetry::traces::with_transport_parent(request, &parent, state.as_deref()));
    }
    let first = &messages[0];
    if !batch && first.method() == Some("initialize") && first.kind() == MessageKind::Request {
        return initialize(&e, server, tcp, &headers, first).await;
    }
    if !batch && first.kind() == MessageKind::Request && subscriptions::is_listen(first) {
        return listen_stream(&e, server, tcp, &headers, first).await;
    }
    // A request of the 2026-07-28 era carries no session (Transports, "Streamable HTTP").
    if !batch && first.kind() == MessageKind::Request && session_id(&headers).is_none() {
        let body: Value = serde_json::from_str(first.as_str()).unwrap_or_default();
        match era::of_request(&body, Some(&headers)) {
            Era::Modern(modern) => {
                let request = messages.into_iter().next().unwrap_or_else(|| Message::request("null", "", None));
                return modern_request(&e, server, tcp, &headers, request, &body, modern).await;
            }
            Era::Unsupported(requested) => return unsupported(first.id().unwrap_or("null"), &requested),
            Era::Legacy => {}
        }
    }
    let Some(id) = session_id(&headers) else {
        let refusal = Message::error_response("null", -32000, "Bad Request: Mcp-Session-Id header is required");
        return json_response(StatusCode::BAD_REQUEST, refusal.into_string(), None);
    };
    let Some(session) = e.sessions.get(&id) else {
        let refusal = Message::error_response("null", -32001, "Session not found: initialize again");
        return json_response(StatusCode::NOT_FOUND, refusal.into_string(), None);
    };
    if batch && session.version != "2025-03-26" {
        let refusal = Message::error_response(
            "null",
            error_code::INVALID_REQUEST,
            &format!("JSON-RPC batches are not allowed under protocol revision {}", session.version),
        );
        return json_response(StatusCode::BAD_REQUEST, refusal.into_string(), None);
    }
    // The client cancels one of its requests (Utilities, "Cancellation").
    for m in messages.iter().filter(|m| m.method() == Some("notifications/cancelled")) {
        let id = serde_json::from_str::<Value>(m.as_str()).ok().map(|v| v["params"]["requestId"].to_string());
        if let Some(id) = id {
            session.cancel(&id);
        }
    }
    // Responses answer server requests mcpx forwarded to this client.
    for m in messages.iter().filter(|m| m.kind() == MessageKind::Response) {
        if !session.replies.deliver(m.clone()) {
            tracing::info!(id = m.id().unwrap_or("null"), "dropped a client response no forwarded request waits for");
        }
    }
    let mut requests: Vec<Message> = messages.into_iter().filter(|m| m.kind() == MessageKind::Request).collect();
    if requests.is_empty() {
        // Notifications and responses: accepted.
        return StatusCode::ACCEPTED.into_response();
    }
    let accept = headers.get(axum::http::header::ACCEPT).and_then(|a| a.to_str().ok()).unwrap_or_default();
    if !batch && accept.contains("text/event-stream") && requests[0].method() == Some("tools/call") {
        let json_too = accept.contains("application/json");
        return sse_call(d.clone(), session, requests.remove(0), &id, json_too).await;
    }
    let mut answers = Vec::new();
    for r in requests {
        answers.push(cancellable(d, &session, r, None).await.into_string());
    }
    let body = if batch { format!("[{}]", answers.join(",")) } else { answers.remove(0) };
    json_response(StatusCode::OK, body, Some(&id))
}

/// `initialize`: a new session, the client's revision echoed when supported
/// (Lifecycle, "Version negotiation"). Its caller is what `mcpx serve`'s headers say,
/// with the MCP session as the pool session when none is named; a TCP client (`tcp`)
/// gets the daemon's own configuration, no directory (so directory scopes degrade to
/// `call`) and always its MCP session (design: Configuration, Pools).
async fn initialize(
    e: &Endpoint,
    server: Option<String>,
    tcp: Option<Stranger>,
    headers: &HeaderMap,
    request: &Message,
) -> Response {
    let d = &e.daemon;
    let id = request.id().unwrap_or("null").to_owned();
    let params: Value = serde_json::from_str(request.as_str()).map(|v: Value| v["params"].clone()).unwrap_or_default();
    let version = mcp::negotiate(params["protocolVersion"].as_str().unwrap_or_default()).to_owned();
    let session_id = match ClientSessions::new_id() {
        Ok(s) => s,
        Err(err) => {
            tracing::error!(error = %err, "cannot make an MCP session id");
            let refusal = Message::error_response(&id, error_code::INTERNAL_ERROR, &format!("{err}; try again"));
            return json_response(StatusCode::SERVICE_UNAVAILABLE, refusal.into_string(), None);
        }
    };
    let caller = caller(d, tcp, headers, Some(session_id.clone()));
    // A session on a profile that does not exist opens not at all: every request of it
    // would fail the same way.
    if caller.profile.is_some() {
        if let Err(e) = d.resolve_for(&caller) {
            let refusal = Message::error_response(&id, error_code::INVALID_PARAMS, &e.message);
            return json_response(StatusCode::OK, refusal.into_string(), None);
        }
    }
    let discover = header(headers, MODE_HEADER).as_deref() == Some("discover");
    let path = path_of(headers, server.as_deref());
    let mut session = ClientSession::new(server, caller, version.clone(), &params["capabilities"], discover);
    session.path = path;
    if let Some(name) = sessions::client_name(&params["clientInfo"]) {
        session.client = name;
    }
    // A server passed through that is not configured, or that the policy refuses, opens no session.
    let identity = match modern::identity(d, &session).await {
        Ok(identity) => identity,
        Err((code, message)) => {
            let refusal = Message::error_response(&id, code, &message);
            return json_response(StatusCode::OK, refusal.into_string(), None);
        }
    };
    let result = json!({
        "protocolVersion": version,
        "capabilities": identity.capabilities,
        "serverInfo": identity.server_info,
        "instructions": identity.instructions,
    });
    if let Err(full) = e.sessions.insert(session_id.clone(), session) {
        let refusal = Message::error_response(&id, error_code::INTERNAL_ERROR, &full.to_string());
        return json_response(StatusCode::SERVICE_UNAVAILABLE, refusal.into_string(), None);
    }
    json_response(StatusCode::OK, Message::response(&id, &result.to_string()).into_string(), Some(&session_id))
}

/// The caller of a request: what `mcpx serve`'s headers say, with `pool_session` as
/// the pool session when none is named; a TCP client (`tcp`) gets the daemon's own
/// configuration, no directory (so directory scopes degrade to `call`) and
/// `pool_session` always (design: Configuration, Pools).
fn caller(d: &Daemon, tcp: Option<Stranger>, headers: &HeaderMap, pool_session: Option<String>) -> Caller {
    match tcp {
        Some(stranger) => Caller {
            config: stranger.config,
            session: pool_session,
            profile: header(headers, PROFILE_HEADER),
            ..Caller::default()
        },
        None => Caller {
            cwd: header(headers, CWD_HEADER).map(Into::into),
            // Without a working directory, the daemon's own MCPX_CONFIG (design: Configuration).
            config: header(headers, CONFIG_HEADER).or_else(|| d.env().get("MCPX_CONFIG").cloned()).map(Into::into),
            session: header(headers, CALLER_SESSION_HEADER).or(pool_session),
            parent_session: None,
            ppid: header(headers, PPID_HEADER).and_then(|p| p.parse().ok()),
            sessionless: false,
            profile: header(headers, PROFILE_HEADER),
        },
    }
}

/// A modern client's `subscriptions/listen` (MCP 2026-07-28, "Subscriptions"): a
/// session of its own, whose id the client never sees, subscribed to the resources it
/// asked for; its stream is the POST's SSE answer, acknowledged first, and the session
/// ends when the client closes it. Headers that do not match the body: 400, -32020.
async fn listen_stream(
    e: &Arc<Endpoint>,
    server: Option<String>,
    tcp: Option<Stranger>,
    headers: &HeaderMap,
    request: &Message,
) -> Response {
    let id = request.id().unwrap_or("null").to_owned();
    let body: Value = serde_json::from_str(request.as_str()).unwrap_or_default();
    if let Err(mismatch) = era::check_request_headers(headers, &body, era::LATEST_MODERN) {
        let refusal = Message::error_response(&id, era::HEADER_MISMATCH, &mismatch);
        return json_response(StatusCode::BAD_REQUEST, refusal.into_string(), None);
    }
    let params = body["params"].clone();
    let unavailable = |message: String| {
        let refusal = Message::error_response(&id, error_code::INTERNAL_ERROR, &message);
        json_response(StatusCode::SERVICE_UNAVAILABLE, refusal.into_string(), None)
    };
    let session_id = match ClientSessions::new_id() {
        Ok(s) => s,
        Err(err) => return unavailable(format!("cannot make a session for the listen stream: {err}; try again")),
    };
    let capabilities = &params["_meta"][era::META_CLIENT_CAPABILITIES];
    let caller = caller(&e.daemon, tcp, headers, Some(session_id.clone()));
    let session = ClientSession::new(server, caller, era::LATEST_MODERN.to_owned(), capabilities, false);
    *lock(&session.listening) = Some(Listening::new(&id, &params));
    if let Err(full) = e.sessions.insert(session_id.clone(), session) {
        return unavailable(full.to_string());
    }
    let opened = e.sessions.get(&session_id);
    if let Some(session) = &opened {
        subscribe_listed(&e.daemon, session, &id).await;
    }
    let Some((rx, closed)) = opened.and_then(|s| s.open_listen_stream()) else {
        return unavailable("the listen stream's session ended before it opened: listen again".to_owned());
    };
    let endpoint = Arc::downgrade(e);
    tokio::spawn(async move {
        closed.await;
        if let Some(e) = endpoint.upgrade() {
            e.sessions.remove(&session_id);
        }
    });
    open_ended(e, rx, None)
}

/// A 2026-07-28 request (MCP 2026-07-28, Transports, "Streamable HTTP"): no session;
/// its routing headers checked against the body first (400 with -32020 when they
/// disagree), then answered on a session of its own that ends with it, its caller
/// from the headers (a pool session only when `mcpx serve` names one). A `tools/call`,
/// `prompts/get` or `resources/read` goes through the input bridge ([`input`]): a
/// server's request for input becomes an `InputRequiredResult`. A `tools/call` whose
/// client accepts SSE is answered as SSE, with the log messages the request asked for
/// (`_meta` `io.modelcontextprotocol/logLevel`).
async fn modern_request(
    e: &Endpoint,
    server: Option<String>,
    tcp: Option<Stranger>,
    headers: &HeaderMap,
    request: Message,
    body: &Value,
    modern: era::Modern,
) -> Response {
    let d = &e.daemon;
    let id = request.id().unwrap_or("null").to_owned();
    if let Err(message) = era::check_request_headers(headers, body, &modern.version) {
        let refusal = Message::error_response(&id, era::HEADER_MISMATCH, &message);
        return json_response(StatusCode::BAD_REQUEST, refusal.into_string(), None);
    }
    let mut caller = caller(d, tcp, headers, None);
    // No pool session but what `mcpx serve` names: a `session` scope gives each request
    // an instance of its own (design: Pools; docs/api.md says why).
    caller.sessionless = caller.session.is_none();
    let discover = header(headers, MODE_HEADER).as_deref() == Some("discover");
    let path = path_of(headers, server.as_deref());
    let mut session = ClientSession::new(server, caller, modern.version, &modern.capabilities, discover);
    session.path = path;
    if let Some(name) = modern.client_info.as_ref().and_then(sessions::client_name) {
        session.client = name;
    }
    session.param_headers = era::param_headers(headers);
    session.log_level = modern.log_level.clone();
    let session = Arc::new(session);
    let wants_sse = header(headers, "accept").is_some_and(|a| a.contains("text/event-stream"));
    let method = request.method().unwrap_or_default();
    if input::INTERACTIVE.contains(&method) {
        let sse = wants_sse && method == "tools/call";
        let params = &body["params"];
        return match input::answer(&e.parked, d, session, request, params, modern.log_level, sse).await {
            Answer::Json(response) => json_response(StatusCode::OK, response.into_string(), None),
            Answer::Events(events) => sse_response(events, None),
        };
    }
    json_response(StatusCode::OK, cancellable(d, &session, request, None).await.into_string(), None)
}

/// An unsupported revision in a request's `_meta`: 400 with -32022 and the revisions
/// mcpx serves (MCP 2026-07-28, Basic, "Versioning").
fn unsupported(id: &str, requested: &str) -> Response {
    let supported = era::all_versions();
    let message = format!("mcpx does not serve MCP revision {requested}; use one of {}", supported.join(", "));
    let error = json!({ "code": era::UNSUPPORTED_PROTOCOL_VERSION, "message": message, "data": { "supported": supported, "requested": requested } });
    let id: Value = serde_json::from_str(id).unwrap_or(Value::Null);
    json_response(StatusCode::BAD_REQUEST, json!({ "jsonrpc": "2.0", "id": id, "error": error }).to_string(), None)
}

/// A `tools/call` of a client that accepts server-sent events: its notifications,
/// then the response, as SSE. When the client accepts JSON too (`json_too`), a call
/// that ends before sending any notification is answered as JSON instead (Transports,
/// "Sending Messages to the Server": the server returns either), which spares it a
/// task, a channel and a chunked body; its first notification turns the answer into
/// a stream.
async fn sse_call(
    d: Arc<Daemon>,
    session: Arc<ClientSession>,
    request: Message,
    session_id: &str,
    json_too: bool,
) -> Response {
    let tally = d.dropped_notifications();
    let call = move |notify| async move { cancellable(&d, &session, request, Some(notify)).await };
    let notice = |n: &Message| sse_event(n.as_str());
    let last = sse_pieces;
    if !json_too {
        // An MCP call says nothing of what it waits on: no status items.
        let call = move |notify, _status| call(notify);
        return sse_response(stream_call(tally, call, notice, |_| Vec::new(), last), Some(session_id));
    }
    match answer_or_stream(tally, call, notice, last).await {
        Answered::Alone(response) => json_response(StatusCode::OK, response.into_string(), Some(session_id)),
        Answered::Streamed(events) => sse_response(events, Some(session_id)),
    }
}

/// An SSE response streaming what `rx` yields, with the session's `Mcp-Session-Id`
/// when there is one.
fn sse_response(rx: mpsc::Receiver<Vec<u8>>, session_id: Option<&str>) -> Response {
    sse_body_response(channel_body(rx), session_id)
}

/// A session's open-ended stream (its GET stream, a listen stream) as SSE, ended when
/// the daemon is asked to stop or upgrade: the drain before either waits for requests
/// to finish, and such a stream never does, so every upgrade with an MCP client
/// connected (`mcpx serve` holds its GET stream) waited the whole drain and cut off
/// the calls in flight then. The client opens another stream on the next daemon.
fn open_ended(e: &Endpoint, rx: mpsc::Receiver<Vec<u8>>, session_id: Option<&str>) -> Response {
    let daemon = e.daemon.clone();
    let exit = async move { daemon.exit_requested().await };
    sse_body_response(channel_body_until(rx, exit), session_id)
}

fn sse_body_response(body: axum::body::Body, session_id: Option<&str>) -> Response {
    let mut response = (
        [(axum::http::header::CONTENT_TYPE, "text/event-stream"), (axum::http::header::CACHE_CONTROL, "no-cache")],
        body,
    )
        .into_response();
    if let Some(v) = session_id.and_then(|s| HeaderValue::from_str(s).ok()) {
        response.headers_mut().insert(SESSION_HEADER, v);
    }
    response
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
