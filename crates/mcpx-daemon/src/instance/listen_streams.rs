//! The state of the `subscriptions/listen` streams an instance holds on a modern
//! server (`upstream_listen.rs` says when they are opened and replaced): which are
//! open, which one's notifications are taken, who waits for an acknowledgement, and
//! the pause before a stream that ended is opened again. No IO.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;

use mcpx_proto::Message;

use crate::sync::lock;

/// The longest pause before a listen stream that ended is opened again.
pub const MAX_REOPEN_DELAY: Duration = Duration::from_secs(30);

/// The first pause before a listen stream that ended is opened again.
const FIRST_REOPEN_DELAY: Duration = Duration::from_millis(250);

/// What the acknowledgement of a listen stream says: the resource URIs the server
/// agreed to send updates of, or why the stream did not open.
pub type Acknowledged = Result<Vec<String>, String>;

/// The instance's listen streams.
#[derive(Debug, Default)]
pub struct UpstreamListen {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Streams sent and not yet ended, oldest first.
    streams: Vec<Stream>,
    /// The `subscriptionId` whose notifications are taken: the newest acknowledged
    /// stream's.
    current: Option<Value>,
    /// Streams that ended in a row without an acknowledgement, for the pause.
    failures: u32,
    /// The server answered -32601: it has no listen, and is not asked again.
    unsupported: bool,
}

#[derive(Debug)]
struct Stream {
    /// The upstream id of its request, which is its `subscriptionId`.
    id: Value,
    /// Those waiting for its acknowledgement.
    waiters: Vec<oneshot::Sender<Acknowledged>>,
    /// Whether it was acknowledged.
    acked: bool,
}

/// What to do with a notification from a modern server.
#[derive(Debug, PartialEq)]
pub(super) enum Heard {
    /// Route it as a legacy server's (the `subscriptionId` removed).
    Route(Message),
    /// It was the listen's own (an acknowledgement, a teardown) or a stale stream's.
    Taken,
}

impl UpstreamListen {
    /// Forgets every stream (the server process was replaced).
    pub(super) fn clear(&self) {
        let mut inner = lock(&self.inner);
        inner.streams.clear();
        inner.current = None;
    }

    /// Records a stream sent with upstream id `id`, acknowledged to `waiter`.
    pub(super) fn opened(&self, id: Value, waiter: Option<oneshot::Sender<Acknowledged>>) {
        lock(&self.inner).streams.push(Stream { id, waiters: waiter.into_iter().collect(), acked: false });
    }

    /// Whether a stream is open and not yet acknowledged (a newer one is on its way):
    /// then a waiter joins it rather than opening another.
    pub(super) fn join_unacknowledged(
        &self,
        waiter: oneshot::Sender<Acknowledged>,
    ) -> Result<(), oneshot::Sender<Acknowledged>> {
        let mut inner = lock(&self.inner);
        match inner.streams.last_mut().filter(|s| !s.acked) {
            Some(stream) => {
                stream.waiters.push(waiter);
                Ok(())
            }
            None => Err(waiter),
        }
    }

    /// `notifications/subscriptions/acknowledged` for stream `id`, agreeing to `uris`:
    /// it becomes the current stream when it is the newest, and the older ones are
    /// returned to be cancelled. `None` for an id that is not an open stream.
    pub(super) fn acknowledged(&self, id: &Value, uris: Vec<String>) -> Option<Vec<Value>> {
        let mut inner = lock(&self.inner);
        let at = inner.streams.iter().position(|s| &s.id == id)?;
        let stream = &mut inner.streams[at];
        stream.acked = true;
        for waiter in stream.waiters.drain(..) {
            let _ = waiter.send(Ok(uris.clone()));
        }
        inner.failures = 0;
        if at + 1 != inner.streams.len() {
            // A newer stream was sent after this one: it will replace it.
            return Some(Vec::new());
        }
        inner.current = Some(id.clone());
        Some(inner.streams.drain(..at).map(|s| s.id).collect())
    }

