//! The kernel's confinement, probed from inside: this test binary runs itself confined
//! ([`probe`], ignored unless asked for) and makes each forbidden system call directly,
//! below any runtime's own checks, reporting what the kernel answered.
#![allow(unsafe_code)] // Reason: the probe makes raw system calls to see the kernel's answers; see the Safety comments.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::*;
use crate::process::{Detach, SpawnSpec};

/// The probe's directory, from the test that runs it.
const PROBE_DIR: &str = "MCPX_CONFINE_PROBE_DIR";

/// `errno` of a raw system call's result, or `ok`.
fn answer(rc: libc::c_long) -> String {
    if rc < 0 { format!("errno {}", io::Error::last_os_error().raw_os_error().unwrap_or(0)) } else { "ok".to_owned() }
}

/// Run confined by [`confined_calls_are_refused_by_the_kernel`]: prints one
/// `probe <call> <answer>` line per forbidden call.
#[test]
#[ignore = "runs confined, started by confined_calls_are_refused_by_the_kernel"]
fn probe() {
    let dir = PathBuf::from(std::env::var_os(PROBE_DIR).expect("started by the confinement test"));
    let say = |what: &str, rc: libc::c_long| println!("probe {what} {}", answer(rc));
    let open = |path: &Path, flags: libc::c_int| -> libc::c_long {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // Safety: `c` is a valid C string for the duration of the call; the descriptor is leaked, as the process ends.
        unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, 0o600) }.into()
    };
    say("read-allowed", open(&dir.join("allowed/ok.txt"), libc::O_RDONLY));
    say("read-secret", open(&dir.join("secret.txt"), libc::O_RDONLY));
    say("read-link", open(&dir.join("allowed/link.txt"), libc::O_RDONLY));
    say("write-outside", open(&dir.join("made.txt"), libc::O_WRONLY | libc::O_CREAT));
    say("write-allowed", open(&dir.join("writable/made.txt"), libc::O_WRONLY | libc::O_CREAT));
    // Safety: each call below takes integers, or pointers to live locals, and the kernel
    // refuses it or does what it says; none touches memory this test relies on.
    unsafe {
        say("socket-inet", libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0).into());
        say("socket-unix", libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0).into());
        say("socket-netlink", libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, 0).into());
        let mut pair = [0; 2];
        say("socketpair", libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, pair.as_mut_ptr()).into());
        let forked = libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0);
        if forked == 0 {
            libc::_exit(0);
        }
        say("clone-process", forked);
        say("clone3", libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize));
        #[cfg(target_arch = "x86_64")]
        say("fork", libc::syscall(libc::SYS_fork));
        let parent = libc::getppid();
        say("kill-parent", libc::kill(parent, 0).into());
        say("tgkill-parent", libc::syscall(libc::SYS_tgkill, parent, parent, 0));
        say("ptrace-parent", libc::syscall(libc::SYS_ptrace, libc::PTRACE_ATTACH, parent, 0, 0));
        say("pidfd-parent", libc::syscall(libc::SYS_pidfd_open, parent, 0));
        say("unshare-user", libc::unshare(libc::CLONE_NEWUSER).into());
        let mut params = [0u8; 120];
        say("io_uring", libc::syscall(libc::SYS_io_uring_setup, 1, params.as_mut_ptr()));
        say("keyctl", libc::syscall(libc::SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0));
        #[cfg(target_arch = "x86_64")]
        say("x32-getpid", libc::syscall(0x4000_0000 | libc::SYS_getpid));
        say("no-new-privs", libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0).into());
        // Metadata by path, through a link in a writable directory: Landlock does not
        // cover it, seccomp does.
        let link = std::ffi::CString::new(dir.join("writable/link").as_os_str().as_encoded_bytes()).unwrap();
        say("chmod-through-link", libc::chmod(link.as_ptr(), 0o666).into());
        say("chown-through-link", libc::chown(link.as_ptr(), 0, 0).into());
        say("utimes-through-link", libc::utimes(link.as_ptr(), std::ptr::null()).into());
        let mut limit = libc::rlimit { rlim_cur: 4, rlim_max: 4 };
        say("prlimit-parent", libc::syscall(libc::SYS_prlimit64, parent, libc::RLIMIT_NOFILE, &raw const limit, 0));
        say("prlimit-self", libc::syscall(libc::SYS_prlimit64, 0, libc::RLIMIT_NOFILE, 0, &raw mut limit));
        // A descriptor the parent left open across exec is closed (its number may have
        // been given to another file since: compared by inode).
        let inherited: libc::c_int = std::env::var("MCPX_CONFINE_PROBE_FD").unwrap().parse().unwrap();
        let mut stat: libc::stat = std::mem::zeroed();
        let secret_inode = std::fs::metadata(dir.join("secret.txt")).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
        let still = libc::fstat(inherited, &raw mut stat) == 0 && secret_inode.is_ok_and(|ino| ino == stat.st_ino);
        println!("probe inherited-fd {}", if still { "open" } else { "closed" });
        let mut header = [0x2008_0522u32, 0];
        let mut data = [0u32; 6];
        libc::syscall(libc::SYS_capget, header.as_mut_ptr(), data.as_mut_ptr());
        println!("probe capabilities {:?}", data);
    }
}

