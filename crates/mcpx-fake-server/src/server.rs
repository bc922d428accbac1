//! The server proper: shared state, the stdin read loop, and dispatch of
//! every non-tool MCP method (`initialize`, lists, resources, prompts).
//!
//! Each request runs on its own thread so that many can be in flight at
//! once; notifications and responses are handled inline on the reader
//! thread because they are cheap and never block.

use std::collections::HashSet;
use std::io::{self, BufRead};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

use crate::config::Config;
use crate::conformance;
use crate::modern::{self, Era};
use crate::protocol::{
    self, INVALID_PARAMS, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND, Output, PARSE_ERROR, RESOURCE_NOT_FOUND,
};
use crate::record::Recorder;
use crate::state::{Gauge, Pending};
use crate::tools;

/// Protocol versions the server accepts when the client asks for them.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Version answered when the client asks for one we do not know.
const LATEST_VERSION: &str = "2025-11-25";

/// On stdin EOF, how long to let in-flight requests finish (so that
/// `printf ... | mcpx-fake-server` still prints every answer) before exiting.
const EOF_GRACE: Duration = Duration::from_secs(1);

/// Prefix of the opaque `tools/list` pagination cursor.
const CURSOR_PREFIX: &str = "fake-page:";

/// The answer a request handler wants written to stdout.
pub enum Reply {
    /// A normal `result`.
    Result(Value),
    /// A JSON-RPC `error` with this code and message.
    Error(i64, String),
    /// A normal `result`, written in `pieces` separate writes (`split`).
    Split {
        /// The result object.
        result: Value,
        /// How many writes to split the line into.
        pieces: usize,
        /// Pause between two writes.
        delay: Duration,
    },
    /// A normal `result`, sent twice with the same id (`duplicate`).
    Twice(Value),
    /// A complete, pre-serialized response line (`big`).
    RawLine(String),
    /// A response written as raw bytes in these pieces, line ending included
    /// (`bad_reply`).
    RawBytes(Vec<Vec<u8>>),
    /// The tool already wrote its response (`flood_later`).
    Sent,
}

/// Everything shared between the reader thread and the handler threads.
pub struct Server {
    /// Settings from the environment.
    pub config: Config,
    /// The single stdout writer.
    pub out: Output,
    /// The `counter` tool's value.
    pub counter: AtomicU64,
    /// Tools added at run time by `add_tool` (they behave like `echo`).
    pub extra_tools: Mutex<Vec<String>>,
    /// Resource URIs the client subscribed to (`resources/subscribe`).
    pub subscriptions: Mutex<HashSet<String>>,
    /// `tools/call` requests in flight (for `barrier` and `inflight`).
    pub calls: Gauge,
    /// All requests in flight (to finish them on stdin EOF).
    requests: Gauge,
    /// Server-to-client requests awaiting the client's response.
    pub pending: Pending,
    /// The open `subscriptions/listen` streams (modern era).
    pub listens: modern::Listens,
    /// The `FAKE_RECORD` transcript, if enabled (shared by every HTTP session).
    recorder: Option<Arc<Recorder>>,
}

impl Server {
    /// Creates the server state from its configuration, writing to stdout.
    pub fn new(config: Config) -> Self {
        let recorder = config.record.clone().map(|path| Arc::new(Recorder::new(path)));
        Self::with_output(config, Output::new(), recorder)
    }

    /// Creates the server state writing to `out` and recording to `recorder` (one
    /// engine per HTTP session, all sharing one recorder).
    pub fn with_output(config: Config, out: Output, recorder: Option<Arc<Recorder>>) -> Self {
        Self {
            config,
            out,
            counter: AtomicU64::new(0),
            extra_tools: Mutex::new(Vec::new()),
            subscriptions: Mutex::new(HashSet::new()),
            calls: Gauge::default(),
            requests: Gauge::default(),
            pending: Pending::default(),
            listens: modern::Listens::default(),
            recorder,
        }
    }

    /// Records one received message (`FAKE_RECORD`), as the stdin loop does.
    pub fn record(&self, line: &[u8], valid_json: bool) {
        if let Some(recorder) = &self.recorder {
            recorder.line(line, valid_json);
        }
    }
}

/// Reads stdin until EOF, dispatching each line, then exits with code 0.
pub fn run(server: Arc<Server>) -> ! {
    let mut stdin = io::stdin().lock();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match stdin.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(err) => {
                eprintln!("mcpx-fake-server: reading stdin: {err}");
                break;
            }
        }
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        if line.trim_ascii().is_empty() {
            continue;
        }
        let parsed = serde_json::from_slice::<Value>(line);
        server.record(line, parsed.is_ok());
        match parsed {
            Ok(message) => dispatch(&server, message),
            Err(err) => {
                server.out.send(&protocol::error_response(&Value::Null, PARSE_ERROR, &format!("Parse error: {err}")))
            }
        }
    }
    // EOF: end the listen streams, give in-flight requests a moment to answer, then
    // leave.
    modern::end_listens(&server);
    server.requests.wait_until(EOF_GRACE, |n| n == 0);
    std::process::exit(0)
}

