//! The script's one way out (docs/code-mode.md, "The channel"): JSON lines the
//! sandboxed script writes on its stdout, parsed here into tool calls and its final
//! answer, and the answers to its calls written back on its stdin. Nothing else is
//! accepted: a line that is not one of these frames ends the script.

use mcpx_api::client::{Client, Method};
use mcpx_api::{ApiError, CallRequest, Caller, ErrorKind};
use serde_json::value::RawValue;

/// The longest line the script may write on its channel, in bytes: 64 MiB, the
/// default `maxMessageBytes` of a server's message.
pub const MAX_FRAME: usize = 64 << 20;

/// One line the script sent.
#[derive(Debug)]
pub enum Frame {
    /// A tool call: the script's id for it, the server, the tool and its arguments.
    Call { id: u64, server: String, tool: String, arguments: Box<RawValue> },
    /// What the script returned: a string, printed as text.
    Text(String),
    /// What the script returned: any other JSON value, printed as JSON.
    Value(serde_json::Value),
    /// The script returned nothing (`undefined`).
    Nothing,
    /// The script threw: the error's name, message, stack (when it has one).
    Failed { name: String, message: String, stack: Option<String> },
}

/// Parses one line of the channel.
///
/// Errors: a line that is not a frame, as a one-line description (what it began with)
/// for the message that ends the script.
pub fn parse(line: &[u8]) -> Result<Frame, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Wire {
        call: Option<u64>,
        server: Option<String>,
        tool: Option<String>,
        arguments: Option<Box<RawValue>>,
        text: Option<String>,
        value: Option<serde_json::Value>,
        none: Option<bool>,
        fail: Option<Fail>,
    }
    #[derive(serde::Deserialize)]
    struct Fail {
        #[serde(default)]
        name: String,
        #[serde(default)]
        message: String,
        #[serde(default)]
        stack: Option<String>,
    }
    let refused = || {
        let shown: String = String::from_utf8_lossy(line).chars().take(60).collect();
        format!("`{shown}`")
    };
    let wire: Wire = serde_json::from_slice(line).map_err(|_| refused())?;
    match wire {
        Wire { call: Some(id), server: Some(server), tool: Some(tool), arguments, .. } => {
            let arguments = arguments.unwrap_or_else(|| RawValue::from_string("{}".to_owned()).unwrap_or_default());
            if !arguments.get().trim_start().starts_with('{') {
                return Err(format!("the arguments of {server}.{tool} are not a JSON object"));
            }
            Ok(Frame::Call { id, server, tool, arguments })
        }
        Wire { text: Some(text), .. } => Ok(Frame::Text(text)),
        Wire { value: Some(value), .. } => Ok(Frame::Value(value)),
        Wire { none: Some(true), .. } => Ok(Frame::Nothing),
        Wire { fail: Some(f), .. } => Ok(Frame::Failed { name: f.name, message: f.message, stack: f.stack }),
        _ => Err(refused()),
    }
}

/// Who a script's tool calls are made as.
#[derive(Debug, Clone)]
pub struct Asker {
    /// The caller (pools, scopes, session).
    pub caller: Caller,
    /// Only this server's tools (`serve --code --server`).
    pub only: Option<String>,
    /// How the script came, for the activity record: `run`, `exec`, `serve --code`.
    pub via: &'static str,
    /// The MCP client a `serve --code` runs the script for.
    pub client: Option<String>,
}

/// Makes one tool call of the script through the daemon (`POST /v1/call`, as the
/// caller), and returns the answer line for the script: `{"id", "result"}` with the
/// `CallToolResult`, or `{"id", "error": {kind, message, code}}`. With `asker.only`,
/// calls to any other server are refused (`serve --code --server`).
pub async fn call(
    client: &Client,
    asker: &Asker,
    id: u64,
    server: String,
    tool: String,
    arguments: Box<RawValue>,
) -> Vec<u8> {
    let answer = match asker.only.as_deref() {
        Some(only) if only != server => Err(ApiError::new(
            ErrorKind::UnknownServer,
            format!("no server named `{server}` here: this session offers only `{only}`"),
        )),
        _ => {
            let req = CallRequest {
                caller: asker.caller.clone(),
                server: Some(server),
                tool: Some(tool),
                arguments: Some(arguments),
                via: Some(asker.via.to_owned()),
                client: asker.client.clone(),
                ..CallRequest::default()
            };
            client.call(Method::POST, "/v1/call", Some(&req)).await
        }
    };
    let mut line = match answer {
        Ok(body) => {
            let result = RawValue::from_string(String::from_utf8_lossy(&body).into_owned())
                .unwrap_or_else(|_| RawValue::from_string("{}".to_owned()).unwrap_or_default());
            serde_json::to_vec(&serde_json::json!({ "id": id, "result": result }))
        }
        Err(e) => serde_json::to_vec(&serde_json::json!({ "id": id, "error": e })),
    }
    .unwrap_or_default();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_parse_and_anything_else_is_refused() {
        assert!(matches!(
            parse(br#"{"call":1,"server":"fake","tool":"echo","arguments":{"a":1}}"#),
            Ok(Frame::Call { id: 1, .. })
        ));
        assert!(matches!(parse(br#"{"text":"hi"}"#), Ok(Frame::Text(t)) if t == "hi"));
        assert!(matches!(parse(br#"{"value":[1]}"#), Ok(Frame::Value(_))));
        assert!(matches!(parse(br#"{"none":true}"#), Ok(Frame::Nothing)));
        assert!(matches!(parse(br#"{"fail":{"name":"Error","message":"m"}}"#), Ok(Frame::Failed { .. })));
        for bad in [
            &br#"{"path":"/v1/stop"}"#[..],
            br#"{"call":1,"server":"fake","tool":"echo","path":"/v1/stop"}"#,
            br#"{"call":1,"server":"fake","tool":"echo","arguments":[1]}"#,
            b"hello",
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
