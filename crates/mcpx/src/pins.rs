//! `mcpx pins ls [SERVER]` and `mcpx pins review [SERVER] [--yes]`: what pinning holds
//! (`docs/configuration.md`, "Pinning"), and the user's review of it.
//!
//! A review shows each held definition against the pinned one: descriptions and titles
//! as text, schemas, arguments and annotations as JSON, line by line, with the
//! poisoning scan's findings. Characters a person cannot see (zero-width, bidirectional
//! controls, tag characters) are shown as `<U+XXXX>`, and terminal controls escaped,
//! so what the user approves is what the model would read. On a terminal each is
//! approved or rejected with y/N; `--yes` approves them all, for a user who has read
//! them (an agent must not: the refusal a held tool gives says so).

use std::io::{BufRead, IsTerminal};

use mcpx_api::client::Client;
use mcpx_api::pins::{FindingRow, PinChange, PinDecision, PinnedServer, PinsRequest, ReviewAnswer, ReviewRequest};
use mcpx_api::{ApiError, Caller, ErrorKind};

use crate::output::{say, say_json, warn};

/// `mcpx pins ls`: each server's pinned, held and flagged tools and prompts.
///
/// Errors: those of `POST /v1/pins` (`unknown_server`, `config`, `daemon`).
pub async fn ls(client: &Client, caller: Caller, server: Option<String>, json: bool) -> Result<i32, ApiError> {
    let servers = fetch(client, caller, server).await?;
    if json {
        say_json(&serde_json::to_string_pretty(&servers).unwrap_or_default());
        return Ok(0);
    }
    if servers.is_empty() {
        say("no servers are offered here (see `mcpx ls`)");
    }
    for s in &servers {
        let rows = s.tools.iter().map(|r| ("tool", r)).chain(s.prompts.iter().map(|r| ("prompt", r)));
        let rows: Vec<_> = rows.collect();
        let held = rows.iter().filter(|(_, r)| r.change.is_some()).count();
        let state = match (rows.is_empty(), held) {
            (true, _) => "never listed".to_owned(),
            (false, 0) => format!("{} pinned", rows.len()),
            (false, n) => format!("{} pinned, {n} held: run `mcpx pins review {}`", rows.len() - n, s.server),
        };
        say(&format!("{} (pinning {}): {state}", line(&s.server), s.pinning));
        for (kind, r) in rows {
            let flagged = r.change.as_ref().map_or(&r.findings, |c| &c.findings);
            if r.change.is_none() && flagged.is_empty() {
                continue;
            }
            let state = if r.change.is_some() { r.state.as_str() } else { "flagged" };
            say(&format!("  {state:<8} {kind} {}", line(&r.name)));
            for f in flagged {
                say(&format!("           {}", finding(f)));
            }
        }
    }
    Ok(0)
}

/// `mcpx pins review`: shows each held change of `server` (or of every offered
/// server) and sends the user's decisions; `yes` approves every one without asking.
///
/// Errors: `usage` without a terminal and without `--yes`; those of `POST /v1/pins`
/// and `POST /v1/pins/review` (a definition changed since it was shown is `usage`).
pub async fn review(
    client: &Client,
    caller: Caller,
    server: Option<String>,
    yes: bool,
    json: bool,
) -> Result<i32, ApiError> {
    let servers = fetch(client, caller.clone(), server).await?;
    let held: usize = servers.iter().map(|s| changes(s).count()).sum();
    if held == 0 {
        match json {
            true => say_json(&serde_json::json!({ "approved": 0, "rejected": 0 }).to_string()),
            false => say("nothing is held: every listed tool and prompt is as the user approved it"),
        }
        return Ok(0);
    }
    if !yes && !std::io::stdin().is_terminal() {
        return Err(ApiError::new(
            ErrorKind::Usage,
            "mcpx pins review asks the user on a terminal: the user runs it on one (or with `--yes` after reading \
             what `mcpx pins review` shows); this is for the user to decide: do not pass `--yes` yourself",
        ));
    }
    let mut total = ReviewAnswer::default();
    for s in &servers {
        let mut decisions = Vec::new();
        for (kind, name, change, rejected) in changes(s) {
            if !json {
                show(&s.server, kind, name, change, rejected);
            }
            let approve = yes || ask(&format!("approve {kind} `{}` of `{}`?", line(name), line(&s.server)))?;
            decisions.push(PinDecision {
                kind: kind.to_owned(),
                name: name.to_owned(),
                hash: change.hash.clone(),
                approve,
            });
        }
        if decisions.is_empty() {
            continue;
        }
        let req = ReviewRequest { caller: caller.clone(), server: s.server.clone(), decisions };
        let answer: ReviewAnswer = client.post("/v1/pins/review", &req).await?;
        total.approved += answer.approved;
        total.rejected += answer.rejected;
    }
    match json {
        true => say_json(&serde_json::to_string(&total).unwrap_or_default()),
        false => say(&format!(
            "approved {}, rejected {} (a rejected change stays held until its definition changes again)",
            total.approved, total.rejected
        )),
    }
    Ok(0)
}

async fn fetch(client: &Client, caller: Caller, server: Option<String>) -> Result<Vec<PinnedServer>, ApiError> {
    client.post("/v1/pins", &PinsRequest { caller, server }).await
}

/// The held changes of `s`: kind, name, the change, and whether it was rejected before.
fn changes(s: &PinnedServer) -> impl Iterator<Item = (&'static str, &str, &PinChange, bool)> {
    let rows = s.tools.iter().map(|r| ("tool", r)).chain(s.prompts.iter().map(|r| ("prompt", r)));
    rows.filter_map(|(kind, r)| Some((kind, r.name.as_str(), r.change.as_ref()?, r.state == "rejected")))
}

/// Prints one held change: what is new, field by field, and the scan's findings.
fn show(server: &str, kind: &str, name: &str, change: &PinChange, rejected: bool) {
    let what = match (&change.before, rejected) {
        (None, _) => "is new",
        (Some(_), false) => "changed",
        (Some(_), true) => "changed (rejected before)",
    };
    say(&format!("\n{} `{}` of server `{}` {what}:", kind, line(name), line(server)));
    for (field, lines) in change.diff() {
        say(&format!("  {field}:"));
        for (sign, text) in lines {
            say(&format!("    {sign} {}", line(&text)));
        }
    }
    for f in &change.findings {
        warn(&format!("  found: {}", finding(f)));
    }
}

/// One finding, for a line.
fn finding(f: &FindingRow) -> String {
    format!("{} at {}: {}", f.pattern, line(&f.at), line(&f.detail))
}

/// `text` for one line of a terminal: controls escaped, and every character a person
/// cannot see shown as `<U+XXXX>` ([`mcpx_platform::sanitize::visible`]).
fn line(text: &str) -> String {
    mcpx_platform::sanitize::line(&mcpx_platform::sanitize::visible(text)).into_owned()
}

/// Asks `question` y/N on the terminal (default N).
///
/// Errors: `usage` when stdin cannot be read.
fn ask(question: &str) -> Result<bool, ApiError> {
    eprint!("{question} [y/N] ");
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| ApiError::new(ErrorKind::Usage, format!("cannot read the answer: {e}")))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_person_cannot_see_is_shown() {
        assert_eq!(line("a\u{200B}b\u{202E}c\u{1b}[2J"), "a<U+200B>b<U+202E>c\\e[2J");
    }
}
