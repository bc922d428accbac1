//! Where the activity record's entries are kept: two generations of a `persy` file in
//! the state directory's `activity/` (0700), `record.persy` (written) and
//! `record.old.persy` (the one before, read only), each an index of batches: the id of
//! a batch's last entry to its entries, one JSON object a line, in id order. A batch is
//! what the writer gathered for one commit, so the database does one insert per commit,
//! not one per call.
//!
//! The size bound is kept by generations: when the written file takes half of the
//! record's size (less a margin for a batch), the old one is removed and the written
//! one becomes old. A store frees whole files, which no embedded database's own
//! compaction does to a tight bound: each generation stays under half, so both stay
//! under the size.

use std::ops::Bound;

use mcpx_platform::fs::{Dir, FileUse};
use persy::{ByteVec, Config, Persy, ValueMode};

/// The record's directory, in the state directory.
pub const DIR: &str = "activity";

/// The generation written.
pub const FILE: &str = "record.persy";

/// The generation before it.
pub const OLD: &str = "record.old.persy";

/// The index of entries.
const INDEX: &str = "entries";

/// How long a write waits for a lock of the store.
const LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The two generations of the record.
pub struct Store {
    state: Dir,
    current: Persy,
    old: Option<Persy>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("state", &self.state.path()).finish_non_exhaustive()
    }
}

