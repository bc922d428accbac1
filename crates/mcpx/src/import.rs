//! `mcpx import`: the other MCP clients' user-level config files, what they hold, and
//! adding them to the mcpx user config, as `imports` (read live by the daemon) or as a copy
//! of their entries under `mcpServers`. Also what `mcpx ls` suggests when nothing is
//! configured.
//!
//! Everything here runs in the CLI, from its own environment and working directory; the
//! daemon is not involved (it reads the edited file when it next resolves a request).

pub(crate) mod edit;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mcpx_api::client::{self, Method};
use mcpx_api::paths::Dirs;
use mcpx_api::{ApiError, ErrorKind, Status};
use mcpx_daemon::config::{Client, ConfigEnv, read_client_file};
use mcpx_platform::fs::FileUse;
use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;
use serde_json::{Map, Value};

use self::edit::{CopyError, Edited, Refused};
use crate::output;
use mcpx_platform::sanitize;

/// What `mcpx import` is asked to do.
#[derive(Debug)]
pub struct Import {
    /// The clients to add (`mcpx import NAME...`); empty: show what there is.
    pub names: Vec<String>,
    /// Copy the clients' entries into `mcpServers` instead of adding them to `imports`.
    pub copy: bool,
    /// With `copy`: replace entries of the same name instead of refusing.
    pub force: bool,
    /// The file to edit (`--config` / `MCPX_CONFIG`, made absolute); else the user config.
    pub config: Option<PathBuf>,
    /// The CLI's working directory (for Claude Code's per-project servers).
    pub cwd: Option<PathBuf>,
}

/// Runs `mcpx import` and returns its exit status: 0, or an error of kind `usage` (an
/// unknown client name, exit 2) or `config` (a file that cannot be read, edited or
/// written; a name clash under `--copy`; exit 2).
pub async fn run(import: Import, json: bool) -> Result<i32, ApiError> {
    let vars: HashMap<String, String> = std::env::vars().collect();
    let place = Place::new(&vars, import.config.clone(), import.cwd.clone())?;
    if import.names.is_empty() {
        let found = place.survey();
        show(&place, &found, json);
        return Ok(0);
    }
    let mut clients: Vec<Client> = Vec::new();
    for name in &import.names {
        let client = name.parse::<Client>().map_err(|e| ApiError::new(ErrorKind::Usage, e))?;
        if !clients.contains(&client) {
            clients.push(client);
        }
    }
    let (dirs, _turn) = take_turn(&vars)?;
    if let Some(owner) = Client::of_file(&place.config, &place.env) {
        return Err(ApiError::new(
            ErrorKind::Usage,
            format!(
                "{} is {}'s file, not an mcpx config: `mcpx import` edits mcpx's own config (leave out --config, or name a .json file of mcpx's)",
                place.show(),
                owner.label()
            ),
        ));
    }
    let explicit = import.config.is_some();
    let code = if import.copy { copy(&place, &clients, import.force, json)? } else { add(&place, &clients, json)? };
    drop(_turn);
    for warning in daemon_reads_elsewhere(&dirs.paths, &place, explicit, &clients).await {
        output::warn(&format!("warning: {warning}"));
    }
    Ok(code)
}

/// Where a running daemon, whose environment may differ from this shell's, would read
/// other files than the ones `mcpx import` just used: its user config (unless the caller
/// names one with `--config`) and the imported clients' files. One line each, saying
/// what to do; none when no daemon runs or it cannot be asked.
async fn daemon_reads_elsewhere(dirs: &Dirs, place: &Place, explicit: bool, clients: &[Client]) -> Vec<String> {
    let status = match client::Client::new(dirs.socket()).send(Method::GET, "/v1/status", None).await {
        Ok((200, body)) => serde_json::from_slice::<Status>(&body).ok(),
        _ => None,
    };
    let Some(daemon) = status.map(|s| s.daemon) else {
        return Vec::new();
    };
    let restart = "its environment differs from this shell's: `mcpx stop`, and the next mcpx command starts a daemon with this shell's";
    let mut warnings = Vec::new();
    if let Some(theirs) = daemon.user_config.filter(|theirs| !explicit && *theirs != place.config) {
        warnings.push(format!(
            "the running daemon reads its user config at {}, not {} ({restart})",
            place.tilde(Some(&theirs)),
            place.show()
        ));
    }
    for client in clients {
        let ours = client.user_file(&place.env);
        let theirs = daemon.client_files.get(client.name());
        if let (Some(ours), Some(theirs)) = (ours, theirs) {
            if ours != *theirs {
                warnings.push(format!(
                    "the running daemon reads {}'s file at {}, not {} ({restart})",
                    client.label(),
                    place.tilde(Some(theirs)),
                    place.tilde(Some(&ours))
                ));
            }
        }
    }
    warnings
}

