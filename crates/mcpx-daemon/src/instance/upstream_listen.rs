//! The `subscriptions/listen` request an instance holds open on a modern server
//! (MCP 2026-07-28, Basic, Patterns, "Subscriptions"): where a legacy server sends
//! `list_changed` and resource updates on its own, a modern one sends them only on
//! a listen stream, and only the kinds the stream asked for.
//!
//! The instance opens one as soon as a modern server runs, asking for every
//! `list_changed` kind the server offers, whether or not a client listens: the
//! daemon's schema cache is always a consumer of list changes (a legacy server's
//! reach it unasked), and one stream per instance is what the GET stream of a
//! legacy HTTP server costs. Its `resourceSubscriptions` are the URIs the
//! instance's clients are subscribed to (`Listeners`), so when that set changes the
//! stream is replaced: a new one is opened, and the old one is cancelled once the
//! new one is acknowledged ("Cancellation": `notifications/cancelled` on stdio, the
//! POST's stream closed over HTTP, which the HTTP link does for a modern request).
//! Only the newest acknowledged stream's notifications are taken (each carries its
//! `subscriptionId`), so the overlap delivers nothing twice. A stream the server
//! ends, or whose transport fails, is opened again after a pause that doubles up to
//! `MAX_REOPEN_DELAY` (`listen_streams.rs`); a server that answers -32601 (it has no listen) is not
//! asked again. The stream ends with the instance; a new daemon opens its own.
//!
//! The listen is not one of the instance's calls: it holds no caller, so it neither
//! counts as in flight (the idle clock runs) nor makes "the only request in flight"
//! ambiguous for routing.

use std::time::Duration;

use mcpx_proto::mcp::error_code;
use mcpx_proto::{Message, UpstreamId, response_result};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::Instance;
use super::era::{self, Era};
use super::error::CallError;
use super::listen_streams::{Acknowledged, Heard};
use crate::transport::Outbound;
use mcpx_proto::era::META_SUBSCRIPTION_ID as SUBSCRIPTION_ID;

/// The `SubscriptionFilter` keys of the `list_changed` kinds, and the server
/// capability each needs (`listChanged` of `tools`, `resources`, `prompts`).
const LIST_CHANGED: [(&str, &str); 3] =
    [("toolsListChanged", "tools"), ("resourcesListChanged", "resources"), ("promptsListChanged", "prompts")];

impl Instance {
    /// [`Instance::relisten`] in a task of its own (for a start that cannot wait).
    pub(super) fn listen_soon(&self) {
        let me = self.me.clone();
        tokio::spawn(async move {
            if let Some(inst) = me.upgrade() {
                inst.relisten().await;
            }
        });
    }

