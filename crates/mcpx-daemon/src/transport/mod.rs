//! Transports: how the daemon exchanges MCP messages with one server instance.
//!
//! A transport turns a launch request into a [`Link`]: a channel of messages to the
//! server, a channel of what comes back, and shared facts about the process (pid,
//! stderr tail, counters). The instance and the pool see only the `Link`, so who
//! owns the server's pipes (the daemon directly today, a supervisor process later,
//! or an HTTP session for remote servers) is swapped behind [`Launcher`] alone.

pub mod http;
pub mod stdio;
pub mod supervised;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use mcpx_proto::{LineDecoder, LineEvent, Message};
use tokio::sync::mpsc;

use crate::ring::Ring;

/// A boxed future, as the object-safe [`Launcher`] trait returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Who an instance is: what its supervisor records so a later daemon can adopt it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The server's configured name.
    pub server: String,
    /// The full fingerprint (instances are keyed by it).
    pub fingerprint: String,
    /// The fingerprint as written (the schema cache key).
    pub cache_key: String,
    /// The pool key.
    pub key: String,
    /// `shared` or `exclusive`.
    pub sharing: String,
}

/// What to run for one instance of a stdio server, fully resolved: `${VAR}`s
/// expanded, the program found on PATH, the environment complete.
#[derive(Clone)]
pub struct LaunchSpec {
    /// Who the instance is.
    pub identity: Identity,
    /// Run it under a supervisor (`supervised`, the default) or as the daemon's child.
    pub supervised: bool,
    /// The supervisor's unattached stdout buffer (`bufferBytes`).
    pub buffer_bytes: u64,
    /// `orphanTimeout`; `None`: never.
    pub orphan_timeout: Option<Duration>,
    /// How long the start may take (`startTimeout`); `None`: no limit.
    pub start_timeout: Option<Duration>,
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
            .field("server", &self.identity.server)
            .field("command", &self.command)
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
    /// The supervisor restarted the server: a new process with this pid runs and
    /// needs a new `initialize`.
    Restarted(u32),
    /// A request could not be delivered to a remote server, or its answer not read:
    /// `id` is the request's upstream id (raw JSON).
    Failed {
        /// The request's id.
        id: String,
        /// What went wrong.
        error: http::RemoteError,
    },
    /// The server is gone. Always the last item.
    Exited(ExitInfo),
    /// The link to the server is gone without an exit status (its supervisor died,
    /// or a newer daemon took it over). Always the last item.
    Lost(String),
}

/// A request to the server side of a link.
#[derive(Debug)]
pub enum Outbound {
    /// Write one message.
    Message(Message),
    /// Stop the server: close stdin, wait, SIGTERM the group, wait, SIGKILL the group.
    /// The link then reports [`Inbound::Exited`].
    Terminate,
    /// Stop the server and start it again (same spec, new pid); the link reports
    /// [`Inbound::Restarted`]. Only supervised links can.
    Restart,
    /// Keep this MCP session (the `initialize` result, JSON) where a later daemon
    /// finds it. Only supervised links keep it; others ignore it.
    StoreSession(String),
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
    /// For a remote server: its URL as written.
    pub remote: Option<String>,
}

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
            remote: None,
        }
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

/// The daemon's end of one server instance.
#[derive(Debug)]
pub struct Link {
    /// Messages and commands to the server.
    pub tx: mpsc::Sender<Outbound>,
    /// Messages and events from the server; ends with [`Inbound::Exited`].
    pub rx: mpsc::Receiver<Inbound>,
    /// Shared facts about the process.
    pub info: std::sync::Arc<LinkInfo>,
    /// The epoch to carry in upstream ids: from the supervisor's hello, else 1.
    pub epoch: u32,
    /// An MCP session a previous daemon kept for this instance (the `initialize`
    /// result, JSON): the instance resumes it instead of initializing.
    pub resumed: Option<String>,
}

/// The longest stdout or stderr line shown in the log.
const LOG_LINE_MAX: usize = 512;

