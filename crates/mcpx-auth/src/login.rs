//! A user's login to a remote server (`mcpx auth login`): a probe for the 401 and its
//! challenge, discovery, the client (configured, or registered), then the
//! authorization code flow with a loopback redirect listener on 127.0.0.1 (RFC 8252
//! §7.3), the device authorization grant (RFC 8628, [`super::device`]) when asked, or
//! the client credentials grant for a machine-to-machine entry. The tokens go to the
//! secret store; the caller only learns where, and for what.

use std::time::Duration;

use mcpx_platform::fs::Dir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use url::Url;

use super::challenge::Challenge;
use super::device::{self, DevicePrompt};
use super::discovery::{AuthServer, Discovered, discover};
use super::fetch::HttpFetch;
use super::flow::{self, ClientInfo, Grant};
use super::tokens;
use mcpx_config::{ExpandedOAuth, Grant as GrantKind, TokenAuthMethod};

/// How long a login waits for the browser to come back.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// How long ending the probe's MCP session may take.
const END_TIMEOUT: Duration = Duration::from_secs(5);

/// The MCP session header (MCP 2025-11-25, Transports, "Session Management").
const SESSION_ID: &str = "mcp-session-id";

/// The largest redirect request read, in bytes.
const MAX_REDIRECT_REQUEST: usize = 16 * 1024;

/// How long a connection to the redirect listener has to send its request.
const REDIRECT_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What a login is for.
pub struct LoginTarget<'a> {
    /// The HTTP client (it should follow no redirects to other origins).
    pub http: &'a reqwest::Client,
    /// The state directory, whose secret store keeps the tokens.
    pub state: &'a Dir,
    /// The server's name, for messages.
    pub server: &'a str,
    /// The server's URL, expanded.
    pub url: &'a Url,
    /// The entry's `oauth` block, expanded.
    pub oauth: Option<&'a ExpandedOAuth>,
    /// Log in by the device authorization grant (RFC 8628) instead of a browser
    /// redirect.
    pub device: bool,
}

/// What the user has to do for a login to go on.
#[derive(Debug, Clone, Copy)]
pub enum Prompt<'a> {
    /// Open the authorization URL in a browser (the redirect comes back to this
    /// machine's loopback listener).
    Open(&'a Url),
    /// Enter the code at the verification URI, on any device.
    Device(&'a DevicePrompt),
}

/// A finished login: what it is for, never the tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedIn {
    /// The authorization server.
    pub issuer: String,
    /// The resource.
    pub resource: String,
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// When the access token expires, in seconds since the Unix epoch.
    pub expires_at: Option<u64>,
    /// Where the tokens are kept (the secret store's location).
    pub location: String,
}

