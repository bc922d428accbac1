//! `mcpx supervise`: the supervisor of one stdio server instance (design: "The
//! supervisor"). It owns the server's stdin, stdout and stderr for the server's
//! whole life, outlives the daemon that started it, and lets a later daemon attach
//! over its socket (`docs/attach-protocol.md`).
//!
//! It runs before any async runtime, as a plain `poll(2)` loop over one closed set
//! of events (`event_loop::Event`) handled in one place. It keeps few allocations:
//! its memory is paid once per server instance.
//!
//! The modules depend on each other one way only: `daemonize` (becoming a
//! supervisor) uses `event_loop` (the loop), which uses `child` (the server process)
//! and `conn` (the daemon connections); all of them use `buffer` and `log`.

mod buffer;
mod child;
mod conn;
mod daemonize;
mod event_loop;
mod log;

pub use daemonize::main;