    /// Opens a listen stream on a modern server asking for every `list_changed` kind
    /// it offers and the resource URIs its clients are subscribed to, replacing the
    /// one open (see the module). The receiver hears the stream's acknowledgement:
    /// the URIs the server agreed to, or why it did not open. `None` for a legacy
    /// server, or one that offers nothing to listen to or has no listen.
    pub(crate) async fn relisten(&self) -> Option<oneshot::Receiver<Acknowledged>> {
        let Some(Era::Modern { version }) = self.era() else { return None };
        let capabilities: Value = serde_json::from_str(self.session()?.capabilities.get()).unwrap_or_default();
        let mut filter = serde_json::Map::new();
        for (key, capability) in LIST_CHANGED {
            if capabilities[capability]["listChanged"] == Value::Bool(true) {
                filter.insert(key.to_owned(), Value::Bool(true));
            }
        }
        let uris = self.listeners.uris();
        if capabilities["resources"]["subscribe"] == Value::Bool(true) && !uris.is_empty() {
            filter.insert("resourceSubscriptions".to_owned(), json!(uris));
        }
        if filter.is_empty() || self.listen.unsupported() {
            return None;
        }
        let seq = self.next_seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed).max(1);
        let upstream = UpstreamId { epoch: self.epoch, seq }.to_json();
        let id: Value = serde_json::from_str(&upstream).ok()?;
        let params = json!({ "notifications": filter });
        // mcpx's own stream, nobody's call: it asks for no log messages (each caller's
        // level travels in its own requests).
        let level = None;
        let request = Message::request(&upstream, "subscriptions/listen", Some(&params.to_string()));
        let request = era::with_envelope(request, &version, level);
        let (tx, rx) = oneshot::channel();
        self.listen.opened(id.clone(), Some(tx));
        if self.tx.send(Outbound::Message(request)).await.is_err() {
            self.listen.ended(&id, "the link is closed", false);
        }
        Some(rx)
    }

    /// Waits for a listen stream that carries the clients' resource subscriptions as
    /// they are now (after one was added or removed), within `timeout`: the stream
    /// being opened when there is one, else a new one. The URIs the server agreed to.
    ///
    /// Errors, each a JSON-RPC code and a message naming what happened: -32601 when
    /// the server offers no resource subscriptions or has no listen; -32603 when it
    /// refused or ended the stream, or did not acknowledge it in time.
    pub(crate) async fn listen_for_uris(&self, timeout: Option<Duration>) -> Result<Vec<String>, (i64, String)> {
        let server = &self.identity.server;
        let offers = self.session().is_some_and(|s| {
            serde_json::from_str::<Value>(s.capabilities.get())
                .is_ok_and(|c| c["resources"]["subscribe"] == Value::Bool(true))
        });
        if !offers {
            let why = format!("`{server}` offers no resource subscriptions (its `resources.subscribe` capability)");
            return Err((error_code::METHOD_NOT_FOUND, why));
        }
        let (tx, rx) = oneshot::channel();
        let rx = match self.listen.join_unacknowledged(tx) {
            Ok(()) => rx,
            Err(_) => self
                .relisten()
                .await
                .ok_or_else(|| (error_code::METHOD_NOT_FOUND, format!("`{server}` has no subscriptions/listen")))?,
        };
        let waited = match timeout {
            Some(t) => tokio::time::timeout(t, rx).await.map_err(|_| {
                let why = format!("`{server}` did not acknowledge its subscriptions/listen within {}s", t.as_secs());
                (error_code::INTERNAL_ERROR, why)
            })?,
            None => rx.await,
        };
        let waited =
            waited.unwrap_or_else(|_| Err(format!("`{server}` ended before acknowledging its subscriptions/listen")));
        waited.map_err(|why| (error_code::INTERNAL_ERROR, why))
    }

    /// A notification from the server, as the listen sees it when one is open (only
    /// a modern server's are; else it is returned as it is): the listen's own
    /// acknowledgement and teardown are taken and acted on (`None`), a stale stream's
    /// notification is dropped (`None`), and the rest is returned with the
    /// `subscriptionId` removed (a legacy client knows none; a modern client's own
    /// stream stamps its own).
    pub(super) fn heard(&self, message: Message) -> Option<Message> {
        if !self.listen.any_open() {
            return Some(message);
        }
        match self.heard_on_listen(message) {
            Heard::Route(message) => Some(message),
            Heard::Taken => None,
        }
    }

    /// [`Instance::heard`] with a listen open.
    fn heard_on_listen(&self, message: Message) -> Heard {
        let Ok(mut v) = serde_json::from_str::<Value>(message.as_str()) else { return Heard::Route(message) };
        let method = v["method"].as_str().unwrap_or_default().to_owned();
        if method == "notifications/cancelled" {
            // 2026-07-28, "Cancellation": a server cancels only a listen, to end it.
            let id = v["params"]["requestId"].to_string();
            self.listen_ended(&id, "the server ended it", false);
            return Heard::Taken;
        }
        let meta = v["params"]["_meta"].as_object_mut();
        let Some(subscription) = meta.and_then(|m| m.remove(SUBSCRIPTION_ID)) else { return Heard::Route(message) };
        if method == "notifications/subscriptions/acknowledged" {
            let agreed = v["params"]["notifications"]["resourceSubscriptions"].as_array().cloned().unwrap_or_default();
            let uris = agreed.iter().filter_map(Value::as_str).map(str::to_owned).collect();
            for old in self.listen.acknowledged(&subscription, uris).unwrap_or_default() {
                self.cancel_listen(&old, "replaced by a listen with other subscriptions");
            }
            return Heard::Taken;
        }
        if !self.listen.takes(&subscription) {
            if !self.listen.is_open(&subscription) {
                // An earlier daemon's stream on a server that outlived it (stdio):
                // nobody reads it any more.
                self.cancel_listen(&subscription, "its daemon has gone");
            }
            return Heard::Taken;
        }
        if v["params"]["_meta"].as_object().is_some_and(serde_json::Map::is_empty) {
            if let Some(params) = v["params"].as_object_mut() {
                params.remove("_meta");
            }
        }
        Heard::Route(Message::parse(v.to_string()).unwrap_or(message))
    }

    /// Cancels listen stream `id` upstream (2026-07-28, "Cancellation": over HTTP the
    /// link closes the stream instead of sending the notification).
    fn cancel_listen(&self, id: &Value, reason: &str) {
        let params = json!({ "requestId": id, "reason": reason });
        let cancel = Message::notification("notifications/cancelled", Some(&params.to_string()));
        if self.tx.try_send(Outbound::Message(cancel)).is_err() {
            tracing::warn!(server = %self.identity.server, "could not cancel a subscriptions/listen: the link is full or closed");
        }
    }

    /// The response to a listen stream (its end, graceful or an error), when `id` is
    /// one: true, and the stream is opened again after a pause (never after -32601).
    pub(super) fn listen_answered(&self, id: &str, outcome: Result<&Message, &CallError>) -> bool {
        if self.listen.is_stream(id).is_none() {
            return false;
        }
        let (why, unsupported) = match outcome {
            Ok(answer) => match response_result(answer) {
                Ok(_) => ("the server ended it".to_owned(), false),
                Err(e) => (format!("the server refused it: {e}"), e.code == error_code::METHOD_NOT_FOUND),
            },
            Err(e) => (e.to_string(), false),
        };
        self.listen_ended(id, &why, unsupported)
    }

    /// Stream `id` ended for `why`; opened again after a pause unless another is open
    /// or the server has no listen. False when `id` is no open stream.
    fn listen_ended(&self, id: &str, why: &str, unsupported: bool) -> bool {
        let Some(id) = self.listen.is_stream(id) else { return false };
        let server = &self.identity.server;
        let Some(pause) = self.listen.ended(&id, why, unsupported) else {
            if unsupported {
                tracing::info!(server = %server, "the server has no subscriptions/listen ({why}); its list changes and resource updates are not heard");
            }
            return true;
        };
        tracing::info!(server = %server, "the server's subscriptions/listen ended ({why}); opening it again in {} ms", pause.as_millis());
        let me = self.me.clone();
        tokio::spawn(async move {
            tokio::time::sleep(pause).await;
            let Some(inst) = me.upgrade() else { return };
            if inst.is_alive() && !inst.listen.any_open() {
                inst.relisten().await;
            }
        });
        true
    }
}
