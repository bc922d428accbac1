//! Answers one JSON-RPC request of a client session of the MCP endpoint: the lists
//! ([`crate::mcp::catalog`]), and `tools/call`, `prompts/get` and `resources/read`
//! mapped back to their server and forwarded through `Instance::forward`; a request
//! the client cancels is dropped, which cancels it upstream. What [`crate::policy`]
//! refuses is answered -32602 before anything is forwarded, and a passed-through
//! server's own `tools/list` is filtered by it.

use std::sync::Arc;

use mcpx_proto::Message;
use mcpx_proto::mcp::error_code;
use serde_json::{Value, json};

use crate::daemon::Daemon;
use crate::instance::CallContext;
use crate::mcp::catalog::{config, entry, left_out_owner, list, refused_name};
use crate::mcp::discover;
use crate::mcp::sessions::ClientSession;
use crate::notices::NoticeSender;
use crate::policy;
use crate::sync::lock;

/// [`answer`], stopped early when the client cancels the request: the work is
/// dropped, which sends `notifications/cancelled` to the server it was forwarded to.
/// Notifications that belong to the request (progress, and server requests for the
/// client) go to `notify`.
pub(crate) async fn cancellable(
    d: &Daemon,
    session: &ClientSession,
    request: Message,
    notify: Option<NoticeSender>,
) -> Message {
    let id = request.id().unwrap_or("null").to_owned();
    let stop = session.begin(&id);
    let response = tokio::select! {
        response = answer(d, session, &id, request, notify) => response,
        () = stop.notified() => Message::error_response(&id, error_code::INTERNAL_ERROR, "cancelled by the client"),
    };
    session.end(&id);
    response
}

/// Answers one request of a session; the response carries the request's own `id`.
async fn answer(
    d: &Daemon,
    session: &ClientSession,
    id: &str,
    request: Message,
    notify: Option<NoticeSender>,
) -> Message {
    let method = request.method().unwrap_or_default().to_owned();
    let params: Value =
        serde_json::from_str::<Value>(request.as_str()).map(|v| v["params"].clone()).unwrap_or(Value::Null);
    if session.discover {
        if let Some(response) = discover::answer(d, session, id, &method, &params).await {
            return response;
        }
    }
    // One server passed through: everything but ping goes to it as it is, lists included.
    if session.server.is_some() && method != "ping" {
        return forward(d, session, request, &params, notify).await;
    }
    let result = match method.as_str() {
        "ping" => Ok(json!({})),
        "logging/setLevel" => Ok(json!({})),
        "tools/list" => list(d, session, "tools").await,
        "prompts/list" => list(d, session, "prompts").await,
        "resources/list" => list(d, session, "resources").await,
        "resources/templates/list" => list(d, session, "resourceTemplates").await,
        "tools/call" | "prompts/get" | "resources/read" => return forward(d, session, request, &params, notify).await,
        // The 2026-07-28 revision's discovery: not offered, so such clients fall back to initialize.
        _ => Err((error_code::METHOD_NOT_FOUND, format!("method `{method}` is not offered by mcpx"))),
    };
    match result {
        Ok(v) => Message::response(id, &v.to_string()),
        Err((code, message)) => Message::error_response(id, code, &message),
    }
}

/// `tools/call`, `prompts/get`, `resources/read`: maps the name or URI back to its
/// server and forwards the request, byte-faithful but for the name or URI.
async fn forward(
    d: &Daemon,
    session: &ClientSession,
    request: Message,
    params: &Value,
    notify: Option<NoticeSender>,
) -> Message {
    let id = request.id().unwrap_or("null").to_owned();
    let method = request.method().unwrap_or_default().to_owned();
    let fail = |code: i64, message: String| Message::error_response(&id, code, &message);
    let (server, rewritten) = match (&session.server, method.as_str()) {
        (Some(s), _) => (s.clone(), params.clone()),
        (None, "resources/read") => {
            let uri = params["uri"].as_str().unwrap_or_default();
            let Some((server, original)) = uri.strip_prefix("mcpx://").and_then(|r| r.split_once('/')) else {
                return fail(error_code::INVALID_PARAMS, format!("unknown resource `{uri}`: list resources first"));
            };
            let mut p = params.clone();
            p["uri"] = Value::String(original.to_owned());
            (server.to_owned(), p)
        }
        (None, _) => {
            let exposed = params["name"].as_str().unwrap_or_default();
            let field = if method == "tools/call" { "tools" } else { "prompts" };
            let map = if field == "tools" { &session.tools } else { &session.prompts };
            let mut found = lock(map).original(exposed).map(|(s, t)| (s.to_owned(), t.to_owned()));
            if found.is_none() {
                let _ = list(d, session, field).await;
                found = lock(map).original(exposed).map(|(s, t)| (s.to_owned(), t.to_owned()));
            }
            let Some((server, original)) = found else {
                let what = &field[..field.len() - 1];
                // The policy's refusal, with the CLI's message, when it left the name out.
                if let Some(refusal) = refused_name(d, session, exposed).filter(|_| field == "tools") {
                    return policy::rpc_refusal(&id, &refusal);
                }
                // The name may belong to a server left out of the listing: say why.
                if let Some((name, error)) = left_out_owner(d, session, exposed) {
                    return fail(
                        error_code::INVALID_PARAMS,
                        format!("unknown {what}: `{exposed}`; server `{name}` is not available: {error}"),
                    );
                }
                return fail(error_code::INVALID_PARAMS, format!("unknown {what}: `{exposed}`"));
            };
            let mut p = params.clone();
            p["name"] = Value::String(original);
            (server, p)
        }
    };
    let config = match config(d, session) {
        Ok(c) => c,
        Err((code, message)) => return fail(code, message),
    };
    let entry = match entry(d, &config, &server) {
        Ok(e) => e,
        Err((code, message)) => return fail(code, message),
    };
    if method == "tools/call" {
        if let Err(refusal) = policy::check_tool(entry, rewritten["name"].as_str().unwrap_or_default()) {
            return policy::rpc_refusal(&id, &refusal);
        }
    }
    let (target, key) = match d.targets.for_caller(entry, &session.caller) {
        Ok(t) => t,
        Err(e) => return fail(error_code::INTERNAL_ERROR, e.message),
    };
    let timeout = entry.options.call_timeout;
    let lease = match d.pool.acquire(&target, &key, timeout).await {
        Ok(l) => l,
        Err(e) => return fail(error_code::INTERNAL_ERROR, format!("server `{server}`: {e}")),
    };
    // Passed through, the request goes as the client wrote it (byte for byte but its
    // id); mapped, only its params are rebuilt, and absent params stay absent.
    let upstream = if session.server.is_some() {
        request
    } else if rewritten.is_null() {
        Message::request(&id, &method, None)
    } else {
        Message::request(&id, &method, Some(&rewritten.to_string()))
    };
    let client = Some((session.can_answer.clone(), session.replies.clone()));
    let ctx = Arc::new(CallContext {
        label: session.caller.session.clone().unwrap_or_default(),
        notify,
        roots: None,
        client,
        shell: false,
    });
    let result = lease.instance.forward(upstream, timeout, ctx).await;
    drop(lease);
    d.pool.notify_changed();
    match result {
        // A passed-through listing, without what the policy leaves out.
        Ok(response) if method == "tools/list" => policy::filter_tools_response(entry, response),
        // The server's answer, with the client's id, byte for byte otherwise.
        Ok(response) => response,
        Err(e) => fail(error_code::INTERNAL_ERROR, format!("server `{server}`: {e}")),
    }
}
