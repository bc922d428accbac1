//! The streamable HTTP mode (`--http ADDR`), after the MCP 2025-11-25 "Transports"
//! section: one endpoint, `/mcp`, for `POST`, `GET` and `DELETE`.
//!
//! - An `initialize` POST without `Mcp-Session-Id` creates a session: a random hex
//!   id (the response's `Mcp-Session-Id`) and its own [`Server`], the same engine as
//!   on stdio, whose output goes to the session's streams instead of stdout.
//! - Every request POSTed gets a *route*: a number the engine thread handling it
//!   carries ([`protocol::with_route`]), so everything that thread sends (progress,
//!   logging, `sampling/createMessage`...) goes on that request's SSE stream, which
//!   ends with the response. With `FAKE_HTTP_RESPONSE=json` the response is the
//!   POST's `application/json` body instead, and the rest goes to the standalone
//!   stream (the body then waits 100 ms, so that a client reading that stream sees
//!   the request's progress before its answer). Messages of no open request go to the standalone stream (`GET`), and
//!   wait there for the next `GET` when none is open.
//! - Every SSE event has an id `<route>-<seq>`, unique in the session; every stream
//!   keeps its events, so a `GET` with `Last-Event-ID` replays what followed that
//!   event on its stream, then carries the rest of it (resumability).
//!
//! Errors: a POST other than `initialize` without a session id is 400, an unknown or
//! ended session 404, a second standalone `GET` 409, a foreign `Origin` 403, an
//! `Accept` without both `application/json` and `text/event-stream` 406 (`GET`:
//! without `text/event-stream`), a body that is not JSON 400.

mod wire;

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use self::wire::{accepts, encode_event, header, is_response_to, new_session_id, origin_allowed, parse_event_id};
use crate::config::Config;
use crate::modern::{self, Era};
use crate::protect::{self, Protection};
use crate::protocol::{self, INVALID_REQUEST, Output, PARSE_ERROR, Sink};
use crate::record::Recorder;
use crate::server::{self, SUPPORTED_VERSIONS, Server};

/// The session header.
const SESSION_HEADER: &str = "mcp-session-id";

/// The protocol version header.
const VERSION_HEADER: &str = "mcp-protocol-version";

/// The SSE resumption header.
const LAST_EVENT_HEADER: &str = "last-event-id";

/// The route of the standalone (`GET`) stream; requests get 1, 2, ...
const STANDALONE: u64 = 0;

/// How long a JSON answer waits when its request sent other messages on the
/// standalone stream, so that a client reading that stream sees them first.
const JSON_ANSWER_DELAY: Duration = Duration::from_millis(100);

/// The `retry:` of a priming event, in milliseconds.
const PRIMING_RETRY_MS: u64 = 50;

/// JSON-RPC error code of the transport's own errors (no session, unknown session...).
const TRANSPORT_ERROR: i64 = -32000;

/// Binds `addr`, prints `http://<addr>/mcp` on stdout, and serves until killed.
pub fn serve(addr: &str, config: Config) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|err| format!("cannot start the async runtime: {err}"))?;
    runtime.block_on(async {
        let listener =
            tokio::net::TcpListener::bind(addr).await.map_err(|err| format!("cannot listen on {addr}: {err}"))?;
        let local = listener.local_addr().map_err(|err| format!("cannot read the bound address: {err}"))?;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "http://{local}/mcp")
            .and_then(|()| stdout.flush())
            .map_err(|err| format!("cannot print the URL: {err}"))?;
        drop(stdout);
        let recorder = config.record.clone().map(|path| Arc::new(Recorder::new(path)));
        let protection = Protection::from_env()?.map(|p| (p, format!("http://{local}")));
        let metadata = protection.clone();
        let sessions = Mutex::new(HashMap::new());
        let app = Arc::new(App { config, recorder, sessions, protection, modern: OnceLock::new() });
        let router = Router::new()
            .route("/mcp", any(handle))
            .route(protect::METADATA_PATH, any(move || std::future::ready(protect::metadata(metadata.as_ref()))))
            .layer(DefaultBodyLimit::disable())
            .with_state(app);
        // Without TCP_NODELAY an SSE answer's second write waits for the client's
        // delayed ACK (about 40 ms), as with most servers that set it.
        let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
            let _ = stream.set_nodelay(true);
        });
        axum::serve(listener, router).await.map_err(|err| format!("serving HTTP: {err}"))
    })
}

