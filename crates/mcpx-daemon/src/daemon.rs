//! The daemon's state: what a running daemon holds, its construction, and the tasks
//! it runs in the background (instance events, the reaper, background starts).
//!
//! It knows nothing of HTTP, and imports none of the modules built on it: the `/v1`
//! handlers are functions of this state in `control.rs`, adoption is in `adopt.rs`,
//! the MCP endpoint in `mcp/`, and `server.rs` composes them into the served router.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use mcpx_platform::exec::Executable;
use mcpx_proto::Message;
use mcpx_proto::attach::{Record, Version};
use tokio::sync::{broadcast, mpsc, watch};

mod own_endpoint;

use self::own_endpoint::points_at;
use crate::api::{ApiError, Caller, ConfigErrorStatus, ErrorKind};
use crate::config::{
    ConfigCache, ConfigEnv, ExplicitFiles, Inputs, Pinning, ResolveRequest, ResolvedConfig, ServerEntry,
};
use crate::instance::InstanceEvent;
use crate::paths::{EXPLICIT_CONFIGS, KNOWN_CONFIGS, OpenDirs};
use crate::pins::{Holds, Kind, Listed, Pins};
use crate::pool::{Pool, Target};
use crate::schema::{self, CacheEntry, SchemaCache};
use crate::scope::PoolKey;
use crate::sync::lock;
use crate::target::Targets;
use crate::transport::Launchers;

/// How many announcements for MCP clients may wait for a slow listener before the
/// oldest are dropped (a client then lists again on the next one).
const NOTICES: usize = 64;

/// How many requests' resolutions are kept for reuse ([`Daemon::resolve_for`]); past it the
/// memo starts again empty (a caller per working directory, so only a daemon serving
/// very many directories ever gets there).
const RESOLUTIONS: usize = 256;

/// A request's configuration as last resolved, and what it was resolved from.
struct Resolution {
    inputs: Inputs,
    config: Arc<ResolvedConfig>,
}

/// Everything a running daemon holds.
pub struct Daemon {
    /// Its directories, open.
    pub dirs: OpenDirs,
    /// Parsed configuration files.
    pub config: ConfigCache,
    /// Entries to targets and callers to pool keys, against the captured environment.
    pub targets: Targets,
    /// Instances.
    pub pool: Pool,
    /// The schema cache.
    pub schema: Arc<SchemaCache>,
    /// The pinned tool and prompt definitions.
    pub pins: Pins,
    /// The record of every request callers sent servers.
    pub activity: crate::activity::Activity,
    /// Metrics of every recorded request, and their spans' export when on.
    pub telemetry: crate::telemetry::Telemetry,
    /// The dashboard's listener, once `mcpx ui` opened it.
    pub ui: crate::ui::gate::Opened,
    /// When it started, for `status`'s uptime.
    pub(crate) started: Instant,
    /// When it started, in milliseconds since the Unix epoch (tells a re-executed
    /// daemon from the one before, which has the same pid).
    pub started_at: u64,
    /// Found at start: a service unit whose KillMode would kill the supervisors.
    pub(crate) warnings: Vec<String>,
    /// The URL of `/mcp` on TCP, set once when that listener is enabled.
    http_url: OnceLock<String>,
    /// Set when a `stop` or `upgrade` request asks the daemon to exit, and how;
    /// `server::run` waits for it.
    exit: watch::Sender<Option<Exit>>,
    /// Messages for every MCP client with a stream open (a server's `list_changed`);
    /// the MCP endpoint subscribes. The daemon itself never sees its clients.
    notices: broadcast::Sender<Message>,
    /// The daemon itself, for work it starts in the background.
    me: Weak<Daemon>,
    /// Servers (by cache key) an MCP listing is starting in the background.
    retrying: Mutex<HashSet<String>>,
    /// Supervisors found at start whose attach protocol this daemon cannot speak:
    /// left running, shown as `incompatible`, replaced on `mcpx restart`.
    pub(crate) incompatible: Mutex<Vec<(Record, Version)>>,
    /// The project files whose untrusted servers an MCP listing left out, each logged
    /// once (not once per request).
    untrusted_logged: Mutex<HashSet<PathBuf>>,
    /// Progress and log notifications lost, over the daemon's life, because their
    /// caller read too slowly; every caller's queue adds to it (`status`).
    dropped_notifications: Arc<AtomicU64>,
    /// The shell calls in flight that answer server requests themselves.
    pub shell_calls: crate::shell_calls::ShellCalls,
    /// Whole tool results cut to `maxResultBytes`, kept for their sessions to read back.
    pub results: crate::results::Results,
    /// The last search indexes, by what each was built from.
    pub search_indexes: crate::search::Indexes,
    /// The last resolution of each request, reused while none of its files changed.
    resolutions: Mutex<HashMap<ResolveRequest, Arc<Resolution>>>,
    /// The last resolution narrowed to each profile: the resolution it came from, and
    /// the narrowed one, reused while that resolution is the current one.
    profiled: Mutex<HashMap<(ResolveRequest, String), Narrowed>>,
}

