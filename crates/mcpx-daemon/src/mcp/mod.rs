//! The aggregated MCP endpoint: streamable HTTP at `/mcp` on the control socket
//! (MCP 2025-11-25, Transports, "Streamable HTTP"), presenting every configured
//! server as one MCP server, and `/mcp/<server>` passing one server through.
//!
//! - `initialize` creates a session (`Mcp-Session-Id`); later requests without the
//!   header get 400, with an unknown one 404; `DELETE` ends a session. A request of
//!   MCP 2026-07-28 needs none ([`era`], `modern`): it is answered on a session of its
//!   own, after its routing headers are checked; `server/discover` is answered in
//!   both eras.
//! - The client's revision is echoed when supported, else the newest is answered;
//!   JSON-RPC batches are processed only under 2025-03-26, else refused with -32600.
//! - Tools and prompts are named `<server>__<name>` ([`crate::names`]); resource URIs
//!   become `mcpx://<server>/<original>`; calls, reads and gets map back.
//! - Lists come from the schema cache; servers never listed are started and listed
//!   first, together (up to their `startTimeout`). A server whose last start or listing
//!   failed is left out at once, logged, and started again in the background (its
//!   backoff applies); when it comes up, sessions with a stream hear `list_changed`.
//! - A `tools/call` whose client accepts `text/event-stream` is answered as SSE, with
//!   its progress notifications before the response.
//! - One GET stream per session carries what the daemon sends on its own: a server's
//!   `list_changed` becomes one to every session with a stream.
//! - A modern client (MCP 2026-07-28) hears the same on a `subscriptions/listen`
//!   stream instead: the SSE answer of its POST, with no session header, carrying
//!   only what it asked for, stamped with its `subscriptionId`.
//!
//! The parts: `routes` (HTTP: the [`Endpoint`], sessions by header, SSE), `sessions`
//! (client sessions and the broadcast, with no dependency on the daemon), `dispatch`
//! (one request answered), `input` (a legacy server's requests for input as a modern
//! client's `InputRequiredResult`, and the retry that answers them), `catalog` (the servers and lists a session sees) and
//! `discover` (discovery mode's tools), `era` (legacy or 2026-07-28, and the modern
//! routing headers), `subscriptions` (a modern client's `subscriptions/listen`
//! stream), `unbridged` (features with no counterpart across the eras, refused
//! by name), and `framed` (`mcpx serve`'s link: one upgraded connection carrying
//! newline-delimited messages, each served as a `POST /mcp` is).

mod catalog;
mod discover;
mod dispatch;
pub mod era;
pub mod framed;
mod input;
mod listen;
mod modern;
mod owner;
mod routes;
mod sessions;
mod subscriptions;
mod unbridged;
mod uris;

#[cfg(test)]
mod tests;

pub use modern::complete_result;
pub use routes::{
    CALLER_SESSION_HEADER, CONFIG_HEADER, CWD_HEADER, Endpoint, MODE_HEADER, PPID_HEADER, PROFILE_HEADER,
    SESSION_HEADER, STRANGER_IGNORES, TcpGuard, routes, tcp_routes,
};
pub use sessions::{ClientSession, ClientSessions, Links, MAX_SESSIONS, SESSION_IDLE, TooManySessions, client_name};
