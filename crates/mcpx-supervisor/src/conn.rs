//! The daemon connections (`docs/attach-protocol.md`, "The connection"): the
//! handshake (the supervisor's preamble and hello, the daemon's preamble, attach by
//! epoch and takeover), frame decoding, the assembly of stdin messages from `Stdin`
//! and `StdinEnd` parts, and each connection's output buffer with its high-water mark.
//!
//! The protocol state of one connection is [`Peer`], which never touches a socket:
//! bytes go in through [`Peer::receive`], requests for the supervisor come out of
//! [`Peer::next_request`], and frames for the daemon wait in its output buffer.
//! [`Conn`] adds the stream, and [`Conns`] is the set of connections, of which at most
//! one is attached.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use mcpx_proto::attach::{self, Attach, ExitStatus, Frame, FrameDecoder, Hello, Kind, PREAMBLE_LEN, Version};
use nix::sys::signal::Signal;
use serde_json::value::RawValue;

use crate::buffer::{KEEP_BYTES, StdoutBuffer};
use crate::log::log;

/// A daemon of attach protocol 1.0 or 1.1, which heartbeats every second, silent for
/// this long is gone (its connection closes: a detach). A newer daemon sends
/// heartbeats only while it waits for the supervisor, so its silence means nothing:
/// its death closes the socket.
pub const SILENCE: Duration = Duration::from_secs(10);
/// A connection that has not attached within this long after the accept is closed.
pub const HANDSHAKE: Duration = Duration::from_secs(10);
/// Stdout moves into a connection only while its unsent output is under this (4 MiB).
pub const HIGH_WATER: usize = 4 << 20;
/// The most an output frame (`Stdout`, `Stderr`) carries, in bytes.
pub const CHUNK: usize = 64 * 1024;

/// What a daemon's frames ask of the supervisor, in the order they came.
#[derive(Debug)]
pub enum Request {
    /// `Attach` with this epoch; the supervisor decides ([`Conns::attach`]).
    Attach(u32),
    /// A whole message for the child's stdin (its `Stdin` parts and `StdinEnd`).
    Stdin(Vec<u8>),
    /// `CloseStdin`.
    CloseStdin,
    /// `Signal`, with a number that names a signal.
    Signal(Signal),
    /// `Restart`.
    Restart,
    /// `Terminate`.
    Terminate,
    /// `StoreSession`, with a payload that is JSON.
    StoreSession(Box<RawValue>),
    /// `StoreEra` (1.1), with a payload that is JSON.
    StoreEra(Box<RawValue>),
    /// `AckExit` (the supervisor ignores it until the child has exited).
    AckExit,
}

/// Where a connection is in the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Waiting for the daemon's preamble (the bytes gathered so far).
    Preamble(Vec<u8>),
    /// Preamble read; waiting for the `Attach` frame.
    Hello,
    /// The attached daemon, with its epoch.
    Attached(u32),
    /// Superseded or refused: flushed, then closed.
    Closing,
}

/// One connection's protocol state, without the socket.
#[derive(Debug)]
pub struct Peer {
    state: State,
    decoder: FrameDecoder,
    /// Encoded frames not yet written to the socket.
    out: Vec<u8>,
    /// When it was accepted: the handshake deadline runs from here.
    opened: Instant,
    /// When bytes last came: any bytes count as hearing from the daemon.
    last_heard: Instant,
    /// Whether the daemon heartbeats every second (a 1.0 or 1.1 daemon, or one whose
    /// preamble has not come yet), so its silence for [`SILENCE`] means it hung.
    beats: bool,
    /// The stdin message arriving in parts.
    stdin: StdinAssembly,
    /// Whether this connection was sent the exit, which goes once per connection.
    exit_sent: bool,
    /// Set on end of file, an IO error, a protocol error or staleness; a closed
    /// connection is read no more and is dropped at the next sweep.
    closed: bool,
}

impl Peer {
    /// A connection accepted at `now`. The supervisor speaks first: its preamble and
    /// `hello` are queued at once. Stdin messages over `max_message_bytes + 1` bytes
    /// are dropped.
    pub fn new(hello: &Hello, max_message_bytes: u64, now: Instant) -> Peer {
        let mut peer = Peer {
            state: State::Preamble(Vec::new()),
            decoder: FrameDecoder::new(),
            out: attach::encode_preamble(Version::ours()).to_vec(),
            opened: now,
            last_heard: now,
            beats: true,
            stdin: StdinAssembly::new(max_message_bytes),
            exit_sent: false,
            closed: false,
        };
        peer.send(Frame::json(Kind::Hello, hello));
        peer
    }

