//! `mcpx ui`: a one-time link into the daemon's dashboard (`docs/ui.md`), opened in
//! the user's browser, or printed with `--no-open` or where no browser can show.

use mcpx_api::client::{Client, Method};
use mcpx_api::{ApiError, Caller, CallerRequest, ErrorKind, UiAnswer};

use crate::output;

/// Asks the daemon for a link (opening its dashboard's listener the first time; the
/// daemon reads `caller`'s configuration, so its files show) and opens it, or prints it. With `json`, prints the answer (`url`, `port`) only.
///
/// Errors: the daemon cannot be reached, or refuses (its listener cannot be bound).
pub async fn run(client: &Client, caller: Caller, no_open: bool, json: bool) -> Result<i32, ApiError> {
    let body = client.call(Method::POST, "/v1/ui", Some(&CallerRequest { caller })).await?;
    let answer: UiAnswer = serde_json::from_slice(&body)
        .map_err(|e| ApiError::new(ErrorKind::Daemon, format!("unexpected answer from the daemon: {e}")))?;
    if json {
        output::say_json(&String::from_utf8_lossy(&body));
        return Ok(0);
    }
    let url = &answer.url;
    if no_open || !crate::browser::can_show() {
        println!("{url}");
        eprintln!("open this link in a browser on this machine within a minute; it works once");
        return Ok(0);
    }
    match crate::browser::open(url) {
        Ok(()) => eprintln!("opened the dashboard in a browser; if none shows, open this link within a minute:\n{url}"),
        Err(why) => {
            println!("{url}");
            eprintln!("{why}; open this link in a browser on this machine within a minute; it works once");
        }
    }
    Ok(0)
}
