//! An attach-protocol connection (`docs/attach-protocol.md`) over any byte stream,
//! and the daemon's side of the handshake. The codec is `mcpx_proto::attach`; this
//! module owns the stream and the decoder's buffer, so the handshake, the frame
//! reader and the frame writer share one way of reading and writing frames, and
//! all of it runs over `tokio::io::duplex` in tests.

use std::time::Duration;

use mcpx_proto::attach::{self, Attach, AttachError, Frame, FrameDecoder, Hello, Kind, Version};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};

/// How much one read from the peer takes at most, in bytes.
const READ_CHUNK: usize = 64 * 1024;

/// One attach connection: the stream, split into a [`FrameReader`] and a
/// [`FrameWriter`] that can go to separate tasks.
#[derive(Debug)]
pub struct AttachConn<S> {
    reader: FrameReader<ReadHalf<S>>,
    writer: FrameWriter<WriteHalf<S>>,
}

impl<S: AsyncRead + AsyncWrite> AttachConn<S> {
    /// A connection over `stream`, nothing read or written yet.
    pub fn new(stream: S) -> AttachConn<S> {
        let (rd, wr) = tokio::io::split(stream);
        AttachConn { reader: FrameReader::new(rd), writer: FrameWriter::new(wr) }
    }

    /// Reads the peer's 12-byte preamble; see [`FrameReader::read_preamble`].
    pub async fn read_preamble(&mut self) -> Result<Version, ConnError> {
        self.reader.read_preamble().await
    }

    /// The next frame; see [`FrameReader::read_frame`].
    pub async fn read_frame(&mut self) -> Result<Option<Frame>, ConnError> {
        self.reader.read_frame().await
    }

    /// Sends one frame; see [`FrameWriter::write_frame`].
    pub async fn write_frame(&mut self, frame: &Frame) -> Result<(), ConnError> {
        self.writer.write_frame(frame).await
    }

    /// The reading and the writing half, for a reader task and a writer task.
    pub fn split(self) -> (FrameReader<ReadHalf<S>>, FrameWriter<WriteHalf<S>>) {
        (self.reader, self.writer)
    }

    /// The writing half, for the handshake's answer.
    pub fn writer(&mut self) -> &mut FrameWriter<WriteHalf<S>> {
        &mut self.writer
    }
}

/// Why a connection could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The stream failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The peer broke the protocol (bad magic, a frame over the maximum); the
    /// connection cannot be trusted after that.
    #[error("attach protocol error: {0}")]
    Protocol(#[from] AttachError),
}

/// The reading half of a connection: the stream and the frame decoder.
#[derive(Debug)]
pub struct FrameReader<R> {
    rd: R,
    decoder: FrameDecoder,
    buf: Box<[u8]>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader over `rd`.
    pub fn new(rd: R) -> FrameReader<R> {
        FrameReader { rd, decoder: FrameDecoder::new(), buf: vec![0; READ_CHUNK].into_boxed_slice() }
    }

    /// Reads the peer's 12-byte preamble, which comes before any frame.
    ///
    /// Errors: the stream ends or fails first ([`ConnError::Io`]); the magic is not
    /// the attach protocol's ([`ConnError::Protocol`]).
    pub async fn read_preamble(&mut self) -> Result<Version, ConnError> {
        let mut preamble = [0u8; attach::PREAMBLE_LEN];
        self.rd.read_exact(&mut preamble).await?;
        Ok(attach::decode_preamble(&preamble)?)
    }

    /// The next frame of a kind this build knows (the decoder skips the others), or
    /// `None` when the peer closed the stream. Cancel-safe: bytes already read stay
    /// in the decoder for the next call.
    ///
    /// Errors: the stream fails ([`ConnError::Io`]); a frame announces a payload over
    /// the maximum ([`ConnError::Protocol`]).
    pub async fn read_frame(&mut self) -> Result<Option<Frame>, ConnError> {
        loop {
            if let Some(frame) = self.decoder.next_frame()? {
                return Ok(Some(frame));
            }
            let n = self.rd.read(&mut self.buf).await?;
            if n == 0 {
                return Ok(None);
            }
            self.decoder.push(&self.buf[..n]);
        }
    }
}

/// The writing half of a connection: the stream and the bytes queued for it.
#[derive(Debug)]
pub struct FrameWriter<W> {
    wr: W,
    out: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    /// A writer over `wr`.
    pub fn new(wr: W) -> FrameWriter<W> {
        FrameWriter { wr, out: Vec::new() }
    }

    /// Queues this side's preamble; [`FrameWriter::flush`] sends it.
    pub fn queue_preamble(&mut self, version: Version) {
        self.out.extend_from_slice(&attach::encode_preamble(version));
    }

    /// Queues a frame; [`FrameWriter::flush`] sends what is queued in one write.
    ///
    /// Errors: the payload is over the maximum (nothing is queued).
    pub fn queue(&mut self, frame: &Frame) -> Result<(), AttachError> {
        frame.encode(&mut self.out)
    }