/// Runs [`probe`] confined and checks the kernel's answer to each call.
#[test]
fn confined_calls_are_refused_by_the_kernel() {
    let Support::Kernel { .. } = support() else {
        panic!(
            "this machine's kernel cannot confine ({:?}); the project's machines have Landlock ABI 4 or later",
            support()
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for sub in ["allowed", "writable"] {
        std::fs::create_dir(root.join(sub)).unwrap();
    }
    std::fs::write(root.join("allowed/ok.txt"), "ok").unwrap();
    std::fs::write(root.join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(root.join("secret.txt"), root.join("allowed/link.txt")).unwrap();
    std::os::unix::fs::symlink(root.join("secret.txt"), root.join("writable/link")).unwrap();
    // A descriptor of the secret, open across exec, as a shell may leave one.
    let inherited =
        nix::fcntl::open(&root.join("secret.txt"), nix::fcntl::OFlag::O_RDONLY, nix::sys::stat::Mode::empty()).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut grants = runtime_base();
    grants.extend([
        Grant::new(&exe, Access::ReadExecute),
        Grant::new(root.join("allowed"), Access::Read),
        Grant::new(root.join("writable"), Access::Write),
    ]);
    let env: BTreeMap<OsString, OsString> = [
        (OsString::from(PROBE_DIR), root.clone().into_os_string()),
        (OsString::from("MCPX_CONFINE_PROBE_FD"), std::os::fd::AsRawFd::as_raw_fd(&inherited).to_string().into()),
    ]
    .into();
    let out = confined("confine::tests::probe", &Policy { grants, ..Policy::default() }, env);
    let answers = said(&out);
    let answers: BTreeMap<&str, &str> = answers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let eacces = format!("errno {}", libc::EACCES);
    let eperm = format!("errno {}", libc::EPERM);
    let enosys = format!("errno {}", libc::ENOSYS);
    let mut expected: Vec<(&str, &str)> = vec![
        ("read-allowed", "ok"),
        ("read-secret", &eacces),
        ("read-link", &eacces),
        ("write-outside", &eacces),
        ("write-allowed", "ok"),
        ("socket-inet", &eperm),
        ("socket-unix", &eperm),
        ("socket-netlink", &eperm),
        // Allowed by name: a connected pair reaches nothing outside the process.
        ("socketpair", "ok"),
        ("clone-process", &eperm),
        ("clone3", &enosys),
        ("kill-parent", &eperm),
        ("tgkill-parent", &eperm),
        ("ptrace-parent", &eperm),
        ("pidfd-parent", &eperm),
        ("unshare-user", &eperm),
        ("io_uring", &eperm),
        ("keyctl", &eperm),
        ("no-new-privs", "ok"),
        ("chmod-through-link", &eperm),
        ("chown-through-link", &eperm),
        ("utimes-through-link", &eperm),
        ("prlimit-parent", &eperm),
        ("prlimit-self", "ok"),
        ("inherited-fd", "closed"),
        ("capabilities", "[0, 0, 0, 0, 0, 0]"),
    ];
    if cfg!(target_arch = "x86_64") {
        expected.extend([("fork", eperm.as_str()), ("x32-getpid", enosys.as_str())]);
    }
    for (call, want) in expected {
        assert_eq!(answers.get(call).copied(), Some(want), "{call}: {out}");
    }
    assert!(!root.join("made.txt").exists());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(root.join("secret.txt")).unwrap().permissions().mode() & 0o777, 0o644);
    assert!(root.join("writable/made.txt").exists());
}

/// Runs this test binary's ignored test `probe` under `policy` with `env`, and returns
/// what it printed; it must succeed.
fn confined(probe: &str, policy: &Policy, env: BTreeMap<OsString, OsString>) -> String {
    let prepared = prepare(policy).expect("the policy is prepared");
    let args = ["--exact", probe, "--ignored", "--nocapture", "--test-threads=1"];
    let spec = SpawnSpec {
        program: std::env::current_exe().expect("this test binary"),
        args: args.iter().map(OsString::from).collect(),
        env,
        cwd: None,
        piped: true,
        detach: Detach::Group,
        confine: Some(std::sync::Arc::new(prepared)),
    };
    let mut child = crate::process::spawn(&spec).expect("the probe starts");
    drop(child.stdin.take());
    let mut out = String::new();
    child.stdout.take().expect("piped").read_to_string(&mut out).expect("its output");
    let mut err = String::new();
    child.stderr.take().expect("piped").read_to_string(&mut err).expect("its errors");
    assert!(child.wait().expect("its exit").success(), "{out}\n{err}");
    out
}

/// The `probe <what> <answer>` lines of a probe's output, by what.
fn said(out: &str) -> BTreeMap<String, String> {
    let lines = out.lines().filter_map(|l| l.rsplit_once("probe ").map(|(_, said)| said));
    lines.filter_map(|l| l.split_once(' ')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

/// A granted path that does not exist is named in the error.
#[test]
fn a_missing_path_is_named() {
    let err =
        prepare(&Policy { grants: vec![Grant::new("/nonexistent/mcpx-confine", Access::Read)], ..Policy::default() })
            .unwrap_err();
    assert!(err.to_string().contains("/nonexistent/mcpx-confine"), "{err}");
}

/// Run confined by [`the_network_opens_only_the_ports_the_policy_names`]: connects to
/// the two ports of `MCPX_CONFINE_PROBE_PORTS` (`open,closed`) and makes a socket of
/// each family, printing `probe <what> <answer>` lines.
#[test]
#[ignore = "runs confined, started by the_network_opens_only_the_ports_the_policy_names"]
fn probe_network() {
    let ports = std::env::var("MCPX_CONFINE_PROBE_PORTS").expect("started by the network test");
    let (open, closed) = ports.split_once(',').unwrap();
    let connect = |port: &str| match std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())) {
        Ok(_) => "ok".to_owned(),
        Err(e) => format!("errno {}", e.raw_os_error().unwrap_or(0)),
    };
    println!("probe connect-open {}", connect(open));
    println!("probe connect-closed {}", connect(closed));
    let say = |what: &str, rc: libc::c_long| println!("probe {what} {}", answer(rc));
    // Safety: `socket` takes integers; the descriptors are leaked, as the process ends.
    unsafe {
        say("socket-inet6", libc::socket(libc::AF_INET6, libc::SOCK_STREAM, 0).into());
        say("socket-udp", libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0).into());
        say("socket-unix", libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0).into());
        say("socket-netlink", libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, 0).into());
    }
}

