//! Remote servers (`url` entries): the MCP streamable HTTP transport (MCP 2025-11-25,
//! Transports, "Streamable HTTP") and the legacy HTTP+SSE transport (MCP 2024-11-05,
//! Transports, "HTTP with SSE"), behind the same [`Link`] as a stdio server.
//!
//! One link is one MCP session. Each outbound message is one POST; its answer (JSON,
//! or an SSE stream carrying progress, server requests and finally the response) is
//! turned into [`Inbound`] items as it arrives, so the instance routes ids, progress,
//! cancellation and server-to-client requests exactly as for a stdio server.
//!
//! - The `Mcp-Session-Id` the server assigns at `initialize` is sent on every later
//!   request, with `MCP-Protocol-Version` once negotiated ("Session Management",
//!   "Protocol Version Header").
//! - A 404 for the session means the server forgot it: the link repeats the original
//!   `initialize` (and `notifications/initialized`) without the instance noticing, and
//!   retries the request once.
//! - An SSE answer that ends before its response is resumed with a GET carrying
//!   `Last-Event-ID`, after the `retry` delay the stream asked for ("Resumability and
//!   Redelivery").
//! - The optional GET stream for server-initiated messages is opened after
//!   `notifications/initialized`; a 405 means the server offers none.
//! - A server that answers the `initialize` POST with 400, 404 or 405 is an old
//!   HTTP+SSE server ("Backwards Compatibility"): the link opens the SSE stream, waits
//!   for its `endpoint` event and carries on with that transport. `transport: "sse"`
//!   goes there directly.
//! - The session is kept in the state directory (`remote/<fingerprint>-<key hash>.json`,
//!   0600), so a later daemon re-uses it without a new `initialize`. Stopping the
//!   instance (`Outbound::Terminate`) sends `DELETE` and forgets the file; dropping the
//!   link (the daemon exits) does neither.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpx_proto::{Message, MessageKind, SseDecoder, SseEvent};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, WWW_AUTHENTICATE};
use reqwest::{StatusCode, Url};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

use super::{BoxFuture, ExitInfo, Identity, Inbound, LaunchError, Link, LinkInfo, Outbound};
use crate::config::RemoteKind;
use crate::sync::lock;

/// The session header (MCP 2025-11-25, Transports, "Session Management").
const SESSION_ID: &str = "mcp-session-id";
/// The negotiated revision on every request after `initialize` ("Protocol Version Header").
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// Where an SSE stream resumes ("Resumability and Redelivery").
const LAST_EVENT_ID: &str = "last-event-id";
/// How long connecting (TCP and TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a `DELETE` of the session may take when an instance stops.
const DELETE_TIMEOUT: Duration = Duration::from_secs(5);
/// Resumptions of one answer stream without a new event before it counts as failed.
const MAX_RESUMES: u32 = 5;
/// The wait before resuming a stream that named no `retry`, in milliseconds.
const DEFAULT_RETRY_MS: u64 = 500;
/// How much of an error body is quoted in a message.
const BODY_QUOTE: usize = 300;

/// What to connect to for one instance of a remote server, `${VAR}`s expanded.
#[derive(Clone)]
pub struct RemoteSpec {
    /// Who the instance is.
    pub identity: Identity,
    /// The endpoint, expanded.
    pub url: String,
    /// The endpoint as written in the configuration, for messages (the expanded one
    /// may hold a secret).
    pub written_url: String,
    /// Extra request headers, expanded (never printed).
    pub headers: BTreeMap<String, String>,
    /// Streamable HTTP (falling back to HTTP+SSE for old servers) or HTTP+SSE.
    pub kind: RemoteKind,
    /// The largest message accepted from the server, in bytes (`maxMessageBytes`).
    pub max_message_bytes: usize,
}

impl fmt::Debug for RemoteSpec {
    // Header values and the expanded URL may hold secrets: never print them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteSpec")
            .field("server", &self.identity.server)
            .field("url", &self.written_url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl RemoteSpec {
    /// The endpoint and the request headers, checked.
    ///
    /// Errors: the URL is not an http(s) URL, or a header name or value is not valid
    /// HTTP; the message names the key, never a value.
    pub fn endpoint(&self) -> Result<(Url, HeaderMap), String> {
        let url = Url::parse(&self.url).map_err(|e| format!("the `url` is not a valid URL ({e})"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("the `url` must start with http:// or https://, not {}://", url.scheme()));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("`headers`: `{name}` is not a valid HTTP header name"))?;
            let mut v = HeaderValue::from_str(value)
                .map_err(|_| format!("`headers`: the value of `{name}` is not a valid HTTP header value"))?;
            v.set_sensitive(true);
            headers.insert(n, v);
        }
        Ok((url, headers))
    }
}

/// Why a message could not be delivered to a remote server, or its answer read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RemoteError {
    /// What happened and what to do, naming the URL as written.
    pub message: String,
    /// A timeout (exit 5) rather than a failure (exit 4).
    pub timed_out: bool,
    /// The server cannot be reached at all (connect, TLS, DNS): the instance ends.
    pub unreachable: bool,
}

