//! `mcpx serve`'s link to the MCP endpoint: one control-socket connection upgraded
//! (HTTP/1.1 `Upgrade`, RFC 9110 section 7.8, answered `101 Switching Protocols`) to
//! newline-delimited JSON-RPC messages both ways, the framing of MCP's stdio transport
//! (MCP 2025-11-25, Transports, "stdio"). Each message is served by the very code that
//! serves a `POST /mcp` (`routes::handle_post`), in process: the link only stands in for the
//! HTTP around it, so both paths give the same answers.
//!
//! What the link does in place of HTTP: it keeps the session id that `initialize`
//! opened and names it on the client's later messages; it gives a 2026-07-28 request
//! the routing headers its body implies (and no session), and closes such a request
//! when the client sends `notifications/cancelled` for it (Basic, Patterns,
//! "Cancellation"); it holds the session's GET stream and writes what comes on it;
//! and it writes the events of an SSE answer as lines. The client's messages run
//! concurrently, except `initialize`, client notifications and responses, which run
//! in the order they came.
//!
//! Ending: when the client closes the connection, its requests still running are
//! dropped (as a closed HTTP connection drops them) and its session ends. When the
//! daemon is asked to stop or upgrade, the link reads no more, lets what it read
//! finish, then writes [`CLOSING`] and closes: every request the client sent and got
//! no answer for was never read, so it may go to the next daemon.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::header::{ACCEPT, CONNECTION, CONTENT_TYPE, UPGRADE};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use mcpx_proto::{Message, MessageKind};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::Mutex;
use tokio::task::{AbortHandle, JoinSet};

use crate::mcp::era;
use crate::mcp::routes::{Endpoint, SESSION_HEADER, VIA_HEADER, handle_post};
use crate::sync::lock;

/// The protocol name of the upgrade (`Upgrade: mcpx-mcp/1`): newline-delimited
/// JSON-RPC messages, one per line, each ending with `\n`, both ways.
pub const PROTOCOL: &str = "mcpx-mcp/1";

/// Where the upgrade is offered: this, followed by the `/mcp` path the stream stands
/// for (`/v1/stream/mcp` for the aggregate, `/v1/stream/mcp/<server>` for one
/// server). Only on the control socket, never on the TCP listener.
pub const PATH_PREFIX: &str = "/v1/stream";

/// The last line the daemon writes on a link it closes to stop or upgrade: every
/// request it read has been answered, and none after them was read. It is mcpx's own
/// and never reaches the MCP client.
pub const CLOSING: &str = r#"{"jsonrpc":"2.0","method":"notifications/mcpx/closing"}"#;

/// The longest line the link reads, in bytes (1 GiB, as the control API's largest
/// request body): past it the link is closed.
pub const MAX_LINE: usize = 1 << 30;

/// The upgrade routes, for the control socket's router only.
pub fn routes() -> Router<Arc<Endpoint>> {
    Router::new()
        .route(
            "/v1/stream/mcp",
            get(|State(e): State<Arc<Endpoint>>, req: Request| async move { upgrade(e, None, req) }),
        )
        .route(
            "/v1/stream/mcp/{server}",
            get(|State(e): State<Arc<Endpoint>>, Path(server): Path<String>, req: Request| async move {
                upgrade(e, Some(server), req)
            }),
        )
}