/// Logs in to `target`; `show` shows the user what to do (a browser, or a printed URL
/// or code) and returns at once.
///
/// Errors: one line saying what failed and what to do.
pub async fn login(
    target: &LoginTarget<'_>,
    show: &mut (dyn FnMut(Prompt<'_>) -> Result<(), String> + Send),
) -> Result<LoggedIn, String> {
    let (unauthorized, challenge) = probe(target).await?;
    let found =
        discover(&HttpFetch { http: target.http }, target.url, challenge.as_ref()).await.map_err(|e| e.to_string())?;
    if !unauthorized && found.protected.is_none() {
        return Err(format!(
            "{} answered without asking for a token and publishes no protected resource metadata: server `{}` asks for no login",
            target.url, target.server
        ));
    }
    let resource = found.resource.to_string();
    let mut scopes = target.oauth.and_then(|o| o.spec.scopes.clone()).unwrap_or_else(|| found.scopes.clone());
    // A login again (expired, or a step-up) asks for what the last one had and what
    // the server asked for since.
    if let Ok(Some(before)) = tokens::load(target.state, &found.server.issuer, &resource) {
        scopes = tokens::union(&tokens::union(&scopes, &before.scopes), &before.step_up);
    }
    let grant_kind = target.oauth.map(|o| o.spec.grant).unwrap_or_default();
    let kept = if grant_kind == GrantKind::ClientCredentials {
        let client = configured_client(target.oauth, &found.server)?
            .ok_or_else(|| "the client credentials grant needs `oauth.clientId`".to_owned())?;
        let grant = Grant { server: &found.server, client: &client, resource: &resource, scopes: &scopes };
        flow::client_credentials(target.http, &grant).await?
    } else if target.device {
        if found.server.device_authorization_endpoint.is_none() {
            return Err(format!(
                "{} offers no device login (its metadata has no `device_authorization_endpoint`, RFC 8628); log in with a browser: `mcpx auth login {}` (with `--no-browser`, open the URL on another machine)",
                found.server.issuer, target.server
            ));
        }
        let client = match configured_client(target.oauth, &found.server)? {
            Some(client) => client,
            None => flow::register(target.http, &found.server, None, &scopes).await?,
        };
        let grant = Grant { server: &found.server, client: &client, resource: &resource, scopes: &scopes };
        device::login(target.http, &grant, &mut |prompt| show(Prompt::Device(prompt))).await?
    } else {
        authorization_code(target, &found, &resource, &scopes, show).await?
    };
    // A user's login is a new identity for the schema cache (a client's own grant
    // is its client's).
    let mut kept = kept;
    if grant_kind != GrantKind::ClientCredentials {
        let mut id = [0u8; 16];
        mcpx_platform::random_bytes(&mut id).map_err(|e| e.to_string())?;
        kept.login_id = Some(id.iter().map(|b| format!("{b:02x}")).collect());
    }
    // Under the renewal lock, so a renewal of the previous login under way does not
    // save its tokens over these.
    let _held = tokens::hold(&kept.issuer, &kept.resource).await;
    let location = tokens::save(target.state, &kept)?;
    Ok(LoggedIn {
        issuer: kept.issuer,
        resource: kept.resource,
        scopes: kept.scopes,
        expires_at: kept.expires_at,
        location,
    })
}

/// The authorization code flow with PKCE through a loopback redirect.
async fn authorization_code(
    target: &LoginTarget<'_>,
    found: &Discovered,
    resource: &str,
    scopes: &[String],
    show: &mut (dyn FnMut(Prompt<'_>) -> Result<(), String> + Send),
) -> Result<tokens::Kept, String> {
    if !found.server.supports_s256(found.source) {
        return Err(format!(
            "{} does not offer PKCE with S256 (its metadata has no `code_challenge_methods_supported` with \"S256\"), which MCP authorization requires; mcpx does not log in without it",
            found.server.issuer
        ));
    }
    let port = target.oauth.and_then(|o| o.spec.redirect_port).unwrap_or(0);
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port} for the login's redirect: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let client = match configured_client(target.oauth, &found.server)? {
        Some(client) => client,
        None => flow::register(target.http, &found.server, Some(&redirect_uri), scopes).await?,
    };
    let pending = flow::authorize(&found.server, &client, &redirect_uri, resource, scopes)?;
    show(Prompt::Open(&pending.url))?;
    let query = tokio::time::timeout(LOGIN_TIMEOUT, redirect(&listener, &pending.state)).await.map_err(|_| {
        format!(
            "no login came back within {} s; run `mcpx auth login {}` again",
            LOGIN_TIMEOUT.as_secs(),
            target.server
        )
    })??;
    let code = check_redirect(&query, &pending.state, &found.server)?;
    let grant = Grant { server: &found.server, client: &client, resource, scopes };
    flow::exchange_code(target.http, &grant, pending, code).await
}

/// The client of the entry's `oauth` block: its `clientId` with its secret, or its
/// client ID metadata document where the server takes them; `None` to register.
pub(super) fn configured_client(
    oauth: Option<&ExpandedOAuth>,
    server: &AuthServer,
) -> Result<Option<ClientInfo>, String> {
    let Some(oauth) = oauth else { return Ok(None) };
    // Credentials go only to the server that issued them, whatever a resource server's
    // metadata names (the configuration requires `issuer` with them).
    if oauth.client_secret.is_some() || oauth.private_key.is_some() {
        match &oauth.spec.issuer {
            Some(issuer) if *issuer == server.issuer => {}
            Some(issuer) => {
                return Err(format!(
                    "the entry's `oauth.issuer` is {issuer:?}, but the server's metadata names the authorization server {:?}; mcpx sends the client's credentials to no other server, and sent nothing: check the entry's `url` and `oauth.issuer`",
                    server.issuer
                ));
            }
            None => {
                return Err(
                    "the entry's `oauth` block has credentials but no `issuer`; name the authorization server that issued them (`oauth.issuer`)"
                        .to_owned(),
                );
            }
        }
    }
    if let Some(id) = &oauth.client_id {
        let supported = server.token_endpoint_auth_methods_supported.as_deref();
        let offers = |m: &str| supported.is_none_or(|s| s.iter().any(|x| x == m));
        let method = match (oauth.spec.token_endpoint_auth_method, &oauth.client_secret) {
            (Some(m), _) => m,
            (None, _) if oauth.private_key.is_some() => TokenAuthMethod::PrivateKeyJwt,
            (None, Some(_)) if !offers("client_secret_basic") && offers("client_secret_post") => {
                TokenAuthMethod::ClientSecretPost
            }
            (None, Some(_)) => TokenAuthMethod::ClientSecretBasic,
            (None, None) => TokenAuthMethod::None,
        };
        let secret = oauth.client_secret.clone();
        let auth_method = method.as_str().to_owned();
        let private_key = oauth.private_key.clone();
        return Ok(Some(ClientInfo { id: id.clone(), secret, auth_method, private_key }));
    }
    if let Some(url) = oauth.spec.client_metadata_url.as_ref().filter(|_| server.client_id_metadata_document_supported)
    {
        let auth_method = "none".to_owned();
        return Ok(Some(ClientInfo { id: url.clone(), secret: None, auth_method, private_key: None }));
    }
    Ok(None)
}

/// POSTs an `initialize` to the server without a token: whether it answered 401, and
/// its challenge. A server may let `initialize` through and ask for a token only later
/// (discovery then goes by the well-known URLs); the session it then opened is ended.
///
/// Errors: the server cannot be reached.
async fn probe(target: &LoginTarget<'_>) -> Result<(bool, Option<Challenge>), String> {
    let body = serde_json::json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "mcpx", "version": env!("CARGO_PKG_VERSION") } } });
    let answer = target
        .http
        .post(target.url.clone())
        .header(reqwest::header::ACCEPT, "application/json, text/event-stream")
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("cannot reach {}: {}", target.url, super::fetch::chain(&e)))?;
    if answer.status() != reqwest::StatusCode::UNAUTHORIZED {
        // A server that let `initialize` through may have opened a session for it: end
        // it (MCP 2025-11-25, Transports, "Session Management": a client that no longer
        // needs a session sends DELETE with its id; a 405 says the server keeps it).
        if let Some(id) = answer.headers().get(SESSION_ID).cloned() {
            drop(answer);
            let delete = target.http.delete(target.url.clone()).header(SESSION_ID, id).timeout(END_TIMEOUT);
            if let Err(e) = delete.send().await {
                tracing::debug!(url = %target.url, error = %e, "could not end the login probe's MCP session");
            }
        }
        return Ok((false, None));
    }
    let challenge = answer
        .headers()
        .get_all(reqwest::header::WWW_AUTHENTICATE)
        .iter()
        .find_map(|v| v.to_str().ok().and_then(Challenge::parse));
    Ok((true, challenge))
}

