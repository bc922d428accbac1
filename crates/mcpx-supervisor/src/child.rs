//! The server process a supervisor owns: spawning it from the launch request, its
//! three pipes and its pidfd, stdin written only as whole messages, closing stdin,
//! reaping, and the stop sequence (close stdin, SIGTERM, SIGKILL) as a state machine
//! driven by the caller's clock.
//!
//! [`StdinQueue`] and [`StopSequence`] are pure and tested here without a process;
//! [`Child`] wraps the pipes and the syscalls around them.

use std::io::{self, ErrorKind, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::process::{ChildStderr, ChildStdin, ChildStdout};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use mcpx_platform::PidFd;
use mcpx_platform::process::{CLOSE_GRACE, Detach, SpawnSpec, TERM_GRACE};
use mcpx_proto::attach::{ExitStatus, LaunchRequest, ProcessId};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::buffer::KEEP_BYTES;
use crate::log::log;

/// Why a server could not be started or watched.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The program could not be executed. The message is the one the daemon shows
    /// (`docs/attach-protocol.md`, "What `mcpx supervise` does"): ``cannot start
    /// `<command>`: <OS error>``, with the command as written in the configuration.
    #[error("cannot start `{command}`: {source}")]
    Start {
        /// The command as written (never the expanded program or arguments).
        command: String,
        /// The error of `fork`/`exec`.
        source: io::Error,
    },
    /// The server started, but its pipes could not be made non-blocking. The process
    /// is left running, without pipes; callers say what failed.
    #[error(transparent)]
    Watch(io::Error),
}

/// One of the server's two output pipes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Stdout: MCP messages, held for the daemon.
    Stdout,
    /// Stderr: logs, kept in the ring and forwarded.
    Stderr,
}

/// The running server and its pipes. Dropping it closes the pipes and leaves the
/// process running; exits are collected by [`reap_any`].
#[derive(Debug)]
pub struct Child {
    /// The pid and start time, which name this process incarnation in the record.
    id: ProcessId,
    /// `None` once closed: by the daemon, by the stop sequence, a write error or the exit.
    stdin: Option<ChildStdin>,
    /// `None` once at end of file (or after a read error).
    stdout: Option<ChildStdout>,
    /// `None` once at end of file (or after a read error).
    stderr: Option<ChildStderr>,
    /// Wakes the loop when the child exits (Linux); without it the loop polls on a timer.
    pidfd: Option<PidFd>,
    /// Whole messages waiting for the child's stdin.
    queue: StdinQueue,
}

impl Child {
    /// Spawns the server of `req` through `mcpx_platform::process::spawn`: `program`
    /// with `args`, exactly `env`, `cwd`, in its own process group (pgid = pid), with
    /// its three pipes set non-blocking and (on Linux) a pidfd.
    ///
    /// Errors: [`SpawnError::Start`] when it cannot be executed,
    /// [`SpawnError::Watch`] when a pipe cannot be made non-blocking.
    pub fn spawn(req: &LaunchRequest) -> Result<Child, SpawnError> {
        // The sandbox, made ready here and applied in the child before `exec`: a server
        // that cannot be confined as asked does not start.
        let confine = match &req.sandbox {
            Some(policy) => Some(std::sync::Arc::new(mcpx_platform::confine::prepare(policy).map_err(|e| {
                let source = io::Error::new(e.kind(), format!("cannot confine it: {e}"));
                SpawnError::Start { command: req.command.clone(), source }
            })?)),
            None => None,
        };
        let spec = SpawnSpec {
            program: req.program.clone(),
            args: req.args.iter().map(Into::into).collect(),
            env: req.env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            cwd: req.cwd.clone(),
            piped: true,
            detach: Detach::Group,
            confine,
        };
        let mut child = mcpx_platform::process::spawn(&spec)
            .map_err(|source| SpawnError::Start { command: req.command.clone(), source })?;
        let pid = child.id();
        let start_time = mcpx_platform::process_start_time(pid).unwrap_or(0);
        let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        // The std handle is dropped without waiting: the loop reaps with waitpid(-1),
        // which also reaps orphaned descendants (the supervisor is their subreaper).
        drop(child);
        let fds = [stdin.as_ref().map(AsFd::as_fd), stdout.as_ref().map(AsFd::as_fd), stderr.as_ref().map(AsFd::as_fd)];
        for fd in fds.into_iter().flatten() {
            set_nonblocking(fd).map_err(SpawnError::Watch)?;
        }
        let pidfd = PidFd::open(pid).ok();
        log!("child {pid} running");
        Ok(Child { id: ProcessId { pid, start_time }, stdin, stdout, stderr, pidfd, queue: StdinQueue::default() })
    }

