//! What `mcpx connect` and `mcpx disconnect` share: where each client's file is
//! ([`Ctx`]), reading and backing up files, and saying each client's outcome.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mcpx_api::{ApiError, ErrorKind};
use mcpx_daemon::config::{Client, ConfigEnv};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::import::write_file;
use crate::output::{say, say_json, warn};

/// What every client's edit shares: where files are, and what runs mcpx.
pub(super) struct Ctx {
    pub(super) env: ConfigEnv,
    /// The directory of `--project`, made absolute.
    pub(super) project: Option<PathBuf>,
    /// mcpx's own file that `--move` writes: `--config`, DIR/.mcpx.json with `--project`,
    /// else the user config.
    pub(super) mcpx_file: Option<PathBuf>,
    /// mcpx's state directory, where what `connect` did is recorded; `None` for a
    /// listing, which records nothing.
    pub(super) state: Option<PathBuf>,
    /// This process's turn to edit config files (`import::take_turn`), held while it
    /// lives; `None` for a listing.
    _turn: Option<nix::fcntl::Flock<std::fs::File>>,
}

impl Ctx {
    /// Where files are for `vars` (the CLI's environment), `--project` and `--config`;
    /// with `edit`, mcpx's directories opened (made private when new) and this process's
    /// turn taken, so two runs at once do not lose each other's changes.
    ///
    /// Errors: `--project` is not a directory (`usage`); `--config` names another
    /// client's file (`usage`); mcpx's directories cannot be used (`daemon`).
    pub(super) fn new(
        vars: &HashMap<String, String>,
        project: Option<&Path>,
        config: Option<PathBuf>,
        edit: bool,
    ) -> Result<Ctx, ApiError> {
        let env = ConfigEnv::from_vars(vars);
        let project = match project {
            None => None,
            Some(dir) => {
                let usage = |why: String| {
                    ApiError::new(
                        ErrorKind::Usage,
                        format!("--project {}: {why}; name an existing directory", dir.display()),
                    )
                };
                let dir = std::fs::canonicalize(dir).map_err(|e| usage(e.to_string()))?;
                if !dir.is_dir() {
                    return Err(usage("not a directory".into()));
                }
                Some(dir)
            }
        };
        if let Some(owner) = config.as_deref().and_then(|c| Client::of_file(c, &env)) {
            return Err(ApiError::new(
                ErrorKind::Usage,
                format!(
                    "--config {} is {}'s file, not an mcpx config: --move writes mcpx's own config (leave out --config, or name a .json file of mcpx's)",
                    config.as_deref().map(Path::display).map(|d| d.to_string()).unwrap_or_default(),
                    owner.label()
                ),
            ));
        }
        let mcpx_file = config.or_else(|| match &project {
            Some(dir) => Some(dir.join(".mcpx.json")),
            None => env.user_file(),
        });
        let (state, turn) = match edit {
            true => {
                let (dirs, turn) = crate::import::take_turn(vars)?;
                (Some(dirs.paths.state), Some(turn))
            }
            false => (None, None),
        };
        Ok(Ctx { env, project, mcpx_file, state, _turn: turn })
    }

    /// The file of `client` to edit. Errors: HOME is unset, or the client has no project
    /// file.
    pub(super) fn file(&self, client: Client) -> Result<PathBuf, String> {
        match &self.project {
            Some(dir) => client.project_file(dir).ok_or_else(|| {
                format!("{} has no project file; connect it without --project (its user-level file)", client.label())
            }),
            None => client.user_file(&self.env).ok_or_else(|| "HOME is not set, so its file cannot be found".into()),
        }
    }
}

/// Servers `--move` put into one of mcpx's files.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Moved {
    /// mcpx's file they went into.
    pub(super) file: PathBuf,
    /// Their names.
    pub(super) names: Vec<String>,
    /// Each one's digest as written ([`digest`]), so `--restore` notices one edited since.
    #[serde(default)]
    pub(super) digests: std::collections::BTreeMap<String, String>,
}

/// The SHA-256 (hex) of a value's JSON text (object keys in name order).
pub(super) fn digest(value: &Value) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(value.to_string().as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// `path` read; `None` when there is no file. Errors: it cannot be read.
pub(super) fn read(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Writes a backup of `file` (holding `text`) beside it, as `<file>.mcpx-backup-<secs>`
/// (`-N` added when that exists); its path. Errors: it cannot be written.
pub(super) fn backup(file: &Path, text: &str) -> Result<PathBuf, String> {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let name = |n: u32| {
        let mut name = file.file_name().unwrap_or_default().to_owned();
        name.push(format!(".mcpx-backup-{secs}"));
        if n > 0 {
            name.push(format!("-{n}"));
        }
        file.with_file_name(name)
    };
    let path = (0..).map(name).find(|p| !p.exists()).unwrap_or_else(|| name(0));
    write_file(&path, text).map_err(|(what, e)| format!("cannot {what} the backup {}: {e}", path.display()))?;
    Ok(path)
}

/// The clients `names` name, each once. Errors: an unknown name (`usage`), listing the
/// known ones.
fn clients(names: &[String]) -> Result<Vec<Client>, ApiError> {
    let mut clients: Vec<Client> = Vec::new();
    for name in names {
        let client = name.parse::<Client>().map_err(|e| ApiError::new(ErrorKind::Usage, e))?;
        if !clients.contains(&client) {
            clients.push(client);
        }
    }
    Ok(clients)
}

/// Does `one` for each client `names` names, saying each outcome (`{"client", "said"}`
/// or `{"client", "error"}`) as it comes, or all of them as one JSON array; exit 0, or 2
/// when any failed. Errors: an unknown name (`usage`), before anything is done.
pub(super) fn each(names: &[String], json: bool, one: impl Fn(Client) -> Value) -> Result<i32, ApiError> {
    let mut done = Vec::new();
    let mut failed = false;
    for client in clients(names)? {
        let outcome = one(client);
        failed |= outcome.get("error").is_some();
        if !json {
            match (&outcome["error"], &outcome["said"]) {
                (Value::String(e), _) => warn(&format!("{}: {e}", client.name())),
                (_, Value::String(said)) => say(&format!("{}: {said}", client.name())),
                _ => {}
            }
        }
        done.push(outcome);
    }
    if json {
        say_json(&Value::Array(done).to_string());
    }
    Ok(if failed { 2 } else { 0 })
}
