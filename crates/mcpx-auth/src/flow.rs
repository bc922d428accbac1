//! The OAuth exchanges with an authorization server, on the `oauth2` crate: dynamic
//! client registration (RFC 7591, mcpx's own, as `oauth2` has none), the
//! authorization request with PKCE S256 and RFC 8707's `resource`, the code exchange,
//! refresh (keeping a rotated refresh token) and the client credentials grant.
//!
//! Errors are one line saying what failed and what to do; they quote the server's
//! `error` and `error_description`, never a token or a secret.

use std::time::SystemTime;

use oauth2::basic::{BasicClient, BasicTokenResponse};
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, RefreshToken, RequestTokenError, Scope, TokenResponse, TokenUrl,
};
use serde::Deserialize;
use url::Url;

use super::assertion;
use super::discovery::AuthServer;
use super::tokens::{Kept, expiry};

/// The client mcpx is at one authorization server: registered, pre-registered or
/// configured.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// `client_id`.
    pub id: String,
    /// `client_secret`, for a confidential client.
    pub secret: Option<String>,
    /// How it authenticates at the token endpoint (RFC 8414 spelling).
    pub auth_method: String,
    /// Its PKCS#8 PEM private key, for `private_key_jwt` (secret).
    pub private_key: Option<String>,
}

impl ClientInfo {
    /// The client of a kept login, with its private key (never kept with the tokens:
    /// it stays in the entry's `oauth` block).
    pub fn of(kept: &Kept, private_key: Option<&str>) -> ClientInfo {
        ClientInfo {
            id: kept.client_id.clone(),
            secret: kept.client_secret.clone(),
            auth_method: kept.auth_method.clone(),
            private_key: private_key.map(str::to_owned),
        }
    }
}

impl std::fmt::Debug for ClientInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientInfo").field("id", &self.id).field("auth_method", &self.auth_method).finish()
    }
}

/// An authorization request under way: the URL to open, and what the answer is checked
/// against and exchanged with.
pub struct Pending {
    /// The URL the user opens.
    pub url: Url,
    /// The `state` the redirect must carry back.
    pub state: String,
    /// The PKCE verifier of the request's challenge.
    verifier: PkceCodeVerifier,
    /// The redirect URI the request named (sent again with the code).
    pub redirect_uri: String,
}

/// The token endpoint authentication mcpx picks for a new registration, from what the
/// server supports (RFC 8414 §2; absent means `client_secret_basic`): `none` (a
/// public client, as a native application is: RFC 8252 §8.4), else
/// `client_secret_basic`, else `client_secret_post`.
pub fn registration_auth_method(server: &AuthServer) -> &'static str {
    let supported = server.token_endpoint_auth_methods_supported.as_deref();
    let Some(supported) = supported else { return "client_secret_basic" };
    ["none", "client_secret_basic", "client_secret_post"]
        .into_iter()
        .find(|m| supported.iter().any(|s| s == m))
        .unwrap_or("client_secret_basic")
}

