//! The control API's routes for what a server offers besides tools (`docs/api.md`):
//! its resources, resource templates and prompts from the schema cache (`POST
//! /v1/resources`, `/v1/prompts`), and `resources/read` and `prompts/get` sent through
//! the caller's pool (`POST /v1/read`, `/v1/prompt`), the one path `POST /v1/call`
//! takes to a tool.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::reach::{Hearing, listed, through_pool};
use super::split::{Naming, PROMPT, split_target};
use crate::api::{ApiError, ErrorKind, ListRequest, PromptRequest, ReadRequest};
use crate::config::ServerEntry;
use crate::daemon::Daemon;
use crate::policy;
use crate::pool::Target;
use crate::schema::CacheEntry;

/// One server's row of `POST /v1/resources` and `/v1/prompts`: its items exactly as
/// it listed them; `listed` is false for a server never listed (no items then).
#[derive(Serialize)]
struct Offers<'a> {
    /// The server's name.
    server: &'a str,
    /// Whether the schema cache has its listing.
    listed: bool,
    /// `resources/list` (`POST /v1/resources` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    resources: Option<&'a [Box<RawValue>]>,
    /// `resources/templates/list` (`POST /v1/resources` only).
    #[serde(rename = "resourceTemplates", skip_serializing_if = "Option::is_none")]
    resource_templates: Option<&'a [Box<RawValue>]>,
    /// `prompts/list` (`POST /v1/prompts` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    prompts: Option<&'a [Box<RawValue>]>,
}

/// Which lists a row of [`Offers`] carries.
#[derive(Clone, Copy)]
enum Lists {
    /// Resources and resource templates (`POST /v1/resources`).
    Resources,
    /// Prompts (`POST /v1/prompts`).
    Prompts,
}

/// The rows of `POST /v1/resources` or `/v1/prompts`: per server of [`listings`], the
/// lists `which` names, empty for a server never listed.
async fn offers(d: &Daemon, req: &ListRequest, which: Lists) -> Result<Box<RawValue>, ApiError> {
    let rows = listings(d, req).await?;
    let offers: Vec<Offers<'_>> = rows
        .iter()
        .map(|(name, cached)| {
            let list = |pick: fn(&CacheEntry) -> Option<&[Box<RawValue>]>| {
                Some(cached.as_ref().and_then(pick).unwrap_or_default())
            };
            let resources = matches!(which, Lists::Resources);
            Offers {
                server: name,
                listed: cached.is_some(),
                resources: if resources { list(|c| c.resources.as_deref()) } else { None },
                resource_templates: if resources { list(|c| c.resource_templates.as_deref()) } else { None },
                prompts: if resources { None } else { list(|c| c.prompts.as_deref()) },
            }
        })
        .collect();
    raw(&offers)
}

/// The parts of a listed resource, template or prompt that names it.
#[derive(Deserialize)]
struct Named {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uri: Option<String>,
    #[serde(rename = "uriTemplate", default)]
    uri_template: Option<String>,
}

/// `POST /v1/resources`: the resources and resource templates of one server
/// (`server`), or of every enabled one, from the schema cache: an array of
/// `{"server", "listed", "resources": [...], "resourceTemplates": [...]}`, the items
/// exactly as the servers sent them. A server named but never listed is started and
/// listed first when `start` asks; without a server, nothing is started.
///
/// Errors: an unknown server (`unknown_server`); a disabled one (`config`); a server
/// named, never listed, without `start`, or whose start failed (`server`, `timeout`).
pub async fn resources(d: &Daemon, req: &ListRequest) -> Result<Box<RawValue>, ApiError> {
    offers(d, req, Lists::Resources).await
}

/// `POST /v1/prompts`: the prompts of one server (`server`) or of every enabled one,
/// as [`resources`] lists resources (`{"server", "listed", "prompts": [...]}`); or,
/// with `prompt` (and `server`) or `target` (`<server>.<prompt>`), that one prompt's
/// object as the server listed it, the server started and listed first when `start`
/// asks.
///
/// Errors: as [`resources`]; a malformed target (`usage`); no such prompt
/// (`unknown_tool`, with the closest names).
pub async fn prompts(d: &Daemon, req: &ListRequest) -> Result<Box<RawValue>, ApiError> {
    if req.prompt.is_some() || req.target.is_some() {
        let config = d.resolve_for(&req.caller)?;
        let named =
            Naming { server: req.server.as_deref(), name: req.prompt.as_deref(), target: req.target.as_deref() };
        let (server, name) = split_target(&config, named, &PROMPT)?;
        let entry = d.server(&config, &server)?;
        policy::check_server(entry)?;
        let cached = offered(d, entry, listed(d, &req.caller, req.start, entry).await?);
        policy::check_prompt(entry, &d.holds(entry, Some(&cached)), &name)?;
        let found = cached.prompts.iter().flatten().find(|p| name_of(p).name.as_deref() == Some(name.as_str()));
        return match found {
            Some(p) => Ok(p.clone()),
            None => Err(unknown_prompt(entry, &name, Some(&cached))),
        };
    }
    offers(d, req, Lists::Prompts).await
}

