//! Where mcpx keeps its files: the state, cache and runtime directories, and the
//! fixed names inside them.
//!
//! Each directory can be overridden by an environment variable, so tests and users
//! can keep mcpx entirely inside directories of their own: with `MCPX_STATE_DIR`,
//! `MCPX_CACHE_DIR` and `MCPX_RUNTIME_DIR` set, mcpx writes nothing outside them.
//!
//! Every process opens the three once ([`Dirs::open`]), without following a link at
//! the directory mcpx owns, and refuses one that is not the user's alone
//! (`docs/security.md`); its files are then reached through those descriptors.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use mcpx_platform::fs::{Dir, OpenError, Refused};

/// The longest unix socket path the platform accepts, in bytes (`sun_path` less
/// its terminating NUL): 107 on Linux, 103 on macOS.
pub const MAX_SOCKET_PATH: usize = if cfg!(target_os = "macos") { 103 } else { 107 };

/// The daemon's control socket, in the runtime directory.
pub const SOCKET: &str = "daemon.sock";
/// The lock a daemon holds for its whole life, in the runtime directory.
pub const LOCK: &str = "daemon.lock";
/// The running daemon's pid, in the runtime directory.
pub const PID_FILE: &str = "daemon.pid";
/// The supervisors' sockets and records, a subdirectory of the runtime directory.
pub const SUP: &str = "sup";
/// The daemon's log, in the state directory.
pub const LOG: &str = "daemon.log";
/// The supervisors' log, in the state directory.
pub const SUPERVISOR_LOG: &str = "supervisors.log";
/// The list of every configuration file the daemon has resolved, in the state directory.
pub const KNOWN_CONFIGS: &str = "config-files.json";
/// The known config files some caller named with `--config` / `MCPX_CONFIG`, in the
/// state directory: re-read by a later daemon, their entries need no trust.
pub const EXPLICIT_CONFIGS: &str = "config-explicit.json";
/// The bearer token of the TCP endpoint, in the state directory.
pub const TOKEN: &str = "token";
/// The kept remote sessions, a subdirectory of the state directory.
pub const REMOTE: &str = "remote";

/// The root under which the runtime rule looks for the user's `<uid>` directory:
/// `/run/user`, or with the `test-hooks` feature `MCPX_TEST_RUN_USER` when set, so
/// each test has its own.
const RUN_USER: &str = "/run/user";

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

