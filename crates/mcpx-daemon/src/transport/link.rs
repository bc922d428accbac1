//! The link: what the daemon holds of one server instance, whichever transport
//! carries it. Its two channels, the facts shared with status reporting, and the
//! one error type of the transports.

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mcpx_proto::Message;
use tokio::sync::mpsc;

use crate::ring::Ring;

/// The daemon's end of one server instance.
#[derive(Debug)]
pub struct Link {
    /// Messages and commands to the server.
    pub tx: mpsc::Sender<Outbound>,
    /// Messages and events from the server; ends with [`Inbound::Exited`] or
    /// [`Inbound::Lost`].
    pub rx: mpsc::Receiver<Inbound>,
    /// Shared facts about the process.
    pub info: Arc<LinkInfo>,
    /// The epoch to carry in upstream ids: from the supervisor's hello, else 1.
    pub epoch: u32,
    /// An MCP session a previous daemon kept for this instance (the `initialize`
    /// result, JSON): the instance resumes it instead of initializing. `None` for a
    /// new instance, or for an adopted one whose previous daemon stored none.
    pub resumed: Option<String>,
    /// The era a previous daemon kept for this instance: a modern server's session
    /// (the `server/discover` facts, JSON), which has nothing to resume but must not
    /// be probed again. From a supervisor of attach protocol 1.1; `None` otherwise.
    pub era: Option<String>,
}

/// A message or event from the server side of a link.
#[derive(Debug)]
pub enum Inbound {
    /// One JSON-RPC message.
    Message(Message),
    /// A server request or notification sent on the answer stream of one of mcpx's
    /// requests (a remote server's SSE answer to a POST; MCP 2025-11-25, Transports,
    /// "Sending Messages to the Server"; 2026-07-28, Server, Utilities, "Logging"):
    /// it belongs to that request, so it is routed to that request's caller.
    Related {
        /// The server's request or notification.
        message: Message,
        /// The upstream id (raw JSON) of the request whose stream carried it.
        request: String,
    },
    /// A message over `maxMessageBytes` is being discarded; it carries this
    /// top-level id (raw JSON), so the request it answers can fail now.
    OversizeId(String),
    /// A discarded oversize message ended; `bytes` were dropped.
    Oversize {
        /// Length of the discarded message.
        bytes: u64,
        /// Its top-level id, if one was found.
        id: Option<String>,
    },
    /// A reply could not be decoded (an invalid UTF-8 byte, a raw control character
    /// in a string...) but its top-level id could be read: the request it answers
    /// fails now instead of waiting out its timeout.
    Undecodable {
        /// Its top-level id (raw JSON).
        id: String,
        /// Why it could not be decoded, from the JSON parser.
        reason: String,
    },
    /// The supervisor restarted the server: a new process with this pid runs and
    /// needs a new `initialize`.
    Restarted(u32),
    /// A request could not be delivered to a remote server, or its answer not read:
    /// `id` is the request's upstream id (raw JSON).
    Failed {
        /// The request's id.
        id: String,
        /// What went wrong ([`TransportError::Exchange`]).
        error: TransportError,
    },
    /// The server is gone. Always the last item.
    Exited(ExitInfo),
    /// The link to the server is gone without an exit status (its supervisor died,
    /// a newer daemon took it over, or a remote server cannot be reached). Always
    /// the last item.
    Lost(String),
}

/// A request to the server side of a link.
#[derive(Debug)]
pub enum Outbound {
    /// Write one message.
    Message(Message),
    /// Stop the server: close stdin, wait, SIGTERM the group, wait, SIGKILL the group
    /// (a remote session: `DELETE`). The link then reports [`Inbound::Exited`].
    Terminate,
    /// Stop the server and start it again (same spec, new pid); the link reports
    /// [`Inbound::Restarted`]. Only supervised links can.
    Restart,
    /// Keep this MCP session (the `initialize` result, JSON) where a later daemon
    /// finds it. Supervised and remote links keep it; a direct child cannot outlive
    /// the daemon, so its link ignores it.
    StoreSession(String),
    /// A modern request for a remote server with the `Mcp-Param-*` headers its caller
    /// sent (MCP 2026-07-28, Transports, "Streamable HTTP", "Custom headers"), passed
    /// on with it; only remote links receive it.
    Headed(Message, Vec<(String, String)>),
    /// Keep the era of a modern server (its `server/discover` session, JSON) where a
    /// later daemon finds it: a supervisor keeps it (attach protocol 1.1); the other
    /// links ignore it (the schema cache remembers the era per server).
    StoreEra(String),
}

/// How a server process ended. A code and a signal are kept distinct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ExitInfo {
    /// The exit code, when it exited by itself.
    pub code: Option<i32>,
    /// The signal that killed it.
    pub signal: Option<i32>,
}

impl ExitInfo {
    /// An end with neither code nor signal (a remote session ended, or the status
    /// could not be read).
    pub const ENDED: ExitInfo = ExitInfo { code: None, signal: None };
}

impl fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exited with code {c}"),
            (None, Some(s)) => {
                let name = nix::sys::signal::Signal::try_from(s).map(|s| s.as_str()).unwrap_or("unknown");
                write!(f, "killed by signal {s} ({name})")
            }
            (None, None) => write!(f, "ended"),
        }
    }
}