    /// The child's pid and start time.
    pub fn id(&self) -> ProcessId {
        self.id
    }

    /// The descriptor of an output pipe while it is open, to poll for reading.
    pub fn output_fd(&self, which: Output) -> Option<BorrowedFd<'_>> {
        match which {
            Output::Stdout => self.stdout.as_ref().map(AsFd::as_fd),
            Output::Stderr => self.stderr.as_ref().map(AsFd::as_fd),
        }
    }

    /// Whether an output pipe is still open (not yet at end of file).
    pub fn output_open(&self, which: Output) -> bool {
        self.output_fd(which).is_some()
    }

    /// Stdin's descriptor, to poll for writing, while queued input waits for it.
    pub fn stdin_fd(&self) -> Option<BorrowedFd<'_>> {
        self.stdin.as_ref().filter(|_| !self.queue.is_empty()).map(AsFd::as_fd)
    }

    /// The pidfd, readable once the child has exited.
    pub fn pidfd(&self) -> Option<BorrowedFd<'_>> {
        self.pidfd.as_ref().map(AsFd::as_fd)
    }

    /// Reads what an output pipe holds into `buf`: `Some(n)` with `n > 0` bytes, or
    /// `None` when nothing is there now or the pipe is closed. End of file and read
    /// errors close the pipe.
    pub fn read(&mut self, which: Output, buf: &mut [u8]) -> Option<usize> {
        match which {
            Output::Stdout => read_pipe(&mut self.stdout, buf),
            Output::Stderr => read_pipe(&mut self.stderr, buf),
        }
    }

    /// Queues one whole message for stdin. Returns `false` (and queues nothing) when
    /// stdin is closed.
    pub fn queue_message(&mut self, message: &[u8]) -> bool {
        if self.stdin.is_none() {
            return false;
        }
        self.queue.push(message);
        true
    }

    /// Writes queued input until the pipe is full. A write error closes stdin and
    /// discards the queue.
    pub fn write_stdin(&mut self) {
        let Some(stdin) = self.stdin.as_mut() else {
            self.queue.clear();
            return;
        };
        if let Err(e) = self.queue.write_to(stdin) {
            log!("writing the child's stdin failed: {e}");
            self.close_stdin();
        }
    }

    /// Frees the memory of its empty stdin queue, if large (see [`StdinQueue::shed`]).
    pub fn shed(&mut self) -> bool {
        self.queue.shed()
    }

    /// Closes stdin and discards queued input.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
        self.queue.clear();
    }

    /// Sends `signal` to the child's process group; a group that is gone is not an error.
    pub fn signal_group(&self, signal: Signal) {
        let _ = mcpx_platform::process::signal_group(self.id.pid, signal);
    }

    /// Takes in a process [`reap_any`] collected. When it is this child: closes stdin,
    /// lets go of the pidfd, SIGKILLs what the server left in its process group, and
    /// returns its exit status (`at` is now). `None` for an orphaned descendant.
    pub fn reaped(&mut self, reaped: &Reaped) -> Option<ExitStatus> {
        if reaped.pid != self.id.pid {
            return None;
        }
        let Reaped { pid, code, signal } = *reaped;
        let at = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        self.pidfd = None;
        self.close_stdin();
        log!("child {pid} exited (code {code:?}, signal {signal:?})");
        // Whatever the server left in its process group goes with it.
        self.signal_group(Signal::SIGKILL);
        Some(ExitStatus { code, signal, at })
    }
}

/// A process that exited: the child or one of its orphaned descendants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reaped {
    /// Its pid.
    pub pid: u32,
    /// The exit code, when it exited by itself.
    pub code: Option<i32>,
    /// The signal that killed it.
    pub signal: Option<i32>,
}

/// Collects one exited child process of the supervisor (`waitpid(-1, WNOHANG)`), the
/// server or a descendant re-parented to the subreaper. `None` when none has exited.
pub fn reap_any() -> Option<Reaped> {
    loop {
        let (pid, code, signal) = match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) => (pid, Some(code), None),
            Ok(WaitStatus::Signaled(pid, signal, _)) => (pid, None, Some(signal as i32)),
            Ok(WaitStatus::StillAlive) | Err(_) => return None,
            Ok(_) => continue,
        };
        return Some(Reaped { pid: pid.as_raw().unsigned_abs(), code, signal });
    }
}

