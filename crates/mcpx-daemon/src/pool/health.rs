//! Crash accounting for one server fingerprint (design: "Pools"): the first restart
//! is immediate, later ones back off (1 s doubling to 30 s; a start in a backoff fails
//! at once with the last error), and 5 failures within 60 s put the server in
//! `crash-loop` until `mcpx restart` or 60 s without a failure.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::instance::CallError;

/// Failures within this window count toward `crash-loop`, and this long without one
/// clears the count.
const CRASH_WINDOW: Duration = Duration::from_secs(60);
/// Failures within [`CRASH_WINDOW`] that make a `crash-loop`.
const CRASH_LOOP: usize = 5;
/// The longest backoff between restarts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Crash accounting for one fingerprint.
#[derive(Debug, Default)]
pub(super) struct Health {
    /// When recent failures happened.
    recent: VecDeque<Instant>,
    /// Failures since the last 60 s without one.
    consecutive: u32,
    last: Option<CallError>,
    /// 5 failures came within 60 s; stays until 60 s pass without a failure.
    looping: bool,
}

impl Health {
    /// Counts a failure now; returns whether the server is in `crash-loop` after it.
    pub(super) fn record(&mut self, error: CallError) -> bool {
        let now = Instant::now();
        self.forget_old(now);
        self.recent.push_back(now);
        self.consecutive += 1;
        self.last = Some(error);
        if self.recent.len() >= CRASH_LOOP {
            self.looping = true;
        }
        self.looping
    }

    /// The failures within the window.
    pub(super) fn failures(&self) -> usize {
        self.recent.len()
    }

    /// Whether the server is in `crash-loop` now.
    pub(super) fn in_crash_loop(&mut self) -> bool {
        self.forget_old(Instant::now());
        self.looping
    }

    /// Fails fast while the server is in `crash-loop` or a restart backoff.
    ///
    /// Errors: [`CallError::Launch`] with the last failure and what to do (`server`
    /// names the server for `mcpx restart`).
    pub(super) fn check(&mut self, server: &str) -> Result<(), CallError> {
        let now = Instant::now();
        self.forget_old(now);
        let last = self.last.clone().map(|e| e.to_string()).unwrap_or_default();
        if self.looping {
            return Err(CallError::Launch(format!(
                "crash-loop: {} failures within {}s, the last: {last}; fix the server, then `mcpx restart {server}`",
                self.recent.len(),
                CRASH_WINDOW.as_secs()
            )));
        }
        if let Some(at) = self.recent.back() {
            let wait = self.backoff().saturating_sub(now.duration_since(*at));
            if !wait.is_zero() {
                return Err(CallError::Launch(format!(
                    "backing off after {} failures; next start in {:.1}s; the last: {last}",
                    self.consecutive,
                    wait.as_secs_f64()
                )));
            }
        }
        Ok(())
    }

    fn forget_old(&mut self, now: Instant) {
        // 60 s without a failure clears everything, the crash-loop included.
        if self.recent.back().is_some_and(|t| now.duration_since(*t) > CRASH_WINDOW) {
            self.recent.clear();
            self.consecutive = 0;
            self.looping = false;
        }
        while self.recent.front().is_some_and(|t| now.duration_since(*t) > CRASH_WINDOW) {
            self.recent.pop_front();
        }
    }

    /// How long after the last failure the next start may happen: none after the
    /// first failure, then 1 s doubling to 30 s.
    fn backoff(&self) -> Duration {
        match self.consecutive {
            0 | 1 => Duration::ZERO,
            n => (Duration::from_secs(1) * 2u32.saturating_pow(n - 2)).min(MAX_BACKOFF),
        }
    }
}

/// A server's crashes ([`super::Pool::crashes`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Crashes {
    /// Crashes and failed starts.
    pub crashes: u64,
    /// Times it went into `crash-loop`.
    pub crash_loops: u64,
    /// Starts of an instance in place of an earlier one of the same pool key that ended
    /// (not one `mcpx stop` or `mcpx restart` stopped: those leave the slot empty).
    pub restarts: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_second_failure_and_caps() {
        let mut h = Health::default();
        let waits: Vec<u64> = (1..=8)
            .map(|n| {
                h.consecutive = n;
                h.backoff().as_secs()
            })
            .collect();
        assert_eq!(waits, [0, 1, 2, 4, 8, 16, 30, 30]);
    }
}