/// Why a transport could not start a server or carry a message: the one error
/// type the instance, the pool and the daemon see from `transport/`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The server could not be started, or its link not opened: `exec` failed, the
    /// supervisor did not come up, a remote URL or header is malformed.
    #[error("cannot start `{command}`: {message}")]
    Start {
        /// The command or URL as written in the configuration (never expanded: an
        /// expanded value may be a secret).
        command: String,
        /// What went wrong.
        message: String,
    },
    /// A message could not be delivered to a remote server, or its answer not read
    /// (an HTTP status, the connection, TLS, a timeout). The message says what to
    /// do and names the URL as written.
    #[error("{message}")]
    Exchange {
        /// What happened and what to do.
        message: String,
        /// A timeout (exit 5) rather than a failure (exit 4).
        timed_out: bool,
        /// The server cannot be reached at all (connect, TLS, DNS): the link ends.
        unreachable: bool,
    },
    /// A remote server needs a login the user has not done, or one that is over: the
    /// message says to run `mcpx auth login <server>` (error kind `auth`, exit 4).
    #[error("{message}")]
    Auth {
        /// What happened and what to do.
        message: String,
    },
    /// A launcher cannot be set up: the HTTP client cannot load the system's root
    /// certificates. The daemon cannot start.
    #[error("{0}")]
    Setup(String),
}

impl TransportError {
    /// A failed exchange that is neither a timeout nor unreachable.
    pub fn exchange(message: String) -> TransportError {
        TransportError::Exchange { message, timed_out: false, unreachable: false }
    }

    /// Whether a login is needed (error kind `auth`).
    pub fn needs_login(&self) -> bool {
        matches!(self, TransportError::Auth { .. })
    }

    /// Whether it is a timeout (exit 5) rather than a failure (exit 4).
    pub fn timed_out(&self) -> bool {
        matches!(self, TransportError::Exchange { timed_out: true, .. })
    }

    /// Whether the server cannot be reached at all, so the link ends.
    pub fn unreachable(&self) -> bool {
        matches!(self, TransportError::Exchange { unreachable: true, .. })
    }

    /// The same error with its message rewritten by `f` (to add a hint). A login's
    /// error keeps its own, which ends with what to run.
    pub fn map_message(self, f: impl FnOnce(&str) -> String) -> TransportError {
        match self {
            TransportError::Start { command, message } => TransportError::Start { command, message: f(&message) },
            TransportError::Exchange { message, timed_out, unreachable } => {
                TransportError::Exchange { message: f(&message), timed_out, unreachable }
            }
            TransportError::Setup(message) => TransportError::Setup(f(&message)),
            auth @ TransportError::Auth { .. } => auth,
        }
    }
}

/// The supervisor of a supervised link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorInfo {
    /// The supervisor's instance id (`sup/<id>.sock`).
    pub id: String,
    /// Its pid.
    pub pid: u32,
    /// The attach protocol version it speaks.
    pub protocol: String,
}

/// Facts about the far end of a link, shared with status reporting.
#[derive(Debug)]
pub struct LinkInfo {
    /// The server process's pid (0: none known); changes when a supervisor restarts it.
    pid: AtomicU32,
    /// The supervisor, for supervised links.
    pub supervisor: Option<SupervisorInfo>,
    /// The tail of the server's stderr (64 KiB).
    pub stderr: Mutex<Ring>,
    /// Lines on stdout that were not JSON-RPC messages, skipped.
    pub skipped_lines: AtomicU64,
    /// Bytes of stdout discarded: oversize messages, skipped lines, and what a
    /// supervisor dropped while no daemon was attached.
    pub dropped_bytes: AtomicU64,
    /// Stdout bytes a supervisor held for this daemon when it attached.
    pub buffered_at_attach: AtomicU64,
    /// Callers' requests waiting on this link's far end; while any do, a supervised
    /// link heartbeats its supervisor (`docs/attach-protocol.md`, "Heartbeat").
    pub awaiting: AtomicU64,
    /// For a remote server: its URL as written.
    pub remote: Option<String>,
    /// For a remote server: what becomes of its MCP session when this daemon exits
    /// without stopping it, one phrase for the log (kept for the next daemon, or an
    /// HTTP+SSE session ended); `None` while it has no session. The transport sets it as
    /// the session changes; the pool logs it as the daemon leaves the instance.
    pub handover: Mutex<Option<&'static str>>,
}

/// [`LinkInfo::handover`] of a remote session that a later daemon takes up.
pub const HANDOVER_KEPT: &str = "MCP session kept for the next daemon";

/// [`LinkInfo::handover`] of a remote session that ends with this daemon (HTTP+SSE).
pub const HANDOVER_ENDED: &str = "HTTP+SSE session ended: the MCP 2024-11-05 transport cannot be handed to another daemon; the next call opens a new one";

impl LinkInfo {
    /// Info for a process with this pid.
    pub fn new(pid: Option<u32>, supervisor: Option<SupervisorInfo>) -> LinkInfo {
        LinkInfo {
            pid: AtomicU32::new(pid.unwrap_or(0)),
            supervisor,
            stderr: Mutex::new(Ring::new(Ring::STDERR_CAPACITY)),
            skipped_lines: AtomicU64::new(0),
            dropped_bytes: AtomicU64::new(0),
            buffered_at_attach: AtomicU64::new(0),
            awaiting: AtomicU64::new(0),
            remote: None,
            handover: Mutex::new(None),
        }
    }

    /// Info for the session with a remote server at `url` (as written): no process.
    pub fn remote(url: String) -> LinkInfo {
        LinkInfo { remote: Some(url), ..LinkInfo::new(None, None) }
    }

    /// The server process's pid.
    pub fn pid(&self) -> Option<u32> {
        Some(self.pid.load(Ordering::Relaxed)).filter(|p| *p != 0)
    }

    /// Records a new server process.
    pub fn set_pid(&self, pid: u32) {
        self.pid.store(pid, Ordering::Relaxed);
    }

    /// The last `max` bytes of stderr as text.
    pub fn stderr_tail(&self, max: usize) -> String {
        self.stderr.lock().map(|r| r.tail(max)).unwrap_or_default()
    }

    /// Bytes dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped_bytes.load(Ordering::Relaxed)
    }
}
