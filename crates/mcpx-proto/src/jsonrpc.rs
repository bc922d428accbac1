//! JSON-RPC 2.0 messages kept as their original bytes.
//!
//! mcpx forwards messages byte-faithfully: unknown fields and unknown methods
//! survive. A [`Message`] is the message's own JSON text plus the byte spans of
//! the few members the daemon must read or rewrite (`id`, `method`, the progress
//! token, `params._meta`). Rewriting splices new text into a span and leaves every
//! other byte alone.
//!
//! Source: JSON-RPC 2.0 specification, sections 4 (request object), 4.1
//! (notification), 5 (response object) and 6 (batch).

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

mod meta;

/// What a message is, by JSON-RPC's rules: a request has `method` and `id`, a
/// notification `method` and no `id`, a response `id` and no `method`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// A request: expects a response carrying the same id.
    Request,
    /// A notification: no response.
    Notification,
    /// A response (`result` or `error`).
    Response,
}

/// Why a line is not a JSON-RPC message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    /// The bytes are not one JSON value.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// The JSON value is not a JSON-RPC message object.
    #[error("not a JSON-RPC message: {0}")]
    NotMessage(&'static str),
    /// A request whose `id` is neither a string nor an integer (JSON-RPC 2.0,
    /// section 4; MCP 2025-11-25, Basic, "Requests": not null); the raw id is kept.
    #[error("invalid request id `{0}`: a request's id must be a string or an integer; send one")]
    InvalidId(String),
}

/// One JSON-RPC message: its exact JSON text and where its interesting parts are.
#[derive(Clone, PartialEq, Eq)]
pub struct Message {
    text: String,
    kind: MessageKind,
    method: Option<String>,
    id: Option<Range<usize>>,
    progress_token: Option<Range<usize>>,
    notified_token: Option<Range<usize>>,
    /// `params`, when it is an object.
    params: Option<Range<usize>>,
    /// `params._meta`, when `params` is an object that has it.
    meta: Option<Range<usize>>,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: String = self.text.chars().take(200).collect();
        f.debug_struct("Message").field("kind", &self.kind).field("text", &shown).finish()
    }
}

#[derive(Deserialize)]
struct Peek<'a> {
    /// Present (`null` included) or absent: a request's `"id": null` must not read
    /// as a notification.
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<PeekParams<'a>>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

/// A member that is present, whatever its value (`null` too).
fn present<'de: 'a, 'a, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'a RawValue>, D::Error> {
    <&'a RawValue>::deserialize(d).map(Some)
}

/// Whether `raw` (a JSON value's text) is a string or an integer, the ids MCP allows.
fn valid_request_id(raw: &str) -> bool {
    raw.starts_with('"')
        || (!raw.is_empty()
            && raw.bytes().enumerate().all(|(i, b)| b.is_ascii_digit() || (i == 0 && b == b'-'))
            && raw != "-")
}

/// `params` is peeked only for `_meta.progressToken` (MCP 2025-11-25, Utilities,
/// "Progress"); anything that is not an object is accepted and ignored.
#[derive(Default)]
struct PeekParams<'a> {
    progress_token: Option<&'a RawValue>,
    /// `params.progressToken` of a `notifications/progress`.
    notified_token: Option<&'a RawValue>,
    /// `params` itself, when it is an object.
    object: Option<&'a str>,
    /// `params._meta`.
    meta: Option<&'a RawValue>,
}

