//! One server entry as configured ([`ServerEntry`], its `mcpx` options and its
//! fingerprint), and the merged view a request sees ([`ResolvedConfig`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::clients::Client;
use super::command::ExeIdentity;
use super::error::ConfigError;
use super::expand::{self, ExpandedTransport, Secrets};
use super::oauth::{ExpandedOAuth, OAuthSpec};
use super::spec::{NetworkSpec, Pinning, SandboxSpec, Scope, Sharing, TransportSpec};

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
    /// `maxResultBytes`: a tool result larger than this, in bytes of its JSON, reaches an
    /// MCP client cut to fit, the rest readable as a resource; `None` (the default): off.
    pub max_result_bytes: Option<u64>,
    /// `maxResultBytesPerTool`: the same, per tool name, winning over `max_result_bytes`.
    pub max_result_bytes_per_tool: BTreeMap<String, u64>,
    /// `pinning` as the block writes it; `None` when it does not (the mode in effect is
    /// [`ServerEntry::pinning`]).
    pub pinning: Option<Pinning>,
    /// `sandbox`: the kernel confinement of the server's process; `None`: unconfined.
    pub sandbox: Option<SandboxSpec>,
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
            max_result_bytes: None,
            max_result_bytes_per_tool: BTreeMap::new(),
            pinning: None,
            sandbox: None,
        }
    }
}

impl ServerOptions {
    /// The most bytes of a result of `tool` an MCP client gets ([`max_result_bytes_per_tool`]
    /// first, then [`max_result_bytes`]); `None`: no limit.
    ///
    /// [`max_result_bytes_per_tool`]: Self::max_result_bytes_per_tool
    /// [`max_result_bytes`]: Self::max_result_bytes
    pub fn result_limit(&self, tool: &str) -> Option<u64> {
        self.max_result_bytes_per_tool.get(tool).copied().or(self.max_result_bytes)
    }

    /// Which key gives [`result_limit`](Self::result_limit) for `tool`, for messages:
    /// `maxResultBytesPerTool` or `maxResultBytes`.
    pub fn result_limit_key(&self, tool: &str) -> &'static str {
        if self.max_result_bytes_per_tool.contains_key(tool) { "maxResultBytesPerTool" } else { "maxResultBytes" }
    }

    /// Whether the tool `name` is offered: it must be in `include_tools` when that is set, and
    /// must not be in `exclude_tools`. Names match exactly.
    pub fn tool_allowed(&self, name: &str) -> bool {
        self.include_tools.as_ref().is_none_or(|include| include.iter().any(|t| t == name))
            && !self.exclude_tools.iter().any(|t| t == name)
    }
}

/// A `sandbox` with its paths expanded ([`ServerEntry::expand_sandbox`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpandedSandbox {
    /// `read`, absolute.
    pub read: Vec<PathBuf>,
    /// `write`, absolute.
    pub write: Vec<PathBuf>,
    /// The sandbox as written (its preset and network).
    pub spec: SandboxSpec,
}

/// One server as configured in one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerEntry {
    /// The key under `mcpServers` / `servers`.
    pub name: String,
    /// The file the entry came from.
    pub source: PathBuf,
    /// Whose format that file is in, for another client's file (an import, or a
    /// `.cursor/mcp.json` / `.vscode/mcp.json` project file); `None` for mcpx's own files.
    pub client: Option<Client>,
    /// How to reach it, as written (unexpanded).
    pub transport: TransportSpec,
    /// The `mcpx` block with defaults.
    pub options: ServerOptions,
    /// The `oauth` block of a remote entry, as written; `None` without one (mcpx then
    /// discovers and registers as MCP authorization says, should the server ask).
    pub oauth: Option<OAuthSpec>,
    /// VS Code's `inputs` of the file, id → description (empty for other files): told
    /// with an unset `${input:ID}`, so the user knows what to set.
    pub inputs: BTreeMap<String, String>,
    /// The SHA-256 of the entry as written ([`super::trust::entry_hash`]): what a trust
    /// record of a project file's entry holds, so a changed entry needs trust again.
    pub trust_hash: String,
    /// Whether the entry may run: false for an entry of a project file the user has not
    /// trusted as written (`mcpx trust`). Only the daemon's policy point (`mcpx_daemon::policy`) reads it; a file read
    /// without its role is marked by the resolver that knows it.
    pub trusted: bool,
    /// The pinning mode in effect for the server (`docs/configuration.md`, "Pinning"):
    /// its block's `pinning`, else the user config's top-level one, else `hold`; for an
    /// entry of a project file, never looser than the user config's, nor than its
    /// file's top-level `pinning` (the resolver sets it).
    pub pinning: Pinning,
    /// What the caller's profile says of this server ([`ResolvedConfig::with_profile`]);
    /// `None` for a caller on no profile. Only the daemon's policy point reads it.
    pub profile: Option<std::sync::Arc<crate::profile::ProfileFilter>>,
}

