//! Tests against real processes: this test process and throwaway children.

use std::io;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// Spawns `program args` with no stdio.
#[allow(clippy::disallowed_methods)] // Reason: test spawns a throwaway child
fn spawn(program: &str, args: &[&str]) -> Child {
    Command::new(program).args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}

/// Blocks until `child` has exited, without reaping it, so it stays a zombie.
#[cfg(target_os = "linux")]
fn wait_exited_unreaped(child: &Child) {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    let pid = nix::unistd::Pid::from_raw(libc::pid_t::try_from(child.id()).unwrap());
    waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT).unwrap();
}

/// Blocks until `child` has exited, without reaping it, so it stays a zombie. macOS lacks
/// `waitid` in nix, so this watches the state `liveness` reports.
#[cfg(target_os = "macos")]
fn wait_exited_unreaped(child: &Child) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while liveness(child.id(), None) == Liveness::Running {
        assert!(Instant::now() < deadline, "child {} did not exit", child.id());
        std::thread::yield_now();
    }
}

fn own_pid() -> u32 {
    std::process::id()
}

#[test]
fn start_time_of_self_is_stable() {
    let first = process_start_time(own_pid()).unwrap();
    let second = process_start_time(own_pid()).unwrap();
    assert_eq!(first, second);
    assert!(first > 0);
}

#[test]
fn later_children_start_later() {
    let own = process_start_time(own_pid()).unwrap();
    // Start times have a resolution (a clock tick on Linux): spawn until one lands in a later
    // tick than this process, and check none ever lands earlier.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut child = spawn("true", &[]);
        let start = process_start_time(child.id()).unwrap();
        child.wait().unwrap();
        assert!(start >= own, "child started at {start}, before this process at {own}");
        if start != own {
            break;
        }
        assert!(Instant::now() < deadline, "every child started in the same tick as this process");
    }
}

#[test]
fn start_time_of_missing_process_is_not_found() {
    let mut child = spawn("true", &[]);
    let pid = child.id();
    child.wait().unwrap();
    // The pid could be reused by now, but hardly within this test.
    assert_eq!(process_start_time(pid).unwrap_err().kind(), io::ErrorKind::NotFound);
    for pid in [0, u32::MAX, i32::MAX as u32 + 1] {
        assert_eq!(process_start_time(pid).unwrap_err().kind(), io::ErrorKind::NotFound, "{pid}");
        assert_eq!(liveness(pid, None), Liveness::Gone, "{pid}");
    }
}

#[test]
fn liveness_of_self_is_running() {
    let start = process_start_time(own_pid()).unwrap();
    assert_eq!(liveness(own_pid(), None), Liveness::Running);
    assert_eq!(liveness(own_pid(), Some(start)), Liveness::Running);
    assert_eq!(liveness(own_pid(), Some(start + 1)), Liveness::Gone);
}

#[test]
fn liveness_of_child_running_zombie_gone() {
    let mut child = spawn("sleep", &["30"]);
    let start = process_start_time(child.id()).unwrap();
    assert_eq!(liveness(child.id(), Some(start)), Liveness::Running);
    child.kill().unwrap();
    wait_exited_unreaped(&child);
    assert_eq!(liveness(child.id(), Some(start)), Liveness::Zombie);
    assert_eq!(liveness(child.id(), None), Liveness::Zombie);
    assert_eq!(liveness(child.id(), Some(start + 1)), Liveness::Gone);
    assert_eq!(process_start_time(child.id()).unwrap(), start, "a zombie keeps its start time");
    child.wait().unwrap();
    assert_eq!(liveness(child.id(), Some(start)), Liveness::Gone);
}

#[test]
fn exited_child_is_zombie_until_waited() {
    let mut child = spawn("true", &[]);
    wait_exited_unreaped(&child);
    assert_eq!(liveness(child.id(), None), Liveness::Zombie);
    child.wait().unwrap();
    assert_eq!(liveness(child.id(), None), Liveness::Gone);
}

/// Waits up to 10 s for `fd` to become readable.
#[cfg(target_os = "linux")]
fn readable_within_10s(fd: BorrowedFd<'_>) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    let ready = poll(&mut fds, PollTimeout::try_from(Duration::from_secs(10)).unwrap()).unwrap();
    ready == 1 && fds[0].revents().is_some_and(|r| r.contains(PollFlags::POLLIN))
}

