//! What the pool is asked for: one server as a request resolved it ([`Target`]), and
//! what a lease waits on before it has its instance ([`Wait`]).

use crate::config::ServerEntry;
use crate::transport::Launch;

/// One server as a request resolved it: its entry, identity and how to start it.
#[derive(Debug, Clone)]
pub struct Target {
    /// The entry from the caller's configuration.
    pub entry: ServerEntry,
    /// The fingerprint as written (no executable identity): the schema cache key.
    pub cache_key: String,
    /// The full fingerprint (with the resolved executable's identity): the instance key.
    pub fingerprint: String,
    /// How to start it, or why it cannot be started (command not found, ...).
    pub launch: Result<Launch, String>,
    /// The authorization context of its private listings (docs/api.md, "The schema
    /// cache"): an HMAC of what the entry expands to; `None` without a context key.
    pub context: Option<String>,
}

/// What a lease ([`crate::daemon::Daemon::lease`]) starts waiting on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// The server is starting: this call starts it, or waits for a start under way.
    Starting,
    /// Every instance the server may run (its `max`, the number) is busy.
    Full(usize),
    /// The server is `exclusive` and its instance is busy with another call.
    Exclusive,
    /// The request is with the server, which has yet to answer (never reported by
    /// the pool: [`crate::daemon::Daemon::ask`] says so).
    Calling,
}
