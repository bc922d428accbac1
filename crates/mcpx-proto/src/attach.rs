//! The attach protocol between the daemon and a supervisor (`docs/attach-protocol.md`),
//! version 1: the fixed preamble, the frame codec and the JSON bodies of the
//! control frames. No IO: sockets belong to the daemon and the supervisor.
//!
//! Wire format. Each side first sends a 12-byte preamble: the magic `MCPXATT1`
//! followed by its major and minor version as big-endian `u16`s. The preamble does
//! not depend on serde, so an old peer and a new one always read enough of each
//! other to refuse cleanly. Then frames follow, each a 5-byte header (payload
//! length as a big-endian `u32`, then the kind byte) and the payload. A payload over
//! [`MAX_FRAME`] bytes is a protocol error, never an allocation. Frames of a kind a
//! peer does not know are ignored, and so are unknown JSON fields.

use serde::{Deserialize, Serialize};

/// The magic that opens every attach connection.
pub const MAGIC: [u8; 8] = *b"MCPXATT1";

/// Length of the preamble: magic, major, minor.
pub const PREAMBLE_LEN: usize = 12;

/// Length of a frame header: payload length (`u32`) and kind (`u8`).
pub const HEADER_LEN: usize = 5;

/// The largest frame payload, in bytes (1 MiB). Larger data is split across frames.
pub const MAX_FRAME: usize = 1 << 20;

/// A protocol version. Peers with the same major interoperate; a daemon also adopts
/// supervisors one major older. Minor versions only add frames and fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Version {
    /// Incompatible changes.
    pub major: u16,
    /// Compatible additions.
    pub minor: u16,
}

impl Version {
    /// The version this build speaks.
    pub const CURRENT: Version = Version { major: 1, minor: 2 };

    /// The first version whose peers send heartbeats only while they wait for the other
    /// side (`docs/attach-protocol.md`, "Heartbeat"); older ones send one every second
    /// and take 10 s without one as a hang.
    pub const HEARTBEATS_ON_DEMAND: Version = Version { major: 1, minor: 2 };

    /// Whether a peer speaking `self` sends a heartbeat every second and expects one
    /// back just as often (versions before [`Version::HEARTBEATS_ON_DEMAND`]).
    pub fn beats_every_second(self) -> bool {
        self < Version::HEARTBEATS_ON_DEMAND
    }

    /// Whether a daemon speaking `self` can adopt a supervisor speaking `supervisor`:
    /// the same major, or one older.
    pub fn daemon_can_adopt(self, supervisor: Version) -> bool {
        supervisor.major == self.major || supervisor.major + 1 == self.major
    }

