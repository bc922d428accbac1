//! The body of `POST /v1/activity` and the entries it answers (`mcpx activity`;
//! `docs/api.md`, "Activity").

use serde::{Deserialize, Serialize};

/// `POST /v1/activity`: the entries the filters keep, newest first (with `after_id`,
/// oldest first); with `clear`, the record emptied instead.
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
    /// Only those recorded at or after this, milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<u64>,
    /// Only those recorded before this, milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<u64>,
    /// Only those recorded after the entry of this id (`mcpx activity --follow` asks
    /// with the newest id it has printed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_id: Option<u64>,
    /// Only the entry of this id (`mcpx activity show ID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// The newest this many, at most (0: all).
    #[serde(default)]
    pub limit: usize,
    /// Empty the record instead.
    #[serde(default)]
    pub clear: bool,
}

/// One request, as recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Its id: in the order entries were recorded; the time it was recorded, in
    /// milliseconds since the Unix epoch, shifted left 20 bits (made unique).
    pub id: u64,
    /// When it started, milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// How long it took, microseconds.
    pub duration_us: u64,
    /// How it came: `shell` (`mcpx call`, `read`, `prompt`), `exec` or `run` (a
    /// script of code mode), `serve --code` (a script an MCP client ran through code
    /// mode), `serve` or `serve <server>` (`mcpx serve`), `/mcp` or `/mcp/<server>` (the
    /// daemon's streamable HTTP endpoint), `pins` (a pin event), or `ui` (an action of
    /// the dashboard, `mcpx ui`).
    pub path: String,
    /// Who sent it: an MCP client's `clientInfo` (`name version`, from its
    /// `initialize` or, for a 2026-07-28 client, the request's `_meta`), or `shell`
    /// with the caller's parent pid and working directory.
    pub client: String,
    /// The server.
    pub server: String,
    /// The instance that answered: its pid, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The instance's pool key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The method (`tools/call`, `prompts/get`, `resources/read`,
    /// `completion/complete`); a server's request to the client (`sampling/createMessage`,
    /// `elicitation/create`) made during the call `name` names; a pin event
    /// (`pin/held`, `pin/approved`, `pin/rejected`); or an action of the dashboard on
    /// the server `name` names (`ui/restart`, `ui/stop`, `ui/refresh`, `ui/trust`, `ui/review`, `ui/login`, `ui/logout`).
    pub method: String,
    /// The tool or prompt named, or the URI read.
    pub name: String,
    /// `ok`, `is-error` (a tool's own error result), `rpc-error` (a JSON-RPC error
    /// answer), `refused` (never sent: the configuration, the policy, trust or a held
    /// pin refused it), or `failed` (the server failed: it did not start, exited,
    /// timed out; a server request nobody answered). A pin event's outcome is its
    /// verb: `held`, `approved`, `rejected`.
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
    /// The progress and log notifications the request carried to its caller.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub notifications: u64,
    /// How a server's request to the client was answered: an elicitation's `action`
    /// (`accept`, `decline`, `cancel`), a sampling's `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered: Option<String>,
    /// The request's arguments (JSON text), when the record keeps them
    /// (`"activity": {"arguments": true}`): secrets replaced by `[secret]`, cut at the
    /// configured size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    /// The answer's `result` (JSON text), kept and cut as `arguments` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
