//! Results that fit a model's context (`docs/configuration.md`, "Results that fit"): a
//! `tools/call` result larger than its server's `maxResultBytes` (or
//! `maxResultBytesPerTool`) reaches an MCP client cut, with a note, and the whole result
//! stays readable for ten minutes as the resource `mcpx://results/<id>`, by the same
//! client session.
//!
//! The cut keeps whole content blocks in order while they fit, then the start of the
//! next text block, cut at a character boundary (never inside a UTF-8 sequence); other
//! blocks that do not fit are left out whole. `structuredContent` is never cut: when the
//! result with it would not fit, it is left out and the note says so. The note is one
//! text block at the end (MCP 2025-11-25, Server, Tools, "Tool Result": `content` is a
//! list of blocks, `structuredContent` a JSON object). The shell does not go through
//! here: `mcpx call --out` saves a whole result.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::sync::lock;

/// How long a whole result stays readable.
pub const KEPT_FOR: Duration = Duration::from_secs(10 * 60);

/// The most bytes of whole results the daemon keeps at once, over every session; the
/// oldest go first.
pub const KEPT_BYTES: usize = 64 << 20;

/// The URI prefix of a kept result.
pub const URI_PREFIX: &str = "mcpx://results/";

/// Bytes of the limit left for the note and the result's own keys.
const NOTE_ROOM: usize = 600;

/// One whole result, kept.
struct Kept {
    /// The client session it belongs to (its pool session).
    owner: String,
    /// The whole `result` object, as the server sent it (JSON text).
    text: String,
    /// When it stops being readable.
    until: Instant,
}

/// The whole results kept for reading back, by id.
#[derive(Default)]
pub struct Results {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<String, Kept>,
    /// Ids, oldest first.
    order: VecDeque<String>,
    bytes: usize,
}

impl std::fmt::Debug for Results {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = lock(&self.inner);
        f.debug_struct("Results").field("kept", &inner.by_id.len()).field("bytes", &inner.bytes).finish()
    }
}

impl Results {
    /// Keeps `text` (a whole result) for `owner`; its id, or `None` when it is larger than
    /// everything kept may be.
    fn keep(&self, owner: &str, text: String) -> Option<String> {
        if text.len() > KEPT_BYTES {
            return None;
        }
        let mut id = [0u8; 12];
        mcpx_platform::random_bytes(&mut id).ok()?;
        let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let mut inner = lock(&self.inner);
        inner.expire(Instant::now());
        while inner.bytes + text.len() > KEPT_BYTES {
            let Some(oldest) = inner.order.pop_front() else { break };
            if let Some(gone) = inner.by_id.remove(&oldest) {
                inner.bytes -= gone.text.len();
            }
        }
        inner.bytes += text.len();
        inner.order.push_back(id.clone());
        inner.by_id.insert(id.clone(), Kept { owner: owner.to_owned(), text, until: Instant::now() + kept_for() });
        Some(id)
    }

    /// The `resources/read` result of `uri` for `owner`: the whole result as one JSON text
    /// resource. `None` when the URI is not a kept result's; `Some(Err(message))` when it
    /// was, but has expired or belongs to another session.
    pub fn read(&self, owner: Option<&str>, uri: &str) -> Option<Result<Value, String>> {
        let id = uri.strip_prefix(URI_PREFIX)?;
        if id.len() != 24 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut inner = lock(&self.inner);
        inner.expire(Instant::now());
        let now = Instant::now();
        let found = inner.by_id.get(id).filter(|k| Some(k.owner.as_str()) == owner && k.until > now);
        Some(match found {
            Some(kept) => {
                Ok(json!({ "contents": [{ "uri": uri, "mimeType": "application/json", "text": kept.text }] }))
            }
            None => Err(format!(
                "{uri} is not readable: a cut result stays readable for {} minutes, by the session that got it, while the daemon runs (a restart forgets it)",
                KEPT_FOR.as_secs() / 60
            )),
        })
    }

    /// The bytes of whole results kept now.
    pub fn kept_bytes(&self) -> usize {
        lock(&self.inner).bytes
    }
}

/// [`KEPT_FOR`], or with the `test-hooks` feature `MCPX_TEST_RESULTS_TTL_MS`.
fn kept_for() -> Duration {
    #[cfg(feature = "test-hooks")]
    if let Some(ms) = std::env::var("MCPX_TEST_RESULTS_TTL_MS").ok().and_then(|v| v.parse().ok()) {
        return Duration::from_millis(ms);
    }
    KEPT_FOR
}

