//! Discovery on a 401: from an MCP server's URL and its `Bearer` challenge to the
//! authorization server that issues its tokens (MCP 2025-11-25, Authorization,
//! "Authorization Server Discovery"), with the 2025-03-26 revision's fallbacks.
//!
//! 1. The protected resource metadata (RFC 9728): at the challenge's
//!    `resource_metadata`, else at the path-based well-known URL, else at the root one.
//! 2. The authorization server's metadata, for the first server it names: RFC 8414
//!    and OpenID Connect Discovery 1.0 URLs in the specification's order, the `issuer`
//!    checked to be exactly the one asked for (RFC 8414 §3.3).
//! 3. Without protected resource metadata (a 2025-03-26 server): RFC 8414 metadata at
//!    the server's origin, else the default `/authorize`, `/token` and `/register`
//!    there (MCP 2025-03-26, Authorization, "Server Metadata Discovery" and "Fallbacks
//!    for Servers without Metadata Discovery").
//!
//! The fetching is behind [`Fetch`], so the order and the checks are tested without
//! a network.

use std::future::Future;
use std::pin::Pin;

use serde::Deserialize;
use url::Url;

use super::challenge::Challenge;

/// A boxed future, as [`Fetch`] returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How discovery reads a metadata document.
pub trait Fetch: Sync {
    /// GETs `url`: `Ok(Some(json))` for a 2xx JSON answer, `Ok(None)` for a 4xx
    /// (the document is not there; the next URL is tried), and an error for anything
    /// else (the server cannot be reached, a 5xx, a body that is not JSON).
    fn get_json<'a>(&'a self, url: &'a Url) -> BoxFuture<'a, Result<Option<serde_json::Value>, DiscoveryError>>;
}

/// What went wrong in discovery; each message says what to do, and none holds a
/// credential (metadata documents are public).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// A metadata URL could not be fetched or read.
    #[error("could not read {url}: {message}; check that the server is up and that its `url` is right")]
    Fetch {
        /// The URL asked for.
        url: String,
        /// What failed.
        message: String,
    },
    /// A document is not the metadata it should be.
    #[error("the metadata at {url} is not valid: {message}; the server's operator has to fix it")]
    BadMetadata {
        /// Where it was found.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// The protected resource metadata names no authorization server.
    #[error(
        "the protected resource metadata at {url} names no authorization server; the server's operator has to add one to `authorization_servers`"
    )]
    NoAuthorizationServer {
        /// Where the metadata was found.
        url: String,
    },
    /// The authorization server's metadata is for another issuer (RFC 8414 §3.3).
    #[error(
        "the authorization server metadata at {url} is for issuer {found:?}, not {expected:?}; mcpx does not use it, as it could send your login elsewhere: tell the server's operator"
    )]
    IssuerMismatch {
        /// The issuer asked for.
        expected: String,
        /// The `issuer` in the document.
        found: String,
        /// Where the document was found.
        url: String,
    },
    /// The protected resource metadata is for another resource (RFC 9728 §3.3).
    #[error(
        "the protected resource metadata is for {resource}, which is not {server}; mcpx does not log in to it, as its tokens would be for another server: check the entry's `url`"
    )]
    ResourceMismatch {
        /// The `resource` in the metadata.
        resource: String,
        /// The MCP server's URL.
        server: String,
    },
    /// An OAuth URL (metadata, or an endpoint a document names) that is neither https
    /// nor on this machine (OAuth 2.1 §1.5).
    #[error(
        "{what} is at {url}, which is neither https nor on this machine (plain http only to 127.0.0.1, ::1 or localhost); mcpx sends no login or secret there: tell the server's operator"
    )]
    Insecure {
        /// What the URL is for.
        what: &'static str,
        /// The URL.
        url: String,
    },
    /// The challenge names protected resource metadata on another origin, over plain
    /// http (RFC 9728 §3.1 places it at the server's own origin).
    #[error(
        "the server's challenge names its protected resource metadata at {url}, on another origin and not https; mcpx reads it only from the server's own origin or over https: tell the server's operator"
    )]
    ForeignMetadata {
        /// The URL the challenge named.
        url: String,
    },
    /// No authorization server metadata at any of the URLs the specification names.
    #[error(
        "no authorization server metadata for {issuer} (tried {tried}); the server's operator has to publish it, or the entry's `oauth` block has to name the endpoints"
    )]
    NoMetadata {
        /// The issuer.
        issuer: String,
        /// The URLs tried, comma-separated.
        tried: String,
    },
}

