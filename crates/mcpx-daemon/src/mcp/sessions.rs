//! The MCP endpoint's client sessions (MCP 2025-11-25, Transports, "Session
//! Management"): who each client is, what it negotiated, the names of its last
//! listing, its GET stream, its requests being answered and its answers to server
//! requests forwarded to it.
//!
//! Nothing here knows the daemon. The daemon's announcements reach the clients
//! through [`ClientSessions::broadcast`], which the endpoint calls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mcpx_proto::Message;
use serde_json::Value;
use tokio::sync::{Notify, mpsc};

use crate::api::Caller;
use crate::instance::ClientReplies;
use crate::names::NameMap;
use crate::sync::lock;

/// How many events a session's GET stream buffers; beyond that, events the daemon
/// sends on its own are dropped (the client lists again on the next one).
const STREAM_BUFFER: usize = 64;

/// One MCP client session of the endpoint (not a server's session, nor a caller's
/// `--session`).
#[derive(Debug)]
pub struct ClientSession {
    /// Only this server, passed through (`/mcp/<server>`); `None`: the aggregate.
    pub(crate) server: Option<String>,
    /// Who the client is, for configuration and pool keys.
    pub(crate) caller: Caller,
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
            version,
            tools: Mutex::default(),
            prompts: Mutex::default(),
            stream: Mutex::default(),
            can_answer,
            replies: Arc::default(),
            inflight: Mutex::default(),
            discover,
        }
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

    /// Sends `message` on the GET stream, when one is open and has room.
    fn send_event(&self, message: &Message) {
        if let Some(tx) = lock(&self.stream).as_ref() {
            let _ = tx.try_send(sse_event(message.as_str()));
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

/// Every open client session of the MCP endpoint, by `Mcp-Session-Id`.
#[derive(Debug, Default)]
pub struct ClientSessions {
    map: Mutex<HashMap<String, Arc<ClientSession>>>,
}

impl ClientSessions {
    /// Adds `session` under a new id, which it returns: 32 hex digits from a hash of
    /// the time, the pid and `seed` (the `initialize` request's id).
    pub fn insert(&self, session: ClientSession, seed: &str) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(format!("{:?}{}", std::time::SystemTime::now(), std::process::id()).as_bytes());
        h.update(seed.as_bytes());
        let id: String = h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect();
        lock(&self.map).insert(id.clone(), Arc::new(session));
        id
    }

    /// The session with this id.
    pub fn get(&self, id: &str) -> Option<Arc<ClientSession>> {
        lock(&self.map).get(id).cloned()
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
