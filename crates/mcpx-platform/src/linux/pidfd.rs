//! `pidfd_open(2)` and `pidfd_send_signal(2)` through `libc::syscall`: glibc only gained
//! wrappers in 2.36 and `nix` has none.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::signal::Signal;

/// `pidfd_open(pid, 0)`: a close-on-exec descriptor referring to process `pid`.
///
/// # Errors
///
/// As reported by the kernel: `ESRCH` (no such process), `ENOSYS` (before Linux 5.3, kind
/// `Unsupported`), `EMFILE`, `ENFILE`, `ENODEV`, `ENOMEM`.
pub(crate) fn open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    let flags: libc::c_uint = 0;
    // Safety: pidfd_open takes a pid and a flags word by value and reads or writes no memory of
    // ours; the only resource it creates is the returned descriptor, owned below.
    let ret = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let raw = RawFd::try_from(ret).map_err(|_| io::Error::other(format!("pidfd_open returned {ret}")))?;
    // Safety: the kernel just returned `raw` as a new open descriptor of this process; nothing
    // else knows it, so the `OwnedFd` is its only owner and closes it exactly once.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `pidfd_send_signal(fd, signal, NULL, 0)`: like `kill(2)` on the process `fd` refers to.
///
/// # Errors
///
/// As reported by the kernel: `ESRCH` (the process has been reaped), `EPERM`, `EBADF`,
/// `EINVAL`, `ENOSYS` (before Linux 5.1).
pub(crate) fn send_signal(fd: BorrowedFd<'_>, signal: Signal) -> io::Result<()> {
    let info: *const libc::siginfo_t = std::ptr::null();
    let flags: libc::c_uint = 0;
    // Safety: `fd` is borrowed, so it stays open for the duration of the call; a null `info`
    // is documented to mean "as kill(2) would fill it", so the kernel reads no memory of ours;
    // the signal number comes from `Signal` and is valid.
    let ret = unsafe { libc::syscall(libc::SYS_pidfd_send_signal, fd.as_raw_fd(), signal as libc::c_int, info, flags) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
