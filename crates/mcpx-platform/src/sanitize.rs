//! The one sanitizer for the terminal and the dashboard: text that servers provide
//! has its control characters escaped visibly before mcpx prints or shows it, so
//! that a server cannot retitle, clear or overwrite the user's terminal, or plant a
//! hidden link (docs/security.md, "What servers send").
//!
//! Unsafe are the C0 controls but newline and tab, DEL, and the C1 code points
//! U+0080–U+009F (ECMA-48 reads U+009B as CSI, U+009D as OSC). All other UTF-8
//! text passes unchanged.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether a terminal may act on `c`: C0 but `\n` and `\t`, DEL, or C1.
pub fn is_unsafe(c: char) -> bool {
    matches!(c, '\0'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// `text` for a terminal: ESC as `\e`, CR as `\r`, the other C0 controls and DEL
/// as `\xNN` (BEL is `\x07`), C1 as `\u{NN}` (`\u{9b}`). Borrowed when nothing
/// needs escaping.
pub fn text(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\u{1b}' => out.push_str("\\e"),
            '\r' => out.push_str("\\r"),
            c if c < '\u{80}' && is_unsafe(c) => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Characters that show as nothing or reorder the text around them: zero-width
/// characters, bidirectional controls (Unicode Standard Annex #9) and Unicode tag
/// characters (U+E0000 to U+E007F).
pub fn hidden(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' |
        '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}' | '\u{E0000}'..='\u{E007F}')
}

/// `text` as [`text`] escapes it, and every [`hidden`] character shown as `<U+XXXX>`:
/// what a person reads is all there is. Borrowed when nothing changes.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(hidden) {
        return self::text(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match hidden(c) {
            true => {
                let _ = write!(shown, "<U+{:04X}>", u32::from(c));
            }
            false => shown.push(c),
        }
    }
    Cow::Owned(self::text(&shown).into_owned())
}

/// `text` for one line of output: as [`text`], and newlines and tabs escaped too
/// (`\n`, `\t`), so a name or a server's message cannot break the line or forge one
/// under it.
pub fn line(text: &str) -> Cow<'_, str> {
    if !text.contains(['\n', '\t']) {
        return self::text(text);
    }
    let escaped = text.replace('\n', "\\n").replace('\t', "\\t");
    Cow::Owned(self::text(&escaped).into_owned())
}

/// JSON text for a terminal, holding the same value: inside strings every unsafe
/// character becomes a `\u00XX` escape (serde_json escapes C0 but writes DEL and C1
/// raw; a server's JSON passed through may hold them too). Outside strings a CR
/// (whitespace there) becomes a space; any other unsafe character, which valid
/// JSON never has there, is escaped the same way. Borrowed when nothing changes.
pub fn json(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if is_unsafe(c) {
            escaped = false;
            if c == '\r' && !in_string {
                out.push(' ');
            } else {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            continue;
        }
        out.push(c);
        if escaped {
            escaped = false;
        } else if in_string && c == '\\' {
            escaped = true;
        } else if c == '"' {
            in_string = !in_string;
        }
    }
    Cow::Owned(out)
}

/// A writer that passes every write through [`text`], for the daemon's log (its
/// file and, in the foreground, stderr): tracing writes one whole event per call,
/// so a character is never split across two writes. Bytes that are not UTF-8 are
/// written as U+FFFD.
pub struct Writer<W>(pub W);

impl<W: std::io::Write> std::io::Write for Writer<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let lossy = String::from_utf8_lossy(buf);
        self.0.write_all(text(&lossy).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn escapes_each_kind_visibly() {
        assert_eq!(text("a\u{1b}]0;t\u{7}b\rc\u{9b}31m\u{7f}\0é\n\tz"), "a\\e]0;t\\x07b\\rc\\u{9b}31m\\x7f\\x00é\n\tz");
    }

    #[test]
    fn clean_text_is_borrowed() {
        assert!(matches!(text("plain é ✓\n\tline"), Cow::Borrowed(_)));
        assert!(matches!(json(r#"{"a":"é\u001b"}"#), Cow::Borrowed(_)));
    }

    #[test]
    fn json_keeps_the_value() {
        let value = serde_json::json!({ "t": "\u{1b}[2J\r\u{9b}\u{7f}\u{85}é\\\"", "n": [1, "\u{9d}"] });
        let serialized = serde_json::to_string(&value).unwrap_or_default();
        let safe = json(&serialized);
        assert!(safe.contains("\\u009b") && safe.contains("\\u007f"), "{safe}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).ok(), Some(value));
    }

    #[test]
    fn json_escapes_raw_controls_a_passthrough_may_hold() {
        assert_eq!(json("{\r\n\"a\":\"x\u{1b}y\\\u{7}\"}"), "{ \n\"a\":\"x\\u001by\\\\u0007\"}");
    }

    proptest! {
        #[test]
        fn no_unsafe_character_survives(s in any::<String>()) {
            prop_assert!(!text(&s).chars().any(is_unsafe));
            prop_assert!(!json(&s).chars().any(is_unsafe));
        }

        #[test]
        fn safe_text_passes_unchanged(s in any::<String>()) {
            let safe: String = s.chars().filter(|&c| !is_unsafe(c)).collect();
            prop_assert_eq!(text(&safe), safe.as_str());
        }

        #[test]
        fn json_of_any_string_value_is_the_same_value(s in any::<String>()) {
            let value = serde_json::Value::String(s);
            let pretty = serde_json::to_string_pretty(&serde_json::json!([value, { "k": value }])).unwrap_or_default();
            let back: serde_json::Value = serde_json::from_str(&json(&pretty)).unwrap_or_default();
            prop_assert_eq!(back, serde_json::json!([value, { "k": value }]));
        }
    }
}
