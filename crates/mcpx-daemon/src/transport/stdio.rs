//! The direct stdio transport: the daemon spawns the server as its own child and
//! owns its pipes (MCP 2025-11-25, Transports, "stdio"). Used for `supervised:
//! false`; by default a supervisor owns the pipes instead (`supervised.rs`).

use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::{mpsc, watch};

use super::launch::{BoxFuture, Launch, Launcher, StdioSpec};
use super::link::{ExitInfo, Inbound, Link, LinkInfo, Outbound, TransportError};
use super::output::{StderrSink, StdoutParser};
use crate::process::{self, Detach, SpawnSpec};
use mcpx_platform::process::{CLOSE_GRACE, TERM_GRACE};

/// How long to wait for the output readers after the process exits (a grandchild
/// may hold the pipes open).
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// Spawns servers as direct children of the daemon.
#[derive(Debug, Default, Clone, Copy)]
pub struct DirectLauncher;

impl Launcher for DirectLauncher {
    fn launch(&self, launch: Launch) -> BoxFuture<'static, Result<Link, TransportError>> {
        Box::pin(async move { start(launch.into_stdio("direct")?) })
    }
}

fn start(spec: StdioSpec) -> Result<Link, TransportError> {
    let start_error = |message: String| TransportError::Start { command: spec.command.clone(), message };
    let confine = match &spec.sandbox {
        Some(policy) => Some(std::sync::Arc::new(
            mcpx_platform::confine::prepare(policy).map_err(|e| start_error(format!("cannot confine it: {e}")))?,
        )),
        None => None,
    };
    let mut child = process::spawn(&SpawnSpec {
        program: spec.program.clone(),
        args: spec.args.clone(),
        env: spec.env.clone(),
        cwd: spec.cwd.clone(),
        piped: true,
        detach: Detach::Group,
        confine,
    })
    .map_err(|e| TransportError::Start { command: spec.command.clone(), message: e.to_string() })?;
    let pid = child.id();
    let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        unreachable!("spawned with piped stdio");
    };
    let info = Arc::new(LinkInfo::new(pid, None));
    let (in_tx, in_rx) = mpsc::channel(256);
    let (out_tx, out_rx) = mpsc::channel(256);
    let (exit_tx, exit_rx) = watch::channel(None);
    let server = spec.identity.server.clone();

    let parser = StdoutParser::new(spec.max_message_bytes, info.clone(), server.clone());
    let stdout_task = tokio::spawn(read_stdout(stdout, parser, in_tx.clone()));
    let stderr_task = tokio::spawn(read_stderr(stderr, StderrSink::new(info.clone(), server.clone())));
    tokio::spawn(write_stdin(stdin, out_rx, exit_rx, pid, server.clone()));
    tokio::spawn(wait_child(child, pid, stdout_task, stderr_task, in_tx, exit_tx, server));
    Ok(Link { tx: out_tx, rx: in_rx, info, epoch: 1, resumed: None, era: None })
}

/// Reads stdout and hands the parsed messages on.
async fn read_stdout(mut stdout: impl AsyncRead + Unpin, mut parser: StdoutParser, tx: mpsc::Sender<Inbound>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stdout.read(&mut buf).await {
            Ok(0) | Err(_) => {
                parser.finish(&tx).await;
                return;
            }
            Ok(n) => {
                if !parser.feed(&buf[..n], &tx).await {
                    return;
                }
            }
        }
    }
}

/// Drains stderr into the ring (never blocking the server) and logs its lines.
async fn read_stderr(mut stderr: impl AsyncRead + Unpin, mut sink: StderrSink) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => sink.push(&buf[..n]),
        }
    }
    sink.flush();
}

/// Writes messages to stdin, one per line, and runs the close sequence on request.
async fn write_stdin(
    stdin: ChildStdin,
    mut rx: mpsc::Receiver<Outbound>,
    mut exited: watch::Receiver<Option<ExitInfo>>,
    pid: Option<u32>,
    server: String,
) {
    let mut stdin = Some(stdin);
    while let Some(out) = rx.recv().await {
        match out {
            Outbound::Message(m) | Outbound::Headed(m, _) => {
                let Some(w) = stdin.as_mut() else { continue };
                let mut bytes = m.into_string().into_bytes();
                bytes.push(b'\n');
                if let Err(e) = w.write_all(&bytes).await {
                    tracing::debug!(server = %server, error = %e, "writing to the server's stdin failed");
                    stdin = None;
                }
            }
            Outbound::Terminate => {
                drop(stdin.take());
                terminate(pid, &mut exited, &server).await;
            }
            Outbound::Restart => {
                tracing::warn!(server = %server, "restart through the link needs a supervisor; ignored");
            }
            // Without a supervisor nothing outlives the daemon, so there is nowhere to keep it.
            Outbound::StoreSession(_) | Outbound::StoreEra(_) => {}
        }
    }
    // Every sender is gone: the instance was dropped. Stop the server too.
    drop(stdin.take());
    terminate(pid, &mut exited, &server).await;
}

/// Close stdin (done by the caller), wait, SIGTERM the group, wait, SIGKILL the group.
async fn terminate(pid: Option<u32>, exited: &mut watch::Receiver<Option<ExitInfo>>, server: &str) {
    let Some(pid) = pid else { return };
    let wait = |grace| {
        let mut exited = exited.clone();
        async move { tokio::time::timeout(grace, exited.wait_for(Option::is_some)).await.is_ok() }
    };
    if !wait(CLOSE_GRACE).await {
        tracing::info!(server = %server, pid, "server still running after stdin closed: sending SIGTERM to its group");
        let _ = process::signal_group(pid, Signal::SIGTERM);
        if !wait(TERM_GRACE).await {
            tracing::warn!(server = %server, pid, "server still running after SIGTERM: sending SIGKILL to its group");
        }
    }
    // Whatever is left in the group (descendants of the server) goes too.
    let _ = process::signal_group(pid, Signal::SIGKILL);
    let _ = exited.wait_for(Option::is_some).await;
}

/// Waits for the child, lets the readers finish, then reports the exit last.
async fn wait_child(
    mut child: Child,
    pid: Option<u32>,
    stdout_task: tokio::task::JoinHandle<()>,
    stderr_task: tokio::task::JoinHandle<()>,
    tx: mpsc::Sender<Inbound>,
    exit_tx: watch::Sender<Option<ExitInfo>>,
    server: String,
) {
    let status = child.wait().await;
    let exit = match status {
        Ok(s) => ExitInfo { code: s.code(), signal: s.signal() },
        Err(_) => ExitInfo::ENDED,
    };
    tracing::info!(server = %server, pid, "server {exit}");
    let _ = exit_tx.send(Some(exit));
    for task in [stdout_task, stderr_task] {
        let abort = task.abort_handle();
        if tokio::time::timeout(DRAIN_GRACE, task).await.is_err() {
            abort.abort();
        }
    }
    let _ = tx.send(Inbound::Exited(exit)).await;
}
