//! Property tests with arbitrary bytes for every decoder here that reads another
//! process's output: the line framer, the SSE decoder, attach frames and the
//! preamble, the supervisor's record and hello, the id scanner and the JSON-RPC
//! message spans. Each asserts that nothing panics, that what a decoder holds stays
//! under its documented limit plus one input chunk, and that input split anywhere
//! decodes as it does whole.
//!
//! Each property runs [`CI_CASES`] cases, a few seconds at most in CI; set
//! `PROPTEST_CASES` (100000, say) to run them long.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::attach::{self, Frame, FrameDecoder, HEADER_LEN, Hello, Kind, LaunchRequest, MAX_FRAME, Record, Version};
use crate::framing::{LineDecoder, LineEvent};
use crate::jsonrpc::{Message, MessageKind, UpstreamId};
use crate::scan::{IdScanner, MAX_ID_LEN};
use crate::sse::{SseDecoder, SseEvent};

/// Cases per property unless `PROPTEST_CASES` says otherwise.
const CI_CASES: u32 = 1024;

/// proptest's configuration with [`CI_CASES`] cases, or `PROPTEST_CASES`'s.
fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = CI_CASES;
    }
    // A failure prints its minimal input; it becomes a unit test beside the decoder.
    config.failure_persistence = None;
    config
}

/// `stream` cut at `cuts` (each taken modulo the length, so any list of numbers is a
/// split), in order.
fn pieces<'a>(stream: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    points.sort_unstable();
    let mut out = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for p in points {
        out.push(&stream[start..p]);
        start = p;
    }
    out.push(&stream[start..]);
    out
}

/// Byte strings made of the pieces a decoder cares about (`tokens`) and arbitrary
/// bytes between them, so the cases reach past the first check.
fn mixed(tokens: &'static [&'static [u8]], len: usize) -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        3 => proptest::sample::select(tokens).prop_map(<[u8]>::to_vec),
        1 => proptest::collection::vec(any::<u8>(), 0..8),
    ];
    proptest::collection::vec(token, 0..len).prop_map(|parts| parts.concat())
}

/// Arbitrary cut points for [`pieces`].
fn cuts() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(any::<usize>(), 0..16)
}

const LINE_TOKENS: &[&[u8]] = &[
    b"\n",
    b"\r\n",
    b"{\"jsonrpc\":\"2.0\",",
    b"\"id\":",
    b"\"id\":\"a\\\"b\"",
    b"17",
    b"}",
    b"{",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"\\",
    b"\"result\":{\"text\":\"xxxxxxxxxxxxxxxx\"}",
];

/// Decodes `pieces` with a line limit of `max`: its events (without the early
/// `OversizeId` reports, whose place depends on the split) and the most it buffered.
fn lines(max: usize, pieces: &[&[u8]]) -> (Vec<LineEvent>, usize) {
    let mut d = LineDecoder::new(max);
    let mut out = Vec::new();
    let mut most = 0;
    for p in pieces {
        d.push(p, &mut out);
        most = most.max(d.buffered());
    }
    d.finish(&mut out);
    out.retain(|e| !matches!(e, LineEvent::OversizeId(_)));
    (out, most)
}

proptest! {
    #![proptest_config(config())]

    /// The line framer: any split of any bytes gives the same lines; no line and no
    /// buffer passes the limit; every byte is accounted for, in a line or an
    /// oversize count.
    #[test]
    fn line_framer(stream in mixed(LINE_TOKENS, 40), cuts in cuts(), max in 1usize..96) {
        let (whole, _) = lines(max, &[&stream]);
        let (split, most) = lines(max, &pieces(&stream, &cuts));
        prop_assert_eq!(&whole, &split);
        prop_assert!(most <= max, "buffered {} over the limit {}", most, max);
        let mut counted = 0u64;
        for event in &whole {
            match event {
                LineEvent::Line(line) => {
                    prop_assert!(line.len() <= max && !line.contains(&b'\n'));
                    counted += line.len() as u64 + 1;
                }
                LineEvent::OversizeEnd { bytes, id } => {
                    prop_assert!(*bytes > max as u64);
                    prop_assert!(id.as_ref().is_none_or(|id| id.len() <= MAX_ID_LEN));
                    counted += bytes + 1;
                }
                LineEvent::OversizeId(_) => {}
            }
        }
        let unterminated = u64::from(stream.last().is_some_and(|b| *b != b'\n'));
        prop_assert_eq!(counted, stream.len() as u64 + unterminated);
    }
}

const SSE_TOKENS: &[&[u8]] = &[
    b"data:",
    b"data: ",
    b"data",
    b"event: message",
    b"event:",
    b"id: 7",
    b"id",
    b"retry: 1500",
    b"retry:x",
    b": comment",
    b":",
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b" ",
    b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
    b"\xEF\xBB\xBF",
    b"\0",
];

