//! The one place mcpx builds processes (architecture invariant: "every process is
//! spawned through one function"; `clippy.toml` forbids `Command::new` elsewhere),
//! with the descriptor limit the process was given, and process-group signalling.
#![allow(unsafe_code)] // Reason: `pre_exec` (setsid, setrlimit, confinement) for spawned processes and adopting inherited descriptors; see the Safety comments.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// How a spawned process relates to its parent's process group and session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detach {
    /// Its own process group (the pgid is its pid), so the whole group can be signalled.
    Group,
    /// Its own session (and so its own group), with no controlling terminal: for
    /// processes that must outlive the terminal that started them, like the daemon.
    Session,
    /// Stays in the parent's group (a short-lived helper the parent waits for).
    Inherit,
}

/// Everything needed to start a process.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// The executable, already resolved to a path.
    pub program: PathBuf,
    /// Arguments after the program name.
    pub args: Vec<OsString>,
    /// The complete environment of the process; nothing else is inherited.
    pub env: BTreeMap<OsString, OsString>,
    /// The working directory; `None` keeps the parent's.
    pub cwd: Option<PathBuf>,
    /// Pipes for stdin, stdout and stderr (`true`), or `/dev/null` for all three.
    pub piped: bool,
    /// Group or session.
    pub detach: Detach,
    /// Kernel confinement applied between `fork` and `exec` (Linux), or through
    /// `sandbox-exec` (macOS); `None` runs the program with the caller's rights.
    pub confine: Option<std::sync::Arc<crate::confine::Prepared>>,
}

/// The stop sequence of a server, the same for the supervisor and the daemon's own
/// children: close its stdin and wait this long for it to exit ...
pub const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// ... then SIGTERM its process group and wait this long, then SIGKILL the group.
pub const TERM_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// The program that opens a URL in the user's browser: `open` on macOS, `xdg-open`
/// elsewhere (freedesktop.org's xdg-utils).
pub const URL_OPENER: &str = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };

/// Builds the command for `spec`; callers spawn it (directly, or through an async
/// runtime's `Command::from`). This is the only constructor of `Command`.
#[allow(clippy::disallowed_methods)] // Reason: this is the one spawn function.
pub fn command(spec: &SpawnSpec) -> Command {
    let mut cmd = match &spec.confine {
        // Seatbelt applies the profile, then executes the program.
        #[cfg(target_os = "macos")]
        Some(prepared) => {
            let mut cmd = Command::new(crate::sys::SANDBOX_EXEC);
            cmd.arg("-p").arg(&prepared.0.profile).arg(&spec.program);
            cmd
        }
        _ => Command::new(&spec.program),
    };
    cmd.args(&spec.args).env_clear().envs(&spec.env);
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    let stdio = || if spec.piped { Stdio::piped() } else { Stdio::null() };
    cmd.stdin(stdio()).stdout(stdio()).stderr(stdio());
    match spec.detach {
        Detach::Group => {
            cmd.process_group(0);
        }
        Detach::Session => {
            // Safety: the closure runs in the child between fork and exec and calls
            // only setsid(2), which is async-signal-safe and touches no shared state.
            unsafe {
                cmd.pre_exec(|| nix::unistd::setsid().map(|_| ()).map_err(io::Error::from));
            }
        }
        Detach::Inherit => {}
    }
    // A signal mask is inherited across exec: a process that blocks signals (the
    // supervisor blocks SIGCHLD but while it waits) starts its children with none blocked,
    // or a server would never hear of its own children's exits.
    if crate::signal::blocks_any() {
        // Safety: the closure runs in the child between fork and exec and calls only
        // pthread_sigmask(3), which is async-signal-safe and touches no shared state.
        unsafe {
            cmd.pre_exec(crate::signal::unblock_all);
        }
    }
    // A daemon that raised its own descriptor limit starts its processes with the one
    // it was given (`limits::raise_nofile_limit`).
    if let Some(original) = crate::limits::original_nofile() {
        // Safety: the closure runs in the child between fork and exec and calls only
        // setrlimit(2), which is async-signal-safe and touches no shared state.
        unsafe {
            cmd.pre_exec(move || crate::limits::set_in_child(original));
        }
    }
    // Last, so that nothing above runs confined.
    #[cfg(target_os = "linux")]
    if let Some(prepared) = spec.confine.clone() {
        // Safety: the closure runs in the child between fork and exec; `apply_in_child`
        // allocates nothing and makes only async-signal-safe system calls (prctl, capset,
        // landlock_restrict_self, seccomp) on memory `prepared` keeps alive.
        unsafe {
            cmd.pre_exec(move || crate::sys::apply_in_child(&prepared.0));
        }
    }
    cmd
}