impl<'de: 'a, 'a> Deserialize<'de> for PeekParams<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Obj<'a> {
            #[serde(borrow, rename = "_meta", default, deserialize_with = "present")]
            meta: Option<&'a RawValue>,
            #[serde(borrow, rename = "progressToken", default)]
            progress_token: Option<&'a RawValue>,
        }
        #[derive(Deserialize)]
        struct Meta<'a> {
            #[serde(borrow, rename = "progressToken", default)]
            progress_token: Option<&'a RawValue>,
        }
        // Borrow `params` whole, then look inside only when it is an object; the
        // token stays a sub-slice of the message text, which `span` relies on.
        let raw: &'a RawValue = Deserialize::deserialize(d)?;
        let text: &'a str = raw.get();
        if !text.starts_with('{') {
            return Ok(PeekParams::default());
        }
        let obj: Obj<'a> = serde_json::from_str(text).map_err(serde::de::Error::custom)?;
        // `_meta` must be an object (or `null`) to carry a token.
        let meta = obj.meta;
        let in_meta = match meta.filter(|m| m.get() != "null") {
            Some(m) => serde_json::from_str::<Meta<'a>>(m.get()).map_err(serde::de::Error::custom)?.progress_token,
            None => None,
        };
        Ok(PeekParams { progress_token: in_meta, notified_token: obj.progress_token, object: Some(text), meta })
    }
}

/// The byte range of `part` inside `whole`; `part` must be a sub-slice of `whole`
/// (serde_json's borrowed `RawValue`s are).
fn span(whole: &str, part: &str) -> Range<usize> {
    let start = part.as_ptr() as usize - whole.as_ptr() as usize;
    start..start + part.len()
}

/// What [`Message::peek`] finds in a message's text: everything but the text.
struct Parts {
    kind: MessageKind,
    method: Option<String>,
    id: Option<Range<usize>>,
    progress_token: Option<Range<usize>>,
    notified_token: Option<Range<usize>>,
    params: Option<Range<usize>>,
    meta: Option<Range<usize>>,
}

impl Parts {
    fn with_text(self, text: String) -> Message {
        let Parts { kind, method, id, progress_token, notified_token, params, meta } = self;
        Message { text, kind, method, id, progress_token, notified_token, params, meta }
    }
}

impl Message {
    /// Parses one JSON text holding a single message. A batch (a JSON array) is
    /// split with [`Message::parse_line`].
    ///
    /// Errors: [`ParseError::NotJson`] when the text is not JSON,
    /// [`ParseError::NotMessage`] when it is JSON but not a message object,
    /// [`ParseError::InvalidId`] for a request whose id is not a string or an integer.
    /// A response's `"id": null` (an error about a request whose id the server could
    /// not read) is kept, with [`Message::id`] `None`.
    pub fn parse(text: impl Into<String>) -> Result<Message, ParseError> {
        Message::parse_string(text.into()).map_err(|(e, _)| e)
    }

    /// [`Message::parse`] of an owned text, which is kept as the message's buffer, and
    /// handed back with the error when it is not a message.
    fn parse_string(text: String) -> Result<Message, (ParseError, String)> {
        match Message::peek(&text) {
            Ok(Some(parts)) => Ok(parts.with_text(text)),
            Ok(None) => {
                let trimmed = text.trim().to_owned();
                match Message::peek(&trimmed) {
                    Ok(Some(parts)) => Ok(parts.with_text(trimmed)),
                    // A trimmed text has no whitespace around it: never seen.
                    Ok(None) => Err((ParseError::NotMessage("not an object"), text)),
                    Err(e) => Err((e, text)),
                }
            }
            Err(e) => Err((e, text)),
        }
    }

    /// [`Message::parse_line`] of a line the caller gives up: a line holding one
    /// message becomes that message without a copy (a 16 MiB result is held once, not
    /// twice); the line comes back with the error when it is not a message.
    pub fn parse_owned_line(line: Vec<u8>) -> Result<Vec<Message>, (ParseError, Vec<u8>)> {
        if line.starts_with(b"\xEF\xBB\xBF") || line.trim_ascii_start().starts_with(b"[") {
            return Message::parse_line(&line).map_err(|e| (e, line));
        }
        match String::from_utf8(line) {
            Ok(text) => Message::parse_string(text).map(|m| vec![m]).map_err(|(e, text)| (e, text.into_bytes())),
            Err(e) => Err((ParseError::NotJson(e.utf8_error().to_string()), e.into_bytes())),
        }
    }

