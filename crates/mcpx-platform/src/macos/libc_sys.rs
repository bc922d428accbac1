//! The macOS C functions `nix` does not wrap: `proc_pidinfo` (libproc) and `sysctlbyname`.

use std::io;
use std::mem;

/// A `proc_pidinfo` answer struct: a C struct of integers and integer arrays, for which
/// all-zero bytes are a valid value (the only implementors are below).
trait PidInfo: Sized {
    /// The `flavor` argument that fills it.
    const FLAVOR: libc::c_int;
    /// The flavor's name, for errors.
    const NAME: &'static str;
}

impl PidInfo for libc::proc_bsdinfo {
    const FLAVOR: libc::c_int = libc::PROC_PIDTBSDINFO;
    const NAME: &'static str = "PROC_PIDTBSDINFO";
}

impl PidInfo for libc::proc_taskinfo {
    const FLAVOR: libc::c_int = libc::PROC_PIDTASKINFO;
    const NAME: &'static str = "PROC_PIDTASKINFO";
}

/// `proc_pidinfo(pid, PROC_PIDTBSDINFO, 0, &info, sizeof info)`, see `<libproc.h>` and
/// `<sys/proc_info.h>`. Works for zombies (`pbi_status == SZOMB`).
///
/// # Errors
///
/// The OS error (`ESRCH` if there is no such process, `EPERM` for another user's process
/// without privileges), or `InvalidData` if fewer bytes than a `proc_bsdinfo` came back.
pub(crate) fn bsd_info(pid: libc::pid_t) -> io::Result<libc::proc_bsdinfo> {
    pid_info(pid)
}

/// `proc_pidinfo(pid, PROC_PIDTASKINFO, 0, &info, sizeof info)`, see `<sys/proc_info.h>`:
/// the task's CPU times (in Mach absolute time units) among others.
///
/// # Errors
///
/// As [`bsd_info`].
pub(crate) fn task_info(pid: libc::pid_t) -> io::Result<libc::proc_taskinfo> {
    pid_info(pid)
}

/// `proc_pidinfo(pid, T::FLAVOR, 0, &info, sizeof info)`.
fn pid_info<T: PidInfo>(pid: libc::pid_t) -> io::Result<T> {
    // These structs are a few hundred bytes, far below `c_int::MAX`.
    let size = mem::size_of::<T>() as libc::c_int;
    // Safety: every `PidInfo` is a C struct of integers and integer arrays, for which
    // all-zero bytes are a valid value.
    let mut info: T = unsafe { mem::zeroed() };
    // Safety: the buffer is `info`, valid and writable for `size` bytes, and proc_pidinfo
    // writes at most `buffersize` bytes into it; the call keeps no pointer.
    let written = unsafe { libc::proc_pidinfo(pid, T::FLAVOR, 0, (&raw mut info).cast::<libc::c_void>(), size) };
    if written <= 0 {
        return Err(io::Error::last_os_error());
    }
    if written != size {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("proc_pidinfo({}) returned {written} of {size} bytes", T::NAME),
        ));
    }
    Ok(info)
}

/// `mach_timebase_info`: (numerator, denominator) turning Mach absolute time into
/// nanoseconds; (1, 1) if the call fails.
#[allow(deprecated)] // Reason: libc deprecates its Mach bindings for the `mach2` crate, which one call does not justify.
pub(crate) fn timebase() -> (u32, u32) {
    let mut info = libc::mach_timebase_info { numer: 0, denom: 0 };
    // Safety: `info` is a valid, writable `mach_timebase_info`; the call keeps no pointer.
    let status = unsafe { libc::mach_timebase_info(&raw mut info) };
    if status != 0 || info.denom == 0 { (1, 1) } else { (info.numer, info.denom) }
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
