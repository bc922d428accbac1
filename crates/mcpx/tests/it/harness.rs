//! The test harness: a private mcpx world per test (state, cache and runtime
//! directories and a config file in one temporary directory) whose daemon and
//! servers are stopped on drop, even when the test fails.
//!
//! A world can also run as another user (`World::as_victim`, see `users.rs`), for the
//! tests of what other local users can do.

#![allow(dead_code)] // Reason: not every test module uses every helper.

pub mod scripted;
mod users;

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use tempfile::TempDir;

#[allow(unused_imports)] // Reason: the security tests' API; not every module uses all of it.
pub use users::{Attacker, FakeDaemon, Ids, SpareUids, spare_uids};

/// The mcpx binary under test.
pub fn mcpx_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mcpx"))
}

/// The workspace's fake MCP server, built beside mcpx.
pub fn fake_server() -> String {
    let path = mcpx_bin().with_file_name("mcpx-fake-server");
    assert!(path.exists(), "{} is missing: build it with `cargo build -p mcpx-fake-server`", path.display());
    path.display().to_string()
}

/// The directory where scripts/setup-e2e.sh installed the real servers.
pub fn e2e_dir() -> PathBuf {
    let dir = std::env::var_os("MCPX_E2E_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e"));
    assert!(
        dir.join("node_modules").exists() && dir.join(".venv").exists(),
        "the real MCP servers are not installed in {}: run `bash scripts/setup-e2e.sh` (scripts/test.sh does)",
        dir.display()
    );
    dir.canonicalize().unwrap()
}

/// One private mcpx world.
pub struct World {
    pub dir: TempDir,
    /// The config file (`MCPX_CONFIG`).
    pub config: PathBuf,
    /// Extra environment for every command.
    pub env: Vec<(String, String)>,
    /// Variables every command leaves unset, even the world's own `MCPX_*_DIR`s (a
    /// test of the directory rules unsets `MCPX_RUNTIME_DIR`, say).
    pub unset: Vec<String>,
    /// Set by [`World::as_victim`]: every command runs as the victim.
    victim: Option<users::Victim>,
}

/// The MCPX_* variables of the test run that a world's commands keep: where the
/// end-to-end tools are, and the log level.
const INHERITED: [&str; 2] = ["MCPX_E2E_DIR", "MCPX_LOG"];

/// Builds mcpx commands for one world; cheap to clone into threads.
#[derive(Clone)]
pub struct Launcher {
    env: Vec<(String, std::ffi::OsString)>,
    unset: Vec<String>,
    dir: PathBuf,
    /// The victim's ids and binary, for a world made by [`World::as_victim`]: the
    /// command then runs as the victim, in an environment of its own only.
    victim: Option<(Ids, PathBuf)>,
}

impl Launcher {
    /// A command for the mcpx binary in this world.
    pub fn command(&self) -> std::process::Command {
        self.program(self.victim.as_ref().map_or_else(mcpx_bin, |(_, bin)| bin.clone()))
    }

    /// A command for `program` as this world's user, in its directory and environment.
    pub fn program(&self, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
        #[allow(clippy::disallowed_methods)] // Reason: tests run the binary under test.
        let mut cmd = std::process::Command::new(program);
        if let Some((ids, _)) = &self.victim {
            use std::os::unix::process::CommandExt;
            cmd.env_clear().uid(ids.uid).gid(ids.gid);
        }
        // The world has exactly the MCPX_* settings it sets: none of the developer's own
        // (a TCP address, `MCPX_HTTP_NO_AUTH`, ...) reaches it, except the test run's.
        for (key, _) in std::env::vars_os() {
            if key.to_str().is_some_and(|k| k.starts_with("MCPX_") && !INHERITED.contains(&k)) {
                cmd.env_remove(&key);
            }
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v))).env_remove("MCPX_SESSION_ID").current_dir(&self.dir);
        for var in &self.unset {
            cmd.env_remove(var);
        }
        cmd
    }
}

/// What a finished command printed.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Runs `cmd`, its output captured, and waits, 120 s at most, for it to finish;
    /// `what` names it if it does not.
    pub fn of(mut cmd: std::process::Command, what: &str) -> Run {
        Run::wait(cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap(), what)
    }

    /// Waits, 120 s at most, for `child` to finish, collecting what it wrote to the
    /// streams that are piped; `what` names it if it does not.
    pub fn wait(child: std::process::Child, what: &str) -> Run {
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(out) => Run::from(out.unwrap()),
            Err(_) => {
                let _ =
                    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
                panic!("`{what}` did not finish within 120 s");
            }
        }
    }

    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Asserts success and returns stdout.
    #[track_caller]
    pub fn ok(self) -> String {
        assert_eq!(self.code, 0, "expected success\nstdout: {}\nstderr: {}", self.stdout, self.stderr);
        self.stdout
    }

    /// The stdout parsed as JSON.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
}

