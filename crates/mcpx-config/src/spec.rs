//! The plain configuration types a server entry is made of: sharing, scope, the remote
//! flavour, the transport as written, and the keys of the `mcpx` block.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
    "maxResultBytes",
    "maxResultBytesPerTool",
    "pinning",
    "sandbox",
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

/// What a changed tool or prompt definition does (`pinning`, in the user config's top
/// level or a server's `mcpx` block; `docs/configuration.md`, "Pinning"). Ordered from
/// the loosest to the strictest: a project file may only move up this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pinning {
    /// `"off"`: nothing is pinned or held.
    Off,
    /// `"warn"`: a changed or new definition passes, and is logged.
    Warn,
    /// `"hold"`: a changed or new definition is held until the user reviews it (the
    /// default).
    #[default]
    Hold,
    /// `"strict"`: as `hold`, and a definition the poisoning scan flags is held from
    /// its first listing.
    Strict,
}

impl Pinning {
    /// Every value, from the loosest to the strictest.
    pub const ALL: [Pinning; 4] = [Pinning::Off, Pinning::Warn, Pinning::Hold, Pinning::Strict];

    /// The config spelling: `"off"`, `"warn"`, `"hold"` or `"strict"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Pinning::Off => "off",
            Pinning::Warn => "warn",
            Pinning::Hold => "hold",
            Pinning::Strict => "strict",
        }
    }
}

impl std::fmt::Display for Pinning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Pinning {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Pinning::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| format!("unknown pinning `{s}` (use \"off\", \"warn\", \"hold\" or \"strict\")"))
    }
}

/// A server's `sandbox` (its `mcpx` block; `docs/configuration.md`, "Sandbox"): the
/// kernel confinement its process starts under, as written (paths expanded at launch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxSpec {
    /// `preset`: the system paths and runtime caches the server's runtime needs.
    pub preset: Preset,
    /// `read`: more paths it may read (templates: `~`, `${VAR}`, relative to the file).
    pub read: Vec<String>,
    /// `write`: more paths it may read and write (templates, as `read`).
    pub write: Vec<String>,
    /// `network`.
    pub network: NetworkSpec,
}

/// A sandbox's `preset`: which runtime the server is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// `"node"`: Node.js, its install and npm's cache.
    Node,
    /// `"python"`: the interpreter, its libraries and uv's cache.
    Python,
    /// `"binary"`: a native program: the system's libraries only.
    Binary,
}

impl Preset {
    /// Every value, in documentation order.
    pub const ALL: [Preset; 3] = [Preset::Node, Preset::Python, Preset::Binary];

    /// The config spelling: `"node"`, `"python"` or `"binary"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Preset::Node => "node",
            Preset::Python => "python",
            Preset::Binary => "binary",
        }
    }
}

/// A sandbox's `network`: `false` (the default), `true`, or the TCP ports
/// (`{"connect": [443], "bind": []}`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum NetworkSpec {
    /// `false`: no network at all.
    #[default]
    Off,
    /// `true`: any TCP and UDP over IPv4 and IPv6.
    On,
    /// The TCP ports it may connect to and bind.
    Ports {
        /// `connect`.
        connect: Vec<u16>,
        /// `bind`.
        bind: Vec<u16>,
    },
}

impl SandboxSpec {
    /// The sandbox as a config file writes it.
    pub fn written(&self) -> serde_json::Value {
        let network = match &self.network {
            NetworkSpec::Off => serde_json::json!(false),
            NetworkSpec::On => serde_json::json!(true),
            NetworkSpec::Ports { connect, bind } => serde_json::json!({ "connect": connect, "bind": bind }),
        };
        serde_json::json!({ "preset": self.preset.as_str(), "read": self.read, "write": self.write, "network": network })
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
