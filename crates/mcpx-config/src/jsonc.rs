//! JSONC preprocessing: turns JSON-with-comments-and-trailing-commas into plain JSON of exactly
//! the same byte length, with every newline kept in place, so that serde_json's line and column
//! numbers point into the original file.

use std::io::Read;

use json_comments::CommentSettings;

/// A preprocessing failure at a byte offset of the original text.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct JsoncError {
    /// Byte offset of the offending character.
    pub offset: usize,
    /// What is wrong (lowercase, no trailing period).
    pub message: &'static str,
}

/// Strips `//` and `/* */` comments and trailing commas (a `,` followed, after whitespace, by
/// `}` or `]`), replacing them with spaces. A leading UTF-8 byte-order mark becomes spaces too.
///
/// The result has the same length as `text` and the same newlines at the same offsets.
/// Unterminated strings and block comments are left for the JSON parser to report.
pub(super) fn to_json(text: &str) -> Result<String, JsoncError> {
    let input = text.as_bytes();
    let mut out = Vec::with_capacity(input.len());
    // Feed the stripper one byte per read so that, if it rejects a stray `/`, we know where.
    let mut stripper = CommentSettings::c_style().strip_comments(input);
    let mut byte = [0u8; 1];
    loop {
        match stripper.read(&mut byte) {
            Ok(0) => break,
            Ok(_) => out.push(byte[0]),
            Err(_) if out.len() < input.len() => {
                // The stripper consumed a `/` (emitted as a space) and then a byte that starts
                // neither `//` nor `/*`.
                return Err(JsoncError {
                    offset: out.len().saturating_sub(1),
                    message: "unexpected `/` (comments are written `// ...` or `/* ... */`)",
                });
            }
            // At end of input inside a string or block comment: everything has been emitted;
            // serde_json reports the unexpected end of file with a position.
            Err(_) => break,
        }
    }
    // Block comments are blanked including their newlines; put the newlines back so line
    // numbers stay right. Newlines only ever change inside comments.
    for (o, &i) in out.iter_mut().zip(input) {
        if i == b'\n' || i == b'\r' {
            *o = i;
        }
    }
    if out.starts_with(b"\xEF\xBB\xBF") {
        out[..3].fill(b' ');
    }
    strip_trailing_commas(&mut out)?;
    // Only whole comments (every byte of them) and ASCII commas were replaced by ASCII spaces,
    // so the text is still UTF-8.
    String::from_utf8(out).map_err(|e| JsoncError { offset: e.utf8_error().valid_up_to(), message: "invalid UTF-8" })
}

/// Blanks each comma followed, after whitespace, by `}` or `]`. Errors: a comma followed by
/// another (`,,`), at the second one, which would otherwise be blanked and then reported
/// as a trailing comma.
fn strip_trailing_commas(buf: &mut [u8]) -> Result<(), JsoncError> {
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    while i < buf.len() {
        let c = buf[i];
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
        } else if c == b'"' {
            in_string = true;
        } else if c == b',' {
            let next = buf[i + 1..].iter().position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
            match next.map(|n| (i + 1 + n, buf[i + 1 + n])) {
                Some((_, b'}' | b']')) => buf[i] = b' ',
                Some((offset, b',')) => {
                    return Err(JsoncError { offset, message: "two commas with nothing between them; remove one" });
                }
                _ => {}
            }
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_comments_and_trailing_commas() {
        let src = "{\n  // line\n  \"a\": [1, 2,], /* multi\n line */ \"b\": \"x,]//\",\n}\n";
        let out = to_json(src).unwrap();
        assert_eq!(out.len(), src.len());
        assert_eq!(out.match_indices('\n').collect::<Vec<_>>(), src.match_indices('\n').collect::<Vec<_>>());
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v, serde_json::json!({"a": [1, 2], "b": "x,]//"}));
    }

    #[test]
    fn stray_slash_has_offset() {
        let err = to_json("{\n  / \"a\": 1}").unwrap_err();
        assert_eq!(err.offset, 4);
    }

    #[test]
    fn double_comma_is_reported_at_the_second_comma() {
        for text in ["[1,,]", "[1, ,2]", "{\"a\": 1,\n,}"] {
            let err = to_json(text).unwrap_err();
            assert_eq!(&text[err.offset..=err.offset], ",", "{text}: {err:?}");
            assert!(err.message.starts_with("two commas"), "{err:?}");
        }
        assert!(to_json("[\",,\"]").is_ok(), "commas in a string are text");
    }
}
