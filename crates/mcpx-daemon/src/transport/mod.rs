//! Transports: how the daemon exchanges MCP messages with one server instance.
//!
//! A [`Launcher`] turns a [`Launch`] description into a [`Link`]: a channel of
//! messages to the server, a channel of what comes back, and shared facts about the
//! process (pid, stderr tail, counters). What this module exports is the whole
//! interface: the link, the launch description, [`Launchers`], the one error type
//! [`TransportError`], and the taking up of what a previous daemon left (supervisors
//! and kept remote sessions). Who carries an instance (a supervisor process, the
//! daemon's own child, or an HTTP session) is chosen by `Launchers` and known
//! nowhere above this module.
//!
//! - `link.rs`, `launch.rs`: the interface types; `launchers.rs`: the three
//!   launchers behind one.
//! - `supervised.rs`: `mcpx supervise` and the daemon's side of the attach protocol,
//!   over `attach.rs`'s connection; `adoption.rs` and `sup_dir.rs`: adoption, and the
//!   supervisors' files.
//! - `stdio.rs`: the server as the daemon's own child; `output.rs`: a server's stdout
//!   and stderr as byte streams, for both stdio transports.
//! - `http/`: remote servers.

mod adoption;
mod attach;
mod http;
mod launch;
mod launchers;
mod link;
mod output;
mod stdio;
mod sup_dir;
mod supervised;
#[cfg(test)]
mod testing;

pub use adoption::{Adoption, adopt, stop_incompatible};
pub use http::{KeptRemote, kept_remotes};
pub use launch::{BoxFuture, Launch, Launcher, RemoteEndpoint, StdioSpec};
pub use launchers::Launchers;
pub use link::{ExitInfo, Inbound, Link, LinkInfo, Outbound, SupervisorInfo, TransportError};
pub use sup_dir::supervisor_records;