/// A resolution narrowed to a profile: the resolution it came from, and the narrowed one.
type Narrowed = (Arc<ResolvedConfig>, Arc<ResolvedConfig>);

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon").field("dirs", &self.dirs).finish_non_exhaustive()
    }
}

impl Daemon {
    /// A daemon over `dirs`, with the captured environment `env`, starting servers
    /// through `launchers`. Spawns the tasks that handle instance events and reap idle
    /// instances, so it must be called inside a tokio runtime.
    pub fn new(dirs: OpenDirs, env: HashMap<String, String>, launchers: Launchers) -> Arc<Daemon> {
        let schema = Arc::new(SchemaCache::new(dirs.cache.clone()));
        let pruned = schema.prune_private();
        if pruned > 0 {
            tracing::info!(pruned, "removed private listings of contexts unused for 30 days");
        }
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let config = ConfigCache::new(ConfigEnv::from_vars(&env))
            .with_trust_file(dirs.paths.state.join(crate::config::TRUST_FILE));
        if let Ok(bytes) = dirs.state.read(KNOWN_CONFIGS) {
            if let Ok(files) = serde_json::from_slice::<Vec<PathBuf>>(&bytes) {
                config.add_known_files(files);
            }
        }
        if let Ok(bytes) = dirs.state.read(EXPLICIT_CONFIGS) {
            if let Ok(files) = serde_json::from_slice::<ExplicitFiles>(&bytes) {
                config.add_explicit_files(files);
            }
        }
        let warnings = crate::service_check::supervisor_warnings(&env);
        let (activity, telemetry) = open_activity(&dirs.state, &config, &env);
        let daemon = Arc::new_cyclic(|me| Daemon {
            me: me.clone(),
            retrying: Mutex::new(HashSet::new()),
            pool: Pool::new(launchers, schema.clone(), events_tx),
            schema,
            pins: Pins::open(&dirs.state),
            activity,
            telemetry,
            ui: crate::ui::gate::Opened::default(),
            config,
            targets: Targets::new(env, dirs.state.clone()),
            dirs,
            started: Instant::now(),
            started_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            incompatible: Mutex::new(Vec::new()),
            exit: watch::Sender::new(None),
            notices: broadcast::channel(NOTICES).0,
            http_url: OnceLock::new(),
            warnings,
            dropped_notifications: Arc::default(),
            shell_calls: Default::default(),
            untrusted_logged: Mutex::new(HashSet::new()),
            resolutions: Mutex::new(HashMap::new()),
            profiled: Mutex::new(HashMap::new()),
            results: crate::results::Results::default(),
            search_indexes: crate::search::Indexes::default(),
        });
        for w in &daemon.warnings {
            tracing::warn!("{w}");
        }
        tokio::spawn(handle_events(Arc::downgrade(&daemon), events_rx));
        tokio::spawn(reap_idle(Arc::downgrade(&daemon)));
        daemon
    }

    /// The daemon's count of notifications lost to slow callers, for a new caller's
    /// queue to add to ([`crate::notices::channel`]).
    pub fn dropped_notifications(&self) -> Arc<AtomicU64> {
        self.dropped_notifications.clone()
    }