/// `POST /v1/read`: `resources/read` of `uri` on `server`, through the caller's pool
/// as `POST /v1/call` goes (MCP 2025-11-25, Server Features, "Resources"); answers the
/// `ReadResourceResult` exactly as the server sent it.
///
/// Errors: no server or URI (`usage`); an unknown server (`unknown_server`); a
/// disabled one (`config`); the server failed (`server`, `protocol`, `timeout`) or
/// answered an error (`rpc`: the message adds the closest listed URIs, "did you mean").
pub async fn read(d: &Daemon, req: &ReadRequest) -> Result<Box<RawValue>, ApiError> {
    let usage = || ApiError::new(ErrorKind::Usage, "name a server and a URI: `mcpx read <server> <uri>`");
    let (Some(server), Some(uri)) = (&req.server, &req.uri) else { return Err(usage()) };
    let config = d.resolve_for(&req.caller)?;
    let entry = d.server(&config, server)?;
    policy::check_server(entry)?;
    let params = serde_json::json!({ "uri": uri }).to_string();
    let who = (&req.caller, req.timeout_ms);
    through_pool(d, who, entry, "resources/read", &params, Hearing::default(), |_| Ok(())).await.map_err(|mut e| {
        if e.kind == ErrorKind::Rpc {
            e.message.push_str(&resource_hint(d.cached_for(entry, &req.caller).as_deref(), server, uri));
        }
        e
    })
}

