//! The activity record (`mcpx activity`; `docs/api.md`, "Activity"): one entry per
//! request a caller sent a server through the daemon (`tools/call`, `prompts/get`,
//! `resources/read`, `completion/complete`), with when, how long, by which path and
//! client, to which server and instance, and how it ended. Arguments and results are
//! not kept.
//!
//! Entries go to an embedded database, `<state>/activity.redb` (0600), written by a
//! thread of its own: [`Activity::record`] only queues the entry, so a slow or full disk
//! never delays a call. A queue that is full drops the entry, and a write that fails is
//! counted; both show in `status`. The record is bounded by age ([`KEEP`]) and by size
//! ([`MAX_BYTES`]): past the size, the oldest fifth is removed and the file compacted.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition};

use mcpx_platform::fs::{Dir, FileUse};

pub use crate::api::activity::Entry;
use crate::sync::lock;

/// The file of the record, in the state directory.
pub const FILE: &str = "activity.redb";

/// How long an entry is kept.
pub const KEEP: Duration = Duration::from_secs(30 * 24 * 3600);

/// The most the record's file may take, in bytes.
pub const MAX_BYTES: u64 = 64 << 20;

/// Entries waiting for the writer, at most; more are dropped (and counted).
const QUEUE: usize = 4096;

/// The table: entry id (milliseconds since the Unix epoch, shifted left 20 bits, plus a
/// sequence number) to the entry as JSON.
const ENTRIES: TableDefinition<u64, &[u8]> = TableDefinition::new("entries");

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
    /// The newest this many, at most.
    pub limit: usize,
}

