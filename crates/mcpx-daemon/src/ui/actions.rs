//! What the dashboard may change (`docs/ui.md`, "Acting from the page"): a server's
//! instances restarted or stopped, and its listing refreshed. Each is a `POST
//! /actions/<verb>` that the [`super::gate`] admits only with the session, the page's
//! own origin and the session's CSRF token; each is done as `mcpx restart` and `mcpx
//! refresh` do it, for the caller whose configuration holds the server's file, and
//! recorded in the activity record (path `ui`) and the log.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::activity::Origin;
use crate::api::{ApiError, ErrorKind, RefreshRequest, RestartRequest};
use crate::daemon::Daemon;

/// The body of an action: the server, and the file that defines it (as the page names
/// it), which decides whose configuration it is.
#[derive(Debug, Deserialize)]
pub struct Act {
    /// The server.
    pub server: String,
    /// Its configuration file.
    pub file: PathBuf,
}

/// The verbs an action may have.
pub const VERBS: [&str; 3] = ["restart", "stop", "refresh"];

/// Does `verb` to `act`'s server; its answer, as the control API's route answers it
/// (`restart`: `{"server", "restarted", "pid"}`; `stop`: `{"server", "stopped"}`;
/// `refresh`: `{<server>: {"ok"}}`).
///
/// Errors: an unknown verb (`usage`); the file no longer defines the server
/// (`unknown_server`); what `mcpx restart` or `mcpx refresh` would fail with.
pub async fn act(d: &Arc<Daemon>, verb: &str, act: &Act) -> Result<Value, ApiError> {
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
        "stop" => match d.targets.target(&entry) {
            Ok(target) => {
                let stopped = d.pool.stop_server(&target.fingerprint, None).await;
                Ok(json!({ "server": act.server, "stopped": stopped }))
            }
            Err(e) => Err(ApiError::from(e)),
        },
        verb => Err(ApiError::new(ErrorKind::Usage, format!("no action `{verb}`: one of {}", VERBS.join(", ")))),
    };
    let origin = Origin { path: "ui".into(), client: "dashboard (mcpx ui)".into(), protocol: None };
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
