//! The descriptor limit (`RLIMIT_NOFILE`): the daemon raises its own soft limit to the
//! hard one at start, and the processes it starts get the soft limit it was given.
//!
//! The daemon holds a descriptor per client connection, per supervisor and per server
//! pipe, so it needs more than the usual soft limit of 1024; the servers it starts
//! expect the usual one (`select(2)` cannot watch a descriptor at or above 1024).

use std::io;
use std::sync::OnceLock;

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// The descriptor limits of this process before [`raise_nofile_limit`] raised them.
static ORIGINAL: OnceLock<Nofile> = OnceLock::new();

/// A soft and a hard `RLIMIT_NOFILE`, in descriptors (`RLIM_INFINITY` for none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nofile {
    /// The soft limit: what the process may open.
    pub soft: u64,
    /// The hard limit: how far an unprivileged process may raise its soft limit.
    pub hard: u64,
}

/// This process's descriptor limits.
///
/// Errors: the `io::Error` of `getrlimit(2)`.
pub fn nofile_limit() -> io::Result<Nofile> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    Ok(Nofile { soft, hard })
}

/// Raises this process's soft descriptor limit to its hard limit (on macOS, to at
/// most `OPEN_MAX`, 10240, which is what `setrlimit` accepts there), and remembers the
/// limits it had, so that every process spawned through [`crate::process::command`]
/// from now on starts with them again. Returns the limits before and after. Calling it
/// again changes nothing that was remembered.
///
/// Errors: the `io::Error` of `getrlimit(2)` or `setrlimit(2)`; the limits are then
/// left as they were.
pub fn raise_nofile_limit() -> io::Result<(Nofile, Nofile)> {
    let before = nofile_limit()?;
    let soft = crate::sys::nofile_ceiling(before.hard).max(before.soft);
    if soft != before.soft {
        setrlimit(Resource::RLIMIT_NOFILE, soft, before.hard).map_err(io::Error::from)?;
    }
    let original = *ORIGINAL.get_or_init(|| before);
    Ok((original, Nofile { soft, hard: before.hard }))
}

/// The limits to give spawned processes: those before [`raise_nofile_limit`], when it
/// raised them.
pub(crate) fn original_nofile() -> Option<Nofile> {
    ORIGINAL.get().copied()
}

/// Puts this process's soft descriptor limit back to what it was before
/// [`raise_nofile_limit`]: before it replaces itself with `exec`, so that the new image
/// sees, and passes on, the limits the daemon was started with.
///
/// Errors: the `io::Error` of `setrlimit(2)`.
pub fn restore_nofile_limit() -> io::Result<()> {
    match ORIGINAL.get() {
        Some(o) => setrlimit(Resource::RLIMIT_NOFILE, o.soft, o.hard).map_err(io::Error::from),
        None => Ok(()),
    }
}

/// Sets the descriptor limits `limits` in a child between `fork` and `exec`: only
/// `setrlimit(2)`, which is async-signal-safe.
pub(crate) fn set_in_child(limits: Nofile) -> io::Result<()> {
    setrlimit(Resource::RLIMIT_NOFILE, limits.soft, limits.hard).map_err(io::Error::from)
}
