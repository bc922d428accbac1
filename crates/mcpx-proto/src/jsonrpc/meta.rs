//! `params._meta` of a message: read, and members set in it, with every other byte of
//! the message as it was (MCP 2025-06-18, Basic, "General fields": `_meta`).

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::Message;

impl Message {
    /// The JSON text of `params._meta`, when `params` is an object that has one.
    pub fn meta(&self) -> Option<&str> {
        self.meta.clone().map(|r| &self.text[r])
    }

    /// The message with each `(key, value)` of `members` (`value` a JSON text) set in
    /// `params._meta`: over the member of the same key, after the others, and in a new
    /// `_meta` (the first member of `params`) when there is none. The members' order
    /// and every byte outside `_meta` stay as they were. A message without a `params`
    /// object, or whose `_meta` is not an object, is returned unchanged.
    pub fn with_meta(self, members: &[(&str, &str)]) -> Message {
        let Some(params) = self.params.clone() else { return self };
        let (range, kept) = match self.meta.clone() {
            Some(meta) => match members_of(&self.text[meta.clone()]) {
                Some(kept) => (meta, kept),
                None => return self,
            },
            None => (params.start + 1..params.start + 1, Vec::new()),
        };
        let mut new =
            String::with_capacity(range.len() + members.iter().map(|(k, v)| k.len() + v.len() + 4).sum::<usize>() + 12);
        if self.meta.is_none() {
            new.push_str("\"_meta\":");
        }
        let opened = new.len();
        new.push('{');
        let mut token = None;
        let written = kept.iter().filter(|(k, _)| !members.iter().any(|(key, _)| k == key));
        for (key, value) in written.map(|(k, v)| (k.as_ref(), v.get())).chain(members.iter().copied()) {
            if new.len() > opened + 1 {
                new.push(',');
            }
            push_key(&mut new, key);
            new.push(':');
            if key == "progressToken" {
                token = Some(new.len()..new.len() + value.len());
            }
            new.push_str(value);
        }
        new.push('}');
        let closed = new.len();
        if self.meta.is_none() && !self.text[range.end..params.end - 1].trim_start().is_empty() {
            new.push(',');
        }
        let at = range.start;
        let mut message = self.splice(range, &new);
        message.meta = Some(at + opened..at + closed);
        message.progress_token = token.map(|t| at + t.start..at + t.end);
        message
    }
}

/// `key` as a JSON string.
fn push_key(out: &mut String, key: &str) {
    if key.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(key);
        out.push('"');
    } else {
        // Writing a string to a `String` cannot fail.
        out.push_str(&serde_json::to_string(key).unwrap_or_default());
    }
}

/// The members of a `_meta` object's text, in order: keys unescaped, values as they
/// are. `None` when it is not an object.
fn members_of(meta: &str) -> Option<Vec<(Cow<'_, str>, &RawValue)>> {
    struct Members;
    impl<'de> Visitor<'de> for Members {
        type Value = Vec<(Cow<'de, str>, &'de RawValue)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut members = Vec::new();
            while let Some(member) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                members.push((member.0.0, member.1));
            }
            Ok(members)
        }
    }
    /// A key, borrowed unless it has escapes.
    struct Key<'a>(Cow<'a, str>);
    impl<'de> serde::Deserialize<'de> for Key<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            <Cow<'de, str> as serde::Deserialize>::deserialize(d).map(Key)
        }
    }
    let mut de = serde_json::Deserializer::from_str(meta);
    de.deserialize_map(Members).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: (&str, &str) = ("traceparent", r#""00-t-s-01""#);

    fn with(text: &str, members: &[(&str, &str)]) -> Message {
        Message::parse(text.to_owned()).unwrap().with_meta(members)
    }

    #[test]
    fn only_meta_is_rewritten_and_the_rest_stays_as_sent() {
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a": [1, 2.50]}}}"#,
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"traceparent":"00-t-s-01"},"name":"x","arguments":{"a": [1, 2.50]}}}"#,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params": { }}"#,
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params": {"_meta":{"traceparent":"00-t-s-01"} }}"#,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":7,"traceparent":"old","z\"q":[1 ]}},"id2":3}"#,
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":7,"z\"q":[1 ],"traceparent":"00-t-s-01"}},"id2":3}"#,
            ),
        ];
        for (request, expected) in cases {
            let sent = with(request, &[TP]);
            assert_eq!(sent.as_str(), expected, "{request}");
            // The parts found again are the parts kept: the message is as if parsed.
            assert_eq!(sent, Message::parse(expected.to_owned()).unwrap(), "{request}");
            let meta: serde_json::Value = serde_json::from_str(sent.meta().unwrap()).unwrap();
            assert_eq!(meta["traceparent"], "00-t-s-01");
        }
        // What cannot carry a `_meta` is left as it is.
        for request in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":null}}"#,
        ] {
            assert_eq!(with(request, &[TP]).as_str(), request);
        }
    }

    #[test]
    fn the_id_and_progress_token_stay_readable_and_rewritable_after_meta_changes() {
        let request = r#"{"params":{"_meta":{"progressToken":"p"},"n":1},"method":"tools/call","id":"a"}"#;
        let sent = with(request, &[TP, ("tracestate", r#""k=v""#)]);
        assert_eq!((sent.id(), sent.progress_token()), (Some(r#""a""#), Some(r#""p""#)));
        let sent = sent.with_progress_token("42").with_id("7");
        let expected = r#"{"params":{"_meta":{"progressToken":42,"traceparent":"00-t-s-01","tracestate":"k=v"},"n":1},"method":"tools/call","id":7}"#;
        assert_eq!(sent.as_str(), expected);
        assert_eq!(sent, Message::parse(expected.to_owned()).unwrap());
        // Set again, over itself.
        let again = sent.with_meta(&[("traceparent", "1")]);
        assert_eq!(again.meta(), Some(r#"{"progressToken":42,"tracestate":"k=v","traceparent":1}"#));
    }
}
