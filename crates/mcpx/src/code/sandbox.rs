//! The Deno sandbox a script runs in (docs/code-mode.md, "The sandbox"): finding Deno,
//! the private directory of one run (runtime module, declarations, entry), the kernel
//! confinement of its processes, the graph check and the type check, the permission
//! flags, the wall-time and memory limits, and the process group killed on every way out.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mcpx_api::{ApiError, ErrorKind};
use mcpx_platform::confine::{self, Grant, Policy, Prepared};
use mcpx_platform::fs::Dir;
use mcpx_platform::process::{Detach, SpawnSpec};

/// How to install Deno, for the message that refuses to run without it.
pub const INSTALL_HINT: &str = "install Deno (`npm install -g deno`, or see https://docs.deno.com/runtime/getting_started/installation/) \
     or set MCPX_DENO to its path; `--unsafe-node` runs the script under Node instead, unchecked and less confined";

/// Where the Deno binary is: `MCPX_DENO` when set, else `deno` on `PATH`.
///
/// Errors: a sentence to show, ending with what to do: `MCPX_DENO` names no
/// executable file, or it is unset and `PATH` has no `deno` ([`INSTALL_HINT`]).
pub fn find_deno(env: &std::collections::HashMap<String, String>) -> Result<PathBuf, String> {
    if let Some(path) = env.get("MCPX_DENO").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(format!(
                "MCPX_DENO is {}, which is not an executable file: point it at the Deno binary, or unset it to use `deno` on PATH",
                path.display()
            ))
        };
    }
    find_on_path(env, "deno")
        .ok_or_else(|| format!("Deno is not installed (not on PATH, MCPX_DENO unset): {INSTALL_HINT}"))
}

/// `name` on the `PATH` of `env`, when it is an executable file there.
pub fn find_on_path(env: &std::collections::HashMap<String, String>, name: &str) -> Option<PathBuf> {
    let path = env.get("PATH")?;
    std::env::split_paths(path).map(|dir| dir.join(name)).find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The files of one run, in a private directory (mode 0700) under the runtime
/// directory, removed when this is dropped.
pub struct RunDir {
    dir: Dir,
}

fn cannot_make(what: &str, e: &dyn std::fmt::Display) -> ApiError {
    ApiError::new(ErrorKind::Daemon, format!("cannot make {what}: {e}"))
}

/// The runtime module's file name in the run directory.
pub const RUNTIME_FILE: &str = "mcpx.ts";
/// The entry module's file name.
pub const ENTRY_FILE: &str = "main.ts";
/// `exec`'s code, wrapped as the body of an async function, one line down.
pub const EXEC_FILE: &str = "exec.ts";

impl RunDir {
    /// Makes `code/<pid>-<time>-<n>` under `runtime` (the runtime directory, private).
    ///
    /// Errors: the directory cannot be made (`daemon`: it is the runtime directory's).
    pub fn new(runtime: &Dir) -> Result<RunDir, ApiError> {
        RunDir::make(runtime, "code", "the script's directory under the runtime directory")
    }

    /// A private directory for one run's own Deno cache, `deno-runs/<pid>-<time>-<n>`
    /// beside the shared cache `deno_dir` (under mcpx's cache directory, on disk),
    /// removed when this is dropped.
    ///
    /// Errors: the directory cannot be made (`daemon`).
    pub fn in_cache(deno_dir: &Path) -> Result<RunDir, ApiError> {
        let what = "the script's own cache under the cache directory";
        let parent = deno_dir.parent().unwrap_or(deno_dir);
        let cache = Dir::open_private(parent, false).map_err(|e| cannot_make(what, &e))?;
        RunDir::make(&cache, "deno-runs", what)
    }

    /// `group/<pid>-<time>-<n>` under `parent`, private; `what` names it in the error.
    fn make(parent: &Dir, group: &str, what: &str) -> Result<RunDir, ApiError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let group = parent.subdir(group, true).map_err(|e| cannot_make(what, &e))?;
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{}-{}-{n}", std::process::id(), mcpx_daemon::schema::now());
        let dir = group.subdir(&name, true).map_err(|e| cannot_make(what, &e))?;
        Ok(RunDir { dir })
    }

    /// Writes `name` (mode 0600).
    pub fn write(&self, name: &str, text: &str) -> Result<(), ApiError> {
        mcpx_platform::fs::write_atomic(&self.dir, name, text.as_bytes(), 0o600).map_err(|e| {
            ApiError::new(ErrorKind::Daemon, format!("cannot write the script's {name} in the runtime directory: {e}"))
        })
    }

    /// The path of `name` in it.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.dir.path());
    }
}

/// A started sandbox process, its group killed when this is dropped (every way out:
/// the answer, an error, the time limit, Ctrl-C, a panic).
pub struct Group {
    pub child: tokio::process::Child,
    pgid: Option<u32>,
}

