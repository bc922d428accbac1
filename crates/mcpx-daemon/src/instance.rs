//! One running server instance: its MCP session over a [`Link`], the map from
//! upstream request ids to waiting callers, and the messages the server sends
//! on its own.
//!
//! Every request to the server gets an [`UpstreamId`] carrying this daemon's epoch;
//! the caller's own id is put back by whoever answers the caller. A response whose
//! id is unknown (late, duplicate, or from an earlier daemon) is dropped and logged.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpx_proto::mcp::{self, error_code};
use mcpx_proto::{Message, MessageKind, UpstreamId, response_result};
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot, watch};

use crate::sync::lock;
use crate::transport::{ExitInfo, Inbound, Link, LinkInfo, Outbound};

/// How many bytes of stderr an error message carries.
pub const ERROR_TAIL_BYTES: usize = 2048;

/// Why a request to an instance did not get a response.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The server process ended before answering.
    #[error("server {exit}{}", tail_suffix(.stderr_tail))]
    Exited {
        /// How it ended.
        exit: ExitInfo,
        /// The end of its stderr.
        stderr_tail: String,
    },
    /// The answer was larger than `maxMessageBytes` and was discarded.
    #[error(
        "the server's reply is larger than maxMessageBytes ({limit} bytes) and was discarded; raise `maxMessageBytes` in the server's `mcpx` block if it is expected"
    )]
    TooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// The request is larger than `maxMessageBytes`; it was not sent.
    #[error(
        "the request is {bytes} bytes, over maxMessageBytes ({limit} bytes); it was not sent (raise `maxMessageBytes` in the server's `mcpx` block if it is expected)"
    )]
    RequestTooLarge {
        /// Its size.
        bytes: usize,
        /// The configured limit.
        limit: usize,
    },
    /// No answer within the deadline; a cancellation was sent to the server.
    #[error(
        "no reply within {}; the request was cancelled (raise `callTimeout` in the server's `mcpx` block or pass --timeout)", human(*.0)
    )]
    Timeout(Duration),
    /// The server did not answer `initialize` within `startTimeout`.
    #[error("the server did not answer initialize within {} (raise `startTimeout` in the server's `mcpx` block)", human(*.0))]
    StartTimeout(Duration),
    /// The server answered, but not the way MCP requires.
    #[error("{0}")]
    Protocol(String),
    /// The server could not be started (command not found, exec failed).
    #[error("{0}")]
    Launch(String),
    /// The link to the server is gone without an exit status (its supervisor died).
    #[error("instance lost: {0}")]
    Lost(String),
    /// Every one of the server's `max` instances stayed busy until the deadline.
    #[error("all {0} instances of the server stayed busy until the deadline (raise `max` or `callTimeout`)")]
    Busy(usize),
    /// The caller cancelled the request; the server was sent `notifications/cancelled`.
    #[error("cancelled")]
    Cancelled,
    /// A remote server could not be reached or refused the exchange (HTTP status,
    /// connection, TLS, timeout).
    #[error("{0}")]
    Remote(crate::transport::http::RemoteError),
}

/// A duration as people write it: `250ms`, `1.5s`, `2m`.
fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms % 60_000 == 0 {
        format!("{}m", ms / 60_000)
    } else {
        format!("{:.1}s", d.as_secs_f64()).replace(".0s", "s")
    }
}

fn tail_suffix(tail: &str) -> String {
    let tail = tail.trim();
    if tail.is_empty() { String::new() } else { format!("; stderr: {}", tail.replace('\n', " | ")) }
}

/// The MCP session negotiated at `initialize` (MCP 2025-11-25, Lifecycle,
/// "Initialization"): kept raw so it can be stored and handed on unchanged.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Session {
    /// The protocol revision the server answered.
    #[serde(rename = "protocolVersion")]
    pub protocol_version: String,
    /// The server's capabilities object.
    pub capabilities: Box<RawValue>,
    /// The server's `serverInfo`.
    #[serde(rename = "serverInfo", default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<Box<RawValue>>,
    /// The server's instructions, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

impl Session {
    /// Whether the server declared capability `name` (`tools`, `resources`, `prompts`).
    pub fn has_capability(&self, name: &str) -> bool {
        serde_json::from_str::<HashMap<String, serde::de::IgnoredAny>>(self.capabilities.get())
            .map(|m| m.contains_key(name))
            .unwrap_or(false)
    }
}

