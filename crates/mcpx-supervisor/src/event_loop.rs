//! The supervisor's loop: one `poll(2)` over the listening socket, the daemon
//! connections, the child's pipes and (on Linux) its pidfd. Every trigger becomes one
//! [`Event`], handled in [`Supervisor::handle`]; the timers follow in
//! [`Supervisor::tick`]. The child ([`crate::child`]) and the connections
//! ([`crate::conn`]) keep their own state; this module decides what one does to the
//! other: stdout and stderr to the attached daemon, stdin and control frames to the
//! child, the exit to the daemon, and the record to disk.

use std::io::ErrorKind;
use std::os::fd::AsFd;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use mcpx_platform::ChildExitWake;
use mcpx_platform::fs::Dir;
use mcpx_proto::attach::{
    ChildState, ExitStatus, Frame, Hello, Kind, LaunchRequest, ProcessId, Record, Restarted, Version,
};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use serde_json::value::RawValue;

use crate::buffer::{StderrRing, StdoutBuffer};
use crate::child::{self, Child, Output, Reaped, SpawnError, StopSequence};
use crate::conn::{self, Conn, Conns, Peer, Request};
use crate::log::log;

/// How long an exit status waits for a daemon to acknowledge it.
const EXIT_LINGER: Duration = Duration::from_secs(600);
/// Where nothing wakes the loop when a process exits (no `ppoll`, as on macOS), it
/// checks for exits this often.
const REAP_WITHOUT_WAKE: Duration = Duration::from_millis(100);
/// The one buffer every read from a socket or pipe goes through, in bytes: all of it stays
/// resident once a large message has passed, so it is small (`docs/profile.md`, "The
/// supervisor's memory"); a 200 KiB `tools/list` answer takes 13 reads, not 4.
const READ_BUF: usize = 16 * 1024;

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

/// A stop under way: the sequence, and what follows it.
#[derive(Debug)]
struct Stopping {
    sequence: StopSequence,
    then: Then,
}

/// The supervisor's whole state.
pub struct Supervisor {
    /// The launch request: the server to (re)start and the identity in the record.
    req: LaunchRequest,
    listener: UnixListener,
    /// The supervisors' directory (`<runtime>/sup`), open, holding the two below.
    dir: Dir,
    /// `<id>.sock`, the socket it listens on.
    socket_name: String,
    /// `<id>.json`, its record. Both are removed when the supervisor exits.
    record_name: String,
    /// The supervisor process and the boot it belongs to, for the record.
    me: ProcessId,
    boot_id: String,
    conns: Conns,
    /// The server; `None` only after a restart that could not start it.
    child: Option<Child>,
    stdout: StdoutBuffer,
    stderr: StderrRing,
    /// Whether the stream handed to daemons so far ends mid-line.
    sent_mid_line: bool,
    /// How the child ended, once it has; reset by a restart.
    exit: Option<ExitStatus>,
    /// When it ended, for the linger.
    exited_at: Option<Instant>,
    /// Whether a daemon acknowledged the exit.
    exit_acked: bool,
    stopping: Option<Stopping>,
    /// The MCP session a daemon stored, handed to the next one in the hello.
    session: Option<Box<RawValue>>,
    /// The era of a modern server a daemon stored (attach protocol 1.1), handed to
    /// the next one in the hello in place of a session.
    era: Option<Box<RawValue>>,
    last_epoch: u32,
    /// Since when no daemon is attached: the orphan timer.
    unattached_since: Option<Instant>,
    /// When a stdout drop was last logged (at most one line a second).
    last_drop_log: Option<Instant>,
    /// What wakes the loop when any child exits (`None` where it cannot: it then
    /// collects exits every [`REAP_WITHOUT_WAKE`]).
    exits: Option<ChildExitWake>,
    /// The buffer reads go through ([`READ_BUF`]), allocated once, not per read.
    buf: Box<[u8]>,
    done: bool,
}