    /// Stream `id` ended (answered, torn down, or its transport failed), for `why`.
    /// `Some(pause)` when no other stream is open, so it must be opened again after
    /// the pause; `None` for an id that is not an open stream, or when another is.
    pub(super) fn ended(&self, id: &Value, why: &str, unsupported: bool) -> Option<Duration> {
        let mut inner = lock(&self.inner);
        let at = inner.streams.iter().position(|s| &s.id == id)?;
        let stream = inner.streams.remove(at);
        for waiter in stream.waiters {
            let _ = waiter.send(Err(why.to_owned()));
        }
        if inner.current.as_ref() == Some(id) {
            inner.current = None;
        }
        inner.unsupported |= unsupported;
        if !inner.streams.is_empty() || inner.unsupported {
            return None;
        }
        let pause = FIRST_REOPEN_DELAY.saturating_mul(1 << inner.failures.min(8)).min(MAX_REOPEN_DELAY);
        inner.failures += 1;
        Some(pause)
    }

    /// Whether `id` (JSON text, an upstream id) is an open stream's.
    pub(super) fn is_stream(&self, id: &str) -> Option<Value> {
        let inner = lock(&self.inner);
        if inner.streams.is_empty() {
            return None;
        }
        let id: Value = serde_json::from_str(id).ok()?;
        inner.streams.iter().any(|s| s.id == id).then_some(id)
    }

    /// Whether any stream is open (only a modern server's are): what the server sends
    /// on its own is then looked at by the listen first.
    pub(super) fn any_open(&self) -> bool {
        !lock(&self.inner).streams.is_empty()
    }

    /// Whether the server answered a listen with -32601: it is not asked again.
    pub(super) fn unsupported(&self) -> bool {
        lock(&self.inner).unsupported
    }

    /// Whether `id` is a stream this instance opened and has not seen end.
    pub(super) fn is_open(&self, id: &Value) -> bool {
        lock(&self.inner).streams.iter().any(|s| &s.id == id)
    }

    /// Whether a notification of stream `id` is to be taken: the current stream's.
    pub(super) fn takes(&self, id: &Value) -> bool {
        lock(&self.inner).current.as_ref() == Some(id)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_replacement_takes_over_at_its_acknowledgement_and_the_old_one_is_cancelled() {
        let listen = UpstreamListen::default();
        let (a, b) = (json!("a"), json!("b"));
        let (tx, rx) = oneshot::channel();
        listen.opened(a.clone(), Some(tx));
        assert!(!listen.takes(&a), "nothing before the acknowledgement");
        assert_eq!(listen.acknowledged(&a, Vec::new()), Some(Vec::new()));
        assert_eq!(rx.blocking_recv().unwrap(), Ok(Vec::new()));
        assert!(listen.takes(&a));
        listen.opened(b.clone(), None);
        assert!(listen.takes(&a), "the old stream serves until the new one is acknowledged");
        assert_eq!(listen.acknowledged(&b, vec!["u".into()]), Some(vec![a.clone()]));
        assert!(listen.takes(&b) && !listen.takes(&a));
        assert_eq!(listen.ended(&a, "cancelled", false), None, "already forgotten");
    }

    #[test]
    fn an_ended_stream_reopens_after_a_growing_pause_unless_unsupported() {
        let listen = UpstreamListen::default();
        let a = json!(1);
        listen.opened(a.clone(), None);
        assert_eq!(listen.ended(&a, "gone", false), Some(FIRST_REOPEN_DELAY));
        listen.opened(a.clone(), None);
        assert_eq!(listen.ended(&a, "gone", false), Some(FIRST_REOPEN_DELAY * 2));
        listen.opened(a.clone(), None);
        let (tx, rx) = oneshot::channel();
        assert!(listen.join_unacknowledged(tx).is_ok());
        assert_eq!(listen.ended(&a, "no listen", true), None);
        assert_eq!(rx.blocking_recv().unwrap(), Err("no listen".to_owned()));
        assert!(lock(&listen.inner).unsupported);
    }
}
