//! What mcpx answers itself to a server-to-client request no MCP client takes
//! (design: "Pools", server-to-client requests): `roots/list` from the only caller
//! in flight, and otherwise a JSON-RPC error, never silence.

use std::path::Path;
use std::sync::Arc;

use mcpx_proto::Message;
use mcpx_proto::mcp::error_code;

use super::context::CallContext;

/// The answer to server request `method` with id `id` (raw JSON), given the callers
/// it may go to (the caller of the request it came with, or those of every request in
/// flight):
/// - with exactly one, `roots/list` gets its roots (or -32003 when it offers none),
///   and any other method -32003 (`CALLER_CANNOT_ANSWER`), whose message tells a shell
///   caller why its `elicitation/create` or `sampling/createMessage` was declined;
/// - with none or several, -32002 (`NO_CALLER`): the request cannot be routed.
pub(super) fn local_answer(id: &str, method: &str, callers: &[Arc<CallContext>]) -> Message {
    match (callers, method) {
        ([ctx], "roots/list") => match &ctx.roots {
            Some(roots) => {
                let roots: Vec<serde_json::Value> = roots
                    .iter()
                    .map(|r| serde_json::json!({ "uri": file_uri(r), "name": r.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default() }))
                    .collect();
                Message::response(id, &serde_json::json!({ "roots": roots }).to_string())
            }
            None => Message::error_response(id, error_code::CALLER_CANNOT_ANSWER, "mcpx: the caller offers no roots"),
        },
        ([ctx], "elicitation/create") if ctx.shell => Message::error_response(
            id,
            error_code::CALLER_CANNOT_ANSWER,
            "mcpx: declined: `mcpx call` ran without a terminal (or with --no-input), so nobody could answer the server's question",
        ),
        ([ctx], "sampling/createMessage") if ctx.shell => Message::error_response(
            id,
            error_code::CALLER_CANNOT_ANSWER,
            "mcpx: declined: mcpx cannot sample a model from the shell; use an MCP client (`mcpx serve`, or /mcp) that offers sampling",
        ),
        ([_], _) => Message::error_response(
            id,
            error_code::CALLER_CANNOT_ANSWER,
            &format!(
                "mcpx: the caller of the request in flight cannot answer `{method}` (a shell caller answers only roots/list; an MCP client must declare the capability, and a legacy one accept an SSE answer)"
            ),
        ),
        (many, _) => Message::error_response(
            id,
            error_code::NO_CALLER,
            &format!(
                "mcpx: {} requests are in flight on this instance, so `{method}` cannot be routed to one caller",
                many.len()
            ),
        ),
    }
}

/// A `file://` URI for a path (RFC 8089), percent-encoding what may not stand in a
/// URI path as it is.
fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

#[cfg(test)]
mod tests {
    use mcpx_proto::response_result;

    use super::*;

    fn caller(roots: Option<&[&str]>) -> Arc<CallContext> {
        let roots = roots.map(|r| r.iter().map(Into::into).collect());
        Arc::new(CallContext { roots, ..CallContext::default() })
    }

    #[test]
    fn the_only_caller_answers_roots_with_its_directory() {
        let answer = local_answer("5", "roots/list", &[caller(Some(&["/home/u/my project"]))]);
        assert_eq!(answer.id(), Some("5"));
        assert_eq!(
            response_result(&answer).unwrap().get(),
            r#"{"roots":[{"name":"my project","uri":"file:///home/u/my%20project"}]}"#
        );
    }

    #[test]
    fn what_no_caller_can_answer_gets_the_documented_errors() {
        let code = |m: &Message| response_result(m).unwrap_err().code;
        assert_eq!(code(&local_answer("1", "roots/list", &[caller(None)])), error_code::CALLER_CANNOT_ANSWER);
        assert_eq!(
            code(&local_answer("1", "sampling/createMessage", &[caller(None)])),
            error_code::CALLER_CANNOT_ANSWER
        );
        assert_eq!(code(&local_answer("1", "roots/list", &[])), error_code::NO_CALLER);
        let two = [caller(Some(&["/a"])), caller(Some(&["/b"]))];
        let answer = local_answer("\"x\"", "roots/list", &two);
        assert_eq!((answer.id(), code(&answer)), (Some("\"x\""), error_code::NO_CALLER));
        assert!(response_result(&answer).unwrap_err().message.contains("2 requests are in flight"));
    }

    #[test]
    fn a_shell_caller_is_told_why_its_question_was_declined() {
        let shell = Arc::new(CallContext { shell: true, ..CallContext::default() });
        let message = |method: &str| {
            response_result(&local_answer("1", method, std::slice::from_ref(&shell))).unwrap_err().message
        };
        assert!(message("elicitation/create").contains("ran without a terminal (or with --no-input)"));
        assert!(message("sampling/createMessage").contains("mcpx cannot sample a model from the shell"));
    }
}