    /// The parts of the message `text` holds, found without copying it; `None` when
    /// `text` has whitespace around it (the caller trims, then peeks again).
    fn peek(text: &str) -> Result<Option<Parts>, ParseError> {
        let trimmed = text.trim();
        if !trimmed.starts_with('{') {
            // Still report malformed JSON as such.
            serde_json::from_str::<serde::de::IgnoredAny>(trimmed).map_err(|e| ParseError::NotJson(e.to_string()))?;
            return Err(ParseError::NotMessage("not an object"));
        }
        if trimmed.len() != text.len() {
            return Ok(None);
        }
        let peek: Peek<'_> = serde_json::from_str(text).map_err(|e| ParseError::NotJson(e.to_string()))?;
        let kind = match (&peek.method, &peek.id) {
            (Some(_), Some(id)) if !valid_request_id(id.get()) => {
                return Err(ParseError::InvalidId(id.get().to_owned()));
            }
            (Some(_), Some(_)) => MessageKind::Request,
            (Some(_), None) => MessageKind::Notification,
            (None, _) if peek.result.is_some() || peek.error.is_some() => MessageKind::Response,
            (None, _) => return Err(ParseError::NotMessage("no method, result or error")),
        };
        let id = peek.id.filter(|r| r.get() != "null").map(|r| span(text, r.get()));
        let p = peek.params.unwrap_or_default();
        let at = |r: Option<&RawValue>| r.map(|r| span(text, r.get()));
        let (progress_token, notified_token, meta) = (at(p.progress_token), at(p.notified_token), at(p.meta));
        let params = p.object.map(|o| span(text, o));
        let method = peek.method.map(Cow::into_owned);
        Ok(Some(Parts { kind, method, id, progress_token, notified_token, params, meta }))
    }

    /// Parses one line of a stream: a message, or a JSON-RPC batch (an array of
    /// messages, allowed by MCP 2025-03-26 only). Surrounding whitespace (a `\r`)
    /// is ignored, and so is a leading UTF-8 byte-order mark (RFC 8259, section 8.1,
    /// lets a parser ignore it).
    ///
    /// Errors: [`ParseError::NotJson`] for bytes that are not UTF-8 or not JSON,
    /// [`ParseError::NotMessage`] for JSON that is not a message.
    pub fn parse_line(line: &[u8]) -> Result<Vec<Message>, ParseError> {
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        let text = std::str::from_utf8(line).map_err(|e| ParseError::NotJson(e.to_string()))?;
        let trimmed = text.trim();
        if trimmed.starts_with('[') {
            let items: Vec<&RawValue> =
                serde_json::from_str(trimmed).map_err(|e| ParseError::NotJson(e.to_string()))?;
            return items.into_iter().map(|r| Message::parse(r.get())).collect();
        }
        Message::parse(trimmed).map(|m| vec![m])
    }

