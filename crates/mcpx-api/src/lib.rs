//! The control API's request and response shapes (HTTP/1.1 + JSON under `/v1/` on
//! `daemon.sock`; route by route in `docs/api.md`). Shared by the daemon, which
//! answers them, and the CLI, which sends them.
//!
//! Both sides ignore unknown fields, so a newer CLI and an older daemon (or the
//! reverse) keep working for the fields they share.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

pub mod activity;
pub mod arguments;
pub mod client;
pub mod paths;
pub mod pins;
pub mod suggest;

/// Who is asking: what the daemon needs to resolve the caller's configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Caller {
    /// The caller's working directory (absolute); config files are found from it.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// An explicit config file (`--config` or `MCPX_CONFIG`): the only file read.
    #[serde(default)]
    pub config: Option<PathBuf>,
    /// The session (`--session`, else `MCPX_SESSION_ID`), for `session` scopes.
    #[serde(default)]
    pub session: Option<String>,
    /// `MCPX_PARENT_SESSION_ID`, for `parent-session` scopes.
    #[serde(default)]
    pub parent_session: Option<String>,
    /// The CLI's parent process (the agent's shell or script), for `pid` scopes.
    #[serde(default)]
    pub ppid: Option<u32>,
    /// The profile the caller is on (`--profile`, `MCPX_PROFILE`, `/mcp/p/<name>`): only
    /// its servers and tools are offered (`docs/configuration.md`, "Profiles").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// A client of MCP 2026-07-28 over HTTP that names no pool session: the revision
    /// has none (Basic, "Statelessness"), so a `session` scope degrades to `call`, and
    /// the note in the log says how to get one. Never sent; set by the daemon.
    #[serde(skip)]
    pub sessionless: bool,
}

// The request bodies, one per route (docs/api.md gives each route's fields). A
// field keeps its name on every route that has it, and every field but the caller
// is optional on the wire, so a CLI and a daemon of different versions meet on the
// fields they share.

/// `POST /v1/ls` and `POST /v1/commands`: the caller alone.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CallerRequest {
    /// The caller.
    #[serde(default)]
    pub caller: Caller,
}

/// `POST /v1/search`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SearchRequest {
    /// The caller.
    #[serde(default)]
    pub caller: Caller,
    /// The words to look for.
    #[serde(default)]
    pub words: Vec<String>,
}

/// `POST /v1/tools`, `/v1/resources` and `/v1/prompts`: one server's listing, or one
/// item of it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ListRequest {
    /// The caller.
    #[serde(default)]
    pub caller: Caller,
    /// The server.
    #[serde(default)]
    pub server: Option<String>,
    /// `tools`: one tool of `server`.
    #[serde(default)]
    pub tool: Option<String>,
    /// `prompts`: one prompt of `server`.
    #[serde(default)]
    pub prompt: Option<String>,
    /// `tools`, `prompts`: `<server>.<name>`, split after the longest configured
    /// server name, instead of `server` and the name.
    #[serde(default)]
    pub target: Option<String>,
    /// A server never listed is started and listed first, instead of failing
    /// (`server`).
    #[serde(default)]
    pub start: bool,
}

/// `POST /v1/types`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TypesRequest {
    /// The caller.
    #[serde(default)]
    pub caller: Caller,
    /// The servers whose tools to declare (every offered server when empty).
    #[serde(default)]
    pub servers: Vec<String>,
    /// A named server never listed is started and listed first.
    #[serde(default)]
    pub start: bool,
}

