//! How a control-API request reaches a server for its caller: the schema cache entry,
//! with a server never listed started and listed first when the request asks
//! ([`listed`]), and one request sent through the caller's pool ([`through_pool`]),
//! the one path of `call`, `read` and `prompt`.

use std::sync::Arc;
use std::time::Duration;

use mcpx_proto::{Message, response_result};
use serde_json::value::RawValue;

use crate::activity::Origin;
use crate::api::{ApiError, Caller, ErrorKind};
use crate::config::{ServerEntry, TransportSpec};
use crate::daemon::Daemon;
use crate::instance::{CallContext, CallError, ClientReplies, Instance};
use crate::lease::{Ask, Failure};
use crate::notices::NoticeSender;
use crate::pool::{Target, Wait};
use crate::stream::StatusSender;

/// Who hears about a request on its way, besides its answer.
#[derive(Default)]
pub(super) struct Hearing {
    /// The caller's queue: the request's notifications and server requests.
    pub notify: Option<NoticeSender>,
    /// Where the request says what it waits on, when the caller asks (`status`).
    pub status: Option<StatusSender>,
    /// Where the answers to the server requests the caller takes arrive.
    pub answers: Option<Arc<ClientReplies>>,
    /// The methods of the server requests the caller takes (`answers`).
    pub takes: Vec<String>,
    /// What the `calling` status line adds (`{"tool": "echo"}`).
    pub calling: serde_json::Value,
    /// Who sent it and how, when not the shell itself ([`shell_origin`]).
    pub origin: Option<Origin>,
}

/// The origin of a control-API request: `via` (code mode's `exec`, `run`, `serve
/// --code`) else `shell`, and `client` (the MCP client a `serve --code` runs for) else
/// `shell` with the caller's pid or session and its working directory. What a caller
/// says is cut to 200 characters.
pub(super) fn shell_origin(caller: &Caller, via: Option<&str>, client: Option<&str>) -> Origin {
    let said = |text: &str| text.chars().take(200).collect::<String>();
    let shell = || {
        let cwd = caller.cwd.as_ref().map(|c| format!(" {}", c.display())).unwrap_or_default();
        format!("shell {}{cwd}", caller_label(caller)).replace("  ", " ").trim_end().to_owned()
    };
    Origin {
        path: via.map_or_else(|| "shell".to_owned(), said),
        client: client.map_or_else(shell, said),
        protocol: None,
    }
}
use crate::schema::CacheEntry;

/// Sends the request `method` with `params` (JSON text) to an instance of `entry` in
/// the caller's pool, started when there is none, and returns the server's `result`
/// exactly as sent: the one path of `POST /v1/call`, `/v1/read` and `/v1/prompt`,
/// through [`Daemon::ask`] as the MCP endpoint's requests go. `check` runs before the
/// instance is leased and again after, since a start lists the server. The deadline
/// is `timeout_ms`, else the server's `callTimeout`; a `call`-scoped instance is
/// stopped after.
///
/// Errors: `check`'s; the server failed (`server`, `protocol`, `timeout`) or answered
/// a JSON-RPC error (`rpc`, with its code).
pub(super) async fn through_pool(
    d: &Daemon,
    (caller, timeout_ms): (&Caller, Option<u64>),
    entry: &ServerEntry,
    method: &str,
    params: &str,
    hear: Hearing,
    check: impl Fn(&Target) -> Result<(), ApiError> + Send + Sync,
) -> Result<Box<RawValue>, ApiError> {
    let server = &entry.name;
    let timeout = match timeout_ms {
        Some(0) => None,
        Some(ms) => Some(Duration::from_millis(ms)),
        None => entry.options.call_timeout,
    };
    let status = |fields: serde_json::Value| {
        if let Some(status) = &hear.status {
            let mut said = serde_json::json!({ "server": server });
            if let (Some(s), serde_json::Value::Object(f)) = (said.as_object_mut(), fields) {
                s.extend(f);
            }
            let _ = status.send(said);
        }
    };
    let report = |wait: Wait| {
        status(match wait {
            Wait::Starting => serde_json::json!({ "phase": "starting", "command": program(entry) }),
            Wait::Full(max) => serde_json::json!({ "phase": "waiting",
                "reason": format!("all {max} instances are busy (its `max`)") }),
            Wait::Exclusive => serde_json::json!({ "phase": "waiting",
                "reason": "its instance is busy with another call (it is `exclusive`)" }),
            Wait::Calling => {
                let mut calling = serde_json::json!({ "phase": "calling" });
                if let (Some(c), serde_json::Value::Object(f)) = (calling.as_object_mut(), hear.calling.clone()) {
                    c.extend(f);
                }
                calling
            }
        });
    };
    let origin = hear.origin.clone().unwrap_or_else(|| shell_origin(caller, None, None));
    let context = Arc::new(CallContext {
        label: caller_label(caller),
        notify: hear.notify.clone(),
        roots: caller.cwd.clone().map(|cwd| vec![cwd]),
        client: hear.answers.map(|replies| (hear.takes, replies)),
        shell: true,
        ..CallContext::default()
    });
    let check = |target: &Target, _: Option<&Instance>| check(target);
    let ask = Ask {
        entry,
        caller,
        request: Message::request("0", method, Some(params)),
        timeout,
        context,
        check: &check,
        report: &report,
        forward: false,
        origin,
    };
    let response = d.ask(ask).await.map_err(|e| match e {
        Failure::Refused(e) => e.into(),
        Failure::Checked(e) => e,
        Failure::Server(e) => server_error(server, e),
    })?;
    response_result(&response).map_err(|e| ApiError {
        kind: ErrorKind::Rpc,
        message: format!("server `{server}` answered {method} with an error: {}", e.message),
        code: Some(e.code),
    })
}

