//! What a remote server may steer (docs/security.md, "Remote servers"): a resource
//! server on 127.0.0.1 whose metadata, challenge or stream names another origin (an
//! authorization server, or an attacker, on 127.0.0.2) gets no secret, login, header or
//! browser sent where the user did not choose; and the limits and files around logins.
//! The servers are scripted (`harness::scripted`), so each test sees what reached each.

use serde_json::json;

use crate::harness::scripted::{Answer, Request, Scripted};
use crate::harness::{Spawned, World, fake_server};

/// Metadata of an authorization server at `origin` (RFC 8414), every endpoint there.
fn as_metadata(origin: &str) -> serde_json::Value {
    json!({
        "issuer": origin,
        "authorization_endpoint": format!("{origin}/authorize"),
        "token_endpoint": format!("{origin}/token"),
        "registration_endpoint": format!("{origin}/register"),
        "device_authorization_endpoint": format!("{origin}/device"),
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "none"],
    })
}

/// An authorization server: metadata, registration, tokens (`token` answers the token
/// endpoint), a device code (`device` answers the device endpoint).
fn auth_server(
    ip: &str,
    token: impl Fn(&Request) -> Answer + Send + Sync + 'static,
    device: impl Fn(&Request) -> Answer + Send + Sync + 'static,
) -> Scripted {
    Scripted::start(ip, move |r, origin| match (r.method.as_str(), r.path()) {
        ("GET", "/.well-known/oauth-authorization-server") => Answer::json(200, as_metadata(origin)),
        ("POST", "/register") => {
            Answer::json(201, json!({ "client_id": "registered", "token_endpoint_auth_method": "none" }))
        }
        ("POST", "/token") => token(r),
        ("POST", "/device") => device(r),
        _ => Answer::status(404, &[]),
    })
}

fn a_token(_: &Request) -> Answer {
    Answer::json(200, json!({ "access_token": "at-1", "token_type": "Bearer", "expires_in": 3600 }))
}

fn not_found(_: &Request) -> Answer {
    Answer::status(404, &[])
}

/// A resource server on 127.0.0.1 that asks for a token, and whose protected resource
/// metadata names `issuer` (`prm` replaces the whole document; `challenge` the
/// `resource_metadata` its 401 names).
fn resource_server(issuer: String, prm: Option<serde_json::Value>, challenge: Option<String>) -> Scripted {
    Scripted::start("127.0.0.1", move |r, origin| match r.path() {
        "/mcp" => {
            let metadata =
                challenge.clone().unwrap_or_else(|| format!("{origin}/.well-known/oauth-protected-resource/mcp"));
            Answer::status(401, &[("www-authenticate", &format!("Bearer resource_metadata=\"{metadata}\""))])
        }
        "/.well-known/oauth-protected-resource/mcp" => Answer::json(
            200,
            prm.clone()
                .unwrap_or_else(|| json!({ "resource": format!("{origin}/mcp"), "authorization_servers": [issuer] })),
        ),
        _ => Answer::status(404, &[]),
    })
}

/// Whether any request `server` saw carries `needle` in its headers or body.
fn carried(server: &Scripted, needle: &str) -> bool {
    server.seen().iter().any(|r| r.body.contains(needle) || r.headers.values().any(|v| v.contains(needle)))
}