#[cfg(target_os = "linux")]
#[test]
fn pidfd_becomes_readable_when_child_exits() {
    let mut child = spawn("true", &[]);
    // The child may have exited already: a pidfd can be opened on a zombie.
    let pidfd = PidFd::open(child.id()).unwrap();
    assert_eq!(pidfd.pid(), child.id());
    assert!(pidfd.as_raw_fd() > 2);
    assert!(readable_within_10s(pidfd.as_fd()));
    assert!(child.wait().unwrap().success());
}

#[cfg(target_os = "linux")]
#[test]
fn pidfd_signal_kills_child() {
    use std::os::unix::process::ExitStatusExt;
    let mut child = spawn("sleep", &["30"]);
    let pidfd = PidFd::open(child.id()).unwrap();
    pidfd.send_signal(Signal::SIGKILL).unwrap();
    assert!(readable_within_10s(pidfd.as_fd()));
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert_eq!(pidfd.send_signal(Signal::SIGTERM).unwrap_err().kind(), io::ErrorKind::NotFound);
}

#[cfg(target_os = "linux")]
#[test]
fn pidfd_of_missing_process_is_not_found() {
    let mut child = spawn("true", &[]);
    let pid = child.id();
    child.wait().unwrap();
    assert_eq!(PidFd::open(pid).unwrap_err().kind(), io::ErrorKind::NotFound);
    assert_eq!(PidFd::open(0).unwrap_err().kind(), io::ErrorKind::NotFound);
}

#[cfg(target_os = "macos")]
#[test]
fn pidfd_is_unsupported_on_macos() {
    assert_eq!(PidFd::open(own_pid()).unwrap_err().kind(), io::ErrorKind::Unsupported);
}

#[test]
fn peer_uid_of_socketpair_is_own_uid() {
    let (a, b) = UnixStream::pair().unwrap();
    let uid = nix::unistd::getuid().as_raw();
    assert_eq!(peer_uid(a.as_fd()).unwrap(), uid);
    assert_eq!(peer_uid(b.as_fd()).unwrap(), uid);
}

#[test]
fn peer_uid_of_a_file_fails() {
    let file = std::fs::File::open("/dev/null").unwrap();
    assert!(peer_uid(file.as_fd()).is_err());
}

#[test]
fn boot_id_is_non_empty_and_stable() {
    let first = boot_id().unwrap();
    assert!(!first.is_empty());
    assert_eq!(first, first.trim());
    assert_eq!(boot_id().unwrap(), first);
}

#[test]
fn ignore_sigpipe_succeeds() {
    // The Rust runtime already ignores SIGPIPE, so this changes nothing for other tests.
    ignore_sigpipe().unwrap();
}

#[test]
fn read_cgroup_works() {
    let cgroup = systemd::read_cgroup().unwrap();
    #[cfg(target_os = "macos")]
    assert!(cgroup.is_empty());
    #[cfg(target_os = "linux")]
    assert!(cgroup.lines().all(|line| line.splitn(3, ':').count() == 3), "{cgroup:?}");
}

#[test]
fn fd_limit_is_capped() {
    let limit = fd_limit();
    assert!(limit > 2 && limit <= CLOSE_FDS_CAP, "{limit}");
}

#[test]
fn child_subreaper_is_linux_only() {
    // Harmless for the test process: orphaned grandchildren of tests would become its children.
    assert_eq!(set_child_subreaper().unwrap(), cfg!(target_os = "linux"));
}

/// A loopback connection's owner is this process's user (Linux), or unknown (macOS); a
/// pair of addresses with no connection between them has none.
#[test]
fn a_loopback_tcp_peer_is_this_user() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (_conn, peer) = listener.accept().unwrap();
    let local = listener.local_addr().unwrap();
    assert_eq!(peer, client.local_addr().unwrap());
    let uid = nix::unistd::getuid().as_raw();
    let expected = if cfg!(target_os = "linux") { Some(uid) } else { None };
    assert_eq!(tcp_peer_uid(local, peer).unwrap(), expected);
    let nowhere: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
    assert_eq!(tcp_peer_uid(local, nowhere).unwrap(), None);
}
