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
use mcpx_config::{ExpandedOAuth, Grant as GrantKind};

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
/// with. Holds the login's lock ([`tokens::hold`]) from the load to the save: when
/// another task renewed the login meanwhile, its tokens are used and none are asked
/// for.
///
/// Errors: [`BearerError::NeedsLogin`] when the server refuses (the login is over) or
/// the user logged out meanwhile; [`BearerError::Failed`] when the store cannot be read
/// or the result cannot be kept.
pub async fn renew(
    http: &reqwest::Client,
    state: &Dir,
    old: &Kept,
    oauth: Option<&ExpandedOAuth>,
) -> Result<Kept, BearerError> {
    let _held = tokens::hold(&old.issuer, &old.resource).await;
    let current = tokens::load(state, &old.issuer, &old.resource).map_err(BearerError::Failed)?;
    let old = match current {
        Some(current) if current.access_token != old.access_token && !current.due(SystemTime::now()) => {
            return Ok(current);
        }
        // The kept one may hold a newer refresh token than the caller's copy.
        Some(current) => current,
        // A machine-to-machine entry gets new tokens with no user; a login that is no
        // longer kept was logged out.
        None if old.grant == "client_credentials" => old.clone(),
        None => return Err(BearerError::NeedsLogin("no login is kept for it".to_owned())),
    };
    let old = &old;
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
    use super::*;
    use crate::fixtures::{Endpoint, file_state, kept, token_answer};

    /// A 403 asking for `write` records it beside the granted `read`, once, so the
    /// next login asks for both.
    #[test]
    fn step_up_records_the_scopes_wanted_beyond_those_granted() {
        let (_dir, state) = file_state();
        let kept = Kept { expires_at: None, ..kept("https://as/token") };
        let challenge = Challenge::parse(r#"Bearer error="insufficient_scope", scope="read write""#).unwrap();
        assert_eq!(step_up(&state, &kept, &challenge).unwrap(), ["read", "write"]);
        let stored = tokens::load(&state, "https://as", "https://r/mcp").unwrap().unwrap();
        assert_eq!((stored.scopes, stored.step_up), (vec!["read".to_owned()], vec!["write".to_owned()]));
    }

    /// Eight requests that find the same login due renew it with one token request,
    /// and all use its new token; the rotated refresh token is kept.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_renewals_ask_the_token_endpoint_once() {
        let endpoint = Endpoint::start(|n, _| token_answer(&format!("at-{n}"), Some(&format!("rt-{n}")))).await;
        let (_dir, state) = file_state();
        let old = kept(endpoint.url.join("token").unwrap().as_str());
        tokens::save(&state, &old).unwrap();
        let http = reqwest::Client::new();
        let renewals = (0..8).map(|_| {
            let (http, state, old) = (http.clone(), state.clone(), old.clone());
            tokio::spawn(async move { renew(&http, &state, &old, None).await })
        });
        for renewed in futures_util::future::join_all(renewals).await {
            assert_eq!(renewed.unwrap().unwrap().access_token, "at-1");
        }
        assert_eq!(endpoint.seen().len(), 1);
        let stored = tokens::load(&state, &old.issuer, &old.resource).unwrap().unwrap();
        assert_eq!(stored.refresh_token.as_deref(), Some("rt-1"));
    }

    /// A login forgotten (logged out) while a request waited to renew it is not
    /// renewed: the request needs a login, and the token endpoint hears nothing.
    #[tokio::test]
    async fn a_forgotten_login_is_not_renewed() {
        let endpoint = Endpoint::start(|n, _| token_answer(&format!("at-{n}"), None)).await;
        let (_dir, state) = file_state();
        let old = kept(endpoint.url.join("token").unwrap().as_str());
        let renewed = renew(&reqwest::Client::new(), &state, &old, None).await;
        assert!(matches!(renewed, Err(BearerError::NeedsLogin(_))), "{renewed:?}");
        assert!(endpoint.seen().is_empty());
    }
}