/// A network of ports lets TCP reach those ports only, and an open one any; either
/// lets IPv4 and IPv6 sockets be made, and never a unix or netlink one.
#[test]
fn the_network_opens_only_the_ports_the_policy_names() {
    let Support::Kernel { .. } = support() else { panic!("this machine's kernel cannot confine ({:?})", support()) };
    let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (open_port, closed_port) = (open.local_addr().unwrap().port(), closed.local_addr().unwrap().port());
    let exe = std::env::current_exe().unwrap();
    let run = |network: Network| -> BTreeMap<String, String> {
        let mut grants = runtime_base();
        grants.push(Grant::new(&exe, Access::ReadExecute));
        let env = [(OsString::from("MCPX_CONFINE_PROBE_PORTS"), OsString::from(format!("{open_port},{closed_port}")))];
        said(&confined("confine::tests::probe_network", &Policy { grants, network }, env.into()))
    };
    let (eacces, eperm) = (format!("errno {}", libc::EACCES), format!("errno {}", libc::EPERM));
    let ports = run(Network::Ports { connect: vec![open_port], bind: Vec::new() });
    let want = [
        ("connect-open", "ok"),
        ("connect-closed", eacces.as_str()),
        ("socket-inet6", "ok"),
        ("socket-udp", "ok"),
        ("socket-unix", eperm.as_str()),
        ("socket-netlink", eperm.as_str()),
    ];
    for (what, answer) in want {
        assert_eq!(ports.get(what).map(String::as_str), Some(answer), "ports: {what}: {ports:?}");
    }
    let any = run(Network::Open);
    assert_eq!((any["connect-open"].as_str(), any["connect-closed"].as_str()), ("ok", "ok"), "{any:?}");
    assert_eq!(any["socket-unix"], eperm, "{any:?}");
    let none = run(Network::Closed);
    assert_eq!((none["connect-open"].as_str(), none["socket-inet6"].as_str()), (eperm.as_str(), eperm.as_str()));
}
