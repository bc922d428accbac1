//! Where the activity record's entries are kept: two generations of a `persy` file in
//! the state directory's `activity/` (0700), `record.persy` (written) and
//! `record.old.persy` (the one before, read only). A generation holds batches: what the
//! writer gathered for one commit, its entries as JSON lines in id order, compressed
//! (LZ4 block format, the size before it prepended), one record each in the segment
//! `batches`, and an index of the same name from the id of a batch's last entry to
//! its record. The database does one insert per commit, not one per call; the index
//! holds only record ids, so its pages stay small when they are written again.
//!
//! The size bound is kept by generations: when the written file takes half of the
//! record's size (less a margin for a batch), the old one is removed and the written
//! one becomes old. A store frees whole files, which no embedded database's own
//! compaction does to a tight bound: each generation stays under half, so both stay
//! under the size.

use std::ops::Bound;

use mcpx_platform::fs::{Dir, FileUse};
use persy::{ByteVec, Config, Persy, PersyId, ValueMode};

/// The record's directory, in the state directory.
pub const DIR: &str = "activity";

/// The generation written.
pub const FILE: &str = "record.persy";

/// The generation before it.
pub const OLD: &str = "record.old.persy";

/// The segment of batches, and the index of them by the id of their last entry.
const BATCHES: &str = "batches";

/// The index of the format before: the id of a batch's last entry to its JSON lines,
/// uncompressed, in the index itself. A generation that has it is moved over when it
/// is opened.
const FORMER: &str = "entries";

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
    pub fn write(&self, last: u64, lines: &[u8]) -> Result<(), String> {
        let mut tx = self.current.begin().map_err(said)?;
        let record = tx.insert(BATCHES, &lz4_flex::compress_prepend_size(lines)).map_err(said)?;
        tx.put::<u64, PersyId>(BATCHES, last, record).map_err(said)?;
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
            let last = generation
                .range::<u64, PersyId, _>(BATCHES, until..)
                .map_err(said)?
                .next()
                .map_or(u64::MAX, |(k, _)| k);
            let rows = generation
                .range::<u64, PersyId, _>(BATCHES, (Bound::Included(from), Bound::Included(last)))
                .map_err(said)?;
            let rows: Box<dyn Iterator<Item = _>> = if forward { Box::new(rows) } else { Box::new(rows.rev()) };
            for (_, mut records) in rows {
                let Some(record) = records.next() else { continue };
                let Some(batch) = generation.read(BATCHES, &record).map_err(said)? else { continue };
                let batch = lz4_flex::decompress_size_prepended(&batch)
                    .map_err(|e| format!("a batch of the record cannot be read: {e}"))?;
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
            let newest = old.range::<u64, PersyId, _>(BATCHES, ..).map_err(said)?.next_back().map(|(id, _)| id);
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
            |g: &Persy| g.range::<u64, PersyId, _>(BATCHES, ..).ok().and_then(|mut r| r.next_back()).map(|(k, _)| k);
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

/// The generation `name` of `state` (0600), made with its segment and index when it is
/// new, moved over from the format before when it has that.
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
    if !persy.exists_index(BATCHES).map_err(|e| fail(e.to_string()))? {
        let mut tx = persy.begin().map_err(|e| fail(e.to_string()))?;
        tx.create_segment(BATCHES).map_err(|e| fail(e.to_string()))?;
        tx.create_index::<u64, PersyId>(BATCHES, ValueMode::Replace).map_err(|e| fail(e.to_string()))?;
        tx.prepare().map_err(|e| fail(e.to_string()))?.commit().map_err(|e| fail(e.to_string()))?;
    }
    if persy.exists_index(FORMER).map_err(|e| fail(e.to_string()))? {
        move_over(&persy).map_err(fail)?;
    }
    Ok(persy)
}

/// Moves the batches of a generation in the format before ([`FORMER`]) into
/// [`BATCHES`], in one transaction, and drops the index they were in.
fn move_over(generation: &Persy) -> Result<(), String> {
    let mut tx = generation.begin().map_err(said)?;
    for (last, mut lines) in generation.range::<u64, ByteVec, _>(FORMER, ..).map_err(said)? {
        let Some(lines) = lines.next() else { continue };
        let record = tx.insert(BATCHES, &lz4_flex::compress_prepend_size(&lines)).map_err(said)?;
        tx.put::<u64, PersyId>(BATCHES, last, record).map_err(said)?;
    }
    tx.drop_index(FORMER).map_err(said)?;
    tx.prepare().map_err(said)?.commit().map_err(said)
}

/// Removes the batches of `generation` whose last entry's id is below `until`.
fn remove_range(generation: &Persy, until: u64) -> Result<(), String> {
    let batches: Vec<(u64, PersyId)> = generation
        .range::<u64, PersyId, _>(BATCHES, ..until)
        .map_err(said)?
        .filter_map(|(last, mut records)| Some((last, records.next()?)))
        .collect();
    if batches.is_empty() {
        return Ok(());
    }
    let mut tx = generation.begin().map_err(said)?;
    for (last, record) in batches {
        tx.delete(BATCHES, &record).map_err(said)?;
        tx.remove::<u64, PersyId>(BATCHES, last, None).map_err(said)?;
    }
    tx.prepare().map_err(said)?.commit().map_err(said)
}
