//! Answers one JSON-RPC request of a client session of the MCP endpoint: the lists
//! ([`crate::mcp::catalog`]); `tools/call`, `prompts/get`, `resources/read` and
//! `completion/complete` mapped back to their server ([`crate::mcp::owner`]) and
//! forwarded through `Instance::forward`, their resource URIs made readable back
//! ([`crate::mcp::uris`]); subscriptions and log levels ([`crate::mcp::listen`]);
//! `server/discover`, and what a 2026-07-28 request changes ([`crate::mcp::modern`]). A
//! request the client cancels is dropped, which cancels it upstream. What
//! [`crate::policy`] refuses is answered -32602 before anything is forwarded, and a
//! passed-through server's own `tools/list` is filtered by it.

use std::borrow::Cow;
use std::sync::Arc;

use mcpx_proto::Message;
use mcpx_proto::mcp::error_code;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::activity::Origin;
use crate::config::ServerEntry;
use crate::daemon::Daemon;
use crate::instance::Instance;
use crate::lease::Ask;
use crate::mcp::catalog::list;
use crate::mcp::owner::{Refusal, by_name, by_uri, context, entry_of, failure};
use crate::mcp::sessions::ClientSession;
use crate::mcp::unbridged::{self, Answerer};
use crate::mcp::{discover, era, listen, modern, uris};
use crate::notices::NoticeSender;
use crate::pins::{Holds, Kind, Listed};
use crate::policy;
use crate::pool::Target;

/// [`answer`], stopped early when the client cancels the request: the work is
/// dropped, which sends `notifications/cancelled` to the server it was forwarded to.
/// Notifications that belong to the request (progress, and server requests for the
/// client) go to `notify`.
pub(crate) async fn cancellable(
    d: &Daemon,
    session: &Arc<ClientSession>,
    request: Message,
    notify: Option<NoticeSender>,
) -> Message {
    let id = request.id().unwrap_or("null").to_owned();
    let method = request.method().unwrap_or_default().to_owned();
    let stop = session.begin(&id);
    let response = tokio::select! {
        response = answer(d, session, &id, request, notify) => response,
        () = stop.notified() => Message::error_response(&id, error_code::INTERNAL_ERROR, "cancelled by the client"),
    };
    session.end(&id);
    if era::is_modern(&session.version) { modern::finish(&method, response) } else { response }
}

/// Answers one request of a session; the response carries the request's own `id`.
async fn answer(
    d: &Daemon,
    session: &Arc<ClientSession>,
    id: &str,
    request: Message,
    notify: Option<NoticeSender>,
) -> Message {
    let method = request.method().unwrap_or_default().to_owned();
    let is_modern = era::is_modern(&session.version);
    // A modern request reaches a legacy server without the 2026-07-28 envelope.
    let request = if is_modern { modern::strip_envelope(request) } else { request };
    match method.as_str() {
        "server/discover" => return modern::discover(d, session, id).await,
        // Removed in 2026-07-28 (Changelog): liveness is the transport's, log levels are per request.
        "ping" | "logging/setLevel" if is_modern => {
            let message = format!("`{method}` is not part of MCP {}; see its changelog", session.version);
            return Message::error_response(id, error_code::METHOD_NOT_FOUND, &message);
        }
        _ => {}
    }
    if session.discover {
        if let Some(response) = discover::answer(d, session, id, &method, &params(&request)).await {
            return response;
        }
    }
    match method.as_str() {
        "resources/subscribe" | "resources/unsubscribe" => {
            return listen::subscription(d, session, id, &method, &params(&request)).await;
        }
        "logging/setLevel" => return listen::set_level(d, session, id, &params(&request)).await,
        _ => {}
    }
    if session.server.is_none() && method.starts_with("tasks/") {
        if let Some(refusal) = unbridged::refusal(id, &method, &params(&request), is_modern, Answerer::Aggregate) {
            return refusal;
        }
    }
    // A cut result's whole, kept by mcpx (crate::results), read back by its session.
    if method == "resources/read" && request.as_str().contains(crate::results::URI_PREFIX) {
        let params = params(&request);
        let owner = session.caller.session.as_deref();
        match d.results.read(owner, params["uri"].as_str().unwrap_or_default()) {
            Some(Ok(result)) => return Message::response(id, &result.to_string()),
            Some(Err(message)) => return Message::error_response(id, error_code::RESOURCE_NOT_FOUND, &message),
            None => {}
        }
    }
    // One server passed through: everything else but ping goes to it as it is, lists
    // included, and its params are not read (but a tool's name, for the policy).
    if session.server.is_some() && method != "ping" {
        return forward(d, session, request, &Value::Null, notify).await;
    }
    let result = match method.as_str() {
        "ping" => Ok(json!({})),
        "tools/list" => list(d, session, "tools").await,
        "prompts/list" => list(d, session, "prompts").await,
        "resources/list" => list(d, session, "resources").await,
        "resources/templates/list" => list(d, session, "resourceTemplates").await,
        "tools/call" | "prompts/get" | "resources/read" | "completion/complete" => {
            let params = params(&request);
            return forward(d, session, request, &params, notify).await;
        }
        _ => Err((error_code::METHOD_NOT_FOUND, format!("method `{method}` is not offered by mcpx"))),
    };
    match result {
        Ok(v) => Message::response(id, &v.to_string()),
        Err((code, message)) => Message::error_response(id, code, &message),
    }
}

