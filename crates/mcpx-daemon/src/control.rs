//! The control API's handlers (`docs/api.md`): one function per `/v1` route, from the
//! daemon's state and the request to the response, so each is tested without a socket.
//! `server.rs` routes requests to them and turns their results into HTTP.

use std::path::Path;
use std::sync::Arc;

use mcpx_platform::exec::Executable;
use serde_json::value::RawValue;

pub mod commands;
pub mod login;
pub mod logins;
pub mod types;

use crate::adopt::replace_incompatible;
use crate::api::{
    Answer, ApiError, CallRequest, CallerRequest, ErrorKind, ListRequest, RefreshRequest, RestartRequest, SearchHit,
    SearchRequest, ServerRow, Source, StopRequest, UpgradeRequest,
};
use crate::arguments::{self, Given, Pair};
use crate::config::{Client, ConfigEnv, EntryError, ServerEntry};
use crate::daemon::{Daemon, Exit};
use crate::instance::ClientReplies;
use crate::lease::Failure;
use crate::notices::NoticeSender;
use crate::pins::Holds;
use crate::policy;
use crate::pool::Target;
use crate::schema::{self, CacheEntry, ToolSummary};
use crate::scope::PoolKey;
use crate::search::ToolText;
use crate::stream::StatusSender;
use reach::{Hearing, listed, server_error, shell_origin, through_pool};
use split::{Naming, TOOL, split_target};

/// `GET /v1/health`: the daemon's pid, build and start time (milliseconds since the
/// Unix epoch), so a client tells a re-executed daemon from the one before, and its
/// `state`, `cache` and `runtime` directories, which a client that found it uses
/// instead of its own (`docs/api.md`).
pub fn health(d: &Daemon) -> serde_json::Value {
    let paths = &d.dirs.paths;
    serde_json::json!({
        "pid": std::process::id(),
        "build": mcpx_platform::build::build_id(),
        "started_at_ms": d.started_at,
        "state": paths.state,
        "cache": paths.cache,
        "runtime": paths.runtime,
    })
}

/// `POST /v1/ls`: every configured server with its state, from the schema cache as
/// the caller sees it ([`Daemon::schema_for`]: a listing past its `ttlMs` is listed
/// again from a running instance, and is `stale` with none running).
///
/// Errors: the caller's configuration cannot be read (`config`).
pub async fn ls(d: &Daemon, req: &CallerRequest) -> Result<Vec<ServerRow>, ApiError> {
    let config = d.resolve_for(&req.caller)?;
    let live: Vec<_> = d.pool.instances().into_iter().filter(|i| i.is_alive()).collect();
    let mut rows = Vec::new();
    // A caller on a profile sees only the profile's servers.
    for entry in config.servers.values().filter(|e| policy::in_profile(e)) {
        let warnings = config.warnings.get(&entry.name).cloned().unwrap_or_default();
        rows.push(ServerRow { warnings, ..server_row(d, entry, &req.caller, &live).await });
    }
    let env = d.config.env();
    rows.extend(config.errors.iter().map(|(name, error)| config_error_row(name, error, env)));
    rows.extend(config.file_errors.iter().filter_map(|error| {
        let file = error.0.file()?.display().to_string();
        Some(config_error_row(&file, error, env))
    }));
    rows.extend(config.file_warnings.iter().map(|w| ServerRow {
        state: "warning".to_owned(),
        error: None,
        warnings: vec![w.message.clone()],
        ..file_row(&w.file.display().to_string(), &w.file, env)
    }));
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(rows)
}

