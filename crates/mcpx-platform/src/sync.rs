//! Locking std mutexes without poisoning.
//!
//! The data behind mcpx's std mutexes stays consistent between statements, so
//! a panic elsewhere leaves nothing half-done: the poison flag carries no information
//! and is ignored.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, taking the guard even when another thread panicked while holding it.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