    /// The version this process speaks: [`Version::CURRENT`]. Built with the
    /// `test-hooks` feature, the test-only `MCPX_TEST_ATTACH_VERSION` (`major.minor`)
    /// replaces it, so tests can play an older or newer peer; read once per process.
    pub fn ours() -> Version {
        #[cfg(feature = "test-hooks")]
        {
            static V: std::sync::OnceLock<Option<Version>> = std::sync::OnceLock::new();
            let claimed = V.get_or_init(|| {
                let v = std::env::var("MCPX_TEST_ATTACH_VERSION").ok()?;
                let (major, minor) = v.split_once('.')?;
                Some(Version { major: major.parse().ok()?, minor: minor.parse().ok()? })
            });
            if let Some(v) = claimed {
                return *v;
            }
        }
        Version::CURRENT
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What can go wrong reading the attach protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    /// The peer does not speak the attach protocol at all.
    #[error("not an mcpx attach connection (bad magic)")]
    BadMagic,
    /// A frame announced a payload over [`MAX_FRAME`].
    #[error("frame of {0} bytes is over the {MAX_FRAME}-byte maximum")]
    TooLarge(usize),
    /// A control frame's JSON body is malformed.
    #[error("malformed {kind} frame: {message}")]
    BadBody {
        /// The frame kind.
        kind: &'static str,
        /// The parse error.
        message: String,
    },
}

/// Encodes a preamble.
pub fn encode_preamble(version: Version) -> [u8; PREAMBLE_LEN] {
    let mut out = [0u8; PREAMBLE_LEN];
    out[..8].copy_from_slice(&MAGIC);
    out[8..10].copy_from_slice(&version.major.to_be_bytes());
    out[10..12].copy_from_slice(&version.minor.to_be_bytes());
    out
}

/// Decodes a preamble from exactly [`PREAMBLE_LEN`] bytes.
pub fn decode_preamble(bytes: &[u8; PREAMBLE_LEN]) -> Result<Version, AttachError> {
    if bytes[..8] != MAGIC {
        return Err(AttachError::BadMagic);
    }
    Ok(Version { major: u16::from_be_bytes([bytes[8], bytes[9]]), minor: u16::from_be_bytes([bytes[10], bytes[11]]) })
}

/// Frame kinds. Values are fixed forever; new kinds get new numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// S→D, first frame: [`Hello`].
    Hello = 1,
    /// D→S, answer to the hello: [`Attach`]; takes over from any attached daemon.
    Attach = 2,
    /// S→D: a daemon with a newer epoch attached; this connection is closed next.
    Superseded = 3,
    /// S→D: bytes the child wrote to stdout.
    Stdout = 4,
    /// S→D: bytes the child wrote to stderr.
    Stderr = 5,
    /// S→D: the child exited: [`ExitStatus`].
    Exited = 6,
    /// Both ways, every second; a peer silent for 10 s is gone. Empty payload.
    Heartbeat = 7,
    /// D→S: part of one message for the child's stdin; more parts follow.
    Stdin = 8,
    /// D→S: the last part of a message; the supervisor writes the whole message to
    /// the child only now, so a daemon dying mid-message leaves nothing half-written.
    StdinEnd = 9,
    /// D→S: close the child's stdin.
    CloseStdin = 10,
    /// D→S: send a signal to the child's process group; payload: the number as a
    /// big-endian `i32`.
    Signal = 11,
    /// D→S: stop the child and start it again from the same spec. Answered with
    /// [`Kind::Restarted`].
    Restart = 12,
    /// D→S: stop the child (close stdin, wait, SIGTERM the group, wait, SIGKILL) and
    /// exit once a daemon has acknowledged the exit.
    Terminate = 13,
    /// D→S: keep this MCP session (JSON, opaque to the supervisor) for the next daemon.
    StoreSession = 14,
    /// D→S: the exit was seen; the supervisor may remove its files and exit.
    AckExit = 15,
    /// S→D: a new child runs after [`Kind::Restart`]: [`Restarted`].
    Restarted = 17,
    /// D→S (1.1): keep this era (JSON, opaque to the supervisor) for the next daemon,
    /// in place of a session: a modern server (MCP 2026-07-28) has no session to
    /// resume, only the facts `server/discover` gave. Storing an era forgets a
    /// stored session and the reverse; a restart forgets both. A 1.0 supervisor
    /// ignores the frame, and its hello then reports no era: the next daemon restarts
    /// the server.
    StoreEra = 18,
}

impl Kind {
    /// The kind for a byte, `None` for kinds this build does not know (ignored).
    pub fn from_u8(b: u8) -> Option<Kind> {
        use Kind::*;
        Some(match b {
            1 => Hello,
            2 => Attach,
            3 => Superseded,
            4 => Stdout,
            5 => Stderr,
            6 => Exited,
            7 => Heartbeat,
            8 => Stdin,
            9 => StdinEnd,
            10 => CloseStdin,
            11 => Signal,
            12 => Restart,
            13 => Terminate,
            14 => StoreSession,
            15 => AckExit,
            17 => Restarted,
            18 => StoreEra,
            _ => return None,
        })
    }
}

/// One frame of a kind this build knows (the decoder skips the others) and its
/// payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// What the frame is.
    pub kind: Kind,
    /// The payload.
    pub payload: Vec<u8>,
}

