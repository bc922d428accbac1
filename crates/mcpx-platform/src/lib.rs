//! The OS platform layer of mcpx: every fact mcpx needs from the operating system about
//! processes, descriptors, sockets, signals and the service manager.
//!
//! Architecture invariant: nothing outside this crate reads `/proc` or calls an OS-specific
//! API. Each fact has one public function here and one implementation per OS, in the
//! private `linux` and `macos` modules; the public API is identical on both. Other targets
//! do not compile.
//!
//! The crate denies `unsafe_code`. The only modules allowed to use it are the ones that
//! call raw syscalls or C functions the `nix` crate does not wrap (`linux::pidfd`,
//! `macos::libc_sys`, the functions of `linux::confine` that apply a sandbox after `fork`), `signal` (installing a signal disposition is unsafe in `nix`) and
//! [`process`] (`pre_exec`: `setsid`, `setrlimit`); every unsafe block carries a `// Safety:` comment.
//!
//! No function here starts a thread or needs an async runtime: the supervisor calls them
//! from plain code, some of them (see [`close_inherited_fds`]) before any runtime starts.
//! The one exception is the Secret Service backend of [`secrets`], whose bus connection
//! runs a thread while it is open; the supervisor never uses the secret store.

#![deny(unsafe_code)]

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
compile_error!("mcpx-platform supports Linux and macOS only");

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as sys;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as sys;

pub mod build;
pub mod clock;
pub mod confine;
pub mod exec;
pub mod fs;
pub mod limits;
mod pid;
pub mod process;
pub mod sanitize;
pub mod secrets;
#[allow(unsafe_code)]
mod signal;
pub mod sync;
pub mod systemd;
pub mod terminal;

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

pub use nix::sys::signal::Signal;

use pid::{esrch_to_not_found, to_pid_t};

/// The highest descriptor number (exclusive) [`close_inherited_fds`] tries when it cannot
/// list the open descriptors and the soft `RLIMIT_NOFILE` is larger or unlimited.
pub const CLOSE_FDS_CAP: RawFd = 65536;

/// A value that identifies one incarnation of process `pid`: pids are reused, the pair
/// (pid, start time) is not (in practice: a pid would have to be reused within one unit of
/// the value below).
///
/// Only compare values obtained on the same machine in the same boot (see [`boot_id`]);
/// the unit differs between OSes:
/// - Linux: field 22 `starttime` of `/proc/<pid>/stat`, the time the process started
///   after system boot in clock ticks (`sysconf(_SC_CLK_TCK)`, usually 100 per second);
///   see proc_pid_stat(5). Note `/proc/<tid>/stat` also exists for thread ids, so a thread
///   id yields its thread's start time.
/// - macOS: `proc_pidinfo(PROC_PIDTBSDINFO)` `pbi_start_tvsec * 1_000_000 +
///   pbi_start_tvusec`, the wall-clock start time in microseconds since the epoch
///   (`<sys/proc_info.h>`, libproc).
///
/// # Errors
///
/// - `NotFound` if no process `pid` exists (including pid 0 and pids above `i32::MAX`). A
///   zombie still exists and has a start time.
/// - `PermissionDenied` (macOS) for another user's process without privileges.
/// - `InvalidData` if the OS answer cannot be parsed; other IO errors as reported.
pub fn process_start_time(pid: u32) -> io::Result<u64> {
    to_pid_t(pid)?;
    Ok(sys::process_stat(pid)?.start_time)
}

/// Whether a process incarnation still exists. See [`liveness`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Liveness {
    /// The process exists and has not exited (it may be stopped or sleeping).
    Running,
    /// The process has exited but its parent has not reaped it yet (`waitpid(2)`): it no
    /// longer runs, and its pid is not free for reuse.
    Zombie,
    /// No such process: the pid does not exist, or it now names a different process (its
    /// start time differs from the one given).
    Gone,
}

