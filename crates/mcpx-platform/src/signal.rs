//! Signal dispositions. `nix` marks `sigaction` unsafe because a handler runs in signal
//! context; this module only installs `SIG_IGN`, which runs no code.

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