impl Frame {
    /// A frame of `kind` carrying `payload`.
    pub fn new(kind: Kind, payload: Vec<u8>) -> Frame {
        Frame { kind, payload }
    }

    /// A frame whose payload is `body` as JSON.
    pub fn json<T: Serialize>(kind: Kind, body: &T) -> Frame {
        Frame::new(kind, serde_json::to_vec(body).unwrap_or_default())
    }

    /// The payload parsed as JSON.
    pub fn body<'a, T: Deserialize<'a>>(&'a self, kind: &'static str) -> Result<T, AttachError> {
        serde_json::from_slice(&self.payload).map_err(|e| AttachError::BadBody { kind, message: e.to_string() })
    }

    /// Appends the encoded frame to `out`.
    ///
    /// Errors: [`AttachError::TooLarge`] when the payload is over [`MAX_FRAME`].
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), AttachError> {
        if self.payload.len() > MAX_FRAME {
            return Err(AttachError::TooLarge(self.payload.len()));
        }
        out.extend_from_slice(&(self.payload.len() as u32).to_be_bytes());
        out.push(self.kind as u8);
        out.extend_from_slice(&self.payload);
        Ok(())
    }
}

/// Appends the frames that carry one message to a server's stdin
/// (`docs/attach-protocol.md`, "Frames": `Stdin` parts, the last one `StdinEnd`):
/// `message` and a newline, cut into payloads of at most [`MAX_FRAME`] bytes. They are
/// the frames [`Frame::new`] would make of each cut, encoded straight from `message`
/// with no copy of it in between, and queued after whatever `out` holds, so several
/// messages go out in one write.
pub fn encode_stdin_message(message: &[u8], out: &mut Vec<u8>) {
    let total = message.len() + 1;
    out.reserve(total + HEADER_LEN * total.div_ceil(MAX_FRAME));
    let mut at = 0;
    while at < total {
        let len = (total - at).min(MAX_FRAME);
        let last = at + len == total;
        out.extend_from_slice(&(len as u32).to_be_bytes());
        out.push(if last { Kind::StdinEnd } else { Kind::Stdin } as u8);
        // Every part but the last is all message; the last ends with the newline.
        out.extend_from_slice(&message[at..(at + len).min(message.len())]);
        if last {
            out.push(b'\n');
        }
        at += len;
    }
}

/// Reads frames out of a byte stream fed in arbitrary pieces.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    start: usize,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> FrameDecoder {
        FrameDecoder::default()
    }

    /// Adds bytes read from the peer.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held, the frames already taken out included until they are compacted
    /// away: with every frame taken after each push, at most 64 KiB plus twice the
    /// largest frame ([`HEADER_LEN`] + [`MAX_FRAME`]) plus the last push.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next complete frame, if one is buffered.
    ///
    /// Errors: [`AttachError::TooLarge`] as soon as a header announces an oversize
    /// payload; the connection cannot be trusted after that.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, AttachError> {
        loop {
            let avail = &self.buf[self.start..];
            if avail.len() < HEADER_LEN {
                return Ok(None);
            }
            let len = u32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]]) as usize;
            if len > MAX_FRAME {
                return Err(AttachError::TooLarge(len));
            }
            if avail.len() < HEADER_LEN + len {
                return Ok(None);
            }
            let kind = Kind::from_u8(avail[4]);
            let payload = kind.map(|_| avail[HEADER_LEN..HEADER_LEN + len].to_vec());
            self.start += HEADER_LEN + len;
            if self.start > 64 * 1024 && self.start * 2 > self.buf.len() {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            // A kind this build does not know is skipped (the protocol's rule).
            if let (Some(kind), Some(payload)) = (kind, payload) {
                return Ok(Some(Frame { kind, payload }));
            }
        }
    }
}

/// The state of the supervised child, as the hello reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChildState {
    /// The child runs.
    Running,
    /// The child exited; see [`Hello::exit`].
    Exited,
}

