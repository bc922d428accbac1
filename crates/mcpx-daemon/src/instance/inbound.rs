//! What comes from a server, handled: each message or event of the link
//! ([`Instance::handle`]): responses routed to their callers, notifications to their
//! listeners, server requests to the caller that can answer them, and the link's end.

use mcpx_proto::mcp::error_code;
use mcpx_proto::{Message, MessageKind};

use super::*;

/// The server requests a caller's activity record keeps ([`super::Heard`]): those a
/// person or a model answers. `roots/list` and `ping` are plumbing.
const RECORDED_REQUESTS: [&str; 2] = ["sampling/createMessage", "elicitation/create"];

impl Instance {
    /// Handles one message or event from the server.
    pub(super) async fn handle(&self, item: Inbound, events: &mpsc::UnboundedSender<(String, InstanceEvent)>) {
        match item {
            Inbound::Message(m) => match m.kind() {
                MessageKind::Response => self.complete(m),
                MessageKind::Request => self.answer_server_request(m, None).await,
                MessageKind::Notification => self.route_notification(m, None, events),
            },
            Inbound::Related { message, request } if message.kind() == MessageKind::Notification => {
                self.route_notification(message, Some(&request), events)
            }
            Inbound::Related { message, request } => self.answer_server_request(message, Some(&request)).await,
            Inbound::OversizeId(id) => {
                if let Some(w) = self.calls.take(&id) {
                    let _ = w.reply.send(Err(CallError::TooLarge { limit: self.max_message_bytes }));
                }
            }
            Inbound::Undecodable { id, reason } => {
                if let Some(w) = self.calls.take(&id) {
                    let _ = w.reply.send(Err(CallError::Protocol(format!(
                        "the server's reply could not be decoded ({reason}) and was discarded; the server broke JSON-RPC: report it to its maintainers"
                    ))));
                }
            }
            Inbound::Failed { id, error } => {
                let error = CallError::Transport(error);
                if self.listen_answered(&id, Err(&error)) {
                    return;
                }
                if let Some(w) = self.calls.take(&id) {
                    let _ = w.reply.send(Err(error));
                }
            }
            Inbound::Oversize { bytes, id } => {
                if !self.may_log() {
                    return;
                }
                tracing::warn!(server = %self.identity.server, bytes, id = id.as_deref().unwrap_or("none"), limit = self.max_message_bytes, "discarded a message over maxMessageBytes");
            }
            Inbound::Restarted(pid) => {
                tracing::info!(server = %self.identity.server, pid, "server restarted by its supervisor");
                self.fail_pending(|| CallError::Lost("the server was restarted".into()));
                self.listen.clear();
                self.state.send_replace(State::Starting);
            }
            Inbound::Lost(reason) => {
                // A crash is an unrequested end of a running instance; a failed start
                // is counted by the pool, once.
                let expected = self.state() != State::Running;
                *lock(&self.lost) = Some(reason.clone());
                self.state.send_replace(State::Lost);
                self.fail_pending(|| CallError::Lost(reason.clone()));
                let crash = (!expected).then(|| CallError::Lost(reason.clone()));
                let _ = events.send((
                    self.identity.fingerprint.clone(),
                    InstanceEvent::Exited {
                        server: self.identity.server.clone(),
                        cache_key: self.identity.cache_key.clone(),
                        crash,
                    },
                ));
            }
            Inbound::Exited(exit) => {
                let expected = self.state() != State::Running;
                self.state.send_replace(State::Exited(exit));
                self.fail_pending(|| self.exited_error(exit));
                let crash = (!expected).then(|| self.exited_error(exit));
                let _ = events.send((
                    self.identity.fingerprint.clone(),
                    InstanceEvent::Exited {
                        server: self.identity.server.clone(),
                        cache_key: self.identity.cache_key.clone(),
                        crash,
                    },
                ));
            }
        }
    }

    fn fail_pending(&self, error: impl Fn() -> CallError) {
        for w in self.calls.drain() {
            let _ = w.reply.send(Err(error()));
        }
    }

    fn complete(&self, response: Message) {
        if response.id().is_none() {
            return self.complete_null_id(response);
        }
        let id = response.id().unwrap_or("null").to_owned();
        if self.listen_answered(&id, Ok(&response)) {
            return;
        }
        match self.calls.take(&id) {
            Some(w) => {
                let gave_up = w.reply.send(Ok(response)).is_err();
                if gave_up && self.may_log() {
                    tracing::info!(server = %self.identity.server, id, "dropped a response whose caller gave up");
                }
            }
            None if self.may_log() => {
                tracing::warn!(server = %self.identity.server, id, "dropped a late or duplicate response (no request is waiting for this id)")
            }
            None => {}
        }
    }

