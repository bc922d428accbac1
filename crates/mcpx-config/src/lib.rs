//! Configuration: which MCP servers a request sees, and how each one is run.
//!
//! # Files
//!
//! Config files use the `mcpServers` JSON shape of Claude Desktop, Cursor and Claude Code (VS
//! Code's `servers` key is accepted too; when both are present they are merged, `mcpServers`
//! winning). Comments (`//`, `/* */`) and trailing commas are allowed. Every other key is
//! ignored, since other programs share these files. Other clients' files (Codex's TOML
//! among them) are read in their own shape, rewritten into this one (see `dialect.rs`):
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
//! An explicit file (`--config` / `MCPX_CONFIG`) is the first file. Otherwise, from the
//! caller's working directory up to `/`, each directory's [`PROJECT_FILES`] (`.mcpx.json`,
//! `.mcp.json`, `.cursor/mcp.json`, `.vscode/mcp.json`) are read, then the user file
//! (`$XDG_CONFIG_HOME/mcpx/config.json`, else `~/.config/mcpx/config.json`). The clients
//! that file (or the explicit one) names in `"imports"` come last, in the order listed; see
//! [`Client`]. Servers are merged by name, the first file read winning. A nearer entry
//! replaces a farther one entirely (also when it is `disabled`, which is how a project turns
//! off a user-level server). See [`ConfigCache`].
//!
//! # Trust
//!
//! The entries of project files (found upward, [`Role::Project`]) run only once the user
//! has trusted each as written (`mcpx trust`, [`TrustStore`]); the resolver marks them
//! ([`ServerEntry::trusted`]) and the daemon's policy point (`mcpx_daemon::policy`) refuses the others.
//!
//! # Variables
//!
//! `${VAR}` in `command`, `args`, `env` values, `cwd`, `url` and header values is expanded from
//! the daemon's captured environment by [`ServerEntry::expand`]; `${VAR:-default}` and VS Code's
//! `${env:VAR}` work too, and `$${` is a literal `${` (so `$${VAR}` stays `${VAR}`).

mod clients;
mod command;
mod dialect;
mod entry;
mod error;
mod expand;
mod jsonc;
mod oauth;
mod parse;
mod parse_entry;
mod profile;
mod resolve;
mod review;
mod settings;
mod spec;
mod trust;
pub mod units;
mod written;

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod import_tests;
#[cfg(test)]
mod tests;

pub use clients::{Client, ConfigEnv, Layout};
pub use command::{CommandNotFound, DEFAULT_PATH, ExeIdentity, SearchedIn, exe_identity, resolve_command};
pub use dialect::runs_mcpx_serve;
pub use entry::{EntryError, ExpandedSandbox, FileWarning, ResolvedConfig, ServerEntry, ServerOptions};
pub use error::ConfigError;
pub use expand::{ExpandedRemote, ExpandedStdio, ExpandedTransport, Secrets, StoreIn, referenced_values};
pub use oauth::{ExpandedOAuth, Grant, OAUTH_KEYS, OAuthSpec, TokenAuthMethod, is_secure};
pub use parse::{NamedEntry, mcpx_entries, read_client_file, yaml_value};
pub use profile::{Profile, ProfileFilter, Tools};
pub use resolve::{
    ConfigCache, ExplicitFiles, FileContents, Inputs, MCPX_PROJECT_FILE, PROJECT_FILE, PROJECT_FILES, ResolveRequest,
    Role,
};
pub use review::{ProjectEntry, project_entries, project_files, shell_quoted};
pub use settings::{ActivitySettings, OtelSettings, settings_file};
pub use spec::{MCPX_KEYS, NetworkSpec, Pinning, Preset, RemoteKind, SandboxSpec, Scope, Sharing, TransportSpec};
pub use trust::{
    TRUST_ALL_KEY, TRUST_FILE, TRUST_LOCK, TrustRecord, TrustStore, canonical_sha256, change_records, entry_hash,
    project_dir, trust_key,
};
