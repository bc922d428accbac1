//! `mcpx auth login <server>`: the daemon runs the login (`POST /v1/auth/login`) and
//! this command shows the user where to log in: `$BROWSER`, else the platform's
//! opener, with the URL; with `--no-browser` (or no opener at all) the URL is printed
//! on stderr, for a browser elsewhere. With `--device` (RFC 8628) it prints the code
//! to enter and where, for any device. It waits for the daemon to say it is done.
//! `mcpx auth status` and `mcpx auth logout <server>` show and end logins
//! (`POST /v1/auth/status`, `/v1/auth/logout`). No token ever reaches this process.

use std::time::{SystemTime, UNIX_EPOCH};

use mcpx_api::client::{Client, Method};
use mcpx_api::{ApiError, AuthRequest, ErrorKind};
use serde_json::Value;

use crate::output;
use mcpx_platform::sanitize;

/// Logs in to `server`; returns the exit status (0), or the daemon's error (`auth`,
/// exit 4, when the login failed).
pub async fn login(client: &Client, req: AuthRequest, no_browser: bool, json: bool) -> Result<i32, ApiError> {
    let server = req.server.clone().unwrap_or_default();
    let mut outcome: Option<Result<Value, ApiError>> = None;
    client
        .call_lines("/v1/auth/login", &req, |line| {
            let Ok(value) = serde_json::from_slice::<Value>(line) else { return };
            if let Some(url) = value["open"].as_str() {
                show(url, no_browser);
            } else if let Some(code) = value.get("device") {
                eprint!("{}", device_prompt(code));
            } else if let Some(error) = value.get("error") {
                let error = serde_json::from_value(error.clone())
                    .unwrap_or_else(|_| ApiError::new(ErrorKind::Daemon, "the daemon answered an unreadable error"));
                outcome = Some(Err(error));
            } else if let Some(result) = value.get("result") {
                outcome = Some(Ok(result.clone()));
            }
        })
        .await?;
    let done = outcome.unwrap_or_else(|| {
        Err(ApiError::new(ErrorKind::Daemon, "the daemon ended the login without an answer; see `mcpx logs`"))
    })?;
    if json {
        output::say_json(&done.to_string());
    } else {
        let scopes =
            done["scopes"].as_array().map(|s| s.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "));
        output::say(&format!(
            "logged in to `{server}` at {}{}; the tokens are kept in the secret store ({})",
            done["issuer"].as_str().unwrap_or("?"),
            scopes.filter(|s| !s.is_empty()).map(|s| format!(" (scopes: {s})")).unwrap_or_default(),
            done["location"].as_str().unwrap_or("?"),
        ));
    }
    Ok(0)
}

/// `mcpx auth status`: a row per remote server of the caller's configuration (the
/// daemon's `POST /v1/auth/status`), and where the tokens are kept; exit status 0.
///
/// Errors: the daemon's (`config` when the configuration cannot be read).
pub async fn status(client: &Client, req: AuthRequest, json: bool) -> Result<i32, ApiError> {
    let Some(answer) = answer(client, "/v1/auth/status", req, json).await? else { return Ok(0) };
    let (text, warnings) = status_text(&answer, SystemTime::now());
    output::say(text.trim_end());
    for warning in warnings {
        output::warn(&warning);
    }
    Ok(0)
}

/// `mcpx auth logout <server>`: what became of each kept login of the server (the
/// daemon's `POST /v1/auth/logout`); exit status 0 once forgotten, even when the
/// revocation failed (the message says so).
///
/// Errors: the daemon's (`usage` for a server that is not remote; `auth` when the
/// secret store cannot be written).
pub async fn logout(client: &Client, req: AuthRequest, json: bool) -> Result<i32, ApiError> {
    let Some(answer) = answer(client, "/v1/auth/logout", req, json).await? else { return Ok(0) };
    output::say(&logout_text(&answer));
    Ok(0)
}

/// The daemon's answer to `path`: printed as it came with `--json` (then `None`),
/// else parsed for the human lines.
///
/// Errors: the daemon's; an answer that is not JSON (`daemon`).
async fn answer(client: &Client, path: &str, req: AuthRequest, json: bool) -> Result<Option<Value>, ApiError> {
    let body = client.call(Method::POST, path, Some(&req)).await?;
    if json {
        output::say_json(&String::from_utf8_lossy(&body));
        return Ok(None);
    }
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| ApiError::new(ErrorKind::Daemon, format!("the daemon answered {path} with unreadable JSON: {e}")))
}

