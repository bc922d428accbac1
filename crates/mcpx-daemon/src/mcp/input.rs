//! The input bridge: a legacy server's request for input (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`) made during a modern client's call reaches
//! that client as an `InputRequiredResult`, and the retried request's
//! `inputResponses` reach the server as the answers to its requests (MCP 2026-07-28,
//! Basic, Patterns, "Multi Round-Trip Requests").
//!
//! A modern `tools/call`, `prompts/get` or `resources/read` runs with its own notice
//! queue and [`ClientReplies`]. When the instance routes a server request to it (by
//! the rule of `instance::server_requests`: the only call in flight, or the request
//! the server sent it on), the HTTP request is answered with an
//! `InputRequiredResult` whose `inputRequests` carry the server's requests under keys
//! `<kind>-<n>` (`elicitation-1`) and whose `requestState` is a token of 128 random
//! bits naming the call, which stays alive upstream, parked in [`Parked`]. The retry
//! (same method and params, plus `inputResponses` and `requestState`) takes the call
//! back, delivers each answer to the server under its request's own id, and waits
//! again: for the result, or for the server's next request, which is another
//! `InputRequiredResult` with a new token.
//!
//! A parked call nobody retries is cancelled upstream and forgotten after
//! [`park_timeout`]; at most [`MAX_PARKED`] wait at once.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use mcpx_proto::mcp::error_code;
use mcpx_proto::{Message, MessageKind};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::daemon::Daemon;
use crate::instance::{CLIENT_ANSWER_TIMEOUT, ClientReplies};
use crate::mcp::dispatch::cancellable;
use crate::mcp::modern;
use crate::mcp::sessions::{ClientSession, ClientSessions, sse_event};
use crate::notices::{self, NoticeReceiver};
use crate::sync::lock;

pub(crate) use crate::instance::INTERACTIVE;

/// The most calls that may wait for their client's input at once, over every
/// listener. A call that would be one more is cancelled upstream and its client told
/// so (-32603).
pub(crate) const MAX_PARKED: usize = 256;

/// How many SSE events a streamed answer buffers before the call waits for the client.
const STREAM_BUFFER: usize = 64;

/// How long a parked call waits for its retry before it is cancelled upstream and
/// forgotten: [`CLIENT_ANSWER_TIMEOUT`] (300 s), as long as mcpx gives any client to
/// answer a server request; with the `test-hooks` feature, `MCPX_TEST_INPUT_WAIT_MS`.
pub(crate) fn park_timeout() -> Duration {
    #[cfg(feature = "test-hooks")]
    if let Some(ms) = std::env::var("MCPX_TEST_INPUT_WAIT_MS").ok().and_then(|v| v.parse().ok()) {
        return Duration::from_millis(ms);
    }
    CLIENT_ANSWER_TIMEOUT
}

/// The calls that wait for their client's input, by the token of their
/// `requestState`.
#[derive(Default)]
pub(crate) struct Parked {
    calls: Mutex<HashMap<String, Running>>,
}

impl std::fmt::Debug for Parked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parked").field("calls", &lock(&self.calls).len()).finish()
    }
}

/// How the endpoint answers a modern interactive request: one JSON-RPC message, or
/// the SSE events of a `tools/call` whose client accepts them.
pub(crate) enum Answer {
    /// The response: the result, an `InputRequiredResult`, or an error.
    Json(Message),
    /// SSE events: the call's notifications, then its response.
    Events(mpsc::Receiver<Vec<u8>>),
}

