//! The tokens of one login, kept in the secret store ([`Kept`]): one secret per
//! authorization server and resource, so every entry that names the same server shares
//! the login, and a daemon restart or upgrade finds it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcpx_platform::fs::Dir;
use mcpx_platform::secrets::{SecretStore, SecretValue, Wanted};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::OwnedMutexGuard;
use url::Url;

use super::discovery::covers;

use mcpx_platform::sync::lock;

/// How long before its expiry a token is refreshed rather than used.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// What one login keeps: the tokens, and what refreshing them needs. Secret as a whole
/// (its `Debug` shows the issuer and resource only); stored as JSON under
/// [`secret_name`].
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    /// The authorization server's issuer.
    pub issuer: String,
    /// The resource the tokens are for (RFC 8707).
    pub resource: String,
    /// Where to refresh them.
    pub token_endpoint: String,
    /// The client the tokens were issued to.
    pub client_id: String,
    /// That client's secret, when it has one (given at registration, or configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// How the client authenticates at the token endpoint (RFC 8414 spelling).
    pub auth_method: String,
    /// The grant the tokens came from (`authorization_code`, `client_credentials`).
    pub grant: String,
    /// The access token.
    pub access_token: String,
    /// The refresh token, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires, in seconds since the Unix epoch; `None` when
    /// the server did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The scopes granted (or asked for, when the answer did not say).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Scopes the server asked for beyond those (a 403 `insufficient_scope`, MCP
    /// 2025-11-25, Authorization, "Runtime Insufficient Scope Errors"): the next login
    /// asks for them too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_up: Vec<String>,
    /// Who logged in, as far as mcpx can tell: a random id made at each `mcpx auth
    /// login` (kept across refreshes), so the private listings of one login are not
    /// shown to the next (docs/api.md, "The schema cache"). `None` for a client
    /// credentials grant, whose identity is its client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login_id: Option<String>,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept")
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

impl Kept {
    /// The identity of this login for the schema cache's authorization contexts: the
    /// login's own id, else the client at its issuer.
    pub fn identity(&self) -> String {
        match &self.login_id {
            Some(id) => format!("login {id}"),
            None => format!("client {} at {}", self.client_id, self.issuer),
        }
    }

    /// Whether the access token is expired, or expires within [`REFRESH_MARGIN`].
    pub fn due(&self, now: SystemTime) -> bool {
        let now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        self.expires_at.is_some_and(|at| at <= now + REFRESH_MARGIN.as_secs())
    }
}

/// `a` and then those of `b` it lacks, in order.
pub fn union(a: &[String], b: &[String]) -> Vec<String> {
    let mut all = a.to_vec();
    for scope in b {
        if !all.contains(scope) {
            all.push(scope.clone());
        }
    }
    all
}

/// The seconds since the Unix epoch at which a token given `expires_in` seconds ago
/// (at `now`) expires.
pub fn expiry(now: SystemTime, expires_in: Option<Duration>) -> Option<u64> {
    let now = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    expires_in.map(|d| (now + d).as_secs())
}

/// How the secret store names of logins begin; no user secret may have it, and
/// `mcpx secret ls` shows the secrets that have it as logins.
pub const PREFIX: &str = mcpx_platform::secrets::LOGIN_PREFIX;

/// The secret store name of the login for `issuer` and `resource`:
/// `oauth-<16 hex digits of SHA-256>`, a valid secret name whatever the URLs hold.
pub fn secret_name(issuer: &str, resource: &str) -> String {
    let mut h = Sha256::new();
    h.update(issuer.as_bytes());
    h.update([0]);
    h.update(resource.as_bytes());
    let digest = h.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{PREFIX}{hex}")
}

/// Every kept login whose resource covers the server at `url` (the same origin, and
/// `url`'s path at or below the resource's: [`covers`]), the most specific resource
/// first. These are the logins a request to the server may use, found without asking
/// the network which authorization server it names.
///
/// Errors: the store cannot be read (the store's message).
pub fn covering(state: &Dir, url: &Url) -> Result<Vec<Kept>, String> {
    Ok(covering_in(&all(state)?, url))
}

/// Those of `logins` that cover the server at `url`, as [`covering`] orders them.
pub fn covering_in(logins: &[Kept], url: &Url) -> Vec<Kept> {
    let mut found: Vec<Kept> = logins
        .iter()
        .filter(|k| Url::parse(&k.resource).is_ok_and(|resource| covers(&resource, url)))
        .cloned()
        .collect();
    found.sort_by_key(|k| std::cmp::Reverse(k.resource.len()));
    found
}

/// Every login kept in the store recorded in `state`; a damaged one is left out.
///
/// Errors: the store cannot be read (the store's message).
pub fn all(state: &Dir) -> Result<Vec<Kept>, String> {
    let store = SecretStore::open(state).map_err(|e| e.to_string())?;
    let mut logins = Vec::new();
    for name in store.list().map_err(|e| e.to_string())?.into_iter().filter(|n| n.starts_with(PREFIX)) {
        let Some(value) = store.get(&name).map_err(|e| e.to_string())? else { continue };
        if let Ok(kept) = serde_json::from_str::<Kept>(value.expose()) {
            logins.push(kept);
        }
    }
    Ok(logins)
}