/// `POST /v1/call`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CallRequest {
    /// The caller.
    #[serde(default)]
    pub caller: Caller,
    /// `<server>.<tool>`, split after the longest configured server name.
    #[serde(default)]
    pub target: Option<String>,
    /// The server, with `tool`, instead of `target`.
    #[serde(default)]
    pub server: Option<String>,
    /// The tool, with `server`.
    #[serde(default)]
    pub tool: Option<String>,
    /// The tool's arguments, a JSON object, or the `key=value` words as the user
    /// typed them, an array of [`arguments::Pair`]s, which the daemon types by
    /// the tool's `inputSchema` and checks (a daemon from before the pairs refuses an
    /// array as a `usage` error, having run nothing).
    #[serde(default)]
    pub arguments: Option<Box<RawValue>>,
    /// The command and the tool as the user named them (`call fake.echo`): the
    /// arguments are checked against the tool's `inputSchema` before the call, and a
    /// failed check's `usage` error ends with the tool's usage under this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shown: Option<String>,
    /// A deadline in milliseconds, replacing the server's `callTimeout`; 0 means none.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// How the call came, for the activity record: `exec` or `run` (a script of code
    /// mode), `serve --code`; `None`: `shell`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// Who the call is for, for the activity record: the MCP client a `serve --code`
    /// runs scripts for (`name version`); `None`: the shell caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// Answer as a stream of JSON lines (`application/x-ndjson`): one
    /// `{"notification": <message>}` per progress or log notification of the call,
    /// then `{"result": <CallToolResult>}` or `{"error": {...}}`.
    #[serde(default)]
    pub stream: bool,
    /// With `stream`: also send `{"status": {...}}` lines saying what the call waits
    /// on (the server starting, a free instance, the server's answer), for a status
    /// line. Without it no such line is sent, as before the field existed.
    #[serde(default)]
    pub status: bool,
    /// With `stream`: the server-to-client requests the caller answers itself (only
    /// `elicitation/create` so far). Such a request comes as a `{"request": <JSON-RPC
    /// request>, "call": "<call id>"}` line, and its answer goes to `POST
    /// /v1/call/answer` ([`Answer`]). Others get mcpx's own answer.
    #[serde(default)]
    pub answers: Vec<String>,
}

/// `POST /v1/read`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReadRequest {
    /// The caller.
    #[serde(default)]
    pub caller: Caller,
    /// The server.
    #[serde(default)]
    pub server: Option<String>,
    /// The resource's URI.
    #[serde(default)]
    pub uri: Option<String>,
    /// A deadline in milliseconds, replacing the server's `callTimeout`; 0 means none.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// `POST /v1/prompt`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PromptRequest {
    /// The caller.
    #[serde(default)]
    pub caller: Caller,
    /// `<server>.<prompt>`, split after the longest configured server name.
    #[serde(default)]
    pub target: Option<String>,
    /// The server, with `prompt`, instead of `target`.
    #[serde(default)]
    pub server: Option<String>,
    /// The prompt, with `server`.
    #[serde(default)]
    pub prompt: Option<String>,
    /// The prompt's arguments, an object of strings.
    #[serde(default)]
    pub arguments: Option<Box<RawValue>>,
    /// A deadline in milliseconds, replacing the server's `callTimeout`; 0 means none.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// `POST /v1/restart`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RestartRequest {
    /// The caller.
    #[serde(default)]
    pub caller: Caller,
    /// The server.
    #[serde(default)]
    pub server: Option<String>,
    /// Only the instance with this pool key.
    #[serde(default)]
    pub key: Option<String>,
}

/// `POST /v1/refresh`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RefreshRequest {
    /// The caller.
    #[serde(default)]
    pub caller: Caller,
    /// One server (every enabled one when neither this nor `target` is given).
    #[serde(default)]
    pub server: Option<String>,
    /// `<server>.<tool>`, as `POST /v1/call` takes it: its server.
    #[serde(default)]
    pub target: Option<String>,
}

/// `POST /v1/stop`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StopRequest {
    /// Also stop every server.
    #[serde(default)]
    pub all: bool,
}

/// `POST /v1/upgrade`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct UpgradeRequest {
    /// The binary to re-execute (default: the daemon's own).
    #[serde(default)]
    pub binary: Option<PathBuf>,
}

/// `POST /v1/auth/login`, `/v1/auth/status` and `/v1/auth/logout`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AuthRequest {
    /// The caller.
    #[serde(default)]
    pub caller: Caller,
    /// The remote server (`status`: every remote server when absent).
    #[serde(default)]
    pub server: Option<String>,
    /// `login`: log in by the device authorization grant (RFC 8628).
    #[serde(default)]
    pub device: bool,
}

/// `POST /v1/call/answer`: a shell caller's answer to a server request its call's
/// stream relayed (see [`CallRequest::answers`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answer {
    /// The call, as the request's line names it (`"call"`).
    pub call: String,
    /// The JSON-RPC response, with the id of the relayed request (JSON-RPC 2.0,
    /// "Response object"), for instance
    /// `{"jsonrpc":"2.0","id":"mcpx-1","result":{"action":"decline"}}`.
    pub response: Box<RawValue>,
}

