//! The tool catalogue (`tools/list`) and the implementation of every tool
//! (`tools/call`). Each tool is a small fault or probe for the proxy under
//! test; see the crate documentation for the list.
//!
//! Conventions:
//! - a bad or missing argument is a *tool* error (`isError: true`), not a
//!   JSON-RPC error, as recommended by recent MCP revisions;
//! - an unknown tool name is a JSON-RPC error `-32602`.

use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::conformance;
use crate::protocol::{self, INVALID_PARAMS};
use crate::server::{Reply, Server};

/// How long `roots` and `sample` wait for the client's answer.
const CLIENT_REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// Size of one `stderr` tool write.
const STDERR_CHUNK: usize = 64 * 1024;

/// Target size of one `stdout_flood` notification, newline included.
const FLOOD_MESSAGE: usize = 1024;

/// What a tool implementation returns: `Err(text)` becomes an `isError`
/// result with that text.
type ToolResult = Result<Reply, String>;

/// Every built-in tool, as `(name, description, properties, required)`.
/// Properties are JSON Schema snippets.
fn builtin_specs() -> Vec<(&'static str, &'static str, Value, &'static [&'static str])> {
    let message = json!({ "message": { "type": "string" } });
    let ms = json!({ "ms": { "type": "integer", "minimum": 0 } });
    vec![
        ("echo", "Returns `message` as text, after an optional `delay_ms`.", message.clone(), &["message"]),
        ("counter", "Increments an in-memory counter and returns the new value.", json!({}), &[]),
        ("pid", "Returns the server's process id.", json!({}), &[]),
        (
            "env",
            "Returns the value of environment variable `name`, or an error \"unset\".",
            json!({ "name": { "type": "string" } }),
            &["name"],
        ),
        ("slow", "Sleeps `ms` milliseconds, then returns \"slept <ms>\".", ms.clone(), &["ms"]),
        (
            "split",
            "Echoes `message`, writing the response line in `pieces` writes `delay_ms` apart.",
            json!({
                "message": { "type": "string" },
                "pieces": { "type": "integer", "minimum": 1, "default": 5 },
                "delay_ms": { "type": "integer", "minimum": 0, "default": 5 },
            }),
            &["message"],
        ),
        (
            "big",
            "Returns a response whose JSON line is exactly `line_bytes` bytes long.",
            json!({ "line_bytes": { "type": "integer", "minimum": 0 } }),
            &["line_bytes"],
        ),
        ("junk", "Prints three non-JSON lines on stdout, then echoes `message`.", message.clone(), &["message"]),
        (
            "stderr",
            "Writes `bytes` bytes to stderr, then replies.",
            json!({ "bytes": { "type": "integer", "minimum": 0 } }),
            &["bytes"],
        ),
        (
            "exit",
            "Exits the process at once with `code`, without replying.",
            json!({ "code": { "type": "integer" } }),
            &["code"],
        ),
        (
            "progress",
            "Sends `count` progress notifications `interval_ms` apart, then replies.",
            json!({
                "count": { "type": "integer", "minimum": 0, "default": 3 },
                "interval_ms": { "type": "integer", "minimum": 0, "default": 150 },
            }),
            &[],
        ),
        (
            "barrier",
            "Replies once at least `n` tools/call requests are in flight at once.",
            json!({
                "n": { "type": "integer", "minimum": 0 },
                "timeout_ms": { "type": "integer", "minimum": 0, "default": 10000 },
            }),
            &["n"],
        ),
        ("inflight", "Returns the most tools/call requests ever in flight at once.", json!({}), &[]),
        (
            "add_tool",
            "Adds an echo-like tool called `name` and sends tools/list_changed.",
            json!({ "name": { "type": "string" } }),
            &["name"],
        ),
        ("duplicate", "Sends the echo response twice with the same id.", message, &["message"]),
        ("late", "Sleeps `ms` milliseconds, then replies (answers after a timeout).", ms, &["ms"]),
        ("roots", "Asks the client for roots/list and returns its answer.", json!({}), &[]),
        ("sample", "Asks the client for sampling/createMessage and returns its answer.", json!({}), &[]),
        (
            "stdout_flood",
            "Writes `bytes` bytes of logging notifications to stdout, then replies.",
            json!({ "bytes": { "type": "integer", "minimum": 0 } }),
            &["bytes"],
        ),
        (
            "flood_later",
            "Replies at once; `after_ms` later writes `bytes` bytes of logging notifications and then the exact count to the file `report`.",
            json!({
                "bytes": { "type": "integer", "minimum": 0 },
                "after_ms": { "type": "integer", "minimum": 0 },
                "report": { "type": "string" },
            }),
            &["bytes", "after_ms", "report"],
        ),
    ]
}

