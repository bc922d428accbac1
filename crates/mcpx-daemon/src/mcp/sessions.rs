//! The MCP endpoint's client sessions (MCP 2025-11-25, Transports, "Session
//! Management"): who each client is, what it negotiated, the names of its last
//! listing, its GET stream, its requests being answered and its answers to server
//! requests forwarded to it.
//!
//! Nothing here knows the daemon. The daemon's announcements reach the clients
//! through [`ClientSessions::broadcast`], which the endpoint calls.
//!
//! Session ids are 128 random bits from the OS's secure source. A session ends after
//! [`SESSION_IDLE`] without a request, an open GET stream or a request being answered,
//! and at most [`MAX_SESSIONS`] are open (`docs/api.md`, "MCP endpoint").

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use mcpx_proto::Message;
use serde_json::Value;
use tokio::sync::{Notify, mpsc, watch};

use crate::api::Caller;
use crate::instance::{ClientHandle, ClientReplies, ClientSink, Instance};
use crate::mcp::subscriptions::Listening;
use crate::names::NameMap;
use crate::sync::lock;

/// How many events a session's GET stream buffers; beyond that, events the daemon
/// sends on its own are dropped (the client lists again on the next one).
const STREAM_BUFFER: usize = 64;

/// How long a session may go unused before it ends: no request, no GET stream open and
/// no request being answered for this long (1 hour). Its client then gets 404 and
/// initializes again (Transports, "Session Management").
pub const SESSION_IDLE: Duration = Duration::from_secs(3600);

/// The most client sessions open at once, over every listener. A new one past this
/// ends the least recently used idle session; with none idle, it is refused.
pub const MAX_SESSIONS: usize = 1024;

/// One MCP client session of the endpoint (not a server's session, nor a caller's
/// `--session`).
#[derive(Debug)]
pub struct ClientSession {
    /// Only this server, passed through (`/mcp/<server>`); `None`: the aggregate.
    pub(crate) server: Option<String>,
    /// Who the client is, for configuration and pool keys.
    pub(crate) caller: Caller,
    /// Its `clientInfo` (`name version`), for the activity record; `mcp client` when it
    /// sent none.
    pub(crate) client: String,
    /// How it reaches the daemon, for the activity record: `/mcp`, `/mcp/<server>`,
    /// `serve`, `serve <server>`.
    pub(crate) path: String,
    /// The negotiated revision.
    pub(crate) version: String,
    /// Exposed tool names of the last listing, to map a call back.
    pub(crate) tools: Mutex<NameMap>,
    /// Exposed prompt names of the last listing, to map a get back.
    pub(crate) prompts: Mutex<NameMap>,
    /// The GET stream for messages the daemon sends on its own, while one is open.
    stream: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    /// The server requests this client declared it can answer (from its capabilities).
    pub(crate) can_answer: Vec<String>,
    /// Its answers to forwarded server requests.
    pub(crate) replies: Arc<ClientReplies>,
    /// Its requests being answered, by id (JSON text): `notifications/cancelled` from
    /// the client stops one, which cancels it upstream too.
    inflight: Mutex<HashMap<String, Arc<Notify>>>,
    /// Discovery mode: only mcpx's own few tools, so an agent pays no context for
    /// schemas it has not asked for.
    pub(crate) discover: bool,
    /// A modern request's `Mcp-Param-*` headers, passed on with it to a modern remote
    /// server (its session lives for that one request); empty otherwise.
    pub(crate) param_headers: Vec<(String, String)>,
    /// A modern request's log level (`_meta` `io.modelcontextprotocol/logLevel`,
    /// MCP 2026-07-28, Server, Utilities, "Logging"), which goes upstream with it;
    /// `None` otherwise (a legacy session's level is its `logging/setLevel`, which
    /// each instance's listeners keep).
    pub(crate) log_level: Option<String>,
    /// When the client last sent a request, for [`SESSION_IDLE`].
    last_used: Mutex<Instant>,
    /// The resources it subscribed to: the instance and the server's URI, so that a
    /// session that ends unsubscribes (the server too, after its last subscriber).
    subscribed: Mutex<Vec<(Weak<Instance>, String)>>,
    /// A modern client's `subscriptions/listen` stream: what its stream carries, and
    /// how (`None`: a legacy session, whose GET stream carries everything).
    pub(crate) listening: Mutex<Option<Listening>>,
}