/// Reads the login for `issuer` and `resource` from the store recorded in `state`.
///
/// Errors: the store cannot be read, or the value is not a login (the message names
/// the secret, and says to log in again).
pub fn load(state: &Dir, issuer: &str, resource: &str) -> Result<Option<Kept>, String> {
    let name = secret_name(issuer, resource);
    let store = SecretStore::open(state).map_err(|e| e.to_string())?;
    let Some(value) = store.get(&name).map_err(|e| e.to_string())? else { return Ok(None) };
    serde_json::from_str(value.expose())
        .map(Some)
        .map_err(|_| format!("the kept login `{name}` is damaged; log in again (`mcpx auth login`)"))
}

/// Holds the renewal lock of the login for `issuer` and `resource` until the guard is
/// dropped: one task of the daemon at a time loads, renews and saves a login, so two
/// that both find it due (or both get a 401) refresh it once. With refresh token
/// rotation (OAuth 2.1 §4.3.1) a second refresh would spend a revoked refresh token and
/// lose the login. The holder re-loads the login after taking the lock.
pub async fn hold(issuer: &str, resource: &str) -> OwnedMutexGuard<()> {
    static LOCKS: OnceLock<Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    let one = {
        let mut locks = lock(LOCKS.get_or_init(Mutex::default));
        // Locks nobody holds or waits for are dropped, so the map stays as small as the
        // renewals under way.
        locks.retain(|_, held| held.strong_count() > 0);
        let name = secret_name(issuer, resource);
        match locks.get(&name).and_then(Weak::upgrade) {
            Some(one) => one,
            None => {
                let one = Arc::new(tokio::sync::Mutex::new(()));
                locks.insert(name, Arc::downgrade(&one));
                one
            }
        }
    };
    one.lock_owned().await
}

/// Forgets the login for `issuer` and `resource`; returns whether one was kept.
///
/// Errors: the store cannot be read or written (the store's message).
pub fn forget(state: &Dir, issuer: &str, resource: &str) -> Result<bool, String> {
    let store = SecretStore::open(state).map_err(|e| e.to_string())?;
    store.remove(&secret_name(issuer, resource)).map_err(|e| e.to_string())
}

/// Keeps `kept` in the store recorded in `state` (choosing one, as `mcpx secret set`
/// does, when none is recorded yet); returns where it went.
///
/// Errors: the store cannot be chosen or written (the message says why, never a value).
pub fn save(state: &Dir, kept: &Kept) -> Result<String, String> {
    let name = secret_name(&kept.issuer, &kept.resource);
    let wanted = std::env::var(mcpx_platform::secrets::STORE_VARIABLE).ok();
    let wanted = Wanted::parse(wanted.as_deref()).map_err(|e| e.to_string())?;
    let store = SecretStore::choose(state, wanted).map_err(|e| e.to_string())?;
    let json = serde_json::to_string(kept).map_err(|e| e.to_string())?;
    store.set(&name, &SecretValue::new(json)).map_err(|e| e.to_string())?;
    Ok(store.location())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept() -> Kept {
        Kept {
            issuer: "https://auth.example.com".into(),
            resource: "https://api.example.com/mcp".into(),
            token_endpoint: "https://auth.example.com/token".into(),
            client_id: "c".into(),
            client_secret: Some("cs-value".into()),
            auth_method: "client_secret_basic".into(),
            grant: "authorization_code".into(),
            access_token: "at-value".into(),
            refresh_token: Some("rt-value".into()),
            expires_at: Some(1_000),
            scopes: vec!["a".into()],
            step_up: Vec::new(),
            login_id: None,
        }
    }

    #[test]
    fn names_are_per_issuer_and_resource_and_valid() {
        let a = secret_name("https://a", "https://r/mcp");
        assert_eq!(a.len(), "oauth-".len() + 16);
        mcpx_platform::secrets::check_name(&a).unwrap();
        assert_ne!(a, secret_name("https://a", "https://r/mcp2"));
        assert_ne!(a, secret_name("https://a/", "https://r/mcp"));
        assert_eq!(a, secret_name("https://a", "https://r/mcp"));
    }

    #[test]
    fn debug_shows_no_token_and_due_has_a_margin() {
        let k = kept();
        let shown = format!("{k:?}");
        for secret in ["at-value", "rt-value", "cs-value"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        let at = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
        assert!(!k.due(at(900)));
        assert!(k.due(at(941)));
        assert!(!Kept { expires_at: None, ..k }.due(at(u32::MAX.into())));
        assert_eq!(expiry(at(10), Some(Duration::from_secs(5))), Some(15));
    }

    #[test]
    fn union_keeps_order_and_drops_repeats() {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(union(&v(&["a", "b"]), &v(&["b", "c", "a", "d"])), v(&["a", "b", "c", "d"]));
        assert_eq!(union(&[], &v(&["x"])), v(&["x"]));
    }

    #[test]
    fn kept_logins_round_trip_through_the_file_store() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let state = Dir::open_private(dir.path(), false).unwrap();
        assert_eq!(load(&state, "https://auth.example.com", "https://api.example.com/mcp").unwrap(), None);
        let k = kept();
        let store = SecretStore::choose(&state, Wanted::File).unwrap();
        store.set(&secret_name(&k.issuer, &k.resource), &SecretValue::new(serde_json::to_string(&k).unwrap())).unwrap();
        assert_eq!(load(&state, &k.issuer, &k.resource).unwrap(), Some(k.clone()));
        assert_eq!(save(&state, &k).unwrap(), store.location());
        store.set(&secret_name(&k.issuer, &k.resource), &SecretValue::new("{".into())).unwrap();
        let e = load(&state, &k.issuer, &k.resource).unwrap_err();
        assert!(e.contains("log in again") && !e.contains("at-value"), "{e}");
    }
}