/// Answers the upgrade request with 101 and serves the link on a task of its own; a
/// request without `Upgrade: mcpx-mcp/1` gets 426 naming it. The request's headers
/// name the caller as on a `POST /mcp` (`x-mcpx-cwd` and the others).
fn upgrade(e: Arc<Endpoint>, server: Option<String>, mut req: Request) -> Response {
    #[cfg(feature = "test-hooks")]
    if std::env::var_os("MCPX_TEST_NO_STREAM").is_some() {
        // As a daemon from before the link answers.
        return StatusCode::NOT_FOUND.into_response();
    }
    let asked =
        req.headers().get(UPGRADE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.eq_ignore_ascii_case(PROTOCOL));
    if !asked {
        let message = format!("this path is an upgrade: send `Connection: upgrade` and `Upgrade: {PROTOCOL}`");
        return (StatusCode::UPGRADE_REQUIRED, [(UPGRADE, PROTOCOL)], message).into_response();
    }
    let on_upgrade = hyper::upgrade::on(&mut req);
    let mut headers = req.headers().clone();
    for hop in [UPGRADE, CONNECTION, HeaderName::from_static("host")] {
        headers.remove(hop);
    }
    headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    let guard = e.links.enter();
    tracing::info!(server = server.as_deref().unwrap_or("(all)"), "mcpx serve linked over an upgraded connection");
    tokio::spawn(async move {
        let _open = guard;
        match on_upgrade.await {
            Ok(io) => run(e, server, headers, TokioIo::new(io)).await,
            Err(err) => tracing::debug!(error = %err, "an MCP stream upgrade did not complete"),
        }
    });
    (StatusCode::SWITCHING_PROTOCOLS, [(CONNECTION, "upgrade"), (UPGRADE, PROTOCOL)]).into_response()
}

type Writer = Mutex<BufWriter<Box<dyn AsyncWrite + Send + Unpin>>>;

/// One upgraded connection: what stands in for the HTTP around [`handle_post`].
struct Link {
    e: Arc<Endpoint>,
    server: Option<String>,
    /// The upgrade request's headers: the caller's, and `Accept` for JSON or SSE.
    headers: HeaderMap,
    /// The session `initialize` opened on this link.
    session: std::sync::Mutex<Option<HeaderValue>>,
    /// The one writer of the connection; a whole line is written under the lock.
    out: Writer,
    /// The 2026-07-28 requests running, by their id's JSON text, for
    /// `notifications/cancelled`; each with its task's number, so a task that ends
    /// removes its own entry and not a later one with the same id.
    modern: std::sync::Mutex<HashMap<String, (u64, AbortHandle)>>,
    numbers: AtomicU64,
}

/// Serves a link on `io` until the client closes it or the daemon is asked to exit.
async fn run<T: AsyncRead + AsyncWrite + Send + 'static>(
    e: Arc<Endpoint>,
    server: Option<String>,
    headers: HeaderMap,
    io: T,
) {
    let (read, write) = tokio::io::split(io);
    let out: Box<dyn AsyncWrite + Send + Unpin> = Box::new(write);
    let link = Arc::new(Link {
        e,
        server,
        headers,
        session: std::sync::Mutex::new(None),
        out: Mutex::new(BufWriter::with_capacity(64 * 1024, out)),
        modern: std::sync::Mutex::new(HashMap::new()),
        numbers: AtomicU64::new(0),
    });
    link.serve(read).await;
}

