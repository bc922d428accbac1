//! What the fake's HTTP mode reads and writes on the wire, apart from its state: SSE
//! events and their ids, session ids, which message answers a request, and the
//! request headers it checks (`Accept`, `Origin`).

use std::io::Read;

use axum::body::Bytes;
use axum::http::{HeaderMap, header};
use serde_json::Value;

/// Whether `line` is the response (`result` or `error`) to request `id`.
pub(super) fn is_response_to(line: &str, id: &Value) -> bool {
    let Ok(Value::Object(message)) = serde_json::from_str::<Value>(line) else { return false };
    message.get("id") == Some(id)
        && !message.contains_key("method")
        && (message.contains_key("result") || message.contains_key("error"))
}

/// One SSE event: `id:`, an optional `retry:`, and `data` (one `data:` per line).
pub(super) fn encode_event(id: &str, retry: Option<u64>, data: &str) -> Bytes {
    let mut text = String::with_capacity(data.len() + id.len() + 32);
    text.push_str("id: ");
    text.push_str(id);
    text.push('\n');
    if let Some(ms) = retry {
        text.push_str(&format!("retry: {ms}\n"));
    }
    for line in data.split('\n') {
        text.push_str("data: ");
        text.push_str(line);
        text.push('\n');
    }
    text.push('\n');
    Bytes::from(text)
}

/// Parses an event id `<route>-<seq>`.
pub(super) fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let (route, seq) = id.trim().split_once('-')?;
    Some((route.parse().ok()?, seq.parse().ok()?))
}

/// 32 random hex digits (from `/dev/urandom`, else from std's hasher keys).
pub(super) fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if from_os.is_err() {
        use std::hash::{BuildHasher, Hasher};
        for half in bytes.chunks_mut(8) {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u128(
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos(),
            );
            half.copy_from_slice(&hasher.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A header's value, if present and text.
pub(super) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name)?.to_str().ok()
}

/// Whether the `Accept` header lists `wanted` (`type/subtype`), exactly or by a
/// wildcard.
pub(super) fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    let Some((kind, _)) = wanted.split_once('/') else { return false };
    headers.get_all(header::ACCEPT).iter().filter_map(|value| value.to_str().ok()).flat_map(|v| v.split(',')).any(
        |item| {
            let media = item.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
            media == wanted || media == "*/*" || media == format!("{kind}/*")
        },
    )
}

/// Whether the request's `Origin`, if any, is http(s) on localhost, 127.0.0.1 or
/// `[::1]` (any port): DNS rebinding protection.
pub(super) fn origin_allowed(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else { return true };
    let Ok(origin) = origin.to_str() else { return false };
    let origin = origin.to_ascii_lowercase();
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    let (host, port) = match rest.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((host, port)) => (host, port),
            None => return false,
        },
        None => rest.find(':').map_or((rest, ""), |colon| rest.split_at(colon)),
    };
    let port_ok = port.is_empty()
        || port.strip_prefix(':').is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    port_ok && matches!(host, "localhost" | "127.0.0.1" | "::1")
}
