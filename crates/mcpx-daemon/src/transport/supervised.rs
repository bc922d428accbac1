//! The supervised stdio transport: each server instance is owned by its own
//! `mcpx supervise` process, and the daemon attaches to it over a unix socket with
//! the attach protocol (`docs/attach-protocol.md`). The supervisor outlives the
//! daemon, so a new daemon adopts it with [`attach()`] and the server never restarts.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpx_platform::Liveness;
use mcpx_proto::attach::{
    self, Attach, ExitStatus, Frame, FrameDecoder, Hello, Kind, LaunchRequest, ProcessId, Record, Restarted, Version,
};
use nix::sys::signal::Signal;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Notify, mpsc};

use super::{
    BoxFuture, ExitInfo, Inbound, LaunchError, LaunchSpec, Launcher, Link, LinkInfo, Outbound, StderrSink,
    StdoutParser, SupervisorInfo,
};
use crate::process::{self, Detach, SpawnSpec};

/// Heartbeats go out this often; a supervisor silent for [`SILENCE`] is gone.
const HEARTBEAT: Duration = Duration::from_secs(1);
const SILENCE: Duration = Duration::from_secs(10);
/// How long a supervisor may take to report readiness when `startTimeout` is 0.
const DEFAULT_READY: Duration = Duration::from_secs(60);

/// Starts servers under `mcpx supervise` (this same binary).
#[derive(Debug, Clone)]
pub struct SupervisedLauncher {
    /// The mcpx binary.
    pub exe: PathBuf,
    /// `<runtime>/sup`, where supervisors keep their socket and record.
    pub sup_dir: PathBuf,
    /// The supervisors' shared log file.
    pub log: PathBuf,
}

impl Launcher for SupervisedLauncher {
    fn launch(&self, spec: LaunchSpec) -> BoxFuture<'static, Result<Link, LaunchError>> {
        let this = self.clone();
        Box::pin(async move { this.start(spec).await })
    }
}

/// Why attaching to a supervisor failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AttachFailure {
    /// Nothing answered (no socket, refused, or no hello within the deadline).
    #[error("the supervisor does not answer: {0}")]
    Unreachable(String),
    /// It speaks an attach protocol this daemon cannot adopt.
    #[error("the supervisor speaks attach protocol {theirs}, this daemon {ours}")]
    Incompatible {
        /// The supervisor's version.
        theirs: Version,
        /// Ours.
        ours: Version,
    },
    /// It answered, but not with the attach protocol.
    #[error("attach protocol error: {0}")]
    Protocol(String),
}

impl SupervisedLauncher {
    async fn start(&self, spec: LaunchSpec) -> Result<Link, LaunchError> {
        let fail = |message: String| LaunchError::Spawn { command: spec.command.clone(), message };
        create_private_dir(&self.sup_dir)
            .map_err(|e| fail(format!("cannot create {}: {e}", self.sup_dir.display())))?;
        let id = instance_id(&spec);
        let lossy = |s: &std::ffi::OsStr| s.to_string_lossy().into_owned();
        let request = LaunchRequest {
            id: id.clone(),
            server: spec.identity.server.clone(),
            fingerprint: spec.identity.fingerprint.clone(),
            cache_key: spec.identity.cache_key.clone(),
            key: spec.identity.key.clone(),
            sharing: spec.identity.sharing.clone(),
            dir: self.sup_dir.clone(),
            command: spec.command.clone(),
            program: spec.program.clone(),
            args: spec.args.iter().map(|a| lossy(a)).collect(),
            env: spec.env.iter().map(|(k, v)| (lossy(k), lossy(v))).collect(),
            cwd: spec.cwd.clone(),
            buffer_bytes: spec.buffer_bytes,
            max_message_bytes: spec.max_message_bytes as u64,
            orphan_timeout_ms: spec.orphan_timeout.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            log: Some(self.log.clone()),
        };
        let mut helper = process::spawn(&SpawnSpec {
            program: self.exe.clone(),
            args: vec!["supervise".into()],
            env: std::env::vars_os().collect(),
            cwd: Some(PathBuf::from("/")),
            piped: true,
            detach: Detach::Inherit,
        })
        .map_err(|e| fail(format!("cannot start the supervisor ({}): {e}", self.exe.display())))?;
        let (Some(mut stdin), Some(mut stdout)) = (helper.stdin.take(), helper.stdout.take()) else {
            unreachable!("spawned with piped stdio");
        };
        let body = serde_json::to_vec(&request).map_err(|e| fail(e.to_string()))?;
        stdin.write_all(&body).await.map_err(|e| fail(format!("cannot hand the supervisor its request: {e}")))?;
        drop(stdin);
        // The supervisor reports readiness (or the exec error) and then closes the pipe.
        let deadline = spec.start_timeout.unwrap_or(DEFAULT_READY);
        let mut report = Vec::new();
        let read = tokio::time::timeout(deadline, stdout.read_to_end(&mut report)).await;
        let _ = helper.wait().await;
        if read.is_err() {
            return Err(fail(format!("the supervisor did not report readiness within {deadline:?}")));
        }
        #[derive(serde::Deserialize)]
        struct Ready {
            #[serde(default)]
            error: Option<String>,
        }
        let text = String::from_utf8_lossy(&report);
        let ready: Ready = serde_json::from_str(text.trim())
            .map_err(|_| fail(format!("the supervisor failed to start: {}", text.trim())))?;
        if let Some(message) = ready.error {
            return Err(LaunchError::Spawn {
                command: spec.command.clone(),
                message: strip_prefix(&message, &spec.command),
            });
        }
        let socket = self.sup_dir.join(format!("{id}.sock"));
        let (hello, link) = attach(&socket, &spec.identity.server, spec.max_message_bytes, Duration::from_secs(10))
            .await
            .map_err(|e| fail(e.to_string()))?;
        tracing::info!(server = %spec.identity.server, supervisor = hello.record.supervisor.pid, id, "supervisor started");
        Ok(link)
    }
}

