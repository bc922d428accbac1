//! Signal dispositions. `nix` marks `sigaction` unsafe because a handler runs in signal
//! context; this module only installs `SIG_IGN` and an empty `SIGCHLD` handler, neither
//! of which runs any code.

use std::io;

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

/// See [`crate::ignore_sigpipe`].
pub(crate) fn ignore_sigpipe() -> io::Result<()> {
    let ignore = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
    // Safety: `SIG_IGN` installs no handler, so no code runs in signal context and there are
    // no async-signal-safety requirements; the previous action is dropped, not restored.
    unsafe { sigaction(Signal::SIGPIPE, &ignore) }?;
    Ok(())
}

/// The handler of `SIGCHLD` while [`crate::ChildExitWake`] is installed: it runs no code;
/// its only effect is to interrupt the `ppoll(2)` that unblocks the signal.
#[cfg(any(target_os = "linux", target_os = "android"))]
extern "C" fn on_sigchld(_: nix::libc::c_int) {}

/// See [`crate::ChildExitWake::install`]: installs [`on_sigchld`] and blocks `SIGCHLD` in
/// the calling thread; returns the mask to wait with (the old one, `SIGCHLD` unblocked).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn catch_sigchld() -> io::Result<SigSet> {
    let action = SigAction::new(SigHandler::Handler(on_sigchld), SaFlags::SA_NOCLDSTOP, SigSet::empty());
    // Safety: the handler is an empty function, trivially async-signal-safe; the previous
    // action (the default, which ignores SIGCHLD) is dropped, not restored.
    unsafe { sigaction(Signal::SIGCHLD, &action) }?;
    let mut chld = SigSet::empty();
    chld.add(Signal::SIGCHLD);
    let mut old = SigSet::empty();
    nix::sys::signal::pthread_sigmask(nix::sys::signal::SigmaskHow::SIG_BLOCK, Some(&chld), Some(&mut old))?;
    old.remove(Signal::SIGCHLD);
    Ok(old)
}

/// Whether the calling thread blocks any signal (see [`crate::process::command`]).
pub(crate) fn blocks_any() -> bool {
    SigSet::thread_get_mask().is_ok_and(|mask| mask.iter().next().is_some())
}

/// Unblocks every signal of the calling thread (`pthread_sigmask(SIG_SETMASK, {})`, which
/// is async-signal-safe: for a child between `fork` and `exec`).
pub(crate) fn unblock_all() -> io::Result<()> {
    nix::sys::signal::pthread_sigmask(nix::sys::signal::SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
    Ok(())
}
