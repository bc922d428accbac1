//! The supervisor's loop: one `poll(2)` over the listening socket, the daemon
//! connections, the child's pipes and (on Linux) its pidfd, with every trigger
//! turned into one [`Event`] and handled in [`Supervisor::handle`].

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mcpx_platform::PidFd;
use mcpx_platform::process::{CLOSE_GRACE, TERM_GRACE};
use mcpx_proto::attach::{
    self, Attach, ChildState, ExitStatus, Frame, FrameDecoder, Hello, Kind, LaunchRequest, ProcessId, Record,
    Restarted, Version,
};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::buffer::{StderrRing, StdoutBuffer};
use crate::log::log;

/// Heartbeats go out this often; a daemon silent for [`SILENCE`] is gone.
const HEARTBEAT: Duration = Duration::from_secs(1);
const SILENCE: Duration = Duration::from_secs(10);
/// A connection that has not attached within this long is dropped.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// How long an exit status waits for a daemon to acknowledge it.
const EXIT_LINGER: Duration = Duration::from_secs(600);
/// Stop moving stdout into a connection whose unsent bytes exceed this.
const CONN_HIGH_WATER: usize = 4 << 20;
/// Stdout frames carry at most this much.
const CHUNK: usize = 64 * 1024;

/// Everything that can happen to the supervisor.
#[derive(Debug, Clone, Copy)]
pub enum Event {
    /// A daemon is connecting.
    Accept,
    /// Connection `n` has bytes (or closed).
    ConnReadable(usize),
    /// Connection `n` can take more bytes.
    ConnWritable(usize),
    /// The child wrote to stdout (or closed it).
    Stdout,
    /// The child wrote to stderr (or closed it).
    Stderr,
    /// The child's stdin can take more bytes.
    StdinWritable,
    /// Some child process may have exited (pidfd readable, or a periodic check).
    Reap,
}

/// What to do once the stopping child has exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Start it again from the same spec.
    Restart,
    /// Exit once a daemon acknowledged the exit (or none is attached).
    Exit,
}

#[derive(Debug)]
struct Stopping {
    /// 0: stdin closed, 1: SIGTERM sent, 2: SIGKILL sent.
    phase: u8,
    deadline: Instant,
    then: Then,
}

/// The running child and its pipes.
struct ChildProc {
    id: ProcessId,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    pidfd: Option<PidFd>,
    /// Whole messages waiting for the child's stdin, written from `stdin_pos`.
    stdin_queue: Vec<u8>,
    stdin_pos: usize,
}

#[derive(Debug, PartialEq, Eq)]
enum ConnState {
    /// Waiting for the daemon's preamble (bytes gathered so far).
    Preamble(Vec<u8>),
    /// Preamble read; waiting for the Attach frame.
    Hello,
    /// The attached daemon, with its epoch.
    Attached(u32),
    /// Superseded or refused: flush and close.
    Closing,
}

struct Conn {
    stream: UnixStream,
    state: ConnState,
    decoder: FrameDecoder,
    out: Vec<u8>,
    opened: Instant,
    last_heard: Instant,
    /// A message for the child's stdin arriving in parts.
    stdin_partial: Vec<u8>,
    /// The message arriving is over `maxMessageBytes`: its parts are dropped until its end.
    stdin_discarding: bool,
    /// Whether this connection was sent the exit.
    exit_sent: bool,
    closed: bool,
}

/// The supervisor's whole state.
pub struct Supervisor {
    req: LaunchRequest,
    listener: UnixListener,
    socket_path: PathBuf,
    record_path: PathBuf,
    me: ProcessId,
    boot_id: String,
    conns: Vec<Conn>,
    child: Option<ChildProc>,
    stdout: StdoutBuffer,
    stderr: StderrRing,
    /// Whether the stream handed to daemons so far ends mid-line.
    sent_mid_line: bool,
    exit: Option<ExitStatus>,
    exited_at: Option<Instant>,
    exit_acked: bool,
    stopping: Option<Stopping>,
    session: Option<Box<serde_json::value::RawValue>>,
    last_epoch: u32,
    unattached_since: Option<Instant>,
    last_heartbeat: Instant,
    /// When a stdout drop was last logged (at most one line a second).
    last_drop_log: Option<Instant>,
    done: bool,
}