/// The CPU time process `pid` has used so far: user plus system time of all its threads
/// (not of its children), for benchmarks that divide a process's CPU time by the calls it
/// served.
///
/// - Linux: fields 14 `utime` and 15 `stime` of `/proc/<pid>/stat` (proc_pid_stat(5)), in
///   clock ticks (`sysconf(_SC_CLK_TCK)`, usually 100 per second): the resolution is 10 ms.
/// - macOS: `proc_pidinfo(PROC_PIDTASKINFO)` `pti_total_user + pti_total_system`
///   (`<sys/proc_info.h>`), Mach absolute time converted to nanoseconds with
///   `mach_timebase_info`.
///
/// # Errors
///
/// - `NotFound` if no process `pid` exists (a zombie still has its times on Linux).
/// - `PermissionDenied` (macOS) for another user's process without privileges.
/// - `InvalidData` if the OS answer cannot be parsed; other IO errors as reported.
pub fn process_cpu_time(pid: u32) -> io::Result<std::time::Duration> {
    to_pid_t(pid)?;
    sys::process_cpu_time(pid)
}

/// Judges whether the incarnation of process `pid` that started at `start_time` (a value
/// from [`process_start_time`]) still exists. With `start_time: None` any process with that
/// pid counts.
///
/// This reads the process's state from the OS (`/proc/<pid>/stat` state `Z` or `X` on
/// Linux, `pbi_status == SZOMB` on macOS); it never relies on `kill(pid, 0)`, which
/// succeeds for zombies and for a reused pid.
///
/// A process that exists but cannot be inspected (e.g. `PermissionDenied` on macOS for
/// another user's process) counts as [`Liveness::Running`]: without its start time there is
/// no proof it is gone.
pub fn liveness(pid: u32, start_time: Option<u64>) -> Liveness {
    if to_pid_t(pid).is_err() {
        return Liveness::Gone;
    }
    match sys::process_stat(pid) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Liveness::Gone,
        Err(_) => Liveness::Running,
        Ok(stat) if start_time.is_some_and(|t| t != stat.start_time) => Liveness::Gone,
        Ok(stat) if stat.zombie => Liveness::Zombie,
        Ok(_) => Liveness::Running,
    }
}

/// A process file descriptor (Linux `pidfd_open(2)`, kernel 5.3 or later): a handle on one
/// process incarnation that cannot be confused by pid reuse.
///
/// The descriptor is close-on-exec. It becomes readable (`poll(2)` `POLLIN`, epoll, or a
/// tokio `AsyncFd` with read interest) when the process exits, i.e. becomes a zombie or is
/// reaped; it works for any process, not only children. Dropping it closes it.
///
/// On macOS there are no pidfds: [`PidFd::open`] always fails with
/// [`io::ErrorKind::Unsupported`], and callers fall back to polling [`liveness`]. The same
/// error comes from Linux kernels older than 5.3 (`ENOSYS`).
#[derive(Debug)]
pub struct PidFd {
    fd: OwnedFd,
    pid: u32,
}

impl PidFd {
    /// Opens a pidfd for process `pid` (`pidfd_open(pid, 0)`, see pidfd_open(2)).
    ///
    /// The pid is resolved once, now: to be sure the descriptor refers to the intended
    /// incarnation, check [`liveness`] with its start time after opening.
    ///
    /// # Errors
    ///
    /// - `NotFound` if no process `pid` exists (`ESRCH`); a zombie can still be opened.
    /// - `Unsupported` on macOS, and on Linux before 5.3 (`ENOSYS`).
    /// - `EMFILE`/`ENFILE` and other errors as reported by the kernel.
    pub fn open(pid: u32) -> io::Result<PidFd> {
        let raw = to_pid_t(pid)?;
        let fd = sys::pidfd_open(raw).map_err(|err| esrch_to_not_found(err, pid))?;
        Ok(PidFd { fd, pid })
    }

    /// The pid this descriptor was opened for.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends `signal` to the process (`pidfd_send_signal(fd, sig, NULL, 0)`, see
    /// pidfd_send_signal(2)). Unlike `kill(2)` it cannot hit a different process that reused
    /// the pid. Signalling a zombie succeeds and has no effect.
    ///
    /// # Errors
    ///
    /// - `NotFound` if the process has exited and been reaped (`ESRCH`).
    /// - `PermissionDenied` (`EPERM`) if the caller may not signal it.
    /// - `Unsupported` on macOS (unreachable there, since [`PidFd::open`] fails).
    pub fn send_signal(&self, signal: Signal) -> io::Result<()> {
        sys::pidfd_send_signal(self.fd.as_fd(), signal).map_err(|err| esrch_to_not_found(err, self.pid))
    }
}

impl AsFd for PidFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for PidFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl From<PidFd> for OwnedFd {
    fn from(pidfd: PidFd) -> OwnedFd {
        pidfd.fd
    }
}