impl Group {
    /// Starts `program args` in its own process group with exactly `env`, its three
    /// standard streams piped, confined by `confine` when given.
    ///
    /// Errors: the process cannot start (`usage`, naming the program).
    pub fn start(
        program: &Path,
        args: Vec<OsString>,
        env: BTreeMap<OsString, OsString>,
        confine: Option<Arc<Prepared>>,
    ) -> Result<Group, ApiError> {
        let spec = SpawnSpec {
            program: program.to_path_buf(),
            args,
            env,
            cwd: None,
            piped: true,
            detach: Detach::Group,
            confine,
        };
        let child = tokio::process::Command::from(mcpx_platform::process::command(&spec)).spawn().map_err(|e| {
            ApiError::new(ErrorKind::Usage, format!("cannot start {}: {e}; {INSTALL_HINT}", program.display()))
        })?;
        let pgid = child.id();
        Ok(Group { child, pgid })
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            let _ = mcpx_platform::process::signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
        }
        let _ = self.child.start_kill();
    }
}

/// The environment of a sandbox process: only what Deno itself needs (its cache
/// directory, no colours, no update check); the script can read none of it.
pub fn deno_env(deno_dir: &Path) -> BTreeMap<OsString, OsString> {
    [
        ("DENO_DIR", deno_dir.as_os_str()),
        ("NO_COLOR", "1".as_ref()),
        ("DENO_NO_UPDATE_CHECK", "1".as_ref()),
        ("DENO_NO_PROMPT", "1".as_ref()),
        ("RUST_BACKTRACE", "0".as_ref()),
    ]
    .into_iter()
    .map(|(k, v)| (OsString::from(k), v.to_os_string()))
    .collect()
}

/// What runs the script.
#[derive(Debug, Clone)]
pub enum Engine {
    /// Deno: type-checked, confined by its permission flags.
    Deno(PathBuf),
    /// Node's permission model (`--unsafe-node`): no type check, and the network open.
    Node(PathBuf),
}

/// What `--unsafe-node` leaves open, said before the script runs: with the kernel's
/// confinement (`confined`), only what Deno's type check and graph check would catch;
/// without it, also the network and the script's own file.
pub fn node_left_open(confined: bool) -> &'static str {
    if confined {
        "--unsafe-node: running under Node's permission model, without a type check or the module graph check; \
         the kernel still confines it as it does Deno (no network, no process, only the files it may read)"
    } else {
        "--unsafe-node: running under Node's permission model, without a type check; \
         left open: the network (fetch and sockets work) and reading the script's own file; \
         closed: other files, subprocesses, workers, native addons, and the environment (empty)"
    }
}

/// The oldest Node whose permission model `--unsafe-node` relies on (`--permission`
/// without `--experimental-`).
pub const NODE_MAJOR: u32 = 22;

/// Checks that `node` is Node [`NODE_MAJOR`] or later, by its `--version`.
///
/// Errors: a sentence naming the version found and what to install.
pub fn check_node(node: &Path) -> Result<(), String> {
    let spec = SpawnSpec {
        program: node.to_path_buf(),
        args: vec!["--version".into()],
        env: BTreeMap::new(),
        cwd: None,
        piped: true,
        detach: Detach::Group,
        confine: None,
    };
    let out = mcpx_platform::process::command(&spec)
        .output()
        .map_err(|e| format!("--unsafe-node: cannot run {} --version: {e}", node.display()))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let major = version.trim_start_matches('v').split('.').next().and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(major) if major >= NODE_MAJOR => Ok(()),
        _ => Err(format!(
            "--unsafe-node needs Node {NODE_MAJOR} or later (its permission model), and {} is {}: put a newer Node first on PATH, or use Deno",
            node.display(),
            if version.is_empty() { "not Node" } else { version.as_str() }
        )),
    }
}

/// The module that gives Node the part of Deno's API the runtime uses (the channel on
/// stdin and stdout, `Deno.exit`, `Deno.args`).
pub const NODE_SHIM: &str = r#"import { writeSync } from "node:fs";
import { Readable } from "node:stream";
globalThis.Deno = {
  stdout: { writeSync: (bytes) => writeSync(1, bytes) },
  stdin: { get readable() { return Readable.toWeb(process.stdin); } },
  exit: (code) => process.exit(code),
  args: process.argv.slice(2),
};
"#;

/// The shim's file name in the run directory.
pub const NODE_SHIM_FILE: &str = "node-shim.mjs";