    /// Takes bytes read from the daemon at `now`: the preamble first (a bad magic
    /// closes the connection; no version is refused, the daemon has decided), then
    /// frames, which [`Peer::next_request`] decodes.
    pub fn receive(&mut self, mut bytes: &[u8], now: Instant) {
        self.last_heard = now;
        if let State::Preamble(got) = &mut self.state {
            let take = (PREAMBLE_LEN - got.len()).min(bytes.len());
            got.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            let Ok(preamble) = <[u8; PREAMBLE_LEN]>::try_from(got.as_slice()) else { return };
            match attach::decode_preamble(&preamble) {
                Ok(v) => {
                    log!("daemon speaking attach protocol {v} connected");
                    self.beats = v.beats_every_second();
                    self.state = State::Hello;
                }
                Err(e) => {
                    log!("dropped a connection: {e}");
                    self.closed = true;
                    return;
                }
            }
        }
        self.decoder.push(bytes);
    }

    /// The next thing the daemon asks, from the frames received so far. `Attach` is
    /// passed on from any connection; every other frame only once attached (others
    /// are logged and ignored), and `Stdin` parts only as a whole message. A
    /// malformed `Attach` body or an oversize frame closes the connection.
    pub fn next_request(&mut self) -> Option<Request> {
        while !self.closed {
            match self.decoder.next_frame() {
                Ok(Some(frame)) => {
                    if let Some(request) = self.request(frame) {
                        return Some(request);
                    }
                }
                Ok(None) => return None,
                Err(e) => {
                    log!("dropped a connection: {e}");
                    self.closed = true;
                }
            }
        }
        None
    }

    fn request(&mut self, frame: Frame) -> Option<Request> {
        let kind = frame.kind;
        if kind == Kind::Attach {
            match frame.body::<Attach>("attach") {
                Ok(req) => return Some(Request::Attach(req.epoch)),
                Err(_) => {
                    self.closed = true;
                    return None;
                }
            }
        }
        if !self.is_attached() {
            if kind != Kind::Heartbeat {
                log!("ignored a {kind:?} frame from a connection that has not attached");
            }
            return None;
        }
        match kind {
            Kind::Stdin | Kind::StdinEnd => self.stdin.push(&frame.payload, kind == Kind::StdinEnd).map(Request::Stdin),
            Kind::CloseStdin => Some(Request::CloseStdin),
            Kind::Signal => signal(&frame.payload).map(Request::Signal),
            Kind::Restart => Some(Request::Restart),
            Kind::Terminate => Some(Request::Terminate),
            Kind::StoreSession => match serde_json::from_slice(&frame.payload) {
                Ok(session) => Some(Request::StoreSession(session)),
                Err(e) => {
                    log!("ignored a malformed session: {e}");
                    None
                }
            },
            Kind::StoreEra => match serde_json::from_slice(&frame.payload) {
                Ok(era) => Some(Request::StoreEra(era)),
                Err(e) => {
                    log!("ignored a malformed era: {e}");
                    None
                }
            },
            Kind::AckExit => Some(Request::AckExit),
            // A daemon that heartbeats is waiting for an answer, or checks every second
            // (1.0, 1.1): it hears back at once. A daemon never answers a heartbeat, so
            // this cannot ping-pong.
            Kind::Heartbeat => {
                self.send(Frame::new(Kind::Heartbeat, Vec::new()));
                None
            }
            // The other kinds go the other way and mean nothing here.
            _ => None,
        }
    }

    /// Whether this connection attached (closed or not).
    pub fn is_attached(&self) -> bool {
        matches!(self.state, State::Attached(_))
    }

    /// Whether this is the attached daemon, still connected.
    pub fn is_live(&self) -> bool {
        self.is_attached() && !self.closed
    }

    /// Frees the memory of its empty output buffer, if it holds more than
    /// [`KEEP_BYTES`]; returns whether it did.
    pub fn shed(&mut self) -> bool {
        let shed = self.out.is_empty() && self.out.capacity() > KEEP_BYTES;
        if shed {
            self.out = Vec::new();
        }
        shed
    }

