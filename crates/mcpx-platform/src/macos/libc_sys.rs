//! The macOS C functions `nix` does not wrap: `proc_pidinfo` (libproc) and `sysctlbyname`.

use std::io;
use std::mem;

/// `size_of::<T>()` as the `c_int` buffer size libproc expects (these structs are a few
/// hundred bytes, far below `c_int::MAX`).
const BSD_INFO_SIZE: libc::c_int = mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;

/// `proc_pidinfo(pid, PROC_PIDTBSDINFO, 0, &info, sizeof info)`, see `<libproc.h>` and
/// `<sys/proc_info.h>`. Works for zombies (`pbi_status == SZOMB`).
///
/// # Errors
///
/// The OS error (`ESRCH` if there is no such process, `EPERM` for another user's process
/// without privileges), or `InvalidData` if fewer bytes than a `proc_bsdinfo` came back.
pub(crate) fn bsd_info(pid: libc::pid_t) -> io::Result<libc::proc_bsdinfo> {
    // Safety: `proc_bsdinfo` is a C struct of integers and integer arrays, for which all-zero
    // bytes are a valid value.
    let mut info: libc::proc_bsdinfo = unsafe { mem::zeroed() };
    // Safety: the buffer is `info`, valid and writable for `BSD_INFO_SIZE` bytes, and
    // proc_pidinfo writes at most `buffersize` bytes into it; the call keeps no pointer.
    let written = unsafe {
        libc::proc_pidinfo(pid, libc::PROC_PIDTBSDINFO, 0, (&raw mut info).cast::<libc::c_void>(), BSD_INFO_SIZE)
    };
    if written <= 0 {
        return Err(io::Error::last_os_error());
    }
    if written != BSD_INFO_SIZE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("proc_pidinfo(PROC_PIDTBSDINFO) returned {written} of {BSD_INFO_SIZE} bytes"),
        ));
    }
    Ok(info)
}

/// sysctl `kern.boottime`: the wall-clock time of the last boot, see sysctl(3).
///
/// # Errors
///
/// The OS error, or `InvalidData` if the answer is not a `struct timeval`.
pub(crate) fn boot_time() -> io::Result<libc::timeval> {
    let mut boot = libc::timeval { tv_sec: 0, tv_usec: 0 };
    let mut len = mem::size_of::<libc::timeval>();
    // Safety: the name is a NUL-terminated C string; `boot` is valid and writable for `len`
    // bytes and `len` is a valid in/out size; no new value is set (null, 0). sysctlbyname
    // writes at most `len` bytes and keeps no pointer.
    let ret = unsafe {
        libc::sysctlbyname(
            c"kern.boottime".as_ptr(),
            (&raw mut boot).cast::<libc::c_void>(),
            &raw mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    if len != mem::size_of::<libc::timeval>() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("kern.boottime is {len} bytes")));
    }
    Ok(boot)
}
