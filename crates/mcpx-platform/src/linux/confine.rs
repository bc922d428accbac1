//! Linux confinement: a Landlock ruleset (landlock(7)) and seccomp filters (seccomp(2)),
//! prepared in the parent and applied between `fork` and `exec` by [`apply_in_child`],
//! which makes only async-signal-safe system calls.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch, sock_filter,
};

use crate::confine::{Access as Grant, Grant as PathGrant, Network, Policy, Support};

/// The Landlock ABI whose rights the ruleset handles: 6 (Linux 6.12) has every right
/// mcpx uses (file system, TCP, scopes). On an older kernel the rights it lacks are
/// dropped (the crate's best effort), which [`confine_support`] reports.
const TARGET: ABI = ABI::V6;

/// The lowest Landlock ABI that counts as confinement: 4 (Linux 6.7), the first that
/// closes TCP.
const MINIMUM_ABI: u32 = 4;

/// What [`apply_in_child`] needs, made in the parent.
pub(crate) struct Prepared {
    /// The Landlock ruleset (close-on-exec, so the program never holds it).
    ruleset: OwnedFd,
    /// The seccomp filters, installed in order.
    filters: Vec<BpfProgram>,
}

pub(crate) fn confine_support() -> Support {
    let abi = match landlock_abi() {
        Ok(abi) => abi,
        Err(why) => return Support::Unavailable(why),
    };
    if abi < MINIMUM_ABI {
        return Support::Unavailable(format!(
            "this kernel's Landlock is ABI {abi}, which cannot close the network (ABI {MINIMUM_ABI}, Linux 6.7, is the first that can)"
        ));
    }
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        return Support::Unavailable("seccomp filters are built for x86_64 and aarch64 only".to_owned());
    }
    Support::Kernel { mechanism: format!("Landlock ABI {abi} and seccomp"), abi, scoped: abi >= 6 }
}

/// The kernel's Landlock ABI (`landlock_create_ruleset(NULL, 0, VERSION)`), or why there
/// is none.
fn landlock_abi() -> Result<u32, String> {
    #[cfg(feature = "test-hooks")]
    if let Some(abi) = std::env::var("MCPX_TEST_LANDLOCK_ABI").ok().and_then(|v| v.parse::<u32>().ok()) {
        return match abi {
            0 => Err("this kernel has no Landlock (simulated by MCPX_TEST_LANDLOCK_ABI=0)".to_owned()),
            abi => Ok(abi),
        };
    }
    match abi_syscall() {
        Ok(abi) => Ok(abi),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            Err("Landlock is built into this kernel but not enabled: add `landlock` to the `lsm=` kernel parameter"
                .to_owned())
        }
        Err(e) => Err(format!("this kernel has no Landlock ({e}); it needs Linux 6.7 or later built with it")),
    }
}

#[allow(unsafe_code)] // Reason: the one Landlock call the crate keeps private (its ABI probe).
fn abi_syscall() -> io::Result<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // Safety: with a null attribute pointer, a zero size and the VERSION flag, the call
    // reads and writes no memory and creates nothing; it returns the ABI or an error.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 { Err(io::Error::last_os_error()) } else { Ok(u32::try_from(v).unwrap_or(0)) }
}

pub(crate) fn confine_runtime_base() -> Vec<PathGrant> {
    let mut grants = vec![
        // The dynamic loader, which the kernel opens to execute any dynamically linked program.
        PathGrant::new(LOADER, Grant::ReadExecute),
        // The loader's cache and the shared libraries it maps (read, never executed).
        PathGrant::new("/etc/ld.so.cache", Grant::Read),
    ];
    for dir in ["/lib", "/lib64", "/usr/lib", "/usr/lib64"] {
        grants.push(PathGrant::new(dir, Grant::Read));
    }
    // The local time zone and the database it points into (Date, Intl).
    grants.push(PathGrant::new("/etc/localtime", Grant::Read));
    grants.push(PathGrant::new("/usr/share/zoneinfo", Grant::Read));
    // Discarded output and the random device a runtime may open instead of getrandom(2).
    grants.push(PathGrant::new("/dev/null", Grant::ReadWrite));
    grants.push(PathGrant::new("/dev/urandom", Grant::Read));
    grants
}

