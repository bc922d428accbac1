//! A caller over streamable HTTP (MCP 2025-11-25, Transports: Streamable HTTP): one
//! keep-alive HTTP/1.1 connection (TCP with `TCP_NODELAY`, or a unix socket), a legacy
//! session (`initialize`, whose `Mcp-Session-Id` every later POST carries), then POSTs one
//! after the other, answered as JSON or SSE.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderName, HeaderValue};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;

use crate::answer::{self, Seen};

/// Where the endpoint is.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `host:port` for TCP, or the unix socket.
    pub addr: Addr,
    /// The value of the `Host` header.
    pub host: String,
    /// The request path, e.g. `/mcp/fake`.
    pub path: String,
    /// Extra headers for every request (e.g. `Authorization`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// The socket an [`Endpoint`] is reached on.
#[derive(Debug, Clone)]
pub enum Addr {
    /// `host:port`.
    Tcp(String),
    /// A unix socket's path.
    Unix(PathBuf),
}

impl Endpoint {
    /// Parses `http://host:port/path`, or `/path` with `unix` (the socket; the `Host`
    /// header is then `localhost`).
    ///
    /// # Errors
    ///
    /// Another scheme, no path, or a bare path without a socket.
    pub fn parse(url: &str, unix: Option<PathBuf>, headers: Vec<(HeaderName, HeaderValue)>) -> Result<Endpoint> {
        if let Some(socket) = unix {
            if !url.starts_with('/') {
                bail!("with --unix, give the endpoint's path (e.g. /mcp/fake), not {url:?}");
            }
            return Ok(Endpoint { addr: Addr::Unix(socket), host: "localhost".into(), path: url.into(), headers });
        }
        let Some(rest) = url.strip_prefix("http://") else {
            bail!("{url:?} is not an http:// URL (https is not supported; for a unix socket give --unix and a path)");
        };
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if host.is_empty() || !host.contains(':') {
            bail!("{url:?} has no host:port");
        }
        let path = if path.is_empty() { "/" } else { path };
        Ok(Endpoint { addr: Addr::Tcp(host.into()), host: host.into(), path: path.into(), headers })
    }
}

/// One MCP session on its own connection.
pub struct Caller {
    endpoint: Endpoint,
    sender: SendRequest<Full<Bytes>>,
    /// The session's id, once `initialize` gave one (a stateless server gives none).
    session: Option<HeaderValue>,
    /// Connections opened again after the server closed one.
    pub reconnects: u64,
    /// The last answer's JSON-RPC message.
    answer: Vec<u8>,
}

impl Caller {
    /// Connects and opens a session: `initialize`, then `notifications/initialized`.
    ///
    /// # Errors
    ///
    /// The endpoint cannot be reached, or either step does not succeed.
    pub async fn start(endpoint: Endpoint) -> Result<Caller> {
        let sender = connect(&endpoint).await?;
        let mut caller = Caller { endpoint, sender, session: None, reconnects: 0, answer: Vec::new() };
        caller.post(answer::initialize(), Some(1)).await.context("initialize")?;
        caller.post(answer::INITIALIZED.to_owned(), None).await.context("notifications/initialized")?;
        Ok(caller)
    }

    /// One `tools/call` of `tool_json` with id `id` and `message`, its answer checked.
    ///
    /// # Errors
    ///
    /// The connection failed, the HTTP status is not 200, or the answer is not the echo of
    /// `message`.
    pub async fn call(&mut self, tool_json: &str, id: u64, message: &str) -> Result<()> {
        self.post(answer::call(tool_json, id, message), Some(id)).await?;
        answer::check_echo(&self.answer, id, message)
    }

    /// Ends the session with `DELETE` (whatever the answer: not every server supports it).
    pub async fn finish(mut self) {
        let Some(session) = self.session.take() else { return };
        let Ok(req) = self.request(hyper::Method::DELETE, Some(session), Bytes::new()) else { return };
        if self.sender.ready().await.is_ok() {
            let _ = self.sender.send_request(req).await;
        }
    }