/// The `mcpx ls` row of `entry` for `caller`, `live` being the daemon's live instances
/// (its `warnings` are the resolution's, left empty here).
pub async fn server_row(
    d: &Daemon,
    entry: &ServerEntry,
    caller: &crate::api::Caller,
    live: &[Arc<crate::instance::Instance>],
) -> ServerRow {
    let key = entry.cache_key();
    let cached = d.schema_for(entry, caller).await;
    let n_live = live.iter().filter(|i| i.identity.cache_key == key).count();
    // An untrusted entry is not expanded: its `${VAR}`s are the file's to show, not ours.
    // A sandbox that cannot be applied is an error too: no start can succeed.
    let unexpandable = match policy::server_trusted(entry) {
        true => entry.expand(d.env(), &d.targets.secrets()).err().map(|e| e.to_string()).or_else(|| {
            d.targets.checked_sandbox(entry, &d.targets.secrets()).err().map(|e| ApiError::from(e).message)
        }),
        false => None,
    };
    let error = unexpandable.clone().or_else(|| cached.as_ref().and_then(|c| c.error.clone()));
    let state = if !policy::server_trusted(entry) {
        "untrusted"
    } else if !policy::server_offered(entry) {
        "disabled"
    } else if unexpandable.is_some() {
        // An unset `${VAR}` or secret: no start can succeed until it is set.
        "error"
    } else if d.pool.in_crash_loop(&key) {
        "crash-loop"
    } else if error.is_some() {
        // A failed start, or a running instance whose listing failed.
        "error"
    } else if n_live > 0 {
        "running"
    } else if cached.as_ref().is_some_and(|c| c.tools.is_some() && c.is_stale(schema::now_ms())) {
        // Listed, but past its `ttlMs`, with nothing running to list it again.
        "stale"
    } else if cached.as_ref().is_some_and(|c| c.tools.is_some()) {
        "ready"
    } else {
        "unread"
    };
    let instructions = cached.as_ref().and_then(|c| c.session.as_ref()).and_then(|s| s.instructions.clone());
    let description = entry.options.description.clone().or_else(|| instructions.as_deref().map(first_paragraph));
    let holds = match policy::server_offered(entry) {
        true => d.holds(entry, cached.as_deref()),
        false => Holds::default(),
    };
    let tools = cached.as_ref().and_then(|c| c.tools.as_ref()).map(|_| {
        cached
            .as_ref()
            .map(|c| c.tool_summaries().iter().filter(|t| policy::tool_offered(entry, &holds, &t.name)).count())
            .unwrap_or(0)
    });
    ServerRow {
        name: entry.name.clone(),
        tools,
        sharing: entry.options.sharing.as_str().to_owned(),
        scope: entry.options.scope.as_str().to_owned(),
        live: n_live,
        state: state.to_owned(),
        description,
        error: if state == "error" { error } else { None },
        held: holds.len(),
        source: Source { file: entry.source.clone(), client: entry.client.map(|c| c.name().to_owned()) },
        warnings: Vec::new(),
    }
}

/// The first paragraph of a server's instructions (up to the first blank line, at most
/// 1000 characters), from which `mcpx ls` takes its first sentence.
fn first_paragraph(text: &str) -> String {
    let lines: Vec<&str> = text.trim_start().lines().take_while(|l| !l.trim().is_empty()).collect();
    lines.join("\n").chars().take(1000).collect()
}

/// The `ls` row of an entry (named `name`) or a file (named by its path) that does not
/// parse: state `error`, its message, and `-` for the sharing and scope it could not be given.
fn config_error_row(name: &str, error: &EntryError, env: &ConfigEnv) -> ServerRow {
    ServerRow { error: Some(error.0.to_string()), ..file_row(name, error.0.file().unwrap_or(Path::new("")), env) }
}

/// A row that is not a server: named `name`, from `file` (its `client` told by its path,
/// as for its servers), state `error`, no message yet.
fn file_row(name: &str, file: &Path, env: &ConfigEnv) -> ServerRow {
    ServerRow {
        name: name.to_owned(),
        tools: None,
        sharing: "-".to_owned(),
        scope: "-".to_owned(),
        live: 0,
        state: "error".to_owned(),
        description: None,
        error: None,
        held: 0,
        source: Source { file: file.to_owned(), client: Client::of_file(file, env).map(|c| c.name().to_owned()) },
        warnings: Vec::new(),
    }
}

