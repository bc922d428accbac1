//! mcpx's own directories and the files in them: each directory is opened once, without
//! following a link, and checked to be the user's alone ([`Dir`]); every file in it is
//! reached through that descriptor (`openat`, `renameat`, `unlinkat`), so a link or a
//! renamed directory planted later cannot redirect it. Files that are read back whole
//! are written through [`write_atomic`]: a reader (or the next daemon after a crash)
//! sees either the old contents or the new, never a torn file.
//!
//! The calls are POSIX (`openat`, `fstat`, `mkdirat`, `renameat`, `unlinkat`), the same
//! on Linux and macOS.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};

/// Why mcpx will not use a directory or file it found where its own should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// It is a symbolic link: mcpx never follows one to its own directories or files.
    Symlink,
    /// It is not a directory (for a directory), or not a regular file (for a file).
    WrongType,
    /// Another user owns it.
    Owner {
        /// The owner.
        uid: u32,
        /// The current user.
        me: u32,
    },
    /// Its group or others have access.
    Open {
        /// Its permission bits (`st_mode & 0o7777`).
        mode: u32,
    },
}

impl fmt::Display for Refused {
    /// What is wrong, to follow the path: `is a symbolic link`, `is owned by uid 1001,
    /// not by you (uid 1000)`, `has mode 0755, open to other users`, `is of the wrong
    /// type`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Symlink => write!(f, "is a symbolic link"),
            Refused::WrongType => write!(f, "is of the wrong type"),
            Refused::Owner { uid, me } => write!(f, "is owned by uid {uid}, not by you (uid {me})"),
            Refused::Open { mode } => write!(f, "has mode {mode:04o}, open to other users"),
        }
    }
}

/// Opening a directory or file of mcpx's failed.
#[derive(Debug)]
pub enum OpenError {
    /// It exists but cannot be trusted.
    Refused(Refused),
    /// The system call failed (`NotFound` when it does not exist).
    Io(io::Error),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Refused(r) => r.fmt(f),
            OpenError::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for OpenError {}

impl From<Errno> for OpenError {
    fn from(e: Errno) -> OpenError {
        OpenError::Io(e.into())
    }
}

impl From<OpenError> for io::Error {
    fn from(e: OpenError) -> io::Error {
        match e {
            OpenError::Io(e) => e,
            OpenError::Refused(r) => io::Error::new(io::ErrorKind::PermissionDenied, r.to_string()),
        }
    }
}

/// One of mcpx's private directories, open: a descriptor (`O_DIRECTORY | O_NOFOLLOW`),
/// checked with `fstat` to be owned by the current user with no group or other access,
/// and the path it was opened at (for messages and for socket addresses, which have no
/// descriptor form). Cloning shares the descriptor.
#[derive(Debug, Clone)]
pub struct Dir {
    fd: Arc<OwnedFd>,
    path: PathBuf,
}

/// How [`Dir::open_file`] opens a file that is not written atomically.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileUse {
    /// Appended to (a log).
    Append,
    /// Opened for writing and never truncated (a lock file, for `flock`).
    Lock,
    /// Read and written in place, never truncated (an embedded database's file).
    ReadWrite,
}

impl Dir {
    /// Opens the directory at `path` without following a link at its last component
    /// (its parents may be links: `/var` is one on macOS, and so may a home directory
    /// be) and checks it. With `create`, a missing directory is made with mode 0700, and
    /// its missing parents too.
    ///
    /// Errors: [`OpenError::Refused`] when it is a link, not a directory, another
    /// user's, or open to group or others; [`OpenError::Io`] otherwise (`NotFound`
    /// without `create`).
    pub fn open_private(path: &Path, create: bool) -> Result<Dir, OpenError> {
        if create {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).map_err(OpenError::Io)?;
            }
            match nix::unistd::mkdir(path, Mode::from_bits_truncate(0o700)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = match nix::fcntl::open(path, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(e @ (Errno::ELOOP | Errno::ENOTDIR)) => {
                let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
                return Err(if link { OpenError::Refused(Refused::Symlink) } else { OpenError::from(e) });
            }
            Err(e) => return Err(e.into()),
        };
        check_private(&nix::sys::stat::fstat(&fd)?, SFlag::S_IFDIR)?;
        Ok(Dir { fd: Arc::new(fd), path: path.to_owned() })
    }

