//! What a starting daemon takes over from the one before it (design: "Adopt or
//! reap"): the supervisors left in `<runtime>/sup/` (adopted, reaped, or left running
//! as `incompatible` until `mcpx restart` replaces them), the remote sessions kept in
//! `<state>/remote/`, and the warm starts of servers with `min` ≥ 1.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use mcpx_platform::fs::Dir;
use mcpx_proto::attach::Record;

use crate::config::{Scope, ServerEntry, ServerOptions};
use crate::daemon::Daemon;
use crate::instance::{CallError, ERROR_TAIL_BYTES, Instance, InstanceSpec, Known, ServerSession};
use crate::paths::{DirError, REMOTE};
use crate::policy;
use crate::scope::PoolKey;
use crate::sync::lock;
use crate::transport::{self, Adoption};

/// How long each step of attaching to a supervisor found at start may take.
const ADOPT_DEADLINE: Duration = Duration::from_secs(3);

/// How long an adopted server with no stored session may take to restart.
const ADOPT_RESTART_TIMEOUT: Duration = Duration::from_secs(60);

/// Adopts or reaps every supervisor a previous daemon left, each with its own
/// deadline so one wedged supervisor cannot stall the start. Call before serving
/// requests.
pub async fn adopt_all(d: &Arc<Daemon>) {
    let sup = match d.dirs.sup(false) {
        Ok(sup) => sup,
        Err(DirError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            tracing::error!("adopting no supervisor: {e}");
            return;
        }
    };
    let records = transport::supervisor_records(&sup);
    if records.is_empty() {
        return;
    }
    let boot_id = mcpx_platform::boot_id().unwrap_or_default();
    let known = known_fingerprints(d);
    let mut tasks = tokio::task::JoinSet::new();
    for record in records {
        let d = d.clone();
        let boot_id = boot_id.clone();
        let known = known.clone();
        let sup = sup.clone();
        tasks.spawn(async move {
            // The deadline bounds every attach step; a restart after it has the
            // server's own start timeout.
            adopt_one(&d, &sup, record, &boot_id, &known, ADOPT_DEADLINE).await;
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// Adopts the supervisor of `rec`, or cleans up after it: a record from before the
/// last reboot is removed; a server that exited while unattached is recorded as a
/// failure; one no known configuration defines any more is stopped; an incompatible
/// supervisor is left running; a dead one is reaped (`transport::adopt`).
async fn adopt_one(
    d: &Daemon,
    sup: &Dir,
    rec: Record,
    boot_id: &str,
    known: &HashMap<String, ServerOptions>,
    deadline: Duration,
) {
    let server = rec.identity.server.clone();
    let options = known.get(&rec.identity.fingerprint);
    let max_bytes = options.map_or_else(|| ServerOptions::default().max_message_bytes, |o| o.max_message_bytes);
    let max = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let key = PoolKey::parse(&rec.identity.key);
    let mut link = match transport::adopt(sup, &rec, boot_id, max, deadline).await {
        Adoption::Running(link) => link,
        Adoption::Exited { exit, info } => {
            let stderr_tail = info.stderr_tail(ERROR_TAIL_BYTES);
            let error = CallError::Exited { exit, stderr_tail };
            d.pool.record_failure(&rec.identity.server, &rec.identity.fingerprint, &key, error);
            return;
        }
        Adoption::Incompatible(theirs) => {
            lock(&d.incompatible).push((rec, theirs));
            return;
        }
        Adoption::Nothing => return,
    };
    let spec = InstanceSpec {
        identity: rec.identity.clone(),
        max_message_bytes: max,
        log_budget: d.pool.log_budget(&rec.identity.cache_key),
        origin: Default::default(),
        known: Known::Unknown,
    };
    // A legacy server's session, or a modern server's era (attach protocol 1.1): both
    // resume without a handshake.
    let kept = link.resumed.take().or_else(|| link.era.take());
    let session = kept.and_then(|s| serde_json::from_str::<ServerSession>(&s).ok());
    let epoch = link.epoch;
    let Some(options) = options else {
        // Stopped as it is: a server no configuration defines is not restarted first.
        tracing::info!(server, "no known configuration defines this server any more: stopping it");
        Instance::resume(spec, link, session.unwrap_or_else(dead_session), d.pool.events()).terminate().await;
        return;
    };
    let inst = match session {
        Some(session) => Instance::resume(spec, link, session, d.pool.events()),
        None => {
            tracing::info!(server, "the previous daemon stored no session: restarting the server");
            let inst = Instance::resume(spec, link, dead_session(), d.pool.events());
            if let Err(e) = inst.restart(Some(ADOPT_RESTART_TIMEOUT)).await {
                tracing::warn!(server, error = %e, "restarting an adopted server failed");
                inst.terminate().await;
                return;
            }
            inst
        }
    };
    tracing::info!(server, pid = inst.info.pid(), epoch, "adopted a running server");
    d.pool.adopt(inst, &key, options);
}

/// Stops the incompatible supervisors of the server with `cache_key` (they cannot be
/// asked, so their processes are signalled after their start times are checked) and
/// removes their files. Returns how many there were.
pub async fn replace_incompatible(d: &Daemon, cache_key: &str) -> usize {
    let gone: Vec<Record> = {
        let mut list = lock(&d.incompatible);
        let (gone, keep): (Vec<_>, Vec<_>) = list.drain(..).partition(|(r, _)| r.identity.cache_key == cache_key);
        *list = keep;
        gone.into_iter().map(|(r, _)| r).collect()
    };
    match d.dirs.sup(false) {
        Ok(sup) => gone.iter().for_each(|rec| transport::stop_incompatible(rec, &sup)),
        Err(e) => tracing::error!("stopping no incompatible supervisor: {e}"),
    }
    gone.len()
}

/// Starts the `global` instance of every server that a known configuration file
/// gives `min` ≥ 1, in the background (design: `min` starts the instance with the
/// daemon and exempts it from idle reaping).
pub fn start_warm(d: &Arc<Daemon>) {
    for entry in d.known_entries().0 {
        let o = &entry.options;
        if !policy::server_offered(&entry) || o.min == 0 || o.scope != Scope::Global {
            continue;
        }
        let Ok(target) = d.targets.target(&entry) else { continue };
        let d = d.clone();
        tokio::spawn(async move {
            let name = target.entry.name.clone();
            match d.lease_as(&target, &PoolKey::Global, target.entry.options.start_timeout).await {
                Ok(_) => tracing::info!(server = %name, "started (min ≥ 1)"),
                Err(e) => tracing::warn!(server = %name, error = %e, "starting a server with min ≥ 1 failed"),
            }
        });
    }
}

/// Takes up the remote sessions a previous daemon kept, as [`adopt_all`] adopts
/// supervisors: each becomes a live instance again (no `initialize`), so `status`
/// shows it and `stop --all` or its server leaving the configuration ends it with
/// `DELETE`. A session whose server no configuration holds any more is forgotten (its
/// headers, needed for a `DELETE`, went with the entry).
pub fn take_up_remote_sessions(d: &Arc<Daemon>) {
    let Ok(remote) = d.dirs.state.subdir(REMOTE, false) else { return };
    let kept = transport::kept_remotes(&remote);
    if kept.is_empty() {
        return;
    }
    let (known, complete) = d.known_entries();
    let entries: HashMap<String, ServerEntry> = known.into_iter().map(|e| (e.cache_key(), e)).collect();
    for session in kept {
        let Some(entry) = entries.get(&session.fingerprint) else {
            if complete {
                tracing::info!(file = %remote.join(&session.name).display(), "forgetting a kept remote session: its server is no longer configured");
                let _ = remote.remove(&session.name);
            }
            continue;
        };
        let Ok(target) = d.targets.target(entry) else { continue };
        let d = d.clone();
        tokio::spawn(async move {
            let timeout = target.entry.options.start_timeout;
            if let Err(e) = d.lease_as(&target, &PoolKey::parse(&session.key), timeout).await {
                tracing::warn!(server = %target.entry.name, error = %e, "taking up a kept remote session failed");
            }
        });
    }
}

/// The fingerprints every known configuration file defines, with their options, for
/// deciding which adopted supervisors are still wanted.
fn known_fingerprints(d: &Daemon) -> HashMap<String, ServerOptions> {
    let mut set = HashMap::new();
    for entry in d.known_entries().0 {
        if let Ok(target) = d.targets.target(&entry) {
            set.insert(target.fingerprint.clone(), entry.options);
        }
    }
    set
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
