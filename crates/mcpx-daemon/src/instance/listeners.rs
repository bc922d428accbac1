//! What the MCP clients of one instance asked to hear besides the answers to their
//! requests: resource subscriptions, counted per URI so one client's unsubscribe does
//! not cut another off (MCP 2025-11-25, Server features, Resources, "Subscriptions"),
//! and log levels, the instance kept at the most verbose level any client asked for
//! and each client sent only what is at or above its own (Server features, Utilities,
//! "Logging"; the levels are RFC 5424's).
//!
//! A client is known by a [`ClientHandle`]: a key that is the same for all its
//! requests, and a weak reference to where it hears the server on its own (an MCP
//! session's GET stream). A client that has gone is forgotten when it is next met.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use mcpx_proto::Message;
use serde_json::Value;

use super::context::{CallContext, ClientReplies};
use crate::notices::NoticeSender;
use crate::sync::lock;

/// The log levels of RFC 5424, section 6.2.1, from the most verbose to the least, as
/// MCP names them (Server features, Utilities, "Logging", "Log Levels").
pub const LOG_LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// The index in [`LOG_LEVELS`] of `level`; `None` for a name that is not a level.
pub fn level_index(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|l| *l == level)
}

/// The level of a `notifications/message` (an index into [`LOG_LEVELS`]); `None`
/// when it names none of them.
pub(super) fn message_level(message: &Message) -> Option<usize> {
    let v = serde_json::from_str::<Value>(message.as_str()).ok()?;
    level_index(v["params"]["level"].as_str()?)
}

/// Where a client hears what a server sends on its own.
pub trait ClientSink: Send + Sync + std::fmt::Debug {
    /// Sends `message` to the client (on an MCP session's GET stream), when it can
    /// take it; otherwise it is dropped.
    fn send(&self, message: &Message);
}

/// One MCP client, as the instance knows it.
#[derive(Debug, Clone)]
pub struct ClientHandle {
    /// The same for every request of the client: the address of its
    /// [`ClientReplies`], which the [`CallContext`] of its requests carries too.
    key: usize,
    /// Where it hears the server on its own.
    sink: Weak<dyn ClientSink>,
}

impl ClientHandle {
    /// The client whose requests carry `replies` in their [`CallContext`], heard
    /// through `sink`.
    pub fn new(replies: &Arc<ClientReplies>, sink: Weak<dyn ClientSink>) -> ClientHandle {
        ClientHandle { key: key_of(replies), sink }
    }
}

/// The key of the client a request comes from, when an MCP client sent it.
pub(super) fn caller_key(ctx: &CallContext) -> Option<usize> {
    ctx.client.as_ref().map(|(_, replies)| key_of(replies))
}

fn key_of(replies: &Arc<ClientReplies>) -> usize {
    Arc::as_ptr(replies) as usize
}

/// The subscriptions and log levels of one instance's clients.
#[derive(Debug, Default)]
pub struct Listeners {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The server's resource URI → its subscribers, each with the URI it subscribed
    /// with (an aggregate client's `mcpx://` URI, or the server's own).
    subscriptions: HashMap<String, Vec<(ClientHandle, String)>>,
    /// Each client's log level (an index into [`LOG_LEVELS`]), by key.
    levels: HashMap<usize, (ClientHandle, usize)>,
    /// The level the server was last set to.
    server_level: Option<usize>,
}

impl Listeners {
    /// Records that `client` subscribes to the server's `uri`, as `as_seen`. True when
    /// it is the URI's first subscriber: then the server must be sent
    /// `resources/subscribe` (and [`Listeners::unsubscribe`] called if that fails).
    pub fn subscribe(&self, client: &ClientHandle, uri: &str, as_seen: &str) -> bool {
        let mut inner = lock(&self.inner);
        let subscribers = inner.subscriptions.entry(uri.to_owned()).or_default();
        subscribers.retain(|(c, _)| c.sink.strong_count() > 0 && c.key != client.key);
        let first = subscribers.is_empty();
        subscribers.push((client.clone(), as_seen.to_owned()));
        first
    }

    /// The server's resource URIs a live client is subscribed to, sorted: what a
    /// modern server's `subscriptions/listen` asks updates of.
    pub fn uris(&self) -> Vec<String> {
        let inner = lock(&self.inner);
        let live =
            |subscribers: &Vec<(ClientHandle, String)>| subscribers.iter().any(|(c, _)| c.sink.strong_count() > 0);
        let mut uris: Vec<String> =
            inner.subscriptions.iter().filter(|(_, s)| live(s)).map(|(uri, _)| uri.clone()).collect();
        uris.sort();
        uris
    }

    /// Forgets `client`'s subscription to the server's `uri`. True when no client is
    /// subscribed to it any more: then the server must be sent `resources/unsubscribe`.
    pub fn unsubscribe(&self, client: &ClientHandle, uri: &str) -> bool {
        let mut inner = lock(&self.inner);
        let Some(subscribers) = inner.subscriptions.get_mut(uri) else { return true };
        subscribers.retain(|(c, _)| c.sink.strong_count() > 0 && c.key != client.key);
        let last = subscribers.is_empty();
        if last {
            inner.subscriptions.remove(uri);
        }
        last
    }

