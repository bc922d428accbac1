//! The activity record (`mcpx activity`; `docs/api.md`, "Activity"): one entry per
//! request a caller sent a server through the daemon (`tools/call`, `prompts/get`,
//! `resources/read`, `completion/complete`), refused or not, per request a server sent
//! the caller during one, and per pin event; with when, how long, by which path and
//! client, to which server and instance, and how it ended. Arguments and results are
//! kept only when the settings say so ([`ActivitySettings::arguments`]), secrets masked
//! ([`redact`]).
//!
//! Entries go to an embedded database in the state directory ([`store`]: two
//! generations of a `persy` file in `activity/`, 0600), written by a thread of its own:
//! [`Activity::record`] only queues the entry, so a slow or full disk never delays a
//! call. A queue that is full drops the entry, and a write that fails is counted; both
//! show in `status`. The record is bounded by age ([`ActivitySettings::keep`]) and by
//! size ([`ActivitySettings::max_bytes`], what its files take on disk): the oldest
//! generation goes when the newer one fills its half.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use mcpx_config::ActivitySettings;
use mcpx_platform::fs::Dir;

pub use crate::api::activity::Entry;
use crate::sync::lock;

pub mod redact;
pub mod store;

use store::Store;

/// Entries waiting for the writer, at most; more are dropped (and counted).
const QUEUE: usize = 8192;

/// The free space a batch leaves on the record's file system, at least, in bytes.
const ROOM: u64 = 256 << 10;

/// How long the writer gathers entries before it writes them, in one transaction (a
/// commit syncs the disk, so under load one per this is enough).
const GATHER: Duration = Duration::from_millis(100);

/// Who sent a request and by which path, for the activity record
/// ([`crate::activity::Entry::path`] and [`crate::activity::Entry::client`]).
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// The path: `shell`, `exec`, `serve`, `/mcp/<server>`, ...
    pub path: String,
    /// The client: `name version` of an MCP client, `shell pid:N /dir` of the shell.
    pub client: String,
    /// The MCP revision an MCP client's session speaks, for its spans
    /// (`mcp.protocol.version`); `None` for the shell.
    pub protocol: Option<String>,
}

/// Which entries [`Activity::list`] returns.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this server's.
    pub server: Option<String>,
    /// Only this tool's, prompt's or URI's.
    pub name: Option<String>,
    /// Only those whose client contains this.
    pub client: Option<String>,
    /// Only those that did not end `ok`.
    pub errors: bool,
    /// Only those that took at least this long, microseconds.
    pub slower_than_us: Option<u64>,
    /// Only those started at or after this, milliseconds since the Unix epoch.
    pub since_ms: Option<u64>,
    /// Only those started before this, milliseconds since the Unix epoch.
    pub until_ms: Option<u64>,
    /// Only those after the entry of this id, oldest first (a follower's next page).
    pub after_id: Option<u64>,
    /// Only the entry of this id.
    pub id: Option<u64>,
    /// The newest this many (with `after_id`, the oldest), at most; 0: all.
    pub limit: usize,
}

/// One entry on its way to the writer: with kept arguments or result, the templates of
/// its server's entry, whose values are masked ([`redact::Redactor::keep`]).
#[derive(Debug)]
pub struct Pending {
    /// The entry; its `arguments` and `result` as sent, before masking and cutting.
    pub entry: Entry,
    /// The server entry's templates ([`mcpx_config::ServerEntry::templates`]).
    pub templates: Vec<String>,
}

/// The record: the queue to its writer, the database, and what went wrong.
#[derive(Debug)]
pub struct Activity {
    /// The settings it was opened with.
    pub settings: ActivitySettings,
    queue: Option<SyncSender<Pending>>,
    store: Option<Arc<RwLock<Option<Store>>>>,
    /// The state directory, to open a closed store again.
    state: Option<Dir>,
    /// Entries the full queue dropped.
    pub dropped: Arc<AtomicU64>,
    /// Entries waiting for the writer.
    pub queued: Arc<AtomicU64>,
    /// Writes that failed.
    pub failed: Arc<AtomicU64>,
    /// Why the last write failed, or the record could not be opened.
    pub last_error: Arc<Mutex<Option<String>>>,
    /// The writer, joined on drop: what was queued is written before the record closes.
    writer: Option<(std::thread::JoinHandle<()>, Mutex<Receiver<()>>)>,
}

