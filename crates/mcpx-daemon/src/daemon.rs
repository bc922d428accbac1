//! The daemon: its shared state, one handler per control API route, and `run`.
//!
//! Handlers are plain async functions from the state and a request to a response,
//! so they are tested without a socket; `run` takes the listener and the shutdown
//! signal as parameters, so tests inject both.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use mcpx_proto::{Message, response_result};
use serde_json::value::RawValue;
use tokio::net::UnixListener;
use tokio::sync::{Notify, mpsc};

use crate::api::{ApiError, DaemonStatus, ErrorBody, ErrorKind, InstanceStatus, Request, SearchHit, ServerRow, Status};
use crate::config::{
    ConfigCache, ConfigError, ExpandedTransport, ResolveRequest, ResolvedConfig, ServerEntry, exe_identity,
    resolve_command,
};
use crate::instance::{CallContext, CallError, ERROR_TAIL_BYTES, Instance, InstanceEvent, InstanceSpec, ServerSession};
use crate::paths::Dirs;
use crate::pool::{Pool, Target};
use crate::schema::SchemaCache;
use crate::sync::lock;
use crate::transport::{self, Adoption, Launch, Launchers, RemoteEndpoint, StdioSpec};
use mcpx_proto::attach::{Identity, Record, Version};

/// Everything a running daemon holds.
pub struct Daemon {
    /// Its directories.
    pub dirs: Dirs,
    /// The environment captured at start: `${VAR}` expansion and children's base environment.
    pub env: HashMap<String, String>,
    /// Parsed configuration files.
    pub config: ConfigCache,
    /// Instances.
    pub pool: Pool,
    /// The schema cache.
    pub schema: Arc<SchemaCache>,
    started: Instant,
    /// When it started, in milliseconds since the Unix epoch (tells a re-executed
    /// daemon from the one before, which has the same pid).
    pub started_at: u64,
    /// Notified when a `stop` request asks the daemon to exit.
    pub shutdown: Notify,
    /// Recent command lookups: (command, PATH, cwd) → (when, program, identity).
    #[allow(clippy::type_complexity)] // Reason: a private cache; a named type would only move the tuple.
    resolved: std::sync::Mutex<
        HashMap<(String, Option<String>, Option<PathBuf>), (Instant, PathBuf, Option<crate::config::ExeIdentity>)>,
    >,
    /// (server, fix) pairs already logged for degraded scopes: each is said once.
    degraded: std::sync::Mutex<std::collections::HashSet<(String, &'static str)>>,
    /// Found at start: a service unit whose KillMode would kill the supervisors.
    warnings: Vec<String>,
    /// MCP client sessions of the `/mcp` endpoint.
    pub mcp: crate::mcp::Sessions,
    /// The URL of `/mcp` on TCP, when that listener is enabled.
    pub http_url: std::sync::Mutex<Option<String>>,
    /// Set by `POST /v1/upgrade`: the binary to re-execute once drained.
    upgrade: std::sync::Mutex<Option<PathBuf>>,
    /// The daemon itself, for work it starts in the background.
    me: std::sync::Weak<Daemon>,
    /// Servers (by cache key) an MCP listing is starting in the background.
    retrying: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Supervisors found at start whose attach protocol this daemon cannot speak:
    /// left running, shown as `incompatible`, replaced on `mcpx restart`.
    incompatible: std::sync::Mutex<Vec<(Record, Version)>>,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon").field("dirs", &self.dirs).finish_non_exhaustive()
    }
}

impl Daemon {
    /// A daemon over `dirs`, with the captured environment `env`, starting servers
    /// through `launchers`. Spawns the task that handles instance events, so it must
    /// be called inside a tokio runtime.
    pub fn new(dirs: Dirs, env: HashMap<String, String>, launchers: Launchers) -> Arc<Daemon> {
        let schema = Arc::new(SchemaCache::new(dirs.cache.clone()));
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let config = ConfigCache::new(crate::config::ConfigEnv::from_vars(&env));
        if let Ok(bytes) = std::fs::read(dirs.known_configs()) {
            if let Ok(files) = serde_json::from_slice::<Vec<PathBuf>>(&bytes) {
                config.add_known_files(files);
            }
        }
        let env_for_checks = env.clone();
        let daemon = Arc::new_cyclic(|me| Daemon {
            me: me.clone(),
            retrying: std::sync::Mutex::new(std::collections::HashSet::new()),
            pool: Pool::new(launchers, schema.clone(), events_tx),
            schema,
            config,
            env,
            dirs,
            started: Instant::now(),
            started_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            shutdown: Notify::new(),
            incompatible: std::sync::Mutex::new(Vec::new()),
            upgrade: std::sync::Mutex::new(None),
            mcp: crate::mcp::Sessions::default(),
            http_url: std::sync::Mutex::new(None),
            degraded: std::sync::Mutex::new(std::collections::HashSet::new()),
            resolved: std::sync::Mutex::new(HashMap::new()),
            warnings: crate::service_check::supervisor_warnings(&env_for_checks),
        });
        for w in &daemon.warnings {
            tracing::warn!("{w}");
        }
        tokio::spawn(handle_events(Arc::downgrade(&daemon), events_rx));
        tokio::spawn(reap_idle(Arc::downgrade(&daemon)));
        daemon
    }

    /// The configuration the caller sees; records newly seen files in the state directory.
    pub(crate) fn resolve(&self, req: &Request) -> Result<ResolvedConfig, ApiError> {
        let before = self.config.known_files().len();
        let resolved = self
            .config
            .resolve(&ResolveRequest { cwd: req.caller.cwd.clone(), explicit: req.caller.config.clone() })
            .map_err(config_error)?;
        let known = self.config.known_files();
        if known.len() != before {
            if let Ok(bytes) = serde_json::to_vec_pretty(&known) {
                if let Err(e) = mcpx_platform::fs::write_atomic(&self.dirs.known_configs(), &bytes, 0o600) {
                    tracing::warn!(error = %e, "cannot record the known configuration files");
                }
            }
        }
        Ok(resolved)
    }

