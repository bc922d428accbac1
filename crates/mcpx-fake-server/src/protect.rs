//! The HTTP mode as an OAuth protected resource (`FAKE_AUTH_SERVER`), after MCP
//! 2025-11-25, Authorization: the protected resource metadata (RFC 9728 §3) at
//! `/.well-known/oauth-protected-resource/mcp` naming the authorization server, a 401
//! with `WWW-Authenticate: Bearer resource_metadata="..."` (RFC 9728 §5.1) for a
//! request without a valid token, and each token checked by the authorization
//! server's introspection endpoint (RFC 7662 §2) on every request.
//!
//! Introspection rather than verifying a JWT: it needs no JOSE library in the fake,
//! and a revoked token (RFC 7009) stops working at once, as a logout should make it.
//!
//! Settings: `FAKE_AUTH_SERVER` (the issuer), `FAKE_AUTH_INTROSPECTION` (the
//! endpoint's URL) and `FAKE_AUTH_CLIENT` (`<client_id>:<client_secret>`, sent as
//! `client_secret_post`).

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The path of the protected resource metadata of the resource `/mcp` (RFC 9728 §3.1).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource/mcp";

/// The one scope the resource asks for.
const SCOPE: &str = "mcp";

/// How the resource checks tokens.
#[derive(Debug, Clone)]
pub struct Protection {
    /// The authorization server's issuer, named in the metadata.
    pub issuer: String,
    /// Its introspection endpoint.
    pub introspection: String,
    /// The resource's own client at the authorization server: `client_id`.
    pub client_id: String,
    /// And `client_secret`.
    pub client_secret: String,
}

impl Protection {
    /// The settings from the environment, when `FAKE_AUTH_SERVER` is set.
    ///
    /// Errors: `FAKE_AUTH_SERVER` is set without the other two.
    pub fn from_env() -> Result<Option<Protection>, String> {
        let get = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let Some(issuer) = get("FAKE_AUTH_SERVER") else { return Ok(None) };
        let introspection =
            get("FAKE_AUTH_INTROSPECTION").ok_or("FAKE_AUTH_SERVER needs FAKE_AUTH_INTROSPECTION (a URL)")?;
        let client = get("FAKE_AUTH_CLIENT").ok_or("FAKE_AUTH_SERVER needs FAKE_AUTH_CLIENT (id:secret)")?;
        let (client_id, client_secret) =
            client.split_once(':').ok_or("FAKE_AUTH_CLIENT is `<client_id>:<client_secret>`")?;
        Ok(Some(Protection {
            issuer,
            introspection,
            client_id: client_id.to_owned(),
            client_secret: client_secret.to_owned(),
        }))
    }

    /// The protected resource metadata of `resource` (the `/mcp` URL).
    fn metadata(&self, resource: &str) -> Response {
        let body = json!({
            "resource": resource,
            "authorization_servers": [self.issuer],
            "scopes_supported": [SCOPE],
            "bearer_methods_supported": ["header"],
        });
        ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
    }

    /// `Ok` when the request's bearer token is active for `resource`; else the 401 to
    /// answer, whose challenge points at the metadata under `origin`.
    pub async fn check(&self, headers: &HeaderMap, origin: &str, resource: &str) -> Result<(), Response> {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")));
        let error = match token {
            None => None,
            Some(token) => match self.introspect(token, resource).await {
                Ok(()) => return Ok(()),
                Err(why) => {
                    eprintln!("mcpx-fake-server: token refused: {why}");
                    Some("invalid_token")
                }
            },
        };
        let error = error.map(|e| format!(r#", error="{e}""#)).unwrap_or_default();
        let challenge = format!(r#"Bearer resource_metadata="{origin}{METADATA_PATH}", scope="{SCOPE}"{error}"#);
        let mut response = (StatusCode::UNAUTHORIZED, "a valid bearer token is required\n").into_response();
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        Err(response)
    }

    /// Asks the authorization server whether `token` is active and meant for `resource`.
    async fn introspect(&self, token: &str, resource: &str) -> Result<(), String> {
        let body = [("token", token), ("client_id", &self.client_id), ("client_secret", &self.client_secret)]
            .iter()
            .map(|(k, v)| format!("{k}={}", form_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let answer = reqwest::Client::new()
            .post(&self.introspection)
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .map_err(|e| format!("introspection failed: {e}"))?;
        let status = answer.status();
        let text = answer.text().await.map_err(|e| format!("introspection failed: {e}"))?;
        let found: Value = serde_json::from_str(&text).map_err(|_| format!("introspection answered {status}"))?;
        if found["active"] != true {
            return Err("not active".to_owned());
        }
        let audience = match &found["aud"] {
            Value::String(one) => one == resource,
            Value::Array(many) => many.iter().any(|a| a == resource),
            _ => false,
        };
        if !audience {
            return Err(format!("meant for {}, not {resource}", found["aud"]));
        }
        Ok(())
    }
}

/// The answer at [`METADATA_PATH`]: the metadata of a protected server (`protected`:
/// its protection and its origin, `http://<addr>`); 404 for one that is not.
pub fn metadata(protected: Option<&(Protection, String)>) -> Response {
    match protected {
        Some((protection, origin)) => protection.metadata(&format!("{origin}/mcp")),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// `value` encoded for an `application/x-www-form-urlencoded` body.
fn form_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_values_are_encoded() {
        assert_eq!(form_encode("a b+c/=~"), "a%20b%2Bc%2F%3D~");
    }
}