/// How long a closing record waits for its writer to write what is queued.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

impl Drop for Activity {
    fn drop(&mut self) {
        self.queue = None;
        let Some((writer, done)) = self.writer.take() else { return };
        // The writer drops its end when it returns; one stuck on a disk is left behind
        // rather than holding the daemon's exit.
        match done.into_inner().unwrap_or_else(PoisonError::into_inner).recv_timeout(CLOSE_WAIT) {
            Err(RecvTimeoutError::Timeout) => tracing::warn!("the activity writer did not finish; entries may be lost"),
            _ => {
                let _ = writer.join();
            }
        }
    }
}

/// What a panic said.
fn panicked(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("a panic")
}

/// The store behind its lock, even after a writer panicked holding it.
fn read(store: &RwLock<Option<Store>>) -> RwLockReadGuard<'_, Option<Store>> {
    store.read().unwrap_or_else(PoisonError::into_inner)
}

fn write(store: &RwLock<Option<Store>>) -> RwLockWriteGuard<'_, Option<Store>> {
    store.write().unwrap_or_else(PoisonError::into_inner)
}

impl Activity {
    /// The record in `state` (the open state directory), its writer started, masking
    /// with `env` (the daemon's environment). A record that cannot be opened says why
    /// in `last_error`, and the writer tries again at each batch: calls go on. With
    /// `settings.enabled` false it is off, and the file is not opened.
    pub fn open(state: &Dir, settings: ActivitySettings, env: Arc<HashMap<String, String>>) -> Activity {
        let last_error = Arc::new(Mutex::new(None));
        if !settings.enabled {
            return Activity::off(settings, last_error);
        }
        // One that cannot be opened now (a daemon being replaced still holds it) is
        // opened by the writer at its first batch.
        let store = match Store::open(state) {
            Ok(store) => Arc::new(RwLock::new(Some(store))),
            Err(e) => {
                tracing::warn!(error = %e, "cannot open the activity record yet");
                *lock(&last_error) = Some(format!("cannot open the activity record: {e}"));
                Arc::new(RwLock::new(None))
            }
        };
        let (queue, entries) = std::sync::mpsc::sync_channel(QUEUE);
        let (failed, writer_error) = (Arc::new(AtomicU64::new(0)), last_error.clone());
        let queued = Arc::new(AtomicU64::new(0));
        let last_id = read(&store).as_ref().map_or(0, Store::last_id);
        let writer = Writer {
            last_id,
            store: store.clone(),
            state: state.clone(),
            failed: failed.clone(),
            queued: queued.clone(),
            last_error: writer_error,
            settings: settings.clone(),
            redactor: redact::Redactor::new(state.clone(), env),
        };
        let (finished, done) = std::sync::mpsc::channel::<()>();
        let spawned = std::thread::Builder::new().name("mcpx-activity".into()).spawn(move || {
            let _finished = finished;
            writer.run(entries);
        });
        let writer = match spawned {
            Ok(writer) => (writer, Mutex::new(done)),
            Err(e) => {
                *lock(&last_error) = Some(format!("cannot start the activity writer: {e}"));
                return Activity::off(settings, last_error);
            }
        };
        Activity {
            settings,
            state: Some(state.clone()),
            queue: Some(queue),
            store: Some(store),
            dropped: Arc::default(),
            queued,
            failed,
            last_error,
            writer: Some(writer),
        }
    }

    fn off(settings: ActivitySettings, last_error: Arc<Mutex<Option<String>>>) -> Activity {
        Activity {
            settings,
            state: None,
            queue: None,
            store: None,
            dropped: Arc::default(),
            queued: Arc::default(),
            failed: Arc::default(),
            last_error,
            writer: None,
        }
    }

    /// Whether entries are recorded (the record is on, and open).
    pub fn on(&self) -> bool {
        self.queue.is_some()
    }

    /// Whether entries keep their arguments and results.
    pub fn keeps_arguments(&self) -> bool {
        self.on() && self.settings.arguments
    }