/// The three directories, open and checked: what a process reaches its files through.
/// Cloning shares the descriptors.
#[derive(Debug, Clone)]
pub struct OpenDirs {
    /// Their paths, as resolved.
    pub paths: Dirs,
    /// The state directory.
    pub state: Dir,
    /// The cache directory.
    pub cache: Dir,
    /// The runtime directory.
    pub runtime: Dir,
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
    /// The directory is a link, not a directory, another user's, or open to others.
    #[error("{}", refusal(path, *refused, var))]
    Refused {
        /// The directory.
        path: String,
        /// What is wrong with it.
        refused: Refused,
        /// The variable that names another directory instead.
        var: &'static str,
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

/// The message for a refused directory: what is wrong, why it matters, what to do.
fn refusal(path: &str, refused: Refused, var: &str) -> String {
    match refused {
        Refused::Symlink => format!(
            "{path} is a symbolic link: mcpx does not follow a link to its own directory, since whoever can change the link decides where its sockets and files go; remove the link, or set {var} to a real directory of yours"
        ),
        Refused::Owner { .. } => format!(
            "{path} {refused}: another user may have made it to pose as mcpx or to read its files, and `chmod` cannot fix that; have its owner or root remove it, or set {var} to a directory of your own"
        ),
        Refused::Open { .. } => format!("{path} {refused}: fix it with `chmod 700 {path}` and try again"),
        Refused::WrongType => {
            format!("{path} is not a directory: remove it, or set {var} to a directory of yours")
        }
    }
}

impl DirError {
    /// The error of opening the directory at `path`, which `var` overrides.
    pub fn of(path: &Path, var: &'static str, e: OpenError) -> DirError {
        let path = path.display().to_string();
        match e {
            OpenError::Refused(refused) => DirError::Refused { path, refused, var },
            OpenError::Io(source) => DirError::Io { path, source },
        }
    }
}

impl Dirs {
    /// Works out the directories from an environment (normally the process's).
    ///
    /// - state: `MCPX_STATE_DIR`, else `$XDG_STATE_HOME/mcpx`, else `~/.local/state/mcpx`;
    /// - cache: `MCPX_CACHE_DIR`, else `$XDG_CACHE_HOME/mcpx`, else `~/.cache/mcpx`;
    /// - runtime: `MCPX_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/mcpx`, else
    ///   `/run/user/<uid>/mcpx` when `/run/user/<uid>` is a directory of the user's that
    ///   no one else can write, else `$TMPDIR/mcpx-<uid>` (`/tmp` when `TMPDIR` is
    ///   unset). Where the rule picks `/run/user/<uid>/mcpx` but the user's
    ///   `$TMPDIR/mcpx-<uid>` holds a live daemon or supervisors (an mcpx from before
    ///   this rule left them), that one is used until they are gone, so there is still
    ///   one daemon (`docs/configuration.md`, "Migration").
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
        let runtime = runtime_dir(env, &run_user_root(env));
        Ok(Dirs { state, cache, runtime: absolute(runtime) })
    }

    /// The daemon's control socket.
    pub fn socket(&self) -> PathBuf {
        self.runtime.join(SOCKET)
    }

    /// The lock a daemon holds for its whole life; it makes racing starts yield one daemon.
    pub fn lock(&self) -> PathBuf {
        self.runtime.join(LOCK)
    }

    /// The running daemon's pid, written once it listens.
    pub fn pid_file(&self) -> PathBuf {
        self.runtime.join(PID_FILE)
    }

    /// Where supervisors keep their sockets and records (`sup/<id>.sock`, `sup/<id>.json`).
    pub fn sup_dir(&self) -> PathBuf {
        self.runtime.join(SUP)
    }

    /// The supervisors' log file.
    pub fn supervisor_log(&self) -> PathBuf {
        self.state.join(SUPERVISOR_LOG)
    }

    /// The daemon's log file.
    pub fn log_file(&self) -> PathBuf {
        self.state.join(LOG)
    }

    /// Where remote MCP sessions are kept for the next daemon (`remote/<instance>.json`).
    pub fn remote_sessions(&self) -> PathBuf {
        self.state.join(REMOTE)
    }

    /// The list of every configuration file the daemon has resolved.
    pub fn known_configs(&self) -> PathBuf {
        self.state.join(KNOWN_CONFIGS)
    }

    /// Opens the three directories, creating what is missing (mode 0700), and checks
    /// each: not a link, a directory, owned by the current user, no group or other
    /// access. Checks too that the socket paths fit the platform.
    ///
    /// Errors: a directory is refused (with what to do), cannot be made or opened, or
    /// a socket path is too long.
    pub fn open(&self) -> Result<OpenDirs, DirError> {
        let open = |path: &Path, var| Dir::open_private(path, true).map_err(|e| DirError::of(path, var, e));
        let runtime = open(&self.runtime, "MCPX_RUNTIME_DIR")?;
        check_socket_path(&self.socket())?;
        // Supervisor sockets are the longest: `sup/` and a 12-character instance id.
        check_socket_path(&self.sup_dir().join("000000000000.sock"))?;
        Ok(OpenDirs {
            state: open(&self.state, "MCPX_STATE_DIR")?,
            cache: open(&self.cache, "MCPX_CACHE_DIR")?,
            runtime,
            paths: self.clone(),
        })
    }

    /// Opens and checks the directories as [`Dirs::open`] does, and closes them.
    ///
    /// Errors: as [`Dirs::open`].
    pub fn prepare(&self) -> Result<(), DirError> {
        self.open().map(drop)
    }
}

impl OpenDirs {
    /// The supervisors' directory, `<runtime>/sup`, checked like the others (made when
    /// missing, with `create`).
    ///
    /// Errors: as [`Dirs::open`].
    pub fn sup(&self, create: bool) -> Result<Dir, DirError> {
        self.runtime.subdir(SUP, create).map_err(|e| DirError::of(&self.paths.sup_dir(), "MCPX_RUNTIME_DIR", e))
    }
}

/// The runtime rule (see [`Dirs::from_env`]), with `run_user` standing for `/run/user`.
fn runtime_dir(env: &HashMap<String, String>, run_user: &Path) -> PathBuf {
    let get = |k: &str| env.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    get("MCPX_RUNTIME_DIR").or_else(|| get("XDG_RUNTIME_DIR").map(|p| p.join("mcpx"))).unwrap_or_else(|| {
        let uid = nix::unistd::getuid().as_raw();
        let fallback = get("TMPDIR").unwrap_or_else(|| PathBuf::from("/tmp")).join(format!("mcpx-{uid}"));
        let users = run_user.join(uid.to_string());
        // The user's own, and no one else can put an entry in it.
        let theirs =
            std::fs::symlink_metadata(&users).is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o022 == 0);
        if theirs && !legacy_in_use(&fallback) { users.join("mcpx") } else { fallback }
    })
}