/// The supervisor's exec error reads "cannot start `cmd`: why"; the launch error
/// adds that prefix itself.
fn strip_prefix(message: &str, command: &str) -> String {
    message.strip_prefix(&format!("cannot start `{command}`: ")).unwrap_or(message).to_owned()
}

/// A short id, unique per launch: the socket and record are named after it.
fn instance_id(spec: &LaunchSpec) -> String {
    let mut h = Sha256::new();
    h.update(spec.identity.fingerprint.as_bytes());
    h.update(spec.identity.key.as_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(format!("{:?}", std::time::SystemTime::now()).as_bytes());
    h.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect()
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Attaches to the supervisor listening on `socket`: reads its preamble and hello,
/// answers with this daemon's preamble and the hello's next epoch, and returns the
/// hello and a live link. Every step has `deadline`.
///
/// Errors: [`AttachFailure::Incompatible`] for a supervisor whose major version this
/// daemon cannot adopt (the connection is closed, the supervisor is left alone).
pub async fn attach(
    socket: &Path,
    server: &str,
    max_message_bytes: usize,
    deadline: Duration,
) -> Result<(Hello, Link), AttachFailure> {
    let unreachable = |e: std::io::Error| AttachFailure::Unreachable(e.to_string());
    let timed = |what: &str| AttachFailure::Unreachable(format!("no {what} within {deadline:?}"));
    let mut stream = tokio::time::timeout(deadline, UnixStream::connect(socket))
        .await
        .map_err(|_| timed("connection"))?
        .map_err(unreachable)?;
    let mut preamble = [0u8; attach::PREAMBLE_LEN];
    tokio::time::timeout(deadline, stream.read_exact(&mut preamble))
        .await
        .map_err(|_| timed("preamble"))?
        .map_err(unreachable)?;
    let theirs = attach::decode_preamble(&preamble).map_err(|e| AttachFailure::Protocol(e.to_string()))?;
    let ours = Version::ours();
    if !ours.daemon_can_adopt(theirs) {
        return Err(AttachFailure::Incompatible { theirs, ours });
    }
    let mut decoder = FrameDecoder::new();
    let hello: Hello = tokio::time::timeout(deadline, async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match decoder.next_frame().map_err(|e| AttachFailure::Protocol(e.to_string()))? {
                Some(f) if f.kind == Kind::Hello => {
                    return f.body::<Hello>("hello").map_err(|e| AttachFailure::Protocol(e.to_string()));
                }
                Some(_) => continue,
                None => {}
            }
            let n = stream.read(&mut buf).await.map_err(unreachable)?;
            if n == 0 {
                return Err(AttachFailure::Unreachable("the supervisor closed the connection".into()));
            }
            decoder.push(&buf[..n]);
        }
    })
    .await
    .map_err(|_| timed("hello"))??;
    let epoch = hello.next_epoch.max(1);
    let mut out = attach::encode_preamble(ours).to_vec();
    let _ = Frame::json(Kind::Attach, &Attach { epoch }).encode(&mut out);
    stream.write_all(&out).await.map_err(unreachable)?;

    let record = Arc::new(Mutex::new(hello.record.clone()));
    let info = Arc::new(LinkInfo::new(
        hello.record.child.map(|c| c.pid),
        Some(SupervisorInfo {
            id: hello.record.id.clone(),
            pid: hello.record.supervisor.pid,
            protocol: theirs.to_string(),
        }),
    ));
    info.dropped_bytes.fetch_add(hello.stdout_dropped, Ordering::Relaxed);
    info.buffered_at_attach.store(hello.stdout_buffered, Ordering::Relaxed);
    if hello.stdout_dropped > 0 {
        tracing::warn!(
            server,
            dropped = hello.stdout_dropped,
            "the supervisor dropped stdout while no daemon was attached"
        );
    }
    let (in_tx, in_rx) = mpsc::channel(256);
    let (out_tx, out_rx) = mpsc::channel(256);
    let (ctl_tx, ctl_rx) = mpsc::channel(8);
    let last_heard = Arc::new(AtomicU64::new(0));
    let dead = Arc::new(Notify::new());
    let started = Instant::now();
    let (rd, wr) = stream.into_split();
    let dir = socket.parent().map(Path::to_path_buf).unwrap_or_default();
    tokio::spawn(read_frames(Reader {
        rd,
        decoder,
        parser: StdoutParser::new(max_message_bytes, info.clone(), server.to_owned()),
        sink: StderrSink::new(info.clone(), server.to_owned()),
        tx: in_tx,
        ctl: ctl_tx,
        info: info.clone(),
        record,
        dir,
        server: server.to_owned(),
        last_heard: last_heard.clone(),
        started,
        dead: dead.clone(),
    }));
    tokio::spawn(write_frames(wr, out_rx, ctl_rx, last_heard, started, dead));
    if let (Some(exit), attach::ChildState::Exited) = (hello.exit, &hello.state) {
        tracing::info!(
            server,
            code = exit.code,
            signal = exit.signal,
            "the server exited while no daemon was attached"
        );
    }
    Ok((hello, Link { tx: out_tx, rx: in_rx, info, epoch, resumed: None }))
}