impl ClientSession {
    /// A session for a client that sent `initialize` with `capabilities` (its
    /// `params.capabilities`, JSON) and negotiated `version`. It can be asked the
    /// server requests its capabilities declare: `sampling` (`sampling/createMessage`),
    /// `elicitation` (`elicitation/create`) and `roots` (`roots/list`).
    pub fn new(
        server: Option<String>,
        caller: Caller,
        version: String,
        capabilities: &Value,
        discover: bool,
    ) -> ClientSession {
        let can_answer =
            [("sampling", "sampling/createMessage"), ("elicitation", "elicitation/create"), ("roots", "roots/list")]
                .iter()
                .filter(|(capability, _)| capabilities.get(*capability).is_some())
                .map(|(_, method)| (*method).to_owned())
                .collect();
        ClientSession {
            server,
            caller,
            client: "mcp client".to_owned(),
            path: "/mcp".to_owned(),
            version,
            tools: Mutex::default(),
            prompts: Mutex::default(),
            stream: Mutex::default(),
            can_answer,
            replies: Arc::default(),
            inflight: Mutex::default(),
            discover,
            param_headers: Vec::new(),
            log_level: None,
            last_used: Mutex::new(Instant::now()),
            subscribed: Mutex::default(),
            listening: Mutex::default(),
        }
    }

    /// Since when the session has been idle at `now` (see [`SESSION_IDLE`]); `None`
    /// while its GET stream is open or one of its requests is being answered.
    fn idle_since(&self, now: Instant) -> Option<Instant> {
        let streaming = lock(&self.stream).as_ref().is_some_and(|s| !s.is_closed());
        if streaming || !lock(&self.inflight).is_empty() {
            return None;
        }
        Some((*lock(&self.last_used)).min(now))
    }

    /// Opens the session's GET stream (Transports, "Listening for Messages from the
    /// Server"): the receiver of its SSE events, the first a comment so the client
    /// sees the stream is open. `None` while another stream of the session is open.
    pub fn open_stream(&self) -> Option<mpsc::Receiver<Vec<u8>>> {
        let (tx, rx) = mpsc::channel::<Vec<u8>>(STREAM_BUFFER);
        {
            let mut stream = lock(&self.stream);
            if stream.as_ref().is_some_and(|s| !s.is_closed()) {
                return None;
            }
            *stream = Some(tx.clone());
        }
        let _ = tx.try_send(b": stream open\n\n".to_vec());
        Some(rx)
    }

    /// Sends `message` on the GET stream, when one is open and has room; on a listen
    /// stream, only what it agreed to carry, stamped ([`Listening::stamp`]).
    fn send_event(&self, message: &Message) {
        let stamped = match lock(&self.listening).as_ref() {
            Some(listening) => match listening.stamp(message) {
                Some(stamped) => Some(stamped),
                None => return,
            },
            None => None,
        };
        if let Some(tx) = lock(&self.stream).as_ref() {
            let _ = tx.try_send(sse_event(stamped.as_ref().unwrap_or(message).as_str()));
        }
    }

    /// Opens a listen session's stream (MCP 2026-07-28, "Subscriptions"): like
    /// [`ClientSession::open_stream`], with the acknowledgement of its [`Listening`]
    /// as the stream's first message, and a future that completes when the client
    /// closes it. `None` when a stream is open already.
    pub(crate) fn open_listen_stream(
        &self,
    ) -> Option<(mpsc::Receiver<Vec<u8>>, impl std::future::Future<Output = ()> + use<>)> {
        let rx = self.open_stream()?;
        let stream = lock(&self.stream);
        let tx = stream.as_ref()?.clone();
        if let Some(listening) = lock(&self.listening).as_ref() {
            let _ = tx.try_send(sse_event(listening.acknowledgement().as_str()));
        }
        drop(stream);
        Some((rx, async move { tx.closed().await }))
    }

    /// The session as the instances it reaches know it, for its subscriptions and
    /// log level: it hears them on its GET stream.
    pub(crate) fn handle(self: &Arc<Self>) -> ClientHandle {
        let weak: std::sync::Weak<ClientSession> = Arc::downgrade(self);
        ClientHandle::new(&self.replies, weak)
    }

    /// Records that the session subscribed to the server's `uri` on `instance`
    /// (`subscribe: true`) or unsubscribed from it.
    pub(crate) fn subscribed(&self, instance: &Arc<Instance>, uri: &str, subscribe: bool) {
        let mut subscribed = lock(&self.subscribed);
        subscribed.retain(|(i, u)| !(i.ptr_eq(&Arc::downgrade(instance)) && u == uri) && i.strong_count() > 0);
        if subscribe {
            subscribed.push((Arc::downgrade(instance), uri.to_owned()));
        }
    }

    /// Records that request `id` (JSON text) is being answered; the returned signal
    /// fires when the client cancels it. [`ClientSession::end`] forgets it.
    pub fn begin(&self, id: &str) -> Arc<Notify> {
        let stop = Arc::new(Notify::new());
        lock(&self.inflight).insert(id.to_owned(), stop.clone());
        stop
    }

