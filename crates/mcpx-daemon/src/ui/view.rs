//! What the dashboard's pages show, gathered from the daemon as `mcpx ls`, `status`,
//! `auth status` and `activity` gather it, with nothing kept between two renders.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::api::activity::{ActivityRequest, Entry};
use crate::api::{ApiError, Caller, ConfigErrorStatus, ErrorKind, InstanceStatus, ServerRow, Status};
use crate::config::{ServerEntry, TransportSpec};
use crate::daemon::Daemon;

/// The overview: the daemon, and the servers of every file it knows.
#[derive(Debug)]
pub struct Overview {
    /// `status`: the daemon and every instance.
    pub status: Status,
    /// Each known configuration file, in path order.
    pub files: Vec<FileServers>,
    /// The daemon's directories: `(what, where)`.
    pub dirs: Vec<(&'static str, PathBuf)>,
}

/// The servers one configuration file defines.
#[derive(Debug)]
pub struct FileServers {
    /// The file.
    pub file: PathBuf,
    /// Whether it is a project file (its servers need the user's trust).
    pub project: bool,
    /// Its servers, by name.
    pub servers: Vec<Line>,
    /// What is wrong in it: the whole file, or an entry.
    pub errors: Vec<ConfigErrorStatus>,
}

/// One server of the overview.
#[derive(Debug)]
pub struct Line {
    /// Its `mcpx ls` row.
    pub row: ServerRow,
    /// Requests counted since the daemon started, and those that did not end well.
    pub calls: u64,
    /// See [`Line::calls`].
    pub errors: u64,
    /// The login of a remote server (`auth status`'s row): `state`, `expires_at`.
    pub login: Option<Value>,
    /// The last error one of its instances ended with.
    pub last_error: Option<String>,
}

/// Gathers the overview.
pub async fn overview(d: &Daemon) -> Overview {
    let status = crate::control::status(d);
    let live: Vec<_> = d.pool.instances().into_iter().filter(|i| i.is_alive()).collect();
    let counts = d.telemetry.metrics.per_server();
    // Read at most once, and only for a remote server: each read may be a round trip
    // to a keychain.
    let mut logins = None;
    let now = std::time::SystemTime::now();
    let mut errors: BTreeMap<PathBuf, Vec<ConfigErrorStatus>> = BTreeMap::new();
    for e in &status.daemon.config_errors {
        errors.entry(e.file.clone()).or_default().push(e.clone());
    }
    let mut files = Vec::new();
    for file in d.config.known_files() {
        let (caller, project) = (caller_for(d, &file), is_project(d, &file));
        let contents = crate::daemon::off_the_runtime(|| d.config.file_contents(&file));
        let entries = contents.ok().flatten().map(|c| c.servers).unwrap_or_default();
        let mut servers = Vec::new();
        for entry in &entries {
            let row = crate::control::server_row(d, entry, &caller, &live).await;
            let (calls, errors) = counts.get(&entry.name).copied().unwrap_or_default();
            let last_error = last_error(&status.instances, &entry.name);
            let login = remote(entry).then(|| {
                let logins = logins.get_or_insert_with(|| {
                    crate::auth::tokens::all(&d.dirs.state).map_err(|m| ApiError::new(ErrorKind::Config, m))
                });
                crate::control::logins::login_row(d, entry, logins, now)
            });
            servers.push(Line { row, calls, errors, login, last_error });
        }
        servers.sort_by(|a, b| a.row.name.cmp(&b.row.name));
        let errors = errors.remove(&file).unwrap_or_default();
        files.push(FileServers { file, project, servers, errors });
    }
    let paths = &d.dirs.paths;
    let dirs = vec![("State", paths.state.clone()), ("Cache", paths.cache.clone()), ("Runtime", paths.runtime.clone())];
    Overview { status, files, dirs }
}

/// One server's page.
#[derive(Debug)]
pub struct ServerPage {
    /// Its name.
    pub name: String,
    /// Each file that defines it, with its row there.
    pub rows: Vec<(PathBuf, ServerRow)>,
    /// Its tools, resources and prompts as last listed: `(name, "title: description")`.
    pub tools: Vec<(String, String)>,
    /// See [`ServerPage::tools`].
    pub resources: Vec<(String, String)>,
    /// See [`ServerPage::tools`].
    pub prompts: Vec<(String, String)>,
    /// Its instances, live or failed.
    pub instances: Vec<InstanceStatus>,
    /// The daemon log's last lines about it.
    pub log: Vec<String>,
    /// Its tool and prompt definitions held by pinning for the user's review.
    pub held: Vec<Held>,
    /// Whether it is a remote server (one a user may log in to).
    pub remote: bool,
}

/// A definition pinning holds, as `mcpx pins review` shows it.
#[derive(Debug)]
pub struct Held {
    /// The file whose configuration the decision is made for.
    pub file: PathBuf,
    /// `tool` or `prompt`.
    pub kind: &'static str,
    /// Its name.
    pub name: String,
    /// The change: before, after, its hash and what the poisoning scan found.
    pub change: crate::api::pins::PinChange,
    /// Whether the user rejected it before.
    pub rejected: bool,
}

/// Gathers the page of the server `name`, as every known file defines it; `None` when
/// none does.
pub async fn server(d: &Daemon, name: &str) -> Option<ServerPage> {
    let live: Vec<_> = d.pool.instances().into_iter().filter(|i| i.is_alive()).collect();
    let mut rows = Vec::new();
    let mut listed = None;
    let mut held = Vec::new();
    let mut is_remote = false;
    for file in d.config.known_files() {
        let contents = crate::daemon::off_the_runtime(|| d.config.file_contents(&file));
        let Some(entry) = contents.ok().flatten().and_then(|c| c.servers.into_iter().find(|e| e.name == name)) else {
            continue;
        };
        let caller = caller_for(d, &file);
        is_remote |= remote(&entry);
        rows.push((file.clone(), crate::control::server_row(d, &entry, &caller, &live).await));
        if listed.is_none() {
            listed = d.schema_for(&entry, &caller).await;
            let asked = crate::api::pins::PinsRequest { caller: caller.clone(), server: Some(name.to_owned()) };
            for pinned in crate::control::pins::pins(d, &asked).await.unwrap_or_default() {
                let rows = pinned
                    .tools
                    .into_iter()
                    .map(|r| ("tool", r))
                    .chain(pinned.prompts.into_iter().map(|r| ("prompt", r)));
                for (kind, row) in rows {
                    let rejected = row.state == "rejected";
                    if let Some(change) = row.change {
                        held.push(Held { file: file.clone(), kind, name: row.name, change, rejected });
                    }
                }
            }
        }
    }
    if rows.is_empty() {
        return None;
    }
    /// What a list item is shown by.
    #[derive(serde::Deserialize)]
    struct Item {
        name: Option<String>,
        uri: Option<String>,
        title: Option<String>,
        description: Option<String>,
    }
    let summary = |items: Option<&Vec<Box<serde_json::value::RawValue>>>| -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = items
            .into_iter()
            .flatten()
            .filter_map(|raw| serde_json::from_str::<Item>(raw.get()).ok())
            .filter_map(|i| {
                let said = [i.title, i.description].into_iter().flatten().collect::<Vec<_>>().join(": ");
                Some((i.name.or(i.uri)?, said))
            })
            .collect();
        out.sort();
        out
    };
    let cached = listed.as_deref();
    let instances = crate::control::status(d).instances.into_iter().filter(|i| i.server == name).collect();
    Some(ServerPage {
        name: name.to_owned(),
        tools: summary(cached.and_then(|c| c.tools.as_ref())),
        resources: summary(cached.and_then(|c| c.resources.as_ref())),
        prompts: summary(cached.and_then(|c| c.prompts.as_ref())),
        rows,
        instances,
        log: log_lines(d, name),
        held,
        remote: is_remote,
    })
}

