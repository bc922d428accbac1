//! `mcpx serve`'s link to the daemon: one control-socket connection upgraded to
//! newline-delimited JSON-RPC messages both ways (`Upgrade: mcpx-mcp/1`, served by the
//! daemon's `mcp::framed`), so a message costs one line each way instead of one HTTP
//! request. The client's lines go to the daemon as they are, and the daemon's lines to
//! the client as they are.
//!
//! What `serve` keeps here is what lets the link break safely: the client's
//! `initialize`, replayed (its answer swallowed) on a new link after the daemon
//! restarts, and the requests written and not yet answered. When the link breaks,
//! each of those gets a JSON-RPC error (it may have run), but one whose write failed
//! (it never went out) is sent again on a new link; when the daemon closes it to
//! stop or upgrade (`notifications/mcpx/closing`, after answering all it read), they
//! were never read and are sent again on the next link. A `subscriptions/listen` whose
//! stream ended with the daemon is not sent again, as over HTTP.
//!
//! A daemon that does not offer the upgrade (one from before it) is reported as
//! [`NotOffered`], and `serve` relays over HTTP instead.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Bytes;
use mcpx_api::client::{Client, ClientError, Upgraded};
use mcpx_daemon::mcp::framed::{CLOSING, PATH_PREFIX, PROTOCOL};
use mcpx_platform::sync::lock;
use mcpx_proto::mcp::error_code;
use mcpx_proto::{Message, MessageKind};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, ReadHalf, WriteHalf};

use crate::serve_io::Out;

/// The daemon answered the upgrade with something other than 101: it predates the
/// link. The message that could not be sent is handed back.
pub struct NotOffered(pub Bytes);

