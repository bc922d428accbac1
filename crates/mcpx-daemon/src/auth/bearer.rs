//! The bearer of a daemon's requests to a remote server: on a 401, the kept login for
//! the server's authorization server and resource (discovered), refreshed when it is
//! due or was just refused; before a request, a refresh when the token is about to
//! expire. A server that needs a login the user has not done fails at once with
//! [`BearerError::NeedsLogin`], never by waiting for a browser.

use std::time::SystemTime;

use mcpx_platform::fs::Dir;
use url::Url;

use super::challenge::Challenge;
use super::discovery::discover;
use super::fetch::HttpFetch;
use super::flow::{self, ClientInfo, Grant};
use super::login::configured_client;
use super::tokens::{self, Kept};
use crate::config::{ExpandedOAuth, Grant as GrantKind};

/// Why there is no bearer for a server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BearerError {
    /// No login is kept for it, or the kept one is over (refused, and not refreshable).
    #[error("{0}")]
    NeedsLogin(String),
    /// Discovery, the token endpoint or the secret store failed.
    #[error("{0}")]
    Failed(String),
}

/// The kept login for the server at `url`, which answered 401 with `challenge`;
/// `refused` is the access token it just refused, if any, which is then refreshed.
/// An entry whose `oauth` block (`machine`) has the client credentials grant gets its
/// first tokens here, with no login (OAuth 2.1 §4.2).
///
/// Errors: [`BearerError::NeedsLogin`] when none is kept or it cannot be renewed;
/// [`BearerError::Failed`] when discovery or the store fails.
pub async fn on_unauthorized(
    http: &reqwest::Client,
    state: &Dir,
    url: &Url,
    challenge: Option<&Challenge>,
    refused: Option<&str>,
    machine: Option<&ExpandedOAuth>,
) -> Result<Kept, BearerError> {
    let found = discover(&HttpFetch { http }, url, challenge).await.map_err(|e| BearerError::Failed(e.to_string()))?;
    let kept = tokens::load(state, &found.server.issuer, found.resource.as_str()).map_err(BearerError::Failed)?;
    let machine = machine.filter(|o| o.spec.grant == GrantKind::ClientCredentials);
    let kept = match (kept, machine) {
        (Some(kept), _) => kept,
        (None, Some(oauth)) => {
            let client = configured_client(Some(oauth), &found.server).map_err(BearerError::Failed)?;
            let client = client
                .ok_or_else(|| BearerError::Failed("the client credentials grant needs `oauth.clientId`".into()))?;
            let scopes = oauth.spec.scopes.clone().unwrap_or_else(|| found.scopes.clone());
            let grant =
                Grant { server: &found.server, client: &client, resource: found.resource.as_str(), scopes: &scopes };
            let new = flow::client_credentials(http, &grant).await.map_err(BearerError::Failed)?;
            tokens::save(state, &new).map_err(BearerError::Failed)?;
            return Ok(new);
        }
        (None, None) => return Err(BearerError::NeedsLogin("no login is kept for it".to_owned())),
    };
    if refused == Some(kept.access_token.as_str()) || kept.due(SystemTime::now()) {
        return renew(http, state, &kept, machine).await;
    }
    Ok(kept)
}

/// Records that the server at `url` asked (403 `insufficient_scope`, with
/// `challenge`) for scopes beyond those of `kept`, so the next login asks for them too;
/// returns them. The daemon does not authorize again by itself (that needs the user),
/// so a server that keeps asking cannot loop.
///
/// Errors: the login cannot be kept (the store's message).
pub fn step_up(state: &Dir, kept: &Kept, challenge: &Challenge) -> Result<Vec<String>, String> {
    let wanted = tokens::union(&tokens::union(&kept.scopes, &kept.step_up), &challenge.scopes());
    let mut updated = kept.clone();
    updated.step_up = wanted.iter().filter(|s| !kept.scopes.contains(s)).cloned().collect();
    tokens::save(state, &updated)?;
    Ok(wanted)
}

/// Renews `old`: a refresh, or the client credentials grant again; keeps the result.
/// `oauth` is the entry's block, whose private key a `private_key_jwt` client signs
/// with.
///
/// Errors: [`BearerError::NeedsLogin`] when the server refuses (the login is over);
/// [`BearerError::Failed`] when the result cannot be kept.
pub async fn renew(
    http: &reqwest::Client,
    state: &Dir,
    old: &Kept,
    oauth: Option<&ExpandedOAuth>,
) -> Result<Kept, BearerError> {
    let client = ClientInfo::of(old, oauth.and_then(|o| o.private_key.as_deref()));
    let new = if old.grant == "client_credentials" {
        let endpoint = Url::parse(&old.token_endpoint).map_err(|e| BearerError::Failed(e.to_string()))?;
        let server = super::discovery::AuthServer::token_only(old.issuer.clone(), endpoint);
        let grant = Grant { server: &server, client: &client, resource: &old.resource, scopes: &old.scopes };
        flow::client_credentials(http, &grant).await
    } else {
        flow::refresh(http, old, &client).await
    };
    let new = new.map_err(|e| BearerError::NeedsLogin(format!("the login could not be renewed: {e}")))?;
    tokens::save(state, &new).map_err(BearerError::Failed)?;
    tracing::info!(issuer = %new.issuer, resource = %new.resource, "renewed the access token of a kept login");
    Ok(new)
}

#[cfg(test)]
mod tests {
    use mcpx_platform::secrets::{SecretStore, Wanted};

    use super::*;

    /// A 403 asking for `write` records it beside the granted `read`, once, so the
    /// next login asks for both.
    #[test]
    fn step_up_records_the_scopes_wanted_beyond_those_granted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let state = Dir::open_private(dir.path(), false).unwrap();
        SecretStore::choose(&state, Wanted::File).unwrap();
        let kept = Kept {
            issuer: "https://as".into(),
            resource: "https://r/mcp".into(),
            token_endpoint: "https://as/token".into(),
            client_id: "c".into(),
            client_secret: None,
            auth_method: "none".into(),
            grant: "authorization_code".into(),
            access_token: "t".into(),
            refresh_token: None,
            expires_at: None,
            scopes: vec!["read".into()],
            step_up: Vec::new(),
        };
        let challenge = Challenge::parse(r#"Bearer error="insufficient_scope", scope="read write""#).unwrap();
        assert_eq!(step_up(&state, &kept, &challenge).unwrap(), ["read", "write"]);
        let stored = tokens::load(&state, "https://as", "https://r/mcp").unwrap().unwrap();
        assert_eq!((stored.scopes, stored.step_up), (vec!["read".to_owned()], vec!["write".to_owned()]));
    }
}
