//! OAuth for remote servers, beyond the conformance suite's scenarios
//! (`conformance_client.rs`): what a call to a server that needs a login does when no
//! one has logged in, where the tokens of a login do not show, and `auth status` and
//! `auth logout` of a login.

use serde_json::json;

use crate::harness::{World, fake_http, fake_server};

/// A server that answers 401 with no login kept: the call fails at once (no browser,
/// no wait) with the error kind `auth`, exit 4, saying to run `mcpx auth login`; a
/// `command` server cannot log in.
#[test]
fn a_call_that_needs_a_login_fails_at_once_saying_to_log_in() {
    let (_server, url) = fake_http("127.0.0.1:0", &[("FAKE_HTTP_STATUS", "401")]);
    let w = World::new(json!({ "docs": { "url": url }, "local": { "command": fake_server() } }));
    let run = w.run(&["--json", "call", "docs.echo", r#"{"message":"hi"}"#]);
    assert_eq!(run.code, 4, "{run:?}");
    let error = &run.json()["error"];
    assert_eq!(error["kind"], "auth", "{run:?}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("run `mcpx auth login docs`"), "{message}");
    let human = w.call("docs.echo", r#"{"message":"hi"}"#);
    assert_eq!(human.code, 4, "{human:?}");
    assert!(human.stderr.contains("run `mcpx auth login docs`"), "{human:?}");

    let local = w.run(&["auth", "login", "local"]);
    assert_eq!(local.code, 2, "{local:?}");
    assert!(local.stderr.contains("server `local` is not a remote server"), "{local:?}");
}

/// The `key=value` form lists a server never listed before the call, to type the
/// values: a server that needs a login fails that listing with the error kind `auth`
/// too, not `server`.
#[test]
fn a_key_value_call_that_needs_a_login_fails_with_kind_auth() {
    let (_server, url) = fake_http("127.0.0.1:0", &[("FAKE_HTTP_STATUS", "401")]);
    let w = World::new(json!({ "docs": { "url": url } }));
    let run = w.run(&["--json", "call", "docs.echo", "message=hi"]);
    assert_eq!(run.code, 4, "{run:?}");
    let error = &run.json()["error"];
    assert_eq!(error["kind"], "auth", "{run:?}");
    assert!(error["message"].as_str().unwrap().contains("run `mcpx auth login docs`"), "{run:?}");
}

/// The error of a call that needs a login names the server once, as the user reads it:
/// "server `docs` needs a login", not "server `docs`: server `docs` needs a login".
#[test]
fn a_login_error_names_the_server_once() {
    let (_server, url) = fake_http("127.0.0.1:0", &[("FAKE_HTTP_STATUS", "401")]);
    let w = World::new(json!({ "docs": { "url": url } }));
    let run = w.call("docs.echo", r#"{"message":"hi"}"#);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("mcpx: server `docs` needs a login"), "{run:?}");
    assert_eq!(run.stderr.matches("server `docs`").count(), 1, "{run:?}");
}

/// A missing login is not a crash: calls in a row each fail with the error kind
/// `auth` and the login hint, never a restart backoff or `crash-loop` that would
/// outlast the login.
#[test]
fn calls_that_need_a_login_in_a_row_are_not_counted_as_crashes() {
    let (_server, url) = fake_http("127.0.0.1:0", &[("FAKE_HTTP_STATUS", "401")]);
    let w = World::new(json!({ "docs": { "url": url } }));
    for _ in 0..6 {
        let run = w.run(&["--json", "call", "docs.echo", r#"{"message":"hi"}"#]);
        assert_eq!(run.code, 4, "{run:?}");
        let error = &run.json()["error"];
        assert_eq!(error["kind"], "auth", "{run:?}");
        let message = error["message"].as_str().unwrap();
        assert!(!message.contains("backing off") && !message.contains("crash-loop"), "{message}");
    }
}

/// After a login with a registered confidential client (the suite's
/// token-endpoint-auth-basic), its access token, refresh token and client secret are
/// in the secret store's file only: not in what mcpx printed, the daemon's log, any
/// other file of the state directory, `status --json` or `ls --json`.
#[test]
fn tokens_show_nowhere_but_the_secret_store() {
    let mut w = World::new(json!({}));
    let printed = w.path("cli.log");
    w.env.push(("MCPX_CONFORMANCE_LOG".into(), printed.display().to_string()));
    let outcome = crate::conformance_client::run_scenario_in(&w, "auth/token-endpoint-auth-basic");
    assert!(outcome.passed, "{}", outcome.text);

    let logins = kept_logins(&w);
    assert_eq!(logins.len(), 1, "{logins:?}");
    let secrets: Vec<String> = ["access_token", "refresh_token", "client_secret"]
        .iter()
        .filter_map(|field| logins[0][field].as_str())
        .filter(|value| value.len() >= 8)
        .map(str::to_owned)
        .collect();
    assert!(!secrets.is_empty(), "{}", logins[0]);

    let mut places = vec![("what mcpx printed".to_owned(), std::fs::read_to_string(&printed).unwrap())];
    assert!(places[0].1.contains("logged in to `conformance`"), "{}", places[0].1);
    for entry in walk(&w.path("state")) {
        if entry.file_name().is_some_and(|n| n != "secrets.json") {
            places.push((entry.display().to_string(), String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into()));
        }
    }
    let listed = w.run(&["secret", "ls", "--json"]).json();
    assert_eq!(listed["logins"].as_array().map(Vec::len), Some(1), "{listed}");
    assert!(listed["names"].as_array().unwrap().iter().all(|n| !n.as_str().unwrap().starts_with("oauth-")), "{listed}");
    let table = w.run(&["secret", "ls"]).ok();
    assert!(table.contains("1 login(s) to remote servers") && table.contains("`mcpx auth logout <server>`"), "{table}");
    places.push(("secret ls".into(), table));
    places.push(("status --json".into(), w.run(&["status", "--json"]).stdout));
    places.push(("ls --json".into(), w.run(&["ls", "--json"]).stdout));
    for (place, text) in &places {
        for secret in &secrets {
            assert!(!text.contains(secret.as_str()), "a token or client secret shows in {place}");
        }
    }
}

/// After a login (the suite's token-endpoint-auth-basic, whose server stays up while
/// the driver runs), `auth status --json` shows it with its issuer, scopes and expiry
/// and where it is kept, and no token; `auth logout` forgets it (the suite's server
/// offers no revocation); then the status says `not_logged_in`, the store holds no
/// login, and a refresh fails with the `auth` error saying to log in.
#[test]
fn status_shows_a_login_and_logout_forgets_it() {
    let mut w = World::new(json!({}));
    let out = w.path("logout");
    std::fs::create_dir(&out).unwrap();
    w.env.push(("MCPX_CONFORMANCE_LOGOUT".into(), out.display().to_string()));
    let outcome = crate::conformance_client::run_scenario_in(&w, "auth/token-endpoint-auth-basic");
    assert!(outcome.passed, "{}", outcome.text);
    let read = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out.join(name)).unwrap()).unwrap()
    };

    let status = read("status.json");
    let row = &status["servers"][0];
    assert_eq!((&row["server"], &row["state"]), (&json!("conformance"), &json!("logged_in")), "{status}");
    assert!(row["issuer"].is_string() && row["scopes"].is_array() && row["expires_at"].is_u64(), "{status}");
    assert!(row.get("access_token").is_none() && row.get("refresh_token").is_none(), "{status}");
    assert_eq!(status["store"]["kind"], "file", "{status}");

    let logout = read("logout.json");
    assert_eq!(logout["logins"].as_array().map(Vec::len), Some(1), "{logout}");
    assert_eq!(logout["logins"][0]["issuer"], row["issuer"], "{logout}");
    assert_eq!(logout["logins"][0]["revocation"], "not_offered", "{logout}");

    let after = read("after.json");
    assert_eq!(after["servers"][0]["state"], "not_logged_in", "{after}");
    let store = std::fs::read_to_string(w.path("state/secrets.json")).unwrap();
    assert!(!store.contains("oauth-"), "{store}");
    let refresh = std::fs::read_to_string(out.join("refresh.txt")).unwrap();
    assert!(refresh.contains("run `mcpx auth login conformance`"), "{refresh}");
}

/// Every file under `dir`, recursively.
pub(crate) fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Through `/mcp/<server>`, a request to a server that needs a login is answered with
/// the login hint, naming the server once.
#[test]
fn the_endpoint_names_a_server_that_needs_a_login_once() {
    let (_server, url) = fake_http("127.0.0.1:0", &[("FAKE_HTTP_STATUS", "401")]);
    let w = World::new(json!({ "docs": { "url": url } }));
    w.run(&["ls"]).ok();
    let (session, _) = crate::serve::initialize(&w, "/mcp/docs", "2025-06-18");
    for (method, params) in [
        ("tools/call", json!({ "name": "echo", "arguments": { "message": "hi" } })),
        ("logging/setLevel", json!({ "level": "debug" })),
    ] {
        let body = json!({ "jsonrpc": "2.0", "id": 3, "method": method, "params": params });
        let answer = crate::serve::rpc(&w, "/mcp/docs", &session, body);
        let message = answer["error"]["message"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains("run `mcpx auth login docs`"), "{method}: {answer}");
        assert_eq!(message.matches("server `docs`").count(), 1, "{method}: {answer}");
    }
}

/// The logins kept in the world's secret store file (`oauth-…` secrets), parsed.
pub(crate) fn kept_logins(w: &World) -> Vec<serde_json::Value> {
    let store: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(w.path("state/secrets.json")).unwrap()).unwrap();
    store["secrets"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| name.starts_with("oauth-"))
        .map(|(_, value)| serde_json::from_str(value.as_str().unwrap()).unwrap())
        .collect()
}
