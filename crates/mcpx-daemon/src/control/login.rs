//! `POST /v1/auth/login`: a user's login to a remote server, run by the daemon (which
//! resolves the caller's entry, holds the secret store and later uses the tokens),
//! answered as JSON lines: `{"open": <url>}` when the user has to open the
//! authorization URL, or, for a device login (`"device": true`, RFC 8628),
//! `{"device": {"user_code", "verification_uri", "verification_uri_complete",
//! "expires_in"}}` while the daemon polls; then `{"result": {...}}` or
//! `{"error": {...}}`. The CLI opens the browser; the daemon's loopback listener on
//! 127.0.0.1 takes the redirect. A client that goes away ends the login.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::api::{ApiError, AuthRequest, ErrorBody, ErrorKind};
use crate::auth::login::{LoginTarget, Prompt, login};
use crate::daemon::Daemon;
use crate::policy;

/// How many lines the answer buffers: an `open` and the outcome.
const LINES: usize = 4;

/// Runs the login of `req.server` for `req.caller` in a task of its own; returns the
/// answer's lines, each ending with a newline.
pub fn login_lines(d: Arc<Daemon>, req: AuthRequest) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel(LINES);
    tokio::spawn(async move {
        let outcome = tokio::select! {
            outcome = run(&d, &req, &tx) => outcome,
            () = tx.closed() => return,
        };
        let line = match outcome {
            Ok(done) => serde_json::json!({ "result": done }).to_string(),
            Err(error) => serde_json::to_string(&ErrorBody { error }).unwrap_or_default(),
        };
        let _ = tx.send(line_of(line)).await;
    });
    rx
}

/// The login; its outcome's `result`: `server`, `issuer`, `resource`, `scopes`,
/// `expires_at` (seconds since the Unix epoch, or null) and `location` (where the
/// tokens are kept).
async fn run(d: &Daemon, req: &AuthRequest, tx: &mpsc::Sender<Vec<u8>>) -> Result<serde_json::Value, ApiError> {
    let name = req.server.as_deref().ok_or_else(|| ApiError::new(ErrorKind::Usage, "name the server to log in to"))?;
    let config = d.resolve_for(&req.caller)?;
    let entry = d.server(&config, name)?;
    policy::check_server(entry)?;
    let (url, oauth) = super::logins::remote_parts(d, entry, "log in")?;
    let http = super::logins::oauth_http()?;
    let target = LoginTarget {
        http: &http,
        state: &d.dirs.state,
        server: name,
        url: &url,
        oauth: oauth.as_ref(),
        device: req.device,
    };
    let mut show = |prompt: Prompt<'_>| {
        let line = match prompt {
            Prompt::Open(url) => serde_json::json!({ "open": url.as_str() }),
            Prompt::Device(code) => serde_json::json!({ "device": code }),
        };
        tx.try_send(line_of(line.to_string())).map_err(|_| "the command that asked for the login went away".to_owned())
    };
    let done =
        login(&target, &mut show).await.map_err(|m| ApiError::new(ErrorKind::Auth, format!("server `{name}`: {m}")))?;
    tracing::info!(server = %name, issuer = %done.issuer, resource = %done.resource, "logged in");
    // A new login may be another account: no list fetched as the one before is kept
    // for it (MCP 2026-07-28, Server, Utilities, "Caching": a private result is not
    // shared across authorization contexts).
    d.schema.forget_private(&entry.cache_key());
    d.targets.logins_changed();
    Ok(serde_json::json!({
        "server": name,
        "issuer": done.issuer,
        "resource": done.resource,
        "scopes": done.scopes,
        "expires_at": done.expires_at,
        "location": done.location,
    }))
}

/// `text` and a newline.
fn line_of(text: String) -> Vec<u8> {
    let mut line = text.into_bytes();
    line.push(b'\n');
    line
}