/// `POST /v1/tools`: a server's tool objects exactly as it sent them, or one tool
/// (named by `server` and `tool`, or by `target` as `POST /v1/call` takes it).
///
/// A server never listed is started and listed first when `start` asks.
///
/// Errors: no server named (`usage`); an unknown server (`unknown_server`) or tool
/// (`unknown_tool`); one the policy refuses ([`policy::check_tool`]: a disabled server
/// is `config`, an excluded tool `unknown_tool`); a server never listed without
/// `start`, or whose start or listing failed (`server`, `timeout`).
pub async fn tools(d: &Daemon, req: &ListRequest) -> Result<Box<RawValue>, ApiError> {
    let config = d.resolve_for(&req.caller)?;
    // A `target` (`<server>.<tool>`, as `POST /v1/call` takes it) names one tool.
    let (server, tool) = match (&req.target, &req.server) {
        (Some(target), None) => {
            let named = Naming { server: None, name: None, target: Some(target) };
            let (server, tool) = split_target(&config, named, &TOOL)?;
            (Some(server), Some(tool))
        }
        _ => (req.server.clone(), req.tool.clone()),
    };
    let name =
        server.as_deref().ok_or_else(|| ApiError::new(ErrorKind::Usage, "name a server: `mcpx tools <server>`"))?;
    let entry = d.server(&config, name)?;
    // Refused before anything starts; a hold is known once it is listed.
    match &tool {
        Some(tool) => policy::check_tool(entry, &Holds::default(), tool)?,
        None => policy::check_server(entry)?,
    }
    let cached = Some(listed(d, &req.caller, req.start, entry).await?);
    let holds = d.holds(entry, cached.as_ref());
    if let Some(tool) = &tool {
        policy::check_tool(entry, &holds, tool)?;
    }
    let tools = cached.as_ref().and_then(|c| c.tools.as_ref()).map_or(&[][..], Vec::as_slice);
    let allowed: Vec<&RawValue> = tools
        .iter()
        .filter(|t| {
            serde_json::from_str::<ToolSummary>(t.get()).is_ok_and(|s| {
                policy::tool_offered(entry, &holds, &s.name) && tool.as_ref().is_none_or(|want| *want == s.name)
            })
        })
        .map(|t| &**t)
        .collect();
    if let Some(tool) = &tool {
        return match allowed.first() {
            Some(t) => Ok((*t).to_owned()),
            None => Err(unknown_tool(entry, &holds, tool, cached.as_ref())),
        };
    }
    serde_json::value::to_raw_value(&allowed).map_err(|e| ApiError::new(ErrorKind::Daemon, e.to_string()))
}

/// `POST /v1/search`: the offered tools of every listed server ranked against the words
/// ([`crate::search::rank`], BM25F over names, titles, descriptions and parameter names),
/// best first, at most [`SEARCH_HITS`] of them; a tool that matches no word is left out.
///
/// Errors: no words (`usage`); the caller's configuration cannot be read (`config`).
pub async fn search(d: &Daemon, req: &SearchRequest) -> Result<Vec<SearchHit>, ApiError> {
    let config = d.resolve_for(&req.caller)?;
    if req.words.iter().all(|w| w.trim().is_empty()) {
        return Err(ApiError::new(ErrorKind::Usage, "give at least one word: `mcpx search <words>...`"));
    }
    // What the index is built from, and its key: each offered server's cached listing
    // (the same `Arc` while it is not listed again), its holds and its tool filters.
    let mut sources = Vec::new();
    let mut key = std::hash::DefaultHasher::new();
    for entry in policy::offered(&config) {
        let Some(cached) = d.schema_for(entry, &req.caller).await else {
            continue;
        };
        let holds = d.holds(entry, Some(&cached));
        std::hash::Hash::hash(&(&entry.name, Arc::as_ptr(&cached) as usize, &*holds.tools), &mut key);
        std::hash::Hash::hash(&policy::tool_filters(entry), &mut key);
        sources.push((entry, cached, holds));
    }
    let index = d.search_indexes.get(std::hash::Hasher::finish(&key), || {
        let mut tools = Vec::new();
        for (entry, cached, holds) in &sources {
            tools.extend(
                cached
                    .tools
                    .iter()
                    .flatten()
                    .filter_map(|t| ToolText::from_tool(&entry.name, t))
                    .filter(|t| policy::tool_offered(entry, holds, &t.name)),
            );
        }
        crate::search::Index::new(tools)
    });
    let tools = index.tools();
    Ok(index
        .rank(&req.words)
        .into_iter()
        .take(SEARCH_HITS)
        .map(|(i, _)| {
            let t = &tools[i];
            SearchHit { server: t.server.clone(), tool: t.name.clone(), description: t.description.clone() }
        })
        .collect())
}

