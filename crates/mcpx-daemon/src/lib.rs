//! The mcpx daemon library: configuration, instances and their transports, the
//! pool, the schema cache and the control API. The `mcpx` binary is a thin front
//! end over it.

pub mod activity;
pub mod adopt;
/// The control API's types (their own crate, [`mcpx_api`]).
pub use mcpx_api as api;
pub use mcpx_api::{arguments, client, paths, suggest};
/// OAuth for remote servers (its own crate, [`mcpx_auth`]).
pub use mcpx_auth as auth;
pub mod code;
pub mod code_runtime;
pub mod streamed_call;
/// The configuration (its own crate, [`mcpx_config`]).
pub use mcpx_config as config;
pub mod control;
pub mod daemon;
pub mod instance;
pub mod lease;
pub mod log_file;
pub mod mcp;
pub mod names;
pub mod notices;
pub mod pins;
pub mod poisoning;
pub mod policy;
pub mod pool;
pub mod process;
pub mod repoll;
pub mod results;
pub mod ring;
pub mod sandbox;
pub mod schema;
pub mod scope;
pub mod search;
pub mod server;
pub mod service_check;
pub mod shell_calls;
pub mod stream;
use mcpx_platform::sync;
pub mod target;
pub mod telemetry;
#[cfg(test)]
mod testing;
pub mod transport;
pub mod ui;
