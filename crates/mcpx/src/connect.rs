//! `mcpx connect [CLIENT...]` and `mcpx disconnect CLIENT...`: mcpx put into, or taken
//! out of, MCP clients' user-level files. With no client named, `connect` lists the
//! clients whose files mcpx knows, whether each exists, and whether it already reaches
//! mcpx (an entry that runs `mcpx serve`, recognised in each client's own shape). Edits
//! keep the file's comments and layout (the JSONC syntax tree `import` edits), and a
//! backup of the file is written beside it first. Local files only: no daemon is needed.

mod codex;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mcpx_api::{ApiError, ErrorKind};
use mcpx_daemon::config::{Client, ConfigEnv, mcpx_entries, runs_mcpx_serve};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::import::edit::{CopyError, Edited, add_entry, remove_entries};
use crate::import::write_file;
use crate::output::{say, say_json, table, warn};

/// One client, as `mcpx connect` lists it.
#[derive(Debug, Serialize)]
struct Row {
    /// The client, as `imports` names it.
    client: &'static str,
    /// Its user-level file on this system; null when HOME is not set.
    file: Option<PathBuf>,
    /// Whether that file exists.
    exists: bool,
    /// Its entries that run `mcpx serve`: the client is connected when there is one.
    mcpx: Vec<String>,
    /// Why the file cannot be read (naming file, line and column).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Lists every client's file and whether it reaches mcpx; exit 0. With `json`, one array
/// of `{client, file, exists, mcpx, error?}`.
///
/// Errors: none; a file that cannot be read is shown with why.
pub fn list(vars: &HashMap<String, String>, json: bool) -> Result<i32, ApiError> {
    let env = ConfigEnv::from_vars(vars);
    let home = vars.get("HOME").map(PathBuf::from);
    let rows: Vec<Row> = Client::ALL
        .iter()
        .map(|&client| {
            let file = client.user_file(&env);
            let exists = file.as_deref().is_some_and(Path::is_file);
            let (mut mcpx, mut error) = (Vec::new(), None);
            if let (true, Some(path)) = (exists, &file) {
                match mcpx_entries(client, path) {
                    Ok(names) => mcpx = names,
                    Err(e) => error = Some(e.to_string()),
                }
            }
            Row { client: client.name(), file, exists, mcpx, error }
        })
        .collect();
    if json {
        say_json(&serde_json::to_string(&rows).unwrap_or_default());
        return Ok(0);
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let file = r
                .file
                .as_deref()
                .map_or_else(|| "(HOME is not set)".to_owned(), |f| crate::output::tilde(f, home.as_deref()));
            let state = match (&r.error, r.exists, r.mcpx.as_slice()) {
                (Some(e), _, _) => format!("cannot read it: {}", mcpx_platform::sanitize::line(e)),
                (None, false, _) => "no file".to_owned(),
                (None, true, []) => "not connected".to_owned(),
                (None, true, names) => format!("connected ({})", mcpx_platform::sanitize::line(&names.join(", "))),
            };
            vec![r.client.to_owned(), file, state]
        })
        .collect();
    table(&["CLIENT", "FILE", "MCPX"], &cells);
    Ok(0)
}

/// Where `client` keeps its servers and the entry that runs `mcpx` (the binary at
/// `mcpx`) there: `servers` with `"type": "stdio"` for VS Code, `mcpServers` for the
/// others. For Codex, whose file is TOML ([`codex`]), the lines a person would paste.
fn shape(client: Client, mcpx: &str) -> Result<(&'static str, Map<String, Value>), String> {
    let entry = |extra: Value| {
        let mut entry = json!({ "command": mcpx, "args": ["serve"] });
        if let (Some(e), Value::Object(more)) = (entry.as_object_mut(), extra) {
            e.extend(more);
        }
        entry.as_object().cloned().unwrap_or_default()
    };
    match client {
        Client::Vscode => Ok(("servers", entry(json!({ "type": "stdio" })))),
        Client::Codex => Err(format!("[mcp_servers.mcpx]\ncommand = {}\nargs = [\"serve\"]", Value::from(mcpx))),
        _ => Ok(("mcpServers", entry(Value::Null))),
    }
}

/// The clients `names` name. Errors: an unknown name (`usage`), listing the known ones.
fn clients(names: &[String]) -> Result<Vec<Client>, ApiError> {
    names.iter().map(|n| n.parse::<Client>().map_err(|e| ApiError::new(ErrorKind::Usage, e))).collect()
}

/// Writes a backup of `file` (holding `text`) beside it, as `<file>.mcpx-backup-<secs>`;
/// its path. Errors: it cannot be written.
fn backup(file: &Path, text: &str) -> Result<PathBuf, String> {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let mut name = file.file_name().unwrap_or_default().to_owned();
    name.push(format!(".mcpx-backup-{secs}"));
    let path = file.with_file_name(name);
    write_file(&path, text).map_err(|(what, e)| format!("cannot {what} the backup {}: {e}", path.display()))?;
    Ok(path)
}

/// `mcpx connect CLIENT...`: adds an `mcpx` entry running this binary's `serve` to
/// each client's user-level file, unless one reaching mcpx is there already; exit 0, or
/// 2 when any client could not be edited (the others are).
///
/// Errors: an unknown client name (`usage`), before anything is changed.
pub fn connect(vars: &HashMap<String, String>, names: &[String], json: bool) -> Result<i32, ApiError> {
    let env = ConfigEnv::from_vars(vars);
    let mcpx = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "mcpx".to_owned());
    each(names, json, |client| connect_one(client, &env, &mcpx))
}