/// A `persy` error (or any) as the record's message.
fn said(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl Store {
    /// The record's generations in `state`'s [`DIR`] (made when missing), the written
    /// one made when there is none.
    ///
    /// Errors: the directory or a file cannot be opened or made, or a file is not a
    /// record (the message says which and why).
    pub fn open(state: &Dir) -> Result<Store, String> {
        let dir = state.subdir(DIR, true).map_err(|e| format!("{}: {e}", state.join(DIR).display()))?;
        let current = generation(&dir, FILE)?;
        let old = if dir.contains(OLD) { Some(generation(&dir, OLD)?) } else { None };
        Ok(Store { state: dir, current, old })
    }

    /// Writes one batch (`lines`: entries as JSON lines, in id order, the last of id
    /// `last`) into the written generation, in one transaction.
    ///
    /// Errors: the write failed (a full or read-only disk).
    pub fn write(&self, last: u64, lines: Vec<u8>) -> Result<(), String> {
        let mut tx = self.current.begin().map_err(said)?;
        tx.put::<u64, ByteVec>(INDEX, last, ByteVec::from(lines)).map_err(said)?;
        tx.prepare().map_err(said)?.commit().map_err(said)
    }

    /// Every entry (its JSON) of the batches that may hold ids from `from` (inclusive)
    /// to `until` (exclusive), newest first (`forward`: oldest first), each handed to
    /// `take` until it says stop. Entries of those batches outside the ids come too:
    /// the caller filters by id.
    ///
    /// Errors: a generation cannot be read.
    pub fn scan(
        &self,
        from: u64,
        until: u64,
        forward: bool,
        take: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), String> {
        let mut generations: Vec<&Persy> = std::iter::once(&self.current).chain(self.old.as_ref()).collect();
        if forward {
            generations.reverse();
        }
        for generation in generations {
            // A batch keyed below `from` ends before it; the first keyed at or past
            // `until` is the last that may start before it.
            let last =
                generation.range::<u64, ByteVec, _>(INDEX, until..).map_err(said)?.next().map_or(u64::MAX, |(k, _)| k);
            let rows = generation
                .range::<u64, ByteVec, _>(INDEX, (Bound::Included(from), Bound::Included(last)))
                .map_err(said)?;
            let rows: Box<dyn Iterator<Item = _>> = if forward { Box::new(rows) } else { Box::new(rows.rev()) };
            for (_, mut values) in rows {
                let Some(batch) = values.next() else { continue };
                let lines = batch.split(|b| *b == b'\n').filter(|l| !l.is_empty());
                let lines: Box<dyn Iterator<Item = &[u8]>> =
                    if forward { Box::new(lines) } else { Box::new(lines.rev()) };
                for line in lines {
                    if !take(line) {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// Removes the batches whose entries all have ids below `until` from both
    /// generations (the old one whole, when all of it is).
    ///
    /// Errors: a generation cannot be written.
    pub fn remove_before(&mut self, until: u64) -> Result<(), String> {
        if let Some(old) = &self.old {
            let newest = old.range::<u64, ByteVec, _>(INDEX, ..).map_err(said)?.next_back().map(|(id, _)| id);
            if newest.is_none_or(|id| id < until) {
                self.old = None;
                self.state.remove(OLD).map_err(said)?;
            } else {
                remove_range(old, until)?;
            }
        }
        remove_range(&self.current, until)
    }

    /// Makes the written generation the old one (the old one removed) and starts a new
    /// one.
    ///
    /// Errors: a file cannot be removed, renamed or made.
    pub fn rotate(&mut self) -> Result<(), String> {
        self.old = None;
        if self.state.contains(OLD) {
            self.state.remove(OLD).map_err(said)?;
        }
        self.state.rename(FILE, OLD).map_err(said)?;
        let current = generation(&self.state, FILE)?;
        // The renamed file stays open under its new name.
        self.old = Some(std::mem::replace(&mut self.current, current));
        Ok(())
    }

    /// Removes the record's files from `state` (a store of them must be closed).
    ///
    /// Errors: the directory cannot be opened, or a file removed.
    pub fn remove(state: &Dir) -> Result<(), String> {
        let dir = state.subdir(DIR, true).map_err(said)?;
        for name in [OLD, FILE] {
            if dir.contains(name) {
                dir.remove(name).map_err(said)?;
            }
        }
        Ok(())
    }

    /// The id of the newest entry kept (0 when there is none).
    pub fn last_id(&self) -> u64 {
        let newest =
            |g: &Persy| g.range::<u64, ByteVec, _>(INDEX, ..).ok().and_then(|mut r| r.next_back()).map(|(k, _)| k);
        newest(&self.current).or_else(|| self.old.as_ref().and_then(newest)).unwrap_or(0)
    }

    /// What the generations take on disk together, in allocated bytes (as `du`
    /// counts), and what the written one takes.
    pub fn taken(&self) -> (u64, u64) {
        let current = taken(&self.state.join(FILE));
        (current + taken(&self.state.join(OLD)), current)
    }
}

/// What `file` takes on disk: its allocated blocks, in bytes.
pub fn taken(file: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(file).map_or(0, |m| m.blocks() * 512)
}

/// The generation `name` of `state` (0600), made with its index when it is new.
fn generation(state: &Dir, name: &str) -> Result<Persy, String> {
    let path = state.join(name);
    let fail = |e: String| format!("{}: {e}", path.display());
    let file = state.open_file(name, FileUse::ReadWrite).map_err(|e| fail(e.to_string()))?;
    let empty = file.metadata().map_err(|e| fail(e.to_string()))?.len() == 0;
    if empty {
        Persy::create_from_file(file).map_err(|e| fail(e.to_string()))?;
    }
    let file = state.open_file(name, FileUse::ReadWrite).map_err(|e| fail(e.to_string()))?;
    let mut config = Config::new();
    // A lock a failed commit left behind fails the next write soon, not in a day.
    config.change_transaction_lock_timeout(LOCK_TIMEOUT);
    let persy = Persy::open_from_file(file, config).map_err(|e| fail(e.to_string()))?;
    if !persy.exists_index(INDEX).map_err(|e| fail(e.to_string()))? {
        let mut tx = persy.begin().map_err(|e| fail(e.to_string()))?;
        tx.create_index::<u64, ByteVec>(INDEX, ValueMode::Replace).map_err(|e| fail(e.to_string()))?;
        tx.prepare().map_err(|e| fail(e.to_string()))?.commit().map_err(|e| fail(e.to_string()))?;
    }
    Ok(persy)
}

/// Removes the entries of `generation` with ids below `until`.
fn remove_range(generation: &Persy, until: u64) -> Result<(), String> {
    let ids: Vec<u64> = generation.range::<u64, ByteVec, _>(INDEX, ..until).map_err(said)?.map(|(id, _)| id).collect();
    if ids.is_empty() {
        return Ok(());
    }
    let mut tx = generation.begin().map_err(said)?;
    for id in ids {
        tx.remove::<u64, ByteVec>(INDEX, id, None).map_err(said)?;
    }
    tx.prepare().map_err(said)?.commit().map_err(said)
}
