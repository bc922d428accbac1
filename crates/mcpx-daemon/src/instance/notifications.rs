//! Where the notifications a server sends go: progress to the request that asked for
//! it, resource updates to their subscribers, list changes to the daemon, and log
//! messages to the callers that asked for them, by the rules of the server's era.
//!
//! A legacy server's level is one per session, so its log messages go to every client
//! by the level it set ([`super::Listeners::log`]). A modern server's are
//! request-scoped (MCP 2026-07-28, Server, Utilities, "Logging", "Per-request log
//! level": sent only for a request that carried a level, at or above it, "on the
//! response stream of that request"), so they go to that request's caller alone.

use std::collections::HashSet;
use std::sync::Arc;

use mcpx_proto::Message;
use tokio::sync::mpsc;

use super::listeners::{caller_key, message_level};
use super::{CallContext, Instance, InstanceEvent};

impl Instance {
    /// Routes a notification from the server; `related` is the upstream id (raw JSON)
    /// of the request whose answer stream carried it, when one did (a remote server's
    /// SSE answer). A log message nobody takes goes to the daemon's log (rate-limited).
    pub(super) fn route_notification(
        &self,
        m: Message,
        related: Option<&str>,
        events: &mpsc::UnboundedSender<(String, InstanceEvent)>,
    ) {
        // What a `subscriptions/listen` stream carries, without its `subscriptionId`.
        let Some(m) = self.heard(m) else { return };
        let method = m.method().unwrap_or_default().to_owned();
        if method.ends_with("/list_changed") {
            if self.may_log() {
                tracing::info!(server = %self.identity.server, method, "server changed a list; re-reading its schema");
            }
            let _ = events.send((self.identity.fingerprint.clone(), InstanceEvent::ListChanged(method)));
            return;
        }
        let heard = match method.as_str() {
            "notifications/progress" => match m.notified_progress_token().and_then(|t| self.calls.progress_target(t)) {
                Some((notify, token)) => return self.deliver(&notify, m.with_notified_progress_token(&token)),
                None => false,
            },
            "notifications/resources/updated" => self.listeners.updated(&m),
            "notifications/message" if self.era().is_some_and(|e| e.is_modern()) => self.request_log(&m, related),
            "notifications/message" => {
                let callers = match related {
                    Some(upstream) => self.calls.caller_of(upstream).into_iter().collect(),
                    None => self.calls.callers(),
                };
                self.listeners.log(&m, &callers, |n| self.deliver(n, m.clone()))
            }
            _ => false,
        };
        match (heard, method.as_str()) {
            (true, _) => {}
            (false, "notifications/message") if self.may_log() => {
                tracing::info!(server = %self.identity.server, "server log: {}", m.as_str().chars().take(512).collect::<String>());
            }
            (false, _) => {
                tracing::debug!(server = %self.identity.server, method, "dropped a notification nobody takes")
            }
        }
    }

    /// A modern server's log message, to the caller of the request it belongs to: the
    /// request whose answer stream carried it (`related`), or else, over stdio, which
    /// carries no relation ("Receiving Messages": one channel, no per-request
    /// streams), the requests in flight whose level admits it, when they are all of
    /// one caller. With several callers it cannot be told whose it is, and it is
    /// given to none of them (no caller hears another's log). It goes on the
    /// request's stream, or, for an MCP client whose request has none (answered as
    /// JSON), on the client's own stream. False when it reached nobody.
    fn request_log(&self, m: &Message, related: Option<&str>) -> bool {
        let said = message_level(m);
        let admitted: Vec<Arc<CallContext>> = (self.calls.logging(related).into_iter())
            .filter(|(_, level)| said.is_none_or(|s| s >= *level))
            .map(|(ctx, _)| ctx)
            .collect();
        let callers: HashSet<usize> = admitted.iter().map(identity).collect();
        let ([ctx, ..], 1) = (admitted.as_slice(), callers.len()) else { return false };
        ctx.heard.note();
        if let Some(notify) = &ctx.notify {
            self.deliver(notify, m.clone());
            return true;
        }
        match self.listeners.sink_of(ctx) {
            Some(sink) => {
                sink.send(m);
                true
            }
            None => false,
        }
    }
}

/// Who a request's caller is: an MCP client (the same for all its requests), or
/// else the request itself (a shell call is a caller of its own).
fn identity(ctx: &Arc<CallContext>) -> usize {
    caller_key(ctx).unwrap_or(Arc::as_ptr(ctx) as usize)
}
