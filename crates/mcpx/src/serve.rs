//! `mcpx serve`: an MCP server over stdio (MCP 2025-11-25, Transports, "stdio")
//! that presents the daemon's aggregate (or one server, with `--server`; or only
//! four discovery tools, with `--discover`).
//!
//! It relays each message to the daemon's `/mcp` endpoint over the control socket
//! and writes the answers (JSON, or the events of an SSE answer) to stdout. It is
//! one MCP session and one caller for pooling: it makes its own session id at start
//! and presents it on every reconnect, so `session`-scoped servers keep their
//! instance. When the daemon goes away it starts or finds a new one and
//! initializes again with the client's own `initialize`, by itself; a request in
//! flight at that moment fails with a JSON-RPC error, never hangs.
//!
//! A client of MCP 2026-07-28 sends no `initialize`: each of its requests goes on its
//! own, with the routing headers its body implies (`Mcp-Method`, `Mcp-Name`) and no
//! session. Its `subscriptions/listen` is one such request whose answer streams: each
//! event is written as a line until the client sends `notifications/cancelled` for
//! it (MCP 2026-07-28, Basic, Patterns, "Subscriptions", Cancellation), which closes
//! the relay, so the daemon ends the subscription; a cancelled modern request of any
//! kind is closed so, and gets no response (Patterns, "Cancellation").
//!
//! It also holds the session's GET stream open, so what the daemon sends on its
//! own (list changes, resource updates, log messages) reaches the client.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::body::Bytes;
use http_body_util::BodyExt;
use mcpx_api::client::{Answer, Client, ClientError, Method};
use mcpx_api::{ApiError, Caller, ErrorKind};
use mcpx_daemon::mcp::{
    CALLER_SESSION_HEADER, CONFIG_HEADER, CWD_HEADER, MODE_HEADER, PPID_HEADER, PROFILE_HEADER, SESSION_HEADER, era,
};
use mcpx_proto::mcp::error_code;
use mcpx_proto::{Message, MessageKind};
use serde_json::Value;
use tokio::sync::{Mutex, watch};
use tokio::task::AbortHandle;

use crate::serve_io::Out;
use crate::serve_link::{Link, NotOffered};

/// What `serve` knows of its session with the daemon.
struct Bridge {
    client: Client,
    path: String,
    /// Headers naming the caller: working directory, config, pool session, client pid.
    caller: Vec<(&'static str, String)>,
    /// The client's `initialize`, replayed after the daemon restarts.
    initialize: Mutex<Option<Vec<u8>>>,
    /// The daemon-side MCP session.
    session: Mutex<Option<String>>,
    /// The session last opened, for the GET stream to follow.
    opened: watch::Sender<Option<String>>,
    /// stdout, written a whole line at a time.
    out: Arc<Out>,
    /// The 2026-07-28 requests being relayed, by their id's JSON text: what
    /// `notifications/cancelled` closes. Each entry carries its relay's number, so a
    /// relay that ends removes its own entry and not a later one with the same id.
    modern: std::sync::Mutex<HashMap<String, (u64, AbortHandle)>>,
    relays: AtomicU64,
}

/// `mcpx serve`'s arguments (the global `--profile` narrows each of its modes).
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Pass this one server through under its own names.
    #[arg(long, conflicts_with = "discover")]
    pub server: Option<String>,
    /// Offer only two tools: `mcpx_types` (find tools, get their TypeScript declarations) and `mcpx_exec` (run code that calls them, in a sandbox).
    #[arg(long, conflicts_with = "discover")]
    pub code: bool,
    /// Offer only four tools (list servers, search, describe, call), so the client pays no context for schemas it has not asked for.
    #[arg(long)]
    pub discover: bool,
    /// With --code: run scripts without the kernel's confinement, with Deno's permission flags alone (says what stays open).
    #[arg(long, requires = "code")]
    pub unconfined: bool,
}

