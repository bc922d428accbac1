//! Kernel confinement of a process mcpx starts (docs/security.md): what it may read,
//! write and execute, by path; the TCP ports it may reach, if any; and, whatever it
//! asks, no unix or netlink socket, no new process, no signal or trace of any process
//! outside itself.
//!
//! A [`Policy`] is made ready in the parent ([`prepare`]: paths opened, filters compiled)
//! and applied by [`crate::process::command`] to the child between `fork` and `exec`, so
//! the program runs confined from its first instruction and cannot undo it.
//!
//! - Linux: a Landlock ruleset (landlock(7), ABI 4 or later: file system, TCP bind and
//!   connect; ABI 6 adds the abstract unix socket and signal scopes) and seccomp filters
//!   (seccomp(2)) for what Landlock does not cover, with `no_new_privs` set and every
//!   capability dropped.
//! - macOS: a Seatbelt profile (sandbox-exec(1)) written from the same policy. It is built
//!   by the macOS check and not run on the machines this project is tested on.
//!
//! [`support`] says whether this kernel confines, and why not when it does not.

mod policy;

use std::io;

pub use policy::{Access, CLOSED, Grant, Network, Policy, Support};

use crate::sys;

/// Whether this kernel can confine a process.
///
/// - Linux: Landlock ABI 4 or later (Linux 6.7; the first with TCP rules) and seccomp.
///   Earlier ABIs, or Landlock not built or not enabled (`lsm=` on the kernel's command
///   line), count as no confinement. Built with the `test-hooks` feature, the test-only
///   `MCPX_TEST_LANDLOCK_ABI` replaces the kernel's answer (`0`: no Landlock).
/// - macOS: `/usr/bin/sandbox-exec` exists.
pub fn support() -> Support {
    sys::confine_support()
}

/// The files a dynamically linked program needs to start and run on this system, found
/// on this machine (a path that does not exist is left out): the dynamic loader and the
/// shared libraries, the loader's cache, the time zone database, `/dev/null` and
/// `/dev/urandom`. What each is for is in docs/security.md.
pub fn runtime_base() -> Vec<Grant> {
    sys::confine_runtime_base().into_iter().filter(|g| g.path.exists()).collect()
}

/// A [`Policy`] made ready to apply in a child: on Linux the Landlock ruleset's
/// descriptor and the compiled seccomp filters, on macOS the Seatbelt profile. Cheap to
/// share (`Arc`) between the spawns of one run.
pub struct Prepared(pub(crate) sys::Prepared);

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prepared")
    }
}

/// Makes `policy` ready: opens each granted path and builds the ruleset and the filters
/// (Linux), or writes the profile (macOS).
///
/// Errors: `Unsupported` when [`support`] says the kernel cannot confine (the message
/// says why); the `io::Error` of opening a granted path, with the path; `Other` when
/// the kernel refuses the ruleset or a filter does not compile.
pub fn prepare(policy: &Policy) -> io::Result<Prepared> {
    if let Support::Unavailable(why) = support() {
        return Err(io::Error::new(io::ErrorKind::Unsupported, why));
    }
    sys::confine_prepare(policy).map(Prepared)
}

/// Test-only: whether a confined runtime's own permission checks are to be switched off
/// (Deno's `--allow-all`), to show that the kernel alone confines. Built with the
/// `test-hooks` feature, `MCPX_TEST_RUNTIME_FLAGS_OFF=1`; otherwise always `false`.
pub fn runtime_flags_off() -> bool {
    #[cfg(feature = "test-hooks")]
    if std::env::var_os("MCPX_TEST_RUNTIME_FLAGS_OFF").is_some_and(|v| v == "1") {
        return true;
    }
    false
}

#[cfg(all(test, target_os = "linux"))]
mod tests;
