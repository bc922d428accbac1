//! The pool (design: "Pools"): which instance serves a call, by server fingerprint
//! and pool key, starting one when there is none.
//!
//! - Concurrent first calls for one key start exactly one process; a failed start is
//!   reported to every caller that waited for it, without a second spawn.
//! - `exclusive` instances take one call at a time: a [`Lease`] holds the instance's
//!   only permit, and other callers queue in arrival order (tokio's semaphore is fair).
//!   One whose turn comes after the instance died gets a fresh instance.
//! - `max` counts a server's live instances across keys; at `max` the least recently
//!   used idle one is stopped, and with none idle callers wait (up to their deadline).
//! - Crashes and failed starts count per fingerprint: the first restart is immediate,
//!   later ones back off (1 s doubling to 30 s; a call in a backoff fails at once with
//!   the last error), and 5 within 60 s put the server in `crash-loop` until `mcpx
//!   restart` or 60 s without a failure.
//! - [`Pool::reap`] stops idle instances (`idleTimeout`; `global` instances with
//!   `min` ≥ 1 excepted) and those of `pid` keys whose process exited.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};

mod health;
mod target;

pub use self::health::Crashes;
use self::health::Health;
pub use self::target::{Target, Wait};
use crate::config::{ServerEntry, Sharing, TransportSpec};
use crate::instance::{CallError, Instance, InstanceEvent, InstanceSpec, LogBudget, Origin, State};
use crate::schema::SchemaCache;
use crate::scope::PoolKey;
use crate::sync::lock;
use crate::transport::{Launch, Launcher, Launchers};

/// How long a `lost` remote instance that no call replaces keeps its `status` row,
/// as an exited supervisor keeps its record: 10 minutes.
pub const LOST_ROW_KEEP: Duration = Duration::from_secs(600);
/// How often the reaper checks that the process of a `pid` pool key still runs.
const OWNER_CHECK: Duration = Duration::from_secs(1);

/// An instance lent to one request, the only way to one: the pool makes it for
/// [`crate::daemon::Daemon::lease`], and its end releases what the pool key's scope
/// says. For `exclusive` servers it holds the instance's only permit until it ends.
///
/// It ends with [`Lease::finish`], which waits until a `call`-scoped instance has
/// stopped, or when dropped, which stops such an instance in the background (a
/// request cancelled halfway still ends its instance). Either way, callers waiting for
/// a free instance are woken.
pub struct Lease {
    /// The instance.
    pub instance: Arc<Instance>,
    /// What the instance was leased for; its `entry` is the server's configuration.
    pub target: Arc<Target>,
    /// The pool key it was leased under.
    key: PoolKey,
    /// The pool's slots and wake-up, for the release.
    release: Release,
    permit: Option<OwnedSemaphorePermit>,
    /// [`Lease::finish`] ran: the drop has nothing left to do.
    ended: bool,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("instance", &self.instance.identity).field("key", &self.key).finish()
    }
}

impl Lease {
    /// The pool key the instance was leased under.
    pub fn key(&self) -> &PoolKey {
        &self.key
    }

    /// Ends the lease: a `call`-scoped instance is stopped (this waits for it), any
    /// other stays for the next request; callers waiting for an instance are woken.
    pub async fn finish(mut self) {
        self.ended = true;
        drop(self.permit.take());
        if self.key.is_call() {
            self.release.release(&self.instance, &self.key).await;
        } else {
            self.release.changed.notify_waiters();
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        // The permit first, so a woken waiter finds the instance free.
        drop(self.permit.take());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if self.key.is_call() => {
                let (release, instance, key) = (self.release.clone(), self.instance.clone(), self.key.clone());
                runtime.spawn(async move { release.release(&instance, &key).await });
            }
            _ => self.release.changed.notify_waiters(),
        }
    }
}

/// The slots by (fingerprint, pool key).
type Slots = HashMap<(String, PoolKey), Arc<Slot>>;

