//! Transports: how the daemon exchanges MCP messages with one server instance.
//!
//! A transport turns a launch request into a [`Link`]: a channel of messages to the
//! server, a channel of what comes back, and shared facts about the process (pid,
//! stderr tail, counters). The instance and the pool see only the `Link`, so who
//! owns the server's pipes (the daemon directly today, a supervisor process later,
//! or an HTTP session for remote servers) is swapped behind [`Launcher`] alone.

pub mod stdio;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use mcpx_proto::Message;
use tokio::sync::mpsc;

use crate::ring::Ring;

/// A boxed future, as the object-safe [`Launcher`] trait returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What to run for one instance of a stdio server, fully resolved: `${VAR}`s
/// expanded, the program found on PATH, the environment complete.
#[derive(Clone)]
pub struct LaunchSpec {
    /// The server's configured name, for logs and errors.
    pub server: String,
    /// The command as written in the configuration, for messages.
    pub command: String,
    /// The executable, resolved.
    pub program: PathBuf,
    /// Arguments.
    pub args: Vec<OsString>,
    /// The complete environment (the daemon's plus the entry's `env`).
    pub env: BTreeMap<OsString, OsString>,
    /// Working directory.
    pub cwd: Option<PathBuf>,
    /// The largest message accepted from the server, in bytes (`maxMessageBytes`).
    pub max_message_bytes: usize,
}

impl fmt::Debug for LaunchSpec {
    // The environment and arguments may hold expanded secrets: never print them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaunchSpec")
            .field("server", &self.server)
            .field("program", &self.program)
            .finish_non_exhaustive()
    }
}

/// Starts server instances. One implementation per way of owning a server.
pub trait Launcher: Send + Sync + 'static {
    /// Starts the server and returns its link once the process runs (before MCP
    /// `initialize`, which the instance does over the link).
    fn launch(&self, spec: LaunchSpec) -> BoxFuture<'static, Result<Link, LaunchError>>;
}

/// Why a server process could not be started.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LaunchError {
    /// `exec` failed.
    #[error("cannot start `{command}`: {message}")]
    Spawn {
        /// The command as configured.
        command: String,
        /// The OS error.
        message: String,
    },
}

/// A message or event from the server side of a link.
#[derive(Debug)]
pub enum Inbound {
    /// One JSON-RPC message.
    Message(Message),
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
    /// The server is gone. Always the last item.
    Exited(ExitInfo),
}

/// A request to the server side of a link.
#[derive(Debug)]
pub enum Outbound {
    /// Write one message.
    Message(Message),
    /// Stop the server: close stdin, wait, SIGTERM the group, wait, SIGKILL the group.
    /// The link then reports [`Inbound::Exited`].
    Terminate,
}

/// How a server process ended. A code and a signal are kept distinct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ExitInfo {
    /// The exit code, when it exited by itself.
    pub code: Option<i32>,
    /// The signal that killed it.
    pub signal: Option<i32>,
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

/// Facts about the far end of a link, shared with status reporting.
#[derive(Debug)]
pub struct LinkInfo {
    /// The server process's pid, when there is a local process.
    pub pid: Option<u32>,
    /// The tail of the server's stderr (64 KiB).
    pub stderr: Mutex<Ring>,
    /// Lines on stdout that were not JSON-RPC messages, skipped.
    pub skipped_lines: AtomicU64,
    /// Bytes of stdout discarded: oversize messages and skipped lines.
    pub dropped_bytes: AtomicU64,
}

impl LinkInfo {
    /// Info for a process with this pid.
    pub fn new(pid: Option<u32>) -> LinkInfo {
        LinkInfo {
            pid,
            stderr: Mutex::new(Ring::new(Ring::STDERR_CAPACITY)),
            skipped_lines: AtomicU64::new(0),
            dropped_bytes: AtomicU64::new(0),
        }
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

/// The daemon's end of one server instance.
#[derive(Debug)]
pub struct Link {
    /// Messages and commands to the server.
    pub tx: mpsc::Sender<Outbound>,
    /// Messages and events from the server; ends with [`Inbound::Exited`].
    pub rx: mpsc::Receiver<Inbound>,
    /// Shared facts about the process.
    pub info: std::sync::Arc<LinkInfo>,
}