/// The server: configuration and live sessions.
struct App {
    /// Settings from the environment (each session's engine gets a copy).
    config: Config,
    /// The `FAKE_RECORD` transcript, shared by every session.
    recorder: Option<Arc<Recorder>>,
    /// Live sessions by id; a DELETEd session is removed.
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// `FAKE_AUTH_SERVER`: every request needs a token (see `protect.rs`), and the
    /// server's origin (`http://127.0.0.1:<port>`).
    protection: Option<(Protection, String)>,
    /// The engine of modern requests (no session; its id is empty).
    modern: OnceLock<Arc<Session>>,
}

impl App {
    /// Locks the session table.
    fn sessions(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates and registers a new session with its own engine.
    fn new_session(&self) -> Arc<Session> {
        let session = self.engine(new_session_id());
        self.sessions().insert(session.id.clone(), Arc::clone(&session));
        session
    }

    /// A session `id` with its own engine, not registered.
    fn engine(&self, id: String) -> Arc<Session> {
        let streams = Arc::new(Streams::default());
        let out = Output::with_sink(Box::new(SessionSink(Arc::clone(&streams))));
        let engine = Arc::new(Server::with_output(self.config.clone(), out, self.recorder.clone()));
        Arc::new(Session { id, engine, streams })
    }

    /// The one engine of every modern (session-less) request, once its headers
    /// match its body (`modern::header_mismatch`; `FAKE_HEADER_FAULT`: never).
    fn modern(&self, headers: &HeaderMap, message: &Value) -> Result<Arc<Session>, Refusal> {
        let mismatch = match self.config.header_fault {
            true => Some("Mcp-Method header does not match the request body's method (FAKE_HEADER_FAULT)".to_owned()),
            false if modern::is_modern(message) => modern::header_mismatch(message, |name| header(headers, name)),
            false => None,
        };
        if let Some(mismatch) = mismatch {
            return Err(Refusal::new(StatusCode::BAD_REQUEST, modern::HEADER_MISMATCH, mismatch));
        }
        Ok(Arc::clone(self.modern.get_or_init(|| self.engine(String::new()))))
    }

    /// The session named by the request's `Mcp-Session-Id`: 400 without one, 404
    /// for an unknown or ended one.
    fn session(&self, id: Option<&str>) -> Result<Arc<Session>, Refusal> {
        let Some(id) = id else {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                TRANSPORT_ERROR,
                "Bad Request: Mcp-Session-Id header is required",
            ));
        };
        self.sessions()
            .get(id)
            .cloned()
            .ok_or_else(|| Refusal::new(StatusCode::NOT_FOUND, TRANSPORT_ERROR, "Session not found"))
    }
}

/// One MCP session: its engine and its streams.
struct Session {
    /// The `Mcp-Session-Id`.
    id: String,
    /// The session's own server instance.
    engine: Arc<Server>,
    /// Where the engine's output goes.
    streams: Arc<Streams>,
}

/// A session's streams and JSON waiters, by route.
#[derive(Default)]
struct Streams {
    /// Everything, under one lock (held briefly: never across a sleep or an await).
    state: Mutex<StreamsState>,
}

/// See [`Streams`].
struct StreamsState {
    /// The next request's route.
    next_route: u64,
    /// Streams (the standalone one at [`STANDALONE`]) and JSON waiters.
    routes: HashMap<u64, Route>,
    /// The session was DELETEd: drop everything.
    ended: bool,
}

impl Default for StreamsState {
    fn default() -> Self {
        let routes = HashMap::from([(STANDALONE, Route::Sse(Stream::new(None)))]);
        Self { next_route: STANDALONE + 1, routes, ended: false }
    }
}

/// Where a route's messages go.
enum Route {
    /// An SSE stream.
    Sse(Stream),
    /// A request answered with a JSON body (`FAKE_HTTP_RESPONSE=json`).
    Json {
        /// The request's id.
        id: Value,
        /// The handler waiting for the response line, and whether the request sent
        /// other messages (on the standalone stream) before it.
        reply: oneshot::Sender<(String, bool)>,
        /// Whether the request sent other messages.
        sent_others: bool,
    },
}

/// One SSE stream: every event it carried, and the connection carrying it now.
struct Stream {
    /// The request whose response ends the stream (`None`: the standalone stream).
    request_id: Option<Value>,
    /// Every event so far, as `(seq, encoded event)`, for replays.
    events: Vec<(u64, Bytes)>,
    /// The next event's sequence number.
    next_seq: u64,
    /// The connection the stream's events go to now, if one is open.
    live: Option<mpsc::UnboundedSender<Bytes>>,
    /// Index in `events` of the first event never handed to a connection.
    undelivered: usize,
    /// The response was sent: no more events, and the connection closes.
    finished: bool,
    /// A priming event was sent.
    primed: bool,
}

