//! The HTTP+SSE transport of MCP 2024-11-05 (Transports, "HTTP with SSE"): one SSE
//! stream whose `endpoint` event names where to POST, and every answer on that
//! stream. Used for `transport: "sse"`, and for servers that refuse a streamable
//! HTTP `initialize` ("Backwards Compatibility").

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
        let request =
            self.http.get(self.url.clone()).headers(self.request_headers()).header(ACCEPT, "text/event-stream");
        let mut response = self.check(request.send().await.map_err(|e| self.transport_error(&e))?).await?;
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
        let endpoint = self.url.join(&endpoint).map_err(|e| {
            TransportError::exchange(format!(
                "{} named an endpoint that is not a URL ({endpoint}): {e}",
                self.written_url
            ))
        })?;
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
        let request = self
            .http
            .post(endpoint)
            .headers(self.request_headers())
            .header(CONTENT_TYPE, "application/json")
            .body(m.as_str().to_owned());
        self.check(request.send().await.map_err(|e| self.transport_error(&e))?).await?;
        Ok(())
    }
}