    /// Whether encoded frames wait to be written.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Whether it can take more stdout: its unsent output is under [`HIGH_WATER`].
    pub fn has_room(&self) -> bool {
        self.out.len() < HIGH_WATER
    }

    /// How many more stdout bytes it takes before its unsent output reaches
    /// [`HIGH_WATER`] (0 when it is there or past it).
    pub fn stdout_room(&self) -> usize {
        HIGH_WATER.saturating_sub(self.out.len())
    }

    /// Queues a frame for the daemon. A frame over the protocol's maximum is dropped;
    /// the supervisor's own frames never are.
    pub fn send(&mut self, frame: Frame) {
        let _ = frame.encode(&mut self.out);
    }

    /// Moves buffered stdout into `Stdout` frames of at most [`CHUNK`] bytes while
    /// the connection has room (see [`Peer::has_room`]). Returns whether the last
    /// frame ended mid-line, or `None` when nothing moved.
    pub fn send_stdout(&mut self, stdout: &mut StdoutBuffer) -> Option<bool> {
        let mut mid_line = None;
        while stdout.len() > 0 && self.has_room() {
            let chunk = stdout.take(CHUNK);
            mid_line = Some(chunk.last() != Some(&b'\n'));
            self.send(Frame::new(Kind::Stdout, chunk));
        }
        mid_line
    }

    /// Queues `Exited`, unless this connection was already sent it.
    pub fn send_exit_once(&mut self, exit: &ExitStatus) {
        if !std::mem::replace(&mut self.exit_sent, true) {
            self.send(Frame::json(Kind::Exited, exit));
        }
    }

    /// Whether the connection should go at `now`: attached, heartbeating every second
    /// and silent for over [`SILENCE`], not attached [`HANDSHAKE`] after the accept, or
    /// closing with all its output written.
    pub fn stale(&self, now: Instant) -> bool {
        match self.state {
            State::Closing => self.out.is_empty(),
            _ => self.deadline().is_some_and(|at| now > at),
        }
    }

    /// When this connection goes stale unless something happens first (see
    /// [`Peer::stale`]); `None` when only an event can end it (an attached daemon of
    /// 1.2 or later: end of file). The supervisor's poll sleeps until the earliest.
    pub fn deadline(&self) -> Option<Instant> {
        match self.state {
            State::Attached(_) => self.beats.then(|| self.last_heard + SILENCE),
            State::Preamble(_) | State::Hello => Some(self.opened + HANDSHAKE),
            // Due at once: the sweep after this turn drops it.
            State::Closing => self.out.is_empty().then_some(self.opened),
        }
    }
}

/// A `Signal` payload: a signal number as a big-endian `i32`. `None` when it is not
/// 4 bytes or names no signal.
fn signal(payload: &[u8]) -> Option<Signal> {
    let number = i32::from_be_bytes(<[u8; 4]>::try_from(payload).ok()?);
    Signal::try_from(number).ok()
}

/// One stdin message arriving as `Stdin` parts and a final `StdinEnd`
/// (`docs/attach-protocol.md`, "message-atomic input").
#[derive(Debug)]
pub struct StdinAssembly {
    /// The parts so far.
    partial: Vec<u8>,
    /// The message grew over the limit: its parts are dropped until its end.
    discarding: bool,
    /// `max_message_bytes + 1` (a message and its newline).
    limit: usize,
}

impl StdinAssembly {
    /// An empty assembly for messages of at most `max_message_bytes` (plus a newline).
    pub fn new(max_message_bytes: u64) -> StdinAssembly {
        let limit = usize::try_from(max_message_bytes).unwrap_or(usize::MAX).saturating_add(1);
        StdinAssembly { partial: Vec::new(), discarding: false, limit }
    }

    /// Adds one part (`last`: the `StdinEnd`). Returns the whole message on its last
    /// part, unless it went over the limit (then it is dropped and logged).
    pub fn push(&mut self, part: &[u8], last: bool) -> Option<Vec<u8>> {
        if self.discarding {
            // The rest of a message already over the limit.
        } else if self.partial.len() + part.len() <= self.limit {
            self.partial.extend_from_slice(part);
        } else {
            self.partial = Vec::new();
            self.discarding = true;
            log!("dropped a stdin message over maxMessageBytes");
        }
        if !last {
            return None;
        }
        let discarded = std::mem::replace(&mut self.discarding, false);
        let message = std::mem::take(&mut self.partial);
        (!discarded).then_some(message)
    }
}

