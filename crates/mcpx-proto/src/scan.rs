//! An incremental scanner that finds the top-level `"id"` member of a JSON object
//! while the object streams past, without keeping the object in memory.
//!
//! The line decoder uses it on a message that is over `maxMessageBytes`: the bytes
//! are discarded as they arrive, but the request the message answers must still be
//! failed with a size error, so its id has to be found on the way.

/// The longest id value (its JSON text) the scanner keeps. Ids mcpx sends upstream
/// are short numbers; a longer id cannot be one of ours, so it is not captured.
pub const MAX_ID_LEN: usize = 256;

/// Scans one JSON text fed in pieces and captures the raw JSON text of the value of
/// its top-level `"id"` member, if the text is an object that has one.
///
/// The scanner is deliberately lenient: it tracks strings, escapes and nesting only,
/// and does not validate. Keys written with escapes (`"\u0069d"`) are not recognised.
#[derive(Debug, Default, Clone)]
pub struct IdScanner {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1, whether the next string is a member name.
    expect_key: bool,
    /// Whether the string being read is a member name at depth 1.
    reading_key: bool,
    /// The member name read so far (only short names matter).
    key: Vec<u8>,
    /// Whether the member whose value comes next is `"id"`.
    key_is_id: bool,
    /// Capture of the id value while it is being read.
    capture: Option<Vec<u8>>,
    found: Option<String>,
}

impl IdScanner {
    /// A scanner at the start of a JSON text.
    pub fn new() -> Self {
        Self::default()
    }

    /// The raw JSON text of the top-level id of one whole JSON text, if it is an
    /// object that has one. The text need not be valid: the line decoder uses this on
    /// a reply it could not decode (an invalid UTF-8 byte, a raw control character
    /// in a string), so the request it answers can fail at once.
    pub fn scan(bytes: &[u8]) -> Option<String> {
        let mut scanner = IdScanner::new();
        scanner.feed(bytes);
        scanner.found
    }

    /// The raw JSON text of the top-level id (for example `42` or `"a"`), once the
    /// whole value has been seen.
    pub fn id(&self) -> Option<&str> {
        self.found.as_deref()
    }

    /// Bytes held for the member being read: at most [`MAX_ID_LEN`] of an id value
    /// and 8 of a member name.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.key.len() + self.capture.as_ref().map_or(0, Vec::len)
    }

    /// Feeds the next piece of the text.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.step(b);
        }
    }

    fn step(&mut self, b: u8) {
        if let Some(cap) = self.capture.as_mut() {
            // Inside the id value: keep its bytes until the member ends at depth 1.
            let ends = !self.in_string && self.depth == 1 && (b == b',' || b == b'}');
            if ends {
                // An id that is not UTF-8 is none mcpx issued (and, made lossy, could
                // grow past the limit): it is not an id found.
                let text = std::str::from_utf8(cap).map(|t| t.trim().to_owned()).unwrap_or_default();
                self.capture = None;
                if !text.is_empty() && self.found.is_none() {
                    self.found = Some(text);
                }
            } else if cap.len() < MAX_ID_LEN {
                cap.push(b);
            } else {
                // Too long to be an id mcpx issued: stop capturing, keep scanning.
                self.capture = Some(Vec::new());
                self.key_is_id = false;
            }
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.reading_key {
                    self.reading_key = false;
                    self.key_is_id = self.key == b"id";
                }
            } else if self.reading_key && self.key.len() < 8 {
                self.key.push(b);
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.expect_key = false;
                    self.reading_key = true;
                    self.key.clear();
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth == 1 {
                    self.expect_key = b == b'{';
                }
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b',' if self.depth == 1 => self.expect_key = true,
            b':' if self.depth == 1 => {
                if self.key_is_id && self.found.is_none() {
                    self.capture = Some(Vec::new());
                }
                self.key_is_id = false;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str) -> Option<String> {
        let mut s = IdScanner::new();
        s.feed(text.as_bytes());
        s.id().map(str::to_owned)
    }

    #[test]
    fn finds_ids_of_every_type_anywhere_in_the_object() {
        assert_eq!(scan(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#).as_deref(), Some("7"));
        assert_eq!(scan(r#"{"result":{"id":1,"x":"\"id\":2"},"id":"a,}b"}"#).as_deref(), Some(r#""a,}b""#));
        assert_eq!(scan(r#"{ "id" : 12 }"#).as_deref(), Some("12"));
        assert_eq!(scan(r#"{"method":"x","params":{"id":3}}"#), None);
        assert_eq!(scan(r#"[{"id":1}]"#), None);
        assert_eq!(scan(r#"{"ids":1,"idx":{"id":2}}"#), None);
    }

    #[test]
    fn finds_the_id_of_a_text_that_does_not_decode() {
        let invalid_utf8 = b"{\"jsonrpc\":\"2.0\",\"result\":{\"text\":\"a\xffb\"},\"id\":4294967297}";
        assert_eq!(IdScanner::scan(invalid_utf8).as_deref(), Some("4294967297"));
        let raw_escape = b"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{\"text\":\"a\x1b]8;;b\"}}";
        assert_eq!(IdScanner::scan(raw_escape).as_deref(), Some("\"x\""));
        assert_eq!(IdScanner::scan(b"{\"jsonrpc\":\"2.0\",\"result\":\"\xff\"}"), None);
        assert_eq!(IdScanner::scan(b"not json"), None);
    }

    /// Found by the fuzz property: an id of invalid UTF-8 bytes, once made lossy, was
    /// longer than the limit (each byte became three). It is no id at all.
    #[test]
    fn an_id_that_is_not_utf8_is_not_found() {
        let mut text = b"{\"id\":\"".to_vec();
        text.extend(std::iter::repeat_n(0xff, MAX_ID_LEN - 2));
        text.extend(b"\",\"result\":1}");
        assert_eq!(IdScanner::scan(&text), None);
    }

    #[test]
    fn byte_by_byte_equals_whole() {
        let text = r#"{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"a\\\"b"}]},"id":4294967297}"#;
        let mut s = IdScanner::new();
        for b in text.bytes() {
            s.feed(&[b]);
        }
        assert_eq!(s.id(), Some("4294967297"));
    }
}