    /// A response with `"id": null` (JSON-RPC 2.0, section 5: the server could not
    /// read a request's id): counted and logged; when it is an error and exactly one
    /// request is in flight, that request fails with the server's own error.
    fn complete_null_id(&self, response: Message) {
        let total = self.null_id_errors.fetch_add(1, Ordering::Relaxed) + 1;
        let error = serde_json::from_str::<serde_json::Value>(response.as_str())
            .ok()
            .and_then(|v| v.get("error").filter(|e| e.is_object()).map(ToString::to_string));
        let failed = error.as_deref().is_some_and(|e| self.calls.fail_sole(e));
        if self.may_log() {
            let outcome = if failed {
                "the only request in flight failed with it"
            } else {
                "dropped: no single request in flight it can belong to"
            };
            tracing::warn!(server = %self.identity.server, total, error = error.as_deref().unwrap_or("none"), "the server answered with a null id (it could not read a request's id); {outcome}");
        }
    }

    /// Server-to-client requests (design: "Pools"): `ping` is answered here; the
    /// others go to the caller of the request they are `related` to (the upstream id
    /// of the request whose answer stream carried them), or else to the caller whose
    /// request is the only one in flight on this instance. A shell caller answers
    /// `roots/list` with its working directory and nothing else. Whatever nobody can
    /// answer gets a JSON-RPC error, never silence.
    async fn answer_server_request(&self, request: Message, related: Option<&str>) {
        let id = request.id().unwrap_or("null").to_owned();
        let method = request.method().unwrap_or_default().to_owned();
        if method == "ping" {
            return self.notify(Message::response(&id, "{}")).await;
        }
        let callers = match related {
            Some(upstream) => self.calls.caller_of(upstream).into_iter().collect(),
            None => self.calls.callers(),
        };
        // The only caller in flight is an MCP client that declared this capability:
        // ask it, and hand its answer back to the server under the server's own id.
        let sole = callers.first().filter(|_| callers.len() == 1);
        if let Some((ctx, answer)) = sole.and_then(|ctx| Some((ctx.clone(), ctx.ask_client(&request)?))) {
            let tx = self.tx.clone();
            let server = self.identity.server.clone();
            let (asked_at, asked_ms) = (std::time::Instant::now(), crate::schema::now_ms());
            tokio::spawn(async move {
                let answered = tokio::time::timeout(CLIENT_ANSWER_TIMEOUT, answer).await.ok().and_then(Result::ok);
                if RECORDED_REQUESTS.contains(&method.as_str()) {
                    ctx.heard.asked(super::HeardRequest {
                        method: method.clone(),
                        started_ms: asked_ms,
                        duration_us: asked_at.elapsed().as_micros() as u64,
                        answer: answered.clone(),
                    });
                }
                let reply = match answered {
                    Some(response) => response.with_id(&id),
                    None => {
                        tracing::info!(server = %server, method, "the MCP client did not answer a forwarded request");
                        Message::error_response(
                            &id,
                            error_code::NO_CALLER,
                            &format!("mcpx: the client did not answer `{method}`"),
                        )
                    }
                };
                let _ = tx.send(Outbound::Message(reply)).await;
            });
            return;
        }
        let reply = server_requests::local_answer(&id, &method, &callers);
        if let Some(ctx) = sole.filter(|_| RECORDED_REQUESTS.contains(&method.as_str())) {
            let (method, started_ms) = (method.clone(), crate::schema::now_ms());
            ctx.heard.asked(super::HeardRequest { method, started_ms, duration_us: 0, answer: Some(reply.clone()) });
        }
        if reply.as_str().contains("\"error\"") && self.may_log() {
            tracing::info!(server = %self.identity.server, method, "answered a server request with an error: no caller can answer it");
        }
        self.notify(reply).await;
    }

    /// Feeds everything from the link to the instance until the link ends.
    pub(super) async fn route(
        inst: std::sync::Weak<Instance>,
        mut rx: mpsc::Receiver<Inbound>,
        events: mpsc::UnboundedSender<(String, InstanceEvent)>,
    ) {
        while let Some(item) = rx.recv().await {
            let Some(inst) = inst.upgrade() else { return };
            inst.handle(item, &events).await;
        }
    }
}
