//! How many lines a server may put in the daemon's log: what it sends on its own
//! (log messages nobody receives, late responses, oversize messages, list changes)
//! is logged within a budget per server (shared by all its instances, so many
//! `call`-scoped instances cannot multiply it), and what goes over it is counted and
//! said.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync::lock;

/// Lines one server may log per [`WINDOW`].
pub(super) const LINES_PER_WINDOW: u32 = 20;

/// The span of the budget: one second.
pub(super) const WINDOW: Duration = Duration::from_secs(1);

/// One server's log budget: 20 lines a second. The pool keeps
/// one per server (by cache key) and hands it to each instance it starts or adopts.
#[derive(Debug)]
pub struct LogBudget {
    window: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    start: Instant,
    used: u32,
    /// Lines left out since the last one logged.
    suppressed: u64,
}

/// Whether a line may be logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admit {
    /// Log it; `suppressed` lines were left out before it (say so first when > 0).
    Log {
        /// Lines left out since the last one logged.
        suppressed: u64,
    },
    /// Leave it out: the budget is spent until the window ends.
    Suppress,
}

impl Default for LogBudget {
    fn default() -> Self {
        LogBudget::new()
    }
}

impl LogBudget {
    /// A full budget, its window starting now.
    pub fn new() -> LogBudget {
        LogBudget { window: Mutex::new(Window { start: Instant::now(), used: 0, suppressed: 0 }) }
    }

    /// Takes one line from the budget at `now`.
    pub(super) fn admit(&self, now: Instant) -> Admit {
        let mut w = lock(&self.window);
        if now.saturating_duration_since(w.start) >= WINDOW {
            w.start = now;
            w.used = 0;
        }
        if w.used >= LINES_PER_WINDOW {
            w.suppressed += 1;
            return Admit::Suppress;
        }
        w.used += 1;
        Admit::Log { suppressed: std::mem::take(&mut w.suppressed) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_cut_to_the_budget_and_the_rest_is_counted() {
        let budget = LogBudget::new();
        let t0 = Instant::now();
        let logged = (0..1000).filter(|_| matches!(budget.admit(t0), Admit::Log { .. })).count();
        assert_eq!(logged, LINES_PER_WINDOW as usize);
        assert_eq!(budget.admit(t0 + WINDOW), Admit::Log { suppressed: 1000 - u64::from(LINES_PER_WINDOW) });
        assert_eq!(budget.admit(t0 + WINDOW), Admit::Log { suppressed: 0 });
    }
}