impl Inner {
    /// Drops what is past its time.
    fn expire(&mut self, now: Instant) {
        while let Some(id) = self.order.front() {
            let expired = self.by_id.get(id).is_none_or(|k| k.until <= now);
            if !expired {
                break;
            }
            if let Some(gone) = self.by_id.remove(id) {
                self.bytes -= gone.text.len();
            }
            self.order.pop_front();
        }
    }
}

/// `result` (the `result` object of a `tools/call` response, as JSON text) cut to `limit`
/// bytes when it is larger (`what` says whose limit, for the note: "`maxResultBytes`
/// allows for tool `t` of server `s`"), the whole kept in `results` for `owner` (the client's
/// session; `None`: nothing can be kept, and the note says so). `None` when it fits as it
/// is, or is no tool result (no `content` and no `structuredContent`).
pub fn fit(results: &Results, owner: Option<&str>, result: &str, limit: usize, what: &str) -> Option<Value> {
    if result.len() <= limit {
        return None;
    }
    let Ok(Value::Object(mut whole)) = serde_json::from_str::<Value>(result) else { return None };
    if !whole.contains_key("content") && !whole.contains_key("structuredContent") {
        return None;
    }
    let budget = limit.saturating_sub(NOTE_ROOM);
    let blocks = match whole.remove("content") {
        Some(Value::Array(blocks)) => blocks,
        _ => Vec::new(),
    };
    let structured = whole.remove("structuredContent");
    // The other keys (`isError`, `_meta`) stay; they are small.
    let base = Value::Object(whole.clone()).to_string().len();
    let mut used = base;
    // `structuredContent` first, whole or not at all: it is what a program reads.
    let structured_size = structured.as_ref().map_or(0, |s| s.to_string().len() + "\"structuredContent\":,".len());
    let structured_fits = structured.is_some() && used + structured_size <= budget;
    if structured_fits {
        used += structured_size;
    }
    let mut kept = Vec::new();
    // One text block is cut, the first that does not fit whole; the others go whole or not
    // at all.
    let mut cut = false;
    for block in &blocks {
        let size = block.to_string().len() + 1;
        if used + size <= budget {
            used += size;
            kept.push(block.clone());
            continue;
        }
        if let (false, Some(text)) = (cut, block.get("text").and_then(Value::as_str)) {
            let overhead = size - Value::String(text.to_owned()).to_string().len();
            if let Some(prefix) = prefix_fitting(text, budget.saturating_sub(used + overhead)) {
                let mut block = block.clone();
                block["text"] = Value::String(prefix.to_owned());
                used += block.to_string().len() + 1;
                kept.push(block);
                cut = true;
            }
        }
    }
    let mut out = whole;
    // Kept only for a session that can read it back.
    let id = owner.and_then(|owner| results.keep(owner, result.to_owned()));
    let shown = used - base - if structured_fits { structured_size } else { 0 };
    let mut note = format!(
        "[mcpx: this result is {} bytes, over the {limit} bytes {what}; about {shown} bytes are shown",
        result.len()
    );
    if structured.is_some() && !structured_fits {
        note.push_str("; its structuredContent is left out whole, never cut");
    }
    match &id {
        Some(id) => note.push_str(&format!(
            ". The whole result is the resource {URI_PREFIX}{id} for {} minutes: read it with resources/read.]",
            KEPT_FOR.as_secs() / 60
        )),
        None => note.push_str(
            ". The whole result could not be kept; call the tool from the shell with `mcpx call --out FILE`.]",
        ),
    }
    kept.push(json!({ "type": "text", "text": note }));
    out.insert("content".into(), Value::Array(kept));
    if let (true, Some(structured)) = (structured_fits, structured) {
        out.insert("structuredContent".into(), structured);
    }
    Some(Value::Object(out))
}

