//! The instance's routing over a channel-backed link, the test playing the server.

use mcpx_proto::mcp::error_code;
use serde_json::value::RawValue;

use super::*;
use crate::transport::TransportError;
use mcpx_proto::MessageKind;

/// An instance over a channel-backed link (epoch 7, `maxMessageBytes` 1 MiB), the
/// test playing the server: it reads `out` and writes `inbound`.
struct Harness {
    inst: Arc<Instance>,
    out: mpsc::Receiver<Outbound>,
    inbound: mpsc::Sender<Inbound>,
    events: mpsc::UnboundedReceiver<(String, InstanceEvent)>,
}

fn harness() -> Harness {
    let (out_tx, out_rx) = mpsc::channel(16);
    let (in_tx, in_rx) = mpsc::channel(16);
    let link = Link {
        tx: out_tx,
        rx: in_rx,
        info: Arc::new(LinkInfo::new(Some(1), None)),
        epoch: 7,
        resumed: None,
        era: None,
    };
    let identity = Identity {
        server: "s".into(),
        fingerprint: "f".into(),
        cache_key: "c".into(),
        key: "global".into(),
        sharing: "shared".into(),
    };
    let spec = InstanceSpec {
        known: crate::instance::Known::Legacy,
        identity,
        max_message_bytes: 1 << 20,
        log_budget: Default::default(),
        origin: Default::default(),
    };
    let session = ServerSession {
        protocol_version: "2025-11-25".into(),
        capabilities: RawValue::from_string("{}".into()).unwrap(),
        server_info: None,
        instructions: None,
    };
    let (events_tx, events) = mpsc::unbounded_channel();
    Harness { inst: Instance::resume(spec, link, session, events_tx), out: out_rx, inbound: in_tx, events }
}

/// An instance over channels, with the test playing the server.
fn instance() -> (Arc<Instance>, mpsc::Receiver<Outbound>, mpsc::Sender<Inbound>) {
    let h = harness();
    (h.inst, h.out, h.inbound)
}

async fn next_request(out: &mut mpsc::Receiver<Outbound>) -> Message {
    loop {
        let m = next_message(out).await;
        if m.kind() == MessageKind::Request {
            return m;
        }
    }
}

