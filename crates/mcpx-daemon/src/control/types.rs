//! `POST /v1/types`: TypeScript declarations of the tools of the caller's servers, from the
//! schema cache ([`crate::code`]), for `mcpx types` and code mode's `run`, `exec` and
//! `serve --code`.

use serde_json::Value;

use crate::api::{ApiError, TypesAnswer, TypesRequest};
use crate::code::{ServerTools, declarations};
use crate::config::ServerEntry;
use crate::daemon::Daemon;
use crate::pins::Holds;
use crate::policy;

use super::reach::listed;

/// `POST /v1/types`: the declarations of the offered tools of `req.servers` (each checked
/// as `POST /v1/tools` checks it, and listed first when never listed and `start` asks), or
/// of every offered server with a cached listing when none is named (nothing is started;
/// the others are named in `unlisted`).
///
/// Errors: an unknown server (`unknown_server`); one the policy refuses (`config`); a named
/// server never listed without `start`, or whose start or listing failed (`server`,
/// `timeout`); the caller's configuration cannot be read (`config`).
pub async fn types(d: &Daemon, req: &TypesRequest) -> Result<TypesAnswer, ApiError> {
    let config = d.resolve_for(&req.caller)?;
    let mut servers = Vec::new();
    let mut unlisted = Vec::new();
    if req.servers.is_empty() {
        for entry in policy::offered(&config) {
            match d.cached_for(entry, &req.caller) {
                Some(cached) if cached.tools.is_some() => {
                    let holds = d.holds(entry, Some(&cached));
                    servers.push(offered_tools(entry, &holds, cached.tools.as_deref().unwrap_or_default()))
                }
                _ => unlisted.push(entry.name.clone()),
            }
        }
    } else {
        for name in &req.servers {
            let entry = d.server(&config, name)?;
            policy::check_server(entry)?;
            let cached = listed(d, &req.caller, req.start, entry).await?;
            let holds = d.holds(entry, Some(&cached));
            servers.push(offered_tools(entry, &holds, cached.tools.as_deref().unwrap_or_default()));
        }
    }
    unlisted.sort();
    Ok(TypesAnswer { declarations: declarations(&servers), unlisted })
}

/// The tools of `entry` the policy offers (`includeTools`/`excludeTools`, and what
/// pinning holds: `holds`), parsed from the cache.
fn offered_tools(entry: &ServerEntry, holds: &Holds, tools: &[Box<serde_json::value::RawValue>]) -> ServerTools {
    let tools = tools
        .iter()
        .filter_map(|t| serde_json::from_str::<Value>(t.get()).ok())
        .filter(|t| t.get("name").and_then(Value::as_str).is_some_and(|n| policy::tool_offered(entry, holds, n)))
        .collect();
    ServerTools { server: entry.name.clone(), tools }
}