/// mcpx's directories, opened (made private when new, checked when not), and the turn of
/// this process to edit config files: two `mcpx import` or `mcpx connect` runs at once
/// would each read a file before the other wrote it, and one's change would be lost, so
/// they take turns, holding a lock in the runtime directory until the guard drops.
///
/// Errors: a directory cannot be used, or the lock cannot be taken (`daemon`).
pub(crate) fn take_turn(
    vars: &HashMap<String, String>,
) -> Result<(mcpx_api::paths::OpenDirs, Flock<std::fs::File>), ApiError> {
    let dirs =
        Dirs::from_env(vars).and_then(|d| d.open()).map_err(|e| ApiError::new(ErrorKind::Daemon, e.to_string()))?;
    let lock_file = dirs
        .runtime
        .open_file(IMPORT_LOCK, FileUse::Lock)
        .map_err(|e| ApiError::new(ErrorKind::Daemon, format!("cannot open the import lock: {e}")))?;
    let turn = Flock::lock(lock_file, FlockArg::LockExclusive)
        .map_err(|(_, e)| ApiError::new(ErrorKind::Daemon, format!("cannot take the import lock: {e}")))?;
    Ok((dirs, turn))
}

/// The lock file in the runtime directory that makes concurrent `mcpx import` runs take turns.
const IMPORT_LOCK: &str = "import.lock";

/// What `mcpx ls` says when no server is configured: the servers `mcpx import` would find
/// (in the files of clients not yet imported), and the command that brings them in; `None`
/// when there are none.
pub fn ls_hint(config: Option<PathBuf>, cwd: Option<PathBuf>) -> Option<String> {
    let vars: HashMap<String, String> = std::env::vars().collect();
    let place = Place::new(&vars, config, cwd).ok()?;
    let found: Vec<Found> = place.survey().into_iter().filter(Found::to_import).collect();
    if found.is_empty() {
        return None;
    }
    let places: Vec<String> = found
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let n = f.servers.unwrap_or_default();
            let what = if i == 0 { format!("{n} server{}", plural(n)) } else { n.to_string() };
            format!("{what} in {}'s {}", f.label, place.tilde(f.file.as_deref()))
        })
        .collect();
    let names: Vec<&str> = found.iter().map(|f| f.client).collect();
    Some(format!(
        "no servers configured; found {}: run `mcpx import {}` to use them",
        join_and(&places),
        names.join(" ")
    ))
}

/// One client's user-level file, as `mcpx import` shows it: with `--json`, one element of
/// `clients`.
#[derive(Debug, Serialize)]
struct Found {
    /// The client, as `imports` and `mcpx import NAME` name it.
    client: &'static str,
    /// The product's name, for messages.
    #[serde(skip)]
    label: &'static str,
    /// Its user-level file on this system; null when HOME is not set.
    file: Option<PathBuf>,
    /// Whether that file exists.
    exists: bool,
    /// How many servers it gives a caller in this directory; null when the file does not
    /// exist or cannot be read.
    servers: Option<usize>,
    /// Their names, sorted.
    names: Vec<String>,
    /// Why the file cannot be read (naming file, line and column).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Whether the mcpx config already has it in `imports`.
    imported: bool,
}

impl Found {
    /// Whether it holds servers and is not imported yet: what `mcpx import` suggests.
    fn to_import(&self) -> bool {
        self.servers.is_some_and(|n| n > 0) && !self.imported
    }
}

/// Where `mcpx import` looks and what it edits.
struct Place {
    env: ConfigEnv,
    /// The mcpx config file that `imports` lives in, and that is edited.
    config: PathBuf,
    /// The CLI's working directory.
    cwd: Option<PathBuf>,
}

impl Place {
    /// Errors: no `--config` and no HOME (nor `XDG_CONFIG_HOME`) to find the user config.
    fn new(vars: &HashMap<String, String>, config: Option<PathBuf>, cwd: Option<PathBuf>) -> Result<Place, ApiError> {
        let env = ConfigEnv::from_vars(vars);
        let config = config.or_else(|| env.user_file()).ok_or_else(|| {
            ApiError::new(ErrorKind::Usage, "HOME is not set, so there is no user config: name one with --config FILE")
        })?;
        Ok(Place { env, config, cwd })
    }