/// How the child ended; a code and a signal are kept distinct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    /// The exit code, when it exited by itself.
    pub code: Option<i32>,
    /// The signal that killed it.
    pub signal: Option<i32>,
    /// When, in seconds since the Unix epoch.
    pub at: u64,
}

/// A process and the start time that identifies it (pids are reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessId {
    /// The pid.
    pub pid: u32,
    /// Its start time as the platform reports it (`mcpx_platform::process_start_time`).
    pub start_time: u64,
}

/// Who a server instance is: the fields by which the daemon's pool, schema cache and
/// status know it. The daemon fills it in when it starts an instance; the launch
/// request hands it to the supervisor, whose record keeps it for the next daemon.
/// On the wire its fields are top-level fields of the record and the launch request
/// (`#[serde(flatten)]`), as in version 1.0.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Identity {
    /// The server's configured name.
    pub server: String,
    /// The server's full fingerprint, with the resolved executable's identity: the
    /// instance key.
    pub fingerprint: String,
    /// The fingerprint as written, without the executable's identity: the schema
    /// cache key.
    pub cache_key: String,
    /// The pool key, for example `global` or `session:<id>`.
    pub key: String,
    /// `shared` or `exclusive`.
    pub sharing: String,
}

/// The supervisor's record, `sup/<id>.json` in the runtime directory, written
/// atomically. Also the identity part of the hello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The instance id (also the socket's and record's file name).
    pub id: String,
    /// Who the instance is (top-level fields on the wire).
    #[serde(flatten)]
    pub identity: Identity,
    /// The supervisor.
    pub supervisor: ProcessId,
    /// The child, while one runs or until its exit is acknowledged.
    pub child: Option<ProcessId>,
    /// The boot the processes belong to.
    pub boot_id: String,
    /// The attach protocol the supervisor speaks.
    pub protocol: Version,
    /// The supervisor's build.
    pub build: String,
    /// The epoch of the last daemon that attached (0: none yet).
    pub last_epoch: u32,
    /// The child's exit, once it happened.
    pub exit: Option<ExitStatus>,
}

/// The supervisor's first frame on a connection.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hello {
    /// The record's fields.
    pub record: Record,
    /// Running or exited.
    pub state: ChildState,
    /// The exit, when exited.
    pub exit: Option<ExitStatus>,
    /// Stdout bytes buffered while no daemon was attached (sent after the attach).
    pub stdout_buffered: u64,
    /// Stdout bytes dropped because the buffer was full, since the start.
    pub stdout_dropped: u64,
    /// Stderr bytes that fell out of the ring, since the start.
    pub stderr_dropped: u64,
    /// The stdout buffer's capacity (`bufferBytes`).
    pub buffer_capacity: u64,
    /// The epoch the next daemon should attach with (last + 1).
    pub next_epoch: u32,
    /// The MCP session the previous daemon stored, opaque JSON; `None` when none was
    /// stored (the daemon died during `initialize`): the instance must be restarted.
    pub session: Option<Box<serde_json::value::RawValue>>,
    /// The era the previous daemon stored with [`Kind::StoreEra`] (1.1), opaque JSON;
    /// absent from a 1.0 supervisor's hello, and when none was stored (a legacy
    /// server, whose [`Hello::session`] says all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub era: Option<Box<serde_json::value::RawValue>>,
}

/// The daemon's answer to the hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attach {
    /// The epoch this daemon uses in upstream ids; must be newer than the last.
    pub epoch: u32,
}

/// A new child after a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restarted {
    /// The new child.
    pub child: ProcessId,
}

