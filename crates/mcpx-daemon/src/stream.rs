//! Streaming HTTP answers: a body fed by a channel, and a call whose notifications
//! are streamed while it runs, then its outcome. Shared by the control API's
//! `POST /v1/call` with `stream` (JSON lines) and the MCP endpoint's SSE answers.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::body::{Body, Bytes};
use mcpx_proto::Message;
use tokio::sync::mpsc;

use crate::notices::{self, NoticeSender};

/// Where a streamed call says what it waits on (`POST /v1/call`'s `status` lines):
/// one JSON object per phase, an item of the stream of its own, before the
/// notifications that follow it. Unbounded: a call has a handful of phases.
pub type StatusSender = mpsc::UnboundedSender<serde_json::Value>;

/// How many encoded items a streaming answer buffers before its producer waits.
const STREAM_BUFFER: usize = 64;

/// A streaming HTTP body fed by a channel: each item is sent as it comes; the body
/// ends when every sender is gone. Dropping the body (the client went away) closes
/// the channel, which is how producers notice.
pub fn channel_body(rx: mpsc::Receiver<Vec<u8>>) -> Body {
    channel_body_until(rx, std::future::pending())
}

/// [`channel_body`] that also ends when `until` completes, whatever is still to come:
/// for an open-ended stream (a session's GET or listen stream), which must not hold back
/// the drain of a daemon asked to stop or upgrade.
pub fn channel_body_until(rx: mpsc::Receiver<Vec<u8>>, until: impl Future<Output = ()> + Send + 'static) -> Body {
    use futures_util::StreamExt;
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, std::convert::Infallible>(Bytes::from(b)), rx))
    });
    Body::from_stream(stream.take_until(until))
}

/// Runs `call` in a task of its own, handing it a sender for the notifications that
/// belong to it and one for its status ([`StatusSender`]), and returns the stream of
/// what to send the client: each status as `status` encodes it and each notification
/// as `notice` encodes it, as they come (a status first when both wait), then the
/// outcome as `last` encodes it: in
/// pieces, sent in order, so a large result is framed without being copied into a
/// new buffer (a relayed 16 MiB result must not cost the daemon three times that).
///
/// The notifications wait in a bounded queue ([`notices::channel`]): while the client
/// does not read, progress and log notifications are coalesced or dropped, each loss
/// added to `tally`, and the outcome is never lost.
///
/// When the client goes away (the receiver is dropped, for instance with the body of
/// [`channel_body`]), the call's future is dropped, which cancels the request upstream
/// (`Instance::request_for` sends `notifications/cancelled`). Notifications that
/// arrive together with the outcome are sent before it.
pub fn stream_call<T, F>(
    tally: Arc<AtomicU64>,
    call: impl FnOnce(NoticeSender, StatusSender) -> F + Send + 'static,
    notice: impl Fn(&Message) -> Vec<u8> + Send + 'static,
    status: impl Fn(&serde_json::Value) -> Vec<u8> + Send + 'static,
    last: impl FnOnce(T) -> Vec<Vec<u8>> + Send + 'static,
) -> mpsc::Receiver<Vec<u8>>
where
    F: Future<Output = T> + Send,
    T: Send,
{
    let (tx, rx) = mpsc::channel::<Vec<u8>>(STREAM_BUFFER);
    tokio::spawn(async move {
        let (notify_tx, notify_rx) = notices::channel(tally);
        let (status_tx, status_rx) = mpsc::unbounded_channel();
        let call = call(notify_tx, status_tx);
        tokio::pin!(call);
        let encode = Encode { notice, status };
        relay(tx, None, notify_rx, Some(status_rx), call, encode, last).await;
    });
    rx
}

/// How [`relay`] encodes a notification and a status.
struct Encode<N, S> {
    notice: N,
    status: S,
}

