//! The pool: which instance serves a call, starting it when there is none.
//!
//! Today every server has one shared instance under the key `global`; the pools
//! issue generalises the key (scope) and the sharing. What already holds:
//! concurrent first calls for one key start exactly one process, and a start that
//! fails is reported to every caller that waited for it, without a second spawn.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::config::ServerEntry;
use crate::instance::{CallError, Instance, InstanceEvent, InstanceSpec, lock};
use crate::schema::SchemaCache;
use crate::transport::{LaunchSpec, Launcher};

/// One server as a request resolved it: its entry, identity and how to start it.
#[derive(Debug, Clone)]
pub struct Target {
    /// The entry from the caller's configuration.
    pub entry: ServerEntry,
    /// The fingerprint as written (no executable identity): the schema cache key.
    pub cache_key: String,
    /// The full fingerprint (with the resolved executable's identity): the instance key.
    pub fingerprint: String,
    /// How to start it, or why it cannot be started (command not found, ...).
    pub launch: Result<LaunchSpec, String>,
}

/// A live instance as `mcpx status` shows it.
#[derive(Debug, Clone)]
pub struct InstanceView {
    /// The instance.
    pub instance: Arc<Instance>,
}

#[derive(Debug)]
struct Slot {
    /// The server name the slot was first started under.
    server: String,
    /// Held while an instance is being started, so one start serves all waiters.
    starting: tokio::sync::Mutex<()>,
    current: Mutex<Option<Arc<Instance>>>,
    /// Counts failed starts; a waiter that sees it move returns the failure.
    failures: Mutex<(u64, Option<CallError>)>,
}

/// The ways to start an instance: under a supervisor (the default) or as the
/// daemon's own child (`supervised: false`).
#[derive(Clone)]
pub struct Launchers {
    /// The daemon's own child.
    pub direct: Arc<dyn Launcher>,
    /// Under `mcpx supervise`.
    pub supervised: Arc<dyn Launcher>,
}