    /// The environment captured at start: `${VAR}` expansion and children's base
    /// environment.
    pub fn env(&self) -> &HashMap<String, String> {
        self.targets.env()
    }

    /// The configuration `caller` sees, without an entry for this daemon's own `/mcp`;
    /// records newly seen files in the state directory. A request resolved before, whose files all
    /// have the stamps they had then (a `stat` each, on this thread), gets that resolution
    /// again: an edit is still seen by the next request, and an unchanged configuration
    /// costs no merge. Anything else is resolved afresh, off the runtime's worker.
    ///
    /// A caller on a profile gets it narrowed to the profile
    /// ([`ResolvedConfig::with_profile`]), reused while the resolution it came from is.
    /// Errors: the configuration cannot be read (`config`); no such profile (`config`,
    /// listing the profiles there are).
    pub fn resolve_for(&self, caller: &Caller) -> Result<Arc<ResolvedConfig>, ApiError> {
        let request = ResolveRequest { cwd: caller.cwd.clone(), explicit: caller.config.clone() };
        let base = self.resolve_request(&request)?;
        let Some(profile) = &caller.profile else { return Ok(base) };
        let key = (request, profile.clone());
        if let Some((from, narrowed)) = lock(&self.profiled).get(&key) {
            if Arc::ptr_eq(from, &base) {
                return Ok(narrowed.clone());
            }
        }
        let narrowed = Arc::new(base.with_profile(profile).map_err(|e| ApiError::new(ErrorKind::Config, e))?);
        let mut memo = lock(&self.profiled);
        if memo.len() >= RESOLUTIONS {
            memo.clear();
        }
        memo.insert(key, (base, narrowed.clone()));
        Ok(narrowed)
    }

    /// [`resolve_for`](Self::resolve_for) on no profile.
    fn resolve_request(&self, request: &ResolveRequest) -> Result<Arc<ResolvedConfig>, ApiError> {
        let request = request.clone();
        let last = lock(&self.resolutions).get(&request).cloned();
        if let Some(last) = last.filter(|last| self.config.unchanged(&last.inputs)) {
            return Ok(last.config.clone());
        }
        let before = self.config.known_files().len();
        let explicit_before = self.config.explicit_changes();
        let (mut resolved, inputs) = off_the_runtime(|| self.config.resolve_recorded(&request))
            .map_err(|e| ApiError::new(ErrorKind::Config, e.to_string()))?;
        if let Some(own) = self.http_url() {
            // An entry for this daemon's own `/mcp` (how a client reaches mcpx over HTTP)
            // would have mcpx call itself for every listing, each listing again.
            resolved.servers.retain(|name, entry| {
                let ours = points_at(entry, own);
                if ours {
                    tracing::debug!(server = %name, file = %entry.source.display(), "left out: the entry is this daemon's own /mcp");
                }
                !ours
            });
        }
        let known = self.config.known_files();
        if known.len() != before {
            self.record_files(KNOWN_CONFIGS, &known);
        }
        if self.config.explicit_changes() != explicit_before {
            self.record_files(EXPLICIT_CONFIGS, &self.config.explicit_files());
        }
        let config = Arc::new(resolved);
        if let Some(inputs) = inputs {
            let mut memo = lock(&self.resolutions);
            if memo.len() >= RESOLUTIONS {
                memo.clear();
            }
            memo.insert(request, Arc::new(Resolution { inputs, config: config.clone() }));
        }
        Ok(config)
    }

    /// Writes `files` to `name` in the state directory, for the next daemon.
    fn record_files(&self, name: &str, files: &impl serde::Serialize) {
        if let Ok(bytes) = serde_json::to_vec_pretty(files) {
            if let Err(e) = mcpx_platform::fs::write_atomic(&self.dirs.state, name, &bytes, 0o600) {
                tracing::warn!(error = %e, file = name, "cannot record the known configuration files");
            }
        }
    }