/// Answers `request`, a modern `tools/call`, `prompts/get` or `resources/read` of
/// `session` (a session of its own, see `routes::modern_request`), whose `params` are
/// given parsed: a first try runs the call; a retry (`params.requestState`) takes up
/// the parked call it names. `level` is the request's log level (`_meta`
/// `io.modelcontextprotocol/logLevel`), for the notifications an SSE answer carries.
///
/// Errors, as the JSON-RPC answer (-32602): the `requestState` names no parked call
/// (unknown, expired or already taken up), or the retry does not repeat the call's
/// method and params.
pub(crate) async fn answer(
    parked: &Arc<Parked>,
    d: &Arc<Daemon>,
    session: Arc<ClientSession>,
    request: Message,
    params: &Value,
    level: Option<String>,
    sse: bool,
) -> Answer {
    let id = request.id().unwrap_or("null").to_owned();
    let running = match params.get("requestState") {
        None => Running::start(d, session, request, params, level),
        Some(state) => match parked.resume(state, &session.server, request.method().unwrap_or_default(), params) {
            Ok(running) => running,
            Err(message) => return Answer::Json(Message::error_response(&id, error_code::INVALID_PARAMS, &message)),
        },
    };
    let parked = Arc::downgrade(parked);
    if !sse {
        return Answer::Json(settle(&parked, running.advance(None).await, &id));
    }
    let (tx, rx) = mpsc::channel::<Vec<u8>>(STREAM_BUFFER);
    tokio::spawn(async move {
        let outcome = running.advance(Some(&tx)).await;
        if !matches!(outcome, Outcome::Gone) {
            let _ = tx.send(sse_event(settle(&parked, outcome, &id).as_str())).await;
        }
    });
    Answer::Events(rx)
}

/// The response to the request with id `id` that ended the step `outcome`: the
/// call's response; or an `InputRequiredResult`, the call parked under a new token.
fn settle(parked: &Weak<Parked>, outcome: Outcome, id: &str) -> Message {
    match outcome {
        Outcome::Done(response) => response.with_id(id),
        Outcome::Input(running) => match parked.upgrade() {
            Some(parked) => parked.park(running, id),
            None => Message::error_response(id, error_code::INTERNAL_ERROR, "mcpx is shutting down; call again later"),
        },
        Outcome::Gone => Message::error_response(id, error_code::INTERNAL_ERROR, "the client went away"),
    }
}

impl Parked {
    /// Parks `running` and gives the `InputRequiredResult` for request `id`; the call
    /// is cancelled upstream after [`park_timeout`] unless taken up before. With
    /// [`MAX_PARKED`] parked already, or no random token to be had, the call is
    /// cancelled now and the answer is an error (-32603).
    fn park(self: &Arc<Self>, running: Running, id: &str) -> Message {
        let token = match ClientSessions::new_id() {
            Ok(token) => token,
            Err(e) => {
                let message = format!("mcpx cannot make a requestState ({e}); call again");
                return Message::error_response(id, error_code::INTERNAL_ERROR, &message);
            }
        };
        let requests: Map<String, Value> = running.asked.iter().map(|(k, (_, r))| (k.clone(), r.clone())).collect();
        {
            let mut calls = lock(&self.calls);
            if calls.len() >= MAX_PARKED {
                let message = format!(
                    "mcpx: {MAX_PARKED} calls already wait for their client's input; answer or abandon some, then call again"
                );
                return Message::error_response(id, error_code::INTERNAL_ERROR, &message);
            }
            calls.insert(token.clone(), running);
        }
        let weak = Arc::downgrade(self);
        let expiring = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(park_timeout()).await;
            let expired = weak.upgrade().and_then(|parked| lock(&parked.calls).remove(&expiring));
            if expired.is_some() {
                tracing::info!("cancelled a call whose client did not answer its input requests in time");
            }
        });
        let result = json!({ "resultType": "input_required", "inputRequests": requests, "requestState": token });
        Message::response(id, &result.to_string())
    }

    /// Takes up the call `state` names, for a retry on the endpoint of `server` with
    /// `method` and `params`, and delivers the answers of its `inputResponses`.
    ///
    /// Errors: what to tell the client (-32602): no call is parked under `state`, or
    /// the retry does not repeat it (the call then stays parked).
    fn resume(&self, state: &Value, server: &Option<String>, method: &str, params: &Value) -> Result<Running, String> {
        let token = state.as_str().unwrap_or_default();
        let mut calls = lock(&self.calls);
        let Some(running) = calls.remove(token) else {
            return Err(format!(
                "unknown or expired requestState: mcpx keeps a call that waits for input {} s, and only until its retry; call again without requestState and inputResponses",
                park_timeout().as_secs()
            ));
        };
        if &running.server != server || running.method != method || running.params != repeated(params) {
            calls.insert(token.to_owned(), running);
            return Err(format!(
                "this retry does not repeat the `{method}` call its requestState names: send the original method and params again, with inputResponses and requestState"
            ));
        }
        drop(calls);
        let mut running = running;
        running.deliver(params.get("inputResponses"));
        Ok(running)
    }
}