/// What [`answer_or_stream`] gives the client.
pub enum Answered<T> {
    /// The outcome, which came before any notification: the answer is it alone.
    Alone(T),
    /// Everything to send, as [`stream_call`] streams it.
    Streamed(mpsc::Receiver<Vec<u8>>),
}

/// [`stream_call`] that waits for its first item in the caller's own task: a call that
/// ends before it sends any notification is answered with its outcome alone
/// ([`Answered::Alone`]: no task, no channel, no stream, so the caller can answer it as
/// a plain body); from its first notification on, the call goes on in a task of its
/// own, streamed as [`stream_call`] streams it, that notification first.
///
/// Cancellation is as with [`stream_call`]: dropping the future before it returns
/// drops the call, and so does dropping the receiver after.
pub async fn answer_or_stream<T, F>(
    tally: Arc<AtomicU64>,
    call: impl FnOnce(NoticeSender) -> F,
    notice: impl Fn(&Message) -> Vec<u8> + Send + 'static,
    last: impl FnOnce(T) -> Vec<Vec<u8>> + Send + 'static,
) -> Answered<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let (notify_tx, mut notify_rx) = notices::channel(tally);
    let mut call = Box::pin(call(notify_tx));
    let first = tokio::select! {
        biased;
        outcome = &mut call => match notify_rx.try_recv() {
            None => return Answered::Alone(outcome),
            // Notifications that came with the outcome go first.
            Some(first) => {
                let (tx, rx) = mpsc::channel::<Vec<u8>>(STREAM_BUFFER);
                let encode = Encode { notice, status: |_: &serde_json::Value| Vec::new() };
                tokio::spawn(relay(tx, Some(first), notify_rx, None, async move { outcome }, encode, last));
                return Answered::Streamed(rx);
            }
        },
        Some(first) = notify_rx.recv() => first,
    };
    let (tx, rx) = mpsc::channel::<Vec<u8>>(STREAM_BUFFER);
    let encode = Encode { notice, status: |_: &serde_json::Value| Vec::new() };
    tokio::spawn(relay(tx, Some(first), notify_rx, None, call, encode, last));
    Answered::Streamed(rx)
}

/// Sends `first`, then each status of `status_rx` and notification of `notify_rx`
/// as they come (a status first), then the outcome of `call`, on `tx`; stops
/// (dropping `call`) when the client has gone.
async fn relay<T, F, N, S>(
    tx: mpsc::Sender<Vec<u8>>,
    first: Option<Message>,
    mut notify_rx: notices::NoticeReceiver,
    mut status_rx: Option<mpsc::UnboundedReceiver<serde_json::Value>>,
    call: F,
    encode: Encode<N, S>,
    last: impl FnOnce(T) -> Vec<Vec<u8>>,
) where
    F: Future<Output = T>,
    N: Fn(&Message) -> Vec<u8>,
    S: Fn(&serde_json::Value) -> Vec<u8>,
{
    tokio::pin!(call);
    if let Some(first) = first {
        if tx.send((encode.notice)(&first)).await.is_err() {
            return;
        }
    }
    let outcome = loop {
        tokio::select! {
            biased;
            () = tx.closed() => return,
            Some(s) = next_status(&mut status_rx) => {
                if tx.send((encode.status)(&s)).await.is_err() {
                    return;
                }
            }
            Some(n) = notify_rx.recv() => {
                if tx.send((encode.notice)(&n)).await.is_err() {
                    return;
                }
            }
            outcome = &mut call => break outcome,
        }
    };
    while let Some(s) = status_rx.as_mut().and_then(|rx| rx.try_recv().ok()) {
        let _ = tx.send((encode.status)(&s)).await;
    }
    while let Some(n) = notify_rx.try_recv() {
        let _ = tx.send((encode.notice)(&n)).await;
    }
    for piece in last(outcome) {
        if tx.send(piece).await.is_err() {
            return;
        }
    }
}

