//! Resource URIs in the aggregate's answers, made readable back through it: a read
//! answers with the URI the client asked for, and resource links and embedded
//! resources (MCP 2025-11-25, Server features, Tools, "Resource Links" and "Embedded
//! Resources"; Prompts, "Embedded Resources") in tool results and prompt messages
//! carry `mcpx://<server>/<uri>` URIs.

use mcpx_proto::Message;
use serde_json::Value;

use crate::names::{URI_SCHEME, resource_uri};

/// The answer of `server` to `method` (a request of the aggregate, for which `asked`
/// is the URI the client read with, and `original` the server's), with its resource
/// URIs rewritten. A response with nothing to rewrite (an error, another method)
/// comes back as it is, byte for byte.
pub(crate) fn rewrite(method: &str, server: &str, asked: &str, original: &str, response: Message) -> Message {
    if !matches!(method, "resources/read" | "tools/call" | "prompts/get") || !may_hold_uri(response.as_str()) {
        return response;
    }
    let Ok(mut v) = serde_json::from_str::<Value>(response.as_str()) else { return response };
    let Some(result) = v.get_mut("result") else { return response };
    let mut changed = false;
    let mut map = |uri: &mut Value| {
        let Some(text) = uri.as_str() else { return };
        let new = if method == "resources/read" && text == original {
            asked.to_owned()
        } else if text.starts_with(URI_SCHEME) {
            return;
        } else {
            resource_uri(server, text)
        };
        if new != text {
            *uri = Value::String(new);
            changed = true;
        }
    };
    match method {
        "resources/read" => {
            for item in result["contents"].as_array_mut().into_iter().flatten() {
                map(&mut item["uri"]);
            }
        }
        "tools/call" => {
            for block in result["content"].as_array_mut().into_iter().flatten() {
                content_block(block, &mut map);
            }
        }
        _ => {
            for message in result["messages"].as_array_mut().into_iter().flatten() {
                // One content block per message; a list of them in some revisions.
                match &mut message["content"] {
                    Value::Array(blocks) => blocks.iter_mut().for_each(|b| content_block(b, &mut map)),
                    block => content_block(block, &mut map),
                }
            }
        }
    }
    if !changed {
        return response;
    }
    Message::parse(v.to_string()).unwrap_or(response)
}

/// Whether JSON `text` may have a `uri` key: it has `"uri"` as written, or a `\u`
/// escape, which could spell the key another way. Most answers have neither, and are
/// then not parsed at all.
fn may_hold_uri(text: &str) -> bool {
    text.contains("\"uri\"") || text.contains("\\u")
}

/// The URI of a `resource_link` block, or of a `resource` block's embedded resource.
fn content_block(block: &mut Value, map: &mut impl FnMut(&mut Value)) {
    match block["type"].as_str() {
        Some("resource_link") => map(&mut block["uri"]),
        Some("resource") => map(&mut block["resource"]["uri"]),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(result: Value) -> Message {
        Message::parse(serde_json::json!({ "jsonrpc": "2.0", "id": 1, "result": result }).to_string()).unwrap()
    }

    #[test]
    fn reads_links_and_embedded_resources_become_readable_back() {
        let read =
            response(serde_json::json!({ "contents": [{ "uri": "test://a", "text": "a" }, { "uri": "test://b" }] }));
        let read: Value =
            serde_json::from_str(rewrite("resources/read", "s", "mcpx://s/test://a", "test://a", read).as_str())
                .unwrap();
        assert_eq!(read["result"]["contents"][0]["uri"], "mcpx://s/test://a");
        assert_eq!(read["result"]["contents"][1]["uri"], "mcpx://s/test://b");
        let bare = response(serde_json::json!({ "contents": [{ "uri": "test://a" }] }));
        let as_asked = rewrite("resources/read", "s", "test://a", "test://a", bare.clone());
        assert_eq!(as_asked.as_str(), bare.as_str(), "asked with the server's own URI: unchanged");
        let call = response(serde_json::json!({ "content": [
            { "type": "text", "text": "test://x" },
            { "type": "resource_link", "uri": "test://l", "name": "l" },
            { "type": "resource", "resource": { "uri": "test://e", "text": "e" } } ] }));
        let call: Value = serde_json::from_str(rewrite("tools/call", "s", "", "", call).as_str()).unwrap();
        assert_eq!(call["result"]["content"][0]["text"], "test://x");
        assert_eq!(call["result"]["content"][1]["uri"], "mcpx://s/test://l");
        assert_eq!(call["result"]["content"][2]["resource"]["uri"], "mcpx://s/test://e");
        let prompt = response(serde_json::json!({ "messages": [
            { "role": "user", "content": { "type": "resource", "resource": { "uri": "test://p", "text": "p" } } } ] }));
        let prompt: Value = serde_json::from_str(rewrite("prompts/get", "s", "", "", prompt).as_str()).unwrap();
        assert_eq!(prompt["result"]["messages"][0]["content"]["resource"]["uri"], "mcpx://s/test://p");
    }

    /// An answer without a `uri` key is passed on without being parsed; one whose key
    /// is spelled with an escape is still rewritten.
    #[test]
    fn only_an_answer_that_may_name_a_uri_is_parsed() {
        let text = response(serde_json::json!({ "content": [{ "type": "text", "text": "no link" }] }));
        assert!(!may_hold_uri(text.as_str()));
        let escaped = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"resource_link","\u0075ri":"test://l","name":"l"}]}}"#;
        let call: Value = serde_json::from_str(
            rewrite("tools/call", "s", "", "", Message::parse(escaped.to_owned()).unwrap()).as_str(),
        )
        .unwrap();
        assert_eq!(call["result"]["content"][0]["uri"], "mcpx://s/test://l");
    }
}