/// Runs until stdin ends and the requests sent over the link are answered. `server`:
/// pass one server through instead of the aggregate. `caller` gives the config file and
/// the profile.
pub async fn run(client: Client, server: Option<String>, discover: bool, caller: &Caller) -> Result<i32, ApiError> {
    let (config, profile) = (caller.config.clone(), caller.profile.clone());
    let mut caller = vec![
        (CALLER_SESSION_HEADER, format!("serve-{}-{}", std::process::id(), mcpx_daemon::schema::now())),
        (PPID_HEADER, nix::unistd::getppid().as_raw().to_string()),
    ];
    if let Ok(cwd) = std::env::current_dir() {
        caller.push((CWD_HEADER, cwd.display().to_string()));
    }
    if let Some(c) = config {
        caller.push((CONFIG_HEADER, c.display().to_string()));
    }
    if discover {
        caller.push((MODE_HEADER, "discover".to_owned()));
    }
    if let Some(profile) = &profile {
        caller.push((PROFILE_HEADER, profile.clone()));
    }
    let out = Arc::new(Out::start().map_err(|e| {
        ApiError::new(
            ErrorKind::Daemon,
            format!("cannot start the thread that writes stdout ({e}); free some memory and try again"),
        )
    })?);
    let path = server.map_or_else(|| "/mcp".to_owned(), |s| format!("/mcp/{s}"));
    let link = Arc::new(Link::new(client.clone(), &path, caller.clone(), out.clone()));
    let bridge = Arc::new(Bridge {
        client,
        path,
        caller,
        initialize: Mutex::new(None),
        session: Mutex::new(None),
        opened: watch::Sender::new(None),
        out,
        modern: std::sync::Mutex::new(HashMap::new()),
        relays: AtomicU64::new(0),
    });
    // The link first; HTTP when the daemon does not offer it.
    let reader = Arc::new(Reader { link, bridge: bridge.clone(), linked: AtomicBool::new(true) });
    let lines = reader.clone();
    crate::serve_io::each_line(move |line| {
        let reader = lines.clone();
        async move { reader.line(line).await }
    })
    .await;
    if reader.linked.load(Ordering::Relaxed) {
        // stdin ended: the requests it sent are answered before leaving.
        reader.link.settle().await;
    }
    if let Some(id) = bridge.session.lock().await.take() {
        let _ = bridge.client.request(Method::DELETE, &bridge.path, &[(SESSION_HEADER, &id)], Vec::new()).await;
    }
    // What came is written before leaving.
    bridge.out.flush().await;
    Ok(0)
}

/// What the stdin thread holds: the link, and the HTTP relay it falls back to.
struct Reader {
    link: Arc<Link>,
    bridge: Arc<Bridge>,
    /// Still on the link: the daemon offered it.
    linked: AtomicBool,
}

impl Reader {
    /// Sends one line from the client (with its `\n`, or without).
    async fn line(&self, mut line: Bytes) {
        let bridge = &self.bridge;
        if self.linked.load(Ordering::Relaxed) {
            match self.link.send(line).await {
                Ok(()) => return,
                Err(NotOffered(back)) => {
                    tracing::debug!("the daemon does not offer serve's link: relaying over HTTP");
                    self.linked.store(false, Ordering::Relaxed);
                    *bridge.initialize.lock().await = self.link.initialize().map(Vec::from);
                    tokio::spawn(bridge.clone().listen());
                    line = back;
                }
            }
        }
        let line = String::from_utf8_lossy(line.trim_ascii()).into_owned();
        let is_initialize = Message::parse(line.as_str()).is_ok_and(|m| m.method() == Some("initialize"));
        if is_initialize {
            // In order: everything after it needs the session.
            *bridge.initialize.lock().await = Some(line.clone().into_bytes());
            bridge.relay(line.into_bytes(), true).await;
            return;
        }
        let body: Value = serde_json::from_str(&line).unwrap_or_default();
        if cancelled_request(&body).is_some_and(|id| bridge.close_modern(&id)) {
            return;
        }
        bridge.spawn_relay(line.into_bytes(), modern_request_id(&body));
    }
}