    /// Forgets request `id`: it was answered.
    pub fn end(&self, id: &str) {
        lock(&self.inflight).remove(id);
    }

    /// The client cancelled request `id` (`notifications/cancelled`, Utilities,
    /// "Cancellation"): stops it, when it is being answered.
    pub fn cancel(&self, id: &str) {
        if let Some(stop) = lock(&self.inflight).get(id).cloned() {
            stop.notify_one();
        }
    }
}

/// A client's `clientInfo` (`{"name", "version"}`) as the activity record names it:
/// `name version`, sanitized of nothing (the record's reader escapes it); `None` when
/// it has no name.
pub fn client_name(info: &Value) -> Option<String> {
    let name = info.get("name")?.as_str()?;
    let version = info.get("version").and_then(Value::as_str).unwrap_or_default();
    Some(format!("{name} {version}").trim_end().to_owned())
}

impl ClientSink for ClientSession {
    fn send(&self, message: &Message) {
        self.send_event(message);
    }
}

/// How long the server has to answer the `resources/unsubscribe` of a session that ended.
const UNSUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

impl Drop for ClientSession {
    /// A session that ends (deleted, idle, or evicted) leaves its subscriptions; the
    /// server is unsubscribed from a URI it was the last subscriber of.
    fn drop(&mut self) {
        let subscribed = std::mem::take(&mut *lock(&self.subscribed));
        let gone = ClientHandle::new(&self.replies, Weak::<ClientSession>::new());
        for (instance, uri) in subscribed {
            let Some(instance) = instance.upgrade().filter(|i| i.listeners.unsubscribe(&gone, &uri)) else { continue };
            let Ok(runtime) = tokio::runtime::Handle::try_current() else { continue };
            let params = serde_json::json!({ "uri": uri }).to_string();
            runtime.spawn(async move {
                let request = Message::request("0", "resources/unsubscribe", Some(&params));
                if let Err(e) = instance.request(request, Some(UNSUBSCRIBE_TIMEOUT)).await {
                    tracing::info!(server = %instance.identity.server, error = %e, "could not unsubscribe for an MCP session that ended");
                }
            });
        }
    }
}

/// Every open client session of the MCP endpoint, by `Mcp-Session-Id`.
#[derive(Debug, Default)]
pub struct ClientSessions {
    map: Mutex<HashMap<String, Arc<ClientSession>>>,
}

/// [`ClientSessions::insert`] found [`MAX_SESSIONS`] sessions open and none idle.
#[derive(Debug, thiserror::Error)]
#[error(
    "too many MCP sessions are open ({MAX_SESSIONS}, none idle): end unused ones with DELETE /mcp, or try again when one ends"
)]
pub struct TooManySessions;

impl ClientSessions {
    /// A new session id: 32 hex digits, 128 bits from the OS's secure random source.
    ///
    /// Errors: that source failed.
    pub fn new_id() -> std::io::Result<String> {
        let mut bytes = [0u8; 16];
        mcpx_platform::random_bytes(&mut bytes)?;
        Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Adds `session` under `id` (from [`ClientSessions::new_id`]). Sessions idle for
    /// [`SESSION_IDLE`] end first; at [`MAX_SESSIONS`], the least recently used idle
    /// session ends to make room.
    ///
    /// Errors: [`TooManySessions`] when all [`MAX_SESSIONS`] are in use.
    pub fn insert(&self, id: String, session: ClientSession) -> Result<(), TooManySessions> {
        self.insert_at(id, session, Instant::now())
    }

    fn insert_at(&self, id: String, session: ClientSession, now: Instant) -> Result<(), TooManySessions> {
        let mut map = lock(&self.map);
        map.retain(|_, s| s.idle_since(now).is_none_or(|since| now.duration_since(since) < SESSION_IDLE));
        if map.len() >= MAX_SESSIONS {
            let oldest = map
                .iter()
                .filter_map(|(id, s)| s.idle_since(now).map(|since| (since, id.clone())))
                .min()
                .map(|(_, id)| id);
            let Some(oldest) = oldest else {
                return Err(TooManySessions);
            };
            map.remove(&oldest);
            tracing::info!(session = %oldest, "ended the least recently used MCP session: {MAX_SESSIONS} were open");
        }
        *lock(&session.last_used) = now;
        map.insert(id, Arc::new(session));
        Ok(())
    }

    /// The session with this id, marked as used now; `None` when there is none, or
    /// when it had been idle for [`SESSION_IDLE`] (it ends then).
    pub fn get(&self, id: &str) -> Option<Arc<ClientSession>> {
        self.get_at(id, Instant::now())
    }

    fn get_at(&self, id: &str, now: Instant) -> Option<Arc<ClientSession>> {
        let mut map = lock(&self.map);
        let session = map.get(id)?.clone();
        if session.idle_since(now).is_some_and(|since| now.duration_since(since) >= SESSION_IDLE) {
            map.remove(id);
            return None;
        }
        *lock(&session.last_used) = now;
        Some(session)
    }

    /// Ends the session with this id (`DELETE`); false when there is none.
    pub fn remove(&self, id: &str) -> bool {
        lock(&self.map).remove(id).is_some()
    }

    /// Sends `message` on the GET stream of every session that has one (a server's
    /// `list_changed` becomes one to every session, which then lists again).
    pub fn broadcast(&self, message: &Message) {
        let sessions: Vec<Arc<ClientSession>> = lock(&self.map).values().cloned().collect();
        for s in sessions {
            s.send_event(message);
        }
    }
}

/// One server-sent event carrying `data` (a JSON-RPC message), as the streamable HTTP
/// transport sends them.
pub fn sse_event(data: &str) -> Vec<u8> {
    format!("event: message\ndata: {data}\n\n").into_bytes()
}

/// [`sse_event`] for a message that is not kept, in three pieces: the message's own
/// buffer is sent as it is, not copied into the event (a large result relayed as SSE
/// would otherwise be held twice).
pub fn sse_pieces(message: Message) -> Vec<Vec<u8>> {
    vec![b"event: message\ndata: ".to_vec(), message.into_string().into_bytes(), b"\n\n".to_vec()]
}

/// `mcpx serve`'s links open (`framed`), so the daemon's drain before an exit waits
/// for them.
#[derive(Debug)]
pub struct Links {
    open: Arc<watch::Sender<usize>>,
}

impl Default for Links {
    fn default() -> Links {
        Links { open: Arc::new(watch::Sender::new(0)) }
    }
}

impl Links {
    /// Returns once no link is open (each finishes what it read when the exit is
    /// requested, then closes).
    pub async fn drained(&self) {
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|n| *n == 0).await;
    }