    /// Opens the directory at `path`, following links and checking nothing: for a
    /// directory that is not mcpx's own (the service manager's, where `mcpx service
    /// install` writes its unit), which may be a link and readable by others.
    ///
    /// Errors: `open` failed.
    pub fn open_unchecked(path: &Path) -> io::Result<Dir> {
        let fd = nix::fcntl::open(path, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())?;
        Ok(Dir { fd: Arc::new(fd), path: path.to_owned() })
    }

    /// The path this directory was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` in this directory, for messages and socket addresses.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }

    /// Whether the path this directory was opened at still names it (the same device
    /// and inode, not through a link), checked before a socket is bound or reached by
    /// its path.
    pub fn still_at_path(&self) -> bool {
        let (Ok(now), Ok(opened)) = (std::fs::symlink_metadata(&self.path), nix::sys::stat::fstat(self.fd.as_fd()))
        else {
            return false;
        };
        #[allow(clippy::useless_conversion)] // Reason: `st_dev` is an i32 on macOS, a u64 on Linux.
        let same = u64::try_from(opened.st_dev).is_ok_and(|dev| dev == now.dev()) && opened.st_ino == now.ino();
        same
    }

    /// The subdirectory `name`, opened and checked as [`Dir::open_private`] does (made
    /// with mode 0700 when missing, with `create`).
    ///
    /// Errors: as [`Dir::open_private`].
    pub fn subdir(&self, name: &str, create: bool) -> Result<Dir, OpenError> {
        if create {
            match nix::sys::stat::mkdirat(self.fd.as_fd(), name, Mode::from_bits_truncate(0o700)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = self.openat(name, flags, 0)?;
        check_private(&nix::sys::stat::fstat(&fd)?, SFlag::S_IFDIR)?;
        Ok(Dir { fd: Arc::new(fd), path: self.path.join(name) })
    }

    /// File `name`, opened for reading, not through a link.
    ///
    /// Errors: `NotFound` when it is missing; a link is refused.
    pub fn open_read(&self, name: &str) -> io::Result<std::fs::File> {
        Ok(std::fs::File::from(self.openat(name, OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, 0)?))
    }

    /// The whole contents of file `name`, not through a link.
    ///
    /// Errors: `NotFound` when it is missing; a link is refused.
    pub fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.open_read(name)?.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// The whole contents of file `name`, a secret: it must be a regular file, not a
    /// link, owned by the current user, with no group or other access (0600).
    ///
    /// Errors: [`OpenError::Refused`] when it is not so; [`OpenError::Io`] otherwise
    /// (`NotFound` when it is missing).
    pub fn read_private(&self, name: &str) -> Result<Vec<u8>, OpenError> {
        let fd = self.openat(name, OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, 0)?;
        check_private(&nix::sys::stat::fstat(&fd)?, SFlag::S_IFREG)?;
        let mut bytes = Vec::new();
        std::fs::File::from(fd).read_to_end(&mut bytes).map_err(OpenError::Io)?;
        Ok(bytes)
    }

    /// Opens file `name` for writing that cannot be atomic (`use_`), creating it with
    /// mode 0600, never through a link. An existing file must be a regular file of the
    /// current user's; its mode is narrowed to 0600 (an older mcpx made logs 0644).
    ///
    /// Errors: [`OpenError::Refused`] for a link, another type or another user's file;
    /// [`OpenError::Io`] otherwise.
    pub fn open_file(&self, name: &str, use_: FileUse) -> Result<std::fs::File, OpenError> {
        let access = if use_ == FileUse::ReadWrite { OFlag::O_RDWR } else { OFlag::O_WRONLY };
        let mut flags = access | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        if use_ == FileUse::Append {
            flags |= OFlag::O_APPEND;
        }
        let fd = self.openat(name, flags, 0o600)?;
        let stat = nix::sys::stat::fstat(&fd)?;
        match check_private(&stat, SFlag::S_IFREG) {
            Ok(()) => {}
            Err(OpenError::Refused(Refused::Open { .. })) => {
                nix::sys::stat::fchmod(&fd, Mode::from_bits_truncate(0o600))?;
            }
            Err(e) => return Err(e),
        }
        Ok(std::fs::File::from(fd))
    }

    /// Removes file (or socket) `name`; one already gone is not an error.
    ///
    /// Errors: any other error of `unlinkat`.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        match nix::unistd::unlinkat(self.fd.as_fd(), name, nix::unistd::UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Renames entry `from` to `to` in this directory (`renameat`), replacing `to`
    /// (a link at `to` is replaced, never followed); for rotating a log.
    ///
    /// Errors: either name is not one entry of the directory, or `renameat` failed
    /// (`NotFound` when `from` is missing).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        for name in [from, to] {
            check_name(name).map_err(|e| match e {
                OpenError::Io(e) => e,
                other => io::Error::other(other.to_string()),
            })?;
        }
        nix::fcntl::renameat(self.as_fd(), from, self.as_fd(), to).map_err(io::Error::from)
    }