/// What the instance reports to the daemon.
#[derive(Debug, Clone)]
pub enum InstanceEvent {
    /// The server sent `notifications/{tools,resources,prompts}/list_changed`; the method.
    ListChanged(String),
    /// The server process ended (or its link was lost). `crash` holds the error when
    /// nobody asked it to stop.
    Exited {
        /// The cache key of the server.
        cache_key: String,
        /// Why, when it was not asked to stop.
        crash: Option<CallError>,
    },
}

/// The life of an instance (design: instance states).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Started; `initialize` not yet answered.
    Starting,
    /// Serving calls.
    Running,
    /// Being stopped.
    Stopping,
    /// The process ended.
    Exited(ExitInfo),
    /// The link is gone without an exit status (its supervisor died).
    Lost,
}

impl State {
    /// The name used in `mcpx status`.
    pub fn as_str(&self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Running => "running",
            State::Stopping => "stopping",
            State::Exited(_) => "exited",
            State::Lost => "lost",
        }
    }
}

type Reply = oneshot::Sender<Result<Message, CallError>>;

/// Who a request is for, so what the server sends about it reaches that caller
/// (design: "Pools", server-to-client requests).
#[derive(Debug, Default)]
pub struct CallContext {
    /// A label for `status` (`holders`): the caller's session, pid or key.
    pub label: String,
    /// Receives the notifications that belong to this request: progress (with the
    /// caller's own token restored) and, while it is the only request in flight,
    /// the server's log messages.
    pub notify: Option<mpsc::UnboundedSender<Message>>,
    /// The roots the caller offers for `roots/list` (a shell caller: its working
    /// directory); `None` when it has none to offer.
    pub roots: Option<Vec<std::path::PathBuf>>,
    /// An MCP client that answers server requests itself: the methods it declared
    /// (`sampling/createMessage`, `elicitation/create`, `roots/list`) and where its
    /// answers arrive. Requests go to it over `notify`.
    pub client: Option<(Vec<String>, Arc<ClientReplies>)>,
}

/// Where an MCP client's answers to forwarded server requests are matched up, by
/// the id mcpx gave each request on its way to the client.
#[derive(Debug, Default)]
pub struct ClientReplies {
    waiting: Mutex<HashMap<String, oneshot::Sender<Message>>>,
    next: AtomicU64,
}

impl ClientReplies {
    /// Hands a client's response to the server request waiting for it; false when
    /// no request has that id (late or unknown).
    pub fn deliver(&self, response: Message) -> bool {
        let id = response.id().unwrap_or("null").to_owned();
        match lock(&self.waiting).remove(&id) {
            Some(tx) => tx.send(response).is_ok(),
            None => false,
        }
    }

    fn register(&self) -> (String, oneshot::Receiver<Message>) {
        let id = format!("\"mcpx-{}\"", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(id.clone(), tx);
        (id, rx)
    }
}

/// How long an MCP client has to answer a forwarded server request.
pub const CLIENT_ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// A request waiting for its response.
#[derive(Debug)]
struct Pending {
    reply: Reply,
    ctx: Arc<CallContext>,
    /// The caller's own progress token (JSON text), when it asked for progress.
    progress: Option<String>,
}

/// One server process and its MCP session.
#[derive(Debug)]
pub struct Instance {
    /// The server's configured name (first configuration that started it).
    pub server: String,
    /// The server's fingerprint.
    pub fingerprint: String,
    /// The schema cache key (the fingerprint as written).
    pub cache_key: String,
    /// The pool key (`global` for now).
    pub key: String,
    /// Process facts shared with the transport.
    pub info: Arc<LinkInfo>,
    /// When it started.
    pub started: Instant,
    tx: mpsc::Sender<Outbound>,
    epoch: u32,
    next_seq: AtomicU32,
    max_message_bytes: usize,
    /// Waiting callers by the `seq` of their upstream id: the one map from caller
    /// to upstream id that responses, progress, cancellation and server requests use.
    pending: Mutex<HashMap<u32, Pending>>,
    /// Watched, so `terminate` can wait for the exit without polling.
    state: watch::Sender<State>,
    session: Mutex<Option<Session>>,
    in_flight: AtomicU64,
    last_used: Mutex<Instant>,
}

/// The identity and limits an instance is started with.
#[derive(Debug, Clone)]
pub struct InstanceSpec {
    /// Configured name.
    pub server: String,
    /// Fingerprint.
    pub fingerprint: String,
    /// Schema cache key.
    pub cache_key: String,
    /// Pool key.
    pub key: String,
    /// `maxMessageBytes`, for error messages.
    pub max_message_bytes: usize,
}

impl Instance {
    /// Takes over `link`, performs MCP `initialize` (offering the latest revision and
    /// accepting any supported one), sends `notifications/initialized`, and returns the
    /// running instance. `events` receives list changes and the exit.
    ///
    /// Errors: the server exits, answers an error or an unsupported revision, or does
    /// not answer within `start_timeout`; the process is then terminated.
    pub async fn start(
        spec: InstanceSpec,
        link: Link,
        start_timeout: Option<Duration>,
        events: mpsc::UnboundedSender<(String, InstanceEvent)>,
    ) -> Result<Arc<Instance>, CallError> {
        let inst = Instance::new(spec, link, events);
        let initialized = inst.initialize(start_timeout).await.map_err(|e| match e {
            CallError::Timeout(t) => CallError::StartTimeout(t),
            other => other,
        });
        match initialized {
            Ok(session) => {
                inst.running(session).await;
                Ok(inst)
            }
            Err(e) => {
                inst.terminate().await;
                Err(e)
            }
        }
    }

