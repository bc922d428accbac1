//! The two output buffers of an instance: stdout held for the daemon (bounded, the
//! oldest whole lines dropped on overflow so the stream stays line-aligned), and
//! the stderr ring (the last 64 KiB).

use std::collections::VecDeque;

/// Stdout bytes not yet handed to a daemon.
#[derive(Debug)]
pub struct StdoutBuffer {
    data: VecDeque<u8>,
    capacity: usize,
    /// Bytes dropped on overflow since the start (reported on attach and in status).
    pub dropped: u64,
    /// After a drop, the head of the buffer is cut mid-line: the rest of that line
    /// is dropped too, so a daemon always receives whole lines.
    skip_to_newline: bool,
}

impl StdoutBuffer {
    /// A buffer holding at most `capacity` bytes (`bufferBytes`).
    pub fn new(capacity: usize) -> StdoutBuffer {
        StdoutBuffer { data: VecDeque::new(), capacity: capacity.max(1), dropped: 0, skip_to_newline: false }
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Appends output, dropping the oldest bytes (up to a line end) past the capacity.
    /// Returns how many bytes were dropped by this push.
    pub fn push(&mut self, mut bytes: &[u8]) -> u64 {
        let before = self.dropped;
        if self.skip_to_newline && self.data.is_empty() {
            bytes = self.skip_in(bytes);
        }
        self.data.extend(bytes);
        if self.data.len() > self.capacity {
            let over = self.data.len() - self.capacity;
            self.data.drain(..over);
            self.dropped += over as u64;
            // Drop the rest of the cut line as well.
            self.resync();
        }
        self.dropped - before
    }

    fn skip_in<'a>(&mut self, bytes: &'a [u8]) -> &'a [u8] {
        match bytes.iter().position(|b| *b == b'\n') {
            Some(i) => {
                self.skip_to_newline = false;
                self.dropped += i as u64 + 1;
                &bytes[i + 1..]
            }
            None => {
                self.dropped += bytes.len() as u64;
                &[]
            }
        }
    }

    /// Drops the head of the buffer up to and including the next newline: after a
    /// cut (an overflow, or a daemon that detached after a partial line) the rest of
    /// that line is never handed on. Without a newline yet, it is skipped as it comes.
    pub fn resync(&mut self) {
        match self.data.iter().position(|b| *b == b'\n') {
            Some(i) => {
                self.data.drain(..=i);
                self.dropped += i as u64 + 1;
            }
            None => {
                self.dropped += self.data.len() as u64;
                self.data.clear();
                self.skip_to_newline = true;
            }
        }
    }

    /// Takes up to `max` bytes from the front.
    pub fn take(&mut self, max: usize) -> Vec<u8> {
        let n = max.min(self.data.len());
        self.data.drain(..n).collect()
    }
}

/// The last `capacity` bytes of stderr.
#[derive(Debug)]
pub struct StderrRing {
    data: VecDeque<u8>,
    capacity: usize,
    /// Bytes that fell out of the ring.
    pub dropped: u64,
}

impl StderrRing {
    /// The stderr ring size (64 KiB).
    pub const CAPACITY: usize = 64 * 1024;

    /// An empty ring.
    pub fn new() -> StderrRing {
        StderrRing { data: VecDeque::new(), capacity: Self::CAPACITY, dropped: 0 }
    }

    /// Appends bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.data.extend(bytes);
        if self.data.len() > self.capacity {
            let over = self.data.len() - self.capacity;
            self.data.drain(..over);
            self.dropped += over as u64;
        }
    }

    /// Everything held.
    pub fn contents(&self) -> Vec<u8> {
        self.data.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_drops_whole_lines_and_counts_them() {
        let mut b = StdoutBuffer::new(10);
        assert_eq!(b.push(b"aaaa\nbbbb\n"), 0);
        assert_eq!(b.push(b"cc\n"), 5);
        assert_eq!(b.take(100), b"bbbb\ncc\n");
        // One line longer than the buffer: all of it goes, and the tail of it too.
        assert_eq!(b.push(b"0123456789abc"), 13);
        assert_eq!(b.push(b"def\nok\n"), 4);
        assert_eq!(b.take(100), b"ok\n");
        assert_eq!(b.dropped, 22);
    }

    #[test]
    fn resync_skips_the_rest_of_a_cut_line() {
        let mut b = StdoutBuffer::new(100);
        b.push(b"tail of a line\n{\"next\":1}\n");
        b.resync();
        assert_eq!(b.take(100), b"{\"next\":1}\n");
    }
}