    /// POSTs `body`; with `id`, reads the answer to it into `self.answer`.
    async fn post(&mut self, body: String, id: Option<u64>) -> Result<()> {
        if self.sender.ready().await.is_err() {
            // The server closed the connection after the last answer (keep-alive ended).
            self.sender = connect(&self.endpoint).await?;
            self.reconnects += 1;
        }
        let req = self.request(hyper::Method::POST, self.session.clone(), Bytes::from(body))?;
        let resp = self.sender.send_request(req).await.context("sending a request: the connection failed")?;
        let status = resp.status();
        if id == Some(1) {
            self.session = resp.headers().get("mcp-session-id").cloned();
        }
        let sse = resp.headers().get(CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        let body = resp.into_body().collect().await.context("reading an answer: the connection failed")?.to_bytes();
        let Some(id) = id else {
            if !status.is_success() {
                bail!("HTTP {status} to a notification: {}", answer::excerpt(&body));
            }
            return Ok(());
        };
        if status != StatusCode::OK {
            bail!("HTTP {status} to request {id}: {}", answer::excerpt(&body));
        }
        if sse {
            self.answer = answer::from_sse(&body, id)?;
        } else {
            if answer::classify(&body, id)? != Seen::Answer {
                bail!("the JSON answer is not the response to request {id}: {}", answer::excerpt(&body));
            }
            self.answer.clear();
            self.answer.extend_from_slice(&body);
        }
        Ok(())
    }

    /// A request to the endpoint with the MCP headers.
    fn request(
        &self,
        method: hyper::Method,
        session: Option<HeaderValue>,
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>> {
        let mut req = Request::builder()
            .method(method)
            .uri(&self.endpoint.path)
            .header(HOST, &self.endpoint.host)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream");
        if let Some(session) = session {
            req = req.header("mcp-session-id", session).header("mcp-protocol-version", answer::PROTOCOL_VERSION);
        }
        for (name, value) in &self.endpoint.headers {
            req = req.header(name, value);
        }
        req.body(Full::new(body)).context("building a request: check --header's names and values")
    }
}

/// Opens a connection and hands it to a task of its own.
async fn connect(endpoint: &Endpoint) -> Result<SendRequest<Full<Bytes>>> {
    match &endpoint.addr {
        Addr::Tcp(addr) => {
            let stream = tokio::net::TcpStream::connect(addr)
                .await
                .with_context(|| format!("connecting to {addr}: is the server listening?"))?;
            stream.set_nodelay(true).context("setting TCP_NODELAY")?;
            handshake(stream).await
        }
        Addr::Unix(path) => {
            let stream = tokio::net::UnixStream::connect(path)
                .await
                .with_context(|| format!("connecting to {}: is the daemon running?", path.display()))?;
            handshake(stream).await
        }
    }
}

/// The HTTP/1.1 handshake on `stream`; the connection is driven by a task of its own.
async fn handshake<S>(stream: S) -> Result<SendRequest<Full<Bytes>>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = http1::handshake(TokioIo::new(stream)).await.context("the HTTP/1.1 handshake failed")?;
    tokio::spawn(async move {
        // Its end (or failure) shows in the sender's next use.
        let _ = conn.await;
    });
    Ok(sender)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Reason: a failed unwrap is a failed test.

    use super::*;

    #[test]
    fn parses_endpoints() {
        let e = Endpoint::parse("http://127.0.0.1:8080/mcp/fake", None, vec![]).unwrap();
        assert!(matches!(&e.addr, Addr::Tcp(a) if a == "127.0.0.1:8080"));
        assert_eq!((e.host.as_str(), e.path.as_str()), ("127.0.0.1:8080", "/mcp/fake"));
        assert_eq!(Endpoint::parse("http://[::1]:80", None, vec![]).unwrap().path, "/");
        let u = Endpoint::parse("/mcp", Some("/run/d.sock".into()), vec![]).unwrap();
        assert!(matches!(&u.addr, Addr::Unix(p) if p.as_os_str() == "/run/d.sock"));
        assert_eq!(u.host, "localhost");
        for bad in ["https://h:1/mcp", "http:///mcp", "http://host/mcp", "/mcp"] {
            assert!(Endpoint::parse(bad, None, vec![]).is_err(), "{bad}");
        }
        assert!(Endpoint::parse("http://h:1/mcp", Some("/s".into()), vec![]).is_err());
    }
}
