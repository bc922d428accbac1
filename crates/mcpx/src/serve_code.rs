//! `mcpx serve --code`: an MCP server over stdio (MCP 2025-11-25, Transports, "stdio";
//! and 2026-07-28 requests, which need no `initialize`)
//! offering exactly two tools, `mcpx_types` (find tools, and get the TypeScript
//! declarations of those chosen) and `mcpx_exec` (run code in the sandbox and answer
//! what it returns), so a client pays context only for what it uses
//! (docs/code-mode.md, "serve --code"). Code runs from this process, as one caller
//! with its own pool session, like `mcpx serve`'s; with `--server`, only that server.

use std::sync::Arc;

use mcpx_api::client::{Client, Method};
use mcpx_api::{ApiError, Caller, SearchHit, SearchRequest};
use mcpx_proto::era::{self, Era};
use mcpx_proto::mcp::error_code;
use mcpx_proto::{Message, MessageKind, ParseError};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use crate::code::command::{deno_dir, returned_text};
use crate::code::sandbox::{self, Access, Limits};
use crate::code::{Context, Job, Logs, Outcome, Source};

/// Runs until stdin ends.
///
/// Errors: Deno is not installed (`usage`, with how to install it); the cache
/// directory cannot hold Deno's.
pub async fn run(
    client: Client,
    opened: &mcpx_api::paths::OpenDirs,
    env: &std::collections::HashMap<String, String>,
    mut caller: Caller,
    server: Option<String>,
    unconfined: bool,
) -> Result<i32, ApiError> {
    let deno = sandbox::find_deno(env).map_err(|message| {
        ApiError::new(mcpx_api::ErrorKind::Usage, format!("`serve --code` runs code with Deno: {message}"))
    })?;
    // One pool session for every call of this process, like `mcpx serve`'s.
    caller.session = Some(format!("serve-{}-{}", std::process::id(), mcpx_daemon::schema::now()));
    let cx = Context {
        client,
        caller,
        runtime: opened.runtime.clone(),
        engine: sandbox::Engine::Deno(deno),
        deno_dir: deno_dir(opened)?,
        only: server,
        unconfined,
        via: "serve --code",
        for_client: Default::default(),
    };
    if unconfined {
        eprintln!("mcpx: {}", sandbox::unconfined_left_open(&cx.engine));
    }
    let cx = Arc::new(cx);
    let out = Arc::new(Mutex::new(tokio::io::stdout()));
    let version = Arc::new(std::sync::Mutex::new(String::new()));
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut running = tokio::task::JoinSet::new();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim().is_empty() {
            continue;
        }
        // Malformed lines, null ids and batches are answered as `mcpx serve` answers them
        // (JSON-RPC 2.0, sections 4.1, 5.1 and 6; batches only under 2025-03-26).
        let messages = match Message::parse_line(line.as_bytes()) {
            Ok(m) if !m.is_empty() => m,
            Ok(_) => {
                write(&out, Message::error_response("null", error_code::INVALID_REQUEST, "empty batch").as_str()).await;
                continue;
            }
            Err(e) => {
                let code = if matches!(e, ParseError::NotJson(_)) {
                    error_code::PARSE_ERROR
                } else {
                    error_code::INVALID_REQUEST
                };
                write(&out, Message::error_response("null", code, &e.to_string()).as_str()).await;
                continue;
            }
        };
        let requests: Vec<Value> = messages
            .iter()
            .filter(|m| m.kind() == MessageKind::Request)
            .filter_map(|m| serde_json::from_str(m.as_str()).ok())
            .collect();
        let (cx, out, version) = (cx.clone(), out.clone(), version.clone());
        if line.trim_start().starts_with('[') {
            let negotiated = version.lock().map(|v| v.clone()).unwrap_or_default();
            if negotiated != "2025-03-26" {
                let refusal = format!("JSON-RPC batches are not allowed under protocol revision {negotiated}");
                write(&out, Message::error_response("null", error_code::INVALID_REQUEST, &refusal).as_str()).await;
                continue;
            }
            running.spawn(async move {
                let mut answers = Vec::new();
                for request in &requests {
                    answers.push(reply(&cx, request, &version).await);
                }
                if !answers.is_empty() {
                    write(&out, &Value::Array(answers).to_string()).await;
                }
            });
            continue;
        }
        let Some(request) = requests.into_iter().next() else { continue };
        if request["method"] == "initialize" {
            // Answered before the next line is read, so the revision is known to it.
            write(&out, &reply(&cx, &request, &version).await.to_string()).await;
            continue;
        }
        running.spawn(async move { write(&out, &reply(&cx, &request, &version).await.to_string()).await });
    }
    // Requests still running when stdin ends are answered before leaving.
    while running.join_next().await.is_some() {}
    Ok(0)
}