/// The longest start of `text` whose JSON string is at most `room` bytes, ending at a
/// character boundary; `None` when not even one character fits.
fn prefix_fitting(text: &str, room: usize) -> Option<&str> {
    let mut end = text.len().min(room);
    loop {
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if end == 0 {
            return None;
        }
        let size = Value::String(text[..end].to_owned()).to_string().len();
        if size <= room {
            return Some(&text[..end]);
        }
        // Shrink in proportion to the escaping (a text of quotes or newlines is twice its
        // size in JSON, of control characters six times): never straight to nothing.
        end = (end * room / size).min(end - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(blocks: Value, structured: Option<Value>) -> String {
        let mut r = json!({ "content": blocks });
        if let Some(s) = structured {
            r["structuredContent"] = s;
        }
        r.to_string()
    }

    #[test]
    fn a_large_result_is_cut_at_a_character_boundary_with_a_note() {
        let results = Results::default();
        let text = "é✓😀x".repeat(200_000);
        let whole = result(json!([{ "type": "text", "text": text }]), None);
        let cut =
            fit(&results, Some("s1"), &whole, 20_000, "`maxResultBytes` allows for tool `t` of server `s`").unwrap();
        let size = cut.to_string().len();
        assert!(size <= 20_000, "{size}");
        let shown = cut["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with(shown) && shown.len() > 15_000, "{}", shown.len());
        let note = cut["content"][1]["text"].as_str().unwrap();
        assert!(note.contains("mcpx://results/") && note.contains("20000 bytes"), "{note}");
        let uri = note.split_whitespace().find(|w| w.starts_with("mcpx://results/")).unwrap();
        let read = results.read(Some("s1"), uri).unwrap().unwrap();
        assert_eq!(read["contents"][0]["text"], whole, "the whole result reads back");
        assert!(results.read(Some("other"), uri).unwrap().is_err(), "another session cannot read it");
        assert!(results.read(Some("s1"), "mcpx://results/notanid").is_none(), "not a kept result's URI");
        assert!(fit(&results, Some("s1"), &result(json!([]), None), 20_000, "t").is_none(), "fits: untouched");
    }

    #[test]
    fn text_of_escapes_is_cut_not_dropped() {
        let results = Results::default();
        for unit in ["\n", "\"", "\u{1}", "a\""] {
            let whole = result(json!([{ "type": "text", "text": unit.repeat(5000) }]), None);
            let cut = fit(&results, Some("s"), &whole, 2048, "t").unwrap();
            let shown = cut["content"][0]["text"].as_str().unwrap_or_default();
            assert!(shown.len() > 100 && unit.repeat(5000).starts_with(shown), "{unit:?}: {cut}");
            assert!(cut.to_string().len() <= 2048, "{unit:?}");
        }
    }

    #[test]
    fn structured_content_is_never_cut_and_other_blocks_go_whole() {
        let results = Results::default();
        let items: Vec<Value> = (0..5000).map(|i| json!({ "i": i, "name": "ünïcode" })).collect();
        let whole = result(json!([{ "type": "text", "text": "head" }, image()]), Some(json!({ "items": items })));
        let cut = fit(&results, None, &whole, 10_000, "t").unwrap();
        assert!(cut.get("structuredContent").is_none(), "left out whole");
        let blocks = cut["content"].as_array().unwrap();
        assert_eq!(blocks[0]["text"], "head");
        assert_eq!(blocks.len(), 2, "the image is left out whole: {blocks:?}");
        let note = blocks[1]["text"].as_str().unwrap();
        assert!(note.contains("structuredContent is left out") && note.contains("could not be kept"), "{note}");
        let after_image = result(json!([image(), { "type": "text", "text": "y".repeat(30_000) }]), None);
        let cut = fit(&results, Some("s"), &after_image, 10_000, "t").unwrap();
        assert!(
            cut["content"][0]["text"].as_str().unwrap().starts_with("yyy"),
            "the text after a left-out image is cut: {cut}"
        );
        let small = result(json!([{ "type": "text", "text": "x".repeat(3000) }]), Some(json!({ "a": 1 })));
        let cut = fit(&results, Some("s"), &small, 2048, "t").unwrap();
        assert_eq!(cut["structuredContent"], json!({ "a": 1 }), "a small structuredContent stays");
    }

    fn image() -> Value {
        json!({ "type": "image", "data": "A".repeat(30_000), "mimeType": "image/png" })
    }

    #[test]
    fn kept_results_expire_and_stay_under_the_cap() {
        let results = Results::default();
        let big = "x".repeat(KEPT_BYTES / 3);
        for _ in 0..5 {
            results.keep("s", big.clone()).unwrap();
        }
        assert!(results.kept_bytes() <= KEPT_BYTES, "{}", results.kept_bytes());
        assert!(results.keep("s", "x".repeat(KEPT_BYTES + 1)).is_none());
        let id = results.keep("s", "{}".into()).unwrap();
        lock(&results.inner).by_id.get_mut(&id).unwrap().until = Instant::now();
        assert!(results.read(Some("s"), &format!("{URI_PREFIX}{id}")).unwrap().is_err(), "expired");
    }
}