/// What decoding `pieces` with a data limit of `max` gives: the events, the last
/// event id and retry at the end, and the most it buffered after any push.
fn sse(max: usize, pieces: &[&[u8]]) -> (Vec<SseEvent>, String, Option<u64>, usize) {
    let mut d = SseDecoder::new(max);
    let mut out = Vec::new();
    let mut most = 0;
    for p in pieces {
        d.push(p, &mut out);
        most = most.max(d.buffered());
    }
    d.finish();
    (out, d.last_event_id().to_owned(), d.retry(), most)
}

proptest! {
    #![proptest_config(config())]

    /// The SSE decoder: any split of any bytes gives the same events, id and retry;
    /// no event's data passes the limit, and it holds at most the limit and four
    /// field values.
    #[test]
    fn sse_decoder(stream in mixed(SSE_TOKENS, 40), cuts in cuts(), max in 1usize..96) {
        let (whole, id, retry, _) = sse(max, &[&stream]);
        let (split, split_id, split_retry, most) = sse(max, &pieces(&stream, &cuts));
        prop_assert_eq!(&whole, &split);
        prop_assert_eq!((id, retry), (split_id, split_retry));
        prop_assert!(most <= max + 4 * 4096, "buffered {}", most);
        for event in &whole {
            if let SseEvent::Data { data, .. } = event {
                prop_assert!(data.len() <= max);
            }
        }
    }

    /// The attach preamble: any 12 bytes decode or fail cleanly; every version
    /// round-trips.
    #[test]
    fn attach_preamble(bytes in any::<[u8; 12]>(), major in any::<u16>(), minor in any::<u16>()) {
        let _ = attach::decode_preamble(&bytes);
        let version = Version { major, minor };
        prop_assert_eq!(attach::decode_preamble(&attach::encode_preamble(version)).ok(), Some(version));
    }
}

/// What [`frames`] decoded: each frame's kind byte and payload, the error that ended
/// the stream, and how far the decoder held more than its bound.
type Decoded = (Vec<(u8, Vec<u8>)>, Option<String>, usize);

/// Every frame of `pieces`, taking them out after each push as a connection does,
/// and the error that ended the stream, if any; with the most the decoder held
/// beyond its bound (0 when within it).
fn frames(pieces: &[&[u8]]) -> Decoded {
    let bound = 64 * 1024 + 2 * (HEADER_LEN + MAX_FRAME);
    let mut d = FrameDecoder::new();
    let (mut out, mut over) = (Vec::new(), 0);
    for p in pieces {
        d.push(p);
        over = over.max(d.buffered().saturating_sub(bound + p.len()));
        loop {
            match d.next_frame() {
                Ok(Some(frame)) => out.push((frame.kind as u8, frame.payload)),
                Ok(None) => break,
                Err(e) => return (out, Some(e.to_string()), over),
            }
        }
    }
    (out, None, over)
}

/// A stream of frames of any kind byte (unknown ones are skipped) with short
/// payloads, then possibly arbitrary bytes (a header announcing anything).
fn frame_stream() -> impl Strategy<Value = Vec<u8>> {
    let frame = (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..48));
    (proptest::collection::vec(frame, 0..24), proptest::collection::vec(any::<u8>(), 0..16)).prop_map(
        |(frames, tail)| {
            let mut out = Vec::new();
            for (kind, payload) in frames {
                out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
                out.push(kind);
                out.extend_from_slice(&payload);
            }
            out.extend_from_slice(&tail);
            out
        },
    )
}

proptest! {
    #![proptest_config(config())]

    /// Attach frames: any split gives the same frames and the same error; the
    /// decoder never holds more than its bound plus the last push; a frame of a
    /// known kind comes out as it was encoded.
    #[test]
    fn attach_frames(stream in frame_stream(), cuts in cuts()) {
        let whole = frames(&[&stream]);
        let split = frames(&pieces(&stream, &cuts));
        prop_assert_eq!(&whole, &split);
        prop_assert_eq!(split.2, 0);
        for (kind, payload) in &whole.0 {
            let mut encoded = Vec::new();
            let known = Kind::from_u8(*kind);
            prop_assert!(known.is_some());
            if let Some(kind) = known {
                Frame::new(kind, payload.clone()).encode(&mut encoded).unwrap();
                prop_assert_eq!(&encoded[HEADER_LEN..], payload.as_slice());
            }
        }
    }
}

/// Bytes that read as JSON some of the time: a fixture with bytes changed, cut or
/// spliced in.
fn mangled(fixture: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let edit = (any::<usize>(), any::<u8>(), 0u8..3);
    proptest::collection::vec(edit, 0..6).prop_map(move |edits| {
        let mut bytes = fixture.as_bytes().to_vec();
        for (at, byte, how) in edits {
            let at = at % (bytes.len() + 1);
            match how {
                0 if at < bytes.len() => bytes[at] = byte,
                1 if at < bytes.len() => {
                    bytes.remove(at);
                }
                _ => bytes.insert(at, byte),
            }
        }
        bytes
    })
}

const RECORD: &str = include_str!("../tests/fixtures/record-v1.json");
const HELLO: &str = include_str!("../tests/fixtures/hello-v1.json");
const LAUNCH: &str = include_str!("../tests/fixtures/launch-request-v1.json");