    /// Logs, once per file over the daemon's life, that an MCP listing left out the
    /// servers of `entries` (untrusted project files' entries).
    pub(crate) fn log_untrusted<'a>(&self, entries: impl Iterator<Item = &'a ServerEntry>) {
        for entry in entries {
            if lock(&self.untrusted_logged).insert(entry.source.clone()) {
                let dir = crate::config::project_dir(&entry.source);
                tracing::info!(
                    file = %entry.source.display(),
                    "MCP listings leave out the servers of this project file until the user trusts them (`mcpx trust` in {})",
                    dir.display()
                );
            }
        }
    }

    /// The entry named `name`, or an `unknown_server` error listing the names that exist
    /// (a `config` error for an entry that does not parse).
    pub fn server<'a>(&self, config: &'a ResolvedConfig, name: &str) -> Result<&'a ServerEntry, ApiError> {
        config.get(name).ok_or_else(|| unknown_server(config, name))
    }

    /// The schema cache entry of `entry` as its callers see it, as it is
    /// ([`SchemaCache::get_for`] in the authorization context of the entry as the
    /// caller's configuration resolves it), stale or not; [`Daemon::schema_for`] lists a
    /// stale one again first. The context is computed only for a private listing.
    pub fn cached_for(&self, entry: &ServerEntry, _caller: &Caller) -> Option<Arc<CacheEntry>> {
        let key = entry.cache_key();
        let shared = self.schema.get(&key)?;
        if !shared.private {
            return Some(shared);
        }
        self.schema.get_for(&key, self.targets.context(entry).as_deref())
    }

    /// The schema cache entry of `entry` as `caller` sees it
    /// ([`SchemaCache::get_for`], in its authorization context), listed again first
    /// from a running instance when it is past its `ttlMs` (MCP 2026-07-28, Server,
    /// Utilities, "Caching": "the client checks freshness when it needs the data, and
    /// re-fetches only if stale"): any instance of the server for a shared listing, one
    /// of the same context for a private one. With none running, or when listing again
    /// fails ("Clients MAY serve stale responses if errors occur"), the stale entry is
    /// given, which [`CacheEntry::is_stale`] says. `None`: never listed.
    pub async fn schema_for(&self, entry: &ServerEntry, caller: &Caller) -> Option<Arc<CacheEntry>> {
        let key = entry.cache_key();
        let cached = self.cached_for(entry, caller)?;
        if !cached.is_stale(schema::now_ms()) {
            return Some(cached);
        }
        let context = if cached.private { self.targets.context(entry) } else { None };
        let running = self.pool.keyed_instances().into_iter().find(|(_, inst)| {
            inst.identity.cache_key == key
                && inst.is_alive()
                && (!cached.private || inst.context() == context.as_deref())
        });
        let Some((_, inst)) = running else { return Some(cached) };
        match self.schema.refresh(&key, &inst, entry.options.start_timeout).await {
            Ok(_) => self.schema.get_for(&key, context.as_deref()),
            Err(e) => {
                tracing::warn!(server = %entry.name, error = %e, "listing a stale schema again failed; using the stale one");
                Some(cached)
            }
        }
    }

    /// The tools and prompts of `entry` that pinning holds back ([`crate::pins`]), after
    /// comparing `listing` (its schema cache entry as the caller sees it; the shared
    /// one when `None`) with its pins. A server never listed holds what its pins say.
    /// A private listing (`cacheScope: "private"`) is pinned per authorization context,
    /// as it is cached: one context's tools are not another's. Every listing and call
    /// asks here through [`crate::policy`].
    pub fn holds(&self, entry: &ServerEntry, listing: Option<&CacheEntry>) -> Holds {
        self.holds_at(entry, &entry.cache_key(), listing)
    }

    /// [`Daemon::holds`] with `entry`'s cache key already known (a
    /// [`crate::pool::Target`]'s), so a call's check hashes nothing.
    pub fn holds_at(&self, entry: &ServerEntry, cache_key: &str, listing: Option<&CacheEntry>) -> Holds {
        if entry.pinning == Pinning::Off {
            return Holds::default();
        }
        let shared;
        let listing = match listing {
            Some(listing) => Some(listing),
            None => {
                shared = self.schema.get(cache_key);
                shared.as_deref()
            }
        };
        let key = self.pin_key_at(entry, cache_key, listing.is_some_and(|l| l.private));
        let number = listing.map_or(0, |l| l.listing);
        let held = |kind: Kind, items: Option<&[Box<serde_json::value::RawValue>]>| match items {
            Some(items) => self.observe_list(&key, entry, kind, Listed { items, listing: number }),
            None => self.pins.held(&key, kind),
        };
        Holds {
            tools: held(Kind::Tool, listing.and_then(|l| l.tools.as_deref())),
            prompts: held(Kind::Prompt, listing.and_then(|l| l.prompts.as_deref())),
        }
    }

    /// The key of `entry`'s pins: its cache key, and for a `private` listing its
    /// authorization context's too (`<key>-<context>`).
    pub fn pin_key(&self, entry: &ServerEntry, private: bool) -> String {
        self.pin_key_at(entry, &entry.cache_key(), private)
    }

    /// [`Daemon::pin_key`] with `entry`'s cache key already known.
    fn pin_key_at(&self, entry: &ServerEntry, cache_key: &str, private: bool) -> String {
        match private.then(|| self.targets.context(entry)).flatten() {
            Some(context) => format!("{cache_key}-{context}"),
            None => cache_key.to_owned(),
        }
    }

    /// The names of `kind` of `entry` (pins kept under `key`) held, after comparing
    /// `listed`, the list the server gave, with its pins ([`Pins::observe`]). When that
    /// changes what is held, every MCP session with a stream hears `list_changed` of the
    /// kind.
    pub fn observe_list(
        &self,
        key: &str,
        entry: &ServerEntry,
        kind: Kind,
        listed: Listed<'_>,
    ) -> Arc<BTreeSet<String>> {
        let seen = self.pins.observe(key, &entry.name, entry.pinning, kind, listed);
        let daemon = crate::activity::Origin { path: "pins".into(), client: "mcpx daemon".into(), protocol: None };
        for name in &seen.newly {
            self.record_pin(entry, &daemon, "held", kind, name);
        }
        if seen.changed {
            self.announce(Message::notification(&format!("notifications/{}s/list_changed", kind.as_str()), None));
        }
        seen.held
    }

    /// Every entry of every known configuration file (each file read alone), and
    /// whether every file could be read and parsed, with no wrong entry.
    pub(crate) fn known_entries(&self) -> (Vec<ServerEntry>, bool) {
        let mut entries = Vec::new();
        let mut complete = true;
        for file in self.config.known_files() {
            match off_the_runtime(|| self.config.file_contents(&file)) {
                Ok(Some(contents)) => {
                    // A file that does not parse, or a wrong entry, may be mid-edit: what it
                    // held is not judged removed.
                    complete &= contents.syntax.is_none() && contents.errors.is_empty();
                    entries.extend(contents.servers);
                }
                Ok(None) => {}
                Err(_) => complete = false,
            }
        }
        (entries, complete)
    }

    /// The config errors of every known configuration file, each file read alone: its
    /// entries that do not parse, or the file itself when it cannot be read or parsed.
    pub(crate) fn config_errors(&self) -> Vec<ConfigErrorStatus> {
        let mut errors = Vec::new();
        for file in self.config.known_files() {
            match off_the_runtime(|| self.config.file_contents(&file)) {
                Ok(Some(contents)) => {
                    errors.extend(contents.syntax.iter().map(|e| ConfigErrorStatus {
                        file: file.clone(),
                        server: None,
                        message: e.0.to_string(),
                    }));
                    errors.extend(contents.errors.into_iter().map(|(server, e)| ConfigErrorStatus {
                        file: file.clone(),
                        server: Some(server),
                        message: e.0.to_string(),
                    }));
                }
                Ok(None) => {}
                Err(e) => errors.push(ConfigErrorStatus { file, server: None, message: e.to_string() }),
            }
        }
        errors
    }

    /// The URL of `/mcp` on TCP, when that listener is enabled.
    pub fn http_url(&self) -> Option<&str> {
        self.http_url.get().map(String::as_str)
    }

    /// Records the URL of `/mcp` on TCP (`http://<address>/mcp`), for `status`. The
    /// first one stays.
    pub fn set_http_url(&self, url: String) {
        let _ = self.http_url.set(url);
        // A resolution kept from before would still hold an entry for it.
        lock(&self.resolutions).clear();
    }

    /// Asks the daemon to exit as `how` says: `server::run` stops accepting, drains
    /// and returns it. An upgrade asked for wins over a stop, whichever came first.
    pub fn request_exit(&self, how: Exit) {
        self.exit.send_if_modified(|exit| {
            let change = exit.is_none() || matches!(how, Exit::Upgrade(_));
            if change {
                *exit = Some(how);
            }
            change
        });
    }

    /// Completes once [`Daemon::request_exit`] was called (at once if it already was).
    pub async fn exit_requested(&self) {
        let mut exit = self.exit.subscribe();
        // The sender lives as long as the daemon, so this ends only with a request.
        let _ = exit.wait_for(Option::is_some).await;
    }

    /// How the daemon was asked to exit; [`Exit::Stop`] when it was not asked (a
    /// signal stopped it).
    pub fn exit(&self) -> Exit {
        self.exit.borrow().clone().unwrap_or(Exit::Stop)
    }

    /// Sends `message` to every MCP client with a stream open (through the MCP
    /// endpoint, when one listens).
    pub fn announce(&self, message: Message) {
        // No receiver: no MCP endpoint listens, and nobody is to be told.
        let _ = self.notices.send(message);
    }

    /// The messages [`Daemon::announce`] sends from now on.
    pub fn notices(&self) -> broadcast::Receiver<Message> {
        self.notices.subscribe()
    }

    /// Starts `target` under `key` in the background, once at a time per server, and
    /// tells every MCP client with a stream that the lists changed when it comes up.
    /// The pool's backoff applies: during one, the attempt fails at once.
    pub(crate) fn start_in_background(&self, target: Arc<Target>, key: PoolKey) {
        let Some(daemon) = self.me.upgrade() else { return };
        if !lock(&self.retrying).insert(target.cache_key.clone()) {
            return;
        }
        tokio::spawn(async move {
            let timeout = target.entry.options.start_timeout;
            let started = daemon.lease_as(&target, &key, timeout).await;
            lock(&daemon.retrying).remove(&target.cache_key);
            match started {
                Ok(_) if daemon.schema.get(&target.cache_key).is_some_and(|c| c.error.is_none()) => {
                    tracing::info!(server = %target.entry.name, "a server left out of MCP listings is up; telling the sessions");
                    for method in ["tools", "prompts", "resources"] {
                        daemon.announce(Message::notification(&format!("notifications/{method}/list_changed"), None));
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(server = %target.entry.name, error = %e, "a background start failed"),
            }
        });
    }

    /// Stops the instances whose server no configuration file holds any more (removed,
    /// or changed so its fingerprint differs): a remote session is ended with `DELETE`.
    async fn retire_unconfigured(&self) {
        let Some(configured) = off_the_runtime(|| self.config.configured()) else { return };
        for (key, inst) in self.pool.keyed_instances() {
            if inst.is_alive() && !configured.contains(&inst.identity.cache_key) {
                tracing::info!(server = %inst.identity.server, key = %inst.identity.key, "stopping an instance: its server left the configuration");
                self.pool.release(&inst, &key).await;
            }
        }
    }
}

/// Why the daemon exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// Stopped (`mcpx stop`, a signal).
    Stop,
    /// Drained for `mcpx upgrade`: re-execute this binary, the very file that was
    /// checked and probed (held open).
    Upgrade(Arc<Executable>),
}

