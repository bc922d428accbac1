//! The supervised stdio transport: each server instance is owned by its own
//! `mcpx supervise` process, and the daemon attaches to it over a unix socket with
//! the attach protocol (`docs/attach-protocol.md`). The supervisor outlives the
//! daemon, so a new daemon adopts it (`adoption.rs`) and the server never restarts.
//!
//! Over an [`AttachConn`], the link is two tasks: a frame reader that turns the
//! supervisor's frames into [`Inbound`] items, and a frame writer that sends
//! messages, control frames and heartbeats.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpx_platform::Liveness;
use mcpx_platform::fs::Dir;
use mcpx_proto::attach::{ChildState, ExitStatus, Frame, Kind, LaunchRequest, Record, Restarted};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{Notify, mpsc};

use super::attach::{AttachConn, AttachFailure, FrameReader, FrameWriter, Handshake, handshake, stdin_frames};
use super::launch::{BoxFuture, Launch, Launcher, StdioSpec};
use super::link::{ExitInfo, Inbound, Link, LinkInfo, Outbound, SupervisorInfo, TransportError};
use super::output::{StderrSink, StdoutParser};
use super::sup_dir;
use crate::paths::SUP;
use crate::process::{self, Detach, SpawnSpec};

/// While a request waits on a supervisor (or always, for a supervisor of attach
/// protocol 1.0 or 1.1), heartbeats go out this often; a supervisor silent for
/// [`SILENCE`] of that time is gone. With nothing waiting, no timer runs: the
/// supervisor's death ends the connection.
const HEARTBEAT: Duration = Duration::from_secs(1);
const SILENCE: Duration = Duration::from_secs(10);
/// How long a supervisor may take to report readiness when `startTimeout` is 0.
const DEFAULT_READY: Duration = Duration::from_secs(60);
/// The deadline of each attach step right after a launch.
const ATTACH_DEADLINE: Duration = Duration::from_secs(10);

/// Starts servers under `mcpx supervise` (this same binary).
#[derive(Debug, Clone)]
pub struct SupervisedLauncher {
    /// The mcpx binary.
    pub exe: PathBuf,
    /// The runtime directory, whose `sup/` holds the supervisors' sockets and
    /// records (made at the first launch).
    pub runtime: Dir,
    /// The supervisors' shared log file.
    pub log: PathBuf,
}

impl Launcher for SupervisedLauncher {
    fn launch(&self, launch: Launch) -> BoxFuture<'static, Result<Link, TransportError>> {
        let this = self.clone();
        Box::pin(async move { this.start(launch.into_stdio("supervised")?).await })
    }
}

