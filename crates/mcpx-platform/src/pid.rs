//! What the OS-specific modules and the crate root share about one process: its
//! [`ProcStat`], and turning a pid into a `pid_t` with errors that name it.

use std::io;

/// What the OS reports about one process: the part of `/proc/<pid>/stat` (Linux) or of
/// `proc_bsdinfo` (macOS) that mcpx uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// See `process_start_time` in the crate root for the unit.
    pub(crate) start_time: u64,
    /// The process has exited and waits to be reaped by its parent.
    pub(crate) zombie: bool,
}

/// Turns a pid into a `pid_t`, rejecting the values that cannot name a single process:
/// `0` (the caller's process group for `kill(2)`, the scheduler on some systems) and anything
/// above `i32::MAX` (negative as a `pid_t`, i.e. a process group).
///
/// # Errors
///
/// `NotFound` for those values.
pub(crate) fn to_pid_t(pid: u32) -> io::Result<libc::pid_t> {
    match libc::pid_t::try_from(pid) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(no_such_process(pid)),
    }
}

/// The error every function here returns for a process that does not exist.
pub(crate) fn no_such_process(pid: u32) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("no process with pid {pid}"))
}

/// Maps `ESRCH` ("no such process") to a `NotFound` error naming the pid, so callers can
/// match on [`io::ErrorKind::NotFound`] on every OS; other errors pass through unchanged.
pub(crate) fn esrch_to_not_found(err: io::Error, pid: u32) -> io::Error {
    if err.raw_os_error() == Some(libc::ESRCH) { no_such_process(pid) } else { err }
}
