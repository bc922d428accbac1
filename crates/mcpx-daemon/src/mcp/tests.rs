//! The MCP endpoint's session routing on an in-process daemon
//! ([`crate::testing::Fixture`]): handlers called directly, no socket, no child
//! process. Ids, progress, cancellation and server-to-client requests.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use futures_util::FutureExt;
use http_body_util::BodyExt;
use mcpx_proto::Message;
use serde_json::{Value, json};

use crate::api::Caller;
use crate::mcp::routes::{delete, get_stream, handle_post};
use crate::mcp::{CONFIG_HEADER, CWD_HEADER, ClientSession, ClientSessions, Endpoint, SESSION_HEADER};
use crate::testing::Fixture;

/// An MCP client of the fixture's endpoint.
struct Client {
    endpoint: Arc<Endpoint>,
    fx: Arc<Fixture>,
    session: Option<String>,
}

impl Client {
    /// A client of a new endpoint over a daemon with the default server `fake`.
    fn new() -> Client {
        let fx = Arc::new(Fixture::new(&[("fake", json!({}))]));
        Client { endpoint: Endpoint::new(fx.daemon.clone()), fx, session: None }
    }

    /// Another client of the same endpoint.
    fn another(&self) -> Client {
        Client { endpoint: self.endpoint.clone(), fx: self.fx.clone(), session: None }
    }

    fn headers(&self, sse: bool) -> HeaderMap {
        let mut h = HeaderMap::new();
        let value = |v: &std::path::Path| HeaderValue::from_str(&v.display().to_string()).unwrap();
        h.insert(CONFIG_HEADER, value(&self.fx.config));
        h.insert(CWD_HEADER, value(self.fx.config.parent().unwrap()));
        if let Some(id) = &self.session {
            h.insert(SESSION_HEADER, HeaderValue::from_str(id).unwrap());
        }
        if sse {
            h.insert("accept", HeaderValue::from_static("application/json, text/event-stream"));
        }
        h
    }

    /// Posts `body` to `/mcp`.
    async fn post(&self, body: &Value, sse: bool) -> Response {
        handle_post(self.endpoint.clone(), None, None, self.headers(sse), Bytes::from(body.to_string())).await
    }

    /// Initializes a session offering `version` and `capabilities`; returns the result.
    async fn initialize(&mut self, version: &str, capabilities: Value) -> Value {
        let params = json!({ "protocolVersion": version, "capabilities": capabilities, "clientInfo": { "name": "t" } });
        let response = self.post(&request(0, "initialize", params), false).await;
        self.session = Some(response.headers().get(SESSION_HEADER).expect("a session id").to_str().unwrap().to_owned());
        json_body(response).await.1["result"].clone()
    }

    /// Posts a request and returns its JSON answer.
    async fn ask(&self, id: impl Into<Value>, method: &str, params: Value) -> Value {
        let (status, body) = json_body(self.post(&request(id, method, params), false).await).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }
}

fn request(id: impl Into<Value>, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id.into(), "method": method, "params": params })
}