    /// Whether an entry `name` exists (of any type, a link included).
    pub fn contains(&self, name: &str) -> bool {
        nix::sys::stat::fstatat(self.fd.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
    }

    /// The names of the entries, `.` and `..` left out, in no particular order.
    ///
    /// Errors: reading the directory failed.
    pub fn names(&self) -> io::Result<Vec<OsString>> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let mut dir = nix::dir::Dir::openat(self.fd.as_fd(), ".", flags, Mode::empty())?;
        let mut names = Vec::new();
        for entry in dir.iter() {
            let name = entry?.file_name().to_bytes().to_vec();
            if name != b"." && name != b".." {
                names.push(OsStr::from_bytes(&name).to_owned());
            }
        }
        Ok(names)
    }

    /// The descriptor, for the calls above.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn openat(&self, name: &str, flags: OFlag, mode: u32) -> Result<OwnedFd, OpenError> {
        check_name(name)?;
        match nix::fcntl::openat(self.as_fd(), name, flags, Mode::from_bits_truncate(mode as libc::mode_t)) {
            Ok(fd) => Ok(fd),
            Err(Errno::ELOOP) => Err(OpenError::Refused(Refused::Symlink)),
            Err(e) => Err(e.into()),
        }
    }
}

/// Writes `bytes` to file `name` in `dir` atomically, with permission bits `mode`
/// (e.g. `0o600`): a temporary file in `dir`, `fsync`, `renameat` over `name`, then
/// `fsync` of the directory so the rename itself survives a crash. The temporary file
/// is named `.<name>.<pid>.<n>.tmp`, so two processes or threads writing one name
/// never share it, is created exclusively (never through a link), and is removed when
/// any step fails. A link at `name` is replaced, never followed.
///
/// Errors: any error of writing, syncing or renaming; `name` is then unchanged.
pub fn write_atomic(dir: &Dir, name: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tmp = format!(".{name}.{}.{}.tmp", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
    let written = (|| {
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = dir.openat(&tmp, flags, mode)?;
        // The umask may have narrowed `mode` at creation; set it exactly.
        nix::sys::stat::fchmod(&fd, Mode::from_bits_truncate(mode as libc::mode_t))?;
        let mut file = std::fs::File::from(fd);
        file.write_all(bytes)?;
        file.sync_all()?;
        nix::fcntl::renameat(dir.as_fd(), tmp.as_str(), dir.as_fd(), name)?;
        Ok::<(), io::Error>(())
    })();
    if written.is_err() {
        let _ = dir.remove(&tmp);
        return written;
    }
    // A directory opened read-only can be fsynced on Linux and macOS.
    nix::unistd::fsync(dir.as_fd()).map_err(io::Error::from)
}

/// Refuses a name that is not one entry of the directory (`a/b`, `..`, empty): files
/// are reached only directly in their directory.
fn check_name(name: &str) -> Result<(), OpenError> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(OpenError::Io(io::Error::new(io::ErrorKind::InvalidInput, format!("`{name}` is not a file name"))));
    }
    Ok(())
}