/// Starts a process as `spec` says. The child is not killed when the handle drops.
///
/// Errors: the `io::Error` of `fork`/`exec` (`NotFound` when the program does not
/// exist, `PermissionDenied` when it is not executable).
pub fn spawn(spec: &SpawnSpec) -> io::Result<Child> {
    command(spec).spawn().map_err(|e| match &spec.cwd {
        // `chdir` fails in the child with the same "not found" as a missing program: say
        // which one it was. Not the path: expanded, it may hold a secret.
        Some(cwd) if e.kind() == io::ErrorKind::NotFound && !cwd.is_dir() => {
            io::Error::new(io::ErrorKind::NotFound, "its working directory does not exist (fix `cwd` in its entry)")
        }
        _ => e,
    })
}

/// Sends `signal` to every process in group `pgid`. A group that no longer exists
/// is not an error.
pub fn signal_group(pgid: u32, signal: Signal) -> io::Result<()> {
    let Ok(pgid) = i32::try_from(pgid) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "pgid out of range"));
    };
    match killpg(Pid::from_raw(pgid), signal) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Lets `fd` survive `exec` (clears `FD_CLOEXEC`): for the listening socket and the
/// lock a daemon keeps across `mcpx upgrade`.
pub fn keep_across_exec(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    fcntl(fd, FcntlArg::F_SETFD(FdFlag::empty())).map(|_| ()).map_err(io::Error::from)
}

/// Marks every descriptor of this process above the standard streams close-on-exec,
/// except `keep`: what a process inherited from whoever started it (a shell's
/// process substitution, a build tool's jobserver pipe) must not follow it into a
/// long-lived child such as the daemon, which would hold the caller's pipe open
/// for its whole life (a `mcpx ls > >(tee log)` would never see `tee` end). This
/// process keeps using them; only children lose them.
///
/// Reads the open descriptors from `/proc/self/fd` (Linux) or `/dev/fd` (macOS).
///
/// Errors: the `io::Error` of reading that directory.
pub fn close_inherited_on_exec(keep: &[std::os::fd::RawFd]) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    use std::os::fd::BorrowedFd;
    let dir = if cfg!(target_os = "macos") { "/dev/fd" } else { "/proc/self/fd" };
    let fds: Vec<std::os::fd::RawFd> =
        std::fs::read_dir(dir)?.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    for fd in fds.into_iter().filter(|fd| *fd > 2 && !keep.contains(fd)) {
        // Safety: the borrow lives only for this call; on a descriptor that closed
        // since the listing (the listing's own), fcntl fails with EBADF, ignored.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let _ = fcntl(borrowed, FcntlArg::F_GETFD)
            .map(FdFlag::from_bits_truncate)
            .and_then(|flags| fcntl(borrowed, FcntlArg::F_SETFD(flags | FdFlag::FD_CLOEXEC)));
    }
    Ok(())
}

/// A pipe whose write end a process about to be spawned inherits: `(read, write)`,
/// the read end closed on `exec`, the write end kept across it (for the start pipe
/// a CLI hands the daemon it starts). The caller closes its write end after the spawn.
///
/// Errors: the `io::Error` of `pipe(2)` or `fcntl(2)` (out of descriptors).
pub fn inheritable_pipe() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    let (read, write) = nix::unistd::pipe().map_err(io::Error::from)?;
    fcntl(&read, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).map_err(io::Error::from)?;
    Ok((read, write))
}

/// Takes ownership of a descriptor inherited across `exec` (named by number in the
/// environment by the process that exec'd us).
///
/// Errors: `InvalidInput` when `fd` is not open in this process.
pub fn inherited_fd(fd: std::os::fd::RawFd) -> io::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
    if fd < 3 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("descriptor {fd} is a standard stream")));
    }
    // Safety: the borrow lives only for this check; fcntl(F_GETFD) fails with EBADF
    // rather than touching anything when `fd` is not open.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    fcntl(borrowed, FcntlArg::F_GETFD)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("descriptor {fd} is not open: {e}")))?;
    fcntl(borrowed, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).map_err(io::Error::from)?;
    // Safety: the descriptor is open (checked above) and, by the exec contract that
    // named it, owned by nothing else in this process.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