impl RemoteError {
    fn new(message: String) -> RemoteError {
        RemoteError { message, timed_out: false, unreachable: false }
    }
}

/// Starts remote instances: one HTTP client (connection pool) for the daemon.
#[derive(Debug, Clone)]
pub struct RemoteLauncher {
    http: reqwest::Client,
    sessions: PathBuf,
}

impl RemoteLauncher {
    /// A launcher keeping sessions under `sessions` (`<state>/remote`).
    ///
    /// Errors: the TLS backend cannot load the system's root certificates.
    pub fn new(sessions: PathBuf) -> Result<RemoteLauncher, LaunchError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("mcpx/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LaunchError::Spawn { command: "the HTTP client".into(), message: chain(&e) })?;
        Ok(RemoteLauncher { http, sessions })
    }

    /// Opens the link of one instance. Nothing is sent until the instance's first
    /// message (`initialize`); a session a previous daemon kept for this instance is
    /// taken up instead, and returned in [`Link::resumed`].
    ///
    /// Errors: the URL or a header is malformed (named, its value never shown).
    pub fn launch(&self, spec: RemoteSpec) -> BoxFuture<'static, Result<Link, LaunchError>> {
        let this = self.clone();
        Box::pin(async move { this.open(spec) })
    }

    fn open(&self, spec: RemoteSpec) -> Result<Link, LaunchError> {
        let (url, headers) =
            spec.endpoint().map_err(|message| LaunchError::Spawn { command: spec.written_url.clone(), message })?;
        let store = (spec.kind == RemoteKind::Http).then(|| self.sessions.join(session_file(&spec.identity)));
        let stored = store.as_deref().and_then(|p| Stored::load(p, &spec.written_url));
        let epoch = stored.as_ref().map_or(1, |s| s.epoch.saturating_add(1));
        let (out_tx, out_rx) = mpsc::channel(64);
        let (in_tx, in_rx) = mpsc::channel(256);
        let info = Arc::new(LinkInfo { remote: Some(spec.written_url.clone()), ..LinkInfo::new(None, None) });
        let resumed = stored.as_ref().map(|s| s.session.clone());
        if stored.is_some() {
            tracing::info!(server = %spec.identity.server, url = %spec.written_url, "re-using the MCP session a previous daemon kept");
        }
        let remote = Arc::new(Remote {
            http: self.http.clone(),
            url,
            headers,
            identity: spec.identity.clone(),
            kind: spec.kind,
            written_url: spec.written_url.clone(),
            max: spec.max_message_bytes,
            inbound: in_tx,
            info: info.clone(),
            store,
            epoch,
            state: Mutex::new(SessionState {
                id: stored.as_ref().map(|s| s.session_id.clone()),
                protocol: stored.as_ref().map(|s| s.protocol_version.clone()),
                initialize: stored.as_ref().map(|s| s.initialize.clone()),
                session: stored.map(|s| s.session),
                legacy: None,
            }),
            connect: tokio::sync::Mutex::new(()),
            background: Mutex::new(Vec::new()),
        });
        if resumed.is_some() {
            drop(remote.clone().start_listening());
        }
        tokio::spawn(run(remote, out_rx));
        Ok(Link { tx: out_tx, rx: in_rx, info, epoch, resumed })
    }
}

/// The file a session of this instance is kept in.
fn session_file(identity: &Identity) -> String {
    use sha2::Digest;
    let key = sha2::Sha256::digest(identity.key.as_bytes());
    let hex: String = key.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{}-{hex}.json", identity.fingerprint)
}

/// A remote MCP session a previous daemon kept (`<state>/remote/*.json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptSession {
    /// The instance's fingerprint.
    pub fingerprint: String,
    /// Its pool key.
    pub key: String,
    /// The file.
    pub path: PathBuf,
}

/// The sessions kept in `dir`; unreadable files are skipped.
pub fn kept_sessions(dir: &Path) -> Vec<KeptSession> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|path| {
            let stored: Stored = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
            (!stored.fingerprint.is_empty()).then_some(KeptSession {
                fingerprint: stored.fingerprint,
                key: stored.key,
                path,
            })
        })
        .collect()
}

