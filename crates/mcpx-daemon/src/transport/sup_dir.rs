//! The supervisors' directory, `<runtime>/sup/`: their records, their files, and
//! the server a dead supervisor left running.

use std::path::Path;

use mcpx_platform::Liveness;
use mcpx_proto::attach::{ProcessId, Record};
use nix::sys::signal::Signal;

use crate::process;

/// The records of the supervisors in `dir` (`<id>.json`), in no particular order.
/// A record that cannot be read or parsed is logged and skipped; a missing
/// directory has none.
pub fn supervisor_records(dir: &Path) -> Vec<Record> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .filter_map(|path| match std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok()) {
            Some(record) => Some(record),
            None => {
                tracing::warn!(file = %path.display(), "ignoring an unreadable supervisor record");
                None
            }
        })
        .collect()
}

/// Removes a supervisor's socket and record from `dir`; files already gone are fine.
pub(super) fn remove_files(rec: &Record, dir: &Path) {
    let _ = std::fs::remove_file(dir.join(format!("{}.sock", rec.id)));
    let _ = std::fs::remove_file(dir.join(format!("{}.json", rec.id)));
}

/// Kills the server of a dead supervisor, if it still runs with the recorded start
/// time, and removes the supervisor's files from `dir`.
pub(super) fn reap_orphan(rec: &Record, dir: &Path) {
    if let Some(ProcessId { pid, start_time }) = rec.child {
        if mcpx_platform::liveness(pid, Some(start_time)) == Liveness::Running {
            tracing::info!(server = %rec.identity.server, pid, "killing the orphaned server of a dead supervisor");
            let _ = process::signal_group(pid, Signal::SIGKILL);
        }
    }
    remove_files(rec, dir);
}