impl World {
    /// A world whose config file holds `servers` (the value of `mcpServers`).
    pub fn new(servers: serde_json::Value) -> World {
        let dir = tempfile::Builder::new().prefix("mcpx-t").tempdir_in("/tmp").unwrap();
        // Private, as mcpx requires of its directories.
        for sub in ["state", "cache", "run"] {
            std::fs::DirBuilder::new().mode(0o700).create(dir.path().join(sub)).unwrap();
        }
        let config = dir.path().join("config.json");
        // The file secret store, so no test reaches the keyring of the desktop it runs
        // on; the keyring tests take this out.
        let env = vec![("MCPX_SECRET_STORE".to_owned(), "file".to_owned())];
        let world = World { dir, config, env, unset: Vec::new(), victim: None };
        world.write_config(&serde_json::json!({ "mcpServers": servers }).to_string());
        world
    }

    /// Replaces the config file with these servers.
    pub fn set_servers(&self, servers: serde_json::Value) {
        self.write_config(&serde_json::json!({ "mcpServers": servers }).to_string());
    }

    /// Replaces the config file's text (its owner stays the world's user).
    pub fn write_config(&self, text: &str) {
        std::fs::write(&self.config, text).unwrap();
    }

    /// The fake MCP server, at a path this world's user can run.
    pub fn fake_server(&self) -> String {
        match &self.victim {
            Some(v) => v.bin.join("mcpx-fake-server").display().to_string(),
            None => fake_server(),
        }
    }

    /// The uid this world's commands run as.
    pub fn uid(&self) -> u32 {
        self.victim.as_ref().map_or_else(|| nix::unistd::getuid().as_raw(), |v| v.ids.uid)
    }

    pub fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// A command for the mcpx binary in this world.
    pub fn command(&self) -> std::process::Command {
        self.launcher().command()
    }

    /// What `command` needs, owned, for threads that start mcpx processes.
    pub fn launcher(&self) -> Launcher {
        let mut env: Vec<(String, std::ffi::OsString)> = self.victim.as_ref().map(|v| v.base_env()).unwrap_or_default();
        env.extend([
            ("MCPX_STATE_DIR".into(), self.path("state").into()),
            ("MCPX_CACHE_DIR".into(), self.path("cache").into()),
            ("MCPX_RUNTIME_DIR".into(), self.path("run").into()),
            ("MCPX_CONFIG".into(), self.config.clone().into()),
        ]);
        env.extend(self.env.iter().map(|(k, v)| (k.clone(), v.into())));
        env.retain(|(k, _)| !self.unset.contains(k));
        Launcher {
            env,
            unset: self.unset.clone(),
            dir: self.dir.path().to_path_buf(),
            victim: self.victim.as_ref().map(|v| (v.ids, v.bin.join("mcpx"))),
        }
    }

