//! `mcpx secret set|ls|rm`: the secret store, from the CLI process (no daemon is
//! needed; a running daemon reads the store afresh at each server start).
//!
//! A value is read hidden from the terminal, or as one line from stdin, and is never
//! printed: only names and the store's location are. `ls` lists the logins to remote
//! servers (`oauth-…`, kept by `mcpx auth login`) apart from the user's secrets.
//!
//! The first `set` chooses the store and records it (`SecretStore::choose`): the OS
//! keychain when one answers, else the file, or what `MCPX_SECRET_STORE` (`file` or
//! `keychain`) asks for.

use std::io::{BufRead, IsTerminal};
use std::path::Path;

use mcpx_api::paths::DirError;
use mcpx_api::{ApiError, ErrorKind};
use mcpx_daemon::auth::tokens::PREFIX;
use mcpx_platform::fs::Dir;
use mcpx_platform::secrets::{STORE_RECORD, STORE_VARIABLE, SecretError, SecretStore, SecretValue, Wanted, check_name};
use serde::Serialize;

use crate::output;

/// What `mcpx secret` is asked to do.
#[derive(Debug)]
pub enum Action {
    /// Set NAME to a value read from the terminal or stdin.
    Set(String),
    /// List the names and where they are kept.
    Ls,
    /// Remove NAME.
    Rm(String),
}

/// `mcpx secret ls --json`: the store and the names in it.
#[derive(Debug, Serialize)]
struct Listing {
    /// The store's kind (`file`, `secret-service`, `keychain`), or `none` before the
    /// first `set` chooses one.
    store: &'static str,
    /// Where it keeps the secrets: `file <path>`, `secret-service <bus address>`,
    /// `keychain <service>`, or `none` before the first `set`.
    location: String,
    /// The names of the user's secrets, sorted.
    names: Vec<String>,
    /// The names of the logins to remote servers kept in the same store (`oauth-…`,
    /// written by `mcpx auth login`), sorted.
    logins: Vec<String>,
}

/// Runs `action` on the store recorded in the state directory `state` and returns the
/// exit status: 0, or an error of kind `usage` (a bad name, an empty value, removing a
/// secret that is not set: exit 2) or `config` (the store cannot be read or written:
/// exit 2).
pub fn run(state: &Path, action: Action, json: bool) -> Result<i32, ApiError> {
    let dir = Dir::open_private(state, true)
        .map_err(|e| ApiError::new(ErrorKind::Daemon, DirError::of(state, "MCPX_STATE_DIR", e).to_string()))?;
    let store = SecretStore::open(&dir).map_err(store_error)?;
    match action {
        Action::Set(name) => {
            user_name(&name, "choose another name")?;
            let wanted = std::env::var(STORE_VARIABLE).ok();
            let wanted =
                Wanted::parse(wanted.as_deref()).map_err(|e| ApiError::new(ErrorKind::Usage, e.to_string()))?;
            let value = read_value(&name)?;
            let store = SecretStore::choose(&dir, wanted).map_err(store_error)?;
            store.set(&name, &value).map_err(store_error)?;
            if json {
                output::say_json(&serde_json::json!({ "set": name, "location": store.location() }).to_string());
            } else {
                output::say(&format!("secret `{name}` set ({})", store.location()));
            }
        }
        Action::Ls if !dir.contains(STORE_RECORD) => {
            // Nothing was ever set: the first `set` chooses the store.
            if json {
                let listing =
                    Listing { store: "none", location: "none".to_owned(), names: Vec::new(), logins: Vec::new() };
                output::say_json(&serde_json::to_string(&listing).unwrap_or_default());
            } else {
                output::say("no secrets set (the first `mcpx secret set` chooses the store)");
            }
        }
        Action::Ls => {
            let (logins, names) = store.list().map_err(store_error)?.into_iter().partition(|n| n.starts_with(PREFIX));
            if json {
                let listing = Listing { store: store.kind(), location: store.location(), names, logins };
                output::say_json(&serde_json::to_string(&listing).unwrap_or_default());
                return Ok(0);
            }
            if names.is_empty() {
                output::say(&format!("no secrets set ({})", store.location()));
            } else {
                let rows: Vec<Vec<String>> = names.into_iter().map(|n| vec![n, store.location()]).collect();
                output::table(&["NAME", "KEPT IN"], &rows);
            }
            if !logins.is_empty() {
                output::say(&format!(
                    "and {} login(s) to remote servers ({}): `mcpx auth status` shows them, `mcpx auth logout <server>` forgets one",
                    logins.len(),
                    logins.join(" ")
                ));
            }
        }
        Action::Rm(name) => {
            user_name(&name, "`mcpx auth logout <server>` revokes and forgets one")?;
            if !store.remove(&name).map_err(store_error)? {
                return Err(ApiError::new(
                    ErrorKind::Usage,
                    format!("secret `{name}` is not set (`mcpx secret ls` lists the names)"),
                ));
            }
            if json {
                output::say_json(&serde_json::json!({ "removed": name }).to_string());
            } else {
                output::say(&format!("secret `{name}` removed"));
            }
        }
    }
    Ok(0)
}