proptest! {
    #![proptest_config(config())]

    /// The supervisor's record (`sup/<id>.json`, read by every daemon that starts),
    /// its hello and the launch request: any bytes decode or fail cleanly, through
    /// `serde_json` as the daemon reads the file and through [`Frame::body`] as it
    /// reads a frame; a record that decodes encodes to one that decodes the same.
    #[test]
    fn supervisor_record(record in mangled(RECORD), hello in mangled(HELLO), launch in mangled(LAUNCH), noise in proptest::collection::vec(any::<u8>(), 0..64)) {
        for bytes in [&record, &noise] {
            if let Ok(decoded) = serde_json::from_slice::<Record>(bytes) {
                let again: Record = serde_json::from_slice(&serde_json::to_vec(&decoded).unwrap()).unwrap();
                prop_assert_eq!(again, decoded);
            }
            let _ = Frame::new(Kind::Hello, bytes.clone()).body::<Hello>("hello");
        }
        let _ = Frame::new(Kind::Hello, hello).body::<Hello>("hello");
        let _ = serde_json::from_slice::<LaunchRequest>(&launch);
    }
}

/// The id scanner over `pieces`: what it found, and the most it held.
fn scan(pieces: &[&[u8]]) -> (Option<String>, usize) {
    let mut s = IdScanner::new();
    let mut most = 0;
    for p in pieces {
        s.feed(p);
        most = most.max(s.held());
    }
    (s.id().map(str::to_owned), most)
}

/// JSON values small enough to vary in every way: ids, params, nested results.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(".{0,6}", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A request id MCP allows: a string or an integer.
fn request_id() -> impl Strategy<Value = Value> {
    prop_oneof![any::<i64>().prop_map(Value::from), ".{0,16}".prop_map(Value::String)]
}

proptest! {
    #![proptest_config(config())]

    /// The id scanner: any bytes split anywhere find the same id, never holding more
    /// than an id's limit and a short name; in a real message it finds the id the
    /// JSON parser finds.
    #[test]
    fn id_scanner(stream in mixed(LINE_TOKENS, 40), cuts in cuts(), id in request_id(), result in json_value()) {
        let (whole, _) = scan(&[&stream]);
        let (split, most) = scan(&pieces(&stream, &cuts));
        prop_assert_eq!(&whole, &split);
        prop_assert!(most <= MAX_ID_LEN + 8, "held {}", most);
        prop_assert!(whole.is_none_or(|id| id.len() <= MAX_ID_LEN));
        let message = json!({ "jsonrpc": "2.0", "result": result, "id": id }).to_string();
        let expected = id.to_string();
        let (found, _) = scan(&pieces(message.as_bytes(), &cuts));
        prop_assert_eq!(found, (expected.len() < MAX_ID_LEN).then_some(expected));
    }

    /// JSON-RPC messages: any bytes parse or fail cleanly; the spans of a parsed
    /// message (id, progress tokens) are its own text, and replacing them keeps the
    /// message parseable with the new values in place.
    #[test]
    fn jsonrpc_spans(noise in mixed(LINE_TOKENS, 30), id in request_id(), params in json_value(), token in request_id(), method in ".{0,12}") {
        for line in [noise.as_slice()] {
            if let Ok(messages) = Message::parse_line(line) {
                for m in messages {
                    let _ = (m.id(), m.method(), m.progress_token(), m.notified_progress_token(), m.kind());
                    let replaced = m.with_id("4242").with_progress_token("\"t\"");
                    prop_assert!(Message::parse(replaced.into_string()).is_ok());
                }
            }
            let _ = UpstreamId::from_json(&String::from_utf8_lossy(line));
        }
        let mut params = params;
        if let Value::Object(p) = &mut params {
            p.insert("_meta".into(), json!({ "progressToken": token }));
        }
        let request = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string();
        let m = Message::parse(request.as_str()).unwrap();
        prop_assert_eq!(m.kind(), MessageKind::Request);
        prop_assert_eq!(m.id().map(|i| serde_json::from_str::<Value>(i).unwrap()), Some(id));
        let has_token = params.is_object();
        prop_assert_eq!(m.progress_token().is_some(), has_token);
        let replaced = m.with_id("\"new\"").with_progress_token("99");
        let back: Value = serde_json::from_str(replaced.as_str()).unwrap();
        prop_assert_eq!(&back["id"], &json!("new"));
        prop_assert_eq!(&back["method"], &json!(method));
        if has_token {
            prop_assert_eq!(&back["params"]["_meta"]["progressToken"], &json!(99));
        }
    }

    /// Upstream ids: every valid one round-trips through its JSON text.
    #[test]
    fn upstream_ids(epoch in 1..=UpstreamId::MAX_EPOCH, seq in 1u32..) {
        let id = UpstreamId { epoch, seq };
        prop_assert_eq!(UpstreamId::from_json(&id.to_json()), Some(id));
    }
}
