//! The protocol's eras: the legacy one (an `initialize` handshake, then a session:
//! MCP 2024-11-05 to 2025-11-25), and the modern one (MCP 2026-07-28, Basic,
//! "Per-request protocol fields"), where every request carries its own revision and
//! capabilities in `_meta` and needs no session. Also the HTTP routing headers of the
//! modern era (Basic, Transports, "Streamable HTTP", "Request headers"): their names,
//! the check of `Mcp-Method` and `Mcp-Name` against the body (-32020 on a mismatch),
//! and the headers a relay sets for a body, as plain name/value pairs (no HTTP
//! library's types: the transports and the endpoint adapt them).

use base64::Engine;
use serde_json::Value;

pub use crate::mcp::error_code::{HEADER_MISMATCH, MISSING_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION};

/// The modern revisions mcpx serves, oldest first (MCP 2026-07-28, Basic, "Versioning").
pub const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];

/// The newest modern revision.
pub const LATEST_MODERN: &str = "2026-07-28";

/// `_meta` key of a modern request's revision (2026-07-28, Basic, "Per-request protocol fields").
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of a modern request's client capabilities (same section).
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of a modern request's client identity (optional; same section).
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of the lowest log level the client wants to hear during this request
/// (2026-07-28, Server, Utilities, "Logging": log delivery is asked for per request).
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key of a `server/discover` result's server identity (2026-07-28, Server, "server/discover").
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// `_meta` key of the `subscriptions/listen` stream a notification belongs to: the
/// listen request's id (2026-07-28, Basic, Patterns, "Subscriptions").
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// HTTP header naming the request's revision (Transports, "Protocol Version Header").
pub const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
/// HTTP header repeating the request's JSON-RPC method (2026-07-28, Transports, "Request headers").
pub const METHOD_HEADER: &str = "mcp-method";
/// HTTP header repeating the tool or prompt name, or the resource URI, of `tools/call`,
/// `prompts/get` and `resources/read` (same section).
pub const NAME_HEADER: &str = "mcp-name";
/// Prefix of the headers that mirror a `tools/call` argument the tool's schema marks
/// with `x-mcp-header` (same section, "Custom headers").
pub const PARAM_HEADER_PREFIX: &str = "mcp-param-";

/// What a request says of its era, read from its `_meta` and, over HTTP, its
/// `MCP-Protocol-Version` header.
#[derive(Debug, Clone, PartialEq)]
pub enum Era {
    /// No modern revision declared: the legacy era (a session is needed).
    Legacy,
    /// A modern revision mcpx serves: answered without a session.
    Modern(Modern),
    /// A revision declared in `_meta` that mcpx does not serve (the string given):
    /// answered with [`UNSUPPORTED_PROTOCOL_VERSION`].
    Unsupported(String),
}

/// The per-request fields of a modern request.
#[derive(Debug, Clone, PartialEq)]
pub struct Modern {
    /// The revision, one of [`MODERN_VERSIONS`].
    pub version: String,
    /// The client's capabilities (`{}` when absent).
    pub capabilities: Value,
    /// The client's identity, when sent.
    pub client_info: Option<Value>,
    /// The lowest log level the client wants during this request; `None`: no log messages.
    pub log_level: Option<String>,
}

/// The era of `body` (one JSON-RPC request as a value), with `header_version`, its
/// `MCP-Protocol-Version` header when it came over HTTP. `_meta`'s revision decides;
/// without one, a modern header makes it modern too (its capabilities then empty).
pub fn of(body: &Value, header_version: Option<&str>) -> Era {
    let meta = &body["params"]["_meta"];
    let header_version = header_version.filter(|v| !v.is_empty()).map(str::to_owned);
    let version = match meta[META_PROTOCOL_VERSION].as_str() {
        Some(v) => v.to_owned(),
        None => match header_version {
            Some(v) if is_modern(&v) => v,
            _ => return Era::Legacy,
        },
    };
    if crate::mcp::is_supported(&version) && !is_modern(&version) {
        // A legacy revision in `_meta` (allowed, and meaningless): the session decides.
        return Era::Legacy;
    }
    if !is_modern(&version) {
        return Era::Unsupported(version);
    }
    Era::Modern(Modern {
        version,
        capabilities: meta.get(META_CLIENT_CAPABILITIES).cloned().unwrap_or_else(|| Value::Object(Default::default())),
        client_info: meta.get(META_CLIENT_INFO).cloned(),
        log_level: meta[META_LOG_LEVEL].as_str().map(str::to_owned),
    })
}

/// Whether `version` is a modern revision mcpx serves.
pub fn is_modern(version: &str) -> bool {
    MODERN_VERSIONS.contains(&version)
}

/// Every revision mcpx serves, legacy then modern, oldest first: what the aggregate's
/// `server/discover` answers as `supportedVersions`.
pub fn all_versions() -> Vec<&'static str> {
    crate::mcp::SUPPORTED_VERSIONS.iter().chain(MODERN_VERSIONS.iter()).copied().collect()
}

