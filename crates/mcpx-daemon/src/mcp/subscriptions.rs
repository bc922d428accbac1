//! A modern client's `subscriptions/listen` stream (MCP 2026-07-28, "Subscriptions",
//! SEP-2575): the notifications it opts in to, the acknowledgement that opens the
//! stream, and each later notification filtered and stamped with the stream's
//! `subscriptionId`.
//!
//! A listen stream is an MCP session of the endpoint with a [`Listening`]: the
//! daemon's announcements (`list_changed`) reach it as they reach a legacy session's
//! GET stream, and its resource updates through the instance's per-URI subscription
//! counting (`instance/listeners.rs`), as `resources/subscribe` does. Nothing here
//! knows the daemon.

use mcpx_proto::Message;
use serde_json::{Map, Value, json};

use crate::mcp::era::{self, Era};

/// `_meta` key of the stream a notification belongs to: the listen request's id.
pub(crate) const SUBSCRIPTION_ID: &str = era::META_SUBSCRIPTION_ID;

/// The `SubscriptionFilter` keys of the `list_changed` notifications, and their
/// methods.
const LIST_CHANGED: [(&str, &str); 3] = [
    ("toolsListChanged", "notifications/tools/list_changed"),
    ("resourcesListChanged", "notifications/resources/list_changed"),
    ("promptsListChanged", "notifications/prompts/list_changed"),
];

/// The filter key of resource updates: the URIs to hear `notifications/resources/updated` of.
const RESOURCE_SUBSCRIPTIONS: &str = "resourceSubscriptions";

/// What one listen stream agreed to carry, and its `subscriptionId`.
#[derive(Debug, Clone)]
pub(crate) struct Listening {
    /// The listen request's id (JSON), which is the stream's `subscriptionId`.
    id: Value,
    /// The `SubscriptionFilter` agreed to: the `list_changed` kinds asked for, and the
    /// resource URIs whose subscription succeeded.
    agreed: Map<String, Value>,
}

impl Listening {
    /// What request `id` (JSON text) asks for in `params.notifications` (a
    /// `SubscriptionFilter`): every `list_changed` kind asked for (mcpx offers all
    /// three), and the URIs of `resourceSubscriptions` until [`Listening::keep_uris`].
    pub(crate) fn new(id: &str, params: &Value) -> Listening {
        let asked = &params["notifications"];
        let mut agreed = Map::new();
        for (key, _) in LIST_CHANGED {
            if asked[key] == Value::Bool(true) {
                agreed.insert(key.to_owned(), Value::Bool(true));
            }
        }
        if !Listening::uris_of(asked).is_empty() {
            agreed.insert(RESOURCE_SUBSCRIPTIONS.to_owned(), json!(Listening::uris_of(asked)));
        }
        Listening { id: serde_json::from_str(id).unwrap_or(Value::Null), agreed }
    }

    /// The resource URIs asked for.
    pub(crate) fn uris(&self) -> Vec<String> {
        Listening::uris_of(&Value::Object(self.agreed.clone()))
    }

    fn uris_of(filter: &Value) -> Vec<String> {
        let uris = filter[RESOURCE_SUBSCRIPTIONS].as_array().map(Vec::as_slice).unwrap_or_default();
        uris.iter().filter_map(Value::as_str).map(str::to_owned).collect()
    }

    /// Keeps only `uris` (those whose subscription succeeded) in the agreed filter.
    pub(crate) fn keep_uris(&mut self, uris: Vec<String>) {
        if uris.is_empty() {
            self.agreed.remove(RESOURCE_SUBSCRIPTIONS);
        } else {
            self.agreed.insert(RESOURCE_SUBSCRIPTIONS.to_owned(), json!(uris));
        }
    }

    /// `notifications/subscriptions/acknowledged`, the stream's first message: the
    /// agreed filter, with the `subscriptionId`.
    pub(crate) fn acknowledgement(&self) -> Message {
        let params = json!({ "notifications": self.agreed, "_meta": { SUBSCRIPTION_ID: self.id } });
        Message::notification("notifications/subscriptions/acknowledged", Some(&params.to_string()))
    }

    /// `message` as this stream carries it: stamped with the `subscriptionId` when the
    /// stream agreed to its kind (the acknowledgement as it is); `None` for anything
    /// else, which the stream must not carry.
    pub(crate) fn stamp(&self, message: &Message) -> Option<Message> {
        let method = message.method()?;
        if method == "notifications/subscriptions/acknowledged" {
            return Some(message.clone());
        }
        let mut value: Value = serde_json::from_str(message.as_str()).ok()?;
        let wanted = match method {
            "notifications/resources/updated" => {
                let uri = value["params"]["uri"].as_str().unwrap_or_default();
                self.uris().iter().any(|u| u == uri)
            }
            _ => LIST_CHANGED.iter().any(|(key, m)| *m == method && self.agreed.contains_key(*key)),
        };
        if !wanted {
            return None;
        }
        if !value["params"].is_object() {
            value["params"] = json!({});
        }
        value["params"]["_meta"][SUBSCRIPTION_ID] = self.id.clone();
        Message::parse(value.to_string()).ok()
    }
}

/// Whether `request` is a modern `subscriptions/listen`: the method, and a modern
/// protocol version in its `_meta` ([`era::of`]).
pub(crate) fn is_listen(request: &Message) -> bool {
    request.method() == Some("subscriptions/listen")
        && serde_json::from_str::<Value>(request.as_str()).is_ok_and(|v| matches!(era::of(&v, None), Era::Modern(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listening() -> Listening {
        let params = json!({ "notifications": {
            "toolsListChanged": true, "promptsListChanged": false, "resourceSubscriptions": ["mcpx://fake/fake://static"],
        } });
        Listening::new("7", &params)
    }

    #[test]
    fn the_acknowledgement_carries_what_was_agreed() {
        let ack: Value = serde_json::from_str(listening().acknowledgement().as_str()).unwrap();
        assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], 7);
        assert_eq!(
            ack["params"]["notifications"],
            json!({ "toolsListChanged": true, "resourceSubscriptions": ["mcpx://fake/fake://static"] })
        );
    }

    #[test]
    fn only_what_was_asked_for_is_carried_and_stamped() {
        let l = listening();
        let tools = Message::notification("notifications/tools/list_changed", None);
        let stamped: Value = serde_json::from_str(l.stamp(&tools).unwrap().as_str()).unwrap();
        assert_eq!(stamped["params"]["_meta"][SUBSCRIPTION_ID], 7);
        assert!(l.stamp(&Message::notification("notifications/prompts/list_changed", None)).is_none());
        let update = |uri: &str| {
            Message::notification("notifications/resources/updated", Some(&json!({ "uri": uri }).to_string()))
        };
        assert!(l.stamp(&update("mcpx://fake/fake://static")).is_some());
        assert!(l.stamp(&update("mcpx://fake/fake://other")).is_none());
        assert!(l.stamp(&Message::notification("notifications/message", None)).is_none());
        let mut none = l.clone();
        none.keep_uris(Vec::new());
        assert!(none.stamp(&update("mcpx://fake/fake://static")).is_none());
    }
}
