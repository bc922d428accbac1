//! A remote entry's `oauth` block ([`OAuthSpec`]): a pre-registered client, the
//! scopes, the grant and the redirect port, as written (its secrets are `${...}`
//! templates, expanded only where a token is asked for).

use serde_json::{Map, Value};

use super::units::json_kind;

/// The keys of an `oauth` block, in documentation order. `callbackPort` is Claude
/// Code's name for `redirectPort`.
pub const OAUTH_KEYS: &[&str] = &[
    "issuer",
    "clientId",
    "clientSecret",
    "privateKey",
    "tokenEndpointAuthMethod",
    "scopes",
    "redirectPort",
    "callbackPort",
    "grant",
    "clientMetadataUrl",
];

/// How mcpx authenticates at the token endpoint (RFC 8414 §2,
/// `token_endpoint_auth_methods_supported`; RFC 7523 for `private_key_jwt`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenAuthMethod {
    /// `client_secret_basic`: the id and secret in HTTP Basic.
    ClientSecretBasic,
    /// `client_secret_post`: the id and secret in the form.
    ClientSecretPost,
    /// `private_key_jwt`: a JWT signed with the client's private key.
    PrivateKeyJwt,
    /// `none`: a public client, the id only.
    None,
}

impl TokenAuthMethod {
    /// Every value, in documentation order.
    pub const ALL: [TokenAuthMethod; 4] = [
        TokenAuthMethod::ClientSecretBasic,
        TokenAuthMethod::ClientSecretPost,
        TokenAuthMethod::PrivateKeyJwt,
        TokenAuthMethod::None,
    ];

    /// The spelling of RFC 8414 and of the config.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenAuthMethod::ClientSecretBasic => "client_secret_basic",
            TokenAuthMethod::ClientSecretPost => "client_secret_post",
            TokenAuthMethod::PrivateKeyJwt => "private_key_jwt",
            TokenAuthMethod::None => "none",
        }
    }
}

/// The OAuth grant a server's tokens come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Grant {
    /// `"authorization_code"`: a user logs in (`mcpx auth login`), with PKCE (the default).
    #[default]
    AuthorizationCode,
    /// `"client_credentials"`: a machine-to-machine client gets its own tokens, with no
    /// login (OAuth 2.1 §4.2).
    ClientCredentials,
}

impl Grant {
    /// The config spelling, which is the OAuth `grant_type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Grant::AuthorizationCode => "authorization_code",
            Grant::ClientCredentials => "client_credentials",
        }
    }
}

/// Whether `url` may carry a login or a secret: `https`, or `http` to this machine
/// (`127.0.0.0/8`, `::1`, `localhost`), as OAuth 2.1 (§1.5) asks of every endpoint but
/// a native client's loopback redirect (RFC 8252 §8.3).
pub fn is_secure(url: &url::Url) -> bool {
    match (url.scheme(), url.host()) {
        ("https", Some(_)) => true,
        ("http", Some(url::Host::Ipv4(ip))) => ip.is_loopback(),
        ("http", Some(url::Host::Ipv6(ip))) => ip.is_loopback(),
        ("http", Some(url::Host::Domain(name))) => name.eq_ignore_ascii_case("localhost"),
        _ => false,
    }
}

/// A key (`oauth.<name>`) and what is wrong with its value.
pub(super) type KeyError = (String, String);

/// Checks a template's `${...}` syntax: the template, or what is wrong with it.
pub(super) type Template<'a> = &'a dyn Fn(&str, &str) -> Result<String, KeyError>;