/// An event to hand to a connection once the state lock is released.
type Delivery = Option<(mpsc::UnboundedSender<Bytes>, Bytes)>;

impl Stream {
    fn new(request_id: Option<Value>) -> Self {
        Self { request_id, events: Vec::new(), next_seq: 1, live: None, undelivered: 0, finished: false, primed: false }
    }

    /// Whether a connection is open on the stream.
    fn is_live(&self) -> bool {
        self.live.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// Appends an event (`finish`: the last one) and returns it with the
    /// connection to send it on, if any. Sending after the lock is released keeps
    /// slow writes (`split`) from holding it.
    fn push(&mut self, route: u64, data: &str, retry: Option<u64>, finish: bool) -> Delivery {
        let seq = self.next_seq;
        self.next_seq += 1;
        let event = encode_event(&format!("{route}-{seq}"), retry, data);
        self.events.push((seq, event.clone()));
        self.finished |= finish;
        if !self.is_live() {
            self.live = None;
        }
        // Once finished, the stream's connection closes after this event (when the
        // returned sender is dropped).
        let tx = if self.finished { self.live.take() } else { self.live.clone() }?;
        self.undelivered = self.events.len();
        Some((tx, event))
    }

    /// Sends a priming event (an id, `retry:` and empty data), unless one was sent,
    /// then drops the connection so the client has to resume.
    fn prime_and_close(&mut self, route: u64) -> Delivery {
        let delivery = if self.primed || self.finished {
            None
        } else {
            self.primed = true;
            self.push(route, "", Some(PRIMING_RETRY_MS), false)
        };
        self.live = None;
        delivery
    }

    /// Opens a connection on the stream: replays the events after `after` (with
    /// `None`: those never handed to a connection), then carries the rest of the
    /// stream, or ends at once if the stream is finished.
    fn attach(&mut self, after: Option<u64>) -> mpsc::UnboundedReceiver<Bytes> {
        let (tx, rx) = mpsc::unbounded_channel();
        let replay = match after {
            Some(after) => &self.events[self.events.partition_point(|(seq, _)| *seq <= after)..],
            None => &self.events[self.undelivered..],
        };
        for (_, event) in replay {
            let _ = tx.send(event.clone());
        }
        self.undelivered = self.events.len();
        self.live = (!self.finished).then_some(tx);
        rx
    }
}

/// Sends a [`Delivery`], whole or in `pieces` writes `delay` apart.
fn send(delivery: Delivery, split: Option<(usize, Duration)>) {
    let Some((tx, event)) = delivery else { return };
    match split {
        None => {
            let _ = tx.send(event);
        }
        Some((pieces, delay)) => {
            for (i, piece) in protocol::split_pieces(&event, pieces).enumerate() {
                if i > 0 {
                    std::thread::sleep(delay);
                }
                if tx.send(Bytes::copy_from_slice(piece)).is_err() {
                    return;
                }
            }
        }
    }
}

impl Streams {
    fn lock(&self) -> MutexGuard<'_, StreamsState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Routes one line of the engine: to the JSON waiter or SSE stream of the
    /// current thread's request while it is open, else to the standalone stream.
    fn deliver(&self, line: &str, split: Option<(usize, Duration)>) {
        let route = protocol::current_route().unwrap_or(STANDALONE);
        let delivery = {
            let mut state = self.lock();
            if state.ended {
                return;
            }
            if let Some(Route::Json { id, sent_others, .. }) = state.routes.get_mut(&route) {
                if is_response_to(line, id) {
                    if let Some(Route::Json { reply, sent_others, .. }) = state.routes.remove(&route) {
                        let _ = reply.send((line.to_owned(), sent_others));
                    }
                    return;
                }
                *sent_others = true;
            }
            let target = match state.routes.get(&route) {
                Some(Route::Sse(stream)) if !stream.finished => route,
                _ => STANDALONE,
            };
            let Some(Route::Sse(stream)) = state.routes.get_mut(&target) else { return };
            let finish = stream.request_id.as_ref().is_some_and(|id| is_response_to(line, id));
            stream.push(target, line, None, finish)
        };
        send(delivery, split);
    }