/// Turns a server's stdout byte stream into [`Inbound`] items: frames lines,
/// parses messages, and skips (counting and logging) lines that are not JSON-RPC.
/// Shared by every transport that carries a stdio byte stream.
pub(crate) struct StdoutParser {
    decoder: LineDecoder,
    frames: Vec<LineEvent>,
    info: std::sync::Arc<LinkInfo>,
    server: String,
}

impl StdoutParser {
    pub(crate) fn new(max_message_bytes: usize, info: std::sync::Arc<LinkInfo>, server: String) -> StdoutParser {
        StdoutParser { decoder: LineDecoder::new(max_message_bytes), frames: Vec::new(), info, server }
    }

    /// Feeds bytes; returns false when the receiver is gone.
    pub(crate) async fn feed(&mut self, bytes: &[u8], tx: &mpsc::Sender<Inbound>) -> bool {
        self.decoder.push(bytes, &mut self.frames);
        self.drain(tx).await
    }

    /// Ends the stream (an unterminated last line counts).
    pub(crate) async fn finish(&mut self, tx: &mpsc::Sender<Inbound>) -> bool {
        self.decoder.finish(&mut self.frames);
        self.drain(tx).await
    }

    async fn drain(&mut self, tx: &mpsc::Sender<Inbound>) -> bool {
        for frame in std::mem::take(&mut self.frames) {
            let item = match frame {
                LineEvent::Line(line) => {
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    match Message::parse_line(&line) {
                        Ok(messages) => {
                            for m in messages {
                                if tx.send(Inbound::Message(m)).await.is_err() {
                                    return false;
                                }
                            }
                            continue;
                        }
                        Err(e) => {
                            let skipped = self.info.skipped_lines.fetch_add(1, Ordering::Relaxed) + 1;
                            self.info.dropped_bytes.fetch_add(line.len() as u64 + 1, Ordering::Relaxed);
                            // The first lines, then one in 10,000 (with the count): a
                            // server flooding stdout must not flood the log.
                            if skipped <= 10 || skipped % 10_000 == 0 {
                                let shown = String::from_utf8_lossy(&line[..line.len().min(LOG_LINE_MAX)]).into_owned();
                                tracing::warn!(server = %self.server, error = %e, line = %shown, skipped, "skipped a stdout line that is not a JSON-RPC message");
                            }
                            continue;
                        }
                    }
                }
                LineEvent::OversizeId(id) => Inbound::OversizeId(id),
                LineEvent::OversizeEnd { bytes, id } => {
                    self.info.dropped_bytes.fetch_add(bytes + 1, Ordering::Relaxed);
                    Inbound::Oversize { bytes, id }
                }
            };
            if tx.send(item).await.is_err() {
                return false;
            }
        }
        true
    }
}

/// Keeps a server's stderr in the link's ring and logs it line by line.
pub(crate) struct StderrSink {
    info: std::sync::Arc<LinkInfo>,
    server: String,
    line: Vec<u8>,
    /// Lines seen, for rate-limiting the log.
    lines: u64,
}

impl StderrSink {
    pub(crate) fn new(info: std::sync::Arc<LinkInfo>, server: String) -> StderrSink {
        StderrSink { info, server, line: Vec::new(), lines: 0 }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if let Ok(mut ring) = self.info.stderr.lock() {
            ring.push(bytes);
        }
        for &b in bytes {
            if b == b'\n' {
                self.flush();
            } else if self.line.len() < LOG_LINE_MAX {
                self.line.push(b);
            }
        }
    }

    pub(crate) fn flush(&mut self) {
        if !self.line.is_empty() {
            self.lines += 1;
            // The first 1,000 lines, then one in 1,000: all of it stays in the ring.
            if self.lines <= 1000 || self.lines % 1000 == 0 {
                tracing::info!(server = %self.server, "stderr: {}", String::from_utf8_lossy(&self.line));
            }
            self.line.clear();
        }
    }
}