impl ServerEntry {
    /// Expands `${VAR}` references from `env` (the daemon's captured environment), and
    /// `${secret:NAME}` / `${input:ID}` from `secrets` (the secret store), in the
    /// command, args, env values, cwd, url and header values. A relative `cwd` is
    /// resolved against the directory of [`source`](Self::source).
    ///
    /// Errors: [`ConfigError::UnsetVariable`] or [`ConfigError::UnsetSecret`] naming the
    /// first unset one and this server; [`ConfigError::SecretStore`] when the store
    /// cannot be read. The result holds secrets; its `Debug` output shows templates only.
    pub fn expand(
        &self,
        env: &HashMap<String, String>,
        secrets: &dyn Secrets,
    ) -> Result<ExpandedTransport, ConfigError> {
        expand::expand_transport(&self.transport, env, secrets, &self.name, self.source.parent()).map_err(|e| match e {
            ConfigError::UnsetSecret { name, server, input: true, description: None } => {
                let description = self.inputs.get(&name).cloned();
                ConfigError::UnsetSecret { name, server, input: true, description }
            }
            e => e,
        })
    }

    /// Expands the `oauth` block's `${VAR}` and `${secret:NAME}` references, as
    /// [`ServerEntry::expand`] does the transport's; `None` without a block.
    ///
    /// Errors: as [`ServerEntry::expand`], naming the first unset variable or secret.
    pub fn expand_oauth(
        &self,
        env: &HashMap<String, String>,
        secrets: &dyn Secrets,
    ) -> Result<Option<ExpandedOAuth>, ConfigError> {
        let Some(spec) = &self.oauth else { return Ok(None) };
        let one = |t: &Option<String>| t.as_deref().map(|t| expand::expand(t, env, secrets, &self.name)).transpose();
        Ok(Some(ExpandedOAuth {
            client_id: one(&spec.client_id)?,
            client_secret: one(&spec.client_secret)?,
            private_key: one(&spec.private_key)?,
            spec: spec.clone(),
        }))
    }

    /// Expands the `sandbox`'s paths: `${VAR}` and `${secret:NAME}` as in the
    /// transport, a leading `~` to `$HOME`, and a relative path against the directory
    /// of [`source`](Self::source), as `cwd` is; `None` without a sandbox.
    ///
    /// Errors: as [`ServerEntry::expand`]; [`ConfigError::UnsetVariable`] for a `~`
    /// without `HOME`.
    pub fn expand_sandbox(
        &self,
        env: &HashMap<String, String>,
        secrets: &dyn Secrets,
    ) -> Result<Option<ExpandedSandbox>, ConfigError> {
        let Some(spec) = &self.options.sandbox else { return Ok(None) };
        let path = |written: &String| -> Result<PathBuf, ConfigError> {
            let text = expand::expand(written, env, secrets, &self.name)?;
            let home = || {
                env.get("HOME").map(PathBuf::from).ok_or_else(|| ConfigError::UnsetVariable {
                    variable: "HOME".to_owned(),
                    server: self.name.clone(),
                })
            };
            let path = match text.strip_prefix('~') {
                Some("") => home()?,
                Some(rest) if rest.starts_with('/') => home()?.join(&rest[1..]),
                _ => PathBuf::from(&text),
            };
            Ok(match self.source.parent() {
                Some(dir) if path.is_relative() => dir.join(path),
                _ => path,
            })
        };
        Ok(Some(ExpandedSandbox {
            read: spec.read.iter().map(path).collect::<Result<_, _>>()?,
            write: spec.write.iter().map(path).collect::<Result<_, _>>()?,
            spec: spec.clone(),
        }))
    }

