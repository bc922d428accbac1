//! `mcpx daemon`: the daemon in the foreground. Opens and checks its directories,
//! logs to `<state>/daemon.log` (and stderr), takes the lock, binds the control
//! socket, adopts the supervisors a previous daemon left, and serves until
//! `mcpx stop`, SIGTERM or SIGINT. Its files are reached through the directories'
//! descriptors (`mcpx_platform::fs::Dir`), never through a link.
//!
//! It raises its soft descriptor limit to the hard one (its servers start with the
//! limit it was given), and serves `/mcp` on TCP when asked, to strangers: the
//! daemon's own configuration, a cap on connections, a deadline for headers.
//!
//! `mcpx upgrade` re-executes the binary in place, the very file the upgrade checked
//! and probed, by its descriptor: the listening socket and the lock stay open across
//! `exec` (their numbers in `MCPX_UPGRADE_FDS`), so clients that connect meanwhile wait
//! in the listen backlog instead of failing.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use mcpx_api::client::START_FD;
use mcpx_api::paths::{Dirs, LOCK, OpenDirs, PID_FILE, SOCKET, TOKEN};
use mcpx_daemon::daemon::{Daemon, Exit};
use mcpx_daemon::log_file::LogFile;
use mcpx_daemon::mcp::{Endpoint, TcpGuard};
use mcpx_daemon::server::{run as serve, run_tcp, tcp_connection_cap};
use mcpx_daemon::transport::Launchers;
use mcpx_platform::exec::Executable;
use mcpx_platform::fs::{FileUse, OpenError, Refused};
use mcpx_platform::process::{inherited_fd, keep_across_exec};
use nix::fcntl::{Flock, FlockArg};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// How many log lines may wait for the log's writer thread.
const LOG_LINES: usize = 8192;

/// The variable that hands the listening socket and the lock to the re-executed daemon.
const UPGRADE_FDS: &str = "MCPX_UPGRADE_FDS";

/// Runs the daemon until it is told to stop (or re-executes it for an upgrade).
/// `config` is its own configuration file (`--config`, else `MCPX_CONFIG`), which TCP
/// clients get.
///
/// A daemon started by a CLI reports a failed start to it through the pipe named by
/// `MCPX_START_FD` ([`mcpx_api::client::START_FD`]): the error's one line is
/// written there, and the pipe closes without a word once the daemon listens, or
/// when it loses the start race to another daemon (not a failure: the CLI talks to
/// the winner).
pub fn run(config: Option<PathBuf>) -> anyhow::Result<()> {
    let mut env: HashMap<String, String> = std::env::vars().collect();
    // The variable must not reach the servers this daemon starts.
    let mut report = env.remove(START_FD).and_then(|fd| fd.parse().ok()).and_then(|fd| inherited_fd(fd).ok());
    let result = start_and_serve(config, env, &mut report);
    if let (Err(e), Some(pipe)) = (&result, report)
        && e.downcast_ref::<AlreadyRunning>().is_none()
    {
        // The CLI reads this line; if it is gone, stderr and the log still say it.
        let _ = std::io::Write::write_all(&mut std::fs::File::from(pipe), format!("{e:#}").as_bytes());
    }
    result
}