/// One row of `mcpx ls --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerRow {
    /// Server name.
    pub name: String,
    /// Tool count from the schema cache; `null` when never listed.
    pub tools: Option<usize>,
    /// `shared` or `exclusive`.
    pub sharing: String,
    /// The scope.
    pub scope: String,
    /// Live instances.
    pub live: usize,
    /// `unread`, `ready`, `stale`, `running`, `error`, `crash-loop` or `disabled`; `warning` for a
    /// row named by a file's path whose `warnings` say what is wrong with that file.
    pub state: String,
    /// The `mcpx.description`, else the server's instructions' first paragraph (up to
    /// the first blank line, at most 1000 characters).
    pub description: Option<String>,
    /// Why the state is `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How many of its tools and prompts pinning holds for the user's review (`mcpx
    /// pins review <name>`); absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub held: usize,
    /// Where it is defined.
    pub source: Source,
    /// Warnings about its definition, one line each: a name defined twice in one file, or
    /// defined differently in a farther file that this one hides (for a `warning` row, what
    /// is wrong with the file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Where a server of `mcpx ls --json` is defined: `{"file": "/abs/path", "client": "cursor"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// The file.
    pub file: PathBuf,
    /// For another client's file (an import, or `.cursor/mcp.json` / `.vscode/mcp.json`),
    /// that client's name as `"imports"` spells it (`claude-code`, `cursor`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// The answer of `POST /v1/types`: TypeScript declarations of the tools of the servers
/// asked for (the daemon's `code::declarations`), the name of each declared function mapped
/// back to its server and tool, and the servers left out because they were never listed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TypesAnswer {
    /// The declaration file's text and its name mapping.
    #[serde(flatten)]
    pub declarations: Declarations,
    /// Offered servers with no cached listing (only when no server was named: a named
    /// server is started and listed instead), by configured name, sorted.
    #[serde(default)]
    pub unlisted: Vec<String>,
}

/// One hit of `mcpx search --json`, best first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchHit {
    /// Server name.
    pub server: String,
    /// Tool name.
    pub tool: String,
    /// Tool description.
    pub description: Option<String>,
}

/// `GET /v1/status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    /// The daemon.
    pub daemon: DaemonStatus,
    /// Every instance, live or failed.
    pub instances: Vec<InstanceStatus>,
}

/// The daemon part of `status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DaemonStatus {
    /// Its pid.
    pub pid: u32,
    /// Package version.
    pub version: String,
    /// Build id (version plus build tag).
    pub build: String,
    /// Seconds since it started.
    pub uptime_s: u64,
    /// The control socket.
    pub socket: PathBuf,
    /// The TCP URL of `/mcp`, when enabled.
    pub http_url: Option<String>,
    /// Every configuration file the daemon has resolved.
    pub config_files: Vec<PathBuf>,
    /// The user config as the daemon's environment locates it (`$XDG_CONFIG_HOME` or
    /// `$HOME`), when it can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_config: Option<PathBuf>,
    /// Each client's user-level file as the daemon's environment locates it, by the name
    /// `"imports"` uses: where an import reads.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub client_files: BTreeMap<String, PathBuf>,
    /// The log file.
    pub log_file: PathBuf,
    /// Problems to fix, like a service manager that would kill the supervisors.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// What is wrong in the known configuration files, each file read alone: a server
    /// with a config error has no instance, so it is listed here instead.
    #[serde(default)]
    pub config_errors: Vec<ConfigErrorStatus>,
    /// Progress and log notifications lost since the daemon started because their
    /// caller read too slowly (its queue was full).
    #[serde(default)]
    pub dropped_notifications: u64,
    /// The servers with tools or prompts held by pinning for the user's review (`mcpx
    /// pins review <server>`), by name, with how many.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub held: BTreeMap<String, usize>,
    /// How many pinned or held tool and prompt definitions the poisoning scan found
    /// something in (`mcpx pins ls` shows what).
    #[serde(default)]
    pub flagged_definitions: usize,
    /// The activity record's losses: entries dropped because its writer fell behind,
    /// and entries whose write failed, since the daemon started.
    #[serde(default)]
    pub activity_lost: u64,
    /// Why the activity record last failed to open or write, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity_error: Option<String>,
    /// Where spans are exported (the OTLP/HTTP traces URL), when the export is on
    /// (`docs/telemetry.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otel_url: Option<String>,
    /// Spans exported, since the daemon started.
    #[serde(default)]
    pub spans_exported: u64,
    /// Spans lost: dropped by the export's full queue (a slow or dead collector), or in
    /// an export that failed, since the daemon started.
    #[serde(default)]
    pub spans_dropped: u64,
    /// Why the last export failed, or why spans are not exported as configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otel_error: Option<String>,
    /// The dashboard's address (`http://127.0.0.1:<port>/`), once `mcpx ui` opened its
    /// listener (`docs/ui.md`); a browser gets in only through `mcpx ui`'s link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui_url: Option<String>,
}