    /// [`Stream::prime_and_close`] on the current thread's request stream.
    fn prime_and_close(&self) {
        let Some(route) = protocol::current_route() else { return };
        let delivery = match self.lock().routes.get_mut(&route) {
            Some(Route::Sse(stream)) => stream.prime_and_close(route),
            _ => None,
        };
        send(delivery, None);
    }

    /// Adds a request's route; `None` if the session has ended.
    fn add(&self, route: Route) -> Option<u64> {
        let mut state = self.lock();
        if state.ended {
            return None;
        }
        let number = state.next_route;
        state.next_route += 1;
        state.routes.insert(number, route);
        Some(number)
    }

    /// Ends the session: every connection closes, every JSON waiter gives up.
    fn end(&self) {
        let mut state = self.lock();
        state.ended = true;
        state.routes.clear();
    }
}

/// The engine's [`Sink`] in a session.
struct SessionSink(Arc<Streams>);

impl Sink for SessionSink {
    fn line(&self, line: &str) {
        self.0.deliver(line, None);
    }

    fn pieces(&self, line: &str, pieces: usize, delay: Duration) {
        self.0.deliver(line, Some((pieces, delay)));
    }

    fn prime_and_close(&self) {
        self.0.prime_and_close();
    }
}

/// Every request to `/mcp`.
async fn handle(State(app): State<Arc<App>>, method: Method, headers: HeaderMap, body: Bytes) -> Response {
    let session_id = header(&headers, SESSION_HEADER);
    let message = (method == Method::POST).then(|| serde_json::from_slice::<Value>(&body));
    let rpc_method = message.as_ref().and_then(|m| m.as_ref().ok()?.get("method")?.as_str());
    if let Some(recorder) = &app.recorder {
        recorder.http(&format!("{method} {} {}", session_id.unwrap_or("-"), rpc_method.unwrap_or("-")));
        let mut names: Vec<&str> = headers.keys().map(|name| name.as_str()).collect();
        names.sort_unstable();
        recorder.headers(&names.join(","));
    }
    if let Some(to) = &app.config.http_redirect {
        return redirect(to);
    }
    if let (true, Some(code)) = (method == Method::POST, app.config.http_status) {
        return injected_status(code);
    }
    if !origin_allowed(&headers) {
        return rpc_error(StatusCode::FORBIDDEN, TRANSPORT_ERROR, "Forbidden: Origin is not localhost");
    }
    if let Some((protection, origin)) = &app.protection {
        if let Err(refused) = protection.check(&headers, origin, &format!("{origin}/mcp")).await {
            return refused;
        }
    }
    let result = match (method, message) {
        (Method::POST, Some(message)) => post(&app, &headers, &body, message).await,
        (Method::GET, _) => get(&app, &headers),
        (Method::DELETE, _) => delete(&app, &headers),
        _ => Ok((StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "GET, POST, DELETE")], "method not allowed\n")
            .into_response()),
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

/// A POST: one JSON-RPC message.
async fn post(
    app: &App,
    headers: &HeaderMap,
    body: &[u8],
    message: Result<Value, serde_json::Error>,
) -> Result<Response, Refusal> {
    if !accepts(headers, "application/json") || !accepts(headers, "text/event-stream") {
        return Err(Refusal::new(
            StatusCode::NOT_ACCEPTABLE,
            TRANSPORT_ERROR,
            "Not Acceptable: Accept must list application/json and text/event-stream",
        ));
    }
    let json_body = header(headers, header::CONTENT_TYPE.as_str()).is_some_and(|value| {
        value.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
    });
    if !json_body {
        return Err(Refusal::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            TRANSPORT_ERROR,
            "Unsupported Media Type: Content-Type must be application/json",
        ));
    }
    let message =
        message.map_err(|err| Refusal::new(StatusCode::BAD_REQUEST, PARSE_ERROR, format!("Parse error: {err}")))?;
    let modern_ok = |v: &str| app.config.era != Era::Legacy && v == modern::MODERN_VERSION;
    if let Some(version) = header(headers, VERSION_HEADER).filter(|v| !SUPPORTED_VERSIONS.contains(v) && !modern_ok(v))
    {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            TRANSPORT_ERROR,
            format!("Bad Request: unsupported MCP-Protocol-Version {version}"),
        ));
    }
    let Value::Object(fields) = &message else {
        return Err(Refusal::new(StatusCode::BAD_REQUEST, INVALID_REQUEST, "Invalid Request: not a JSON-RPC object"));
    };
    let method = fields.get("method").and_then(Value::as_str);
    let request_id = fields.get("id").filter(|_| method.is_some()).cloned();
    let is_response = method.is_none() && (fields.contains_key("result") || fields.contains_key("error"));
    if method.is_none() && !is_response {
        return Err(Refusal::new(StatusCode::BAD_REQUEST, INVALID_REQUEST, "Invalid Request"));
    }
    let session_id = header(headers, SESSION_HEADER);
    let session = match (method, &request_id, session_id) {
        (Some("initialize"), Some(_), None) if app.config.era != Era::Modern => app.new_session(),
        (_, _, None) if app.config.era == Era::Modern || app.config.era == Era::Dual && modern::is_modern(&message) => {
            app.modern(headers, &message)?
        }
        _ => app.session(session_id)?,
    };
    if body.contains(&b'\n') {
        session.engine.record(protocol::to_line(&message).as_bytes(), true);
    } else {
        session.engine.record(body, true);
    }
    let Some(request_id) = request_id else {
        // A notification or a response: the engine takes it, nothing to answer.
        server::dispatch(&session.engine, message);
        return Ok(StatusCode::ACCEPTED.into_response());
    };
    let ended = || Refusal::new(StatusCode::NOT_FOUND, TRANSPORT_ERROR, "Session not found");
    if app.config.http_json {
        let (tx, rx) = oneshot::channel();
        let route =
            session.streams.add(Route::Json { id: request_id, reply: tx, sent_others: false }).ok_or_else(ended)?;
        protocol::with_route(Some(route), || server::dispatch(&session.engine, message));
        let Ok((line, sent_others)) = rx.await else {
            return Err(Refusal::new(StatusCode::NOT_FOUND, TRANSPORT_ERROR, "Session ended before the response"));
        };
        if sent_others {
            tokio::time::sleep(JSON_ANSWER_DELAY).await;
        }
        let mut response = ([(header::CONTENT_TYPE, "application/json")], line).into_response();
        set_session_header(&mut response, &session.id);
        return Ok(response);
    }
    let mut stream = Stream::new(Some(request_id));
    let rx = stream.attach(None);
    let route = session.streams.add(Route::Sse(stream)).ok_or_else(ended)?;
    if app.config.http_priming {
        let priming = match session.streams.lock().routes.get_mut(&route) {
            Some(Route::Sse(stream)) => stream.prime_and_close(route),
            _ => None,
        };
        send(priming, None);
    }
    protocol::with_route(Some(route), || server::dispatch(&session.engine, message));
    Ok(sse_response(rx, &session.id))
}