/// The arguments of `node` for the run directory's entry: the permission model with
/// reads of the run directory and `script` (a `run` file) and the directories of
/// `access`, the heap limit, then the script's own arguments (`Deno.args`).
pub fn node_args(
    dir: &RunDir,
    script: Option<&Path>,
    access: &Access,
    limits: &Limits,
    script_args: &[String],
) -> Vec<OsString> {
    let mut args: Vec<OsString> =
        ["--permission", "--disable-warning=ExperimentalWarning"].map(OsString::from).to_vec();
    let mut read = vec![dir.path("")];
    read.extend(script.map(Path::to_path_buf));
    read.extend(access.read.iter().cloned());
    for path in read {
        args.push(format!("--allow-fs-read={}", path.display()).into());
    }
    for path in &access.write {
        args.push(format!("--allow-fs-write={}", path.display()).into());
    }
    args.push(format!("--max-old-space-size={}", limits.memory_mib).into());
    args.push(dir.path(ENTRY_FILE).into());
    args.extend(script_args.iter().map(OsString::from));
    args
}

/// The limits of one run.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Wall time from start to answer, type check excluded.
    pub timeout: Duration,
    /// V8's old-space limit, in MiB (`--max-old-space-size`).
    pub memory_mib: u64,
    /// The most bytes of the answer, and of the script's log output, passed on.
    pub output_bytes: usize,
}

/// The longest `--timeout` of `mcpx exec` and `mcpx run`: 24 hours.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The longest `timeout` an MCP client gives `serve --code`'s `mcpx_exec`: 10 minutes.
pub const MAX_CLIENT_TIMEOUT: Duration = Duration::from_secs(600);

impl Default for Limits {
    fn default() -> Limits {
        Limits { timeout: Duration::from_secs(60), memory_mib: 512, output_bytes: 1 << 20 }
    }
}

/// What the script may reach beyond the channel.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Directories it may read (`--allow-read`).
    pub read: Vec<PathBuf>,
    /// Directories it may write (`--allow-write`).
    pub write: Vec<PathBuf>,
}

/// What the kernel lets the sandbox's processes reach (docs/security.md): the runtime's
/// binary (read and execute), the system files any program needs
/// ([`confine::runtime_base`]), the run directory (read), `DENO_DIR` (read and write:
/// Deno's caches, when running Deno), the script's own file (read), and the `--allow-read`
/// (read) and `--allow-write` (write) directories. Nothing else: no network, no socket, no
/// process, no signal.
pub fn policy(runtime: &Path, dir: &RunDir, deno_dir: Option<&Path>, script: Option<&Path>, access: &Access) -> Policy {
    let mut grants = vec![Grant::new(runtime, confine::Access::ReadExecute)];
    grants.extend(confine::runtime_base());
    grants.push(Grant::new(dir.path(""), confine::Access::Read));
    grants.extend(deno_dir.map(|d| Grant::new(d, confine::Access::ReadWrite)));
    grants.extend(script.map(|f| Grant::new(f, confine::Access::Read)));
    grants.extend(access.read.iter().map(|d| Grant::new(d, confine::Access::Read)));
    grants.extend(access.write.iter().map(|d| Grant::new(d, confine::Access::Write)));
    Policy { grants, network: confine::Network::Closed }
}

/// What Node reads beyond [`confine::runtime_base`] at every start: OpenSSL's
/// configuration (it refuses to start without reading it).
pub fn node_extra() -> Vec<Grant> {
    ["/etc/ssl/openssl.cnf", "/usr/lib/ssl/openssl.cnf"]
        .into_iter()
        .filter(|p| Path::new(p).exists())
        .map(|p| Grant::new(p, confine::Access::Read))
        .collect()
}

/// Prepares the kernel confinement of one run: `None` with `unconfined` (its warning said
/// first by the caller).
///
/// Errors: `usage` when the kernel cannot confine and `unconfined` was not asked for
/// (saying why and what `--unconfined` does), or a granted path cannot be opened
/// (naming it).
pub fn confinement(policy: &Policy, unconfined: bool) -> Result<Option<Arc<Prepared>>, ApiError> {
    if unconfined {
        return Ok(None);
    }
    if let confine::Support::Unavailable(why) = confine::support() {
        return Err(ApiError::new(ErrorKind::Usage, refusal_without_kernel(&why)));
    }
    confine::prepare(policy)
        .map(|p| Some(Arc::new(p)))
        .map_err(|e| ApiError::new(ErrorKind::Usage, format!("cannot confine the script: {e}")))
}

/// Why code mode does not run on a kernel that cannot confine, and the way out.
pub fn refusal_without_kernel(why: &str) -> String {
    format!(
        "code mode runs scripts only under the kernel's confinement, and {why}; \
         `--unconfined` (for an MCP client, `mcpx serve --code --unconfined` in its configuration) runs them \
         with Deno's permission flags alone (see `mcpx doctor`)"
    )
}