struct Reader {
    rd: OwnedReadHalf,
    decoder: FrameDecoder,
    parser: StdoutParser,
    sink: StderrSink,
    tx: mpsc::Sender<Inbound>,
    ctl: mpsc::Sender<Frame>,
    info: Arc<LinkInfo>,
    record: Arc<Mutex<Record>>,
    dir: PathBuf,
    server: String,
    last_heard: Arc<AtomicU64>,
    started: Instant,
    dead: Arc<Notify>,
}

/// Reads the supervisor's frames until the exit, a takeover, or the connection ends.
async fn read_frames(mut r: Reader) {
    let mut buf = vec![0u8; 64 * 1024];
    let end = loop {
        let n = tokio::select! {
            read = r.rd.read(&mut buf) => match read {
                Ok(0) | Err(_) => break None,
                Ok(n) => n,
            },
            () = r.dead.notified() => break Some(format!("the supervisor was silent for {}s", SILENCE.as_secs())),
        };
        r.last_heard.store(r.started.elapsed().as_millis() as u64, Ordering::Relaxed);
        r.decoder.push(&buf[..n]);
        loop {
            let frame = match r.decoder.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(server = %r.server, error = %e, "attach protocol error; dropping the connection");
                    return lost(&r, format!("attach protocol error: {e}")).await;
                }
            };
            match frame.kind {
                Kind::Stdout => {
                    let receiver_alive = r.parser.feed(&frame.payload, &r.tx).await;
                    if !receiver_alive {
                        return;
                    }
                }
                Kind::Stderr => r.sink.push(&frame.payload),
                Kind::Exited => {
                    let status: Option<ExitStatus> = frame.body("exited").ok().flatten();
                    r.parser.finish(&r.tx).await;
                    r.sink.flush();
                    let exit = ExitInfo { code: status.and_then(|s| s.code), signal: status.and_then(|s| s.signal) };
                    tracing::info!(server = %r.server, "server {exit}");
                    let _ = r.ctl.send(Frame::new(Kind::AckExit, Vec::new())).await;
                    let _ = r.tx.send(Inbound::Exited(exit)).await;
                    return;
                }
                Kind::Restarted => {
                    if let Ok(Restarted { child }) = frame.body::<Restarted>("restarted") {
                        r.info.set_pid(child.pid);
                        if let Ok(mut rec) = r.record.lock() {
                            rec.child = Some(child);
                        }
                        let _ = r.tx.send(Inbound::Restarted(child.pid)).await;
                    }
                }
                Kind::Superseded => {
                    let _ = r.tx.send(Inbound::Lost("a newer daemon attached to its supervisor".into())).await;
                    return;
                }
                _ => {}
            }
        }
    };
    let reason = end.unwrap_or_else(|| "the connection to its supervisor broke".into());
    lost(&r, reason).await;
}

