//! Configuration: which MCP servers a request sees, and how each one is run.
//!
//! # Files
//!
//! Config files use the `mcpServers` JSON shape of Claude Desktop, Cursor and Claude Code (VS
//! Code's `servers` key is accepted too; when both are present they are merged, `mcpServers`
//! winning). Comments (`//`, `/* */`) and trailing commas are allowed. Every other key is
//! ignored, since other programs share these files:
//!
//! ```jsonc
//! {
//!   "mcpServers": {
//!     "docs": {
//!       "command": "npx", "args": ["-y", "docs-mcp"],
//!       "env": { "TOKEN": "${DOCS_TOKEN}" },        // expanded from the daemon's environment
//!       "mcpx": { "scope": "repo", "idleTimeout": "10m" },
//!     },
//!     "search": { "url": "https://example.com/mcp", "headers": { "Authorization": "Bearer ${KEY}" } },
//!   },
//! }
//! ```
//!
//! # Resolution
//!
//! An explicit file (`--config` / `MCPX_CONFIG`) is the only file. Otherwise every `.mcpx.json`
//! and `.mcp.json` from the caller's working directory up to `/` is read, then the user file
//! (`$XDG_CONFIG_HOME/mcpx/config.json`, else `~/.config/mcpx/config.json`); servers are merged
//! by name, the nearest file winning and `.mcpx.json` beating `.mcp.json` in one directory. A
//! nearer entry replaces a farther one entirely (also when it is `disabled`, which is how a
//! project turns off a user-level server). See [`ConfigCache`].
//!
//! # Variables
//!
//! `${VAR}` in `command`, `args`, `env` values, `cwd`, `url` and header values is expanded from
//! the daemon's captured environment by [`ServerEntry::expand`]; `${VAR:-default}` and VS Code's
//! `${env:VAR}` work too, and `$${` is a literal `${` (so `$${VAR}` stays `${VAR}`).

mod command;
mod expand;
mod jsonc;
mod parse;
mod resolve;
pub mod units;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use command::{CommandNotFound, DEFAULT_PATH, ExeIdentity, SearchedIn, exe_identity, resolve_command};
pub use expand::{ExpandedRemote, ExpandedStdio, ExpandedTransport};
pub use resolve::{ConfigCache, ConfigEnv, MCPX_PROJECT_FILE, PROJECT_FILE, ResolveRequest};

/// The keys allowed in a server's `mcpx` block, in documentation order.
pub const MCPX_KEYS: &[&str] = &[
    "sharing",
    "scope",
    "max",
    "min",
    "idleTimeout",
    "callTimeout",
    "startTimeout",
    "supervised",
    "bufferBytes",
    "maxMessageBytes",
    "orphanTimeout",
    "description",
    "disabled",
    "includeTools",
    "excludeTools",
];

/// Whether several clients may use one server process at once (`mcpx.sharing`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sharing {
    /// `"shared"`: concurrent calls from any client go to the same instance (the default).
    #[default]
    Shared,
    /// `"exclusive"`: an instance serves one client at a time.
    Exclusive,
}

impl Sharing {
    /// Every value, in documentation order.
    pub const ALL: [Sharing; 2] = [Sharing::Shared, Sharing::Exclusive];

    /// The config spelling: `"shared"` or `"exclusive"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Sharing::Shared => "shared",
            Sharing::Exclusive => "exclusive",
        }
    }
}

impl std::fmt::Display for Sharing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which callers share an instance (`mcpx.scope`): instances are keyed by this and the
/// fingerprint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// `"global"`: one pool for every caller of the user (the default).
    #[default]
    Global,
    /// `"repo"`: one pool per repository.
    Repo,
    /// `"worktree"`: one pool per git worktree.
    Worktree,
    /// `"cwd"`: one pool per caller working directory.
    Cwd,
    /// `"session"`: one pool per client session.
    Session,
    /// `"parent-session"`: one pool per parent session (e.g. an agent and its sub-agents).
    ParentSession,
    /// `"pid"`: one pool per client process.
    Pid,
    /// `"call"`: a fresh instance per tool call.
    Call,
}

impl Scope {
    /// Every value, in documentation order.
    pub const ALL: [Scope; 8] = [
        Scope::Global,
        Scope::Repo,
        Scope::Worktree,
        Scope::Cwd,
        Scope::Session,
        Scope::ParentSession,
        Scope::Pid,
        Scope::Call,
    ];