/// What the daemon hands a new supervisor: the server to run and who it is.
/// Sent as JSON on the supervisor's stdin at launch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LaunchRequest {
    /// The instance id: the names of the socket and the record.
    pub id: String,
    /// Who the instance is, copied into the record (top-level fields on the wire).
    #[serde(flatten)]
    pub identity: Identity,
    /// The runtime directory's `sup` folder, where the socket and record go.
    pub dir: std::path::PathBuf,
    /// The command as written in the configuration (for messages: never expanded).
    pub command: String,
    /// The executable, resolved.
    pub program: std::path::PathBuf,
    /// Arguments.
    pub args: Vec<String>,
    /// The complete environment.
    pub env: Vec<(String, String)>,
    /// Working directory.
    pub cwd: Option<std::path::PathBuf>,
    /// The unattached stdout buffer (`bufferBytes`).
    pub buffer_bytes: u64,
    /// The largest stdin message accepted (`maxMessageBytes`).
    pub max_message_bytes: u64,
    /// Stop the child and exit after this long without a daemon (`orphanTimeout`),
    /// milliseconds; `None`: never.
    pub orphan_timeout_ms: Option<u64>,
    /// Log file for the supervisor itself.
    pub log: Option<std::path::PathBuf>,
    /// The kernel confinement the supervisor applies to the server between `fork` and
    /// `exec`, every time it starts it (`mcpx.sandbox`: `docs/configuration.md`,
    /// "Sandbox"); absent: unconfined. A supervisor that cannot apply it does not start
    /// the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<mcpx_platform::confine::Policy>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frames of `message` the plain way: the message and its newline cut at
    /// [`MAX_FRAME`], each cut a [`Frame`].
    fn cut(message: &[u8]) -> Vec<Frame> {
        let whole = [message, b"\n"].concat();
        let parts: Vec<&[u8]> = whole.chunks(MAX_FRAME).collect();
        let kind = |i: usize| if i + 1 == parts.len() { Kind::StdinEnd } else { Kind::Stdin };
        parts.iter().enumerate().map(|(i, p)| Frame::new(kind(i), p.to_vec())).collect()
    }

    #[test]
    fn a_stdin_message_encodes_as_its_cut_frames_at_every_boundary() {
        for len in [0, 1, MAX_FRAME - 1, MAX_FRAME, MAX_FRAME + 1, 2 * MAX_FRAME - 1, 2 * MAX_FRAME] {
            let message: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let mut wire = b"queued".to_vec();
            encode_stdin_message(&message, &mut wire);
            let mut plain = b"queued".to_vec();
            cut(&message).iter().for_each(|f| f.encode(&mut plain).unwrap());
            assert!(wire == plain, "a message of {len} bytes");
        }
    }

    #[test]
    fn a_burst_of_stdin_messages_decodes_in_order_from_any_split() {
        let messages: Vec<Vec<u8>> = (0..40).map(|i| format!(r#"{{"id":{i}}}"#).into_bytes()).collect();
        let mut wire = Vec::new();
        messages.iter().for_each(|m| encode_stdin_message(m, &mut wire));
        for piece in [1, 2, 5, 7, 64, wire.len()] {
            let mut decoder = FrameDecoder::new();
            let mut got = Vec::new();
            for chunk in wire.chunks(piece) {
                decoder.push(chunk);
                while let Some(frame) = decoder.next_frame().unwrap() {
                    assert_eq!(frame.kind, Kind::StdinEnd);
                    got.push(frame.payload);
                }
            }
            let want: Vec<Vec<u8>> = messages.iter().map(|m| [&m[..], b"\n"].concat()).collect();
            assert_eq!(got, want, "pieces of {piece} bytes");
        }
    }

    #[test]
    fn preamble_round_trip_and_bad_magic() {
        let p = encode_preamble(Version { major: 1, minor: 7 });
        assert_eq!(decode_preamble(&p), Ok(Version { major: 1, minor: 7 }));
        let mut bad = p;
        bad[0] = b'X';
        assert_eq!(decode_preamble(&bad), Err(AttachError::BadMagic));
        assert!(Version { major: 2, minor: 0 }.daemon_can_adopt(Version { major: 1, minor: 3 }));
        assert!(!Version { major: 1, minor: 0 }.daemon_can_adopt(Version { major: 2, minor: 0 }));
    }

    #[test]
    fn frames_survive_any_split_and_oversize_is_an_error() {
        let mut wire = Vec::new();
        let frames = vec![Frame::new(Kind::Stdout, b"hello\n".to_vec()), Frame::new(Kind::Heartbeat, vec![])];
        for f in &frames {
            f.encode(&mut wire).unwrap();
        }
        // A frame of a kind this build does not know, in the middle: skipped.
        let unknown = [0, 0, 0, 2, 200, 1, 2];
        let heartbeat_at = wire.len() - HEADER_LEN;
        wire.splice(heartbeat_at..heartbeat_at, unknown);
        for cut in 0..wire.len() {
            let mut d = FrameDecoder::new();
            let mut got = Vec::new();
            for piece in [&wire[..cut], &wire[cut..]] {
                d.push(piece);
                while let Some(f) = d.next_frame().unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(got, frames, "cut at {cut}");
        }
        let mut d = FrameDecoder::new();
        d.push(&((MAX_FRAME as u32 + 1).to_be_bytes()));
        d.push(&[4]);
        assert_eq!(d.next_frame(), Err(AttachError::TooLarge(MAX_FRAME + 1)));
        assert!(Frame::new(Kind::Stdout, vec![0; MAX_FRAME + 1]).encode(&mut Vec::new()).is_err());
    }

    /// Today's encodings, captured before the identity fields moved into [`Identity`]:
    /// the record file (pretty, as the supervisor writes it), the hello and the launch
    /// request. Each must decode, and encode back to the same bytes.
    const RECORD: &str = include_str!("../tests/fixtures/record-v1.json");
    const RECORD_FRESH: &str = include_str!("../tests/fixtures/record-v1-fresh.json");
    const HELLO: &str = include_str!("../tests/fixtures/hello-v1.json");
    const LAUNCH: &str = include_str!("../tests/fixtures/launch-request-v1.json");
    const LAUNCH_MINIMAL: &str = include_str!("../tests/fixtures/launch-request-v1-minimal.json");

    #[test]
    fn record_files_of_version_1_decode_and_encode_unchanged() {
        for fixture in [RECORD, RECORD_FRESH] {
            let record: Record = serde_json::from_str(fixture).unwrap();
            assert_eq!(serde_json::to_string_pretty(&record).unwrap(), fixture);
        }
        let record: Record = serde_json::from_str(RECORD).unwrap();
        assert_eq!(record.child.map(|c| c.pid), Some(4243));
        assert_eq!(record.identity.server, "fake");
        assert_eq!(record.identity.key, "worktree:/home/u/src/app");
        assert_eq!(record.identity.sharing, "exclusive");
        // A later minor version may add fields: they are ignored.
        let newer = RECORD.replacen('{', r#"{"added_in_1_1": [1, 2],"#, 1);
        assert_eq!(serde_json::from_str::<Record>(&newer).unwrap(), record);
    }

    #[test]
    fn hellos_and_launch_requests_of_version_1_decode_and_encode_unchanged() {
        let hello: Hello = serde_json::from_str(HELLO).unwrap();
        assert_eq!(serde_json::to_string(&hello).unwrap(), HELLO);
        assert_eq!(hello.record, serde_json::from_str::<Record>(RECORD).unwrap());
        // A 1.1 hello adds the era; a 1.0 daemon reading it ignores the field.
        let with_era = HELLO.replacen('{', r#"{"era":{"protocolVersion":"2026-07-28"},"#, 1);
        let hello: Hello = serde_json::from_str(&with_era).unwrap();
        assert_eq!(hello.era.map(|e| e.get().to_owned()).as_deref(), Some(r#"{"protocolVersion":"2026-07-28"}"#));
        assert_eq!(Kind::from_u8(18), Some(Kind::StoreEra));
        for fixture in [LAUNCH, LAUNCH_MINIMAL] {
            let request: LaunchRequest = serde_json::from_str(fixture).unwrap();
            assert_eq!(serde_json::to_string(&request).unwrap(), fixture);
            assert_eq!(request.identity.cache_key, "3f2a9c0d1e4b5a6f");
        }
    }
}