/// The effective uid of the process at the other end of a connected unix stream socket, as
/// of when it called `connect(2)` (or `socketpair(2)`).
///
/// - Linux: `getsockopt(SOL_SOCKET, SO_PEERCRED)`, see unix(7).
/// - macOS: `getpeereid(3)` (`LOCAL_PEERCRED`).
///
/// # Errors
///
/// `ENOTCONN` if the socket is not connected, `ENOTSOCK`/`EOPNOTSUPP`/`EINVAL` if `fd` is not
/// a unix socket, as reported by the OS.
pub fn peer_uid(fd: BorrowedFd<'_>) -> io::Result<u32> {
    sys::peer_uid(fd)
}

/// The uid owning the TCP socket at `peer` that is connected to this process's `local`,
/// both on this machine (a loopback listener's accepted connection): so a listener on
/// 127.0.0.1 can refuse another user's connections, which loopback TCP does not do.
///
/// - Linux: the `uid` column of the row of `/proc/net/tcp` (or `tcp6`) whose local
///   address is `peer` and remote address is `local` (proc_net_tcp(5)).
/// - macOS: not known (`Ok(None)`); the caller cannot tell.
///
/// `Ok(None)` also when no row matches (the peer closed meanwhile).
///
/// # Errors
///
/// The `io::Error` of reading the table.
pub fn tcp_peer_uid(local: std::net::SocketAddr, peer: std::net::SocketAddr) -> io::Result<Option<u32>> {
    sys::tcp_peer_uid(local, peer)
}

/// Makes the calling process a child subreaper, so that orphaned descendants (e.g. a server's
/// daemonized grandchildren) are re-parented to it instead of to init, and it can reap them.
///
/// Returns `Ok(true)` when set (Linux: `prctl(PR_SET_CHILD_SUBREAPER, 1)`, see prctl(2); the
/// attribute is not inherited by children and is cleared by nothing but another `prctl`),
/// `Ok(false)` where the OS has no such facility (macOS).
///
/// # Errors
///
/// As reported by `prctl(2)` (in practice none on Linux 3.4 and later).
pub fn set_child_subreaper() -> io::Result<bool> {
    sys::set_child_subreaper()
}

/// Waits on descriptors and wakes when a child process exits, with no timer: `SIGCHLD`
/// is blocked except inside `ppoll(2)` (see ppoll(2), signal(7)), so an exit between two
/// waits is held pending and interrupts the next one. It covers every child, including
/// orphaned descendants re-parented to a subreaper (see [`set_child_subreaper`]), which
/// no pidfd watches.
///
/// Children started through [`process::command`] get an empty signal mask (it unblocks
/// every signal between `fork` and `exec` when the caller blocks any), and `exec` gives
/// them the default `SIGCHLD` disposition: they run as if this were not installed.
#[derive(Debug)]
pub struct ChildExitWake {
    /// The mask `ppoll` waits with: the thread's own, `SIGCHLD` unblocked.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    mask: nix::sys::signal::SigSet,
}

impl ChildExitWake {
    /// Installs an empty `SIGCHLD` handler (with `SA_NOCLDSTOP`) and blocks `SIGCHLD` in
    /// the calling thread, for a single-threaded process. `Ok(None)` where `ppoll` does
    /// not exist (macOS): the caller polls for exits on a timer instead.
    ///
    /// # Errors
    ///
    /// As reported by `sigaction(2)` or `pthread_sigmask(3)` (in practice none).
    pub fn install() -> io::Result<Option<ChildExitWake>> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            Ok(Some(ChildExitWake { mask: signal::catch_sigchld()? }))
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            Ok(None)
        }
    }

    /// `poll(2)` over `fds` for at most `timeout` (`None`: no limit). Returns whether a
    /// child exited meanwhile (`SIGCHLD` interrupted the wait; `fds` report nothing then).
    ///
    /// # Errors
    ///
    /// As reported by `ppoll(2)`, other than `EINTR`.
    pub fn poll(&self, fds: &mut [nix::poll::PollFd<'_>], timeout: Option<std::time::Duration>) -> io::Result<bool> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let timeout = timeout.map(nix::sys::time::TimeSpec::from_duration);
            match nix::poll::ppoll(fds, timeout, Some(self.mask)) {
                Ok(_) => Ok(false),
                Err(nix::errno::Errno::EINTR) => Ok(true),
                Err(e) => Err(e.into()),
            }
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            let _ = (fds, timeout);
            unreachable!("ChildExitWake::install returns None here")
        }
    }
}

