//! `POST /v1/auth/status` and `POST /v1/auth/logout`: the kept logins of the caller's
//! remote servers, and a logout from one (`docs/api.md`). A server's login is the kept
//! one whose resource covers its URL ([`tokens::covering`]), found without the
//! network; no answer holds a token.

use mcpx_platform::secrets::SecretStore;
use serde_json::{Value, json};

use crate::api::{ApiError, AuthRequest, ErrorKind};
use crate::auth::discovery::covers;
use crate::auth::logout::{Revocation, logout as log_out};
use crate::auth::tokens::{self, Kept};
use crate::config::{Grant, ServerEntry, TransportSpec};
use crate::daemon::Daemon;
use crate::policy;

/// `POST /v1/auth/status`: `{"store": {"kind", "location"}, "servers": [...]}`, a row
/// per remote server of the caller's configuration, by name: `server`, `url` (as
/// written) and `state`, one of `logged_in`, `expired` (no refresh token is kept: log
/// in again), `not_logged_in`, `client_credentials` (no token yet; the first call gets
/// one), `headers` (the entry sets `Authorization` itself), `untrusted`, or `error`
/// (with `error`: the entry cannot be expanded, or the store read). A kept login adds
/// `issuer`, `resource`, `scopes`, `expires_at` (seconds since the Unix epoch, or null)
/// and `refreshable` (a refresh token is kept, or the grant is client credentials).
///
/// Errors: the caller's configuration cannot be read (`config`).
pub fn status(d: &Daemon, req: &AuthRequest) -> Result<Value, ApiError> {
    let config = d.resolve_for(&req.caller)?;
    let now = std::time::SystemTime::now();
    // Read once: each get may be a round trip to a keychain.
    let logins = tokens::all(&d.dirs.state).map_err(|m| ApiError::new(ErrorKind::Config, m));
    let mut servers = Vec::new();
    for entry in config.servers.values() {
        if matches!(entry.transport, TransportSpec::Remote { .. }) {
            servers.push(login_row(d, entry, &logins, now));
        }
    }
    let store = SecretStore::open(&d.dirs.state).map_err(|e| ApiError::new(ErrorKind::Config, e.to_string()))?;
    Ok(json!({ "store": { "kind": store.kind(), "location": store.location() }, "servers": servers }))
}

/// The `auth status` row of the remote server `entry` (see [`status`]), `logins` being
/// every kept login as `tokens::all` read them.
pub fn login_row(
    d: &Daemon,
    entry: &ServerEntry,
    logins: &Result<Vec<Kept>, ApiError>,
    now: std::time::SystemTime,
) -> Value {
    let (url, authorized) = match &entry.transport {
        TransportSpec::Remote { url, headers, .. } => {
            (Some(url), headers.keys().any(|k| k.eq_ignore_ascii_case("authorization")))
        }
        TransportSpec::Stdio { .. } => (None, false),
    };
    let mut row = json!({ "server": entry.name, "url": url });
    let client_credentials = entry.oauth.as_ref().is_some_and(|o| o.grant == Grant::ClientCredentials);
    let state = if authorized {
        "headers"
    } else if !policy::server_trusted(entry) {
        "untrusted"
    } else {
        match kept_login(d, entry, logins) {
            Err(e) => {
                row["error"] = e.message.into();
                "error"
            }
            Ok(Some(kept)) => {
                let refreshable = kept.refresh_token.is_some() || kept.grant == "client_credentials";
                row["issuer"] = kept.issuer.clone().into();
                row["resource"] = kept.resource.clone().into();
                row["scopes"] = kept.scopes.clone().into();
                row["expires_at"] = kept.expires_at.into();
                row["refreshable"] = refreshable.into();
                let expired = kept.expires_at.is_some_and(|_| kept.due(now) && !refreshable);
                if expired { "expired" } else { "logged_in" }
            }
            Ok(None) if client_credentials => "client_credentials",
            Ok(None) => "not_logged_in",
        }
    };
    row["state"] = state.into();
    row
}

