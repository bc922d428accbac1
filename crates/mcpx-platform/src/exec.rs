//! Trusted executables: a program file opened once, checked so that only the user or
//! root can have written it or swapped it, and then run, as a child or in place of the
//! calling process, as that very file, through its descriptor (`mcpx upgrade`).

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// Flags for each directory on the way down to a program file: never follow a link.
const DIR_FLAGS: OFlag = OFlag::O_RDONLY.union(OFlag::O_DIRECTORY).union(OFlag::O_NOFOLLOW).union(OFlag::O_CLOEXEC);

/// A program file held open by its descriptor, so that what is probed and what runs
/// are the same file whatever happens to its path afterwards.
#[derive(Debug)]
pub struct Executable {
    /// The open file (close-on-exec); on Linux it is what runs.
    file: File,
    /// The path as the caller gave it: for messages, for `argv[0]`, and for
    /// [`Executable::check_path`].
    path: PathBuf,
    /// The file's (device, inode) when it was opened.
    id: (u64, u64),
}

/// Two values are equal when they hold the same file under the same path.
impl PartialEq for Executable {
    fn eq(&self, other: &Executable) -> bool {
        self.id == other.id && self.path == other.path
    }
}

impl Eq for Executable {}

impl Executable {
    /// Opens the program file at `path` for running it later, provided nobody but the
    /// calling user (its effective uid) or root can have changed it or can swap it:
    /// - the file is a regular file, executable, owned by the user or root, and not
    ///   writable by its group or others;
    /// - every directory from `/` down to it (symbolic links in `path` resolved first,
    ///   as `realpath(3)` does) is owned by the user or root and not writable by its
    ///   group or others, except a root-owned directory with the sticky bit (`/tmp`),
    ///   where nobody can rename or remove another's file.
    ///
    /// The walk opens each directory with `O_NOFOLLOW` below the one before it
    /// (`openat(2)`) and checks it with `fstat(2)`, so what is checked is what is
    /// opened; a link that appears meanwhile makes it fail.
    ///
    /// # Errors
    ///
    /// `PermissionDenied` with a one-line message that names the file or directory,
    /// its owner or mode, and what to do, when a check fails; other IO errors (the file
    /// is missing, a directory cannot be read) with the path in the message.
    pub fn open_trusted(path: &Path) -> io::Result<Executable> {
        let me = nix::unistd::geteuid().as_raw();
        let canonical = std::fs::canonicalize(path).map_err(|e| with_path(e, path))?;
        let (Some(parent), Some(name)) = (canonical.parent(), canonical.file_name()) else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a file", path.display())));
        };
        let mut at = PathBuf::from("/");
        let mut dir =
            File::from(nix::fcntl::open("/", DIR_FLAGS, Mode::empty()).map_err(|e| with_path(e.into(), &at))?);
        check_dir(&dir.metadata()?, &at, path, me)?;
        // The canonical path has no `.`, `..` or links: after `/`, only names.
        for part in parent.components().skip(1) {
            at.push(part);
            let fd = nix::fcntl::openat(&dir, part.as_os_str(), DIR_FLAGS, Mode::empty())
                .map_err(|e| with_path(e.into(), &at))?;
            dir = File::from(fd);
            check_dir(&dir.metadata()?, &at, path, me)?;
        }
        // Non-blocking, so a FIFO put there cannot hang the open.
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
        let file =
            File::from(nix::fcntl::openat(&dir, name, flags, Mode::empty()).map_err(|e| with_path(e.into(), path))?);
        let meta = file.metadata()?;
        check_file(&meta, path, me)?;
        Ok(Executable { file, path: path.to_owned(), id: (meta.dev(), meta.ino()) })
    }

    /// The program file of the calling process, as it runs now (Linux: `/proc/self/exe`,
    /// which names the running file even after its path was replaced; macOS: the path
    /// of [`std::env::current_exe`]). Not checked: it already runs.
    ///
    /// # Errors
    ///
    /// As reported by `current_exe` or `open(2)`.
    pub fn running() -> io::Result<Executable> {
        let path = std::env::current_exe()?;
        let file = crate::sys::open_running_exe(&path)?;
        let meta = file.metadata()?;
        Ok(Executable { file, path, id: (meta.dev(), meta.ino()) })
    }

    /// The path it was opened by, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks that the path still names the very file that was opened (same device and
    /// inode), following links as `exec` would.
    ///
    /// # Errors
    ///
    /// `PermissionDenied` naming the path when it now names another file or nothing.
    pub fn check_path(&self) -> io::Result<()> {
        let swapped = |now: String| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} was replaced after it was checked ({now}); find out what changes it, then try again",
                    self.path.display()
                ),
            )
        };
        match std::fs::metadata(&self.path) {
            Ok(m) if (m.dev(), m.ino()) == self.id => Ok(()),
            Ok(_) => Err(swapped("it now names another file".to_owned())),
            Err(e) => Err(swapped(e.to_string())),
        }
    }

    /// A path by which a child process runs this very file (for a probe such as
    /// `--version`): on Linux `/proc/self/fd/<n>`, which the child resolves through the
    /// descriptor it inherits across `fork` (the descriptor is close-on-exec, so the
    /// program does not keep it); on macOS, which cannot exec a descriptor, the path
    /// itself once [`Executable::check_path`] passes. There, a swap between the check
    /// and the child's `exec` is not caught.
    ///
    /// A script (`#!`) cannot run by descriptor on Linux: its interpreter finds the
    /// descriptor closed.
    ///
    /// # Errors
    ///
    /// As [`Executable::check_path`], on macOS.
    pub fn program(&self) -> io::Result<PathBuf> {
        match crate::sys::fd_program(self.file.as_fd()) {
            Some(path) => Ok(path),
            None => {
                self.check_path()?;
                Ok(self.path.clone())
            }
        }
    }

    /// Replaces the calling process with this very file, `argv` being the path and then
    /// `args`, the environment exactly `env`. Descriptors without close-on-exec stay open;
    /// so do stdin, stdout and stderr.
    ///
    /// - Linux: `execveat(fd, "", argv, envp, AT_EMPTY_PATH)` (execveat(2)), so the file
    ///   that runs is the one opened and checked, whatever its path names now.
    /// - macOS has no `fexecve`: [`Executable::check_path`] first, then `execve(2)` of
    ///   the path. A swap between the two is not caught.
    ///
    /// Returns only on failure, with the error (`InvalidInput` for a NUL byte in an
    /// argument or variable).
    pub fn exec(&self, args: &[OsString], env: &BTreeMap<OsString, OsString>) -> io::Error {
        let c = |s: &OsStr| {
            CString::new(s.as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{s:?} contains a NUL byte")))
        };
        let strings = || -> io::Result<(Vec<CString>, Vec<CString>)> {
            let mut argv = vec![c(self.path.as_os_str())?];
            for a in args {
                argv.push(c(a)?);
            }
            let mut envp = Vec::new();
            for (k, v) in env {
                let mut kv = k.clone();
                kv.push("=");
                kv.push(v);
                envp.push(c(&kv)?);
            }
            Ok((argv, envp))
        };
        let (argv, envp) = match strings() {
            Ok(s) => s,
            Err(e) => return e,
        };
        match crate::sys::exec_fd(self.file.as_fd(), &argv, &envp) {
            Some(e) => e,
            None => match self.check_path() {
                Err(e) => e,
                Ok(()) => match nix::unistd::execve(&argv[0], &argv, &envp) {
                    Err(e) => e.into(),
                    Ok(never) => match never {},
                },
            },
        }
    }
}

