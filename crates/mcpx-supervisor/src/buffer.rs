//! The two output buffers of an instance: stdout held for the daemon (bounded; with
//! no daemon attached the oldest whole lines are dropped on overflow so the stream
//! stays line-aligned, with one attached the read is limited to what fits, so nothing
//! is dropped), and the stderr ring (the last 64 KiB).

use std::collections::VecDeque;

/// An empty buffer holding more memory than this gives it back (see [`StdoutBuffer::shed`]):
/// a burst of large messages does not leave each supervisor at its high-water mark.
pub const KEEP_BYTES: usize = 64 * 1024;

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

    /// Frees the memory of an empty buffer holding more than [`KEEP_BYTES`]; returns
    /// whether it did.
    pub fn shed(&mut self) -> bool {
        let shed = self.data.is_empty() && self.data.capacity() > KEEP_BYTES;
        if shed {
            self.data = VecDeque::new();
        }
        shed
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many bytes of the child's stdout to read now (`docs/attach-protocol.md`,
    /// "Unattached output"). With no daemon attached (`room` is `None`): any amount,
    /// since [`StdoutBuffer::push`] drops whole lines on overflow. With one attached,
    /// `room` is how many bytes its connection takes before its high-water mark
    /// (`Peer::stdout_room`): the budget is that plus the buffer's free space, so
    /// that [`StdoutBuffer::append`] followed by `Peer::send_stdout` leaves at most
    /// `capacity` bytes here and drops nothing. 0 means stop reading the child's
    /// stdout: the child blocks on its full pipe (flow control).
    pub fn read_budget(&self, room: Option<usize>) -> usize {
        match room {
            None => usize::MAX,
            Some(room) => self.capacity.saturating_sub(self.data.len()).saturating_add(room),
        }
    }

    /// Appends output, dropping the oldest bytes (up to a line end) past the capacity:
    /// the path while no daemon is attached. Returns how many bytes were dropped by
    /// this push.
    pub fn push(&mut self, bytes: &[u8]) -> u64 {
        let before = self.dropped;
        self.append(bytes);
        if self.data.len() > self.capacity {
            let over = self.data.len() - self.capacity;
            self.data.drain(..over);
            self.dropped += over as u64;
            // Drop the rest of the cut line as well.
            self.resync();
        }
        self.dropped - before
    }

    /// Appends output without bounding it: the path while a daemon is attached, for
    /// at most [`StdoutBuffer::read_budget`] bytes, which the caller then hands to the
    /// connection at once. Only the rest of a line cut while no daemon was attached is
    /// dropped (and counted); returns how many bytes that was.
    pub fn append(&mut self, mut bytes: &[u8]) -> u64 {
        let before = self.dropped;
        if self.skip_to_newline && self.data.is_empty() {
            bytes = self.skip_in(bytes);
        }
        self.data.extend(bytes);
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
        // Copied a slice at a time (the ring has at most two), not a byte at a time.
        let (front, back) = self.data.as_slices();
        let mut taken = Vec::with_capacity(n);
        taken.extend_from_slice(&front[..n.min(front.len())]);
        taken.extend_from_slice(&back[..n - taken.len()]);
        self.data.drain(..n);
        taken
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
    fn a_drained_buffer_past_the_keep_gives_its_memory_back_and_a_small_one_keeps_it() {
        let mut b = StdoutBuffer::new(1 << 20);
        b.push(&vec![b'x'; 100 * 1024]);
        assert!(!b.shed(), "a buffer holding bytes keeps them");
        assert_eq!(b.take(usize::MAX).len(), 100 * 1024);
        assert!(b.shed());
        assert_eq!(b.data.capacity(), 0);
        b.push(b"small\n");
        b.take(usize::MAX);
        assert!(!b.shed(), "under the keep: nothing to give back");
    }

    #[test]
    fn takes_across_the_rings_wrap_keep_the_order() {
        let mut b = StdoutBuffer::new(1 << 20);
        let mut model: Vec<u8> = Vec::new();
        let mut next = 0u8;
        for round in 0..200usize {
            let chunk: Vec<u8> = (0..(round * 7) % 23)
                .map(|_| {
                    next = next.wrapping_add(1);
                    next
                })
                .collect();
            b.append(&chunk);
            model.extend_from_slice(&chunk);
            let max = (round * 5) % 19;
            let n = max.min(model.len());
            assert_eq!(b.take(max), model.drain(..n).collect::<Vec<_>>(), "round {round}");
        }
        assert_eq!(b.take(usize::MAX), model);
    }

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
    fn the_read_budget_is_unbounded_unattached_and_what_fits_attached() {
        let mut b = StdoutBuffer::new(10);
        assert_eq!(b.read_budget(None), usize::MAX);
        assert_eq!(b.read_budget(Some(100)), 110);
        b.push(b"0123\n");
        assert_eq!(b.read_budget(Some(0)), 5, "the buffer's free space alone");
        b.push(b"abcd\n");
        assert_eq!(b.read_budget(Some(0)), 0, "full, and the daemon is behind: stop reading");
        assert_eq!(b.read_budget(Some(usize::MAX)), usize::MAX);
    }

    #[test]
    fn append_never_drops_but_still_skips_the_rest_of_a_cut_line() {
        let mut b = StdoutBuffer::new(4);
        assert_eq!(b.append(b"a line far longer than the buffer\n"), 0);
        assert_eq!(b.len(), 34);
        assert_eq!(b.take(100).len(), 34);
        // A line cut while no daemon was attached: its rest goes even once one is.
        assert_eq!(b.push(b"0123456789"), 10);
        assert_eq!(b.append(b"rest\nnext\n"), 5);
        assert_eq!(b.take(100), b"next\n");
        assert_eq!(b.dropped, 15);
    }

    #[test]
    fn resync_skips_the_rest_of_a_cut_line() {
        let mut b = StdoutBuffer::new(100);
        b.push(b"tail of a line\n{\"next\":1}\n");
        b.resync();
        assert_eq!(b.take(100), b"{\"next\":1}\n");
    }
}