/// The page that tries one tool of a server.
#[derive(Debug)]
pub struct ToolPage {
    /// The server.
    pub server: String,
    /// The tool's definition as last listed (`name`, `title`, `description`,
    /// `inputSchema`, ...).
    pub tool: Value,
    /// The file that defines the server, whose configuration the call is made for.
    pub file: PathBuf,
    /// The directory the call runs in (a project's), or `None` for the user's own
    /// files.
    pub dir: Option<PathBuf>,
}

/// Gathers the page of `server`'s tool `tool`, as the first known file that defines
/// the server lists it; `None` when none does, or it has no such tool listed.
pub async fn tool(d: &Daemon, server: &str, tool: &str) -> Option<ToolPage> {
    for file in d.config.known_files() {
        let contents = crate::daemon::off_the_runtime(|| d.config.file_contents(&file));
        let Some(entry) = contents.ok().flatten().and_then(|c| c.servers.into_iter().find(|e| e.name == server)) else {
            continue;
        };
        let caller = caller_for(d, &file);
        let listed = d.schema_for(&entry, &caller).await?;
        let tools = listed.tools.as_ref()?;
        let found =
            tools.iter().filter_map(|raw| serde_json::from_str::<Value>(raw.get()).ok()).find(|t| t["name"] == tool)?;
        return Some(ToolPage { server: server.to_owned(), tool: found, dir: caller.cwd.clone(), file });
    }
    None
}