/// What a lease's end needs of the pool.
#[derive(Clone)]
struct Release {
    slots: Arc<Mutex<Slots>>,
    changed: Arc<Notify>,
}

impl Release {
    /// Stops `inst`, held under `key`, if it is still its slot's instance, forgets a
    /// `call` key's slot, and wakes waiting callers.
    async fn release(&self, inst: &Arc<Instance>, key: &PoolKey) {
        let slot = lock(&self.slots).get(&(inst.identity.fingerprint.clone(), key.clone())).cloned();
        let taken = slot.and_then(|slot| {
            let mut current = lock(&slot.current);
            if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, inst)) { current.take() } else { None }
        });
        if let Some(inst) = taken {
            inst.terminate().await;
        }
        // A `call` key is used once: forget its slot. (Other slots stay: one may be
        // starting an instance right now.)
        if key.is_call() {
            let mut slots = lock(&self.slots);
            let key = (inst.identity.fingerprint.clone(), key.clone());
            if slots.get(&key).is_some_and(|s| lock(&s.current).is_none() && s.starting.try_lock().is_ok()) {
                slots.remove(&key);
            }
        }
        self.changed.notify_waiters();
    }
}

#[derive(Debug)]
struct Slot {
    /// The server name the slot was first started under.
    server: String,
    /// The pool key.
    key: PoolKey,
    /// Held while an instance is being started, so one start serves all waiters.
    starting: tokio::sync::Mutex<()>,
    current: Mutex<Option<Arc<Instance>>>,
    /// Counts failed starts; a waiter that sees it move returns the failure.
    failures: Mutex<(u64, Option<CallError>)>,
    /// One permit for `exclusive` instances; shared ones never wait on it.
    exclusive: Arc<Semaphore>,
    /// Settings fixed when the slot's instance started.
    settings: Mutex<Settings>,
    /// Since when (as [`Pool::reap`] first saw it) the slot's instance is a `lost`
    /// remote one, whose row goes after [`LOST_ROW_KEEP`].
    lost_since: Mutex<Option<Instant>>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Settings {
    sharing: Sharing,
    idle_timeout: Option<Duration>,
    /// Exempt from idle reaping: the `global` instance of a server with `min` ≥ 1.
    keep_warm: bool,
}

impl Settings {
    /// The settings of an instance under `key` of a server with `options`.
    fn new(options: &crate::config::ServerOptions, key: &PoolKey) -> Settings {
        Settings {
            sharing: options.sharing,
            idle_timeout: options.idle_timeout,
            keep_warm: key.is_global() && options.min >= 1,
        }
    }
}

/// All instances of the daemon, by fingerprint and key.
pub struct Pool {
    launchers: Launchers,
    schema: Arc<SchemaCache>,
    /// Slots by (fingerprint, pool key).
    slots: Arc<Mutex<Slots>>,
    health: Mutex<HashMap<String, Health>>,
    /// What [`Pool::crashes`] says.
    crashes: Mutex<std::collections::BTreeMap<String, Crashes>>,
    /// Each server's log budget, by cache key, shared by its instances.
    log_budgets: Mutex<HashMap<String, Arc<LogBudget>>>,
    /// Notified when an instance becomes idle or goes away (callers waiting at `max`).
    changed: Arc<Notify>,
    /// Notified when an instance enters a slot: the reaper works out its next deadline
    /// again ([`Pool::reap`]).
    placed: Arc<Notify>,
    events: mpsc::UnboundedSender<(String, InstanceEvent)>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").finish_non_exhaustive()
    }
}