    /// Takes over the link of an adopted instance whose MCP session a previous daemon
    /// stored: no second `initialize` (servers reject one).
    pub fn resume(
        spec: InstanceSpec,
        link: Link,
        session: Session,
        events: mpsc::UnboundedSender<(String, InstanceEvent)>,
    ) -> Arc<Instance> {
        let inst = Instance::new(spec, link, events);
        *lock(&inst.session) = Some(session);
        inst.set_state(State::Running);
        inst
    }

    fn new(spec: InstanceSpec, link: Link, events: mpsc::UnboundedSender<(String, InstanceEvent)>) -> Arc<Instance> {
        let Link { tx, rx, info, epoch, .. } = link;
        let inst = Arc::new(Instance {
            server: spec.server,
            fingerprint: spec.fingerprint,
            cache_key: spec.cache_key,
            key: spec.key,
            info,
            started: Instant::now(),
            tx,
            epoch: epoch.clamp(1, UpstreamId::MAX_EPOCH),
            next_seq: AtomicU32::new(1),
            max_message_bytes: spec.max_message_bytes,
            pending: Mutex::new(HashMap::new()),
            state: watch::Sender::new(State::Starting),
            session: Mutex::new(None),
            in_flight: AtomicU64::new(0),
            last_used: Mutex::new(Instant::now()),
        });
        tokio::spawn(route(Arc::downgrade(&inst), rx, events));
        inst
    }

    /// Marks the instance running with `session`, and hands the session to the link
    /// to keep (a supervisor stores it for the next daemon).
    async fn running(&self, session: Session) {
        if let Ok(json) = serde_json::to_string(&session) {
            let _ = self.tx.send(Outbound::StoreSession(json)).await;
        }
        *lock(&self.session) = Some(session);
        self.set_state(State::Running);
    }

    /// Restarts the server through its supervisor (same supervisor, new process) and
    /// initializes it again. Requests in flight fail.
    ///
    /// Errors: the restart or the new `initialize` failed.
    pub async fn restart(&self, start_timeout: Option<Duration>) -> Result<(), CallError> {
        let mut state = self.state.subscribe();
        self.set_state(State::Stopping);
        if self.tx.send(Outbound::Restart).await.is_err() {
            return Err(CallError::Lost("the link is closed".into()));
        }
        let _ = state.wait_for(|s| !matches!(s, State::Stopping)).await;
        match self.state() {
            State::Starting => {}
            State::Exited(exit) => return Err(self.exited_error(exit)),
            other => return Err(CallError::Lost(format!("the restart ended {}", other.as_str()))),
        }
        let session = self.initialize(start_timeout).await?;
        self.running(session).await;
        Ok(())
    }