/// A GET: the standalone stream, or the resumption of a stream (`Last-Event-ID`).
fn get(app: &App, headers: &HeaderMap) -> Result<Response, Refusal> {
    if !accepts(headers, "text/event-stream") {
        return Err(Refusal::new(
            StatusCode::NOT_ACCEPTABLE,
            TRANSPORT_ERROR,
            "Not Acceptable: Accept must list text/event-stream",
        ));
    }
    let session = app.session(header(headers, SESSION_HEADER))?;
    let (route, after) = match header(headers, LAST_EVENT_HEADER) {
        None => (STANDALONE, None),
        Some(last) => {
            let (route, seq) = parse_event_id(last).ok_or_else(|| {
                Refusal::new(StatusCode::BAD_REQUEST, TRANSPORT_ERROR, format!("Bad Request: unknown event id {last}"))
            })?;
            (route, Some(seq))
        }
    };
    let mut state = session.streams.lock();
    let Some(Route::Sse(stream)) = state.routes.get_mut(&route) else {
        return Err(Refusal::new(StatusCode::BAD_REQUEST, TRANSPORT_ERROR, "Bad Request: unknown event id"));
    };
    if route == STANDALONE && stream.is_live() {
        return Err(Refusal::new(
            StatusCode::CONFLICT,
            TRANSPORT_ERROR,
            "Conflict: the session already has a GET stream",
        ));
    }
    let rx = stream.attach(after);
    drop(state);
    Ok(sse_response(rx, &session.id))
}

/// A DELETE: ends the session.
fn delete(app: &App, headers: &HeaderMap) -> Result<Response, Refusal> {
    let session = app.session(header(headers, SESSION_HEADER))?;
    app.sessions().remove(&session.id);
    session.streams.end();
    Ok(StatusCode::OK.into_response())
}

/// An SSE response carrying what arrives on `rx` until every sender is dropped.
fn sse_response(rx: mpsc::UnboundedReceiver<Bytes>, session_id: &str) -> Response {
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|event| (Ok::<Bytes, Infallible>(event), rx))
    });
    let mut response =
        ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from_stream(events))
            .into_response();
    set_session_header(&mut response, session_id);
    response
}

