//! Who a request is for: the caller's context, which receives what the server
//! sends about the request, and where an MCP client's answers to forwarded server
//! requests are matched up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpx_proto::Message;
use tokio::sync::oneshot;

use crate::notices::{NoticeSender, Sent};
use crate::sync::lock;

/// How many times one request is sent again with its caller's answers before mcpx
/// gives up on it: the caller then gets a JSON-RPC error (-32603) saying the server
/// kept asking.
pub const MAX_INPUT_ROUNDS: usize = 8;

/// The methods whose result may be an `InputRequiredResult` (2026-07-28, Basic,
/// Patterns, "Multi Round-Trip Requests", "Supported Requests").
pub const INTERACTIVE: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// Who a request is for, so what the server sends about it reaches that caller
/// (design: "Pools", server-to-client requests).
#[derive(Debug, Default)]
pub struct CallContext {
    /// A label for `status` (`holders`): the caller's session, pid or key.
    pub label: String,
    /// Receives the notifications that belong to this request: progress (with the
    /// caller's own token restored) and, while it is the only request in flight,
    /// the server's log messages. The queue is bounded: a caller that reads too
    /// slowly loses notifications, never a server-to-client request.
    pub notify: Option<NoticeSender>,
    /// The roots the caller offers for `roots/list` (a shell caller: its working
    /// directory); `None` when it has none to offer.
    pub roots: Option<Vec<std::path::PathBuf>>,
    /// An MCP client that answers server requests itself: the methods it declared
    /// (`sampling/createMessage`, `elicitation/create`, `roots/list`) and where its
    /// answers arrive. Requests go to it over `notify`.
    pub client: Option<(Vec<String>, Arc<ClientReplies>)>,
    /// A caller of the control API (`mcpx call`, a script): what it does not answer
    /// is refused with a message for a person at a shell.
    pub shell: bool,
    /// The `Mcp-Param-*` headers of a modern client's HTTP request (MCP 2026-07-28,
    /// Transports, "Streamable HTTP", "Custom headers"), names lowercased: passed on
    /// with the request to a modern remote server.
    pub param_headers: Vec<(String, String)>,
    /// The log level the caller asked for with this very request (a modern client's
    /// `_meta` `io.modelcontextprotocol/logLevel`; MCP 2026-07-28, Server, Utilities,
    /// "Logging"), an index into [`super::LOG_LEVELS`]. `None`: the level its session
    /// set with `logging/setLevel`, if any (the instance's listeners keep it).
    pub log_level: Option<usize>,
    /// What the request carried besides its answer, for the activity record.
    pub heard: Heard,
}

/// What one request carried to its caller besides its answer: its progress and log
/// notifications, counted, and the server's requests the caller answered.
#[derive(Debug, Default)]
pub struct Heard {
    notifications: AtomicU64,
    requests: Mutex<Vec<HeardRequest>>,
}

/// A server's request to the caller during a request (`sampling/createMessage`,
/// `elicitation/create`), and how it was answered.
#[derive(Debug, Clone)]
pub struct HeardRequest {
    /// Its method.
    pub method: String,
    /// When it came, milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// How long the caller took to answer, microseconds.
    pub duration_us: u64,
    /// The answer: the caller's response, or `None` when it gave none in time.
    pub answer: Option<Message>,
}

impl Heard {
    /// Counts one notification carried to the caller.
    pub fn note(&self) {
        self.notifications.fetch_add(1, Ordering::Relaxed);
    }

    /// The notifications carried so far.
    pub fn notifications(&self) -> u64 {
        self.notifications.load(Ordering::Relaxed)
    }

    /// Keeps a server request the caller was asked.
    pub fn asked(&self, request: HeardRequest) {
        lock(&self.requests).push(request);
    }

    /// The server requests the caller was asked, taken.
    pub fn take_requests(&self) -> Vec<HeardRequest> {
        std::mem::take(&mut *lock(&self.requests))
    }
}

impl CallContext {
    /// Sends `request` (a server's request for input) to this caller, under an id of
    /// its own, when it is an MCP client or a shell form that declared it answers the
    /// request's method; its answer arrives on the receiver given. `None` when it
    /// does not answer that method, or its queue is gone.
    pub(crate) fn ask_client(&self, request: &Message) -> Option<oneshot::Receiver<Message>> {
        let (Some((can, replies)), Some(notify)) = (&self.client, &self.notify) else { return None };
        if !can.iter().any(|m| Some(m.as_str()) == request.method()) {
            return None;
        }
        let (client_id, answer) = replies.register();
        (notify.send(request.clone().with_id(&client_id)) == Sent::Queued).then_some(answer)
    }
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

    /// A new id for a request forwarded to the client, and where its answer arrives.
    pub(crate) fn register(&self) -> (String, oneshot::Receiver<Message>) {
        let id = format!("\"mcpx-{}\"", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(id.clone(), tx);
        (id, rx)
    }
}

/// How long an MCP client has to answer a forwarded server request.
pub const CLIENT_ANSWER_TIMEOUT: Duration = Duration::from_secs(300);