    /// The templates of the entry's transport and `oauth` block, as written: `command`,
    /// `args`, `env` values and `cwd`, or `url` and header values, then the `oauth`
    /// block's (see [`crate::referenced_values`]).
    pub fn templates(&self) -> Vec<&str> {
        let mut all: Vec<&str> = match &self.transport {
            TransportSpec::Stdio { command, args, env, cwd } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .chain(env.values().map(String::as_str))
                .chain(cwd.as_deref())
                .collect(),
            TransportSpec::Remote { url, headers, .. } => {
                std::iter::once(url.as_str()).chain(headers.values().map(String::as_str)).collect()
            }
        };
        if let Some(oauth) = &self.oauth {
            all.extend(oauth.templates());
        }
        all
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
        // Only when set: an unconfined entry keeps the fingerprint it always had.
        if let Some(sandbox) = &self.options.sandbox {
            h.field("sandbox");
            h.field(sandbox.preset.as_str());
            h.list(sandbox.read.iter().map(String::as_str));
            h.list(sandbox.write.iter().map(String::as_str));
            match &sandbox.network {
                NetworkSpec::Off => h.field("off"),
                NetworkSpec::On => h.field("on"),
                NetworkSpec::Ports { connect, bind } => {
                    h.field("ports");
                    h.list(connect.iter().map(u16::to_string).collect::<Vec<_>>().iter().map(String::as_str));
                    h.list(bind.iter().map(u16::to_string).collect::<Vec<_>>().iter().map(String::as_str));
                }
            }
            // Relative paths name another directory in each project.
            if sandbox.read.iter().chain(&sandbox.write).any(|p| Path::new(p).is_relative() && !p.starts_with('~')) {
                h.opt(self.source.parent().map(|d| d.display().to_string()).as_deref());
            }
        }
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
    /// The entries that could not be parsed, by name: each fails alone, and like a good
    /// entry it hides a farther entry of the same name. No name is in both maps.
    pub errors: BTreeMap<String, EntryError>,
    /// The files among [`files`](Self::files) that do not parse ([`ConfigError::Syntax`]),
    /// nearest first. Their servers come from the daemon's last good read of each, if any.
    pub file_errors: Vec<EntryError>,
    /// Warnings about the servers by name, one line each naming the file: a name defined
    /// twice in one file, or defined differently in a farther file that the nearer hides.
    pub warnings: BTreeMap<String, Vec<String>>,
    /// Warnings about whole files whose servers still work: `imports` in a project file
    /// (ignored), or an `imports` naming no known client.
    pub file_warnings: Vec<FileWarning>,
    /// The profiles of the user config (or of the explicit file), by name
    /// ([`ResolvedConfig::with_profile`]).
    pub profiles: BTreeMap<String, crate::profile::Profile>,
}

/// A problem with a file that leaves its servers working.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileWarning {
    /// The file.
    pub file: PathBuf,
    /// What is wrong and what to do, one line starting with the file.
    pub message: String,
}

/// Why one server entry could not be parsed ([`ConfigError::UnknownKey`],
/// [`ConfigError::InvalidValue`], [`ConfigError::MissingCommandOrUrl`] or
/// [`ConfigError::BothCommandAndUrl`]; the error names its file and server), or why a
/// whole file could not ([`ConfigError::Syntax`]). Two are equal when their messages are.
#[derive(Clone, Debug)]
pub struct EntryError(pub Arc<ConfigError>);

impl PartialEq for EntryError {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for EntryError {}

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

impl ResolvedConfig {
    /// This configuration as a caller on profile `name` sees it: every entry marked with
    /// what the profile says of it ([`ProfileFilter`](crate::ProfileFilter)), so the policy point offers only
    /// the profile's servers and tools. Warnings name the servers the profile holds that
    /// are not configured.
    ///
    /// Errors: no profile of that name; the message lists the profiles there are, or
    /// says where to define one.
    pub fn with_profile(&self, name: &str) -> Result<ResolvedConfig, String> {
        let Some(profile) = self.profiles.get(name) else {
            // A profile of that name that is malformed, or in a project file, says why.
            let about = format!("`profiles.{name}`");
            if let Some(w) = self.file_warnings.iter().find(|w| w.message.contains(&about)) {
                return Err(format!("no profile `{name}`: {}", w.message));
            }
            if let Some(w) = self.file_warnings.iter().find(|w| w.message.contains("`profiles` is read only")) {
                return Err(format!("no profile `{name}` in the mcpx user config ({})", w.message));
            }
            let known: Vec<&str> = self.profiles.keys().map(String::as_str).collect();
            return Err(match known.as_slice() {
                [] => format!(
                    "no profile `{name}`: no profile is defined; add one under \"profiles\" in the mcpx user config"
                ),
                _ => format!("no profile `{name}`: the profiles are {} (see `mcpx config`)", known.join(", ")),
            });
        };
        let mut narrowed = self.clone();
        for entry in narrowed.servers.values_mut() {
            entry.profile = Some(Arc::new(crate::profile::ProfileFilter {
                name: name.to_owned(),
                source: profile.source.clone(),
                tools: profile.servers.get(&entry.name).cloned(),
            }));
        }
        for server in profile.servers.keys().filter(|s| !self.servers.contains_key(*s)) {
            narrowed.warnings.entry(server.clone()).or_default().push(format!(
                "{}: profile `{name}` names server `{server}`, which is not configured here",
                profile.source.display()
            ));
        }
        Ok(narrowed)
    }
}
