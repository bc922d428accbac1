//! The instance's routing over a channel-backed link, the test playing the server.

use serde_json::value::RawValue;

use super::*;

/// An instance over channels, with the test playing the server.
fn instance() -> (Arc<Instance>, mpsc::Receiver<Outbound>, mpsc::Sender<Inbound>) {
    let (out_tx, out_rx) = mpsc::channel(16);
    let (in_tx, in_rx) = mpsc::channel(16);
    let link = Link { tx: out_tx, rx: in_rx, info: Arc::new(LinkInfo::new(Some(1), None)), epoch: 7, resumed: None };
    let identity = Identity {
        server: "s".into(),
        fingerprint: "f".into(),
        cache_key: "c".into(),
        key: "global".into(),
        sharing: "shared".into(),
    };
    let spec = InstanceSpec { identity, max_message_bytes: 1 << 20 };
    let session = ServerSession {
        protocol_version: "2025-11-25".into(),
        capabilities: RawValue::from_string("{}".into()).unwrap(),
        server_info: None,
        instructions: None,
    };
    let (events, _) = mpsc::unbounded_channel();
    (Instance::resume(spec, link, session, events), out_rx, in_tx)
}

async fn next_request(out: &mut mpsc::Receiver<Outbound>) -> Message {
    loop {
        if let Some(Outbound::Message(m)) = out.recv().await {
            if m.kind() == MessageKind::Request {
                return m;
            }
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
