//! The MCP revisions mcpx speaks and the few protocol constants the daemon needs.
//!
//! Source: MCP specification, Basic protocol, Lifecycle, "Version negotiation"
//! (revisions 2024-11-05 through 2025-11-25).

/// Every MCP revision mcpx accepts, oldest first.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The revision mcpx offers in `initialize`.
pub const LATEST_VERSION: &str = "2025-11-25";

/// Whether `version` is one mcpx accepts from a server.
pub fn is_supported(version: &str) -> bool {
    SUPPORTED_VERSIONS.contains(&version)
}

/// The version to answer a client that asked for `requested`: the same one when
/// supported, else the newest (Lifecycle, "Version negotiation").
pub fn negotiate(requested: &str) -> &'static str {
    SUPPORTED_VERSIONS.iter().find(|v| **v == requested).copied().unwrap_or(LATEST_VERSION)
}

/// JSON-RPC error codes mcpx uses in the answers it makes itself.
pub mod error_code {
    /// Invalid JSON was received (JSON-RPC 2.0, 5.1).
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request object (JSON-RPC 2.0, 5.1).
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available (JSON-RPC 2.0, 5.1).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters (JSON-RPC 2.0, 5.1).
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal JSON-RPC error (JSON-RPC 2.0, 5.1).
    pub const INTERNAL_ERROR: i64 = -32603;
    /// mcpx: the server's reply exceeded `maxMessageBytes` and was discarded.
    pub const MESSAGE_TOO_LARGE: i64 = -32001;
    /// mcpx: no single caller to route a server-to-client request to (none, or several, in flight).
    pub const NO_CALLER: i64 = -32002;
    /// A resource that does not exist (MCP 2025-11-25, Server, Resources, "Error
    /// Handling": "Resource not found: -32002"); the same number as [`NO_CALLER`], in
    /// the answer to a `resources/read`.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// mcpx: the caller the request was routed to cannot answer it (a shell caller and sampling).
    pub const CALLER_CANNOT_ANSWER: i64 = -32003;
    /// A routing header that disagrees with the body (2026-07-28, Transports,
    /// "Request headers"); sent with HTTP 400.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// A request lacking a client capability the server needs (2026-07-28, Basic,
    /// "Per-request protocol fields"): a modern server's own error.
    pub const MISSING_CAPABILITY: i64 = -32021;
    /// A revision the server does not speak, with data `{"supported": [...],
    /// "requested": "..."}` (2026-07-28, Basic, "Versioning").
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}