/// `POST /v1/prompt`: `prompts/get` of the prompt named by `target`
/// (`<server>.<prompt>`) or by `server` and `prompt`, with `arguments` (an object of
/// strings), through the caller's pool as `POST /v1/call` goes (MCP 2025-11-25, Server
/// Features, "Prompts"); answers the `GetPromptResult` exactly as the server sent it.
///
/// Errors: a malformed target or arguments (`usage`); an unknown server
/// (`unknown_server`); a disabled one (`config`); a prompt not in the server's cached
/// listing (`unknown_tool`, checked before and after a start); the server failed
/// (`server`, `protocol`, `timeout`) or answered an error (`rpc`).
pub async fn prompt(d: &Daemon, req: &PromptRequest) -> Result<Box<RawValue>, ApiError> {
    let config = d.resolve_for(&req.caller)?;
    let named = Naming { server: req.server.as_deref(), name: req.prompt.as_deref(), target: req.target.as_deref() };
    let (server, name) = split_target(&config, named, &PROMPT)?;
    let entry = d.server(&config, &server)?;
    policy::check_server(entry)?;
    let arguments = match &req.arguments {
        Some(a) if a.get().trim_start().starts_with('{') => a.get().to_owned(),
        Some(_) => {
            return Err(ApiError::new(
                ErrorKind::Usage,
                "the prompt's arguments must be a JSON object of strings, like '{\"city\":\"Paris\"}'",
            ));
        }
        None => "{}".to_owned(),
    };
    let quoted = serde_json::to_string(&name).unwrap_or_default();
    let params = format!(r#"{{"name":{quoted},"arguments":{arguments}}}"#);
    let check = |target: &Target| check_prompt_listed(d, target, &name);
    through_pool(d, (&req.caller, req.timeout_ms), entry, "prompts/get", &params, Hearing::default(), check).await
}

/// The server named (`server`, started and listed first when `start` asks), or every
/// enabled one, each with its cache entry when listed.
async fn listings(d: &Daemon, req: &ListRequest) -> Result<Vec<(String, Option<CacheEntry>)>, ApiError> {
    let config = d.resolve_for(&req.caller)?;
    if let Some(name) = &req.server {
        let entry = d.server(&config, name)?;
        policy::check_server(entry)?;
        let cached = offered(d, entry, listed(d, &req.caller, req.start, entry).await?);
        return Ok(vec![(entry.name.clone(), Some(cached))]);
    }
    let listing = |entry| {
        let cached = d.cached_for(entry, &req.caller).filter(|c| c.tools.is_some());
        cached.map(|cached| offered(d, entry, Arc::unwrap_or_clone(cached)))
    };
    Ok(policy::offered(&config).map(|entry| (entry.name.clone(), listing(entry))).collect())
}

/// `cached`, the listing of `entry`, without the prompts pinning holds.
fn offered(d: &Daemon, entry: &ServerEntry, mut cached: CacheEntry) -> CacheEntry {
    let holds = d.holds(entry, Some(&cached));
    if let Some(prompts) = cached.prompts.as_mut() {
        prompts.retain(|p| name_of(p).name.is_none_or(|name| policy::prompt_offered(&holds, &name)));
    }
    cached
}

/// Fails when the schema cache lists the server's prompts and `name` is not among them.
fn check_prompt_listed(d: &Daemon, target: &Target, name: &str) -> Result<(), ApiError> {
    let Some(cached) = d.schema.get_for(&target.cache_key, target.context.as_deref()) else { return Ok(()) };
    let Some(prompts) = cached.prompts.as_ref().filter(|_| cached.error.is_none()) else { return Ok(()) };
    policy::check_prompt(&target.entry, &d.holds(&target.entry, Some(&cached)), name)?;
    if prompts.iter().any(|p| name_of(p).name.as_deref() == Some(name)) {
        return Ok(());
    }
    Err(unknown_prompt(&target.entry, name, Some(&cached)))
}

/// The `unknown_tool` error for prompt `name` of `entry`, with the closest names ("did
/// you mean", [`crate::suggest`]) and the prompts it offers.
fn unknown_prompt(entry: &ServerEntry, name: &str, cached: Option<&CacheEntry>) -> ApiError {
    let server = &entry.name;
    let names: Vec<String> =
        cached.and_then(|c| c.prompts.as_ref()).into_iter().flatten().filter_map(|p| name_of(p).name).collect();
    let list = if names.is_empty() { String::from("(none listed)") } else { names.join(", ") };
    let dym = crate::suggest::did_you_mean(name, names.iter().map(String::as_str));
    ApiError::new(
        ErrorKind::UnknownTool,
        format!("server `{server}` has no prompt `{name}`;{dym} its prompts: {list} (see `mcpx prompts {server}`)"),
    )
}

/// What to add to the server's error about `uri`: the listed URIs (or templates) whose
/// URI or name is closest to it, and where to see them; for a template written as it
/// is listed, that its `{...}` parts are to be filled in.
fn resource_hint(cached: Option<&CacheEntry>, server: &str, uri: &str) -> String {
    let see = format!(" (see `mcpx resources {server}`)");
    if uri.contains('{') {
        return format!("; `{uri}` is a resource template: replace each {{...}} with a value{see}");
    }
    // Each listed URI or template under its URI and its name, mapped to what to write.
    let mut names: Vec<(String, String)> = Vec::new();
    let listed = cached.map(|c| (c.resources.iter().flatten(), c.resource_templates.iter().flatten()));
    if let Some((resources, templates)) = listed {
        for item in resources.chain(templates) {
            let n = name_of(item);
            let Some(to) = n.uri.or(n.uri_template) else { continue };
            names.push((to.clone(), to.clone()));
            if let Some(name) = n.name {
                names.push((name, to));
            }
        }
    }
    if let Some((_, to)) = names.iter().find(|(name, to)| name == uri && to != uri) {
        return format!("; `{uri}` is the name of `{to}`: read it by its URI{see}");
    }
    // URIs share long prefixes, so a third of their length is a loose bound: only the
    // nearest of the close ones are offered.
    let close = crate::suggest::closest(uri, names.iter().map(|(k, _)| k.as_str()));
    let best = close.iter().map(|k| strsim::damerau_levenshtein(uri, k)).min().unwrap_or(0);
    let mut near: Vec<&str> = Vec::new();
    for key in close.into_iter().filter(|k| strsim::damerau_levenshtein(uri, k) == best) {
        if let Some((_, to)) = names.iter().find(|(k, _)| k == key).filter(|(_, to)| !near.contains(&to.as_str())) {
            near.push(to);
        }
    }
    match near.as_slice() {
        [] => see,
        near => {
            let near: Vec<String> = near.iter().map(|n| format!("`{n}`")).collect();
            format!("; did you mean {}?{see}", near.join(" or "))
        }
    }
}

/// The name, URI and URI template of a listed item; empty for one that is malformed.
fn name_of(item: &RawValue) -> Named {
    serde_json::from_str(item.get()).unwrap_or(Named { name: None, uri: None, uri_template: None })
}

/// `value` as raw JSON for the answer.
fn raw(value: &impl Serialize) -> Result<Box<RawValue>, ApiError> {
    serde_json::value::to_raw_value(value).map_err(|e| ApiError::new(ErrorKind::Daemon, e.to_string()))
}