/// Adds `Mcp-Session-Id` to a response (none for a modern request).
fn set_session_header(response: &mut Response, session_id: &str) {
    if session_id.is_empty() {
        return;
    }
    if let Ok(value) = HeaderValue::from_str(session_id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
}

/// `FAKE_HTTP_REDIRECT`: `307 Temporary Redirect` to `to`, with a short text body.
fn redirect(to: &str) -> Response {
    let mut response = (StatusCode::TEMPORARY_REDIRECT, format!("moved to {to}\n")).into_response();
    match HeaderValue::from_str(to) {
        Ok(location) => {
            response.headers_mut().insert(header::LOCATION, location);
        }
        Err(err) => eprintln!("mcpx-fake-server: FAKE_HTTP_REDIRECT={to:?} is not a header value: {err}"),
    }
    response
}

/// `FAKE_HTTP_STATUS`: the injected status with a short text body (and, for 401, a
/// `WWW-Authenticate` challenge).
fn injected_status(code: u16) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, format!("fake HTTP status {code}\n")).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(r#"Bearer realm="fake", error="invalid_token""#),
        );
    }
    response
}

/// A request refused: an HTTP status and a JSON-RPC error body.
struct Refusal {
    status: StatusCode,
    code: i64,
    message: String,
}

impl Refusal {
    fn new(status: StatusCode, code: i64, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into() }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        rpc_error(self.status, self.code, &self.message)
    }
}

/// A JSON-RPC error body (id `null`) with an HTTP status.
fn rpc_error(status: StatusCode, code: i64, message: &str) -> Response {
    (status, axum::Json(protocol::error_response(&Value::Null, code, message))).into_response()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn origins() {
        for ok in
            ["http://localhost", "http://127.0.0.1:3000", "https://localhost:1", "http://[::1]:80", "HTTP://LOCALHOST"]
        {
            assert!(origin_allowed(&headers(&[("origin", ok)])), "{ok}");
        }
        for bad in [
            "http://evil.example.com",
            "http://localhost.evil.com",
            "null",
            "file://localhost",
            "http://127.0.0.1:x",
            "http://127.0.0.1/path",
        ] {
            assert!(!origin_allowed(&headers(&[("origin", bad)])), "{bad}");
        }
        assert!(origin_allowed(&HeaderMap::new()));
    }

    #[test]
    fn accept_lists() {
        let both = headers(&[("accept", "application/json, text/event-stream")]);
        assert!(accepts(&both, "application/json") && accepts(&both, "text/event-stream"));
        let json_only = headers(&[("accept", "application/json;q=1")]);
        assert!(accepts(&json_only, "application/json") && !accepts(&json_only, "text/event-stream"));
        assert!(accepts(&headers(&[("accept", "*/*")]), "text/event-stream"));
        assert!(!accepts(&HeaderMap::new(), "application/json"));
    }

    #[test]
    fn streams_replay_after_an_event_id() {
        let mut stream = Stream::new(Some(json!(1)));
        let mut first = stream.attach(None);
        let priming = stream.prime_and_close(7);
        send(priming, None);
        assert!(stream.push(7, r#"{"a":1}"#, None, false).is_none(), "closed after priming");
        let _ = stream.push(7, r#"{"id":1,"result":{}}"#, None, true);
        let primed = first.try_recv().unwrap();
        assert_eq!(&primed[..], b"id: 7-1\nretry: 50\ndata: \n\n");
        assert!(first.try_recv().is_err());
        let mut resumed = stream.attach(parse_event_id("7-1").map(|(_, seq)| seq));
        assert_eq!(&resumed.try_recv().unwrap()[..], b"id: 7-2\ndata: {\"a\":1}\n\n");
        assert_eq!(&resumed.try_recv().unwrap()[..], b"id: 7-3\ndata: {\"id\":1,\"result\":{}}\n\n");
        assert!(matches!(resumed.try_recv(), Err(mpsc::error::TryRecvError::Disconnected)));
    }

    #[test]
    fn responses_are_told_apart() {
        assert!(is_response_to(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#, &json!(3)));
        assert!(!is_response_to(r#"{"jsonrpc":"2.0","id":3,"method":"x"}"#, &json!(3)));
        assert!(!is_response_to(r#"{"jsonrpc":"2.0","id":"3","result":{}}"#, &json!(3)));
        assert!(!is_response_to("not json", &json!(3)));
    }
}
