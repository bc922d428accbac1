//! The bounded queue from an instance to one caller: what a server sends about a
//! request (progress, log messages, server-to-client requests) waits here until the
//! caller's answer stream takes it. A caller that reads too slowly loses progress
//! and log notifications, counted, never a server-to-client request.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use mcpx_proto::{Message, MessageKind};
use tokio::sync::Notify;

use crate::sync::lock;

/// How many messages one caller's queue holds before notifications are lost.
pub const QUEUE_MESSAGES: usize = 256;

/// How many bytes of messages one caller's queue holds before notifications are
/// lost (1 MiB); a single message is always taken into an empty queue.
pub const QUEUE_BYTES: usize = 1 << 20;

/// A new queue to one caller. Every notification it loses is also added to
/// `tally` (the daemon's count for `status`).
pub fn channel(tally: Arc<AtomicU64>) -> (NoticeSender, NoticeReceiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        ready: Notify::new(),
        senders: AtomicUsize::new(1),
        tally,
    });
    (NoticeSender { shared: shared.clone() }, NoticeReceiver { shared })
}

/// What became of a message handed to [`NoticeSender::send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// It waits in the queue.
    Queued,
    /// The queue was full: the notification was dropped, or it replaced an older
    /// progress notification of the same token (coalesced). `first` is true for the
    /// queue's first loss, so the loss is logged once per caller.
    Lost {
        /// Whether this is the first message this queue lost.
        first: bool,
    },
    /// The caller has gone; nothing is queued any more.
    Closed,
}

/// The instance's end of a caller's queue; cheap to clone.
#[derive(Debug)]
pub struct NoticeSender {
    shared: Arc<Shared>,
}

/// The caller's end. Dropping it (the caller went away) empties the queue at once
/// and closes it.
#[derive(Debug)]
pub struct NoticeReceiver {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the receiver when a message arrives or the last sender goes.
    ready: Notify,
    /// Live senders: the receiver's `recv` ends when none is left and the queue is empty.
    senders: AtomicUsize,
    /// The daemon-wide count of lost notifications.
    tally: Arc<AtomicU64>,
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Message>,
    /// Bytes of the messages in `queue`.
    bytes: usize,
    /// Notifications this queue lost.
    lost: u64,
    /// The receiver has gone.
    closed: bool,
}

impl NoticeSender {
    /// Queues `message` without waiting. A server-to-client request is always
    /// queued. A notification is queued while the queue is under
    /// [`QUEUE_MESSAGES`] and [`QUEUE_BYTES`]; beyond, a progress notification
    /// replaces the newest queued one of its token, and anything else is dropped.
    pub fn send(&self, message: Message) -> Sent {
        let mut state = lock(&self.shared.state);
        if state.closed {
            return Sent::Closed;
        }
        let len = message.as_str().len();
        let room = state.queue.is_empty() || (state.queue.len() < QUEUE_MESSAGES && state.bytes + len <= QUEUE_BYTES);
        if room || message.kind() == MessageKind::Request {
            state.bytes += len;
            state.queue.push_back(message);
            drop(state);
            self.shared.ready.notify_one();
            return Sent::Queued;
        }
        if let Some(token) = message.notified_progress_token().map(str::to_owned) {
            let same = state.queue.iter().rposition(|m| {
                m.kind() == MessageKind::Notification && m.notified_progress_token() == Some(token.as_str())
            });
            if let Some(i) = same {
                let old = std::mem::replace(&mut state.queue[i], message);
                state.bytes = state.bytes + len - old.as_str().len();
            }
        }
        state.lost += 1;
        self.shared.tally.fetch_add(1, Ordering::Relaxed);
        Sent::Lost { first: state.lost == 1 }
    }

    /// Whether the caller has gone.
    pub fn is_closed(&self) -> bool {
        lock(&self.shared.state).closed
    }
}

impl Clone for NoticeSender {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        NoticeSender { shared: self.shared.clone() }
    }
}

impl Drop for NoticeSender {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.ready.notify_one();
        }
    }
}

impl NoticeReceiver {
    /// The next message, waiting for one; `None` once every sender has gone and the
    /// queue is empty.
    pub async fn recv(&mut self) -> Option<Message> {
        loop {
            if let Some(m) = self.try_recv() {
                return Some(m);
            }
            if self.shared.senders.load(Ordering::Acquire) == 0 {
                return self.try_recv();
            }
            self.shared.ready.notified().await;
        }
    }

    /// The next message, if one is queued.
    pub fn try_recv(&mut self) -> Option<Message> {
        let mut state = lock(&self.shared.state);
        let m = state.queue.pop_front()?;
        state.bytes -= m.as_str().len();
        Some(m)
    }

    /// How many notifications this queue has lost so far.
    pub fn lost(&self) -> u64 {
        lock(&self.shared.state).lost
    }
}

impl Drop for NoticeReceiver {
    fn drop(&mut self) {
        let mut state = lock(&self.shared.state);
        state.closed = true;
        state.queue = VecDeque::new();
        state.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(token: &str, n: usize) -> Message {
        Message::notification("notifications/progress", Some(&format!(r#"{{"progressToken":{token},"progress":{n}}}"#)))
    }

    #[tokio::test]
    async fn a_full_queue_coalesces_progress_and_keeps_requests() {
        let tally = Arc::new(AtomicU64::new(0));
        let (tx, mut rx) = channel(tally.clone());
        for n in 0..QUEUE_MESSAGES {
            assert_eq!(tx.send(progress("1", n)), Sent::Queued);
        }
        assert_eq!(tx.send(progress("1", 9999)), Sent::Lost { first: true });
        assert_eq!(tx.send(Message::notification("notifications/message", Some("{}"))), Sent::Lost { first: false });
        assert_eq!(tx.send(Message::request("\"r\"", "roots/list", None)), Sent::Queued);
        assert_eq!(tally.load(Ordering::Relaxed), 2);
        assert_eq!(rx.lost(), 2);
        drop(tx);
        let mut got = Vec::new();
        while let Some(m) = rx.recv().await {
            got.push(m);
        }
        assert_eq!(got.len(), QUEUE_MESSAGES + 1, "the request is kept beyond the bound");
        assert!(got[QUEUE_MESSAGES - 1].as_str().contains("9999"), "the newest progress replaced the last one");
        assert_eq!(got[QUEUE_MESSAGES].method(), Some("roots/list"));
    }

    #[tokio::test]
    async fn the_byte_bound_holds_and_one_message_always_fits() {
        let (tx, mut rx) = channel(Arc::default());
        let big = "x".repeat(QUEUE_BYTES);
        let msg =
            |n: usize| Message::notification("notifications/message", Some(&format!(r#"{{"n":{n},"d":"{big}"}}"#)));
        assert_eq!(tx.send(msg(1)), Sent::Queued, "an empty queue takes any one message");
        assert_eq!(tx.send(msg(2)), Sent::Lost { first: true });
        assert!(rx.try_recv().is_some());
        assert_eq!(tx.send(msg(3)), Sent::Queued);
    }

    #[tokio::test]
    async fn a_gone_caller_closes_the_queue_at_once() {
        let (tx, rx) = channel(Arc::default());
        assert_eq!(tx.send(progress("1", 1)), Sent::Queued);
        drop(rx);
        assert!(tx.is_closed());
        assert_eq!(tx.send(progress("1", 2)), Sent::Closed);
    }
}