impl Pool {
    /// A pool that starts instances through `launchers` and keeps schemas in
    /// `schema`. Instance events (list changes, exits) are sent to `events`.
    pub fn new(
        launchers: Launchers,
        schema: Arc<SchemaCache>,
        events: mpsc::UnboundedSender<(String, InstanceEvent)>,
    ) -> Pool {
        Pool {
            launchers,
            schema,
            slots: Arc::new(Mutex::new(HashMap::new())),
            health: Mutex::new(HashMap::new()),
            crashes: Mutex::default(),
            log_budgets: Mutex::new(HashMap::new()),
            changed: Arc::new(Notify::new()),
            placed: Arc::new(Notify::new()),
            events,
        }
    }

    /// What wakes the reaper when an instance enters a slot (a permit is kept when it is
    /// not waiting yet).
    pub fn placed(&self) -> Arc<Notify> {
        self.placed.clone()
    }

    /// Puts an adopted instance (a supervisor a previous daemon started) in its slot
    /// under `key`, with the options of the configuration that defines it.
    pub fn adopt(&self, inst: Arc<Instance>, key: &PoolKey, options: &crate::config::ServerOptions) {
        let slot = self.slot(&inst.identity.server, &inst.identity.fingerprint, key);
        *lock(&slot.settings) = Settings::new(options, key);
        *lock(&slot.current) = Some(inst);
        self.placed.notify_one();
    }

    /// Records that the instance of (`server`, `fingerprint`, `key`) ended with
    /// `error` while no daemon watched it, so `status` shows it until the next start.
    pub fn record_failure(&self, server: &str, fingerprint: &str, key: &PoolKey, error: CallError) {
        let slot = self.slot(server, fingerprint, key);
        let mut failures = lock(&slot.failures);
        failures.0 += 1;
        failures.1 = Some(error);
    }

    /// The log budget of the server whose cache key is `cache_key`, which all its
    /// instances share.
    pub fn log_budget(&self, cache_key: &str) -> Arc<LogBudget> {
        lock(&self.log_budgets).entry(cache_key.to_owned()).or_default().clone()
    }

    /// The events channel instances report to.
    pub fn events(&self) -> mpsc::UnboundedSender<(String, InstanceEvent)> {
        self.events.clone()
    }

    /// Wakes callers waiting for an instance to become idle.
    pub fn notify_changed(&self) {
        self.changed.notify_waiters();
    }

    fn slot(&self, server: &str, fingerprint: &str, key: &PoolKey) -> Arc<Slot> {
        lock(&self.slots)
            .entry((fingerprint.to_owned(), key.clone()))
            .or_insert_with(|| {
                Arc::new(Slot {
                    server: server.to_owned(),
                    key: key.clone(),
                    starting: tokio::sync::Mutex::new(()),
                    current: Mutex::new(None),
                    failures: Mutex::new((0, None)),
                    exclusive: Arc::new(Semaphore::new(1)),
                    settings: Mutex::new(Settings::default()),
                    lost_since: Mutex::new(None),
                })
            })
            .clone()
    }

    /// Counts a crash or failed start of the server `server` whose cache key
    /// (fingerprint as written) is `fingerprint`.
    pub fn record_crash(&self, server: &str, fingerprint: &str, error: CallError) {
        let mut health = lock(&self.health);
        let h = health.entry(fingerprint.to_owned()).or_default();
        let was = h.in_crash_loop();
        let looping = h.record(error);
        if looping {
            tracing::warn!(fingerprint, failures = h.failures(), "server is in crash-loop");
        }
        let mut crashes = lock(&self.crashes);
        let counts = crashes.entry(server.to_owned()).or_default();
        counts.crashes += 1;
        counts.crash_loops += u64::from(looping && !was);
    }

    /// Crashes and failed starts, times a server went into `crash-loop`, and restarts,
    /// since the daemon started, by server name.
    pub fn crashes(&self) -> Vec<(String, Crashes)> {
        lock(&self.crashes).iter().map(|(server, c)| (server.clone(), *c)).collect()
    }