impl Supervisor {
    /// A supervisor for `child`, already spawned from `req`, serving on `listener`
    /// (bound in `dir`, the request's directory, open). `me` is this process and `boot_id` the boot's id,
    /// both for the record, which is written now.
    pub fn new(
        req: LaunchRequest,
        listener: UnixListener,
        dir: Dir,
        me: ProcessId,
        boot_id: String,
        child: Child,
        exits: Option<ChildExitWake>,
    ) -> Supervisor {
        let (socket_name, record_name) = (format!("{}.sock", req.id), format!("{}.json", req.id));
        let capacity = usize::try_from(req.buffer_bytes).unwrap_or(usize::MAX);
        let now = Instant::now();
        let sup = Supervisor {
            listener,
            dir,
            socket_name,
            record_name,
            me,
            boot_id,
            conns: Conns::default(),
            child: Some(child),
            stdout: StdoutBuffer::new(capacity),
            stderr: StderrRing::new(),
            sent_mid_line: false,
            exit: None,
            exited_at: None,
            exit_acked: false,
            stopping: None,
            session: None,
            era: None,
            last_epoch: 0,
            unattached_since: Some(now),
            last_drop_log: None,
            exits,
            buf: vec![0; READ_BUF].into_boxed_slice(),
            done: false,
            req,
        };
        sup.write_record();
        sup
    }

    /// The child's pid and start time.
    pub fn child_id(&self) -> Option<ProcessId> {
        self.child.as_ref().map(Child::id)
    }

    /// Runs until the supervisor's work is done, then removes its socket and record;
    /// returns the process exit status.
    pub fn run(mut self) -> i32 {
        let mut events = Vec::new();
        while !self.done {
            events.clear();
            if let Err(e) = self.wait(&mut events) {
                log!("poll failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            if self.exits.is_none() {
                events.push(Event::Reap);
            }
            for ev in events.drain(..) {
                self.handle(ev);
            }
            // Stdin the daemon just sent goes to the pipe in this turn; only what the
            // pipe cannot take waits for it to poll writable.
            if let Some(c) = self.child.as_mut() {
                c.write_stdin();
            }
            self.tick(Instant::now());
            self.pump();
            self.conns.flush_all();
            // After a burst of large messages, the buffers' memory goes back to the kernel.
            let shed = self.conns.shed() | self.stdout.shed() | self.child.as_mut().is_some_and(Child::shed);
            if shed {
                mcpx_platform::release_free_heap();
            }
        }
        self.cleanup();
        0
    }

    /// When the loop must wake with nothing else happening: the earliest of the
    /// connections' deadlines, the stop sequence's next signal, the orphan timeout and
    /// the exit's linger. `None`: only an event can change anything, so the loop sleeps
    /// until one comes (`docs/profile.md`, "Idle").
    fn next_deadline(&self) -> Option<Instant> {
        let orphan = match (self.req.orphan_timeout_ms, self.unattached_since, &self.stopping) {
            (Some(ms), Some(since), None) => Some(since + Duration::from_millis(ms)),
            _ => None,
        };
        let stop = self.stopping.as_ref().filter(|_| self.exit.is_none()).map(|s| s.sequence.deadline());
        let linger = self.exited_at.map(|t| t + EXIT_LINGER);
        [self.conns.next_deadline(), orphan, stop, linger].into_iter().flatten().min()
    }

    /// Polls every source and lists what is ready.
    fn wait(&mut self, events: &mut Vec<Event>) -> std::io::Result<()> {
        let mut fds: Vec<PollFd<'_>> = vec![PollFd::new(self.listener.as_fd(), PollFlags::POLLIN)];
        let mut what: Vec<Event> = vec![Event::Accept];
        for (i, c) in self.conns.iter().enumerate() {
            let flags = if c.peer.has_output() { PollFlags::POLLIN | PollFlags::POLLOUT } else { PollFlags::POLLIN };
            fds.push(PollFd::new(c.fd(), flags));
            what.push(Event::ConnReadable(i));
        }
        if let Some(child) = &self.child {
            let sources = [
                (
                    child.output_fd(Output::Stdout).filter(|_| self.stdout_budget() > 0),
                    PollFlags::POLLIN,
                    Event::Stdout,
                ),
                (child.output_fd(Output::Stderr), PollFlags::POLLIN, Event::Stderr),
                (child.stdin_fd(), PollFlags::POLLOUT, Event::StdinWritable),
                (child.pidfd(), PollFlags::POLLIN, Event::Reap),
            ];
            for (fd, flags, ev) in sources {
                if let Some(fd) = fd {
                    fds.push(PollFd::new(fd, flags));
                    what.push(ev);
                }
            }
        }
        // Rounded up to the millisecond, so a wake never comes just before its deadline.
        let timeout = self.next_deadline().map(|at| {
            let left = at.saturating_duration_since(Instant::now());
            Duration::from_millis(u64::try_from(left.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX))
        });
        match &self.exits {
            Some(exits) => {
                if exits.poll(&mut fds, timeout)? {
                    events.push(Event::Reap);
                    return Ok(());
                }
            }
            None => {
                let wait = timeout.map_or(REAP_WITHOUT_WAKE, |t| t.min(REAP_WITHOUT_WAKE));
                poll(&mut fds, PollTimeout::from(u16::try_from(wait.as_millis()).unwrap_or(u16::MAX)))?;
            }
        }
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
            Event::ConnWritable(i) => self.conns.flush(i),
            Event::Stdout => self.read_output(Output::Stdout),
            Event::Stderr => self.read_output(Output::Stderr),
            Event::StdinWritable => {
                if let Some(c) = self.child.as_mut() {
                    c.write_stdin();
                }
            }
            Event::Reap => {
                while let Some(reaped) = child::reap_any() {
                    self.reaped(reaped);
                }
            }
        }
    }