    async fn initialize(&self, timeout: Option<Duration>) -> Result<Session, CallError> {
        let params = serde_json::json!({
            "protocolVersion": mcp::LATEST_VERSION,
            // Callers arrive later than servers start, so every client capability is
            // declared; requests no caller can answer get a JSON-RPC error.
            "capabilities": { "roots": { "listChanged": true }, "sampling": {}, "elicitation": {} },
            "clientInfo": { "name": "mcpx", "version": env!("CARGO_PKG_VERSION") },
        });
        let request = Message::request("0", "initialize", Some(&params.to_string()));
        let response = self.request(request, timeout).await?;
        let result = response_result(&response).map_err(|e| CallError::Protocol(format!("initialize failed: {e}")))?;
        let session: Session = serde_json::from_str(result.get())
            .map_err(|e| CallError::Protocol(format!("the server's initialize result is malformed: {e}")))?;
        if !mcp::is_supported(&session.protocol_version) {
            return Err(CallError::Protocol(format!(
                "the server answered protocol version {:?}, which mcpx does not support (supported: {})",
                session.protocol_version,
                mcp::SUPPORTED_VERSIONS.join(", ")
            )));
        }
        self.notify(Message::notification("notifications/initialized", None)).await;
        Ok(session)
    }

    /// The negotiated session, once initialized.
    pub fn session(&self) -> Option<Session> {
        lock(&self.session).clone()
    }

    /// Whether a supervisor owns the server process.
    pub fn supervised(&self) -> bool {
        self.info.supervisor.is_some()
    }

    /// Whether the instance lives on when the daemon exits: supervised, or a remote
    /// session the next daemon takes up.
    pub fn outlives_daemon(&self) -> bool {
        self.info.supervisor.is_some() || self.info.remote.is_some()
    }

    /// Current state.
    pub fn state(&self) -> State {
        *self.state.borrow()
    }

    /// Moves to `state`, unless the process has already exited (which is final).
    fn set_state(&self, state: State) {
        self.state.send_if_modified(|s| {
            let change = !matches!(*s, State::Exited(_) | State::Lost) && *s != state;
            if change {
                *s = state;
            }
            change
        });
    }

    /// Whether it can take calls.
    pub fn is_alive(&self) -> bool {
        matches!(self.state(), State::Starting | State::Running)
    }

    /// Requests in flight right now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Time since the last call ended or started.
    pub fn idle_for(&self) -> Duration {
        lock(&self.last_used).elapsed()
    }

    /// Sends a request and waits for its response. The request's own id is replaced
    /// by an upstream id; the response comes back with that upstream id, and the
    /// caller restores its own.
    ///
    /// On timeout the server is sent `notifications/cancelled` for the request
    /// (MCP 2025-11-25, Utilities, "Cancellation").
    pub async fn request(&self, message: Message, timeout: Option<Duration>) -> Result<Message, CallError> {
        self.request_for(message, timeout, Arc::new(CallContext::default())).await
    }

    /// [`Instance::request`] on behalf of `ctx`: a progress token in the request's
    /// `_meta` is replaced upstream by the request's upstream id and restored in each
    /// `notifications/progress` sent to `ctx` (MCP 2025-11-25, Utilities, "Progress").
    /// If the returned future is dropped before the response (the caller went away),
    /// the server is sent `notifications/cancelled` for it.
    pub async fn request_for(
        &self,
        message: Message,
        timeout: Option<Duration>,
        ctx: Arc<CallContext>,
    ) -> Result<Message, CallError> {
        if message.as_str().len() >= self.max_message_bytes {
            // The server would never see it (a supervisor drops it whole): fail now.
            return Err(CallError::RequestTooLarge { bytes: message.as_str().len(), limit: self.max_message_bytes });
        }
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed).max(1);
        let upstream = UpstreamId { epoch: self.epoch, seq }.to_json();
        let (reply_tx, reply_rx) = oneshot::channel();
        let progress = message.progress_token().map(str::to_owned);
        let message = match &progress {
            Some(_) => message.with_progress_token(&upstream),
            None => message,
        };
        lock(&self.pending).insert(seq, Pending { reply: reply_tx, ctx, progress });
        let _guard = InFlight::new(self);
        let mut cancel = CancelOnDrop { inst: self, seq, upstream: &upstream, armed: true };
        if let State::Exited(exit) = self.state() {
            cancel.armed = false;
            lock(&self.pending).remove(&seq);
            return Err(self.exited_error(exit));
        }
        if self.tx.send(Outbound::Message(message.with_id(&upstream))).await.is_err() {
            cancel.armed = false;
            lock(&self.pending).remove(&seq);
            return Err(self.exited_error(ExitInfo { code: None, signal: None }));
        }
        let outcome = match timeout {
            Some(t) => tokio::time::timeout(t, reply_rx).await.map_err(|_| t),
            None => Ok(reply_rx.await),
        };
        match outcome {
            Ok(Ok(result)) => {
                cancel.armed = false;
                result
            }
            Ok(Err(_closed)) => {
                cancel.armed = false;
                Err(self.exited_error(ExitInfo { code: None, signal: None }))
            }
            Err(t) => {
                cancel.armed = false;
                self.cancel(seq, &upstream, "timeout");
                Err(CallError::Timeout(t))
            }
        }
    }

