//! `mcpx connect [CLIENT...]` and `mcpx disconnect CLIENT...`: mcpx put into, or taken
//! out of, MCP clients' files (each user-level one, or a project's with `--project`).
//! With no client named, `connect` lists the clients whose files mcpx knows, whether each
//! exists, and whether it already reaches mcpx (an entry that runs `mcpx serve`,
//! recognised in each client's own shape). `--move` moves the client's own servers into
//! mcpx's config as well. Edits keep the file's comments and layout ([`mod@file`]), a backup
//! of the file is written beside it first, and what was done is recorded
//! ([`restore`]) so `mcpx disconnect --restore` can undo it. Local files only: no daemon
//! is needed.

mod codex;
mod common;
mod file;
mod restore;
mod yaml;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mcpx_api::{ApiError, ErrorKind};
use mcpx_daemon::config::{Client, ConfigCache, ConfigEnv, ResolveRequest, mcpx_entries, read_client_file};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::import::edit::{CopyError, Edited, add_servers};
use crate::import::write_file;
use crate::output::{say_json, table};
use common::{Ctx, Moved, backup, each, read};
use file::Refusal;
pub use restore::{DisconnectArgs, disconnect};

/// `mcpx connect`'s arguments.
#[derive(clap::Args, Debug)]
pub struct ConnectArgs {
    /// Clients; none lists them all: claude-desktop, claude-code, cursor, vscode, codex,
    /// gemini, windsurf, opencode, zed, goose, cline, roo-code, continue, lm-studio, kiro,
    /// crush, amazon-q, copilot-cli.
    pub clients: Vec<String>,
    /// Edit each client's file for the project in DIR (such as DIR/.cursor/mcp.json)
    /// rather than its user-level file.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Also move the client's own servers into mcpx (its user config, or DIR/.mcpx.json
    /// with --project, where they stay untrusted until `mcpx trust`), so the client sees
    /// only mcpx.
    #[arg(long = "move")]
    pub move_servers: bool,
}

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