/// The protected resource metadata (RFC 9728 §2), the fields MCP uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedResource {
    /// Where it was found.
    pub url: Url,
    /// `resource`: the resource identifier, for RFC 8707's `resource` parameter.
    pub resource: Option<Url>,
    /// `authorization_servers`: issuer identifiers, as written (compared exactly).
    pub authorization_servers: Vec<String>,
    /// `scopes_supported`, when given.
    pub scopes_supported: Option<Vec<String>>,
}

/// How the authorization server's endpoints were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// RFC 8414 metadata (`/.well-known/oauth-authorization-server`).
    OAuth,
    /// OpenID Connect Discovery 1.0 (`/.well-known/openid-configuration`).
    OpenId,
    /// RFC 8414 metadata at the MCP server's origin, for a server without protected
    /// resource metadata (MCP 2025-03-26); its issuer is not checked.
    Origin2025_03_26,
    /// No metadata at all: the 2025-03-26 default endpoints at the server's origin.
    Defaults2025_03_26,
}

/// The authorization server's metadata (RFC 8414 §2), the fields mcpx uses.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AuthServer {
    /// `issuer`, as written.
    pub issuer: String,
    /// `authorization_endpoint` (absent for a server of the client credentials grant only).
    #[serde(default)]
    pub authorization_endpoint: Option<Url>,
    /// `token_endpoint`.
    pub token_endpoint: Url,
    /// `registration_endpoint` (RFC 7591), when dynamic registration is offered.
    #[serde(default)]
    pub registration_endpoint: Option<Url>,
    /// `device_authorization_endpoint` (RFC 8628 §4).
    #[serde(default)]
    pub device_authorization_endpoint: Option<Url>,
    /// `revocation_endpoint` (RFC 7009, RFC 8414 §2).
    #[serde(default)]
    pub revocation_endpoint: Option<Url>,
    /// `scopes_supported`.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// `code_challenge_methods_supported`: absent means no PKCE (MCP 2025-11-25,
    /// Authorization, "Authorization Code Protection").
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// `token_endpoint_auth_methods_supported`; absent means `client_secret_basic`.
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// `grant_types_supported`.
    #[serde(default)]
    pub grant_types_supported: Option<Vec<String>>,
    /// `authorization_response_iss_parameter_supported` (RFC 9207 §3).
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
    /// `client_id_metadata_document_supported` (MCP 2025-11-25, Authorization,
    /// "Client ID Metadata Documents").
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
}

/// Where discovery ended: what to ask for a token, and for which resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// The resource to name in RFC 8707's `resource` parameter: the metadata's
    /// `resource`, else the MCP server's URL without its fragment.
    pub resource: Url,
    /// The protected resource metadata, when the server has it.
    pub protected: Option<ProtectedResource>,
    /// The authorization server.
    pub server: AuthServer,
    /// How [`Discovered::server`] was found.
    pub source: Source,
    /// The scopes to ask for (MCP 2025-11-25, Authorization, "Scope Selection
    /// Strategy"): the challenge's `scope`, else the protected resource's
    /// `scopes_supported`, else none.
    pub scopes: Vec<String>,
}

