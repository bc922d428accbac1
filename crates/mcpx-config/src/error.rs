//! Everything that can go wrong loading configuration, as one error type whose messages
//! name the file and key and say what to fix.

use std::io;
use std::path::{Path, PathBuf};

use super::spec::MCPX_KEYS;

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
    #[error("{}:{line}:{column}: {message} ({})", file.display(), syntax_hint(file))]
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
    /// A daemon setting at the top level of the user config with a bad value, or an
    /// unknown key in its block.
    #[error("{}: invalid `{key}`: {message}", file.display())]
    InvalidSetting {
        /// The file.
        file: PathBuf,
        /// The key, dotted: `activity.maxBytes`.
        key: String,
        /// What is wrong and what is expected.
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
    /// A `${secret:NAME}` or VS Code `${input:ID}` that the secret store does not hold.
    #[error(
        "server `{server}`: {} `{name}`{} is not set: run `mcpx secret set {name}`",
        if *input { "VS Code input" } else { "secret" },
        description.as_ref().map(|d| format!(" ({d})")).unwrap_or_default()
    )]
    UnsetSecret {
        /// The secret's name (the input's id).
        name: String,
        /// The server name.
        server: String,
        /// Written as `${input:ID}`.
        input: bool,
        /// The input's `description` in VS Code's `inputs`, when the file has one.
        description: Option<String>,
    },
    /// The secret store could not be read while expanding a server's secrets.
    #[error("server `{server}`: {message}")]
    SecretStore {
        /// The server name.
        server: String,
        /// The store's error: its file and what to do, never a value.
        message: String,
    },
}

impl ConfigError {
    /// The config file the error is about; `None` for the errors of expansion
    /// ([`ConfigError::UnsetVariable`], [`ConfigError::UnsetSecret`],
    /// [`ConfigError::SecretStore`]).
    pub fn file(&self) -> Option<&Path> {
        match self {
            ConfigError::Io { file, .. }
            | ConfigError::Syntax { file, .. }
            | ConfigError::UnknownKey { file, .. }
            | ConfigError::InvalidValue { file, .. }
            | ConfigError::InvalidSetting { file, .. }
            | ConfigError::MissingCommandOrUrl { file, .. }
            | ConfigError::BothCommandAndUrl { file, .. } => Some(file),
            ConfigError::UnsetVariable { .. } | ConfigError::UnsetSecret { .. } | ConfigError::SecretStore { .. } => {
                None
            }
        }
    }

    /// The server the error is about, when it concerns one entry.
    pub fn server(&self) -> Option<&str> {
        match self {
            ConfigError::UnknownKey { server, .. }
            | ConfigError::InvalidValue { server, .. }
            | ConfigError::MissingCommandOrUrl { server, .. }
            | ConfigError::BothCommandAndUrl { server, .. }
            | ConfigError::UnsetVariable { server, .. }
            | ConfigError::UnsetSecret { server, .. }
            | ConfigError::SecretStore { server, .. } => Some(server),
            ConfigError::Io { .. } | ConfigError::Syntax { .. } | ConfigError::InvalidSetting { .. } => None,
        }
    }
}

/// What to do about a syntax error, for the file's language.
fn syntax_hint(file: &Path) -> &'static str {
    if file.extension().is_some_and(|e| e == "toml") {
        "fix the TOML"
    } else if file.extension().is_some_and(|e| e == "yaml" || e == "yml") {
        "fix the YAML"
    } else {
        "fix the JSON; comments and trailing commas are allowed"
    }
}

fn io_hint(error: &io::Error) -> &'static str {
    match error.kind() {
        io::ErrorKind::NotFound => " (check the path given with --config or MCPX_CONFIG)",
        io::ErrorKind::PermissionDenied => " (fix the file's permissions or remove it)",
        io::ErrorKind::InvalidData => " (save the file as UTF-8)",
        io::ErrorKind::IsADirectory => " (remove or rename the directory)",
        io::ErrorKind::InvalidInput => " (put a config file there, or remove what is there)",
        _ => " (fix or remove the file)",
    }
}