    /// Builds a request `{"jsonrpc":"2.0","id":ID,"method":METHOD,"params":PARAMS}`;
    /// `id` and `params` are JSON texts.
    pub fn request(id: &str, method: &str, params: Option<&str>) -> Message {
        let method_json = serde_json::to_string(method).unwrap_or_default();
        let text = match params {
            Some(p) => {
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{method_json},"params":{p}}}"#)
            }
            None => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{method_json}}}"#),
        };
        Message::parse(text).unwrap_or_else(|e| unreachable!("built request does not parse: {e}"))
    }

    /// Builds a notification; `params` is a JSON text.
    pub fn notification(method: &str, params: Option<&str>) -> Message {
        let method_json = serde_json::to_string(method).unwrap_or_default();
        let text = match params {
            Some(p) => format!(r#"{{"jsonrpc":"2.0","method":{method_json},"params":{p}}}"#),
            None => format!(r#"{{"jsonrpc":"2.0","method":{method_json}}}"#),
        };
        Message::parse(text).unwrap_or_else(|e| unreachable!("built notification does not parse: {e}"))
    }

    /// Builds a success response; `id` and `result` are JSON texts.
    pub fn response(id: &str, result: &str) -> Message {
        Message::parse(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#))
            .unwrap_or_else(|e| unreachable!("built response does not parse: {e}"))
    }

    /// Builds an error response (JSON-RPC 2.0 section 5.1); `id` is a JSON text.
    pub fn error_response(id: &str, code: i64, message: &str) -> Message {
        let message = serde_json::to_string(message).unwrap_or_default();
        Message::parse(format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{message}}}}}"#))
            .unwrap_or_else(|e| unreachable!("built error does not parse: {e}"))
    }

    /// Request, notification or response.
    pub fn kind(&self) -> MessageKind {
        self.kind
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }

    /// The raw JSON text of the id (`1`, `"1"`), exactly as sent.
    pub fn id(&self) -> Option<&str> {
        self.id.clone().map(|r| &self.text[r])
    }

    /// The raw JSON text of `params._meta.progressToken`, if present.
    pub fn progress_token(&self) -> Option<&str> {
        self.progress_token.clone().map(|r| &self.text[r])
    }

    /// The whole message as JSON text, without a newline.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The raw JSON text of `params.progressToken` (what `notifications/progress` carries).
    pub fn notified_progress_token(&self) -> Option<&str> {
        self.notified_token.clone().map(|r| &self.text[r])
    }

    /// The message with `params.progressToken` replaced by `token` (a JSON text).
    pub fn with_notified_progress_token(self, token: &str) -> Message {
        match self.notified_token.clone() {
            Some(r) => self.splice(r, token),
            None => self,
        }
    }

    /// The message's JSON text.
    pub fn into_string(self) -> String {
        self.text
    }

    /// The message with its id replaced by `id` (a JSON text); a message without an
    /// id is returned unchanged. Every other byte stays as it was.
    pub fn with_id(self, id: &str) -> Message {
        match self.id.clone() {
            Some(r) => self.splice(r, id),
            None => self,
        }
    }

    /// The message with its progress token replaced by `token` (a JSON text).
    pub fn with_progress_token(self, token: &str) -> Message {
        match self.progress_token.clone() {
            Some(r) => self.splice(r, token),
            None => self,
        }
    }

    /// Replaces the bytes of `range` with `new` in the message's own buffer: a large
    /// message is moved within its allocation (or grown in place), never held twice.
    /// A part that is `range` becomes `new`; a part that holds `range` (`params` holds
    /// the token) grows or shrinks with it; a part inside `range` is the caller's to
    /// find again.
    fn splice(self, range: Range<usize>, new: &str) -> Message {
        let mut text = self.text;
        text.replace_range(range.clone(), new);
        let d = new.len() as isize - range.len() as isize;
        let by = |p: usize| (p as isize + d) as usize;
        let fix = |r: Range<usize>| -> Range<usize> {
            match r {
                r if r == range => range.start..range.start + new.len(),
                // A part starts after the range or at it (an insertion point), and
                // ends after its start when it holds the range or follows it.
                r => {
                    let start = if r.start >= range.end { by(r.start) } else { r.start };
                    start..if r.end > range.start { by(r.end) } else { r.end }
                }
            }
        };
        Message {
            kind: self.kind,
            method: self.method,
            id: self.id.map(fix),
            progress_token: self.progress_token.map(fix),
            notified_token: self.notified_token.map(fix),
            params: self.params.map(fix),
            meta: self.meta.map(fix),
            text,
        }
    }
}