/// Bytes for the child's stdin: whole messages only, written from the front as the
/// pipe takes them.
#[derive(Debug, Default)]
pub struct StdinQueue {
    /// Queued messages, one after the other.
    bytes: Vec<u8>,
    /// How much of `bytes` the pipe has taken. Written bytes leave the queue in one
    /// move per write round, not one per write.
    written: usize,
}

impl StdinQueue {
    /// Written bytes are moved out past this much, even while more wait.
    const COMPACT_AT: usize = 1 << 20;

    /// Queues one whole message.
    pub fn push(&mut self, message: &[u8]) {
        self.bytes.extend_from_slice(message);
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.written == self.bytes.len()
    }

    /// Frees the memory of an empty queue holding more than [`KEEP_BYTES`]; returns
    /// whether it did.
    pub fn shed(&mut self) -> bool {
        let shed = self.is_empty() && self.bytes.capacity() > KEEP_BYTES;
        if shed {
            *self = StdinQueue::default();
        }
        shed
    }

    /// Drops everything queued.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.written = 0;
    }

    /// Writes what waits to `w` until it is all written or `w` would block.
    ///
    /// Errors: the first write error other than `WouldBlock` and `Interrupted`; the
    /// queue is left as it was at that point.
    pub fn write_to(&mut self, w: &mut impl Write) -> io::Result<()> {
        while self.written < self.bytes.len() {
            match w.write(&self.bytes[self.written..]) {
                Ok(n) => self.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.is_empty() {
            self.clear();
        } else if self.written > Self::COMPACT_AT {
            self.bytes.drain(..self.written);
            self.written = 0;
        }
        Ok(())
    }
}

/// Where the stop sequence is (`docs/attach-protocol.md`, "`Terminate`").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopPhase {
    /// Stdin is closed; SIGTERM follows [`CLOSE_GRACE`] later.
    StdinClosed,
    /// The group was sent SIGTERM; SIGKILL follows [`TERM_GRACE`] later.
    Terminated,
    /// The group was sent SIGKILL, which is repeated every [`TERM_GRACE`].
    Killed,
}

/// The stop sequence of a running child: its phase and when the next signal is due.
/// The caller closes stdin when it starts one, asks [`StopSequence::due`] on every
/// tick while the child runs, and sends the signal it returns to the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopSequence {
    phase: StopPhase,
    deadline: Instant,
}

impl StopSequence {
    /// A sequence whose stdin was closed at `now`.
    pub fn start(now: Instant) -> StopSequence {
        StopSequence { phase: StopPhase::StdinClosed, deadline: now + CLOSE_GRACE }
    }

    /// A sequence for a child that has already exited: nothing is left to do but
    /// SIGKILL, due at once.
    pub fn finished(now: Instant) -> StopSequence {
        StopSequence { phase: StopPhase::Killed, deadline: now }
    }

    /// When the next signal is due.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The signal due at `now`, if its deadline has passed: SIGTERM after the stdin
    /// grace, SIGKILL after that. Moves to the next phase and sets the next deadline
    /// [`TERM_GRACE`] after `now`.
    pub fn due(&mut self, now: Instant) -> Option<Signal> {
        if now < self.deadline {
            return None;
        }
        let (signal, next) = match self.phase {
            StopPhase::StdinClosed => (Signal::SIGTERM, StopPhase::Terminated),
            StopPhase::Terminated | StopPhase::Killed => (Signal::SIGKILL, StopPhase::Killed),
        };
        self.phase = next;
        self.deadline = now + TERM_GRACE;
        Some(signal)
    }
}

/// Reads once from an open pipe, retrying on `EINTR`; end of file or an error closes it.
fn read_pipe(pipe: &mut Option<impl Read>, buf: &mut [u8]) -> Option<usize> {
    loop {
        let result = pipe.as_mut()?.read(buf);
        match result {
            Ok(n) if n > 0 => return Some(n),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Ok(_) | Err(_) => {
                *pipe = None;
                return None;
            }
        }
    }
}