/// The daemon from its environment to its exit; `report` is the start pipe, closed
/// (taken) once the daemon listens.
fn start_and_serve(
    config: Option<PathBuf>,
    mut env: HashMap<String, String>,
    report: &mut Option<OwnedFd>,
) -> anyhow::Result<()> {
    let inherited = env.remove(UPGRADE_FDS);
    // The variable must not reach the servers this daemon starts.
    let dirs = Dirs::from_env(&env)?.open()?;
    // What can refuse the start comes before the lock and the socket, so a CLI that
    // started this daemon sees it exit at once.
    let log = LogFile::open(&dirs.state, &env).map_err(|e| {
        refused_file(&dirs.paths.log_file(), e, "remove it and start the daemon again (mcpx makes a new one)")
    })?;
    let token = tcp_token(&dirs, &env)?;
    let (listener, lock) = match inherited {
        Some(fds) => take_inherited(&fds).context("taking over the upgraded daemon's socket and lock")?,
        None => {
            let lock = take_lock(&dirs)?;
            (bind(&dirs)?, lock)
        }
    };

    // At most LOG_LINES lines wait for the writer thread; beyond, lines are dropped
    // rather than held (a flood must not grow the daemon).
    let (file_writer, flush_guard) =
        tracing_appender::non_blocking::NonBlockingBuilder::default().buffered_lines_limit(LOG_LINES).finish(log);
    let filter = EnvFilter::try_from_env("MCPX_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::registry()
        .with(filter)
        // Events quote what servers send: their control characters are escaped.
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(move || mcpx_platform::sanitize::Writer(file_writer.clone())),
        )
        .with(tracing_subscriber::fmt::layer().with_writer(|| mcpx_platform::sanitize::Writer(std::io::stderr())))
        .try_init()
        .ok();
    // A panic ends the request (or task) it happened in, and the daemon serves on: it
    // goes to the log, where a broken request's cause can be found (stderr is
    // /dev/null for a daemon a CLI started).
    std::panic::set_hook(Box::new(|info| {
        let place = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        tracing::error!(place, "panic: {what}");
    }));
    match mcpx_platform::limits::raise_nofile_limit() {
        Ok((before, after)) if before != after => {
            tracing::info!(
                from = before.soft,
                to = after.soft,
                "raised the descriptor limit (servers get the original)"
            );
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(error = %e, "cannot raise the descriptor limit; the daemon keeps the one it was given")
        }
    }

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let config = config.map(|c| std::path::absolute(&c).unwrap_or(c));
    let tcp = token.map(|token| TcpGuard { token, config });
    let exit = runtime.block_on(serve_until_exit(&dirs, &env, tcp, &listener, report));
    drop(runtime);
    let exit = exit.inspect_err(|_| {
        // This daemon holds the lock, so the socket and the pid file are its own:
        // a failed start leaves neither behind.
        let _ = dirs.runtime.remove(SOCKET);
        let _ = dirs.runtime.remove(PID_FILE);
    })?;
    match exit {
        Exit::Stop => {
            let _ = dirs.runtime.remove(SOCKET);
            let _ = dirs.runtime.remove(PID_FILE);
            tracing::info!("daemon stopped");
            Ok(())
        }
        Exit::Upgrade(binary) => {
            tracing::info!(binary = %binary.path().display(), "re-executing for the upgrade");
            drop(flush_guard);
            // The new image raises the limit again, and must know the original.
            if let Err(e) = mcpx_platform::limits::restore_nofile_limit() {
                eprintln!("mcpx daemon: cannot restore the descriptor limit before the upgrade: {e}");
            }
            let error = reexec(&binary, &env, &listener, &lock);
            // Still here: exec failed. The socket and the lock are still open, so the
            // binary that runs now takes over again, as after an upgrade to itself.
            eprintln!(
                "mcpx daemon: the upgrade to {} failed: {error}; re-executing the running binary instead",
                binary.path().display()
            );
            let again = match Executable::running() {
                Ok(running) => reexec(&running, &env, &listener, &lock),
                Err(e) => e,
            };
            bail!(
                "re-executing {} failed ({error}), and so did re-executing the running binary ({again}); \
                 start the daemon again with any mcpx command",
                binary.path().display()
            )
        }
    }
}

async fn serve_until_exit(
    dirs: &OpenDirs,
    env: &HashMap<String, String>,
    tcp: Option<TcpGuard>,
    listener: &OwnedFd,
    report: &mut Option<OwnedFd>,
) -> anyhow::Result<Exit> {
    let std_listener = std::os::unix::net::UnixListener::from(listener.try_clone().context("duplicating the socket")?);
    std_listener.set_nonblocking(true).context("setting up the socket")?;
    let listener = tokio::net::UnixListener::from_std(std_listener).context("setting up the socket")?;
    mcpx_platform::fs::write_atomic(&dirs.runtime, PID_FILE, format!("{}\n", std::process::id()).as_bytes(), 0o600)
        .with_context(|| format!("writing {}", dirs.paths.pid_file().display()))?;
    let exe = std::env::current_exe().context("finding the mcpx binary")?;
    let launchers = Launchers::new(exe, dirs).context("setting up the HTTP client")?;
    let daemon = Daemon::new(dirs.clone(), env.clone(), launchers);
    // Supervisors a previous daemon left are adopted before the first request is
    // accepted; clients that connect meanwhile wait in the backlog.
    mcpx_daemon::adopt::adopt_all(&daemon).await;
    let mcp = Endpoint::new(daemon.clone());
    if let (Some(addr), Some(guard)) = (env.get("MCPX_HTTP_ADDR").filter(|a| !a.is_empty()), tcp) {
        serve_tcp(&daemon, &mcp, addr, guard).await?;
    }
    mcpx_daemon::adopt::start_warm(&daemon);
    mcpx_daemon::adopt::take_up_remote_sessions(&daemon);
    tracing::info!(pid = std::process::id(), build = mcpx_platform::build::build_id(), socket = %dirs.paths.socket().display(), "daemon listening");
    // Closing the start pipe tells the CLI that started this daemon that it started.
    report.take();
    let signals = async {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: stopping"),
            _ = int.recv() => tracing::info!("SIGINT: stopping"),
        }
    };
    serve(listener, daemon, mcp, signals).await.context("serving the control API")
}

