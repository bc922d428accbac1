//! `POST /v1/call` with `stream`: the call's answer as NDJSON lines, for the shell
//! (`mcpx call`) and the dashboard's tool page (`docs/api.md`, "Streaming").

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use mcpx_proto::MessageKind;

use crate::api::{CallRequest, ErrorBody};
use crate::control;
use crate::daemon::Daemon;
use crate::stream::{channel_body, stream_call};

/// `POST /v1/call` with `stream`: notifications as they come, then the outcome,
/// one JSON object per line (`application/x-ndjson`); with `status`, status lines; with
/// `answers`, the server requests the caller answers, each with the call's id. A client
/// that goes away drops the call, which cancels it upstream.
pub fn call_stream(daemon: Arc<Daemon>, req: CallRequest) -> Response {
    fn line(body: String) -> Vec<u8> {
        let mut b = body.into_bytes();
        b.push(b'\n');
        b
    }
    // Registered for as long as the call runs (the future owns it), so an answer
    // reaches this call's request and no other.
    let open = (!req.answers.is_empty()).then(|| daemon.shell_calls.open());
    let call_id = serde_json::to_string(&open.as_ref().map(|o| o.id.clone())).unwrap_or_default();
    let lines = stream_call(
        daemon.dropped_notifications(),
        move |notify, status| async move {
            let replies = open.as_ref().map(|o| o.replies.clone());
            let status = req.status.then_some(status);
            let outcome = control::call(&daemon, &req, Some(notify), status, replies).await;
            drop(open);
            outcome
        },
        move |n| {
            line(match n.kind() {
                MessageKind::Request => format!(r#"{{"request":{},"call":{call_id}}}"#, n.as_str()),
                _ => format!(r#"{{"notification":{}}}"#, n.as_str()),
            })
        },
        |status| line(format!(r#"{{"status":{status}}}"#)),
        |outcome| match outcome {
            // The result's own buffer is sent as it is, between its framing.
            Ok(result) => {
                vec![br#"{"result":"#.to_vec(), String::from(Box::<str>::from(result)).into_bytes(), b"}\n".to_vec()]
            }
            Err(e) => vec![line(serde_json::to_string(&ErrorBody { error: e }).unwrap_or_default())],
        },
    );
    ([(axum::http::header::CONTENT_TYPE, "application/x-ndjson")], channel_body(lines)).into_response()
}