/// Builds one `tools/list` entry. `x-fake` is an unknown field on purpose:
/// tests check that it survives the proxy.
fn tool_entry(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": { "type": "object", "properties": properties, "required": required },
        "x-fake": true,
    })
}

/// All tools, built-ins first, then those added by `add_tool`.
pub fn list(server: &Server) -> Vec<Value> {
    let mut tools: Vec<Value> = builtin_specs()
        .into_iter()
        .map(|(name, description, properties, required)| tool_entry(name, description, properties, required))
        .collect();
    tools.extend(conformance::tools().into_iter().map(|mut tool| {
        tool["x-fake"] = json!(true);
        tool
    }));
    for name in extra_tools(server) {
        tools.push(tool_entry(
            &name,
            "Added at run time by add_tool; echoes `message`.",
            json!({ "message": { "type": "string" } }),
            &["message"],
        ));
    }
    tools
}

/// A snapshot of the names added by `add_tool`.
fn extra_tools(server: &Server) -> Vec<String> {
    server.extra_tools.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Runs `tools/call` for request `id` and returns the answer to write.
pub fn call(server: &Server, id: &Value, params: &Value) -> Reply {
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
    let empty = Map::new();
    let args = Args(params.get("arguments").and_then(Value::as_object).unwrap_or(&empty));
    let result = match name {
        "echo" => echo(&args),
        "counter" => {
            let value = server.counter.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(text(value))
        }
        "pid" => Ok(text(std::process::id())),
        "env" => env(&args),
        "slow" | "late" => slow(&args),
        "split" => split(&args),
        "big" => big(id, &args),
        "junk" => junk(server, &args),
        "stderr" => stderr(&args),
        "exit" => exit(server, &args),
        "progress" => progress(server, params, &args),
        "barrier" => barrier(server, &args),
        "inflight" => Ok(text(server.calls.max())),
        "add_tool" => add_tool(server, &args),
        "duplicate" => echo(&args).map(|reply| match reply {
            Reply::Result(result) => Reply::Twice(result),
            other => other,
        }),
        "roots" => ask_client(server, "roots/list", json!({})),
        "sample" => ask_client(
            server,
            "sampling/createMessage",
            json!({
                "messages": [{ "role": "user", "content": { "type": "text", "text": "Say hello." } }],
                "maxTokens": 16,
            }),
        ),
        "stdout_flood" => stdout_flood(server, &args),
        "flood_later" => Ok(flood_later(server, id, &args)),
        _ if extra_tools(server).iter().any(|extra| extra == name) => echo(&args),
        _ if name.starts_with(conformance::TOOL_PREFIX) || name == conformance::SCHEMA_TOOL => {
            match conformance::call_tool(server, name, params) {
                Some(reply) => Ok(reply),
                None => return Reply::Error(INVALID_PARAMS, format!("Unknown tool: {name}")),
            }
        }
        _ => return Reply::Error(INVALID_PARAMS, format!("Unknown tool: {name}")),
    };
    result.unwrap_or_else(|message| Reply::Result(tool_error(message)))
}

// ---------------------------------------------------------------------------
// Result helpers

/// A successful tool result with one text block.
fn text_result(text: impl ToString) -> Value {
    json!({ "content": [{ "type": "text", "text": text.to_string() }] })
}

/// [`text_result`] wrapped in a [`Reply`].
fn text(text: impl ToString) -> Reply {
    Reply::Result(text_result(text))
}

/// A failed tool result (`isError: true`) with one text block.
fn tool_error(text: impl ToString) -> Value {
    json!({ "content": [{ "type": "text", "text": text.to_string() }], "isError": true })
}

/// Typed access to `params.arguments`.
struct Args<'a>(&'a Map<String, Value>);

impl Args<'_> {
    /// A required string argument.
    fn str(&self, key: &str) -> Result<&str, String> {
        match self.0.get(key) {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(format!("argument `{key}` must be a string")),
            None => Err(format!("missing argument `{key}`")),
        }
    }

    /// A required non-negative integer argument.
    fn u64(&self, key: &str) -> Result<u64, String> {
        self.opt_u64(key)?.ok_or_else(|| format!("missing argument `{key}`"))
    }

    /// A non-negative integer argument with a default.
    fn u64_or(&self, key: &str, default: u64) -> Result<u64, String> {
        Ok(self.opt_u64(key)?.unwrap_or(default))
    }

    /// An optional non-negative integer argument (`null` counts as absent).
    fn opt_u64(&self, key: &str) -> Result<Option<u64>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => {
                value.as_u64().map(Some).ok_or_else(|| format!("argument `{key}` must be a non-negative integer"))
            }
        }
    }

    /// A required non-negative integer argument used as a size or count.
    fn usize(&self, key: &str) -> Result<usize, String> {
        to_usize(key, self.u64(key)?)
    }
}