/// Connects one client; `{"client", "file", "said"}` or `{"client", "error"}`.
fn connect_one(client: Client, env: &ConfigEnv, mcpx: &str) -> Value {
    let fail = |e: String| json!({ "client": client.name(), "error": e });
    let Some(file) = client.user_file(env) else { return fail("HOME is not set, so its file cannot be found".into()) };
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return fail(format!("cannot read {}: {e}", file.display())),
    };
    if text.is_some() {
        match mcpx_entries(client, &file) {
            Ok(found) if !found.is_empty() => {
                let said = format!("{} already reaches mcpx ({}); left as it is", file.display(), found.join(", "));
                return json!({ "client": client.name(), "file": file, "said": said, "already": true });
            }
            Ok(_) => {}
            Err(e) => return fail(e.to_string()),
        }
    }
    let new = match shape(client, mcpx) {
        Ok((key, entry)) => match add_entry(text.as_deref(), key, "mcpx", &entry) {
            Ok(Edited { text: Some(new), .. }) => new,
            Ok(Edited { text: None, .. }) => return fail("nothing to change".into()),
            Err(CopyError::Clash(_)) => {
                let said = "has an entry named `mcpx` that does not run `mcpx serve`; rename it, then connect again";
                return fail(format!("{} {said}", file.display()));
            }
            Err(CopyError::Refused(r)) => {
                let (why, paste) = (r.reason, r.paste);
                return fail(format!(
                    "{} is unchanged: {why}; add this to its top-level object by hand:\n{paste}",
                    file.display()
                ));
            }
        },
        Err(paste) => match codex::add(text.as_deref().unwrap_or_default(), "mcpx", mcpx, &["serve"]) {
            Ok(new) => new,
            Err(why) => {
                return fail(format!("{} is unchanged: {why}; add this to it by hand:\n{paste}", file.display()));
            }
        },
    };
    let saved = match &text {
        Some(old) => match backup(&file, old) {
            Ok(path) => Some(path),
            Err(e) => return fail(e),
        },
        None => None,
    };
    if let Err((what, e)) = write_file(&file, &new) {
        return fail(format!("cannot {what} {}: {e}; it is unchanged", file.display()));
    }
    let mut said = format!(
        "added `mcpx` to {} (runs {mcpx} serve, by its absolute path: a desktop app may not have its directory on PATH)",
        file.display()
    );
    if let Some(saved) = &saved {
        said.push_str(&format!("; the file before is at {}", saved.display()));
    }
    json!({ "client": client.name(), "file": file, "said": said, "backup": saved })
}

/// `mcpx disconnect CLIENT...`: removes every top-level entry that runs `mcpx serve`
/// from each client's user-level file; exit 0, or 2 when any client could not be edited.
///
/// Errors: an unknown client name (`usage`), before anything is changed.
pub fn disconnect(vars: &HashMap<String, String>, names: &[String], json: bool) -> Result<i32, ApiError> {
    let env = ConfigEnv::from_vars(vars);
    each(names, json, |client| disconnect_one(client, &env))
}

/// Does `one` for each client `names` names, saying each outcome (`{"client", "said"}`
/// or `{"client", "error"}`) as it comes, or all of them as one JSON array; exit 0, or 2
/// when any failed. Errors: an unknown name (`usage`), before anything is done.
fn each(names: &[String], json: bool, one: impl Fn(Client) -> Value) -> Result<i32, ApiError> {
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

/// Disconnects one client; `{"client", "file", "said"}` or `{"client", "error"}`.
fn disconnect_one(client: Client, env: &ConfigEnv) -> Value {
    let fail = |e: String| json!({ "client": client.name(), "error": e });
    let Some(file) = client.user_file(env) else { return fail("HOME is not set, so its file cannot be found".into()) };
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return json!({ "client": client.name(), "file": file, "said": "no file: nothing to take out" });
        }
        Err(e) => return fail(format!("cannot read {}: {e}", file.display())),
    };
    let removed = match shape(client, "mcpx") {
        Ok((key, _)) => match remove_entries(&text, key, runs_mcpx_serve) {
            Ok(Edited { text: Some(new), present, .. }) => Some((new, present)),
            Ok(Edited { text: None, .. }) => None,
            Err(r) => return fail(format!("{} is unchanged: {}; {}", file.display(), r.reason, r.paste)),
        },
        Err(_) => match codex::remove(&text, runs_mcpx_serve) {
            Ok(removed) => removed,
            Err(why) => {
                return fail(format!("{} is unchanged: {why}; remove its `mcpx serve` entry by hand", file.display()));
            }
        },
    };
    let Some((new, names)) = removed else {
        return json!({ "client": client.name(), "file": file, "said": "it does not reach mcpx: nothing to take out" });
    };
    let saved = match backup(&file, &text) {
        Ok(path) => path,
        Err(e) => return fail(e),
    };
    if let Err((what, e)) = write_file(&file, &new) {
        return fail(format!("cannot {what} {}: {e}; it is unchanged", file.display()));
    }
    let said =
        format!("removed {} from {}; the file before is at {}", names.join(", "), file.display(), saved.display());
    json!({ "client": client.name(), "file": file, "said": said, "removed": names, "backup": saved })
}
