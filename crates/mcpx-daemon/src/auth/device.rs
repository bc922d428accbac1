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
            answer.error(),
            answer.error_description().map(|d| format!(" ({d})")).unwrap_or_default()
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
    let answer = poll.request_async(http, tokio::time::sleep, None).await.map_err(|e| poll_error(&e))?;
    Ok(flow::kept(grant, "device_code", &answer, None))
}

/// A failed poll, one line (RFC 8628 §3.5): what the user has to do now.
fn poll_error<RE: std::error::Error + 'static>(e: &RequestTokenError<RE, oauth2::DeviceCodeErrorResponse>) -> String {
    use oauth2::DeviceCodeErrorResponseType as Kind;
    let RequestTokenError::ServerResponse(answer) = e else {
        return format!("waiting for the device login failed: {}", flow::request_failure(e));
    };
    let description = answer.error_description().map(|d| format!(" ({d})")).unwrap_or_default();
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
    use super::*;
    use oauth2::{DeviceCodeErrorResponse, DeviceCodeErrorResponseType as Kind};

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