/// C04 and its neighbours: callers reusing ids `1`, `"1"`, `0`, `"0"` on one
/// shared instance, answered in reverse order, each get their own result with
/// their id unchanged in value and type.
#[tokio::test]
async fn callers_reusing_ids_get_their_own_responses() {
    let (inst, mut out, inbound) = instance();
    let ids = ["1", "1", "\"1\"", "0", "\"0\""];
    let mut calls = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        let inst = inst.clone();
        let request = Message::request(id, "tools/call", Some(&format!(r#"{{"name":"who","arguments":{{"n":{n}}}}}"#)));
        calls.push(tokio::spawn(async move { inst.forward(request, None, Arc::default()).await.unwrap() }));
    }
    let mut seen = Vec::new();
    for _ in 0..ids.len() {
        let m = next_request(&mut out).await;
        let upstream = UpstreamId::from_json(m.id().unwrap()).unwrap();
        assert_eq!(upstream.epoch, 7, "upstream ids carry the epoch");
        let n: serde_json::Value = serde_json::from_str(m.as_str()).unwrap();
        seen.push((m.id().unwrap().to_owned(), n["params"]["arguments"]["n"].clone()));
    }
    // The first caller is the slowest: answer in reverse.
    for (upstream, n) in seen.iter().rev() {
        let reply = Message::response(upstream, &format!(r#"{{"content":[{{"type":"text","text":"caller {n}"}}]}}"#));
        inbound.send(Inbound::Message(reply)).await.unwrap();
    }
    for (n, call) in calls.into_iter().enumerate() {
        let response = call.await.unwrap();
        assert_eq!(response.id(), Some(ids[n]), "caller {n} got id {:?}", response.id());
        assert!(response.as_str().contains(&format!("caller {n}")), "caller {n} got {}", response.as_str());
    }
}

/// C13: a duplicate response and a late one (its caller gave up) are dropped;
/// the instance stays up and the next request works.
#[tokio::test]
async fn duplicate_and_late_responses_are_dropped() {
    let (inst, mut out, inbound) = instance();
    let first = {
        let inst = inst.clone();
        tokio::spawn(async move { inst.request(Message::request("5", "tools/call", Some("{}")), None).await })
    };
    let m = next_request(&mut out).await;
    let answer = Message::response(m.id().unwrap(), r#"{"content":[]}"#);
    inbound.send(Inbound::Message(answer.clone())).await.unwrap();
    inbound.send(Inbound::Message(answer)).await.unwrap();
    assert!(first.await.unwrap().is_ok());
    let gave_up = inst.request(Message::request("6", "tools/call", Some("{}")), Some(Duration::from_millis(50))).await;
    assert!(matches!(gave_up, Err(CallError::Timeout(_))));
    let late = next_request(&mut out).await;
    inbound.send(Inbound::Message(Message::response(late.id().unwrap(), "{}"))).await.unwrap();
    assert!(inst.is_alive());
    let next = {
        let inst = inst.clone();
        tokio::spawn(async move { inst.request(Message::request("7", "ping", None), None).await })
    };
    // Skip the cancellation notification the timeout sent.
    let m = next_request(&mut out).await;
    inbound.send(Inbound::Message(Message::response(m.id().unwrap(), "{}"))).await.unwrap();
    assert!(next.await.unwrap().is_ok());
}

/// The next message the instance sent (requests, notifications and answers alike).
async fn next_message(out: &mut mpsc::Receiver<Outbound>) -> Message {
    loop {
        if let Outbound::Message(m) = out.recv().await.expect("the instance closed its link") {
            return m;
        }
    }
}

/// A JSON value of a message, for assertions.
fn json(m: &Message) -> serde_json::Value {
    serde_json::from_str(m.as_str()).unwrap()
}

/// Starts `request` on behalf of `ctx`, and returns the call and the request as the
/// server received it.
async fn call(
    h: &mut Harness,
    request: Message,
    ctx: CallContext,
) -> (tokio::task::JoinHandle<Result<Message, CallError>>, Message) {
    let inst = h.inst.clone();
    let task = tokio::spawn(async move { inst.forward(request, None, Arc::new(ctx)).await });
    (task, next_request(&mut h.out).await)
}

/// A caller context with a notify channel, and its receiving end.
fn notified(roots: Option<Vec<std::path::PathBuf>>) -> (CallContext, crate::notices::NoticeReceiver) {
    let (notify, rx) = crate::notices::channel(Arc::default());
    (CallContext { label: "session:t".into(), notify: Some(notify), roots, ..CallContext::default() }, rx)
}

#[tokio::test]
async fn progress_reaches_its_caller_under_the_callers_own_token() {
    let mut h = harness();
    let (ctx, mut notes) = notified(None);
    let request = Message::request("1", "tools/call", Some(r#"{"name":"slow","_meta":{"progressToken":"tok"}}"#));
    let (task, upstream) = call(&mut h, request, ctx).await;
    let id = upstream.id().unwrap().to_owned();
    assert_eq!(upstream.progress_token(), Some(id.as_str()), "upstream, the token is the upstream id");
    assert_eq!(h.inst.holders(), ["session:t"]);
    let progress = |token: &str| {
        Message::notification("notifications/progress", Some(&format!(r#"{{"progressToken":{token},"progress":1}}"#)))
    };
    // A token no request is waiting under, and one of an earlier epoch, go nowhere.
    h.inbound.send(Inbound::Message(progress("\"tok\""))).await.unwrap();
    h.inbound.send(Inbound::Message(progress(&UpstreamId { epoch: 6, seq: 1 }.to_json()))).await.unwrap();
    h.inbound.send(Inbound::Message(progress(&id))).await.unwrap();
    let note = notes.recv().await.unwrap();
    assert_eq!(json(&note)["params"]["progressToken"], "tok");
    h.inbound.send(Inbound::Message(Message::response(&id, "{}"))).await.unwrap();
    assert_eq!(task.await.unwrap().unwrap().id(), Some("1"));
    assert!(notes.try_recv().is_none(), "only the one progress notification arrived");
    assert!(h.inst.holders().is_empty());
}

#[tokio::test]
async fn a_timeout_cancels_the_request_upstream() {
    let mut h = harness();
    let gave_up = h.inst.request(Message::request("1", "tools/call", None), Some(Duration::from_millis(20))).await;
    assert!(matches!(gave_up, Err(CallError::Timeout(_))));
    let upstream = next_request(&mut h.out).await;
    let cancel = next_message(&mut h.out).await;
    assert_eq!(cancel.method(), Some("notifications/cancelled"));
    let params = &json(&cancel)["params"];
    assert_eq!(params["requestId"].to_string(), upstream.id().unwrap(), "the upstream id, as a number");
    assert_eq!(params["reason"], "timeout");
    assert_eq!(h.inst.in_flight(), 0);
}

#[tokio::test]
async fn a_caller_that_stops_waiting_cancels_the_request_upstream() {
    let mut h = harness();
    let (task, upstream) = call(&mut h, Message::request("1", "tools/call", None), CallContext::default()).await;
    task.abort();
    let _ = task.await;
    let cancel = next_message(&mut h.out).await;
    assert_eq!(cancel.method(), Some("notifications/cancelled"));
    assert_eq!(json(&cancel)["params"]["reason"], "the caller stopped waiting");
    // Its answer comes too late: dropped, and the instance carries on.
    h.inbound.send(Inbound::Message(Message::response(upstream.id().unwrap(), "{}"))).await.unwrap();
    assert_eq!(h.inst.in_flight(), 0);
    assert!(h.inst.is_alive());
    // The router has handled the late answer once a later request gets its own.
    let (next, m) = call(&mut h, Message::request("2", "ping", None), CallContext::default()).await;
    h.inbound.send(Inbound::Message(Message::response(m.id().unwrap(), "{}"))).await.unwrap();
    assert!(next.await.unwrap().is_ok(), "the instance carries on after the late answer");
}

#[tokio::test]
async fn a_server_request_goes_to_the_only_caller_in_flight() {
    let mut h = harness();
    // With nobody in flight, nobody can answer.
    h.inbound.send(Inbound::Message(Message::request("\"r0\"", "roots/list", None))).await.unwrap();
    let answer = next_message(&mut h.out).await;
    assert_eq!((answer.id(), json(&answer)["error"]["code"].as_i64()), (Some("\"r0\""), Some(error_code::NO_CALLER)));
    // A ping is answered by mcpx itself.
    h.inbound.send(Inbound::Message(Message::request("8", "ping", None))).await.unwrap();
    let pong = next_message(&mut h.out).await;
    assert_eq!((pong.id(), json(&pong)["result"].clone()), (Some("8"), serde_json::json!({})));
    // One caller in flight: its working directory is the root.
    let (ctx, _notes) = notified(Some(vec!["/work/repo".into()]));
    let (first, upstream) = call(&mut h, Message::request("1", "tools/call", None), ctx).await;
    h.inbound.send(Inbound::Message(Message::request("\"r1\"", "roots/list", None))).await.unwrap();
    let roots = next_message(&mut h.out).await;
    assert_eq!(roots.id(), Some("\"r1\""));
    assert_eq!(json(&roots)["result"]["roots"][0]["uri"], "file:///work/repo");
    // It cannot sample.
    h.inbound.send(Inbound::Message(Message::request("2", "sampling/createMessage", Some("{}")))).await.unwrap();
    let refused = next_message(&mut h.out).await;
    assert_eq!(json(&refused)["error"]["code"].as_i64(), Some(error_code::CALLER_CANNOT_ANSWER));
    // Two in flight: the request cannot be routed to one of them.
    let (second, upstream2) = call(&mut h, Message::request("1", "tools/call", None), CallContext::default()).await;
    h.inbound.send(Inbound::Message(Message::request("3", "roots/list", None))).await.unwrap();
    let ambiguous = next_message(&mut h.out).await;
    assert_eq!(json(&ambiguous)["error"]["code"].as_i64(), Some(error_code::NO_CALLER));
    for (task, up) in [(first, upstream), (second, upstream2)] {
        h.inbound.send(Inbound::Message(Message::response(up.id().unwrap(), "{}"))).await.unwrap();
        assert!(task.await.unwrap().is_ok());
    }
}

#[tokio::test]
async fn an_mcp_client_that_declared_sampling_answers_it_under_the_servers_id() {
    let mut h = harness();
    let replies = Arc::new(ClientReplies::default());
    let (mut ctx, mut notes) = notified(None);
    ctx.client = Some((vec!["sampling/createMessage".into()], replies.clone()));
    let (task, upstream) = call(&mut h, Message::request("1", "tools/call", None), ctx).await;
    h.inbound.send(Inbound::Message(Message::request("42", "sampling/createMessage", Some("{}")))).await.unwrap();
    let asked = notes.recv().await.unwrap();
    assert_eq!(asked.method(), Some("sampling/createMessage"));
    let client_id = asked.id().unwrap().to_owned();
    assert_ne!(client_id, "42", "the client sees an id of mcpx's own");
    assert!(replies.deliver(Message::response(&client_id, r#"{"content":{"type":"text","text":"hi"}}"#)));
    assert!(!replies.deliver(Message::response(&client_id, "{}")), "a second answer finds nobody waiting");
    let relayed = next_message(&mut h.out).await;
    assert_eq!(relayed.id(), Some("42"));
    assert_eq!(json(&relayed)["result"]["content"]["text"], "hi");
    h.inbound.send(Inbound::Message(Message::response(upstream.id().unwrap(), "{}"))).await.unwrap();
    assert!(task.await.unwrap().is_ok());
}

#[tokio::test]
async fn log_messages_go_to_the_only_caller_and_list_changes_to_the_daemon() {
    let mut h = harness();
    let (ctx, mut notes) = notified(None);
    let (task, upstream) = call(&mut h, Message::request("1", "tools/call", None), ctx).await;
    let log = Message::notification("notifications/message", Some(r#"{"level":"info","data":"step 1"}"#));
    h.inbound.send(Inbound::Message(log)).await.unwrap();
    assert_eq!(json(&notes.recv().await.unwrap())["params"]["data"], "step 1");
    h.inbound.send(Inbound::Message(Message::notification("notifications/tools/list_changed", None))).await.unwrap();
    match h.events.recv().await {
        Some((fingerprint, InstanceEvent::ListChanged(method))) => {
            assert_eq!((fingerprint.as_str(), method.as_str()), ("f", "notifications/tools/list_changed"));
        }
        other => panic!("{other:?}"),
    }
    h.inbound.send(Inbound::Message(Message::response(upstream.id().unwrap(), "{}"))).await.unwrap();
    assert!(task.await.unwrap().is_ok());
}

#[tokio::test]
async fn transport_failures_fail_only_their_request() {
    let mut h = harness();
    let (oversize, up1) = call(&mut h, Message::request("1", "tools/call", None), CallContext::default()).await;
    let (failed, up2) = call(&mut h, Message::request("2", "tools/call", None), CallContext::default()).await;
    h.inbound.send(Inbound::OversizeId(up1.id().unwrap().to_owned())).await.unwrap();
    assert!(matches!(oversize.await.unwrap(), Err(CallError::TooLarge { limit: 1_048_576 })));
    let error =
        TransportError::Exchange { message: "timed out reaching u".into(), timed_out: true, unreachable: false };
    h.inbound.send(Inbound::Failed { id: up2.id().unwrap().to_owned(), error }).await.unwrap();
    match failed.await.unwrap() {
        Err(CallError::Transport(e)) => assert!(e.timed_out() && e.to_string() == "timed out reaching u"),
        other => panic!("{other:?}"),
    }
    let (undecodable, up3) = call(&mut h, Message::request("4", "tools/call", None), CallContext::default()).await;
    let reason = "invalid utf-8 sequence of 1 bytes from index 40".to_owned();
    h.inbound.send(Inbound::Undecodable { id: up3.id().unwrap().to_owned(), reason }).await.unwrap();
    match undecodable.await.unwrap() {
        Err(CallError::Protocol(e)) => assert!(e.starts_with(
            "the server's reply could not be decoded (invalid utf-8 sequence of 1 bytes from index 40) and was discarded"
        )),
        other => panic!("{other:?}"),
    }
    let big = Message::request("3", "tools/call", Some(&format!(r#"{{"data":"{}"}}"#, "x".repeat(1 << 20))));
    assert!(matches!(h.inst.request(big, None).await, Err(CallError::RequestTooLarge { limit: 1_048_576, .. })));
    assert!(h.inst.is_alive());
}

#[tokio::test]
async fn an_unrequested_exit_fails_every_call_and_counts_as_a_crash() {
    let mut h = harness();
    let (task, _) = call(&mut h, Message::request("1", "tools/call", None), CallContext::default()).await;
    h.inst.info.stderr.lock().unwrap().push(b"panic: out of cheese\n");
    h.inbound.send(Inbound::Exited(ExitInfo { code: Some(3), signal: None })).await.unwrap();
    let error = task.await.unwrap().unwrap_err();
    assert_eq!(error.to_string(), "server exited with code 3; stderr: panic: out of cheese");
    assert_eq!(h.inst.state(), State::Exited(ExitInfo { code: Some(3), signal: None }));
    match h.events.recv().await {
        Some((_, InstanceEvent::Exited { cache_key, crash: Some(_), .. })) => assert_eq!(cache_key, "c"),
        other => panic!("{other:?}"),
    }
    let after = h.inst.request(Message::request("2", "ping", None), None).await;
    assert!(matches!(after, Err(CallError::Exited { .. })), "{after:?}");
}

/// A server's error response with `"id": null` (it could not read a request's id):
/// with exactly one request in flight, that request fails with the server's own error
/// under the caller's id; with two, neither is touched. Each such error is counted.
#[tokio::test]
async fn an_error_with_a_null_id_fails_the_only_request_in_flight() {
    let (inst, mut out, inbound) = instance();
    let null_error = || {
        Message::parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad id from the server"}}"#)
            .unwrap()
    };
    let only = {
        let inst = inst.clone();
        tokio::spawn(async move {
            inst.forward(Message::request("\"c1\"", "tools/call", Some("{}")), None, Arc::default()).await
        })
    };
    let _ = next_request(&mut out).await;
    inbound.send(Inbound::Message(null_error())).await.unwrap();
    let failed = tokio::time::timeout(Duration::from_secs(10), only).await.expect("the request still waits").unwrap();
    let failed = failed.unwrap();
    let v: serde_json::Value = serde_json::from_str(failed.as_str()).unwrap();
    assert_eq!((v["id"].as_str(), v["error"]["message"].as_str()), (Some("c1"), Some("bad id from the server")));
    assert_eq!(inst.null_id_errors(), 1);
    // Two in flight: the error cannot be placed, both still get their own answers.
    let two: Vec<_> = (0..2)
        .map(|n| {
            let inst = inst.clone();
            tokio::spawn(async move { inst.request(Message::request(&n.to_string(), "ping", None), None).await })
        })
        .collect();
    let ups = [next_request(&mut out).await, next_request(&mut out).await];
    inbound.send(Inbound::Message(null_error())).await.unwrap();
    for up in &ups {
        inbound.send(Inbound::Message(Message::response(up.id().unwrap(), "{}"))).await.unwrap();
    }
    for t in two {
        assert!(t.await.unwrap().unwrap().as_str().contains("\"result\""));
    }
    assert_eq!(inst.null_id_errors(), 2);
}

/// A link closes its outbound side a moment before the instance reads its exit
/// report (seen in CI: "server ended" instead of "exited with code 3"). A call
/// caught in between waits for the report and names the exit code.
#[tokio::test]
async fn a_call_between_the_link_closing_and_its_exit_report_names_the_exit() {
    let Harness { inst, out, inbound, events: _events } = harness();
    drop(out);
    let call = {
        let inst = inst.clone();
        tokio::spawn(async move { inst.request(Message::request("1", "tools/call", None), None).await })
    };
    // The call is refused by the closed link before the report arrives.
    tokio::task::yield_now().await;
    inbound.send(Inbound::Exited(ExitInfo { code: Some(3), signal: None })).await.unwrap();
    let error = call.await.unwrap().unwrap_err();
    assert_eq!(error.to_string(), "server exited with code 3");
}

/// A call made after the link was lost (its supervisor died) while the link's writer
/// still takes messages fails at once, rather than waiting for an answer nothing will
/// send (found by the chaos soak: an exclusive instance's waiter timed out after 20 s).
#[tokio::test]
async fn a_call_after_the_link_was_lost_fails_at_once() {
    let Harness { inst, out: _out, inbound, events: _events } = harness();
    inbound.send(Inbound::Lost("its supervisor (pid 1) died".into())).await.unwrap();
    let mut state = inst.state.subscribe();
    state.wait_for(|s| *s == State::Lost).await.unwrap();
    let call = inst.request(Message::request("1", "tools/call", None), Some(Duration::from_secs(60))).await;
    assert!(matches!(&call, Err(CallError::Lost(why)) if why == "its supervisor (pid 1) died"), "{call:?}");
}