/// The next status of `rx`; never, without one.
async fn next_status(rx: &mut Option<mpsc::UnboundedReceiver<serde_json::Value>>) -> Option<serde_json::Value> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every item the stream yields until it ends, as text.
    async fn drain(rx: &mut mpsc::Receiver<Vec<u8>>) -> Vec<String> {
        let mut items = Vec::new();
        while let Some(item) = rx.recv().await {
            items.push(String::from_utf8(item).unwrap());
        }
        items
    }

    #[tokio::test]
    async fn notifications_come_before_the_outcome_and_the_stream_ends() {
        let mut rx = stream_call(
            Arc::default(),
            |notify, _| async move {
                for n in 0..3 {
                    notify.send(Message::notification("notifications/progress", Some(&format!("{{\"n\":{n}}}"))));
                }
                "done"
            },
            |m| m.as_str().as_bytes().to_vec(),
            |s| s.to_string().into_bytes(),
            |outcome: &str| vec![outcome.as_bytes().to_vec()],
        );
        let items = drain(&mut rx).await;
        assert_eq!(items.len(), 4, "{items:?}");
        assert!(items[..3].iter().all(|i| i.contains("notifications/progress")));
        assert_eq!(items[3], "done");
    }

    #[tokio::test]
    async fn a_status_is_an_item_of_its_own_before_the_notifications_after_it() {
        let mut rx = stream_call(
            Arc::default(),
            |notify, status| async move {
                let _ = status.send(serde_json::json!({ "phase": "calling" }));
                notify.send(Message::notification("notifications/progress", Some(r#"{"n":1}"#)));
                "done"
            },
            |m| format!("notice {}", m.method().unwrap_or_default()).into_bytes(),
            |s| format!("status {s}").into_bytes(),
            |outcome: &str| vec![outcome.as_bytes().to_vec()],
        );
        let items = drain(&mut rx).await;
        assert_eq!(items, [r#"status {"phase":"calling"}"#, "notice notifications/progress", "done"]);
    }

    #[tokio::test]
    async fn a_client_that_does_not_read_loses_notifications_never_the_outcome() {
        let tally = Arc::new(AtomicU64::new(0));
        let mut rx = stream_call(
            tally.clone(),
            |notify, _| async move {
                for n in 0..10_000 {
                    notify.send(Message::notification(
                        "notifications/progress",
                        Some(&format!(r#"{{"progressToken":1,"progress":{n}}}"#)),
                    ));
                }
                "done"
            },
            |m| m.as_str().as_bytes().to_vec(),
            |s| s.to_string().into_bytes(),
            |outcome: &str| vec![outcome.as_bytes().to_vec()],
        );
        let items = drain(&mut rx).await;
        assert!(items.len() <= notices::QUEUE_MESSAGES + 1, "{} items were held", items.len());
        assert_eq!(items.last().map(String::as_str), Some("done"));
        assert!(items[items.len() - 2].contains("9999"), "the newest progress is kept");
        assert_eq!(tally.load(std::sync::atomic::Ordering::Relaxed), 10_000 - (items.len() as u64 - 1));
    }

    #[tokio::test]
    async fn a_client_that_goes_away_drops_the_call() {
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
        struct OnDrop(Option<tokio::sync::oneshot::Sender<()>>);
        impl Drop for OnDrop {
            fn drop(&mut self) {
                if let Some(tx) = self.0.take() {
                    let _ = tx.send(());
                }
            }
        }
        let rx = stream_call(
            Arc::default(),
            move |_notify, _| {
                let guard = OnDrop(Some(dropped_tx));
                async move {
                    let _guard = guard;
                    std::future::pending::<()>().await;
                }
            },
            |m| m.as_str().as_bytes().to_vec(),
            |s| s.to_string().into_bytes(),
            |()| vec![Vec::new()],
        );
        drop(rx);
        dropped_rx.await.expect("the call's future is dropped when the client goes away");
    }
}