/// The link, reconnected as needed.
pub struct Link {
    client: Client,
    /// `/v1/stream/mcp` or `/v1/stream/mcp/<server>`.
    path: String,
    /// Headers naming the caller: working directory, config, pool session, client pid.
    caller: Vec<(&'static str, String)>,
    /// stdout, written a whole line at a time.
    out: Arc<Out>,
    /// The client's `initialize`, replayed on a new link.
    initialize: std::sync::Mutex<Option<Bytes>>,
    /// The connection in use; `None` before the first message and after one broke.
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    /// Numbers the requests written, so those sent again keep their order.
    sent: AtomicU64,
    /// Told when a request is answered or forgotten and when a connection has ended,
    /// for [`Link::settle`].
    answered: tokio::sync::Notify,
}

/// One upgraded connection.
struct Conn {
    writer: tokio::sync::Mutex<WriteHalf<Upgraded>>,
    /// What was written and not answered; `None` once the connection has ended.
    pending: std::sync::Mutex<Option<HashMap<String, Pending>>>,
    /// Requests whose write had not finished when the connection broke, handed back
    /// to their writers: only a writer knows whether its line went out (then it may
    /// have run, and gets an error) or not (then it is sent again). Filled under the
    /// `pending` lock, as that map is taken.
    unsent: std::sync::Mutex<HashMap<String, Pending>>,
    /// The id of a replayed `initialize`, whose answer the client must not see.
    swallow: std::sync::Mutex<Option<String>>,
}

/// A request written on a connection and not yet answered.
struct Pending {
    number: u64,
    line: Bytes,
    /// A `subscriptions/listen`: its stream ends with the daemon, unanswered.
    listen: bool,
    /// Its line was written whole on the connection.
    written: bool,
    /// Its line was a JSON-RPC batch: answered as a whole, by an array, or refused
    /// with one error whose `id` is `null`.
    batch: bool,
}

/// The error of a request the daemon may have read before it went away.
const WENT_AWAY: &str = "the mcpx daemon went away during the request; the next request reconnects";

/// Why no connection could be had.
enum Unavailable {
    NotOffered,
    /// The message for the client's request.
    Failed(String),
}

impl Link {
    /// A link for `/mcp` path `mcp_path` (`/mcp` or `/mcp/<server>`), connected at the
    /// first message.
    pub fn new(client: Client, mcp_path: &str, caller: Vec<(&'static str, String)>, out: Arc<Out>) -> Link {
        Link {
            client,
            path: format!("{PATH_PREFIX}{mcp_path}"),
            caller,
            out,
            initialize: std::sync::Mutex::new(None),
            conn: tokio::sync::Mutex::new(None),
            sent: AtomicU64::new(0),
            answered: tokio::sync::Notify::new(),
        }
    }

    /// The client's `initialize`, if it sent one.
    pub fn initialize(&self) -> Option<Bytes> {
        lock(&self.initialize).clone()
    }

    /// Sends one line from the client; a request that cannot be sent gets a JSON-RPC
    /// error.
    ///
    /// Errors: [`NotOffered`] when the daemon does not offer the link.
    pub async fn send(self: &Arc<Self>, line: Bytes) -> Result<(), NotOffered> {
        let first = Message::parse_line(&line).ok().and_then(|m| m.into_iter().next());
        let (kind, method) = first.as_ref().map_or((None, None), |m| (Some(m.kind()), m.method()));
        let request = first.as_ref().filter(|_| kind == Some(MessageKind::Request)).and_then(Message::id);
        let initialize = method == Some("initialize") && request.is_some();
        if initialize {
            *lock(&self.initialize) = Some(line.clone());
        }
        if method == Some("notifications/cancelled") {
            // A cancelled request may get no answer (Utilities, "Cancellation").
            self.forget_cancelled(&line).await;
        }
        let listen = method == Some("subscriptions/listen");
        let number = self.sent.fetch_add(1, Ordering::Relaxed);
        let batch = line.trim_ascii_start().starts_with(b"[");
        let pending =
            request.map(|id| (id.to_owned(), Pending { number, line: line.clone(), listen, written: false, batch }));
        match self.write(&line, pending, !initialize).await {
            Ok(()) => Ok(()),
            Err(Unavailable::NotOffered) => Err(NotOffered(line)),
            Err(Unavailable::Failed(message)) => {
                if let Some(id) = request {
                    self.error(id, &message).await;
                }
                Ok(())
            }
        }
    }

    /// Writes `line` (remembered as `pending` until answered) on the connection,
    /// connecting first when there is none. A line the connection refuses was never
    /// read, so it is tried once more on a new one, even when the connection's end was
    /// seen meanwhile; one written whole before the connection broke may have run, and
    /// fails. `replay`: a new connection first initializes with the client's
    /// `initialize`.
    async fn write(
        self: &Arc<Self>,
        line: &Bytes,
        mut pending: Option<(String, Pending)>,
        replay: bool,
    ) -> Result<(), Unavailable> {
        let id = pending.as_ref().map(|(id, _)| id.clone());
        for _ in 0..2 {
            let conn = self.connect(replay).await?;
            {
                let mut map = lock(&conn.pending);
                // Ended meanwhile: take a new one.
                let Some(map) = map.as_mut() else { continue };
                if let Some((id, p)) = pending.take() {
                    map.insert(id, Pending { written: false, ..p });
                }
            }
            let wrote = conn.write(line).await.is_ok();
            let Some(id) = &id else {
                if wrote {
                    return Ok(());
                }
                self.drop_conn(&conn).await;
                continue;
            };
            // Still pending on a live connection, or handed back by its broken end.
            let mine = {
                let mut map = lock(&conn.pending);
                match map.as_mut() {
                    Some(map) if wrote => {
                        if let Some(p) = map.get_mut(id) {
                            p.written = true;
                        }
                        return Ok(());
                    }
                    Some(map) => map.remove(id),
                    None => lock(&conn.unsent).remove(id),
                }
            };
            self.drop_conn(&conn).await;
            match mine {
                // Written whole before the connection broke: it may have run.
                Some(_) if wrote => return Err(Unavailable::Failed(WENT_AWAY.to_owned())),
                // Never went out: tried again on a new connection.
                Some(p) => pending = Some((id.clone(), p)),
                // The connection's end took it (answered, or sent again after a close).
                None => return Ok(()),
            }
        }
        Err(Unavailable::Failed("the mcpx daemon could not be reached; the next request reconnects".to_owned()))
    }

    /// The connection in use, or a new one (starting a daemon when none listens).
    async fn connect(self: &Arc<Self>, replay: bool) -> Result<Arc<Conn>, Unavailable> {
        let mut current = self.conn.lock().await;
        if let Some(conn) = current.as_ref().filter(|c| lock(&c.pending).is_some()) {
            return Ok(conn.clone());
        }
        let headers: Vec<(&str, &str)> = self.caller.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let io = match self.client.upgrade(&self.path, PROTOCOL, &headers).await {
            Err(ClientError::NotRunning(_)) => {
                self.client.ensure_daemon().await.map_err(|e| Unavailable::Failed(e.message))?;
                self.client.upgrade(&self.path, PROTOCOL, &headers).await
            }
            other => other,
        };
        let io = match io {
            Ok(Some(io)) => io,
            Ok(None) => return Err(Unavailable::NotOffered),
            Err(ClientError::Foreign(message)) => return Err(Unavailable::Failed(message)),
            Err(e) => return Err(Unavailable::Failed(format!("the mcpx daemon could not be reached ({e})"))),
        };
        let (read, write) = tokio::io::split(io);
        let conn = Arc::new(Conn {
            writer: tokio::sync::Mutex::new(write),
            pending: std::sync::Mutex::new(Some(HashMap::new())),
            unsent: std::sync::Mutex::new(HashMap::new()),
            swallow: std::sync::Mutex::new(None),
        });
        tokio::spawn(self.clone().read(conn.clone(), read));
        let init = if replay { self.initialize() } else { None };
        if let Some(init) = init {
            // A new daemon-side session for the client that initialized already.
            *lock(&conn.swallow) = Message::parse_line(&init)
                .ok()
                .and_then(|m| m.into_iter().next())
                .and_then(|m| m.id().map(str::to_owned));
            if conn.write(&init).await.is_err() {
                return Err(Unavailable::Failed("the mcpx daemon closed the link at once".to_owned()));
            }
            tracing::debug!("re-initialized with the daemon");
        }
        *current = Some(conn.clone());
        Ok(conn)
    }

    async fn drop_conn(&self, conn: &Arc<Conn>) {
        let mut current = self.conn.lock().await;
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
            *current = None;
        }
    }