    /// Whether `fingerprint` is in `crash-loop` (5 failures within 60 s).
    pub fn in_crash_loop(&self, fingerprint: &str) -> bool {
        lock(&self.health).get_mut(fingerprint).is_some_and(Health::in_crash_loop)
    }

    /// Clears the crash count of `fingerprint` (`mcpx restart`).
    pub fn clear_crashes(&self, fingerprint: &str) {
        lock(&self.health).remove(fingerprint);
    }

    /// Fails fast while the server is in `crash-loop` or a restart backoff, with the last error.
    fn check_health(&self, fingerprint: &str, server: &str) -> Result<(), CallError> {
        lock(&self.health).get_mut(fingerprint).map_or(Ok(()), |h| h.check(server))
    }

    /// The instance for `target` under `key`, started (and its schema listed) if
    /// needed, and leased to one call: for an `exclusive` server the lease waits, in
    /// arrival order, until the instance is free. `wait` bounds the waiting, and `report`
    /// is called each time it starts waiting on something ([`Wait`]), so a caller can
    /// say what it waits for (`mcpx call`'s status line). The daemon's one way to it
    /// is [`crate::daemon::Daemon::lease`].
    ///
    /// Errors: the start failed (the error says why, with the server's exit status
    /// and stderr tail when it exited; it is also recorded in the schema cache so `ls`
    /// shows `error`); the server is in a backoff or `crash-loop`; or `wait` passed.
    pub(crate) async fn acquire(
        &self,
        target: &Arc<Target>,
        key: &PoolKey,
        wait: Option<Duration>,
        report: &(dyn Fn(Wait) + Send + Sync),
    ) -> Result<Lease, CallError> {
        // A wait past the clock's range is no deadline.
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        let slot = self.slot(&target.entry.name, &target.fingerprint, key);
        let mut instance = self.instance(target, &slot, deadline, report).await?;
        let permit = if lock(&slot.settings).sharing == Sharing::Exclusive {
            if slot.exclusive.available_permits() == 0 {
                report(Wait::Exclusive);
            }
            let acquire = slot.exclusive.clone().acquire_owned();
            let permit = match deadline {
                Some(d) => tokio::time::timeout_at(d.into(), acquire).await.map_err(|_| CallError::Busy(1))?,
                None => acquire.await,
            };
            let permit = permit.map_err(|_| CallError::Lost("the instance was closed".into()))?;
            // The instance may have died while this call waited its turn (its
            // supervisor killed, the server crashed under the call before it). The
            // permit is the slot's, not the instance's: the call keeps it and gets the
            // slot's next instance, started now if need be, with the usual backoff.
            if !instance.is_alive() {
                instance = self.instance(target, &slot, deadline, report).await?;
            }
            Some(permit)
        } else {
            None
        };
        let release = Release { slots: self.slots.clone(), changed: self.changed.clone() };
        Ok(Lease { instance, target: target.clone(), key: key.clone(), release, permit, ended: false })
    }

    async fn instance(
        &self,
        target: &Target,
        slot: &Arc<Slot>,
        deadline: Option<Instant>,
        report: &(dyn Fn(Wait) + Send + Sync),
    ) -> Result<Arc<Instance>, CallError> {
        if let Some(inst) = live(slot) {
            return Ok(inst);
        }
        let seen = lock(&slot.failures).0;
        let _starting = match slot.starting.try_lock() {
            Ok(guard) => guard,
            Err(_) => {
                // Another call is starting it: this one waits for that start.
                report(Wait::Starting);
                slot.starting.lock().await
            }
        };
        if let Some(inst) = live(slot) {
            return Ok(inst);
        }
        {
            let failures = lock(&slot.failures);
            if failures.0 != seen {
                if let Some(e) = &failures.1 {
                    return Err(e.clone());
                }
            }
        }
        self.check_health(&target.cache_key, &target.entry.name)?;
        self.make_room(target, deadline, report).await?;
        report(Wait::Starting);
        match self.start(target, &slot.key.to_string()).await {
            Ok(inst) => {
                *lock(&slot.settings) = Settings::new(&target.entry.options, &slot.key);
                // An instance that ended before it in the slot: this start is a restart.
                if lock(&slot.current).replace(inst.clone()).is_some() {
                    lock(&self.crashes).entry(target.entry.name.clone()).or_default().restarts += 1;
                }
                self.placed.notify_one();
                Ok(inst)
            }
            Err(e) => {
                {
                    let mut failures = lock(&slot.failures);
                    failures.0 += 1;
                    failures.1 = Some(e.clone());
                }
                // A missing login is not a crash: no backoff or `crash-loop` outlasts
                // the login that fixes it.
                if !matches!(&e, CallError::Transport(t) if t.needs_login()) {
                    self.record_crash(&target.entry.name, &target.cache_key, e.clone());
                }
                self.schema.record_error(&target.cache_key, &target.entry.name, &e.to_string());
                Err(e)
            }
        }
    }