    pub(crate) fn enter(&self) -> LinkGuard {
        self.open.send_modify(|n| *n += 1);
        LinkGuard(self.open.clone())
    }
}

/// Counts one open link until dropped.
pub(crate) struct LinkGuard(Arc<watch::Sender<usize>>);

impl Drop for LinkGuard {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> ClientSession {
        ClientSession::new(None, Caller::default(), "2025-11-25".into(), &Value::Null, false)
    }

    #[test]
    fn ids_are_random_and_128_bits() {
        let (a, b) = (ClientSessions::new_id().unwrap(), ClientSessions::new_id().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn an_idle_session_expires_and_one_in_use_does_not() {
        let sessions = ClientSessions::default();
        let t0 = Instant::now();
        sessions.insert_at("idle".into(), session(), t0).unwrap();
        sessions.insert_at("streaming".into(), session(), t0).unwrap();
        let _stream = sessions.get_at("streaming", t0).unwrap().open_stream().unwrap();
        sessions.insert_at("used".into(), session(), t0).unwrap();
        let later = t0 + SESSION_IDLE - Duration::from_secs(1);
        assert!(sessions.get_at("used", later).is_some());
        let expired = t0 + SESSION_IDLE + Duration::from_secs(1);
        assert!(sessions.get_at("idle", expired).is_none(), "idle for longer than SESSION_IDLE");
        assert!(sessions.get_at("idle", t0).is_none(), "an expired session is gone");
        assert!(sessions.get_at("streaming", expired).is_some(), "its GET stream is open");
        assert!(sessions.get_at("used", expired).is_some(), "used within SESSION_IDLE");
    }

    #[test]
    fn at_the_cap_the_least_recently_used_idle_session_ends() {
        let sessions = ClientSessions::default();
        let t0 = Instant::now();
        for n in 0..MAX_SESSIONS {
            sessions.insert_at(format!("s{n}"), session(), t0 + Duration::from_millis(n as u64)).unwrap();
        }
        sessions.get_at("s0", t0 + Duration::from_secs(5)).unwrap();
        sessions.insert_at("new".into(), session(), t0 + Duration::from_secs(6)).unwrap();
        assert_eq!(lock(&sessions.map).len(), MAX_SESSIONS);
        assert!(sessions.get_at("s1", t0 + Duration::from_secs(7)).is_none(), "s1 was the least recently used");
        assert!(sessions.get_at("s0", t0 + Duration::from_secs(7)).is_some());
        // None idle: refused.
        let open: Vec<Arc<ClientSession>> = lock(&sessions.map).values().cloned().collect();
        let streams: Vec<_> = open.iter().map(|s| s.open_stream()).collect();
        assert!(matches!(
            sessions.insert_at("more".into(), session(), t0 + Duration::from_secs(8)),
            Err(TooManySessions)
        ));
        drop(streams);
    }
}