/// `POST /v1/ui`: a one-time link into the dashboard (`docs/ui.md`), whose listener
/// the request opens when it is not open yet.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UiAnswer {
    /// `http://127.0.0.1:<port>/enter?code=<code>`: the code is good once, for 60 s.
    pub url: String,
    /// The listener's port.
    pub port: u16,
}

/// One problem of a configuration file in `status`: an entry that does not parse, or a
/// whole file that cannot be read or parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigErrorStatus {
    /// The file.
    pub file: PathBuf,
    /// The server whose entry is wrong; absent when the whole file is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// What is wrong and what to do, one line starting with the file.
    pub message: String,
}

/// One instance in `status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct InstanceStatus {
    /// Server name.
    pub server: String,
    /// Pool key.
    pub key: String,
    /// The server process's pid.
    pub pid: Option<u32>,
    /// `starting`, `running`, `stopping`, `exited`, or `error` (the last start failed).
    pub state: String,
    /// Requests in flight, the daemon's own (schema listings) included: what
    /// `in_flight` says too (kept: the interface never renames a field).
    pub calls: u64,
    /// Callers' requests the instance answered (results and JSON-RPC errors) since
    /// this daemon started or took it up.
    #[serde(default)]
    pub calls_served: u64,
    /// Requests in flight, the daemon's own (schema listings) included.
    #[serde(default)]
    pub in_flight: u64,
    /// The callers (session or parent pid) with calls in flight.
    #[serde(default)]
    pub holders: Vec<String>,
    /// Whether a supervisor owns the process.
    pub supervised: bool,
    /// The supervisor's pid.
    pub supervisor_pid: Option<u32>,
    /// The supervisor's attach protocol version.
    pub supervisor_protocol: Option<String>,
    /// A remote server's URL, as written in the configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A local server's `command` and `args` as written (before `${VAR}` expansion),
    /// joined by spaces; absent for remote servers and adopted instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its `sandbox` as the configuration writes it (`docs/configuration.md`,
    /// "Sandbox"); absent for an unconfined server, and for an instance adopted from a
    /// previous daemon (whose confinement, applied at its start, holds all the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
    /// The configuration file that defines the server; absent for instances adopted
    /// from a previous daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<PathBuf>,
    /// Bytes of the server's output discarded (oversize messages, non-JSON lines).
    pub dropped_bytes: u64,
    /// Non-JSON lines skipped on stdout.
    pub skipped_lines: u64,
    /// Stdout bytes the supervisor had kept for this daemon when it attached.
    #[serde(default)]
    pub buffered_at_attach: u64,
    /// Progress and log notifications of this instance lost because their caller
    /// read too slowly.
    #[serde(default)]
    pub dropped_notifications: u64,
    /// Responses the server sent with `"id": null` (JSON-RPC allows it only on an error
    /// about a request whose id the server could not read).
    #[serde(default)]
    pub null_id_errors: u64,
    /// The last error.
    pub last_error: Option<String>,
    /// The end of the server's stderr.
    pub stderr_tail: String,
    /// Seconds since the last call started or ended.
    pub idle_s: Option<u64>,
    /// Seconds since it started.
    pub uptime_s: Option<u64>,
}

/// The error body of every failed request: `{"error": {"kind", "message", "code"?}}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ApiError,
}

