//! One remote MCP session ([`Remote`]): what it has negotiated, and the exchanges
//! every transport flavour shares: POST and GET, reading a JSON or SSE answer (with
//! resumption), handing its messages to the instance, and ending and keeping the
//! session. Failures are worded in `wording.rs`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpx_platform::fs::Dir;
use mcpx_proto::attach::Identity;
use mcpx_proto::{IdScanner, Message, MessageKind, SseDecoder, SseEvent};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, WWW_AUTHENTICATE};
use reqwest::{StatusCode, Url};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::store::SessionFile;
use super::wording;
use crate::auth::bearer::{self, BearerError};
use crate::auth::challenge::Challenge;
use crate::auth::tokens::{self, Kept};
use crate::config::{ExpandedOAuth, RemoteKind};
use crate::sync::lock;
use crate::transport::link::{HANDOVER_KEPT, Inbound, LinkInfo, TransportError};

/// The session header (MCP 2025-11-25, Transports, "Session Management").
pub(super) const SESSION_ID: &str = "mcp-session-id";
/// The negotiated revision on every request after `initialize` ("Protocol Version Header").
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// Where an SSE stream resumes ("Resumability and Redelivery").
const LAST_EVENT_ID: &str = "last-event-id";
/// How long connecting (TCP and TLS) may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a `DELETE` of the session may take when an instance stops.
const DELETE_TIMEOUT: Duration = Duration::from_secs(5);
/// Resumptions of one answer stream without a new event before it counts as failed.
pub(super) const MAX_RESUMES: u32 = 5;
/// The wait before resuming a stream that named no `retry`, in milliseconds.
pub(super) const DEFAULT_RETRY_MS: u64 = 500;

/// One remote MCP session.
pub(super) struct Remote {
    /// The daemon's one HTTP client.
    pub(super) http: reqwest::Client,
    /// The endpoint, expanded.
    pub(super) url: Url,
    /// Extra request headers, expanded (sensitive).
    pub(super) headers: HeaderMap,
    /// Who the instance is.
    pub(super) identity: Identity,
    /// Configured: streamable HTTP (with the fallback) or HTTP+SSE.
    pub(super) kind: RemoteKind,
    /// The endpoint as written, for messages.
    pub(super) written_url: String,
    /// `maxMessageBytes`.
    pub(super) max: usize,
    /// What the server sends, to the instance.
    pub(super) inbound: mpsc::Sender<Inbound>,
    /// The link's facts (dropped bytes, skipped messages).
    pub(super) info: Arc<LinkInfo>,
    /// The state directory, whose secret store keeps the logins (`mcpx auth login`).
    pub(super) state_dir: Dir,
    /// The entry's `oauth` block, expanded: a client credentials entry needs no login.
    pub(super) oauth: Option<ExpandedOAuth>,
    /// The file the session is kept in (streamable HTTP only).
    pub(super) store: Option<(Dir, String)>,
    /// The epoch of this link's upstream ids.
    pub(super) epoch: u32,
    /// What is negotiated so far.
    pub(super) state: Mutex<RemoteState>,
    /// Held while (re)initializing or opening the HTTP+SSE stream: one at a time.
    pub(super) connect: tokio::sync::Mutex<()>,
    /// The GET stream and the HTTP+SSE stream: aborted when the link ends.
    pub(super) background: Mutex<Vec<AbortHandle>>,
}

/// What the session has negotiated so far; changes as it (re)initializes.
#[derive(Debug)]
pub(super) struct RemoteState {
    /// `Mcp-Session-Id`, once the server assigned one.
    pub(super) id: Option<String>,
    /// The negotiated revision.
    pub(super) protocol: Option<String>,
    /// The raw `initialize` request.
    pub(super) initialize: Option<String>,
    /// The instance's session (the `initialize` result), JSON, once stored.
    pub(super) session: Option<String>,
    /// The POST endpoint of the HTTP+SSE transport, once its stream named it.
    pub(super) legacy: Option<Url>,
    /// The kept login whose access token goes on every request, once a 401 asked for
    /// one (its `Debug` shows no token).
    pub(super) login: Option<Kept>,
}