impl Bridge {
    /// Relays one message (not `initialize`) on a task of its own; a 2026-07-28
    /// request (`modern_id`, its id's JSON text) is kept where
    /// [`Bridge::close_modern`] finds it until its relay ends.
    fn spawn_relay(self: &Arc<Self>, body: Vec<u8>, modern_id: Option<String>) {
        let number = self.relays.fetch_add(1, Ordering::Relaxed);
        let b = self.clone();
        // Held across the spawn, so the relay cannot end (and remove its entry) before
        // the entry is made.
        let mut modern = self.modern.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let id = modern_id.clone();
        let task = tokio::spawn(async move {
            b.relay(body, false).await;
            if let Some(id) = id {
                let mut modern = b.modern.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if modern.get(&id).is_some_and(|(n, _)| *n == number) {
                    modern.remove(&id);
                }
            }
        });
        if let Some(id) = modern_id {
            modern.insert(id, (number, task.abort_handle()));
        }
    }

    /// Closes the relay of the 2026-07-28 request whose id's JSON text is `id`, which
    /// ends it at the daemon (a `subscriptions/listen` is unsubscribed) and leaves it
    /// unanswered; false when no such request is being relayed.
    fn close_modern(&self, id: &str) -> bool {
        let relay = self.modern.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(id);
        relay.map(|(_, task)| task.abort()).is_some()
    }

    /// Sends one client message and writes what comes back. A request that cannot be
    /// answered gets a JSON-RPC error.
    async fn relay(&self, body: Vec<u8>, initialize: bool) {
        let request_id = Message::parse_line(&body)
            .ok()
            .and_then(|m| m.into_iter().find(|m| m.kind() == MessageKind::Request))
            .and_then(|m| m.id().map(str::to_owned));
        let routing = serde_json::from_slice(&body).map(|v| era::routing_headers(&v)).unwrap_or_default();
        let mut outcome = self.send(&body, initialize, &routing).await;
        if matches!(outcome, Err(Failure::SessionGone)) && !routing.is_empty() {
            // A 2026-07-28 request has no session: the daemon came back, send it again.
            outcome = self.send(&body, false, &routing).await;
        } else if matches!(outcome, Err(Failure::SessionGone)) && !initialize {
            // The daemon restarted (or forgot the session): initialize again, retry once.
            outcome = match self.reinitialize().await {
                Ok(()) => self.send(&body, false, &routing).await,
                Err(e) => Err(e),
            };
        }
        let error = match outcome {
            Ok(()) => return,
            Err(Failure::SessionGone) => "the daemon lost this session and initializing again failed".to_owned(),
            Err(Failure::Refused(message)) => message,
            Err(Failure::Daemon(e)) => {
                // Forget the session: the next message reconnects.
                *self.session.lock().await = None;
                format!("the mcpx daemon went away during the request ({e}); the next request reconnects")
            }
        };
        if let Some(id) = request_id {
            self.write(Message::error_response(&id, error_code::INTERNAL_ERROR, &format!("mcpx: {error}")).as_str())
                .await;
        }
    }

