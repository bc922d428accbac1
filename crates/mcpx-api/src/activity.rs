//! The body of `POST /v1/activity` and the entries it answers (`mcpx activity`;
//! `docs/api.md`, "Activity").

use serde::{Deserialize, Serialize};

/// `POST /v1/activity`: the entries the filters keep, newest first; with `clear`, the
/// record emptied instead.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ActivityRequest {
    /// Only this server's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Only this tool's, prompt's or URI's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Only those whose client contains this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// Only those that did not end `ok`.
    #[serde(default)]
    pub errors: bool,
    /// Only those that took at least this many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_ms: Option<u64>,
    /// Only those started at or after this, milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<u64>,
    /// The newest this many, at most (0: all).
    #[serde(default)]
    pub limit: usize,
    /// Empty the record instead.
    #[serde(default)]
    pub clear: bool,
}

/// One request, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Its id: in the order the requests started.
    pub id: u64,
    /// When it started, milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// How long it took, microseconds.
    pub duration_us: u64,
    /// How it came: `shell` (the control API: the CLI, code mode) or `mcp` (the MCP
    /// endpoint: `/mcp`, `/mcp/<server>`, `mcpx serve`).
    pub path: String,
    /// Who sent it: an MCP client's `clientInfo` (`name version`), or `shell` with the
    /// caller's pid or session.
    pub client: String,
    /// The server.
    pub server: String,
    /// The instance that answered: its pid, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The instance's pool key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The method (`tools/call`, ...).
    pub method: String,
    /// The tool or prompt named, or the URI read.
    pub name: String,
    /// `ok`, `is-error` (a tool's own error result), `rpc-error` (a JSON-RPC error
    /// answer), `refused` (never sent: the configuration or pinning refused it), or
    /// `failed` (the server failed: it did not start, exited, timed out).
    pub outcome: String,
    /// The JSON-RPC error code of an `rpc-error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    /// What failed or refused it, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Bytes of the request, and of the answer.
    pub bytes_in: u64,
    /// Bytes of the answer.
    pub bytes_out: u64,
}
