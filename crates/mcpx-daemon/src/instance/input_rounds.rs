//! A modern server's `InputRequiredResult` answered by the caller that owns the
//! request (MCP 2026-07-28, Basic, Patterns, "Multi Round-Trip Requests"): each of its
//! `inputRequests` goes to that caller exactly as a legacy server's request would
//! (an MCP client of either era asks its user over its own stream or its own
//! `InputRequiredResult`; a shell caller over the elicitation form of `mcpx call`),
//! and the request is sent again with the answers in `inputResponses` and the
//! server's `requestState`, at most [`MAX_INPUT_ROUNDS`] times.
//!
//! Routing is exact: the input requests belong to the one request they answer, so
//! they reach its caller even when other calls are in flight on the instance (where
//! a legacy stdio server's requests can be routed only while one call is).

use std::sync::Arc;

use mcpx_proto::mcp::error_code;
use mcpx_proto::{Message, response_result};
use serde_json::{Map, Value, json};

use std::time::Duration;

use super::context::{CLIENT_ANSWER_TIMEOUT, CallContext, INTERACTIVE, MAX_INPUT_ROUNDS};
use super::server_requests;
use super::{CallError, Instance};

impl Instance {
    /// [`Instance::request`] on behalf of `ctx`: a progress token in the request's
    /// `_meta` is replaced upstream by the request's upstream id and restored in each
    /// `notifications/progress` sent to `ctx` (MCP 2025-11-25, Utilities, "Progress").
    /// If the returned future is dropped before the response (the caller went away),
    /// the server is sent `notifications/cancelled` for it.
    ///
    /// A modern server's `InputRequiredResult` is answered by `ctx` and the request
    /// sent again with the answers, at most [`MAX_INPUT_ROUNDS`] times (see
    /// `input_rounds`); each round has the whole `timeout`.
    pub async fn request_for(
        &self,
        message: Message,
        timeout: Option<Duration>,
        ctx: Arc<CallContext>,
    ) -> Result<Message, CallError> {
        let interactive = INTERACTIVE.contains(&message.method().unwrap_or_default());
        if !interactive || !self.era().is_some_and(|e| e.is_modern()) {
            return self.request_once(message, timeout, ctx).await;
        }
        let mut response = self.request_once(message.clone(), timeout, ctx.clone()).await?;
        for _ in 0..MAX_INPUT_ROUNDS {
            let Some((requests, state)) = input_required(&response) else { return Ok(response) };
            let retry = match retry(&message, &ctx, requests, state).await {
                Ok(retry) => retry,
                Err(refusal) => return Ok(refusal),
            };
            response = self.request_once(retry, timeout, ctx.clone()).await?;
        }
        match input_required(&response) {
            Some(_) => Ok(too_many_rounds(&message)),
            None => Ok(response),
        }
    }
}

/// The `inputRequests` (by key) and `requestState` of `response` when it is an
/// `InputRequiredResult`; `None` for any other response.
fn input_required(response: &Message) -> Option<(Map<String, Value>, Option<Value>)> {
    let result: Value = serde_json::from_str(response_result(response).ok()?.get()).ok()?;
    if result.get("resultType")? != "input_required" {
        return None;
    }
    let requests = result.get("inputRequests").and_then(Value::as_object).cloned().unwrap_or_default();
    Some((requests, result.get("requestState").cloned()))
}

/// The request `original` sent again with the answers of `ctx` to `requests` and the
/// server's `state`; or, when the caller could not answer one of them, the error
/// response (with the original's id) that ends the call, naming what was asked.
async fn retry(
    original: &Message,
    ctx: &Arc<CallContext>,
    requests: Map<String, Value>,
    state: Option<Value>,
) -> Result<Message, Message> {
    let id = original.id().unwrap_or("null").to_owned();
    let mut answers = Map::new();
    for (key, request) in requests {
        let method = request["method"].as_str().unwrap_or_default().to_owned();
        let answer = ask(ctx, &method, &request["params"]).await;
        match response_result(&answer) {
            Ok(result) => {
                answers.insert(key, serde_json::from_str(result.get()).unwrap_or_default());
            }
            Err(e) => {
                let message =
                    format!("the server asked for `{method}` to go on, and it was not answered: {}", e.message);
                return Err(Message::error_response(&id, e.code, &message));
            }
        }
    }
    let mut v: Value = serde_json::from_str(original.as_str()).unwrap_or_default();
    if !v["params"].is_object() {
        v["params"] = json!({});
    }
    v["params"]["inputResponses"] = Value::Object(answers);
    match state {
        Some(state) => v["params"]["requestState"] = state,
        None => {
            if let Some(p) = v["params"].as_object_mut() {
                p.remove("requestState");
            }
        }
    }
    Message::parse(v.to_string()).map_err(|e| {
        Message::error_response(&id, error_code::INTERNAL_ERROR, &format!("mcpx could not build the retry: {e}"))
    })
}