    /// At `max` live instances of the server, stops the least recently used idle one,
    /// or waits for one to become idle until `deadline`.
    async fn make_room(
        &self,
        target: &Target,
        deadline: Option<Instant>,
        report: &(dyn Fn(Wait) + Send + Sync),
    ) -> Result<(), CallError> {
        let max = target.entry.options.max.max(1) as usize;
        let mut reported = false;
        loop {
            let changed = self.changed.notified();
            let live: Vec<(Arc<Slot>, Arc<Instance>)> =
                self.slots_of(&target.fingerprint).into_iter().filter_map(|s| live(&s).map(|i| (s, i))).collect();
            if live.len() < max {
                return Ok(());
            }
            let idle = live
                .iter()
                .filter(|(s, i)| i.in_flight() == 0 && s.exclusive.available_permits() == 1)
                .max_by_key(|(_, i)| i.idle_for());
            if let Some((slot, inst)) = idle {
                tracing::info!(server = %inst.identity.server, key = %inst.identity.key, "at max instances: stopping the least recently used idle one");
                lock(&slot.current).take();
                inst.terminate().await;
                continue;
            }
            if !std::mem::replace(&mut reported, true) {
                report(Wait::Full(max));
            }
            let Some(deadline) = deadline else {
                changed.await;
                continue;
            };
            if tokio::time::timeout_at(deadline.into(), changed).await.is_err() {
                return Err(CallError::Busy(max));
            }
        }
    }

    /// Starts an instance of `target` under `key`; a sandboxed server's failure says
    /// what to know of its sandbox ([`CallError::Confined`]).
    async fn start(&self, target: &Target, key: &str) -> Result<Arc<Instance>, CallError> {
        let started = self.spawn_and_initialize(target, key).await;
        match (&target.entry.options.sandbox, started) {
            (Some(sandbox), Err(error)) if !matches!(error, CallError::Transport(_)) => {
                let note = crate::sandbox::failure_note(sandbox, &target.entry);
                Err(CallError::Confined { error: Box::new(error), note })
            }
            (_, started) => started,
        }
    }

