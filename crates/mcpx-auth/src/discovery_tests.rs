//! The discovery's tests: protected resource and authorization server metadata found,
//! checked and refused (another origin, plain HTTP), against an in-process endpoint.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::json;

use super::*;

/// Metadata documents by URL; every URL asked for is recorded, in order.
#[derive(Default)]
struct Docs {
    docs: HashMap<String, serde_json::Value>,
    asked: Mutex<Vec<String>>,
    /// URLs that fail as an unreachable server would.
    down: Vec<String>,
}

impl Docs {
    fn with(mut self, url: &str, doc: serde_json::Value) -> Docs {
        self.docs.insert(url.to_owned(), doc);
        self
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl Fetch for Docs {
    fn get_json<'a>(&'a self, url: &'a Url) -> BoxFuture<'a, Result<Option<serde_json::Value>, DiscoveryError>> {
        self.asked.lock().unwrap().push(url.to_string());
        let answer = if self.down.contains(&url.to_string()) {
            Err(DiscoveryError::Fetch { url: url.to_string(), message: "connection refused".into() })
        } else {
            Ok(self.docs.get(url.as_str()).cloned())
        };
        Box::pin(async move { answer })
    }
}

fn url(text: &str) -> Url {
    Url::parse(text).unwrap()
}

fn run(docs: &Docs, server: &str, challenge: Option<&str>) -> Result<Discovered, DiscoveryError> {
    let challenge = challenge.map(|c| Challenge::parse(c).unwrap());
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(discover(docs, &url(server), challenge.as_ref()))
}

/// RFC 8414 metadata for `issuer`, its endpoints under `base`.
fn as_metadata(issuer: &str, base: &str) -> serde_json::Value {
    json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": ["as-scope"],
    })
}