    /// Runs `mcpx <args>` and waits (with a generous deadline) for it.
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_with(args, |_| {})
    }

    /// Runs `mcpx <args>` after `tweak` adjusts the command.
    pub fn run_with(&self, args: &[&str], tweak: impl FnOnce(&mut std::process::Command)) -> Run {
        let mut cmd = self.command();
        cmd.args(args).stdin(std::process::Stdio::null());
        tweak(&mut cmd);
        Run::of(cmd, &format!("mcpx {}", args.join(" ")))
    }

    /// `mcpx trust --yes` in `dir`: the user trusts the project files found upward
    /// from it, as they are now. Asserts success.
    #[track_caller]
    pub fn trust_in(&self, dir: &Path) {
        self.run_with(&["trust", "--yes"], |cmd| {
            cmd.current_dir(dir);
        })
        .ok();
    }

    /// `mcpx call <target> <json>`.
    pub fn call(&self, target: &str, args: &str) -> Run {
        self.run(&["call", target, args])
    }

    /// `mcpx status --json`.
    pub fn status(&self) -> serde_json::Value {
        let run = self.run(&["status", "--json"]);
        assert_eq!(run.code, 0, "status failed: {}", run.stderr);
        run.json()
    }

    /// The instance of `server` in `status`, if any.
    pub fn instance(&self, server: &str) -> Option<serde_json::Value> {
        self.status()["instances"].as_array().unwrap().iter().find(|i| i["server"] == server).cloned()
    }

    /// The row of `server` in `ls --json`.
    pub fn ls_row(&self, server: &str) -> serde_json::Value {
        let run = self.run(&["ls", "--json"]);
        let rows = run.json();
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == server)
            .cloned()
            .unwrap_or_else(|| panic!("no `{server}` in {rows}"))
    }

    /// The daemon's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path("state/daemon.log")).unwrap_or_default()
    }

    /// Asserts that the daemon's log comes to hold `needle` (waiting, as
    /// [`World::log_once_it_has`] does, for the background log writer), and returns it.
    #[track_caller]
    pub fn assert_log_has(&self, needle: &str) -> String {
        let log = self.log_once_it_has(needle);
        assert!(log.contains(needle), "the daemon's log lacks {needle:?}:\n{log}");
        log
    }

    /// The daemon's log once it holds `needle`: the daemon writes its log from a
    /// background thread, so a line may land a moment after the answer that caused it.
    /// Gives up after 10 s and returns the log as it is, for the caller's assertion.
    pub fn log_once_it_has(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = self.log();
            if log.contains(needle) || Instant::now() > deadline {
                return log;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The running daemon's pid, if any.
    pub fn daemon_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.path("run/daemon.pid")).ok()?.trim().parse().ok()
    }

    /// Every runtime directory this world's daemons may have used: its `run/`, and the
    /// stand-ins for `/run/user/<uid>/mcpx` and `$TMPDIR/mcpx-<uid>` (see `users.rs`).
    fn runtime_dirs(&self) -> Vec<PathBuf> {
        let uid = self.uid();
        ["run".to_owned(), format!("run-user/{uid}/mcpx"), format!("tmp/mcpx-{uid}")]
            .iter()
            .map(|d| self.path(d))
            .collect()
    }

    /// The pids in every `daemon.pid` of [`World::runtime_dirs`].
    fn daemon_pids(&self) -> Vec<i32> {
        self.runtime_dirs()
            .iter()
            .filter_map(|dir| std::fs::read_to_string(dir.join("daemon.pid")).ok()?.trim().parse().ok())
            .collect()
    }

    /// Kills every supervisor, and its server, that a record in the world's runtime
    /// directories names, when it still runs with the recorded start time: what
    /// `stop --all` could not stop (a daemon that refused to start, say).
    fn kill_recorded_supervisors(&self) {
        for sup in self.runtime_dirs().iter().map(|d| d.join("sup")) {
            let Ok(entries) = std::fs::read_dir(&sup) else { continue };
            for entry in entries.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "json")) {
                let Ok(record) =
                    serde_json::from_slice::<serde_json::Value>(&std::fs::read(entry.path()).unwrap_or_default())
                else {
                    continue;
                };
                for process in [&record["supervisor"], &record["child"]] {
                    let (Some(pid), Some(start)) = (process["pid"].as_i64(), process["start_time"].as_u64()) else {
                        continue;
                    };
                    let pid = i32::try_from(pid).unwrap_or(0);
                    if pid > 1 && alive(pid) && try_start_time(pid) == Some(start) {
                        let _ =
                            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
                    }
                }
            }
        }
    }

    /// Replaces `[TMP]` for this world's directory, so messages can be snapshotted.
    pub fn redact(&self, text: &str) -> String {
        text.replace(&self.dir.path().display().to_string(), "[TMP]")
    }
}

impl World {
    /// `kill -9` the daemon and wait until it is gone (its lock is free).
    pub fn kill_daemon(&self) {
        let pid = self.daemon_pid().expect("a daemon runs");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).unwrap();
        wait_until("the killed daemon is gone", Duration::from_secs(10), || !alive(pid));
        // Its listening socket closes as it exits: wait until nothing accepts there.
        let socket = self.path("run/daemon.sock");
        wait_until("the killed daemon's socket refuses", Duration::from_secs(10), || {
            std::os::unix::net::UnixStream::connect(&socket).is_err()
        });
    }

    /// The files in the runtime directory's `sup/`.
    pub fn sup_files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path("run/sup"))
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        names.sort();
        names
    }
}

/// A process's start time (field 22 of /proc/<pid>/stat): with the pid, its identity.
pub fn start_time(pid: i32) -> u64 {
    try_start_time(pid).unwrap_or_else(|| panic!("no start time for pid {pid}"))
}

/// [`start_time`], or `None` when the process is gone (for cleanup, which must not panic).
fn try_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether process `pid` exists (and is not a zombie we could still see).
pub fn alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name in parentheses.
    stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X'))
}