/// A remote entry's `oauth` block, as written: templates unexpanded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct OAuthSpec {
    /// `issuer`: the authorization server that issued the client's credentials (its
    /// metadata's `issuer`, RFC 8414 §2). Required with `clientSecret` or `privateKey`:
    /// they are sent to no other server, whatever a resource server's metadata names.
    pub issuer: Option<String>,
    /// `clientId`: a pre-registered client's id (a template).
    pub client_id: Option<String>,
    /// `clientSecret`: its secret, through `${secret:NAME}` or `${VAR}` (a template).
    pub client_secret: Option<String>,
    /// `privateKey`: its PEM private key for `private_key_jwt`, through `${secret:NAME}`
    /// or `${VAR}` (a template).
    pub private_key: Option<String>,
    /// `tokenEndpointAuthMethod`; unset, it follows from the metadata and the secrets given.
    pub token_endpoint_auth_method: Option<TokenAuthMethod>,
    /// `scopes`: asked for instead of those the server suggests.
    pub scopes: Option<Vec<String>>,
    /// `redirectPort` (or `callbackPort`): the loopback port of the login's redirect
    /// URI, for a client registered with a fixed one; unset, any free port.
    pub redirect_port: Option<u16>,
    /// `grant`: `"authorization_code"` (default) or `"client_credentials"`.
    pub grant: Grant,
    /// `clientMetadataUrl`: the https URL of a client ID metadata document to use as the
    /// client id where the server supports them (MCP 2025-11-25, Authorization, "Client
    /// ID Metadata Documents").
    pub client_metadata_url: Option<String>,
}

/// An `oauth` block expanded: its secrets are values. `Debug` shows no secret.
#[derive(Clone, PartialEq, Eq)]
pub struct ExpandedOAuth {
    /// The block as written, for everything but the secrets.
    pub spec: OAuthSpec,
    /// `clientId`, expanded.
    pub client_id: Option<String>,
    /// `clientSecret`, expanded (secret).
    pub client_secret: Option<String>,
    /// `privateKey`, expanded (secret).
    pub private_key: Option<String>,
}

impl std::fmt::Debug for ExpandedOAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpandedOAuth").field("spec", &self.spec).finish_non_exhaustive()
    }
}

impl OAuthSpec {
    /// The block's values that may hold `${...}` references: `clientId`,
    /// `clientSecret` and `privateKey`, those written.
    pub fn templates(&self) -> impl Iterator<Item = &str> {
        [&self.client_id, &self.client_secret, &self.private_key].into_iter().flatten().map(String::as_str)
    }
}

/// Parses an `oauth` block. `strict` (mcpx's own files) makes an unknown key an error;
/// another client's file may carry keys of its own, which are ignored. `template`
/// checks a value's `${...}` syntax.
///
/// Errors: `(key, message)`, the key as `oauth.<name>`, the message saying what is
/// wrong and what to write.
pub(super) fn parse_oauth(value: &Value, strict: bool, template: Template<'_>) -> Result<OAuthSpec, KeyError> {
    let block: &Map<String, Value> = match value {
        Value::Object(block) => block,
        other => return Err(("oauth".into(), format!("expected an object, found {}", json_kind(other)))),
    };
    let mut spec = OAuthSpec::default();
    for (name, v) in block {
        let key = format!("oauth.{name}");
        if !OAUTH_KEYS.contains(&name.as_str()) {
            if strict {
                let known = OAUTH_KEYS.join(", ");
                return Err((key, format!("unknown key; an `oauth` block takes: {known}")));
            }
            continue;
        }
        if v.is_null() {
            continue;
        }
        let text = || v.as_str().ok_or_else(|| (key.clone(), format!("expected a string, found {}", json_kind(v))));
        match name.as_str() {
            "issuer" => {
                let issuer = text()?;
                let secure = url::Url::parse(issuer).is_ok_and(|u| is_secure(&u));
                if !secure {
                    return Err((
                        key,
                        "must be the authorization server's https URL (http only on this machine: 127.0.0.1, ::1, localhost)"
                            .into(),
                    ));
                }
                spec.issuer = Some(issuer.to_owned());
            }
            "clientId" => spec.client_id = Some(template(&key, text()?)?),
            "clientSecret" => spec.client_secret = Some(template(&key, text()?)?),
            "privateKey" => spec.private_key = Some(template(&key, text()?)?),
            "tokenEndpointAuthMethod" => {
                let written = text()?;
                let method = TokenAuthMethod::ALL.into_iter().find(|m| m.as_str() == written).ok_or_else(|| {
                    let names: Vec<&str> = TokenAuthMethod::ALL.iter().map(|m| m.as_str()).collect();
                    (key.clone(), format!("unknown method `{written}` (use one of: {})", names.join(", ")))
                })?;
                spec.token_endpoint_auth_method = Some(method);
            }
            "scopes" => spec.scopes = Some(scopes(&key, v)?),
            "redirectPort" | "callbackPort" => {
                let port = v.as_u64().and_then(|n| u16::try_from(n).ok()).filter(|p| *p > 0);
                spec.redirect_port =
                    Some(port.ok_or_else(|| (key.clone(), format!("expected a port from 1 to 65535, found {v}")))?);
            }
            "grant" => {
                spec.grant = match text()? {
                    "authorization_code" => Grant::AuthorizationCode,
                    "client_credentials" => Grant::ClientCredentials,
                    other => {
                        return Err((
                            key,
                            format!("unknown grant `{other}` (use \"authorization_code\" or \"client_credentials\")"),
                        ));
                    }
                };
            }
            "clientMetadataUrl" => {
                let url = text()?;
                if !url.starts_with("https://") {
                    return Err((key, "must be an https URL (the client ID metadata document's)".into()));
                }
                spec.client_metadata_url = Some(url.to_owned());
            }
            // OAUTH_KEYS and this match list the same keys.
            _ => {}
        }
    }
    check(&spec)?;
    Ok(spec)
}

