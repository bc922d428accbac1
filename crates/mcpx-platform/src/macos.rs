//! macOS implementation: libproc, sysctl, `getpeereid`. macOS has no pidfds, no child
//! subreaper, no cgroups, no `/proc` and no `fexecve`.

mod confine;
#[allow(unsafe_code)]
mod libc_sys;

use std::ffi::CString;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use nix::sys::signal::Signal;

use crate::pid::ProcStat;

pub(crate) use confine::{Prepared, SANDBOX_EXEC, confine_prepare, confine_runtime_base, confine_support};

/// `proc_pidinfo(PROC_PIDTBSDINFO)`: the start time in microseconds since the epoch and
/// whether `pbi_status` is `SZOMB`.
///
/// # Errors
///
/// `NotFound` if there is no such process (`ESRCH`), `PermissionDenied` for another user's
/// process without privileges, `InvalidData` for a short answer.
pub(crate) fn process_stat(pid: u32) -> io::Result<ProcStat> {
    let info =
        libc_sys::bsd_info(crate::pid::to_pid_t(pid)?).map_err(|err| crate::pid::esrch_to_not_found(err, pid))?;
    let start_time = info.pbi_start_tvsec.saturating_mul(1_000_000).saturating_add(info.pbi_start_tvusec);
    Ok(ProcStat { start_time, zombie: info.pbi_status == libc::SZOMB })
}

/// `proc_pidinfo(PROC_PIDTASKINFO)`: `pti_total_user + pti_total_system`, Mach absolute
/// time converted to nanoseconds.
///
/// # Errors
///
/// As [`process_stat`].
pub(crate) fn process_cpu_time(pid: u32) -> io::Result<std::time::Duration> {
    let info =
        libc_sys::task_info(crate::pid::to_pid_t(pid)?).map_err(|err| crate::pid::esrch_to_not_found(err, pid))?;
    let (numer, denom) = libc_sys::timebase();
    let ticks = u128::from(info.pti_total_user.saturating_add(info.pti_total_system));
    let nanos = ticks * u128::from(numer) / u128::from(denom.max(1));
    Ok(std::time::Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX)))
}

/// macOS has no pidfds.
pub(crate) fn pidfd_open(_pid: libc::pid_t) -> io::Result<OwnedFd> {
    Err(unsupported_pidfd())
}

/// macOS has no pidfds, so no `PidFd` exists to call this with.
pub(crate) fn pidfd_send_signal(_fd: BorrowedFd<'_>, _signal: Signal) -> io::Result<()> {
    Err(unsupported_pidfd())
}

fn unsupported_pidfd() -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, "pidfds are Linux-only; poll liveness() instead")
}

/// `getpeereid(3)`.
pub(crate) fn peer_uid(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let (uid, _gid) = nix::unistd::getpeereid(fd)?;
    Ok(uid.as_raw())
}

/// macOS keeps no table of TCP sockets' owners that mcpx can read without privileges.
pub(crate) fn tcp_peer_uid(_local: std::net::SocketAddr, _peer: std::net::SocketAddr) -> io::Result<Option<u32>> {
    Ok(None)
}

/// macOS cannot run a file by its descriptor: the caller runs the path once it has
/// checked that the path still names the file.
pub(crate) fn fd_program(_fd: BorrowedFd<'_>) -> Option<PathBuf> {
    None
}

/// macOS has no `fexecve`: the caller checks the path and uses `execve(2)`.
pub(crate) fn exec_fd(_fd: BorrowedFd<'_>, _argv: &[CString], _envp: &[CString]) -> Option<io::Error> {
    None
}

/// The running executable's path, opened (macOS has no `/proc/self/exe`).
pub(crate) fn open_running_exe(path: &Path) -> io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// macOS has no child subreaper.
pub(crate) fn set_child_subreaper() -> io::Result<bool> {
    Ok(false)
}

/// The system allocator returns free pages itself.
pub(crate) fn release_free_heap() {}

/// sysctl `kern.boottime` as `"<sec>.<usec>"`.
pub(crate) fn boot_id() -> io::Result<String> {
    let boot = libc_sys::boot_time()?;
    if boot.tv_sec <= 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "kern.boottime is not set"));
    }
    Ok(format!("{}.{:06}", boot.tv_sec, boot.tv_usec))
}

/// macOS has no cgroups.
pub(crate) fn read_cgroup() -> io::Result<String> {
    Ok(String::new())
}

/// macOS has no `/proc/self/fd`; the caller falls back to trying every number.
pub(crate) fn open_fds() -> io::Result<Vec<RawFd>> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "no /proc/self/fd on macOS"))
}

/// How far the soft descriptor limit may be raised: macOS refuses a soft
/// `RLIMIT_NOFILE` above `OPEN_MAX` (10240), even under an unlimited hard limit
/// (setrlimit(2), COMPATIBILITY).
pub(crate) fn nofile_ceiling(hard: u64) -> u64 {
    hard.min(10240)
}