/// The response to one request; `initialize` records the revision agreed on. A
/// 2026-07-28 request (its `_meta` says so) needs no `initialize`, and its result
/// carries what that revision adds (Basic, "Results"; "Caching"): `resultType`, and
/// `ttlMs` and `cacheScope` on `tools/list` and `server/discover`.
async fn reply(cx: &Context, request: &Value, version: &std::sync::Mutex<String>) -> Value {
    let id = request["id"].clone();
    let modern = match era::of(request, None) {
        Era::Modern(modern) => {
            note_client(cx, modern.client_info.as_ref());
            true
        }
        Era::Legacy => false,
        Era::Unsupported(asked) => {
            let supported = revisions();
            let error = json!({
                "code": era::UNSUPPORTED_PROTOCOL_VERSION,
                "message": format!("mcpx serve --code does not serve MCP revision {asked}; use one of {}", supported.join(", ")),
                "data": { "supported": supported, "requested": asked },
            });
            return json!({ "jsonrpc": "2.0", "id": id, "error": error });
        }
    };
    if request["method"] == "initialize" {
        note_client(cx, request["params"].get("clientInfo"));
    }
    match answer(cx, request).await {
        Ok(mut result) if modern => {
            if let Some(fields) = result.as_object_mut() {
                // What a session sees depends on its caller, as on the daemon's endpoint.
                mcpx_daemon::mcp::complete_result(request["method"].as_str().unwrap_or_default(), fields);
            }
            json!({ "jsonrpc": "2.0", "id": id, "result": result })
        }
        Ok(result) => {
            if let (Some("initialize"), Some(agreed)) = (request["method"].as_str(), result["protocolVersion"].as_str())
                && let Ok(mut v) = version.lock()
            {
                agreed.clone_into(&mut v);
            }
            json!({ "jsonrpc": "2.0", "id": id, "result": result })
        }
        Err((code, text)) => json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": text } }),
    }
}

/// Keeps the client's `clientInfo` (`info`), which its scripts' calls are recorded
/// under.
fn note_client(cx: &Context, info: Option<&Value>) {
    let name = info.and_then(mcpx_daemon::mcp::client_name);
    if let (Some(name), Ok(mut kept)) = (name, cx.for_client.lock()) {
        *kept = Some(name);
    }
}

/// Every revision this server answers, oldest first: the legacy ones `initialize`
/// negotiates, then 2026-07-28.
fn revisions() -> Vec<&'static str> {
    mcpx_proto::mcp::SUPPORTED_VERSIONS.iter().copied().chain([era::LATEST_MODERN]).collect()
}

/// Writes one line to stdout, whole.
async fn write(out: &Mutex<tokio::io::Stdout>, text: &str) {
    let mut out = out.lock().await;
    let _ = out.write_all(text.as_bytes()).await;
    let _ = out.write_all(b"\n").await;
    let _ = out.flush().await;
}

/// The result of one request, or its JSON-RPC error.
async fn answer(cx: &Context, message: &Value) -> Result<Value, (i64, String)> {
    let params = &message["params"];
    match message["method"].as_str().unwrap_or_default() {
        "initialize" => {
            let asked = params["protocolVersion"].as_str().unwrap_or_default();
            Ok(json!({
                "protocolVersion": mcpx_proto::mcp::negotiate(asked),
                "capabilities": { "tools": {} },
                "serverInfo": { "name": "mcpx", "version": env!("CARGO_PKG_VERSION") },
                "instructions": INSTRUCTIONS,
            }))
        }
        "server/discover" => {
            // 2026-07-28, Server, "server/discover": every revision this server answers.
            Ok(json!({
                "supportedVersions": revisions(),
                "capabilities": { "tools": {} },
                "instructions": INSTRUCTIONS,
                "_meta": { era::META_SERVER_INFO: { "name": "mcpx", "version": env!("CARGO_PKG_VERSION") } },
            }))
        }
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({ "tools": tools(cx.unconfined) })),
        "tools/call" => Ok(call(cx, params["name"].as_str().unwrap_or_default(), &params["arguments"]).await),
        other => Err((error_code::METHOD_NOT_FOUND, format!("mcpx serve --code does not offer `{other}`"))),
    }
}

const INSTRUCTIONS: &str = "Write TypeScript against your tools instead of calling them one by one: \
    find tools and their declarations with mcpx_types, then run code with mcpx_exec. Each server is a \
    global namespace of async functions (`await everything.echo({ message: \"hi\" })`); only what the \
    code returns comes back.";

/// What `mcpx_exec`'s description says a script reaches (docs/code-mode.md, "The sandbox").
const REACHES: &str = "The code reaches tools and nothing else: no file (not even by an import), no network or \
    socket, no environment variable, no process, no signal. The kernel enforces this (Landlock and seccomp), \
    and Deno's permissions again.";

/// The same, for `serve --code --unconfined`.
const REACHES_UNCONFINED: &str = "The code reaches tools and nothing else: no file (not even by an import), no \
    network, no environment variable, no process; Deno's permissions alone enforce this (the kernel does not \
    confine this server's scripts).";