impl SupervisedLauncher {
    async fn start(&self, spec: StdioSpec) -> Result<Link, TransportError> {
        let fail = |message: String| TransportError::Start { command: spec.command.clone(), message };
        let sup =
            self.runtime.subdir(SUP, true).map_err(|e| fail(format!("{}: {e}", self.runtime.join(SUP).display())))?;
        let id = instance_id(&spec);
        let lossy = |s: &std::ffi::OsStr| s.to_string_lossy().into_owned();
        let request = LaunchRequest {
            id: id.clone(),
            identity: spec.identity.clone(),
            dir: sup.path().to_owned(),
            command: spec.command.clone(),
            program: spec.program.clone(),
            args: spec.args.iter().map(|a| lossy(a)).collect(),
            env: spec.env.iter().map(|(k, v)| (lossy(k), lossy(v))).collect(),
            cwd: spec.cwd.clone(),
            buffer_bytes: spec.buffer_bytes,
            max_message_bytes: spec.max_message_bytes as u64,
            orphan_timeout_ms: spec.orphan_timeout.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            log: Some(self.log.clone()),
            sandbox: spec.sandbox.clone(),
        };
        let mut helper = process::spawn(&SpawnSpec {
            program: self.exe.clone(),
            args: vec!["supervise".into()],
            env: std::env::vars_os().collect(),
            cwd: Some(PathBuf::from("/")),
            piped: true,
            detach: Detach::Inherit,
            confine: None,
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
        let text = String::from_utf8_lossy(&report);
        readiness(&text, &spec.command).map_err(fail)?;
        let (shook, link) = connect(&sup, &id, &spec.identity.server, spec.max_message_bytes, ATTACH_DEADLINE)
            .await
            .map_err(|e| fail(e.to_string()))?;
        tracing::info!(server = %spec.identity.server, supervisor = shook.hello.record.supervisor.pid, id, "supervisor started");
        Ok(link)
    }
}

/// Reads the supervisor's readiness line: `Ok` for a JSON object without `error`.
///
/// Errors: the message to put after "cannot start `<command>`: ": the supervisor's
/// own error without that prefix, which it also writes; or the text, when it is not
/// JSON.
fn readiness(text: &str, command: &str) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Ready {
        #[serde(default)]
        error: Option<String>,
    }
    let ready: Ready =
        serde_json::from_str(text.trim()).map_err(|_| format!("the supervisor failed to start: {}", text.trim()))?;
    match ready.error {
        Some(message) => {
            Err(message.strip_prefix(&format!("cannot start `{command}`: ")).unwrap_or(&message).to_owned())
        }
        None => Ok(()),
    }
}

/// A short id, unique per launch: the socket and record are named after it.
fn instance_id(spec: &StdioSpec) -> String {
    let mut h = Sha256::new();
    h.update(spec.identity.fingerprint.as_bytes());
    h.update(spec.identity.key.as_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(format!("{:?}", std::time::SystemTime::now()).as_bytes());
    h.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// Attaches to the supervisor listening on `<id>.sock` in `dir` (the handshake, each
/// step with `deadline`) and returns what it said and a live link for server
/// `server`.
///
/// Errors: as [`handshake`]; connecting is [`AttachFailure::Unreachable`].
pub(super) async fn connect(
    dir: &Dir,
    id: &str,
    server: &str,
    max_message_bytes: usize,
    deadline: Duration,
) -> Result<(Handshake, Link), AttachFailure> {
    let stream = tokio::time::timeout(deadline, UnixStream::connect(dir.join(format!("{id}.sock"))))
        .await
        .map_err(|_| AttachFailure::Unreachable(format!("no connection within {deadline:?}")))?
        .map_err(|e| AttachFailure::Unreachable(e.to_string()))?;
    let mut conn = AttachConn::new(stream);
    let shook = handshake(&mut conn, deadline).await?;
    let link = link(conn, &shook, server, max_message_bytes, Some(dir.clone()));
    Ok((shook, link))
}

/// Runs the link over an attached connection: spawns the frame reader and writer.
/// `dir` holds the supervisor's files, removed if it turns out to have died (a test
/// has none).
fn link<S>(conn: AttachConn<S>, shook: &Handshake, server: &str, max_message_bytes: usize, dir: Option<Dir>) -> Link
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let hello = &shook.hello;
    let info = Arc::new(LinkInfo::new(
        hello.record.child.map(|c| c.pid),
        Some(SupervisorInfo {
            id: hello.record.id.clone(),
            pid: hello.record.supervisor.pid,
            protocol: shook.theirs.to_string(),
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
    let heard = Arc::new(Heard::new());
    let dead = Arc::new(Notify::new());
    let (frames_in, frames_out) = conn.split();
    let reader = Reader {
        frames: frames_in,
        parser: StdoutParser::new(max_message_bytes, info.clone(), server.to_owned()),
        sink: StderrSink::new(info.clone(), server.to_owned()),
        tx: in_tx,
        ctl: ctl_tx,
        info: info.clone(),
        record: Mutex::new(hello.record.clone()),
        server: server.to_owned(),
        heard: heard.clone(),
        dead: dead.clone(),
    };
    tokio::spawn(async move {
        let mut reader = reader;
        let (reason, hung) = match reader.run().await {
            End::Done => return,
            End::Broken(reason) => (reason, false),
            End::Hung(reason) => (reason, true),
        };
        let record = crate::sync::lock(&reader.record).clone();
        lost(&record, dir.as_ref(), reason, hung, &reader.server, &reader.tx).await;
    });
    let watch = Watch { heard, dead, info: info.clone(), steady: shook.theirs.beats_every_second() };
    tokio::spawn(write_frames(frames_out, out_rx, ctl_rx, watch));
    if let (Some(exit), ChildState::Exited) = (hello.exit, &hello.state) {
        tracing::info!(
            server,
            code = exit.code,
            signal = exit.signal,
            "the server exited while no daemon was attached"
        );
    }
    let resumed = hello.session.as_ref().map(|s| s.get().to_owned());
    let era = hello.era.as_ref().map(|s| s.get().to_owned());
    Link { tx: out_tx, rx: in_rx, info, epoch: shook.epoch, resumed, era }
}

/// When the supervisor was last heard from, for the silence check.
#[derive(Debug)]
struct Heard {
    started: Instant,
    /// Milliseconds after `started`.
    at_ms: AtomicU64,
}

impl Heard {
    fn new() -> Heard {
        Heard { started: Instant::now(), at_ms: AtomicU64::new(0) }
    }

    fn touch(&self) {
        self.at_ms.store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn silent_for(&self) -> Duration {
        self.started.elapsed().saturating_sub(Duration::from_millis(self.at_ms.load(Ordering::Relaxed)))
    }
}

/// How the reader ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// Its last item is sent (the exit, a takeover), or the instance is gone.
    Done,
    /// The connection ended without an exit: the supervisor may have died.
    Broken(String),
    /// The supervisor was silent while a call waited on it: it hangs.
    Hung(String),
}

/// The reading side of a supervised link.
struct Reader<R> {
    frames: FrameReader<R>,
    parser: StdoutParser,
    sink: StderrSink,
    tx: mpsc::Sender<Inbound>,
    /// Control frames for the writer to send first (the exit's acknowledgement).
    ctl: mpsc::Sender<Frame>,
    info: Arc<LinkInfo>,
    /// The supervisor's record as the hello gave it, its child updated on restarts.
    record: Mutex<Record>,
    server: String,
    heard: Arc<Heard>,
    /// Notified by the writer when the supervisor has been silent too long.
    dead: Arc<Notify>,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    /// Reads the supervisor's frames until the exit, a takeover, or the connection ends.
    async fn run(&mut self) -> End {
        loop {
            let read = tokio::select! {
                read = self.frames.read_frame() => read,
                () = self.dead.notified() => {
                    return End::Hung(format!("the supervisor was silent for {}s", SILENCE.as_secs()));
                }
            };
            let frame = match read {
                Ok(Some(frame)) => frame,
                Ok(None) | Err(super::attach::ConnError::Io(_)) => {
                    return End::Broken("the connection to its supervisor broke".into());
                }
                Err(e) => {
                    tracing::warn!(server = %self.server, error = %e, "attach protocol error; dropping the connection");
                    return End::Broken(e.to_string());
                }
            };
            self.heard.touch();
            if let Some(end) = self.frame(frame).await {
                return end;
            }
        }
    }

    /// Handles one frame; `Some` when it was the last.
    async fn frame(&mut self, frame: Frame) -> Option<End> {
        match frame.kind {
            Kind::Stdout => {
                let receiver_alive = self.parser.feed(&frame.payload, &self.tx).await;
                if !receiver_alive {
                    return Some(End::Done);
                }
            }
            Kind::Stderr => self.sink.push(&frame.payload),
            Kind::Exited => {
                let status: Option<ExitStatus> = frame.body("exited").ok().flatten();
                self.parser.finish(&self.tx).await;
                self.sink.flush();
                let exit = ExitInfo { code: status.and_then(|s| s.code), signal: status.and_then(|s| s.signal) };
                tracing::info!(server = %self.server, "server {exit}");
                let _ = self.ctl.send(Frame::new(Kind::AckExit, Vec::new())).await;
                let _ = self.tx.send(Inbound::Exited(exit)).await;
                return Some(End::Done);
            }
            Kind::Restarted => {
                if let Ok(Restarted { child }) = frame.body::<Restarted>("restarted") {
                    self.info.set_pid(child.pid);
                    crate::sync::lock(&self.record).child = Some(child);
                    let _ = self.tx.send(Inbound::Restarted(child.pid)).await;
                }
            }
            Kind::Superseded => {
                let _ = self.tx.send(Inbound::Lost("a newer daemon attached to its supervisor".into())).await;
                return Some(End::Done);
            }
            _ => {}
        }
        None
    }
}

/// The connection to the supervisor of `rec` ended without an exit: find out whether
/// the supervisor died, and if so kill its orphaned server (after checking its start
/// time: pids are reused) and remove what it left in `dir`. A `hung` supervisor (silent
/// while a call waited) is stopped with its server: left running, it would come back
/// beside the instance that replaces it, and the next daemon would adopt both. Then the
/// link of `server` reports the loss on `tx`.
async fn lost(rec: &Record, dir: Option<&Dir>, reason: String, hung: bool, server: &str, tx: &mpsc::Sender<Inbound>) {
    let mut reason = reason;
    let sup = rec.supervisor;
    if hung {
        if let Some(dir) = dir {
            sup_dir::stop_supervisor(rec, dir);
            reason = format!("{reason}; it was stopped, with its server");
        }
    } else {
        // A connection that ends without an exit usually means the supervisor died; its
        // descriptors close while it is still exiting, so give it a moment.
        let deadline = Instant::now() + Duration::from_secs(2);
        while mcpx_platform::liveness(sup.pid, Some(sup.start_time)) == Liveness::Running && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if mcpx_platform::liveness(sup.pid, Some(sup.start_time)) != Liveness::Running {
            reason = format!("its supervisor (pid {}) died", sup.pid);
            if let Some(dir) = dir {
                sup_dir::reap_orphan(rec, dir);
            }
        }
    }
    tracing::warn!(server, "instance lost: {reason}");
    let _ = tx.send(Inbound::Lost(reason)).await;
}

/// What the writer needs to watch the supervisor's liveness.
struct Watch {
    heard: Arc<Heard>,
    /// Notified when the supervisor has been silent too long.
    dead: Arc<Notify>,
    /// Its `awaiting` counts the requests waiting on the supervisor.
    info: Arc<LinkInfo>,
    /// A 1.0 or 1.1 supervisor, which takes 10 s without a heartbeat as a hang: it
    /// gets one every second, waiting or not.
    steady: bool,
}

impl Watch {
    fn busy(&self) -> bool {
        self.steady || self.info.awaiting.load(Ordering::Relaxed) > 0
    }
}

/// Writes messages (split into message-atomic stdin frames), control frames and
/// heartbeats; declares the supervisor dead after [`SILENCE`]. Heartbeats only run
/// while requests wait on the supervisor (see [`HEARTBEAT`]); the supervisor answers
/// each. Whatever waits in the channel when it wakes goes out with one write (up to
/// [`COALESCE_BYTES`]), so a burst of calls costs one syscall, not one per message.
async fn write_frames<W: AsyncWrite + Unpin>(
    mut out: FrameWriter<W>,
    mut rx: mpsc::Receiver<Outbound>,
    mut ctl: mpsc::Receiver<Frame>,
    watch: Watch,
) {
    // One timer, armed while busy: reset per beat, never made per message.
    let beat = tokio::time::sleep(HEARTBEAT);
    tokio::pin!(beat);
    let mut armed = false;
    // Since when the watch has run: silence before it does not count.
    let mut watching_since = Instant::now();
    // Test-only hook: stop for good after the first part of a multi-frame message,
    // touching this file, so a test can kill the daemon mid-message.
    #[cfg(feature = "test-hooks")]
    let pause_mid_message = std::env::var_os("MCPX_TEST_PAUSE_MID_MESSAGE").map(PathBuf::from);
    #[cfg(not(feature = "test-hooks"))]
    let pause_mid_message: Option<PathBuf> = None;
    loop {
        if !armed && watch.busy() {
            let now = Instant::now();
            beat.as_mut().reset((now + HEARTBEAT).into());
            armed = true;
            watching_since = now;
        }
        tokio::select! {
            // Control frames (the exit's acknowledgement) go first, so one is never
            // lost to the instance going away at the same moment.
            biased;
            Some(frame) = ctl.recv() => {
                let _ = out.queue(&frame);
            }
            item = rx.recv() => match item {
                Some(item) => {
                    queue_outbound(&mut out, item, pause_mid_message.as_deref()).await;
                    while out.pending() < COALESCE_BYTES {
                        let Ok(item) = rx.try_recv() else { break };
                        queue_outbound(&mut out, item, pause_mid_message.as_deref()).await;
                    }
                }
                // The instance is gone; its supervisor keeps the server for the next daemon.
                None => {
                    while let Ok(frame) = ctl.try_recv() {
                        let _ = out.queue(&frame);
                    }
                    let _ = out.flush().await;
                    return;
                }
            },
            () = &mut beat, if armed => {
                if !watch.busy() {
                    armed = false;
                    continue;
                }
                if watch.heard.silent_for() > SILENCE && watching_since.elapsed() > SILENCE {
                    watch.dead.notify_one();
                    return;
                }
                beat.as_mut().reset((Instant::now() + HEARTBEAT).into());
                let _ = out.queue(&Frame::new(Kind::Heartbeat, Vec::new()));
            }
        }
        if let Err(e) = out.flush().await {
            tracing::debug!(error = %e, "writing to a supervisor failed");
            return;
        }
    }
}

/// The most bytes the writer gathers from waiting items before it writes them.
const COALESCE_BYTES: usize = 256 * 1024;

/// Queues the frames of one item for the supervisor. `pause_mid_message` is the
/// test hook's marker file (see [`write_frames`]).
async fn queue_outbound<W: AsyncWrite + Unpin>(
    out: &mut FrameWriter<W>,
    item: Outbound,
    pause_mid_message: Option<&std::path::Path>,
) {
    let frame = match item {
        Outbound::Message(m) | Outbound::Headed(m, _) => {
            let Some(marker) = pause_mid_message else {
                out.queue_message(m.as_str().as_bytes());
                return;
            };
            let mut bytes = m.into_string().into_bytes();
            bytes.push(b'\n');
            for frame in stdin_frames(&bytes) {
                let _ = out.queue(&frame);
                if frame.kind == Kind::Stdin {
                    let _ = out.flush().await;
                    let _ = std::fs::write(marker, b"paused");
                    std::future::pending::<()>().await;
                }
            }
            return;
        }
        Outbound::Terminate => Frame::new(Kind::Terminate, Vec::new()),
        Outbound::Restart => Frame::new(Kind::Restart, Vec::new()),
        Outbound::StoreSession(s) => Frame::new(Kind::StoreSession, s.into_bytes()),
        // A 1.0 supervisor skips the frame (unknown kinds are ignored) and reports no
        // era: the next daemon restarts the server, as it must.
        Outbound::StoreEra(s) => Frame::new(Kind::StoreEra, s.into_bytes()),
    };
    let _ = out.queue(&frame);
}

#[cfg(test)]
mod tests {
    use mcpx_proto::Message;
    use mcpx_proto::attach::{ProcessId, Version};
    use tokio::io::DuplexStream;

    use super::*;
    use crate::transport::testing::{NO_PROCESS, greet, hello, pair, record};

    /// A link attached over a duplex stream; the test plays the supervisor on the
    /// connection returned with it, after the daemon's answer to the hello.
    async fn attached(next_epoch: u32) -> (Link, AttachConn<DuplexStream>) {
        let (mut daemon, mut sup) = pair();
        greet(&mut sup, Version::CURRENT, &[Frame::json(Kind::Hello, &hello(next_epoch))]).await;
        let shook = handshake(&mut daemon, Duration::from_secs(5)).await.unwrap();
        let link = link(daemon, &shook, "fake", 1 << 20, None);
        assert_eq!(sup.read_preamble().await.unwrap(), Version::ours());
        assert_eq!(sup.read_frame().await.unwrap().map(|f| f.kind), Some(Kind::Attach));
        (link, sup)
    }

    /// The next frame the daemon sent that is not a heartbeat.
    async fn next_frame(sup: &mut AttachConn<DuplexStream>) -> Frame {
        loop {
            let frame = sup.read_frame().await.unwrap().expect("the daemon closed the connection");
            if frame.kind != Kind::Heartbeat {
                return frame;
            }
        }
    }

    async fn send(sup: &mut AttachConn<DuplexStream>, frame: Frame) {
        sup.write_frame(&frame).await.unwrap();
    }

    #[tokio::test]
    async fn a_link_carries_what_the_hello_said() {
        let (link, _sup) = attached(4).await;
        assert_eq!(link.epoch, 4);
        assert_eq!(link.resumed.as_deref(), Some(r#"{"protocolVersion":"2025-11-25"}"#));
        let sup = link.info.supervisor.clone().unwrap();
        let current = Version::CURRENT.to_string();
        assert_eq!((sup.id.as_str(), sup.protocol.as_str()), ("0a1b2c3d4e5f", current.as_str()));
        assert_eq!(link.info.dropped(), 7, "what the supervisor dropped while unattached");
        assert_eq!(link.info.buffered_at_attach.load(Ordering::Relaxed), 5);
    }

    #[tokio::test]
    async fn output_and_restarts_reach_the_instance() {
        let (mut link, mut sup) = attached(2).await;
        let message = br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        send(&mut sup, Frame::new(Kind::Stdout, message[..10].to_vec())).await;
        send(&mut sup, Frame::new(Kind::Stderr, b"warming up\n".to_vec())).await;
        send(&mut sup, Frame::new(Kind::Stdout, [&message[10..], b"\n"].concat())).await;
        match link.rx.recv().await {
            Some(Inbound::Message(m)) => assert_eq!(m.method(), Some("notifications/tools/list_changed")),
            other => panic!("{other:?}"),
        }
        assert!(link.info.stderr_tail(100).contains("warming up"));
        let child = ProcessId { pid: NO_PROCESS, start_time: 9 };
        send(&mut sup, Frame::json(Kind::Restarted, &Restarted { child })).await;
        assert!(matches!(link.rx.recv().await, Some(Inbound::Restarted(NO_PROCESS))));
        assert_eq!(link.info.pid(), Some(NO_PROCESS));
    }

    #[tokio::test]
    async fn an_exit_ends_the_link_and_is_acknowledged() {
        let (mut link, mut sup) = attached(2).await;
        // A last line without its newline still counts.
        send(&mut sup, Frame::new(Kind::Stdout, br#"{"jsonrpc":"2.0","id":4294967297,"result":{}}"#.to_vec())).await;
        let exit = ExitStatus { code: None, signal: Some(9), at: 0 };
        send(&mut sup, Frame::json(Kind::Exited, &Some(exit))).await;
        assert!(matches!(link.rx.recv().await, Some(Inbound::Message(m)) if m.id() == Some("4294967297")));
        match link.rx.recv().await {
            Some(Inbound::Exited(e)) => assert_eq!(e, ExitInfo { code: None, signal: Some(9) }),
            other => panic!("{other:?}"),
        }
        assert!(link.rx.recv().await.is_none(), "the exit is the last item");
        assert_eq!(next_frame(&mut sup).await.kind, Kind::AckExit);
    }

    #[tokio::test]
    async fn a_newer_daemon_supersedes_the_link() {
        let (mut link, mut sup) = attached(2).await;
        send(&mut sup, Frame::new(Kind::Superseded, Vec::new())).await;
        match link.rx.recv().await {
            Some(Inbound::Lost(reason)) => assert_eq!(reason, "a newer daemon attached to its supervisor"),
            other => panic!("{other:?}"),
        }
        assert!(link.rx.recv().await.is_none());
    }

    #[tokio::test]
    async fn messages_and_commands_go_out_as_frames() {
        let (link, mut sup) = attached(2).await;
        let request = Message::request("4294967297", "tools/list", None);
        link.tx.send(Outbound::Message(request.clone())).await.unwrap();
        let frame = next_frame(&mut sup).await;
        assert_eq!((frame.kind, frame.payload), (Kind::StdinEnd, format!("{}\n", request.as_str()).into_bytes()));
        link.tx.send(Outbound::StoreSession("{}".into())).await.unwrap();
        let frame = next_frame(&mut sup).await;
        assert_eq!((frame.kind, frame.payload), (Kind::StoreSession, b"{}".to_vec()));
        link.tx.send(Outbound::Restart).await.unwrap();
        assert_eq!(next_frame(&mut sup).await.kind, Kind::Restart);
        link.tx.send(Outbound::Terminate).await.unwrap();
        assert_eq!(next_frame(&mut sup).await.kind, Kind::Terminate);
    }

    #[tokio::test]
    async fn a_burst_of_messages_goes_out_whole_and_in_order() {
        let (link, mut sup) = attached(2).await;
        // Queued before the writer runs again, so it takes them all in one wake.
        let sent: Vec<Message> =
            (1..=100).map(|i| Message::request(&(4294967296u64 + i).to_string(), "tools/list", None)).collect();
        for m in &sent {
            link.tx.try_send(Outbound::Message(m.clone())).unwrap();
        }
        for m in &sent {
            let frame = next_frame(&mut sup).await;
            assert_eq!((frame.kind, frame.payload), (Kind::StdinEnd, format!("{}\n", m.as_str()).into_bytes()));
        }
    }

    /// A reader over `rd`, and what it hands the instance.
    fn reader(rd: DuplexStream) -> (Reader<DuplexStream>, mpsc::Receiver<Inbound>) {
        let info = Arc::new(LinkInfo::new(None, None));
        let (tx, rx) = mpsc::channel(8);
        let reader = Reader {
            frames: FrameReader::new(rd),
            parser: StdoutParser::new(1 << 20, info.clone(), "fake".into()),
            sink: StderrSink::new(info.clone(), "fake".into()),
            tx,
            ctl: mpsc::channel(1).0,
            info,
            record: Mutex::new(record(1)),
            server: "fake".into(),
            heard: Arc::new(Heard::new()),
            dead: Arc::new(Notify::new()),
        };
        (reader, rx)
    }

    #[tokio::test]
    async fn a_connection_that_ends_or_breaks_the_protocol_is_broken() {
        let (rd, peer) = tokio::io::duplex(64);
        let (mut r, _rx) = reader(rd);
        drop(peer);
        assert_eq!(r.run().await, End::Broken("the connection to its supervisor broke".into()));

        let (rd, mut peer) = tokio::io::duplex(64);
        let (mut r, _rx) = reader(rd);
        peer.write_all(&[0xff, 0xff, 0xff, 0xff, Kind::Stdout as u8]).await.unwrap();
        let End::Broken(reason) = r.run().await else { panic!("not broken") };
        assert!(reason.starts_with("attach protocol error: frame of 4294967295 bytes"), "{reason}");

        let (rd, _peer) = tokio::io::duplex(64);
        let (mut r, _rx) = reader(rd);
        r.dead.notify_one();
        assert_eq!(r.run().await, End::Hung("the supervisor was silent for 10s".into()));
    }

    #[test]
    fn readiness_is_a_json_object_without_an_error() {
        assert_eq!(readiness(r#"{"pid":1,"child":{"pid":2,"start_time":3}}"#, "srv"), Ok(()));
        assert_eq!(
            readiness(r#"{"error":"cannot start `srv`: No such file or directory (os error 2)"}"#, "srv"),
            Err("No such file or directory (os error 2)".into())
        );
        assert_eq!(readiness(r#"{"error":"cannot bind"}"#, "srv"), Err("cannot bind".into()));
        assert_eq!(readiness("panicked\n", "srv"), Err("the supervisor failed to start: panicked".into()));
    }
}
