//! `mcpx disconnect`: every entry that runs `mcpx serve` taken out of a client's file, or
//! with `--restore`, the file put back as it was before `mcpx connect` from its backup and
//! what `--move` put into mcpx's file taken out again.
//!
//! What `connect` did is recorded in `<state dir>/connect.json`: for each client file it
//! wrote, the backup of the file before, the SHA-256 of the text it wrote (so a file
//! changed since is noticed), and the servers `--move` added to mcpx's file.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mcpx_api::ApiError;
use mcpx_daemon::config::{Client, runs_mcpx_serve};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::common::{Ctx, Moved, backup, each, read};
use super::file;
use crate::import::write_file;

/// `mcpx disconnect`'s arguments.
#[derive(clap::Args, Debug)]
pub struct DisconnectArgs {
    /// Clients, as `connect` names them.
    #[arg(required = true)]
    pub clients: Vec<String>,
    /// Edit each client's file for the project in DIR, as `connect --project DIR` did.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Put each client's file back as it was before `mcpx connect`, from its backup, and
    /// take what `connect --move` added out of mcpx's file.
    #[arg(long)]
    pub restore: bool,
    /// With --restore: restore even when the client's file changed since `mcpx connect`
    /// wrote it (the file as it is now is backed up first).
    #[arg(long, requires = "restore")]
    pub force: bool,
}

/// What `mcpx connect` did to one client file.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    /// The client, as `imports` names it.
    client: String,
    /// The backup of the file before; `None` when `connect` made the file.
    backup: Option<PathBuf>,
    /// SHA-256 (hex) of the text `connect` wrote.
    wrote: String,
    /// What `--move` put into mcpx's file.
    moved: Option<Moved>,
}

/// `<state dir>/connect.json`: the records, by client file.
fn records_file(ctx: &Ctx) -> Option<PathBuf> {
    ctx.state.as_ref().map(|s| s.join("connect.json"))
}

/// Every record; none when the file is missing or unreadable (a warning says so).
fn records(ctx: &Ctx) -> BTreeMap<PathBuf, Record> {
    let Some(path) = records_file(ctx) else { return BTreeMap::new() };
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
            crate::output::warn(&format!("mcpx: warning: {} is not readable ({e}); it is ignored", path.display()));
            BTreeMap::new()
        }),
        Err(_) => BTreeMap::new(),
    }
}

/// Notes that `disconnect` wrote `text` to `file` (taking mcpx out), so `--restore`
/// later does not take mcpx's own change for the user's.
fn rewrote(ctx: &Ctx, file: &Path, text: &str) {
    let mut all = records(ctx);
    if let Some(record) = all.get_mut(file) {
        record.wrote = sha256(text);
        save(ctx, &all);
    }
}

/// Writes the records; a failure is a warning (the edit itself is done).
fn save(ctx: &Ctx, all: &BTreeMap<PathBuf, Record>) {
    let Some(path) = records_file(ctx) else { return };
    let text = serde_json::to_string_pretty(all).unwrap_or_default();
    if let Err((what, e)) = write_file(&path, &text) {
        let undo = "`mcpx disconnect --restore` will not know of it";
        crate::output::warn(&format!("mcpx: warning: cannot {what} {}: {e}; {undo}", path.display()));
    }
}

fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Records that `connect` wrote `text` to `client`'s `file`, whose text before is at
/// `backup` (`None`: there was no file), having moved `moved` into mcpx's file.
pub(super) fn record(ctx: &Ctx, client: Client, file: &Path, backup: Option<&Path>, text: &str, moved: Option<&Moved>) {
    let mut all = records(ctx);
    let mut record = Record {
        client: client.name().to_owned(),
        backup: backup.map(Path::to_path_buf),
        wrote: sha256(text),
        moved: moved.cloned(),
    };
    // Connected again: `--restore` still goes back to before the first `connect`, and
    // takes out what every `--move` since put into mcpx.
    if let Some(earlier) = all.remove(file) {
        record.backup = earlier.backup;
        record.moved = match (earlier.moved, record.moved) {
            (Some(mut a), Some(b)) if a.file == b.file => {
                for name in b.names {
                    if !a.names.contains(&name) {
                        a.names.push(name);
                    }
                }
                a.digests.extend(b.digests);
                Some(a)
            }
            (a, b) => b.or(a),
        };
    }
    all.insert(file.to_path_buf(), record);
    save(ctx, &all);
}

/// `mcpx disconnect CLIENT...`: removes every entry that runs `mcpx serve` from each
/// client's file, or with `--restore` puts the file back from its backup; exit 0, or 2
/// when any client could not be done. `config` is the global `--config`.
///
/// Errors: an unknown client name or a bad `--project` (`usage`), before anything is
/// changed.
pub fn disconnect(
    vars: &HashMap<String, String>,
    args: &DisconnectArgs,
    config: Option<PathBuf>,
    json: bool,
) -> Result<i32, ApiError> {
    let ctx = Ctx::new(vars, args.project.as_deref(), config, true)?;
    each(&args.clients, json, |client| {
        let done = match args.restore {
            true => restore_one(client, &ctx, args.force),
            false => disconnect_one(client, &ctx),
        };
        done.unwrap_or_else(|e| json!({ "client": client.name(), "error": e }))
    })
}