/// The device authorization grant's `grant_type` (RFC 8628 §3.4).
pub const DEVICE_CODE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// Registers mcpx as a client (RFC 7591 §3.1) and `scopes`: of the authorization code
/// grant for `redirect_uri`, or, with `None`, of the device authorization grant
/// (RFC 8628 §3.4), which has no redirect.
///
/// Errors: the server refused or cannot be reached, or its answer has no `client_id`.
pub async fn register(
    http: &reqwest::Client,
    server: &AuthServer,
    redirect_uri: Option<&str>,
    scopes: &[String],
) -> Result<ClientInfo, String> {
    let Some(endpoint) = &server.registration_endpoint else {
        return Err(format!(
            "{} offers no dynamic client registration; register mcpx there and put its id in the entry's `oauth` block (`clientId`, and `clientSecret` if it has one)",
            server.issuer
        ));
    };
    let method = registration_auth_method(server);
    let mut body = match redirect_uri {
        Some(uri) => serde_json::json!({
            "redirect_uris": [uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        }),
        None => serde_json::json!({
            "redirect_uris": [],
            "grant_types": [DEVICE_CODE_GRANT, "refresh_token"],
            "response_types": [],
        }),
    };
    body["client_name"] = "mcpx".into();
    body["token_endpoint_auth_method"] = method.into();
    if !scopes.is_empty() {
        body["scope"] = scopes.join(" ").into();
    }
    let fail = |m: String| format!("registering mcpx at {endpoint} failed: {m}");
    let answer = http
        .post(endpoint.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| fail(e.to_string()))?;
    let status = answer.status();
    let text = answer.text().await.map_err(|e| fail(e.to_string()))?;
    if !status.is_success() {
        return Err(fail(format!("HTTP {status}{}", oauth_error(&text))));
    }
    #[derive(Deserialize)]
    struct Registered {
        client_id: String,
        #[serde(default)]
        client_secret: Option<String>,
        #[serde(default)]
        token_endpoint_auth_method: Option<String>,
    }
    let registered: Registered =
        serde_json::from_str(&text).map_err(|_| fail("the answer has no `client_id`".to_owned()))?;
    Ok(ClientInfo {
        id: registered.client_id,
        auth_method: registered.token_endpoint_auth_method.unwrap_or_else(|| method.to_owned()),
        secret: registered.client_secret,
        private_key: None,
    })
}

/// Starts an authorization request (OAuth 2.1 §4.1.1) at `server` for `client`:
/// PKCE S256, `resource` (RFC 8707 §2) and the `scopes` (none: no `scope`).
///
/// Errors: the server has no authorization endpoint, or a URL is malformed.
pub fn authorize(
    server: &AuthServer,
    client: &ClientInfo,
    redirect_uri: &str,
    resource: &str,
    scopes: &[String],
) -> Result<Pending, String> {
    let endpoint = server.authorization_endpoint.as_ref().ok_or_else(|| {
        format!(
            "{} has no authorization endpoint, so no one can log in there; check the server's metadata",
            server.issuer
        )
    })?;
    let oauth = BasicClient::new(ClientId::new(client.id.clone()))
        .set_auth_uri(AuthUrl::from_url(endpoint.clone()))
        .set_redirect_uri(RedirectUrl::new(redirect_uri.to_owned()).map_err(|e| e.to_string())?);
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request = oauth
        .authorize_url(CsrfToken::new_random)
        .set_pkce_challenge(challenge)
        .add_extra_param("resource", resource.to_owned());
    for scope in scopes {
        request = request.add_scope(Scope::new(scope.clone()));
    }
    let (url, state) = request.url();
    Ok(Pending { url, state: state.secret().clone(), verifier, redirect_uri: redirect_uri.to_owned() })
}

/// The facts of a login that [`Kept`] records besides the tokens.
pub struct Grant<'a> {
    /// The authorization server.
    pub server: &'a AuthServer,
    /// The client.
    pub client: &'a ClientInfo,
    /// The resource (RFC 8707).
    pub resource: &'a str,
    /// The scopes asked for.
    pub scopes: &'a [String],
}

/// Exchanges the authorization `code` of `pending` for tokens (OAuth 2.1 §4.1.3).
///
/// Errors: the token endpoint refused (its `error` quoted) or cannot be reached.
pub async fn exchange_code(
    http: &reqwest::Client,
    grant: &Grant<'_>,
    pending: Pending,
    code: String,
) -> Result<Kept, String> {
    let oauth = token_client(grant.server.token_endpoint.clone(), grant.client)?
        .set_redirect_uri(RedirectUrl::new(pending.redirect_uri).map_err(|e| e.to_string())?);
    let mut request = oauth
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(pending.verifier)
        .add_extra_param("resource", grant.resource.to_owned());
    for (name, value) in client_auth(grant.client, &grant.server.issuer)? {
        request = request.add_extra_param(name, value);
    }
    let answer = request.request_async(http).await.map_err(|e| token_error(&grant.server.token_endpoint, &e))?;
    Ok(kept(grant, "authorization_code", &answer, None))
}

/// Gets tokens with the client credentials grant (OAuth 2.1 §4.2).
///
/// Errors: the token endpoint refused (its `error` quoted) or cannot be reached.
pub async fn client_credentials(http: &reqwest::Client, grant: &Grant<'_>) -> Result<Kept, String> {
    let oauth = token_client(grant.server.token_endpoint.clone(), grant.client)?;
    let mut request = oauth.exchange_client_credentials().add_extra_param("resource", grant.resource.to_owned());
    for scope in grant.scopes {
        request = request.add_scope(Scope::new(scope.clone()));
    }
    for (name, value) in client_auth(grant.client, &grant.server.issuer)? {
        request = request.add_extra_param(name, value);
    }
    let answer = request.request_async(http).await.map_err(|e| token_error(&grant.server.token_endpoint, &e))?;
    Ok(kept(grant, "client_credentials", &answer, None))
}