    /// Queues the frames of one message for the server's stdin (its text without the
    /// newline; see [`attach::encode_stdin_message`]); [`FrameWriter::flush`] sends it.
    pub fn queue_message(&mut self, message: &[u8]) {
        attach::encode_stdin_message(message, &mut self.out);
    }

    /// Bytes queued and not yet sent.
    pub fn pending(&self) -> usize {
        self.out.len()
    }

    /// Writes everything queued.
    ///
    /// Errors: the stream fails; what was queued is dropped.
    pub async fn flush(&mut self) -> Result<(), ConnError> {
        let written = self.wr.write_all(&self.out).await;
        let flushed = match written {
            Ok(()) => self.wr.flush().await,
            Err(e) => Err(e),
        };
        self.out.clear();
        Ok(flushed?)
    }

    /// Sends one frame (after anything already queued).
    ///
    /// Errors: the payload is over the maximum, or the stream fails.
    pub async fn write_frame(&mut self, frame: &Frame) -> Result<(), ConnError> {
        self.queue(frame)?;
        self.flush().await
    }
}

/// The frames that carry one message to the server's stdin: `Stdin` frames of at
/// most the maximum payload, the last one `StdinEnd`, so the supervisor writes the
/// message only once it is whole. `bytes` includes the newline.
pub fn stdin_frames(bytes: &[u8]) -> impl Iterator<Item = Frame> + '_ {
    let mut chunks = bytes.chunks(attach::MAX_FRAME).peekable();
    std::iter::from_fn(move || {
        let chunk = chunks.next()?;
        let kind = if chunks.peek().is_some() { Kind::Stdin } else { Kind::StdinEnd };
        Some(Frame::new(kind, chunk.to_vec()))
    })
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

impl From<ConnError> for AttachFailure {
    fn from(e: ConnError) -> AttachFailure {
        match e {
            ConnError::Io(e) => AttachFailure::Unreachable(e.to_string()),
            ConnError::Protocol(e) => AttachFailure::Protocol(e.to_string()),
        }
    }
}

/// What the handshake learnt about the supervisor.
#[derive(Debug)]
pub struct Handshake {
    /// The version it speaks.
    pub theirs: Version,
    /// Its hello.
    pub hello: Hello,
    /// The epoch this daemon attached with: the hello's `next_epoch`, at least 1.
    pub epoch: u32,
}