#[test]
fn protected_resource_urls_come_from_the_challenge_then_the_path_then_the_root() {
    let server = url("https://api.example.com/public/mcp?x=1");
    let challenge = Challenge::parse(r#"Bearer resource_metadata="/custom/prm.json""#).unwrap();
    let urls: Vec<String> = protected_resource_urls(&server, Some(&challenge)).iter().map(|u| u.to_string()).collect();
    assert_eq!(
        urls,
        [
            "https://api.example.com/custom/prm.json",
            "https://api.example.com/.well-known/oauth-protected-resource/public/mcp",
            "https://api.example.com/.well-known/oauth-protected-resource",
        ]
    );
    let root: Vec<String> =
        protected_resource_urls(&url("https://api.example.com/"), None).iter().map(|u| u.to_string()).collect();
    assert_eq!(root, ["https://api.example.com/.well-known/oauth-protected-resource"]);
}

#[test]
fn authorization_server_urls_follow_the_specifications_order() {
    let with_path: Vec<(String, Source)> = authorization_server_urls("https://auth.example.com/tenant1")
        .unwrap()
        .into_iter()
        .map(|(u, s)| (u.to_string(), s))
        .collect();
    assert_eq!(
        with_path,
        [
            ("https://auth.example.com/.well-known/oauth-authorization-server/tenant1".to_owned(), Source::OAuth),
            ("https://auth.example.com/.well-known/openid-configuration/tenant1".to_owned(), Source::OpenId),
            ("https://auth.example.com/tenant1/.well-known/openid-configuration".to_owned(), Source::OpenId),
        ]
    );
    let bare: Vec<String> = authorization_server_urls("https://auth.example.com")
        .unwrap()
        .into_iter()
        .map(|(u, _)| u.to_string())
        .collect();
    assert_eq!(
        bare,
        [
            "https://auth.example.com/.well-known/oauth-authorization-server",
            "https://auth.example.com/.well-known/openid-configuration",
        ]
    );
    assert!(matches!(authorization_server_urls("not a url"), Err(DiscoveryError::BadMetadata { .. })));
}

/// The challenge names the metadata; the root well-known URL (a trap here) is never
/// asked for; the scopes come from the challenge.
#[test]
fn the_challenges_metadata_and_scope_win() {
    let docs = Docs::default()
        .with(
            "https://api.example.com/prm",
            json!({ "resource": "https://api.example.com/mcp", "authorization_servers": ["https://auth.example.com"],
                "scopes_supported": ["prm-scope"] }),
        )
        .with("https://api.example.com/.well-known/oauth-protected-resource", json!({ "trap": true }))
        .with(
            "https://auth.example.com/.well-known/oauth-authorization-server",
            as_metadata("https://auth.example.com", "https://auth.example.com"),
        );
    let found =
        run(&docs, "https://api.example.com/mcp", Some(r#"Bearer resource_metadata="/prm", scope="a b""#)).unwrap();
    assert_eq!(
        docs.asked(),
        ["https://api.example.com/prm", "https://auth.example.com/.well-known/oauth-authorization-server"]
    );
    assert_eq!(found.resource.as_str(), "https://api.example.com/mcp");
    assert_eq!(found.scopes, ["a", "b"]);
    assert_eq!(found.source, Source::OAuth);
    assert_eq!(found.server.token_endpoint.as_str(), "https://auth.example.com/token");
    assert!(found.server.supports_s256(found.source));
}

/// Without a challenge: the path-based URL, then the root one; OpenID Connect with the
/// path appended, after the two inserted forms; scopes from `scopes_supported`.
#[test]
fn well_known_urls_and_openid_discovery_in_order() {
    let docs = Docs::default()
        .with(
            "https://api.example.com/.well-known/oauth-protected-resource",
            json!({ "resource": "https://api.example.com/", "authorization_servers": ["https://auth.example.com/tenant1"],
                "scopes_supported": ["prm-scope"] }),
        )
        .with(
            "https://auth.example.com/tenant1/.well-known/openid-configuration",
            as_metadata("https://auth.example.com/tenant1", "https://auth.example.com/tenant1"),
        );
    let found = run(&docs, "https://api.example.com/mcp", Some(r#"Bearer realm="x""#)).unwrap();
    assert_eq!(
        docs.asked(),
        [
            "https://api.example.com/.well-known/oauth-protected-resource/mcp",
            "https://api.example.com/.well-known/oauth-protected-resource",
            "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
            "https://auth.example.com/.well-known/openid-configuration/tenant1",
            "https://auth.example.com/tenant1/.well-known/openid-configuration",
        ]
    );
    assert_eq!(found.source, Source::OpenId);
    assert_eq!(found.resource.as_str(), "https://api.example.com/", "the metadata's resource");
    assert_eq!(found.scopes, ["prm-scope"]);
}

#[test]
fn no_scopes_anywhere_means_none() {
    let docs = Docs::default()
        .with(
            "https://api.example.com/.well-known/oauth-protected-resource/mcp",
            json!({ "authorization_servers": ["https://auth.example.com"] }),
        )
        .with(
            "https://auth.example.com/.well-known/oauth-authorization-server",
            as_metadata("https://auth.example.com", "https://auth.example.com"),
        );
    let found = run(&docs, "https://api.example.com/mcp#frag", None).unwrap();
    assert_eq!(found.scopes, Vec::<String>::new(), "not the authorization server's scopes_supported");
    assert_eq!(found.resource.as_str(), "https://api.example.com/mcp", "the server's URL, no fragment");
}

#[test]
fn an_issuer_that_differs_at_all_is_refused() {
    for issuer in ["https://auth.example.com/", "https://evil.example.com", "https://AUTH.example.com"] {
        let docs = Docs::default()
            .with(
                "https://api.example.com/.well-known/oauth-protected-resource/mcp",
                json!({ "authorization_servers": ["https://auth.example.com"] }),
            )
            .with(
                "https://auth.example.com/.well-known/oauth-authorization-server",
                as_metadata(issuer, "https://auth.example.com"),
            );
        let e = run(&docs, "https://api.example.com/mcp", None).unwrap_err();
        assert_eq!(
            e,
            DiscoveryError::IssuerMismatch {
                expected: "https://auth.example.com".into(),
                found: issuer.into(),
                url: "https://auth.example.com/.well-known/oauth-authorization-server".into(),
            }
        );
        assert!(e.to_string().contains("tell the server's operator"), "{e}");
    }
}

#[test]
fn a_resource_for_another_server_is_refused() {
    for resource in ["https://other.example.com/mcp", "https://api.example.com/mcp2", "http://api.example.com/mcp"] {
        let docs = Docs::default().with(
            "https://api.example.com/.well-known/oauth-protected-resource/mcp",
            json!({ "resource": resource, "authorization_servers": ["https://auth.example.com"] }),
        );
        let e = run(&docs, "https://api.example.com/mcp", None).unwrap_err();
        assert!(matches!(e, DiscoveryError::ResourceMismatch { .. }), "{resource}: {e:?}");
    }
}

#[test]
fn metadata_without_an_authorization_server_or_malformed_is_an_error() {
    let prm = "https://api.example.com/.well-known/oauth-protected-resource/mcp";
    let docs = Docs::default().with(prm, json!({ "authorization_servers": [] }));
    let e = run(&docs, "https://api.example.com/mcp", None).unwrap_err();
    assert_eq!(e, DiscoveryError::NoAuthorizationServer { url: prm.into() });
    let docs = Docs::default().with(prm, json!({ "authorization_servers": "https://auth.example.com" }));
    assert!(matches!(run(&docs, "https://api.example.com/mcp", None), Err(DiscoveryError::BadMetadata { .. })));
    let docs = Docs::default().with(prm, json!({ "authorization_servers": ["https://auth.example.com"] }));
    let e = run(&docs, "https://api.example.com/mcp", None).unwrap_err();
    assert!(matches!(&e, DiscoveryError::NoMetadata { tried, .. } if tried.contains("openid-configuration")), "{e:?}");
}

#[test]
fn an_unreachable_metadata_url_stops_discovery() {
    let prm = "https://api.example.com/.well-known/oauth-protected-resource/mcp";
    let docs = Docs { down: vec![prm.into()], ..Docs::default() };
    let e = run(&docs, "https://api.example.com/mcp", None).unwrap_err();
    assert!(matches!(e, DiscoveryError::Fetch { .. }), "{e:?}");
    assert_eq!(docs.asked(), [prm]);
}

/// 2025-03-26: no protected resource metadata, RFC 8414 metadata at the origin, its
/// issuer (here under `/oauth`) not checked against the origin.
#[test]
fn without_resource_metadata_the_origins_metadata_serves() {
    let docs = Docs::default().with(
        "http://localhost:3000/.well-known/oauth-authorization-server",
        as_metadata("http://localhost:3000/oauth", "http://localhost:3000/oauth"),
    );
    let found = run(&docs, "http://localhost:3000/api/mcp", Some(r#"Bearer scope="s""#)).unwrap();
    assert_eq!(found.source, Source::Origin2025_03_26);
    assert_eq!(found.server.authorization_endpoint.unwrap().as_str(), "http://localhost:3000/oauth/authorize");
    assert_eq!(found.resource.as_str(), "http://localhost:3000/api/mcp");
    assert_eq!(found.scopes, ["s"]);
    assert!(found.protected.is_none());
}

/// 2025-03-26: no metadata at all: `/authorize`, `/token`, `/register` at the origin.
#[test]
fn without_any_metadata_the_default_endpoints_serve() {
    let docs = Docs::default();
    let found = run(&docs, "http://localhost:3000/api/mcp", None).unwrap();
    assert_eq!(found.source, Source::Defaults2025_03_26);
    assert_eq!(found.server.issuer, "http://localhost:3000");
    assert_eq!(found.server.authorization_endpoint.as_ref().unwrap().as_str(), "http://localhost:3000/authorize");
    assert_eq!(found.server.token_endpoint.as_str(), "http://localhost:3000/token");
    assert_eq!(found.server.registration_endpoint.as_ref().unwrap().as_str(), "http://localhost:3000/register");
    assert!(found.server.supports_s256(found.source));
    assert_eq!(
        docs.asked(),
        [
            "http://localhost:3000/.well-known/oauth-protected-resource/api/mcp",
            "http://localhost:3000/.well-known/oauth-protected-resource",
            "http://localhost:3000/.well-known/oauth-authorization-server",
        ]
    );
}

#[test]
fn pkce_s256_must_be_advertised() {
    let mut server: AuthServer =
        serde_json::from_value(as_metadata("https://a.example.com", "https://a.example.com")).unwrap();
    assert!(server.supports_s256(Source::OAuth));
    server.code_challenge_methods_supported = Some(vec!["plain".into()]);
    assert!(!server.supports_s256(Source::OAuth));
    server.code_challenge_methods_supported = None;
    assert!(!server.supports_s256(Source::OpenId));
}

#[test]
fn covers_is_same_origin_and_a_path_prefix_at_a_boundary() {
    let yes = [("https://h/", "https://h/mcp"), ("https://h/mcp", "https://h/mcp"), ("https://h/a/", "https://h/a/b")];
    for (resource, server) in yes {
        assert!(covers(&url(resource), &url(server)), "{resource} covers {server}");
    }
    let no = [("https://h/mcp", "https://h/mcpx"), ("https://h/a/b", "https://h/a"), ("https://h:8443/", "https://h/")];
    for (resource, server) in no {
        assert!(!covers(&url(resource), &url(server)), "{resource} does not cover {server}");
    }
}

#[test]
fn plain_http_endpoints_off_this_machine_are_refused() {
    let prm = "https://api.example.com/.well-known/oauth-protected-resource/mcp";
    let with_as = |metadata: serde_json::Value| {
        Docs::default()
            .with(prm, json!({ "authorization_servers": ["https://auth.example.com"] }))
            .with("https://auth.example.com/.well-known/oauth-authorization-server", metadata)
    };
    for (field, value) in [
        ("token_endpoint", "http://auth.example.com/token"),
        ("authorization_endpoint", "file:///etc/passwd"),
        ("registration_endpoint", "http://10.0.0.1/register"),
        ("device_authorization_endpoint", "ftp://auth.example.com/device"),
        ("revocation_endpoint", "http://[::2]/revoke"),
    ] {
        let mut metadata = as_metadata("https://auth.example.com", "https://auth.example.com");
        metadata[field] = json!(value);
        let e = run(&with_as(metadata), "https://api.example.com/mcp", None).unwrap_err();
        assert!(matches!(&e, DiscoveryError::Insecure { .. }), "{field}: {e:?}");
        assert!(e.to_string().contains("neither https nor on this machine"), "{e}");
    }
    // Loopback http is this machine's, in each spelling.
    for base in ["http://127.0.0.1:9", "http://127.0.0.2:9", "http://localhost:9", "http://[::1]:9"] {
        let metadata = as_metadata("https://auth.example.com", base);
        assert!(run(&with_as(metadata), "https://api.example.com/mcp", None).is_ok(), "{base}");
    }
    // A server whose own metadata is over plain http to another machine is not read.
    let docs = Docs::default();
    let e = run(&docs, "http://api.example.com/mcp", None).unwrap_err();
    assert!(matches!(e, DiscoveryError::Insecure { .. }), "{e:?}");
    assert!(docs.asked().is_empty(), "{:?}", docs.asked());
    // A challenge's metadata on another origin is read over https only.
    let foreign = r#"Bearer resource_metadata="http://other.example.com/prm""#;
    let e = run(&docs, "https://api.example.com/mcp", Some(foreign)).unwrap_err();
    assert!(matches!(e, DiscoveryError::ForeignMetadata { .. }), "{e:?}");
    assert!(docs.asked().is_empty(), "{:?}", docs.asked());
}

#[test]
fn a_document_that_is_not_metadata_is_described_not_quoted() {
    let prm = "https://api.example.com/.well-known/oauth-protected-resource/mcp";
    let docs = Docs::default().with(prm, json!({ "authorization_servers": "QUOTED-TEXT-91c" }));
    let e = run(&docs, "https://api.example.com/mcp", None).unwrap_err().to_string();
    assert!(e.contains("wrong type") && !e.contains("QUOTED-TEXT-91c"), "{e}");
}
