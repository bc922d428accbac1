//! `large`: a tool result of a chosen size, in multi-byte text and optionally with a
//! `structuredContent` as large, for the tests of `maxResultBytes` (results cut to fit).

use serde_json::{Map, Value, json};

/// The tool's `(name, description, properties, required)`, as the other built-in tools'.
pub fn spec() -> (&'static str, &'static str, Value, &'static [&'static str]) {
    (
        "large",
        "Returns about `bytes` bytes of text, `unit` (default \"é✓😀x\", multi-byte) repeated, split into `blocks` text blocks; with `structured`, also a structuredContent of about as many bytes.",
        json!({
            "bytes": { "type": "integer", "minimum": 0 },
            "unit": { "type": "string" },
            "blocks": { "type": "integer", "minimum": 1, "default": 1 },
            "structured": { "type": "boolean" },
        }),
        &["bytes"],
    )
}

/// The result: about `bytes` bytes of `unit` repeated, in `blocks` text blocks, and with
/// `structured` a structuredContent of about as many bytes (`{"items": [unit, ...]}`).
/// Errors: `bytes` is missing or not a non-negative integer.
pub fn large(args: &Map<String, Value>) -> Result<Value, String> {
    let count = |key: &str| args.get(key).and_then(Value::as_u64).and_then(|n| usize::try_from(n).ok());
    let bytes = count("bytes").ok_or("argument `bytes` must be a non-negative integer")?;
    let unit = match args.get("unit") {
        Some(Value::String(u)) if !u.is_empty() => u.clone(),
        _ => "é✓😀x".to_owned(),
    };
    let blocks = count("blocks").unwrap_or(1).max(1);
    let text = unit.repeat(bytes.div_ceil(blocks).div_ceil(unit.len()));
    let content: Vec<Value> = (0..blocks).map(|_| json!({ "type": "text", "text": text })).collect();
    let mut result = json!({ "content": content });
    if args.get("structured") == Some(&Value::Bool(true)) {
        let items = vec![Value::String(unit.clone()); bytes.div_ceil(unit.len() + 3)];
        result["structuredContent"] = json!({ "items": items });
    }
    Ok(result)
}