    /// Forwards a caller's request and returns the response with the caller's own id
    /// put back exactly as it was sent (its JSON value and type: `1` stays a number,
    /// `"1"` a string), so callers that reuse ids never see each other's results.
    pub async fn forward(
        &self,
        request: Message,
        timeout: Option<Duration>,
        ctx: Arc<CallContext>,
    ) -> Result<Message, CallError> {
        let id = request.id().map(str::to_owned);
        let response = self.request_for(request, timeout, ctx).await?;
        Ok(match id {
            Some(id) => response.with_id(&id),
            None => response,
        })
    }

    /// Tells the server a request is cancelled and stops waiting for it.
    fn cancel(&self, seq: u32, upstream: &str, reason: &str) {
        if lock(&self.pending).remove(&seq).is_none() {
            return;
        }
        let id = serde_json::from_str::<serde_json::Value>(upstream).unwrap_or_default();
        let params = serde_json::json!({ "requestId": id, "reason": reason });
        tracing::info!(server = %self.server, request = upstream, reason, "cancelling a request");
        if self
            .tx
            .try_send(Outbound::Message(Message::notification("notifications/cancelled", Some(&params.to_string()))))
            .is_err()
        {
            tracing::warn!(server = %self.server, "could not send the cancellation: the link is full or closed");
        }
    }

    /// Labels of the callers with requests in flight, for `status`.
    pub fn holders(&self) -> Vec<String> {
        let mut labels: Vec<String> =
            lock(&self.pending).values().map(|p| p.ctx.label.clone()).filter(|l| !l.is_empty()).collect();
        labels.sort();
        labels.dedup();
        labels
    }

    /// Sends a notification (no response).
    pub async fn notify(&self, message: Message) {
        let _ = self.tx.send(Outbound::Message(message)).await;
    }

    /// Stops the server (close stdin, SIGTERM, SIGKILL) and waits until it is gone.
    pub async fn terminate(&self) {
        self.set_state(State::Stopping);
        if self.tx.send(Outbound::Terminate).await.is_err() {
            return;
        }
        // The router marks the instance exited when the link reports it.
        let _ = self.state.subscribe().wait_for(|s| matches!(s, State::Exited(_) | State::Lost)).await;
    }

    fn exited_error(&self, exit: ExitInfo) -> CallError {
        CallError::Exited { exit, stderr_tail: self.info.stderr_tail(ERROR_TAIL_BYTES) }
    }