async fn json_body(response: Response) -> (StatusCode, Value) {
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Reads `body` until what has come holds `needle`; returns all of it.
async fn read_until(body: &mut Body, seen: &mut String, needle: &str) {
    let read = async {
        while !seen.contains(needle) {
            let frame = body.frame().await.expect("the stream ended").unwrap();
            seen.push_str(&String::from_utf8_lossy(&frame.into_data().unwrap()));
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .unwrap_or_else(|_| panic!("no {needle:?} in {seen:?}"));
}

/// The JSON-RPC messages in SSE text, in order.
fn sse_messages(text: &str) -> Vec<Value> {
    text.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect()
}

#[tokio::test]
async fn initialize_negotiates_and_later_requests_need_the_session() {
    let mut client = Client::new();
    let result = client.initialize("2025-03-26", json!({})).await;
    assert_eq!(result["protocolVersion"], "2025-03-26");
    assert_eq!(result["serverInfo"]["name"], "mcpx");
    let mut newest = client.another();
    assert_eq!(newest.initialize("1999-01-01", json!({})).await["protocolVersion"], mcpx_proto::mcp::LATEST_VERSION);
    assert_ne!(client.session, newest.session);

    let mut stranger = client.another();
    let (status, body) = json_body(stranger.post(&request(1, "ping", json!({})), false).await).await;
    assert_eq!((status, body["error"]["code"].as_i64()), (StatusCode::BAD_REQUEST, Some(-32000)));
    stranger.session = Some("nope".into());
    let (status, body) = json_body(stranger.post(&request(1, "ping", json!({})), false).await).await;
    assert_eq!((status, body["error"]["code"].as_i64()), (StatusCode::NOT_FOUND, Some(-32001)));
    assert_eq!(client.ask(1, "ping", json!({})).await["result"], json!({}));
}

#[tokio::test]
async fn tools_are_listed_under_exposed_names_and_calls_map_back() {
    let mut client = Client::new();
    client.initialize("2025-11-25", json!({})).await;
    let listed = client.ask(1, "tools/list", json!({})).await;
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["fake__echo", "fake__progress", "fake__fail", "fake__slow", "fake__ask", "fake__exit"]);
    let called = client.ask(2, "tools/call", json!({ "name": "fake__echo", "arguments": { "message": "hi" } })).await;
    assert_eq!(called["result"]["content"][0]["text"], "hi");
    assert_eq!(client.fx.server.count("tools/call echo"), 1);
    let unknown = client.ask(3, "tools/call", json!({ "name": "fake__nope" })).await;
    assert_eq!(unknown["error"]["message"], "unknown tool: `fake__nope`");
    let missing = client.ask(4, "no/such", json!({})).await;
    assert_eq!(missing["error"]["code"], mcpx_proto::mcp::error_code::METHOD_NOT_FOUND);
}

#[tokio::test]
async fn callers_reusing_ids_get_their_own_answers() {
    let mut a = Client::new();
    let mut b = a.another();
    a.initialize("2025-11-25", json!({})).await;
    b.initialize("2025-11-25", json!({})).await;
    let call = |message: &str| json!({ "name": "fake__echo", "arguments": { "message": message } });
    // One instance serves both sessions; the same id `1` and `"1"` from each.
    let (one, two, three) = tokio::join!(
        a.ask(1, "tools/call", call("a1")),
        b.ask(1, "tools/call", call("b1")),
        b.ask("1", "tools/call", call("b-string")),
    );
    assert_eq!((one["id"].clone(), one["result"]["content"][0]["text"].clone()), (json!(1), json!("a1")));
    assert_eq!((two["id"].clone(), two["result"]["content"][0]["text"].clone()), (json!(1), json!("b1")));
    assert_eq!((three["id"].clone(), three["result"]["content"][0]["text"].clone()), (json!("1"), json!("b-string")));
    assert_eq!(a.fx.server.count("launch"), 1);
}

/// A call that sends no notification has nothing to stream: a client that accepts JSON
/// too gets it as JSON, with its own id and the session's header.
#[tokio::test]
async fn a_call_without_notifications_is_answered_as_json_to_a_client_that_accepts_both() {
    let mut client = Client::new();
    client.initialize("2025-11-25", json!({})).await;
    let params = json!({ "name": "fake__echo", "arguments": { "message": "plain" } });
    let response = client.post(&request("j", "tools/call", params), true).await;
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()), client.session.as_deref());
    let (status, body) = json_body(response).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((body["id"].clone(), body["result"]["content"][0]["text"].clone()), (json!("j"), json!("plain")));
}

#[tokio::test]
async fn progress_is_streamed_as_sse_with_the_clients_token() {
    let mut client = Client::new();
    client.initialize("2025-11-25", json!({})).await;
    let params = json!({ "name": "fake__progress", "arguments": {}, "_meta": { "progressToken": "tok" } });
    let response = client.post(&request(5, "tools/call", params), true).await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()), client.session.as_deref());
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    let messages = sse_messages(&String::from_utf8_lossy(&bytes));
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["method"], "notifications/progress");
    assert_eq!(messages[0]["params"]["progressToken"], "tok", "the client's own token");
    assert_eq!(
        (messages[1]["id"].clone(), messages[1]["result"]["content"][0]["text"].clone()),
        (json!(5), json!("done"))
    );
}

#[tokio::test]
async fn a_cancelled_request_is_answered_and_cancelled_upstream() {
    let mut client = Client::new();
    client.initialize("2025-11-25", json!({})).await;
    client.ask(1, "tools/list", json!({})).await;
    let endpoint = client.endpoint.clone();
    let headers = client.headers(false);
    let slow = request(7, "tools/call", json!({ "name": "fake__slow" }));
    let answer = tokio::spawn(handle_post(endpoint, None, None, headers, Bytes::from(slow.to_string())));
    client.fx.server.wait_for("tools/call slow").await;
    let cancel = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 7 } });
    assert_eq!(client.post(&cancel, false).await.status(), StatusCode::ACCEPTED);
    let (_, body) = json_body(answer.await.unwrap()).await;
    assert_eq!((body["id"].clone(), body["error"]["message"].clone()), (json!(7), json!("cancelled by the client")));
    client.fx.server.wait_for("notifications/cancelled").await;
}