    /// The config spelling, e.g. `"global"` or `"parent-session"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Repo => "repo",
            Scope::Worktree => "worktree",
            Scope::Cwd => "cwd",
            Scope::Session => "session",
            Scope::ParentSession => "parent-session",
            Scope::Pid => "pid",
            Scope::Call => "call",
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The HTTP flavour of a remote server (`transport`, or VS Code's `type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoteKind {
    /// `"http"`: MCP streamable HTTP (the default).
    #[default]
    Http,
    /// `"sse"`: the legacy HTTP+SSE transport.
    Sse,
}

impl RemoteKind {
    /// The config spelling: `"http"` or `"sse"`.
    pub fn as_str(self) -> &'static str {
        match self {
            RemoteKind::Http => "http",
            RemoteKind::Sse => "sse",
        }
    }
}

/// How to reach a server, as written in the file (templates not expanded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportSpec {
    /// A local process speaking MCP on stdin/stdout (`command` in the file).
    Stdio {
        /// The program (`command`): a name looked up on `PATH` or a path.
        command: String,
        /// `args`; empty when absent.
        args: Vec<String>,
        /// `env`: variables added to the process environment.
        env: BTreeMap<String, String>,
        /// `cwd`: the working directory (relative = relative to the config file's directory).
        cwd: Option<String>,
    },
    /// A remote server over HTTP (`url` in the file).
    Remote {
        /// `url`: the endpoint.
        url: String,
        /// `headers`: extra HTTP request headers.
        headers: BTreeMap<String, String>,
        /// `transport` (or `type`): streamable HTTP or SSE.
        kind: RemoteKind,
    },
}

/// The `mcpx` block of a server entry, defaults filled in. Timeouts are `None` when written as
/// `0` (no timeout); sizes are bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerOptions {
    /// `sharing`; default `shared`.
    pub sharing: Sharing,
    /// `scope`; default `global`.
    pub scope: Scope,
    /// `max`: most instances of this server across its pool keys, ≥ 1; default 4.
    pub max: u32,
    /// `min`: (`global` scope) instances started with the daemon and exempt from idle reaping, ≤ `max`; default 0.
    pub min: u32,
    /// `idleTimeout`: stop an instance idle this long; default 5 min.
    pub idle_timeout: Option<Duration>,
    /// `callTimeout`: fail a tool call running this long; default 120 s.
    pub call_timeout: Option<Duration>,
    /// `startTimeout`: fail a start (spawn + initialize) taking this long; default 60 s.
    pub start_timeout: Option<Duration>,
    /// `supervised`: run each instance under its own `mcpx supervise` process, which outlives the daemon; default true.
    pub supervised: bool,
    /// `bufferBytes`: the supervisor's stdout buffer while no daemon is attached, in bytes, > 0; default 8 MiB.
    pub buffer_bytes: u64,
    /// `maxMessageBytes`: largest JSON-RPC message accepted, in bytes, > 0; default 64 MiB.
    pub max_message_bytes: u64,
    /// `orphanTimeout`: a supervisor no daemon attaches to for this long stops its server and exits; default 1 h.
    pub orphan_timeout: Option<Duration>,
    /// `description`: free text shown in listings.
    pub description: Option<String>,
    /// `disabled`: the server is configured but not offered; default false.
    pub disabled: bool,
    /// `includeTools`: when set, only these tools are offered.
    pub include_tools: Option<Vec<String>>,
    /// `excludeTools`: tools never offered (applied after `include_tools`).
    pub exclude_tools: Vec<String>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            sharing: Sharing::Shared,
            scope: Scope::Global,
            max: 4,
            min: 0,
            idle_timeout: Some(Duration::from_secs(5 * 60)),
            call_timeout: Some(Duration::from_secs(120)),
            start_timeout: Some(Duration::from_secs(60)),
            supervised: true,
            buffer_bytes: 8 << 20,
            max_message_bytes: 64 << 20,
            orphan_timeout: Some(Duration::from_secs(3600)),
            description: None,
            disabled: false,
            include_tools: None,
            exclude_tools: Vec::new(),
        }
    }
}

impl ServerOptions {
    /// Whether the tool `name` is offered: it must be in `include_tools` when that is set, and
    /// must not be in `exclude_tools`. Names match exactly.
    pub fn tool_allowed(&self, name: &str) -> bool {
        self.include_tools.as_ref().is_none_or(|include| include.iter().any(|t| t == name))
            && !self.exclude_tools.iter().any(|t| t == name)
    }
}