/// The `unknown_server` error for `name`, with the closest names ("did you mean",
/// [`crate::suggest`]) and the names `config` has; for an entry
/// that does not parse, its `config` error instead.
pub(crate) fn unknown_server(config: &ResolvedConfig, name: &str) -> ApiError {
    // A bad entry, or (when the name is nowhere) a file that does not parse and may hold it.
    if let Some(error) = config.errors.get(name).or(config.file_errors.first()) {
        return ApiError::new(ErrorKind::Config, error.0.to_string());
    }
    let names: Vec<&str> = config.servers.keys().map(String::as_str).collect();
    let hint = if names.is_empty() {
        "no servers are configured here (see `mcpx ls`; configure them in .mcp.json or ~/.config/mcpx/config.json)"
            .to_owned()
    } else {
        format!("configured servers: {}", names.join(", "))
    };
    let dym = crate::suggest::did_you_mean(name, names.iter().copied());
    ApiError::new(ErrorKind::UnknownServer, format!("no server named `{name}`;{dym} {hint}"))
}

/// Handles list changes (re-read the schema, then tell the MCP clients) and exits
/// (counted as crashes when nobody asked for them) from instances.
async fn handle_events(daemon: Weak<Daemon>, mut rx: mpsc::UnboundedReceiver<(String, InstanceEvent)>) {
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
                    daemon.announce(Message::notification(&method, None));
                });
            }
            InstanceEvent::Exited { server, cache_key, crash } => {
                if let Some(error) = crash {
                    daemon.pool.record_crash(&server, &cache_key, error);
                }
                daemon.pool.notify_changed();
            }
        }
    }
}