    /// The entry named `name`, or an `unknown_server` error listing the names that exist.
    pub(crate) fn server<'a>(&self, config: &'a ResolvedConfig, name: &str) -> Result<&'a ServerEntry, ApiError> {
        config.get(name).ok_or_else(|| unknown_server(config, name))
    }

    /// Resolves how to start `entry`: `${VAR}`s expanded, the command found on the
    /// daemon's PATH, the environment assembled.
    ///
    /// Errors: an unset variable is a configuration error (exit 2); a command that is
    /// not found is kept in the target, so the start fails as a server error (exit 4)
    /// and the server shows `error`.
    pub fn target(&self, entry: &ServerEntry) -> Result<Target, ApiError> {
        let cache_key = entry.cache_key();
        let expanded = entry.expand(&self.env).map_err(config_error)?;
        let options = &entry.options;
        let identity = |fingerprint: String| Identity {
            server: entry.name.clone(),
            fingerprint,
            cache_key: cache_key.clone(),
            key: "global".into(),
            sharing: options.sharing.as_str().into(),
        };
        let max_message_bytes = usize::try_from(options.max_message_bytes).unwrap_or(usize::MAX);
        let stdio = match expanded {
            ExpandedTransport::Stdio(stdio) => stdio,
            ExpandedTransport::Remote(remote) => {
                let crate::config::TransportSpec::Remote { url: written_url, .. } = &entry.transport else {
                    unreachable!("a remote entry expands to a remote transport")
                };
                let spec = RemoteEndpoint {
                    identity: identity(cache_key.clone()),
                    url: remote.url.clone(),
                    written_url: written_url.clone(),
                    headers: remote.headers.clone(),
                    kind: remote.kind,
                    max_message_bytes,
                };
                // A malformed URL or header is the configuration's mistake (exit 2).
                spec.check().map_err(|e| {
                    ApiError::new(
                        ErrorKind::Config,
                        format!("{}: server `{}`: {e}", entry.source.display(), entry.name),
                    )
                })?;
                let launch = Ok(Launch::Remote(spec));
                return Ok(Target { entry: entry.clone(), fingerprint: cache_key.clone(), cache_key, launch });
            }
        };
        let cwd = stdio.cwd.clone().or_else(|| self.env.get("HOME").map(PathBuf::from));
        // The child's environment: the daemon's, plus the entry's `env`. The command
        // resolves through that environment's PATH (design: Configuration).
        let mut env: BTreeMap<OsString, OsString> =
            self.env.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect();
        env.extend(stdio.env.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))));
        let path_var = env.get(std::ffi::OsStr::new("PATH")).and_then(|p| p.to_str()).map(str::to_owned);
        // Messages name the command as written: an expanded value may be a secret.
        let written = match &entry.transport {
            crate::config::TransportSpec::Stdio { command, .. } => command.clone(),
            crate::config::TransportSpec::Remote { url, .. } => url.clone(),
        };
        let (fingerprint, launch) = match self.resolve_program(&stdio.command, path_var.as_deref(), cwd.as_deref()) {
            Ok((program, exe)) => {
                let spec = StdioSpec {
                    identity: identity(entry.fingerprint(exe.as_ref())),
                    supervised: options.supervised,
                    buffer_bytes: options.buffer_bytes,
                    orphan_timeout: options.orphan_timeout,
                    start_timeout: options.start_timeout,
                    command: written,
                    program,
                    args: stdio.args.iter().map(OsString::from).collect(),
                    env,
                    cwd,
                    max_message_bytes,
                };
                (entry.fingerprint(exe.as_ref()), Ok(Launch::Stdio(spec)))
            }
            Err(e) if written == stdio.command => (cache_key.clone(), Err(e.to_string())),
            Err(_) => (
                cache_key.clone(),
                Err(format!("command `{written}` (after ${{VAR}} expansion) is not an executable file or not on PATH")),
            ),
        };
        Ok(Target { entry: entry.clone(), cache_key, fingerprint, launch })
    }

    /// Finds the program for `command` (like execvp) and its identity, reusing a
    /// lookup younger than [`RESOLVE_TTL`]: every call resolves its server, and a PATH
    /// walk costs a stat per directory.
    fn resolve_program(
        &self,
        command: &str,
        path_var: Option<&str>,
        cwd: Option<&std::path::Path>,
    ) -> Result<(PathBuf, Option<crate::config::ExeIdentity>), crate::config::CommandNotFound> {
        let key = (command.to_owned(), path_var.map(str::to_owned), cwd.map(std::path::Path::to_path_buf));
        if let Some((at, program, identity)) = lock(&self.resolved).get(&key) {
            if at.elapsed() < RESOLVE_TTL {
                return Ok((program.clone(), identity.clone()));
            }
        }
        let program = resolve_command(command, path_var, cwd)?;
        let identity = exe_identity(&program).ok();
        lock(&self.resolved).insert(key, (Instant::now(), program.clone(), identity.clone()));
        Ok((program, identity))
    }

    /// Stops the instances whose server no configuration file holds any more (removed,
    /// or changed so its fingerprint differs): a remote session is ended with `DELETE`.
    async fn retire_unconfigured(&self) {
        let Some(configured) = self.config.configured() else { return };
        for inst in self.pool.instances() {
            if inst.is_alive() && !configured.contains(&inst.identity.cache_key) {
                tracing::info!(server = %inst.identity.server, key = %inst.identity.key, "stopping an instance: its server left the configuration");
                self.pool.release(&inst).await;
            }
        }
    }

    /// Starts `target` under `key` in the background, once at a time per server, and
    /// tells every MCP session with a stream that the lists changed when it comes up.
    /// The pool's backoff applies: during one, the attempt fails at once.
    pub(crate) fn start_in_background(&self, target: Target, key: String) {
        let Some(daemon) = self.me.upgrade() else { return };
        if !lock(&self.retrying).insert(target.cache_key.clone()) {
            return;
        }
        tokio::spawn(async move {
            let timeout = target.entry.options.start_timeout;
            let started = daemon.pool.acquire(&target, &key, timeout).await;
            lock(&daemon.retrying).remove(&target.cache_key);
            match started {
                Ok(_) if daemon.schema.get(&target.cache_key).is_some_and(|c| c.error.is_none()) => {
                    tracing::info!(server = %target.entry.name, "a server left out of MCP listings is up; telling the sessions");
                    for method in ["tools", "prompts", "resources"] {
                        daemon
                            .mcp
                            .broadcast(&Message::notification(&format!("notifications/{method}/list_changed"), None));
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(server = %target.entry.name, error = %e, "a background start failed"),
            }
        });
    }

    /// The pool key of `entry` for `caller`; a scope that cannot be resolved runs the
    /// call under a fresh `call` key and says once in the log what would fix it.
    pub fn pool_key(&self, entry: &ServerEntry, caller: &crate::api::Caller) -> String {
        match crate::scope::resolve(entry.options.scope, caller) {
            crate::scope::Resolved::Key(key) => key,
            crate::scope::Resolved::Degraded { key, fix } => {
                if lock(&self.degraded).insert((entry.name.clone(), fix)) {
                    tracing::warn!(
                        server = %entry.name,
                        scope = entry.options.scope.as_str(),
                        "the scope cannot be resolved for this caller: each call gets its own instance; to fix it, {fix}"
                    );
                }
                key
            }
        }
    }

    /// `POST /v1/ls`: every configured server with its state, from the schema cache.
    pub fn ls(&self, req: &Request) -> Result<Vec<ServerRow>, ApiError> {
        let config = self.resolve(req)?;
        let live: Vec<_> = self.pool.instances().into_iter().filter(|i| i.is_alive()).collect();
        let mut rows = Vec::new();
        for entry in config.servers.values() {
            let key = entry.cache_key();
            let cached = self.schema.get(&key);
            let n_live = live.iter().filter(|i| i.identity.cache_key == key).count();
            let error = cached.as_ref().and_then(|c| c.error.clone());
            let state = if entry.options.disabled {
                "disabled"
            } else if self.pool.in_crash_loop(&key) {
                "crash-loop"
            } else if error.is_some() {
                // A failed start, or a running instance whose listing failed.
                "error"
            } else if n_live > 0 {
                "running"
            } else if cached.as_ref().is_some_and(|c| c.tools.is_some()) {
                "ready"
            } else {
                "unread"
            };
            let instructions = cached.as_ref().and_then(|c| c.session.as_ref()).and_then(|s| s.instructions.clone());
            let description = entry
                .options
                .description
                .clone()
                .or_else(|| instructions.and_then(|i| i.lines().next().map(str::to_owned)));
            let tools = cached.as_ref().and_then(|c| c.tools.as_ref()).map(|_| {
                cached
                    .as_ref()
                    .map(|c| c.tool_summaries().iter().filter(|t| entry.options.tool_allowed(&t.name)).count())
                    .unwrap_or(0)
            });
            rows.push(ServerRow {
                name: entry.name.clone(),
                tools,
                sharing: entry.options.sharing.as_str().to_owned(),
                scope: entry.options.scope.as_str().to_owned(),
                live: n_live,
                state: state.to_owned(),
                description,
                error: if state == "error" { error } else { None },
                source: entry.source.clone(),
            });
        }
        Ok(rows)
    }

    /// `POST /v1/tools`: a server's tool objects exactly as it sent them, or one tool.
    pub fn tools(&self, req: &Request) -> Result<Box<RawValue>, ApiError> {
        let config = self.resolve(req)?;
        let name = req
            .server
            .as_deref()
            .ok_or_else(|| ApiError::new(ErrorKind::Usage, "name a server: `mcpx tools <server>`"))?;
        let entry = self.server(&config, name)?;
        let cached = self.schema.get(&entry.cache_key());
        let Some(tools) = cached.as_ref().and_then(|c| c.tools.as_ref()) else {
            return Err(ApiError::new(
                ErrorKind::Server,
                format!(
                    "server `{name}` has not been listed yet; run `mcpx refresh {name}` to start it and read its tools"
                ),
            ));
        };
        let allowed: Vec<&RawValue> = tools
            .iter()
            .filter(|t| {
                serde_json::from_str::<crate::schema::ToolSummary>(t.get()).is_ok_and(|s| {
                    entry.options.tool_allowed(&s.name) && req.tool.as_ref().is_none_or(|want| *want == s.name)
                })
            })
            .map(|t| &**t)
            .collect();
        if let Some(tool) = &req.tool {
            return match allowed.first() {
                Some(t) => Ok((*t).to_owned()),
                None => Err(unknown_tool(name, tool, cached.as_ref())),
            };
        }
        raw(&allowed)
    }

    /// `POST /v1/search`: tools whose name or description holds every word, best first.
    pub fn search(&self, req: &Request) -> Result<Vec<SearchHit>, ApiError> {
        let config = self.resolve(req)?;
        let words: Vec<String> = req.words.iter().map(|w| w.to_lowercase()).filter(|w| !w.is_empty()).collect();
        if words.is_empty() {
            return Err(ApiError::new(ErrorKind::Usage, "give at least one word: `mcpx search <words>...`"));
        }
        let mut hits: Vec<(u32, SearchHit)> = Vec::new();
        for entry in config.enabled() {
            let Some(cached) = self.schema.get(&entry.cache_key()) else {
                continue;
            };
            for tool in cached.tool_summaries() {
                if !entry.options.tool_allowed(&tool.name) {
                    continue;
                }
                if let Some(score) = score(&words, &entry.name, &tool.name, tool.description.as_deref()) {
                    hits.push((
                        score,
                        SearchHit { server: entry.name.clone(), tool: tool.name, description: tool.description },
                    ));
                }
            }
        }
        hits.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| (&a.1.server, &a.1.tool).cmp(&(&b.1.server, &b.1.tool))));
        Ok(hits.into_iter().map(|(_, h)| h).collect())
    }

    /// `POST /v1/call`: calls a tool and returns its `CallToolResult` exactly as the
    /// server sent it.
    pub async fn call(
        &self,
        req: &Request,
        notify: Option<mpsc::UnboundedSender<Message>>,
    ) -> Result<Box<RawValue>, ApiError> {
        let config = self.resolve(req)?;
        let (server, tool) = split_target(&config, req)?;
        let entry = self.server(&config, &server)?;
        if entry.options.disabled {
            return Err(ApiError::new(
                ErrorKind::Config,
                format!(
                    "server `{server}` is disabled in {}; remove `disabled` from its `mcpx` block to use it",
                    entry.source.display()
                ),
            ));
        }
        if !entry.options.tool_allowed(&tool) {
            return Err(ApiError::new(
                ErrorKind::UnknownTool,
                format!(
                    "tool `{tool}` of server `{server}` is excluded by includeTools/excludeTools in {}",
                    entry.source.display()
                ),
            ));
        }
        let arguments = match &req.arguments {
            Some(a) if a.get().trim_start().starts_with('{') => a.get().to_owned(),
            Some(_) => {
                return Err(ApiError::new(
                    ErrorKind::Usage,
                    "the tool's arguments must be a JSON object, like '{\"message\":\"hi\"}'",
                ));
            }
            None => "{}".to_owned(),
        };
        let target = self.target(entry)?;
        check_tool_listed(&self.schema, &target, &tool)?;
        let timeout = match req.timeout_ms {
            Some(0) => None,
            Some(ms) => Some(Duration::from_millis(ms)),
            None => entry.options.call_timeout,
        };
        let key = self.pool_key(entry, &req.caller);
        let lease = self.pool.acquire(&target, &key, timeout).await.map_err(|e| server_error(&server, e))?;
        let inst = lease.instance.clone();
        check_tool_listed(&self.schema, &target, &tool)?;
        let name = serde_json::to_string(&tool).unwrap_or_default();
        // Every call asks for progress; the token is the caller's own in what it sees.
        let params = format!(r#"{{"name":{name},"arguments":{arguments},"_meta":{{"progressToken":"mcpx-call"}}}}"#);
        let ctx = Arc::new(CallContext {
            label: caller_label(&req.caller),
            notify,
            roots: req.caller.cwd.clone().map(|cwd| vec![cwd]),
            client: None,
        });
        let response = inst.request_for(Message::request("0", "tools/call", Some(&params)), timeout, ctx).await;
        drop(lease);
        if key.starts_with("call:") {
            self.pool.release(&inst).await;
        } else {
            self.pool.notify_changed();
        }
        let response = response.map_err(|e| server_error(&server, e))?;
        response_result(&response).map_err(|e| ApiError {
            kind: ErrorKind::Rpc,
            message: format!("server `{server}` answered tools/call with an error: {}", e.message),
            code: Some(e.code),
        })
    }

    /// `GET /v1/status`.
    pub fn status(&self) -> Status {
        let mut instances: Vec<InstanceStatus> = self
            .pool
            .instances()
            .into_iter()
            .map(|i| {
                let state = i.state();
                InstanceStatus {
                    server: i.identity.server.clone(),
                    key: i.identity.key.clone(),
                    pid: i.info.pid(),
                    state: state.as_str().to_owned(),
                    calls: i.in_flight(),
                    holders: i.holders(),
                    supervised: i.supervised(),
                    supervisor_pid: i.info.supervisor.as_ref().map(|s| s.pid),
                    supervisor_protocol: i.info.supervisor.as_ref().map(|s| s.protocol.clone()),
                    url: i.info.remote.clone(),
                    dropped_bytes: i.info.dropped(),
                    skipped_lines: i.info.skipped_lines.load(std::sync::atomic::Ordering::Relaxed),
                    buffered_at_attach: i.info.buffered_at_attach.load(std::sync::atomic::Ordering::Relaxed),
                    last_error: match state {
                        crate::instance::State::Exited(e) => Some(format!("server {e}")),
                        crate::instance::State::Lost if i.info.remote.is_some() => {
                            Some("the remote server could not be reached".into())
                        }
                        crate::instance::State::Lost => Some("instance lost: its supervisor went away".into()),
                        _ => None,
                    },
                    stderr_tail: i.info.stderr_tail(ERROR_TAIL_BYTES),
                    idle_s: Some(i.idle_for().as_secs()),
                    uptime_s: Some(i.started.elapsed().as_secs()),
                }
            })
            .collect();
        for (server, key, error) in self.pool.failures() {
            let stderr_tail = match &error {
                CallError::Exited { stderr_tail, .. } => stderr_tail.clone(),
                _ => String::new(),
            };
            instances.push(InstanceStatus {
                server,
                key,
                state: "error".into(),
                last_error: Some(error.to_string()),
                stderr_tail,
                ..InstanceStatus::default()
            });
        }
        for (record, theirs) in lock(&self.incompatible).iter() {
            instances.push(InstanceStatus {
                server: record.identity.server.clone(),
                key: record.identity.key.clone(),
                pid: record.child.map(|c| c.pid),
                state: "incompatible".into(),
                supervised: true,
                supervisor_pid: Some(record.supervisor.pid),
                supervisor_protocol: Some(theirs.to_string()),
                last_error: Some(format!(
                    "its supervisor speaks attach protocol {theirs}, this daemon {}; `mcpx restart {}` replaces it",
                    mcpx_proto::attach::Version::ours(),
                    record.identity.server
                )),
                ..InstanceStatus::default()
            });
        }
        instances.sort_by(|a, b| (&a.server, &a.key).cmp(&(&b.server, &b.key)));
        Status {
            daemon: DaemonStatus {
                pid: std::process::id(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                build: mcpx_platform::build::build_id().to_owned(),
                uptime_s: self.started.elapsed().as_secs(),
                socket: self.dirs.socket(),
                http_url: lock(&self.http_url).clone(),
                config_files: self.config.known_files(),
                log_file: self.dirs.log_file(),
                warnings: self.warnings.clone(),
            },
            instances,
        }
    }

    /// `POST /v1/restart`: restarts the server's instances: through their supervisor
    /// when supervised (same supervisor, new process), else by stopping and starting.
    /// An `incompatible` supervisor of the server is replaced.
    pub async fn restart(&self, req: &Request) -> Result<serde_json::Value, ApiError> {
        let config = self.resolve(req)?;
        let name = req
            .server
            .as_deref()
            .ok_or_else(|| ApiError::new(ErrorKind::Usage, "name a server: `mcpx restart <server>`"))?;
        let entry = self.server(&config, name)?;
        let target = self.target(entry)?;
        let replaced = self.replace_incompatible(&target.cache_key).await;
        self.pool.clear_crashes(&target.cache_key);
        let timeout = target.entry.options.start_timeout;
        let only = req.key.as_deref();
        let mut restarted = 0;
        let mut pid = None;
        for inst in
            self.pool.instances_of(&target.fingerprint).into_iter().filter(|i| only.is_none_or(|k| k == i.identity.key))
        {
            if inst.supervised() {
                inst.restart(timeout).await.map_err(|e| server_error(name, e))?;
                if let Err(e) = self.schema.refresh(&inst.identity.cache_key, &inst, timeout).await {
                    tracing::warn!(server = name, error = %e, "listing the server's schema failed");
                }
                pid = inst.info.pid();
                restarted += 1;
            }
        }
        if restarted == 0 {
            restarted = self.pool.stop_server(&target.fingerprint, only).await;
            let key = only.map(str::to_owned).unwrap_or_else(|| self.pool_key(entry, &req.caller));
            let lease = self.pool.acquire(&target, &key, timeout).await.map_err(|e| server_error(name, e))?;
            pid = lease.instance.info.pid();
        }
        Ok(serde_json::json!({ "server": name, "restarted": restarted, "replaced": replaced, "pid": pid }))
    }

    /// Stops incompatible supervisors of a server (they cannot be asked, so their
    /// processes are signalled after their start times are checked).
    async fn replace_incompatible(&self, cache_key: &str) -> usize {
        let gone: Vec<Record> = {
            let mut list = lock(&self.incompatible);
            let (gone, keep): (Vec<_>, Vec<_>) = list.drain(..).partition(|(r, _)| r.identity.cache_key == cache_key);
            *list = keep;
            gone.into_iter().map(|(r, _)| r).collect()
        };
        for rec in &gone {
            transport::stop_incompatible(rec, &self.dirs.sup_dir());
        }
        gone.len()
    }

    /// Adopts or reaps every supervisor a previous daemon left (design: "Adopt or
    /// reap"), each with its own deadline so one wedged supervisor cannot stall the
    /// start. Call before serving requests.
    pub async fn adopt_all(self: &Arc<Self>) {
        let records = transport::supervisor_records(&self.dirs.sup_dir());
        if records.is_empty() {
            return;
        }
        let boot_id = mcpx_platform::boot_id().unwrap_or_default();
        let known = self.known_fingerprints();
        let mut tasks = tokio::task::JoinSet::new();
        for record in records {
            let this = self.clone();
            let boot_id = boot_id.clone();
            let known = known.clone();
            tasks.spawn(async move {
                // The deadline bounds every attach step; a restart after it has the
                // server's own start timeout.
                this.adopt_one(record, &boot_id, &known, Duration::from_secs(3)).await;
            });
        }
        while tasks.join_next().await.is_some() {}
    }

    async fn adopt_one(
        &self,
        rec: Record,
        boot_id: &str,
        known: &HashMap<String, crate::config::ServerOptions>,
        deadline: Duration,
    ) {
        let server = rec.identity.server.clone();
        let max = usize::try_from(64u64 << 20).unwrap_or(usize::MAX);
        let mut link = match transport::adopt(&self.dirs.sup_dir(), &rec, boot_id, max, deadline).await {
            Adoption::Running(link) => link,
            Adoption::Exited { exit, info } => {
                let stderr_tail = info.stderr_tail(ERROR_TAIL_BYTES);
                let error = CallError::Exited { exit, stderr_tail };
                let id = &rec.identity;
                self.pool.record_failure(&id.server, &id.fingerprint, &id.key, error);
                return;
            }
            Adoption::Incompatible(theirs) => {
                lock(&self.incompatible).push((rec, theirs));
                return;
            }
            Adoption::Nothing => return,
        };
        let spec = InstanceSpec { identity: rec.identity.clone(), max_message_bytes: max };
        let session = link.resumed.take().and_then(|s| serde_json::from_str::<ServerSession>(&s).ok());
        let epoch = link.epoch;
        let inst = match session {
            Some(session) => Instance::resume(spec, link, session, self.pool.events()),
            None => {
                tracing::info!(server, "the previous daemon stored no session: restarting the server");
                let inst = Instance::resume(spec, link, dead_session(), self.pool.events());
                if let Err(e) = inst.restart(Some(Duration::from_secs(60))).await {
                    tracing::warn!(server, error = %e, "restarting an adopted server failed");
                    inst.terminate().await;
                    return;
                }
                inst
            }
        };
        let Some(options) = known.get(&rec.identity.fingerprint) else {
            tracing::info!(server, "no known configuration defines this server any more: stopping it");
            inst.terminate().await;
            return;
        };
        tracing::info!(server, pid = inst.info.pid(), epoch, "adopted a running server");
        self.pool.adopt(inst, options);
    }

    /// Starts the `global` instance of every server that a known configuration file
    /// gives `min` ≥ 1, in the background (design: `min` starts the instance with the
    /// daemon and exempts it from idle reaping).
    pub fn start_warm(self: &Arc<Self>) {
        for entry in self.known_entries().0 {
            let o = &entry.options;
            if o.disabled || o.min == 0 || o.scope != crate::config::Scope::Global {
                continue;
            }
            let Ok(target) = self.target(&entry) else { continue };
            let this = self.clone();
            tokio::spawn(async move {
                let name = target.entry.name.clone();
                match this.pool.acquire(&target, "global", target.entry.options.start_timeout).await {
                    Ok(_) => tracing::info!(server = %name, "started (min ≥ 1)"),
                    Err(e) => tracing::warn!(server = %name, error = %e, "starting a server with min ≥ 1 failed"),
                }
            });
        }
    }

    /// Every entry of every known configuration file (each file resolved alone), and
    /// whether every file could be read.
    fn known_entries(&self) -> (Vec<ServerEntry>, bool) {
        let mut entries = Vec::new();
        let mut complete = true;
        for file in self.config.known_files() {
            match self.config.resolve(&ResolveRequest { cwd: None, explicit: Some(file) }) {
                Ok(config) => entries.extend(config.servers.into_values()),
                Err(_) => complete = false,
            }
        }
        (entries, complete)
    }

    /// Takes up the remote sessions a previous daemon kept, as [`Daemon::adopt_all`]
    /// adopts supervisors: each becomes a live instance again (no `initialize`), so
    /// `status` shows it and `stop --all` or its server leaving the configuration ends it
    /// with `DELETE`. A session whose server no configuration holds any more is
    /// forgotten (its headers, needed for a `DELETE`, went with the entry).
    pub fn take_up_remote_sessions(self: &Arc<Self>) {
        let kept = transport::kept_remotes(&self.dirs.remote_sessions());
        if kept.is_empty() {
            return;
        }
        let (known, complete) = self.known_entries();
        let entries: HashMap<String, ServerEntry> = known.into_iter().map(|e| (e.cache_key(), e)).collect();
        for session in kept {
            let Some(entry) = entries.get(&session.fingerprint) else {
                if complete {
                    tracing::info!(file = %session.path.display(), "forgetting a kept remote session: its server is no longer configured");
                    let _ = std::fs::remove_file(&session.path);
                }
                continue;
            };
            let Ok(target) = self.target(entry) else { continue };
            let this = self.clone();
            tokio::spawn(async move {
                let timeout = target.entry.options.start_timeout;
                if let Err(e) = this.pool.acquire(&target, &session.key, timeout).await {
                    tracing::warn!(server = %target.entry.name, error = %e, "taking up a kept remote session failed");
                }
            });
        }
    }

    /// The fingerprints every known configuration file defines, for deciding which
    /// adopted supervisors are still wanted.
    fn known_fingerprints(&self) -> HashMap<String, crate::config::ServerOptions> {
        let mut set = HashMap::new();
        for entry in self.known_entries().0 {
            if let Ok(target) = self.target(&entry) {
                set.insert(target.fingerprint, entry.options);
            }
        }
        set
    }

    /// `POST /v1/upgrade`: checks the binary, then asks the daemon to stop accepting,
    /// drain, and re-execute it in place (same pid, listening socket kept open so new
    /// clients queue instead of failing), adopting its supervisors again.
    pub fn begin_upgrade(&self, req: &Request) -> Result<serde_json::Value, ApiError> {
        let binary = match &req.binary {
            Some(b) => b.clone(),
            None => std::env::current_exe()
                .map_err(|e| ApiError::new(ErrorKind::Daemon, format!("cannot find the daemon's own binary: {e}")))?,
        };
        let meta = std::fs::metadata(&binary)
            .map_err(|e| ApiError::new(ErrorKind::Usage, format!("cannot upgrade to {}: {e}", binary.display())))?;
        use std::os::unix::fs::PermissionsExt;
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            return Err(ApiError::new(
                ErrorKind::Usage,
                format!("cannot upgrade to {}: not an executable file", binary.display()),
            ));
        }
        // Only an mcpx binary may replace the daemon: ask it.
        let probe = crate::process::SpawnSpec {
            program: binary.clone(),
            args: vec!["--version".into()],
            env: std::env::vars_os().collect(),
            cwd: None,
            piped: true,
            detach: crate::process::Detach::Inherit,
        };
        let version =
            mcpx_platform::process::command(&probe).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
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
        tracing::info!(binary = %binary.display(), "upgrade requested: draining");
        *lock(&self.upgrade) = Some(binary.clone());
        self.shutdown.notify_one();
        Ok(serde_json::json!({ "upgrading": true, "from": mcpx_platform::build::build_id(), "binary": binary }))
    }

    /// `POST /v1/refresh`: re-reads the schema of one server, or of every enabled one,
    /// starting those that are not running.
    pub async fn refresh(&self, req: &Request) -> Result<serde_json::Value, ApiError> {
        let config = self.resolve(req)?;
        let entries: Vec<&ServerEntry> = match req.server.as_deref() {
            Some(name) => vec![self.server(&config, name)?],
            None => config.enabled().collect(),
        };
        let mut results = serde_json::Map::new();
        for entry in entries {
            let outcome = async {
                let target = self.target(entry)?;
                let timeout = entry.options.start_timeout;
                match self.pool.relist(&target.fingerprint, timeout).await {
                    Ok(true) => Ok(()),
                    Ok(false) => {
                        let key = self.pool_key(entry, &req.caller);
                        let lease = self.pool.acquire(&target, &key, timeout).await;
                        lease.map_err(|e| server_error(&entry.name, e))?;
                        // The start lists the server; a failed listing is kept in the cache.
                        match self.schema.get(&target.cache_key).and_then(|c| c.error) {
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
                Err(e) => serde_json::json!({ "ok": false, "error": e.message }),
            };
            results.insert(entry.name.clone(), value);
        }
        Ok(serde_json::Value::Object(results))
    }
}

/// How `status` names a caller: its session, else its parent process.
fn caller_label(caller: &crate::api::Caller) -> String {
    match (&caller.session, caller.ppid) {
        (Some(s), _) => format!("session:{s}"),
        (None, Some(p)) => format!("pid:{p}"),
        (None, None) => String::new(),
    }
}

/// `POST /v1/call` with `stream`: notifications as they come, then the outcome,
/// one JSON object per line. A client that goes away drops the call, which cancels
/// it upstream.
fn call_stream(daemon: Arc<Daemon>, req: Request) -> Response {
    let (lines_tx, lines_rx) = mpsc::channel::<Vec<u8>>(64);
    tokio::spawn(async move {
        let (notify_tx, mut notify_rx) = mpsc::unbounded_channel::<Message>();
        let call = daemon.call(&req, Some(notify_tx));
        tokio::pin!(call);
        let line = |body: String| {
            let mut b = body.into_bytes();
            b.push(b'\n');
            b
        };
        let outcome = loop {
            tokio::select! {
                biased;
                () = lines_tx.closed() => return,
                Some(n) = notify_rx.recv() => {
                    if lines_tx.send(line(format!(r#"{{"notification":{}}}"#, n.as_str()))).await.is_err() {
                        return;
                    }
                }
                outcome = &mut call => break outcome,
            }
        };
        while let Ok(n) = notify_rx.try_recv() {
            let _ = lines_tx.send(line(format!(r#"{{"notification":{}}}"#, n.as_str()))).await;
        }
        let last = match outcome {
            Ok(result) => format!(r#"{{"result":{}}}"#, result.get()),
            Err(e) => serde_json::to_string(&ErrorBody { error: e }).unwrap_or_default(),
        };
        let _ = lines_tx.send(line(last)).await;
    });
    ([(axum::http::header::CONTENT_TYPE, "application/x-ndjson")], crate::mcp::channel_body(lines_rx)).into_response()
}

/// Every second, stops instances that are idle past their `idleTimeout` or whose
/// `pid` caller exited.
async fn reap_idle(daemon: std::sync::Weak<Daemon>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let Some(daemon) = daemon.upgrade() else { return };
        daemon.pool.reap().await;
        daemon.retire_unconfigured().await;
    }
}

/// Handles list changes (re-read the schema) and exits (logged) from instances.
async fn handle_events(daemon: std::sync::Weak<Daemon>, mut rx: mpsc::UnboundedReceiver<(String, InstanceEvent)>) {
    while let Some((fingerprint, event)) = rx.recv().await {
        let Some(daemon) = daemon.upgrade() else {
            return;
        };
        match event {
            InstanceEvent::ListChanged(method) => {
                tokio::spawn(async move {
                    if let Err(e) = daemon.pool.relist(&fingerprint, Some(Duration::from_secs(60))).await {
                        tracing::warn!(fingerprint, error = %e, "re-reading a schema after list_changed failed");
                    }
                    // Then every MCP session with a stream hears of it.
                    daemon.mcp.broadcast(&Message::notification(&method, None));
                });
            }
            InstanceEvent::Exited { cache_key, crash } => {
                if let Some(error) = crash {
                    daemon.pool.record_crash(&cache_key, error);
                }
                daemon.pool.notify_changed();
            }
        }
    }
}

/// A placeholder session for an instance about to be restarted or dropped.
fn dead_session() -> ServerSession {
    ServerSession {
        protocol_version: String::new(),
        capabilities: serde_json::value::RawValue::from_string("{}".into()).unwrap_or_else(|_| unreachable!()),
        server_info: None,
        instructions: None,
    }
}

/// Fails when the schema cache lists the server's tools and `tool` is not among them.
fn check_tool_listed(schema: &SchemaCache, target: &Target, tool: &str) -> Result<(), ApiError> {
    let Some(cached) = schema.get(&target.cache_key) else {
        return Ok(());
    };
    if cached.tools.is_none() || cached.error.is_some() {
        return Ok(());
    }
    if cached.tool_summaries().iter().any(|t| t.name == tool) {
        return Ok(());
    }
    Err(unknown_tool(&target.entry.name, tool, Some(&cached)))
}

fn unknown_tool(server: &str, tool: &str, cached: Option<&crate::schema::CacheEntry>) -> ApiError {
    let names: Vec<String> =
        cached.map(|c| c.tool_summaries().into_iter().map(|t| t.name).collect()).unwrap_or_default();
    let list = if names.is_empty() { String::from("(none listed)") } else { names.join(", ") };
    ApiError::new(
        ErrorKind::UnknownTool,
        format!("server `{server}` has no tool `{tool}`; its tools: {list} (see `mcpx tools {server}`)"),
    )
}

fn unknown_server(config: &ResolvedConfig, name: &str) -> ApiError {
    let names: Vec<&str> = config.servers.keys().map(String::as_str).collect();
    let hint = if names.is_empty() {
        "no servers are configured here (see `mcpx ls`; configure them in .mcp.json or ~/.config/mcpx/config.json)"
            .to_owned()
    } else {
        format!("configured servers: {}", names.join(", "))
    };
    ApiError::new(ErrorKind::UnknownServer, format!("no server named `{name}`; {hint}"))
}

/// Splits `<server>.<tool>` after the longest configured server name followed by a
/// dot, or takes `server` and `tool` as given.
fn split_target(config: &ResolvedConfig, req: &Request) -> Result<(String, String), ApiError> {
    if let (Some(s), Some(t)) = (&req.server, &req.tool) {
        return Ok((s.clone(), t.clone()));
    }
    let target = req.target.as_deref().ok_or_else(|| {
        ApiError::new(ErrorKind::Usage, "name the tool as <server>.<tool>, like `mcpx call everything.echo '{}'`")
    })?;
    let best = config
        .servers
        .keys()
        .filter(|name| {
            target.len() > name.len() + 1 && target.starts_with(name.as_str()) && target.as_bytes()[name.len()] == b'.'
        })
        .max_by_key(|name| name.len());
    match best {
        Some(name) => Ok((name.clone(), target[name.len() + 1..].to_owned())),
        None => {
            let server = target.split_once('.').map_or(target, |(s, _)| s);
            if let Some(name) = target.strip_suffix('.').filter(|n| config.servers.contains_key(*n)) {
                Err(ApiError::new(
                    ErrorKind::Usage,
                    format!("name a tool after the dot: `mcpx call {name}.<tool>` (see `mcpx tools {name}`)"),
                ))
            } else if target.contains('.') {
                Err(unknown_server(config, server))
            } else {
                Err(ApiError::new(
                    ErrorKind::Usage,
                    format!("`{target}` is not <server>.<tool>; try `mcpx tools {target}` to see its tools"),
                ))
            }
        }
    }
}

/// Scores a tool against lowercase search words; `None` unless every word matches.
fn score(words: &[String], server: &str, tool: &str, description: Option<&str>) -> Option<u32> {
    let tool_l = tool.to_lowercase();
    let server_l = server.to_lowercase();
    let desc_l = description.unwrap_or_default().to_lowercase();
    let mut total = 0;
    for w in words {
        total += if tool_l == *w {
            100
        } else if tool_l.starts_with(w.as_str()) {
            60
        } else if tool_l.contains(w.as_str()) {
            40
        } else if server_l.contains(w.as_str()) {
            20
        } else if desc_l.contains(w.as_str()) {
            10
        } else {
            return None;
        };
    }
    Some(total)
}

fn raw<T: serde::Serialize + ?Sized>(value: &T) -> Result<Box<RawValue>, ApiError> {
    serde_json::value::to_raw_value(value).map_err(|e| ApiError::new(ErrorKind::Daemon, e.to_string()))
}

fn config_error(e: ConfigError) -> ApiError {
    ApiError::new(ErrorKind::Config, e.to_string())
}

fn server_error(server: &str, e: CallError) -> ApiError {
    let kind = match e {
        CallError::Timeout(_) | CallError::Busy(_) | CallError::StartTimeout(_) => ErrorKind::Timeout,
        CallError::Transport(ref e) if e.timed_out() => ErrorKind::Timeout,
        CallError::Protocol(_) | CallError::TooLarge { .. } | CallError::RequestTooLarge { .. } => ErrorKind::Protocol,
        CallError::Exited { .. }
        | CallError::Launch(_)
        | CallError::Lost(_)
        | CallError::Cancelled
        | CallError::Transport(_) => ErrorKind::Server,
    };
    let hint = match e {
        CallError::Exited { .. } | CallError::Launch(_) => {
            format!(" (see `mcpx status` and `mcpx logs {server}`)")
        }
        _ => String::new(),
    };
    ApiError::new(kind, format!("server `{server}`: {e}{hint}"))
}

// ---- HTTP layer ----

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(ErrorBody { error: self })).into_response()
    }
}

/// A JSON body that is already serialized (kept byte-faithful).
fn raw_json(raw: Box<RawValue>) -> Response {
    let body: Box<str> = raw.into();
    ([(axum::http::header::CONTENT_TYPE, "application/json")], String::from(body)).into_response()
}

type S = State<Arc<Daemon>>;

/// A JSON request body; a malformed one is a `usage` error with the API's error
/// body, like every other error.
struct Body(Request);

impl<St: Send + Sync> axum::extract::FromRequest<St> for Body {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &St) -> Result<Self, Self::Rejection> {
        match Json::<Request>::from_request(req, state).await {
            Ok(Json(r)) => Ok(Body(r)),
            Err(e) => Err(ApiError::new(ErrorKind::Usage, format!("bad request body: {}", e.body_text()))),
        }
    }
}

/// The control API's routes (`docs/api.md`).
pub fn router(daemon: Arc<Daemon>) -> Router {
    Router::new()
        .route(
            "/v1/health",
            get(|State(d): S| async move {
                let started = d.started_at;
                Json(serde_json::json!({ "pid": std::process::id(), "build": mcpx_platform::build::build_id(), "started_at_ms": started }))
            }),
        )
        .route("/v1/upgrade", post(|State(d): S, Body(r): Body| async move { d.begin_upgrade(&r).map(Json) }))
        .route("/v1/status", get(|State(d): S| async move { Json(d.status()) }))
        .route("/v1/ls", post(|State(d): S, Body(r): Body| async move { d.ls(&r).map(Json) }))
        .route("/v1/search", post(|State(d): S, Body(r): Body| async move { d.search(&r).map(Json) }))
        .route("/v1/tools", post(|State(d): S, Body(r): Body| async move { d.tools(&r).map(raw_json) }))
        .route(
            "/v1/call",
            post(|State(d): S, Body(r): Body| async move {
                if r.stream { Ok(call_stream(d, r)) } else { d.call(&r, None).await.map(raw_json) }
            }),
        )
        .route("/v1/restart", post(|State(d): S, Body(r): Body| async move { d.restart(&r).await.map(Json) }))
        .route("/v1/refresh", post(|State(d): S, Body(r): Body| async move { d.refresh(&r).await.map(Json) }))
        .route(
            "/v1/stop",
            post(|State(d): S, Body(r): Body| async move {
                tracing::info!(all = r.all, "stop requested");
                d.pool.stop_all(r.all).await;
                d.shutdown.notify_one();
                Json(serde_json::json!({ "stopping": true }))
            }),
        )
        .merge(crate::mcp::routes())
        // Tool arguments may be as large as a server accepts (`maxMessageBytes`, 64 MiB
        // by default); the HTTP layer's own 2 MB default would refuse them.
        .layer(axum::extract::DefaultBodyLimit::max(MAX_REQUEST_BODY))
        .with_state(daemon)
}

/// The largest control API request body, in bytes (1 GiB).
pub const MAX_REQUEST_BODY: usize = 1 << 30;

/// How long a command lookup is reused: a program installed or replaced on PATH is
/// seen within this time.
pub const RESOLVE_TTL: Duration = Duration::from_secs(2);

/// How long in-flight requests may take to finish when the daemon stops or upgrades.
pub const DRAIN: Duration = Duration::from_secs(10);

/// Why [`run`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// Stopped (`mcpx stop`, a signal).
    Stop,
    /// Drained for `mcpx upgrade`: re-execute this binary.
    Upgrade(PathBuf),
}

/// Serves the control API on `listener` until `shutdown` completes or a `stop` or
/// `upgrade` request arrives; then stops accepting, lets in-flight requests finish
/// (up to [`DRAIN`]), stops the daemon's own children and detaches from the
/// supervisors (which keep their servers for the next daemon).
pub async fn run(
    listener: UnixListener,
    daemon: Arc<Daemon>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<Exit> {
    // Each connection carries one request (no keep-alive), so stopping is simply: stop
    // accepting, then let every accepted connection finish. A graceful shutdown that
    // closes idle connections would drop a request accepted but not yet read.
    let app = router(daemon.clone());
    let mut conns = tokio::task::JoinSet::new();
    let stop = async {
        tokio::select! {
            () = shutdown => {}
            () = daemon.shutdown.notified() => {}
        }
    };
    tokio::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let service = hyper_util::service::TowerToHyperService::new(app.clone());
                    conns.spawn(async move {
                        let io = hyper_util::rt::TokioIo::new(stream);
                        let _ = hyper::server::conn::http1::Builder::new().keep_alive(false).serve_connection(io, service).await;
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            () = &mut stop => break,
        }
    }
    // Not accepting any more; clients that connect now wait in the backlog (an upgrade
    // keeps the socket open) or are refused (a stop closes it).
    drop(listener);
    let drained = tokio::time::timeout(DRAIN, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!("requests still running after {}s were cut off", DRAIN.as_secs());
        conns.abort_all();
    }
    daemon.pool.stop_all(false).await;
    Ok(match lock(&daemon.upgrade).take() {
        Some(binary) => Exit::Upgrade(binary),
        None => Exit::Stop,
    })
}