    async fn spawn_and_initialize(&self, target: &Target, key: &str) -> Result<Arc<Instance>, CallError> {
        let server = &target.entry.name;
        let options = &target.entry.options;
        tracing::info!(server = %server, fingerprint = %target.fingerprint, key, "starting server");
        let launch: Launch = target.launch.clone().map_err(CallError::Launch)?.with_key(key);
        let identity = launch.identity().clone();
        let mut link = self.launchers.launch(launch).await.map_err(|e| CallError::Launch(e.to_string()))?;
        let pid = link.info.pid();
        let spec = InstanceSpec {
            log_budget: self.log_budget(&identity.cache_key),
            identity,
            max_message_bytes: usize::try_from(options.max_message_bytes).unwrap_or(usize::MAX),
            origin: origin(&target.entry),
            known: self.schema.known_era(&target.cache_key),
        };
        // A remote session a previous daemon kept is taken up without a new `initialize`.
        let resumed = link.resumed.take().and_then(|json| serde_json::from_str(&json).ok());
        // The supervised link of a new instance never holds an era; a remote one
        // neither (a modern remote server has no session to take up).
        let (inst, how) = match resumed {
            Some(session) => {
                (Instance::resume(spec, link, session, self.events.clone()), "server's kept session resumed")
            }
            None => {
                (Instance::start(spec, link, options.start_timeout, self.events.clone()).await?, "server initialized")
            }
        };
        if let Some(context) = &target.context {
            inst.set_context(context.clone());
        }
        let version = inst.session().map(|s| s.protocol_version).unwrap_or_default();
        let era = if inst.era().is_some_and(|e| e.is_modern()) { "modern" } else { "legacy" };
        tracing::info!(server = %server, key, pid, protocol = %version, era, "{how}");
        if let Err(e) = self.schema.refresh(&target.cache_key, &inst, options.start_timeout).await {
            tracing::warn!(server = %server, error = %e, "listing the server's schema failed");
            self.schema.record_error(&target.cache_key, server, &e);
        }
        Ok(inst)
    }

    fn slots_of(&self, fingerprint: &str) -> Vec<Arc<Slot>> {
        lock(&self.slots).iter().filter(|((fp, _), _)| fp == fingerprint).map(|(_, s)| s.clone()).collect()
    }

    /// Every instance the pool holds (live or ended but not yet replaced).
    pub fn instances(&self) -> Vec<Arc<Instance>> {
        self.keyed_instances().into_iter().map(|(_, inst)| inst).collect()
    }

    /// Every instance the pool holds, with its pool key.
    pub fn keyed_instances(&self) -> Vec<(PoolKey, Arc<Instance>)> {
        let slots: Vec<Arc<Slot>> = lock(&self.slots).values().cloned().collect();
        slots.iter().filter_map(|s| lock(&s.current).clone().map(|inst| (s.key.clone(), inst))).collect()
    }

    /// Live instances whose fingerprint is `fingerprint`, with their pool keys.
    pub fn instances_of(&self, fingerprint: &str) -> Vec<(PoolKey, Arc<Instance>)> {
        self.keyed_instances()
            .into_iter()
            .filter(|(_, i)| i.identity.fingerprint == fingerprint && i.is_alive())
            .collect()
    }

    /// Stops the instances of `fingerprint` (those of `key` only, when given) and
    /// forgets their failures, so the next call starts afresh. Returns how many were stopped.
    pub async fn stop_server(&self, fingerprint: &str, key: Option<&PoolKey>) -> usize {
        let mut stopped = 0;
        for slot in self.slots_of(fingerprint).into_iter().filter(|s| key.is_none_or(|k| *k == s.key)) {
            *lock(&slot.failures) = (0, None);
            let inst = lock(&slot.current).take();
            if let Some(inst) = inst {
                inst.terminate().await;
                stopped += 1;
            }
        }
        self.notify_changed();
        stopped
    }

    /// Stops one instance, held under `key`, now, as a `call`-scoped lease's end does.
    pub async fn release(&self, inst: &Arc<Instance>, key: &PoolKey) {
        Release { slots: self.slots.clone(), changed: self.changed.clone() }.release(inst, key).await;
    }