/// `POST /v1/auth/logout`: revokes (RFC 7009, where the authorization server offers
/// it) and forgets the kept logins of `req.server`, then stops its running instances,
/// and those of the caller's other entries that shared a forgotten login, so none keeps
/// using a forgotten token. Answers `{"server", "logins": [{"issuer",
/// "resource", "revocation": "revoked" | "not_offered" | "failed", "error"?}],
/// "stopped"}`; `logins` is empty when none was kept.
///
/// Errors: no server named, or not a remote one (`usage`); the entry cannot be expanded
/// (`config`); the secret store cannot be read or written (`auth`).
pub async fn logout(d: &Daemon, req: &AuthRequest) -> Result<Value, ApiError> {
    let name = req.server.as_deref().ok_or_else(|| ApiError::new(ErrorKind::Usage, "name the server to log out of"))?;
    let config = d.resolve_for(&req.caller)?;
    let entry = d.server(&config, name)?;
    let (url, oauth) = remote_parts(d, entry, "log out")?;
    let http = oauth_http()?;
    let done = log_out(&http, &d.dirs.state, &url, oauth.as_ref())
        .await
        .map_err(|m| ApiError::new(ErrorKind::Auth, format!("server `{name}`: {m}")))?;
    d.targets.logins_changed();
    // The caller's other entries that share a forgotten login stop too.
    let forgotten: Vec<url::Url> = done.iter().filter_map(|l| url::Url::parse(&l.resource).ok()).collect();
    let mut stopped = 0;
    for other in config.servers.values() {
        let shares = other.name == entry.name
            || (matches!(other.transport, TransportSpec::Remote { .. })
                && policy::server_trusted(other)
                && d.targets.remote_url(other).is_ok_and(|url| forgotten.iter().any(|r| covers(r, &url))));
        if shares {
            d.schema.forget_private(&other.cache_key());
            stopped += d.pool.stop_server(&d.targets.target(other)?.fingerprint, None).await;
        }
    }
    let logins: Vec<Value> = done
        .iter()
        .map(|l| {
            let mut row = json!({ "issuer": l.issuer, "resource": l.resource, "revocation": l.revocation.as_str() });
            if let Revocation::Failed(why) = &l.revocation {
                row["error"] = why.clone().into();
            }
            row
        })
        .collect();
    Ok(json!({ "server": name, "logins": logins, "stopped": stopped }))
}

/// The URL and `oauth` block of `entry`, expanded, for `what` (`log in`, `log out`).
///
/// Errors: `entry` is not a remote server (`usage`), not trusted, or cannot be expanded
/// (`config`).
pub(super) fn remote_parts(
    d: &Daemon,
    entry: &ServerEntry,
    what: &str,
) -> Result<(url::Url, Option<crate::config::ExpandedOAuth>), ApiError> {
    if !matches!(entry.transport, TransportSpec::Remote { .. }) {
        let message =
            format!("server `{}` is not a remote server (it has no `url`); only remote servers {what}", entry.name);
        return Err(ApiError::new(ErrorKind::Usage, message));
    }
    d.targets.login_parts(entry).map_err(ApiError::from)
}

/// The HTTP client of a login or logout: it follows no redirects, as token,
/// registration and revocation endpoints are not followed elsewhere (the `oauth2`
/// crate's advice against SSRF).
///
/// Errors: the client cannot be built (`server`).
pub(super) fn oauth_http() -> Result<reqwest::Client, ApiError> {
    reqwest::Client::builder()
        .user_agent(concat!("mcpx/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ApiError::new(ErrorKind::Server, format!("cannot set up the HTTP client: {e}")))
}

/// The kept login `entry` uses, of `logins`: the most specific one covering its
/// expanded URL.
fn kept_login(d: &Daemon, entry: &ServerEntry, logins: &Result<Vec<Kept>, ApiError>) -> Result<Option<Kept>, ApiError> {
    let url = d.targets.remote_url(entry)?;
    let logins = logins.as_ref().map_err(Clone::clone)?;
    Ok(tokens::covering_in(logins, &url).into_iter().next())
}
