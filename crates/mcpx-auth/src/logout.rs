//! A user's logout from a remote server (`mcpx auth logout`): the kept logins whose
//! resource covers the server's URL are revoked at their authorization server's
//! `revocation_endpoint` (RFC 7009), where its metadata offers one, and forgotten
//! whatever the revocation's outcome. Each login is held under its renewal lock
//! ([`tokens::hold`]) meanwhile, so no renewal saves it again.

use base64::Engine;
use mcpx_platform::fs::Dir;
use url::Url;

use super::discovery::{DiscoveryError, authorization_server};
use super::fetch::HttpFetch;
use super::flow::{ClientInfo, client_auth};
use super::tokens::{self, Kept};
use mcpx_config::ExpandedOAuth;

/// How long one revocation request may take.
const REVOKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// What became of the tokens of one forgotten login at its authorization server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revocation {
    /// Both tokens (those it had) were revoked.
    Revoked,
    /// The server's metadata names no `revocation_endpoint` (or there is no metadata).
    NotOffered,
    /// A revocation request failed (the one-line reason, never a token).
    Failed(String),
}

impl Revocation {
    /// The outcome as the API spells it: `revoked`, `not_offered` or `failed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Revocation::Revoked => "revoked",
            Revocation::NotOffered => "not_offered",
            Revocation::Failed(_) => "failed",
        }
    }
}

/// One forgotten login: what it was for, and what became of its tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedOut {
    /// The authorization server.
    pub issuer: String,
    /// The resource.
    pub resource: String,
    /// The revocation's outcome.
    pub revocation: Revocation,
}

/// Logs out of the server at `url`: revokes and forgets every kept login that covers
/// it ([`tokens::covering`]); `oauth` is the entry's block, whose private key a
/// `private_key_jwt` client signs with. Returns the logins forgotten (none when there
/// was none).
///
/// Errors: the secret store cannot be read or written (the store's message).
pub async fn logout(
    http: &reqwest::Client,
    state: &Dir,
    url: &Url,
    oauth: Option<&ExpandedOAuth>,
) -> Result<Vec<LoggedOut>, String> {
    let mut done = Vec::new();
    for found in tokens::covering(state, url)? {
        let _held = tokens::hold(&found.issuer, &found.resource).await;
        // A renewal may have replaced the tokens since they were listed.
        let Some(kept) = tokens::load(state, &found.issuer, &found.resource)? else { continue };
        let revocation = revoke_login(http, &kept, oauth.and_then(|o| o.private_key.as_deref())).await;
        tokens::forget(state, &kept.issuer, &kept.resource)?;
        tracing::info!(issuer = %kept.issuer, resource = %kept.resource, revocation = revocation.as_str(), "logged out");
        done.push(LoggedOut { issuer: kept.issuer, resource: kept.resource, revocation });
    }
    Ok(done)
}

/// Revokes the refresh token and then the access token of `kept` (RFC 7009 §2.1: the
/// refresh token first, as revoking it may end the access tokens too) at the
/// `revocation_endpoint` of its issuer's metadata, discovered again.
async fn revoke_login(http: &reqwest::Client, kept: &Kept, private_key: Option<&str>) -> Revocation {
    let server = match authorization_server(&HttpFetch { http }, &kept.issuer).await {
        Ok((server, _)) => server,
        Err(DiscoveryError::NoMetadata { .. }) => return Revocation::NotOffered,
        Err(e) => return Revocation::Failed(e.to_string()),
    };
    let Some(endpoint) = server.revocation_endpoint else { return Revocation::NotOffered };
    let client = ClientInfo::of(kept, private_key);
    let tokens = [(kept.refresh_token.as_deref(), "refresh_token"), (Some(kept.access_token.as_str()), "access_token")];
    for (token, hint) in tokens {
        let Some(token) = token else { continue };
        if let Err(e) = revoke(http, &endpoint, &client, &kept.issuer, token, hint).await {
            return Revocation::Failed(e);
        }
    }
    Revocation::Revoked
}