    /// Handles one message or event from the server.
    async fn handle(&self, item: Inbound, events: &mpsc::UnboundedSender<(String, InstanceEvent)>) {
        match item {
            Inbound::Message(m) => match m.kind() {
                MessageKind::Response => self.complete(m),
                MessageKind::Request => self.answer_server_request(m).await,
                MessageKind::Notification => self.route_notification(m, events),
            },
            Inbound::OversizeId(id) => {
                if let Some(w) = self.take_waiter(&id) {
                    let _ = w.reply.send(Err(CallError::TooLarge { limit: self.max_message_bytes }));
                }
            }
            Inbound::Failed { id, error } => {
                if let Some(w) = self.take_waiter(&id) {
                    let _ = w.reply.send(Err(CallError::Remote(error)));
                }
            }
            Inbound::Oversize { bytes, id } => {
                tracing::warn!(server = %self.server, bytes, id = id.as_deref().unwrap_or("none"), limit = self.max_message_bytes, "discarded a message over maxMessageBytes");
            }
            Inbound::Restarted(pid) => {
                tracing::info!(server = %self.server, pid, "server restarted by its supervisor");
                self.fail_pending(|| CallError::Lost("the server was restarted".into()));
                self.state.send_replace(State::Starting);
            }
            Inbound::Lost(reason) => {
                // A crash is an unrequested end of a running instance; a failed start
                // is counted by the pool, once.
                let expected = self.state() != State::Running;
                self.state.send_replace(State::Lost);
                self.fail_pending(|| CallError::Lost(reason.clone()));
                let crash = (!expected).then(|| CallError::Lost(reason.clone()));
                let _ = events.send((
                    self.fingerprint.clone(),
                    InstanceEvent::Exited { cache_key: self.cache_key.clone(), crash },
                ));
            }
            Inbound::Exited(exit) => {
                let expected = self.state() != State::Running;
                self.state.send_replace(State::Exited(exit));
                self.fail_pending(|| self.exited_error(exit));
                let crash = (!expected).then(|| self.exited_error(exit));
                let _ = events.send((
                    self.fingerprint.clone(),
                    InstanceEvent::Exited { cache_key: self.cache_key.clone(), crash },
                ));
            }
        }
    }

    /// Removes the caller waiting for the request with upstream id `id` (raw JSON).
    fn take_waiter(&self, id: &str) -> Option<Pending> {
        UpstreamId::from_json(id).filter(|u| u.epoch == self.epoch).and_then(|u| lock(&self.pending).remove(&u.seq))
    }

    fn fail_pending(&self, error: impl Fn() -> CallError) {
        let waiters: Vec<Pending> = lock(&self.pending).drain().map(|(_, w)| w).collect();
        for w in waiters {
            let _ = w.reply.send(Err(error()));
        }
    }

    fn complete(&self, response: Message) {
        let id = response.id().unwrap_or("null").to_owned();
        match self.take_waiter(&id) {
            Some(w) => {
                if w.reply.send(Ok(response)).is_err() {
                    tracing::info!(server = %self.server, id, "dropped a response whose caller gave up");
                }
            }
            None => {
                tracing::warn!(server = %self.server, id, "dropped a late or duplicate response (no request is waiting for this id)")
            }
        }
    }

    /// Notifications from the server: progress to the request that asked for it,
    /// log messages to the only request in flight (else the log), list changes to
    /// the daemon (which re-reads the schema cache).
    fn route_notification(&self, m: Message, events: &mpsc::UnboundedSender<(String, InstanceEvent)>) {
        let method = m.method().unwrap_or_default().to_owned();
        if method.ends_with("/list_changed") {
            tracing::info!(server = %self.server, method, "server changed a list; re-reading its schema");
            let _ = events.send((self.fingerprint.clone(), InstanceEvent::ListChanged(method)));
            return;
        }
        if method == "notifications/progress" {
            let target =
                m.notified_progress_token().and_then(UpstreamId::from_json).filter(|u| u.epoch == self.epoch).and_then(
                    |u| {
                        let pending = lock(&self.pending);
                        let p = pending.get(&u.seq)?;
                        Some((p.ctx.notify.clone()?, p.progress.clone()?))
                    },
                );
            match target {
                Some((notify, token)) => {
                    let _ = notify.send(m.with_notified_progress_token(&token));
                }
                None => {
                    tracing::debug!(server = %self.server, "dropped a progress notification no request is waiting for")
                }
            }
            return;
        }
        if method == "notifications/message" {
            let only = {
                let pending = lock(&self.pending);
                if pending.len() == 1 { pending.values().next().and_then(|p| p.ctx.notify.clone()) } else { None }
            };
            match only {
                Some(notify) => {
                    let _ = notify.send(m);
                }
                None => {
                    tracing::info!(server = %self.server, "server log: {}", m.as_str().chars().take(512).collect::<String>())
                }
            }
            return;
        }
        tracing::debug!(server = %self.server, method, "notification from server");
    }