/// The combinations that cannot work, caught when the file is read.
fn check(spec: &OAuthSpec) -> Result<(), KeyError> {
    if spec.client_secret.is_some() && spec.private_key.is_some() {
        return Err((
            "oauth.privateKey".into(),
            "give `clientSecret` or `privateKey`, not both (a client authenticates one way)".into(),
        ));
    }
    let needs_id = spec.client_secret.is_some() || spec.private_key.is_some() || spec.grant == Grant::ClientCredentials;
    if needs_id && spec.client_id.is_none() {
        return Err((
            "oauth.clientId".into(),
            "missing: a client secret, a private key or the client credentials grant needs the client's `clientId`"
                .into(),
        ));
    }
    if (spec.client_secret.is_some() || spec.private_key.is_some()) && spec.issuer.is_none() {
        return Err((
            "oauth.issuer".into(),
            "missing: a `clientSecret` or `privateKey` is sent only to the authorization server that issued it; name that server (`\"issuer\": \"https://auth.example.com\"`, the `issuer` of its metadata)".into(),
        ));
    }
    if spec.grant == Grant::ClientCredentials && spec.client_secret.is_none() && spec.private_key.is_none() {
        return Err((
            "oauth.clientSecret".into(),
            "missing: the client credentials grant needs `clientSecret` or `privateKey`".into(),
        ));
    }
    let method = spec.token_endpoint_auth_method;
    let fits = match method {
        None | Some(TokenAuthMethod::None) => true,
        Some(TokenAuthMethod::ClientSecretBasic | TokenAuthMethod::ClientSecretPost) => spec.client_secret.is_some(),
        Some(TokenAuthMethod::PrivateKeyJwt) => spec.private_key.is_some(),
    };
    if !fits || (spec.private_key.is_some() && method.is_some_and(|m| m != TokenAuthMethod::PrivateKeyJwt)) {
        let method = method.map_or("", TokenAuthMethod::as_str);
        return Err((
            "oauth.tokenEndpointAuthMethod".into(),
            format!(
                "`{method}` does not fit the block: `client_secret_*` needs `clientSecret`, `private_key_jwt` needs `privateKey`"
            ),
        ));
    }
    Ok(())
}

/// `scopes`: an array of scope names, or one space-separated string.
fn scopes(key: &str, v: &Value) -> Result<Vec<String>, KeyError> {
    let bad =
        |i: usize, s: &str| (format!("{key}[{i}]"), format!("`{s}` is not a scope (no spaces, quotes or backslashes)"));
    let list: Vec<String> = match v {
        Value::String(s) => s.split_ascii_whitespace().map(str::to_owned).collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) if !s.is_empty() && s.bytes().all(scope_byte) => Ok(s.clone()),
                Value::String(s) => Err(bad(i, s)),
                other => Err((format!("{key}[{i}]"), format!("expected a string, found {}", json_kind(other)))),
            })
            .collect::<Result<_, _>>()?,
        other => {
            return Err((key.to_owned(), format!("expected an array of strings, found {}", json_kind(other))));
        }
    };
    Ok(list)
}

