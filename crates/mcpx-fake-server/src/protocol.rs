//! JSON-RPC 2.0 plumbing: message builders, classification of incoming
//! lines, and the single mutex-guarded writer of outgoing messages.
//!
//! Every byte the server sends goes through [`Output`] (to stdout, or to an
//! HTTP session's streams: a [`Sink`]), so two
//! handler threads can never interleave half-written messages — except on
//! purpose, via [`Output::write_in_pieces`] (the `split` tool), which still
//! holds the lock while it dribbles one message out in several writes.

use std::cell::Cell;
use std::io::{self, Write};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

/// JSON-RPC error code: the line was not valid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC error code: valid JSON but not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC error code: the method does not exist.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC error code: the params are invalid (unknown tool, bad cursor...).
pub const INVALID_PARAMS: i64 = -32602;
/// MCP error code: the requested resource does not exist.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// A successful response to the request with `id`.
pub fn response(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response to the request with `id` (use `Value::Null` when the
/// id could not be determined, e.g. for parse errors).
pub fn error_response(id: &Value, code: i64, message: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message },
    })
}

/// A notification (no id, no reply expected).
pub fn notification(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
}

/// A server-to-client request.
pub fn request(id: &Value, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// Serializes a message to its single-line wire form (without the newline).
///
/// This is the *only* serializer used for output, so tools that need to know
/// the exact length of a line (`big`, `stdout_flood`) get the same bytes
/// that are actually written.
pub fn to_line(message: &Value) -> String {
    // Serializing a `Value` cannot fail (all map keys are strings); fall back
    // to an error object rather than panicking just in case.
    serde_json::to_string(message).unwrap_or_else(|err| {
        format!(r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32603,"message":"serialize: {err}"}}}}"#)
    })
}

/// What an incoming JSON value turned out to be.
pub enum Incoming {
    /// A request: has both `method` and `id`; must be answered.
    Request {
        /// The request id, echoed back in the response.
        id: Value,
        /// The method name.
        method: String,
        /// The params (`Value::Null` if absent).
        params: Value,
    },
    /// A notification: has `method` but no `id`. Nothing to answer.
    Notification {
        /// The method name.
        method: String,
        /// The params (`Value::Null` if absent).
        params: Value,
    },
    /// A response to one of *our* server-to-client requests.
    Response {
        /// The id of the request being answered.
        id: Value,
        /// The whole message (holds `result` or `error`).
        message: Value,
    },
    /// Anything else (arrays, scalars, objects without method or id).
    Invalid,
}

/// Classifies a parsed JSON value as a request, notification or response.
pub fn classify(message: Value) -> Incoming {
    let Value::Object(map) = &message else {
        return Incoming::Invalid;
    };
    let id = map.get("id").cloned();
    match (map.get("method").and_then(Value::as_str), id) {
        (Some(method), Some(id)) => Incoming::Request {
            id,
            method: method.to_owned(),
            params: map.get("params").cloned().unwrap_or(Value::Null),
        },
        (Some(method), None) => Incoming::Notification {
            method: method.to_owned(),
            params: map.get("params").cloned().unwrap_or(Value::Null),
        },
        (None, Some(id)) if map.contains_key("result") || map.contains_key("error") => {
            Incoming::Response { id, message }
        }
        _ => Incoming::Invalid,
    }
}

