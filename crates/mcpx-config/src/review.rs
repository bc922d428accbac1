//! What `mcpx trust` shows of the project files found upward from a directory: each
//! entry's file, name and hash, what it would run, and the names of the variables it
//! uses (`docs/configuration.md`, "Trust").

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::clients::{ConfigEnv, FileKind};
use super::error::ConfigError;
use super::expand;
use super::parse;
use super::resolve::{ResolveRequest, Role};
use super::spec::TransportSpec;

/// One entry of a project file, as `mcpx trust` shows it: what it would run, and the
/// names (never the values) of the variables and secrets it uses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProjectEntry {
    /// The project file, canonical.
    pub file: PathBuf,
    /// The server's name.
    pub server: String,
    /// The entry's [`entry_hash`](super::entry_hash).
    pub hash: String,
    /// A stdio server's command, as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// A stdio server's arguments, as written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// A stdio server's `env`, names and values as written (unexpanded): a `PATH` or an
    /// `LD_PRELOAD` here decides what runs as much as the command does.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// A stdio server's `cwd` as written, and the directory it names (a relative one is
    /// relative to the file's directory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<(String, PathBuf)>,
    /// A remote server's URL, as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A remote server's headers, names and values as written (unexpanded).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The variables and secrets the entry uses, as written in it: `HOME`,
    /// `secret:TOKEN`, `input:key` (`${env:X}` is listed as `X`); sorted, no repeats.
    pub variables: Vec<String>,
    /// Why the entry is refused whatever the user says (it does not parse: a
    /// `${secret:}` naming a stored login, say); it runs nothing and cannot be trusted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Its `sandbox` as the file writes it (`docs/configuration.md`, "Sandbox"); `None`:
    /// it would run with all of the user's rights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
}

/// The entries of every project file found upward from `dir` (the files a caller in
/// `dir` reads with [`Role::Project`]), nearest file first, in name order within a
/// file. An entry that does not parse is listed as refused ([`ProjectEntry::refused`]);
/// one that runs `mcpx serve` is left out: neither can run anything.
///
/// Errors: [`ConfigError::Io`] when a file cannot be read, [`ConfigError::Syntax`] when
/// one does not parse (it must be fixed before it can be reviewed).
pub fn project_entries(dir: &Path, env: &ConfigEnv) -> Result<Vec<ProjectEntry>, ConfigError> {
    let mut found = Vec::new();
    for file in project_files(dir, env) {
        let io_err = |error: std::io::Error| ConfigError::Io { file: file.clone(), error };
        let text = std::fs::read_to_string(&file).map_err(io_err)?;
        let canonical = super::trust::trust_key(&file).map_err(io_err)?;
        let parsed = parse::parse_file(&file, &FileKind::of(&file, env), &text)?;
        for (server, error) in &parsed.main.errors {
            found.push(ProjectEntry {
                file: canonical.clone(),
                server: server.clone(),
                refused: Some(error.0.to_string()),
                ..ProjectEntry::default()
            });
        }
        for entry in parsed.main.servers.into_values() {
            let mut variables = BTreeSet::new();
            let mut shown = ProjectEntry {
                file: canonical.clone(),
                server: entry.name.clone(),
                hash: entry.trust_hash.clone(),
                ..ProjectEntry::default()
            };
            shown.sandbox = entry.options.sandbox.as_ref().map(|s| s.written());
            match &entry.transport {
                TransportSpec::Stdio { command, args, env, cwd } => {
                    let templates = std::iter::once(command).chain(args).chain(env.values()).chain(cwd);
                    templates.for_each(|t| variables.extend(expand::references(t)));
                    shown.command = Some(command.clone());
                    shown.args = args.clone();
                    shown.env = env.clone();
                    let dir = file.parent().unwrap_or(Path::new("/"));
                    shown.cwd = cwd.as_ref().map(|c| (c.clone(), dir.join(c)));
                }
                TransportSpec::Remote { url, headers, .. } => {
                    std::iter::once(url).chain(headers.values()).for_each(|t| variables.extend(expand::references(t)));
                    shown.url = Some(url.clone());
                    shown.headers = headers.clone();
                }
            }
            // The `oauth` block's secrets go to the server's token endpoint: the user
            // sees which ones, as for `env` and `headers`.
            if let Some(oauth) = &entry.oauth {
                let templates = [&oauth.client_id, &oauth.client_secret, &oauth.private_key];
                templates.into_iter().flatten().for_each(|t| variables.extend(expand::references(t)));
            }
            shown.variables = variables.into_iter().collect();
            found.push(shown);
        }
    }
    Ok(found)
}

/// The project files that exist upward from `dir`, nearest first, as found (not
/// canonical).
pub fn project_files(dir: &Path, env: &ConfigEnv) -> Vec<PathBuf> {
    let req = ResolveRequest { cwd: Some(dir.to_owned()), explicit: None };
    let paths = req.search_paths(env).into_iter().filter(|(_, role)| *role == Role::Project);
    paths.map(|(path, _)| path).filter(|path| path.is_file()).collect()
}

impl ProjectEntry {
    /// What `mcpx trust` shows of the entry (and the dashboard, the same): a head line
    /// (`name: runs COMMAND ARGS...` or `name: connects to URL`), then one line each for
    /// its directory, environment, headers, the variables it uses, and its confinement.
    /// Every word from the file is quoted as a shell would need it ([`shell_quoted`]).
    pub fn described(&self) -> (String, Vec<String>) {
        let runs = match (&self.command, &self.url) {
            (Some(command), _) => {
                let words: Vec<String> = std::iter::once(command).chain(&self.args).map(|w| shell_quoted(w)).collect();
                format!("runs {}", words.join(" "))
            }
            (None, Some(url)) => format!("connects to {}", shell_quoted(url)),
            (None, None) => String::new(),
        };
        let mut lines = Vec::new();
        if let Some((written, dir)) = &self.cwd {
            lines.push(format!("in {} ({})", shell_quoted(written), shell_quoted(&dir.display().to_string())));
        }
        for (name, value) in &self.env {
            lines.push(format!("with {}={}", shell_quoted(name), shell_quoted(value)));
        }
        for (name, value) in &self.headers {
            lines.push(format!("header {}: {}", shell_quoted(name), shell_quoted(value)));
        }
        if !self.variables.is_empty() {
            lines.push(format!("uses {}", self.variables.join(", ")));
        }
        match &self.sandbox {
            Some(sandbox) => lines.push(format!("confined by {}", mcpx_platform::sanitize::line(&sandbox.to_string()))),
            None if self.command.is_some() => lines.push("unconfined: with all of the user's rights".to_owned()),
            None => {}
        }
        (format!("{}: {runs}", shell_quoted(&self.server)), lines)
    }
}

/// `word` as a shell would need it written, so what is shown reads as one command: as
/// it is when plain, else single-quoted; with Rust's escapes when it holds a control
/// character (a newline or an escape sequence would draw lines the file did not write).
pub fn shell_quoted(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+%".contains(c));
    if plain {
        word.to_owned()
    } else if word.chars().any(char::is_control) {
        format!("{word:?}")
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