/// What to do with the messages of an answer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Sink {
    /// Hand them to the instance.
    Forward,
    /// Keep them from the instance (the answer to a repeated `initialize`).
    Swallow,
}

/// What to do with data that is not a JSON-RPC message.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Junk {
    /// Skip it (an SSE event).
    Skip,
    /// Fail the request (a JSON answer).
    Fail,
}

impl Remote {
    /// The entry's headers, with the kept login's bearer (MCP 2025-11-25,
    /// Authorization, "Access Token Usage") unless they set `Authorization` themselves.
    pub(super) fn request_headers(&self) -> HeaderMap {
        let mut headers = self.headers.clone();
        if headers.contains_key(AUTHORIZATION) {
            return headers;
        }
        let bearer = lock(&self.state).login.as_ref().map(|k| format!("Bearer {}", k.access_token));
        if let Some(mut value) = bearer.and_then(|b| HeaderValue::from_str(&b).ok()) {
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        headers
    }

    /// Whether mcpx may answer a 401 with a login: the entry's headers carry no
    /// `Authorization` of their own.
    pub(super) fn uses_oauth(&self) -> bool {
        !self.headers.contains_key(AUTHORIZATION)
    }

    /// Answers a 401 (with its `WWW-Authenticate`, `challenge`): the kept login,
    /// refreshed if the token was just refused or is due, for the requests that follow.
    ///
    /// Errors: [`TransportError::Auth`] saying to run `mcpx auth login <server>` when
    /// no login is kept or it cannot be renewed; an exchange error when discovery or
    /// the token endpoint fails.
    pub(super) async fn authorize(&self, challenge: Option<&str>) -> Result<(), TransportError> {
        let refused = lock(&self.state).login.as_ref().map(|k| k.access_token.clone());
        let challenge = challenge.and_then(Challenge::parse);
        let found = bearer::on_unauthorized(
            &self.http,
            &self.state_dir,
            &self.url,
            challenge.as_ref(),
            refused.as_deref(),
            self.oauth.as_ref(),
        );
        self.take_login(found.await)
    }

    /// Answers a 403 (with its `WWW-Authenticate`, `challenge`): for an
    /// `insufficient_scope` challenge to a request with a login's token, `Ok(true)` when
    /// the store holds a newer login (the user logged in again since: retry with it);
    /// else the scopes wanted are recorded for the next login, and the error says to
    /// log in. `Ok(false)` for any other 403.
    ///
    /// Errors: [`TransportError::Auth`], naming the scopes and saying to run
    /// `mcpx auth login <server>`.
    pub(super) fn insufficient_scope(&self, challenge: Option<&str>) -> Result<bool, TransportError> {
        let Some(challenge) = challenge.and_then(Challenge::parse) else { return Ok(false) };
        let current = lock(&self.state).login.clone();
        let Some(current) = current.filter(|_| challenge.error.as_deref() == Some("insufficient_scope")) else {
            return Ok(false);
        };
        if let Ok(Some(stored)) = tokens::load(&self.state_dir, &current.issuer, &current.resource) {
            if stored.access_token != current.access_token {
                lock(&self.state).login = Some(stored);
                return Ok(true);
            }
        }
        let server = &self.identity.server;
        let wanted = bearer::step_up(&self.state_dir, &current, &challenge).unwrap_or_else(|e| {
            tracing::warn!(server = %server, error = %e, "could not record the scopes the server asked for");
            challenge.scopes()
        });
        Err(TransportError::Auth {
            message: format!(
                "server `{server}` needs scopes the login lacks ({}): run `mcpx auth login {server}` to grant them",
                wanted.join(" ")
            ),
        })
    }

    /// Renews the kept login before a request when its token is about to expire.
    ///
    /// Errors: as [`Remote::authorize`].
    pub(super) async fn renew_if_due(&self) -> Result<(), TransportError> {
        let due = lock(&self.state).login.clone().filter(|k| k.due(std::time::SystemTime::now()));
        let Some(old) = due else { return Ok(()) };
        self.take_login(bearer::renew(&self.http, &self.state_dir, &old, self.oauth.as_ref()).await)
    }

    /// Sends the request `build` makes from the request headers, as
    /// [`Remote::renew_if_due`] left them; a 401 is answered once with the kept login
    /// ([`Remote::authorize`]) and the request sent again with its bearer. For the
    /// HTTP+SSE transport (MCP 2024-11-05), whose stream and posts a server may guard
    /// as a streamable HTTP one's.
    ///
    /// Errors: as [`Remote::authorize`]; otherwise [`Remote::check`]'s.
    pub(super) async fn send_authorized(
        &self,
        build: impl Fn(HeaderMap) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, TransportError> {
        self.renew_if_due().await?;
        let mut authorized = false;
        loop {
            let response = build(self.request_headers()).send().await.map_err(|e| self.transport_error(&e))?;
            if response.status() == StatusCode::UNAUTHORIZED && !authorized && self.uses_oauth() {
                authorized = true;
                self.authorize(header(&response, WWW_AUTHENTICATE).as_deref()).await?;
                continue;
            }
            return self.check(response).await;
        }
    }

    /// Keeps a login for the requests that follow, or words why there is none.
    fn take_login(&self, found: Result<Kept, BearerError>) -> Result<(), TransportError> {
        let server = &self.identity.server;
        match found {
            Ok(kept) => {
                lock(&self.state).login = Some(kept);
                Ok(())
            }
            Err(BearerError::NeedsLogin(why)) => {
                lock(&self.state).login = None;
                Err(TransportError::Auth {
                    message: format!("server `{server}` needs a login ({why}): run `mcpx auth login {server}`"),
                })
            }
            Err(BearerError::Failed(why)) => Err(TransportError::exchange(format!(
                "{} asked for authorization, and it failed: {why}",
                self.written_url
            ))),
        }
    }

    /// A POST of `body` to the streamable HTTP endpoint, with the headers every one
    /// carries (auth and configured headers, `Accept`, `Content-Type`).
    pub(super) fn post_request(&self, body: &str) -> reqwest::RequestBuilder {
        self.http
            .post(self.url.clone())
            .headers(self.request_headers())
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_owned())
    }

    /// POSTs one message to the streamable HTTP endpoint.
    pub(super) async fn post(&self, body: &str, sid: Option<&str>) -> Result<reqwest::Response, TransportError> {
        let mut request = self.post_request(body);
        if let Some(sid) = sid {
            request = request.header(SESSION_ID, sid);
        }
        if let Some(v) = lock(&self.state).protocol.clone() {
            request = request.header(PROTOCOL_VERSION, v);
        }
        request.send().await.map_err(|e| self.transport_error(&e))
    }

    /// Passes a successful response; turns any other into an error that says what to do.
    pub(super) async fn check(&self, response: reqwest::Response) -> Result<reqwest::Response, TransportError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let challenge = header(&response, WWW_AUTHENTICATE);
        let body = response.text().await.unwrap_or_default();
        Err(self.status_error(status, challenge, &body))
    }

