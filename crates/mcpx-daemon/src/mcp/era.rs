//! The MCP endpoint's side of the protocol's eras ([`mcpx_proto::era`], re-exported
//! here): the era of a request as it came over HTTP, the check of its routing
//! headers, and the `Mcp-Param-*` headers to pass on, read from axum's `HeaderMap`.

use axum::http::HeaderMap;
use serde_json::Value;

pub use mcpx_proto::era::*;

/// The era of `body`, with `headers` when it came over HTTP ([`mcpx_proto::era::of`]).
pub fn of_request(body: &Value, headers: Option<&HeaderMap>) -> Era {
    let version = headers.and_then(|h| header(h, PROTOCOL_VERSION_HEADER));
    of(body, version.as_deref())
}

/// [`mcpx_proto::era::check_headers`] with the request's `headers`.
///
/// Errors: the one-line message of the first mismatch.
pub fn check_request_headers(headers: &HeaderMap, body: &Value, version: &str) -> Result<(), String> {
    check_headers(|name| header(headers, name), body, version)
}

/// The `Mcp-Param-*` headers of a request, names lowercased, to pass on with it.
pub fn param_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with(PARAM_HEADER_PREFIX))
        .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
        .collect()
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()).map(str::to_owned)
}