/// Gives the heap's free pages back to the kernel (Linux with glibc: `malloc_trim(0)`,
/// see malloc_trim(3); elsewhere nothing). For a long-lived process after its start-up,
/// whose freed start-up allocations would otherwise stay resident: the supervisor.
pub fn release_free_heap() {
    sys::release_free_heap();
}

/// An identifier of the current boot of the machine: it stays the same until the next
/// reboot and differs after it. Process start times (see [`process_start_time`]) are only
/// comparable within one boot.
///
/// - Linux: the contents of `/proc/sys/kernel/random/boot_id`, trimmed (a random UUID such
///   as `"4d2cb1c8-…"`, see random(4)).
/// - macOS: sysctl `kern.boottime` (a `struct timeval`) formatted as `"<sec>.<usec>"` with
///   the microseconds zero-padded to 6 digits, e.g. `"1718000000.042000"`.
///
/// # Errors
///
/// IO errors reading the source; `InvalidData` if it is empty or malformed.
pub fn boot_id() -> io::Result<String> {
    sys::boot_id()
}

/// Closes every open file descriptor numbered 3 or above that is not in `keep`, so that a
/// freshly started process does not hold descriptors it inherited by accident (pipes of its
/// parent, the parent's listening socket...). Descriptors 0, 1 and 2 are never touched.
///
/// - Linux: lists `/proc/self/fd` first (skipping the listing's own descriptor), then closes
///   the listed descriptors. If `/proc` is unavailable it falls back to the loop below.
/// - macOS (and the Linux fallback): tries `close(2)` on every number from 3 up to the soft
///   `RLIMIT_NOFILE`, capped at [`CLOSE_FDS_CAP`]; descriptors numbered above that limit
///   stay open.
///
/// Errors from `close` itself (e.g. `EBADF` for a number that is not open) are ignored: the
/// descriptor is released either way.
///
/// Call it in a single-threaded process before any runtime or thread starts (first thing in
/// `main`): it closes descriptors that other code may own, so no `File`, `OwnedFd` or socket
/// other than those in `keep` may be alive or used afterwards.
///
/// # Errors
///
/// Currently none: listing failures fall back to the loop. The `Result` leaves room for
/// OSes where the only way is an API that can fail.
pub fn close_inherited_fds(keep: &[RawFd]) -> io::Result<()> {
    let close = |fd: RawFd| {
        if fd > 2 && !keep.contains(&fd) {
            // The descriptor is released even when close reports an error (Linux, macOS).
            let _ = nix::unistd::close(fd);
        }
    };
    match sys::open_fds() {
        Ok(fds) => fds.into_iter().for_each(close),
        Err(_) => (3..fd_limit()).for_each(close),
    }
    Ok(())
}

/// The soft `RLIMIT_NOFILE`, capped at [`CLOSE_FDS_CAP`] (also when unlimited or unknown).
fn fd_limit() -> RawFd {
    use nix::sys::resource::{Resource, getrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, _hard)) => RawFd::try_from(soft).map_or(CLOSE_FDS_CAP, |soft| soft.min(CLOSE_FDS_CAP)),
        Err(_) => CLOSE_FDS_CAP,
    }
}

/// Sets the disposition of `SIGPIPE` to "ignore" (`sigaction(SIGPIPE, SIG_IGN)`, see
/// sigaction(2)), so that writing to a pipe or socket whose reader is gone fails with
/// `EPIPE` instead of killing the process.
///
/// The Rust runtime already does this for Rust binaries; calling it makes the supervisor
/// independent of that default. An ignored disposition survives `execve(2)`, but
/// `std::process::Command` restores the default `SIGPIPE` in children.
///
/// # Errors
///
/// As reported by `sigaction(2)` (in practice none).
pub fn ignore_sigpipe() -> io::Result<()> {
    signal::ignore_sigpipe()
}

#[cfg(test)]
mod tests;

/// Fills `buf` with bytes from the OS's cryptographically secure random source
/// (`getrandom(2)` on Linux, `getentropy(3)` on macOS, through the `getrandom` crate):
/// for secrets such as the TCP token and MCP session ids.
///
/// Errors: the OS's source failed (an `io::Error` saying so); nothing weaker is used
/// instead.
pub fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    getrandom::fill(buf).map_err(|e| io::Error::other(format!("the OS's random source failed: {e}")))
}