/// Lists every client's file (user-level, or the project's with `--project`) and whether
/// it reaches mcpx; exit 0. With `json`, one array of `{client, file, exists, mcpx,
/// error?}`.
///
/// Errors: a `--project` that is no directory (`usage`); a file that cannot be read is
/// shown with why.
pub fn list(vars: &HashMap<String, String>, project: Option<&Path>, json: bool) -> Result<i32, ApiError> {
    let ctx = Ctx::new(vars, project, None, false)?;
    let home = vars.get("HOME").map(PathBuf::from);
    let rows: Vec<Row> = Client::ALL
        .iter()
        .filter(|c| ctx.file(**c).is_ok() || ctx.project.is_none())
        .map(|&client| {
            let file = ctx.file(client).ok();
            let exists = file.as_deref().is_some_and(Path::is_file);
            let (mut mcpx, mut error) = (Vec::new(), None);
            if let Some(path) = file.as_deref().filter(|p| p.exists() && !p.is_file()) {
                error = Some(format!("{} is not a file", path.display()));
            }
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

/// `mcpx connect CLIENT...`: adds an `mcpx` entry running this binary's `serve` to each
/// client's file, unless one reaching mcpx is there already; with `--move`, moves the
/// client's other servers into mcpx's file first. Exit 0, or 2 when any client could not
/// be edited (the others are). `config` is the global `--config`.
///
/// Errors: an unknown client name or a `--project` that is no directory (`usage`), or a
/// `profile` (the global `--profile`: the entry runs `mcpx serve --profile NAME`) that the
/// user config does not define (`config`), before anything is changed.
pub fn connect(
    vars: &HashMap<String, String>,
    args: &ConnectArgs,
    config: Option<PathBuf>,
    profile: Option<&str>,
    json: bool,
) -> Result<i32, ApiError> {
    if let Some(name) = profile {
        let cache = ConfigCache::new(ConfigEnv::from_vars(vars));
        let resolved = cache
            .resolve(&ResolveRequest { cwd: None, explicit: config.clone() })
            .map_err(|e| ApiError::new(ErrorKind::Config, e.to_string()))?;
        resolved.with_profile(name).map_err(|e| ApiError::new(ErrorKind::Config, e))?;
    }
    // The entry serves what this command was told: the same config file and profile.
    let explicit = config.as_ref().map(|c| c.display().to_string());
    let ctx = Ctx::new(vars, args.project.as_deref(), config, true)?;
    let mcpx = invoked_path();
    let mut serve = vec!["serve".to_owned()];
    serve.extend(explicit.into_iter().flat_map(|c| ["--config".to_owned(), c]));
    serve.extend(profile.iter().flat_map(|p| ["--profile".to_owned(), (*p).to_owned()]));
    each(&args.clients, json, |client| match connect_one(client, &ctx, &mcpx, &serve, args.move_servers) {
        Ok(done) => done,
        Err(e) => json!({ "client": client.name(), "error": e }),
    })
}

/// The path this `mcpx` was run by, absolute: the one on `PATH` (or given) when it is this
/// binary, so a link a package manager keeps stable (`/usr/local/bin/mcpx`) is written
/// rather than the versioned file it points to; else the running binary's own path.
fn invoked_path() -> String {
    let exe = std::env::current_exe().ok();
    let real = exe.as_deref().and_then(|e| std::fs::canonicalize(e).ok());
    let arg0 = std::env::args_os().next().map(PathBuf::from);
    let candidate = arg0.and_then(|arg0| {
        if arg0.components().count() > 1 {
            return Some(std::env::current_dir().ok()?.join(arg0));
        }
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path).map(|dir| dir.join(&arg0)).find(|p| p.is_file())
    });
    match (candidate, &real) {
        (Some(c), Some(real)) if c.is_absolute() && std::fs::canonicalize(&c).ok().as_ref() == Some(real) => {
            c.components().collect::<PathBuf>().display().to_string()
        }
        _ => exe.map_or_else(|| "mcpx".to_owned(), |e| e.display().to_string()),
    }
}

/// Connects one client; `{"client", "file", "said", ...}`. Errors: what went wrong, with
/// the file unchanged.
fn connect_one(client: Client, ctx: &Ctx, mcpx: &str, serve: &[String], move_servers: bool) -> Result<Value, String> {
    let file = ctx.file(client)?;
    let text = read(&file)?;
    let present = match &text {
        Some(_) => mcpx_entries(client, &file).map_err(|e| {
            let paste = file::paste(client.layout(), "mcpx", &file::mcpx_entry(client, mcpx, serve));
            format!("{e}; it is unchanged: fix it, or add this to it by hand:\n{paste}")
        })?,
        None => Vec::new(),
    };
    let moving = match (&text, move_servers) {
        (Some(_), true) => read_client_file(client, &file, None).map_err(|e| format!("{e}; nothing was changed"))?,
        _ => Vec::new(),
    };
    if !present.is_empty() && moving.is_empty() {
        let said = format!(
            "{} already reaches mcpx ({}); left as it is (to change how it runs, `mcpx disconnect {}` first)",
            file.display(),
            present.join(", "),
            client.name()
        );
        return Ok(json!({ "client": client.name(), "file": file, "said": said, "already": true }));
    }
    let layout = client.layout();
    let mut new = match (&text, client) {
        // Continue requires these of a config.yaml (its reference, "config.yaml").
        (None, Client::Continue) => "name: Local Config\nversion: 1.0.0\nschema: v1\n".to_owned(),
        _ => text.clone().unwrap_or_default(),
    };
    if !moving.is_empty() {
        let names: Vec<&str> = moving.iter().map(|(n, _)| n.as_str()).collect();
        new = file::remove(&new, layout, |name, _| names.contains(&name))
            .map_err(|why| format!("{} is unchanged: {why}; nothing was moved", file.display()))?
            .map_or(new, |(t, _)| t);
    }
    if present.is_empty() {
        let entry = file::mcpx_entry(client, mcpx, serve);
        new = match file::add(Some(&new), layout, "mcpx", &entry) {
            Ok(t) => t,
            Err(Refusal::Clash) => {
                let said = "has an entry named `mcpx` that does not run `mcpx serve`; rename it, then connect again";
                return Err(format!("{} {said}", file.display()));
            }
            Err(Refusal::Unsafe { why, paste }) => {
                return Err(format!("{} is unchanged: {why}; add this to it by hand:\n{paste}", file.display()));
            }
        };
    }
    let moved = if moving.is_empty() { None } else { Some(move_into_mcpx(ctx, &file, moving)?) };
    let saved = match &text {
        Some(old) => Some(backup(&file, old)?),
        None => None,
    };
    write_file(&file, &new).map_err(|(what, e)| format!("cannot {what} {}: {e}; it is unchanged", file.display()))?;
    restore::record(ctx, client, &file, saved.as_deref(), &new, moved.as_ref());
    let mut said = match present.is_empty() {
        true => format!("added `mcpx` to {} (runs {mcpx} {})", file.display(), serve.join(" ")),
        false => format!("{} already reached mcpx", file.display()),
    };
    if present.is_empty() && client.is_desktop() {
        said.push_str(", by its absolute path: a desktop app may not have its directory on PATH");
    }
    if let Some(m) = &moved {
        said.push_str(&format!("; moved {} into {}", m.names.join(", "), m.file.display()));
        if ctx.project.is_some() {
            said.push_str(" (untrusted until `mcpx trust`)");
        }
        if let Some(caveat) = client.caveat() {
            said.push_str(&format!(" (note: {caveat})"));
        }
    }
    if let Some(saved) = &saved {
        said.push_str(&format!("; the file before is at {}", saved.display()));
    }
    if let Some(warning) = blocked_by_client(client, &new) {
        said.push_str(&format!("; warning: {warning}"));
    }
    let moved_names = moved.as_ref().map(|m| m.names.clone()).unwrap_or_default();
    Ok(json!({ "client": client.name(), "file": file, "said": said, "backup": saved, "moved": moved_names }))
}

/// Why the client would still not run its `mcpx` entry: Gemini CLI's top-level
/// `mcp.allowed` that leaves it out, or `mcp.excluded` that names it.
fn blocked_by_client(client: Client, text: &str) -> Option<String> {
    if client != Client::Gemini {
        return None;
    }
    let value =
        jsonc_parser::cst::CstRootNode::parse(text, &jsonc_parser::ParseOptions::default()).ok()?.to_serde_value()?;
    let names = |key: &str| -> Option<Vec<String>> {
        Some(value["mcp"].get(key)?.as_array()?.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect())
    };
    if names("allowed").is_some_and(|a| !a.iter().any(|n| n == "mcpx")) {
        return Some(
            "its `mcp.allowed` leaves `mcpx` out, so Gemini CLI will not run it: add \"mcpx\" to that list".into(),
        );
    }
    names("excluded")
        .filter(|e| e.iter().any(|n| n == "mcpx"))
        .map(|_| "its `mcp.excluded` names `mcpx`, so Gemini CLI will not run it: take it out of that list".to_owned())
}

/// Adds the client's `entries` (already in mcpx's shape) to mcpx's file, after a backup of
/// it; what was added. Errors: a name mcpx's file already has (reported before anything
/// is changed), or the file cannot be edited safely.
fn move_into_mcpx(ctx: &Ctx, from: &Path, entries: Vec<(String, Map<String, Value>)>) -> Result<Moved, String> {
    let target = ctx.mcpx_file.clone().ok_or("HOME is not set, so mcpx's user config cannot be found")?;
    let text = read(&target)?;
    let mut entries = entries;
    for (_, entry) in &mut entries {
        crate::import::anchor_cwd(entry, from.parent());
    }
    let new = match add_servers(text.as_deref(), &entries, false) {
        Ok(Edited { text: Some(new), .. }) => new,
        Ok(Edited { text: None, .. }) => return Err("nothing to move".into()),
        Err(CopyError::Clash(names)) => {
            return Err(format!(
                "{} already defines {}; nothing was changed: rename them in one of the files, then connect again",
                target.display(),
                names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            ));
        }
        Err(CopyError::Refused(r)) => {
            return Err(format!("{} cannot be edited safely: {}; nothing was changed", target.display(), r.reason));
        }
    };
    if let Some(old) = &text {
        backup(&target, old)?;
    }
    write_file(&target, &new).map_err(|(what, e)| format!("cannot {what} {}: {e}", target.display()))?;
    let digests = entries.iter().map(|(n, e)| (n.clone(), common::digest(&Value::Object(e.clone())))).collect();
    Ok(Moved { file: target, names: entries.into_iter().map(|(n, _)| n).collect(), digests })
}