/// A project file's entries as `mcpx trust` shows them, each with whether it is
/// trusted as it is now.
#[derive(Debug)]
pub struct TrustPage {
    /// The file (canonical).
    pub file: PathBuf,
    /// Its entries, refused ones included.
    pub entries: Vec<(crate::config::ProjectEntry, bool)>,
}

/// Gathers the trust page of the project file `file`.
///
/// Errors: a line saying why the file or the trust records cannot be read.
pub fn trust(d: &Daemon, file: &Path) -> Result<TrustPage, String> {
    use crate::config::{change_records, project_dir, project_entries, trust_key};
    let file = trust_key(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let entries = project_entries(project_dir(&file), d.config.env()).map_err(|e| e.to_string())?;
    let entries: Vec<_> = entries.into_iter().filter(|e| e.file == file).collect();
    let entries = change_records(&d.dirs.state, &d.dirs.paths.state, |store| {
        let judged = entries.into_iter().map(|e| {
            let trusted = e.refused.is_none() && store.trusts(&e.file, &e.server, &e.hash);
            (e, trusted)
        });
        Ok((judged.collect(), false))
    })?;
    Ok(TrustPage { file, entries })
}

/// The activity record's entries `req` asks for, or why they cannot be read.
pub fn activity(d: &Daemon, req: &ActivityRequest) -> Result<Vec<Entry>, String> {
    crate::control::activity::activity(d, req).map_err(|e| e.message)
}

/// Lines of the daemon log kept for a server's page, at most.
const LOG_LINES: usize = 50;

/// The last [`LOG_LINES`] lines of the daemon log that name the server `name` (its
/// stderr lines and the daemon's own about it carry `server=<name>`).
fn log_lines(d: &Daemon, name: &str) -> Vec<String> {
    let text = crate::daemon::off_the_runtime(|| tail(&d.dirs.paths.log_file(), LOG_TAIL_BYTES)).unwrap_or_default();
    let tag = format!("server={name}");
    let mut lines: Vec<String> =
        text.lines().filter(|l| l.split_whitespace().any(|w| w == tag)).map(str::to_owned).collect();
    let skip = lines.len().saturating_sub(LOG_LINES);
    lines.drain(..skip);
    lines
}

/// How much of the end of the daemon log a server's page reads.
const LOG_TAIL_BYTES: u64 = 256 * 1024;

/// The last `bytes` of the file at `path`, from the first whole line in them.
fn tail(path: &std::path::Path, bytes: u64) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(bytes)))?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let text = if len > bytes { text.split_once('\n').map_or("", |(_, rest)| rest) } else { &text };
    Ok(text.to_owned())
}

/// Whether `file` is a project file: neither user-level nor named explicitly.
fn is_project(d: &Daemon, file: &Path) -> bool {
    !d.config.env().is_user_level(file) && !d.config.explicit_files().contains_key(file)
}

/// The caller whose configuration holds `file` as the daemon knows it: one in the
/// project's directory for a project file, one naming it for a file named
/// explicitly (`--config`, `MCPX_CONFIG`), else the user's own (no directory).
pub fn caller_for(d: &Daemon, file: &Path) -> Caller {
    if d.config.explicit_files().contains_key(file) {
        return Caller { config: Some(file.to_owned()), ..Caller::default() };
    }
    let cwd = is_project(d, file).then(|| file.parent().map(Path::to_path_buf)).flatten();
    Caller { cwd, ..Caller::default() }
}

/// The last error an instance of `server` ended with, as `status` says it.
fn last_error(instances: &[InstanceStatus], server: &str) -> Option<String> {
    instances.iter().filter(|i| i.server == server).find_map(|i| i.last_error.clone())
}

/// Whether `entry` is a remote server.
fn remote(entry: &ServerEntry) -> bool {
    matches!(entry.transport, TransportSpec::Remote { .. })
}
