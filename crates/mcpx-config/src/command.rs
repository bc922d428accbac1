//! `PATH` lookup as `execvp` does it, and executable identities for fingerprints.

use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::unistd::{AccessFlags, access};

/// The search path `execvp` uses when `PATH` is unset (glibc's default).
pub const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// The identity of a resolved executable, mixed into a server's fingerprint so that upgrading
/// the program (new inode or mtime) yields a new fingerprint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExeIdentity {
    /// The executable's canonical path (symlinks resolved).
    pub path: PathBuf,
    /// File identity as ``<dev>:<ino>:<mtime seconds>.<mtime nanoseconds>``; any string that
    /// changes when the file is replaced works.
    pub stamp: String,
}

/// Returns the [`ExeIdentity`] of the file at `path`: its canonical path plus a
/// `dev:ino:mtime` stamp of the file it points to.
///
/// Errors: the `io::Error` from canonicalizing or stat-ing `path` (e.g. `NotFound`).
pub fn exe_identity(path: &Path) -> io::Result<ExeIdentity> {
    let canonical = std::fs::canonicalize(path)?;
    let meta = std::fs::metadata(&canonical)?;
    Ok(ExeIdentity {
        stamp: format!("{}:{}:{}.{:09}", meta.dev(), meta.ino(), meta.mtime(), meta.mtime_nsec()),
        path: canonical,
    })
}

/// Where [`resolve_command`] looked for a command it did not find.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SearchedIn {
    /// A bare name was searched for in each directory of this `PATH` value (as given, or
    /// [`DEFAULT_PATH`] when `PATH` was unset).
    Path(String),
    /// A command containing `/` named exactly this file, which is missing or not executable.
    File(PathBuf),
}

/// A command that [`resolve_command`] could not find.
///
/// Display: ``command `npx` not found on PATH (searched: /usr/bin:/bin)`` for bare names, or
/// ``command `./run.sh` not found: /proj/run.sh is not an executable file`` for paths.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct CommandNotFound {
    /// The command as given.
    pub command: String,
    /// Where it was looked for.
    pub searched: SearchedIn,
}

impl fmt::Display for CommandNotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.searched {
            SearchedIn::Path(path) => write!(f, "command `{}` not found on PATH (searched: {})", self.command, path),
            SearchedIn::File(file) => {
                write!(f, "command `{}` not found: {} is not an executable file", self.command, file.display())
            }
        }
    }
}

/// Finds the program `execvp` would run for `command`.
///
/// A command containing `/` names a file directly, taken relative to `cwd` when relative (and
/// `cwd` is given). Otherwise each directory of `path_var` (the `PATH` value; [`DEFAULT_PATH`]
/// when `None`) is tried in order, an empty entry meaning the current directory (`cwd`), and
/// the first executable regular file wins. The returned path is absolute when `cwd` is absolute
/// or the `PATH` entry was.
///
/// Errors: [`CommandNotFound`] carrying the full `PATH` searched, or the file tried.
pub fn resolve_command(command: &str, path_var: Option<&str>, cwd: Option<&Path>) -> Result<PathBuf, CommandNotFound> {
    let anchor = |p: PathBuf| match cwd {
        Some(cwd) if p.is_relative() => cwd.join(p),
        _ => p,
    };
    if command.contains('/') {
        let file = anchor(PathBuf::from(command));
        return if is_executable(&file) {
            Ok(file)
        } else {
            Err(CommandNotFound { command: command.to_owned(), searched: SearchedIn::File(file) })
        };
    }
    let path = path_var.unwrap_or(DEFAULT_PATH);
    if !command.is_empty() {
        for dir in path.split(':') {
            let dir = if dir.is_empty() { Path::new(".") } else { Path::new(dir) };
            let candidate = anchor(dir.join(command));
            if is_executable(&candidate) {
                return Ok(candidate);
            }
        }
    }
    Err(CommandNotFound { command: command.to_owned(), searched: SearchedIn::Path(path.to_owned()) })
}

/// A regular file (after following symlinks) that this process may execute.
fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file()) && access(path, AccessFlags::X_OK).is_ok()
}