/// A session kept for the next daemon.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Stored {
    /// The URL as written, so a file never applies to another server.
    url: String,
    /// The instance: its fingerprint and pool key, so a later daemon can take it up.
    #[serde(default)]
    fingerprint: String,
    #[serde(default)]
    key: String,
    session_id: String,
    protocol_version: String,
    /// The `initialize` request, repeated when the server forgets the session.
    initialize: String,
    /// The instance's [`Session`](crate::instance::Session), JSON.
    session: String,
    /// The epoch of the upstream ids this session used.
    epoch: u32,
}

impl Stored {
    fn load(path: &Path, url: &str) -> Option<Stored> {
        let stored: Stored = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
        (stored.url == url).then_some(stored)
    }

    /// Writes atomically, readable by the user only (the session id is a credential).
    fn save(&self, path: &Path) -> std::io::Result<()> {
        mcpx_platform::fs::write_atomic(path, &serde_json::to_vec(self).map_err(std::io::Error::other)?, 0o600)
    }
}

#[derive(Debug)]
struct SessionState {
    /// `Mcp-Session-Id`, once the server assigned one.
    id: Option<String>,
    /// The negotiated revision.
    protocol: Option<String>,
    /// The raw `initialize` request.
    initialize: Option<String>,
    /// The instance's session (the `initialize` result), JSON, once stored.
    session: Option<String>,
    /// The POST endpoint of the HTTP+SSE transport, once its stream named it.
    legacy: Option<Url>,
}

/// One remote MCP session.
struct Remote {
    http: reqwest::Client,
    url: Url,
    headers: HeaderMap,
    identity: Identity,
    /// Configured: streamable HTTP (with the fallback) or HTTP+SSE.
    kind: RemoteKind,
    written_url: String,
    max: usize,
    inbound: mpsc::Sender<Inbound>,
    info: Arc<LinkInfo>,
    store: Option<PathBuf>,
    epoch: u32,
    state: Mutex<SessionState>,
    /// Held while (re)initializing or opening the HTTP+SSE stream: one at a time.
    connect: tokio::sync::Mutex<()>,
    /// The GET stream and the HTTP+SSE stream: aborted when the link ends.
    background: Mutex<Vec<AbortHandle>>,
}

/// What to do with the messages of an answer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sink {
    /// Hand them to the instance.
    Forward,
    /// Keep them from the instance (the answer to a repeated `initialize`).
    Swallow,
}

/// What to do with data that is not a JSON-RPC message.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Junk {
    /// Skip it (an SSE event).
    Skip,
    /// Fail the request (a JSON answer).
    Fail,
}