/// One server as configured in one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerEntry {
    /// The key under `mcpServers` / `servers`.
    pub name: String,
    /// The file the entry came from.
    pub source: PathBuf,
    /// How to reach it, as written (unexpanded).
    pub transport: TransportSpec,
    /// The `mcpx` block with defaults.
    pub options: ServerOptions,
}

impl ServerEntry {
    /// Expands `${VAR}` references from `env` (the daemon's captured environment) in the
    /// command, args, env values, cwd, url and header values. A relative `cwd` is resolved
    /// against the directory of [`source`](Self::source).
    ///
    /// Errors: [`ConfigError::UnsetVariable`] naming the first unset variable and this server.
    /// The result holds secrets; its `Debug` output shows templates only.
    pub fn expand(&self, env: &HashMap<String, String>) -> Result<ExpandedTransport, ConfigError> {
        expand::expand_transport(&self.transport, env, &self.name, self.source.parent())
    }

    /// The key of this entry's schema cache file, its crash count and its `status`
    /// rows: the [`fingerprint`](Self::fingerprint) without the executable's identity,
    /// so a server keeps its cached tools when its binary is rebuilt or deleted.
    pub fn cache_key(&self) -> String {
        self.fingerprint(None)
    }

    /// A stable 16-hex-digit fingerprint of what decides this entry's process: the transport
    /// as written before expansion (command, args, env, cwd, url, headers, transport kind),
    /// sharing and scope, plus `exe` (the resolved executable) when given. Equal entries in
    /// different files, or under different names, have equal fingerprints; changing a variable's
    /// value does not change it. A relative `cwd` is hashed joined to the file's directory, since
    /// it names a different directory in each project.
    pub fn fingerprint(&self, exe: Option<&ExeIdentity>) -> String {
        let mut h = Fingerprinter(Sha256::new());
        h.field("mcpx-fingerprint-v1");
        match &self.transport {
            TransportSpec::Stdio { command, args, env, cwd } => {
                h.field("stdio");
                h.field(command);
                h.list(args.iter().map(String::as_str));
                h.map(env);
                // A relative `cwd` means a different directory in each project, so
                // it is hashed resolved against the file's directory.
                match (cwd.as_deref(), self.source.parent()) {
                    (Some(c), Some(dir)) if Path::new(c).is_relative() && !c.contains("${") => {
                        h.opt(Some(&dir.join(c).display().to_string()))
                    }
                    (c, _) => h.opt(c),
                }
            }
            TransportSpec::Remote { url, headers, kind } => {
                h.field("remote");
                h.field(url);
                h.map(headers);
                h.field(kind.as_str());
            }
        }
        h.field(self.options.sharing.as_str());
        h.field(self.options.scope.as_str());
        match exe {
            Some(exe) => {
                h.field("exe");
                h.field(&exe.path.to_string_lossy());
                h.field(&exe.stamp);
            }
            None => h.field("no-exe"),
        }
        h.0.finalize()[..8].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Unambiguous encoding for hashing: every string is length-prefixed.
struct Fingerprinter(Sha256);

impl Fingerprinter {
    fn field(&mut self, s: &str) {
        self.0.update((s.len() as u64).to_le_bytes());
        self.0.update(s.as_bytes());
    }
    fn list<'a>(&mut self, items: impl ExactSizeIterator<Item = &'a str>) {
        self.0.update((items.len() as u64).to_le_bytes());
        for item in items {
            self.field(item);
        }
    }
    fn map(&mut self, map: &BTreeMap<String, String>) {
        self.0.update((map.len() as u64).to_le_bytes());
        for (k, v) in map {
            self.field(k);
            self.field(v);
        }
    }
    fn opt(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.0.update([1]);
                self.field(s);
            }
            None => self.0.update([0]),
        }
    }
}

/// The result of resolving one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvedConfig {
    /// Every existing file that was read for this request, nearest (highest precedence) first,
    /// including files whose entries were all overridden or that define no servers.
    pub files: Vec<PathBuf>,
    /// The merged servers by name (disabled ones included; check `options.disabled`).
    pub servers: BTreeMap<String, ServerEntry>,
}