/// Asks `endpoint` to revoke `token` (RFC 7009 §2.1): a form POST of `token` and
/// `token_type_hint` (`refresh_token` or `access_token`), the client authenticated as
/// at the token endpoint (`client_secret_basic`, `client_secret_post`,
/// `private_key_jwt` for the server `issuer`, or its `client_id` alone). A 200 is
/// success, also for a token the server no longer knows (§2.2). The endpoint must be
/// HTTPS (§2), or HTTP on a loopback address (a server on this machine).
///
/// Errors: one line: the endpoint is not HTTPS, cannot be reached, or answered an
/// error (its `error` quoted; never the token).
pub async fn revoke(
    http: &reqwest::Client,
    endpoint: &Url,
    client: &ClientInfo,
    issuer: &str,
    token: &str,
    hint: &str,
) -> Result<(), String> {
    let fail = |m: String| format!("the revocation request to {endpoint} failed: {m}");
    let loopback = matches!(endpoint.host(), Some(url::Host::Ipv4(ip)) if ip.is_loopback())
        || matches!(endpoint.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback())
        || endpoint.host_str() == Some("localhost");
    if endpoint.scheme() != "https" && !loopback {
        return Err(fail("the endpoint is not HTTPS, which RFC 7009 requires".to_owned()));
    }
    let mut form = vec![("token", token.to_owned()), ("token_type_hint", hint.to_owned())];
    let mut request = http.post(endpoint.clone()).timeout(REVOKE_TIMEOUT);
    match (client.auth_method.as_str(), &client.secret) {
        ("client_secret_basic", Some(secret)) => {
            // RFC 6749 §2.3.1: each part form-encoded before they are joined.
            let encode = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let pair = format!("{}:{}", encode(&client.id), encode(secret));
            let basic = base64::engine::general_purpose::STANDARD.encode(pair);
            request = request.header(reqwest::header::AUTHORIZATION, format!("Basic {basic}"));
        }
        ("client_secret_post", Some(secret)) => {
            form.push(("client_id", client.id.clone()));
            form.push(("client_secret", secret.clone()));
        }
        _ => form.push(("client_id", client.id.clone())),
    }
    form.extend(client_auth(client, issuer).map_err(fail)?);
    let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(&form).finish();
    let answer = request
        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .map_err(|e| fail(super::fetch::chain(&e)))?;
    let status = answer.status();
    if status.is_success() {
        return Ok(());
    }
    let text = answer.text().await.unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let code = json["error"].as_str().map(|c| format!(" ({c})")).unwrap_or_default();
    Err(fail(format!("HTTP {status}{code}")))
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;
    use crate::fixtures::{Endpoint, file_state, kept};

    /// The metadata of issuer `issuer`, with a revocation endpoint when asked.
    fn metadata(issuer: &str, revocation: bool) -> String {
        let mut json = serde_json::json!({ "issuer": issuer, "token_endpoint": format!("{issuer}/token") });
        if revocation {
            json["revocation_endpoint"] = format!("{issuer}/revoke").into();
        }
        json.to_string()
    }

    /// An authorization server at `endpoint` with `revocation` offered or not, whose
    /// revocation endpoint answers `status`.
    async fn server(revocation: bool, status: StatusCode) -> Endpoint {
        let issuer = std::sync::Arc::new(std::sync::OnceLock::<String>::new());
        let known = issuer.clone();
        let endpoint = Endpoint::start(move |_, seen| match seen.path.as_str() {
            "/.well-known/oauth-authorization-server" => (StatusCode::OK, metadata(known.get().unwrap(), revocation)),
            "/revoke" => (status, r#"{"error":"unsupported_token_type"}"#.to_owned()),
            _ => (StatusCode::NOT_FOUND, String::new()),
        })
        .await;
        issuer.set(endpoint.url.as_str().trim_end_matches('/').to_owned()).unwrap();
        endpoint
    }

    /// A login of `server` for `https://r/mcp`, kept in a new file store.
    fn login_at(server: &Endpoint) -> (tempfile::TempDir, Dir, Kept) {
        let (dir, state) = file_state();
        let issuer = server.url.as_str().trim_end_matches('/').to_owned();
        let kept = Kept { issuer: issuer.clone(), ..kept(&format!("{issuer}/token")) };
        tokens::save(&state, &kept).unwrap();
        (dir, state, kept)
    }

    /// The refresh token and then the access token are revoked, each with its hint and
    /// the client's Basic authentication; then the login is gone.
    #[tokio::test]
    async fn logout_revokes_both_tokens_then_forgets() {
        let server = server(true, StatusCode::OK).await;
        let (_dir, state, kept) = login_at(&server);
        let url = Url::parse("https://r/mcp").unwrap();
        let done = logout(&reqwest::Client::new(), &state, &url, None).await.unwrap();
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].revocation, Revocation::Revoked);
        let revoked: Vec<_> = server.seen().into_iter().filter(|s| s.path == "/revoke").collect();
        let shape: Vec<_> = revoked.iter().map(|s| (s.field("token"), s.field("token_type_hint"))).collect();
        assert_eq!(shape, [(Some("rt-0"), Some("refresh_token")), (Some("at-0"), Some("access_token"))]);
        // `c:cs`, as RFC 6749 §2.3.1 spells it.
        assert!(
            revoked
                .iter()
                .all(|s| s.authorization.as_deref() == Some("Basic Yzpjcw==") && s.field("client_id").is_none())
        );
        assert_eq!(tokens::load(&state, &kept.issuer, &kept.resource).unwrap(), None);
        assert!(logout(&reqwest::Client::new(), &state, &url, None).await.unwrap().is_empty());
    }

    /// A server without a revocation endpoint, or whose endpoint refuses: the login is
    /// forgotten all the same, and the outcome says so without a token.
    #[tokio::test]
    async fn without_revocation_or_when_it_fails_the_login_is_forgotten() {
        for (offered, status) in [(false, StatusCode::OK), (true, StatusCode::BAD_REQUEST)] {
            let server = server(offered, status).await;
            let (_dir, state, kept) = login_at(&server);
            let url = Url::parse("https://r/mcp/sub").unwrap();
            let done = logout(&reqwest::Client::new(), &state, &url, None).await.unwrap();
            match &done[0].revocation {
                Revocation::NotOffered => assert!(!offered),
                Revocation::Failed(why) => {
                    assert!(why.contains("400") && why.contains("unsupported_token_type") && !why.contains("rt-0"));
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(tokens::load(&state, &kept.issuer, &kept.resource).unwrap(), None);
        }
    }

    /// A `client_secret_post` client puts its id and secret in the form; a public
    /// client its id alone.
    #[tokio::test]
    async fn the_client_authenticates_as_at_the_token_endpoint() {
        let server = server(true, StatusCode::OK).await;
        let endpoint = server.url.join("revoke").unwrap();
        let http = reqwest::Client::new();
        let post = ClientInfo {
            id: "c".into(),
            secret: Some("cs".into()),
            auth_method: "client_secret_post".into(),
            private_key: None,
        };
        revoke(&http, &endpoint, &post, "https://as", "t", "access_token").await.unwrap();
        let public = ClientInfo { auth_method: "none".into(), secret: None, ..post.clone() };
        revoke(&http, &endpoint, &public, "https://as", "t", "access_token").await.unwrap();
        let seen = server.seen();
        assert_eq!((seen[0].field("client_id"), seen[0].field("client_secret")), (Some("c"), Some("cs")));
        assert_eq!((seen[1].field("client_id"), seen[1].field("client_secret")), (Some("c"), None));
        assert!(seen.iter().all(|s| s.authorization.is_none()));
        let remote = Url::parse("http://example.com/revoke").unwrap();
        let refused = revoke(&http, &remote, &public, "https://as", "t", "access_token").await.unwrap_err();
        assert!(refused.contains("not HTTPS"), "{refused}");
    }
}
