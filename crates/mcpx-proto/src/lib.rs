//! The pure protocol parts of mcpx: newline-delimited JSON-RPC framing, message
//! inspection and id rewriting, and the MCP revisions mcpx speaks.
//!
//! Architecture invariant: this crate does no IO and knows nothing of tokio. Every
//! decoder here reads from byte slices handed to it, so it can be tested (and fuzzed)
//! without a process or a socket.

pub mod attach;
pub mod era;
pub mod framing;
pub mod jsonrpc;
pub mod mcp;
pub mod scan;
pub mod sse;

#[cfg(test)]
mod fuzz;

pub use framing::{LineDecoder, LineEvent};
pub use jsonrpc::{Message, MessageKind, ParseError, RpcError, UpstreamId, response_result};
pub use scan::IdScanner;
pub use sse::{SseDecoder, SseEvent};