/// Serves the loopback listener until the redirect of this login comes (`GET
/// /callback?...` carrying `state`); returns its query.
/// - Connections are served at once, each on its own task, with
///   [`REDIRECT_READ_TIMEOUT`] to send its request: an idle one holds nothing up.
/// - A connection from another user is closed unread (loopback TCP lets any user in).
/// - A `/callback` without this login's `state` is answered 400, and the listener goes
///   on waiting (RFC 6749 §10.12: only the request carrying `state` is the redirect).
/// - Other requests (a browser's `/favicon.ico`) get a 404.
async fn redirect(listener: &TcpListener, state: &str) -> Result<Vec<(String, String)>, String> {
    let (found, mut came) = tokio::sync::mpsc::channel(1);
    let mut conns = tokio::task::JoinSet::new();
    let local = listener.local_addr().map_err(|e| format!("the login's redirect listener failed: {e}"))?;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (conn, peer) = accepted.map_err(|e| format!("the login's redirect listener failed: {e}"))?;
                if !from_this_user(local, peer) {
                    tracing::warn!(%peer, "the login's redirect listener refused a connection from another user");
                    continue;
                }
                let (found, state) = (found.clone(), state.to_owned());
                conns.spawn(async move {
                    let answered = tokio::time::timeout(REDIRECT_READ_TIMEOUT, answer_redirect(conn, &state)).await;
                    if let Ok(Some(query)) = answered {
                        let _ = found.send(query).await;
                    }
                });
            }
            Some(query) = came.recv() => return Ok(query),
        }
    }
}

/// Whether the connection from `peer` to `local` is this user's (or cannot be told, on
/// a platform that does not say).
fn from_this_user(local: std::net::SocketAddr, peer: std::net::SocketAddr) -> bool {
    match mcpx_platform::tcp_peer_uid(local, peer) {
        Ok(Some(uid)) => uid == nix::unistd::getuid().as_raw(),
        Ok(None) => true,
        Err(e) => {
            tracing::debug!(error = %e, "cannot tell whose the redirect connection is");
            true
        }
    }
}