/// `/run/user`, or with the `test-hooks` feature `MCPX_TEST_RUN_USER` when set.
fn run_user_root(env: &HashMap<String, String>) -> PathBuf {
    #[cfg(feature = "test-hooks")]
    if let Some(root) = env.get("MCPX_TEST_RUN_USER").filter(|v| !v.is_empty()) {
        return PathBuf::from(root);
    }
    let _ = env;
    PathBuf::from(RUN_USER)
}

/// Whether the runtime directory of an mcpx from before the `/run/user` rule is
/// still in use: it is the user's alone, and a daemon answers on its socket or
/// supervisors left records in its `sup/`.
fn legacy_in_use(dir: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(dir) else { return false };
    if !meta.is_dir() || meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o077 != 0 {
        return false;
    }
    let records = std::fs::read_dir(dir.join(SUP))
        .is_ok_and(|d| d.flatten().any(|e| e.path().extension().is_some_and(|x| x == "json")));
    records || std::os::unix::net::UnixStream::connect(dir.join(SOCKET)).is_ok()
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
    fn the_runtime_rule_prefers_the_users_run_directory_to_the_fallback() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let run_user = tmp.path().join("run-user");
        let uid = nix::unistd::getuid().as_raw();
        let env: HashMap<String, String> =
            [("TMPDIR".to_owned(), tmp.path().join("tmp").display().to_string())].into_iter().collect();
        let fallback = tmp.path().join(format!("tmp/mcpx-{uid}"));
        assert_eq!(runtime_dir(&env, &run_user), fallback, "no /run/user/<uid>");
        let users = run_user.join(uid.to_string());
        std::fs::create_dir_all(&users).unwrap();
        std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(runtime_dir(&env, &run_user), users.join("mcpx"));
        std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(runtime_dir(&env, &run_user), fallback, "others can write in it");
        std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o700)).unwrap();
        // An older mcpx's supervisors in the fallback keep it in use.
        Dirs { state: tmp.path().join("s"), cache: tmp.path().join("c"), runtime: fallback.clone() }.open().unwrap();
        std::fs::create_dir(fallback.join("sup")).unwrap();
        std::fs::write(fallback.join("sup/abc.json"), "{}").unwrap();
        assert_eq!(runtime_dir(&env, &run_user), fallback, "the old directory holds supervisors");
        let xdg: HashMap<String, String> = [("XDG_RUNTIME_DIR".to_owned(), "/x".to_owned())].into_iter().collect();
        assert_eq!(runtime_dir(&xdg, &run_user), PathBuf::from("/x/mcpx"));
    }

    #[test]
    fn refuses_open_runtime_dir_and_long_socket_paths() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dirs = Dirs { state: tmp.path().join("s"), cache: tmp.path().join("c"), runtime: tmp.path().join("r") };
        dirs.open().unwrap();
        std::fs::set_permissions(&dirs.runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = dirs.open().unwrap_err().to_string();
        assert!(err.contains("mode 0755") && err.contains(&format!("chmod 700 {}", dirs.runtime.display())), "{err}");
        let long = PathBuf::from(format!("/{}/daemon.sock", "x".repeat(120)));
        assert!(check_socket_path(&long).unwrap_err().to_string().contains("MCPX_RUNTIME_DIR"));
    }
}