/// One daemon connection: a [`Peer`] and its stream (a `UnixStream`; tests use
/// in-memory streams).
#[derive(Debug)]
pub struct Conn<S = UnixStream> {
    stream: S,
    /// The protocol state; only [`Conn::read`] and [`Conn::flush`] touch the stream.
    pub peer: Peer,
}

impl<S: Read + Write> Conn<S> {
    /// A connection over `stream` (non-blocking).
    pub fn new(stream: S, peer: Peer) -> Conn<S> {
        Conn { stream, peer }
    }

    /// Reads once into `buf` and hands the bytes to the peer. Returns whether more
    /// may follow: the read filled `buf`. A shorter read took all the socket held,
    /// so the loop polls again rather than spend a read on `WouldBlock` (the poll is
    /// level-triggered: bytes that arrive in between wake it). End of file and read
    /// errors close the connection.
    pub fn read(&mut self, buf: &mut [u8], now: Instant) -> bool {
        while !self.peer.closed {
            match self.stream.read(buf) {
                Ok(0) => self.peer.closed = true,
                Ok(n) => {
                    self.peer.receive(&buf[..n], now);
                    return n == buf.len();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => self.peer.closed = true,
            }
        }
        false
    }

    /// Writes queued output until the socket is full; a write error closes the
    /// connection.
    pub fn flush(&mut self) {
        while !self.peer.out.is_empty() && !self.peer.closed {
            match self.stream.write(&self.peer.out) {
                Ok(n) => {
                    self.peer.out.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => self.peer.closed = true,
            }
        }
    }
}

impl<S: AsFd> Conn<S> {
    /// The socket, to poll.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }
}

/// Whether an accepted socket's peer is this user (`SO_PEERCRED` or `getpeereid`).
/// Any other uid, or one that cannot be read, is refused and logged.
pub fn same_user(stream: &UnixStream) -> bool {
    let me = nix::unistd::getuid().as_raw();
    match mcpx_platform::peer_uid(stream.as_fd()) {
        Ok(uid) if uid == me => true,
        Ok(uid) => {
            log!("refused a connection from uid {uid} (not {me})");
            false
        }
        Err(e) => {
            log!("refused a connection whose peer cannot be identified: {e}");
            false
        }
    }
}

/// The daemon connections, in accept order; indexes are stable until [`Conns::sweep`].
#[derive(Debug)]
pub struct Conns<S = UnixStream> {
    list: Vec<Conn<S>>,
}

impl<S> Default for Conns<S> {
    fn default() -> Self {
        Conns { list: Vec::new() }
    }
}

impl<S: Read + Write> Conns<S> {
    /// Adds an accepted connection.
    pub fn push(&mut self, conn: Conn<S>) {
        self.list.push(conn);
    }

    /// Connection `i`.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Conn<S>> {
        self.list.get_mut(i)
    }

    /// Every connection, in index order.
    pub fn iter(&self) -> impl Iterator<Item = &Conn<S>> {
        self.list.iter()
    }

    /// The attached daemon, if one is attached and connected.
    pub fn attached(&self) -> Option<&Conn<S>> {
        self.list.iter().find(|c| c.peer.is_live())
    }

    /// The attached daemon, to send it frames.
    pub fn attached_mut(&mut self) -> Option<&mut Conn<S>> {
        self.list.iter_mut().find(|c| c.peer.is_live())
    }

    /// Connection `i` attaches with `epoch`. Refused (the connection closes once
    /// flushed, and nothing more is sent) unless `epoch` is newer than
    /// `last_epoch`. Accepted: every other attached connection is sent `Superseded`
    /// and closes once flushed, and connection `i` is sent the whole `stderr` ring.
    /// Returns whether it was accepted.
    pub fn attach(&mut self, i: usize, epoch: u32, last_epoch: u32, stderr: &[u8]) -> bool {
        let Some(conn) = self.list.get_mut(i) else { return false };
        if epoch <= last_epoch {
            log!("refused an attach with epoch {epoch} (last was {last_epoch})");
            conn.peer.state = State::Closing;
            return false;
        }
        for (j, c) in self.list.iter_mut().enumerate() {
            if j != i && c.peer.is_attached() {
                c.peer.send(Frame::new(Kind::Superseded, Vec::new()));
                c.peer.state = State::Closing;
                log!("daemon with epoch {epoch} superseded");
            }
        }
        let peer = &mut self.list[i].peer;
        peer.state = State::Attached(epoch);
        for chunk in stderr.chunks(CHUNK) {
            peer.send(Frame::new(Kind::Stderr, chunk.to_vec()));
        }
        true
    }

    /// Frees the memory of every empty, large output buffer (see [`Peer::shed`]); returns
    /// whether any was.
    pub fn shed(&mut self) -> bool {
        self.list.iter_mut().fold(false, |shed, c| c.peer.shed() | shed)
    }

    /// The earliest of the connections' deadlines (see [`Peer::deadline`]).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.list.iter().filter_map(|c| c.peer.deadline()).min()
    }