    /// The error for an HTTP status other than success, saying what to do.
    pub(super) fn status_error(&self, status: StatusCode, challenge: Option<String>, body: &str) -> TransportError {
        TransportError::exchange(wording::status_message(
            status,
            &self.identity.server,
            &self.written_url,
            challenge.as_deref(),
            body,
        ))
    }

    /// Reads an answer: JSON, an SSE stream (resumed if it breaks before the response
    /// to `wanted`), or nothing (202).
    pub(super) async fn read_answer(
        &self,
        response: reqwest::Response,
        wanted: Option<&str>,
        sink: Sink,
    ) -> Result<(), TransportError> {
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if response.status() == StatusCode::ACCEPTED || response.content_length() == Some(0) {
            return match wanted {
                Some(_) => Err(TransportError::exchange(format!(
                    "{} answered a request with HTTP {} and no response",
                    self.written_url,
                    response.status()
                ))),
                None => Ok(()),
            };
        }
        match content_type.as_str() {
            "text/event-stream" => self.read_stream(response, wanted, sink).await,
            "application/json" => self.read_json(response, wanted, sink).await,
            "" if wanted.is_none() => Ok(()),
            other => Err(TransportError::exchange(format!(
                "{} answered with Content-Type `{other}`, neither application/json nor text/event-stream",
                self.written_url
            ))),
        }
    }

