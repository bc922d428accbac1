//! Server-sent events, decoded as the HTML Living Standard specifies ("Server-sent
//! events", section 9.2.6 "Interpreting an event stream"), for the MCP HTTP
//! transports (MCP 2025-11-25, Transports, "Streamable HTTP"; MCP 2024-11-05,
//! Transports, "HTTP with SSE").
//!
//! [`SseDecoder`] takes the response body in arbitrary pieces. Each event's data
//! goes through a [`LineDecoder`] as it streams, so an event over the limit is
//! discarded without being held in memory and counted instead; the limit is the
//! server's `maxMessageBytes`. Data lines of one event are joined with a space rather
//! than a newline: an MCP event's data is one JSON-RPC message, in which a line
//! break can only be whitespace, so the message is unchanged.

use crate::framing::{LineDecoder, LineEvent};

/// The longest `event`, `id` or `retry` value kept, in bytes; longer values are ignored.
const FIELD_MAX: usize = 4096;

/// One event out of the decoder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseEvent {
    /// A dispatched event: its type (`message` when the stream named none) and its data.
    Data {
        /// The `event` field, or `message`.
        event: String,
        /// The data lines, joined with a space.
        data: Vec<u8>,
    },
    /// An event whose data passed the limit was discarded.
    Oversize {
        /// Bytes of data discarded.
        bytes: u64,
        /// The top-level JSON-RPC id found in it (raw JSON), if any.
        id: Option<String>,
    },
}

/// Where the decoder is within the current line.
#[derive(Debug)]
enum Line {
    /// Reading the field name (or a comment, or the empty line).
    Name(Vec<u8>),
    /// Reading a `data` value, streamed into the data decoder.
    Data,
    /// Reading the value of another field, kept up to [`FIELD_MAX`].
    Value { field: Field, value: Vec<u8>, too_long: bool },
    /// A comment or an unknown field: skipped to the end of the line.
    Skip,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Event,
    Id,
    Retry,
}

/// An incremental SSE decoder with a limit on each event's data.
#[derive(Debug)]
pub struct SseDecoder {
    max_data: usize,
    data: LineDecoder,
    frames: Vec<LineEvent>,
    line: Line,
    /// A value's single leading space is still to be stripped.
    strip_space: bool,
    /// The last byte was a CR, so an LF right after it ends nothing.
    after_cr: bool,
    /// The stream's first bytes may be a UTF-8 byte order mark, which is skipped.
    at_start: bool,
    /// How many bytes of the byte order mark the stream began with so far, held
    /// until the mark is whole or turns out not to be one (it may be split).
    bom: usize,
    has_data: bool,
    event: String,
    last_event_id_buffer: String,
    last_event_id: String,
    retry: Option<u64>,
}

impl SseDecoder {
    /// A decoder that accepts events of up to `max_data` bytes of data.
    pub fn new(max_data: usize) -> SseDecoder {
        SseDecoder {
            max_data,
            data: LineDecoder::new(max_data),
            frames: Vec::new(),
            line: Line::Name(Vec::new()),
            strip_space: false,
            after_cr: false,
            at_start: true,
            bom: 0,
            has_data: false,
            event: String::new(),
            last_event_id_buffer: String::new(),
            last_event_id: String::new(),
            retry: None,
        }
    }

    /// The id of the last dispatched event (empty: none), to resume the stream from
    /// with `Last-Event-ID`.
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// Bytes held for the event and the line in progress: at most the data limit plus
    /// four times 4 KiB (a field's name, its value, the event type, the id).
    pub fn buffered(&self) -> usize {
        let line = match &self.line {
            Line::Name(name) => name.len(),
            Line::Value { value, .. } => value.len(),
            Line::Data | Line::Skip => 0,
        };
        self.data.buffered() + line + self.event.len() + self.last_event_id_buffer.len()
    }

