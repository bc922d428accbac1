//! Other local users, for the security tests: a world whose mcpx runs as a spare
//! uid (the victim), and a second spare uid (the attacker) that tries to get in.
//!
//! Switching users needs root. When the suite runs as root (CI does), these tests
//! run; when it does not, they are skipped with a note on stderr, except with
//! `CI=true`, where they fail: CI must never skip them silently.
//!
//! A victim's world, laid out in the world's temporary directory (mode 0755):
//! - `state/`, `cache/`, `run/`, `home/` and the config file, owned by the victim;
//! - `bin/` (root, 0755): `mcpx` and `mcpx-fake-server`, linked or copied there so
//!   the victim can run them wherever the build put them;
//! - `tmp/` (root, 1777, like `/tmp`): the victim's `TMPDIR`, where the runtime
//!   directory's last fallback `mcpx-<uid>` goes;
//! - `run-user/` (root, 0755): the stand-in for `/run/user`, named by
//!   `MCPX_TEST_RUN_USER`; a test creates `run-user/<uid>` when it wants one;
//! - `attacker/` (the attacker, 0755): the attacker's home, where the fake daemon's
//!   record goes.
//!
//! The victim's commands get no environment but `PATH`, `HOME`, `TMPDIR`,
//! `MCPX_TEST_RUN_USER`, the world's `MCPX_*` variables and its `env`, less its
//! `unset`.

use std::ffi::OsString;
use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use super::{Run, Spawned, World, fake_server, mcpx_bin};

/// The `PATH` of the victim's and the attacker's commands.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A user and group id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    pub uid: u32,
    pub gid: u32,
}

/// Two uids no account uses: the victim runs mcpx, the attacker tries to get in.
/// Every test uses the same two, so each test keeps to its own world's directories
/// and never signals processes by uid.
#[derive(Debug, Clone, Copy)]
pub struct SpareUids {
    pub victim: Ids,
    pub attacker: Ids,
}

/// The spare uids, when this process can switch to them (it runs as root).
///
/// Returns `None`, after a note on stderr, when not running as root: the calling test
/// returns at once (`let Some(w) = World::new(...).as_victim() else { return };`).
/// Panics instead when `CI=true`, and when either uid has an account in `/etc/passwd`.
pub fn spare_uids() -> Option<SpareUids> {
    if !nix::unistd::geteuid().is_root() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the cross-user tests need root to switch users, and CI=true forbids skipping them: run the suite as root"
        );
        eprintln!("skipped: the cross-user tests need root to switch users (CI=true makes this a failure)");
        return None;
    }
    let uids = SpareUids { victim: Ids { uid: 61_011, gid: 61_011 }, attacker: Ids { uid: 61_012, gid: 61_012 } };
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    for ids in [uids.victim, uids.attacker] {
        let taken = passwd.lines().any(|l| l.split(':').nth(2) == Some(ids.uid.to_string().as_str()));
        assert!(!taken, "uid {} has an account in /etc/passwd: pick other spare uids in users.rs", ids.uid);
    }
    Some(uids)
}

/// What makes a world a victim's: its users and where its binaries are.
pub(super) struct Victim {
    pub(super) ids: Ids,
    pub(super) attacker: Ids,
    /// The world's `bin/`, holding `mcpx` and `mcpx-fake-server`.
    pub(super) bin: PathBuf,
    /// The world's directory.
    root: PathBuf,
}

impl Victim {
    /// The environment every victim command starts from.
    pub(super) fn base_env(&self) -> Vec<(String, OsString)> {
        vec![
            ("PATH".into(), PATH.into()),
            ("HOME".into(), self.root.join("home").into()),
            ("TMPDIR".into(), self.root.join("tmp").into()),
            ("MCPX_TEST_RUN_USER".into(), self.root.join("run-user").into()),
        ]
    }
}