    /// Server-to-client requests (design: "Pools"): `ping` is answered here; the
    /// others go to the caller whose request is the only one in flight on this
    /// instance. A shell caller answers `roots/list` with its working directory and
    /// nothing else. Whatever nobody can answer gets a JSON-RPC error, never silence.
    async fn answer_server_request(&self, request: Message) {
        let id = request.id().unwrap_or("null").to_owned();
        let method = request.method().unwrap_or_default().to_owned();
        if method == "ping" {
            return self.notify(Message::response(&id, "{}")).await;
        }
        let callers: Vec<Arc<CallContext>> = lock(&self.pending).values().map(|p| p.ctx.clone()).collect();
        // The only caller in flight is an MCP client that declared this capability:
        // ask it, and hand its answer back to the server under the server's own id.
        if let [ctx] = callers.as_slice() {
            if let (Some((can, replies)), Some(notify)) = (&ctx.client, &ctx.notify) {
                if can.contains(&method) {
                    let (client_id, answer) = replies.register();
                    if notify.send(request.with_id(&client_id)).is_ok() {
                        let tx = self.tx.clone();
                        let server = self.server.clone();
                        tokio::spawn(async move {
                            let reply = match tokio::time::timeout(CLIENT_ANSWER_TIMEOUT, answer).await {
                                Ok(Ok(response)) => response.with_id(&id),
                                _ => {
                                    tracing::info!(server = %server, method, "the MCP client did not answer a forwarded request");
                                    Message::error_response(
                                        &id,
                                        error_code::NO_CALLER,
                                        &format!("mcpx: the client did not answer `{method}`"),
                                    )
                                }
                            };
                            let _ = tx.send(Outbound::Message(reply)).await;
                        });
                        return;
                    }
                }
            }
        }
        let reply = match (callers.as_slice(), method.as_str()) {
            ([ctx], "roots/list") => match &ctx.roots {
                Some(roots) => {
                    let roots: Vec<serde_json::Value> = roots
                        .iter()
                        .map(|r| serde_json::json!({ "uri": file_uri(r), "name": r.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default() }))
                        .collect();
                    Message::response(&id, &serde_json::json!({ "roots": roots }).to_string())
                }
                None => {
                    Message::error_response(&id, error_code::CALLER_CANNOT_ANSWER, "mcpx: the caller offers no roots")
                }
            },
            ([_], _) => Message::error_response(
                &id,
                error_code::CALLER_CANNOT_ANSWER,
                &format!(
                    "mcpx: the caller of the request in flight cannot answer `{method}` (a shell caller answers only roots/list; an MCP client must declare the capability and accept an SSE answer)"
                ),
            ),
            (many, _) => Message::error_response(
                &id,
                error_code::NO_CALLER,
                &format!(
                    "mcpx: {} requests are in flight on this instance, so `{method}` cannot be routed to one caller",
                    many.len()
                ),
            ),
        };
        if reply.as_str().contains("\"error\"") {
            tracing::info!(server = %self.server, method, "answered a server request with an error: no caller can answer it");
        }
        self.notify(reply).await;
    }
}

/// A `file://` URI for a path (RFC 8089), percent-encoding what may not stand in a
/// URI path as it is.
fn file_uri(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// Sends `notifications/cancelled` for a request whose caller stopped waiting
/// (the future was dropped, or its deadline passed), unless disarmed.
struct CancelOnDrop<'a> {
    inst: &'a Instance,
    seq: u32,
    upstream: &'a str,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.inst.cancel(self.seq, self.upstream, "the caller stopped waiting");
        }
    }
}

/// Feeds everything from the link to the instance until the link ends.
async fn route(
    inst: std::sync::Weak<Instance>,
    mut rx: mpsc::Receiver<Inbound>,
    events: mpsc::UnboundedSender<(String, InstanceEvent)>,
) {
    while let Some(item) = rx.recv().await {
        let Some(inst) = inst.upgrade() else { return };
        inst.handle(item, &events).await;
    }
}

/// Counts a request in flight and touches the idle clock at both ends.
struct InFlight<'a>(&'a Instance);

