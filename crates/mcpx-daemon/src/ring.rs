//! A byte ring that keeps the tail of a stream: the last `capacity` bytes, and a
//! count of what fell off the front.

use std::collections::VecDeque;

/// Keeps the most recent `capacity` bytes written to it.
#[derive(Debug, Clone)]
pub struct Ring {
    buf: VecDeque<u8>,
    capacity: usize,
    dropped: u64,
}

impl Ring {
    /// The stderr ring of every instance holds this many bytes (64 KiB).
    pub const STDERR_CAPACITY: usize = 64 * 1024;

    /// An empty ring of `capacity` bytes.
    pub fn new(capacity: usize) -> Ring {
        Ring { buf: VecDeque::with_capacity(capacity.min(4096)), capacity, dropped: 0 }
    }

    /// Appends bytes, dropping the oldest ones past the capacity.
    pub fn push(&mut self, mut bytes: &[u8]) {
        if bytes.len() > self.capacity {
            let skip = bytes.len() - self.capacity;
            self.dropped += skip as u64;
            bytes = &bytes[skip..];
        }
        let over = (self.buf.len() + bytes.len()).saturating_sub(self.capacity);
        self.buf.drain(..over);
        self.dropped += over as u64;
        self.buf.extend(bytes);
    }

    /// Bytes that fell off the front since the ring was made.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The last `max` bytes as text (invalid UTF-8 replaced), starting at a line
    /// boundary when one is near so the tail does not open mid-line.
    pub fn tail(&self, max: usize) -> String {
        let start = self.buf.len().saturating_sub(max);
        let bytes: Vec<u8> = self.buf.range(start..).copied().collect();
        // Open at a line start when a whole line follows; a tail that is one long
        // line is shown as it is rather than as nothing.
        let from = match bytes.iter().position(|b| *b == b'\n') {
            Some(i) if start > 0 && i + 1 < bytes.len() => i + 1,
            _ => 0,
        };
        String::from_utf8_lossy(&bytes[from..]).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_tail_and_counts_the_rest() {
        let mut r = Ring::new(8);
        r.push(b"abc\n");
        r.push(b"defgh\nij");
        assert_eq!(r.dropped(), 4);
        assert_eq!(r.tail(100), "defgh\nij");
        assert_eq!(r.tail(4), "ij");
        r.push(&[b'x'; 20]);
        assert_eq!(r.dropped(), 24);
        assert_eq!(r.tail(8), "xxxxxxxx");
        r.push(b"yyyyyyy\n");
        assert_eq!(r.tail(4), "yyy\n", "one long line is shown, not skipped");
    }
}