    pub(super) async fn read_json(
        &self,
        mut response: reqwest::Response,
        wanted: Option<&str>,
        sink: Sink,
    ) -> Result<(), TransportError> {
        let mut body = Vec::new();
        let mut dropped = 0u64;
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport_error(&e))? {
            if dropped == 0 && body.len() + chunk.len() <= self.max {
                body.extend_from_slice(&chunk);
            } else {
                dropped += (std::mem::take(&mut body).len() + chunk.len()) as u64;
            }
        }
        if dropped > 0 {
            self.report_oversize(dropped, wanted.map(str::to_owned)).await;
            return Ok(());
        }
        let answered = self.deliver_data(&body, wanted, sink, Junk::Fail).await?;
        if wanted.is_some() && !answered {
            return Err(TransportError::exchange(format!("{} answered without the response", self.written_url)));
        }
        Ok(())
    }

    /// Reads an SSE answer; when it ends before the response to `wanted`, resumes it
    /// from the last event id.
    pub(super) async fn read_stream(
        &self,
        mut response: reqwest::Response,
        wanted: Option<&str>,
        sink: Sink,
    ) -> Result<(), TransportError> {
        let mut decoder = SseDecoder::new(self.max);
        let mut resumes = 0;
        loop {
            let (answered, progressed) = self.pump(&mut response, &mut decoder, wanted, sink).await?;
            if answered || wanted.is_none() {
                return Ok(());
            }
            let last = decoder.last_event_id().to_owned();
            if last.is_empty() {
                return Err(TransportError::exchange(format!(
                    "{} ended the answer stream before the response, with no event id to resume from",
                    self.written_url
                )));
            }
            resumes = if progressed { 1 } else { resumes + 1 };
            if resumes > MAX_RESUMES {
                return Err(TransportError::exchange(format!(
                    "{} ended the answer stream {MAX_RESUMES} times in a row without the response",
                    self.written_url
                )));
            }
            tokio::time::sleep(Duration::from_millis(decoder.retry().unwrap_or(DEFAULT_RETRY_MS))).await;
            decoder.finish();
            response = self.check(self.get(Some(&last)).await?).await?;
        }
    }

    /// Reads SSE events until the stream ends or the response to `wanted` arrived.
    /// Returns (answered, any event seen).
    pub(super) async fn pump(
        &self,
        response: &mut reqwest::Response,
        decoder: &mut SseDecoder,
        wanted: Option<&str>,
        sink: Sink,
    ) -> Result<(bool, bool), TransportError> {
        let mut events = Vec::new();
        let mut progressed = false;
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                // A broken stream is resumed like an ended one.
                Ok(None) | Err(_) => return Ok((false, progressed)),
            };
            decoder.push(&chunk, &mut events);
            for event in events.drain(..) {
                progressed = true;
                match event {
                    SseEvent::Data { event, data } if event == "message" => {
                        if self.deliver_data(&data, wanted, sink, Junk::Skip).await? {
                            return Ok((true, true));
                        }
                    }
                    SseEvent::Data { .. } => {}
                    SseEvent::Oversize { bytes, id } => {
                        let answers = id.is_some() && id.as_deref() == wanted;
                        self.report_oversize(bytes, id).await;
                        if answers {
                            return Ok((true, true));
                        }
                    }
                }
            }
        }
    }

    /// Counts a discarded oversize message and tells the instance, which fails the
    /// request it answered (`id`, raw JSON).
    pub(super) async fn report_oversize(&self, bytes: u64, id: Option<String>) {
        self.info.dropped_bytes.fetch_add(bytes, Ordering::Relaxed);
        if let Some(id) = &id {
            let _ = self.inbound.send(Inbound::OversizeId(id.clone())).await;
        }
        let _ = self.inbound.send(Inbound::Oversize { bytes, id }).await;
    }

    /// Parses one JSON body or event and hands its messages on. Returns whether it
    /// held the response to `wanted`. What is not JSON-RPC is counted, then skipped (an
    /// event, like a stray stdout line) or an error (a whole JSON answer).
    pub(super) async fn deliver_data(
        &self,
        data: &[u8],
        wanted: Option<&str>,
        sink: Sink,
        junk: Junk,
    ) -> Result<bool, TransportError> {
        if data.iter().all(u8::is_ascii_whitespace) && junk == Junk::Skip {
            return Ok(false);
        }
        let messages = match Message::parse_line(data) {
            Ok(messages) => messages,
            Err(e) => {
                self.info.skipped_lines.fetch_add(1, Ordering::Relaxed);
                self.info.dropped_bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
                if junk == Junk::Fail {
                    return Err(TransportError::exchange(format!(
                        "{} answered with a JSON body that is not a JSON-RPC message ({e}){}",
                        self.written_url,
                        wording::quote(&String::from_utf8_lossy(data))
                    )));
                }
                tracing::warn!(server = %self.identity.server, error = %e, "skipped an answer that is not a JSON-RPC message");
                // An event whose id can be read fails the request it answers now,
                // as on stdio, instead of leaving it to its timeout; on this
                // request's own stream it is the answer, and the stream is done.
                let Some(id) = IdScanner::scan(data) else { return Ok(false) };
                let answered = wanted == Some(id.as_str());
                if sink == Sink::Swallow {
                    return match answered {
                        true => Err(TransportError::exchange(format!(
                            "{} answered the repeated initialize with an event that could not be decoded ({e})",
                            self.written_url
                        ))),
                        false => Ok(false),
                    };
                }
                let _ = self.inbound.send(Inbound::Undecodable { id, reason: e.to_string() }).await;
                return Ok(answered);
            }
        };
        let mut answered = false;
        for m in messages {
            let is_answer = m.kind() == MessageKind::Response && wanted.is_some() && m.id() == wanted;
            if is_answer {
                answered = true;
                if let Some(v) = negotiated_version(&m) {
                    lock(&self.state).protocol = Some(v);
                }
            }
            match sink {
                Sink::Forward => {
                    let item = match wanted {
                        Some(request) if m.kind() != MessageKind::Response => {
                            Inbound::Related { message: m, request: request.to_owned() }
                        }
                        _ => Inbound::Message(m),
                    };
                    let _ = self.inbound.send(item).await;
                }
                Sink::Swallow if is_answer => {
                    if let Err(e) = mcpx_proto::response_result(&m) {
                        return Err(TransportError::exchange(format!(
                            "{} refused the repeated initialize: {e}",
                            self.written_url
                        )));
                    }
                }
                Sink::Swallow => {}
            }
        }
        Ok(answered)
    }

    /// GETs the endpoint as an SSE stream: the standalone stream, or a resumption.
    pub(super) async fn get(&self, last_event_id: Option<&str>) -> Result<reqwest::Response, TransportError> {
        let mut request =
            self.http.get(self.url.clone()).headers(self.request_headers()).header(ACCEPT, "text/event-stream");
        let (sid, protocol) = {
            let state = lock(&self.state);
            (state.id.clone(), state.protocol.clone())
        };
        if let Some(sid) = sid {
            request = request.header(SESSION_ID, sid);
        }
        if let Some(v) = protocol {
            request = request.header(PROTOCOL_VERSION, v);
        }
        if let Some(id) = last_event_id {
            request = request.header(LAST_EVENT_ID, id);
        }
        request.send().await.map_err(|e| self.transport_error(&e))
    }

    /// Ends the session: `DELETE` for streamable HTTP (a 405 means the server does not
    /// allow it), and forgets the kept file.
    pub(super) async fn end_session(&self) {
        if let Some((dir, name)) = &self.store {
            let _ = dir.remove(name);
        }
        *lock(&self.info.handover) = None;
        if lock(&self.state).legacy.take().is_some() {
            tracing::info!(server = %self.identity.server, url = %self.written_url, "ended the HTTP+SSE session");
            return;
        }
        let sid = lock(&self.state).id.take();
        let Some(sid) = sid else { return };
        let request = self
            .http
            .delete(self.url.clone())
            .headers(self.request_headers())
            .header(SESSION_ID, sid)
            .timeout(DELETE_TIMEOUT);
        match request.send().await {
            Ok(r) => {
                tracing::info!(server = %self.identity.server, status = r.status().as_u16(), "ended the MCP session (DELETE)")
            }
            Err(e) => {
                tracing::warn!(server = %self.identity.server, error = %self.describe(&e), "ending the MCP session (DELETE) failed")
            }
        }
    }

    /// Keeps the session for the next daemon, once it has an id and a stored result.
    pub(super) fn save(&self) {
        let Some((dir, name)) = &self.store else { return };
        let stored = {
            let state = lock(&self.state);
            match (&state.id, &state.protocol, &state.initialize, &state.session, &state.legacy) {
                (Some(id), Some(protocol), Some(init), Some(session), None) => SessionFile {
                    url: self.written_url.clone(),
                    fingerprint: self.identity.fingerprint.clone(),
                    key: self.identity.key.clone(),
                    session_id: id.clone(),
                    protocol_version: protocol.clone(),
                    initialize: init.clone(),
                    session: session.clone(),
                    epoch: self.epoch,
                },
                _ => return,
            }
        };
        match stored.save(dir, name) {
            Ok(()) => *lock(&self.info.handover) = Some(HANDOVER_KEPT),
            Err(e) => {
                tracing::warn!(server = %self.identity.server, path = %dir.join(name).display(), error = %e, "cannot keep the MCP session for the next daemon")
            }
        }
    }

    /// Stops the background streams (the GET stream, the HTTP+SSE stream).
    pub(super) fn abort_background(&self) {
        for handle in lock(&self.background).drain(..) {
            handle.abort();
        }
    }

    /// What failed, without the URL: reqwest's outer layers repeat the URL expanded,
    /// which may hold a secret (`${VAR}` in a query), and the innermost cause says what
    /// failed. Any URL left is replaced with the one written in the configuration.
    pub(super) fn describe(&self, e: &reqwest::Error) -> String {
        let mut detail = wording::root_cause(e);
        if let Some(expanded) = e.url() {
            detail = detail.replace(expanded.as_str(), &self.written_url);
        }
        detail.replace(self.url.as_str(), &self.written_url)
    }

    /// An error of the HTTP client, classified and worded for the user.
    pub(super) fn transport_error(&self, e: &reqwest::Error) -> TransportError {
        let url = &self.written_url;
        let detail = self.describe(e);
        if e.is_timeout() {
            TransportError::Exchange {
                message: format!("timed out reaching {url}: {detail}"),
                timed_out: true,
                unreachable: e.is_connect(),
            }
        } else if let Some(tls) = wording::tls_error(e) {
            TransportError::Exchange {
                message: format!(
                    "TLS with {url} failed: {tls}; check that the server speaks HTTPS there and that this machine's root certificates trust it"
                ),
                timed_out: false,
                unreachable: true,
            }
        } else if e.is_connect() {
            TransportError::Exchange {
                message: format!(
                    "cannot connect to {url}: {detail}; check that the server runs and the `url` is right"
                ),
                timed_out: false,
                unreachable: true,
            }
        } else {
            TransportError::exchange(format!("HTTP exchange with {url} failed: {detail}"))
        }
    }
}

/// A response header's value, when it is text.
pub(super) fn header(response: &reqwest::Response, name: impl reqwest::header::AsHeaderName) -> Option<String> {
    response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// The `protocolVersion` of an `initialize` result, if `m` is one.
pub(super) fn negotiated_version(m: &Message) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        result: Option<Result_>,
    }
    #[derive(serde::Deserialize)]
    struct Result_ {
        #[serde(rename = "protocolVersion")]
        protocol_version: Option<String>,
    }
    serde_json::from_str::<Answer>(m.as_str()).ok()?.result?.protocol_version
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_negotiated_version_is_read_from_an_initialize_result_only() {
        let answer = Message::response("1", r#"{"protocolVersion":"2025-06-18","capabilities":{}}"#);
        assert_eq!(negotiated_version(&answer).as_deref(), Some("2025-06-18"));
        assert_eq!(negotiated_version(&Message::response("1", r#"{"tools":[]}"#)), None);
        assert_eq!(negotiated_version(&Message::error_response("1", -32600, "no")), None);
    }
}
