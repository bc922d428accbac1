//! What a client session of the MCP endpoint sees: its servers (one passed through,
//! or every one of its caller's configuration that [`crate::policy`] offers), their
//! listings from the schema cache (starting servers never listed) with the tools the
//! policy leaves out removed, and the aggregate lists with names and URIs made unique.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::config::{ResolvedConfig, ServerEntry};
use crate::daemon::Daemon;
use crate::mcp::sessions::ClientSession;
use crate::names::{NameMap, SEPARATOR, resource_uri};
use crate::policy;
use crate::schema::CacheEntry;
use crate::sync::lock;
use mcpx_proto::mcp::error_code;

/// A JSON-RPC result, or the error's (code, message).
pub(crate) type RpcResult = Result<Value, (i64, String)>;

/// The servers a session sees: the one it passes through, or every one of the
/// caller's configuration that the policy offers.
///
/// Errors: the configuration cannot be read (-32603); the server passed through is
/// not configured, or the policy refuses it (-32602, see [`entry`]).
pub(crate) fn servers(d: &Daemon, session: &ClientSession) -> Result<Vec<ServerEntry>, (i64, String)> {
    let config = config(d, session)?;
    match &session.server {
        Some(name) => entry(d, &config, name).map(|e| vec![e.clone()]),
        None => {
            d.log_untrusted(policy::untrusted(&config));
            Ok(policy::offered(&config).cloned().collect())
        }
    }
}

/// The caller's configuration.
///
/// Errors: it cannot be read (-32603).
pub(crate) fn config(d: &Daemon, session: &ClientSession) -> Result<Arc<ResolvedConfig>, (i64, String)> {
    d.resolve_for(&session.caller).map_err(|e| (error_code::INTERNAL_ERROR, e.message))
}

/// The configured server `name`, when the policy offers it.
///
/// Errors (-32602): no such server (the CLI's `unknown_server` message), or a
/// disabled one ([`policy::check_server`]'s message).
pub(crate) fn entry<'a>(d: &Daemon, config: &'a ResolvedConfig, name: &str) -> Result<&'a ServerEntry, (i64, String)> {
    let entry = d.server(config, name).map_err(|e| (error_code::INVALID_PARAMS, e.message))?;
    policy::check_server(entry).map_err(|e| (error_code::INVALID_PARAMS, e.message))?;
    Ok(entry)
}

/// The policy's refusal of an exposed aggregate name (`<server>__<tool>`) that no
/// listing gave: the server it names is disabled, or the tool is left out by
/// `includeTools`/`excludeTools`. `None` when the name is simply unknown.
pub(crate) fn refused_name(d: &Daemon, session: &ClientSession, exposed: &str) -> Option<policy::Refusal> {
    let config = config(d, session).ok()?;
    // The longest configured name followed by the separator, as `mcpx call` splits.
    let (entry, tool) = config
        .servers
        .values()
        .filter_map(|e| Some((e, exposed.strip_prefix(e.name.as_str())?.strip_prefix(SEPARATOR)?)))
        .max_by_key(|(e, _)| e.name.len())?;
    policy::check_tool(entry, &d.holds(entry, d.cached_for(entry, &session.caller).as_deref()), tool).err()
}

/// The schema cache entry of `entry`, listing the server first when it was never
/// listed (design: "Discovery": MCP clients see every tool on their first listing).
/// A server whose last start or listing failed is left out at once (`None`) and
/// started again in the background.
pub(crate) async fn listed(d: &Daemon, session: &ClientSession, entry: &ServerEntry) -> Option<Arc<CacheEntry>> {
    let cached = d.schema_for(entry, &session.caller).await;
    if cached.as_ref().is_some_and(|c| c.tools.is_some() && c.error.is_none()) {
        return cached;
    }
    let (target, pool_key) = d.targets.for_caller(entry, &session.caller).ok()?;
    if let Some(error) = cached.and_then(|c| c.error.clone()) {
        // Its last start or listing failed: left out at once rather than waited for
        // again, and tried in the background; sessions hear `list_changed` if it comes up.
        tracing::info!(server = %entry.name, error = %error, "left out of an MCP listing: its last start failed");
        d.start_in_background(target, pool_key);
        return None;
    }
    match d.lease_as(&target, &pool_key, entry.options.start_timeout).await {
        Ok(lease) => {
            // Started to be listed: a `call` key's instance ends with the listing.
            lease.finish().await;
            d.schema.get_for(&entry.cache_key(), target.context.as_deref())
        }
        Err(e) => {
            tracing::warn!(server = %entry.name, error = %e, "left out of an MCP listing: it failed to start");
            None
        }
    }
}

/// The configured server, left out of listings by its last failure, whose exposed
/// names `exposed` would have (`<server>__...`), with that failure.
pub(crate) fn left_out_owner(d: &Daemon, session: &ClientSession, exposed: &str) -> Option<(String, String)> {
    servers(d, session).ok()?.into_iter().find_map(|entry| {
        let error = d.schema.get(&entry.cache_key())?.error.clone()?;
        exposed.starts_with(&format!("{}{SEPARATOR}", entry.name)).then_some((entry.name, error))
    })
}

/// An aggregate list (`field` is `tools`, `prompts`, `resources` or
/// `resourceTemplates`): every server's items with names or URIs made unique, unless
/// the session passes one server through. A listing of tools or prompts becomes the
/// session's map from exposed names back to the servers' own.
pub(crate) async fn list(d: &Daemon, session: &ClientSession, field: &str) -> RpcResult {
    let entries = servers(d, session)?;
    let passthrough = session.server.is_some();
    let mut items: Vec<(String, Value)> = Vec::new();
    // Unread servers start at once, not one after another.
    let caches = futures_util::future::join_all(entries.iter().map(|entry| listed(d, session, entry))).await;
    for (entry, cached) in entries.iter().zip(caches) {
        let Some(cached) = cached else { continue };
        let holds = d.holds(entry, Some(&cached));
        let list = match field {
            "tools" => &cached.tools,
            "prompts" => &cached.prompts,
            "resources" => &cached.resources,
            _ => &cached.resource_templates,
        };
        for raw in list.iter().flatten() {
            let Ok(v) = serde_json::from_str::<Value>(raw.get()) else { continue };
            let name = v["name"].as_str().unwrap_or_default();
            let offered = match field {
                "tools" => policy::tool_offered(entry, &holds, name),
                "prompts" => policy::prompt_offered(&holds, name),
                _ => true,
            };
            if !offered {
                continue;
            }
            items.push((entry.name.clone(), v));
        }
    }
    if !passthrough {
        match field {
            "tools" | "prompts" => {
                let names =
                    NameMap::build(items.iter().map(|(s, v)| (s.as_str(), v["name"].as_str().unwrap_or_default())));
                for (s, v) in &mut items {
                    if let Some(exposed) = names.exposed(s, v["name"].as_str().unwrap_or_default()) {
                        v["name"] = Value::String(exposed.to_owned());
                    }
                }
                *lock(if field == "tools" { &session.tools } else { &session.prompts }) = names;
            }
            "resources" => {
                for (s, v) in &mut items {
                    if let Some(uri) = v["uri"].as_str() {
                        v["uri"] = Value::String(resource_uri(s, uri));
                    }
                }
            }
            _ => {
                for (s, v) in &mut items {
                    if let Some(t) = v["uriTemplate"].as_str() {
                        v["uriTemplate"] = Value::String(resource_uri(s, t));
                    }
                }
            }
        }
    }
    let values: Vec<Value> = items.into_iter().map(|(_, v)| v).collect();
    Ok(json!({ field: values }))
}