/// The dynamic loader of this architecture's glibc (the `PT_INTERP` of its programs).
#[cfg(target_arch = "x86_64")]
const LOADER: &str = "/lib64/ld-linux-x86-64.so.2";
#[cfg(target_arch = "aarch64")]
const LOADER: &str = "/lib/ld-linux-aarch64.so.1";
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const LOADER: &str = "/lib/ld-linux.so";

pub(crate) fn confine_prepare(policy: &Policy) -> io::Result<Prepared> {
    Ok(Prepared { ruleset: ruleset(policy)?, filters: filters(&policy.network)? })
}

/// The Landlock rights of a grant.
fn rights(access: Grant) -> BitFlags<AccessFs> {
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    // Writing: everything `from_write` has but device ioctls, which nothing needs.
    let write = AccessFs::from_write(TARGET) & !AccessFs::IoctlDev;
    match access {
        Grant::Read => read,
        Grant::ReadExecute => read | AccessFs::Execute,
        Grant::Write => write,
        Grant::ReadWrite => read | write,
    }
}

fn ruleset(policy: &Policy) -> io::Result<OwnedFd> {
    let refused = |what: &str, e: &dyn std::fmt::Display| io::Error::other(format!("Landlock refused {what}: {e}"));
    // An open network handles no TCP right; any other handles both, and opens ports.
    let mut handled = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET))
        .map_err(|e| refused("the ruleset", &e))?;
    if policy.network != Network::Open {
        handled = handled.handle_access(AccessNet::from_all(TARGET)).map_err(|e| refused("the ruleset", &e))?;
    }
    let mut ruleset =
        handled.scope(Scope::from_all(TARGET)).and_then(|r| r.create()).map_err(|e| refused("the ruleset", &e))?;
    if let Network::Ports { connect, bind } = &policy.network {
        let ports =
            connect.iter().map(|p| (*p, AccessNet::ConnectTcp)).chain(bind.iter().map(|p| (*p, AccessNet::BindTcp)));
        for (port, right) in ports {
            ruleset = ruleset
                .add_rule(NetPort::new(port, right))
                .map_err(|e| refused(&format!("the rule for TCP port {port}"), &e))?;
        }
    }
    for grant in &policy.grants {
        let fd = PathFd::new(&grant.path).map_err(|e| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("cannot open {} for the sandbox: {e}", grant.path.display()),
            )
        })?;
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, rights(grant.access)))
            .map_err(|e| refused(&format!("the rule for {}", grant.path.display()), &e))?;
    }
    Option::<OwnedFd>::from(ruleset).ok_or_else(|| io::Error::other("Landlock made no ruleset on this kernel"))
}

