//! `mcpx auth login <server>`: the daemon runs the login (`POST /v1/auth/login`) and
//! this command shows the user where to log in: `$BROWSER`, else the platform's
//! opener, with the URL; with `--no-browser` (or no opener at all) the URL is printed
//! on stderr, for a browser elsewhere. With `--device` (RFC 8628) it prints the code
//! to enter and where, for any device. It waits for the daemon to say it is done. No
//! token ever reaches this process.

use std::collections::BTreeMap;
use std::ffi::OsString;

use mcpx_daemon::api::{ApiError, ErrorKind, Request};
use mcpx_daemon::client::Client;
use mcpx_daemon::config::resolve_command;
use mcpx_platform::process::{Detach, SpawnSpec, URL_OPENER};
use serde_json::Value;

use crate::output;

/// Logs in to `server`; returns the exit status (0), or the daemon's error (`auth`,
/// exit 4, when the login failed).
pub async fn login(client: &Client, req: Request, no_browser: bool, json: bool) -> Result<i32, ApiError> {
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

/// Shows the user the authorization URL: opens it in `$BROWSER` or with the
/// platform's opener, and prints it when that is not wanted or not possible.
fn show(url: &str, no_browser: bool) {
    let browser = std::env::var("BROWSER").ok().filter(|b| !b.trim().is_empty());
    let program = if no_browser { None } else { browser.or_else(|| Some(URL_OPENER.to_owned())) };
    let path = std::env::var("PATH").ok();
    let resolved = program.as_deref().and_then(|p| resolve_command(p, path.as_deref(), None).ok());
    let Some(program) = resolved else {
        eprintln!("open this URL in a browser to log in (the login waits for it):\n{url}");
        return;
    };
    let env: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    let spec = SpawnSpec { program, args: vec![url.into()], env, cwd: None, piped: false, detach: Detach::Group };
    match mcpx_platform::process::command(&spec).spawn() {
        Ok(mut child) => {
            eprintln!("opened the login in a browser; if none shows, open this URL:\n{url}");
            // Reaped when it exits; the login does not wait for it.
            std::thread::spawn(move || child.wait());
        }
        Err(e) => eprintln!("cannot open a browser ({e}); open this URL to log in:\n{url}"),
    }
}

/// What a device login (RFC 8628 §3.3) asks of the user, from the daemon's `device`
/// line: where to go and the code to enter there, and the link with the code in it
/// when the server gives one.
fn device_prompt(code: &Value) -> String {
    let field = |name: &str| code[name].as_str().unwrap_or("?");
    let mut text = format!(
        "to log in, open {} on any device and enter the code\n\n    {}\n\n",
        field("verification_uri"),
        field("user_code")
    );
    if let Some(complete) = code["verification_uri_complete"].as_str() {
        text.push_str(&format!("(or open {complete}, which has the code in it)\n"));
    }
    let minutes = code["expires_in"].as_u64().map(|s| s.div_ceil(60)).unwrap_or(0);
    text.push_str(&format!("waiting for the login; the code expires in {minutes} min (Ctrl-C to give up)\n"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

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