impl ResolvedConfig {
    /// The server named `name`, if configured.
    pub fn get(&self, name: &str) -> Option<&ServerEntry> {
        self.servers.get(name)
    }

    /// The servers that are not `disabled`, in name order.
    pub fn enabled(&self) -> impl Iterator<Item = &ServerEntry> {
        self.servers.values().filter(|s| !s.options.disabled)
    }
}

/// Everything that can go wrong loading configuration. Messages are single lines starting with
/// the file (when there is one) and saying what to fix; none contains an expanded variable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A config file exists but cannot be read (or the explicit file is missing).
    #[error("{}: cannot read config file: {error}{}", file.display(), io_hint(error))]
    Io {
        /// The file.
        file: PathBuf,
        /// The underlying error.
        error: io::Error,
    },
    /// A file is not valid JSON(C), or its top level has the wrong shape.
    #[error("{}:{line}:{column}: {message} (fix the JSON; comments and trailing commas are allowed)", file.display())]
    Syntax {
        /// The file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column, in bytes.
        column: usize,
        /// What the parser expected.
        message: String,
    },
    /// A key in a server's `mcpx` block that mcpx does not know.
    #[error(
        "{}: server `{server}`: unknown key `{key}` in the `mcpx` block (known keys: {})",
        file.display(),
        MCPX_KEYS.join(", ")
    )]
    UnknownKey {
        /// The file.
        file: PathBuf,
        /// The server name.
        server: String,
        /// The unknown key.
        key: String,
    },
    /// A known key with a bad value.
    #[error("{}: server `{server}`: invalid `{key}`: {message}", file.display())]
    InvalidValue {
        /// The file.
        file: PathBuf,
        /// The server name.
        server: String,
        /// The key, dotted for nested ones: `args[1]`, `env.TOKEN`, `mcpx.idleTimeout`.
        key: String,
        /// What is wrong and what is expected (never quotes an env or header value).
        message: String,
    },
    /// An entry with neither `command` nor `url`.
    #[error(
        "{}: server `{server}`: needs a `command` (local server) or a `url` (remote server)",
        file.display()
    )]
    MissingCommandOrUrl {
        /// The file.
        file: PathBuf,
        /// The server name.
        server: String,
    },
    /// An entry with both `command` and `url`.
    #[error(
        "{}: server `{server}`: has both `command` and `url`; keep `command` for a local server or `url` for a remote one",
        file.display()
    )]
    BothCommandAndUrl {
        /// The file.
        file: PathBuf,
        /// The server name.
        server: String,
    },
    /// A `${VAR}` whose variable is not in the daemon's environment.
    #[error(
        "server `{server}`: environment variable `{variable}` is not set in the daemon's environment (set it and restart the daemon with `mcpx stop`)"
    )]
    UnsetVariable {
        /// The variable name.
        variable: String,
        /// The server name.
        server: String,
    },
}

impl ConfigError {
    /// The config file the error is about; `None` for [`ConfigError::UnsetVariable`].
    pub fn file(&self) -> Option<&Path> {
        match self {
            ConfigError::Io { file, .. }
            | ConfigError::Syntax { file, .. }
            | ConfigError::UnknownKey { file, .. }
            | ConfigError::InvalidValue { file, .. }
            | ConfigError::MissingCommandOrUrl { file, .. }
            | ConfigError::BothCommandAndUrl { file, .. } => Some(file),
            ConfigError::UnsetVariable { .. } => None,
        }
    }

    /// The server the error is about, when it concerns one entry.
    pub fn server(&self) -> Option<&str> {
        match self {
            ConfigError::UnknownKey { server, .. }
            | ConfigError::InvalidValue { server, .. }
            | ConfigError::MissingCommandOrUrl { server, .. }
            | ConfigError::BothCommandAndUrl { server, .. }
            | ConfigError::UnsetVariable { server, .. } => Some(server),
            ConfigError::Io { .. } | ConfigError::Syntax { .. } => None,
        }
    }
}

fn io_hint(error: &io::Error) -> &'static str {
    match error.kind() {
        io::ErrorKind::NotFound => " (check the path given with --config or MCPX_CONFIG)",
        io::ErrorKind::PermissionDenied => " (fix the file's permissions or remove it)",
        io::ErrorKind::InvalidData => " (save the file as UTF-8)",
        io::ErrorKind::IsADirectory => " (remove or rename the directory)",
        _ => " (fix or remove the file)",
    }
}