/// The record: the queue to its writer, the database, and what went wrong.
#[derive(Debug)]
pub struct Activity {
    queue: Option<SyncSender<Entry>>,
    db: Option<Arc<RwLock<Database>>>,
    /// Entries the full queue dropped.
    pub dropped: Arc<AtomicU64>,
    /// Writes that failed.
    pub failed: Arc<AtomicU64>,
    /// Why the last write failed, or the record could not be opened.
    pub last_error: Arc<Mutex<Option<String>>>,
    /// The sequence of ids within one millisecond.
    sequence: AtomicU64,
    /// The writer, joined on drop: what was queued is written before the record closes.
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Activity {
    fn drop(&mut self) {
        self.queue = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl Activity {
    /// The record in `state` (the open state directory), its writer started. A record
    /// that cannot be opened is off, and says why in `last_error`: calls go on.
    pub fn open(state: &Dir) -> Activity {
        let last_error = Arc::new(Mutex::new(None));
        let opened = state
            .open_file(FILE, FileUse::ReadWrite)
            .map_err(|e| e.to_string())
            .and_then(|file| Database::builder().create_file(file).map_err(|e| e.to_string()));
        let db = match opened {
            Ok(db) => Arc::new(RwLock::new(db)),
            Err(e) => {
                tracing::warn!(error = %e, "cannot open the activity record: calls are not recorded");
                *lock(&last_error) = Some(format!("cannot open {}: {e}", state.path().join(FILE).display()));
                return Activity::off(last_error);
            }
        };
        let (queue, entries) = std::sync::mpsc::sync_channel(QUEUE);
        let (failed, writer_error) = (Arc::new(AtomicU64::new(0)), last_error.clone());
        let writer =
            Writer { db: db.clone(), failed: failed.clone(), last_error: writer_error, file: state.path().join(FILE) };
        let spawned = std::thread::Builder::new().name("mcpx-activity".into()).spawn(move || writer.run(entries));
        let writer = match spawned {
            Ok(writer) => writer,
            Err(e) => {
                *lock(&last_error) = Some(format!("cannot start the activity writer: {e}"));
                return Activity::off(last_error);
            }
        };
        Activity {
            queue: Some(queue),
            db: Some(db),
            dropped: Arc::default(),
            failed,
            last_error,
            sequence: AtomicU64::new(0),
            writer: Some(writer),
        }
    }

    fn off(last_error: Arc<Mutex<Option<String>>>) -> Activity {
        Activity {
            queue: None,
            db: None,
            dropped: Arc::default(),
            failed: Arc::default(),
            last_error,
            sequence: AtomicU64::new(0),
            writer: None,
        }
    }

    /// An id for a request started at `started_ms`: later than every id given before.
    pub fn next_id(&self, started_ms: u64) -> u64 {
        (started_ms << 20) | (self.sequence.fetch_add(1, Ordering::Relaxed) & 0xF_FFFF)
    }

    /// Queues `entry` for the writer; never waits. A full queue drops it (counted).
    pub fn record(&self, entry: Entry) {
        let Some(queue) = &self.queue else { return };
        if let Err(TrySendError::Full(_)) = queue.try_send(entry) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The entries `filter` keeps, newest first.
    ///
    /// Errors: the record cannot be read (the message says why).
    pub fn list(&self, filter: &Filter) -> Result<Vec<Entry>, String> {
        let Some(db) = &self.db else { return Ok(Vec::new()) };
        let db = db.read().map_err(|_| "the activity record is poisoned".to_owned())?;
        let read = db.begin_read().map_err(|e| e.to_string())?;
        let table = match read.open_table(ENTRIES) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e.to_string()),
        };
        let from = filter.since_ms.map_or(0, |ms| ms << 20);
        let mut found = Vec::new();
        for row in table.range(from..).map_err(|e| e.to_string())?.rev() {
            let (_, value) = row.map_err(|e| e.to_string())?;
            let Ok(entry) = serde_json::from_slice::<Entry>(value.value()) else { continue };
            if keeps(filter, &entry) {
                found.push(entry);
                if filter.limit > 0 && found.len() >= filter.limit {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// Removes every entry.
    ///
    /// Errors: the record cannot be written (the message says why).
    pub fn clear(&self) -> Result<(), String> {
        let Some(db) = &self.db else { return Ok(()) };
        let db = db.read().map_err(|_| "the activity record is poisoned".to_owned())?;
        let write = db.begin_write().map_err(|e| e.to_string())?;
        write.delete_table(ENTRIES).map_err(|e| e.to_string())?;
        write.commit().map_err(|e| e.to_string())
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
    db: Arc<RwLock<Database>>,
    failed: Arc<AtomicU64>,
    last_error: Arc<Mutex<Option<String>>>,
    file: PathBuf,
}

impl Writer {
    /// Writes what comes, a batch a transaction, until the daemon drops the queue.
    fn run(self, entries: Receiver<Entry>) {
        while let Ok(first) = entries.recv() {
            let mut batch = vec![first];
            batch.extend(entries.try_iter().take(255));
            if let Err(e) = self.write(&batch).and_then(|()| self.bound()) {
                self.failed.fetch_add(batch.len() as u64, Ordering::Relaxed);
                tracing::warn!(error = %e, "cannot write the activity record");
                *lock(&self.last_error) = Some(e);
            }
        }
    }

    fn write(&self, batch: &[Entry]) -> Result<(), String> {
        let db = self.db.read().map_err(|_| "poisoned".to_owned())?;
        let write = db.begin_write().map_err(|e| e.to_string())?;
        {
            let mut table = write.open_table(ENTRIES).map_err(|e| e.to_string())?;
            for entry in batch {
                let json = serde_json::to_vec(entry).map_err(|e| e.to_string())?;
                table.insert(entry.id, json.as_slice()).map_err(|e| e.to_string())?;
            }
        }
        write.commit().map_err(|e| e.to_string())
    }

    /// Removes what is older than [`KEEP`], and past [`MAX_BYTES`] the oldest fifth
    /// (then compacts the file).
    fn bound(&self) -> Result<(), String> {
        let cutoff = crate::schema::now_ms().saturating_sub(KEEP.as_millis() as u64) << 20;
        let too_big = std::fs::metadata(&self.file).is_ok_and(|m| m.len() > MAX_BYTES);
        {
            let db = self.db.read().map_err(|_| "poisoned".to_owned())?;
            let write = db.begin_write().map_err(|e| e.to_string())?;
            {
                let mut table = write.open_table(ENTRIES).map_err(|e| e.to_string())?;
                let mut until = cutoff;
                if too_big {
                    let count = table.len().map_err(|e| e.to_string())?;
                    let fifth = usize::try_from(count / 5).unwrap_or(usize::MAX).max(1);
                    if let Some(row) = table.iter().map_err(|e| e.to_string())?.nth(fifth) {
                        until = until.max(row.map_err(|e| e.to_string())?.0.value());
                    }
                }
                table.retain_in(..until, |_, _| false).map_err(|e| e.to_string())?;
            }
            write.commit().map_err(|e| e.to_string())?;
        }
        if too_big {
            let mut db = self.db.write().map_err(|_| "poisoned".to_owned())?;
            db.compact().map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
