//! What the dashboard may change (`docs/ui.md`, "Acting from the page"): a server's
//! instances restarted or stopped, its listing refreshed, its held definitions approved
//! or rejected as `mcpx pins review` decides them, and a project file's entries trusted
//! as `mcpx trust` shows them. Each is a `POST
//! /actions/<verb>` that the [`super::gate`] admits only with the session, the page's
//! own origin and the session's CSRF token; each is done as `mcpx restart` and `mcpx
//! refresh` do it, for the caller whose configuration holds the server's file, and
//! recorded in the activity record (path `ui`) and the log.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::activity::Origin;
use crate::api::pins::ReviewRequest;
use crate::api::{ApiError, AuthRequest, ErrorKind, RefreshRequest, RestartRequest};
use crate::daemon::Daemon;

/// The body of an action: the server, and the file that defines it (as the page names
/// it), which decides whose configuration it is; for `trust`, the file's entries to
/// trust, each with the hash the page showed.
#[derive(Debug, Deserialize)]
pub struct Act {
    /// The server (not for `trust`).
    #[serde(default)]
    pub server: String,
    /// Its configuration file.
    pub file: PathBuf,
    /// `trust`: the entries, `{"server", "hash"}` each.
    #[serde(default)]
    pub entries: Vec<Shown>,
    /// `review`: the decisions on held definitions, as `POST /v1/pins/review` takes them.
    #[serde(default)]
    pub decisions: Vec<crate::api::pins::PinDecision>,
}

/// An entry of a project file as the trust page showed it.
#[derive(Debug, Deserialize)]
pub struct Shown {
    /// The server's name.
    pub server: String,
    /// Its trust hash (`entry_hash`), as shown.
    pub hash: String,
}

/// The verbs an action may have.
pub const VERBS: [&str; 6] = ["restart", "stop", "refresh", "trust", "review", "logout"];

/// Does `verb` to `act`'s server; its answer, as the control API's route answers it
/// (`restart`: `{"server", "restarted", "pid"}`; `stop`: `{"server", "stopped"}`;
/// `refresh`: `{<server>: {"ok"}}`).
///
/// Errors: an unknown verb (`usage`); the file no longer defines the server
/// (`unknown_server`); what `mcpx restart` or `mcpx refresh` would fail with.
pub async fn act(d: &Arc<Daemon>, verb: &str, act: &Act) -> Result<Value, ApiError> {
    if verb == "trust" {
        return trust(d, act);
    }
    let caller = super::view::caller_for(d, &act.file);
    let config = d.resolve_for(&caller)?;
    let entry = d.server(&config, &act.server)?.clone();
    if entry.source != act.file {
        let said = format!("{} does not define {}; reload the page", act.file.display(), act.server);
        return Err(ApiError::new(ErrorKind::UnknownServer, said));
    }
    let server = Some(act.server.clone());
    let done = match verb {
        "restart" => crate::control::restart(d, &RestartRequest { caller, server, key: None }).await,
        "refresh" => crate::control::refresh(d, &RefreshRequest { caller, server, ..RefreshRequest::default() }).await,
        "logout" => {
            let req = AuthRequest { caller, server, device: false };
            crate::control::logins::logout(d, &req).await
        }
        "review" => {
            let req = ReviewRequest { caller, server: act.server.clone(), decisions: act.decisions.clone() };
            crate::control::pins::review(d, &req).await.map(|answer| json!(answer))
        }
        "stop" => match d.targets.target(&entry) {
            Ok(target) => {
                let stopped = d.pool.stop_server(&target.fingerprint, None).await;
                Ok(json!({ "server": act.server, "stopped": stopped }))
            }
            Err(e) => Err(ApiError::from(e)),
        },
        verb => Err(ApiError::new(ErrorKind::Usage, format!("no action `{verb}`: one of {}", VERBS.join(", ")))),
    };
    let origin = page();
    match &done {
        Ok(answer) => {
            tracing::info!(server = %act.server, verb, "the dashboard's action: {answer}");
            d.record_action(&entry, &origin, verb, "ok", answer.to_string());
        }
        Err(e) => {
            tracing::warn!(server = %act.server, verb, "the dashboard's action failed: {}", e.message);
            d.record_action(&entry, &origin, verb, "failed", e.message.clone());
        }
    }
    done
}