/// Checks what `fstat` said: of type `kind`, owned by the current (effective) user, no
/// group or other access.
fn check_private(stat: &FileStat, kind: SFlag) -> Result<(), OpenError> {
    if SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) != kind {
        return Err(OpenError::Refused(Refused::WrongType));
    }
    let me = nix::unistd::geteuid().as_raw();
    if stat.st_uid != me {
        return Err(OpenError::Refused(Refused::Owner { uid: stat.st_uid, me }));
    }
    #[allow(clippy::useless_conversion)] // Reason: `st_mode` is a u16 on macOS, a u32 on Linux.
    let mode = u32::from(stat.st_mode) & 0o7777;
    if mode & 0o077 != 0 {
        return Err(OpenError::Refused(Refused::Open { mode }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn private_tempdir() -> (tempfile::TempDir, Dir) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_private(&tmp.path().join("own"), true).unwrap();
        (tmp, dir)
    }

    #[test]
    fn replaces_the_file_with_the_mode_and_leaves_no_temporary() {
        let (_tmp, dir) = private_tempdir();
        write_atomic(&dir, "record.json", b"one", 0o600).unwrap();
        write_atomic(&dir, "record.json", b"two", 0o644).unwrap();
        assert_eq!(dir.read("record.json").unwrap(), b"two");
        assert_eq!(std::fs::metadata(dir.join("record.json")).unwrap().mode() & 0o777, 0o644);
        assert_eq!(dir.names().unwrap(), vec![OsString::from("record.json")]);
    }

    #[test]
    fn a_failed_write_keeps_the_old_contents() {
        let (_tmp, dir) = private_tempdir();
        write_atomic(&dir, "cache.json", b"old", 0o600).unwrap();
        // A non-empty directory where the file should go: the rename fails.
        let blocked = dir.subdir("blocked", true).unwrap();
        write_atomic(&blocked, "x", b"", 0o600).unwrap();
        assert!(write_atomic(&dir, "blocked", b"new", 0o600).is_err());
        assert_eq!(dir.read("cache.json").unwrap(), b"old");
        let tmps = dir.names().unwrap().into_iter().filter(|n| n.to_string_lossy().ends_with(".tmp")).count();
        assert_eq!(tmps, 0);
    }

    #[test]
    fn links_are_replaced_or_refused_never_followed() {
        let (tmp, dir) = private_tempdir();
        let target = tmp.path().join("target");
        std::fs::write(&target, "precious").unwrap();
        for name in ["known.json", "daemon.log", "token"] {
            std::os::unix::fs::symlink(&target, dir.join(name)).unwrap();
        }
        write_atomic(&dir, "known.json", b"{}", 0o600).unwrap();
        assert!(!std::fs::symlink_metadata(dir.join("known.json")).unwrap().is_symlink());
        assert!(matches!(dir.open_file("daemon.log", FileUse::Append), Err(OpenError::Refused(Refused::Symlink))));
        assert!(matches!(dir.read_private("token"), Err(OpenError::Refused(Refused::Symlink))));
        assert!(dir.read("token").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
        // The directory itself, as a link, is refused too, though its target is private.
        std::os::unix::fs::symlink(dir.path(), tmp.path().join("link")).unwrap();
        let refused = Dir::open_private(&tmp.path().join("link"), true).unwrap_err();
        assert!(matches!(refused, OpenError::Refused(Refused::Symlink)), "{refused:?}");
    }

    #[test]
    fn open_directories_and_secrets_are_refused_and_logs_narrowed() {
        let (tmp, dir) = private_tempdir();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let refused = Dir::open_private(dir.path(), false).unwrap_err();
        assert_eq!(refused.to_string(), "has mode 0755, open to other users");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        write_atomic(&dir, "token", b"t", 0o644).unwrap();
        assert!(matches!(dir.read_private("token"), Err(OpenError::Refused(Refused::Open { mode: 0o644 }))));
        write_atomic(&dir, "daemon.log", b"", 0o644).unwrap();
        dir.open_file("daemon.log", FileUse::Append).unwrap();
        assert_eq!(std::fs::metadata(dir.join("daemon.log")).unwrap().mode() & 0o777, 0o600);
        assert!(dir.still_at_path());
        std::fs::rename(dir.path(), tmp.path().join("moved")).unwrap();
        assert!(!dir.still_at_path());
    }
}
