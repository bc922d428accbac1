//! `mcpx serve`'s stdin and stdout, kept off tokio's blocking pool: the client's lines
//! are read by one thread of their own, which also sends each to the daemon, and the
//! answers are written to stdout by whoever has them, so a call crosses no thread on its
//! way through `serve` (tokio's `stdin()` and `stdout()` hand every read and write to a
//! pool thread and back: two thread wake-ups per call, each tens of microseconds).
//!
//! stdin is read with blocking reads, never made non-blocking: it may be a file, a pipe
//! or a terminal, and a non-blocking flag would be shared with every process holding it.

use std::future::Future;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::Bytes;

/// The size of the buffer stdin is read through, in bytes.
const READ_BUFFER: usize = 64 * 1024;

/// serve's stdout: each line is written whole, under stdout's lock, in the order the
/// writers take it, so lines from concurrent relays never interleave and a relay closed
/// in the middle (a cancelled request) never leaves half a line.
///
/// A write blocks the thread that makes it (the runtime's, mostly) until the client has
/// room for the line. So a client must read stdout while it writes stdin, as MCP
/// clients do: one that writes on without reading, past what stdout's pipe and the
/// daemon's socket hold, stalls both ways until it reads (before, a queue and a pool
/// thread kept the runtime free and stdin read meanwhile).
#[derive(Default)]
pub struct Out {
    /// stdout failed (the client closed it): nothing more is written.
    broken: AtomicBool,
}

impl Out {
    /// Writes `line` (a `\n` is added when it has none) and flushes it; false once
    /// stdout has failed, after which nothing more is written.
    pub fn line(&self, line: &[u8]) -> bool {
        if self.broken.load(Ordering::Relaxed) {
            return false;
        }
        let mut out = std::io::stdout().lock();
        let written = if line.ends_with(b"\n") {
            out.write_all(line)
        } else {
            // One write for the line and its end, as the client may read it at once.
            let mut whole = Vec::with_capacity(line.len() + 1);
            whole.extend_from_slice(line);
            whole.push(b'\n');
            out.write_all(&whole)
        };
        let ok = written.and_then(|()| out.flush()).is_ok();
        if !ok {
            self.broken.store(true, Ordering::Relaxed);
        }
        ok
    }
}

/// Reads stdin's lines on a thread of its own until stdin ends (or fails) and runs
/// `each` for every line that is not blank, on that thread, one after the other, on the
/// current tokio runtime ([`tokio::runtime::Handle::block_on`]: the runtime's own thread
/// keeps driving its I/O and its tasks meanwhile). Each line keeps its `\n`, when it had
/// one. Resolves when stdin has ended and the last `each` returned.
///
/// Errors: none; a thread that cannot be started is logged and reads nothing.
pub async fn each_line<F, Fut>(mut each: F)
where
    F: FnMut(Bytes) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let handle = tokio::runtime::Handle::current();
    let (done, ended) = tokio::sync::oneshot::channel::<()>();
    let reader = move || {
        let mut stdin = std::io::BufReader::with_capacity(READ_BUFFER, std::io::stdin().lock());
        loop {
            let mut line = Vec::new();
            match stdin.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if !line.trim_ascii().is_empty() {
                handle.block_on(each(Bytes::from(line)));
            }
        }
        drop(done);
    };
    if let Err(e) = std::thread::Builder::new().name("mcpx-serve-stdin".to_owned()).spawn(reader) {
        tracing::error!(error = %e, "could not start the thread that reads stdin; free some memory and start mcpx serve again");
        return;
    }
    // Sent never: the sender is dropped when the reader ends, normally or not.
    let _ = ended.await;
}
