//! Linux implementation: `/proc`, pidfds, `SO_PEERCRED`, `prctl`, `execveat`.

mod confine;
#[allow(unsafe_code)]
mod heap;
#[allow(unsafe_code)]
mod pidfd;

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use nix::unistd::{SysconfVar, sysconf};

use crate::pid::ProcStat;

pub(crate) use confine::{Prepared, apply_in_child, confine_prepare, confine_runtime_base, confine_support};
pub(crate) use heap::release_free_heap;
pub(crate) use pidfd::{open as pidfd_open, send_signal as pidfd_send_signal};

/// Reads `/proc/<pid>/stat`, see proc_pid_stat(5).
///
/// # Errors
///
/// `NotFound` if there is no such process (`ENOENT`, also under `hidepid=` for another
/// user's process), `InvalidData` if the file cannot be parsed.
pub(crate) fn process_stat(pid: u32) -> io::Result<ProcStat> {
    let stat = fs::read(format!("/proc/{pid}/stat"))
        .map_err(|err| if err.kind() == io::ErrorKind::NotFound { crate::pid::no_such_process(pid) } else { err })?;
    parse_stat(&stat)
}

/// Reads fields 14 `utime` and 15 `stime` of `/proc/<pid>/stat`, see proc_pid_stat(5).
///
/// # Errors
///
/// As [`process_stat`]; `Other` if `sysconf(_SC_CLK_TCK)` gives no positive value.
pub(crate) fn process_cpu_time(pid: u32) -> io::Result<Duration> {
    let stat = fs::read(format!("/proc/{pid}/stat"))
        .map_err(|err| if err.kind() == io::ErrorKind::NotFound { crate::pid::no_such_process(pid) } else { err })?;
    let ticks = parse_cpu_ticks(&stat)?;
    let per_second = match sysconf(SysconfVar::CLK_TCK) {
        Ok(Some(n)) if n > 0 => n.unsigned_abs(),
        _ => return Err(io::Error::other("sysconf(_SC_CLK_TCK) gave no clock tick rate")),
    };
    let nanos = u128::from(ticks) * 1_000_000_000 / u128::from(per_second);
    Ok(Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX)))
}

/// `utime + stime` (clock ticks) from the contents of `/proc/<pid>/stat`, counting the
/// fields from after the last `)` as [`parse_stat`] does: `utime` is the 12th of them.
fn parse_cpu_ticks(stat: &[u8]) -> io::Result<u64> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("/proc/<pid>/stat: {what}"));
    let end_of_comm = stat.iter().rposition(|&b| b == b')').ok_or_else(|| invalid("no ')' after comm"))?;
    let rest = std::str::from_utf8(&stat[end_of_comm + 1..]).map_err(|_| invalid("fields are not UTF-8"))?;
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let mut next = |name: &str| {
        fields
            .next()
            .ok_or_else(|| invalid(&format!("no {name} field")))?
            .parse::<u64>()
            .map_err(|_| invalid(&format!("{name} is not a number")))
    };
    let user = next("utime")?;
    let system = next("stime")?;
    Ok(user.saturating_add(system))
}

/// Parses the contents of `/proc/<pid>/stat`: `pid (comm) state ppid ... starttime ...`.
///
/// `comm` may contain spaces, parentheses and bytes that are not UTF-8, so the fields are
/// counted from after the last `)`: the first is field 3 `state`, field 22 `starttime`
/// (clock ticks since boot) follows 18 fields later.
fn parse_stat(stat: &[u8]) -> io::Result<ProcStat> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("/proc/<pid>/stat: {what}"));
    let end_of_comm = stat.iter().rposition(|&b| b == b')').ok_or_else(|| invalid("no ')' after comm"))?;
    let rest = std::str::from_utf8(&stat[end_of_comm + 1..]).map_err(|_| invalid("fields are not UTF-8"))?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next().ok_or_else(|| invalid("no state field"))?;
    let start_time = fields
        .nth(18)
        .ok_or_else(|| invalid("no starttime field"))?
        .parse::<u64>()
        .map_err(|_| invalid("starttime is not a number"))?;
    // `X` (dead) is transient, between zombie and reaped; `x` is its spelling before 3.13.
    let zombie = matches!(state, "Z" | "X" | "x");
    Ok(ProcStat { start_time, zombie })
}