impl Link {
    /// Reads the client's lines until it closes the link or the daemon is asked to exit.
    async fn serve<R: AsyncRead + Send + Unpin + 'static>(self: &Arc<Self>, read: R) {
        let link = self;
        let mut reader = BufReader::with_capacity(64 * 1024, read);
        let mut tasks = JoinSet::new();
        let mut line = Vec::new();
        let daemon = link.e.daemon.clone();
        let exit = daemon.exit_requested();
        tokio::pin!(exit);
        let closing = loop {
            let room = (MAX_LINE as u64).saturating_sub(line.len() as u64);
            let mut limited = (&mut reader).take(room);
            let read = tokio::select! {
                // Cancel-safe: what was read stays in `line`, but the loop ends here anyway.
                read = limited.read_until(b'\n', &mut line) => read,
                () = &mut exit => break true,
            };
            match read {
                Ok(0) | Err(_) => break false,
                Ok(_) if !line.ends_with(b"\n") && line.len() >= MAX_LINE => {
                    tracing::warn!("an MCP stream sent a message over {MAX_LINE} bytes: closed");
                    break false;
                }
                // The client died in the middle of a line: the part is not a message.
                Ok(_) if !line.ends_with(b"\n") => break false,
                Ok(_) => {}
            }
            let body = Bytes::from(std::mem::take(&mut line));
            if !body.iter().all(u8::is_ascii_whitespace) {
                link.accept(body, &mut tasks).await;
            }
            while tasks.try_join_next().is_some() {}
        };
        if closing {
            // Bounded by the daemon's drain, which waits for every link.
            while tasks.join_next().await.is_some() {}
            link.write(CLOSING.as_bytes()).await;
            let _ = link.out.lock().await.shutdown().await;
        } else {
            // The client went away: what it asked is dropped, as with a closed connection.
            tasks.abort_all();
        }
        let session = lock(&link.session).take();
        if let Some(id) = session.as_ref().and_then(|v| v.to_str().ok()) {
            link.e.sessions.remove(id);
        }
    }

    /// Serves one line from the client.
    async fn accept(self: &Arc<Self>, body: Bytes, tasks: &mut JoinSet<()>) {
        let first = Message::parse_line(&body).ok().and_then(|m| m.into_iter().next());
        let (kind, method) = first.as_ref().map_or((None, None), |m| (Some(m.kind()), m.method()));
        // 2026-07-28: a request that names its revision in `_meta` (Basic, "Versioning").
        let routing = match kind {
            Some(MessageKind::Request) if memchr::memmem::find(&body, b"_meta").is_some() => {
                serde_json::from_slice::<Value>(&body).map(|v| era::routing_headers(&v)).unwrap_or_default()
            }
            _ => Vec::new(),
        };
        if method == Some("notifications/cancelled") && self.close_modern(&body) {
            return;
        }
        let headers = self.headers(&routing);
        if method == Some("initialize") && kind == Some(MessageKind::Request) {
            let response = handle_post(self.e.clone(), self.server.clone(), None, headers, body).await;
            let opened = response.headers().get(SESSION_HEADER).cloned();
            self.respond(response).await;
            if let Some(id) = opened {
                self.opened(id, tasks);
            }
            return;
        }
        if let Some(MessageKind::Notification | MessageKind::Response) = kind {
            // In order, and quick; nothing answers them (JSON-RPC 2.0, section 4.1), so a
            // refusal is only logged.
            let response = handle_post(self.e.clone(), self.server.clone(), None, headers, body).await;
            if !response.status().is_success() {
                tracing::debug!(status = %response.status(), "refused a notification or response on an MCP stream");
            }
            return;
        }
        let modern_id = (!routing.is_empty()).then(|| first.as_ref().and_then(|m| m.id()).map(str::to_owned)).flatten();
        let number = self.numbers.fetch_add(1, Ordering::Relaxed);
        let link = self.clone();
        let id = modern_id.clone();
        // Held across the spawn, so the task cannot end (and remove its entry) before
        // the entry is made.
        let mut modern = lock(&self.modern);
        let task = tasks.spawn(async move {
            let response = handle_post(link.e.clone(), link.server.clone(), None, headers, body).await;
            link.respond(response).await;
            if let Some(id) = id {
                let mut modern = lock(&link.modern);
                if modern.get(&id).is_some_and(|(n, _)| *n == number) {
                    modern.remove(&id);
                }
            }
        });
        if let Some(id) = modern_id {
            modern.insert(id, (number, task));
        }
    }

    /// The headers of one message: the link's, with the session for a legacy message
    /// or the routing headers (and no session) for a 2026-07-28 request.
    fn headers(&self, routing: &[(&'static str, String)]) -> HeaderMap {
        let mut headers = self.headers.clone();
        headers.insert(VIA_HEADER, HeaderValue::from_static("serve"));
        if routing.is_empty() {
            if let Some(id) = lock(&self.session).clone() {
                headers.insert(SESSION_HEADER, id);
            }
        }
        for (name, value) in routing {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(*name, value);
            }
        }
        headers
    }

    /// Closes the 2026-07-28 request a `notifications/cancelled` names, when one runs:
    /// it ends at the daemon as a closed HTTP request does, and gets no response.
    fn close_modern(&self, body: &[u8]) -> bool {
        let Ok(v) = serde_json::from_slice::<Value>(body) else { return false };
        let Some(id) = v["params"].get("requestId").map(Value::to_string) else { return false };
        let task = lock(&self.modern).remove(&id);
        task.map(|(_, task)| task.abort()).is_some()
    }

    /// `initialize` opened session `id`: named on the client's later messages, and its
    /// GET stream written on the link until the session or the daemon ends.
    fn opened(self: &Arc<Self>, id: HeaderValue, tasks: &mut JoinSet<()>) {
        *lock(&self.session) = Some(id.clone());
        let Some(session) = id.to_str().ok().and_then(|id| self.e.sessions.get(id)) else { return };
        let Some(mut rx) = session.open_stream() else { return };
        drop(session);
        let link = self.clone();
        tasks.spawn(async move {
            let daemon = link.e.daemon.clone();
            let exit = daemon.exit_requested();
            tokio::pin!(exit);
            let mut events = Events::default();
            loop {
                tokio::select! {
                    event = rx.recv() => match event {
                        Some(event) => link.write_events(&mut events, &event).await,
                        None => return,
                    },
                    () = &mut exit => return,
                }
            }
        });
    }

    /// Writes an answer of [`handle_post`]: nothing for 202, each event's message of an
    /// SSE answer as it comes, else the JSON body.
    async fn respond(&self, response: Response) {
        if response.status() == StatusCode::ACCEPTED {
            return;
        }
        let sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let mut body: Body = response.into_body();
        if !sse {
            if let Ok(collected) = body.collect().await {
                self.write(collected.to_bytes().trim_ascii()).await;
            }
            return;
        }
        let mut events = Events::default();
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                self.write_events(&mut events, &data).await;
            }
        }
    }

    async fn write_events(&self, events: &mut Events, data: &[u8]) {
        events.pending.extend_from_slice(data);
        while let Some(message) = events.next() {
            self.write(&message).await;
        }
    }

    /// Writes `message` as one line. JSON allows a raw line break only between tokens,
    /// so one inside a message (a remote server's pretty-printed answer) becomes a
    /// space, and the message stays one line with the same meaning.
    async fn write(&self, message: &[u8]) {
        if message.is_empty() {
            return;
        }
        let mut out = self.out.lock().await;
        let written = if memchr::memchr2(b'\n', b'\r', message).is_some() {
            let flat: Vec<u8> = message.iter().map(|b| if matches!(b, b'\n' | b'\r') { b' ' } else { *b }).collect();
            out.write_all(&flat).await
        } else {
            out.write_all(message).await
        };
        if written.is_ok() && out.write_all(b"\n").await.is_ok() {
            let _ = out.flush().await;
        }
    }
}

/// The messages of an SSE answer (HTML, "Server-sent events"), as its events come:
/// each `data:` line of an event is one message.
#[derive(Default)]
struct Events {
    pending: Vec<u8>,
    ready: std::collections::VecDeque<Vec<u8>>,
}

impl Events {
    fn next(&mut self) -> Option<Vec<u8>> {
        while self.ready.is_empty() {
            let end = memchr::memmem::find(&self.pending, b"\n\n")?;
            let event: Vec<u8> = self.pending.drain(..end + 2).collect();
            for line in event.split(|b| *b == b'\n') {
                if let Some(data) = line.strip_prefix(b"data:") {
                    self.ready.push_back(data.trim_ascii_start().to_vec());
                }
            }
        }
        self.ready.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_into_their_data_lines_across_chunks() {
        let mut events = Events::default();
        events.pending.extend_from_slice(b"event: message\ndata: {\"a\":1}\n\nevent: mes");
        assert_eq!(events.next().as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(events.next(), None);
        events.pending.extend_from_slice(b"sage\ndata: {\"b\":2}\n\n");
        assert_eq!(events.next().as_deref(), Some(&b"{\"b\":2}"[..]));
    }
}
