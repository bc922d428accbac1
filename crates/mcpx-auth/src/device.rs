//! The device authorization grant (RFC 8628), for a login without a browser on this
//! machine (over SSH, in a container): the device authorization request (§3.1), the
//! user code and verification URI shown to the user (§3.3), then polling the token
//! endpoint (§3.4, §3.5) on the `oauth2` crate, which waits `interval` between polls
//! (5 s when the server gives none), adds 5 s on `slow_down`, goes on while
//! `authorization_pending`, and stops on `access_denied`, `expired_token` or the code's
//! `expires_in`.

use oauth2::{DeviceAuthorizationUrl, RequestTokenError, Scope, StandardDeviceAuthorizationResponse};
use serde::Serialize;

use super::flow::{self, Grant};
use super::tokens::Kept;

/// What the user is shown (RFC 8628 §3.2): never the device code, which only the
/// daemon holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DevicePrompt {
    /// `user_code`: the code to enter.
    pub user_code: String,
    /// `verification_uri`: where to enter it.
    pub verification_uri: String,
    /// `verification_uri_complete`: the same with the code in it, when the server
    /// gives one.
    pub verification_uri_complete: Option<String>,
    /// `expires_in`: how long the code lasts, in seconds.
    pub expires_in: u64,
}

/// Logs in to `grant.server` by the device authorization grant: asks for a code, hands
/// it to `show`, and polls until the user approved it (the tokens), refused it, or it
/// expired.
///
/// Errors: the server offers no device flow, refused, the user denied the login or let
/// the code expire (each one line, saying to run the login again), or `show` failed.
pub async fn login(
    http: &reqwest::Client,
    grant: &Grant<'_>,
    show: &mut (dyn FnMut(&DevicePrompt) -> Result<(), String> + Send),
) -> Result<Kept, String> {
    login_sleeping(http, grant, show, tokio::time::sleep).await
}

/// [`login`], waiting between polls with `sleep` (tests record the waits).
async fn login_sleeping<S: Fn(std::time::Duration) -> F, F: std::future::Future<Output = ()>>(
    http: &reqwest::Client,
    grant: &Grant<'_>,
    show: &mut (dyn FnMut(&DevicePrompt) -> Result<(), String> + Send),
    sleep: S,
) -> Result<Kept, String> {
    let server = grant.server;
    let endpoint = server.device_authorization_endpoint.clone().ok_or_else(|| {
        format!(
            "{} offers no device login (its metadata has no `device_authorization_endpoint`, RFC 8628); log in with a browser instead, without `--device` (add `--no-browser` to open the URL on another machine)",
            server.issuer
        )
    })?;
    let oauth = flow::token_client(server.token_endpoint.clone(), grant.client)?
        .set_device_authorization_url(DeviceAuthorizationUrl::from_url(endpoint.clone()));
    let auth = flow::client_auth(grant.client, &server.issuer)?;
    let mut request = oauth.exchange_device_code().add_extra_param("resource", grant.resource.to_owned());
    for scope in grant.scopes {
        request = request.add_scope(Scope::new(scope.clone()));
    }
    for (name, value) in &auth {
        request = request.add_extra_param(*name, value.clone());
    }
    let details: StandardDeviceAuthorizationResponse = request.request_async(http).await.map_err(|e| match e {
        RequestTokenError::ServerResponse(answer) => format!(
            "the device authorization request to {endpoint} failed: the server answered {}{}",
            super::said(answer.error().as_ref()),
            answer.error_description().map(|d| format!(" ({})", super::said(d))).unwrap_or_default()
        ),
        other => format!("the device authorization request to {endpoint} failed: {}", flow::request_failure(&other)),
    })?;
    show(&DevicePrompt {
        user_code: details.user_code().secret().clone(),
        verification_uri: details.verification_uri().to_string(),
        verification_uri_complete: details.verification_uri_complete().map(|u| u.secret().clone()),
        expires_in: details.expires_in().as_secs(),
    })?;
    let mut poll = oauth.exchange_device_access_token(&details).add_extra_param("resource", grant.resource.to_owned());
    for (name, value) in auth {
        poll = poll.add_extra_param(name, value);
    }
    let answer = poll.request_async(http, sleep, None).await.map_err(|e| poll_error(&e))?;
    Ok(flow::kept(grant, "device_code", &answer, None))
}

