//! The streamable HTTP transport (MCP 2025-11-25, Transports, "Streamable HTTP"):
//! one POST per message, the session re-initialized when the server forgets it,
//! the optional GET stream for server-initiated messages, and the fall back to the
//! HTTP+SSE transport for old servers.

use std::sync::Arc;
use std::time::Duration;

use mcpx_proto::{Message, MessageKind, SseDecoder};
use reqwest::StatusCode;
use reqwest::header::WWW_AUTHENTICATE;

use super::modern;
use super::session::{CONNECT_TIMEOUT, DEFAULT_RETRY_MS, MAX_RESUMES, Remote, SESSION_ID, Sink, header};
use crate::config::RemoteKind;
use crate::sync::lock;
use crate::transport::link::{Inbound, TransportError};

impl Remote {
    /// Delivers one message (a modern request with the caller's `Mcp-Param-*`
    /// headers, `params`) and reports a failure to the waiting request.
    pub(super) async fn send(self: Arc<Self>, m: Message, params: Vec<(String, String)>) {
        let id = (m.kind() == MessageKind::Request).then(|| m.id().unwrap_or("null").to_owned());
        let method = m.method().unwrap_or("").to_owned();
        let Err(error) = self.deliver(&m, &params).await else { return };
        tracing::warn!(server = %self.identity.server, method = %method, error = %error, "a message to the remote server failed");
        let unreachable = error.unreachable();
        if let Some(id) = id {
            let _ = self.inbound.send(Inbound::Failed { id, error: error.clone() }).await;
        }
        if unreachable {
            let _ = self.inbound.send(Inbound::Lost(error.to_string())).await;
        }
    }

    /// Delivers one message over streamable HTTP (or HTTP+SSE, when configured or
    /// fallen back to): re-initializes once when the server forgot the session.
    async fn deliver(self: &Arc<Self>, m: &Message, params: &[(String, String)]) -> Result<(), TransportError> {
        if let Some(routing) = modern::routing(m) {
            if self.kind == RemoteKind::Sse {
                return Err(TransportError::exchange(format!(
                    "{} is configured as an HTTP+SSE server (MCP 2024-11-05), which has no {} requests",
                    self.written_url,
                    m.method().unwrap_or_default()
                )));
            }
            return self.deliver_modern(m, &routing, params).await;
        }
        if m.kind() == MessageKind::Notification && lock(&self.state).initialize.is_none() {
            // No session: the server is modern (or not yet started), and the modern
            // era defines no client notifications over HTTP (2026-07-28, Transports,
            // "Streamable HTTP"; a cancellation would close the request's stream).
            tracing::debug!(server = %self.identity.server, method = m.method().unwrap_or_default(), "not sending a notification to a server without a session");
            return Ok(());
        }
        let is_init = m.method() == Some("initialize");
        if is_init {
            let mut state = lock(&self.state);
            state.initialize = Some(m.as_str().to_owned());
            state.id = None;
            state.protocol = None;
        }
        let configured = self.kind == RemoteKind::Sse;
        if configured || lock(&self.state).legacy.is_some() {
            return match self.post_legacy(m).await {
                Err(e) if configured && is_init => Err(e.map_message(|m| {
                    format!(
                        "{m}; the entry says `\"transport\": \"sse\"` (HTTP+SSE): for a streamable HTTP server, remove it"
                    )
                })),
                other => other,
            };
        }
        if m.method() == Some("notifications/initialized") {
            // Open the GET stream first, so what the server sends once initialized
            // (a `list_changed`, say) has somewhere to go.
            let ready = self.clone().start_listening();
            let _ = tokio::time::timeout(CONNECT_TIMEOUT, ready).await;
        }
        let mut retried = false;
        let mut authorized = false;
        let mut stepped = false;
        self.renew_if_due().await?;
        loop {
            let sid = lock(&self.state).id.clone();
            let response = self.post(m.as_str(), sid.as_deref()).await?;
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED && !authorized && self.uses_oauth() {
                // MCP 2025-11-25, Authorization, "Authorization Flow Steps": the 401
                // names the protected resource metadata; the kept login answers it.
                authorized = true;
                self.authorize(header(&response, WWW_AUTHENTICATE).as_deref()).await?;
                continue;
            }
            if status == StatusCode::FORBIDDEN && !stepped && self.uses_oauth() {
                // MCP 2025-11-25, Authorization, "Runtime Insufficient Scope Errors".
                stepped = true;
                if self.insufficient_scope(header(&response, WWW_AUTHENTICATE).as_deref())? {
                    continue;
                }
                return Err(self
                    .check(response)
                    .await
                    .err()
                    .unwrap_or_else(|| TransportError::exchange(format!("{} answered HTTP 403", self.written_url))));
            }
            if matches!(status.as_u16(), 400 | 404) && sid.is_some() && !retried && !is_init {
                let challenge = header(&response, WWW_AUTHENTICATE);
                let body = response.text().await.unwrap_or_default();
                // The specification answers a forgotten session with 404; servers built
                // on the TypeScript SDK's examples answer 400 "No valid session ID".
                if status == StatusCode::NOT_FOUND || body.to_ascii_lowercase().contains("session") {
                    retried = true;
                    self.reinitialize(sid.as_deref()).await?;
                    continue;
                }
                return Err(self.status_error(status, challenge, &body));
            }
            if is_init && matches!(status.as_u16(), 400 | 404 | 405) {
                tracing::info!(server = %self.identity.server, status = status.as_u16(), "the server refused a streamable HTTP initialize; trying the HTTP+SSE transport of MCP 2024-11-05");
                return self.post_legacy(m).await.map_err(|e| {
                    e.map_message(|m| {
                        format!(
                            "{} answered the streamable HTTP initialize with HTTP {status}, and the HTTP+SSE transport tried next failed too: {m}; check the entry's `url`",
                            self.written_url
                        )
                    })
                });
            }
            let response = self.check(response).await?;
            if is_init {
                lock(&self.state).id = header(&response, SESSION_ID);
            }
            let wanted = (m.kind() == MessageKind::Request).then(|| m.id().unwrap_or("null"));
            self.read_answer(response, wanted, Sink::Forward).await?;
            return Ok(());
        }
    }

