//! The `Bearer` challenge of a `WWW-Authenticate` header (RFC 6750 §3, with the
//! `resource_metadata` parameter of RFC 9728 §5.1): where the protected resource
//! metadata is, which scopes the request needs, and why it was refused.

/// The parameters of a `Bearer` challenge that MCP authorization uses (MCP 2025-11-25,
/// Authorization, "Protected Resource Metadata Discovery Requirements" and "Scope
/// Selection Strategy"). Values are unquoted and unescaped; unknown parameters are
/// ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: the URL of the protected resource metadata (RFC 9728 §5.1).
    pub resource_metadata: Option<String>,
    /// `scope`: the space-separated scopes the request needs (RFC 6750 §3).
    pub scope: Option<String>,
    /// `error`: `invalid_token`, `insufficient_scope`... (RFC 6750 §3.1).
    pub error: Option<String>,
}

impl Challenge {
    /// The `Bearer` challenge among the challenges of one `WWW-Authenticate` value
    /// (RFC 9110 §11.6.1: `scheme param=value, param="quoted", OtherScheme ...`);
    /// `None` when there is none. The scheme is matched without regard to case.
    pub fn parse(header: &str) -> Option<Challenge> {
        let mut tokens = Tokens { rest: header };
        let mut in_bearer = false;
        let mut found = None;
        while let Some(item) = tokens.next_item() {
            match item {
                Item::Scheme(scheme) => {
                    if in_bearer {
                        break;
                    }
                    in_bearer = scheme.eq_ignore_ascii_case("bearer");
                    if in_bearer {
                        found = Some(Challenge::default());
                    }
                }
                Item::Param(name, value) if in_bearer => {
                    let Some(challenge) = found.as_mut() else { continue };
                    let slot = match name.to_ascii_lowercase().as_str() {
                        "resource_metadata" => &mut challenge.resource_metadata,
                        "scope" => &mut challenge.scope,
                        "error" => &mut challenge.error,
                        _ => continue,
                    };
                    slot.get_or_insert(value);
                }
                Item::Param(..) => {}
            }
        }
        found
    }

    /// The scopes of `scope`, in order, without repeats.
    pub fn scopes(&self) -> Vec<String> {
        let mut scopes: Vec<String> = Vec::new();
        for scope in self.scope.as_deref().unwrap_or_default().split_ascii_whitespace() {
            if !scopes.iter().any(|s| s == scope) {
                scopes.push(scope.to_owned());
            }
        }
        scopes
    }
}

/// One item of a `WWW-Authenticate` value.
enum Item {
    /// An auth scheme, which starts a challenge.
    Scheme(String),
    /// An auth parameter of the challenge it follows.
    Param(String, String),
}

/// A cursor over a `WWW-Authenticate` value.
struct Tokens<'a> {
    rest: &'a str,
}

impl Tokens<'_> {
    /// The next scheme or parameter; `None` at the end. Malformed text is skipped up
    /// to the next comma, so one bad parameter does not hide the others.
    fn next_item(&mut self) -> Option<Item> {
        loop {
            self.rest = self.rest.trim_start_matches(|c: char| c == ',' || c.is_ascii_whitespace());
            if self.rest.is_empty() {
                return None;
            }
            let end =
                self.rest.find(|c: char| c == '=' || c == ',' || c.is_ascii_whitespace()).unwrap_or(self.rest.len());
            let token = &self.rest[..end];
            let after = self.rest[end..].trim_start_matches([' ', '\t']);
            if let Some(value) = after.strip_prefix('=').filter(|_| !token.is_empty()) {
                // A token68 (`Basic abc==`) has `=` at its end only: a param has a value.
                let value = value.trim_start_matches([' ', '\t']);
                if let Some(quoted) = value.strip_prefix('"') {
                    let (text, rest) = unquote(quoted);
                    self.rest = rest;
                    return Some(Item::Param(token.to_owned(), text));
                }
                let value_end = value.find([',', ' ', '\t']).unwrap_or(value.len());
                if value_end == 0 {
                    self.rest = value;
                    continue;
                }
                self.rest = &value[value_end..];
                return Some(Item::Param(token.to_owned(), value[..value_end].to_owned()));
            }
            if token.is_empty() {
                // A stray `=`: skip what follows it up to the next comma.
                self.rest = self.rest.find(',').map_or("", |comma| &self.rest[comma..]);
                continue;
            }
            self.rest = &self.rest[end..];
            return Some(Item::Scheme(token.to_owned()));
        }
    }
}

/// A quoted string's text (after its opening quote), its `\` escapes undone, and what
/// follows its closing quote (RFC 9110 §5.6.4). An unclosed string runs to the end.
fn unquote(quoted: &str) -> (String, &str) {
    let mut text = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (text, &quoted[i + 1..]),
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    text.push(escaped);
                }
            }
            c => text.push(c),
        }
    }
    (text, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_challenge_is_found_among_others_with_its_parameters() {
        let c = Challenge::parse(
            r#"Basic realm="x", Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/mcp", Negotiate"#,
        )
        .unwrap();
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(c.scopes(), ["files:read", "files:write"]);
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://api.example.com/.well-known/oauth-protected-resource/mcp")
        );
    }

    #[test]
    fn tokens_quotes_escapes_and_case_are_read() {
        let c =
            Challenge::parse(r#"bearer Scope="a \"b\" a", ERROR=invalid_token,resource_metadata=https://h/m"#).unwrap();
        assert_eq!(c.scope.as_deref(), Some(r#"a "b" a"#));
        assert_eq!(c.scopes(), ["a", r#""b""#]);
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(c.resource_metadata.as_deref(), Some("https://h/m"));
    }

    #[test]
    fn a_bare_bearer_and_no_bearer() {
        assert_eq!(Challenge::parse("Bearer"), Some(Challenge::default()));
        assert_eq!(Challenge::parse(r#"Bearer realm="fake""#), Some(Challenge::default()));
        assert_eq!(Challenge::parse(r#"Basic realm="x""#), None);
        assert_eq!(Challenge::parse("Basic dGVzdDp0ZXN0=="), None);
        assert_eq!(Challenge::parse(""), None);
    }

    #[test]
    fn malformed_text_is_skipped_not_fatal() {
        let c = Challenge::parse(r#"Bearer realm="r", =oops, scope=, scope="s1", error="unclosed"#).unwrap();
        assert_eq!(c.scope.as_deref(), Some("s1"));
        assert_eq!(c.error.as_deref(), Some("unclosed"));
        // Parameters after the next scheme are that scheme's.
        let c = Challenge::parse(r#"Bearer scope="a", DPoP scope="b""#).unwrap();
        assert_eq!(c.scope.as_deref(), Some("a"));
    }
}