    /// Reads the daemon's lines to the client until the connection ends, then answers
    /// or sends again what it left unanswered.
    /// (Boxed: it sends again through [`Link::write`], which may connect and spawn it.)
    fn read(self: Arc<Self>, conn: Arc<Conn>, read: ReadHalf<Upgraded>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let mut reader = BufReader::with_capacity(64 * 1024, read);
            let mut closing = false;
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    // The daemon died in the middle of a line: the part is not a
                    // message, and the request it answered gets an error below.
                    Ok(_) if !line.ends_with(b"\n") => break,
                    Ok(_) => {}
                }
                let message = line.trim_ascii();
                if message == CLOSING.as_bytes() {
                    closing = true;
                    break;
                }
                if let Some(id) = response_id(message) {
                    if let Some(map) = lock(&conn.pending).as_mut() {
                        map.remove(&id);
                        // A refused batch is answered once, with a `null` id (JSON-RPC
                        // 2.0, section 6); an array answers a whole batch.
                        if id == "null" || message.starts_with(b"[") {
                            map.retain(|_, p| !p.batch);
                        }
                    }
                    self.answered.notify_waiters();
                    let replayed = {
                        let mut swallow = lock(&conn.swallow);
                        let replayed = swallow.as_deref() == Some(id.as_str());
                        if replayed {
                            *swallow = None;
                        }
                        replayed
                    };
                    if replayed {
                        continue;
                    }
                }
                self.out.line(line).await;
            }
            let left = {
                let mut pending = lock(&conn.pending);
                let mut left = pending.take().unwrap_or_default();
                if !closing {
                    // A write still under way is its writer's to settle.
                    let unwritten: Vec<String> =
                        left.iter().filter(|(_, p)| !p.written).map(|(id, _)| id.clone()).collect();
                    let mut unsent = lock(&conn.unsent);
                    for id in unwritten {
                        if let Some(p) = left.remove(&id) {
                            unsent.insert(id, p);
                        }
                    }
                }
                left
            };
            self.drop_conn(&conn).await;
            let mut left: Vec<(String, Pending)> = left.into_iter().collect();
            left.sort_by_key(|(_, p)| p.number);
            for (id, p) in left {
                if !closing {
                    self.error(&id, WENT_AWAY).await;
                } else if !p.listen {
                    // Never read by the daemon that closed: the next one takes it.
                    let line = p.line.clone();
                    let outcome = self.write(&line, Some((id.clone(), p)), true).await;
                    let message = match outcome {
                        Ok(()) => continue,
                        Err(Unavailable::Failed(message)) => message,
                        Err(Unavailable::NotOffered) => {
                            "the mcpx daemon that came back does not offer serve's link; send the request again"
                                .to_owned()
                        }
                    };
                    self.error(&id, &message).await;
                }
            }
            self.answered.notify_waiters();
        })
    }

    /// Waits until every request written on the link has been answered (or got its
    /// error) or the connection has ended: what `serve` does when stdin ends, so a
    /// client that writes its requests and closes stdin still gets their answers. A
    /// `subscriptions/listen` is not waited for: its stream has no end of its own.
    pub async fn settle(&self) {
        loop {
            let answered = self.answered.notified();
            tokio::pin!(answered);
            // Registered before looking, so an answer in between is not missed.
            answered.as_mut().enable();
            let conn = self.conn.lock().await.clone();
            let waiting =
                conn.is_some_and(|c| lock(&c.pending).as_ref().is_some_and(|m| m.values().any(|p| !p.listen)));
            if !waiting {
                return;
            }
            answered.await;
        }
    }

    /// Forgets the request a `notifications/cancelled` names: it may go unanswered.
    async fn forget_cancelled(&self, line: &[u8]) {
        let Ok(v) = serde_json::from_slice::<Value>(line) else { return };
        let Some(id) = v["params"].get("requestId").map(Value::to_string) else { return };
        if let Some(conn) = self.conn.lock().await.as_ref() {
            if let Some(map) = lock(&conn.pending).as_mut() {
                map.remove(&id);
            }
        }
        self.answered.notify_waiters();
    }

    async fn error(&self, id: &str, message: &str) {
        let error = Message::error_response(id, error_code::INTERNAL_ERROR, &format!("mcpx: {message}"));
        self.out.line(error.as_str().as_bytes().to_vec()).await;
    }
}

impl Conn {
    /// Writes one line (a `\n` is added when it has none) and flushes it.
    async fn write(&self, line: &[u8]) -> std::io::Result<()> {
        let mut writer = self.writer.lock().await;
        writer.write_all(line).await?;
        if !line.ends_with(b"\n") {
            writer.write_all(b"\n").await?;
        }
        writer.flush().await
    }
}

/// The id (JSON text) of a response line: `null` for an error that answers no one
/// request (a refused batch, a line that did not parse).
fn response_id(line: &[u8]) -> Option<String> {
    let message = Message::parse_line(line).ok()?.into_iter().next()?;
    (message.kind() == MessageKind::Response).then(|| message.id().unwrap_or("null").to_owned())
}