/// Serves `/mcp` on TCP at `addr` (opt-in, loopback only), behind `guard`: the
/// Host/Origin checks, the bearer token (none: `MCPX_HTTP_NO_AUTH=1`) and the daemon's
/// own configuration; at most a quarter of the descriptor limit in connections.
async fn serve_tcp(daemon: &Daemon, mcp: &Arc<Endpoint>, addr: &str, guard: TcpGuard) -> anyhow::Result<()> {
    let sock: std::net::SocketAddr =
        addr.parse().with_context(|| format!("MCPX_HTTP_ADDR `{addr}` is not an address like 127.0.0.1:8765"))?;
    if !sock.ip().is_loopback() {
        bail!("MCPX_HTTP_ADDR `{addr}` is not a loopback address; mcpx serves /mcp on loopback only");
    }
    let auth = guard.token.is_some();
    let listener = tokio::net::TcpListener::bind(sock).await.with_context(|| format!("binding {addr}"))?;
    let bound = listener.local_addr().context("reading the bound address")?;
    daemon.set_http_url(format!("http://{bound}/mcp"));
    let nofile = mcpx_platform::limits::nofile_limit().map_or(1024, |l| l.soft);
    let cap = tcp_connection_cap(nofile);
    tracing::info!(url = %format!("http://{bound}/mcp"), auth, max_connections = cap, "serving /mcp on TCP");
    tokio::spawn(run_tcp(listener, mcp.clone(), guard, cap));
    Ok(())
}

/// The bearer token for TCP clients when the environment asks for `/mcp` on TCP with
/// authentication: `<state>/token`, made (0600) at first use. An existing token is
/// used only when it is a file of the user's that no one else can read: another
/// user may know any other.
///
/// `Some(None)` with `MCPX_HTTP_NO_AUTH=1`; `None` without `MCPX_HTTP_ADDR`.
///
/// Errors: the token file is refused (with what to do), or cannot be read or made.
fn tcp_token(dirs: &OpenDirs, env: &HashMap<String, String>) -> anyhow::Result<Option<Option<String>>> {
    let tcp = env.get("MCPX_HTTP_ADDR").is_some_and(|a| !a.is_empty());
    if !tcp {
        return Ok(None);
    }
    if env.get("MCPX_HTTP_NO_AUTH").is_some_and(|v| v == "1") {
        return Ok(Some(None));
    }
    let path = dirs.paths.state.join(TOKEN);
    match dirs.state.read_private(TOKEN) {
        Ok(t) if !String::from_utf8_lossy(&t).trim().is_empty() => {
            return Ok(Some(Some(String::from_utf8_lossy(&t).trim().to_owned())));
        }
        Ok(_) => {}
        Err(OpenError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(refused_file(
                &path,
                e,
                "someone else may know this token; remove it and start the daemon again (mcpx makes a new one)",
            ));
        }
    }
    let mut bytes = [0u8; 24];
    mcpx_platform::random_bytes(&mut bytes).context("making the TCP token")?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    mcpx_platform::fs::write_atomic(&dirs.state, TOKEN, token.as_bytes(), 0o600)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(Some(Some(token)))
}