/// The `uid` of the `/proc/net/tcp` (IPv4) or `tcp6` row whose local address is `peer`
/// and remote address `local`, see proc_net_tcp(5).
pub(crate) fn tcp_peer_uid(local: std::net::SocketAddr, peer: std::net::SocketAddr) -> io::Result<Option<u32>> {
    let table = if peer.is_ipv4() { "/proc/net/tcp" } else { "/proc/net/tcp6" };
    Ok(tcp_owner(&fs::read_to_string(table)?, local, peer))
}

/// The owner of the row `peer` -> `local` of a `/proc/net/tcp{,6}` table's text.
fn tcp_owner(table: &str, local: std::net::SocketAddr, peer: std::net::SocketAddr) -> Option<u32> {
    let (want_local, want_remote) = (proc_net_address(peer), proc_net_address(local));
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        let (from, to, uid) = (fields.get(1)?, fields.get(2)?, fields.get(7)?);
        (from.eq_ignore_ascii_case(&want_local) && to.eq_ignore_ascii_case(&want_remote)).then(|| uid.parse().ok())?
    })
}

/// An address as `/proc/net/tcp` writes it: the IP's 32-bit words in the kernel's byte
/// order (this machine's), in hex, then `:` and the port in hex.
fn proc_net_address(addr: std::net::SocketAddr) -> String {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(ip) => format!("{:08X}", u32::from_ne_bytes(ip.octets())),
        std::net::IpAddr::V6(ip) => {
            ip.octets().chunks(4).map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))).collect()
        }
    };
    format!("{ip}:{:04X}", addr.port())
}

/// `getsockopt(SO_PEERCRED)`, see unix(7).
pub(crate) fn peer_uid(fd: BorrowedFd<'_>) -> io::Result<u32> {
    Ok(getsockopt(&fd, PeerCredentials)?.uid())
}

/// `/proc/self/fd/<fd>`: a child that inherited `fd` across `fork` runs the open file
/// by this path (see proc_pid_fd(5)).
pub(crate) fn fd_program(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    Some(PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())))
}

/// `execveat(fd, "", argv, envp, AT_EMPTY_PATH)`, see execveat(2). Returns only on
/// failure, with the error.
pub(crate) fn exec_fd(fd: BorrowedFd<'_>, argv: &[CString], envp: &[CString]) -> Option<io::Error> {
    match nix::unistd::execveat(fd, c"", argv, envp, nix::fcntl::AtFlags::AT_EMPTY_PATH) {
        Err(e) => Some(e.into()),
        Ok(never) => match never {},
    }
}