thread_local! {
    /// The transport route of the request this thread handles (see [`with_route`]).
    static ROUTE: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The route of the request being handled on this thread, if any: an opaque number
/// the transport gave [`with_route`] when it dispatched the request (the HTTP mode
/// uses it to send a request's messages on that request's stream).
pub fn current_route() -> Option<u64> {
    ROUTE.with(Cell::get)
}

/// Runs `f` with [`current_route`] returning `route` on this thread. The server's
/// dispatch hands the route on to the thread it spawns for a request.
pub fn with_route<T>(route: Option<u64>, f: impl FnOnce() -> T) -> T {
    let before = ROUTE.with(|cell| cell.replace(route));
    let result = f();
    ROUTE.with(|cell| cell.set(before));
    result
}

/// Where the server's outgoing lines go: stdout (stdio mode) or an HTTP session.
pub trait Sink: Send + Sync {
    /// Delivers one complete line (a JSON-RPC message, or junk on purpose), without
    /// its newline.
    fn line(&self, line: &str);

    /// Delivers `line` in `pieces` separate flushed writes `delay` apart (`split`).
    fn pieces(&self, line: &str, pieces: usize, delay: Duration);

    /// Sends a priming event and closes the current request's stream, so that the
    /// client has to resume it (`test_reconnection`). Nothing to do on stdio.
    fn prime_and_close(&self) {}

    /// Delivers raw bytes, each piece in its own flushed write; the last piece
    /// carries the line ending (`bad_reply`). A sink that carries text only gets
    /// the pieces joined, decoded lossily, as one line.
    fn raw(&self, pieces: &[Vec<u8>]) {
        let joined = pieces.concat();
        self.line(String::from_utf8_lossy(&joined).trim_end_matches(['\r', '\n']));
    }
}

/// The process's stdout, as a [`Sink`].
struct Stdout;

impl Sink for Stdout {
    fn line(&self, line: &str) {
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        let mut out = io::stdout().lock();
        let _ = out.write_all(&buf).and_then(|()| out.flush());
    }

    fn pieces(&self, line: &str, pieces: usize, delay: Duration) {
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        let mut out = io::stdout().lock();
        for (i, piece) in split_pieces(&bytes, pieces).enumerate() {
            if i > 0 {
                thread::sleep(delay);
            }
            if out.write_all(piece).and_then(|()| out.flush()).is_err() {
                return;
            }
        }
    }

    fn raw(&self, pieces: &[Vec<u8>]) {
        let mut out = io::stdout().lock();
        for piece in pieces {
            if out.write_all(piece).and_then(|()| out.flush()).is_err() {
                return;
            }
        }
    }
}

/// Splits `bytes` into exactly `pieces` non-empty pieces (clamped to 1..=len); the
/// first `len % pieces` are one byte longer.
pub fn split_pieces(bytes: &[u8], pieces: usize) -> impl Iterator<Item = &[u8]> {
    let pieces = pieces.clamp(1, bytes.len().max(1));
    let (base, extra) = (bytes.len() / pieces, bytes.len() % pieces);
    let mut start = 0;
    (0..pieces).map(move |i| {
        let end = start + base + usize::from(i < extra);
        let piece = &bytes[start..end];
        start = end;
        piece
    })
}

/// The one and only writer of the server's messages, guarded by a mutex.
///
/// Write errors (e.g. the client closed our stdout) are ignored: the client
/// is gone, and stdin EOF will end the process shortly.
pub struct Output {
    /// Held for every write, so two messages never interleave.
    lock: Mutex<()>,
    /// Where the lines go.
    sink: Box<dyn Sink>,
}

impl Output {
    /// Writes to the process's stdout.
    pub fn new() -> Self {
        Self::with_sink(Box::new(Stdout))
    }

    /// Writes to `sink`.
    pub fn with_sink(sink: Box<dyn Sink>) -> Self {
        Self { lock: Mutex::new(()), sink }
    }

    /// Takes the writer's lock (nothing is written while it is held). A poisoned
    /// lock (a handler panicked mid-write) is still usable: the worst case is one
    /// garbled line, which is fine for a fake.
    pub fn lock(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Serializes `message` and writes it as one line, then flushes.
    pub fn send(&self, message: &Value) {
        if !crate::modern::admits(message) {
            return;
        }
        self.write_line(&to_line(message));
    }

    /// Writes `line` plus `"\n"` in a single write, then flushes.
    pub fn write_line(&self, line: &str) {
        let _guard = self.lock();
        self.sink.line(line);
    }

    /// Writes `line` plus `"\n"` in `pieces` separate writes, flushing after
    /// each and sleeping `delay` between them, while holding the lock the
    /// whole time (so no other message can land in the middle).
    pub fn write_in_pieces(&self, line: &str, pieces: usize, delay: Duration) {
        let _guard = self.lock();
        self.sink.pieces(line, pieces, delay);
    }

    /// Writes raw bytes in pieces, under the lock ([`Sink::raw`]).
    pub fn write_raw(&self, pieces: &[Vec<u8>]) {
        let _guard = self.lock();
        self.sink.raw(pieces);
    }

    /// See [`Sink::prime_and_close`].
    pub fn prime_and_close(&self) {
        let _guard = self.lock();
        self.sink.prime_and_close();
    }
}