/// Routes one parsed message: requests go to their own thread,
/// notifications are accepted silently, responses go to their waiter.
///
/// A request's thread runs with the caller's [`protocol::current_route`], so
/// everything it sends can be told apart by the transport.
pub fn dispatch(server: &Arc<Server>, message: Value) {
    match protocol::classify(message) {
        Incoming::Request { id, method, params } => {
            // Count the request *before* spawning, so EOF cannot miss it.
            let guard = RequestGuard::new(Arc::clone(server));
            let route = protocol::current_route();
            let spawned = thread::Builder::new().name(format!("req-{method}")).spawn(move || {
                protocol::with_route(route, || handle_request(&guard.0, &id, &method, &params));
            });
            if let Err(err) = spawned {
                eprintln!("mcpx-fake-server: cannot spawn a handler thread: {err}");
            }
        }
        // A cancelled listen stream ends; `notifications/initialized`, other
        // cancellations...: nothing to do for a fake.
        Incoming::Notification { method, params } => {
            if method == "notifications/cancelled" {
                modern::cancelled(server, &params);
            }
        }
        Incoming::Response { id, message } => {
            if !server.pending.deliver(&id, message) {
                eprintln!("mcpx-fake-server: ignoring response to unknown request id {id}");
            }
        }
        Incoming::Invalid => {
            server.out.send(&protocol::error_response(&Value::Null, INVALID_REQUEST, "Invalid Request"))
        }
    }
}

/// Keeps one request counted in [`Server::requests`] until dropped. It owns
/// an `Arc` so it can move into the handler thread, and is dropped (count
/// released) even if spawning the thread fails.
struct RequestGuard(Arc<Server>);

impl RequestGuard {
    fn new(server: Arc<Server>) -> Self {
        server.requests.increment();
        Self(server)
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.requests.decrement();
    }
}

/// Handles one request and writes its answer (in the modern era, see `modern.rs`).
fn handle_request(server: &Server, id: &Value, method: &str, params: &Value) {
    let modern = (server.config.era != Era::Legacy).then(|| modern::handle(server, id, method, params)).flatten();
    let reply = modern.unwrap_or_else(|| answer(server, id, method, params));
    send_reply(server, id, reply);
}

/// The answer to one request, as in the legacy era.
pub fn answer(server: &Server, id: &Value, method: &str, params: &Value) -> Reply {
    match method {
        "initialize" => Reply::Result(initialize(server, params)),
        "ping" | "logging/setLevel" => Reply::Result(json!({})),
        "tools/list" => tools_list(server, params),
        "tools/call" => {
            if let Some(path) = &server.config.meta_log {
                let line = format!("{}\n", params.get("_meta").unwrap_or(&Value::Null));
                let appended = std::fs::OpenOptions::new().create(true).append(true).open(path);
                if let Err(e) = appended.and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes())) {
                    eprintln!("mcpx-fake-server: FAKE_META_LOG {path}: {e}");
                }
            }
            let reply = {
                let _in_flight = server.calls.enter();
                tools::call(server, id, params)
            };
            if let Some(recorder) = &server.recorder {
                recorder.inflight(|| server.calls.max());
            }
            reply
        }
        "resources/list" => {
            let mut resources = vec![json!({ "uri": "fake://static", "name": "static", "mimeType": "text/plain" })];
            resources.extend(conformance::resources());
            Reply::Result(json!({ "resources": resources }))
        }
        "resources/templates/list" => {
            let mut templates = vec![json!({ "uriTemplate": "fake://item/{id}", "name": "item" })];
            templates.extend(conformance::resource_templates());
            Reply::Result(json!({ "resourceTemplates": templates }))
        }
        "resources/read" => resources_read(params),
        "resources/subscribe" | "resources/unsubscribe" => subscription(server, method, params),
        "prompts/list" => {
            let mut prompts = vec![json!({
                "name": "greet",
                "description": "Greets someone by name.",
                "arguments": [{ "name": "name" }],
            })];
            prompts.extend(conformance::prompts());
            Reply::Result(json!({ "prompts": prompts }))
        }
        "prompts/get" => prompts_get(params),
        "completion/complete" => Reply::Result(conformance::complete(params)),
        _ => Reply::Error(METHOD_NOT_FOUND, format!("Method not found: {method}")),
    }
}

