//! `mcpx supervise`: the supervisor of one stdio server instance (design: "The
//! supervisor"). It owns the server's stdin, stdout and stderr for the server's
//! whole life, outlives the daemon that started it, and lets a later daemon attach
//! over its socket (`docs/attach-protocol.md`).
//!
//! It runs before any async runtime, as a plain `poll(2)` loop over one closed set
//! of events (`sup::Event`) handled in one place. It keeps few allocations: its
//! memory is paid once per server instance.

mod buffer;
mod daemonize;
mod log;
mod sup;

pub use daemonize::main;
