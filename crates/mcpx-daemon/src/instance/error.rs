//! Why a request to an instance got no response: [`CallError`], worded for the user
//! with what to do.

use std::time::Duration;

use crate::transport::{ExitInfo, TransportError};

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
    /// connection, TLS, timeout): [`TransportError::Exchange`].
    #[error("{0}")]
    Transport(TransportError),
    /// A server that runs in a sandbox failed to start: `error`, and what to know of the
    /// sandbox (`note`: what confines it, what was refused if that can be known).
    #[error("{error}; {note}")]
    Confined {
        /// How it failed.
        error: Box<CallError>,
        /// About the sandbox.
        note: String,
    },
}

impl CallError {
    /// The error as the user reads it of `server`: "server `SERVER`: ERROR", or the
    /// error alone when it names the server already (a login's: "server `docs` needs
    /// a login").
    pub fn of_server(&self, server: &str) -> String {
        let named = format!("server `{server}`");
        let message = self.to_string();
        if message.starts_with(&named) { message } else { format!("{named}: {message}") }
    }
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
