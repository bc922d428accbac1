//! Shell calls that answer server requests themselves (`mcpx call` on a terminal
//! answers `elicitation/create`): the id of each such call in flight, and where the
//! answers to the requests relayed on its stream arrive (`POST /v1/call/answer`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mcpx_proto::{Message, MessageKind};

use crate::api::{ApiError, ErrorKind};
use crate::instance::ClientReplies;
use crate::sync::lock;

/// The shell calls in flight that declared `answers`, by call id.
#[derive(Debug, Default)]
pub struct ShellCalls {
    /// Shared with each [`OpenCall`], which takes its entry out when the call ends.
    open: Arc<Mutex<HashMap<String, Arc<ClientReplies>>>>,
    /// Numbers the call ids (`call-1`, `call-2`, ...), unique for the daemon's life.
    next: AtomicU64,
}

/// One shell call in the registry, for as long as the value lives.
#[derive(Debug)]
pub struct OpenCall {
    /// The call id its request lines carry (`"call"`), which its answers name.
    pub id: String,
    /// Where the answers to its relayed requests are matched up, by request id.
    pub replies: Arc<ClientReplies>,
    open: Arc<Mutex<HashMap<String, Arc<ClientReplies>>>>,
}

impl Drop for OpenCall {
    fn drop(&mut self) {
        lock(&self.open).remove(&self.id);
    }
}

impl ShellCalls {
    /// Registers a new call; it leaves the registry when the returned value is dropped.
    pub fn open(&self) -> OpenCall {
        let id = format!("call-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let replies = Arc::new(ClientReplies::default());
        lock(&self.open).insert(id.clone(), replies.clone());
        OpenCall { id, replies, open: self.open.clone() }
    }

    /// Hands `response` (a JSON-RPC response, as text) to the request of call `call`
    /// waiting for it.
    ///
    /// Errors (`usage`): the text is not a JSON-RPC response; no call `call` is in
    /// flight (it ended); or none of its requests with that id waits (answered already,
    /// or it timed out).
    pub fn answer(&self, call: &str, response: &str) -> Result<(), ApiError> {
        let message = Message::parse(response.to_owned())
            .ok()
            .filter(|m| m.kind() == MessageKind::Response)
            .ok_or_else(|| ApiError::new(ErrorKind::Usage, "the answer is not a JSON-RPC response; send `{\"jsonrpc\":\"2.0\",\"id\":<the request's id>,\"result\":{...}}`"))?;
        let replies = lock(&self.open).get(call).cloned().ok_or_else(|| {
            ApiError::new(ErrorKind::Usage, format!("no call `{call}` is in flight: it ended before the answer came"))
        })?;
        let id = message.id().unwrap_or("null").to_owned();
        if replies.deliver(message) {
            Ok(())
        } else {
            Err(ApiError::new(
                ErrorKind::Usage,
                format!("call `{call}` has no request {id} waiting: it was answered already or timed out"),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_answer_reaches_its_call_and_request_only() {
        let calls = ShellCalls::default();
        let one = calls.open();
        let two = calls.open();
        assert_ne!(one.id, two.id);
        let (id, rx) = one.replies.register();
        let answer = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"action":"decline"}}}}"#);
        assert!(calls.answer(&two.id, &answer).is_err(), "another call has no such request");
        calls.answer(&one.id, &answer).unwrap();
        assert!(rx.await.unwrap().as_str().contains("decline"));
        assert!(calls.answer(&one.id, &answer).is_err(), "answered already");
        assert!(calls.answer(&one.id, r#"{"jsonrpc":"2.0","method":"x"}"#).is_err(), "not a response");
        let gone = one.id.clone();
        drop(one);
        let e = calls.answer(&gone, &answer).unwrap_err();
        assert!(e.message.contains("ended"), "{e:?}");
    }
}