/// Finding 1: a resource server names another authorization server than the entry's;
/// the configured client secret goes nowhere, and an entry with a secret but no
/// `oauth.issuer` is refused saying to add one.
#[test]
fn configured_credentials_go_only_to_their_issuer() {
    let real = auth_server("127.0.0.1", a_token, not_found);
    let attacker = auth_server("127.0.0.2", a_token, not_found);
    let rs = resource_server(attacker.origin.clone(), None, None);
    let mut w = World::new(json!({}));
    w.env.push(("CLIENT_SECRET".into(), "s3cret-value".into()));
    let oauth = json!({ "issuer": real.origin, "clientId": "pinned", "clientSecret": "${CLIENT_SECRET}", "grant": "client_credentials" });
    w.set_servers(json!({ "docs": { "url": format!("{}/mcp", rs.origin), "oauth": oauth } }));
    let run = w.call("docs.echo", r#"{"message":"hi"}"#);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains(&real.origin) && run.stderr.contains(&attacker.origin), "{}", run.stderr);
    assert!(run.stderr.contains("sent nothing"), "{}", run.stderr);
    assert!(!attacker.seen().iter().any(|r| r.path() == "/token"), "the attacker's token endpoint was asked");
    assert!(!carried(&attacker, "pinned") && !carried(&attacker, "s3cret-value"), "{:?}", attacker.seen());
    // Without `issuer`, the entry is refused before anything is sent.
    let oauth = json!({ "clientId": "pinned", "clientSecret": "${CLIENT_SECRET}", "grant": "client_credentials" });
    w.set_servers(json!({ "docs": { "url": format!("{}/mcp", rs.origin), "oauth": oauth } }));
    let run = w.call("docs.echo", r#"{"message":"hi"}"#);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("oauth.issuer"), "{}", run.stderr);
    assert!(!carried(&attacker, "s3cret-value"));
}

/// Finding 2: a stored login is in its own namespace: `${secret:oauth-…}` and
/// `${input:oauth-…}` never expand it into a server's environment, and the entry says
/// why.
#[test]
fn a_stored_login_is_never_expanded_into_an_entry() {
    let w = World::new(json!({}));
    let value = w.path("value");
    std::fs::write(&value, "plain-value\n").unwrap();
    w.run_with(&["secret", "set", "plain"], |cmd| {
        cmd.stdin(std::fs::File::open(&value).unwrap());
    })
    .ok();
    // A login as `mcpx auth login` keeps it, beside the user's secret.
    let store = w.path("state/secrets.json");
    let mut secrets: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&store).unwrap()).unwrap();
    let login = json!({ "access_token": "LOGIN-ACCESS-TOKEN", "refresh_token": "LOGIN-REFRESH" }).to_string();
    secrets["secrets"]["oauth-9594c76830ce8f80"] = json!(login);
    std::fs::write(&store, secrets.to_string()).unwrap();
    for reference in ["${secret:oauth-9594c76830ce8f80}", "${input:oauth-9594c76830ce8f80}"] {
        w.set_servers(json!({ "leaky": { "command": fake_server(), "env": { "T": reference } } }));
        let run = w.call("leaky.env", r#"{"name":"T"}"#);
        assert_eq!(run.code, 2, "{reference}: {run:?}");
        assert!(run.stderr.contains("names a login"), "{reference}: {}", run.stderr);
        assert!(!run.stdout.contains("LOGIN-ACCESS-TOKEN") && !run.stderr.contains("LOGIN-ACCESS-TOKEN"));
        let config = w.run(&["config", "--json"]);
        assert!(!config.stdout.contains("LOGIN-ACCESS-TOKEN"), "{}", config.stdout);
    }
    // In a project file, `mcpx trust` shows the entry as refused, and trusts nothing of it.
    let project = w.path("project");
    std::fs::create_dir(&project).unwrap();
    let entry = json!({ "command": fake_server(), "env": { "T": "${secret:oauth-9594c76830ce8f80}" } });
    std::fs::write(project.join(".mcp.json"), json!({ "mcpServers": { "leaky": entry } }).to_string()).unwrap();
    let trust = w.run_with(&["trust", "--yes"], |cmd| {
        cmd.current_dir(&project).env_remove("MCPX_CONFIG");
    });
    assert!(trust.stderr.contains("refused, not trusted") && trust.stderr.contains("names a login"), "{trust:?}");
    assert!(!w.run(&["trust", "--list"]).stdout.contains("leaky"));
}

/// Finding 3: an HTTP+SSE server's `endpoint` event naming another origin is refused;
/// the configured headers go nowhere.
#[test]
fn an_sse_endpoint_on_another_origin_gets_no_headers() {
    let attacker = Scripted::start("127.0.0.2", |_, _| Answer::json(202, json!({})));
    let target = format!("{}/messages?session=1", attacker.origin);
    let rs = Scripted::start("127.0.0.1", move |r, _| match r.path() {
        "/sse" => Answer::sse(&format!("event: endpoint\ndata: {target}\n\n")),
        _ => Answer::status(404, &[]),
    });
    let w = World::new(json!({}));
    w.set_servers(json!({ "docs": {
        "url": format!("{}/sse", rs.origin), "transport": "sse", "headers": { "X-Api-Key": "configured-key" } } }));
    let run = w.call("docs.echo", r#"{"message":"hi"}"#);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("another origin"), "{}", run.stderr);
    assert!(attacker.seen().is_empty(), "{:?}", attacker.seen());
}

/// Finding 4 and 7: a device login's code and link are printed escaped, so an
/// authorization server cannot drive the terminal or forge mcpx's lines; its error
/// description is one line too.
#[test]
fn a_device_prompt_and_an_error_description_are_escaped() {
    let device = |_: &Request| {
        Answer::json(
            200,
            json!({ "device_code": "dc", "user_code": "AB\u{1b}]0;pwned\u{7}\nmcpx: logged in", "verification_uri": "https://x.example/\u{1b}[2J",
                "expires_in": 60, "interval": 1 }),
        )
    };
    let token = |_: &Request| {
        Answer::json(400, json!({ "error": "access_denied", "error_description": "no\nmcpx: forged line \u{1b}[31m" }))
    };
    let auth = auth_server("127.0.0.2", token, device);
    let rs = resource_server(auth.origin.clone(), None, None);
    let w = World::new(json!({ "docs": { "url": format!("{}/mcp", rs.origin) } }));
    let run = w.run(&["auth", "login", "docs", "--device"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(!run.stderr.contains('\u{1b}') && !run.stderr.contains('\u{7}'), "{:?}", run.stderr);
    assert!(run.stderr.contains("AB\\e]0;pwned\\x07\\nmcpx: logged in"), "{}", run.stderr);
    assert!(
        !run.stderr.lines().any(|l| l.starts_with("mcpx: forged line") || l.starts_with("mcpx: logged in")),
        "{}",
        run.stderr
    );
}

/// A login started with `--no-browser`, its stderr, and the port and `state` of the
/// URL it printed.
struct Login {
    process: Spawned,
    stderr: std::io::BufReader<std::process::ChildStderr>,
    port: u16,
    state: String,
}

impl Login {
    fn start(w: &World) -> Login {
        use std::io::BufRead;
        let mut cmd = w.command();
        cmd.args(["auth", "login", "docs", "--no-browser"]).stdin(std::process::Stdio::null());
        cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        let mut process = Spawned(cmd.spawn().unwrap());
        let mut stderr = std::io::BufReader::new(process.0.stderr.take().unwrap());
        let url = loop {
            let mut line = String::new();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "the login printed no URL");
            if line.starts_with("http") {
                break url::Url::parse(line.trim()).unwrap();
            }
        };
        let query: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
        let port = url::Url::parse(&query["redirect_uri"]).unwrap().port().unwrap();
        Login { process, stderr, port, state: query["state"].clone() }
    }

    /// GETs `target` from the redirect listener; its answer.
    fn get(&self, target: &str) -> String {
        use std::io::{Read, Write};
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(conn, "GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        let mut answer = String::new();
        let _ = conn.read_to_string(&mut answer);
        answer
    }

    /// Sends the real callback (`code=good`) and waits for the login to end well.
    fn finish(mut self, auth: &Scripted) {
        use std::io::Read;
        let answer = self.get(&format!("/callback?code=good&state={}", self.state));
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let status = self.process.0.wait().unwrap();
        let mut rest = String::new();
        self.stderr.read_to_string(&mut rest).unwrap();
        assert!(status.success(), "{rest}");
        let exchanged = auth.seen().into_iter().filter(|r| r.path() == "/token").collect::<Vec<_>>();
        assert_eq!(exchanged.len(), 1, "{exchanged:?}");
        assert!(exchanged[0].body.contains("code=good"), "{:?}", exchanged[0].body);
    }
}

/// Finding 5: the redirect listener checks `state` first, answers a wrong or missing
/// one with 400 and keeps waiting, and is not held up by an idle connection.
#[test]
fn the_redirect_listener_waits_for_this_logins_state() {
    let auth = auth_server("127.0.0.2", a_token, not_found);
    let rs = resource_server(auth.origin.clone(), None, None);
    let w = World::new(json!({ "docs": { "url": format!("{}/mcp", rs.origin) } }));
    let login = Login::start(&w);
    // An idle connection (another local user's, say) holds nothing up.
    let _idle = std::net::TcpStream::connect(("127.0.0.1", login.port)).unwrap();
    for forged in ["/callback?error=access_denied&error_description=x", "/callback?code=evil&state=wrong"] {
        let answer = login.get(forged);
        assert!(answer.starts_with("HTTP/1.1 400"), "{forged}: {answer}");
    }
    login.finish(&auth);
}

/// Finding 5: another local user's connection to the redirect listener is closed
/// unread, even one carrying this login's `state` (Linux, as root: the suite switches
/// to a spare uid).
#[test]
fn a_redirect_from_another_user_is_refused() {
    let Some(uids) = crate::harness::spare_uids() else { return };
    let auth = auth_server("127.0.0.2", a_token, not_found);
    let rs = resource_server(auth.origin.clone(), None, None);
    let w = World::new(json!({ "docs": { "url": format!("{}/mcp", rs.origin) } }));
    let login = Login::start(&w);
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/{}; printf 'GET /callback?code=evil&state={} HTTP/1.1\\r\\n\\r\\n' >&3; cat <&3",
        login.port, login.state
    );
    #[allow(clippy::disallowed_methods)] // Reason: the other user's process is the test's, not mcpx's.
    let mut other = std::process::Command::new("/bin/bash");
    std::os::unix::process::CommandExt::uid(&mut other, uids.attacker.uid);
    std::os::unix::process::CommandExt::gid(&mut other, uids.attacker.gid);
    other.args(["-c", &script]).env_clear().current_dir("/").stdin(std::process::Stdio::null());
    let run = crate::harness::Run::of(other, "the other user's callback");
    assert!(run.stdout.is_empty(), "the other user got an answer: {}", run.stdout);
    assert!(!auth.seen().iter().any(|r| r.body.contains("code=evil")), "{:?}", auth.seen());
    login.finish(&auth);
}

/// Finding 6: protected resource metadata on another origin over plain http is not
/// fetched, and a document that is not metadata is described, never quoted.
#[test]
fn foreign_metadata_is_not_fetched_and_documents_are_not_quoted() {
    let attacker = Scripted::start("127.0.0.2", |_, origin| {
        Answer::json(200, json!({ "resource": format!("{origin}/mcp"), "authorization_servers": [origin] }))
    });
    let rs = resource_server(String::new(), None, Some(format!("{}/prm", attacker.origin)));
    let w = World::new(json!({ "docs": { "url": format!("{}/mcp", rs.origin) } }));
    let run = w.run(&["auth", "login", "docs", "--no-browser"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("on another origin and not https"), "{}", run.stderr);
    assert!(attacker.seen().is_empty(), "{:?}", attacker.seen());
    let rs = resource_server(String::new(), Some(json!({ "authorization_servers": "DOCUMENT-TEXT-7f3a" })), None);
    let w = World::new(json!({ "docs": { "url": format!("{}/mcp", rs.origin) } }));
    let run = w.run(&["auth", "login", "docs", "--no-browser"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("is not valid"), "{}", run.stderr);
    assert!(!run.stderr.contains("DOCUMENT-TEXT-7f3a"), "{}", run.stderr);
}

/// Finding 7 (and 1): an endpoint that is neither https nor loopback http (a `file:`
/// authorization endpoint) is refused, and no browser is started for it.
#[test]
fn an_endpoint_of_another_scheme_is_refused_and_no_browser_opens() {
    let auth = Scripted::start("127.0.0.2", |r, origin| match r.path() {
        "/.well-known/oauth-authorization-server" => {
            let mut metadata = as_metadata(origin);
            metadata["authorization_endpoint"] = json!("file:///etc/passwd");
            Answer::json(200, metadata)
        }
        _ => Answer::status(404, &[]),
    });
    let rs = resource_server(auth.origin.clone(), None, None);
    let mut w = World::new(json!({ "docs": { "url": format!("{}/mcp", rs.origin) } }));
    let opened = w.path("browser-ran");
    let browser = w.path("browser.sh");
    std::fs::write(&browser, format!("#!/bin/sh\necho \"$1\" > {}\n", opened.display())).unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(&mut std::fs::metadata(&browser).unwrap().permissions(), 0o755);
    std::fs::set_permissions(&browser, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    w.env.push(("BROWSER".into(), browser.display().to_string()));
    let run = w.run(&["auth", "login", "docs"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("the authorization endpoint is at file:///etc/passwd"), "{}", run.stderr);
    assert!(!opened.exists(), "a browser was started");
}

/// Finding 8: durations past the clock's range are refused, not a panic; an MCP
/// client's script gets a lower cap.
#[test]
fn huge_timeouts_are_refused_not_a_panic() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let run = w.run(&["exec", "--timeout", "18446744073709551615s", "return 1"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("24h") && !run.stderr.contains("panicked"), "{}", run.stderr);
    for long in ["25h", "0"] {
        let run = w.run(&["exec", "--timeout", long, "return 1"]);
        assert_eq!(run.code, 2, "{long}: {run:?}");
        assert!(run.stderr.contains(if long == "0" { "needs a limit" } else { "24h" }), "{}", run.stderr);
    }
    let run = w.run(&["call", "fake.echo", r#"{"message":"x"}"#, "--timeout", "99999999999h"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("365 days"), "{}", run.stderr);
    assert_eq!(w.call("fake.echo", r#"{"message":"alive"}"#).ok(), "alive\n");
}

/// Finding 9: `import --copy` makes a new user config private, warns when copied
/// literal values land in a file others can read, and prints a name holding a newline
/// on one line.
#[test]
fn import_copy_keeps_literal_values_private_or_says_so() {
    let mut w = World::new(json!({}));
    let home = w.path("home");
    std::fs::create_dir_all(home.join(".cursor")).unwrap();
    w.env.push(("HOME".into(), home.display().to_string()));
    w.unset.extend(["XDG_CONFIG_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME"].map(String::from));
    let entry = json!({ "command": fake_server(), "env": { "API_TOKEN": "literal-token" } });
    std::fs::write(
        home.join(".cursor/mcp.json"),
        json!({ "mcpServers": { "tok": entry, "two\nlines": entry } }).to_string(),
    )
    .unwrap();
    // A config that does not exist yet is made private, and nothing is said.
    std::fs::remove_file(&w.config).unwrap();
    let run = w.run(&["import", "--copy", "cursor"]);
    assert_eq!(run.code, 0, "{run:?}");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&w.config).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    assert!(!run.stderr.contains("literal values"), "{}", run.stderr);
    assert!(run.stdout.contains("two\\nlines"), "{}", run.stdout);
    assert!(!run.stdout.lines().any(|l| l == "lines" || l.starts_with("lines")), "{}", run.stdout);
    // Into a file others can read, the copies' literal values are named.
    std::fs::write(&w.config, "{}").unwrap();
    std::fs::set_permissions(&w.config, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let run = w.run(&["import", "--copy", "cursor"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("literal values") && run.stderr.contains("tok env API_TOKEN"), "{}", run.stderr);
    assert!(!run.stderr.contains("literal-token"), "{}", run.stderr);
}