/// Serves the instance's outbound messages until it stops or drops the link.
async fn run(remote: Arc<Remote>, mut out: mpsc::Receiver<Outbound>) {
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            item = out.recv() => match item {
                // `initialized` goes before anything after it: the server may only
                // then offer some tools, and say so on the GET stream.
                Some(Outbound::Message(m)) if m.method() == Some("notifications/initialized") => {
                    remote.clone().send(m).await;
                }
                Some(Outbound::Message(m)) => {
                    tasks.spawn(remote.clone().send(m));
                }
                Some(Outbound::StoreSession(json)) => {
                    lock(&remote.state).session = Some(json);
                    remote.save();
                }
                Some(Outbound::Restart) => {
                    tracing::warn!(server = %remote.identity.server, "a remote instance cannot be restarted in place; stop it instead");
                }
                Some(Outbound::Terminate) => {
                    tasks.abort_all();
                    remote.abort_background();
                    remote.end_session().await;
                    let _ = remote.inbound.send(Inbound::Exited(ExitInfo { code: None, signal: None })).await;
                    return;
                }
                // The daemon is going away: the session stays for the next one.
                None => break,
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    remote.abort_background();
}

impl Remote {
    /// Delivers one message and reports a failure to the waiting request.
    async fn send(self: Arc<Self>, m: Message) {
        let id = (m.kind() == MessageKind::Request).then(|| m.id().unwrap_or("null").to_owned());
        let method = m.method().unwrap_or("").to_owned();
        let Err(error) = self.deliver(&m).await else { return };
        tracing::warn!(server = %self.identity.server, method = %method, error = %error, "a message to the remote server failed");
        let unreachable = error.unreachable;
        if let Some(id) = id {
            let _ = self.inbound.send(Inbound::Failed { id, error: error.clone() }).await;
        }
        if unreachable {
            let _ = self.inbound.send(Inbound::Lost(error.message)).await;
        }
    }

    async fn deliver(self: &Arc<Self>, m: &Message) -> Result<(), RemoteError> {
        let is_init = m.method() == Some("initialize");
        if is_init {
            let mut state = lock(&self.state);
            state.initialize = Some(m.as_str().to_owned());
            state.id = None;
            state.protocol = None;
        }
        let configured = self.kind == RemoteKind::Sse;
        if configured || lock(&self.state).legacy.is_some() {
            return match self.post_legacy(m).await {
                Err(e) if configured && is_init => Err(RemoteError {
                    message: format!(
                        "{}; the entry says `\"transport\": \"sse\"` (HTTP+SSE): for a streamable HTTP server, remove it",
                        e.message
                    ),
                    ..e
                }),
                other => other,
            };
        }
        if m.method() == Some("notifications/initialized") {
            // Open the GET stream first, so what the server sends once initialized
            // (a `list_changed`, say) has somewhere to go.
            let ready = self.clone().start_listening();
            let _ = tokio::time::timeout(CONNECT_TIMEOUT, ready).await;
        }
        let mut retried = false;
        loop {
            let sid = lock(&self.state).id.clone();
            let response = self.post(m.as_str(), sid.as_deref()).await?;
            let status = response.status();
            if matches!(status.as_u16(), 400 | 404) && sid.is_some() && !retried && !is_init {
                let challenge = header(&response, WWW_AUTHENTICATE);
                let body = response.text().await.unwrap_or_default();
                // The specification answers a forgotten session with 404; servers built
                // on the TypeScript SDK's examples answer 400 "No valid session ID".
                if status == StatusCode::NOT_FOUND || body.to_ascii_lowercase().contains("session") {
                    retried = true;
                    self.reinitialize(sid.as_deref()).await?;
                    continue;
                }
                return Err(self.status_error(status, challenge, &body));
            }
            if is_init && matches!(status.as_u16(), 400 | 404 | 405) {
                tracing::info!(server = %self.identity.server, status = status.as_u16(), "the server refused a streamable HTTP initialize; trying the HTTP+SSE transport of MCP 2024-11-05");
                return self.post_legacy(m).await.map_err(|e| RemoteError {
                    message: format!(
                        "{} answered the streamable HTTP initialize with HTTP {status}, and the HTTP+SSE transport tried next failed too: {}; check the entry's `url`",
                        self.written_url, e.message
                    ),
                    ..e
                });
            }
            let response = self.check(response).await?;
            if is_init {
                lock(&self.state).id = header(&response, SESSION_ID);
            }
            let wanted = (m.kind() == MessageKind::Request).then(|| m.id().unwrap_or("null"));
            self.read_answer(response, wanted, Sink::Forward).await?;
            return Ok(());
        }
    }

    /// POSTs one message to the streamable HTTP endpoint.
    async fn post(&self, body: &str, sid: Option<&str>) -> Result<reqwest::Response, RemoteError> {
        let mut request = self
            .http
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_owned());
        if let Some(sid) = sid {
            request = request.header(SESSION_ID, sid);
        }
        if let Some(v) = lock(&self.state).protocol.clone() {
            request = request.header(PROTOCOL_VERSION, v);
        }
        request.send().await.map_err(|e| self.transport_error(&e))
    }

    /// Passes a successful response; turns any other into an error that says what to do.
    async fn check(&self, response: reqwest::Response) -> Result<reqwest::Response, RemoteError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let challenge = header(&response, WWW_AUTHENTICATE);
        let body = response.text().await.unwrap_or_default();
        Err(self.status_error(status, challenge, &body))
    }

    /// The error for an HTTP status other than success, saying what to do.
    fn status_error(&self, status: StatusCode, challenge: Option<String>, body: &str) -> RemoteError {
        let url = &self.written_url;
        let body = quote(body);
        let message = match status.as_u16() {
            401 | 403 => format!(
                "HTTP {status} from {url}: the server wants authentication{}; mcpx does not do OAuth yet: put a credential in the entry's `headers` (for example \"Authorization\": \"Bearer ${{TOKEN}}\"){body}",
                challenge.map(|c| format!(" (WWW-Authenticate: {c})")).unwrap_or_default()
            ),
            404 => format!("HTTP 404 from {url}: no MCP endpoint there; check the entry's `url`{body}"),
            500..=599 => format!("HTTP {status} from {url}: the server failed{body}"),
            _ => format!("HTTP {status} from {url}{body}"),
        };
        RemoteError::new(message)
    }

    /// Reads an answer: JSON, an SSE stream (resumed if it breaks before the response
    /// to `wanted`), or nothing (202).
    async fn read_answer(
        &self,
        response: reqwest::Response,
        wanted: Option<&str>,
        sink: Sink,
    ) -> Result<(), RemoteError> {
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if response.status() == StatusCode::ACCEPTED || response.content_length() == Some(0) {
            return match wanted {
                Some(_) => Err(RemoteError::new(format!(
                    "{} answered a request with HTTP {} and no response",
                    self.written_url,
                    response.status()
                ))),
                None => Ok(()),
            };
        }
        match content_type.as_str() {
            "text/event-stream" => self.read_stream(response, wanted, sink).await,
            "application/json" => self.read_json(response, wanted, sink).await,
            "" if wanted.is_none() => Ok(()),
            other => Err(RemoteError::new(format!(
                "{} answered with Content-Type `{other}`, neither application/json nor text/event-stream",
                self.written_url
            ))),
        }
    }

    async fn read_json(
        &self,
        mut response: reqwest::Response,
        wanted: Option<&str>,
        sink: Sink,
    ) -> Result<(), RemoteError> {
        let mut body = Vec::new();
        let mut dropped = 0u64;
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport_error(&e))? {
            if dropped == 0 && body.len() + chunk.len() <= self.max {
                body.extend_from_slice(&chunk);
            } else {
                dropped += (std::mem::take(&mut body).len() + chunk.len()) as u64;
            }
        }
        if dropped > 0 {
            self.report_oversize(dropped, wanted.map(str::to_owned)).await;
            return Ok(());
        }
        let answered = self.deliver_data(&body, wanted, sink, Junk::Fail).await?;
        if wanted.is_some() && !answered {
            return Err(RemoteError::new(format!("{} answered without the response", self.written_url)));
        }
        Ok(())
    }

    /// Reads an SSE answer; when it ends before the response to `wanted`, resumes it
    /// from the last event id.
    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        wanted: Option<&str>,
        sink: Sink,
    ) -> Result<(), RemoteError> {
        let mut decoder = SseDecoder::new(self.max);
        let mut resumes = 0;
        loop {
            let (answered, progressed) = self.pump(&mut response, &mut decoder, wanted, sink).await?;
            if answered || wanted.is_none() {
                return Ok(());
            }
            let last = decoder.last_event_id().to_owned();
            if last.is_empty() {
                return Err(RemoteError::new(format!(
                    "{} ended the answer stream before the response, with no event id to resume from",
                    self.written_url
                )));
            }
            resumes = if progressed { 1 } else { resumes + 1 };
            if resumes > MAX_RESUMES {
                return Err(RemoteError::new(format!(
                    "{} ended the answer stream {MAX_RESUMES} times in a row without the response",
                    self.written_url
                )));
            }
            tokio::time::sleep(Duration::from_millis(decoder.retry().unwrap_or(DEFAULT_RETRY_MS))).await;
            decoder.finish();
            response = self.check(self.get(Some(&last)).await?).await?;
        }
    }

    /// Reads SSE events until the stream ends or the response to `wanted` arrived.
    /// Returns (answered, any event seen).
    async fn pump(
        &self,
        response: &mut reqwest::Response,
        decoder: &mut SseDecoder,
        wanted: Option<&str>,
        sink: Sink,
    ) -> Result<(bool, bool), RemoteError> {
        let mut events = Vec::new();
        let mut progressed = false;
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                // A broken stream is resumed like an ended one.
                Ok(None) | Err(_) => return Ok((false, progressed)),
            };
            decoder.push(&chunk, &mut events);
            for event in events.drain(..) {
                progressed = true;
                match event {
                    SseEvent::Data { event, data } if event == "message" => {
                        if self.deliver_data(&data, wanted, sink, Junk::Skip).await? {
                            return Ok((true, true));
                        }
                    }
                    SseEvent::Data { .. } => {}
                    SseEvent::Oversize { bytes, id } => {
                        let answers = id.is_some() && id.as_deref() == wanted;
                        self.report_oversize(bytes, id).await;
                        if answers {
                            return Ok((true, true));
                        }
                    }
                }
            }
        }
    }

    /// Counts a discarded oversize message and tells the instance, which fails the
    /// request it answered (`id`, raw JSON).
    async fn report_oversize(&self, bytes: u64, id: Option<String>) {
        self.info.dropped_bytes.fetch_add(bytes, Ordering::Relaxed);
        if let Some(id) = &id {
            let _ = self.inbound.send(Inbound::OversizeId(id.clone())).await;
        }
        let _ = self.inbound.send(Inbound::Oversize { bytes, id }).await;
    }

    /// Parses one JSON body or event and hands its messages on. Returns whether it
    /// held the response to `wanted`. What is not JSON-RPC is counted, then skipped (an
    /// event, like a stray stdout line) or an error (a whole JSON answer).
    async fn deliver_data(
        &self,
        data: &[u8],
        wanted: Option<&str>,
        sink: Sink,
        junk: Junk,
    ) -> Result<bool, RemoteError> {
        if data.iter().all(u8::is_ascii_whitespace) && junk == Junk::Skip {
            return Ok(false);
        }
        let messages = match Message::parse_line(data) {
            Ok(messages) => messages,
            Err(e) => {
                self.info.skipped_lines.fetch_add(1, Ordering::Relaxed);
                self.info.dropped_bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
                if junk == Junk::Fail {
                    return Err(RemoteError::new(format!(
                        "{} answered with a JSON body that is not a JSON-RPC message ({e}){}",
                        self.written_url,
                        quote(&String::from_utf8_lossy(data))
                    )));
                }
                tracing::warn!(server = %self.identity.server, error = %e, "skipped an answer that is not a JSON-RPC message");
                return Ok(false);
            }
        };
        let mut answered = false;
        for m in messages {
            let is_answer = m.kind() == MessageKind::Response && wanted.is_some() && m.id() == wanted;
            if is_answer {
                answered = true;
                if let Some(v) = negotiated_version(&m) {
                    lock(&self.state).protocol = Some(v);
                }
            }
            match sink {
                Sink::Forward => {
                    let _ = self.inbound.send(Inbound::Message(m)).await;
                }
                Sink::Swallow if is_answer => {
                    if let Err(e) = mcpx_proto::response_result(&m) {
                        return Err(RemoteError::new(format!(
                            "{} refused the repeated initialize: {e}",
                            self.written_url
                        )));
                    }
                }
                Sink::Swallow => {}
            }
        }
        Ok(answered)
    }

    /// GETs the endpoint as an SSE stream: the standalone stream, or a resumption.
    async fn get(&self, last_event_id: Option<&str>) -> Result<reqwest::Response, RemoteError> {
        let mut request =
            self.http.get(self.url.clone()).headers(self.headers.clone()).header(ACCEPT, "text/event-stream");
        let (sid, protocol) = {
            let state = lock(&self.state);
            (state.id.clone(), state.protocol.clone())
        };
        if let Some(sid) = sid {
            request = request.header(SESSION_ID, sid);
        }
        if let Some(v) = protocol {
            request = request.header(PROTOCOL_VERSION, v);
        }
        if let Some(id) = last_event_id {
            request = request.header(LAST_EVENT_ID, id);
        }
        request.send().await.map_err(|e| self.transport_error(&e))
    }

    /// The server forgot the session (404): initializes again with the original
    /// request, unless another task already did since `stale` failed.
    async fn reinitialize(self: &Arc<Self>, stale: Option<&str>) -> Result<(), RemoteError> {
        let _guard = self.connect.lock().await;
        let initialize = {
            let mut state = lock(&self.state);
            if state.id.as_deref() != stale {
                return Ok(());
            }
            // The revision is negotiated again (`MCP-Protocol-Version` follows `initialize`).
            state.protocol = None;
            state.initialize.clone()
        };
        let Some(initialize) = initialize else {
            return Err(RemoteError::new(format!("{} forgot the session (404)", self.written_url)));
        };
        tracing::info!(server = %self.identity.server, url = %self.written_url, "the server forgot the MCP session; initializing again");
        let init = Message::parse(initialize)
            .map_err(|e| RemoteError::new(format!("the kept initialize request is malformed: {e}")))?;
        let response = self.check(self.post(init.as_str(), None).await?).await?;
        let sid = header(&response, SESSION_ID);
        lock(&self.state).id = sid.clone();
        self.read_answer(response, init.id(), Sink::Swallow).await?;
        let initialized = Message::notification("notifications/initialized", None);
        let response = self.check(self.post(initialized.as_str(), sid.as_deref()).await?).await?;
        self.read_answer(response, None, Sink::Swallow).await?;
        self.save();
        self.abort_background();
        drop(self.clone().start_listening());
        Ok(())
    }

    /// Opens the optional GET stream for server-initiated messages, in the background.
    /// The receiver hears when the server first answered the GET (or refused it).
    fn start_listening(self: Arc<Self>) -> tokio::sync::oneshot::Receiver<()> {
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let this = self.clone();
        let handle = tokio::spawn(async move { this.listen(ready_tx).await }).abort_handle();
        lock(&self.background).push(handle);
        ready_rx
    }

    async fn listen(&self, ready: tokio::sync::oneshot::Sender<()>) {
        let mut ready = Some(ready);
        let mut last: Option<String> = None;
        let mut failures = 0u32;
        loop {
            let answer = self.get(last.as_deref()).await;
            if let Some(ready) = ready.take() {
                let _ = ready.send(());
            }
            let response = match answer {
                Ok(r) => r,
                Err(e) => {
                    failures += 1;
                    if failures > MAX_RESUMES {
                        tracing::warn!(server = %self.identity.server, error = %e, "the GET stream failed; server-initiated messages stay off until the next initialize");
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(DEFAULT_RETRY_MS << failures.min(5))).await;
                    continue;
                }
            };
            match response.status() {
                s if s.is_success() => {}
                // The server offers no standalone stream; or forgot the session, which
                // the next POST finds out and re-initializes.
                StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_FOUND => return,
                s => {
                    tracing::debug!(server = %self.identity.server, status = s.as_u16(), "the server refused the GET stream");
                    return;
                }
            }
            let mut response = response;
            let mut decoder = SseDecoder::new(self.max);
            let Ok((_, progressed)) = self.pump(&mut response, &mut decoder, None, Sink::Forward).await else { return };
            if progressed {
                failures = 0;
            }
            if !decoder.last_event_id().is_empty() {
                last = Some(decoder.last_event_id().to_owned());
            }
            tokio::time::sleep(Duration::from_millis(decoder.retry().unwrap_or(DEFAULT_RETRY_MS))).await;
        }
    }

    /// Opens the HTTP+SSE stream (MCP 2024-11-05) and waits for its `endpoint` event;
    /// the rest of the stream is read in the background. Ends the link when it closes.
    async fn open_legacy(self: &Arc<Self>) -> Result<(), RemoteError> {
        let _guard = self.connect.lock().await;
        if lock(&self.state).legacy.is_some() {
            return Ok(());
        }
        let request = self.http.get(self.url.clone()).headers(self.headers.clone()).header(ACCEPT, "text/event-stream");
        let mut response = self.check(request.send().await.map_err(|e| self.transport_error(&e))?).await?;
        let mut decoder = SseDecoder::new(self.max);
        let mut events = Vec::new();
        let endpoint = loop {
            let Some(chunk) = response.chunk().await.map_err(|e| self.transport_error(&e))? else {
                return Err(RemoteError::new(format!(
                    "{} closed its SSE stream before naming the endpoint to post to",
                    self.written_url
                )));
            };
            decoder.push(&chunk, &mut events);
            let found = events.drain(..).find_map(|e| match e {
                SseEvent::Data { event, data } if event == "endpoint" => Some(data),
                _ => None,
            });
            if let Some(data) = found {
                break data;
            }
        };
        let endpoint = String::from_utf8_lossy(&endpoint).trim().to_owned();
        let endpoint = self.url.join(&endpoint).map_err(|e| {
            RemoteError::new(format!("{} named an endpoint that is not a URL ({endpoint}): {e}", self.written_url))
        })?;
        lock(&self.state).legacy = Some(endpoint);
        let this = self.clone();
        let handle = tokio::spawn(async move {
            let _ = this.pump(&mut response, &mut decoder, None, Sink::Forward).await;
            let reason = format!("{} closed its SSE stream (HTTP+SSE transport)", this.written_url);
            let _ = this.inbound.send(Inbound::Lost(reason)).await;
        })
        .abort_handle();
        lock(&self.background).push(handle);
        Ok(())
    }

    /// POSTs one message to the HTTP+SSE endpoint; answers arrive on the stream.
    async fn post_legacy(self: &Arc<Self>, m: &Message) -> Result<(), RemoteError> {
        let endpoint = lock(&self.state).legacy.clone();
        let endpoint = match endpoint {
            Some(e) => e,
            None => {
                self.open_legacy().await?;
                lock(&self.state).legacy.clone().ok_or_else(|| RemoteError::new("no SSE endpoint".into()))?
            }
        };
        let request = self
            .http
            .post(endpoint)
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(m.as_str().to_owned());
        self.check(request.send().await.map_err(|e| self.transport_error(&e))?).await?;
        Ok(())
    }

    /// Ends the session: `DELETE` for streamable HTTP (a 405 means the server does not
    /// allow it), and forgets the kept file.
    async fn end_session(&self) {
        if let Some(path) = &self.store {
            let _ = std::fs::remove_file(path);
        }
        let sid = lock(&self.state).id.take();
        let Some(sid) = sid else { return };
        if lock(&self.state).legacy.is_some() {
            return;
        }
        let request = self
            .http
            .delete(self.url.clone())
            .headers(self.headers.clone())
            .header(SESSION_ID, sid)
            .timeout(DELETE_TIMEOUT);
        match request.send().await {
            Ok(r) => {
                tracing::info!(server = %self.identity.server, status = r.status().as_u16(), "ended the MCP session (DELETE)")
            }
            Err(e) => {
                tracing::warn!(server = %self.identity.server, error = %self.describe(&e), "ending the MCP session (DELETE) failed")
            }
        }
    }

    /// Keeps the session for the next daemon, once it has an id and a stored result.
    fn save(&self) {
        let Some(path) = &self.store else { return };
        let stored = {
            let state = lock(&self.state);
            match (&state.id, &state.protocol, &state.initialize, &state.session, &state.legacy) {
                (Some(id), Some(protocol), Some(init), Some(session), None) => Stored {
                    url: self.written_url.clone(),
                    fingerprint: self.identity.fingerprint.clone(),
                    key: self.identity.key.clone(),
                    session_id: id.clone(),
                    protocol_version: protocol.clone(),
                    initialize: init.clone(),
                    session: session.clone(),
                    epoch: self.epoch,
                },
                _ => return,
            }
        };
        if let Err(e) = stored.save(path) {
            tracing::warn!(server = %self.identity.server, path = %path.display(), error = %e, "cannot keep the MCP session for the next daemon");
        }
    }

    fn abort_background(&self) {
        for handle in lock(&self.background).drain(..) {
            handle.abort();
        }
    }

    /// What failed, without the URL: reqwest's outer layers repeat the URL expanded,
    /// which may hold a secret (`${VAR}` in a query), and the innermost cause says what
    /// failed. Any URL left is replaced with the one written in the configuration.
    fn describe(&self, e: &reqwest::Error) -> String {
        let mut detail = root_cause(e);
        if let Some(expanded) = e.url() {
            detail = detail.replace(expanded.as_str(), &self.written_url);
        }
        detail.replace(self.url.as_str(), &self.written_url)
    }

    /// An error of the HTTP client, classified and worded for the user.
    fn transport_error(&self, e: &reqwest::Error) -> RemoteError {
        let url = &self.written_url;
        let detail = self.describe(e);
        if e.is_timeout() {
            RemoteError {
                message: format!("timed out reaching {url}: {detail}"),
                timed_out: true,
                unreachable: e.is_connect(),
            }
        } else if let Some(tls) = tls_error(e) {
            RemoteError {
                message: format!(
                    "TLS with {url} failed: {tls}; check that the server speaks HTTPS there and that this machine's root certificates trust it"
                ),
                timed_out: false,
                unreachable: true,
            }
        } else if e.is_connect() {
            RemoteError {
                message: format!(
                    "cannot connect to {url}: {detail}; check that the server runs and the `url` is right"
                ),
                timed_out: false,
                unreachable: true,
            }
        } else {
            RemoteError::new(format!("HTTP exchange with {url} failed: {detail}"))
        }
    }
}

