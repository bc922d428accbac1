//! Test fixtures shared by the transports' unit tests: a supervisor's record and
//! hello, and an attach connection over `tokio::io::duplex` with the test playing
//! the supervisor.

use mcpx_proto::attach::{ChildState, Frame, Hello, Identity, ProcessId, Record, Version};
use tokio::io::DuplexStream;

use super::attach::AttachConn;

/// A pid above any system's `pid_max`: it never names a process, so a test can let
/// the daemon check on it (it is gone) without anything being signalled.
pub(super) const NO_PROCESS: u32 = 0x3fff_ffff;

/// A record as a supervisor of server `fake` would send it; neither of its
/// processes exists.
pub(super) fn record(next_epoch: u32) -> Record {
    Record {
        id: "0a1b2c3d4e5f".into(),
        identity: Identity {
            server: "fake".into(),
            fingerprint: "fp".into(),
            cache_key: "ck".into(),
            key: "global".into(),
            sharing: "shared".into(),
        },
        supervisor: ProcessId { pid: NO_PROCESS, start_time: 1 },
        child: Some(ProcessId { pid: NO_PROCESS - 1, start_time: 2 }),
        boot_id: String::new(),
        protocol: Version::CURRENT,
        build: "test".into(),
        last_epoch: next_epoch.saturating_sub(1),
        exit: None,
    }
}

/// A hello offering `next_epoch`, with a stored session.
pub(super) fn hello(next_epoch: u32) -> Hello {
    Hello {
        record: record(next_epoch),
        state: ChildState::Running,
        exit: None,
        stdout_buffered: 5,
        stdout_dropped: 7,
        stderr_dropped: 0,
        buffer_capacity: 1 << 20,
        next_epoch,
        session: Some(serde_json::value::RawValue::from_string(r#"{"protocolVersion":"2025-11-25"}"#.into()).unwrap()),
        era: None,
    }
}

/// The supervisor's end of a connection whose daemon end is returned.
pub(super) fn pair() -> (AttachConn<DuplexStream>, AttachConn<DuplexStream>) {
    let (daemon, supervisor) = tokio::io::duplex(4096);
    (AttachConn::new(daemon), AttachConn::new(supervisor))
}

/// Plays the supervisor's first words: its preamble and then `frames`.
pub(super) async fn greet(sup: &mut AttachConn<DuplexStream>, version: Version, frames: &[Frame]) {
    let w = sup.writer();
    w.queue_preamble(version);
    for f in frames {
        w.queue(f).unwrap();
    }
    w.flush().await.unwrap();
}