/// Waits until `cond` holds, polling; fails the test after `within`.
#[track_caller]
pub fn wait_until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let pids = self.daemon_pids();
        let _ = self.run(&["stop", "--all"]);
        for pid in pids.into_iter().filter(|p| *p > 1 && alive(*p)) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        self.kill_recorded_supervisors();
        if std::env::var_os("MCPX_KEEP_TEST_DIRS").is_some() {
            eprintln!("keeping {}", self.dir.path().display());
            self.dir.disable_cleanup(true);
        }
    }
}

/// A process a test started (a remote MCP server, say): killed and reaped on drop.
pub struct Spawned(pub std::process::Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The fake server in its streamable HTTP mode on `addr` (`127.0.0.1:0` for any port)
/// with `env`, and the URL it printed once listening.
pub fn fake_http(addr: &str, env: &[(&str, &str)]) -> (Spawned, String) {
    use std::io::BufRead;
    #[allow(clippy::disallowed_methods)] // Reason: the fake server is the server under test.
    let mut child = std::process::Command::new(fake_server())
        .args(["--http", addr])
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let child = Spawned(child);
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line).unwrap();
    let url = line.trim().to_owned();
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"), "the fake server printed {line:?}");
    (child, url)
}

/// A TCP port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until something accepts TCP connections on 127.0.0.1:`port`.
#[track_caller]
pub fn wait_for_port(port: u16) {
    wait_until(&format!("127.0.0.1:{port} accepts"), Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
}

/// An MCP session with `mcpx serve` over stdio: initialized, with a reader thread.
pub struct Serve {
    child: Spawned,
    stdin: Option<std::process::ChildStdin>,
    rx: std::sync::mpsc::Receiver<serde_json::Value>,
    next_id: u64,
}

impl Serve {
    /// Starts `mcpx serve` in `w` and initializes with `capabilities`.
    pub fn start(w: &World, capabilities: serde_json::Value) -> Serve {
        Serve::start_with(w.command(), capabilities)
    }

    /// Starts `cmd serve` (`cmd` runs mcpx, in the environment the test gives it) and
    /// initializes with `capabilities`.
    pub fn start_with(cmd: std::process::Command, capabilities: serde_json::Value) -> Serve {
        Serve::start_cmd(cmd, &[], capabilities)
    }

    /// Starts `mcpx serve <args>` in `w` (`--server <name>`, say) and initializes
    /// with `capabilities`.
    pub fn start_args(w: &World, args: &[&str], capabilities: serde_json::Value) -> Serve {
        Serve::start_cmd(w.command(), args, capabilities)
    }

    /// Starts `cmd` as it is (its arguments already given: `serve --code`, say) and
    /// initializes with `capabilities`.
    pub fn start_cmd_args(cmd: std::process::Command, capabilities: serde_json::Value) -> Serve {
        Serve::spawn(cmd, capabilities)
    }

    fn start_cmd(mut cmd: std::process::Command, args: &[&str], capabilities: serde_json::Value) -> Serve {
        cmd.arg("serve").args(args);
        Serve::spawn(cmd, capabilities)
    }

    fn spawn(mut cmd: std::process::Command, capabilities: serde_json::Value) -> Serve {
        use std::io::BufRead;
        cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
        let mut child = Spawned(cmd.spawn().unwrap());
        let stdin = child.0.stdin.take();
        let stdout = child.0.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Ok(v) = serde_json::from_str(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        let mut serve = Serve { child, stdin, rx, next_id: 1 };
        let init = serve.request(
            "initialize",
            serde_json::json!({ "protocolVersion": "2025-11-25", "capabilities": capabilities,
                "clientInfo": { "name": "t", "version": "1" } }),
        );
        assert!(init["result"]["protocolVersion"].is_string(), "{init}");
        serve.send(serde_json::json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        serve
    }

    /// Writes one message.
    pub fn send(&mut self, message: serde_json::Value) {
        use std::io::Write;
        writeln!(self.stdin.as_mut().unwrap(), "{message}").unwrap();
    }

    /// The next message from serve (30 s at most).
    #[track_caller]
    pub fn recv(&self) -> serde_json::Value {
        self.rx.recv_timeout(Duration::from_secs(30)).expect("no message from mcpx serve")
    }

    /// Sends a request and returns its response; messages before it go to `seen`.
    #[track_caller]
    pub fn request_seeing(
        &mut self,
        method: &str,
        params: serde_json::Value,
        seen: &mut Vec<serde_json::Value>,
    ) -> serde_json::Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        loop {
            let m = self.recv();
            if m["id"] == id && m.get("method").is_none() {
                return m;
            }
            seen.push(m);
        }
    }

    /// Sends a request and returns its response.
    #[track_caller]
    pub fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        self.request_seeing(method, params, &mut Vec::new())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // EOF ends the session; the guard kills serve if it lingers.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && self.child.0.try_wait().ok().flatten().is_none() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