    /// Records `client`'s log level (one of [`LOG_LEVELS`]). `Some(level)` when the
    /// server must be sent `logging/setLevel` with it: the most verbose level of the
    /// clients, when it is not the level the server was last set to.
    ///
    /// Errors: `level` is not one of [`LOG_LEVELS`]; the message says which are.
    pub fn set_level(&self, client: &ClientHandle, level: &str) -> Result<Option<&'static str>, String> {
        let Some(index) = LOG_LEVELS.iter().position(|l| *l == level) else {
            return Err(format!("unknown log level `{level}`: use one of {}", LOG_LEVELS.join(", ")));
        };
        let mut inner = lock(&self.inner);
        inner.levels.retain(|_, (c, _)| c.sink.strong_count() > 0);
        inner.levels.insert(client.key, (client.clone(), index));
        let most_verbose = inner.levels.values().map(|(_, l)| *l).min().unwrap_or(index);
        if inner.server_level == Some(most_verbose) {
            return Ok(None);
        }
        inner.server_level = Some(most_verbose);
        Ok(Some(LOG_LEVELS[most_verbose]))
    }

    /// The log level `ctx`'s caller wants to hear during its request (an index into
    /// [`LOG_LEVELS`]): the one the request itself carried (a modern client), else
    /// the one its session set with `logging/setLevel` on this instance; `None` when
    /// it asked for none. A modern server is sent this level with the request, and
    /// only this caller's.
    pub fn level_of(&self, ctx: &CallContext) -> Option<usize> {
        ctx.log_level.or_else(|| {
            let key = caller_key(ctx)?;
            lock(&self.inner).levels.get(&key).map(|(_, l)| *l)
        })
    }

    /// Where `ctx`'s caller hears the server on its own (its GET stream), when it is
    /// an MCP client that set a level and is still there.
    pub(super) fn sink_of(&self, ctx: &CallContext) -> Option<Arc<dyn ClientSink>> {
        let key = caller_key(ctx)?;
        lock(&self.inner).levels.get(&key).and_then(|(c, _)| c.sink.upgrade())
    }

    /// The requests that tell a server restarted in place what the old process was
    /// asked: `resources/subscribe` for every URI a live client is subscribed to, and
    /// `logging/setLevel` with the level it was last set to.
    pub fn resumed(&self) -> Vec<Message> {
        let mut inner = lock(&self.inner);
        inner.subscriptions.retain(|_, subscribers| {
            subscribers.retain(|(c, _)| c.sink.strong_count() > 0);
            !subscribers.is_empty()
        });
        let subscribe =
            inner.subscriptions.keys().map(|uri| ("resources/subscribe", serde_json::json!({ "uri": uri })));
        let level = inner.server_level.map(|l| ("logging/setLevel", serde_json::json!({ "level": LOG_LEVELS[l] })));
        subscribe
            .chain(level)
            .map(|(method, params)| Message::request("0", method, Some(&params.to_string())))
            .collect()
    }

    /// Forgets the level the server was set to (setting it failed), so the next
    /// [`Listeners::set_level`] sends it again.
    pub fn level_not_set(&self) {
        lock(&self.inner).server_level = None;
    }

    /// `notifications/resources/updated`: to every subscriber of its URI, with the
    /// URI that subscriber used. False when nobody is subscribed to it.
    pub(super) fn updated(&self, message: &Message) -> bool {
        let Ok(mut v) = serde_json::from_str::<Value>(message.as_str()) else { return false };
        let uri = v["params"]["uri"].as_str().unwrap_or_default().to_owned();
        let subscribers: Vec<(ClientHandle, String)> = {
            let mut inner = lock(&self.inner);
            let Some(subscribers) = inner.subscriptions.get_mut(&uri) else { return false };
            subscribers.retain(|(c, _)| c.sink.strong_count() > 0);
            subscribers.clone()
        };
        for (client, as_seen) in &subscribers {
            let Some(sink) = client.sink.upgrade() else { continue };
            if *as_seen == uri {
                sink.send(message);
            } else {
                v["params"]["uri"] = Value::String(as_seen.clone());
                sink.send(&Message::notification("notifications/resources/updated", Some(&v["params"].to_string())));
            }
        }
        !subscribers.is_empty()
    }

    /// A legacy server's `notifications/message`: to every client that set a level at
    /// or below the message's, on its own stream; the caller of the only request in
    /// flight (when `callers`, those of the requests in flight or the one whose answer
    /// stream carried it, are one) gets it on that request's stream instead, when it
    /// has one, unless its own level ([`Listeners::level_of`]) is above the message's.
    /// A message of no known level goes to all. False when it reached nobody.
    pub(super) fn log(&self, message: &Message, callers: &[Arc<CallContext>], deliver: impl Fn(&NoticeSender)) -> bool {
        let sole = if let [ctx] = callers { Some(&**ctx) } else { None };
        let level = message_level(message);
        let wants = |client_level: usize| level.is_none_or(|l| l >= client_level);
        let sole_key = sole.and_then(caller_key);
        let listeners: Vec<(ClientHandle, usize)> = {
            let mut inner = lock(&self.inner);
            inner.levels.retain(|_, (c, _)| c.sink.strong_count() > 0);
            inner.levels.values().cloned().collect()
        };
        let mut reached = false;
        // The sole caller hears it on its request's stream, when that has one.
        let on_request = sole.and_then(|c| c.notify.as_ref());
        if let Some(notify) = on_request {
            let own = sole
                .and_then(|c| c.log_level)
                .or_else(|| listeners.iter().find(|(c, _)| Some(c.key) == sole_key).map(|(_, l)| *l));
            if own.is_none_or(wants) {
                deliver(notify);
                sole.inspect(|c| c.heard.note());
                reached = true;
            }
        }
        for (client, client_level) in listeners {
            if (on_request.is_some() && Some(client.key) == sole_key) || !wants(client_level) {
                continue;
            }
            if let Some(sink) = client.sink.upgrade() {
                sink.send(message);
                reached = true;
            }
        }
        reached
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct Heard(Mutex<Vec<String>>);

    impl ClientSink for Heard {
        fn send(&self, message: &Message) {
            lock(&self.0).push(message.as_str().to_owned());
        }
    }

    fn client() -> (Arc<ClientReplies>, Arc<Heard>, ClientHandle) {
        let replies = Arc::new(ClientReplies::default());
        let heard = Arc::new(Heard::default());
        let sink: Arc<dyn ClientSink> = heard.clone();
        let handle = ClientHandle::new(&replies, Arc::downgrade(&sink));
        (replies, heard, handle)
    }

    #[test]
    fn the_first_subscriber_subscribes_and_the_last_unsubscribes() {
        let listeners = Listeners::default();
        let (_ra, a, ha) = client();
        let (_rb, b, hb) = client();
        assert!(listeners.subscribe(&ha, "test://r", "mcpx://s/test://r"));
        assert!(!listeners.subscribe(&hb, "test://r", "test://r"));
        assert!(!listeners.subscribe(&ha, "test://r", "mcpx://s/test://r"), "a second subscribe counts once");
        let updated = Message::notification("notifications/resources/updated", Some(r#"{"uri":"test://r"}"#));
        assert!(listeners.updated(&updated));
        assert!(lock(&a.0)[0].contains("mcpx://s/test://r"), "{:?}", lock(&a.0));
        assert_eq!(lock(&b.0)[0], updated.as_str());
        assert!(!listeners.unsubscribe(&ha, "test://r"), "b is still subscribed");
        assert!(listeners.updated(&updated));
        assert_eq!((lock(&a.0).len(), lock(&b.0).len()), (1, 2));
        assert!(listeners.unsubscribe(&hb, "test://r"), "b was the last");
        assert!(!listeners.updated(&updated));
    }

    #[test]
    fn the_server_gets_the_most_verbose_level_and_each_client_its_own() {
        let listeners = Listeners::default();
        let (_ra, a, ha) = client();
        let (rb, b, hb) = client();
        assert_eq!(listeners.set_level(&ha, "error"), Ok(Some("error")));
        assert_eq!(listeners.set_level(&hb, "debug"), Ok(Some("debug")));
        assert_eq!(listeners.set_level(&ha, "warning"), Ok(None), "debug is still the most verbose");
        assert!(listeners.set_level(&ha, "loud").is_err());
        let info = Message::notification("notifications/message", Some(r#"{"level":"info","data":"i"}"#));
        let error = Message::notification("notifications/message", Some(r#"{"level":"error","data":"e"}"#));
        assert!(listeners.log(&info, &[], |_| {}));
        assert!(listeners.log(&error, &[], |_| {}));
        assert_eq!(lock(&a.0).len(), 1, "a hears only warning and above");
        assert_eq!(lock(&b.0).len(), 2);
        // b's own request in flight: b hears it there, not on its stream.
        let (tx, _rx) = crate::notices::channel(Arc::default());
        let ctx = Arc::new(CallContext { notify: Some(tx), client: Some((Vec::new(), rb)), ..CallContext::default() });
        let on_request = Mutex::new(0);
        assert!(listeners.log(&info, std::slice::from_ref(&ctx), |_| *lock(&on_request) += 1));
        assert_eq!((*lock(&on_request), lock(&b.0).len()), (1, 2));
        // A request answered as JSON has no stream: b hears it on its own.
        let json_answered = Arc::new(CallContext { client: ctx.client.clone(), ..CallContext::default() });
        assert!(listeners.log(&info, &[json_answered], |_| *lock(&on_request) += 1));
        assert_eq!((*lock(&on_request), lock(&b.0).len()), (1, 3));
        drop(hb);
        drop(b);
        assert_eq!(listeners.set_level(&ha, "warning"), Ok(Some("warning")), "b has gone");
    }
}