impl Supervisor {
    /// A supervisor for `child`, already spawned from `req`, serving on `listener`.
    pub fn new(
        req: LaunchRequest,
        listener: UnixListener,
        socket_path: PathBuf,
        me: ProcessId,
        boot_id: String,
        child: Child,
    ) -> std::io::Result<Supervisor> {
        let record_path = req.dir.join(format!("{}.json", req.id));
        let capacity = usize::try_from(req.buffer_bytes).unwrap_or(usize::MAX);
        let now = Instant::now();
        let mut sup = Supervisor {
            listener,
            socket_path,
            record_path,
            me,
            boot_id,
            conns: Vec::new(),
            child: None,
            stdout: StdoutBuffer::new(capacity),
            stderr: StderrRing::new(),
            sent_mid_line: false,
            exit: None,
            exited_at: None,
            exit_acked: false,
            stopping: None,
            session: None,
            last_epoch: 0,
            unattached_since: Some(now),
            last_heartbeat: now,
            last_drop_log: None,
            done: false,
            req,
        };
        sup.adopt_child(child)?;
        sup.write_record();
        Ok(sup)
    }

    /// The child's pid and start time.
    pub fn child_id(&self) -> Option<ProcessId> {
        self.child.as_ref().map(|c| c.id)
    }

    fn adopt_child(&mut self, mut child: Child) -> std::io::Result<()> {
        let pid = child.id();
        let start_time = mcpx_platform::process_start_time(pid).unwrap_or(0);
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        for fd in
            [stdin.as_ref().map(|s| s.as_fd()), stdout.as_ref().map(|s| s.as_fd()), stderr.as_ref().map(|s| s.as_fd())]
                .into_iter()
                .flatten()
        {
            set_nonblocking(fd)?;
        }
        let pidfd = PidFd::open(pid).ok();
        // The std handle is dropped without waiting: the loop reaps with waitpid(-1),
        // which also reaps orphaned descendants (the supervisor is their subreaper).
        drop(child);
        self.child = Some(ChildProc {
            id: ProcessId { pid, start_time },
            stdin,
            stdout,
            stderr,
            pidfd,
            stdin_queue: Vec::new(),
            stdin_pos: 0,
        });
        self.exit = None;
        self.exited_at = None;
        self.exit_acked = false;
        log!("child {pid} running");
        Ok(())
    }

    /// Runs until the supervisor's work is done; returns the process exit status.
    pub fn run(mut self) -> i32 {
        let mut events = Vec::new();
        while !self.done {
            events.clear();
            if let Err(e) = self.wait(&mut events) {
                log!("poll failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            for ev in events.drain(..) {
                self.handle(ev);
            }
            self.handle(Event::Reap);
            self.tick(Instant::now());
            self.pump();
            self.flush_conns();
        }
        self.cleanup();
        0
    }

    /// Polls every source and lists what is ready.
    fn wait(&mut self, events: &mut Vec<Event>) -> nix::Result<()> {
        let mut fds: Vec<PollFd<'_>> = Vec::new();
        let mut what: Vec<Event> = Vec::new();
        fds.push(PollFd::new(self.listener.as_fd(), PollFlags::POLLIN));
        what.push(Event::Accept);
        for (i, c) in self.conns.iter().enumerate() {
            let mut flags = PollFlags::POLLIN;
            if !c.out.is_empty() {
                flags |= PollFlags::POLLOUT;
            }
            fds.push(PollFd::new(c.stream.as_fd(), flags));
            what.push(Event::ConnReadable(i));
        }
        let mut has_pidfd = false;
        if let Some(child) = &self.child {
            if let (Some(s), false) = (&child.stdout, self.stdout_paused()) {
                fds.push(PollFd::new(s.as_fd(), PollFlags::POLLIN));
                what.push(Event::Stdout);
            }
            if let Some(s) = &child.stderr {
                fds.push(PollFd::new(s.as_fd(), PollFlags::POLLIN));
                what.push(Event::Stderr);
            }
            if let (Some(s), true) = (&child.stdin, child.stdin_pos < child.stdin_queue.len()) {
                fds.push(PollFd::new(s.as_fd(), PollFlags::POLLOUT));
                what.push(Event::StdinWritable);
            }
            if let Some(p) = &child.pidfd {
                // Safety of the borrow: the pidfd lives in `self.child` for this call.
                fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
                what.push(Event::Reap);
                has_pidfd = true;
            }
        }
        // Without a pidfd, exits are noticed by a periodic reap.
        let timeout = if has_pidfd { 500 } else { 100 };
        poll(&mut fds, PollTimeout::from(timeout as u16))?;
        for (fd, ev) in fds.iter().zip(what) {
            let Some(r) = fd.revents() else { continue };
            if r.is_empty() {
                continue;
            }
            match ev {
                Event::ConnReadable(i) => {
                    if r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR) {
                        events.push(Event::ConnReadable(i));
                    }
                    if r.contains(PollFlags::POLLOUT) {
                        events.push(Event::ConnWritable(i));
                    }
                }
                other => events.push(other),
            }
        }
        Ok(())
    }

