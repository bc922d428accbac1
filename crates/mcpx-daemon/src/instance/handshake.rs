//! How an instance settles its server's era and session at a start or restart
//! (`server/discover`, or `initialize`: see `era.rs`), and the form a request takes
//! upstream once it has: a modern server's requests carry the envelope, and what the
//! modern era removed (`ping`, `logging/setLevel`) is answered by mcpx itself.

use std::time::Duration;

use mcpx_proto::mcp::{self, error_code};
use mcpx_proto::{Message, RpcError, response_result};

use super::era::{self, DISCOVER_TIMEOUT, Era, Known, Probe, Upstream};
use super::error::CallError;
use super::session::ServerSession;
use super::{Instance, LOG_LEVELS};
use crate::sync::lock;

impl Instance {
    /// Settles the server's era and session (MCP 2026-07-28, Basic, "Versioning",
    /// "Backward Compatibility with Initialization-Based Versions"):
    /// - known modern: the remembered session, nothing sent (the era is a property
    ///   of the server; a start whose listing fails is forgotten, so the next start
    ///   probes again);
    /// - unknown: `server/discover` within [`DISCOVER_TIMEOUT`] (or `timeout`, when
    ///   shorter); a modern answer settles it, a recognized modern error fails the
    ///   start, anything else falls back to `initialize`;
    /// - known legacy, or fallen back: `initialize`; an `UnsupportedProtocolVersionError`
    ///   naming a modern revision (a modern server the probe missed, or one that
    ///   became modern) is probed again, with the whole `timeout`.
    ///
    /// Errors: as [`Instance::start`].
    pub(super) async fn handshake(&self, known: Known, timeout: Option<Duration>) -> Result<ServerSession, CallError> {
        let server = &self.identity.server;
        match known {
            Known::Modern(session) => return Ok(session),
            Known::Legacy => {}
            Known::Unknown => {
                let probe_timeout = timeout.map_or(DISCOVER_TIMEOUT, |t| t.min(DISCOVER_TIMEOUT));
                match era::judge(self.request(era::discover_request(), Some(probe_timeout)).await) {
                    Probe::Modern(session) => return Ok(session),
                    Probe::Failed(e) => return Err(e),
                    Probe::Legacy(why) => {
                        tracing::info!(server = %server, "server/discover did not find a modern server ({why}); sending initialize");
                    }
                }
            }
        }
        match self.initialize(timeout).await? {
            Ok(session) => Ok(session),
            Err(refusal) if era::names_modern(&refusal) => {
                tracing::info!(server = %server, "the server refused initialize naming a modern revision; probing with server/discover again");
                match era::judge(self.request(era::discover_request(), timeout).await) {
                    Probe::Modern(session) => Ok(session),
                    Probe::Failed(e) => Err(e),
                    Probe::Legacy(_) => Err(initialize_failed(&refusal)),
                }
            }
            Err(refusal) => Err(initialize_failed(&refusal)),
        }
    }

    /// MCP `initialize` (offering the latest legacy revision and accepting any
    /// supported one), then `notifications/initialized`. `Ok(Err(_))`: the server
    /// answered an error.
    async fn initialize(&self, timeout: Option<Duration>) -> Result<Result<ServerSession, RpcError>, CallError> {
        let params = serde_json::json!({
            "protocolVersion": mcp::LATEST_VERSION,
            // Callers arrive later than servers start, so every client capability is
            // declared; requests no caller can answer get a JSON-RPC error.
            "capabilities": { "roots": { "listChanged": true }, "sampling": {}, "elicitation": {} },
            "clientInfo": { "name": "mcpx", "version": env!("CARGO_PKG_VERSION") },
        });
        let request = Message::request("0", "initialize", Some(&params.to_string()));
        let response = self.request(request, timeout).await?;
        let result = match response_result(&response) {
            Ok(result) => result,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let session: ServerSession = serde_json::from_str(result.get())
            .map_err(|e| CallError::Protocol(format!("the server's initialize result is malformed: {e}")))?;
        if !mcp::is_supported(&session.protocol_version) {
            return Err(CallError::Protocol(format!(
                "the server answered protocol version {:?}, which mcpx does not support (supported: {})",
                session.protocol_version,
                mcp::SUPPORTED_VERSIONS.join(", ")
            )));
        }
        self.notify(Message::notification("notifications/initialized", None)).await;
        Ok(Ok(session))
    }

    /// The era of the server's protocol, once settled. Read under the session's lock
    /// rather than from a copy of the session: every request asks.
    pub fn era(&self) -> Option<Era> {
        lock(&self.session).as_ref().map(Era::of)
    }

    /// `request` as the server takes it: unchanged for a legacy server; for a modern
    /// one, with the envelope and `level`, the log level of the request's own caller
    /// ([`super::Listeners::level_of`]; 2026-07-28, Server, Utilities, "Logging": the
    /// level travels per request, so each caller's requests carry its own and no
    /// other's). [`Upstream::Answered`] holds the answer mcpx gives itself to what
    /// the modern era removed: `ping` (`{}`: the instance is there) and
    /// `logging/setLevel` (`{}`: the listeners keep the client's level, which goes
    /// with each of its requests).
    pub(super) fn upstream_form(&self, request: Message, level: Option<usize>) -> Upstream {
        let Some(Era::Modern { version }) = self.era() else { return Upstream::Send(request) };
        let id = request.id().unwrap_or("null").to_owned();
        match request.method() {
            Some("ping" | "logging/setLevel") => return Upstream::Answered(Message::response(&id, "{}")),
            Some("server/discover") => return Upstream::Send(request),
            _ => {}
        }
        Upstream::Send(era::with_envelope(request, &version, level.map(|l| LOG_LEVELS[l])))
    }
}

/// The error of an `initialize` the server refused.
fn initialize_failed(refusal: &RpcError) -> CallError {
    let hint = match refusal.code {
        error_code::METHOD_NOT_FOUND => "; is it an MCP server?",
        _ => "",
    };
    CallError::Protocol(format!("initialize failed: {refusal}{hint}"))
}