impl AuthServer {
    /// A server known by its issuer and token endpoint only (a kept login's, to renew it).
    pub fn token_only(issuer: String, token_endpoint: Url) -> AuthServer {
        AuthServer {
            issuer,
            authorization_endpoint: None,
            token_endpoint,
            registration_endpoint: None,
            device_authorization_endpoint: None,
            revocation_endpoint: None,
            scopes_supported: None,
            code_challenge_methods_supported: None,
            token_endpoint_auth_methods_supported: None,
            grant_types_supported: None,
            authorization_response_iss_parameter_supported: false,
            client_id_metadata_document_supported: false,
        }
    }

    /// Whether the server offers PKCE with S256, which the authorization code flow
    /// requires (MCP 2025-11-25, Authorization, "Authorization Code Protection"). The
    /// 2025-03-26 defaults assume it, as that revision did.
    pub fn supports_s256(&self, source: Source) -> bool {
        source == Source::Defaults2025_03_26
            || self.code_challenge_methods_supported.as_ref().is_some_and(|m| m.iter().any(|m| m == "S256"))
    }
}

/// Discovers the authorization server of the MCP server at `server`, which answered
/// 401 with `challenge` (its `Bearer` challenge, if any).
///
/// Errors: [`DiscoveryError`], for the first step that cannot go on.
pub async fn discover(
    fetch: &dyn Fetch,
    server: &Url,
    challenge: Option<&Challenge>,
) -> Result<Discovered, DiscoveryError> {
    let resource_url = canonical(server);
    let mut protected = None;
    for url in protected_resource_urls(server, challenge) {
        if url.origin() != server.origin() && url.scheme() != "https" {
            return Err(DiscoveryError::ForeignMetadata { url: url.to_string() });
        }
        secure("the protected resource metadata", &url)?;
        if let Some(json) = fetch.get_json(&url).await? {
            protected = Some(parse_protected_resource(url, json)?);
            break;
        }
    }
    let from_challenge = challenge.map(Challenge::scopes).filter(|s| !s.is_empty());
    let Some(protected) = protected else {
        let (server, source) = origin_fallback(fetch, server).await?;
        return Ok(Discovered {
            resource: resource_url,
            protected: None,
            server,
            source,
            scopes: from_challenge.unwrap_or_default(),
        });
    };
    let resource = match &protected.resource {
        Some(resource) if !covers(resource, &resource_url) => {
            return Err(DiscoveryError::ResourceMismatch {
                resource: resource.to_string(),
                server: resource_url.to_string(),
            });
        }
        Some(resource) => resource.clone(),
        None => resource_url,
    };
    let issuer = protected
        .authorization_servers
        .first()
        .ok_or_else(|| DiscoveryError::NoAuthorizationServer { url: protected.url.to_string() })?;
    let (auth, source) = authorization_server(fetch, issuer).await?;
    let scopes = from_challenge.or_else(|| protected.scopes_supported.clone()).unwrap_or_default();
    Ok(Discovered { resource, protected: Some(protected), server: auth, source, scopes })
}

/// The URLs of the protected resource metadata, in the order they are tried (MCP
/// 2025-11-25, Authorization, "Protected Resource Metadata Discovery Requirements"):
/// the challenge's `resource_metadata` (resolved against `server`), the path-based
/// well-known URL (RFC 9728 §3.1), the root one.
pub fn protected_resource_urls(server: &Url, challenge: Option<&Challenge>) -> Vec<Url> {
    let mut urls = Vec::new();
    if let Some(url) = challenge.and_then(|c| c.resource_metadata.as_deref()).and_then(|u| server.join(u).ok()) {
        urls.push(url);
    }
    urls.extend(well_known(server, "oauth-protected-resource"));
    urls.dedup();
    urls
}