/// Writes a handler's [`Reply`] for request `id`.
fn send_reply(server: &Server, id: &Value, reply: Reply) {
    match reply {
        Reply::Result(result) => server.out.send(&protocol::response(id, result)),
        Reply::Error(code, message) => {
            server.out.send(&protocol::error_response(id, code, &message));
        }
        Reply::Split { result, pieces, delay } => {
            let line = protocol::to_line(&protocol::response(id, result));
            server.out.write_in_pieces(&line, pieces, delay);
        }
        Reply::Twice(result) => {
            let message = protocol::response(id, result);
            server.out.send(&message);
            server.out.send(&message);
        }
        Reply::RawLine(line) => server.out.write_line(&line),
        Reply::RawBytes(pieces) => server.out.write_raw(&pieces),
        Reply::Sent => {}
    }
}

/// `initialize`: echo a supported requested version, else the latest one;
/// `FAKE_PROTOCOL_VERSION` overrides either.
fn initialize(server: &Server, params: &Value) -> Value {
    // FAKE_INIT_DELAY_MS: answer initialize late (tests kill a daemon mid-initialize).
    if let Some(ms) = std::env::var("FAKE_INIT_DELAY_MS").ok().and_then(|v| v.parse().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    let version = match (&server.config.protocol_version, requested) {
        (Some(forced), _) => forced.as_str(),
        (None, Some(asked)) if SUPPORTED_VERSIONS.contains(&asked) => asked,
        (None, _) => LATEST_VERSION,
    };
    json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": { "listChanged": true },
            "resources": { "listChanged": true, "subscribe": true },
            "prompts": { "listChanged": true },
            "logging": {},
            "completions": {},
        },
        "serverInfo": { "name": "mcpx-fake-server", "version": env!("CARGO_PKG_VERSION") },
        "instructions": if server.config.hostile {
            format!("A hostile server: {}", crate::hostile::TEXT)
        } else {
            "A fake server for tests.".to_owned()
        },
    })
}

/// `tools/list`, paginated when `FAKE_PAGE_SIZE` is set.
fn tools_list(server: &Server, params: &Value) -> Reply {
    let all = tools::list(server);
    let Some(page_size) = server.config.page_size else {
        return Reply::Result(json!({ "tools": all }));
    };
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(cursor) => match parse_cursor(cursor) {
            Some(start) if start <= all.len() => start,
            _ => return Reply::Error(INVALID_PARAMS, format!("Invalid cursor: {cursor}")),
        },
    };
    let end = (start + page_size).min(all.len());
    let mut result = json!({ "tools": all[start..end] });
    if end < all.len() {
        result["nextCursor"] = json!(format!("{CURSOR_PREFIX}{end}"));
    }
    Reply::Result(result)
}

/// Decodes a cursor made by [`tools_list`] into the index of the next tool.
fn parse_cursor(cursor: &Value) -> Option<usize> {
    cursor.as_str()?.strip_prefix(CURSOR_PREFIX)?.parse().ok()
}

/// `resources/read` of `fake://static` or `fake://item/{id}`.
fn resources_read(params: &Value) -> Reply {
    let uri = params.get("uri").and_then(Value::as_str).unwrap_or_default();
    if let Some(content) = conformance::read_resource(uri) {
        return Reply::Result(json!({ "contents": [content] }));
    }
    let text = if uri == "fake://static" {
        "static resource".to_owned()
    } else if let Some(item) = uri.strip_prefix("fake://item/") {
        format!("item {item}")
    } else {
        return Reply::Error(RESOURCE_NOT_FOUND, format!("Resource not found: {uri}"));
    };
    Reply::Result(json!({
        "contents": [{ "uri": uri, "mimeType": "text/plain", "text": text }],
    }))
}

/// `resources/subscribe` / `resources/unsubscribe`: records or forgets `uri`
/// (no update notifications are ever sent) and answers `{}`.
fn subscription(server: &Server, method: &str, params: &Value) -> Reply {
    let Some(uri) = params.get("uri").and_then(Value::as_str) else {
        return Reply::Error(INVALID_PARAMS, "missing `uri`".to_owned());
    };
    let mut subscriptions = server.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
    if method == "resources/subscribe" {
        subscriptions.insert(uri.to_owned());
    } else {
        subscriptions.remove(uri);
    }
    Reply::Result(json!({}))
}

/// `prompts/get` of `greet` (argument `name`, default "world").
fn prompts_get(params: &Value) -> Reply {
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
    if let Some(result) = conformance::get_prompt(name, params) {
        return Reply::Result(result);
    }
    if name != "greet" {
        return Reply::Error(INVALID_PARAMS, format!("Unknown prompt: {name}"));
    }
    let who = params.pointer("/arguments/name").and_then(Value::as_str).unwrap_or("world");
    Reply::Result(json!({
        "description": "Greets someone by name.",
        "messages": [{
            "role": "user",
            "content": { "type": "text", "text": format!("Hello, {who}!") },
        }],
    }))
}