    /// Queues `pending` for the writer; never waits. A full queue drops it (counted).
    pub fn record(&self, pending: Pending) {
        let Some(queue) = &self.queue else { return };
        // Counted first: the writer may take it before `try_send` returns.
        self.queued.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = queue.try_send(pending) {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            if let TrySendError::Full(_) = e {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The entries `filter` keeps, newest first.
    ///
    /// Errors: the record cannot be read (the message says why).
    pub fn list(&self, filter: &Filter) -> Result<Vec<Entry>, String> {
        let Some(store) = &self.store else { return Ok(Vec::new()) };
        self.open_again(store);
        let store = read(store);
        let Some(store) = store.as_ref() else { return Err(self.closed()) };
        let from = filter.since_ms.map_or(0, |ms| ms << 20).max(filter.after_id.map_or(0, |id| id.saturating_add(1)));
        let until = filter.until_ms.map_or(u64::MAX, |ms| ms << 20);
        let (from, until) = match filter.id {
            Some(id) => (id, id.saturating_add(1)),
            None => (from, until),
        };
        let mut found = Vec::new();
        if from >= until {
            return Ok(found);
        }
        // A follower reads forward from where it was; everyone else, newest first.
        let scanned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            store.scan(from, until, filter.after_id.is_some(), &mut |json| {
                if let Ok(entry) = serde_json::from_slice::<Entry>(json) {
                    if (from..until).contains(&entry.id) && keeps(filter, &entry) {
                        found.push(entry);
                    }
                }
                filter.limit == 0 || found.len() < filter.limit
            })
        }));
        match scanned {
            Ok(scanned) => scanned?,
            Err(panic) => {
                return Err(format!(
                    "its files are damaged ({}): `mcpx activity --clear` starts them afresh",
                    panicked(&*panic)
                ));
            }
        }
        Ok(found)
    }

    /// Removes every entry.
    ///
    /// Errors: the record cannot be written (the message says why).
    pub fn clear(&self) -> Result<(), String> {
        let (Some(store), Some(state)) = (&self.store, &self.state) else { return Ok(()) };
        let mut store = write(store);
        // A damaged store may panic as it closes; it is closed.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(store.take())));
        Store::remove(state)?;
        *store = Some(Store::open(state)?);
        Ok(())
    }

    /// Opens `store` again when a failed write closed it (the writer would at its next
    /// batch); left closed when it still cannot be opened.
    fn open_again(&self, store: &RwLock<Option<Store>>) {
        let (None, Some(state)) = (read(store).as_ref(), &self.state) else { return };
        if let Ok(opened) = Store::open(state) {
            write(store).get_or_insert(opened);
        }
    }

    /// Why the store is closed: the last error.
    fn closed(&self) -> String {
        let why = lock(&self.last_error).clone().unwrap_or_default();
        format!("the record is closed after an error ({why}); it opens again at the next call")
    }

    /// What the record's files take on disk, in bytes.
    pub fn taken(&self) -> u64 {
        self.store.as_ref().and_then(|s| read(s).as_ref().map(|s| s.taken().0)).unwrap_or(0)
    }
}

/// Whether `filter` keeps `entry`.
fn keeps(filter: &Filter, entry: &Entry) -> bool {
    filter.server.as_ref().is_none_or(|s| *s == entry.server)
        && filter.name.as_ref().is_none_or(|n| *n == entry.name)
        && filter.client.as_ref().is_none_or(|c| entry.client.contains(c.as_str()))
        && (!filter.errors || entry.outcome != "ok")
        && filter.slower_than_us.is_none_or(|us| entry.duration_us >= us)
}

/// The writer thread's side.
struct Writer {
    store: Arc<RwLock<Option<Store>>>,
    /// The id of the last entry written.
    last_id: u64,
    state: Dir,
    failed: Arc<AtomicU64>,
    queued: Arc<AtomicU64>,
    last_error: Arc<Mutex<Option<String>>>,
    settings: ActivitySettings,
    redactor: redact::Redactor,
}

