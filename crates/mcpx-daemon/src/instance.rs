//! One running server instance: its MCP session over a [`Link`], the map from
//! upstream request ids to waiting callers, and the messages the server sends
//! on its own.
//!
//! Every request to the server gets an [`UpstreamId`] carrying this daemon's epoch;
//! the caller's own id is put back by whoever answers the caller. A response whose
//! id is unknown (late, duplicate, or from an earlier daemon) is dropped and logged.

mod budget;
mod calls;
mod context;
mod era;
mod error;
mod handshake;
mod inbound;
mod input_rounds;
mod listen_streams;
mod listeners;
mod notifications;
mod server_requests;
mod session;
#[cfg(test)]
mod tests;
mod upstream_listen;

pub use budget::LogBudget;
pub use context::{
    CLIENT_ANSWER_TIMEOUT, CallContext, ClientReplies, Heard, HeardRequest, INTERACTIVE, MAX_INPUT_ROUNDS,
};
pub use era::{Era, Known};
pub use error::{CallError, ERROR_TAIL_BYTES};
pub use listeners::{ClientHandle, ClientSink, LOG_LEVELS, Listeners, level_index};
pub use session::ServerSession;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use mcpx_proto::attach::Identity;
use mcpx_proto::{Message, UpstreamId};
use tokio::sync::{mpsc, oneshot, watch};

use self::budget::Admit;
use self::calls::{Calls, Pending};
use crate::notices::Sent;
use crate::sync::lock;
use crate::transport::{ExitInfo, Inbound, Link, LinkInfo, Outbound};

/// How long a call whose link closed waits for the link's exit report, to name the
/// exit code or signal rather than "ended".
const EXIT_REPORT_GRACE: Duration = Duration::from_secs(2);