/// What kind of failure an [`ApiError`] is; its exit code and HTTP status follow from
/// it (the design's interface contract). On the wire, the snake-case name
/// (`unknown_server`); a kind this build does not know reads as [`ErrorKind::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The command line or request body is wrong (exit 2, HTTP 400).
    Usage,
    /// A configuration file is wrong (exit 2, HTTP 400).
    Config,
    /// No server of that name is configured (exit 2, HTTP 404).
    UnknownServer,
    /// The server has no tool (or, for `prompts` and `prompt`, no prompt) of that name
    /// (exit 2, HTTP 404).
    UnknownTool,
    /// The tool or prompt is held by pinning until the user reviews it with `mcpx pins
    /// review` (exit 2, HTTP 403).
    Held,
    /// The daemon could not be reached or started, or died during the call (exit 3, HTTP 503).
    Daemon,
    /// The server did not start, crashed or failed (exit 4, HTTP 502).
    Server,
    /// The server broke the protocol (exit 4, HTTP 502).
    Protocol,
    /// The server answered with a JSON-RPC error, whose code is in [`ApiError::code`]
    /// (exit 4, HTTP 502).
    Rpc,
    /// A remote server needs a login (exit 4, HTTP 502).
    Auth,
    /// The call timed out (exit 5, HTTP 504).
    Timeout,
    /// A kind a newer daemon sent that this build does not know (exit 4, HTTP 502).
    #[serde(other)]
    Other,
}

impl ErrorKind {
    /// The CLI's exit status (interface contract: 2 usage or configuration, 3 daemon,
    /// 4 server, 5 timeout).
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Usage
            | ErrorKind::Config
            | ErrorKind::UnknownServer
            | ErrorKind::UnknownTool
            | ErrorKind::Held => 2,
            ErrorKind::Daemon => 3,
            ErrorKind::Timeout => 5,
            ErrorKind::Server | ErrorKind::Protocol | ErrorKind::Rpc | ErrorKind::Auth | ErrorKind::Other => 4,
        }
    }

    /// The HTTP status the daemon answers with.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::Usage | ErrorKind::Config => 400,
            ErrorKind::UnknownServer | ErrorKind::UnknownTool => 404,
            ErrorKind::Held => 403,
            ErrorKind::Daemon => 503,
            ErrorKind::Timeout => 504,
            ErrorKind::Server | ErrorKind::Protocol | ErrorKind::Rpc | ErrorKind::Auth | ErrorKind::Other => 502,
        }
    }
}

/// An error as the API and `--json` output show it.
#[derive(Debug, Clone, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// What kind of failure it is.
    pub kind: ErrorKind,
    /// One line saying what happened and what to do.
    pub message: String,
    /// For `rpc`: the JSON-RPC error code the server answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
}

impl ApiError {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ApiError {
        ApiError { kind, message: message.into(), code: None }
    }

    /// The CLI's exit status for this error ([`ErrorKind::exit_code`]).
    pub fn exit_code(&self) -> i32 {
        self.kind.exit_code()
    }

    /// The HTTP status the daemon answers with ([`ErrorKind::http_status`]).
    pub fn http_status(&self) -> u16 {
        self.kind.http_status()
    }
}

/// Generated declarations (`POST /v1/types`: the daemon's code generation) and how
/// their names map back to servers and tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Declarations {
    /// The declaration file's text (TypeScript, `.d.ts`).
    pub text: String,
    /// One entry per declared tool function, in the order of the text.
    pub names: Vec<NameMapping>,
}

/// Where one declared function comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameMapping {
    /// The server's configured name.
    pub server: String,
    /// The tool's name, as the server lists it.
    pub tool: String,
    /// The namespace declared for the server (a global identifier).
    pub namespace: String,
    /// The function declared for the tool inside that namespace.
    pub function: String,
    /// Whether the tool has an `outputSchema`: then the function's promise resolves to the
    /// result's `structuredContent` (typed from the schema); otherwise to the whole
    /// `CallToolResult`.
    pub structured: bool,
}

/// An error as the daemon answers it: its kind's HTTP status and the [`ErrorBody`]
/// (with the `axum` feature, which the daemon's server takes).
#[cfg(feature = "axum")]
impl axum::response::IntoResponse for ApiError {
    fn into_response(self) -> axum::response::Response {
        use axum::http::StatusCode;
        let status = StatusCode::from_u16(self.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(ErrorBody { error: self })).into_response()
    }
}

/// Whether `n` is 0 (a count left out of JSON when there is nothing to count).
fn is_zero(n: &usize) -> bool {
    *n == 0
}