/// The system calls refused with `EPERM`, each with why (what Landlock does not cover).
fn denied() -> Vec<(libc::c_long, &'static str)> {
    let mut calls = vec![
        (libc::SYS_socket, "new sockets of any family: Landlock does not cover a path-named unix socket, nor UDP"),
        (libc::SYS_ptrace, "tracing another process"),
        (libc::SYS_process_vm_readv, "reading another process's memory"),
        (libc::SYS_process_vm_writev, "writing another process's memory"),
        (libc::SYS_pidfd_open, "a handle on another process"),
        (libc::SYS_pidfd_getfd, "taking another process's descriptors"),
        (libc::SYS_pidfd_send_signal, "signals"),
        (libc::SYS_kill, "signals"),
        (libc::SYS_tkill, "signals"),
        (libc::SYS_tgkill, "signals"),
        (libc::SYS_rt_sigqueueinfo, "signals"),
        (libc::SYS_rt_tgsigqueueinfo, "signals"),
        (libc::SYS_io_uring_setup, "io_uring: its operations (sockets, opens) are not seen by seccomp"),
        (libc::SYS_io_uring_enter, "io_uring"),
        (libc::SYS_io_uring_register, "io_uring"),
        (libc::SYS_unshare, "new namespaces (a user namespace gives capabilities inside it)"),
        (libc::SYS_setns, "joining another namespace"),
        (libc::SYS_bpf, "kernel programs"),
        (libc::SYS_perf_event_open, "watching other processes"),
        (libc::SYS_userfaultfd, "stalling the kernel on a page fault"),
        (libc::SYS_keyctl, "the kernel keyrings, where a user's secrets may be"),
        (libc::SYS_add_key, "the kernel keyrings"),
        (libc::SYS_request_key, "the kernel keyrings"),
        (libc::SYS_name_to_handle_at, "file handles, which open files without a path walk"),
        (libc::SYS_open_by_handle_at, "file handles, which open files without a path walk"),
        // Landlock does not cover a file's metadata: by path, through a link in a
        // granted directory, these would reach any file of the user's.
        (libc::SYS_fchmodat, "changing a file's mode by path (Landlock does not cover it)"),
        (libc::SYS_fchownat, "changing a file's owner by path"),
        (libc::SYS_utimensat, "changing a file's times"),
        (libc::SYS_setxattr, "extended attributes by path"),
        (libc::SYS_lsetxattr, "extended attributes by path"),
        (libc::SYS_removexattr, "extended attributes by path"),
        (libc::SYS_lremovexattr, "extended attributes by path"),
        (libc::SYS_inotify_add_watch, "watching files outside what may be read"),
        (libc::SYS_fanotify_init, "watching the file system"),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_fork, "new processes"),
        (libc::SYS_vfork, "new processes"),
        (libc::SYS_chmod, "changing a file's mode by path"),
        (libc::SYS_fchmodat2, "changing a file's mode by path"),
        (libc::SYS_chown, "changing a file's owner by path"),
        (libc::SYS_lchown, "changing a file's owner by path"),
        (libc::SYS_utime, "changing a file's times"),
        (libc::SYS_utimes, "changing a file's times"),
        (libc::SYS_futimesat, "changing a file's times"),
    ]);
    calls
}

/// The filters: (1) the calls of [`denied`], and `clone` without `CLONE_THREAD` (a new
/// process; threads stay), refused with `EPERM`; a `network` that opens any TCP lets
/// `socket` make IPv4 and IPv6 sockets, and no other family; (2) `clone3` refused with `ENOSYS`, so
/// glibc falls back to `clone`, whose flags a filter can read (`clone3` passes them in
/// memory); (3) on x86_64, every x32 system call (numbers from `__X32_SYSCALL_BIT`),
/// which would otherwise pass the filters under numbers they do not name. Any other
/// architecture than the build's kills the process (seccompiler's own check).
fn filters(network: &Network) -> io::Result<Vec<BpfProgram>> {
    let compile = |filter: Result<SeccompFilter, seccompiler::BackendError>| -> io::Result<BpfProgram> {
        filter
            .and_then(BpfProgram::try_from)
            .map_err(|e| io::Error::other(format!("the seccomp filter does not compile: {e}")))
    };
    let arch = target_arch();
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = denied().into_iter().map(|(nr, _)| (nr, Vec::new())).collect();
    let new_process =
        SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64), 0)
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(|e| io::Error::other(format!("the seccomp rule for clone: {e}")))?;
    rules.insert(libc::SYS_clone, vec![new_process]);
    if *network != Network::Closed {
        // Refused: every family but AF_INET and AF_INET6 (a rule per range around them).
        let rule = |conditions: &[(SeccompCmpOp, u64)]| -> io::Result<SeccompRule> {
            let made = conditions
                .iter()
                .map(|(op, value)| SeccompCondition::new(0, SeccompCmpArgLen::Dword, op.clone(), *value));
            made.collect::<Result<Vec<_>, _>>()
                .and_then(SeccompRule::new)
                .map_err(|e| io::Error::other(format!("the seccomp rule for socket: {e}")))
        };
        let (inet, inet6) = (libc::AF_INET as u64, libc::AF_INET6 as u64);
        rules.insert(
            libc::SYS_socket,
            vec![
                rule(&[(SeccompCmpOp::Lt, inet)])?,
                rule(&[(SeccompCmpOp::Gt, inet), (SeccompCmpOp::Lt, inet6)])?,
                rule(&[(SeccompCmpOp::Gt, inet6)])?,
            ],
        );
    }
    // Resource limits of the process itself (pid 0) only: another process of the user's,
    // the daemon, could be left without descriptors or killed by a CPU limit.
    let other_process = SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0)
        .and_then(|c| SeccompRule::new(vec![c]))
        .map_err(|e| io::Error::other(format!("the seccomp rule for prlimit64: {e}")))?;
    rules.insert(libc::SYS_prlimit64, vec![other_process]);
    let eperm = SeccompAction::Errno(libc::EPERM as u32);
    let mut programs = vec![
        compile(SeccompFilter::new(rules, SeccompAction::Allow, eperm, arch))?,
        compile(SeccompFilter::new(
            [(libc::SYS_clone3, Vec::new())].into(),
            SeccompAction::Allow,
            SeccompAction::Errno(libc::ENOSYS as u32),
            arch,
        ))?,
    ];
    if cfg!(target_arch = "x86_64") {
        programs.push(x32_guard());
    }
    Ok(programs)
}

