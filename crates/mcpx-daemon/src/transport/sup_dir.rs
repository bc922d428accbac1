//! The supervisors' directory, `<runtime>/sup/`: their records, their files, and
//! the server a dead supervisor left running.

use mcpx_platform::Liveness;
use mcpx_platform::fs::Dir;
use mcpx_proto::attach::{ProcessId, Record};
use nix::sys::signal::Signal;

use crate::process;

/// The records of the supervisors in `dir` (`<id>.json`), in no particular order.
/// A record that cannot be read (a link is not followed) or parsed is logged and
/// skipped.
pub fn supervisor_records(dir: &Dir) -> Vec<Record> {
    let Ok(names) = dir.names() else { return Vec::new() };
    names
        .into_iter()
        .filter_map(|name| name.into_string().ok())
        .filter(|name| name.ends_with(".json") && !name.starts_with('.'))
        .filter_map(|name| match dir.read(&name).ok().and_then(|b| serde_json::from_slice(&b).ok()) {
            Some(record) => Some(record),
            None => {
                tracing::warn!(file = %dir.join(&name).display(), "ignoring an unreadable supervisor record");
                None
            }
        })
        .collect()
}

/// Removes a supervisor's socket and record from `dir`; files already gone are fine.
pub(super) fn remove_files(rec: &Record, dir: &Dir) {
    let _ = dir.remove(&format!("{}.sock", rec.id));
    let _ = dir.remove(&format!("{}.json", rec.id));
}

/// Kills a supervisor that is no use (hung, or of an incompatible version), if it still
/// runs with the recorded start time, then its server, and removes its files from `dir`.
pub(super) fn stop_supervisor(rec: &Record, dir: &Dir) {
    let sup = rec.supervisor;
    if mcpx_platform::liveness(sup.pid, Some(sup.start_time)) == Liveness::Running {
        tracing::info!(server = %rec.identity.server, pid = sup.pid, "killing a supervisor that is no use");
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(sup.pid as i32), Signal::SIGKILL);
    }
    reap_orphan(rec, dir);
}

/// Kills the server of a dead supervisor, if it still runs with the recorded start
/// time, and removes the supervisor's files from `dir`.
pub(super) fn reap_orphan(rec: &Record, dir: &Dir) {
    if let Some(ProcessId { pid, start_time }) = rec.child {
        if mcpx_platform::liveness(pid, Some(start_time)) == Liveness::Running {
            tracing::info!(server = %rec.identity.server, pid, "killing the orphaned server of a dead supervisor");
            let _ = process::signal_group(pid, Signal::SIGKILL);
        }
    }
    remove_files(rec, dir);
}