#[tokio::test]
async fn a_server_request_goes_to_the_client_that_can_answer_it() {
    let mut client = Client::new();
    client.initialize("2025-11-25", json!({ "sampling": {} })).await;
    client.ask(1, "tools/list", json!({})).await;
    let response = client.post(&request(9, "tools/call", json!({ "name": "fake__ask" })), true).await;
    let mut body = response.into_body();
    let mut seen = String::new();
    read_until(&mut body, &mut seen, "sampling/createMessage").await;
    let asked = sse_messages(&seen).pop().unwrap();
    assert_eq!(asked["id"], "mcpx-1", "the client sees mcpx's id, not the server's");
    let sampled = json!({ "jsonrpc": "2.0", "id": asked["id"], "result": { "role": "assistant", "content": { "type": "text", "text": "sampled" } } });
    assert_eq!(client.post(&sampled, false).await.status(), StatusCode::ACCEPTED);
    read_until(&mut body, &mut seen, "\"id\":9").await;
    let answer = sse_messages(&seen).pop().unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "sampled");
    assert_eq!(client.fx.server.count("response \"ask-1\""), 1, "the server got the answer under its own id");
}

#[tokio::test]
async fn a_server_request_no_client_can_answer_gets_an_error() {
    let mut client = Client::new();
    client.initialize("2025-11-25", json!({})).await;
    let answer = client.ask(2, "tools/call", json!({ "name": "fake__ask" })).await;
    assert_eq!(answer["result"]["content"][0]["text"], "no answer");
    assert_eq!(client.fx.server.count("response \"ask-1\""), 1);
}

#[tokio::test]
async fn batches_only_under_2025_03_26() {
    let batch = json!([request(1, "ping", json!({})), request(2, "ping", json!({}))]);
    let mut old = Client::new();
    old.initialize("2025-03-26", json!({})).await;
    let (status, body) = json_body(old.post(&batch, false).await).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body.as_array().map(Vec::len), Some(2));
    let mut new = old.another();
    new.initialize("2025-11-25", json!({})).await;
    let (status, body) = json_body(new.post(&batch, false).await).await;
    assert_eq!((status, body["error"]["code"].as_i64()), (StatusCode::BAD_REQUEST, Some(-32600)));
}

#[tokio::test]
async fn the_get_stream_hears_announcements_and_is_one_per_session() {
    let mut client = Client::new();
    client.initialize("2025-11-25", json!({})).await;
    let state = || State(client.endpoint.clone());
    let stream = get_stream(state(), client.headers(false)).await;
    assert_eq!(stream.status(), StatusCode::OK);
    assert_eq!(get_stream(state(), client.headers(false)).await.status(), StatusCode::CONFLICT);
    client.fx.daemon.announce(Message::notification("notifications/tools/list_changed", None));
    let mut body = stream.into_body();
    let mut seen = String::new();
    read_until(&mut body, &mut seen, "list_changed").await;
    assert!(seen.starts_with(": stream open\n\n"), "{seen:?}");
    assert_eq!(delete(state(), client.headers(false)).await.status(), StatusCode::NO_CONTENT);
    assert_eq!(delete(state(), client.headers(false)).await.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn broadcast_reaches_only_sessions_with_a_stream() {
    let sessions = ClientSessions::default();
    let session = |caps: Value| ClientSession::new(None, Caller::default(), "2025-11-25".into(), &caps, false);
    let (listening, quiet) = ("1".to_owned(), "2".to_owned());
    sessions.insert(listening.clone(), session(json!({ "roots": {}, "sampling": {} }))).unwrap();
    sessions.insert(quiet.clone(), session(json!({}))).unwrap();
    assert_eq!(sessions.get(&listening).unwrap().can_answer, ["sampling/createMessage", "roots/list"]);
    let mut rx = sessions.get(&listening).unwrap().open_stream().unwrap();
    assert!(sessions.get(&listening).unwrap().open_stream().is_none(), "one stream per session");
    sessions.broadcast(&Message::notification("notifications/prompts/list_changed", None));
    assert_eq!(rx.recv().await.unwrap(), b": stream open\n\n");
    let event = String::from_utf8(rx.recv().await.unwrap()).unwrap();
    assert!(event.starts_with("event: message\ndata: ") && event.contains("prompts/list_changed"), "{event}");
    assert!(sessions.remove(&quiet) && !sessions.remove(&quiet));
    drop(rx);
    assert!(sessions.get(&listening).unwrap().open_stream().is_some(), "a closed stream can be opened again");
}

#[tokio::test]
async fn the_client_cancels_only_what_is_in_flight() {
    let session = ClientSession::new(None, Caller::default(), "2025-11-25".into(), &json!({}), false);
    session.cancel("1");
    let stop = session.begin("1");
    session.cancel("2");
    assert!(stop.notified().now_or_never().is_none(), "another id stops nothing");
    session.cancel("1");
    stop.notified().await;
    session.end("1");
    session.cancel("1");
    assert!(stop.notified().now_or_never().is_none(), "an answered request is not stopped");
}