/// The params key whose value `Mcp-Name` repeats, for the methods that have one.
pub fn name_key(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// Checks a modern request's routing headers against its `body` (2026-07-28,
/// Transports, "Request headers"): `Mcp-Method` must be the body's method and, for
/// the methods of [`name_key`], `Mcp-Name` (plain, or `=?base64?…?=`) its name or URI;
/// `MCP-Protocol-Version`, when sent, must be `_meta`'s revision.
///
/// `header` gives a request header's value by its lowercase name (`None` when absent
/// or empty).
///
/// Errors: the one-line message of the first mismatch, to answer as HTTP 400 with
/// [`HEADER_MISMATCH`].
pub fn check_headers(header: impl Fn(&str) -> Option<String>, body: &Value, version: &str) -> Result<(), String> {
    let method = body["method"].as_str().unwrap_or_default();
    if let Some(sent) = header(PROTOCOL_VERSION_HEADER) {
        if sent != version {
            return Err(format!(
                "the MCP-Protocol-Version header ({sent}) does not match the request's _meta revision ({version}); send the same revision in both"
            ));
        }
    }
    match header(METHOD_HEADER) {
        Some(sent) if sent == method => {}
        Some(sent) => {
            return Err(format!(
                "the Mcp-Method header ({sent}) does not match the request's method ({method}); send the body's method"
            ));
        }
        None => return Err(format!("the Mcp-Method header is required on a {version} request; send `{method}`")),
    }
    if let Some(key) = name_key(method) {
        let Some(named) = body["params"][key].as_str() else { return Ok(()) };
        let sent = header(NAME_HEADER).and_then(|v| decode_header_value(&v));
        if sent.as_deref() != Some(named) {
            return Err(format!(
                "the Mcp-Name header does not match the request's params.{key} ({named}); send the same value"
            ));
        }
    }
    Ok(())
}

/// The routing headers a relay sends with `body` (a modern request, as `mcpx serve`
/// forwards one from stdio): `MCP-Protocol-Version`, `Mcp-Method` and, when the
/// method has one, `Mcp-Name`. Empty for a legacy request.
pub fn routing_headers(body: &Value) -> Vec<(&'static str, String)> {
    let Era::Modern(modern) = of(body, None) else { return Vec::new() };
    let method = body["method"].as_str().unwrap_or_default();
    let mut headers = vec![(PROTOCOL_VERSION_HEADER, modern.version), (METHOD_HEADER, method.to_owned())];
    if let Some(name) = name_key(method).and_then(|k| body["params"][k].as_str()) {
        headers.push((NAME_HEADER, encode_header_value(name)));
    }
    headers
}

/// `value` as a header value: as it is when printable ASCII without edge spaces, else
/// `=?base64?<base64 of its UTF-8>?=` (2026-07-28, Transports, "Request headers").
pub fn encode_header_value(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        value.to_owned()
    } else {
        format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(value))
    }
}

/// The inverse of [`encode_header_value`]; `None` for a malformed base64 form.
pub fn decode_header_value(value: &str) -> Option<String> {
    match value.strip_prefix("=?base64?").and_then(|v| v.strip_suffix("?=")) {
        Some(payload) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(payload).ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn modern(method: &str, params: Value) -> Value {
        let mut p = params;
        p["_meta"] = json!({ META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {} });
        json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": p })
    }

    #[test]
    fn eras() {
        let body = modern("tools/list", json!({}));
        assert!(matches!(of(&body, None), Era::Modern(m) if m.version == "2026-07-28" && m.log_level.is_none()));
        assert_eq!(of(&json!({ "method": "tools/list" }), None), Era::Legacy);
        let future = json!({ "method": "x", "params": { "_meta": { META_PROTOCOL_VERSION: "2099-01-01" } } });
        assert_eq!(of(&future, None), Era::Unsupported("2099-01-01".into()));
        assert!(matches!(of(&json!({ "method": "tools/list" }), Some("2026-07-28")), Era::Modern(_)));
        assert_eq!(of(&json!({ "method": "tools/list" }), Some("2025-11-25")), Era::Legacy);
    }

    #[test]
    fn headers_round_trip_and_mismatch() {
        let body = modern("tools/call", json!({ "name": "a__é" }));
        let mut headers: std::collections::HashMap<&str, String> = routing_headers(&body).into_iter().collect();
        let check = |h: &std::collections::HashMap<&str, String>| {
            check_headers(|name| h.get(name).cloned(), &body, "2026-07-28")
        };
        assert_eq!(check(&headers), Ok(()));
        headers.insert(NAME_HEADER, "a__b".into());
        assert!(check(&headers).unwrap_err().contains("Mcp-Name"));
        headers.insert(METHOD_HEADER, "tools/list".into());
        assert!(check(&headers).unwrap_err().contains("Mcp-Method"));
        assert_eq!(decode_header_value(&encode_header_value(" x ")).as_deref(), Some(" x "));
    }
}