/// The human lines of a logout's answer.
fn logout_text(answer: &Value) -> String {
    let server = answer["server"].as_str().unwrap_or("?");
    let logins = answer["logins"].as_array().map(Vec::as_slice).unwrap_or_default();
    if logins.is_empty() {
        return format!("no login is kept for `{server}`; there was nothing to forget");
    }
    let lines: Vec<String> = logins
        .iter()
        .map(|l| {
            let issuer = l["issuer"].as_str().unwrap_or("?");
            let what = match l["revocation"].as_str() {
                Some("revoked") => format!("revoked at {issuer} and forgotten"),
                Some("not_offered") => format!("forgotten; {issuer} offers no revocation"),
                _ => format!("forgotten; revocation failed: {}", l["error"].as_str().unwrap_or("?")),
            };
            format!("logged out of `{server}`: {what}")
        })
        .collect();
    lines.join("\n")
}

/// The human text of a status answer at `now`: the table and the store's line, and a
/// warning per server whose row is an error.
fn status_text(answer: &Value, now: SystemTime) -> (String, Vec<String>) {
    let rows = answer["servers"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut warnings = Vec::new();
    let mut table = Vec::new();
    for row in rows {
        let server = row["server"].as_str().unwrap_or("?");
        let state = match row["state"].as_str().unwrap_or("?") {
            "logged_in" => "logged in",
            "expired" => "expired: log in again",
            "not_logged_in" => "not logged in",
            "client_credentials" => "client credentials",
            "headers" => "uses headers",
            "untrusted" => "untrusted",
            "error" => {
                let error = row["error"].as_str().unwrap_or("?");
                let named = error.starts_with(&format!("server `{server}`"));
                warnings.push(if named {
                    format!("mcpx: {error}")
                } else {
                    format!("mcpx: server `{server}`: {error}")
                });
                "error"
            }
            other => other,
        };
        let expires = match (&row["expires_at"], row.get("issuer")) {
            (_, None) => "-".to_owned(),
            (Value::Number(at), _) => expiry(at.as_u64().unwrap_or(0), now, row["refreshable"] == true),
            _ => "not given".to_owned(),
        };
        let scopes = row["scopes"].as_array().map(|s| s.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "));
        let scopes = scopes.filter(|s| !s.is_empty()).unwrap_or_else(|| "-".to_owned());
        let issuer = row["issuer"].as_str().unwrap_or("-").to_owned();
        table.push(vec![server.to_owned(), state.to_owned(), expires, scopes, issuer]);
    }
    let store = answer["store"]["location"].as_str().unwrap_or("?");
    let mut text = if table.is_empty() {
        "no remote server is configured\n".to_owned()
    } else {
        output::table_text(&["SERVER", "LOGIN", "EXPIRES", "SCOPES", "AUTHORIZATION SERVER"], &table)
    };
    text.push_str(&format!(
        "logins are kept in the secret store ({store}); `mcpx auth login <server>` logs in, `mcpx auth logout <server>` revokes and forgets\n"
    ));
    (text, warnings)
}

/// When a token expiring at `at` (seconds since the Unix epoch) does, from `now`:
/// relative and absolute (UTC); an expired one that `refreshable` renews at the next
/// call says so.
fn expiry(at: u64, now: SystemTime, refreshable: bool) -> String {
    let now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let span = |s: u64| match s {
        0..120 => format!("{s} s"),
        120..7200 => format!("{} min", s / 60),
        7200..172_800 => format!("{} h", s / 3600),
        _ => format!("{} days", s / 86_400),
    };
    let when = mcpx_platform::clock::utc(at);
    match at.checked_sub(now) {
        Some(left) if left > 0 => format!("in {} ({when})", span(left)),
        _ if refreshable => format!("{} ago ({when}); renewed at the next call", span(now - at)),
        _ => format!("{} ago ({when})", span(now - at)),
    }
}

/// Shows the user the authorization URL: opens it in `$BROWSER` or with the
/// platform's opener, and prints it when that is not wanted or not possible.
/// Only an https URL, or http to this machine, goes to a browser: a `file:` or
/// `javascript:` URL an authorization server named is printed, escaped, instead.
fn show(url: &str, no_browser: bool) {
    let secure = url::Url::parse(url).is_ok_and(|u| mcpx_daemon::config::is_secure(&u));
    if !secure {
        eprintln!(
            "the login's URL is neither https nor on this machine, so mcpx does not open it: {}",
            sanitize::line(url)
        );
        return;
    }
    if no_browser {
        eprintln!("open this URL in a browser to log in (the login waits for it):\n{url}");
        return;
    }
    match crate::browser::open(url) {
        Ok(()) => eprintln!("opened the login in a browser; if none shows, open this URL:\n{url}"),
        Err(why) => eprintln!("{why}; open this URL in a browser to log in (the login waits for it):\n{url}"),
    }
}

/// What a device login (RFC 8628 §3.3) asks of the user, from the daemon's `device`
/// line: where to go and the code to enter there, and the link with the code in it
/// when the server gives one.
fn device_prompt(code: &Value) -> String {
    // What the authorization server wrote, escaped: it cannot drive the terminal or
    // forge a line of mcpx's.
    let field = |name: &str| sanitize::line(code[name].as_str().unwrap_or("?")).into_owned();
    let mut text = format!(
        "to log in, open {} on any device and enter the code\n\n    {}\n\n",
        field("verification_uri"),
        field("user_code")
    );
    if let Some(complete) = code["verification_uri_complete"].as_str() {
        text.push_str(&format!("(or open {}, which has the code in it)\n", sanitize::line(complete)));
    }
    let minutes = code["expires_in"].as_u64().map(|s| s.div_ceil(60)).unwrap_or(0);
    text.push_str(&format!("waiting for the login; the code expires in {minutes} min (Ctrl-C to give up)\n"));
    text
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Each state of a status answer, as a user reads it, an hour after 2026-12-01
    /// 20:00 UTC.
    #[test]
    fn status_reads_as_a_table_with_the_store() {
        let now = UNIX_EPOCH + Duration::from_secs(1_796_155_200 + 3600);
        let answer = serde_json::json!({
            "store": { "kind": "file", "location": "file /home/u/.local/state/mcpx/secrets.json" },
            "servers": [
                { "server": "docs", "url": "https://docs.example.com/mcp", "state": "logged_in",
                  "issuer": "https://auth.example.com", "resource": "https://docs.example.com/mcp",
                  "scopes": ["read", "write"], "expires_at": 1_796_155_200 + 3600 + 3000, "refreshable": true },
                { "server": "tracker", "url": "https://t.example.com/mcp", "state": "logged_in",
                  "issuer": "https://t.example.com", "resource": "https://t.example.com/mcp",
                  "scopes": [], "expires_at": 1_796_155_200, "refreshable": true },
                { "server": "old", "url": "https://o.example.com/mcp", "state": "expired",
                  "issuer": "https://o.example.com", "resource": "https://o.example.com/mcp",
                  "scopes": ["x"], "expires_at": 1_796_155_200 - 3 * 86_400, "refreshable": false },
                { "server": "forever", "url": "https://f.example.com/mcp", "state": "logged_in",
                  "issuer": "https://f.example.com", "resource": "https://f.example.com/mcp",
                  "scopes": [], "expires_at": null, "refreshable": false },
                { "server": "new", "url": "https://n.example.com/mcp", "state": "not_logged_in" },
                { "server": "machine", "url": "https://m.example.com/mcp", "state": "client_credentials" },
                { "server": "gateway", "url": "https://g.example.com/mcp", "state": "headers" },
                { "server": "project", "url": "https://p.example.com/mcp", "state": "untrusted" },
                { "server": "broken", "url": "${HOST}/mcp", "state": "error", "error": "the variable HOST is not set" }
            ]
        });
        let (text, warnings) = status_text(&answer, now);
        insta::assert_snapshot!(text);
        assert_eq!(warnings, ["mcpx: server `broken`: the variable HOST is not set"]);
        let (empty, _) = status_text(&serde_json::json!({ "store": { "location": "file /s" }, "servers": [] }), now);
        assert!(empty.starts_with("no remote server is configured\n"), "{empty}");
    }

    #[test]
    fn logout_says_what_became_of_each_login() {
        let answer = serde_json::json!({ "server": "docs", "stopped": 1, "logins": [
            { "issuer": "https://a", "resource": "https://r", "revocation": "revoked" },
            { "issuer": "https://b", "resource": "https://r", "revocation": "not_offered" },
            { "issuer": "https://c", "resource": "https://r", "revocation": "failed", "error": "HTTP 503" },
        ]});
        assert_eq!(
            logout_text(&answer),
            "logged out of `docs`: revoked at https://a and forgotten\n\
             logged out of `docs`: forgotten; https://b offers no revocation\n\
             logged out of `docs`: forgotten; revocation failed: HTTP 503"
        );
        let none = serde_json::json!({ "server": "docs", "stopped": 0, "logins": [] });
        assert_eq!(logout_text(&none), "no login is kept for `docs`; there was nothing to forget");
    }

    #[test]
    fn a_device_login_shows_where_to_go_and_the_code() {
        let code = serde_json::json!({
            "user_code": "WDJB-MJHT",
            "verification_uri": "https://as.example/device",
            "verification_uri_complete": "https://as.example/device?user_code=WDJB-MJHT",
            "expires_in": 600,
        });
        insta::assert_snapshot!(device_prompt(&code));
        let mut bare = code;
        bare["verification_uri_complete"] = Value::Null;
        bare["expires_in"] = 90.into();
        insta::assert_snapshot!("without_a_complete_uri", device_prompt(&bare));
    }
}
