//! The words of remote errors: what an HTTP status means for the user and what to
//! do, an error's causes on one line, and a body quoted briefly. Pure functions.

use reqwest::StatusCode;

/// How much of an error body is quoted in a message, in characters.
const BODY_QUOTE: usize = 300;

/// The message for an HTTP status other than success from the server `server` at
/// `url` (as written), saying what to do; `challenge` is its `WWW-Authenticate`,
/// `body` its answer. A 401 or 403 reaches here when the credentials mcpx sent were
/// refused (a login's token, even renewed, or the entry's own `Authorization`).
pub(super) fn status_message(
    status: StatusCode,
    server: &str,
    url: &str,
    challenge: Option<&str>,
    body: &str,
) -> String {
    let body = quote(body);
    match status.as_u16() {
        401 | 403 => format!(
            "HTTP {status} from {url}: the server refused the credentials{}; run `mcpx auth login {server}` (or, for a token in the entry's `headers`, check it){body}",
            challenge.map(|c| format!(" (WWW-Authenticate: {c})")).unwrap_or_default()
        ),
        404 => format!("HTTP 404 from {url}: no MCP endpoint there; check the entry's `url`{body}"),
        500..=599 => format!("HTTP {status} from {url}: the server failed{body}"),
        _ => format!("HTTP {status} from {url}{body}"),
    }
}

/// An error and its sources, one line (reqwest's own text omits the cause).
pub(super) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// The TLS failure behind an error, if that is what it is. rustls reports through
/// `io::Error`s (nested), whose `source` skips the error they wrap, so both ways down
/// are followed.
#[cfg(not(target_vendor = "apple"))]
pub(super) fn tls_error(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut stack = vec![e];
    while let Some(c) = stack.pop() {
        if let Some(tls) = c.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        if let Some(inner) = c.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref) {
            stack.push(inner);
        }
        stack.extend(c.source());
    }
    None
}

/// The TLS failure behind an error: the system's TLS on Apple platforms reports it as
/// a connect error, which is worded as such already.
#[cfg(target_vendor = "apple")]
pub(super) fn tls_error(_: &(dyn std::error::Error + 'static)) -> Option<String> {
    None
}

/// The innermost cause of an error.
pub(super) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// An error body, quoted briefly for a message: ` (<first 300 characters>…)`, or
/// nothing for an empty body.
pub(super) fn quote(body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return String::new();
    }
    let cut: String = body.chars().take(BODY_QUOTE).collect();
    format!(" ({}{})", cut.replace('\n', " "), if cut.len() < body.len() { "…" } else { "" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_say_what_to_do() {
        let auth = status_message(StatusCode::UNAUTHORIZED, "h", "https://h/mcp", Some("Bearer realm=\"x\""), "");
        assert_eq!(
            auth,
            "HTTP 401 Unauthorized from https://h/mcp: the server refused the credentials (WWW-Authenticate: Bearer realm=\"x\"); run `mcpx auth login h` (or, for a token in the entry's `headers`, check it)"
        );
        let missing = status_message(StatusCode::NOT_FOUND, "h", "https://h/mcp", None, "nothing here\n");
        assert_eq!(
            missing,
            "HTTP 404 from https://h/mcp: no MCP endpoint there; check the entry's `url` (nothing here)"
        );
        let failed = status_message(StatusCode::BAD_GATEWAY, "s", "u", None, "");
        assert_eq!(failed, "HTTP 502 Bad Gateway from u: the server failed");
        assert_eq!(status_message(StatusCode::CONFLICT, "s", "u", None, " "), "HTTP 409 Conflict from u");
    }

    #[test]
    fn bodies_are_quoted_on_one_line_and_cut() {
        assert_eq!(quote("  "), "");
        assert_eq!(quote("a\nb"), " (a b)");
        let long = "x".repeat(BODY_QUOTE + 10);
        assert_eq!(quote(&long), format!(" ({}…)", "x".repeat(BODY_QUOTE)));
    }

    #[test]
    fn causes_join_on_one_line_without_repeats() {
        let inner = std::io::Error::other("connection refused");
        let outer = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, inner);
        assert_eq!(chain(&outer), "connection refused");
        assert_eq!(root_cause(&outer), "connection refused");
    }
}
