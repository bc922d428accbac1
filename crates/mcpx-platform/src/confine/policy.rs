//! What a confined process may reach ([`Policy`]), and whether this kernel can hold it
//! to that ([`Support`]): plain data, shared by the Linux and macOS implementations.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What a [`Grant`] opens under its path (a directory and everything beneath it, or one
/// file). Written `read`, `read-execute`, `write`, `read-write` (a supervisor's launch
/// request carries a policy: docs/attach-protocol.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Read files and list directories.
    Read,
    /// Read, and execute: a program or the dynamic loader.
    ReadExecute,
    /// Create, write, truncate, rename within and remove files and directories; not read.
    Write,
    /// [`Access::Read`] and [`Access::Write`].
    ReadWrite,
}

/// One path the confined process may reach, and how: `{"path", "access"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// A directory (the grant covers everything beneath it) or a file. Symbolic links in
    /// it are followed when the policy is prepared: the grant is of what it names then.
    pub path: PathBuf,
    /// What the grant opens.
    pub access: Access,
}

impl Grant {
    /// A grant of `access` to `path`.
    pub fn new(path: impl Into<PathBuf>, access: Access) -> Grant {
        Grant { path: path.into(), access }
    }
}

/// What a confined process may reach: exactly its grants of the file system, and the
/// network its [`Network`] opens. Everything else stays closed: new sockets of other
/// families, new processes, signals, tracing and other processes' memory (see
/// [`CLOSED`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The paths it may reach.
    pub grants: Vec<Grant>,
    /// The network it may reach.
    #[serde(default)]
    pub network: Network,
}

/// The network a confined process may reach. Whatever it is, no unix, netlink or raw
/// socket can be made: the daemon's socket, the session bus and the kernel's routing
/// stay closed.
///
/// Written `"closed"`, `"open"` or `{"ports": {"connect": [443], "bind": []}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// None: no TCP, and no new socket of any family (the default).
    #[default]
    Closed,
    /// TCP connections to the `connect` ports and listening on the `bind` ports only
    /// (Landlock ABI 4, of any host); IPv4 and IPv6 sockets may be made, so UDP, which
    /// Landlock does not cover, is open (DNS works).
    Ports {
        /// The TCP ports it may connect to.
        connect: Vec<u16>,
        /// The TCP ports it may bind.
        bind: Vec<u16>,
    },
    /// Any TCP and UDP over IPv4 and IPv6.
    Open,
}

/// What confinement closes, whatever the grants, one line each, for a reader
/// (`mcpx doctor`, docs/security.md).
pub const CLOSED: &[&str] = &[
    "every file and directory not granted (symbolic links are followed to what they name)",
    "TCP bind and connect (Landlock ABI 4), but to and on the ports the policy's network opens",
    "new sockets of any family: unix, UDP, raw, netlink (seccomp); IPv4 and IPv6 ones when the policy's network is open or opens ports",
    "new processes: fork, vfork, clone without CLONE_THREAD (seccomp); executing any file not granted (Landlock)",
    "signals to any process (seccomp; Landlock ABI 6 scopes them to the sandbox too)",
    "ptrace, process_vm_readv/writev, pidfd_open/getfd (seccomp)",
    "abstract unix sockets outside the sandbox (Landlock ABI 6)",
    "io_uring, new namespaces, bpf, perf events, userfaultfd, the kernel keyrings, open_by_handle_at (seccomp)",
    "a file's mode, owner, times and extended attributes by path, and file watches (seccomp: Landlock does not cover metadata)",
    "resource limits of other processes (prlimit64 on a pid but the sandbox's own; seccomp)",
    "descriptors inherited from the parent: all closed at exec",
    "capabilities: all dropped, and no_new_privs set, so none come back on exec",
];

/// Whether this kernel confines, as [`super::support`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Confinement is enforced by the kernel.
    Kernel {
        /// What enforces it, for a reader: `Landlock ABI 7 and seccomp`, `Seatbelt`.
        mechanism: String,
        /// The Landlock ABI (0 on macOS).
        abi: u32,
        /// Signals and abstract unix sockets are scoped by the kernel too (Landlock ABI 6).
        scoped: bool,
    },
    /// The kernel cannot confine: why, for a reader.
    Unavailable(String),
}

impl Support {
    /// Whether the kernel confines.
    pub fn confines(&self) -> bool {
        matches!(self, Support::Kernel { .. })
    }
}