/// `params` as a retry must repeat them: without the round's `inputResponses` and
/// `requestState`, and without `_meta`, which carries the request's envelope.
fn repeated(params: &Value) -> Value {
    let mut params = params.clone();
    if let Some(p) = params.as_object_mut() {
        for key in ["inputResponses", "requestState", "_meta"] {
            p.remove(key);
        }
    }
    params
}

/// A modern call in progress: its future (dropped, it is cancelled upstream), its
/// notices, and the server's requests its client has yet to answer.
struct Running {
    /// The call, answering with its response (with the first try's id).
    call: Pin<Box<dyn Future<Output = Message> + Send>>,
    /// Its notifications and the server requests routed to it.
    notices: NoticeReceiver,
    /// Where the answers to those requests go: its session's.
    replies: Arc<ClientReplies>,
    /// The server's requests not answered yet, by key: mcpx's id for each on its way
    /// to the client, and the request as the client sees it (`method`, `params`).
    asked: BTreeMap<String, (String, Value)>,
    /// How many requests the server has sent during the call, for the keys.
    count: usize,
    /// What a retry must repeat: the endpoint's server, the method, the params
    /// ([`repeated`]).
    server: Option<String>,
    method: String,
    params: Value,
    /// The log level its first try asked for.
    level: Option<String>,
}

/// Where [`Running::advance`] stopped.
enum Outcome {
    /// The call ended with this response.
    Done(Message),
    /// The server asked the client for input.
    Input(Running),
    /// The client of a streamed answer went away: the call was dropped.
    Gone,
}

impl Running {
    /// Starts `request` on `session`, with its own notice queue.
    fn start(
        d: &Arc<Daemon>,
        session: Arc<ClientSession>,
        request: Message,
        params: &Value,
        level: Option<String>,
    ) -> Running {
        let (notify, notices) = notices::channel(d.dropped_notifications());
        let replies = session.replies.clone();
        let server = session.server.clone();
        let method = request.method().unwrap_or_default().to_owned();
        let d = d.clone();
        let call = Box::pin(async move { cancellable(&d, &session, request, Some(notify)).await });
        Running {
            call,
            notices,
            replies,
            asked: BTreeMap::new(),
            count: 0,
            server,
            method,
            params: repeated(params),
            level,
        }
    }

    /// Hands each answer of `responses` (the retry's `inputResponses`) to the server
    /// request of its key, as that request's JSON-RPC result. Keys that name no
    /// request are ignored; requests left unanswered are asked again.
    fn deliver(&mut self, responses: Option<&Value>) {
        let Some(responses) = responses.and_then(Value::as_object) else { return };
        for (key, answer) in responses {
            match self.asked.remove(key) {
                Some((id, _)) => {
                    if !self.replies.deliver(Message::response(&id, &answer.to_string())) {
                        tracing::info!(key, "an input response came after the server stopped waiting for it");
                    }
                }
                None => tracing::info!(key, "ignored an input response no request of the call has"),
            }
        }
    }

