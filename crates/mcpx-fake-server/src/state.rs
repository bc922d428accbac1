//! Shared synchronisation helpers: an in-flight gauge with a condition
//! variable, and the routing table for server-to-client requests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

/// Counts how many operations are in flight right now, and the most ever
/// seen at once. Waiters are woken whenever the count changes.
#[derive(Default)]
pub struct Gauge {
    /// `(current, max, peak)`: `peak` is the most in flight since the count was last
    /// zero, so a barrier stays reached for every waiter once it was reached.
    counts: Mutex<(usize, usize, usize)>,
    /// Signalled on every change of `current`.
    changed: Condvar,
}

impl Gauge {
    /// Marks one operation as started; it ends when the guard is dropped.
    pub fn enter(&self) -> GaugeGuard<'_> {
        self.increment();
        GaugeGuard { gauge: self }
    }

    /// Counts one more operation in flight. Prefer [`Gauge::enter`]; pair
    /// every call with exactly one [`Gauge::decrement`].
    pub fn increment(&self) {
        let mut counts = self.lock();
        counts.0 += 1;
        counts.1 = counts.1.max(counts.0);
        counts.2 = counts.2.max(counts.0);
        drop(counts);
        self.changed.notify_all();
    }

    /// Counts one operation fewer in flight.
    pub fn decrement(&self) {
        let mut counts = self.lock();
        counts.0 = counts.0.saturating_sub(1);
        if counts.0 == 0 {
            counts.2 = 0;
        }
        drop(counts);
        self.changed.notify_all();
    }

    /// The maximum number of operations ever in flight at once.
    pub fn max(&self) -> usize {
        self.lock().1
    }

    /// Blocks until `done(current)` holds or `timeout` passes.
    /// Returns the final `current` and whether the condition was met.
    pub fn wait_until(&self, timeout: Duration, done: impl Fn(usize) -> bool) -> (usize, bool) {
        let counts = self.lock();
        let (counts, result) = self
            .changed
            .wait_timeout_while(counts, timeout, |counts| !done(counts.0))
            .unwrap_or_else(|p| p.into_inner());
        (counts.0, !result.timed_out() || done(counts.0))
    }

    /// Blocks until `n` operations have been in flight at once while this caller
    /// (itself counted) waited, or `timeout` passes. Returns the count in flight now
    /// and whether the peak reached `n`.
    pub fn wait_for_peak(&self, timeout: Duration, n: usize) -> (usize, bool) {
        let counts = self.lock();
        let (counts, _) =
            self.changed.wait_timeout_while(counts, timeout, |counts| counts.2 < n).unwrap_or_else(|p| p.into_inner());
        (counts.0, counts.2 >= n)
    }

    fn lock(&self) -> MutexGuard<'_, (usize, usize, usize)> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Keeps one operation counted in a [`Gauge`] until dropped.
pub struct GaugeGuard<'a> {
    gauge: &'a Gauge,
}

impl Drop for GaugeGuard<'_> {
    fn drop(&mut self) {
        self.gauge.decrement();
    }
}

/// Routes client responses to the threads waiting for them, for the
/// requests the server sends to the client (`roots/list`,
/// `sampling/createMessage`).
#[derive(Default)]
pub struct Pending {
    /// Source of ids `srv-1`, `srv-2`, ...
    next_id: AtomicU64,
    /// Waiting threads, by request id.
    waiters: Mutex<HashMap<String, Sender<Value>>>,
}

impl Pending {
    /// Allocates a fresh request id and registers a waiter for it.
    /// Register *before* sending the request so a fast answer is not lost.
    pub fn register(&self) -> (String, Receiver<Value>) {
        let id = format!("srv-{}", self.next_id.fetch_add(1, Ordering::Relaxed) + 1);
        let (tx, rx) = mpsc::channel();
        self.lock().insert(id.clone(), tx);
        (id, rx)
    }

    /// Forgets a waiter (after a timeout).
    pub fn cancel(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Hands a response message to whoever waits for `id`. Returns false if
    /// nobody does (unknown or late response), which the caller may log.
    pub fn deliver(&self, id: &Value, message: Value) -> bool {
        let Some(id) = id.as_str() else { return false };
        match self.lock().remove(id) {
            Some(tx) => tx.send(message).is_ok(),
            None => false,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Sender<Value>>> {
        self.waiters.lock().unwrap_or_else(|p| p.into_inner())
    }
}
