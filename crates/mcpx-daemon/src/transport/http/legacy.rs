//! The HTTP+SSE transport of MCP 2024-11-05 (Transports, "HTTP with SSE"): one SSE
//! stream whose `endpoint` event names where to POST, and every answer on that
//! stream. Used for `transport: "sse"`, and for servers that refuse a streamable
//! HTTP `initialize` ("Backwards Compatibility"). A 401 on the stream or a post is
//! answered with the kept login, as on streamable HTTP, and without one fails with the
//! same `auth` error saying to log in.

use std::sync::Arc;

use mcpx_proto::{Message, SseDecoder, SseEvent};
use reqwest::header::{ACCEPT, CONTENT_TYPE};

use super::session::{Remote, Sink};
use crate::sync::lock;
use crate::transport::link::{HANDOVER_ENDED, Inbound, TransportError};

impl Remote {
    /// Opens the HTTP+SSE stream (MCP 2024-11-05) and waits for its `endpoint` event;
    /// the rest of the stream is read in the background. Ends the link when it closes.
    async fn open_legacy(self: &Arc<Self>) -> Result<(), TransportError> {
        let _guard = self.connect.lock().await;
        if lock(&self.state).legacy.is_some() {
            return Ok(());
        }
        let stream = |headers| self.http.get(self.url.clone()).headers(headers).header(ACCEPT, "text/event-stream");
        let mut response = self.send_authorized(stream).await?;
        let mut decoder = SseDecoder::new(self.max);
        let mut events = Vec::new();
        let endpoint = loop {
            let Some(chunk) = response.chunk().await.map_err(|e| self.transport_error(&e))? else {
                return Err(TransportError::exchange(format!(
                    "{} closed its SSE stream before naming the endpoint to post to",
                    self.written_url
                )));
            };
            decoder.push(&chunk, &mut events);
            let found = events.drain(..).find_map(|e| match e {
                SseEvent::Data { event, data } if event == "endpoint" => Some(data),
                _ => None,
            });
            if let Some(data) = found {
                break data;
            }
        };
        let endpoint = String::from_utf8_lossy(&endpoint).trim().to_owned();
        let named = self.url.join(&endpoint).map_err(|e| {
            TransportError::exchange(format!(
                "{} named an endpoint that is not a URL ({}): {e}",
                self.written_url,
                crate::auth::said(&endpoint)
            ))
        })?;
        // The entry's headers go only to its own origin, as with redirects (the
        // TypeScript SDK's SSE client refuses another origin too).
        if named.origin() != self.url.origin() {
            return Err(TransportError::exchange(format!(
                "{} named an endpoint on another origin, {}; mcpx posts only to the `url`'s scheme, host and port, so that the entry's `headers` go nowhere else: tell the server's operator",
                self.written_url,
                crate::auth::said(named.as_str())
            )));
        }
        let endpoint = named;
        lock(&self.state).legacy = Some(endpoint);
        *lock(&self.info.handover) = Some(HANDOVER_ENDED);
        let this = self.clone();
        let handle = tokio::spawn(async move {
            let _ = this.pump(&mut response, &mut decoder, None, Sink::Forward).await;
            let reason = format!("{} closed its SSE stream (HTTP+SSE transport)", this.written_url);
            let _ = this.inbound.send(Inbound::Lost(reason)).await;
        })
        .abort_handle();
        lock(&self.background).push(handle);
        Ok(())
    }

    /// POSTs one message to the HTTP+SSE endpoint; answers arrive on the stream.
    pub(super) async fn post_legacy(self: &Arc<Self>, m: &Message) -> Result<(), TransportError> {
        let endpoint = lock(&self.state).legacy.clone();
        let endpoint = match endpoint {
            Some(e) => e,
            None => {
                self.open_legacy().await?;
                lock(&self.state).legacy.clone().ok_or_else(|| TransportError::exchange("no SSE endpoint".into()))?
            }
        };
        let post = |headers| {
            self.http
                .post(endpoint.clone())
                .headers(headers)
                .header(CONTENT_TYPE, "application/json")
                .body(m.as_str().to_owned())
        };
        self.send_authorized(post).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use axum::http::StatusCode;
    use mcpx_proto::attach::Identity;
    use reqwest::header::HeaderMap;
    use tokio::sync::mpsc;

    use super::super::session::RemoteState;
    use super::*;
    use crate::auth::fixtures::{Endpoint, file_state};
    use crate::config::RemoteKind;
    use crate::transport::link::LinkInfo;

    /// A 401 on the HTTP+SSE stream, with no login kept, fails at once with the `auth`
    /// error saying to log in, as on streamable HTTP.
    #[tokio::test]
    async fn a_401_on_the_stream_says_to_log_in() {
        let server = Endpoint::start(|_, seen| match seen.path.as_str() {
            "/sse" => (StatusCode::UNAUTHORIZED, String::new()),
            _ => (StatusCode::NOT_FOUND, String::new()),
        })
        .await;
        let (_dir, state) = file_state();
        let (inbound, _rx) = mpsc::channel(4);
        let url = server.url.join("sse").unwrap();
        let identity = Identity {
            server: "docs".into(),
            fingerprint: "fp".into(),
            cache_key: "ck".into(),
            key: "global".into(),
            sharing: "shared".into(),
        };
        let remote = Arc::new(Remote {
            http: reqwest::Client::new(),
            url: url.clone(),
            headers: HeaderMap::new(),
            identity,
            kind: RemoteKind::Sse,
            written_url: url.to_string(),
            max: 1 << 20,
            inbound,
            info: Arc::new(LinkInfo::remote(url.to_string())),
            state_dir: state,
            oauth: None,
            store: None,
            epoch: 1,
            state: Mutex::new(RemoteState {
                id: None,
                protocol: None,
                initialize: None,
                session: None,
                legacy: None,
                login: None,
            }),
            connect: tokio::sync::Mutex::new(()),
            background: Mutex::new(Vec::new()),
        });
        let init = Message::parse(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#.to_owned()).unwrap();
        let e = remote.post_legacy(&init).await.unwrap_err();
        assert!(e.needs_login(), "{e:?}");
        assert!(e.to_string().contains("run `mcpx auth login docs`"), "{e}");
    }
}