    /// Stops instances idle for their `idleTimeout` (not `global` ones kept warm by
    /// `min`), and those of `pid` keys whose process exited. Returns when it must run
    /// again: the earliest idle deadline, a lost row's removal, or a second (`OWNER_CHECK`) from
    /// now while a `pid` key's process is watched; `None` when nothing is due.
    pub async fn reap(&self) -> Option<Instant> {
        let slots: Vec<Arc<Slot>> = lock(&self.slots).values().cloned().collect();
        let keep = lost_row_keep();
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        let mut due = |at: Instant| next = Some(next.map_or(at, |n| n.min(at)));
        for slot in slots {
            if let Some(since) = forget_lost(&slot, keep) {
                due(since + keep);
            }
            let Some(inst) = live(&slot) else { continue };
            let settings = *lock(&slot.settings);
            let busy = inst.in_flight() > 0 || slot.exclusive.available_permits() == 0;
            let idle = settings.idle_timeout.is_some_and(|t| inst.idle_for() >= t) && !settings.keep_warm;
            let owner = slot.key.owner_pid();
            let owner_gone =
                owner.is_some_and(|pid| mcpx_platform::liveness(pid, None) != mcpx_platform::Liveness::Running);
            if (idle && !busy) || owner_gone {
                let why = if owner_gone { "its caller process exited" } else { "idle for idleTimeout" };
                tracing::info!(server = %inst.identity.server, key = %inst.identity.key, "stopping an instance: {why}");
                self.release(&inst, &slot.key).await;
                continue;
            }
            // A busy instance is used until at least now, so its idle time starts later.
            if let (Some(t), false) = (settings.idle_timeout, settings.keep_warm) {
                due(if busy { now + t } else { now + t.saturating_sub(inst.idle_for()) });
            }
            if owner.is_some() {
                due(now + OWNER_CHECK);
            }
        }
        next
    }

    /// Stops the daemon's own children and, when `all`, every supervised and remote
    /// instance too; the others are only detached (supervisors keep their servers,
    /// remote sessions stay kept, for the next daemon, each said in the log with what
    /// becomes of it). Waits for what it stops.
    pub async fn stop_all(&self, all: bool) {
        let instances: Vec<Arc<Instance>> = {
            let slots = lock(&self.slots);
            slots.values().filter_map(|s| lock(&s.current).take()).collect()
        };
        let mut tasks = tokio::task::JoinSet::new();
        for inst in instances {
            if all || !inst.outlives_daemon() {
                tasks.spawn(async move { inst.terminate().await });
            } else if let (Some(url), Some(handover)) = (&inst.info.remote, *lock(&inst.info.handover)) {
                // Said here, before the daemon exits or re-executes: the link's own
                // task may never run again.
                tracing::info!(server = %inst.identity.server, key = %inst.identity.key, url = %url, "{handover}");
            }
        }
        while tasks.join_next().await.is_some() {}
    }

    /// Re-lists the schema of the live instance with this fingerprint (after a
    /// `list_changed`, or `mcpx refresh`): one of them, or, when the server's lists
    /// are `cacheScope: "private"` (kept per instance's pool key), each of them.
    /// Returns false when none is live.
    pub async fn relist(&self, fingerprint: &str, timeout: Option<Duration>) -> Result<bool, String> {
        let instances = self.instances_of(fingerprint);
        let Some((_, first)) = instances.first() else { return Ok(false) };
        let listed = self.schema.refresh(&first.identity.cache_key, first, timeout).await?;
        if listed.private {
            for (_, inst) in &instances[1..] {
                self.schema.refresh(&inst.identity.cache_key, inst, timeout).await?;
            }
        }
        Ok(true)
    }

    /// Failed starts with no live instance since, as (server, key, error).
    pub fn failures(&self) -> Vec<(String, PoolKey, CallError)> {
        let slots: Vec<Arc<Slot>> = lock(&self.slots).values().cloned().collect();
        slots
            .into_iter()
            .filter(|s| live(s).is_none())
            .filter_map(|s| lock(&s.failures).1.clone().map(|e| (s.server.clone(), s.key.clone(), e)))
            .collect()
    }
}