    /// Posts `body` with the caller's headers and `routing` (a 2026-07-28 request's
    /// routing headers, [`era::routing_headers`]; such a request goes without a
    /// session, the others with the session, initializing again when there is none).
    async fn send(&self, body: &[u8], initialize: bool, routing: &[(&str, String)]) -> Result<(), Failure> {
        let modern = !routing.is_empty();
        let session = self.session.lock().await.clone();
        if session.is_none() && !initialize && !modern {
            self.reinitialize().await?;
        }
        let session = if modern { None } else { self.session.lock().await.clone() };
        let mut headers: Vec<(&str, &str)> = vec![("accept", "application/json, text/event-stream")];
        headers.extend(self.caller.iter().map(|(k, v)| (*k, v.as_str())));
        headers.extend(routing.iter().map(|(k, v)| (*k, v.as_str())));
        if let Some(s) = &session {
            headers.push((SESSION_HEADER, s));
        }
        let response = match self.client.request(Method::POST, &self.path, &headers, body.to_vec()).await {
            Ok(r) => r,
            Err(ClientError::NotRunning(_)) => {
                self.client.ensure_daemon().await.map_err(|e| Failure::Daemon(e.message))?;
                return Err(Failure::SessionGone);
            }
            Err(e) => return Err(e.into()),
        };
        let status = response.status().as_u16();
        if status == 404 && !initialize {
            return Err(Failure::SessionGone);
        }
        if initialize {
            if let Some(id) = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
                *self.session.lock().await = Some(id.to_owned());
                self.opened.send_replace(Some(id.to_owned()));
            }
        }
        let (sse, pending) = self.relay_body(response).await?;
        if !sse && !pending.is_empty() && status != 202 {
            self.write(String::from_utf8_lossy(&pending).trim()).await;
        }
        Ok(())
    }

    /// Opens a new daemon-side session with the client's own `initialize`.
    async fn reinitialize(&self) -> Result<(), Failure> {
        let Some(init) = self.initialize.lock().await.clone() else {
            return Err(Failure::Daemon("the client has not initialized".into()));
        };
        self.client.ensure_daemon().await.map_err(|e| Failure::Daemon(e.message))?;
        let mut headers: Vec<(&str, &str)> = vec![("accept", "application/json, text/event-stream")];
        headers.extend(self.caller.iter().map(|(k, v)| (*k, v.as_str())));
        let response = self.client.request(Method::POST, &self.path, &headers, init).await.map_err(Failure::from)?;
        let id = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let _ = response.into_body().collect().await;
        *self.session.lock().await = id.clone();
        self.opened.send_replace(id);
        tracing::debug!("re-initialized with the daemon");
        Ok(())
    }

    /// Writes each message of an SSE answer's events as it comes; returns whether it
    /// was SSE, and the body when it was not.
    async fn relay_body(&self, response: Answer) -> Result<(bool, Vec<u8>), Failure> {
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let mut body = response.into_body();
        let mut pending = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| Failure::Daemon(e.to_string()))?;
            let Ok(data) = frame.into_data() else { continue };
            pending.extend_from_slice(&data);
            if sse {
                // Events end with a blank line; each `data:` line is one message.
                while let Some(end) = find(&pending, b"\n\n") {
                    let event: Vec<u8> = pending.drain(..end + 2).collect();
                    for line in String::from_utf8_lossy(&event).lines() {
                        if let Some(data) = line.strip_prefix("data:") {
                            self.write(data.trim_start()).await;
                        }
                    }
                }
            }
        }
        Ok((sse, pending))
    }

    /// Holds the GET stream of each session the bridge opens (Transports, "Listening
    /// for Messages from the Server") and writes what comes on it, until the session
    /// changes or the daemon goes; ends with `serve`.
    async fn listen(self: Arc<Self>) {
        let mut opened = self.opened.subscribe();
        loop {
            let session = opened.borrow_and_update().clone();
            if let Some(session) = session {
                let mut headers: Vec<(&str, &str)> = vec![("accept", "text/event-stream")];
                headers.extend(self.caller.iter().map(|(k, v)| (*k, v.as_str())));
                headers.push((SESSION_HEADER, &session));
                match self.client.request(Method::GET, &self.path, &headers, Vec::new()).await {
                    Ok(response) if response.status().is_success() => {
                        let _ = self.relay_body(response).await;
                    }
                    Ok(response) => tracing::debug!(status = %response.status(), "the daemon refused the GET stream"),
                    Err(e) => tracing::debug!(error = %e, "could not open the GET stream"),
                }
            }
            if opened.changed().await.is_err() {
                return;
            }
        }
    }

    async fn write(&self, message: &str) {
        self.out.line(message.as_bytes().to_vec()).await;
    }
}

/// The id (JSON text) of the request a `notifications/cancelled` names.
fn cancelled_request(body: &Value) -> Option<String> {
    (body["method"] == "notifications/cancelled" && body.get("id").is_none())
        .then(|| body["params"].get("requestId").map(Value::to_string))
        .flatten()
}

/// The id (JSON text) of a 2026-07-28 request: one that routes by its `_meta`.
fn modern_request_id(body: &Value) -> Option<String> {
    let id = body.get("id").filter(|_| body.get("method").is_some())?;
    (!era::routing_headers(body).is_empty()).then(|| id.to_string())
}

enum Failure {
    /// The daemon does not know the session (it restarted): initialize again.
    SessionGone,
    /// The daemon could not be reached or died during the request.
    Daemon(String),
    /// The socket is not the user's daemon: nothing was sent (the message says so).
    Refused(String),
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        match e {
            ClientError::Foreign(message) => Failure::Refused(message),
            e => Failure::Daemon(e.to_string()),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