    /// Every client's user-level file, in `Client::ALL`'s order.
    fn survey(&self) -> Vec<Found> {
        let imported = self.imports().unwrap_or_default();
        Client::ALL
            .iter()
            .map(|&client| {
                let file = client.user_file(&self.env);
                let exists = file.as_deref().is_some_and(Path::is_file);
                let (mut servers, mut names, mut error) = (None, Vec::new(), None);
                if let (true, Some(path)) = (exists, &file) {
                    match read_client_file(client, path, self.cwd.as_deref()) {
                        Ok(entries) => {
                            servers = Some(entries.len());
                            names = entries.into_iter().map(|(name, _)| name).collect();
                        }
                        Err(e) => error = Some(e.to_string()),
                    }
                }
                let imported = imported.iter().any(|n| n == client.name());
                Found { client: client.name(), label: client.label(), file, exists, servers, names, error, imported }
            })
            .collect()
    }

    /// The mcpx config's text; `None` when it does not exist. Errors: it cannot be read.
    fn read_config(&self) -> Result<Option<String>, ApiError> {
        match std::fs::read_to_string(&self.config) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ApiError::new(
                ErrorKind::Config,
                format!("cannot read {}: {e}; fix its permissions, or name another file with --config", self.show()),
            )),
        }
    }

    /// The clients in the mcpx config's `imports`. Errors: it cannot be read or parsed.
    fn imports(&self) -> Result<Vec<String>, String> {
        let text = self.read_config().map_err(|e| e.message)?;
        edit::imports_of(text.as_deref()).map_err(|reason| format!("{}: {reason}", self.show()))
    }

    /// The config file's path, `~` for HOME.
    fn show(&self) -> String {
        self.tilde(Some(&self.config))
    }

    /// Whether the config file (the one a link at its path names) can be read by the
    /// group or others.
    fn open_to_others(&self) -> bool {
        std::fs::metadata(&self.config)
            .is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o044 != 0)
    }

    /// `path` with HOME written `~`; `-` for none.
    fn tilde(&self, path: Option<&Path>) -> String {
        path.map_or_else(|| "-".to_owned(), |p| output::tilde(p, self.env.home.as_deref()))
    }

    /// Writes the edited text of the config file. A symbolic link at its path (a dotfiles
    /// manager's, say) stays, and the file it points to is written; an existing file keeps
    /// its mode, a new one is private (0600: entries may hold tokens), and missing parent
    /// directories are made.
    fn write(&self, text: &str) -> Result<(), ApiError> {
        write_file(&self.config, text).map_err(|(what, e)| {
            ApiError::new(
                ErrorKind::Config,
                format!("cannot {what} {}: {e}; it is unchanged (fix its directory, or use --config)", self.show()),
            )
        })
    }

    /// The error for an edit that cannot be made safely: with `--json`, the lines to paste
    /// are in its message; else they are printed on stdout first, and the message points at
    /// them.
    fn refused(&self, refused: &Refused, json: bool) -> ApiError {
        let Refused { reason, paste } = refused;
        let what = format!("cannot edit {} safely: {reason}; it is unchanged", self.show());
        if json {
            let compact: String = paste.lines().map(str::trim).collect::<Vec<_>>().join(" ");
            return ApiError::new(ErrorKind::Config, format!("{what}: add {compact} to its top-level object yourself"));
        }
        output::say(&format!("Add these lines to the top-level object of {}:\n\n{paste}\n", self.show()));
        ApiError::new(ErrorKind::Config, format!("{what}: add the lines above to it yourself"))
    }
}

/// `mcpx import` with no names: the table (or `--json`) and what to run next.
fn show(place: &Place, found: &[Found], json: bool) {
    let imports = place.imports();
    if json {
        let body = serde_json::json!({ "config": place.config, "clients": found });
        output::say_json(&serde_json::to_string_pretty(&body).unwrap_or_default());
        return;
    }
    let rows: Vec<Vec<String>> = found
        .iter()
        .map(|f| {
            let servers = match (f.exists, f.servers) {
                (false, _) => "no file".to_owned(),
                (true, Some(n)) => n.to_string(),
                (true, None) => "error".to_owned(),
            };
            let imported = if f.imported { "yes" } else { "no" };
            vec![f.client.to_owned(), servers, imported.to_owned(), place.tilde(f.file.as_deref())]
        })
        .collect();
    output::table(&["CLIENT", "SERVERS", "IMPORTED", "FILE"], &rows);
    for f in found {
        if let Some(error) = &f.error {
            output::warn(&format!("{}: {error}", f.client));
        }
    }
    for f in found.iter().filter(|f| f.exists) {
        if let Some(caveat) = f.client.parse::<Client>().ok().and_then(Client::caveat) {
            output::say(&format!("note: {}: {caveat}", f.client));
        }
    }
    if let Err(e) = imports {
        output::warn(&format!("warning: cannot read `imports`: {e}"));
    }
    let to_import: Vec<&str> = found.iter().filter(|f| f.to_import()).map(|f| f.client).collect();
    let next = if !to_import.is_empty() {
        format!(
            "next: `mcpx import {}` has the daemon read those files live (--copy copies their entries into {} instead)",
            to_import.join(" "),
            place.show()
        )
    } else if found.iter().any(|f| f.imported) {
        "next: `mcpx ls` lists the servers of every imported file".to_owned()
    } else {
        format!("no client's file holds a server; add servers under \"mcpServers\" in {}", place.show())
    };
    output::say(&format!("\n{next}"));
}