/// The two tools (MCP 2025-11-25, Server Features, Tools, "Listing Tools"); `mcpx_exec`
/// says what a script reaches, as confined or not.
fn tools(unconfined: bool) -> Value {
    let reaches = if unconfined { REACHES_UNCONFINED } else { REACHES };
    json!([
        {
            "name": "mcpx_types",
            "description": "Find tools (by words) and get the TypeScript declarations of the servers or tools \
                you name, to call from mcpx_exec. With no arguments: the servers.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "search": { "type": "string", "description": "Words describing what you want to do." },
                    "servers": { "type": "array", "items": { "type": "string" }, "description": "Servers whose declarations you want." }
                }
            }
        },
        {
            "name": "mcpx_exec",
            "description": format!("Run TypeScript (the body of an async function) in a sandbox where each server is a \
                global namespace of typed async tool functions; answers what the code returns (JSON or text) \
                and what it logged; a tool error throws. {reaches}"),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "code": { "type": "string", "description": "The body of an async function; `return` what you want back." },
                    "timeout": { "type": "string", "description": "Stop after this long (30s, 5m); default 60s, at most 10m." }
                },
                "required": ["code"]
            }
        }
    ])
}

/// A tool's `CallToolResult`: text, and `isError` when it failed.
fn result(text: String, is_error: bool) -> Value {
    json!({ "content": [{ "type": "text", "text": text }], "isError": is_error })
}

async fn call(cx: &Context, name: &str, arguments: &Value) -> Value {
    match name {
        "mcpx_types" => match types(cx, arguments).await {
            Ok(text) => result(text, false),
            Err(e) => result(e.message, true),
        },
        "mcpx_exec" => exec(cx, arguments).await,
        other => result(format!("no tool named `{other}`: this server offers mcpx_types and mcpx_exec"), true),
    }
}

async fn types(cx: &Context, arguments: &Value) -> Result<String, ApiError> {
    let mut text = String::new();
    if let Some(words) = arguments["search"].as_str().filter(|w| !w.trim().is_empty()) {
        let req =
            SearchRequest { caller: cx.caller.clone(), words: words.split_whitespace().map(str::to_owned).collect() };
        let hits: Vec<SearchHit> =
            serde_json::from_slice(&cx.client.call(Method::POST, "/v1/search", Some(&req)).await?).unwrap_or_default();
        // Each hit by the name a script calls it with, then the server's own names.
        let callable = crate::code::callable_names(cx).await?;
        for hit in hits.iter().filter(|h| cx.only.as_deref().is_none_or(|o| o == h.server)) {
            let key = (hit.server.clone(), hit.tool.clone());
            let name = callable.get(&key).cloned().unwrap_or_else(|| format!("{}.{}", hit.server, hit.tool));
            text.push_str(&format!(
                "{name} (server `{}`, tool `{}`): {}\n",
                hit.server,
                hit.tool,
                hit.description.as_deref().unwrap_or_default()
            ));
        }
        if text.is_empty() {
            text.push_str("no tool matches those words\n");
        }
    }
    let servers: Vec<String> =
        arguments["servers"].as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_owned)).collect();
    if !servers.is_empty() || text.is_empty() {
        text.push_str(&crate::code::declarations_for(cx, &servers).await?);
    }
    Ok(text)
}

async fn exec(cx: &Context, arguments: &Value) -> Value {
    let Some(code) = arguments["code"].as_str() else {
        return result("mcpx_exec needs `code`: the body of an async function".to_owned(), true);
    };
    let mut limits = Limits::default();
    if !arguments["timeout"].is_null() && !arguments["timeout"].is_string() {
        return result("timeout: write it as a string such as \"30s\" or \"5m\" (at most 10m)".to_owned(), true);
    }
    if let Some(t) = arguments["timeout"].as_str() {
        match mcpx_daemon::config::units::parse_duration(t) {
            Ok(d) if d > sandbox::MAX_CLIENT_TIMEOUT => {
                return result(
                    format!("timeout: {t} is longer than the 10m an MCP client's script may run; ask for 10m or less"),
                    true,
                );
            }
            Ok(d) => limits.timeout = d,
            Err(e) => return result(format!("timeout: {e}"), true),
        }
    }
    let job =
        Job { source: Source::Code(code.to_owned()), args: Vec::new(), check: true, limits, access: Access::default() };
    let mut logs = Logs::Collect(String::new());
    let outcome = crate::code::execute(cx, &job, &mut logs).await;
    let logged = match logs {
        Logs::Collect(text) if !text.is_empty() => format!("\n[logged]\n{text}"),
        _ => String::new(),
    };
    match outcome {
        Ok(Outcome::Returned(returned)) => {
            let (text, cut) = returned_text(returned, false, job.limits.output_bytes);
            let note = if cut { format!("\n[mcpx: cut at {} bytes]", job.limits.output_bytes) } else { String::new() };
            result(format!("{text}{note}{logged}"), false)
        }
        Ok(Outcome::Failed(message)) => result(format!("{message}{logged}"), true),
        Err(e) => result(format!("{}{logged}", e.message.replacen(crate::code::NO_CHECK_ADVICE, "", 1)), true),
    }
}
