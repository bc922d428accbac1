//! `mcpx daemon`: the daemon in the foreground. Takes the lock, binds the control
//! socket, logs to `<state>/daemon.log` (and stderr), and serves until `mcpx stop`,
//! SIGTERM or SIGINT.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use anyhow::{Context, bail};
use mcpx_daemon::daemon::{Daemon, run as serve};
use mcpx_daemon::paths::Dirs;
use mcpx_daemon::pool::Launchers;
use mcpx_daemon::transport::stdio::DirectLauncher;
use mcpx_daemon::transport::supervised::SupervisedLauncher;
use nix::fcntl::{Flock, FlockArg};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Runs the daemon until it is told to stop.
pub fn run() -> anyhow::Result<()> {
    let env: HashMap<String, String> = std::env::vars().collect();
    let dirs = Dirs::from_env(&env)?;
    dirs.prepare()?;
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dirs.lock())
        .with_context(|| format!("opening {}", dirs.lock().display()))?;
    let _lock = match Flock::lock(lock_file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => lock,
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            let pid = std::fs::read_to_string(dirs.pid_file()).unwrap_or_default();
            bail!(
                "a daemon is already running (pid {}, lock {}); stop it with `mcpx stop` first",
                pid.trim(),
                dirs.lock().display()
            );
        }
        Err((_, e)) => bail!("cannot lock {}: {e}", dirs.lock().display()),
    };

    let appender = tracing_appender::rolling::never(&dirs.state, "daemon.log");
    let (file_writer, _flush_guard) = tracing_appender::non_blocking(appender);
    let filter = EnvFilter::try_from_env("MCPX_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::registry()
        .with(filter)
        .with(tracing_subscriber::fmt::layer().with_ansi(false).with_writer(file_writer))
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .try_init()
        .ok();

    // Holding the lock, any socket file left is stale: nothing else can be serving it.
    let socket = dirs.socket();
    match std::fs::remove_file(&socket) {
        Ok(()) => tracing::info!(socket = %socket.display(), "removed a stale socket"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(e).with_context(|| format!("removing the stale socket {}", socket.display()));
        }
    }

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::UnixListener::bind(&socket).with_context(|| format!("binding {}", socket.display()))?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("setting the mode of {}", socket.display()))?;
        std::fs::write(dirs.pid_file(), format!("{}\n", std::process::id())).context("writing daemon.pid")?;
        tracing::info!(pid = std::process::id(), build = mcpx_daemon::daemon::build(), socket = %socket.display(), "daemon listening");
        let exe = std::env::current_exe().context("finding the mcpx binary")?;
        let launchers = Launchers {
            direct: Arc::new(DirectLauncher),
            supervised: Arc::new(SupervisedLauncher { exe, sup_dir: dirs.sup_dir(), log: dirs.supervisor_log() }),
        };
        let daemon = Daemon::new(dirs.clone(), env, launchers);
        // Supervisors a previous daemon left are adopted before the first request.
        daemon.adopt_all().await;
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
        let result = serve(listener, daemon, signals).await;
        let _ = std::fs::remove_file(&socket);
        let _ = std::fs::remove_file(dirs.pid_file());
        tracing::info!("daemon stopped");
        result.context("serving the control API")
    })
}