impl<'a> InFlight<'a> {
    fn new(inst: &'a Instance) -> Self {
        inst.in_flight.fetch_add(1, Ordering::Relaxed);
        *lock(&inst.last_used) = Instant::now();
        InFlight(inst)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        *lock(&self.0.last_used) = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::LinkInfo;

    /// An instance over channels, with the test playing the server.
    fn instance() -> (Arc<Instance>, mpsc::Receiver<Outbound>, mpsc::Sender<Inbound>) {
        let (out_tx, out_rx) = mpsc::channel(16);
        let (in_tx, in_rx) = mpsc::channel(16);
        let link =
            Link { tx: out_tx, rx: in_rx, info: Arc::new(LinkInfo::new(Some(1), None)), epoch: 7, resumed: None };
        let spec = InstanceSpec {
            server: "s".into(),
            fingerprint: "f".into(),
            cache_key: "c".into(),
            key: "global".into(),
            max_message_bytes: 1 << 20,
        };
        let session = Session {
            protocol_version: "2025-11-25".into(),
            capabilities: RawValue::from_string("{}".into()).unwrap(),
            server_info: None,
            instructions: None,
        };
        let (events, _) = mpsc::unbounded_channel();
        (Instance::resume(spec, link, session, events), out_rx, in_tx)
    }

    async fn next_request(out: &mut mpsc::Receiver<Outbound>) -> Message {
        loop {
            if let Some(Outbound::Message(m)) = out.recv().await {
                if m.kind() == MessageKind::Request {
                    return m;
                }
            }
        }
    }

    /// C04 and its neighbours: callers reusing ids `1`, `"1"`, `0`, `"0"` on one
    /// shared instance, answered in reverse order, each get their own result with
    /// their id unchanged in value and type.
    #[tokio::test]
    async fn callers_reusing_ids_get_their_own_responses() {
        let (inst, mut out, inbound) = instance();
        let ids = ["1", "1", "\"1\"", "0", "\"0\""];
        let mut calls = Vec::new();
        for (n, id) in ids.iter().enumerate() {
            let inst = inst.clone();
            let request =
                Message::request(id, "tools/call", Some(&format!(r#"{{"name":"who","arguments":{{"n":{n}}}}}"#)));
            calls.push(tokio::spawn(async move { inst.forward(request, None, Arc::default()).await.unwrap() }));
        }
        let mut seen = Vec::new();
        for _ in 0..ids.len() {
            let m = next_request(&mut out).await;
            let upstream = UpstreamId::from_json(m.id().unwrap()).unwrap();
            assert_eq!(upstream.epoch, 7, "upstream ids carry the epoch");
            let n: serde_json::Value = serde_json::from_str(m.as_str()).unwrap();
            seen.push((m.id().unwrap().to_owned(), n["params"]["arguments"]["n"].clone()));
        }
        // The first caller is the slowest: answer in reverse.
        for (upstream, n) in seen.iter().rev() {
            let reply =
                Message::response(upstream, &format!(r#"{{"content":[{{"type":"text","text":"caller {n}"}}]}}"#));
            inbound.send(Inbound::Message(reply)).await.unwrap();
        }
        for (n, call) in calls.into_iter().enumerate() {
            let response = call.await.unwrap();
            assert_eq!(response.id(), Some(ids[n]), "caller {n} got id {:?}", response.id());
            assert!(response.as_str().contains(&format!("caller {n}")), "caller {n} got {}", response.as_str());
        }
    }

    /// C13: a duplicate response and a late one (its caller gave up) are dropped;
    /// the instance stays up and the next request works.
    #[tokio::test]
    async fn duplicate_and_late_responses_are_dropped() {
        let (inst, mut out, inbound) = instance();
        let first = {
            let inst = inst.clone();
            tokio::spawn(async move { inst.request(Message::request("5", "tools/call", Some("{}")), None).await })
        };
        let m = next_request(&mut out).await;
        let answer = Message::response(m.id().unwrap(), r#"{"content":[]}"#);
        inbound.send(Inbound::Message(answer.clone())).await.unwrap();
        inbound.send(Inbound::Message(answer)).await.unwrap();
        assert!(first.await.unwrap().is_ok());
        let gave_up =
            inst.request(Message::request("6", "tools/call", Some("{}")), Some(Duration::from_millis(50))).await;
        assert!(matches!(gave_up, Err(CallError::Timeout(_))));
        let late = next_request(&mut out).await;
        inbound.send(Inbound::Message(Message::response(late.id().unwrap(), "{}"))).await.unwrap();
        assert!(inst.is_alive());
        let next = {
            let inst = inst.clone();
            tokio::spawn(async move { inst.request(Message::request("7", "ping", None), None).await })
        };
        // Skip the cancellation notification the timeout sent.
        let m = next_request(&mut out).await;
        inbound.send(Inbound::Message(Message::response(m.id().unwrap(), "{}"))).await.unwrap();
        assert!(next.await.unwrap().is_ok());
    }
}