/// `/proc/self/exe`, the file this process runs, even after its path was replaced
/// (see proc_pid_exe(5)). `_path` is for macOS.
pub(crate) fn open_running_exe(_path: &Path) -> io::Result<fs::File> {
    fs::File::open("/proc/self/exe")
}

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)`, see prctl(2).
pub(crate) fn set_child_subreaper() -> io::Result<bool> {
    nix::sys::prctl::set_child_subreaper(true)?;
    Ok(true)
}

/// `/proc/sys/kernel/random/boot_id`, see random(4).
pub(crate) fn boot_id() -> io::Result<String> {
    let id = fs::read_to_string("/proc/sys/kernel/random/boot_id")?.trim().to_owned();
    if id.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "/proc/sys/kernel/random/boot_id is empty"));
    }
    Ok(id)
}

/// `/proc/self/cgroup`, see cgroups(7).
pub(crate) fn read_cgroup() -> io::Result<String> {
    fs::read_to_string("/proc/self/cgroup")
}

/// The descriptors open in this process, from `/proc/self/fd`, without the descriptor used to
/// read the directory (it is closed when this returns). Unsorted.
///
/// # Errors
///
/// IO errors opening or reading `/proc/self/fd` (e.g. `/proc` not mounted).
pub(crate) fn open_fds() -> io::Result<Vec<RawFd>> {
    use nix::dir::Dir;
    use nix::fcntl::OFlag;
    use nix::sys::stat::Mode;

    let mut dir = Dir::open("/proc/self/fd", OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())?;
    let own = dir.as_raw_fd();
    let mut fds = Vec::new();
    for entry in dir.iter() {
        let entry = entry?;
        // `.` and `..` do not parse; every other name is a descriptor number.
        match entry.file_name().to_str().ok().and_then(|name| name.parse::<RawFd>().ok()) {
            Some(fd) if fd != own => fds.push(fd),
            _ => {}
        }
    }
    Ok(fds)
}

/// How far the soft descriptor limit may be raised: Linux accepts the hard limit.
pub(crate) fn nofile_ceiling(hard: u64) -> u64 {
    hard
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded from `cat /proc/self/stat`.
    const CAT: &[u8] = b"11785 (cat) R 11782 11782 9109 0 -1 4194304 97 0 0 0 0 0 0 0 20 0 1 0 134271 3133440 379 \
        18446744073709551615 94567267110912 94567267130793 140734607598912 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 \
        94567267146800 94567267148416 94567555907584 140734607600319 140734607600339 140734607600339 \
        140734607601643 0\n";

    #[test]
    fn parses_state_and_starttime() {
        assert_eq!(parse_stat(CAT).unwrap(), ProcStat { start_time: 134271, zombie: false });
    }

    #[test]
    fn comm_with_spaces_parens_and_invalid_utf8() {
        let mut stat = b"42 (a) Z (b\xff) ".to_vec();
        stat.extend_from_slice(&CAT[b"11785 (cat) ".len()..]);
        assert_eq!(parse_stat(&stat).unwrap(), ProcStat { start_time: 134271, zombie: false });

        let zombie = b"42 (x) y) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0";
        assert_eq!(parse_stat(zombie).unwrap(), ProcStat { start_time: 777, zombie: true });
        let dead = b"42 (x) X 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 778 0 0";
        assert_eq!(parse_stat(dead).unwrap(), ProcStat { start_time: 778, zombie: true });
    }

    #[test]
    fn parses_cpu_ticks() {
        assert_eq!(parse_cpu_ticks(CAT).unwrap(), 0);
        assert_eq!(parse_cpu_ticks(b"42 (a) b) R 1 1 1 0 -1 0 0 0 0 0 7 5 0 0 20").unwrap(), 12);
        for bad in [&b"42 (x) R 1 1 1 0 -1 0 0 0 0 0 7"[..], b"42 (x) R 1 1 1 0 -1 0 0 0 0 0 7 z"] {
            assert_eq!(parse_cpu_ticks(bad).unwrap_err().kind(), io::ErrorKind::InvalidData, "{bad:?}");
        }
    }

    #[test]
    fn own_cpu_time_grows() {
        let before = process_cpu_time(std::process::id()).unwrap();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while process_cpu_time(std::process::id()).unwrap() <= before {
            x = x.wrapping_add(std::hint::black_box(1));
            assert!(start.elapsed() < Duration::from_secs(30), "no CPU time counted after {x} loops");
        }
    }

    #[test]
    fn rejects_truncated_or_garbled_stat() {
        for bad in [&b""[..], b"42 (x", b"42 (x) R 1 2 3", b"42 (x) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 abc"] {
            assert_eq!(parse_stat(bad).unwrap_err().kind(), io::ErrorKind::InvalidData, "{bad:?}");
        }
    }

    #[test]
    fn open_fds_lists_a_file_just_opened() {
        let file = fs::File::open("/proc/self/stat").unwrap();
        let fds = open_fds().unwrap();
        assert!(fds.contains(&file.as_raw_fd()), "{fds:?} lacks {}", file.as_raw_fd());
        assert!(fds.iter().all(|&fd| fd >= 0));
        drop(file);
    }
}