/// At most this many tools answer `POST /v1/search`: the best matches, not every tool that
/// shares a word with the query.
pub const SEARCH_HITS: usize = 20;

/// `POST /v1/call`: calls a tool and returns its `CallToolResult` exactly as the
/// server sent it. The call's progress and log notifications go to `notify`, with the
/// caller's own progress token (`POST /v1/call` with `stream` sends them as lines).
///
/// Errors: a malformed target or arguments (`usage`); an unknown server or tool
/// (`unknown_server`, `unknown_tool`); one the policy refuses ([`policy::check_tool`]:
/// a disabled server is `config`, an excluded tool `unknown_tool`); the server failed (`server`, `protocol`, `timeout`) or answered a JSON-RPC error (`rpc`).
///
/// `status` gets an item each time the call starts waiting on something else: `{"phase":"starting","server","command"}`
/// (the server starts; `command` is the program without its directory, or a remote
/// server's host), `{"phase":"waiting","server","reason"}` (no instance is free), then
/// `{"phase":"calling","server","tool"}` (the request is with the server). With
/// `answers`, the server's requests of the methods in `req.answers` go to `notify`
/// too, and their answers come back there (a shell caller on a terminal answers
/// `elicitation/create` through `POST /v1/call/answer`).
pub async fn call(
    d: &Daemon,
    req: &CallRequest,
    notify: Option<NoticeSender>,
    status: Option<StatusSender>,
    answers: Option<Arc<ClientReplies>>,
) -> Result<Box<RawValue>, ApiError> {
    let typed = typed_arguments(d, req).await?;
    let config = d.resolve_for(&req.caller)?;
    let named = Naming { server: req.server.as_deref(), name: req.tool.as_deref(), target: req.target.as_deref() };
    let (server, tool) = split_target(&config, named, &TOOL)?;
    let entry = d.server(&config, &server)?;
    let origin = shell_origin(&req.caller, req.via.as_deref(), req.client.as_deref());
    // What pinning holds is checked against the listing with the target (`check` below).
    if let Err(refused) = policy::check_tool(entry, &Holds::default(), &tool) {
        d.record_refused(entry, &origin, "tools/call", &tool, refused.message.clone());
        return Err(refused.into());
    }
    let arguments = match (typed, &req.arguments) {
        (Some(typed), _) => typed,
        (None, Some(a)) if a.get().trim_start().starts_with('{') => a.get().to_owned(),
        (None, Some(_)) => {
            return Err(ApiError::new(
                ErrorKind::Usage,
                "the tool's arguments must be a JSON object, like '{\"message\":\"hi\"}'",
            ));
        }
        (None, None) => "{}".to_owned(),
    };
    let name = serde_json::to_string(&tool).unwrap_or_default();
    // Every call asks for progress; the token is the caller's own in what it sees.
    let params = format!(r#"{{"name":{name},"arguments":{arguments},"_meta":{{"progressToken":"mcpx-call"}}}}"#);
    let check = |target: &Target| check_tool_listed(d, target, &tool);
    let calling = serde_json::json!({ "tool": tool });
    let hear = Hearing { notify, status, answers, takes: req.answers.clone(), calling, origin: Some(origin) };
    through_pool(d, (&req.caller, req.timeout_ms), entry, "tools/call", &params, hear, check).await
}

/// The arguments of a call the CLI typed (`shown` set, or `key=value` pairs, an
/// array of [`Pair`]s, as `arguments`), built and checked against the tool's
/// `inputSchema` ([`arguments::build`]) as JSON text; `None` for a call to pass as it
/// came (code mode's, an MCP client's). For pairs, whose types the schema gives, a
/// server never listed is listed first; a listing that fails fails the call. A JSON
/// object is checked when the tool's entry is known, and goes as it is otherwise.
///
/// Errors: the tool cannot be found or listed (`unknown_server`, `unknown_tool`,
/// `server`, or the kind of the listing's failure: `auth`, `timeout`...), or a check
/// failed (`usage`, with the tool's usage).
async fn typed_arguments(d: &Daemon, req: &CallRequest) -> Result<Option<String>, ApiError> {
    let raw = req.arguments.as_deref();
    let pairs = match raw {
        Some(a) if a.get().trim_start().starts_with('[') => Some(
            serde_json::from_str::<Vec<Pair>>(a.get())
                .map_err(|e| ApiError::new(ErrorKind::Usage, format!("the key=value arguments are malformed: {e}")))?,
        ),
        _ => None,
    };
    let shown = match (&req.shown, &pairs, &req.target) {
        (Some(shown), _, _) => shown.clone(),
        (None, Some(_), Some(target)) => format!("call {target}"),
        (None, Some(_), None) => {
            format!("call {}.{}", req.server.as_deref().unwrap_or("?"), req.tool.as_deref().unwrap_or("?"))
        }
        (None, None, _) => return Ok(None),
    };
    let named = ListRequest {
        caller: req.caller.clone(),
        target: req.target.clone(),
        server: req.server.clone(),
        tool: req.tool.clone(),
        ..ListRequest::default()
    };
    let tool = tool_entry(d, &named, pairs.is_some()).await?;
    let given = match (pairs, raw) {
        (Some(pairs), _) => Given::Pairs(pairs),
        (None, Some(raw)) => Given::Json(raw.to_owned()),
        (None, None) => Given::None,
    };
    let built = arguments::build(given, tool.as_ref(), &shown)?;
    Ok(Some(built.map_or_else(|| "{}".to_owned(), |raw| raw.get().to_owned())))
}

/// The tool's `tools/list` entry that `named` names, from the schema cache. With
/// `list`, a server never listed (or whose listing failed) is listed again first, as
/// `POST /v1/refresh` lists it, and every error is returned; without it, `None` on
/// any error: the call itself then reports it.
async fn tool_entry(d: &Daemon, named: &ListRequest, list: bool) -> Result<Option<serde_json::Value>, ApiError> {
    let parse = |raw: Box<RawValue>| serde_json::from_str::<serde_json::Value>(raw.get()).ok();
    match tools(d, named).await {
        Ok(raw) => Ok(parse(raw)),
        Err(_) if !list => Ok(None),
        Err(e) if e.kind == ErrorKind::Server => {
            let whose = RefreshRequest {
                caller: named.caller.clone(),
                server: named.server.clone(),
                target: named.target.clone(),
            };
            let results = refresh(d, &whose).await?;
            let failed = results.as_object().and_then(|r| r.values().find(|v| v["error"].is_string()));
            if let Some(failed) = failed {
                // The kind of the failure (`auth` for a missing login), else `server`.
                let kind = serde_json::from_value(failed["kind"].clone()).unwrap_or(ErrorKind::Server);
                return Err(ApiError::new(kind, failed["error"].as_str().unwrap_or_default()));
            }
            Ok(parse(tools(d, named).await?))
        }
        Err(e) => Err(e),
    }
}

/// `POST /v1/call/answer`: a shell caller's answer to a server request relayed on its
/// call's stream ([`crate::shell_calls::ShellCalls::answer`]). Answers `{}`.
pub fn answer(d: &Daemon, answer: &Answer) -> Result<serde_json::Value, ApiError> {
    d.shell_calls.answer(&answer.call, answer.response.get())?;
    Ok(serde_json::json!({}))
}

/// `POST /v1/restart`: restarts the server's instances (those of `key` only, when
/// given): through their supervisor when supervised (same supervisor, new process),
/// else by stopping and starting. Clears the server's crash count, and replaces an
/// `incompatible` supervisor of the server. Answers
/// `{"server", "restarted", "replaced", "pid"}`.
///
/// Errors: no server named (`usage`); an unknown server (`unknown_server`); a
/// disabled one (`config`, [`policy::check_server`]); the restart or the new start
/// failed (`server`, `protocol`, `timeout`).
pub async fn restart(d: &Daemon, req: &RestartRequest) -> Result<serde_json::Value, ApiError> {
    let config = d.resolve_for(&req.caller)?;
    let name = req
        .server
        .as_deref()
        .ok_or_else(|| ApiError::new(ErrorKind::Usage, "name a server: `mcpx restart <server>`"))?;
    let entry = d.server(&config, name)?;
    policy::check_server(entry)?;
    let target = d.targets.target(entry).map_err(|e| {
        let mut e = ApiError::from(e);
        // Nothing was stopped: a running instance keeps the settings it started with.
        let key = entry.cache_key();
        if d.pool.instances().iter().any(|i| i.identity.cache_key == key && i.is_alive()) {
            e.message.push_str("; its running instances were kept, with what they started with");
        }
        e
    })?;
    let replaced = replace_incompatible(d, &target.cache_key).await;
    d.pool.clear_crashes(&target.cache_key);
    let timeout = target.entry.options.start_timeout;
    let only = req.key.as_deref().map(PoolKey::parse);
    let mut restarted = 0;
    let mut pid = None;
    for (_, inst) in
        d.pool.instances_of(&target.fingerprint).into_iter().filter(|(k, _)| only.as_ref().is_none_or(|o| o == k))
    {
        if inst.supervised() {
            inst.restart(timeout).await.map_err(|e| server_error(name, e))?;
            if let Err(e) = d.schema.refresh(&inst.identity.cache_key, &inst, timeout).await {
                tracing::warn!(server = name, error = %e, "listing the server's schema failed");
            }
            pid = inst.info.pid();
            restarted += 1;
        }
    }
    if restarted == 0 {
        restarted = d.pool.stop_server(&target.fingerprint, only.as_ref()).await;
        let key = only.unwrap_or_else(|| d.targets.pool_key(entry, &req.caller));
        let lease = d.lease_as(&target, &key, timeout).await.map_err(|e| server_error(name, e))?;
        pid = lease.instance.info.pid();
        lease.finish().await;
    }
    Ok(serde_json::json!({ "server": name, "restarted": restarted, "replaced": replaced, "pid": pid }))
}

/// `POST /v1/refresh`: re-reads the schema of one server (`server`, or the server of
/// `target`), or of every enabled one, starting those that are not running. Answers `{<server>: {"ok": true}}` or
/// `{"ok": false, "error": <message>}` per server.
///
/// Errors: the caller's configuration cannot be read (`config`); an unknown server
/// (`unknown_server`); a disabled one named (`config`, [`policy::check_server`]).
pub async fn refresh(d: &Daemon, req: &RefreshRequest) -> Result<serde_json::Value, ApiError> {
    let config = d.resolve_for(&req.caller)?;
    // The server of a `target` (`<server>.<tool>`, as `POST /v1/call` takes it) names it too.
    let named = match (&req.server, &req.target) {
        (None, Some(target)) => {
            Some(split_target(&config, Naming { server: None, name: None, target: Some(target) }, &TOOL)?.0)
        }
        (server, _) => server.clone(),
    };
    let entries: Vec<&ServerEntry> = match named.as_deref() {
        Some(name) => {
            let entry = d.server(&config, name)?;
            policy::check_server(entry)?;
            vec![entry]
        }
        None => policy::offered(&config).collect(),
    };
    let mut results = serde_json::Map::new();
    for entry in entries {
        let outcome = async {
            let target = d.targets.target(entry)?;
            let timeout = entry.options.start_timeout;
            match d.pool.relist(&target.fingerprint, timeout).await {
                Ok(true) => Ok(()),
                Ok(false) => {
                    let lease = d.lease(entry, &req.caller, timeout, &|_| {}).await.map_err(|e| match e {
                        Failure::Refused(e) => e.into(),
                        Failure::Checked(e) => e,
                        Failure::Server(e) => server_error(&entry.name, e),
                    })?;
                    // Listed by the start: a `call`-scoped instance ends here.
                    lease.finish().await;
                    // The start lists the server; a failed listing is kept in the cache.
                    match d.schema.get(&target.cache_key).and_then(|c| c.error.clone()) {
                        Some(e) => Err(ApiError::new(ErrorKind::Server, format!("server `{}`: {e}", entry.name))),
                        None => Ok(()),
                    }
                }
                Err(e) => Err(ApiError::new(ErrorKind::Server, e)),
            }
        }
        .await;
        let value = match outcome {
            Ok(()) => serde_json::json!({ "ok": true }),
            Err(e) => serde_json::json!({ "ok": false, "error": e.message, "kind": e.kind }),
        };
        results.insert(entry.name.clone(), value);
    }
    Ok(serde_json::Value::Object(results))
}

/// `POST /v1/stop`: stops the daemon's own children (every server, with `all`), then
/// asks the daemon to exit. Answers `{"stopping": true}`.
pub async fn stop(d: &Daemon, req: &StopRequest) -> serde_json::Value {
    tracing::info!(all = req.all, "stop requested");
    d.pool.stop_all(req.all).await;
    d.request_exit(Exit::Stop);
    serde_json::json!({ "stopping": true })
}

/// `POST /v1/upgrade`: checks the binary, then asks the daemon to stop accepting,
/// drain, and re-execute it in place (same pid, listening socket kept open so new
/// clients queue instead of failing), adopting its supervisors again. Answers
/// `{"upgrading": true, "from": <build>, "binary": <path>}`.
///
/// The binary (`req.binary`, else the daemon's own executable) is opened once and
/// checked ([`Executable::open_trusted`]: owned by the user or root, not writable by
/// others, in directories likewise). Its `--version` is asked through that descriptor,
/// without blocking the runtime's workers, and the very same file is what the daemon
/// re-executes; a path that names another file by then is refused.
///
/// Errors (`usage`, the daemon keeps running): the binary is missing, not an
/// executable file, one that others could change or swap, not an mcpx binary (its
/// `--version` does not start with `mcpx `), or replaced after it was probed.
pub async fn upgrade(d: &Daemon, req: &UpgradeRequest) -> Result<serde_json::Value, ApiError> {
    let binary = match &req.binary {
        Some(b) => b.clone(),
        None => std::env::current_exe()
            .map_err(|e| ApiError::new(ErrorKind::Daemon, format!("cannot find the daemon's own binary: {e}")))?,
    };
    let refused =
        |e: std::io::Error| ApiError::new(ErrorKind::Usage, format!("cannot upgrade, the daemon keeps running: {e}"));
    let exe = Executable::open_trusted(&binary).map_err(refused)?;
    // Only an mcpx binary may replace the daemon: ask this very file.
    let probe = crate::process::SpawnSpec {
        program: exe.program().map_err(refused)?,
        args: vec!["--version".into()],
        env: std::env::vars_os().collect(),
        cwd: None,
        piped: true,
        detach: crate::process::Detach::Inherit,
        confine: None,
    };
    let version = match crate::process::spawn(&probe) {
        Ok(child) => child.wait_with_output().await,
        Err(e) => Err(e),
    }
    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    match version {
        Ok(v) if v.starts_with("mcpx ") => {}
        Ok(v) => {
            return Err(ApiError::new(
                ErrorKind::Usage,
                format!(
                    "{} is not an mcpx binary (`--version` said {:?}); the daemon keeps running",
                    binary.display(),
                    v.lines().next().unwrap_or_default()
                ),
            ));
        }
        Err(e) => return Err(ApiError::new(ErrorKind::Usage, format!("cannot run {}: {e}", binary.display()))),
    }
    #[cfg(feature = "test-hooks")]
    pause_after_probe().await;
    // The daemon re-executes the file it holds open whatever the path names now, but
    // a path swapped after the probe means someone is at work: refuse.
    exe.check_path().map_err(refused)?;
    tracing::info!(binary = %binary.display(), "upgrade requested: draining");
    d.request_exit(Exit::Upgrade(Arc::new(exe)));
    Ok(serde_json::json!({ "upgrading": true, "from": mcpx_platform::build::build_id(), "binary": binary }))
}

/// Test-only hook: with `MCPX_TEST_UPGRADE_PAUSE=<file>`, an upgrade that has probed
/// its binary touches `<file>.probed` and waits until `<file>` exists (30 s at most),
/// so a test can swap the binary's path between the probe and the exec.
#[cfg(feature = "test-hooks")]
async fn pause_after_probe() {
    let Some(go) = std::env::var_os("MCPX_TEST_UPGRADE_PAUSE").map(std::path::PathBuf::from) else { return };
    let mut probed = go.clone().into_os_string();
    probed.push(".probed");
    let _ = std::fs::write(&probed, b"probed");
    use std::time::Duration;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !go.exists() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Fails when the schema cache lists the server's tools and `tool` is not among them,
/// or pinning holds it (a server first listed by this call's start: `strict` holds
/// what its scan flags).
fn check_tool_listed(d: &Daemon, target: &Target, tool: &str) -> Result<(), ApiError> {
    let Some(cached) = d.schema.get_for(&target.cache_key, target.context.as_deref()) else {
        return Ok(());
    };
    if cached.tools.is_none() || cached.error.is_some() {
        return Ok(());
    }
    let holds = d.holds(&target.entry, Some(&cached));
    policy::check_tool(&target.entry, &holds, tool)?;
    if cached.tool_summaries().iter().any(|t| t.name == tool) {
        return Ok(());
    }
    Err(unknown_tool(&target.entry, &holds, tool, Some(&cached)))
}

/// The `unknown_tool` error for `tool` of `entry`, with the closest names ("did you
/// mean", [`crate::suggest`]) and the tools it offers.
fn unknown_tool(entry: &ServerEntry, holds: &Holds, tool: &str, cached: Option<&CacheEntry>) -> ApiError {
    let server = &entry.name;
    let names: Vec<String> = cached
        .map(|c| {
            let names = c.tool_summaries().into_iter().map(|t| t.name);
            names.filter(|t| policy::tool_offered(entry, holds, t)).collect()
        })
        .unwrap_or_default();
    let list = if names.is_empty() { String::from("(none listed)") } else { names.join(", ") };
    let dym = crate::suggest::did_you_mean(tool, names.iter().map(String::as_str));
    ApiError::new(
        ErrorKind::UnknownTool,
        format!("server `{server}` has no tool `{tool}`;{dym} its tools: {list} (see `mcpx tools {server}`)"),
    )
}

/// The control API's error for a policy refusal: `config` for a server not trusted
/// or disabled, `unknown_tool` for a tool left out (exit 2 either way).
impl From<policy::Refusal> for ApiError {
    fn from(refusal: policy::Refusal) -> ApiError {
        let kind = match refusal.why {
            policy::Why::Untrusted | policy::Why::Disabled => ErrorKind::Config,
            policy::Why::ToolLeftOut => ErrorKind::UnknownTool,
            policy::Why::Held => ErrorKind::Held,
        };
        ApiError::new(kind, refusal.message)
    }
}

/// The control API's error for an entry that cannot be made a target: the policy's,
/// `config`, or `usage`.
impl From<crate::target::Refusal> for ApiError {
    fn from(refusal: crate::target::Refusal) -> ApiError {
        match refusal {
            crate::target::Refusal::Policy(r) => r.into(),
            crate::target::Refusal::Config(m) => ApiError::new(ErrorKind::Config, m),
            crate::target::Refusal::Usage(m) => ApiError::new(ErrorKind::Usage, m),
        }
    }
}

pub mod activity;
pub mod metrics;
mod offers;
pub mod pins;
mod reach;
mod split;
mod status;
#[cfg(test)]
mod tests;

pub use offers::{prompt, prompts, read, resources};
pub use status::status;