/// Refreshes `old` (OAuth 2.1 §4.3): the new tokens, with the old refresh token kept
/// when the server did not rotate it.
///
/// Errors: no refresh token, or the token endpoint refused (the login is over: the
/// caller asks for a new one) or cannot be reached.
pub async fn refresh(http: &reqwest::Client, old: &Kept, client: &ClientInfo) -> Result<Kept, String> {
    let Some(refresh_token) = &old.refresh_token else {
        return Err("the login has expired and has no refresh token".to_owned());
    };
    let endpoint = Url::parse(&old.token_endpoint).map_err(|e| e.to_string())?;
    let oauth = token_client(endpoint.clone(), client)?;
    let refresh_token = RefreshToken::new(refresh_token.clone());
    let mut request = oauth.exchange_refresh_token(&refresh_token).add_extra_param("resource", old.resource.clone());
    for (name, value) in client_auth(client, &old.issuer)? {
        request = request.add_extra_param(name, value);
    }
    let answer = request.request_async(http).await.map_err(|e| token_error(&endpoint, &e))?;
    let mut new = old.clone();
    new.access_token = answer.access_token().secret().clone();
    if let Some(rotated) = answer.refresh_token() {
        new.refresh_token = Some(rotated.secret().clone());
    }
    new.expires_at = expiry(SystemTime::now(), answer.expires_in());
    if let Some(scopes) = answer.scopes() {
        new.scopes = scopes.iter().map(|s| s.to_string()).collect();
    }
    Ok(new)
}

/// An `oauth2` client for the token endpoint, authenticating as `client` says.
pub(super) fn token_client(
    endpoint: Url,
    client: &ClientInfo,
) -> Result<
    BasicClient<
        oauth2::EndpointNotSet,
        oauth2::EndpointNotSet,
        oauth2::EndpointNotSet,
        oauth2::EndpointNotSet,
        oauth2::EndpointSet,
    >,
    String,
> {
    let mut oauth = BasicClient::new(ClientId::new(client.id.clone())).set_token_uri(TokenUrl::from_url(endpoint));
    if let Some(secret) = client.secret.as_ref().filter(|_| client.auth_method != "none") {
        oauth = oauth.set_client_secret(ClientSecret::new(secret.clone()));
    }
    let in_body = matches!(client.auth_method.as_str(), "client_secret_post" | "private_key_jwt");
    Ok(oauth.set_auth_type(if in_body { AuthType::RequestBody } else { AuthType::BasicAuth }))
}

/// The form parameters that authenticate `client` beyond what `oauth2` sends: a
/// `private_key_jwt` client's assertion (RFC 7523 §2.2), for the server `issuer`.
///
/// Errors: the client has no key, or it cannot sign.
pub(super) fn client_auth(client: &ClientInfo, issuer: &str) -> Result<Vec<(&'static str, String)>, String> {
    if client.auth_method != "private_key_jwt" {
        return Ok(Vec::new());
    }
    let key = client.private_key.as_deref().ok_or_else(|| {
        "the client authenticates with `private_key_jwt`, but the entry has no `oauth.privateKey`".to_owned()
    })?;
    let jwt = assertion::client_assertion(key, &client.id, issuer, SystemTime::now())?;
    Ok(vec![("client_assertion_type", assertion::ASSERTION_TYPE.to_owned()), ("client_assertion", jwt)])
}

/// What a token answer gives, with the facts of the login.
pub(super) fn kept(grant: &Grant<'_>, kind: &str, answer: &BasicTokenResponse, refresh: Option<String>) -> Kept {
    Kept {
        issuer: grant.server.issuer.clone(),
        resource: grant.resource.to_owned(),
        token_endpoint: grant.server.token_endpoint.to_string(),
        client_id: grant.client.id.clone(),
        client_secret: grant.client.secret.clone(),
        auth_method: grant.client.auth_method.clone(),
        grant: kind.to_owned(),
        access_token: answer.access_token().secret().clone(),
        refresh_token: answer.refresh_token().map(|t| t.secret().clone()).or(refresh),
        expires_at: expiry(SystemTime::now(), answer.expires_in()),
        scopes: answer
            .scopes()
            .map(|s| s.iter().map(|s| s.to_string()).collect())
            .unwrap_or_else(|| grant.scopes.to_vec()),
        step_up: Vec::new(),
        login_id: None,
    }
}