/// The schema cache entry of `entry`, with its tools listed. A server never listed (or
/// whose listing failed before it ever succeeded) is started in the caller's pool and
/// listed first when `start` asks (design: `tools <server>` of a server never
/// listed starts it, since the user named it); a `call`-scoped instance is stopped after.
///
/// Errors: never listed and no `start` (`server`); the start or the listing failed
/// (`server`, `protocol`, `timeout`).
pub(super) async fn listed(
    d: &Daemon,
    caller: &Caller,
    start: bool,
    entry: &ServerEntry,
) -> Result<CacheEntry, ApiError> {
    let name = &entry.name;
    let key = entry.cache_key();
    if let Some(cached) = d.schema_for(entry, caller).await.filter(|c| c.tools.is_some()) {
        return Ok(Arc::unwrap_or_clone(cached));
    }
    if !start {
        return Err(ApiError::new(
            ErrorKind::Server,
            format!("server `{name}` has not been listed yet; `mcpx tools {name}` starts it and lists it"),
        ));
    }
    let lease = d.lease(entry, caller, entry.options.start_timeout, &|_| {}).await.map_err(|e| match e {
        Failure::Refused(e) => e.into(),
        Failure::Checked(e) => e,
        Failure::Server(e) => server_error(name, e),
    })?;
    let target = lease.target.clone();
    // Started to be listed: a `call`-scoped instance ends with the listing.
    lease.finish().await;
    match d.schema.get_for(&key, target.context.as_deref()) {
        Some(cached) if cached.tools.is_some() => Ok(Arc::unwrap_or_clone(cached)),
        cached => {
            let why = cached.and_then(|c| c.error.clone()).unwrap_or_else(|| "it sent no listing".to_owned());
            Err(ApiError::new(
                ErrorKind::Server,
                format!("server `{name}` started but could not be listed: {why} (see `mcpx logs {name}`)"),
            ))
        }
    }
}

/// What a status line names as what starts: a stdio server's program without its
/// directory (`npx`), or a remote server's host (its URL as written may hold a secret).
fn program(entry: &ServerEntry) -> String {
    match &entry.transport {
        TransportSpec::Stdio { command, .. } => std::path::Path::new(command)
            .file_name()
            .map_or_else(|| command.clone(), |n| n.to_string_lossy().into_owned()),
        TransportSpec::Remote { url, .. } => {
            url::Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_else(|| "remote".into())
        }
    }
}

/// How `status` names a caller: its session, else its parent process.
fn caller_label(caller: &Caller) -> String {
    match (&caller.session, caller.ppid) {
        (Some(s), _) => format!("session:{s}"),
        (None, Some(p)) => format!("pid:{p}"),
        (None, None) => String::new(),
    }
}

/// The API error for a failed request to `server`, its kind following the failure.
pub(super) fn server_error(server: &str, e: CallError) -> ApiError {
    let failed = match &e {
        CallError::Confined { error, .. } => error,
        e => e,
    };
    let kind = match *failed {
        CallError::Timeout(_) | CallError::Busy(_) | CallError::StartTimeout(_) => ErrorKind::Timeout,
        CallError::Transport(ref e) if e.timed_out() => ErrorKind::Timeout,
        CallError::Transport(ref e) if e.needs_login() => ErrorKind::Auth,
        CallError::Protocol(_) | CallError::TooLarge { .. } | CallError::RequestTooLarge { .. } => ErrorKind::Protocol,
        CallError::Exited { .. }
        | CallError::Launch(_)
        | CallError::Lost(_)
        | CallError::Cancelled
        | CallError::Confined { .. }
        | CallError::Transport(_) => ErrorKind::Server,
    };
    let hint = match failed {
        CallError::Exited { .. } | CallError::Launch(_) => {
            format!(" (see `mcpx status` and `mcpx logs {server}`)")
        }
        _ => String::new(),
    };
    ApiError::new(kind, format!("{}{hint}", e.of_server(server)))
}
