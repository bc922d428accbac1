//! What a client session asks to hear from its servers: `resources/subscribe` and
//! `resources/unsubscribe` (MCP 2025-11-25, Server features, Resources,
//! "Subscriptions") and `logging/setLevel` (Server features, Utilities, "Logging").
//! Each is recorded on the instance ([`crate::instance::Listeners`]), which is told
//! upstream only what changes for it as a whole: a URI's first subscriber and its
//! last, and the most verbose level of its clients.

use std::sync::Arc;
use std::time::Duration;

use mcpx_proto::Message;
use mcpx_proto::mcp::error_code;
use serde_json::{Value, json};

use crate::daemon::Daemon;
use crate::instance::{Instance, LOG_LEVELS};
use crate::mcp::catalog::servers;
use crate::mcp::owner::{self, by_uri, hold};
use crate::mcp::sessions::ClientSession;
use crate::mcp::subscriptions::Listening;
use crate::pool::Lease;
use crate::sync::lock;

/// `resources/subscribe` or `resources/unsubscribe` (`method`) of request `id`, on
/// the instance of the server that owns the URI: sent upstream for the URI's first
/// subscriber and after its last; answered `{}` here otherwise. Updates reach the
/// client on its GET stream, with the URI it subscribed with.
pub(crate) async fn subscription(
    d: &Daemon,
    session: &Arc<ClientSession>,
    id: &str,
    method: &str,
    params: &Value,
) -> Message {
    let uri = params["uri"].as_str().unwrap_or_default();
    if uri.is_empty() {
        return Message::error_response(id, error_code::INVALID_PARAMS, &format!("`{method}` needs params.uri"));
    }
    let owner = match &session.server {
        Some(server) => Ok((server.clone(), uri.to_owned())),
        None => by_uri(d, session, id, uri),
    };
    let (server, original) = match owner {
        Ok(o) => o,
        Err(refusal) => return *refusal,
    };
    let held = match hold(d, session, id, &server).await {
        Ok(h) => h,
        Err(refusal) => return *refusal,
    };
    let client = session.handle();
    let listeners = &held.instance.listeners;
    let subscribe = method == "resources/subscribe";
    let upstream = if subscribe {
        listeners.subscribe(&client, &original, uri)
    } else {
        listeners.unsubscribe(&client, &original)
    };
    session.subscribed(&held.instance, &original, subscribe);
    if !upstream {
        return Message::response(id, "{}");
    }
    let instance = &held.instance;
    let answer = if instance.era().is_some_and(|e| e.is_modern()) {
        through_listen(instance, id, &original, subscribe, held.target.entry.options.call_timeout).await
    } else {
        let mut p = params.clone();
        p["uri"] = Value::String(original.clone());
        send(session, &held, id, method, &p, &server).await
    };
    if subscribe && is_error(&answer) {
        listeners.unsubscribe(&client, &original);
        session.subscribed(&held.instance, &original, false);
    }
    answer
}

/// A URI's first subscription or last unsubscription (`subscribe`) on a modern
/// server, which has no `resources/subscribe` (MCP 2026-07-28, changelog): the
/// instance's `subscriptions/listen` is replaced by one whose `resourceSubscriptions`
/// are its clients' URIs now, and request `id` is answered `{}` once the server
/// acknowledged it, so updates after the answer are heard. A subscription is refused
/// when the server offers none, does not agree to `uri`, or does not acknowledge in
/// `timeout`; an unsubscription is answered `{}` whatever the server says.
async fn through_listen(
    instance: &Instance,
    id: &str,
    uri: &str,
    subscribe: bool,
    timeout: Option<Duration>,
) -> Message {
    let agreed = instance.listen_for_uris(timeout).await;
    match agreed {
        _ if !subscribe => Message::response(id, "{}"),
        Ok(uris) if uris.iter().any(|u| u == uri) => Message::response(id, "{}"),
        Ok(_) => Message::error_response(
            id,
            error_code::INVALID_PARAMS,
            &format!(
                "the server `{}` did not agree to send updates of `{uri}` (its subscriptions/listen acknowledgement left it out); read the resource again instead of subscribing",
                instance.identity.server
            ),
        ),
        Err((code, why)) => Message::error_response(
            id,
            code,
            &format!("cannot subscribe to `{uri}`: {why}; read the resource again instead of subscribing"),
        ),
    }
}

