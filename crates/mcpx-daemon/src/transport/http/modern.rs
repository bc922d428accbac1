//! Modern requests over Streamable HTTP (MCP 2026-07-28, Basic, Transports,
//! "Streamable HTTP"): no session, each POST carrying its routing headers
//! (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`: "Request headers"), and a
//! `400` (or other `4xx`) whose body is a JSON-RPC error handed to the instance as
//! the request's answer, so the era probe and the caller see the server's own error
//! ("Backward Compatibility": "inspect the response body before falling back").

use std::collections::HashMap;
use std::sync::Arc;

use mcpx_proto::{Message, MessageKind};
use reqwest::StatusCode;
use reqwest::header::WWW_AUTHENTICATE;
use serde_json::Value;
use tokio::task::{self, AbortHandle};

use super::session::{Remote, Sink, header};
use crate::transport::link::{Inbound, TransportError};
use mcpx_proto::era;

/// The routing headers of `m` when it is a modern request (its `_meta` names a
/// modern revision); `None` for anything else.
pub(super) fn routing(m: &Message) -> Option<Vec<(&'static str, String)>> {
    if m.kind() != MessageKind::Request {
        return None;
    }
    let body: Value = serde_json::from_str(m.as_str()).ok()?;
    let headers = era::routing_headers(&body);
    (!headers.is_empty()).then_some(headers)
}

impl Remote {
    /// Delivers a modern request: one POST with `routing` and the caller's `params`
    /// (its `Mcp-Param-*` headers, passed on as they came), no session id; a `401` is
    /// answered once with the kept login, as for a legacy request.
    ///
    /// Errors: the POST fails, or the server answers an HTTP error whose body is not
    /// a JSON-RPC error (worded as for any request).
    pub(super) async fn deliver_modern(
        self: &Arc<Self>,
        m: &Message,
        routing: &[(&'static str, String)],
        params: &[(String, String)],
    ) -> Result<(), TransportError> {
        self.renew_if_due().await?;
        let mut authorized = false;
        loop {
            let mut request = self.post_request(m.as_str());
            for (name, value) in routing {
                request = request.header(*name, value);
            }
            for (name, value) in params.iter().filter(|(n, _)| n.starts_with(era::PARAM_HEADER_PREFIX)) {
                request = request.header(name.as_str(), value);
            }
            let response = request.send().await.map_err(|e| self.transport_error(&e))?;
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED && !authorized && self.uses_oauth() {
                authorized = true;
                self.authorize(header(&response, WWW_AUTHENTICATE).as_deref()).await?;
                continue;
            }
            if status.is_client_error() {
                let challenge = header(&response, WWW_AUTHENTICATE);
                let body = response.text().await.unwrap_or_default();
                if let Some(answer) = error_answer(&body, m.id().unwrap_or("null")) {
                    tracing::debug!(server = %self.identity.server, status = status.as_u16(), "the server answered a modern request with an HTTP error carrying a JSON-RPC error");
                    let _ = self.inbound.send(Inbound::Message(answer)).await;
                    return Ok(());
                }
                return Err(self.status_error(status, challenge, &body));
            }
            let response = self.check(response).await?;
            return self.read_answer(response, m.id(), Sink::Forward).await;
        }
    }
}

/// The modern requests whose POST is in flight, so a cancellation can close one
/// (2026-07-28, Basic, Patterns, "Cancellation": over Streamable HTTP, closing the
/// request's stream is the signal, and no `notifications/cancelled` is sent).
#[derive(Debug, Default)]
pub(super) struct Posts {
    /// Request id (raw JSON) → the task delivering it.
    by_request: HashMap<String, AbortHandle>,
    /// Task → its request id, to forget it when it ends.
    by_task: HashMap<task::Id, String>,
}

impl Posts {
    /// The task `handle` delivers request `id` (`Some` for a modern request only).
    pub(super) fn started(&mut self, id: Option<String>, handle: AbortHandle) {
        if let Some(id) = id {
            self.by_task.insert(handle.id(), id.clone());
            self.by_request.insert(id, handle);
        }
    }

    /// A delivery task ended.
    pub(super) fn ended(&mut self, task: task::Id) {
        if let Some(id) = self.by_task.remove(&task) {
            self.by_request.remove(&id);
        }
    }

    /// When `m` is `notifications/cancelled` for a modern request in flight: closes
    /// that request's POST (the server takes it as the cancellation) and returns true,
    /// so the notification itself is not sent.
    pub(super) fn cancel(&mut self, m: &Message) -> bool {
        if m.method() != Some("notifications/cancelled") || self.by_request.is_empty() {
            return false;
        }
        let Ok(v) = serde_json::from_str::<Value>(m.as_str()) else { return false };
        let Some(handle) = self.by_request.remove(&v["params"]["requestId"].to_string()) else { return false };
        self.by_task.remove(&handle.id());
        handle.abort();
        true
    }
}

/// The JSON-RPC error in an HTTP error's `body` (a response, with or without an id),
/// as the answer to the request `id`; `None` when the body carries none.
fn error_answer(body: &str, id: &str) -> Option<Message> {
    let v: Value = serde_json::from_str(body).ok()?;
    let error = v.get("error").filter(|e| e.is_object() && e["code"].is_i64())?;
    Message::parse(format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_errors_json_rpc_error_answers_the_request() {
        let body =
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32020,"message":"Mcp-Method header does not match"}}"#;
        let answer = error_answer(body, "\"7\"").unwrap();
        assert_eq!(answer.id(), Some("\"7\""));
        assert!(answer.as_str().contains("-32020"));
        assert!(error_answer("Bad Request", "1").is_none());
        assert!(error_answer(r#"{"error":"no session"}"#, "1").is_none());
        let request = Message::request(
            "1",
            "tools/call",
            Some(r#"{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#),
        );
        let headers = routing(&request).unwrap();
        assert!(headers.contains(&("mcp-method", "tools/call".to_owned())));
        assert!(headers.contains(&("mcp-name", "echo".to_owned())));
        assert!(routing(&Message::request("1", "tools/list", None)).is_none());
    }
}