/// Who may own a program file or a directory above it: the user or root, worded.
fn trusted(me: u32) -> String {
    if me == 0 { "you (uid 0, root)".to_owned() } else { format!("you (uid {me}) or root") }
}

/// Checks one directory above the program `path`; `at` is the directory.
fn check_dir(meta: &Metadata, at: &Path, path: &Path, me: u32) -> io::Result<()> {
    let (uid, mode) = (meta.uid(), meta.mode() & 0o7777);
    if uid != me && uid != 0 {
        return Err(denied(format!(
            "{}, a directory above {}, is owned by uid {uid}, not {}, so its owner could swap the binary; \
             put the binary in a directory of yours",
            at.display(),
            path.display(),
            trusted(me)
        )));
    }
    let sticky_root = uid == 0 && mode & 0o1000 != 0;
    if mode & 0o022 != 0 && !sticky_root {
        return Err(denied(format!(
            "{}, a directory above {}, is writable by its group or others (mode {mode:04o}), so they could \
             swap the binary; run `chmod go-w {}` or put the binary elsewhere",
            at.display(),
            path.display(),
            at.display()
        )));
    }
    Ok(())
}

/// Checks the program file itself.
fn check_file(meta: &Metadata, path: &Path, me: u32) -> io::Result<()> {
    let (uid, mode) = (meta.uid(), meta.mode() & 0o7777);
    if !meta.is_file() {
        return Err(denied(format!("{} is not a regular file", path.display())));
    }
    if uid != me && uid != 0 {
        return Err(denied(format!(
            "{} is owned by uid {uid}, not {}: only binaries you or root own may run as the daemon; \
             if you trust it, copy it (the copy is yours) and use the copy",
            path.display(),
            trusted(me)
        )));
    }
    if mode & 0o022 != 0 {
        return Err(denied(format!(
            "{} is writable by its group or others (mode {mode:04o}), so they could change what runs; \
             run `chmod go-w {}` and try again",
            path.display(),
            path.display()
        )));
    }
    if mode & 0o111 == 0 {
        return Err(denied(format!("{} is not executable (mode {mode:04o})", path.display())));
    }
    Ok(())
}

fn denied(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, message)
}

/// `e` with the path it concerns in its message, keeping its kind.
fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests;
