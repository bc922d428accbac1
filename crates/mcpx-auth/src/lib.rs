//! OAuth for remote servers (MCP 2025-11-25, Authorization): what a 401's challenge
//! says ([`challenge`]), where the authorization server is ([`discovery`], over
//! [`fetch`]), the exchanges with it ([`flow`]), the tokens kept in the secret store
//! ([`tokens`]), a user's login ([`login`], by a browser or a device code: [`device`])
//! and logout ([`logout`]), and the bearer of a daemon's requests ([`bearer`]).

pub mod assertion;
pub mod bearer;
pub mod challenge;
pub mod device;
pub mod discovery;
pub mod fetch;
/// Test fixtures (an in-process OAuth endpoint, a state directory with the file
/// store), for this crate's tests and, with the `fixtures` feature, the daemon's.
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod flow;
pub mod login;
pub mod logout;
pub mod tokens;

/// Text an authorization server wrote (an `error_description`, a device login's code),
/// for a one-line message: control characters, newlines included, escaped as Rust
/// escapes them (`\n`, `\u{1b}`), so the text can neither break the line nor forge one
/// under it. Everything else is kept as written.
pub fn said(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}