/// `mcpx import NAME...`: adds them to `imports`.
fn add(place: &Place, clients: &[Client], json: bool) -> Result<i32, ApiError> {
    let text = place.read_config()?;
    let names: Vec<&str> = clients.iter().map(|c| c.name()).collect();
    let edited = match edit::add_imports(text.as_deref(), &names) {
        Ok(edited) => edited,
        Err(refused) => return Err(place.refused(&refused, json)),
    };
    if let Some(text) = &edited.text {
        place.write(text)?;
    }
    let found = place.survey();
    if json {
        let body = serde_json::json!({
            "config": place.config, "added": edited.added, "present": edited.present,
            "clients": found.iter().filter(|f| names.contains(&f.client)).collect::<Vec<_>>(),
        });
        output::say_json(&serde_json::to_string_pretty(&body).unwrap_or_default());
        return Ok(0);
    }
    for f in found.iter().filter(|f| names.contains(&f.client)) {
        let state = if edited.added.iter().any(|n| n == f.client) { "imported" } else { "already imported" };
        let file = place.tilde(f.file.as_deref());
        let what = match (&f.servers, &f.error) {
            (Some(n), _) => format!("{n} server{} from {file}", plural(*n)),
            (None, Some(e)) => format!("its file does not load now: {e}"),
            (None, None) => format!("no file at {file} yet; its servers appear once it exists"),
        };
        output::say(&format!("{state} {}: {what}", f.client));
        if let Some(caveat) = f.client.parse::<Client>().ok().and_then(Client::caveat) {
            output::say(&format!("  note: {caveat}"));
        }
    }
    if edited.text.is_some() {
        output::say(&format!("\n{} now imports them; `mcpx ls` lists their servers", place.show()));
    }
    Ok(0)
}

/// `mcpx import --copy NAME...`: copies their entries into `mcpServers`; between the named
/// clients, the first named wins a server name.
fn copy(place: &Place, clients: &[Client], force: bool, json: bool) -> Result<i32, ApiError> {
    let mut entries: Vec<(String, Map<String, Value>)> = Vec::new();
    let mut from: Vec<(&'static str, Vec<String>)> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    for &client in clients {
        let file = client.user_file(&place.env).filter(|f| f.is_file()).ok_or_else(|| {
            let file = place.tilde(client.user_file(&place.env).as_deref());
            ApiError::new(
                ErrorKind::Config,
                format!("{} has no config file at {file}, so there is nothing to copy; leave it out", client.name()),
            )
        })?;
        let read = read_client_file(client, &file, place.cwd.as_deref())
            .map_err(|e| ApiError::new(ErrorKind::Config, format!("{e}; nothing was copied")))?;
        let mut names = Vec::new();
        for (name, mut entry) in read {
            anchor_cwd(&mut entry, file.parent());
            if entries.iter().any(|(n, _)| *n == name) {
                skipped.push(format!("{} ({})", sanitize::line(&name), client.name()));
            } else {
                names.push(sanitize::line(&name).into_owned());
                entries.push((name, entry));
            }
        }
        from.push((client.name(), names));
    }
    let text = place.read_config()?;
    let edited = if entries.is_empty() {
        Edited { text: None, added: Vec::new(), present: Vec::new() }
    } else {
        match edit::add_servers(text.as_deref(), &entries, force) {
            Ok(edited) => edited,
            Err(CopyError::Refused(refused)) => return Err(place.refused(&refused, json)),
            Err(CopyError::Clash(names)) => {
                let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                return Err(ApiError::new(
                    ErrorKind::Config,
                    format!(
                        "{} already defines {}; nothing was copied: rename them there, or pass --force to replace them",
                        place.show(),
                        names.join(", ")
                    ),
                ));
            }
        }
    };
    if let Some(text) = &edited.text {
        place.write(text)?;
    }
    let exposed = if place.open_to_others() { literal_values(&entries) } else { Vec::new() };
    if !exposed.is_empty() {
        output::warn(&format!(
            "mcpx: warning: the copies carry literal values ({}) into {}, which others can read: put each in the secret store (`mcpx secret set NAME`) and write `${{secret:NAME}}` instead, or `chmod 600 {}`",
            exposed.join(", "),
            place.show(),
            place.show()
        ));
    }
    if json {
        let body = serde_json::json!({
            "config": place.config, "added": edited.added, "replaced": edited.present, "skipped": skipped,
            "exposed": exposed,
        });
        output::say_json(&serde_json::to_string_pretty(&body).unwrap_or_default());
        return Ok(0);
    }
    for (client, names) in &from {
        let list = if names.is_empty() { "no server".to_owned() } else { names.join(", ") };
        output::say(&format!("copied from {client}: {list}"));
        if let Some(caveat) = client.parse::<Client>().ok().and_then(Client::caveat) {
            output::say(&format!("  note: {caveat}"));
        }
    }
    if !edited.present.is_empty() {
        output::say(&format!("replaced (--force): {}", edited.present.join(", ")));
    }
    if !skipped.is_empty() {
        output::say(&format!("skipped, a client named earlier has the name: {}", skipped.join(", ")));
    }
    if let Ok(imports) = place.imports() {
        let both: Vec<&str> = from.iter().map(|(c, _)| *c).filter(|c| imports.iter().any(|i| i == c)).collect();
        if !both.is_empty() {
            output::say(&format!(
                "note: `imports` also names {}; the copies win over those files (remove them from `imports` to use only the copies)",
                both.join(", ")
            ));
        }
    }
    if edited.text.is_some() {
        output::say(&format!("\n{} holds the copies; `mcpx ls` lists them", place.show()));
    }
    Ok(0)
}