/// All instances of the daemon, by fingerprint and key.
pub struct Pool {
    launchers: Launchers,
    schema: Arc<SchemaCache>,
    slots: Mutex<HashMap<(String, String), Arc<Slot>>>,
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
        Pool { launchers, schema, slots: Mutex::new(HashMap::new()), events }
    }

    /// Puts an adopted instance (a supervisor a previous daemon started) in its slot.
    pub fn adopt(&self, inst: Arc<Instance>) {
        let slot = self.slot(&inst.server, &inst.fingerprint, &inst.key);
        *lock(&slot.current) = Some(inst);
    }

    /// Records that the instance of (`server`, `fingerprint`, `key`) ended with
    /// `error` while no daemon watched it, so `status` shows it until the next start.
    pub fn record_failure(&self, server: &str, fingerprint: &str, key: &str, error: CallError) {
        let slot = self.slot(server, fingerprint, key);
        let mut failures = lock(&slot.failures);
        failures.0 += 1;
        failures.1 = Some(error);
    }

    /// The events channel instances report to.
    pub fn events(&self) -> mpsc::UnboundedSender<(String, InstanceEvent)> {
        self.events.clone()
    }

    fn slot(&self, server: &str, fingerprint: &str, key: &str) -> Arc<Slot> {
        lock(&self.slots)
            .entry((fingerprint.to_owned(), key.to_owned()))
            .or_insert_with(|| {
                Arc::new(Slot {
                    server: server.to_owned(),
                    starting: tokio::sync::Mutex::new(()),
                    current: Mutex::new(None),
                    failures: Mutex::new((0, None)),
                })
            })
            .clone()
    }

    /// The live instance for `target`, started (and its schema listed) if needed.
    ///
    /// Errors: the start failed (the error says why, with the server's exit status and
    /// stderr tail when it exited); it is also recorded in the schema cache so `ls`
    /// shows the server as `error`.
    pub async fn acquire(&self, target: &Target) -> Result<Arc<Instance>, CallError> {
        let key = "global";
        let slot = self.slot(&target.entry.name, &target.fingerprint, key);
        if let Some(inst) = live(&slot) {
            return Ok(inst);
        }
        let seen = lock(&slot.failures).0;
        let _starting = slot.starting.lock().await;
        if let Some(inst) = live(&slot) {
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
        match self.start(target, key).await {
            Ok(inst) => {
                *lock(&slot.current) = Some(inst.clone());
                Ok(inst)
            }
            Err(e) => {
                let mut failures = lock(&slot.failures);
                failures.0 += 1;
                failures.1 = Some(e.clone());
                self.schema.record_error(&target.cache_key, &target.entry.name, &e.to_string());
                Err(e)
            }
        }
    }

    async fn start(&self, target: &Target, key: &str) -> Result<Arc<Instance>, CallError> {
        let server = &target.entry.name;
        let spec = target.launch.clone().map_err(CallError::Launch)?;
        let options = &target.entry.options;
        tracing::info!(server = %server, fingerprint = %target.fingerprint, key, "starting server");
        let launcher = if spec.supervised { &self.launchers.supervised } else { &self.launchers.direct };
        let link = launcher.launch(spec).await.map_err(|e| CallError::Launch(e.to_string()))?;
        let pid = link.info.pid();
        let inst = Instance::start(
            InstanceSpec {
                server: server.clone(),
                fingerprint: target.fingerprint.clone(),
                cache_key: target.cache_key.clone(),
                key: key.to_owned(),
                max_message_bytes: usize::try_from(options.max_message_bytes).unwrap_or(usize::MAX),
            },
            link,
            options.start_timeout,
            self.events.clone(),
        )
        .await?;
        let version = inst.session().map(|s| s.protocol_version).unwrap_or_default();
        tracing::info!(server = %server, pid, protocol = %version, "server initialized");
        if let Err(e) = self.schema.refresh(&target.cache_key, &inst, options.start_timeout).await {
            tracing::warn!(server = %server, error = %e, "listing the server's schema failed");
            self.schema.record_error(&target.cache_key, server, &e);
        }
        Ok(inst)
    }

    /// Every live instance.
    pub fn instances(&self) -> Vec<Arc<Instance>> {
        let slots: Vec<Arc<Slot>> = lock(&self.slots).values().cloned().collect();
        slots.iter().filter_map(|s| lock(&s.current).clone()).collect()
    }

    /// Live instances whose fingerprint is `fingerprint`.
    pub fn instances_of(&self, fingerprint: &str) -> Vec<Arc<Instance>> {
        self.instances().into_iter().filter(|i| i.fingerprint == fingerprint && i.is_alive()).collect()
    }

    /// Stops the instances of `fingerprint` and forgets their failures, so the next
    /// call starts afresh. Returns how many were stopped.
    pub async fn stop_server(&self, fingerprint: &str) -> usize {
        let slots: Vec<Arc<Slot>> =
            lock(&self.slots).iter().filter(|((fp, _), _)| fp == fingerprint).map(|(_, s)| s.clone()).collect();
        let mut stopped = 0;
        for slot in slots {
            *lock(&slot.failures) = (0, None);
            let inst = lock(&slot.current).take();
            if let Some(inst) = inst {
                inst.terminate().await;
                stopped += 1;
            }
        }
        stopped
    }

    /// Stops the daemon's own children and, when `all`, every supervised instance too;
    /// other supervised instances are only detached (their supervisors keep the
    /// servers for the next daemon). Waits for what it stops.
    pub async fn stop_all(&self, all: bool) {
        let instances: Vec<Arc<Instance>> = {
            let slots = lock(&self.slots);
            slots.values().filter_map(|s| lock(&s.current).take()).collect()
        };
        let mut tasks = tokio::task::JoinSet::new();
        for inst in instances {
            if all || !inst.supervised() {
                tasks.spawn(async move { inst.terminate().await });
            }
        }
        while tasks.join_next().await.is_some() {}
    }

    /// Re-lists the schema of the live instance with this fingerprint (after a
    /// `list_changed`, or `mcpx refresh`). Returns false when none is live.
    pub async fn relist(&self, fingerprint: &str, timeout: Option<Duration>) -> Result<bool, String> {
        let Some(inst) = self.instances_of(fingerprint).into_iter().next() else {
            return Ok(false);
        };
        self.schema.refresh(&inst.cache_key, &inst, timeout).await.map(|_| true)
    }

    /// Failed starts with no live instance since, as (server, key, error).
    pub fn failures(&self) -> Vec<(String, String, CallError)> {
        let slots: Vec<((String, String), Arc<Slot>)> =
            lock(&self.slots).iter().map(|(k, s)| (k.clone(), s.clone())).collect();
        slots
            .into_iter()
            .filter(|(_, s)| live(s).is_none())
            .filter_map(|((_, key), s)| lock(&s.failures).1.clone().map(|e| (s.server.clone(), key, e)))
            .collect()
    }
}

fn live(slot: &Slot) -> Option<Arc<Instance>> {
    lock(&slot.current).clone().filter(|i| i.is_alive())
}
