//! `mcpx serve`'s stdin and stdout, kept off tokio's blocking pool: the client's lines
//! are read by one thread of their own, which also sends each to the daemon, and the
//! answers are written to stdout by another, so a call crosses one thread wake-up on
//! its way through `serve` (tokio's `stdin()` and `stdout()` hand every read and write
//! to a pool thread and back: four wake-ups per call, two on the call's way, each tens
//! of microseconds).
//!
//! stdin is read with blocking reads, never made non-blocking: it may be a file, a pipe
//! or a terminal, and a non-blocking flag would be shared with every process holding it.

use std::future::Future;
use std::io::{BufRead, Write};

use axum::body::Bytes;
use tokio::sync::{mpsc, oneshot};

/// The size of the buffer stdin is read through, in bytes.
const READ_BUFFER: usize = 64 * 1024;

/// serve's stdout, written by a thread of its own: each line is written whole, in the
/// order the lines were queued, so lines from concurrent relays never interleave and a
/// relay closed in the middle (a cancelled request) never leaves half a line.
///
/// The thread, not the runtime, waits for a client that does not read: a client that
/// writes on without reading (its stdin and our stdout both full) must not stop the
/// runtime, which the stdin thread needs to send to the daemon. When [`OUT_QUEUE`]
/// lines wait, queueing waits too (as a task, never blocking the runtime).
pub struct Out {
    queue: mpsc::Sender<(Vec<u8>, Option<oneshot::Sender<()>>)>,
}

/// Lines waiting for stdout.
const OUT_QUEUE: usize = 64;

impl Out {
    /// Starts the thread that writes stdout.
    ///
    /// Errors: the message of an [`std::io::Error`] when the thread cannot be started.
    pub fn start() -> std::io::Result<Out> {
        let (queue, mut lines) = mpsc::channel::<(Vec<u8>, Option<oneshot::Sender<()>>)>(OUT_QUEUE);
        let writer = move || {
            let mut out = std::io::stdout().lock();
            let mut broken = false;
            while let Some((line, written)) = lines.blocking_recv() {
                if !broken && !line.is_empty() {
                    // A client that closed stdout reads no more: the rest is dropped.
                    broken = out.write_all(&line).and_then(|()| out.flush()).is_err();
                }
                if let Some(written) = written {
                    let _ = written.send(());
                }
            }
        };
        std::thread::Builder::new().name("mcpx-serve-stdout".to_owned()).spawn(writer)?;
        Ok(Out { queue })
    }

    /// Queues `line` for stdout (a `\n` is added when it has none).
    pub async fn line(&self, mut line: Vec<u8>) {
        if !line.ends_with(b"\n") {
            line.push(b'\n');
        }
        let _ = self.queue.send((line, None)).await;
    }

    /// Resolves when every line queued before it has been written (or dropped, stdout
    /// being closed).
    pub async fn flush(&self) {
        let (written, done) = oneshot::channel();
        if self.queue.send((Vec::new(), Some(written))).await.is_ok() {
            let _ = done.await;
        }
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