/// A request's `params` (`null` when it has none, or is not JSON), built as a tree:
/// only where mcpx reads more than a passed-through tool's name.
fn params(request: &Message) -> Value {
    #[derive(Deserialize)]
    struct Request {
        #[serde(default)]
        params: Value,
    }
    serde_json::from_str::<Request>(request.as_str()).map(|r| r.params).unwrap_or(Value::Null)
}

/// `params.name` of a `tools/call`, read without building its params (its arguments
/// may be large); `None` when it has no string there.
fn tool_name(request: &Message) -> Option<String> {
    #[derive(Deserialize)]
    struct Request<'a> {
        #[serde(borrow)]
        params: Option<Params<'a>>,
    }
    #[derive(Deserialize)]
    struct Params<'a> {
        #[serde(borrow)]
        name: Option<Cow<'a, str>>,
    }
    let request: Request<'_> = serde_json::from_str(request.as_str()).ok()?;
    request.params?.name.map(Cow::into_owned)
}

/// `tools/call`, `prompts/get`, `resources/read`, `completion/complete`: maps the
/// name or URI back to its server and forwards the request, byte-faithful but for the
/// name or URI; the aggregate's answer gets its resource URIs rewritten. `params` are
/// the request's, read by [`params`] (`null` for a session passed through to one
/// server, which maps nothing back).
async fn forward(
    d: &Daemon,
    session: &ClientSession,
    request: Message,
    params: &Value,
    notify: Option<NoticeSender>,
) -> Message {
    let id = request.id().unwrap_or("null").to_owned();
    let method = request.method().unwrap_or_default().to_owned();
    let (server, rewritten, asked, original) = match &session.server {
        Some(s) => (s.clone(), Value::Null, String::new(), String::new()),
        None => match map_back(d, session, &id, &method, params).await {
            Ok(mapped) => mapped,
            Err(refusal) => return *refusal,
        },
    };
    let entry = match entry_of(d, session, &id, &server) {
        Ok(entry) => entry,
        Err(refusal) => return *refusal,
    };
    // Passed through, the params are read only when they may ask for a task.
    let asked_task = session.server.is_some() && method == "tools/call" && request.as_str().contains("\"task\"");
    let checked = if asked_task { self::params(&request) } else { Value::Null };
    let checked = if asked_task { &checked } else { &rewritten };
    // The tool called or the prompt got, which the policy may refuse.
    let item = match (method.as_str(), &session.server) {
        ("tools/call", Some(_)) => Some((Kind::Tool, tool_name(&request).unwrap_or_default())),
        ("tools/call", None) => Some((Kind::Tool, rewritten["name"].as_str().unwrap_or_default().to_owned())),
        ("prompts/get", Some(_)) => Some((Kind::Prompt, tool_name(&request).unwrap_or_default())),
        ("prompts/get", None) => Some((Kind::Prompt, rewritten["name"].as_str().unwrap_or_default().to_owned())),
        _ => None,
    };
    let modern_client = era::is_modern(&session.version);
    let check = |target: &Target, instance: Option<&Instance>| -> Result<(), Refusal> {
        if let Some(instance) = instance {
            let to = Answerer::Server { name: &server, modern: instance.era().is_some_and(|e| e.is_modern()) };
            if let Some(refusal) = unbridged::refusal(&id, &method, checked, modern_client, to) {
                return Err(Box::new(refusal));
            }
        }
        let Some((kind, name)) = &item else { return Ok(()) };
        let cached = d.schema.get_for(&target.cache_key, target.context.as_deref());
        let holds = d.holds_at(&target.entry, &target.cache_key, cached.as_deref());
        let checked = match kind {
            Kind::Tool => policy::check_tool(&target.entry, &holds, name),
            Kind::Prompt => policy::check_prompt(&target.entry, &holds, name),
        };
        checked.map_err(|r| Box::new(policy::rpc_refusal(&id, &r)))
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
    let ask = Ask {
        entry: &entry,
        caller: &session.caller,
        request: upstream,
        timeout: entry.options.call_timeout,
        context: context(session, notify),
        check: &check,
        report: &|_| {},
        forward: true,
        origin: Origin {
            path: session.path.clone(),
            client: session.client.clone(),
            protocol: Some(session.version.clone()),
        },
    };
    let result = d.ask(ask).await;
    let answer = match result {
        // A passed-through listing, without what the policy leaves out.
        Ok(response) if method == "tools/list" => passed_list(d, &entry, Kind::Tool, response),
        Ok(response) if method == "prompts/list" && session.server.is_some() => {
            passed_list(d, &entry, Kind::Prompt, response)
        }
        Ok(response) if session.server.is_some() => response,
        // The server's answer, with the client's id, and URIs the aggregate reads back.
        Ok(response) => uris::rewrite(&method, &server, &asked, &original, response),
        Err(e) => failure(&id, &server, e),
    };
    match (&item, method.as_str()) {
        (Some((_, tool)), "tools/call") => fitted(d, session, &entry, tool, answer),
        _ => answer,
    }
}

/// A `tools/call` answer of `tool` of `entry`, cut to the server's `maxResultBytes` when
/// it is larger ([`crate::results::fit`]), the whole kept for `session` to read back.
fn fitted(d: &Daemon, session: &ClientSession, entry: &ServerEntry, tool: &str, answer: Message) -> Message {
    let Some(limit) = entry.options.result_limit(tool).and_then(|l| usize::try_from(l).ok()) else { return answer };
    if answer.as_str().len() <= limit {
        return answer;
    }
    let Ok(mut value) = serde_json::from_str::<Value>(answer.as_str()) else { return answer };
    let Some(result) = value.get("result").map(Value::to_string) else { return answer };
    let what =
        format!("`{}` allows for tool `{tool}` of server `{}`", entry.options.result_limit_key(tool), entry.name);
    let owner = session.caller.session.as_deref();
    match crate::results::fit(&d.results, owner, &result, limit, &what) {
        Some(cut) => {
            tracing::info!(server = %entry.name, tool, bytes = result.len(), limit, "a tool result was cut to maxResultBytes");
            value["result"] = cut;
            Message::response(answer.id().unwrap_or("null"), &value["result"].to_string())
        }
        None => answer,
    }
}

/// A server's own `tools/list` or `prompts/list` response (`kind`), passed through,
/// without what the policy leaves out. A whole list (one page, no cursor) is compared
/// with the server's pins first, as a listing from the cache is; a page of a longer one
/// is filtered by the holds of the server's last whole listing.
fn passed_list(d: &Daemon, entry: &ServerEntry, kind: Kind, response: Message) -> Message {
    #[derive(Deserialize)]
    struct Page {
        result: Option<Items>,
    }
    #[derive(Deserialize)]
    struct Items {
        #[serde(default, alias = "prompts")]
        tools: Option<Vec<Box<serde_json::value::RawValue>>>,
        #[serde(default, rename = "nextCursor")]
        next_cursor: Option<String>,
    }
    let whole = serde_json::from_str::<Page>(response.as_str()).ok().and_then(|p| p.result);
    // The cache's listing first: it is the server's first, for both lists, when nothing
    // of the server is pinned yet.
    let cached = d.holds(entry, None);
    let holds = match whole {
        Some(Items { tools: Some(items), next_cursor: None }) => {
            let private = d.schema.get(&entry.cache_key()).is_some_and(|c| c.private);
            let listed = Listed { items: &items, listing: 0 };
            let held = d.observe_list(&d.pin_key(entry, private), entry, kind, listed);
            match kind {
                Kind::Tool => Holds { tools: held, ..cached },
                Kind::Prompt => Holds { prompts: held, ..cached },
            }
        }
        _ => cached,
    };
    policy::filter_list_response(entry, &holds, kind, response)
}

/// The server an aggregate request goes to, its params with the server's own name or
/// URI, and (for a read) the URI asked for and the server's.
///
/// Errors: the JSON-RPC answer saying why it goes nowhere.
async fn map_back(
    d: &Daemon,
    session: &ClientSession,
    id: &str,
    method: &str,
    params: &Value,
) -> Result<(String, Value, String, String), Refusal> {
    let mut p = params.clone();
    // Where the name or URI sits in the params, and what it names.
    let (pointer, kind) = match method {
        "tools/call" => ("/name", "tools"),
        "prompts/get" => ("/name", "prompts"),
        "resources/read" => ("/uri", "resources"),
        _ => match params["ref"]["type"].as_str() {
            Some("ref/prompt") => ("/ref/name", "prompts"),
            Some("ref/resource") => ("/ref/uri", "resources"),
            other => {
                let message = format!(
                    "`completion/complete` needs params.ref of type ref/prompt or ref/resource, not {}",
                    other.unwrap_or("none")
                );
                return Err(Box::new(Message::error_response(id, error_code::INVALID_PARAMS, &message)));
            }
        },
    };
    let asked = params.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (server, original) = match kind {
        "resources" => by_uri(d, session, id, &asked)?,
        _ => by_name(d, session, id, kind, &asked).await?,
    };
    if let Some(slot) = p.pointer_mut(pointer) {
        *slot = Value::String(original.clone());
    }
    Ok((server, p, asked, original))
}