impl World {
    /// This world, with every command run as the victim (see the module's
    /// documentation for its layout), or `None` when users cannot be switched here
    /// (see [`spare_uids`]).
    ///
    /// Write the config after this, with [`World::fake_server`] for the fake's path.
    #[allow(clippy::wrong_self_convention)] // Reason: reads as the tests say it, `World::new(..).as_victim()`.
    pub fn as_victim(mut self) -> Option<World> {
        let uids = spare_uids()?;
        let root = self.dir.path().to_path_buf();
        let bin = root.join("bin");
        for (dir, mode) in [("bin", 0o755), ("home", 0o700), ("tmp", 0o1777), ("run-user", 0o755), ("attacker", 0o755)]
        {
            std::fs::create_dir(root.join(dir)).unwrap();
            std::fs::set_permissions(root.join(dir), std::fs::Permissions::from_mode(mode)).unwrap();
        }
        for from in [mcpx_bin(), PathBuf::from(fake_server())] {
            let to = bin.join(from.file_name().unwrap());
            if std::fs::hard_link(&from, &to).is_err() {
                std::fs::copy(&from, &to).unwrap();
                std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        for path in [root.clone(), root.join("state"), root.join("cache"), root.join("run"), root.join("home")] {
            chown(&path, uids.victim);
        }
        chown(&self.config, uids.victim);
        chown(&root.join("attacker"), uids.attacker);
        self.victim = Some(Victim { ids: uids.victim, attacker: uids.attacker, bin, root });
        Some(self)
    }

    /// The attacker of this victim's world. Panics for a world not made by
    /// [`World::as_victim`].
    pub fn attacker(&self) -> Attacker {
        let victim = self.victim.as_ref().expect("only a victim's world has an attacker: use World::as_victim");
        Attacker { ids: victim.attacker, bin: victim.bin.clone(), home: victim.root.join("attacker") }
    }

    /// Makes `path` the world's user's (it is the victim's, in a victim's world),
    /// for files a test creates in the user's directories.
    pub fn give(&self, path: &Path) {
        if let Some(victim) = &self.victim {
            chown(path, victim.ids);
        }
    }

    /// Runs `/bin/sh -c script` as the world's user, in the world's environment.
    pub fn sh(&self, script: &str) -> Run {
        let mut cmd = self.launcher().program("/bin/sh");
        cmd.args(["-c", script]).stdin(std::process::Stdio::null());
        Run::of(cmd, script)
    }
}

/// Another local user: runs commands as the attacker's uid, in its own home.
pub struct Attacker {
    pub ids: Ids,
    bin: PathBuf,
    /// The attacker's own directory (mode 0755), in the victim's world.
    pub home: PathBuf,
}

impl Attacker {
    /// A command that runs `program` as the attacker, in its home, with only `PATH`
    /// and `HOME` set.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
        #[allow(clippy::disallowed_methods)] // Reason: the attacker's processes are the test's, not mcpx's.
        let mut cmd = std::process::Command::new(program);
        cmd.env_clear()
            .env("PATH", PATH)
            .env("HOME", &self.home)
            .current_dir(&self.home)
            .uid(self.ids.uid)
            .gid(self.ids.gid);
        cmd
    }

    /// Runs `/bin/sh -c script` as the attacker and waits for it.
    pub fn run(&self, script: &str) -> Run {
        let mut cmd = self.command("/bin/sh");
        cmd.args(["-c", script]).stdin(std::process::Stdio::null());
        Run::of(cmd, script)
    }

    /// Starts an impostor of the mcpx daemon listening on `socket`, as the attacker
    /// (`mcpx-fake-server --fake-daemon`), and waits until it listens. It records
    /// every request it receives, and forges a result for every call.
    pub fn fake_daemon(&self, socket: &Path) -> FakeDaemon {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let record =
            self.home.join(format!("fake-daemon-{}.log", SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
        let mut cmd = self.command(self.bin.join("mcpx-fake-server"));
        cmd.arg("--fake-daemon")
            .arg(socket)
            .env("FAKE_RECORD", &record)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped());
        let mut child = Spawned(cmd.spawn().unwrap());
        let stdout = child.0.stdout.take().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "listening", "the fake daemon did not start on {} (see its stderr)", socket.display());
        FakeDaemon { _child: child, record }
    }
}

/// An impostor of the daemon, run by [`Attacker::fake_daemon`]; killed on drop.
pub struct FakeDaemon {
    _child: Spawned,
    record: PathBuf,
}

impl FakeDaemon {
    /// The text every result it forges carries.
    pub const FORGED: &str = "forged by the fake daemon";

    /// Every request it has received so far, one `<METHOD> <path> <body>` line each.
    pub fn received(&self) -> String {
        std::fs::read_to_string(&self.record).unwrap_or_default()
    }
}

/// `chown` of `path` itself (not what a symlink points to).
fn chown(path: &Path, ids: Ids) {
    std::os::unix::fs::lchown(path, Some(ids.uid), Some(ids.gid))
        .unwrap_or_else(|e| panic!("cannot chown {}: {e}", path.display()));
}