    /// The reconnection time the stream asked for (`retry`), in milliseconds.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// Feeds the next piece of the body and appends the events it completes.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) {
        const BOM: &[u8] = b"\xEF\xBB\xBF";
        while self.at_start && !chunk.is_empty() {
            if chunk[0] == BOM[self.bom] {
                self.bom += 1;
                chunk = &chunk[1..];
                self.at_start = self.bom < BOM.len();
            } else {
                // Not a byte order mark after all: what was held of it is text.
                self.at_start = false;
                let held = std::mem::take(&mut self.bom);
                self.lines(&BOM[..held], out);
            }
        }
        self.lines(chunk, out);
    }

    /// Feeds bytes after the byte order mark, line by line.
    fn lines(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) {
        while !chunk.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if chunk[0] == b'\n' {
                    chunk = &chunk[1..];
                    continue;
                }
            }
            let end = memchr::memchr2(b'\n', b'\r', chunk);
            let (part, rest) = match end {
                Some(i) => (&chunk[..i], &chunk[i + 1..]),
                None => (chunk, &[][..]),
            };
            self.take(part);
            if let Some(i) = end {
                self.after_cr = chunk[i] == b'\r';
                self.end_line(out);
            }
            chunk = rest;
        }
    }

    /// Ends the body. An event not followed by an empty line is discarded, as the
    /// standard says.
    pub fn finish(&mut self) {
        self.line = Line::Name(Vec::new());
        if self.has_data {
            // Drop the half-received data.
            self.data = LineDecoder::new(self.max_data);
            self.frames.clear();
            self.has_data = false;
        }
        self.event.clear();
    }

    /// Takes bytes within one line.
    fn take(&mut self, mut part: &[u8]) {
        while !part.is_empty() {
            match &mut self.line {
                Line::Name(name) => match memchr::memchr(b':', part) {
                    Some(i) => {
                        name.extend_from_slice(&part[..i]);
                        part = &part[i + 1..];
                        let name = std::mem::take(name);
                        self.start_value(&name);
                    }
                    None => {
                        if name.len() + part.len() <= FIELD_MAX {
                            name.extend_from_slice(part);
                        } else {
                            self.line = Line::Skip;
                        }
                        return;
                    }
                },
                _ => {
                    if self.strip_space {
                        self.strip_space = false;
                        if part[0] == b' ' {
                            part = &part[1..];
                            continue;
                        }
                    }
                    match &mut self.line {
                        Line::Data => self.data.push(part, &mut self.frames),
                        Line::Value { value, too_long, .. } => {
                            if value.len() + part.len() <= FIELD_MAX {
                                value.extend_from_slice(part);
                            } else {
                                *too_long = true;
                            }
                        }
                        _ => {}
                    }
                    return;
                }
            }
        }
    }

    /// A field name ended at its colon (an empty name: a comment line).
    fn start_value(&mut self, name: &[u8]) {
        self.strip_space = true;
        self.line = match name {
            b"data" => {
                self.begin_data_line();
                Line::Data
            }
            b"event" => Line::Value { field: Field::Event, value: Vec::new(), too_long: false },
            b"id" => Line::Value { field: Field::Id, value: Vec::new(), too_long: false },
            b"retry" => Line::Value { field: Field::Retry, value: Vec::new(), too_long: false },
            _ => Line::Skip,
        };
    }

    fn begin_data_line(&mut self) {
        if self.has_data {
            self.data.push(b" ", &mut self.frames);
        }
        self.has_data = true;
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let line = std::mem::replace(&mut self.line, Line::Name(Vec::new()));
        self.strip_space = false;
        match line {
            Line::Name(name) if name.is_empty() => self.dispatch(out),
            // A field name without a colon: the whole line is the name, the value empty.
            Line::Name(name) => match name.as_slice() {
                b"data" => self.begin_data_line(),
                b"event" => self.event.clear(),
                b"id" => self.last_event_id_buffer.clear(),
                _ => {}
            },
            Line::Value { too_long: true, .. } | Line::Data | Line::Skip => {}
            Line::Value { field, value, too_long: false } => {
                let Ok(value) = String::from_utf8(value) else { return };
                match field {
                    Field::Event => self.event = value,
                    Field::Id if !value.contains('\0') => self.last_event_id_buffer = value,
                    Field::Id => {}
                    Field::Retry => {
                        if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
                            self.retry = value.parse().ok();
                        }
                    }
                }
            }
        }
    }

    /// The empty line: dispatches the event gathered so far.
    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        self.last_event_id.clone_from(&self.last_event_id_buffer);
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        self.data.push(b"\n", &mut self.frames);
        for frame in self.frames.drain(..) {
            match frame {
                LineEvent::Line(data) => out.push(SseEvent::Data {
                    event: if event.is_empty() { "message".to_owned() } else { event.clone() },
                    data,
                }),
                LineEvent::OversizeId(_) => {}
                LineEvent::OversizeEnd { bytes, id } => out.push(SseEvent::Oversize { bytes, id }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode(max: usize, pieces: &[&[u8]]) -> (Vec<SseEvent>, SseDecoder) {
        let mut d = SseDecoder::new(max);
        let mut out = Vec::new();
        for p in pieces {
            d.push(p, &mut out);
        }
        (out, d)
    }

    fn data(event: &str, data: &str) -> SseEvent {
        SseEvent::Data { event: event.to_owned(), data: data.as_bytes().to_vec() }
    }

    #[test]
    fn events_ids_types_and_retry() {
        let (out, d) = decode(
            1024,
            &[b"\xEF\xBB\xBF: a comment\nretry: 250\nid: 7\nevent: endpoint\ndata: /messages?s=1\n\ndata:{\"a\":1}\r\n\r\n"],
        );
        assert_eq!(out, vec![data("endpoint", "/messages?s=1"), data("message", "{\"a\":1}")]);
        assert_eq!(d.last_event_id(), "7");
        assert_eq!(d.retry(), Some(250));
    }

    #[test]
    fn a_priming_event_sets_the_id_and_dispatches_nothing() {
        let (out, d) = decode(1024, &[b"id: p-1\ndata:\n\n"]);
        assert_eq!(out, vec![data("message", "")]);
        assert_eq!(d.last_event_id(), "p-1");
        let (out, d) = decode(1024, &[b"id: p-2\n\n"]);
        assert!(out.is_empty());
        assert_eq!(d.last_event_id(), "p-2");
    }

    /// Found by the fuzz properties: a byte order mark split across two reads was
    /// taken as text, so the first event's field name was wrong and it was lost.
    #[test]
    fn a_byte_order_mark_split_across_reads_is_skipped() {
        let stream = b"\xEF\xBB\xBFdata\n\n";
        for cut in 0..=stream.len() {
            let (out, _) = decode(1, &[&stream[..cut], &stream[cut..]]);
            assert_eq!(out, vec![data("message", "")], "cut at {cut}");
        }
        let (out, _) = decode(8, &[b"\xEF", b"\xBBdata: x\n\n"]);
        assert!(out.is_empty(), "half a mark is text: {out:?}");
    }

    #[test]
    fn data_lines_join_with_a_space() {
        let (out, _) = decode(1024, &[b"data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1}\n\n"]);
        assert_eq!(out, vec![data("message", "{\"jsonrpc\":\"2.0\", \"id\":1}")]);
    }

    #[test]
    fn an_oversize_event_is_counted_and_the_next_one_arrives() {
        let big = format!("data: {{\"id\":42,\"result\":\"{}\"}}\n\n", "x".repeat(100));
        let (out, _) = decode(50, &[big.as_bytes(), b"data: {}\n\n"]);
        assert_eq!(out, vec![SseEvent::Oversize { bytes: 121, id: Some("42".into()) }, data("message", "{}")]);
    }

    #[test]
    fn an_unfinished_event_is_dropped_at_the_end() {
        let mut d = SseDecoder::new(1024);
        let mut out = Vec::new();
        d.push(b"data: {\"half\":", &mut out);
        d.finish();
        d.push(b"data: {}\n\n", &mut out);
        assert_eq!(out, vec![data("message", "{}")]);
    }

    proptest! {
        /// Any split of the stream decodes to the same events.
        #[test]
        fn splits_do_not_matter(cuts in proptest::collection::vec(0usize..200, 0..8)) {
            let stream: &[u8] = b"retry: 10\r\nid: a\r\nevent: message\r\ndata: {\"x\":\r\ndata: 1}\r\n\r\n: c\rdata: {}\r\rdata: [1,2]\n\n";
            let (whole, _) = decode(1024, &[stream]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % stream.len()).collect();
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut at = 0;
            for c in cuts {
                pieces.push(&stream[at..c]);
                at = c;
            }
            pieces.push(&stream[at..]);
            let (split, _) = decode(1024, &pieces);
            prop_assert_eq!(split, whole);
        }
    }
}