/// Takes a `lost` remote instance out of its slot once it has been lost for `keep`,
/// so its `status` row goes (a next call starts a new instance either way).
fn forget_lost(slot: &Slot, keep: Duration) -> Option<Instant> {
    let mut current = lock(&slot.current);
    let mut since = lock(&slot.lost_since);
    let lost = current.as_ref().is_some_and(|i| i.info.remote.is_some() && i.state() == State::Lost);
    if !lost {
        *since = None;
        return None;
    }
    if since.get_or_insert_with(Instant::now).elapsed() >= keep {
        if let Some(inst) = current.take() {
            tracing::info!(server = %inst.identity.server, key = %inst.identity.key, "removed the row of a lost remote instance after {}s", keep.as_secs());
        }
        *since = None;
    }
    *since
}

/// [`LOST_ROW_KEEP`], or with the `test-hooks` feature `MCPX_TEST_LOST_KEEP_MS`.
fn lost_row_keep() -> Duration {
    #[cfg(feature = "test-hooks")]
    if let Some(ms) = std::env::var("MCPX_TEST_LOST_KEEP_MS").ok().and_then(|v| v.parse().ok()) {
        return Duration::from_millis(ms);
    }
    LOST_ROW_KEEP
}

fn live(slot: &Slot) -> Option<Arc<Instance>> {
    lock(&slot.current).clone().filter(|i| i.is_alive())
}

/// Where `entry` comes from, as written (its URL is the link's own, also as written).
fn origin(entry: &ServerEntry) -> Origin {
    let command = match &entry.transport {
        TransportSpec::Stdio { command, args, .. } => {
            Some(std::iter::once(command).chain(args).map(String::as_str).collect::<Vec<_>>().join(" "))
        }
        TransportSpec::Remote { .. } => None,
    };
    Origin { source: Some(entry.source.clone()), command, sandbox: entry.options.sandbox.as_ref().map(|s| s.written()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_instances_of_one_server_share_one_log_budget() {
        let fx = crate::testing::Fixture::new(&[]);
        let pool = &fx.daemon.pool;
        assert!(Arc::ptr_eq(&pool.log_budget("a"), &pool.log_budget("a")), "one budget per server");
        assert!(!Arc::ptr_eq(&pool.log_budget("a"), &pool.log_budget("b")), "each server its own");
    }

    /// A call waiting for an exclusive instance whose instance dies meanwhile gets a
    /// fresh one when its turn comes, not the dead one.
    #[tokio::test]
    async fn a_waiter_of_an_exclusive_instance_that_died_gets_a_fresh_one() {
        let fx = crate::testing::Fixture::new(&[("fake", serde_json::json!({ "sharing": "exclusive" }))]);
        let d = fx.daemon.clone();
        let config = d.resolve_for(&fx.caller()).unwrap();
        let entry = d.server(&config, "fake").unwrap();
        let target = d.targets.target(entry).unwrap();
        let key = d.targets.pool_key(entry, &fx.caller());
        let first = d.pool.acquire(&target, &key, None, &|_| {}).await.unwrap();
        let (queued_tx, queued) = tokio::sync::oneshot::channel();
        let queued_tx = Mutex::new(Some(queued_tx));
        let waiter = tokio::spawn({
            let (d, target, key) = (d.clone(), target.clone(), key.clone());
            async move {
                let report = move |w: Wait| {
                    if matches!(w, Wait::Exclusive) {
                        if let Some(tx) = lock(&queued_tx).take() {
                            let _ = tx.send(());
                        }
                    }
                };
                d.pool.acquire(&target, &key, Some(Duration::from_secs(10)), &report).await
            }
        });
        queued.await.unwrap();
        let exit = mcpx_proto::Message::request("1", "tools/call", Some(r#"{"name":"exit","arguments":{}}"#));
        assert!(first.instance.request(exit, Some(Duration::from_secs(10))).await.is_err());
        assert!(!first.instance.is_alive());
        drop(first);
        let lease = waiter.await.unwrap().unwrap();
        assert!(lease.instance.is_alive(), "the waiter got the dead instance");
        assert_eq!(fx.server.count("launch"), 2);
    }
}