/// The resource subscriptions of a modern client's `subscriptions/listen` request `id`
/// (MCP 2026-07-28, "Subscriptions"): each URI of its [`Listening`] subscribed as
/// `resources/subscribe` would, and only those that succeeded kept in what the stream
/// agrees to. Updates then reach the session's stream with the URI asked for.
pub(crate) async fn subscribe_listed(d: &Daemon, session: &Arc<ClientSession>, id: &str) {
    let uris = lock(&session.listening).as_ref().map(Listening::uris).unwrap_or_default();
    let mut kept = Vec::new();
    for uri in uris {
        let answer = subscription(d, session, id, "resources/subscribe", &json!({ "uri": uri })).await;
        if is_error(&answer) {
            tracing::info!(%uri, "a listen stream's resource subscription failed: {}", answer.as_str());
        } else {
            kept.push(uri);
        }
    }
    if let Some(listening) = lock(&session.listening).as_mut() {
        listening.keep_uris(kept);
    }
}

/// `logging/setLevel` of request `id`: recorded on the instance of every server the
/// session sees (those that offer logging), each of which is sent the most verbose
/// level of its clients when that changes. Answered `{}`, or with the first error.
/// A level not in [`LOG_LEVELS`] is refused (-32602) before any server is reached;
/// in the aggregate, a server that cannot be started is logged and left out, so
/// one broken server does not fail the request for the others.
pub(crate) async fn set_level(d: &Daemon, session: &Arc<ClientSession>, id: &str, params: &Value) -> Message {
    let level = params["level"].as_str().unwrap_or_default();
    if !LOG_LEVELS.contains(&level) {
        let message = format!("unknown log level `{level}`: use one of {}", LOG_LEVELS.join(", "));
        return Message::error_response(id, error_code::INVALID_PARAMS, &message);
    }
    let aggregate = session.server.is_none();
    let names: Vec<String> = match &session.server {
        Some(server) => vec![server.clone()],
        None => servers(d, session).unwrap_or_default().into_iter().map(|e| e.name).collect(),
    };
    let client = session.handle();
    let client = &client;
    let each = names.iter().map(|server| async move {
        let held = match hold(d, session, id, server).await {
            Ok(held) => held,
            Err(refusal) if aggregate => {
                tracing::warn!(server = %server, error = %refusal.as_str(), "logging/setLevel left out a server that cannot start");
                return Ok(());
            }
            Err(refusal) => return Err(refusal),
        };
        if !offers_logging(&held.instance) {
            return Ok(());
        }
        let listeners = &held.instance.listeners;
        let most_verbose = listeners
            .set_level(client, level)
            .map_err(|message| Box::new(Message::error_response(id, error_code::INVALID_PARAMS, &message)))?;
        let Some(most_verbose) = most_verbose else { return Ok(()) };
        let answer = send(session, &held, id, "logging/setLevel", &json!({ "level": most_verbose }), server).await;
        if is_error(&answer) {
            listeners.level_not_set();
            return Err(Box::new(answer));
        }
        Ok(())
    });
    let outcomes = futures_util::future::join_all(each).await;
    match outcomes.into_iter().find_map(Result::err) {
        Some(error) => *error,
        None => Message::response(id, "{}"),
    }
}

/// Whether the instance's server declared the `logging` capability (or has not said).
fn offers_logging(instance: &Instance) -> bool {
    instance.session().is_none_or(|s| {
        serde_json::from_str::<Value>(s.capabilities.get()).map_or(true, |c| c.get("logging").is_some())
    })
}

/// Sends `method` with `params` to the held instance and returns its answer, with
/// request `id`.
async fn send(session: &ClientSession, held: &Lease, id: &str, method: &str, params: &Value, server: &str) -> Message {
    let request = Message::request(id, method, Some(&params.to_string()));
    match held.instance.forward(request, held.target.entry.options.call_timeout, owner::context(session, None)).await {
        Ok(answer) => answer,
        Err(e) => Message::error_response(id, error_code::INTERNAL_ERROR, &e.of_server(server)),
    }
}

fn is_error(answer: &Message) -> bool {
    serde_json::from_str::<Value>(answer.as_str()).map_or(true, |v| v.get("error").is_some())
}
