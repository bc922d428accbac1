//! A server's output as a byte stream: stdout framed into messages, stderr kept in
//! the link's ring and logged. Shared by the transports that carry a stdio byte
//! stream (the direct child and the supervised one).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use mcpx_proto::{IdScanner, LineDecoder, LineEvent, Message};
use tokio::sync::mpsc;

use super::link::{Inbound, LinkInfo};

/// The longest stdout or stderr line shown in the log.
const LOG_LINE_MAX: usize = 512;

/// Turns a server's stdout byte stream into [`Inbound`] items: frames lines,
/// parses messages, and skips (counting and logging) lines that are not JSON-RPC;
/// a skipped line whose top-level id can be read is reported as
/// [`Inbound::Undecodable`], so the request it answers fails at once.
/// Shared by every transport that carries a stdio byte stream.
pub(super) struct StdoutParser {
    decoder: LineDecoder,
    frames: Vec<LineEvent>,
    info: Arc<LinkInfo>,
    server: String,
}

impl StdoutParser {
    /// A parser for the stdout of `server`, dropping messages over `max_message_bytes`.
    pub(super) fn new(max_message_bytes: usize, info: Arc<LinkInfo>, server: String) -> StdoutParser {
        StdoutParser { decoder: LineDecoder::new(max_message_bytes), frames: Vec::new(), info, server }
    }

    /// Feeds bytes; returns false when the receiver is gone.
    pub(super) async fn feed(&mut self, bytes: &[u8], tx: &mpsc::Sender<Inbound>) -> bool {
        self.decoder.push(bytes, &mut self.frames);
        self.drain(tx).await
    }

    /// Ends the stream (an unterminated last line counts).
    pub(super) async fn finish(&mut self, tx: &mpsc::Sender<Inbound>) -> bool {
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
                    match Message::parse_owned_line(line) {
                        Ok(messages) => {
                            for m in messages {
                                if tx.send(Inbound::Message(m)).await.is_err() {
                                    return false;
                                }
                            }
                            continue;
                        }
                        Err((e, line)) => {
                            let skipped = self.info.skipped_lines.fetch_add(1, Ordering::Relaxed) + 1;
                            self.info.dropped_bytes.fetch_add(line.len() as u64 + 1, Ordering::Relaxed);
                            // The first lines, then one in 10,000 (with the count): a
                            // server flooding stdout must not flood the log.
                            if skipped <= 10 || skipped % 10_000 == 0 {
                                let shown = String::from_utf8_lossy(&line[..line.len().min(LOG_LINE_MAX)]).into_owned();
                                tracing::warn!(server = %self.server, error = %e, line = %shown, skipped, "skipped a stdout line that is not a JSON-RPC message");
                            }
                            match IdScanner::scan(&line) {
                                Some(id) => Inbound::Undecodable { id, reason: e.to_string() },
                                None => continue,
                            }
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
pub(super) struct StderrSink {
    info: Arc<LinkInfo>,
    server: String,
    line: Vec<u8>,
    /// Lines seen, for rate-limiting the log.
    lines: u64,
}

impl StderrSink {
    /// A sink for the stderr of `server`, keeping it in `info`'s ring.
    pub(super) fn new(info: Arc<LinkInfo>, server: String) -> StderrSink {
        StderrSink { info, server, line: Vec::new(), lines: 0 }
    }

    /// Keeps `bytes` in the ring and logs the lines they complete.
    pub(super) fn push(&mut self, bytes: &[u8]) {
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

    /// Logs the unterminated last line, if any (the stream ended).
    pub(super) fn flush(&mut self) {
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