/// An id the daemon puts on a request it sends upstream. It carries the daemon's
/// attach epoch so a reply to an earlier daemon's request is recognised and dropped
/// instead of being handed to a new caller.
///
/// On the wire it is a JSON number, `epoch * 2^32 + seq`. Epochs stay below 2^21 so
/// the number is exact in a JavaScript double (servers written in JS parse ids as
/// doubles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UpstreamId {
    /// The attach epoch of the daemon that sent the request (at least 1).
    pub epoch: u32,
    /// A per-instance sequence number (at least 1).
    pub seq: u32,
}

impl UpstreamId {
    /// The largest epoch that keeps ids exact in a double.
    pub const MAX_EPOCH: u32 = (1 << 21) - 1;

    /// The JSON text of this id.
    pub fn to_json(self) -> String {
        ((u64::from(self.epoch) << 32) | u64::from(self.seq)).to_string()
    }

    /// Reads an id back from its JSON text; `None` when it is not a number mcpx
    /// could have sent.
    pub fn from_json(text: &str) -> Option<UpstreamId> {
        let n: u64 = text.trim().parse().ok()?;
        let epoch = u32::try_from(n >> 32).ok()?;
        let seq = (n & 0xffff_ffff) as u32;
        ((1..=Self::MAX_EPOCH).contains(&epoch) && seq >= 1).then_some(UpstreamId { epoch, seq })
    }
}

/// A JSON-RPC error object (JSON-RPC 2.0, section 5.1): what a response's `error`
/// member holds, or what [`response_result`] reports for a malformed response.
#[derive(Debug, Clone, Deserialize)]
pub struct RpcError {
    /// The error code (`-32768..=-32000` are reserved by JSON-RPC; see
    /// [`crate::mcp::error_code`]).
    pub code: i64,
    /// A short description.
    pub message: String,
    /// Optional details, kept as the server's raw JSON.
    #[serde(default)]
    pub data: Option<Box<RawValue>>,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (JSON-RPC error {})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}