/// The values of copied entries that may be credentials written in the clear: each
/// `env` and `headers` value, and `oauth.clientSecret`, without a `${...}` reference,
/// named `server env NAME`.
fn literal_values(entries: &[(String, Map<String, Value>)]) -> Vec<String> {
    let literal = |v: &Value| v.as_str().is_some_and(|s| !s.is_empty() && !s.contains("${"));
    let mut found = Vec::new();
    for (name, entry) in entries {
        let name = sanitize::line(name);
        for field in ["env", "headers"] {
            if let Some(Value::Object(values)) = entry.get(field) {
                for (key, _) in values.iter().filter(|(_, v)| literal(v)) {
                    found.push(format!("{name} {field} {}", sanitize::line(key)));
                }
            }
        }
        if entry.get("oauth").and_then(|o| o.get("clientSecret")).is_some_and(literal) {
            found.push(format!("{name} oauth clientSecret"));
        }
    }
    found
}

/// Makes a relative `cwd` of an entry copied out of a file in `dir` absolute: it was relative
/// to that file, and the copy lives in another. One with a `${...}` is left as written.
pub(crate) fn anchor_cwd(entry: &mut Map<String, Value>, dir: Option<&Path>) {
    let (Some(Value::String(cwd)), Some(dir)) = (entry.get_mut("cwd"), dir) else { return };
    if Path::new(cwd.as_str()).is_relative() && !cwd.contains("${") {
        // Through `components`, which leaves out `.` (so `"."` is the directory itself).
        *cwd = dir.join(cwd.as_str()).components().collect::<PathBuf>().display().to_string();
    }
}

/// Writes `text` to the file at `path` atomically: a symbolic link there (to a dotfile
/// manager's copy, say) stays, and the file it points to is written; an existing file
/// keeps its mode, a new one is private (0600: entries may hold tokens), and missing
/// parent directories are made. Errors: what failed (`follow the link`, `write`, ...)
/// and why.
pub(crate) fn write_file(path: &Path, text: &str) -> Result<(), (&'static str, std::io::Error)> {
    let target = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(path).map_err(|e| ("follow the link", e))?,
        _ => path.to_owned(),
    };
    let mode = match std::fs::metadata(&target) {
        Ok(meta) => std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777,
        Err(_) => 0o600,
    };
    let (Some(dir), Some(name)) = (target.parent(), target.file_name().and_then(|n| n.to_str())) else {
        return Err(("write", std::io::Error::other("the path names no file")));
    };
    std::fs::create_dir_all(dir).map_err(|e| ("create the directory of", e))?;
    let dir = mcpx_platform::fs::Dir::open_unchecked(dir).map_err(|e| ("open the directory of", e))?;
    mcpx_platform::fs::write_atomic(&dir, name, text.as_bytes(), mode).map_err(|e| ("write", e))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}