/// The error response for a request whose server still asked for input after
/// [`MAX_INPUT_ROUNDS`] rounds.
fn too_many_rounds(original: &Message) -> Message {
    let method = original.method().unwrap_or_default();
    Message::error_response(
        original.id().unwrap_or("null"),
        error_code::INTERNAL_ERROR,
        &format!(
            "mcpx: the server asked for input {MAX_INPUT_ROUNDS} times for one `{method}` and never finished; call again, or report it to the server's maintainers"
        ),
    )
}

/// The caller's answer to one input request (`method`, `params`): from the MCP client
/// or shell form that declared it answers `method`, within [`CLIENT_ANSWER_TIMEOUT`];
/// otherwise what mcpx answers for it (a shell caller's roots, or the documented
/// refusal, -32003).
async fn ask(ctx: &Arc<CallContext>, method: &str, params: &Value) -> Message {
    let params = (!params.is_null()).then(|| params.to_string());
    let request = Message::request("0", method, params.as_deref());
    if let Some(answer) = ctx.ask_client(&request) {
        return match tokio::time::timeout(CLIENT_ANSWER_TIMEOUT, answer).await {
            Ok(Ok(response)) => response,
            _ => Message::error_response(
                "0",
                error_code::NO_CALLER,
                &format!("mcpx: the client did not answer `{method}`"),
            ),
        };
    }
    server_requests::local_answer("0", method, std::slice::from_ref(ctx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_input_required_result_asks() {
        let asked = Message::response(
            "1",
            r#"{"resultType":"input_required","inputRequests":{"elicitation-1":{"method":"elicitation/create"}},"requestState":"s"}"#,
        );
        let (requests, state) = input_required(&asked).unwrap();
        assert_eq!(requests["elicitation-1"]["method"], "elicitation/create");
        assert_eq!(state, Some(json!("s")));
        assert!(input_required(&Message::response("1", r#"{"resultType":"complete"}"#)).is_none());
        assert!(input_required(&Message::error_response("1", -32603, "no")).is_none());
    }

    #[tokio::test]
    async fn a_shell_caller_that_cannot_answer_ends_the_call_with_the_refusal() {
        let shell = Arc::new(CallContext { shell: true, ..CallContext::default() });
        let original = Message::request("4", "tools/call", Some(r#"{"name":"elicit"}"#));
        let mut requests = Map::new();
        requests.insert("elicitation-1".into(), json!({ "method": "elicitation/create", "params": {} }));
        let refused = retry(&original, &shell, requests, None).await.unwrap_err();
        assert_eq!(refused.id(), Some("4"));
        let e = response_result(&refused).unwrap_err();
        assert_eq!(e.code, error_code::CALLER_CANNOT_ANSWER);
        assert!(e.message.contains("`elicitation/create`") && e.message.contains("without a terminal"), "{e:?}");
    }

    #[tokio::test]
    async fn roots_are_answered_and_the_state_goes_back() {
        let shell = Arc::new(CallContext { shell: true, roots: Some(vec!["/w".into()]), ..CallContext::default() });
        let original = Message::request("4", "tools/call", Some(r#"{"name":"roots","requestState":"old"}"#));
        let mut requests = Map::new();
        requests.insert("roots-1".into(), json!({ "method": "roots/list" }));
        let retried = retry(&original, &shell, requests, Some(json!("s2"))).await.unwrap();
        let v: Value = serde_json::from_str(retried.as_str()).unwrap();
        assert_eq!(v["params"]["requestState"], "s2");
        assert_eq!(v["params"]["inputResponses"]["roots-1"]["roots"][0]["uri"], "file:///w");
        assert_eq!(v["params"]["name"], "roots");
    }
}