    /// Accepts every waiting connection from this user, and greets it.
    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if !conn::same_user(&stream) || stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let peer = Peer::new(&self.hello(), self.req.max_message_bytes, Instant::now());
                    self.conns.push(Conn::new(stream, peer));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => {
                    log!("accept failed: {e}");
                    return;
                }
            }
        }
    }

    /// The hello a connecting daemon is greeted with.
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
            era: self.era.clone(),
        }
    }

    /// The record as of now (`docs/attach-protocol.md`, "The record").
    fn record(&self) -> Record {
        Record {
            id: self.req.id.clone(),
            identity: self.req.identity.clone(),
            supervisor: self.me,
            child: self.child_id(),
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
        if let Err(e) = mcpx_platform::fs::write_atomic(&self.dir, &self.record_name, &bytes, 0o600) {
            log!("cannot write {}: {e}", self.dir.join(&self.record_name).display());
        }
    }

    /// Reads what connection `i` sent and carries out its requests in order.
    fn read_conn(&mut self, i: usize) {
        let mut buf = std::mem::take(&mut self.buf);
        loop {
            let more = self.conns.get_mut(i).is_some_and(|c| c.read(&mut buf, Instant::now()));
            while let Some(request) = self.conns.get_mut(i).and_then(|c| c.peer.next_request()) {
                self.request(i, request);
            }
            if !more {
                break;
            }
        }
        self.buf = buf;
    }

    /// Carries out one request from connection `i`.
    fn request(&mut self, i: usize, request: Request) {
        match request {
            Request::Attach(epoch) => self.attach(i, epoch),
            Request::Stdin(message) => {
                if !self.child.as_mut().is_some_and(|c| c.queue_message(&message)) {
                    log!("dropped a stdin message: the child's stdin is closed");
                }
            }
            Request::CloseStdin => {
                if let Some(c) = self.child.as_mut() {
                    c.close_stdin();
                }
            }
            Request::Signal(signal) => {
                if let Some(c) = &self.child {
                    c.signal_group(signal);
                }
            }
            Request::Restart => self.stop_child(Then::Restart),
            Request::Terminate => self.stop_child(Then::Exit),
            // A server has one era: a session (legacy) or the facts of a modern one.
            Request::StoreSession(session) => {
                self.session = Some(session);
                self.era = None;
            }
            Request::StoreEra(era) => {
                self.era = Some(era);
                self.session = None;
            }
            Request::AckExit => {
                if self.exit.is_some() {
                    log!("the exit was acknowledged");
                    self.exit_acked = true;
                }
            }
        }
    }

    /// A daemon attaches with an epoch; a newer one takes over from the attached one.
    fn attach(&mut self, i: usize, epoch: u32) {
        if !self.conns.attach(i, epoch, self.last_epoch, &self.stderr.contents()) {
            return;
        }
        self.last_epoch = epoch;
        self.unattached_since = None;
        log!(
            "daemon attached with epoch {epoch} ({} stdout bytes buffered, {} dropped)",
            self.stdout.len(),
            self.stdout.dropped
        );
        self.write_record();
    }

    /// Reads an output pipe until it is empty (or, for stdout, until the buffer and
    /// the attached daemon's connection can take no more: see
    /// [`Supervisor::stdout_budget`]).
    fn read_output(&mut self, which: Output) {
        let mut buf = std::mem::take(&mut self.buf);
        loop {
            let max = match which {
                Output::Stdout => self.stdout_budget().min(buf.len()),
                Output::Stderr => buf.len(),
            };
            if max == 0 {
                // The rest stays in the pipe and the server waits: flow control.
                break;
            }
            let Some(n) = self.child.as_mut().and_then(|c| c.read(which, &mut buf[..max])) else { break };
            match which {
                Output::Stdout => self.stdout_read(&buf[..n]),
                Output::Stderr => self.stderr_read(&buf[..n]),
            }
            if n < max {
                // The pipe held less than asked: it is empty now, and the next poll
                // says when it is not (no read spent on `WouldBlock`).
                break;
            }
        }
        self.buf = buf;
    }

    /// How many stdout bytes may be read now: any amount with no daemon attached,
    /// otherwise what the buffer and the connection's high-water mark can take (see
    /// [`StdoutBuffer::read_budget`]), so that attached output is never dropped. 0
    /// stops polling the child's stdout until the daemon catches up.
    fn stdout_budget(&self) -> usize {
        self.stdout.read_budget(self.conns.attached().map(|c| c.peer.stdout_room()))
    }

    /// Takes stdout read within [`Supervisor::stdout_budget`]. With a daemon attached
    /// it goes to that daemon at once, dropping nothing; with none, it accumulates in
    /// the buffer, whose overflow drops whole lines.
    fn stdout_read(&mut self, bytes: &[u8]) {
        if self.conns.attached().is_some() {
            let dropped = self.stdout.append(bytes);
            self.pump();
            self.log_drop(dropped, "the rest of a line cut while no daemon was attached");
        } else {
            let dropped = self.stdout.push(bytes);
            self.log_drop(dropped, "stdout buffer full while no daemon is attached");
        }
    }

    /// Logs that `dropped` stdout bytes just went, and why: at most a line a second,
    /// so a flooding server does not flood the log; the total stays exact.
    fn log_drop(&mut self, dropped: u64, why: &str) {
        if dropped > 0 && self.last_drop_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            self.last_drop_log = Some(Instant::now());
            log!("{why}: {dropped} bytes dropped, {} so far", self.stdout.dropped);
        }
    }

    /// Keeps stderr in the ring and forwards it to the attached daemon.
    fn stderr_read(&mut self, bytes: &[u8]) {
        self.stderr.push(bytes);
        if let Some(c) = self.conns.attached_mut() {
            c.peer.send(Frame::new(Kind::Stderr, bytes.to_vec()));
        }
    }

    /// Records the child's exit (orphaned descendants are only reaped), then restarts
    /// it when a restart was waiting for the exit.
    fn reaped(&mut self, reaped: Reaped) {
        let Some(exit) = self.child.as_mut().and_then(|c| c.reaped(&reaped)) else { return };
        self.exit = Some(exit);
        self.exited_at = Some(Instant::now());
        self.write_record();
        if let Some(Stopping { then: Then::Restart, .. }) = self.stopping {
            self.stopping = None;
            self.restart();
        }
    }

    /// Starts a new child from the same request, dropping the old one's pipes unread.
    fn restart(&mut self) {
        self.child = None;
        self.session = None;
        self.era = None;
        match Child::spawn(&self.req) {
            Ok(child) => {
                let id = child.id();
                self.child = Some(child);
                self.exit = None;
                self.exited_at = None;
                self.exit_acked = false;
                if let Some(c) = self.conns.attached_mut() {
                    c.peer.send(Frame::json(Kind::Restarted, &Restarted { child: id }));
                }
                self.write_record();
            }
            Err(SpawnError::Watch(e)) => {
                log!("cannot watch the restarted child: {e}");
                self.write_record();
            }
            Err(e @ SpawnError::Start { .. }) => {
                log!("restart failed: {e}");
                // Keep reporting the old exit; the daemon sees the restart fail.
                self.stderr.push(format!("mcpx supervise: restart failed: {e}\n").as_bytes());
                if let Some(c) = self.conns.attached_mut() {
                    c.peer.send(Frame::json(Kind::Exited, &self.exit));
                }
            }
        }
    }

    /// Starts the stop sequence (close stdin now, SIGTERM the group after a grace,
    /// SIGKILL it after another), or goes straight to what follows it when the child
    /// has already exited.
    fn stop_child(&mut self, then: Then) {
        let now = Instant::now();
        if self.exit.is_some() {
            match then {
                Then::Restart => self.restart(),
                Then::Exit => self.stopping = Some(Stopping { sequence: StopSequence::finished(now), then }),
            }
            return;
        }
        if let Some(c) = self.child.as_mut() {
            c.close_stdin();
        }
        self.stopping = Some(Stopping { sequence: StopSequence::start(now), then });
    }

    /// Timers: silent and stale connections, the stop sequence, the
    /// orphan timeout and the exit's linger.
    fn tick(&mut self, now: Instant) {
        if self.conns.sweep(now) && self.conns.attached().is_none() {
            log!("daemon detached");
            self.unattached_since = Some(now);
            if self.sent_mid_line {
                self.stdout.resync();
                self.sent_mid_line = false;
            }
        }
        if let (Some(stop), None) = (self.stopping.as_mut(), self.exit) {
            if let Some(signal) = stop.sequence.due(now) {
                if let Some(c) = &self.child {
                    log!("child still running: sending {signal} to its group");
                    c.signal_group(signal);
                }
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
            let nobody = self.conns.attached().is_none();
            let lingered = self.exited_at.is_some_and(|t| now.duration_since(t) >= EXIT_LINGER);
            if (self.exit_acked && self.stdout_drained()) || (stopping_to_exit && nobody) || lingered {
                if self.stdout.len() > 0 {
                    log!("exiting with {} stdout bytes no daemon collected", self.stdout.len());
                }
                self.done = true;
            }
        }
    }

    /// Whether the child's stdout reached end of file and all of it left the buffer.
    fn stdout_drained(&self) -> bool {
        self.stdout_closed() && self.stdout.len() == 0
    }

    fn stdout_closed(&self) -> bool {
        self.child.as_ref().is_none_or(|c| !c.output_open(Output::Stdout))
    }

    /// Moves buffered stdout to the attached daemon, then the exit once all output is out.
    fn pump(&mut self) {
        let stdout_closed = self.stdout_closed();
        let Some(conn) = self.conns.attached_mut() else { return };
        if let Some(mid_line) = conn.peer.send_stdout(&mut self.stdout) {
            self.sent_mid_line = mid_line;
        }
        if let Some(exit) = &self.exit {
            if stdout_closed && self.stdout.len() == 0 {
                conn.peer.send_exit_once(exit);
            }
        }
    }

    fn cleanup(&mut self) {
        let _ = self.dir.remove(&self.socket_name);
        let _ = self.dir.remove(&self.record_name);
        log!("exiting");
    }
}