/// Whether `b` may be in a scope token (RFC 6749 §3.3: `%x21 / %x23-5B / %x5D-7E`).
fn scope_byte(b: u8) -> bool {
    matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(v: Value, strict: bool) -> Result<OAuthSpec, KeyError> {
        parse_oauth(&v, strict, &|_, s| Ok(s.to_owned()))
    }

    fn err_key(v: Value) -> String {
        parse(v, true).unwrap_err().0
    }

    #[test]
    fn a_full_block_is_read() {
        let spec = parse(
            json!({ "issuer": "https://as.example", "clientId": "id", "clientSecret": "${secret:S}",
                "tokenEndpointAuthMethod": "client_secret_post", "scopes": ["a", "b:c"], "redirectPort": 8976,
                "grant": "client_credentials", "x-other": null }),
            false,
        )
        .unwrap();
        assert_eq!(spec.issuer.as_deref(), Some("https://as.example"));
        assert_eq!(spec.client_id.as_deref(), Some("id"));
        assert_eq!(spec.client_secret.as_deref(), Some("${secret:S}"));
        assert_eq!(spec.token_endpoint_auth_method, Some(TokenAuthMethod::ClientSecretPost));
        assert_eq!(spec.scopes, Some(vec!["a".to_owned(), "b:c".to_owned()]));
        assert_eq!(spec.redirect_port, Some(8976));
        assert_eq!(spec.grant, Grant::ClientCredentials);
        assert_eq!(parse(json!({ "scopes": "a  b" }), true).unwrap().scopes, Some(vec!["a".into(), "b".into()]));
        assert_eq!(parse(json!({ "callbackPort": 1 }), true).unwrap().redirect_port, Some(1));
        assert_eq!(parse(json!({}), true).unwrap(), OAuthSpec::default());
    }

    #[test]
    fn wrong_values_and_combinations_name_their_key() {
        assert_eq!(err_key(json!("x")), "oauth");
        assert_eq!(err_key(json!({ "clientID": "x" })), "oauth.clientID");
        assert!(parse(json!({ "clientID": "x" }), false).is_ok(), "another client's key is its own");
        assert_eq!(err_key(json!({ "clientId": 1 })), "oauth.clientId");
        assert_eq!(err_key(json!({ "redirectPort": 0 })), "oauth.redirectPort");
        assert_eq!(err_key(json!({ "redirectPort": 70000 })), "oauth.redirectPort");
        assert_eq!(err_key(json!({ "grant": "password" })), "oauth.grant");
        assert_eq!(err_key(json!({ "tokenEndpointAuthMethod": "tls_client_auth" })), "oauth.tokenEndpointAuthMethod");
        assert_eq!(err_key(json!({ "scopes": ["a b"] })), "oauth.scopes[0]");
        assert_eq!(err_key(json!({ "clientMetadataUrl": "http://x/c.json" })), "oauth.clientMetadataUrl");
        assert_eq!(err_key(json!({ "clientSecret": "s" })), "oauth.clientId");
        assert_eq!(err_key(json!({ "grant": "client_credentials", "clientId": "i" })), "oauth.clientSecret");
        assert_eq!(err_key(json!({ "clientId": "i", "clientSecret": "s", "privateKey": "k" })), "oauth.privateKey");
        // Credentials name the server that issued them, over https (or on this machine).
        assert_eq!(err_key(json!({ "clientId": "i", "clientSecret": "s" })), "oauth.issuer");
        assert_eq!(err_key(json!({ "clientId": "i", "privateKey": "k" })), "oauth.issuer");
        for insecure in ["http://as.example", "file:///x", "not a url"] {
            assert_eq!(err_key(json!({ "issuer": insecure })), "oauth.issuer", "{insecure}");
        }
        assert!(parse(json!({ "issuer": "http://127.0.0.1:8080" }), true).is_ok());
        let issued = |mut v: Value| {
            v["issuer"] = json!("https://as.example");
            v
        };
        let mismatch = json!({ "clientId": "i", "privateKey": "k", "tokenEndpointAuthMethod": "client_secret_basic" });
        assert_eq!(err_key(issued(mismatch)), "oauth.tokenEndpointAuthMethod");
        let mismatch = json!({ "clientId": "i", "clientSecret": "s", "tokenEndpointAuthMethod": "private_key_jwt" });
        assert_eq!(err_key(issued(mismatch)), "oauth.tokenEndpointAuthMethod");
    }
}