/// The connection ended without an exit: find out whether the supervisor died, and
/// if so kill its orphaned server (after checking its start time: pids are reused)
/// and remove what it left.
async fn lost(r: &Reader, reason: String) {
    let record = r.record.lock().map(|g| g.clone()).ok();
    let mut reason = reason;
    if let Some(rec) = record {
        // A connection that ends without an exit usually means the supervisor died;
        // its descriptors close while it is still exiting, so give it a moment.
        let sup = rec.supervisor;
        let deadline = Instant::now() + Duration::from_secs(2);
        while mcpx_platform::liveness(sup.pid, Some(sup.start_time)) == Liveness::Running && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if mcpx_platform::liveness(sup.pid, Some(sup.start_time)) != Liveness::Running {
            reason = format!("its supervisor (pid {}) died", rec.supervisor.pid);
            reap_orphan(&rec, &r.dir);
        }
    }
    tracing::warn!(server = %r.server, "instance lost: {reason}");
    let _ = r.tx.send(Inbound::Lost(reason)).await;
}

/// Kills the server of a dead supervisor, if it still runs with the recorded start
/// time, and removes the supervisor's socket and record.
pub fn reap_orphan(rec: &Record, dir: &Path) {
    if let Some(ProcessId { pid, start_time }) = rec.child {
        if mcpx_platform::liveness(pid, Some(start_time)) == Liveness::Running {
            tracing::info!(server = %rec.server, pid, "killing the orphaned server of a dead supervisor");
            let _ = process::signal_group(pid, Signal::SIGKILL);
        }
    }
    let _ = std::fs::remove_file(dir.join(format!("{}.sock", rec.id)));
    let _ = std::fs::remove_file(dir.join(format!("{}.json", rec.id)));
}

/// Writes messages (split into message-atomic stdin frames), control frames and
/// heartbeats; declares the supervisor dead after [`SILENCE`].
async fn write_frames(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Outbound>,
    mut ctl: mpsc::Receiver<Frame>,
    last_heard: Arc<AtomicU64>,
    started: Instant,
    dead: Arc<Notify>,
) {
    let mut beat = tokio::time::interval(HEARTBEAT);
    // Test-only hook: stop for good after the first part of a multi-frame message,
    // touching this file, so a test can kill the daemon mid-message.
    #[cfg(feature = "test-hooks")]
    let pause_mid_message = std::env::var_os("MCPX_TEST_PAUSE_MID_MESSAGE").map(PathBuf::from);
    #[cfg(not(feature = "test-hooks"))]
    let pause_mid_message: Option<PathBuf> = None;
    loop {
        let mut out = Vec::new();
        tokio::select! {
            // Control frames (the exit's acknowledgement) go first, so one is never
            // lost to the instance going away at the same moment.
            biased;
            Some(frame) = ctl.recv() => {
                let _ = frame.encode(&mut out);
            }
            item = rx.recv() => match item {
                Some(Outbound::Message(m)) => {
                    let mut bytes = m.into_string().into_bytes();
                    bytes.push(b'\n');
                    let mut chunks = bytes.chunks(attach::MAX_FRAME).peekable();
                    while let Some(chunk) = chunks.next() {
                        let kind = if chunks.peek().is_some() { Kind::Stdin } else { Kind::StdinEnd };
                        let _ = Frame::new(kind, chunk.to_vec()).encode(&mut out);
                        if let (Some(marker), Kind::Stdin) = (&pause_mid_message, kind) {
                            let _ = wr.write_all(&out).await;
                            let _ = std::fs::write(marker, b"paused");
                            std::future::pending::<()>().await;
                        }
                    }
                }
                Some(Outbound::Terminate) => {
                    let _ = Frame::new(Kind::Terminate, Vec::new()).encode(&mut out);
                }
                Some(Outbound::Restart) => {
                    let _ = Frame::new(Kind::Restart, Vec::new()).encode(&mut out);
                }
                Some(Outbound::StoreSession(s)) => {
                    let _ = Frame::new(Kind::StoreSession, s.into_bytes()).encode(&mut out);
                }
                // The instance is gone; its supervisor keeps the server for the next daemon.
                None => {
                    while let Ok(frame) = ctl.try_recv() {
                        let _ = frame.encode(&mut out);
                    }
                    let _ = wr.write_all(&out).await;
                    return;
                }
            },
            _ = beat.tick() => {
                let heard = Duration::from_millis(last_heard.load(Ordering::Relaxed));
                if started.elapsed().saturating_sub(heard) > SILENCE {
                    dead.notify_one();
                    return;
                }
                let _ = Frame::new(Kind::Heartbeat, Vec::new()).encode(&mut out);
            }
        }
        if let Err(e) = wr.write_all(&out).await {
            tracing::debug!(error = %e, "writing to a supervisor failed");
            return;
        }
        tracing::trace!(bytes = out.len(), "wrote to a supervisor");
    }
}