    /// The server forgot the session (404): initializes again with the original
    /// request, unless another task already did since `stale` failed.
    pub(super) async fn reinitialize(self: &Arc<Self>, stale: Option<&str>) -> Result<(), TransportError> {
        let _guard = self.connect.lock().await;
        let initialize = {
            let mut state = lock(&self.state);
            if state.id.as_deref() != stale {
                return Ok(());
            }
            // The revision is negotiated again (`MCP-Protocol-Version` follows `initialize`).
            state.protocol = None;
            state.initialize.clone()
        };
        let Some(initialize) = initialize else {
            return Err(TransportError::exchange(format!("{} forgot the session (404)", self.written_url)));
        };
        tracing::info!(server = %self.identity.server, url = %self.written_url, "the server forgot the MCP session; initializing again");
        let init = Message::parse(initialize)
            .map_err(|e| TransportError::exchange(format!("the kept initialize request is malformed: {e}")))?;
        let response = self.check(self.post(init.as_str(), None).await?).await?;
        let sid = header(&response, SESSION_ID);
        lock(&self.state).id = sid.clone();
        self.read_answer(response, init.id(), Sink::Swallow).await?;
        let initialized = Message::notification("notifications/initialized", None);
        let response = self.check(self.post(initialized.as_str(), sid.as_deref()).await?).await?;
        self.read_answer(response, None, Sink::Swallow).await?;
        self.save();
        self.abort_background();
        drop(self.clone().start_listening());
        Ok(())
    }

    /// Opens the optional GET stream for server-initiated messages, in the background.
    /// The receiver hears when the server first answered the GET (or refused it).
    pub(super) fn start_listening(self: Arc<Self>) -> tokio::sync::oneshot::Receiver<()> {
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let this = self.clone();
        let handle = tokio::spawn(async move { this.listen(ready_tx).await }).abort_handle();
        lock(&self.background).push(handle);
        ready_rx
    }

    /// Keeps the GET stream open, resuming it from its last event id, until it fails
    /// too often or the server refuses it.
    async fn listen(&self, ready: tokio::sync::oneshot::Sender<()>) {
        let mut ready = Some(ready);
        let mut last: Option<String> = None;
        let mut failures = 0u32;
        loop {
            let answer = self.get(last.as_deref()).await;
            if let Some(ready) = ready.take() {
                let _ = ready.send(());
            }
            let response = match answer {
                Ok(r) => r,
                Err(e) => {
                    failures += 1;
                    if failures > MAX_RESUMES {
                        tracing::warn!(server = %self.identity.server, error = %e, "the GET stream failed; server-initiated messages stay off until the next initialize");
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(DEFAULT_RETRY_MS << failures.min(5))).await;
                    continue;
                }
            };
            match response.status() {
                s if s.is_success() => {}
                // The server offers no standalone stream; or forgot the session, which
                // the next POST finds out and re-initializes.
                StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_FOUND => return,
                s => {
                    tracing::debug!(server = %self.identity.server, status = s.as_u16(), "the server refused the GET stream");
                    return;
                }
            }
            let mut response = response;
            let mut decoder = SseDecoder::new(self.max);
            let Ok((_, progressed)) = self.pump(&mut response, &mut decoder, None, Sink::Forward).await else { return };
            if progressed {
                failures = 0;
            }
            if !decoder.last_event_id().is_empty() {
                last = Some(decoder.last_event_id().to_owned());
            }
            tokio::time::sleep(Duration::from_millis(decoder.retry().unwrap_or(DEFAULT_RETRY_MS))).await;
        }
    }
}