/// Stops instances that are idle past their `idleTimeout` or whose `pid` caller
/// exited, and those whose server left the configuration. It sleeps until the pool's
/// next deadline ([`crate::pool::Pool::reap`]), a new instance, or at most
/// [`CONFIG_CHECK`] (the configuration has no watcher): an idle daemon wakes rarely
/// (`docs/profile.md`, "Idle").
async fn reap_idle(daemon: Weak<Daemon>) {
    let Some(placed) = daemon.upgrade().map(|d| d.pool.placed()) else { return };
    loop {
        let next = {
            let Some(daemon) = daemon.upgrade() else { return };
            let next = daemon.pool.reap().await;
            daemon.retire_unconfigured().await;
            next
        };
        let check = Instant::now() + CONFIG_CHECK;
        let at = next.map_or(check, |n| n.min(check));
        tokio::select! {
            () = tokio::time::sleep_until(at.into()) => {}
            () = placed.notified() => {}
        }
    }
}

/// How long an instance whose server left the configuration may run on with nothing
/// else waking the reaper.
const CONFIG_CHECK: Duration = Duration::from_secs(10);

/// Runs `f`, which reads files, so that a slow file (a network home directory, a huge
/// `~/.claude.json` being rewritten) holds up only its own request: on a multi-threaded
/// runtime the worker hands its other tasks to another thread first. Elsewhere (a
/// current-thread runtime, no runtime) `f` just runs.
pub(crate) fn off_the_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// The activity record in `state`, and the telemetry, with the settings of the user
/// config (or the daemon's `MCPX_CONFIG` file). Settings that cannot be read leave the
/// defaults (for telemetry: no export), and each says why (`status`, `doctor`).
fn open_activity(
    state: &mcpx_platform::fs::Dir,
    config: &ConfigCache,
    env: &HashMap<String, String>,
) -> (crate::activity::Activity, crate::telemetry::Telemetry) {
    let explicit = env.get("MCPX_CONFIG").map(PathBuf::from);
    let file = crate::config::settings_file(config.env(), explicit.as_deref());
    let (settings, problem) = match file.as_deref().map(crate::config::ActivitySettings::read) {
        Some(Ok(settings)) => (settings, None),
        Some(Err(e)) => (crate::config::ActivitySettings::default(), Some(e.to_string())),
        None => (crate::config::ActivitySettings::default(), None),
    };
    let activity = crate::activity::Activity::open(state, settings, Arc::new(env.clone()));
    if let Some(problem) = problem {
        tracing::warn!("{problem}; the activity record keeps its defaults");
        *lock(&activity.last_error) = Some(format!("{problem} (the defaults are used)"));
    }
    let telemetry = match file.as_deref().map(crate::config::OtelSettings::read) {
        Some(Err(e)) => crate::telemetry::Telemetry {
            problem: Some(format!("{e}; spans are not exported")),
            ..crate::telemetry::Telemetry::default()
        },
        Some(Ok(otel)) => crate::telemetry::Telemetry::open(&otel, env),
        None => crate::telemetry::Telemetry::open(&Default::default(), env),
    };
    (activity, telemetry)
}