/// What `--unconfined` leaves open, said before the script runs.
pub fn unconfined_left_open(engine: &Engine) -> String {
    let kernel = match confine::support() {
        confine::Support::Kernel { mechanism, .. } => {
            format!("this kernel could confine it ({mechanism}) but was told not to")
        }
        confine::Support::Unavailable(why) => why,
    };
    let walls = match engine {
        Engine::Deno(_) => "Deno's permission flags and the module graph check are its only walls; a flaw in either",
        Engine::Node(_) => "Node's permission model is its only wall (and leaves the network open); a flaw in it",
    };
    format!(
        "--unconfined: the kernel does not confine this script: {kernel}. {walls} opens what you can reach: \
         every file you can read or write, the network, your processes and their signals"
    )
}

/// The arguments of `deno info --json` for the run directory's entry: the module graph
/// [`crate::code::graph`] checks.
pub fn info_args(dir: &RunDir) -> Vec<OsString> {
    entry_args(&["info", "--json"], dir)
}

/// The arguments of `deno check` for the run directory's entry.
pub fn check_args(dir: &RunDir) -> Vec<OsString> {
    entry_args(&["check", "--quiet"], dir)
}

/// `command`, no remote or npm modules, the run's `deno.json`, and its entry.
fn entry_args(command: &[&str], dir: &RunDir) -> Vec<OsString> {
    let mut args: Vec<OsString> = command.iter().map(OsString::from).collect();
    args.extend(["--no-remote", "--no-npm", "--config"].map(OsString::from));
    args.push(dir.path("deno.json").into());
    args.push(dir.path(ENTRY_FILE).into());
    args
}

/// The arguments of `deno run` for the run directory's entry: no prompt, no remote or
/// npm modules, no permission but `access`, the memory limit, then the script's own
/// arguments (`Deno.args`).
pub fn run_args(dir: &RunDir, access: &Access, limits: &Limits, script_args: &[String]) -> Vec<OsString> {
    let mut args: Vec<OsString> =
        ["run", "--no-prompt", "--no-check", "--no-remote", "--no-npm", "--config"].map(OsString::from).to_vec();
    args.push(dir.path("deno.json").into());
    args.push(format!("--v8-flags=--max-old-space-size={}", limits.memory_mib).into());
    let flags_off = confine::runtime_flags_off();
    if flags_off {
        // Test-only: Deno's own permissions off, to show the kernel alone confines.
        args.push("--allow-all".into());
    }
    for (flag, dirs) in [("--allow-read", &access.read), ("--allow-write", &access.write)] {
        if !dirs.is_empty() && !flags_off {
            let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            args.push(format!("{flag}={}", list.join(",")).into());
        }
    }
    args.push(dir.path(ENTRY_FILE).into());
    args.extend(script_args.iter().map(OsString::from));
    args
}

/// The compiler's output with the run directory's paths made the user's: the script's
/// own file keeps its path; `exec`'s code becomes `<code>` with its line numbers (one
/// less: the wrapper's first line).
pub fn readable_diagnostics(text: &str, dir: &RunDir) -> String {
    let exec = format!("file://{}:", dir.path(EXEC_FILE).display());
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("Check ") || line.contains("Stack backtrace") || line.trim_start().starts_with("0: <") {
            continue;
        }
        match line.find(&exec) {
            Some(at) => {
                let rest = &line[at + exec.len()..];
                let (row, col) = rest.split_once(':').unwrap_or((rest, ""));
                let row = row.parse::<u64>().map_or_else(|_| row.to_owned(), |r| r.saturating_sub(1).to_string());
                out.push_str(&format!("{}<code>:{row}:{col}\n", &line[..at]));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out.trim_end().to_owned()
}

/// A sentence saying what the sandbox allows, added to a permission error Deno
/// raised ("Requires read access to ...").
pub fn permission_hint(message: &str) -> Option<&'static str> {
    let hints = [
        ("Requires read access", "the sandbox reads no files: `--allow-read DIR` opens one directory"),
        ("Requires write access", "the sandbox writes no files: `--allow-write DIR` opens one directory"),
        ("Requires net access", "the sandbox has no network: reach tools through their functions"),
        ("Requires env access", "the sandbox has no environment: pass values as arguments"),
        ("Requires run access", "the sandbox starts no processes: call a tool that does"),
        ("Requires sys access", "the sandbox does not describe the system"),
        ("Requires ffi access", "the sandbox loads no native code"),
        // Below Deno's flags, the kernel's refusals (docs/security.md).
        (
            "os error 13",
            "the kernel refused it: the sandbox reads only the run's files, its script and --allow-read directories, and writes only --allow-write directories",
        ),
        ("os error 1)", "the kernel refused it: the sandbox opens no socket, starts no process and signals no one"),
        ("EPERM", "the kernel refused it: the sandbox opens no socket, starts no process and signals no one"),
    ];
    hints.iter().find(|(needle, _)| message.contains(needle)).map(|(_, hint)| *hint)
}