/// Takes mcpx out of one client's file. Errors: what went wrong, the file unchanged.
fn disconnect_one(client: Client, ctx: &Ctx) -> Result<Value, String> {
    let file = ctx.file(client)?;
    let Some(text) = read(&file)? else {
        return Ok(json!({ "client": client.name(), "file": file, "said": "no file: nothing to take out" }));
    };
    let removed = file::remove(&text, client.layout(), |_, entry| runs_mcpx_serve(entry))
        .map_err(|why| format!("{} is unchanged: {why}; remove its `mcpx serve` entry by hand", file.display()))?;
    let Some((new, names)) = removed else {
        return Ok(
            json!({ "client": client.name(), "file": file, "said": "it does not reach mcpx: nothing to take out" }),
        );
    };
    let saved = backup(&file, &text)?;
    write_file(&file, &new).map_err(|(what, e)| format!("cannot {what} {}: {e}; it is unchanged", file.display()))?;
    rewrote(ctx, &file, &new);
    let said =
        format!("removed {} from {}; the file before is at {}", names.join(", "), file.display(), saved.display());
    Ok(json!({ "client": client.name(), "file": file, "said": said, "removed": names, "backup": saved }))
}

/// Puts one client's file back as it was before `mcpx connect`, and takes what `--move`
/// added out of mcpx's file. Errors: no record, a file changed since (without `force`),
/// or a file that cannot be read or written.
fn restore_one(client: Client, ctx: &Ctx, force: bool) -> Result<Value, String> {
    let file = ctx.file(client)?;
    let mut all = records(ctx);
    let Some(record) = all.remove(&file) else {
        return Err(format!(
            "no `mcpx connect` of {} is recorded, so there is nothing to restore; `mcpx disconnect {}` takes mcpx out, and backups are beside the file (*.mcpx-backup-*)",
            file.display(),
            client.name()
        ));
    };
    let now = read(&file)?;
    if now.as_deref().map(sha256) != Some(record.wrote.clone()) && !force {
        return Err(format!(
            "{} changed since `mcpx connect` wrote it; nothing was restored (--force restores it anyway, after a backup of the file as it is now)",
            file.display()
        ));
    }
    if let (Some(moved), false) = (&record.moved, force) {
        let edited = edited_since(moved)?;
        if !edited.is_empty() {
            return Err(format!(
                "{} changed {} since `mcpx connect --move` put them there; nothing was restored (--force restores anyway, taking them out of it after a backup)",
                moved.file.display(),
                edited.join(", ")
            ));
        }
    }
    let before = match &record.backup {
        Some(path) => {
            Some(read(path)?.ok_or_else(|| format!("the backup {} is gone; nothing was restored", path.display()))?)
        }
        None => None,
    };
    let saved = match &now {
        Some(text) => Some(backup(&file, text)?),
        None => None,
    };
    let mut said = match &before {
        Some(text) => {
            write_file(&file, text).map_err(|(what, e)| format!("cannot {what} {}: {e}", file.display()))?;
            format!("put {} back as it was before `mcpx connect`", file.display())
        }
        None => {
            if now.is_some() {
                std::fs::remove_file(&file).map_err(|e| format!("cannot remove {}: {e}", file.display()))?;
            }
            format!("removed {}, which `mcpx connect` made", file.display())
        }
    };
    if let Some(saved) = &saved {
        said.push_str(&format!("; the file as it was is at {}", saved.display()));
    }
    if let Some(moved) = &record.moved {
        said.push_str(&format!("; {}", unmove(moved)?));
    }
    save(ctx, &all);
    Ok(json!({ "client": client.name(), "file": file, "said": said, "backup": saved }))
}

/// The servers `--move` put into mcpx's file that are there now but not as they were
/// put. Errors: the file cannot be read or does not parse.
fn edited_since(moved: &Moved) -> Result<Vec<String>, String> {
    let Some(text) = read(&moved.file)? else { return Ok(Vec::new()) };
    let value = jsonc_parser::cst::CstRootNode::parse(&text, &jsonc_parser::ParseOptions::default())
        .map_err(|e| format!("{} does not parse ({e}); nothing was restored", moved.file.display()))?
        .to_serde_value()
        .unwrap_or_default();
    Ok(moved
        .names
        .iter()
        .filter(|name| {
            let now = value.get("mcpServers").and_then(|s| s.get(name.as_str()));
            match (now, moved.digests.get(name.as_str())) {
                (Some(now), Some(then)) => super::common::digest(now) != *then,
                _ => false,
            }
        })
        .cloned()
        .collect())
}

/// Takes the servers `--move` added out of mcpx's file (after a backup of it); what was
/// done. Errors: the file cannot be edited safely.
fn unmove(moved: &Moved) -> Result<String, String> {
    let Some(text) = read(&moved.file)? else {
        return Ok(format!("{} is gone, so there was nothing to take out of it", moved.file.display()));
    };
    let names = &moved.names;
    let layout = mcpx_daemon::config::Layout::Json("mcpServers");
    let removed = file::remove(&text, layout, |name, _| names.iter().any(|n| n == name)).map_err(|why| {
        format!("{} is unchanged: {why}; remove {} from it by hand", moved.file.display(), names.join(", "))
    })?;
    let Some((new, gone)) = removed else {
        return Ok(format!("{} no longer has {}", moved.file.display(), names.join(", ")));
    };
    let saved = backup(&moved.file, &text)?;
    write_file(&moved.file, &new).map_err(|(what, e)| format!("cannot {what} {}: {e}", moved.file.display()))?;
    Ok(format!("took {} out of {} (as it was is at {})", gone.join(", "), moved.file.display(), saved.display()))
}
