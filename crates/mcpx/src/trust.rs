//! `mcpx trust [DIR]`, `mcpx trust --list` and `mcpx untrust [DIR]`: the user's consent
//! to the entries of project files (`docs/configuration.md`, "Trust"), from the CLI
//! process (no daemon is needed; a running daemon reads the records again when their
//! file changes, so they apply to its next request).
//!
//! The records are kept in `<state>/trust.json` (0600, written atomically), changed
//! under a lock on `<state>/trust.lock`, so two runs at once both keep their records.

use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use mcpx_api::paths::DirError;
use mcpx_api::{ApiError, ErrorKind};
use mcpx_daemon::config::{
    ConfigEnv, ProjectEntry, TrustRecord, TrustStore, change_records, project_entries, project_files, trust_key,
};
use mcpx_platform::fs::Dir;

use crate::output;

/// What `mcpx trust` or `mcpx untrust` is asked to do.
#[derive(Debug)]
pub enum Action {
    /// Show the untrusted entries of the project files found upward from the directory,
    /// and trust them (asked on a terminal, or with `yes`).
    Trust { dir: PathBuf, yes: bool },
    /// Show every trust record.
    List,
    /// Remove the records of the project files found upward from the directory.
    Untrust { dir: PathBuf },
}

/// Runs `action` against the records in the state directory `state`, with the files
/// found as `env` (the caller's environment) places them, and returns the exit status.
///
/// Errors: `usage` (exit 2) when trust is asked without a terminal and without `--yes`;
/// `config` (exit 2) when a project file cannot be read or parsed, or the records
/// cannot be read or written; `daemon` (exit 3) when the state directory is refused.
pub fn run(state: &Path, env: &HashMap<String, String>, action: Action, json: bool) -> Result<i32, ApiError> {
    let dir = Dir::open_private(state, true)
        .map_err(|e| ApiError::new(ErrorKind::Daemon, DirError::of(state, "MCPX_STATE_DIR", e).to_string()))?;
    let env = ConfigEnv::from_vars(env);
    if let Action::Trust { dir: project, .. } | Action::Untrust { dir: project } = &action {
        if !project.is_dir() {
            let message =
                format!("{} is not a directory: name a project's directory, or run it in one", project.display());
            return Err(ApiError::new(ErrorKind::Usage, message));
        }
    }
    // A usage error (no terminal) is said as itself, not as a records' failure.
    let mut usage = None;
    let done = change_records(&dir, state, |store| match action {
        Action::List => Ok((list(store, json), false)),
        Action::Trust { dir: project, yes } => {
            let entries = project_entries(&project, &env).map_err(|e| e.to_string())?;
            let (refused, entries): (Vec<ProjectEntry>, Vec<ProjectEntry>) =
                entries.into_iter().partition(|e| e.refused.is_some());
            if !json {
                show_refused(&refused);
            }
            let new: Vec<ProjectEntry> =
                entries.into_iter().filter(|e| !store.trusts(&e.file, &e.server, &e.hash)).collect();
            if new.is_empty() {
                if json {
                    output::say_json(&serde_json::json!({ "trusted": [], "refused": refused }).to_string());
                } else {
                    output::say(&format!(
                        "nothing to trust: every entry of the project files found upward from {} is trusted",
                        project.display()
                    ));
                }
                return Ok((0, false));
            }
            if !json {
                show(&new);
            }
            match confirm(new.len(), yes) {
                Ok(true) => {}
                Ok(false) => {
                    output::say("nothing trusted");
                    return Ok((0, false));
                }
                Err(e) => {
                    usage = Some(e);
                    return Ok((2, false));
                }
            }
            for e in &new {
                store.add(TrustRecord { file: e.file.clone(), server: e.server.clone(), hash: e.hash.clone() });
            }
            if json {
                output::say_json(&serde_json::json!({ "trusted": new, "refused": refused }).to_string());
            } else {
                output::say(&format!("trusted {} (a changed or new entry needs `mcpx trust` again)", count(new.len())));
            }
            Ok((0, true))
        }
        Action::Untrust { dir: project } => {
            let mut removed = 0;
            for file in project_files(&project, &env) {
                if let Ok(file) = trust_key(&file) {
                    removed += store.remove_file(&file);
                }
            }
            if json {
                output::say_json(&serde_json::json!({ "removed": removed }).to_string());
            } else {
                output::say(&format!(
                    "removed the trust of {} of the project files found upward from {}",
                    count(removed),
                    project.display()
                ));
            }
            Ok((0, removed > 0))
        }
    })
    .map_err(|e| ApiError::new(ErrorKind::Config, e))?;
    match usage {
        Some(e) => Err(e),
        None => Ok(done),
    }
}

/// "1 entry", "2 entries".
fn count(n: usize) -> String {
    format!("{n} {}", if n == 1 { "entry" } else { "entries" })
}

/// Prints what the untrusted entries would run, file by file
/// ([`ProjectEntry::described`]): every word from the file is quoted, so a name or value
/// cannot make a line of its own.
fn show(entries: &[ProjectEntry]) {
    let mut file: Option<&Path> = None;
    for e in entries {
        if file != Some(e.file.as_path()) {
            output::say(&format!("{}:", e.file.display()));
            file = Some(&e.file);
        }
        let (head, details) = e.described();
        output::say(&format!("  {head}"));
        for line in details {
            output::say(&format!("    {line}"));
        }
    }
}

/// Prints the entries no one can trust, and why: they do not parse (a `${secret:}`
/// naming a stored login, say), so they run nothing.
fn show_refused(entries: &[ProjectEntry]) {
    for e in entries {
        let why = e.refused.as_deref().unwrap_or_default();
        output::warn(&format!(
            "refused, not trusted: {} in {}: {}",
            mcpx_daemon::config::shell_quoted(&e.server),
            e.file.display(),
            mcpx_platform::sanitize::line(why)
        ));
    }
}

/// Asks y/N on the terminal (default N).
///
/// Errors: `usage` when stdin is not a terminal: `--yes` is then required.
fn confirm(n: usize, yes: bool) -> Result<bool, ApiError> {
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(ApiError::new(
            ErrorKind::Usage,
            "mcpx trust asks the user on a terminal: the user runs it on one (or with `--yes` after reviewing what it shows); this is for the user to decide: do not pass `--yes` yourself",
        ));
    }
    eprint!("trust {}? [y/N] ", count(n));
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).map_err(|e| ApiError::new(ErrorKind::Usage, e.to_string()))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "Yes"))
}

/// `mcpx trust --list`: every record, by file.
fn list(store: &TrustStore, json: bool) -> i32 {
    if json {
        output::say_json(&serde_json::to_string(&store.entries).unwrap_or_default());
    } else if store.entries.is_empty() {
        output::say("no project file entry is trusted (`mcpx trust` in a project reviews its files)");
    } else {
        let rows: Vec<Vec<String>> = store
            .entries
            .iter()
            .map(|r| vec![r.file.display().to_string(), r.server.clone(), r.hash[..12.min(r.hash.len())].to_owned()])
            .collect();
        output::table(&["FILE", "SERVER", "HASH"], &rows);
    }
    0
}