    /// Runs the call until it ends, or the server asks for input that is not
    /// answered yet. Its notifications go to `sink` as SSE events (log messages at
    /// the asked level only), when there is one.
    async fn advance(mut self, sink: Option<&mpsc::Sender<Vec<u8>>>) -> Outcome {
        loop {
            if !self.asked.is_empty() {
                // Requests the server sent together are asked together.
                while let Some(n) = self.notices.try_recv() {
                    if !self.take(n, sink).await {
                        return Outcome::Gone;
                    }
                }
                return Outcome::Input(self);
            }
            let closed = async {
                match sink {
                    Some(tx) => tx.closed().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = closed => return Outcome::Gone,
                Some(n) = self.notices.recv() => {
                    if !self.take(n, sink).await {
                        return Outcome::Gone;
                    }
                }
                response = &mut self.call => {
                    while let Some(n) = self.notices.try_recv() {
                        if n.kind() != MessageKind::Request {
                            self.take(n, sink).await;
                        }
                    }
                    return Outcome::Done(response);
                }
            }
        }
    }

    /// Takes one message of the call's queue: a server request is kept to be asked;
    /// a notification goes to `sink`. False when the sink's client went away.
    async fn take(&mut self, n: Message, sink: Option<&mpsc::Sender<Vec<u8>>>) -> bool {
        if n.kind() == MessageKind::Request {
            self.count += 1;
            let method = n.method().unwrap_or_default().to_owned();
            let kind = method.split('/').next().unwrap_or("input").to_owned();
            let params = serde_json::from_str::<Value>(n.as_str()).map(|v| v["params"].clone()).unwrap_or_default();
            let mut request = json!({ "method": method });
            if !params.is_null() {
                request["params"] = params;
            }
            self.asked.insert(format!("{kind}-{}", self.count), (n.id().unwrap_or("null").to_owned(), request));
            return true;
        }
        match sink {
            Some(tx) if modern::wants(self.level.as_deref(), &n) => tx.send(sse_event(n.as_str())).await.is_ok(),
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call that never ends, asked `method` under key `<kind>-1`, and where the
    /// client's answer to that request arrives.
    fn waiting(method: &str) -> (Running, tokio::sync::oneshot::Receiver<Message>) {
        let replies = Arc::new(ClientReplies::default());
        let (id, answer) = replies.register();
        let (_notify, notices) = notices::channel(Arc::default());
        let kind = method.split('/').next().unwrap_or_default();
        let mut asked = BTreeMap::new();
        asked.insert(format!("{kind}-1"), (id, json!({ "method": method })));
        let running = Running {
            call: Box::pin(std::future::pending()),
            notices,
            replies,
            asked,
            count: 1,
            server: None,
            method: "tools/call".into(),
            params: json!({ "name": "fake__elicit" }),
            level: None,
        };
        (running, answer)
    }

    fn state_of(answer: &Message) -> Value {
        let v: Value = serde_json::from_str(answer.as_str()).unwrap();
        v["result"]["requestState"].clone()
    }

    #[tokio::test]
    async fn a_parked_call_is_taken_up_once_by_a_retry_that_repeats_it() {
        let parked = Arc::new(Parked::default());
        let (running, mut answer) = waiting("elicitation/create");
        let irr = parked.park(running, "7");
        let v: Value = serde_json::from_str(irr.as_str()).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["result"]["inputRequests"]["elicitation-1"]["method"], "elicitation/create");
        let state = state_of(&irr);
        let params = |name: &str| json!({ "name": name, "requestState": state, "inputResponses": { "elicitation-1": { "action": "decline" } } });
        // Another tool, or another endpoint: refused, and the call keeps waiting.
        let refused = parked.resume(&state, &None, "tools/call", &params("fake__other")).err().unwrap();
        assert!(refused.contains("does not repeat"), "{refused}");
        assert!(parked.resume(&state, &Some("fake".into()), "tools/call", &params("fake__elicit")).is_err());
        assert!(answer.try_recv().is_err(), "nothing was delivered");
        // The retry: the answer reaches the server's request, under mcpx's id for it.
        let running = parked.resume(&state, &None, "tools/call", &params("fake__elicit")).unwrap();
        assert!(running.asked.is_empty());
        assert_eq!(
            answer.try_recv().unwrap().as_str(),
            Message::response("\"mcpx-1\"", r#"{"action":"decline"}"#).as_str()
        );
        // Spent.
        let gone = parked.resume(&state, &None, "tools/call", &params("fake__elicit")).err().unwrap();
        assert!(gone.contains("unknown or expired requestState"), "{gone}");
    }

    #[tokio::test]
    async fn at_most_max_parked_calls_wait() {
        let parked = Arc::new(Parked::default());
        for _ in 0..MAX_PARKED {
            assert!(state_of(&parked.park(waiting("sampling/createMessage").0, "1")).is_string());
        }
        let refused = parked.park(waiting("sampling/createMessage").0, "2");
        let v: Value = serde_json::from_str(refused.as_str()).unwrap();
        assert_eq!(v["error"]["code"], error_code::INTERNAL_ERROR, "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains("256 calls already wait"), "{v}");
        assert_eq!(lock(&parked.calls).len(), MAX_PARKED);
    }

    #[test]
    fn a_retry_repeats_the_params_without_the_rounds_fields() {
        let first = json!({ "name": "fake__elicit", "arguments": { "a": 1 }, "_meta": { "x": 1 } });
        let retry = json!({ "name": "fake__elicit", "arguments": { "a": 1 }, "inputResponses": {}, "requestState": "t", "_meta": { "y": 2 } });
        assert_eq!(repeated(&first), repeated(&retry));
        assert_ne!(repeated(&first), repeated(&json!({ "name": "fake__elicit", "arguments": { "a": 2 } })));
    }
}