/// A failed poll, one line (RFC 8628 §3.5): what the user has to do now.
fn poll_error<RE: std::error::Error + 'static>(e: &RequestTokenError<RE, oauth2::DeviceCodeErrorResponse>) -> String {
    use oauth2::DeviceCodeErrorResponseType as Kind;
    let RequestTokenError::ServerResponse(answer) = e else {
        return format!("waiting for the device login failed: {}", flow::request_failure(e));
    };
    let description = answer.error_description().map(|d| format!(" ({})", super::said(d))).unwrap_or_default();
    match answer.error() {
        Kind::AccessDenied => {
            format!("the login was denied at the authorization server{description}; run it again to retry")
        }
        Kind::ExpiredToken => {
            "no one approved the code before it expired; run the login again and enter the new code".to_owned()
        }
        other => {
            format!("the authorization server stopped the device login: {}{description}; run it again", other.as_ref())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use axum::http::StatusCode;
    use oauth2::{DeviceCodeErrorResponse, DeviceCodeErrorResponseType as Kind};
    use url::Url;

    use super::*;
    use crate::discovery::AuthServer;
    use crate::fixtures::{Endpoint, token_answer};
    use crate::flow::ClientInfo;

    /// A device login against an endpoint whose token endpoint answers `polls` in turn
    /// (the device authorization endpoint gives `interval` 2): the prompt shown, the
    /// waits between polls, the requests, and the outcome.
    async fn device_login(
        polls: Vec<(StatusCode, String)>,
    ) -> (Vec<DevicePrompt>, Vec<Duration>, Vec<crate::fixtures::Seen>, Result<Kept, String>) {
        let endpoint = Endpoint::start(move |n, seen| {
            if seen.path == "/device" {
                let code = serde_json::json!({ "device_code": "dc-1", "user_code": "ABCD-EFGH",
                    "verification_uri": "https://as/device", "expires_in": 600, "interval": 2 });
                return (StatusCode::OK, code.to_string());
            }
            polls.get(n - 2).cloned().unwrap_or((StatusCode::GONE, String::new()))
        })
        .await;
        let mut server = AuthServer::token_only("https://as".into(), endpoint.url.join("token").unwrap());
        server.device_authorization_endpoint = Some(endpoint.url.join("device").unwrap());
        let client = ClientInfo { id: "c".into(), secret: None, auth_method: "none".into(), private_key: None };
        let scopes = vec!["read".to_owned()];
        let grant = Grant { server: &server, client: &client, resource: "https://r/mcp", scopes: &scopes };
        let (mut shown, waits) = (Vec::new(), Arc::new(Mutex::new(Vec::new())));
        let record = waits.clone();
        let sleep = move |d| {
            record.lock().unwrap().push(d);
            std::future::ready(())
        };
        let mut show = |p: &DevicePrompt| {
            shown.push(p.clone());
            Ok(())
        };
        let outcome = login_sleeping(&reqwest::Client::new(), &grant, &mut show, sleep).await;
        let waits = waits.lock().unwrap().clone();
        (shown, waits, endpoint.seen(), outcome)
    }

    fn refusal(error: &str) -> (StatusCode, String) {
        (StatusCode::BAD_REQUEST, serde_json::json!({ "error": error }).to_string())
    }

    /// Pending, then slow down, then the tokens: the waits are the interval, then the
    /// interval and 5 s more (RFC 8628 §3.5); every poll names the device code and the
    /// resource.
    #[tokio::test]
    async fn polls_wait_the_interval_and_slow_down_adds_five_seconds() {
        let polls = vec![refusal("authorization_pending"), refusal("slow_down"), token_answer("at-1", Some("rt-1"))];
        let (shown, waits, seen, outcome) = device_login(polls).await;
        let kept = outcome.unwrap();
        assert_eq!((kept.access_token.as_str(), kept.refresh_token.as_deref()), ("at-1", Some("rt-1")));
        assert_eq!(kept.grant, "device_code");
        assert_eq!(shown.len(), 1);
        assert_eq!(shown[0].user_code, "ABCD-EFGH");
        assert_eq!(shown[0].verification_uri, "https://as/device");
        assert_eq!(shown[0].verification_uri_complete, None);
        assert_eq!(waits, [Duration::from_secs(2), Duration::from_secs(7)]);
        assert_eq!(seen[0].field("resource"), Some("https://r/mcp"));
        assert_eq!(seen[0].field("scope"), Some("read"));
        assert_eq!(seen.len(), 4);
        for poll in &seen[1..] {
            assert_eq!(poll.path, "/token");
            assert_eq!(poll.field("grant_type"), Some(flow::DEVICE_CODE_GRANT));
            assert_eq!(poll.field("device_code"), Some("dc-1"));
            assert_eq!(poll.field("resource"), Some("https://r/mcp"));
            assert_eq!(poll.field("client_id"), Some("c"));
        }
    }

    /// A denial and an expired code end the polling at once, each saying so.
    #[tokio::test]
    async fn denied_and_expired_codes_end_the_login() {
        let (_, _, seen, outcome) =
            device_login(vec![refusal("authorization_pending"), refusal("access_denied")]).await;
        assert_eq!(seen.len(), 3);
        assert!(outcome.unwrap_err().starts_with("the login was denied"));
        let (_, _, seen, outcome) = device_login(vec![refusal("expired_token")]).await;
        assert_eq!(seen.len(), 2);
        assert!(outcome.unwrap_err().starts_with("no one approved the code before it expired"));
    }

    /// A server without a device authorization endpoint fails before any request.
    #[tokio::test]
    async fn a_server_without_the_device_flow_is_refused() {
        let server = AuthServer::token_only("https://as".into(), Url::parse("https://as/token").unwrap());
        let client = ClientInfo { id: "c".into(), secret: None, auth_method: "none".into(), private_key: None };
        let grant = Grant { server: &server, client: &client, resource: "https://r/mcp", scopes: &[] };
        let error = login(&reqwest::Client::new(), &grant, &mut |_| Ok(())).await.unwrap_err();
        assert!(error.contains("offers no device login"), "{error}");
    }

    fn refused(kind: Kind) -> String {
        let e: RequestTokenError<std::io::Error, DeviceCodeErrorResponse> =
            RequestTokenError::ServerResponse(DeviceCodeErrorResponse::new(kind, None, None));
        poll_error(&e)
    }

    #[test]
    fn the_end_of_a_poll_says_what_happened() {
        assert_eq!(
            refused(Kind::AccessDenied),
            "the login was denied at the authorization server; run it again to retry"
        );
        assert!(refused(Kind::ExpiredToken).starts_with("no one approved the code before it expired"));
        let other = refused(Kind::Basic(oauth2::basic::BasicErrorResponseType::InvalidClient));
        assert_eq!(other, "the authorization server stopped the device login: invalid_client; run it again");
    }
}