    /// Handles one event.
    pub fn handle(&mut self, ev: Event) {
        match ev {
            Event::Accept => self.accept(),
            Event::ConnReadable(i) => self.read_conn(i),
            Event::ConnWritable(i) => self.flush_conn(i),
            Event::Stdout => self.read_stdout(),
            Event::Stderr => self.read_stderr(),
            Event::StdinWritable => self.write_stdin(),
            Event::Reap => self.reap(),
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    let me = nix::unistd::getuid().as_raw();
                    match mcpx_platform::peer_uid(stream.as_fd()) {
                        Ok(uid) if uid == me => {}
                        Ok(uid) => {
                            log!("refused a connection from uid {uid} (not {me})");
                            continue;
                        }
                        Err(e) => {
                            log!("refused a connection whose peer cannot be identified: {e}");
                            continue;
                        }
                    }
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let now = Instant::now();
                    let mut conn = Conn {
                        stream,
                        state: ConnState::Preamble(Vec::new()),
                        decoder: FrameDecoder::new(),
                        out: Vec::new(),
                        opened: now,
                        last_heard: now,
                        stdin_partial: Vec::new(),
                        stdin_discarding: false,
                        exit_sent: false,
                        closed: false,
                    };
                    conn.out.extend_from_slice(&attach::encode_preamble(Version::ours()));
                    let hello = self.hello();
                    let _ = Frame::json(Kind::Hello, &hello).encode(&mut conn.out);
                    self.conns.push(conn);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => {
                    log!("accept failed: {e}");
                    return;
                }
            }
        }
    }

    fn hello(&self) -> Hello {
        Hello {
            record: self.record(),
            state: if self.exit.is_some() { ChildState::Exited } else { ChildState::Running },
            exit: self.exit,
            stdout_buffered: self.stdout.len() as u64,
            stdout_dropped: self.stdout.dropped,
            stderr_dropped: self.stderr.dropped,
            buffer_capacity: self.stdout.capacity() as u64,
            next_epoch: self.last_epoch + 1,
            session: self.session.clone(),
        }
    }

    fn record(&self) -> Record {
        Record {
            id: self.req.id.clone(),
            identity: self.req.identity.clone(),
            supervisor: self.me,
            child: self.child.as_ref().map(|c| c.id),
            boot_id: self.boot_id.clone(),
            protocol: Version::ours(),
            build: mcpx_platform::build::build_id().to_owned(),
            last_epoch: self.last_epoch,
            exit: self.exit,
        }
    }

    /// Writes the record atomically (`mcpx_platform::fs::write_atomic`).
    fn write_record(&self) {
        let bytes = serde_json::to_vec_pretty(&self.record()).unwrap_or_default();
        if let Err(e) = mcpx_platform::fs::write_atomic(&self.record_path, &bytes, 0o600) {
            log!("cannot write {}: {e}", self.record_path.display());
        }
    }

    fn read_conn(&mut self, i: usize) {
        let mut buf = [0u8; 64 * 1024];
        loop {
            let Some(conn) = self.conns.get_mut(i) else { return };
            if conn.closed {
                return;
            }
            match conn.stream.read(&mut buf) {
                Ok(0) => {
                    conn.closed = true;
                    return;
                }
                Ok(n) => {
                    conn.last_heard = Instant::now();
                    let mut data = &buf[..n];
                    if let ConnState::Preamble(got) = &mut conn.state {
                        let want = attach::PREAMBLE_LEN - got.len();
                        let take = want.min(data.len());
                        got.extend_from_slice(&data[..take]);
                        data = &data[take..];
                        if got.len() == attach::PREAMBLE_LEN {
                            let mut p = [0u8; attach::PREAMBLE_LEN];
                            p.copy_from_slice(got);
                            match attach::decode_preamble(&p) {
                                Ok(v) => {
                                    log!("daemon speaking attach protocol {v} connected");
                                    conn.state = ConnState::Hello;
                                }
                                Err(e) => {
                                    log!("dropped a connection: {e}");
                                    conn.closed = true;
                                    return;
                                }
                            }
                        }
                    }
                    conn.decoder.push(data);
                    loop {
                        let Some(conn) = self.conns.get_mut(i) else { return };
                        match conn.decoder.next_frame() {
                            Ok(Some(frame)) => self.frame(i, frame),
                            Ok(None) => break,
                            Err(e) => {
                                log!("dropped a connection: {e}");
                                conn.closed = true;
                                return;
                            }
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    conn.closed = true;
                    return;
                }
            }
        }
    }

    fn is_attached(&self, i: usize) -> bool {
        matches!(self.conns.get(i).map(|c| &c.state), Some(ConnState::Attached(_)))
    }

    /// Handles one frame from connection `i`.
    fn frame(&mut self, i: usize, frame: Frame) {
        let kind = frame.kind;
        if kind == Kind::Attach {
            return self.attach(i, &frame);
        }
        if !self.is_attached(i) {
            if kind != Kind::Heartbeat {
                log!("ignored a {kind:?} frame from a connection that has not attached");
            }
            return;
        }
        match kind {
            Kind::Heartbeat => {}
            Kind::Stdin | Kind::StdinEnd => {
                let max = usize::try_from(self.req.max_message_bytes).unwrap_or(usize::MAX).saturating_add(1);
                let conn = &mut self.conns[i];
                if conn.stdin_discarding {
                    // The rest of a message already over the limit.
                } else if conn.stdin_partial.len() + frame.payload.len() <= max {
                    conn.stdin_partial.extend_from_slice(&frame.payload);
                } else {
                    conn.stdin_partial = Vec::new();
                    conn.stdin_discarding = true;
                    log!("dropped a stdin message over maxMessageBytes");
                }
                if kind == Kind::StdinEnd {
                    let discarded = std::mem::replace(&mut conn.stdin_discarding, false);
                    let message = std::mem::take(&mut conn.stdin_partial);
                    if discarded {
                        return;
                    }
                    match self.child.as_mut() {
                        Some(c) if c.stdin.is_some() => c.stdin_queue.extend_from_slice(&message),
                        _ => log!("dropped a stdin message: the child's stdin is closed"),
                    }
                }
            }
            Kind::CloseStdin => {
                if let Some(c) = self.child.as_mut() {
                    c.stdin = None;
                    c.stdin_queue.clear();
                    c.stdin_pos = 0;
                }
            }
            Kind::Signal => {
                if let (Ok(b), Some(c)) = (<[u8; 4]>::try_from(frame.payload.as_slice()), &self.child) {
                    if let Ok(sig) = Signal::try_from(i32::from_be_bytes(b)) {
                        let _ = nix::sys::signal::killpg(Pid::from_raw(c.id.pid as i32), sig);
                    }
                }
            }
            Kind::Restart => self.stop_child(Then::Restart),
            Kind::Terminate => self.stop_child(Then::Exit),
            Kind::StoreSession => match serde_json::from_slice::<Box<serde_json::value::RawValue>>(&frame.payload) {
                Ok(s) => self.session = Some(s),
                Err(e) => log!("ignored a malformed session: {e}"),
            },
            Kind::AckExit if self.exit.is_some() => {
                log!("the exit was acknowledged");
                self.exit_acked = true;
            }
            _ => {}
        }
    }

    /// A daemon attaches with an epoch; a newer one takes over from the attached one.
    fn attach(&mut self, i: usize, frame: &Frame) {
        let Ok(req) = frame.body::<Attach>("attach") else {
            self.conns[i].closed = true;
            return;
        };
        if req.epoch <= self.last_epoch {
            log!("refused an attach with epoch {} (last was {})", req.epoch, self.last_epoch);
            self.conns[i].state = ConnState::Closing;
            return;
        }
        for (j, c) in self.conns.iter_mut().enumerate() {
            if j != i && matches!(c.state, ConnState::Attached(_)) {
                let _ = Frame::new(Kind::Superseded, Vec::new()).encode(&mut c.out);
                c.state = ConnState::Closing;
                log!("daemon with epoch {} superseded", req.epoch);
            }
        }
        self.last_epoch = req.epoch;
        self.unattached_since = None;
        let stderr = self.stderr.contents();
        let conn = &mut self.conns[i];
        conn.state = ConnState::Attached(req.epoch);
        for chunk in stderr.chunks(CHUNK) {
            let _ = Frame::new(Kind::Stderr, chunk.to_vec()).encode(&mut conn.out);
        }
        log!(
            "daemon attached with epoch {} ({} stdout bytes buffered, {} dropped)",
            req.epoch,
            self.stdout.len(),
            self.stdout.dropped
        );
        self.write_record();
    }

    fn read_stdout(&mut self) {
        let mut buf = [0u8; 64 * 1024];
        loop {
            let Some(out) = self.child.as_mut().and_then(|c| c.stdout.as_mut()) else { return };
            match out.read(&mut buf) {
                Ok(0) => {
                    if let Some(c) = self.child.as_mut() {
                        c.stdout = None;
                    }
                    return;
                }
                Ok(n) => {
                    let dropped = self.stdout.push(&buf[..n]);
                    if dropped > 0 && self.last_drop_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                        // At most a line a second: a flooding server must not flood the log.
                        self.last_drop_log = Some(Instant::now());
                        log!(
                            "stdout buffer full while no daemon is attached: {} bytes dropped so far",
                            self.stdout.dropped
                        );
                    }
                    // Hand it on as soon as possible, so the buffer only fills while
                    // no daemon is attached.
                    self.pump();
                    if self.stdout_paused() {
                        // The attached daemon is behind: leave the rest in the pipe
                        // (the server waits) rather than drop what a daemon will read.
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    if let Some(c) = self.child.as_mut() {
                        c.stdout = None;
                    }
                    return;
                }
            }
        }
    }

    fn read_stderr(&mut self) {
        let mut buf = [0u8; 64 * 1024];
        loop {
            let Some(err) = self.child.as_mut().and_then(|c| c.stderr.as_mut()) else { return };
            match err.read(&mut buf) {
                Ok(0) => {
                    if let Some(c) = self.child.as_mut() {
                        c.stderr = None;
                    }
                    return;
                }
                Ok(n) => {
                    self.stderr.push(&buf[..n]);
                    if let Some(conn) = self.attached_mut() {
                        let _ = Frame::new(Kind::Stderr, buf[..n].to_vec()).encode(&mut conn.out);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    if let Some(c) = self.child.as_mut() {
                        c.stderr = None;
                    }
                    return;
                }
            }
        }
    }

    fn write_stdin(&mut self) {
        let Some(child) = self.child.as_mut() else { return };
        let Some(stdin) = child.stdin.as_mut() else {
            child.stdin_queue.clear();
            child.stdin_pos = 0;
            return;
        };
        while child.stdin_pos < child.stdin_queue.len() {
            match stdin.write(&child.stdin_queue[child.stdin_pos..]) {
                Ok(n) => child.stdin_pos += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    log!("writing the child's stdin failed: {e}");
                    child.stdin = None;
                    child.stdin_queue.clear();
                    child.stdin_pos = 0;
                    return;
                }
            }
        }
        // Written bytes leave the queue in one move, not one per write.
        if child.stdin_pos == child.stdin_queue.len() {
            child.stdin_queue.clear();
            child.stdin_pos = 0;
        } else if child.stdin_pos > (1 << 20) {
            child.stdin_queue.drain(..child.stdin_pos);
            child.stdin_pos = 0;
        }
    }

    /// Reaps every exited descendant; records the child's exit.
    fn reap(&mut self) {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) => self.reaped(pid, Some(code), None),
                Ok(WaitStatus::Signaled(pid, sig, _)) => self.reaped(pid, None, Some(sig as i32)),
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }

    fn reaped(&mut self, pid: Pid, code: Option<i32>, signal: Option<i32>) {
        let Some(child) = self.child.as_mut() else { return };
        if pid.as_raw() as u32 != child.id.pid {
            return; // An orphaned descendant; nothing to record.
        }
        let at = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let pgid = child.id.pid;
        child.pidfd = None;
        child.stdin = None;
        child.stdin_queue.clear();
        child.stdin_pos = 0;
        self.exit = Some(ExitStatus { code, signal, at });
        self.exited_at = Some(Instant::now());
        log!("child {pgid} exited (code {code:?}, signal {signal:?})");
        // Whatever the server left in its process group goes with it.
        let _ = nix::sys::signal::killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL);
        self.write_record();
        if let Some(Stopping { then: Then::Restart, .. }) = self.stopping {
            self.stopping = None;
            self.restart();
        }
    }

    fn restart(&mut self) {
        // Drain what the old child left before the new one writes.
        if let Some(c) = self.child.take() {
            drop(c);
        }
        self.session = None;
        match crate::daemonize::spawn_child(&self.req) {
            Ok(child) => {
                if let Err(e) = self.adopt_child(child) {
                    log!("cannot watch the restarted child: {e}");
                }
                if let Some(id) = self.child_id() {
                    if let Some(conn) = self.attached_mut() {
                        let _ = Frame::json(Kind::Restarted, &Restarted { child: id }).encode(&mut conn.out);
                    }
                }
                self.write_record();
            }
            Err(e) => {
                log!("restart failed: {e}");
                // Keep reporting the old exit; the daemon sees the restart fail.
                self.stderr.push(format!("mcpx supervise: restart failed: {e}\n").as_bytes());
                let exit = self.exit;
                if let Some(conn) = self.attached_mut() {
                    let _ = Frame::json(Kind::Exited, &exit).encode(&mut conn.out);
                }
            }
        }
    }

    /// Starts the stop sequence: close stdin now, SIGTERM the group after a grace,
    /// SIGKILL it after another.
    fn stop_child(&mut self, then: Then) {
        if self.exit.is_some() {
            match then {
                Then::Restart => self.restart(),
                Then::Exit => self.stopping = Some(Stopping { phase: 2, deadline: Instant::now(), then }),
            }
            return;
        }
        if let Some(c) = self.child.as_mut() {
            c.stdin = None;
            c.stdin_queue.clear();
            c.stdin_pos = 0;
        }
        self.stopping = Some(Stopping { phase: 0, deadline: Instant::now() + CLOSE_GRACE, then });
    }

    fn attached_mut(&mut self) -> Option<&mut Conn> {
        self.conns.iter_mut().find(|c| matches!(c.state, ConnState::Attached(_)) && !c.closed)
    }

    /// Timers: heartbeats, silent daemons, the stop sequence, the orphan timeout and
    /// the exit's linger.
    fn tick(&mut self, now: Instant) {
        // Drop closed and stale connections.
        let mut detached = false;
        for c in &mut self.conns {
            let stale = match c.state {
                ConnState::Attached(_) => now.duration_since(c.last_heard) > SILENCE,
                ConnState::Preamble(_) | ConnState::Hello => now.duration_since(c.opened) > HANDSHAKE,
                ConnState::Closing => c.out.is_empty(),
            };
            if stale && !c.closed {
                c.closed = true;
            }
            if c.closed && matches!(c.state, ConnState::Attached(_)) {
                detached = true;
            }
        }
        self.conns.retain(|c| !c.closed);
        if detached && self.attached_mut().is_none() {
            log!("daemon detached");
            self.unattached_since = Some(now);
            if self.sent_mid_line {
                self.stdout.resync();
                self.sent_mid_line = false;
            }
        }
        if now.duration_since(self.last_heartbeat) >= HEARTBEAT {
            self.last_heartbeat = now;
            if let Some(conn) = self.attached_mut() {
                let _ = Frame::new(Kind::Heartbeat, Vec::new()).encode(&mut conn.out);
            }
        }
        if let Some(stop) = self.stopping.as_mut() {
            if self.exit.is_none() && now >= stop.deadline {
                let pgid = self.child.as_ref().map(|c| c.id.pid as i32);
                let signal = if stop.phase == 0 { Signal::SIGTERM } else { Signal::SIGKILL };
                if let Some(pgid) = pgid {
                    log!("child still running: sending {signal} to its group");
                    let _ = nix::sys::signal::killpg(Pid::from_raw(pgid), signal);
                }
                stop.phase = (stop.phase + 1).min(2);
                stop.deadline = now + TERM_GRACE;
            }
        }
        if let (Some(timeout), Some(since)) = (self.req.orphan_timeout_ms, self.unattached_since) {
            if self.stopping.is_none() && now.duration_since(since) >= Duration::from_millis(timeout) {
                log!("no daemon attached for {timeout} ms (orphanTimeout): stopping");
                self.stop_child(Then::Exit);
            }
        }
        if self.exit.is_some() {
            // An acknowledged exit was sent after all output; a stop with no daemon to
            // tell, or an exit nobody came for within the linger, ends it regardless.
            let stopping_to_exit = matches!(self.stopping, Some(Stopping { then: Then::Exit, .. }));
            let nobody = self.attached_mut().is_none();
            let lingered = self.exited_at.is_some_and(|t| now.duration_since(t) >= EXIT_LINGER);
            if (self.exit_acked && self.stdout_drained()) || (stopping_to_exit && nobody) || lingered {
                if self.stdout.len() > 0 {
                    log!("exiting with {} stdout bytes no daemon collected", self.stdout.len());
                }
                self.done = true;
            }
        }
    }

    /// Whether to stop reading the child's stdout for now: a daemon is attached but
    /// has not taken what is already buffered. Flow control, not loss: only output
    /// with no daemon attached is ever dropped.
    fn stdout_paused(&self) -> bool {
        let attached = self.conns.iter().find(|c| matches!(c.state, ConnState::Attached(_)) && !c.closed);
        attached.is_some_and(|c| c.out.len() >= CONN_HIGH_WATER || self.stdout.len() >= self.stdout.capacity() / 2)
    }

    fn stdout_drained(&self) -> bool {
        self.child.as_ref().is_none_or(|c| c.stdout.is_none()) && self.stdout.len() == 0
    }

    /// Moves buffered stdout to the attached daemon, then the exit once all output is out.
    fn pump(&mut self) {
        let drained_before_exit = self.child.as_ref().is_none_or(|c| c.stdout.is_none());
        let exit = self.exit;
        let Some(i) = self.conns.iter().position(|c| matches!(c.state, ConnState::Attached(_)) && !c.closed) else {
            return;
        };
        while self.stdout.len() > 0 && self.conns[i].out.len() < CONN_HIGH_WATER {
            let chunk = self.stdout.take(CHUNK);
            self.sent_mid_line = chunk.last() != Some(&b'\n');
            let _ = Frame::new(Kind::Stdout, chunk).encode(&mut self.conns[i].out);
        }
        if let Some(exit) = exit {
            let conn = &mut self.conns[i];
            if drained_before_exit && self.stdout.len() == 0 && !conn.exit_sent {
                conn.exit_sent = true;
                let _ = Frame::json(Kind::Exited, &exit).encode(&mut conn.out);
            }
        }
    }

    fn flush_conns(&mut self) {
        for i in 0..self.conns.len() {
            self.flush_conn(i);
        }
    }

    fn flush_conn(&mut self, i: usize) {
        if let Some(c) = self.conns.get_mut(i) {
            while !c.out.is_empty() && !c.closed {
                match c.stream.write(&c.out) {
                    Ok(n) => {
                        c.out.drain(..n);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => c.closed = true,
                }
            }
        }
    }

    fn cleanup(&mut self) {
        let _ = std::fs::remove_file(&self.socket_path);
        let _ = std::fs::remove_file(&self.record_path);
        log!("exiting");
    }
}

/// The attach protocol version this supervisor speaks (the test-only override, else the build's).
fn set_nonblocking(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).map_err(std::io::Error::from)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).map_err(std::io::Error::from)?;
    Ok(())
}