/// Converts a u64 argument to usize (only fails on 32-bit targets).
fn to_usize(key: &str, value: u64) -> Result<usize, String> {
    usize::try_from(value).map_err(|_| format!("argument `{key}` is too large"))
}

// ---------------------------------------------------------------------------
// Tools

/// `echo` (and tools added by `add_tool`): returns `message`.
fn echo(args: &Args<'_>) -> ToolResult {
    let message = args.str("message")?;
    // An optional hold keeps concurrent calls in flight together (tests of sharing).
    thread::sleep(Duration::from_millis(args.u64_or("delay_ms", 0)?));
    Ok(text(message))
}

/// `env`: the value of environment variable `name`, or an error "unset".
fn env(args: &Args<'_>) -> ToolResult {
    std::env::var(args.str("name")?).map(text).map_err(|_| "unset".to_owned())
}

/// `slow` / `late`: sleeps `ms`, then replies `slept <ms>`.
fn slow(args: &Args<'_>) -> ToolResult {
    let ms = args.u64("ms")?;
    thread::sleep(Duration::from_millis(ms));
    Ok(text(format!("slept {ms}")))
}

/// `split`: an echo whose response line is written in several pieces.
fn split(args: &Args<'_>) -> ToolResult {
    let message = args.str("message")?;
    let pieces = to_usize("pieces", args.u64_or("pieces", 5)?)?;
    let delay = Duration::from_millis(args.u64_or("delay_ms", 5)?);
    Ok(Reply::Split { result: text_result(message), pieces, delay })
}

/// `big`: a response line of exactly `line_bytes` bytes (newline excluded),
/// padding the text block with `x`.
fn big(id: &Value, args: &Args<'_>) -> ToolResult {
    let line_bytes = args.usize("line_bytes")?;
    padded_line(line_bytes, |pad| protocol::response(id, text_result(pad)))
        .map(Reply::RawLine)
        .ok_or_else(|| format!("line_bytes {line_bytes} is too small for the response envelope"))
}

/// Serializes `build(padding)` so that the line is exactly `target` bytes,
/// where `padding` is a run of `x` (each `x` serializes to one byte).
/// Returns `None` if even an empty padding is longer than `target`.
fn padded_line(target: usize, build: impl Fn(&str) -> Value) -> Option<String> {
    let envelope = protocol::to_line(&build("")).len();
    let padding = "x".repeat(target.checked_sub(envelope)?);
    let line = protocol::to_line(&build(&padding));
    (line.len() == target).then_some(line)
}

/// `junk`: three non-JSON lines on stdout, then an echo.
fn junk(server: &Server, args: &Args<'_>) -> ToolResult {
    let message = args.str("message")?;
    for line in ["Processing request 1…", "{", "not json at all"] {
        server.out.write_line(line);
    }
    Ok(text(message))
}

/// `stderr`: writes exactly `bytes` bytes to stderr in 64 KiB chunks of `e`
/// (each ending with a newline), then replies.
fn stderr(args: &Args<'_>) -> ToolResult {
    let bytes = args.usize("bytes")?;
    let mut written = 0;
    while written < bytes {
        let size = STDERR_CHUNK.min(bytes - written);
        let mut chunk = vec![b'e'; size];
        chunk[size - 1] = b'\n';
        // Blocks while the stderr pipe is full: that is the point.
        io::stderr().write_all(&chunk).map_err(|err| format!("stderr write failed after {written} bytes: {err}"))?;
        written += size;
    }
    Ok(text(format!("wrote {written} bytes to stderr")))
}

/// `exit`: leaves at once with `code`, without replying.
fn exit(server: &Server, args: &Args<'_>) -> ToolResult {
    let code = match args.0.get("code") {
        Some(value) => value
            .as_i64()
            .and_then(|code| i32::try_from(code).ok())
            .ok_or("argument `code` must be a 32-bit integer")?,
        None => return Err("missing argument `code`".to_owned()),
    };
    // Hold the stdout lock so we never exit in the middle of another
    // thread's message.
    let _stdout = server.out.lock();
    eprintln!("exiting with {code}");
    std::process::exit(code)
}

/// `progress`: `count` progress notifications `interval_ms` apart (first at
/// once) if the caller sent a progress token, then `progress done <count>`.
fn progress(server: &Server, params: &Value, args: &Args<'_>) -> ToolResult {
    let count = args.u64_or("count", 3)?;
    let interval = Duration::from_millis(args.u64_or("interval_ms", 150)?);
    if let Some(token) = params.pointer("/_meta/progressToken") {
        for i in 1..=count {
            if i > 1 {
                thread::sleep(interval);
            }
            server.out.send(&protocol::notification(
                "notifications/progress",
                json!({
                    "progressToken": token,
                    "progress": i,
                    "total": count,
                    "message": format!("step {i} of {count}"),
                }),
            ));
        }
    }
    Ok(text(format!("progress done {count}")))
}