/// Sets `O_NONBLOCK` on a descriptor.
fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).map_err(io::Error::from)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).map_err(io::Error::from)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A pipe that takes `room` bytes per write round, then would block; or fails.
    struct Pipe {
        got: Vec<u8>,
        room: usize,
        interrupt_first: bool,
        broken: bool,
    }

    impl Pipe {
        fn with_room(room: usize) -> Pipe {
            Pipe { got: Vec::new(), room, interrupt_first: false, broken: false }
        }
    }

    impl Write for Pipe {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if std::mem::take(&mut self.interrupt_first) {
                return Err(ErrorKind::Interrupted.into());
            }
            if self.broken {
                return Err(ErrorKind::BrokenPipe.into());
            }
            if self.room == 0 {
                return Err(ErrorKind::WouldBlock.into());
            }
            // At most 3 bytes a write, so a round takes several writes.
            let n = buf.len().min(self.room).min(3);
            self.got.extend_from_slice(&buf[..n]);
            self.room -= n;
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn stdin_queue_writes_messages_in_order_as_the_pipe_takes_them() {
        let mut q = StdinQueue::default();
        q.push(b"{\"a\":1}\n");
        q.push(b"{\"b\":2}\n");
        let mut pipe = Pipe::with_room(10);
        pipe.interrupt_first = true;
        q.write_to(&mut pipe).unwrap();
        assert_eq!(pipe.got, b"{\"a\":1}\n{\"");
        assert_eq!(&q.bytes[q.written..], b"b\":2}\n");
        pipe.room = 100;
        q.write_to(&mut pipe).unwrap();
        assert_eq!(pipe.got, b"{\"a\":1}\n{\"b\":2}\n");
        assert!(q.is_empty());
        assert_eq!((q.bytes.len(), q.written), (0, 0), "a written queue is emptied in one move");
    }

    #[test]
    fn stdin_queue_moves_written_bytes_out_past_a_mebibyte() {
        let mut q = StdinQueue::default();
        q.push(&vec![b'x'; StdinQueue::COMPACT_AT + 10]);
        let mut pipe = Pipe::with_room(StdinQueue::COMPACT_AT + 3);
        q.write_to(&mut pipe).unwrap();
        assert_eq!((q.bytes.len(), q.written), (7, 0));
    }

    #[test]
    fn stdin_queue_reports_a_broken_pipe() {
        let mut q = StdinQueue::default();
        q.push(b"m\n");
        let mut pipe = Pipe::with_room(10);
        pipe.broken = true;
        assert_eq!(q.write_to(&mut pipe).unwrap_err().kind(), ErrorKind::BrokenPipe);
        q.clear();
        assert!(q.is_empty());
    }

    #[test]
    fn stop_sequence_terms_after_the_stdin_grace_then_kills_until_gone() {
        let t0 = Instant::now();
        let mut stop = StopSequence::start(t0);
        assert_eq!(stop.phase, StopPhase::StdinClosed);
        assert_eq!(stop.due(t0 + CLOSE_GRACE - Duration::from_millis(1)), None);
        let t1 = t0 + CLOSE_GRACE;
        assert_eq!(stop.due(t1), Some(Signal::SIGTERM));
        assert_eq!(stop.phase, StopPhase::Terminated);
        assert_eq!(stop.due(t1 + TERM_GRACE - Duration::from_millis(1)), None);
        let t2 = t1 + TERM_GRACE;
        assert_eq!(stop.due(t2), Some(Signal::SIGKILL));
        assert_eq!(stop.phase, StopPhase::Killed);
        assert_eq!(stop.due(t2 + Duration::from_secs(1)), None);
        assert_eq!(stop.due(t2 + TERM_GRACE), Some(Signal::SIGKILL), "SIGKILL repeats");
        assert_eq!(stop.phase, StopPhase::Killed);
    }

    #[test]
    fn a_finished_sequence_is_due_at_once() {
        let t0 = Instant::now();
        let mut stop = StopSequence::finished(t0);
        assert_eq!(stop.due(t0), Some(Signal::SIGKILL));
    }

    #[test]
    fn a_pipe_is_closed_at_end_of_file_and_on_errors_but_not_when_empty() {
        struct Source(Vec<io::Result<usize>>);
        impl Read for Source {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let r = self.0.remove(0);
                if let Ok(n) = r {
                    buf[..n].fill(b'z');
                }
                r
            }
        }
        let mut buf = [0u8; 8];
        let mut pipe =
            Some(Source(vec![Err(ErrorKind::Interrupted.into()), Ok(4), Err(ErrorKind::WouldBlock.into()), Ok(0)]));
        assert_eq!(read_pipe(&mut pipe, &mut buf), Some(4));
        assert_eq!(read_pipe(&mut pipe, &mut buf), None);
        assert!(pipe.is_some(), "an empty pipe stays open");
        assert_eq!(read_pipe(&mut pipe, &mut buf), None);
        assert!(pipe.is_none(), "end of file closes it");
        let mut pipe = Some(Source(vec![Err(ErrorKind::Other.into())]));
        assert_eq!(read_pipe(&mut pipe, &mut buf), None);
        assert!(pipe.is_none(), "an error closes it");
    }
}