/// Starts a login to `act`'s server (a device login with `device`), as `POST
/// /v1/auth/login` does: its answer's lines (`{"open": <url>}` or `{"device": {...}}`,
/// then `{"result"}` or `{"error"}`), the outcome recorded as the dashboard's when it
/// comes. The page going away ends the login.
///
/// Errors: the file no longer defines the server (`unknown_server`), or the caller's
/// configuration cannot be read.
pub fn login(d: &Arc<Daemon>, act: &Act, device: bool) -> Result<tokio::sync::mpsc::Receiver<Vec<u8>>, ApiError> {
    let caller = super::view::caller_for(d, &act.file);
    let config = d.resolve_for(&caller)?;
    let entry = d.server(&config, &act.server)?.clone();
    let req = AuthRequest { caller, server: Some(act.server.clone()), device };
    let mut lines = crate::control::login::login_lines(d.clone(), req);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let d = d.clone();
    tokio::spawn(async move {
        while let Some(line) = lines.recv().await {
            let outcome = match line.as_slice() {
                l if l.starts_with(br#"{"result""#) => Some("ok"),
                l if l.starts_with(br#"{"error""#) => Some("failed"),
                _ => None,
            };
            if let Some(outcome) = outcome {
                let said = String::from_utf8_lossy(&line).trim().to_owned();
                tracing::info!(server = %entry.name, "the dashboard's login: {said}");
                d.record_action(&entry, &page(), "login", outcome, said);
            }
            if tx.send(line).await.is_err() {
                return;
            }
        }
    });
    Ok(rx)
}

/// The dashboard, as the activity record names it.
fn page() -> Origin {
    Origin { path: "ui".into(), client: "dashboard (mcpx ui)".into(), protocol: None }
}

/// Trusts the entries of the project file `act.file` that `act.entries` name, each only
/// while its hash is still the one the page showed: an entry edited since is left
/// untrusted (and said so), as `mcpx trust` would show it anew. Answers `{"trusted":
/// [names], "changed": [names]}`.
///
/// Errors: the file cannot be read or parsed (`config`); the trust records cannot be
/// changed (`config`).
fn trust(d: &Arc<Daemon>, act: &Act) -> Result<Value, ApiError> {
    use crate::config::{TrustRecord, change_records, project_dir, project_entries, trust_key};
    let config_error = |e: String| ApiError::new(ErrorKind::Config, e);
    let file = trust_key(&act.file).map_err(|e| config_error(format!("{}: {e}", act.file.display())))?;
    let entries = project_entries(project_dir(&file), d.config.env()).map_err(|e| config_error(e.to_string()))?;
    let current: std::collections::HashMap<&str, &str> = entries
        .iter()
        .filter(|e| e.file == file && e.refused.is_none())
        .map(|e| (e.server.as_str(), e.hash.as_str()))
        .collect();
    let (trusted, changed): (Vec<&Shown>, Vec<&Shown>) =
        act.entries.iter().partition(|s| current.get(s.server.as_str()) == Some(&s.hash.as_str()));
    change_records(&d.dirs.state, &d.dirs.paths.state, |store| {
        for s in &trusted {
            store.add(TrustRecord { file: file.clone(), server: s.server.clone(), hash: s.hash.clone() });
        }
        Ok(((), !trusted.is_empty()))
    })
    .map_err(config_error)?;
    let names = |list: &[&Shown]| list.iter().map(|s| s.server.clone()).collect::<Vec<_>>();
    let answer = json!({ "trusted": names(&trusted), "changed": names(&changed) });
    tracing::info!(file = %file.display(), "the dashboard's action: trust {answer}");
    let contents = crate::daemon::off_the_runtime(|| d.config.file_contents(&file)).ok().flatten();
    for entry in contents.iter().flat_map(|c| &c.servers) {
        if trusted.iter().any(|s| s.server == entry.name) {
            d.record_action(entry, &page(), "trust", "ok", format!("trusted {} of {}", entry.name, file.display()));
        }
    }
    Ok(answer)
}