    /// Drops closed and stale connections (see [`Peer::stale`]). Returns whether an
    /// attached one went, which is a detach.
    pub fn sweep(&mut self, now: Instant) -> bool {
        let mut detached = false;
        for c in &mut self.list {
            if c.peer.stale(now) {
                c.peer.closed = true;
            }
            detached |= c.peer.closed && c.peer.is_attached();
        }
        self.list.retain(|c| !c.peer.closed);
        detached
    }

    /// Writes connection `i`'s queued output (see [`Conn::flush`]).
    pub fn flush(&mut self, i: usize) {
        if let Some(c) = self.list.get_mut(i) {
            c.flush();
        }
    }

    /// Writes every connection's queued output.
    pub fn flush_all(&mut self) {
        self.list.iter_mut().for_each(Conn::flush);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use serde_json::json;

    use super::*;

    /// An in-memory stream: what the daemon sent, then `WouldBlock` (or end of file);
    /// it takes `room` bytes of output, then would block.
    #[derive(Default)]
    struct Mem {
        input: VecDeque<u8>,
        eof: bool,
        output: Vec<u8>,
        room: usize,
    }

    impl Read for Mem {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.input.is_empty() {
                return if self.eof { Ok(0) } else { Err(ErrorKind::WouldBlock.into()) };
            }
            let n = buf.len().min(self.input.len()).min(7);
            for (b, x) in buf.iter_mut().zip(self.input.drain(..n)) {
                *b = x;
            }
            Ok(n)
        }
    }