/// `barrier`: waits until at least `n` tools/call requests (this one
/// included) are in flight at the same time.
fn barrier(server: &Server, args: &Args<'_>) -> ToolResult {
    let n = args.usize("n")?;
    let timeout = Duration::from_millis(args.u64_or("timeout_ms", 10_000)?);
    match server.calls.wait_for_peak(timeout, n) {
        (_, true) => Ok(text(format!("barrier {n} reached"))),
        (in_flight, false) => Err(format!("barrier timed out with {in_flight} in flight")),
    }
}

/// `add_tool`: registers an echo-like tool, announces the change, replies.
fn add_tool(server: &Server, args: &Args<'_>) -> ToolResult {
    let name = args.str("name")?;
    {
        let mut extra = server.extra_tools.lock().unwrap_or_else(|p| p.into_inner());
        let builtin = builtin_specs().iter().any(|spec| spec.0 == name);
        if !builtin && !extra.iter().any(|existing| existing == name) {
            extra.push(name.to_owned());
        }
    }
    server.out.send(&protocol::notification("notifications/tools/list_changed", json!({})));
    Ok(text(format!("added tool {name}")))
}

/// `roots` / `sample`: sends a request to the client and waits for its
/// response; the result becomes our text, its error our `isError` text.
fn ask_client(server: &Server, method: &str, params: Value) -> ToolResult {
    let result = ask_client_raw(server, method, params)?;
    Ok(text(protocol::to_line(&result)))
}

/// Sends `method` to the client and waits for its response: its `result`, or
/// its error message (also on timeout) as `Err`.
pub fn ask_client_raw(server: &Server, method: &str, params: Value) -> Result<Value, String> {
    let (id, answer) = server.pending.register();
    server.out.send(&protocol::request(&json!(id), method, params));
    let Ok(message) = answer.recv_timeout(CLIENT_REPLY_TIMEOUT) else {
        server.pending.cancel(&id);
        return Err(format!("timed out waiting for the client's {method} response"));
    };
    if let Some(error) = message.get("error") {
        let text = match error.get("message").and_then(Value::as_str) {
            Some(text) => text.to_owned(),
            None => protocol::to_line(error),
        };
        return Err(text);
    }
    Ok(message.get("result").cloned().unwrap_or(Value::Null))
}

/// `stdout_flood`: about `bytes` bytes (exactly, unless `bytes` is smaller
/// than one minimal message) of ~1 KiB logging notifications, then
/// `wrote <n> bytes` with the exact count, newlines included.
/// `flood_later`: answers first, then floods stdout (while, in the tests, no daemon
/// is attached) and writes how many bytes it wrote to `report`; it never blocks on a
/// full pipe as long as someone drains stdout.
fn flood_later(server: &Server, id: &Value, args: &Args<'_>) -> Reply {
    let run = || -> Result<(), String> {
        let bytes = args.usize("bytes")?;
        let after = Duration::from_millis(args.u64("after_ms")?);
        let report = args.str("report")?;
        server.out.write_line(&protocol::to_line(&protocol::response(id, text_result("flooding later"))));
        thread::sleep(after);
        let written = flood(server, bytes)?;
        std::fs::write(report, written.to_string()).map_err(|e| format!("cannot write {report}: {e}"))
    };
    match run() {
        Ok(()) => Reply::Sent,
        Err(e) => Reply::Result(tool_error(e)),
    }
}

fn stdout_flood(server: &Server, args: &Args<'_>) -> ToolResult {
    let written = flood(server, args.usize("bytes")?)?;
    Ok(text(format!("wrote {written} bytes")))
}

/// Writes about `bytes` bytes of logging notifications; returns the exact count.
fn flood(server: &Server, bytes: usize) -> Result<usize, String> {
    let build = |data: &str| {
        protocol::notification(
            "notifications/message",
            json!({ "level": "info", "logger": "fake-flood", "data": data }),
        )
    };
    // Smallest possible message, newline included.
    let min = protocol::to_line(&build("")).len() + 1;
    let mut written = 0;
    while written < bytes {
        let remaining = bytes - written;
        let size = if remaining <= FLOOD_MESSAGE {
            remaining.max(min)
        } else if remaining - FLOOD_MESSAGE < min {
            // Leave a tail big enough for one last minimal message.
            remaining - min
        } else {
            FLOOD_MESSAGE
        };
        let line = padded_line(size - 1, build).ok_or("cannot size a flood message")?;
        server.out.write_line(&line);
        written += size;
    }
    Ok(written)
}