/// Stores `value` (`None`: asked for on the terminal, else read as one line of stdin) as
/// the user's secret `name` in the store recorded in the state directory `state` (the
/// first secret chooses it); where it is kept, for messages. For `mcpx add`'s
/// `--secret-env` and secret inputs.
///
/// Errors: an invalid name or an empty value (`usage`); the store cannot be written
/// (`config`).
pub(crate) fn store(state: &Path, name: &str, value: Option<&str>) -> Result<String, ApiError> {
    user_name(name, "choose another name")?;
    let dir = Dir::open_private(state, true)
        .map_err(|e| ApiError::new(ErrorKind::Daemon, DirError::of(state, "MCPX_STATE_DIR", e).to_string()))?;
    let wanted = std::env::var(STORE_VARIABLE).ok();
    let wanted = Wanted::parse(wanted.as_deref()).map_err(|e| ApiError::new(ErrorKind::Usage, e.to_string()))?;
    let value = match value {
        Some(v) if !v.is_empty() => SecretValue::new(v.to_owned()),
        _ => read_value(name)?,
    };
    let store = SecretStore::choose(&dir, wanted).map_err(store_error)?;
    store.set(name, &value).map_err(store_error)?;
    Ok(store.location())
}

/// Checks that `name` is a valid name for a user's secret: not an `oauth-…` name,
/// which belong to the logins `mcpx auth login` keeps (`instead` says what to do).
///
/// Errors (`usage`): an invalid name, or a login's name.
fn user_name(name: &str, instead: &str) -> Result<(), ApiError> {
    check_name(name).map_err(|e| ApiError::new(ErrorKind::Usage, e.to_string()))?;
    if name.starts_with(PREFIX) {
        return Err(ApiError::new(
            ErrorKind::Usage,
            format!("`{PREFIX}…` names are the logins to remote servers that `mcpx auth login` keeps: {instead}"),
        ));
    }
    Ok(())
}

/// The value: typed hidden on a terminal, else the first line of stdin, its line end
/// stripped. On a terminal it is read from stdin's own terminal (`/dev/stdin`, not
/// the controlling terminal `rpassword` defaults to: the one found to be a terminal
/// is the one read), with echo off while it is typed; the prompt goes to stderr.
///
/// Errors: reading failed, or the value is empty (`usage`).
fn read_value(name: &str) -> Result<SecretValue, ApiError> {
    let read_error = |e: std::io::Error| ApiError::new(ErrorKind::Usage, format!("cannot read the value: {e}"));
    let mut line = if std::io::stdin().is_terminal() {
        let config =
            rpassword::ConfigBuilder::new().input_file_path("/dev/stdin").output_writer(std::io::stderr()).build();
        rpassword::prompt_password_with_config(format!("value of {name}: "), config).map_err(read_error)?
    } else {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).map_err(read_error)?;
        line
    };
    if line.ends_with('\n') {
        line.pop();
        if line.ends_with('\r') {
            line.pop();
        }
    }
    if line.is_empty() {
        return Err(ApiError::new(
            ErrorKind::Usage,
            format!("the value of `{name}` is empty: type it, or pipe it on stdin (`mcpx secret set {name} < file`)"),
        ));
    }
    if line.contains('\0') {
        // No environment variable, argument or header can hold one.
        return Err(ApiError::new(
            ErrorKind::Usage,
            format!("the value of `{name}` holds a NUL byte, which no server can be given"),
        ));
    }
    Ok(SecretValue::new(line))
}

/// A store failure as an error of kind `config` (exit 2): its message names the file
/// and what to do, never a value.
fn store_error(e: SecretError) -> ApiError {
    ApiError::new(ErrorKind::Config, e.to_string())
}