/// The `result` member of a response as raw JSON, or its `error` (JSON-RPC 2.0,
/// section 5).
///
/// Errors: the response's own `error`; or an [`RpcError`] with code
/// `INTERNAL_ERROR` (-32603) when the text is not a response object or has neither
/// member.
pub fn response_result(response: &Message) -> Result<Box<RawValue>, RpcError> {
    #[derive(Deserialize)]
    struct Response {
        #[serde(default)]
        result: Option<Box<RawValue>>,
        #[serde(default)]
        error: Option<RpcError>,
    }
    let malformed =
        |m: &str| RpcError { code: crate::mcp::error_code::INTERNAL_ERROR, message: m.to_owned(), data: None };
    let r: Response =
        serde_json::from_str(response.as_str()).map_err(|e| malformed(&format!("malformed response: {e}")))?;
    match (r.result, r.error) {
        (_, Some(e)) => Err(e),
        (Some(v), None) => Ok(v),
        (None, None) => Err(malformed("response has neither result nor error")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_must_be_strings_or_integers() {
        for id in ["null", "true", "1.5", "{}", "[]", "1e3"] {
            let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
            assert_eq!(Message::parse(text), Err(ParseError::InvalidId(id.to_owned())), "id {id}");
        }
        for id in ["0", "-7", "4294967297", r#""a""#] {
            let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
            assert_eq!(Message::parse(text).map(|m| m.kind()), Ok(MessageKind::Request), "id {id}");
        }
    }

    #[test]
    fn a_byte_order_mark_may_start_any_message() {
        for line in [
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"roots/list"}"#,
        ] {
            let with_mark = [&b"\xEF\xBB\xBF"[..], line.as_bytes(), b"\r\n"].concat();
            assert_eq!(Message::parse_line(&with_mark).unwrap()[0].as_str(), line);
        }
    }

    #[test]
    fn kinds_and_fields() {
        let m = Message::parse(r#"{"jsonrpc":"2.0","id":"7","method":"tools/call","params":{"name":"x","_meta":{"progressToken":5}},"extra":[1]}"#).unwrap();
        assert_eq!(m.kind(), MessageKind::Request);
        assert_eq!(m.method(), Some("tools/call"));
        assert_eq!(m.id(), Some(r#""7""#));
        assert_eq!(m.progress_token(), Some("5"));
        let n = Message::parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert_eq!(n.kind(), MessageKind::Notification);
        let r = Message::parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#).unwrap();
        assert_eq!(r.kind(), MessageKind::Response);
        assert_eq!(r.id(), None);
        assert!(matches!(Message::parse("{"), Err(ParseError::NotJson(_))));
        assert!(matches!(Message::parse("Processing request"), Err(ParseError::NotJson(_))));
        assert!(matches!(Message::parse("[]"), Err(ParseError::NotMessage(_))));
        assert!(matches!(Message::parse(r#"{"jsonrpc":"2.0"}"#), Err(ParseError::NotMessage(_))));
    }

    #[test]
    fn rewriting_keeps_every_other_byte() {
        let text = r#"{ "jsonrpc": "2.0", "id" : 1, "method":"tools/call", "params":{"_meta":{"progressToken":"tok"},"z":{"id":2}}, "unknown": true }"#;
        let m = Message::parse(text).unwrap();
        let up = m.clone().with_id("4294967297").with_progress_token("\"p-9\"");
        assert_eq!(
            up.as_str(),
            r#"{ "jsonrpc": "2.0", "id" : 4294967297, "method":"tools/call", "params":{"_meta":{"progressToken":"p-9"},"z":{"id":2}}, "unknown": true }"#
        );
        assert_eq!(up.progress_token(), Some("\"p-9\""));
        let back = up.with_progress_token("\"tok\"").with_id("1");
        assert_eq!(back.as_str(), text);
    }

    #[test]
    fn progress_notifications_token_is_rewritten_in_place() {
        let m = Message::parse(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":4294967303,"progress":1,"total":3}}"#).unwrap();
        assert_eq!(m.notified_progress_token(), Some("4294967303"));
        let back = m.with_notified_progress_token("\"caller-token\"");
        assert_eq!(
            back.as_str(),
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"caller-token","progress":1,"total":3}}"#
        );
    }

    #[test]
    fn batches_split_into_messages() {
        let v =
            Message::parse_line(br#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]"#).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].kind(), MessageKind::Notification);
    }

    #[test]
    fn a_byte_order_mark_is_ignored_and_undecodable_lines_are_errors() {
        let v = Message::parse_line(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r").unwrap();
        assert_eq!((v.len(), v[0].id()), (1, Some("1")));
        assert_eq!(v[0].as_str(), r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        let invalid_utf8 = Message::parse_line(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xff\"}");
        assert!(matches!(invalid_utf8, Err(ParseError::NotJson(e)) if e.contains("utf-8")));
        let raw_control = Message::parse_line(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\x1b\"}");
        assert!(matches!(raw_control, Err(ParseError::NotJson(e)) if e.contains("control character")));
    }

    #[test]
    fn upstream_ids_round_trip_and_reject_others() {
        let id = UpstreamId { epoch: 3, seq: 17 };
        assert_eq!(UpstreamId::from_json(&id.to_json()), Some(id));
        assert_eq!(UpstreamId::from_json("1"), None);
        assert_eq!(UpstreamId::from_json("\"1\""), None);
        assert!(id.to_json().parse::<u64>().unwrap() < (1u64 << 53));
    }

    #[test]
    fn response_result_gives_the_result_or_the_error() {
        let ok = Message::response("1", r#"{"tools":[]}"#);
        assert_eq!(response_result(&ok).unwrap().get(), r#"{"tools":[]}"#);
        let err = Message::error_response("1", -32601, "no such method");
        let e = response_result(&err).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-32601, "no such method"));
        assert_eq!(e.to_string(), "no such method (JSON-RPC error -32601)");
        let neither = Message::request("1", "ping", None);
        let e = response_result(&neither).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-32603, "response has neither result nor error"));
    }
}