impl Writer {
    /// Writes what comes, a batch a transaction, until the daemon drops the queue.
    fn run(mut self, entries: Receiver<Pending>) {
        // At most a sixteenth of the size's worth of entries a batch (at about 1 KiB
        // each on disk), so one batch fits the room left before a rotation.
        let most = usize::try_from(self.settings.max_bytes >> 14).unwrap_or(usize::MAX).clamp(16, 1024);
        let mut behind = false;
        while let Ok(first) = entries.recv() {
            // Asleep rather than waiting on the queue, so that a call's entry wakes no
            // thread: one wake-up per batch, not per call. A writer whose last batch was
            // full is behind: it writes the next at once.
            if !behind {
                std::thread::sleep(GATHER);
            }
            let mut batch = vec![first];
            batch.extend(entries.try_iter().take(most - 1));
            behind = batch.len() == most;
            self.queued.fetch_sub(batch.len() as u64, Ordering::Relaxed);
            let mut batch: Vec<Entry> = batch.into_iter().map(|p| self.masked(p)).collect();
            let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.write(&mut batch).and_then(|()| self.bound())
            }))
            .unwrap_or_else(|panic| Err(format!("the store failed: {}", panicked(&*panic))));
            if let Err(mut e) = written {
                if let Some(full) = self.disk_full() {
                    e = format!("{full} ({e})");
                }
                self.failed.fetch_add(batch.len() as u64, Ordering::Relaxed);
                tracing::warn!(error = %e, "cannot write the activity record");
                *lock(&self.last_error) = Some(e);
                self.reopen();
            }
        }
    }

    /// "No space left" when the record's file system has no block free for it: what
    /// a failed write most likely met, which the store's own error may not say.
    fn disk_full(&self) -> Option<String> {
        let stat = nix::sys::statvfs::statvfs(&self.state.join(store::DIR)).ok()?;
        (stat.blocks_available() == 0).then(|| "No space left on the activity record's file system".to_owned())
    }

    /// Opens the store afresh after a failed write, whose transaction may have left a
    /// lock or a half-made page behind; left closed (and tried again at the next batch)
    /// when it cannot be opened.
    fn reopen(&self) {
        let mut store = write(&self.store);
        *store = None;
        // Dropping a store whose last commit failed may panic in persy; it is closed.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(store.take())));
        *store = Store::open(&self.state).ok();
        self.store.clear_poison();
    }

    /// The entry of `pending`, its kept arguments and result masked and cut.
    fn masked(&mut self, pending: Pending) -> Entry {
        let Pending { mut entry, templates } = pending;
        let max = usize::try_from(self.settings.max_value_bytes).unwrap_or(usize::MAX);
        for kept in [&mut entry.arguments, &mut entry.result] {
            if let Some(text) = kept.take() {
                *kept = Some(self.redactor.keep(&text, &templates, max));
            }
        }
        entry
    }

    /// Writes `batch`, each entry given its id first: the time it is written, in
    /// milliseconds since the Unix epoch, shifted left 20 bits, above every id before.
    fn write(&mut self, batch: &mut [Entry]) -> Result<(), String> {
        let now = crate::schema::now_ms() << 20;
        for entry in batch.iter_mut() {
            self.last_id = now.max(self.last_id + 1);
            entry.id = self.last_id;
        }
        let mut lines = Vec::with_capacity(batch.len() * 400);
        for entry in batch.iter() {
            if serde_json::to_writer(&mut lines, entry).is_ok() {
                lines.push(b'\n');
            }
        }
        let last = batch.iter().map(|e| e.id).max().unwrap_or_default();
        // A store that meets a full disk mid-commit may damage its file: a batch that
        // may not fit is not begun.
        #[allow(clippy::unnecessary_cast)] // Reason: the field types differ by platform.
        let free = nix::sys::statvfs::statvfs(&self.state.join(store::DIR))
            .map(|s| s.blocks_available() as u64 * s.fragment_size() as u64)
            .unwrap_or(u64::MAX);
        let needs = lines.len() as u64 * 4 + ROOM;
        if free < needs {
            return Err(format!(
                "No space left on the activity record's file system ({free} bytes free, a batch needs {needs})"
            ));
        }
        if read(&self.store).is_none() {
            *write(&self.store) = Some(Store::open(&self.state)?);
            // Opened late with nothing lost: what kept it closed is over.
            if self.failed.load(Ordering::Relaxed) == 0 {
                *lock(&self.last_error) = None;
            }
        }
        match read(&self.store).as_ref() {
            Some(store) => store.write(last, &lines),
            None => Err("the record is closed".to_owned()),
        }
    }

    /// Removes what is older than the settings keep; starts a new generation when the
    /// written one takes its half of the size, less room for a batch.
    fn bound(&self) -> Result<(), String> {
        let cutoff = crate::schema::now_ms().saturating_sub(self.settings.keep.as_millis() as u64) << 20;
        let mut store = write(&self.store);
        let Some(store) = store.as_mut() else { return Ok(()) };
        store.remove_before(cutoff)?;
        let half = self.settings.max_bytes / 2;
        if store.taken().1 > half - half / 4 {
            store.rotate()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