/// A token request's failure, one line: the server's `error` and description, or what
/// kept the request from an answer. Never the answer's body, which may hold a token.
fn token_error<RE: std::error::Error + 'static, T: oauth2::ErrorResponse + 'static>(
    endpoint: &Url,
    e: &RequestTokenError<RE, T>,
) -> String {
    let what = match e {
        RequestTokenError::ServerResponse(answer) => {
            let json = serde_json::to_value(answer).unwrap_or_default();
            let code = super::said(json["error"].as_str().unwrap_or("an error"));
            let description =
                json["error_description"].as_str().map(|d| format!(" ({})", super::said(d))).unwrap_or_default();
            format!("the server answered {code}{description}")
        }
        other => request_failure(other),
    };
    format!("the token request to {endpoint} failed: {what}")
}

/// What kept a request from a usable answer other than the server's refusal: the
/// request failed, or the answer was not what the grant returns.
pub(super) fn request_failure<RE: std::error::Error + 'static, T: oauth2::ErrorResponse + 'static>(
    e: &RequestTokenError<RE, T>,
) -> String {
    match e {
        RequestTokenError::ServerResponse(_) => "the server refused".to_owned(),
        RequestTokenError::Request(e) => format!("the request failed: {e}"),
        RequestTokenError::Parse(..) => "the answer is not a token response".to_owned(),
        RequestTokenError::Other(m) => m.clone(),
    }
}

/// ` (error: description)` from an OAuth error body (RFC 6749 §5.2), or nothing.
fn oauth_error(body: &str) -> String {
    let json: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    match (json["error"].as_str(), json["error_description"].as_str()) {
        (Some(code), Some(d)) => format!(" ({}: {})", super::said(code), super::said(d)),
        (Some(code), None) => format!(" ({})", super::said(code)),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;
    use crate::fixtures::{Endpoint, kept, token_answer};

    /// The first refresh rotates the refresh token, and the new one is kept; the
    /// second answer names none, and the one in hand is kept.
    #[tokio::test]
    async fn refresh_keeps_a_rotated_refresh_token_and_the_old_one_otherwise() {
        let endpoint = Endpoint::start(|n, _| token_answer(&format!("at-{n}"), (n == 1).then_some("rt-1"))).await;
        let old = kept(endpoint.url.join("token").unwrap().as_str());
        let client = ClientInfo::of(&old, None);
        let http = reqwest::Client::new();
        let first = refresh(&http, &old, &client).await.unwrap();
        assert_eq!((first.access_token.as_str(), first.refresh_token.as_deref()), ("at-1", Some("rt-1")));
        assert!(first.expires_at.is_some_and(|at| at > 1));
        let second = refresh(&http, &first, &client).await.unwrap();
        assert_eq!((second.access_token.as_str(), second.refresh_token.as_deref()), ("at-2", Some("rt-1")));
        let seen = endpoint.seen();
        let spent: Vec<_> = seen.iter().map(|s| s.field("refresh_token")).collect();
        assert_eq!(spent, [Some("rt-0"), Some("rt-1")]);
        assert!(seen.iter().all(|s| s.path == "/token"
            && s.field("grant_type") == Some("refresh_token")
            && s.field("resource") == Some("https://r/mcp")
            && s.authorization.as_deref().is_some_and(|a| a.starts_with("Basic "))));
    }

    /// A refused refresh quotes the server's error and no token.
    #[tokio::test]
    async fn a_refused_refresh_says_why_without_the_token() {
        let endpoint = Endpoint::start(|_, _| {
            (StatusCode::BAD_REQUEST, r#"{"error":"invalid_grant","error_description":"revoked"}"#.to_owned())
        })
        .await;
        let old = kept(endpoint.url.join("token").unwrap().as_str());
        let e = refresh(&reqwest::Client::new(), &old, &ClientInfo::of(&old, None)).await.unwrap_err();
        assert!(e.contains("invalid_grant (revoked)") && !e.contains("rt-0"), "{e}");
    }
}