/// What the instance reports to the daemon.
#[derive(Debug, Clone)]
pub enum InstanceEvent {
    /// The server sent `notifications/{tools,resources,prompts}/list_changed`; the method.
    ListChanged(String),
    /// The server process ended (or its link was lost). `crash` holds the error when
    /// nobody asked it to stop.
    Exited {
        /// The server's name.
        server: String,
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

/// One server process and its MCP session.
#[derive(Debug)]
pub struct Instance {
    /// Who it is: the server's configured name (of the first configuration that
    /// started it), its fingerprint, cache key, pool key and sharing.
    pub identity: Identity,
    /// Process facts shared with the transport.
    pub info: Arc<LinkInfo>,
    /// The configuration entry it was started from, as written, so `status` can tell
    /// two instances of one server apart.
    pub origin: Origin,
    /// When it started.
    pub started: Instant,
    tx: mpsc::Sender<Outbound>,
    /// The epoch of this instance's upstream ids (the link's).
    epoch: u32,
    next_seq: AtomicU32,
    max_message_bytes: usize,
    /// The requests in flight: the one map from caller to upstream id that
    /// responses, progress, cancellation and server requests use.
    calls: Calls,
    /// Watched, so `terminate` can wait for the exit without polling.
    state: watch::Sender<State>,
    /// Why the link was lost, once it was: what a request made after it fails with.
    lost: Mutex<Option<String>>,
    session: Mutex<Option<ServerSession>>,
    in_flight: AtomicU64,
    /// Callers' requests answered ([`Instance::count_served`]).
    served: AtomicU64,
    last_used: Mutex<Instant>,
    /// Progress and log notifications lost because their caller read too slowly.
    dropped_notifications: AtomicU64,
    /// Error responses the server sent with `"id": null`.
    null_id_errors: AtomicU64,
    /// What the server makes the daemon log on its own is rate-limited.
    log_budget: Arc<LogBudget>,
    /// Its clients' resource subscriptions and log levels.
    pub listeners: Listeners,
    /// A modern server's `subscriptions/listen` streams (`upstream_listen.rs`).
    listen: listen_streams::UpstreamListen,
    /// Itself, for the tasks it starts that must not keep it alive.
    me: Weak<Instance>,
    /// The authorization context of its private listings, set once by whoever started
    /// it from a target ([`crate::pool::Target::context`]); unknown for an instance
    /// adopted from an earlier daemon until it starts again.
    context: std::sync::OnceLock<String>,
}

/// The identity and limits an instance is started with.
#[derive(Debug, Clone)]
pub struct InstanceSpec {
    /// Who it is.
    pub identity: Identity,
    /// `maxMessageBytes`: requests this large are refused, and error messages name it.
    pub max_message_bytes: usize,
    /// The server's log budget, shared by all its instances ([`LogBudget`]).
    pub log_budget: Arc<LogBudget>,
    /// The configuration entry it is started from.
    pub origin: Origin,
    /// What is known of the server's era: whether to probe it first.
    pub known: Known,
}

/// Where an instance's configuration came from, as written: before `${VAR}`
/// expansion, so it holds no secret a variable supplies. Empty for an instance
/// adopted from a previous daemon, whose supervisor's record does not keep it.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// The configuration file that defines the server.
    pub source: Option<PathBuf>,
    /// A local server's `command` and `args`, joined by spaces.
    pub command: Option<String>,
    /// Its `sandbox`, as a config file writes it; `None`: unconfined.
    pub sandbox: Option<serde_json::Value>,
}

impl Instance {
    /// Takes over `link`, settles the server's era and session (`server/discover` or
    /// MCP `initialize`, as `spec.known` says), and returns the
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
        let known = spec.known.clone();
        let inst = Instance::new(spec, link, events);
        let initialized = inst.handshake(known, start_timeout).await.map_err(|e| match e {
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
        session: ServerSession,
        events: mpsc::UnboundedSender<(String, InstanceEvent)>,
    ) -> Arc<Instance> {
        let inst = Instance::new(spec, link, events);
        *lock(&inst.session) = Some(session);
        inst.set_state(State::Running);
        inst.listen_soon();
        inst
    }

    fn new(spec: InstanceSpec, link: Link, events: mpsc::UnboundedSender<(String, InstanceEvent)>) -> Arc<Instance> {
        let Link { tx, rx, info, epoch, .. } = link;
        let epoch = epoch.clamp(1, UpstreamId::MAX_EPOCH);
        let inst = Arc::new_cyclic(|me| Instance {
            me: me.clone(),
            context: std::sync::OnceLock::new(),
            listen: listen_streams::UpstreamListen::default(),
            identity: spec.identity,
            info,
            origin: spec.origin,
            started: Instant::now(),
            tx,
            epoch,
            next_seq: AtomicU32::new(1),
            max_message_bytes: spec.max_message_bytes,
            calls: Calls::new(epoch),
            state: watch::Sender::new(State::Starting),
            session: Mutex::new(None),
            in_flight: AtomicU64::new(0),
            served: AtomicU64::new(0),
            lost: Mutex::new(None),
            last_used: Mutex::new(Instant::now()),
            dropped_notifications: AtomicU64::new(0),
            null_id_errors: AtomicU64::new(0),
            log_budget: spec.log_budget,
            listeners: Listeners::default(),
        });
        tokio::spawn(Instance::route(Arc::downgrade(&inst), rx, events));
        inst
    }

    /// Marks the instance running with `session`, and hands the session to the link
    /// to keep (a supervisor stores it for the next daemon: a modern server's as its
    /// era, since it has no session to resume).
    async fn running(&self, session: ServerSession) {
        if let Ok(json) = serde_json::to_string(&session) {
            let keep =
                if Era::of(&session).is_modern() { Outbound::StoreEra(json) } else { Outbound::StoreSession(json) };
            let _ = self.tx.send(keep).await;
        }
        *lock(&self.session) = Some(session);
        self.set_state(State::Running);
        self.relisten().await;
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
        let known = Known::from_session(self.session().as_ref());
        let session = self.handshake(known, start_timeout).await?;
        self.running(session).await;
        // The new process knows nothing of what the old one was asked; a failure is
        // logged, and the next subscriber or level change asks again. A modern
        // server's listen, opened by `running`, carries the subscriptions.
        let legacy = !self.era().is_some_and(|e| e.is_modern());
        for request in self.listeners.resumed().into_iter().filter(|_| legacy) {
            if let Err(e) = self.request(request, start_timeout).await {
                tracing::warn!(server = %self.identity.server, "cannot resume a subscription or log level after the restart: {e}");
            }
        }
        Ok(())
    }

    /// Sets the authorization context of its private listings (the first value stays).
    pub fn set_context(&self, context: String) {
        let _ = self.context.set(context);
    }

    /// The authorization context of its private listings, when known.
    pub fn context(&self) -> Option<&str> {
        self.context.get().map(String::as_str)
    }

    /// The negotiated session, once initialized.
    pub fn session(&self) -> Option<ServerSession> {
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

    /// Callers' requests this instance answered (a result or a JSON-RPC error) since
    /// this daemon started or took it up; the daemon's own (schema listings) are not
    /// counted.
    pub fn calls_served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// Counts one caller's request answered ([`crate::daemon::Daemon::ask`]).
    pub(crate) fn count_served(&self) {
        self.served.fetch_add(1, Ordering::Relaxed);
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

    /// One round of [`Instance::request_for`]: `message` sent once, and its response.
    async fn request_once(
        &self,
        message: Message,
        timeout: Option<Duration>,
        ctx: Arc<CallContext>,
    ) -> Result<Message, CallError> {
        let level = self.listeners.level_of(&ctx);
        let message = match self.upstream_form(message, level) {
            era::Upstream::Send(message) => message,
            era::Upstream::Answered(answer) => return Ok(answer),
        };
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
        let ctx_headers = ctx.param_headers.clone();
        self.calls.insert(seq, Pending { reply: reply_tx, ctx, progress, level });
        let _guard = InFlight::new(self);
        let mut cancel = CancelOnDrop { inst: self, seq, upstream: &upstream, armed: true };
        // Ended before the request was recorded: the pending calls were failed already,
        // and nothing will answer this one (a caller that waited for an exclusive
        // instance's permit while its supervisor died gets here).
        match self.state() {
            State::Exited(exit) => {
                cancel.armed = false;
                self.calls.remove(seq);
                return Err(self.exited_error(exit));
            }
            State::Lost => {
                cancel.armed = false;
                self.calls.remove(seq);
                let reason = lock(&self.lost).clone().unwrap_or_else(|| "the link is gone".into());
                return Err(CallError::Lost(reason));
            }
            _ => {}
        }
        let headed = !ctx_headers.is_empty() && self.info.remote.is_some();
        let out = if headed {
            Outbound::Headed(message.with_id(&upstream), ctx_headers)
        } else {
            Outbound::Message(message.with_id(&upstream))
        };
        if self.tx.send(out).await.is_err() {
            cancel.armed = false;
            self.calls.remove(seq);
            return Err(self.ended_error().await);
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
                Err(self.ended_error().await)
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
    /// A modern server's result loses the fields only its era has (`resultType`, `ttlMs`, `cacheScope`).
    pub async fn forward(
        &self,
        request: Message,
        timeout: Option<Duration>,
        ctx: Arc<CallContext>,
    ) -> Result<Message, CallError> {
        let id = request.id().map(str::to_owned);
        let mut response = self.request_for(request, timeout, ctx).await?;
        if self.era().is_some_and(|e| e.is_modern()) {
            response = era::plain_result(response);
        }
        Ok(match id {
            Some(id) => response.with_id(&id),
            None => response,
        })
    }

    /// Tells the server a request is cancelled and stops waiting for it.
    fn cancel(&self, seq: u32, upstream: &str, reason: &str) {
        if self.calls.remove(seq).is_none() {
            return;
        }
        let id = serde_json::from_str::<serde_json::Value>(upstream).unwrap_or_default();
        let params = serde_json::json!({ "requestId": id, "reason": reason });
        tracing::info!(server = %self.identity.server, request = upstream, reason, "cancelling a request");
        if self
            .tx
            .try_send(Outbound::Message(Message::notification("notifications/cancelled", Some(&params.to_string()))))
            .is_err()
        {
            tracing::warn!(server = %self.identity.server, "could not send the cancellation: the link is full or closed");
        }
    }

    /// Labels of the callers with requests in flight, for `status`.
    pub fn holders(&self) -> Vec<String> {
        self.calls.labels()
    }

    /// Progress and log notifications this instance's callers lost because they read
    /// too slowly (their queues were full).
    pub fn dropped_notifications(&self) -> u64 {
        self.dropped_notifications.load(Ordering::Relaxed)
    }

    /// Error responses the server sent with `"id": null` (JSON-RPC 2.0, section 5:
    /// it could not read a request's id), since the instance started.
    pub fn null_id_errors(&self) -> u64 {
        self.null_id_errors.load(Ordering::Relaxed)
    }

    /// Whether the server may add a line to the log now (its budget is
    /// `budget::LINES_PER_WINDOW` a second); says how many were left out before.
    fn may_log(&self) -> bool {
        match self.log_budget.admit(Instant::now()) {
            Admit::Log { suppressed: 0 } => true,
            Admit::Log { suppressed } => {
                tracing::warn!(server = %self.identity.server, suppressed, "left {suppressed} lines about this server out of the log: it sent more than it may log");
                true
            }
            Admit::Suppress => false,
        }
    }

    /// Hands `message` to a caller's queue, counting and logging a loss.
    fn deliver(&self, notify: &crate::notices::NoticeSender, message: Message) {
        if let Sent::Lost { first } = notify.send(message) {
            let total = self.dropped_notifications.fetch_add(1, Ordering::Relaxed) + 1;
            if first {
                tracing::warn!(server = %self.identity.server, total, "dropping progress and log notifications for a caller that reads too slowly (its queue is full)");
            }
        }
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

    /// The error for a call whose link closed under it. The link closes its channels
    /// a moment before the instance reads its `Exited` report, so this waits briefly
    /// (at most [`EXIT_REPORT_GRACE`]) for the exit code or signal, and names it; a
    /// link that ends without one is "ended".
    async fn ended_error(&self) -> CallError {
        let mut state = self.state.subscribe();
        let _ = tokio::time::timeout(EXIT_REPORT_GRACE, state.wait_for(|s| matches!(s, State::Exited(_)))).await;
        let exit = match self.state() {
            State::Exited(exit) => exit,
            _ => ExitInfo::ENDED,
        };
        self.exited_error(exit)
    }

    fn exited_error(&self, exit: ExitInfo) -> CallError {
        CallError::Exited { exit, stderr_tail: self.info.stderr_tail(ERROR_TAIL_BYTES) }
    }
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

/// Counts a request in flight and touches the idle clock at both ends.
struct InFlight<'a>(&'a Instance);

impl<'a> InFlight<'a> {
    fn new(inst: &'a Instance) -> Self {
        inst.in_flight.fetch_add(1, Ordering::Relaxed);
        inst.info.awaiting.fetch_add(1, Ordering::Relaxed);
        *lock(&inst.last_used) = Instant::now();
        InFlight(inst)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.0.info.awaiting.fetch_sub(1, Ordering::Relaxed);
        *lock(&self.0.last_used) = Instant::now();
    }
}