/// The error for a file of mcpx's it will not use: `<path> <what is wrong>: <fix>`,
/// or the system's error.
fn refused_file(path: &Path, e: OpenError, fix: &str) -> anyhow::Error {
    match e {
        OpenError::Refused(Refused::Symlink) => {
            anyhow::anyhow!(
                "{} is a symbolic link, and mcpx does not follow links in its directories: {fix}",
                path.display()
            )
        }
        OpenError::Refused(refused) => anyhow::anyhow!("{} {refused}: {fix}", path.display()),
        OpenError::Io(e) => anyhow::anyhow!("{}: {e}", path.display()),
    }
}

/// Another daemon holds the lock: for a daemon a CLI started, it lost the start
/// race, which is not a failed start.
#[derive(Debug)]
struct AlreadyRunning {
    /// The pid file's text (empty when there is none yet).
    pid: String,
    /// The lock file.
    lock: PathBuf,
}

impl std::fmt::Display for AlreadyRunning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a daemon is already running (pid {}, lock {}); stop it with `mcpx stop` first",
            self.pid,
            self.lock.display()
        )
    }
}

impl std::error::Error for AlreadyRunning {}

/// Takes the daemon lock, or explains which daemon holds it.
fn take_lock(dirs: &OpenDirs) -> anyhow::Result<OwnedFd> {
    let lock_path = dirs.paths.lock();
    let lock_file = dirs
        .runtime
        .open_file(LOCK, FileUse::Lock)
        .map_err(|e| refused_file(&lock_path, e, "remove it and start the daemon again"))?;
    match Flock::lock(lock_file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => {
            // flock(2) locks belong to the open file description: a duplicate
            // descriptor keeps the lock held for the process's life (across an
            // upgrade's exec too). The guard is forgotten so it never unlocks.
            let keep = lock.try_clone().context("duplicating the lock descriptor")?;
            std::mem::forget(lock);
            Ok(OwnedFd::from(keep))
        }
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            let pid = dirs.runtime.read(PID_FILE).unwrap_or_default();
            Err(AlreadyRunning { pid: String::from_utf8_lossy(&pid).trim().to_owned(), lock: lock_path }.into())
        }
        Err((_, e)) => bail!("cannot lock {}: {e}", lock_path.display()),
    }
}

/// Binds the control socket (mode 0600). Holding the lock, any socket file left
/// is stale: nothing else can be serving it. A socket has no descriptor-relative
/// address, so it is bound by path, after checking that the runtime directory's
/// path still names the directory that was opened and checked.
fn bind(dirs: &OpenDirs) -> anyhow::Result<OwnedFd> {
    let socket = dirs.paths.socket();
    if dirs.runtime.contains(SOCKET) {
        dirs.runtime.remove(SOCKET).with_context(|| format!("removing the stale socket {}", socket.display()))?;
        eprintln!("mcpx daemon: removed a stale socket {}", socket.display());
    }
    if !dirs.runtime.still_at_path() {
        bail!(
            "{} was replaced while the daemon started; check who can write to its parent directory and start the daemon again",
            dirs.paths.runtime.display()
        );
    }
    let listener =
        std::os::unix::net::UnixListener::bind(&socket).with_context(|| format!("binding {}", socket.display()))?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("setting the mode of {}", socket.display()))?;
    Ok(OwnedFd::from(listener))
}

fn take_inherited(fds: &str) -> anyhow::Result<(OwnedFd, OwnedFd)> {
    let (listen, lock) = fds.split_once(',').context("malformed MCPX_UPGRADE_FDS")?;
    let listen = inherited_fd(listen.parse().context("malformed MCPX_UPGRADE_FDS")?)?;
    let lock = inherited_fd(lock.parse().context("malformed MCPX_UPGRADE_FDS")?)?;
    Ok((listen, lock))
}

/// Replaces this process with `binary daemon`, keeping the socket and the lock: the
/// very file the upgrade checked and probed, run by its descriptor where the OS can
/// ([`Executable::exec`]). Stdin, stdout and stderr stay as they are. Returns only if
/// `exec` failed.
fn reexec(binary: &Executable, env: &HashMap<String, String>, listener: &OwnedFd, lock: &OwnedFd) -> std::io::Error {
    for fd in [listener.as_fd(), lock.as_fd()] {
        if let Err(e) = keep_across_exec(fd) {
            return e;
        }
    }
    let mut vars: BTreeMap<OsString, OsString> = env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    vars.insert(UPGRADE_FDS.into(), format!("{},{}", listener.as_raw_fd(), lock.as_raw_fd()).into());
    binary.exec(&["daemon".into()], &vars)
}