    impl Write for Mem {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.room);
            self.output.extend_from_slice(&buf[..n]);
            self.room -= n;
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A hello as it is on the wire (built from JSON, so it follows the protocol,
    /// not the struct's layout).
    fn hello() -> Hello {
        serde_json::from_value(json!({
            "record": {
                "id": "0123456789ab", "server": "fake", "fingerprint": "f", "cache_key": "c",
                "key": "global", "sharing": "shared",
                "supervisor": { "pid": 10, "start_time": 1 }, "child": { "pid": 11, "start_time": 2 },
                "boot_id": "b", "protocol": { "major": 1, "minor": 0 }, "build": "test",
                "last_epoch": 0, "exit": null,
            },
            "state": "running", "exit": null, "stdout_buffered": 0, "stdout_dropped": 0,
            "stderr_dropped": 0, "buffer_capacity": 1024, "next_epoch": 1, "session": null,
        }))
        .unwrap()
    }

    fn peer(now: Instant) -> Peer {
        Peer::new(&hello(), 16, now)
    }

    /// What a daemon sends: its preamble, then `frames`.
    fn daemon(frames: &[Frame]) -> Vec<u8> {
        let mut wire = attach::encode_preamble(Version::CURRENT).to_vec();
        for f in frames {
            f.encode(&mut wire).unwrap();
        }
        wire
    }

    fn attach_frame(epoch: u32) -> Frame {
        Frame::json(Kind::Attach, &Attach { epoch })
    }

    /// The frames in a supervisor's output, after its preamble.
    fn sent(out: &[u8]) -> Vec<Frame> {
        assert_eq!(out[..PREAMBLE_LEN], attach::encode_preamble(Version::ours()));
        decode(&out[PREAMBLE_LEN..])
    }

    fn decode(frames: &[u8]) -> Vec<Frame> {
        let mut d = FrameDecoder::new();
        d.push(frames);
        std::iter::from_fn(|| d.next_frame().unwrap()).collect()
    }

    fn requests(p: &mut Peer) -> Vec<Request> {
        std::iter::from_fn(|| p.next_request()).collect()
    }

    #[test]
    fn the_supervisor_speaks_first_with_its_preamble_and_hello() {
        let p = peer(Instant::now());
        let frames = sent(&p.out);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].kind, Kind::Hello);
        let greeted: Hello = frames[0].body("hello").unwrap();
        assert_eq!((greeted.next_epoch, greeted.record.identity.server.as_str()), (1, "fake"));
        assert_eq!(p.state, State::Preamble(Vec::new()));
    }

    #[test]
    fn the_preamble_may_come_in_any_pieces_and_a_bad_magic_closes() {
        let wire = daemon(&[attach_frame(1)]);
        for cut in 0..wire.len() {
            let mut p = peer(Instant::now());
            p.receive(&wire[..cut], Instant::now());
            let mut got = requests(&mut p);
            p.receive(&wire[cut..], Instant::now());
            got.extend(requests(&mut p));
            assert!(matches!(got[..], [Request::Attach(1)]), "cut at {cut}: {got:?}");
            assert_eq!(p.state, State::Hello, "the supervisor decides the attach");
        }
        let mut p = peer(Instant::now());
        let mut bad = wire.clone();
        bad[0] = b'X';
        p.receive(&bad, Instant::now());
        assert!(p.closed);
        assert!(p.next_request().is_none());
    }

    #[test]
    fn frames_before_the_attach_are_ignored_and_a_malformed_attach_closes() {
        let mut p = peer(Instant::now());
        let early = [
            Frame::new(Kind::Heartbeat, Vec::new()),
            Frame::new(Kind::StdinEnd, b"{}\n".to_vec()),
            Frame::new(Kind::Terminate, Vec::new()),
        ];
        p.receive(&daemon(&early), Instant::now());
        assert!(requests(&mut p).is_empty());
        let mut wire = Vec::new();
        Frame::new(Kind::Attach, b"not json".to_vec()).encode(&mut wire).unwrap();
        Frame::new(Kind::Attach, serde_json::to_vec(&Attach { epoch: 3 }).unwrap()).encode(&mut wire).unwrap();
        p.receive(&wire, Instant::now());
        assert!(requests(&mut p).is_empty(), "nothing is read after a malformed attach");
        assert!(p.closed);
    }

    #[test]
    fn an_oversize_frame_closes_the_connection() {
        let mut p = peer(Instant::now());
        let mut wire = daemon(&[]);
        wire.extend_from_slice(&((attach::MAX_FRAME as u32 + 1).to_be_bytes()));
        wire.push(Kind::Stdin as u8);
        p.receive(&wire, Instant::now());
        assert!(p.next_request().is_none());
        assert!(p.closed);
    }

    #[test]
    fn an_attached_daemons_frames_become_requests() {
        let mut p = peer(Instant::now());
        p.state = State::Attached(1);
        let frames = [
            Frame::new(Kind::Heartbeat, Vec::new()),
            Frame::new(Kind::Stdin, b"{\"a\":".to_vec()),
            Frame::new(Kind::Stdin, b"1}".to_vec()),
            Frame::new(Kind::StdinEnd, b"\n".to_vec()),
            Frame::new(Kind::Signal, 15i32.to_be_bytes().to_vec()),
            Frame::new(Kind::Signal, vec![0, 15]),
            Frame::new(Kind::Signal, 999i32.to_be_bytes().to_vec()),
            Frame::new(Kind::StoreSession, b"{\"protocolVersion\":\"x\"}".to_vec()),
            Frame::new(Kind::StoreSession, b"{not json".to_vec()),
            Frame::new(Kind::CloseStdin, Vec::new()),
            Frame::new(Kind::Restart, Vec::new()),
            Frame::new(Kind::Terminate, Vec::new()),
            Frame::new(Kind::AckExit, Vec::new()),
            Frame::new(Kind::Stdout, b"only the supervisor sends this".to_vec()),
        ];
        p.receive(&daemon(&frames)[PREAMBLE_LEN..], Instant::now());
        let got = requests(&mut p);
        let shown: Vec<String> = got
            .iter()
            .map(|r| match r {
                Request::Stdin(m) => format!("Stdin({})", String::from_utf8_lossy(m)),
                Request::StoreSession(s) => format!("StoreSession({})", s.get()),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            shown,
            [
                "Stdin({\"a\":1}\n)",
                "Signal(SIGTERM)",
                "StoreSession({\"protocolVersion\":\"x\"})",
                "CloseStdin",
                "Restart",
                "Terminate",
                "AckExit"
            ]
        );
    }

    #[test]
    fn stdin_messages_over_the_limit_are_dropped_whole() {
        // 16 bytes and a newline at most.
        let mut a = StdinAssembly::new(16);
        assert_eq!(a.push(b"0123456789", false), None);
        assert_eq!(a.push(b"abcdef\n", true), Some(b"0123456789abcdef\n".to_vec()));
        assert_eq!(a.push(b"0123456789", false), None);
        assert_eq!(a.push(b"abcdefgh", false), None, "over the limit: dropped");
        assert_eq!(a.push(b"x", false), None, "the rest of it too");
        assert_eq!(a.push(b"\n", true), None);
        assert_eq!(a.push(b"", false), None);
        assert_eq!(a.push(b"{}\n", true), Some(b"{}\n".to_vec()), "the next message is whole");
        assert_eq!(StdinAssembly::new(u64::MAX).limit, usize::MAX);
    }

    fn conns(n: usize, now: Instant) -> Conns<Mem> {
        let mut all = Conns::default();
        for _ in 0..n {
            all.push(Conn::new(Mem { room: usize::MAX, ..Mem::default() }, peer(now)));
        }
        all
    }

    fn kinds(conn: &Conn<Mem>) -> Vec<Kind> {
        sent(&conn.stream.output).iter().map(|f| f.kind).collect()
    }

    #[test]
    fn a_newer_epoch_takes_over_and_an_older_one_is_refused() {
        let now = Instant::now();
        let mut all = conns(3, now);
        assert!(all.attach(0, 1, 0, b"ring"));
        assert_eq!(all.list[0].peer.state, State::Attached(1));
        assert!(!all.attach(1, 1, 1, b"ring"), "an epoch no newer than the last is refused");
        assert_eq!(all.list[1].peer.state, State::Closing);
        assert!(all.attach(2, 2, 1, &vec![b'e'; CHUNK + 1]));
        assert_eq!(all.list[0].peer.state, State::Closing, "superseded");
        assert!(std::ptr::eq(all.attached().unwrap(), &all.list[2]));
        all.flush_all();
        assert_eq!(kinds(&all.list[0]), [Kind::Hello, Kind::Stderr, Kind::Superseded]);
        assert_eq!(kinds(&all.list[1]), [Kind::Hello], "a refused daemon is sent nothing more");
        assert_eq!(kinds(&all.list[2]), [Kind::Hello, Kind::Stderr, Kind::Stderr], "the ring, in chunks");
        assert!(!all.sweep(now), "closing connections go once flushed; no detach");
        assert_eq!(all.list.len(), 1);
        assert_eq!(all.list[0].peer.state, State::Attached(2));
    }

    #[test]
    fn silent_daemons_and_slow_handshakes_go_by_the_clock() {
        let t0 = Instant::now();
        let mut all = conns(2, t0);
        all.attach(0, 1, 0, b"");
        assert!(!all.sweep(t0 + HANDSHAKE));
        all.list[0].peer.receive(b"", t0 + Duration::from_secs(5));
        let later = t0 + HANDSHAKE + Duration::from_millis(1);
        assert!(!all.sweep(later), "the unattached one went; the attached one was heard from");
        assert_eq!(all.list.len(), 1);
        assert!(all.attached().is_some());
        assert!(all.sweep(t0 + Duration::from_secs(5) + SILENCE + Duration::from_millis(1)), "a detach");
        assert!(all.attached().is_none());
    }

    #[test]
    fn a_connection_reads_while_reads_fill_the_buffer_and_closes_at_end_of_file() {
        let now = Instant::now();
        let mut conn = Conn::new(Mem::default(), peer(now));
        conn.stream.input.extend(daemon(&[attach_frame(1)]));
        let mut buf = [0u8; 7];
        let mut reads = 0;
        while conn.read(&mut buf, now) {
            reads += 1;
        }
        assert!(reads > 1, "the stream hands out at most 7 bytes a read");
        assert!(matches!(requests(&mut conn.peer)[..], [Request::Attach(1)]));
        assert!(!conn.peer.closed, "an empty socket is not a closed one");
        conn.stream.eof = true;
        assert!(!conn.read(&mut buf, now));
        assert!(conn.peer.closed);
    }

    #[test]
    fn a_short_read_ends_the_reading_without_a_read_that_would_block() {
        let now = Instant::now();
        let mut conn = Conn::new(Mem::default(), peer(now));
        conn.stream.input.extend(b"MCPX");
        let mut buf = [0u8; 64];
        assert!(!conn.read(&mut buf, now), "4 bytes in a 64-byte buffer: all there was");
        assert!(conn.stream.input.is_empty() && !conn.peer.closed);
    }

    #[test]
    fn flushing_stops_when_the_socket_is_full_and_high_water_holds_stdout_back() {
        let mut conn = Conn::new(Mem { room: 5, ..Mem::default() }, peer(Instant::now()));
        let queued = conn.peer.out.len();
        conn.flush();
        assert_eq!(conn.peer.out.len(), queued - 5);
        conn.stream.room = usize::MAX;
        conn.flush();
        assert!(!conn.peer.has_output());
        assert!(conn.peer.has_room());
        let mut stdout = StdoutBuffer::new(HIGH_WATER * 2);
        stdout.push(&vec![b'x'; 100 * 1024]);
        stdout.push(b"\n{\"next\":");
        assert_eq!(conn.peer.send_stdout(&mut stdout), Some(true), "the last frame ends mid-line");
        assert_eq!(stdout.len(), 0);
        let lens: Vec<usize> = decode(&conn.peer.out).iter().map(|f| f.payload.len()).collect();
        assert_eq!(lens, [CHUNK, 100 * 1024 + 9 - CHUNK]);
        stdout.push(&vec![b'y'; HIGH_WATER]);
        assert_eq!(conn.peer.send_stdout(&mut stdout), Some(true), "a line of y, cut by the high-water mark");
        assert!(!conn.peer.has_room());
        let waiting = stdout.len();
        assert!(waiting > 0);
        assert_eq!(conn.peer.send_stdout(&mut stdout), None, "past the high-water mark stdout waits");
        assert_eq!(stdout.len(), waiting);
        let exit = ExitStatus { code: Some(0), signal: None, at: 1 };
        conn.peer.out.clear();
        conn.peer.send_exit_once(&exit);
        conn.peer.send_exit_once(&exit);
        let kinds: Vec<Kind> = decode(&conn.peer.out).iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [Kind::Exited], "the exit goes once");
    }

    /// The supervisor's attached path without a socket or a child: read within the
    /// budget, append, hand on; a daemon that takes a little at a time only slows the
    /// reads. A line of twice the high-water mark through a 4 KiB buffer arrives
    /// whole, nothing dropped.
    #[test]
    fn attached_stdout_within_the_read_budget_is_never_dropped() {
        let mut conn = Conn::new(Mem::default(), peer(Instant::now()));
        conn.peer.state = State::Attached(1);
        conn.flush();
        let mut stdout = StdoutBuffer::new(4096);
        let mut pipe: VecDeque<u8> = vec![b'x'; 2 * HIGH_WATER].into_iter().chain(*b"\n{}\n").collect();
        let sent = pipe.clone();
        let (mut stalls, mut round) = (0, 0);
        while !pipe.is_empty() || stdout.len() > 0 || conn.peer.has_output() {
            let budget = stdout.read_budget(Some(conn.peer.stdout_room())).min(CHUNK);
            if budget == 0 {
                stalls += 1;
            }
            let read: Vec<u8> = pipe.drain(..budget.min(pipe.len())).collect();
            assert_eq!(stdout.append(&read), 0);
            conn.peer.send_stdout(&mut stdout);
            assert!(stdout.len() <= stdout.capacity(), "{} bytes held", stdout.len());
            // The daemon reads 64 KiB every fourth round: slower than the pipe fills.
            round += 1;
            conn.stream.room = if round % 4 == 0 { CHUNK } else { 0 };
            conn.flush();
        }
        assert!(stalls > 0, "the daemon was behind at least once: flow control");
        assert_eq!(stdout.dropped, 0);
        let got: Vec<u8> = decode(&conn.stream.output[PREAMBLE_LEN..])
            .into_iter()
            .filter(|f| f.kind == Kind::Stdout)
            .flat_map(|f| f.payload)
            .collect();
        assert_eq!(got, Vec::from(sent));
    }
}
