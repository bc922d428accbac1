//! Where mcpx keeps its files: the state, cache and runtime directories, and the
//! fixed names inside them.
//!
//! Each directory can be overridden by an environment variable, so tests and users
//! can keep mcpx entirely inside directories of their own: with `MCPX_STATE_DIR`,
//! `MCPX_CACHE_DIR` and `MCPX_RUNTIME_DIR` set, mcpx writes nothing outside them.

use std::collections::HashMap;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The longest unix socket path the platform accepts, in bytes (`sun_path` less
/// its terminating NUL): 107 on Linux, 103 on macOS.
pub const MAX_SOCKET_PATH: usize = if cfg!(target_os = "macos") { 103 } else { 107 };

/// The three directories mcpx uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dirs {
    /// Persistent state: logs, the HTTP token, the list of known config files.
    pub state: PathBuf,
    /// The schema cache.
    pub cache: PathBuf,
    /// Sockets, the lock and pid files; meant to be on tmpfs so a reboot wipes it.
    pub runtime: PathBuf,
}

/// A directory that cannot be used, with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// Neither the override variable nor a fallback (`HOME`) is set.
    #[error("cannot find a {what} directory: set {var} or HOME")]
    Unset {
        /// Which directory.
        what: &'static str,
        /// The variable that would fix it.
        var: &'static str,
    },
    /// The runtime directory belongs to someone else or is open to others.
    #[error(
        "{path} is {problem}; it holds mcpx's sockets and must be owned by you with mode 0700: fix it with `chmod 700 {path}` (or remove it) and try again"
    )]
    Unsafe {
        /// The directory.
        path: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Creating or inspecting a directory failed.
    #[error("{path}: {source}")]
    Io {
        /// The directory.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A socket path is longer than the platform allows.
    #[error(
        "socket path {path} is {len} bytes, over the platform limit of {max}: set MCPX_RUNTIME_DIR to a shorter directory"
    )]
    SocketPathTooLong {
        /// The path.
        path: String,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
}

impl Dirs {
    /// Works out the directories from an environment (normally the process's).
    ///
    /// - state: `MCPX_STATE_DIR`, else `$XDG_STATE_HOME/mcpx`, else `~/.local/state/mcpx`;
    /// - cache: `MCPX_CACHE_DIR`, else `$XDG_CACHE_HOME/mcpx`, else `~/.cache/mcpx`;
    /// - runtime: `MCPX_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/mcpx`, else `$TMPDIR/mcpx-<uid>`
    ///   (`/tmp` when `TMPDIR` is unset).
    pub fn from_env(env: &HashMap<String, String>) -> Result<Dirs, DirError> {
        let get = |k: &str| env.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = get("HOME");
        let pick = |var: &'static str, xdg: &str, fallback: &str, what: &'static str| {
            get(var)
                .or_else(|| get(xdg).map(|p| p.join("mcpx")))
                .or_else(|| home.as_ref().map(|h| h.join(fallback).join("mcpx")))
                .ok_or(DirError::Unset { what, var })
        };
        // The daemon runs in `/`: relative paths are made absolute against the
        // caller's directory, so every process means the same directories.
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let absolute = |p: PathBuf| if p.is_relative() { cwd.join(p) } else { p };
        let state = absolute(pick("MCPX_STATE_DIR", "XDG_STATE_HOME", ".local/state", "state")?);
        let cache = absolute(pick("MCPX_CACHE_DIR", "XDG_CACHE_HOME", ".cache", "cache")?);
        let runtime =
            get("MCPX_RUNTIME_DIR").or_else(|| get("XDG_RUNTIME_DIR").map(|p| p.join("mcpx"))).unwrap_or_else(|| {
                let tmp = get("TMPDIR").unwrap_or_else(|| PathBuf::from("/tmp"));
                tmp.join(format!("mcpx-{}", nix::unistd::getuid()))
            });
        Ok(Dirs { state, cache, runtime: absolute(runtime) })
    }