/// Reads one request on `conn` and answers it; the query of a `/callback` carrying
/// `state`.
async fn answer_redirect(mut conn: tokio::net::TcpStream, state: &str) -> Option<Vec<(String, String)>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REDIRECT_REQUEST {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_owned();
    let target = line.strip_prefix("GET ").and_then(|rest| rest.split(' ').next()).unwrap_or_default();
    let parsed = Url::parse(&format!("http://127.0.0.1{target}")).ok().filter(|u| u.path() == "/callback");
    let Some(url) = parsed else {
        let _ = conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
        return None;
    };
    let query: Vec<(String, String)> = url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    if !query.iter().any(|(k, v)| k == "state" && v == state) {
        let page = "<!doctype html><title>mcpx</title><p>mcpx: this is not the login mcpx is waiting for.</p>";
        let answer = format!(
            "HTTP/1.1 400 Bad Request\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
            page.len()
        );
        let _ = conn.write_all(answer.as_bytes()).await;
        return None;
    }
    let page = "<!doctype html><title>mcpx</title><p>mcpx: the login is done. You can close this tab.</p>";
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
        page.len()
    );
    let _ = conn.write_all(answer.as_bytes()).await;
    Some(query)
}

/// The code of a redirect's `query`, once its `state` is the request's and its `iss`
/// (RFC 9207 §2.4) the issuer's: required where the server advertises it, checked
/// wherever it is present.
///
/// Errors: the server refused (its `error` quoted), or a check failed.
pub fn check_redirect(query: &[(String, String)], state: &str, server: &AuthServer) -> Result<String, String> {
    let get = |name: &str| query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    // `state` first: a redirect without this login's is no one's word on it, not even
    // an `error` (RFC 6749 §10.12).
    if get("state") != Some(state) {
        return Err("the login's redirect carries another `state`; it was not this login's: run it again".to_owned());
    }
    if let Some(error) = get("error") {
        let description = get("error_description").map(|d| format!(" ({})", super::said(d))).unwrap_or_default();
        return Err(format!("the authorization server refused the login: {}{description}", super::said(error)));
    }
    match get("iss") {
        Some(iss) if iss != server.issuer => {
            return Err(format!(
                "the login's redirect names issuer {iss:?}, not {:?}; mcpx stopped the login",
                server.issuer
            ));
        }
        None if server.authorization_response_iss_parameter_supported => {
            return Err(format!(
                "the login's redirect lacks `iss`, which {} promises (RFC 9207); mcpx stopped the login",
                server.issuer
            ));
        }
        _ => {}
    }
    get("code").map(str::to_owned).ok_or_else(|| "the login's redirect has no `code`".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{Endpoint, file_state};

    fn server(iss: bool) -> AuthServer {
        let mut s = AuthServer::token_only("https://as".into(), Url::parse("https://as/token").unwrap());
        s.authorization_response_iss_parameter_supported = iss;
        s
    }

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// A server that answers the probe's `initialize` with a session gets a DELETE of
    /// that session, so the probe leaves nothing open.
    #[tokio::test]
    async fn the_probe_ends_the_session_it_opened() {
        let endpoint = Endpoint::start_with(|_, seen| match seen.method.as_str() {
            "POST" => (reqwest::StatusCode::OK, vec![(SESSION_ID, "s-1".to_owned())], "{}".to_owned()),
            _ => (reqwest::StatusCode::OK, Vec::new(), String::new()),
        })
        .await;
        let (_dir, state) = file_state();
        let http = reqwest::Client::new();
        let url = endpoint.url.join("mcp").unwrap();
        let target = LoginTarget { http: &http, state: &state, server: "docs", url: &url, oauth: None, device: false };
        assert_eq!(probe(&target).await.unwrap(), (false, None));
        let seen: Vec<_> = endpoint.seen().into_iter().map(|s| (s.method, s.path, s.session)).collect();
        assert_eq!(seen, [("POST".into(), "/mcp".into(), None), ("DELETE".into(), "/mcp".into(), Some("s-1".into()))]);
    }

    #[test]
    fn redirects_are_checked_for_state_iss_and_error() {
        assert_eq!(check_redirect(&q(&[("code", "c"), ("state", "s")]), "s", &server(false)), Ok("c".into()));
        assert!(check_redirect(&q(&[("code", "c"), ("state", "x")]), "s", &server(false)).is_err());
        assert!(check_redirect(&q(&[("code", "c"), ("state", "s")]), "s", &server(true)).is_err());
        let with_iss = q(&[("code", "c"), ("state", "s"), ("iss", "https://as")]);
        assert_eq!(check_redirect(&with_iss, "s", &server(true)), Ok("c".into()));
        let other_iss = q(&[("code", "c"), ("state", "s"), ("iss", "https://evil")]);
        assert!(check_redirect(&other_iss, "s", &server(false)).is_err());
        let refused = check_redirect(&q(&[("error", "access_denied"), ("state", "s")]), "s", &server(false));
        assert_eq!(refused, Err("the authorization server refused the login: access_denied".into()));
    }
}