/// The URLs of an authorization server's metadata, for `issuer`, with the kind of
/// each, in the order the specification gives (MCP 2025-11-25, Authorization,
/// "Authorization Server Metadata Discovery"): with a path, RFC 8414 with the path
/// inserted, OpenID Connect with it inserted, OpenID Connect with it appended;
/// without one, RFC 8414, then OpenID Connect.
///
/// Errors: `issuer` is not a URL.
pub fn authorization_server_urls(issuer: &str) -> Result<Vec<(Url, Source)>, DiscoveryError> {
    let url = Url::parse(issuer).map_err(|e| DiscoveryError::BadMetadata {
        url: issuer.to_owned(),
        message: format!("the authorization server {issuer:?} is not a URL ({e})"),
    })?;
    let path = url.path().trim_end_matches('/');
    let at = |p: &str| {
        let mut u = origin(&url);
        u.set_path(p);
        u
    };
    Ok(if path.is_empty() {
        vec![
            (at("/.well-known/oauth-authorization-server"), Source::OAuth),
            (at("/.well-known/openid-configuration"), Source::OpenId),
        ]
    } else {
        vec![
            (at(&format!("/.well-known/oauth-authorization-server{path}")), Source::OAuth),
            (at(&format!("/.well-known/openid-configuration{path}")), Source::OpenId),
            (at(&format!("{path}/.well-known/openid-configuration")), Source::OpenId),
        ]
    })
}

/// The first metadata of `issuer` found, its `issuer` checked to be exactly `issuer`
/// (RFC 8414 §3.3).
///
/// Errors: [`DiscoveryError::NoMetadata`] when none is found at any URL of
/// [`authorization_server_urls`]; any other when one cannot be read or is for another
/// issuer.
pub async fn authorization_server(fetch: &dyn Fetch, issuer: &str) -> Result<(AuthServer, Source), DiscoveryError> {
    let urls = authorization_server_urls(issuer)?;
    for (url, source) in &urls {
        secure("the authorization server's metadata", url)?;
        let Some(json) = fetch.get_json(url).await? else { continue };
        let server = parse_auth_server(url, json)?;
        if server.issuer != issuer {
            return Err(DiscoveryError::IssuerMismatch {
                expected: issuer.to_owned(),
                found: server.issuer,
                url: url.to_string(),
            });
        }
        return Ok((server, *source));
    }
    Err(DiscoveryError::NoMetadata {
        issuer: issuer.to_owned(),
        tried: urls.iter().map(|(u, _)| u.as_str()).collect::<Vec<_>>().join(", "),
    })
}

/// The 2025-03-26 revision's discovery, for a server without protected resource
/// metadata: RFC 8414 metadata at the server's origin, else the default endpoints there.
async fn origin_fallback(fetch: &dyn Fetch, server: &Url) -> Result<(AuthServer, Source), DiscoveryError> {
    let base = origin(server);
    let at = |p: &str| {
        let mut u = base.clone();
        u.set_path(p);
        u
    };
    let url = at("/.well-known/oauth-authorization-server");
    secure("the authorization server's metadata", &url)?;
    if let Some(json) = fetch.get_json(&url).await? {
        return Ok((parse_auth_server(&url, json)?, Source::Origin2025_03_26));
    }
    let defaults = AuthServer {
        authorization_endpoint: Some(at("/authorize")),
        registration_endpoint: Some(at("/register")),
        ..AuthServer::token_only(base.as_str().trim_end_matches('/').to_owned(), at("/token"))
    };
    endpoints_secure(&defaults)?;
    Ok((defaults, Source::Defaults2025_03_26))
}

/// The protected resource metadata in `json`, found at `url`.
fn parse_protected_resource(url: Url, json: serde_json::Value) -> Result<ProtectedResource, DiscoveryError> {
    #[derive(Deserialize)]
    struct Raw {
        #[serde(default)]
        resource: Option<Url>,
        #[serde(default)]
        authorization_servers: Vec<String>,
        #[serde(default)]
        scopes_supported: Option<Vec<String>>,
    }
    let raw: Raw = serde_json::from_value(json)
        .map_err(|e| DiscoveryError::BadMetadata { url: url.to_string(), message: describe(&e) })?;
    Ok(ProtectedResource {
        url,
        resource: raw.resource,
        authorization_servers: raw.authorization_servers,
        scopes_supported: raw.scopes_supported,
    })
}

