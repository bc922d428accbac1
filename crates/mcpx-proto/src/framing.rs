//! Newline-delimited JSON-RPC framing, as the MCP stdio transport specifies
//! (MCP 2025-11-25, Transports, "stdio": messages are delimited by newlines and
//! must not contain embedded newlines).
//!
//! [`LineDecoder`] turns an arbitrarily split byte stream into lines, with a hard
//! limit per line: a line over the limit is discarded as it streams (never held in
//! memory), its top-level `id` is found on the way, and decoding resynchronises at
//! the next newline.

use crate::scan::IdScanner;

/// One event out of the decoder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineEvent {
    /// A complete line of at most the limit, without its `\n` (a trailing `\r` is
    /// kept; JSON parsing ignores it as whitespace).
    Line(Vec<u8>),
    /// The line being discarded has this top-level `id` (its raw JSON text). Sent at
    /// most once per oversize line, as soon as the id has streamed past, so the
    /// request it answers can be failed before the rest arrives.
    OversizeId(String),
    /// An oversize line ended. `bytes` counts every byte of it (without the `\n`);
    /// `id` repeats what [`LineEvent::OversizeId`] reported, if anything.
    OversizeEnd {
        /// Length of the discarded line in bytes.
        bytes: u64,
        /// The top-level id found in it, if any.
        id: Option<String>,
    },
}

/// Splits a byte stream into lines of at most `max_line` bytes.
#[derive(Debug)]
pub struct LineDecoder {
    max_line: usize,
    buf: Vec<u8>,
    discard: Option<Discard>,
}

#[derive(Debug)]
struct Discard {
    scanner: IdScanner,
    bytes: u64,
    reported: bool,
}

impl LineDecoder {
    /// A decoder that accepts lines of up to `max_line` bytes (the newline excluded).
    pub fn new(max_line: usize) -> Self {
        LineDecoder { max_line, buf: Vec::new(), discard: None }
    }

    /// Bytes held for an incomplete line.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Feeds the next piece of the stream and appends the frames it completes.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<LineEvent>) {
        while !chunk.is_empty() {
            let newline = memchr::memchr(b'\n', chunk);
            let (part, rest) = match newline {
                Some(i) => (&chunk[..i], &chunk[i + 1..]),
                None => (chunk, &[][..]),
            };
            if self.discard.is_none() && self.buf.len() + part.len() > self.max_line {
                let mut scanner = IdScanner::new();
                scanner.feed(&self.buf);
                let bytes = self.buf.len() as u64;
                self.buf = Vec::new();
                self.discard = Some(Discard { scanner, bytes, reported: false });
            }
            match self.discard.as_mut() {
                Some(d) => {
                    d.scanner.feed(part);
                    d.bytes += part.len() as u64;
                    if !d.reported {
                        if let Some(id) = d.scanner.id() {
                            d.reported = true;
                            out.push(LineEvent::OversizeId(id.to_owned()));
                        }
                    }
                    if newline.is_some() {
                        let id = d.scanner.id().map(str::to_owned);
                        out.push(LineEvent::OversizeEnd { bytes: d.bytes, id });
                        self.discard = None;
                    }
                }
                None => {
                    self.buf.extend_from_slice(part);
                    if newline.is_some() {
                        out.push(LineEvent::Line(std::mem::take(&mut self.buf)));
                    }
                }
            }
            chunk = rest;
        }
    }

    /// Ends the stream: an unterminated last line is returned as if it had ended
    /// with a newline (a server that exits may not write the final `\n`).
    pub fn finish(&mut self, out: &mut Vec<LineEvent>) {
        if !self.buf.is_empty() || self.discard.is_some() {
            self.push(b"\n", out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode(max: usize, pieces: &[&[u8]]) -> Vec<LineEvent> {
        let mut d = LineDecoder::new(max);
        let mut out = Vec::new();
        for p in pieces {
            d.push(p, &mut out);
        }
        d.finish(&mut out);
        out
    }

    #[test]
    fn lines_at_and_over_the_limit() {
        let out = decode(4, &[b"abcd\nabcde\nxy\n"]);
        assert_eq!(
            out,
            vec![
                LineEvent::Line(b"abcd".to_vec()),
                LineEvent::OversizeEnd { bytes: 5, id: None },
                LineEvent::Line(b"xy".to_vec()),
            ]
        );
    }

    #[test]
    fn oversize_reports_its_id_before_it_ends() {
        let mut d = LineDecoder::new(16);
        let mut out = Vec::new();
        d.push(br#"{"jsonrpc":"2.0","id":99,"result":{"text":"#, &mut out);
        assert_eq!(out, vec![LineEvent::OversizeId("99".into())]);
        d.push(b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}\n{}\n", &mut out);
        assert_eq!(out.len(), 3);
        assert!(matches!(&out[1], LineEvent::OversizeEnd { id: Some(id), .. } if id == "99"));
        assert_eq!(out[2], LineEvent::Line(b"{}".to_vec()));
    }

    #[test]
    fn unterminated_last_line_is_kept() {
        assert_eq!(decode(10, &[b"{}\n{\"a\":1}"]).last(), Some(&LineEvent::Line(b"{\"a\":1}".to_vec())));
    }

    proptest! {
        /// Any split of the stream decodes to the same frames as the whole stream.
        #[test]
        fn any_split_decodes_the_same(
            lines in proptest::collection::vec("[a-z{}\":,0-9 ]{0,40}", 0..8),
            cuts in proptest::collection::vec(0usize..400, 0..12),
            max in 1usize..48,
        ) {
            let stream: Vec<u8> = lines.iter().flat_map(|l| l.bytes().chain(Some(b'\n'))).collect();
            let whole = decode(max, &[&stream]);
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (stream.len() + 1)).collect();
            points.sort_unstable();
            let mut pieces = Vec::new();
            let mut start = 0;
            for p in points {
                pieces.push(&stream[start..p]);
                start = p;
            }
            pieces.push(&stream[start..]);
            let split = decode(max, &pieces);
            let expected_ok = lines.iter().filter(|l| l.len() <= max).count();
            prop_assert_eq!(whole.iter().filter(|f| matches!(f, LineEvent::Line(_))).count(), expected_ok);
            // OversizeId may be reported earlier or later within its line, never differently.
            let strip = |v: &[LineEvent]| v.iter().filter(|f| !matches!(f, LineEvent::OversizeId(_))).cloned().collect::<Vec<_>>();
            prop_assert_eq!(strip(&whole), strip(&split));
        }
    }
}