/// The daemon's side of the handshake: reads the supervisor's preamble, refuses a
/// major version this daemon cannot adopt, waits for the hello (skipping any other
/// frame), and answers with this daemon's preamble and an `Attach` frame carrying
/// the hello's next epoch. Each of the three reads has `deadline`.
///
/// Errors: [`AttachFailure::Incompatible`] (nothing is sent, the supervisor is left
/// alone); [`AttachFailure::Unreachable`] when the stream fails, ends or a deadline
/// passes; [`AttachFailure::Protocol`] for a bad preamble or hello.
pub async fn handshake<S: AsyncRead + AsyncWrite>(
    conn: &mut AttachConn<S>,
    deadline: Duration,
) -> Result<Handshake, AttachFailure> {
    let timed = |what: &str| AttachFailure::Unreachable(format!("no {what} within {deadline:?}"));
    let theirs = tokio::time::timeout(deadline, conn.read_preamble()).await.map_err(|_| timed("preamble"))??;
    let ours = Version::ours();
    if !ours.daemon_can_adopt(theirs) {
        return Err(AttachFailure::Incompatible { theirs, ours });
    }
    let hello = tokio::time::timeout(deadline, async {
        loop {
            match conn.read_frame().await? {
                Some(f) if f.kind == Kind::Hello => {
                    return f.body::<Hello>("hello").map_err(|e| AttachFailure::Protocol(e.to_string()));
                }
                Some(_) => continue,
                None => return Err(AttachFailure::Unreachable("the supervisor closed the connection".into())),
            }
        }
    })
    .await
    .map_err(|_| timed("hello"))??;
    let epoch = hello.next_epoch.max(1);
    // The preamble and the answer go out in one write.
    conn.writer().queue_preamble(ours);
    conn.write_frame(&Frame::json(Kind::Attach, &Attach { epoch })).await?;
    Ok(Handshake { theirs, hello, epoch })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::testing::{greet, hello, pair};

    #[tokio::test]
    async fn frames_cross_a_connection_in_order_and_end_with_none() {
        let (mut a, mut b) = pair();
        let big = vec![b'x'; attach::MAX_FRAME];
        a.write_frame(&Frame::new(Kind::Stdout, b"one\n".to_vec())).await.unwrap();
        let writer = tokio::spawn(async move {
            a.write_frame(&Frame::new(Kind::Stderr, big)).await.unwrap();
            a.write_frame(&Frame::new(Kind::Heartbeat, Vec::new())).await.unwrap();
        });
        assert_eq!(b.read_frame().await.unwrap(), Some(Frame::new(Kind::Stdout, b"one\n".to_vec())));
        let second = b.read_frame().await.unwrap().unwrap();
        assert_eq!((second.kind, second.payload.len()), (Kind::Stderr, attach::MAX_FRAME));
        assert_eq!(b.read_frame().await.unwrap(), Some(Frame::new(Kind::Heartbeat, Vec::new())));
        writer.await.unwrap();
        assert_eq!(b.read_frame().await.unwrap(), None, "the peer is gone");
    }

    #[tokio::test]
    async fn a_frame_over_the_maximum_is_a_protocol_error() {
        let (mut a, mut b) = pair();
        let mut header = ((attach::MAX_FRAME + 1) as u32).to_be_bytes().to_vec();
        header.push(Kind::Stdout as u8);
        a.writer().out.extend_from_slice(&header);
        a.writer().flush().await.unwrap();
        assert!(matches!(b.read_frame().await, Err(ConnError::Protocol(AttachError::TooLarge(_)))));
        assert!(a.write_frame(&Frame::new(Kind::Stdin, vec![0; attach::MAX_FRAME + 1])).await.is_err());
    }

    #[test]
    fn a_message_goes_to_stdin_in_frames_that_end_with_stdin_end() {
        let small: Vec<Frame> = stdin_frames(b"{}\n").collect();
        assert_eq!(small, [Frame::new(Kind::StdinEnd, b"{}\n".to_vec())]);
        let big = vec![b'a'; 2 * attach::MAX_FRAME + 1];
        let kinds: Vec<(Kind, usize)> = stdin_frames(&big).map(|f| (f.kind, f.payload.len())).collect();
        assert_eq!(kinds, [(Kind::Stdin, attach::MAX_FRAME), (Kind::Stdin, attach::MAX_FRAME), (Kind::StdinEnd, 1)]);
    }

    #[tokio::test]
    async fn the_handshake_skips_early_frames_and_answers_with_the_next_epoch() {
        let (mut daemon, mut sup) = pair();
        let early = Frame::new(Kind::Heartbeat, Vec::new());
        greet(&mut sup, Version::CURRENT, &[early, Frame::json(Kind::Hello, &hello(4))]).await;
        let shook = handshake(&mut daemon, Duration::from_secs(5)).await.unwrap();
        assert_eq!((shook.theirs, shook.epoch), (Version::CURRENT, 4));
        assert_eq!(shook.hello.record.identity.server, "fake");
        assert_eq!(sup.read_preamble().await.unwrap(), Version::ours());
        let answer = sup.read_frame().await.unwrap().unwrap();
        assert_eq!(answer.kind, Kind::Attach);
        assert_eq!(answer.body::<Attach>("attach").unwrap(), Attach { epoch: 4 });
    }

    #[tokio::test]
    async fn a_first_hello_is_answered_with_epoch_one() {
        let (mut daemon, mut sup) = pair();
        greet(&mut sup, Version::CURRENT, &[Frame::json(Kind::Hello, &hello(0))]).await;
        assert_eq!(handshake(&mut daemon, Duration::from_secs(5)).await.unwrap().epoch, 1);
    }

    #[tokio::test]
    async fn an_incompatible_supervisor_is_refused_before_anything_is_sent() {
        let (mut daemon, mut sup) = pair();
        let newer = Version { major: Version::CURRENT.major + 1, minor: 0 };
        greet(&mut sup, newer, &[Frame::json(Kind::Hello, &hello(2))]).await;
        let refused = handshake(&mut daemon, Duration::from_secs(5)).await;
        assert!(matches!(refused, Err(AttachFailure::Incompatible { theirs, .. }) if theirs == newer));
        drop(daemon);
        assert_eq!(sup.read_frame().await.unwrap(), None, "the daemon sent nothing");
    }

    #[tokio::test]
    async fn bad_magic_a_closed_stream_and_silence_fail_the_handshake() {
        let (mut daemon, mut sup) = pair();
        sup.writer().out.extend_from_slice(b"HTTP/1.1 200");
        sup.writer().flush().await.unwrap();
        let bad = handshake(&mut daemon, Duration::from_secs(5)).await;
        assert!(matches!(bad, Err(AttachFailure::Protocol(m)) if m.contains("bad magic")));

        let (mut daemon, mut sup) = pair();
        greet(&mut sup, Version::CURRENT, &[]).await;
        drop(sup);
        let closed = handshake(&mut daemon, Duration::from_secs(5)).await;
        assert!(matches!(closed, Err(AttachFailure::Unreachable(m)) if m.contains("closed the connection")));

        let (mut daemon, _sup) = pair();
        let silent = handshake(&mut daemon, Duration::from_millis(20)).await;
        assert!(matches!(silent, Err(AttachFailure::Unreachable(m)) if m == "no preamble within 20ms"));
    }
}
