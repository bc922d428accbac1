//! Which server a request of a client session goes to, and its instance: an exposed
//! name (`<server>__<name>`) or an `mcpx://<server>/<uri>` mapped back to the server's
//! own, or a server's own name or URI while exactly one server of the session has it
//! (or the session sees only one server).

use std::sync::Arc;

use mcpx_proto::Message;
use mcpx_proto::mcp::error_code;
use serde_json::Value;

use crate::config::ServerEntry;
use crate::daemon::Daemon;
use crate::instance::{CallContext, level_index};
use crate::lease::Failure;
use crate::mcp::catalog::{config, entry, left_out_owner, list, refused_name, servers};
use crate::mcp::sessions::ClientSession;
use crate::names::{SEPARATOR, split_resource_uri};
use crate::notices::NoticeSender;
use crate::policy;
use crate::pool::Lease;
use crate::sync::lock;

/// The JSON-RPC answer to a request that goes nowhere (boxed: a message is large).
pub(crate) type Refusal = Box<Message>;

/// The (server, original name) of `exposed`, a tool (`field` is `tools`) or prompt
/// (`prompts`) name of the aggregate, listing again when the session's last listing
/// did not have it. A server's own name maps to it when exactly one server has it;
/// a name no server has goes to the session's only server, when it sees one.
///
/// Errors, as the JSON-RPC answer to request `id` (-32602): the policy leaves the
/// tool out (its message), the server it names is not available (why), or the name
/// is unknown.
pub(crate) async fn by_name(
    d: &Daemon,
    session: &ClientSession,
    id: &str,
    field: &str,
    exposed: &str,
) -> Result<(String, String), Refusal> {
    let map = if field == "tools" { &session.tools } else { &session.prompts };
    let find = || {
        let map = lock(map);
        map.original(exposed).or_else(|| map.bare(exposed)).map(|(s, t)| (s.to_owned(), t.to_owned()))
    };
    if let Some(found) = find() {
        return Ok(found);
    }
    let _ = list(d, session, field).await;
    if let Some(found) = find() {
        return Ok(found);
    }
    let what = &field[..field.len() - 1];
    // The policy's refusal, with the CLI's message, when it left the name out.
    if let Some(refusal) = refused_name(d, session, exposed).filter(|_| field == "tools") {
        return Err(Box::new(policy::rpc_refusal(id, &refusal)));
    }
    // The name may belong to a server left out of the listing: say why.
    let message = match left_out_owner(d, session, exposed) {
        Some((name, error)) => format!("unknown {what}: `{exposed}`; server `{name}` is not available: {error}"),
        None => match only_server(d, session, exposed) {
            // The session's only server answers for a name it does not list, as it would directly.
            Some(server) => return Ok((server, exposed.to_owned())),
            None => format!("unknown {what}: `{exposed}`"),
        },
    };
    Err(Box::new(Message::error_response(id, error_code::INVALID_PARAMS, &message)))
}

/// The (server, original URI) of `uri`, a resource or template URI of the aggregate
/// (`mcpx://<server>/<original>`). A server's own URI maps to the one server that
/// lists it (as a resource or a template) or, failing that, to the session's only
/// server.
///
/// Errors, as the JSON-RPC answer to request `id` (-32602): no one server owns it.
pub(crate) fn by_uri(d: &Daemon, session: &ClientSession, id: &str, uri: &str) -> Result<(String, String), Refusal> {
    if let Some((server, original)) = split_resource_uri(uri) {
        return Ok((server.to_owned(), original.to_owned()));
    }
    let entries = servers(d, session).unwrap_or_default();
    let owners: Vec<&ServerEntry> = entries.iter().filter(|e| lists(d, session, e, uri)).collect();
    match owners.as_slice() {
        [owner] => Ok((owner.name.clone(), uri.to_owned())),
        [] if entries.len() == 1 => Ok((entries[0].name.clone(), uri.to_owned())),
        _ => Err(Box::new(Message::error_response(
            id,
            error_code::INVALID_PARAMS,
            &format!(
                "unknown resource `{uri}`: in the aggregate, resource URIs are mcpx://<server>/<uri>, as resources/list and resources/templates/list give them"
            ),
        ))),
    }
}

/// The name of the session's server when it sees exactly one, for a name that is
/// not of the aggregate's form (`<server>__<name>`).
fn only_server(d: &Daemon, session: &ClientSession, name: &str) -> Option<String> {
    let mut entries = servers(d, session).ok()?;
    let exposed = entries.iter().any(|e| name.starts_with(&format!("{}{SEPARATOR}", e.name)));
    (entries.len() == 1 && !exposed).then(|| entries.remove(0).name)
}

/// Whether the schema cache, as the session's caller sees it, has `uri` among
/// `entry`'s resources or templates.
fn lists(d: &Daemon, session: &ClientSession, entry: &ServerEntry, uri: &str) -> bool {
    let Some(cached) = d.cached_for(entry, &session.caller) else { return false };
    let items = cached.resources.iter().flatten().chain(cached.resource_templates.iter().flatten());
    items
        .filter_map(|raw| serde_json::from_str::<Value>(raw.get()).ok())
        .any(|v| v["uri"] == uri || v["uriTemplate"] == uri)
}

/// The entry of `server` in this session's configuration.
///
/// Errors, as the JSON-RPC answer to request `id`: the configuration cannot be read
/// (-32603), or the server is not configured or is disabled (-32602).
pub(crate) fn entry_of(d: &Daemon, session: &ClientSession, id: &str, server: &str) -> Result<ServerEntry, Refusal> {
    let fail = |(code, message): (i64, String)| Box::new(Message::error_response(id, code, &message));
    let config = config(d, session).map_err(fail)?;
    entry(d, &config, server).cloned().map_err(fail)
}

/// The JSON-RPC answer to request `id` for a request to `server` that got no answer.
pub(crate) fn failure(id: &str, server: &str, failure: Failure<Refusal>) -> Message {
    match failure {
        Failure::Refused(e) => Message::error_response(id, error_code::INTERNAL_ERROR, &e.to_string()),
        Failure::Checked(refusal) => *refusal,
        Failure::Server(e) => Message::error_response(id, error_code::INTERNAL_ERROR, &e.of_server(server)),
    }
}

/// The instance of `server` for this session's caller, started if need be, leased
/// for one request (its `callTimeout` is `lease.target.entry.options.call_timeout`).
///
/// Errors, as the JSON-RPC answer to request `id`: those of [`entry_of`], or the
/// server cannot be started (-32603, with why).
pub(crate) async fn hold(d: &Daemon, session: &ClientSession, id: &str, server: &str) -> Result<Lease, Refusal> {
    let entry = entry_of(d, session, id, server)?;
    d.lease(&entry, &session.caller, entry.options.call_timeout, &|_| {})
        .await
        .map_err(|e| Box::new(failure(id, server, e)))
}

/// The context of a request the session forwards: its notifications (progress, and
/// server requests for the client) go to `notify`.
pub(crate) fn context(session: &ClientSession, notify: Option<NoticeSender>) -> Arc<CallContext> {
    Arc::new(CallContext {
        label: session.caller.session.clone().unwrap_or_default(),
        notify,
        roots: None,
        client: Some((session.can_answer.clone(), session.replies.clone())),
        shell: false,
        param_headers: session.param_headers.clone(),
        log_level: session.log_level.as_deref().and_then(level_index),
        heard: Default::default(),
    })
}