    /// The daemon's control socket.
    pub fn socket(&self) -> PathBuf {
        self.runtime.join("daemon.sock")
    }

    /// The lock a daemon holds for its whole life; it makes racing starts yield one daemon.
    pub fn lock(&self) -> PathBuf {
        self.runtime.join("daemon.lock")
    }

    /// The running daemon's pid, written once it listens.
    pub fn pid_file(&self) -> PathBuf {
        self.runtime.join("daemon.pid")
    }

    /// Where supervisors keep their sockets and records (`sup/<id>.sock`, `sup/<id>.json`).
    pub fn sup_dir(&self) -> PathBuf {
        self.runtime.join("sup")
    }

    /// The supervisors' log file.
    pub fn supervisor_log(&self) -> PathBuf {
        self.state.join("supervisors.log")
    }

    /// The daemon's log file.
    pub fn log_file(&self) -> PathBuf {
        self.state.join("daemon.log")
    }

    /// Where remote MCP sessions are kept for the next daemon (`remote/<instance>.json`).
    pub fn remote_sessions(&self) -> PathBuf {
        self.state.join("remote")
    }

    /// The list of every configuration file the daemon has resolved.
    pub fn known_configs(&self) -> PathBuf {
        self.state.join("config-files.json")
    }

    /// Creates the directories if needed and checks the runtime directory is owned
    /// by the current user with mode 0700 and the socket path fits the platform.
    pub fn prepare(&self) -> Result<(), DirError> {
        for dir in [&self.state, &self.cache] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| DirError::Io { path: dir.display().to_string(), source })?;
        }
        let rt = &self.runtime;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(rt)
            .map_err(|source| DirError::Io { path: rt.display().to_string(), source })?;
        check_private_dir(rt)?;
        check_socket_path(&self.socket())?;
        // Supervisor sockets are the longest: `sup/` and a 12-character instance id.
        check_socket_path(&self.sup_dir().join("000000000000.sock"))
    }
}

/// Refuses a directory not owned by the current user or open to group or others.
pub fn check_private_dir(dir: &Path) -> Result<(), DirError> {
    let meta = std::fs::metadata(dir).map_err(|source| DirError::Io { path: dir.display().to_string(), source })?;
    let uid = nix::unistd::getuid().as_raw();
    let problem = if meta.uid() != uid {
        Some(format!("owned by uid {}, not by you (uid {uid})", meta.uid()))
    } else if meta.permissions().mode() & 0o077 != 0 {
        Some(format!("mode {:04o}", meta.permissions().mode() & 0o7777))
    } else {
        None
    };
    match problem {
        Some(problem) => Err(DirError::Unsafe { path: dir.display().to_string(), problem }),
        None => Ok(()),
    }
}

/// Fails when `path` does not fit in a unix socket address.
pub fn check_socket_path(path: &Path) -> Result<(), DirError> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(DirError::SocketPathTooLong { path: path.display().to_string(), len, max: MAX_SOCKET_PATH });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_then_xdg_then_home() {
        let env: HashMap<String, String> = [("HOME", "/h"), ("XDG_CACHE_HOME", "/xc"), ("MCPX_RUNTIME_DIR", "/r")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let d = Dirs::from_env(&env).unwrap();
        assert_eq!(d.state, PathBuf::from("/h/.local/state/mcpx"));
        assert_eq!(d.cache, PathBuf::from("/xc/mcpx"));
        assert_eq!(d.runtime, PathBuf::from("/r"));
    }

    #[test]
    fn refuses_open_runtime_dir_and_long_socket_paths() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = check_private_dir(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("mode 0755") && err.contains("chmod 700"), "{err}");
        let long = PathBuf::from(format!("/{}/daemon.sock", "x".repeat(120)));
        assert!(check_socket_path(&long).unwrap_err().to_string().contains("MCPX_RUNTIME_DIR"));
    }
}
