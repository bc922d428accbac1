//! `POST /v1/pins` and `POST /v1/pins/review`: each server's pinned and held tools
//! and prompts ([`crate::pins`]), and the user's decisions on what is held (`mcpx pins
//! ls`, `mcpx pins review`; `docs/api.md`, "Pinning").

use super::reach::shell_origin;
use crate::api::pins::{FindingRow, PinChange, PinRow, PinnedServer, PinsRequest, ReviewAnswer, ReviewRequest};
use crate::api::{ApiError, ErrorKind};
use crate::config::ServerEntry;
use crate::daemon::Daemon;
use crate::pins::{Decision, Kind, Pin};
use crate::poisoning::Finding;
use crate::policy;
use mcpx_proto::Message;

/// `POST /v1/pins`: the pins of `req.server`, or of every offered server of the
/// caller's configuration, each compared with its last listing first (so what is held
/// is what a listing would leave out now). A server never listed has no rows.
///
/// Errors: an unknown server (`unknown_server`); one the policy refuses (`config`);
/// the caller's configuration cannot be read (`config`).
pub async fn pins(d: &Daemon, req: &PinsRequest) -> Result<Vec<PinnedServer>, ApiError> {
    let config = d.resolve_for(&req.caller)?;
    let entries: Vec<&ServerEntry> = match &req.server {
        Some(name) => {
            let entry = d.server(&config, name)?;
            policy::check_server(entry)?;
            vec![entry]
        }
        None => policy::offered(&config).collect(),
    };
    let mut servers = Vec::new();
    for entry in entries {
        let cached = d.schema_for(entry, &req.caller).await;
        d.holds(entry, cached.as_deref());
        let set = d.pins.get(&d.pin_key(entry, cached.is_some_and(|c| c.private))).unwrap_or_default();
        let rows =
            |kind| -> Vec<PinRow> { set.of(kind).into_iter().flatten().map(|(name, pin)| row(name, pin)).collect() };
        servers.push(PinnedServer {
            server: entry.name.clone(),
            pinning: entry.pinning.as_str().to_owned(),
            tools: rows(Kind::Tool),
            prompts: rows(Kind::Prompt),
        });
    }
    Ok(servers)
}

/// The row of the pin of `name`.
fn row(name: &str, pin: &Pin) -> PinRow {
    let state = match &pin.held {
        Some(held) if held.rejected => "rejected",
        Some(_) => "held",
        None => "pinned",
    };
    PinRow {
        name: name.to_owned(),
        state: state.to_owned(),
        hash: pin.hash.clone(),
        findings: findings(&pin.findings),
        change: pin.held.as_ref().map(|held| PinChange {
            before: pin.definition.clone(),
            after: held.definition.clone(),
            hash: held.hash.clone(),
            findings: findings(&held.findings),
            since: held.since,
        }),
    }
}

fn findings(found: &[Finding]) -> Vec<FindingRow> {
    let row =
        |f: &Finding| FindingRow { pattern: f.pattern.as_str().to_owned(), at: f.at.clone(), detail: f.detail.clone() };
    found.iter().map(row).collect()
}

/// `POST /v1/pins/review`: records the user's decisions on held definitions of
/// `req.server`; every MCP session with a stream hears `list_changed` of each kind an
/// approval changed.
///
/// Errors: an unknown server (`unknown_server`); one the policy refuses (`config`); a
/// decision of an unknown kind (`usage`), or on a definition not held or changed since
/// the review showed it (`usage`: review it again; the decisions before it stand).
pub async fn review(d: &Daemon, req: &ReviewRequest) -> Result<ReviewAnswer, ApiError> {
    let config = d.resolve_for(&req.caller)?;
    let entry = d.server(&config, &req.server)?;
    policy::check_server(entry)?;
    let private = d.cached_for(entry, &req.caller).is_some_and(|c| c.private);
    let key = d.pin_key(entry, private);
    let mut answer = ReviewAnswer::default();
    let mut approved = Vec::new();
    for decision in &req.decisions {
        let kind = match decision.kind.as_str() {
            "tool" => Kind::Tool,
            "prompt" => Kind::Prompt,
            other => {
                return Err(ApiError::new(ErrorKind::Usage, format!("unknown kind `{other}`: use `tool` or `prompt`")));
            }
        };
        let (verdict, count) = match decision.approve {
            true => (Decision::Approve, &mut answer.approved),
            false => (Decision::Reject, &mut answer.rejected),
        };
        d.pins
            .decide(&key, kind, &decision.name, &decision.hash, verdict)
            .map_err(|e| ApiError::new(ErrorKind::Usage, e))?;
        let verb = if decision.approve { "approved" } else { "rejected" };
        d.record_pin(entry, &shell_origin(&req.caller, None, None), verb, kind, &decision.name);
        *count += 1;
        if decision.approve && !approved.contains(&kind) {
            approved.push(kind);
        }
    }
    for kind in approved {
        d.announce(Message::notification(&format!("notifications/{}s/list_changed", kind.as_str()), None));
    }
    Ok(answer)
}
