//! Spawning from the daemon: the platform's one spawn function, with the child's
//! pipes made async for tokio.

pub use mcpx_platform::process::{Detach, SpawnSpec, signal_group};

/// Starts a process as `spec` says, as a tokio child (not killed on drop).
///
/// Errors: the `io::Error` of `fork`/`exec`.
pub fn spawn(spec: &SpawnSpec) -> std::io::Result<tokio::process::Child> {
    let mut cmd = tokio::process::Command::from(mcpx_platform::process::command(spec));
    cmd.kill_on_drop(false);
    cmd.spawn()
}
