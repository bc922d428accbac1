//! OAuth for remote servers, beyond the conformance suite's scenarios
//! (`conformance_client.rs`): what a call to a server that needs a login does when no
//! one has logged in, and where the tokens of a login do not show.

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

    let store: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(w.path("state/secrets.json")).unwrap()).unwrap();
    let logins: Vec<serde_json::Value> = store["secrets"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| name.starts_with("oauth-"))
        .map(|(_, value)| serde_json::from_str(value.as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(logins.len(), 1, "{store}");
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
    places.push(("status --json".into(), w.run(&["status", "--json"]).stdout));
    places.push(("ls --json".into(), w.run(&["ls", "--json"]).stdout));
    for (place, text) in &places {
        for secret in &secrets {
            assert!(!text.contains(secret.as_str()), "a token or client secret shows in {place}");
        }
    }
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