/// A response header's value, when it is text.
fn header(response: &reqwest::Response, name: impl reqwest::header::AsHeaderName) -> Option<String> {
    response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// The `protocolVersion` of an `initialize` result, if `m` is one.
fn negotiated_version(m: &Message) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        result: Option<Result_>,
    }
    #[derive(serde::Deserialize)]
    struct Result_ {
        #[serde(rename = "protocolVersion")]
        protocol_version: Option<String>,
    }
    serde_json::from_str::<Answer>(m.as_str()).ok()?.result?.protocol_version
}

/// An error and its sources, one line (reqwest's own text omits the cause).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// The TLS failure behind an error, if that is what it is. rustls reports through
/// `io::Error`s (nested), whose `source` skips the error they wrap, so both ways down
/// are followed.
#[cfg(not(target_vendor = "apple"))]
fn tls_error(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut stack = vec![e];
    while let Some(c) = stack.pop() {
        if let Some(tls) = c.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        if let Some(inner) = c.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref) {
            stack.push(inner);
        }
        stack.extend(c.source());
    }
    None
}

/// The TLS failure behind an error: the system's TLS on Apple platforms reports it as
/// a connect error, which [`RemoteError`] words already.
#[cfg(target_vendor = "apple")]
fn tls_error(_: &(dyn std::error::Error + 'static)) -> Option<String> {
    None
}

/// The innermost cause of an error.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// An error body, quoted briefly for a message.
fn quote(body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return String::new();
    }
    let cut: String = body.chars().take(BODY_QUOTE).collect();
    format!(" ({}{})", cut.replace('\n', " "), if cut.len() < body.len() { "…" } else { "" })
}