/// The authorization server metadata in `json`, found at `url`, every endpoint it
/// names https or on this machine.
fn parse_auth_server(url: &Url, json: serde_json::Value) -> Result<AuthServer, DiscoveryError> {
    let server: AuthServer = serde_json::from_value(json)
        .map_err(|e| DiscoveryError::BadMetadata { url: url.to_string(), message: describe(&e) })?;
    endpoints_secure(&server)?;
    Ok(server)
}

/// Refuses `url` for `what` unless it is https or on this machine ([`mcpx_config::is_secure`]).
///
/// Errors: [`DiscoveryError::Insecure`].
pub fn secure(what: &'static str, url: &Url) -> Result<(), DiscoveryError> {
    if mcpx_config::is_secure(url) { Ok(()) } else { Err(DiscoveryError::Insecure { what, url: url.to_string() }) }
}

/// Every endpoint of `server` is https or on this machine: authorization, token,
/// registration, device authorization and revocation.
///
/// Errors: [`DiscoveryError::Insecure`] for the first that is not.
pub fn endpoints_secure(server: &AuthServer) -> Result<(), DiscoveryError> {
    secure("the token endpoint", &server.token_endpoint)?;
    let named = [
        ("the authorization endpoint", &server.authorization_endpoint),
        ("the registration endpoint", &server.registration_endpoint),
        ("the device authorization endpoint", &server.device_authorization_endpoint),
        ("the revocation endpoint", &server.revocation_endpoint),
    ];
    for (what, url) in named {
        if let Some(url) = url {
            secure(what, url)?;
        }
    }
    Ok(())
}

/// What is wrong with a metadata document, from its parse error, without quoting the
/// document: a missing field is named (the name is the specification's), any other
/// error is described by its kind only.
fn describe(e: &serde_json::Error) -> String {
    let text = e.to_string();
    if text.starts_with("missing field") {
        return text;
    }
    let kind = if text.starts_with("invalid type") {
        "a field has the wrong type"
    } else if text.starts_with("invalid value") || text.contains("relative URL") || text.contains("URL") {
        "a field's value is not valid (a URL that does not parse, say)"
    } else {
        "it is not the metadata document it should be"
    };
    kind.to_owned()
}

/// `/.well-known/<name>` for `server`: with its path inserted (when it has one), then
/// at the root (RFC 9728 §3.1, RFC 8414 §3.1).
fn well_known(server: &Url, name: &str) -> Vec<Url> {
    let mut urls = Vec::new();
    let path = server.path().trim_end_matches('/');
    let mut at = origin(server);
    if !path.is_empty() {
        at.set_path(&format!("/.well-known/{name}{path}"));
        urls.push(at.clone());
    }
    at.set_path(&format!("/.well-known/{name}"));
    urls.push(at);
    urls
}

/// `url`'s scheme, host and port, with the path `/`.
fn origin(url: &Url) -> Url {
    let mut origin = url.clone();
    origin.set_path("/");
    origin.set_query(None);
    origin.set_fragment(None);
    origin
}

/// The MCP server's canonical URI (MCP 2025-11-25, Authorization, "Canonical Server
/// URI"): its URL without a fragment. The URL parser already lowercases the scheme and
/// the host.
fn canonical(server: &Url) -> Url {
    let mut url = server.clone();
    url.set_fragment(None);
    url
}

/// Whether the protected resource `resource` covers the server at `server`: the same
/// origin, and `server`'s path is `resource`'s or below it (RFC 9728 §7.3: a token is
/// for the resource that names it).
pub fn covers(resource: &Url, server: &Url) -> bool {
    if resource.origin() != server.origin() {
        return false;
    }
    let base = resource.path().trim_end_matches('/');
    let path = server.path();
    path == base || path.trim_end_matches('/') == base || path.starts_with(&format!("{base}/"))
}

#[cfg(test)]
#[path = "discovery_tests.rs"]
mod tests;