fn target_arch() -> TargetArch {
    if cfg!(target_arch = "aarch64") { TargetArch::aarch64 } else { TargetArch::x86_64 }
}

/// A filter refusing (`ENOSYS`) every system call numbered at or above the x32 bit
/// (`0x4000_0000`) on x86_64: classic BPF over `struct seccomp_data` (`nr` at offset 0,
/// `arch` at 4), as seccomp(2) describes it.
fn x32_guard() -> BpfProgram {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        op(LD_W_ABS, 0, 0, 4),
        op(JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
        op(LD_W_ABS, 0, 0, 0),
        op(JGE_K, 0, 1, X32_SYSCALL_BIT),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Confines the calling process: marks every descriptor above the standard streams
/// close-on-exec (what the parent inherited and left open must not reach the program:
/// Landlock checks a file when it is opened, not when it is used), sets
/// `no_new_privs`, drops every capability, enforces the Landlock ruleset, installs the
/// seccomp filters. Called in the child between `fork` and `exec`: it allocates nothing
/// and makes only async-signal-safe system calls.
///
/// Errors: the first call that fails, as its `errno`.
#[allow(unsafe_code)] // Reason: prctl, capset and landlock_restrict_self have no safe wrapper usable after fork.
pub(crate) fn apply_in_child(prepared: &Prepared) -> io::Result<()> {
    let check = |rc: libc::c_long| if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) };
    // Safety: close_range(3, ~0, CLOSE_RANGE_CLOEXEC) takes integers only; it marks the
    // descriptors (Linux 5.11; Landlock ABI 4 needs 6.7), so those still needed until
    // `exec` (the ruleset, the spawn's error pipe) stay open until then.
    check(unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) })?;
    // Safety: prctl(PR_SET_NO_NEW_PRIVS, 1) takes integers only and touches no memory of ours.
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }.into())?;
    // capset(2) with version 3: a header and two data words (the 64 capabilities), all
    // zero: no effective, permitted or inheritable capability. With no_new_privs set, an
    // exec cannot give any back (not even to root).
    let mut header = CapHeader { version: 0x2008_0522, pid: 0 };
    let data = [CapData::default(); 2];
    // Safety: both pointers are to live, correctly laid out structures on this stack frame;
    // the kernel reads `data` and may write the header's version.
    check(unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) })?;
    // Safety: the descriptor is the ruleset's, open for the life of `prepared`; no memory is passed.
    check(unsafe { libc::syscall(libc::SYS_landlock_restrict_self, prepared.ruleset.as_raw_fd(), 0u32) })?;
    for filter in &prepared.filters {
        seccompiler::apply_filter(filter).map_err(|e| match e {
            seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e) => e,
            _ => io::Error::from_raw_os_error(libc::EINVAL),
        })?;
    }
    Ok(())
}

/// `struct __user_cap_header_struct` (linux/capability.h).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct` (linux/capability.h).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
